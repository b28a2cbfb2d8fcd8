/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox policy check FILE | nsbox policy dump [FILE]: a seccomp policy, parsed and compiled as
 * `nsbox run --seccomp` would, its errors and warnings with file:line, or its filters shown. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmd-policy.h"
#include "command.h"
#include "log.h"
#include "nsbox.h"

static void print_policy_warning(const char *file, unsigned line, const char *message,
                                 void *userdata)
{
    (void)userdata;
    log_warning("%s:%u: %s", file, line, message);
}

static int usage_error(void)
{
    log_error("usage: nsbox policy check FILE | nsbox policy dump [FILE]");
    return EXIT_NSBOX_FAILURE;
}

/* nsbox policy check FILE: parse and compile it as `nsbox run --seccomp FILE` would. */
static int check_main(int argc, char *argv[])
{
    struct nsbox_policy_stats stats;
    char error[512];

    if (argc != 2)
        return usage_error();
    if (nsbox_policy_check(argv[1], print_policy_warning, NULL, &stats, error, sizeof(error)) < 0) {
        log_error("%s", error); /* file:line: what */
        return EXIT_NSBOX_FAILURE;
    }
    (void)printf("%s: %zu rules, %u %s, %u BPF instructions\n", argv[1], stats.rules, stats.filters,
                 stats.filters == 1 ? "program" : "programs", stats.instructions);
    return EXIT_SUCCESS;
}

/* nsbox policy dump [FILE]: the compiled filters of FILE, or of the built-in policy. */
static int dump_main(int argc, char *argv[])
{
    char error[512];

    if (argc > 2)
        return usage_error();
    if (nsbox_policy_dump(argc == 2 ? argv[1] : NULL, STDOUT_FILENO, error, sizeof(error)) < 0) {
        log_error("%s", error);
        return EXIT_NSBOX_FAILURE;
    }
    return EXIT_SUCCESS;
}

static const struct command policy_commands[] = {
    {.name = "check", .main = check_main},
    {.name = "dump", .main = dump_main},
    {},
};

int policy_main(int argc, char *argv[])
{
    const struct command *c = argc >= 2 ? command_find(policy_commands, argv[1]) : NULL;

    return c ? c->main(argc - 1, argv + 1) : usage_error();
}
