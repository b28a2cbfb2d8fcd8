/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox ps and nsbox kill (cmd-ps.c): the registry of running sandboxes (registry.h). */
#pragma once

/* `nsbox ps [--json] [--filter KEY=VALUE]...`; argv[0] is "ps". Returns the exit status. */
int ps_main(int argc, char *argv[]);

/* `nsbox kill RUN-ID|NAME | --all | --label KEY[=VALUE]...`; argv[0] is "kill". Returns the
 * exit status. */
int kill_main(int argc, char *argv[]);
