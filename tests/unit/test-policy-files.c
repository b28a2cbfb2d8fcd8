/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox's own policy files: groups sorted and free of duplicates, every name a system call on
 * this architecture, and the default policy compiling into filters. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "policyfile.h"

Test(policy_files, groups_sorted_and_unique)
{
    size_t groups = 0;
    for (const struct policy_builtin *b = policy_builtins; b->name; b++) {
        if (strncmp(b->name, "groups/", 7) != 0)
            continue;
        groups++;
        char prev[128] = "", line[128];
        const char *p = b->text;
        unsigned lineno = 0;
        cr_expect(b->text[0] == '#', "%s: must start with a comment saying what it is for",
                  b->name);
        while (*p) {
            size_t n = strcspn(p, "\n");
            lineno++;
            cr_assert_lt(n, sizeof(line));
            memcpy(line, p, n);
            line[n] = '\0';
            p += n + (p[n] == '\n');
            if (line[0] == '#' || line[0] == '\0')
                continue;
            cr_expect(strchr(line, ':') == NULL && strchr(line, ' ') == NULL,
                      "%s:%u: group files hold bare names, one per line", b->name, lineno);
            cr_expect_gt(strcmp(line, prev), 0, "%s:%u: '%s' not sorted after '%s' or repeated",
                         b->name, lineno, line, prev);
            strcpy(prev, line);
        }
    }
    cr_expect_geq(groups, 8);
}

Test(policy_files, every_builtin_file_compiles_strictly)
{
    for (const struct policy_builtin *b = policy_builtins; b->name; b++) {
        struct policy p = {0};
        struct policy_error e = {0};
        struct filter f = {0};
        int r;

        if (strstr(b->name, ".policy"))
            r = policy_load_builtin(b->name, &p, &e); /* with its includes */
        else
            r = policy_parse(b->text, b->size, b->name, NULL, NULL, &p, &e);
        cr_assert_eq(r, 0, "%s:%u:%u: %s", e.file, e.line, e.column, e.message);
        /* warn == NULL: an unknown system call name is an error. */
        r = filter_compile(&p, NULL, NULL, false, &f, &e);
        cr_expect_eq(r, 0, "%s:%u: %s", e.file, e.line, e.message);
        filter_free(&f);
        policy_free(&p);
    }
}

Test(policy_files, refusals_carry_a_reason)
{
    for (const struct policy_builtin *b = policy_builtins; b->name; b++) {
        const char *p = b->text;
        unsigned lineno = 0;
        while (*p) {
            size_t n = strcspn(p, "\n");
            char line[512];
            lineno++;
            memcpy(line, p, n < sizeof(line) ? n : sizeof(line) - 1);
            line[n < sizeof(line) ? n : sizeof(line) - 1] = '\0';
            p += n + (p[n] == '\n');
            if (line[0] == '#' || !strstr(line, ": return") || strstr(line, " if "))
                continue;
            cr_expect(strchr(line, '#'), "%s:%u: a refusal needs a '# reason'", b->name, lineno);
        }
    }
}

/* The built-in policy name, compiled now, against what the build precompiled. */
static void assert_precompiled_matches(const char *name, bool notify, const struct filter *built)
{
    struct policy p = {0};
    struct policy_error e = {0};
    struct filter f = {0};
    cr_assert_eq(policy_load_builtin(name, &p, &e), 0, "%s", e.message);
    cr_assert_eq(filter_compile(&p, NULL, NULL, notify, &f, &e), 0, "%s", e.message);
    cr_assert_eq(f.n_prog, built->n_prog, "%s", name);
    cr_assert_eq(f.notify, built->notify, "%s", name);
    for (unsigned i = 0; i < f.n_prog; i++) {
        cr_assert_eq(f.prog[i].n, built->prog[i].n, "%s: program %u", name, i);
        cr_expect_eq(memcmp(f.prog[i].insns, built->prog[i].insns,
                            f.prog[i].n * sizeof(struct sock_filter)),
                     0, "%s: program %u differs from the build's", name, i);
    }
    filter_free(&f);
    policy_free(&p);
}

Test(policy_files, precompiled_filters_match_the_source)
{
    assert_precompiled_matches("default.policy", false, &filter_default);
    assert_precompiled_matches("default.policy", true, &filter_default_notify);
    assert_precompiled_matches("network.policy", false, &filter_network);
    assert_precompiled_matches("network.policy", true, &filter_network_notify);
}
