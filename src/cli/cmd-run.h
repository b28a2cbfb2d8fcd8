/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox run (cmd-run.c). */
#pragma once

/* `nsbox run [OPTIONS] [--] PROGRAM [ARGS...]`; argv[0] is "run". Returns the exit status:
 * nsbox_exit_status() of the result, or 125 when nsbox failed before the run. */
int run_main(int argc, char *argv[]);
