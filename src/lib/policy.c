/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The seccomp policy parser (see policy.h for the language). Pure: no OS calls, no output. */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "policy.h"

/* A table laid out by hand, and a macro that clang-format 14 mangles: */
/* clang-format off */
#define CONST(x) {#x, (uint64_t)(x)}

static const struct {
    const char *name;
    uint64_t value;
} constants[] = {
    CONST(AF_UNIX), CONST(AF_LOCAL), CONST(AF_INET), CONST(AF_INET6), CONST(AF_NETLINK),
    CONST(AF_PACKET), CONST(AF_KEY), CONST(AF_ALG), CONST(AF_VSOCK), CONST(AF_BLUETOOTH),
    CONST(SOCK_STREAM), CONST(SOCK_DGRAM), CONST(SOCK_RAW), CONST(SOCK_SEQPACKET),
    CONST(SOCK_NONBLOCK), CONST(SOCK_CLOEXEC),
    CONST(TIOCSTI), CONST(TIOCLINUX), CONST(TIOCSCTTY), CONST(TIOCSETD), CONST(TIOCGWINSZ),
    CONST(TIOCSWINSZ), CONST(TCGETS), CONST(FIONREAD), CONST(FIOCLEX), CONST(FIONCLEX),
    CONST(FIONBIO),
    CONST(CLONE_NEWNS), CONST(CLONE_NEWCGROUP), CONST(CLONE_NEWUTS), CONST(CLONE_NEWIPC),
    CONST(CLONE_NEWUSER), CONST(CLONE_NEWPID), CONST(CLONE_NEWNET), CONST(CLONE_NEWTIME),
    CONST(CLONE_VM), CONST(CLONE_FS), CONST(CLONE_FILES), CONST(CLONE_SIGHAND),
    CONST(CLONE_THREAD), CONST(CLONE_VFORK), CONST(CLONE_PARENT),
    CONST(PR_SET_PDEATHSIG), CONST(PR_GET_PDEATHSIG), CONST(PR_SET_DUMPABLE),
    CONST(PR_GET_DUMPABLE), CONST(PR_SET_NAME), CONST(PR_GET_NAME), CONST(PR_SET_SECCOMP),
    CONST(PR_GET_SECCOMP), CONST(PR_SET_NO_NEW_PRIVS), CONST(PR_GET_NO_NEW_PRIVS),
    CONST(PR_CAPBSET_READ), CONST(PR_SET_MM), CONST(PR_SET_PTRACER), CONST(PR_SET_KEEPCAPS),
    CONST(PR_CAP_AMBIENT), CONST(PR_SET_TIMERSLACK), CONST(PR_GET_TIMERSLACK),
    CONST(PR_SET_THP_DISABLE), CONST(PR_GET_THP_DISABLE), CONST(PR_SET_VMA),
    CONST(PER_LINUX), {"PERSONALITY_QUERY", 0xffffffffULL},
    CONST(RLIMIT_CORE), CONST(RLIMIT_CPU), CONST(RLIMIT_DATA), CONST(RLIMIT_NPROC),
    CONST(RLIMIT_NOFILE), CONST(RLIMIT_AS), CONST(RLIMIT_STACK), CONST(RLIMIT_FSIZE),
    CONST(RLIMIT_RSS), CONST(RLIMIT_MEMLOCK), CONST(RLIMIT_LOCKS), CONST(RLIMIT_SIGPENDING),
    CONST(RLIMIT_MSGQUEUE), CONST(RLIMIT_NICE), CONST(RLIMIT_RTPRIO), CONST(RLIMIT_RTTIME),
    CONST(S_IFMT), CONST(S_IFIFO), CONST(S_IFSOCK), CONST(S_IFREG), CONST(S_IFCHR),
    CONST(S_IFBLK), {"SCHED_OTHER", SCHED_NORMAL}, CONST(SCHED_BATCH), CONST(SCHED_IDLE),
    CONST(SCHED_RESET_ON_FORK), CONST(IPPROTO_UDP), CONST(IPPROTO_UDPLITE), CONST(NETLINK_ROUTE),
    CONST(S_ISUID), CONST(S_ISGID), CONST(O_CREAT), CONST(O_TMPFILE),
};
/* clang-format on */

static const struct {
    const char *name;
    int value;
} errnos[] = {
    {"EPERM", EPERM},
    {"ENOENT", ENOENT},
    {"EIO", EIO},
    {"EBADF", EBADF},
    {"EACCES", EACCES},
    {"EFAULT", EFAULT},
    {"EINVAL", EINVAL},
    {"ENOTTY", ENOTTY},
    {"ENOSYS", ENOSYS},
    {"EOPNOTSUPP", EOPNOTSUPP},
    {"EAFNOSUPPORT", EAFNOSUPPORT},
    {"EPROTONOSUPPORT", EPROTONOSUPPORT},
    {"EROFS", EROFS},
    {"ENODEV", ENODEV},
    {"ENXIO", ENXIO},
};

bool policy_constant(const char *name, size_t len, uint64_t *ret)
{
    for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++)
        if (strlen(constants[i].name) == len && memcmp(constants[i].name, name, len) == 0) {
            *ret = constants[i].value;
            return true;
        }
    return false;
}

bool policy_errno(const char *name, size_t len, int *ret)
{
    for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
        if (strlen(errnos[i].name) == len && memcmp(errnos[i].name, name, len) == 0) {
            *ret = errnos[i].value;
            return true;
        }
    return false;
}

void policy_error_format(const struct policy_error *e, char *buf, size_t size)
{
    if (e->line && e->column)
        (void)snprintf(buf, size, "%s:%u:%u: %s", e->file, e->line, e->column, e->message);
    else if (e->line)
        (void)snprintf(buf, size, "%s:%u: %s", e->file, e->line, e->message);
    else if (e->file[0])
        (void)snprintf(buf, size, "%s: %s", e->file, e->message);
    else /* not about a file: out of memory, a filter that could not be built */
        (void)snprintf(buf, size, "%s", e->message);
}

void policy_free(struct policy *p)
{
    for (size_t i = 0; i < p->n_rules; i++)
        free(p->rules[i].terms);
    free(p->rules);
    p->rules = NULL;
    p->n_rules = 0;
}

/* A cursor over one line. */
struct cursor {
    const char *line; /* start of the line, for columns */
    const char *p;
    const char *end;
    const char *file;
    unsigned lineno;
    struct policy_error *e;
};

static int fail(struct cursor *c, const char *at, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct cursor *c, const char *at, int r, const char *fmt, ...)
{
    va_list ap;

    (void)snprintf(c->e->file, sizeof(c->e->file), "%s", c->file);
    c->e->line = c->lineno;
    c->e->column = at ? (unsigned)(at - c->line) + 1 : 0;
    va_start(ap, fmt);
    (void)vsnprintf(c->e->message, sizeof(c->e->message), fmt, ap);
    va_end(ap);
    return r;
}

static void skip_space(struct cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static bool is_ident_char(char ch, bool first)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           (!first && ch >= '0' && ch <= '9');
}

/* Read an identifier at the cursor; returns its length (0 if none). */
static size_t ident(struct cursor *c, const char **ret)
{
    const char *s;

    skip_space(c);
    s = c->p;
    if (c->p < c->end && is_ident_char(*c->p, true))
        while (c->p < c->end && is_ident_char(*c->p, false))
            c->p++;
    *ret = s;
    return (size_t)(c->p - s);
}

static bool keyword(struct cursor *c, const char *word)
{
    const char *save = c->p, *s;
    size_t n = ident(c, &s);

    if (n == strlen(word) && memcmp(s, word, n) == 0)
        return true;
    c->p = save;
    return false;
}

static bool punct(struct cursor *c, const char *tok)
{
    size_t n = strlen(tok);

    skip_space(c);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, tok, n) == 0) {
        c->p += n;
        return true;
    }
    return false;
}

/* A value: a number or a named constant, optionally or-ed with more: A|B|0x10. */
static int value(struct cursor *c, uint64_t *ret)
{
    uint64_t v = 0;

    do {
        const char *s;
        uint64_t part = 0;

        skip_space(c);
        s = c->p;
        if (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            unsigned base = 10;
            bool digits = false;
            if (c->end - c->p > 1 && c->p[0] == '0' && (c->p[1] == 'x' || c->p[1] == 'X')) {
                base = 16;
                c->p += 2;
            } else if (*c->p == '0')
                base = 8;
            for (; c->p < c->end; c->p++) {
                unsigned d;
                char ch = *c->p;
                if (ch >= '0' && ch <= '9')
                    d = (unsigned)(ch - '0');
                else if (ch >= 'a' && ch <= 'f')
                    d = (unsigned)(ch - 'a' + 10);
                else if (ch >= 'A' && ch <= 'F')
                    d = (unsigned)(ch - 'A' + 10);
                else
                    break;
                if (d >= base)
                    return fail(c, s, -EINVAL, "bad digit in number");
                if (part > (UINT64_MAX - d) / base)
                    return fail(c, s, -EINVAL, "number out of range");
                part = part * base + d;
                digits = true;
            }
            if (!digits && base == 16)
                return fail(c, s, -EINVAL, "expected hex digits after 0x");
            if (c->p < c->end && is_ident_char(*c->p, false))
                return fail(c, s, -EINVAL, "bad number");
        } else {
            const char *name;
            size_t n = ident(c, &name);
            if (n == 0)
                return fail(c, s, -EINVAL, "expected a number or a constant");
            if (!policy_constant(name, n, &part))
                return fail(c, name, -EINVAL, "unknown constant '%.*s'", (int)n, name);
        }
        v |= part;
    } while (!(skip_space(c), c->end - c->p >= 2 && c->p[0] == '|' && c->p[1] == '|') &&
             punct(c, "|"));
    *ret = v;
    return 0;
}

/* argN [& MASK] OP VALUE */
static int comparison(struct cursor *c, struct policy_term *t)
{
    static const struct {
        const char *tok;
        enum policy_op op;
    } ops[] = {
        {"==", POLICY_EQ}, {"!=", POLICY_NE}, {"<=", POLICY_LE},
        {">=", POLICY_GE}, {"<", POLICY_LT},  {">", POLICY_GT},
    };
    struct policy_cmp cmp = {0};
    const char *s, *start;
    size_t n;
    bool have_op = false;
    int r;

    skip_space(c);
    start = c->p;
    n = ident(c, &s);
    if (n != 4 || memcmp(s, "arg", 3) != 0 || s[3] < '0' || s[3] > '5')
        return fail(c, start, -EINVAL, "expected arg0 .. arg5");
    cmp.arg = (unsigned)(s[3] - '0');
    if (punct(c, "&")) {
        if (c->p < c->end && *c->p == '&')
            return fail(c, c->p - 1, -EINVAL, "expected a comparison before '&&'");
        cmp.masked = true;
        r = value(c, &cmp.mask);
        if (r < 0)
            return r;
    }
    skip_space(c);
    const char *op_at = c->p;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]) && !have_op; i++)
        if (punct(c, ops[i].tok)) {
            cmp.op = ops[i].op;
            have_op = true;
        }
    if (!have_op)
        return fail(c, op_at, -EINVAL, "expected ==, !=, <, <=, > or >=");
    /* seccomp compares masked values for equality only (SCMP_CMP_MASKED_EQ). */
    if (cmp.masked && cmp.op != POLICY_EQ)
        return fail(c, op_at, -EINVAL, "a masked comparison must use ==");
    r = value(c, &cmp.value);
    if (r < 0)
        return r;

    /* libseccomp compares each argument at most once per rule. */
    for (size_t i = 0; i < t->n_cmp; i++)
        if (t->cmp[i].arg == cmp.arg)
            return fail(c, start, -EINVAL,
                        "arg%u is compared twice in one term; write one line per value, or "
                        "use 'return ERRNO if ...' for the values to refuse",
                        cmp.arg);
    t->cmp[t->n_cmp++] = cmp;
    return 0;
}

/* TERM ("||" TERM)*, TERM := CMP ("&&" CMP)* */
static int condition(struct cursor *c, struct policy_rule *rule)
{
    for (;;) {
        struct policy_term *terms, *t;
        int r;

        terms = realloc(rule->terms, (rule->n_terms + 1) * sizeof(*terms));
        if (!terms)
            return fail(c, NULL, -ENOMEM, "out of memory");
        rule->terms = terms;
        t = &terms[rule->n_terms++];
        memset(t, 0, sizeof(*t));
        do {
            r = comparison(c, t);
            if (r < 0)
                return r;
        } while (punct(c, "&&"));
        if (!punct(c, "||"))
            return 0;
    }
}

static int add_rule(struct policy *p, const struct policy_rule *rule, struct cursor *c)
{
    if (p->n_rules >= POLICY_MAX_RULES)
        return fail(c, NULL, -E2BIG, "more than %d rules", POLICY_MAX_RULES);
    struct policy_rule *rules = realloc(p->rules, (p->n_rules + 1) * sizeof(*rules));
    if (!rules)
        return fail(c, NULL, -ENOMEM, "out of memory");
    p->rules = rules;
    p->rules[p->n_rules++] = *rule;
    return 0;
}

static int parse_rule(struct cursor *c, struct policy *p)
{
    struct policy_rule rule = {.action = POLICY_ALLOW, .line = c->lineno};
    const char *name, *at;
    size_t n;
    int r;

    (void)snprintf(rule.file, sizeof(rule.file), "%s", c->file);
    skip_space(c);
    at = c->p;
    while (c->p < c->end &&
           ((*c->p >= 'a' && *c->p <= 'z') || (*c->p >= '0' && *c->p <= '9') || *c->p == '_'))
        c->p++;
    name = at;
    n = (size_t)(c->p - at);
    if (n == 0)
        return fail(c, at, -EINVAL, "expected a system call name");
    if (n >= sizeof(rule.name))
        return fail(c, at, -EINVAL, "system call name too long");
    memcpy(rule.name, name, n);
    rule.name[n] = '\0';

    if (punct(c, ":")) {
        skip_space(c);
        at = c->p;
        if (keyword(c, "allow")) {
            /* explicit allow */
        } else if (keyword(c, "kill")) {
            rule.action = POLICY_KILL;
        } else if (keyword(c, "return")) {
            const char *en;
            size_t len;
            skip_space(c);
            at = c->p;
            len = ident(c, &en);
            rule.action = POLICY_ERRNO;
            if (len > 0) {
                if (!policy_errno(en, len, &rule.errno_value))
                    return fail(c, at, -EINVAL, "unknown errno '%.*s'", (int)len, en);
            } else {
                uint64_t v;
                r = value(c, &v);
                if (r < 0)
                    return r;
                if (v == 0 || v > 4095)
                    return fail(c, at, -EINVAL, "errno must be 1 .. 4095");
                rule.errno_value = (int)v;
            }
        } else {
            const char *word;
            size_t len;
            const char *save = c->p;

            /* Neither an action nor a condition: name the likely typo. */
            len = ident(c, &word);
            c->p = save;
            if (len > 0 && !(len == 4 && strncmp(word, "arg", 3) == 0))
                return fail(c, word, -EINVAL,
                            "unknown action '%.*s' (allow, kill, return ERRNO, or a condition "
                            "on arg0 .. arg5)",
                            (int)len, word);
            r = condition(c, &rule);
            if (r < 0) {
                free(rule.terms);
                return r;
            }
        }
        if (rule.action != POLICY_ALLOW && keyword(c, "if")) {
            rule.refuse_if = true;
            r = condition(c, &rule);
            if (r < 0) {
                free(rule.terms);
                return r;
            }
        }
    }
    skip_space(c);
    if (c->p < c->end) {
        free(rule.terms);
        return fail(c, c->p, -EINVAL, "unexpected '%.*s'", (int)(c->end - c->p), c->p);
    }
    r = add_rule(p, &rule, c);
    if (r < 0)
        free(rule.terms);
    return r;
}

static int parse_text(const char *text, size_t len, const char *file, policy_include_fn include,
                      void *userdata, unsigned depth, struct policy *p, struct policy_error *e)
{
    const char *end = text + len;
    unsigned lineno = 0;

    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *line_end = nl ? nl : end;
        const char *hash = memchr(line, '#', (size_t)(line_end - line));
        struct cursor c = {.line = line,
                           .p = line,
                           .end = hash ? hash : line_end,
                           .file = file,
                           .lineno = ++lineno,
                           .e = e};
        int r;

        while (c.end > c.p && (c.end[-1] == ' ' || c.end[-1] == '\t' || c.end[-1] == '\r'))
            c.end--;
        skip_space(&c);
        if (memchr(line, '\0', (size_t)(line_end - line)))
            return fail(&c, NULL, -EINVAL, "NUL byte in line");

        if (c.p == c.end)
            ;
        else if (*c.p == '@') {
            const char *at = c.p, *name;
            char buf[256], *inc_text = NULL, *inc_file = NULL;
            size_t inc_len = 0, n;

            c.p++;
            if (!keyword(&c, "include"))
                return fail(&c, at, -EINVAL, "unknown directive (only @include)");
            skip_space(&c);
            name = c.p;
            n = (size_t)(c.end - c.p);
            if (n == 0 || n >= sizeof(buf) || memchr(name, ' ', n) || memchr(name, '\t', n))
                return fail(&c, name, -EINVAL, "expected one file name after @include");
            if (depth > 0)
                return fail(&c, at, -ELOOP, "@include inside an included file (one level only)");
            if (!include)
                return fail(&c, at, -EINVAL, "@include is not available here");
            memcpy(buf, name, n);
            buf[n] = '\0';
            r = include(buf, file, &inc_text, &inc_len, &inc_file, userdata);
            if (r < 0)
                return fail(&c, name, r, "cannot include '%s': %s", buf, strerror(-r));
            r = parse_text(inc_text, inc_len, inc_file, include, userdata, depth + 1, p, e);
            free(inc_text);
            free(inc_file);
            if (r < 0)
                return r;
        } else {
            r = parse_rule(&c, p);
            if (r < 0)
                return r;
        }
        line = nl ? nl + 1 : end;
    }
    return 0;
}

int policy_parse(const char *text, size_t len, const char *file, policy_include_fn include,
                 void *userdata, struct policy *p, struct policy_error *e)
{
    return parse_text(text, len, file, include, userdata, 0, p, e);
}
