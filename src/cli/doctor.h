/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox doctor: what nsbox needs on this host, checked and explained. */
#pragma once

/* Print one line per check ("ok", "warn", "FAIL" with a "fix" line, "info") and a summary, then
 * run a real sandbox. rootfs: the rootfs to check and use, or NULL for the default.
 * Returns the exit status: 0 if `nsbox run` works here, 1 if not. */
int doctor_main(const char *rootfs);
