/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox pool` and `nsbox run --pool` (cmd-pool.c). */
#pragma once

/* `nsbox pool start|ls|status|stop ...`; argv[0] is "pool". Returns the exit status. */
int pool_main(int argc, char *argv[]);

/* The NAME of `nsbox run`'s --pool NAME (before "--"), "" when it has no value, or NULL. */
const char *run_pool_name(int argc, char *argv[]);

/* `nsbox run --pool NAME [per-run options] (--code FILE|- | PROGRAM ...)`: one step in a fresh
 * sandbox of the pool. Returns the exit status, as `nsbox run`'s. */
int run_pool_main(int argc, char *argv[]);
