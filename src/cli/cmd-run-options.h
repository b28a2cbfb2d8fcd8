/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox run`'s options (cmd-run-options.c, with its --help text in cmd-run-usage.c and the
 * environment's options in cmd-run-env.c): argv -> config (getopt_long), for nsbox run
 * (cmd-run.c) and `nsbox session start` (run_options_parse(), cmd-session.h). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nsbox.h"

struct run_args {
    struct nsbox_config config;
    bool json;
    int result_fd;           /* --result-fd: where the JSON result goes, else -1 */
    bool raw_output;         /* --raw-output */
    const char *log_path;    /* --log, else $NSBOX_LOG, else NULL */
    const char *stdout_file; /* --stdout-file, else NULL */
    const char *stderr_file; /* --stderr-file, else NULL */
    uint64_t log_code_limit; /* bytes of code kept in the audit log */
    const char *code_path;
    char *code;
    struct nsbox_bind *binds;
    struct nsbox_tmpfs *tmpfs;
    char **env;
    size_t n_env;
    char **labels; /* NULL-terminated */
    size_t n_labels;
    char **allow; /* --network allow=: owned strings, NULL-terminated */
    size_t n_allow;
    char **hosts; /* --add-host: argv's strings, NULL-terminated */
    size_t n_hosts;
    struct nsbox_copy *copy_in, *copy_out;
};

/* The signals `nsbox run` acts on (SIGUSR1 is `nsbox kill`; nsbox_signal_set() says which). */
void run_signals(sigset_t *set);
/* Free what a holds (a itself is the caller's). */
void run_args_free(struct run_args *a);
/* fd number in value, if it is a descriptor above 2 open for writing: returns it, or -EINVAL. */
int result_fd_check(const char *value);
/* value for a one-line message: control characters shown as '?', cut at size. Returns buf. */
const char *shown(const char *value, char *buf, size_t size);
/* `nsbox run --help`'s text (cmd-run-usage.c). */
void usage_run(FILE *f);
/* -e's value, or a line of --env-file: KEY=VALUE, or KEY alone, which takes KEY's value from
 * nsbox's environment (cmd-run-env.c). Returns 0 or -EINVAL (nothing said). */
int env_add(struct run_args *a, const char *spec);
/* --env-file FILE and --env-fd N into a's environment (cmd-run-env.c). Return 0, or -errno after
 * a one-line error. */
int parse_env_file(struct run_args *a, const char *path);
int parse_env_fd(struct run_args *a, const char *value);
/* `nsbox run`'s argv (argv[0] is the command's name) into a, whose config was
 * nsbox_config_init()ed: a program or --code is required. --help prints the usage and exits.
 * Returns 0 or -EINVAL (said on stderr); what a holds is freed by run_args_free() either way. */
int parse_run_args(int argc, char *argv[], struct run_args *a);
