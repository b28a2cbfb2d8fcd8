/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox policy check FILE | nsbox policy dump [FILE]: a seccomp policy, parsed and compiled as
 * `nsbox run --seccomp` would, its errors and warnings with file:line, or its filters shown. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmd-policy.h"
#include "command.h"
#include "filter.h"
#include "log.h"
#include "policyfile.h"

static void print_policy_warning(const struct policy_rule *rule, const char *message,
                                 void *userdata)
{
    (void)userdata;
    log_warning("%s:%u: %s", rule->file, rule->line, message);
}

static int usage_error(void)
{
    log_error("usage: nsbox policy check FILE | nsbox policy dump [FILE]");
    return EXIT_NSBOX_FAILURE;
}

/* Say why the policy failed (file:line: what). Returns the exit status. */
static int policy_failed(const struct policy_error *e)
{
    char where[512];

    policy_error_format(e, where, sizeof(where));
    log_error("%s", where);
    return EXIT_NSBOX_FAILURE;
}

/* nsbox policy check FILE: parse and compile it as `nsbox run --seccomp FILE` would. */
static int check_main(int argc, char *argv[])
{
    struct policy policy = {0};
    struct policy_error e = {0};
    struct filter f = {0};
    unsigned total = 0;
    int r;

    if (argc != 2)
        return usage_error();
    r = policy_load(argv[1], &policy, &e);
    if (r >= 0)
        r = filter_compile(&policy, print_policy_warning, NULL, false, &f, &e);
    if (r < 0) {
        policy_free(&policy);
        return policy_failed(&e);
    }
    for (unsigned i = 0; i < f.n_prog; i++)
        total += f.prog[i].n;
    (void)printf("%s: %zu rules, %u filters, %u BPF instructions\n", argv[1], policy.n_rules,
                 f.n_prog, total);
    filter_free(&f);
    policy_free(&policy);
    return EXIT_SUCCESS;
}

/* nsbox policy dump [FILE]: the compiled filters of FILE, or of the built-in policy. */
static int dump_main(int argc, char *argv[])
{
    struct policy policy = {0};
    struct policy_error e = {0};
    int r;

    if (argc > 2)
        return usage_error();
    r = policy_load(argc == 2 ? argv[1] : NULL, &policy, &e);
    if (r >= 0)
        r = filter_dump(&policy, STDOUT_FILENO, &e);
    policy_free(&policy);
    return r < 0 ? policy_failed(&e) : EXIT_SUCCESS;
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
