/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox doctor: what nsbox needs on this host, checked and explained. */
#pragma once

/* `nsbox doctor [--rootfs DIR]`; argv[0] is "doctor". Print one line per check ("ok", "warn",
 * "FAIL" with a "fix" line, "info") and a summary, then run a real sandbox, on the rootfs DIR
 * (default: nsbox_default_rootfs()). Returns the exit status: 0 if `nsbox run` works here, 1 if
 * not, 125 for bad arguments. */
int doctor_main(int argc, char *argv[]);
