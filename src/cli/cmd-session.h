/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox session` (cmd-session.c), and what it borrows from cmd-run.c. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "nsbox.h"

/* `nsbox session start|exec|stop|ls ...`; argv[0] is "session". Returns the exit status. */
int session_main(int argc, char *argv[]);

/* cmd-run-options.c: `nsbox run`'s options (no program) into a config that lives until nsbox exits.
 * Returns 0 or -EINVAL (said on stderr); *ret_json says whether --json was given,
 * *ret_log_path is the audit log (--log, else $NSBOX_LOG) or NULL, *ret_log_code_limit the
 * bytes of code it keeps. */
int run_options_parse(int argc, char *argv[], const struct nsbox_config **ret, bool *ret_json,
                      const char **ret_log_path, uint64_t *ret_log_code_limit);
