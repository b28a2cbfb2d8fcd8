/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

static int parse(const char *text, struct policy *p, struct policy_error *e)
{
    *p = (struct policy){0};
    *e = (struct policy_error){0};
    return policy_parse(text, strlen(text), "test.policy", NULL, NULL, p, e);
}

Test(policy, allow_errno_kill)
{
    struct policy p;
    struct policy_error e;

    cr_assert_eq(parse("# comment\n\nread\nkeyctl: return EPERM   # why\nbpf: return 13\n"
                       "kexec_load: kill\nwrite: allow\n",
                       &p, &e),
                 0, "%s", e.message);
    cr_assert_eq(p.n_rules, 5);
    cr_expect_str_eq(p.rules[0].name, "read");
    cr_expect_eq(p.rules[0].action, POLICY_ALLOW);
    cr_expect_eq(p.rules[0].n_terms, 0);
    cr_expect_eq(p.rules[0].line, 3);
    cr_expect_eq(p.rules[1].action, POLICY_ERRNO);
    cr_expect_eq(p.rules[1].errno_value, EPERM);
    cr_expect_eq(p.rules[2].errno_value, 13);
    cr_expect_eq(p.rules[3].action, POLICY_KILL);
    cr_expect_eq(p.rules[4].action, POLICY_ALLOW);
    policy_free(&p);
}

Test(policy, conditions)
{
    struct policy p;
    struct policy_error e;

    cr_assert_eq(parse("socket: arg0 == AF_UNIX || arg0 == 2 && arg1 != SOCK_RAW\n"
                       "ioctl: return EPERM if arg1 & 0xffffffff == TIOCSTI\n"
                       "clone: kill if arg0 & CLONE_NEWUSER|CLONE_NEWNS == CLONE_NEWNS\n"
                       "mmap: arg2 <= 7 && arg3 >= 010 && arg4 < 5 && arg5 > 0x10\n",
                       &p, &e),
                 0, "%s:%u:%u %s", e.file, e.line, e.column, e.message);
    cr_assert_eq(p.n_rules, 4);

    const struct policy_rule *s = &p.rules[0];
    cr_expect_eq(s->action, POLICY_ALLOW);
    cr_expect(!s->refuse_if);
    cr_assert_eq(s->n_terms, 2);
    cr_expect_eq(s->terms[0].n_cmp, 1);
    cr_expect_eq(s->terms[0].cmp[0].value, 1); /* AF_UNIX */
    cr_expect_eq(s->terms[1].n_cmp, 2);
    cr_expect_eq(s->terms[1].cmp[1].arg, 1);
    cr_expect_eq(s->terms[1].cmp[1].op, POLICY_NE);
    cr_expect_eq(s->terms[1].cmp[1].value, 3); /* SOCK_RAW */

    const struct policy_rule *io = &p.rules[1];
    cr_expect(io->refuse_if);
    cr_expect_eq(io->action, POLICY_ERRNO);
    cr_expect(io->terms[0].cmp[0].masked);
    cr_expect_eq(io->terms[0].cmp[0].mask, 0xffffffffULL);
    cr_expect_eq(io->terms[0].cmp[0].value, 0x5412);

    const struct policy_rule *cl = &p.rules[2];
    cr_expect(cl->refuse_if);
    cr_expect_eq(cl->action, POLICY_KILL);
    cr_expect_eq(cl->terms[0].cmp[0].mask, 0x10000000ULL | 0x20000ULL);

    const struct policy_cmp *m = p.rules[3].terms[0].cmp;
    cr_expect_eq(m[0].op, POLICY_LE);
    cr_expect_eq(m[1].value, 8); /* octal */
    cr_expect_eq(m[1].op, POLICY_GE);
    cr_expect_eq(m[2].op, POLICY_LT);
    cr_expect_eq(m[3].value, 16);
    policy_free(&p);
}

struct bad_case {
    const char *text;
    unsigned line, column;
    const char *message;
};

Test(policy, malformed_lines_name_their_position)
{
    static const struct bad_case cases[] = {
        {"read\n  wr!te\n", 2, 5, "unexpected '!te'"},
        {"socket: arg6 == 1\n", 1, 9, "expected arg0 .. arg5"},
        {"socket: arg0 = 1\n", 1, 14, "expected ==, !=, <, <=, > or >="},
        {"socket: arg0 == AF_NOPE\n", 1, 17, "unknown constant 'AF_NOPE'"},
        {"socket: arg0 == 0x\n", 1, 17, "expected hex digits after 0x"},
        {"socket: arg0 == 09\n", 1, 17, "bad digit in number"},
        {"socket: arg0 == 12xyz\n", 1, 17, "bad number"},
        {"socket: arg0 == 12abc\n", 1, 17, "bad digit in number"},
        {"ioctl: arg1 & 0xff != 3\n", 1, 20, "a masked comparison must use =="},
        {"ioctl: arg1 != 1 && arg1 != 2\n", 1, 21, "arg1 is compared twice in one term"},
        {"keyctl: return EWHAT\n", 1, 16, "unknown errno 'EWHAT'"},
        {"keyctl: return 0\n", 1, 16, "errno must be 1 .. 4095"},
        {"keyctl: return EPERM if\n", 1, 24, "expected arg0 .. arg5"},
        {"@include\n", 1, 9, "expected one file name after @include"},
        {"@exclude x\n", 1, 1, "unknown directive (only @include)"},
        {"@include groups/x.group\n", 1, 1, "@include is not available here"},
        {": arg0 == 1\n", 1, 1, "expected a system call name"},
        {"read: arg0 == 1 ||\n", 1, 19, "expected arg0 .. arg5"},
        {"read: arg0 && arg1 == 1\n", 1, 12, "expected a comparison before '&&'"},
        {"kexec_load: kil\n", 1, 13, "unknown action 'kil'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct policy p;
        struct policy_error e;
        int r = parse(cases[i].text, &p, &e);
        cr_expect_eq(r, -EINVAL, "case %zu accepted: %s", i, cases[i].text);
        cr_expect_eq(e.line, cases[i].line, "case %zu: line %u", i, e.line);
        cr_expect_eq(e.column, cases[i].column, "case %zu (%s): column %u, message '%s'", i,
                     cases[i].text, e.column, e.message);
        cr_expect(strstr(e.message, cases[i].message), "case %zu: message '%s'", i, e.message);
        cr_expect_str_eq(e.file, "test.policy");
        policy_free(&p);
    }
}

static int include_from_table(const char *name, const char *from, char **ret_text, size_t *ret_len,
                              char **ret_file, void *userdata)
{
    (void)from;
    (void)userdata;
    const char *text;
    if (strcmp(name, "groups/a.group") == 0)
        text = "# a\nclose\nread\n";
    else if (strcmp(name, "groups/nested.group") == 0)
        text = "@include groups/a.group\n";
    else if (strcmp(name, "groups/bad.group") == 0)
        text = "read\nwrite: arg9 == 1\n";
    else
        return -ENOENT;
    *ret_text = strdup(text);
    *ret_len = strlen(text);
    *ret_file = strdup(name);
    return 0;
}

Test(policy, include)
{
    struct policy p = {0};
    struct policy_error e = {0};
    const char *text = "@include groups/a.group\nwrite\n";

    cr_assert_eq(policy_parse(text, strlen(text), "main.policy", include_from_table, NULL, &p, &e),
                 0, "%s", e.message);
    cr_assert_eq(p.n_rules, 3);
    cr_expect_str_eq(p.rules[0].name, "close");
    cr_expect_str_eq(p.rules[0].file, "groups/a.group");
    cr_expect_eq(p.rules[0].line, 2);
    cr_expect_str_eq(p.rules[2].file, "main.policy");
    policy_free(&p);

    text = "@include groups/nested.group\n";
    cr_expect_eq(policy_parse(text, strlen(text), "main.policy", include_from_table, NULL, &p, &e),
                 -ELOOP);
    cr_expect_str_eq(e.file, "groups/nested.group");
    policy_free(&p);

    text = "read\n@include groups/missing.group\n";
    cr_expect_eq(policy_parse(text, strlen(text), "main.policy", include_from_table, NULL, &p, &e),
                 -ENOENT);
    cr_expect_eq(e.line, 2);
    cr_expect_eq(e.column, 10);
    policy_free(&p);

    text = "@include groups/bad.group\n";
    cr_expect_eq(policy_parse(text, strlen(text), "main.policy", include_from_table, NULL, &p, &e),
                 -EINVAL);
    cr_expect_str_eq(e.file, "groups/bad.group");
    cr_expect_eq(e.line, 2);
    policy_free(&p);
}

Test(policy, error_format)
{
    struct policy_error e = {.file = "a.policy", .line = 3, .column = 7, .message = "bad"};
    char buf[128];
    policy_error_format(&e, buf, sizeof(buf));
    cr_expect_str_eq(buf, "a.policy:3:7: bad");
    e.column = 0;
    policy_error_format(&e, buf, sizeof(buf));
    cr_expect_str_eq(buf, "a.policy:3: bad");
    e.line = 0;
    policy_error_format(&e, buf, sizeof(buf));
    cr_expect_str_eq(buf, "a.policy: bad");
    /* Not about a file (out of memory, a filter that could not be built): no empty prefix. */
    e = (struct policy_error){.message = "out of memory"};
    policy_error_format(&e, buf, sizeof(buf));
    cr_expect_str_eq(buf, "out of memory");
}
