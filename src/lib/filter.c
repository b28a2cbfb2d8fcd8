/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Compile a policy (policy.h) into stacked seccomp filters; see filter.h for why three. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <fcntl.h>

#include "fileio.h"
#include "filter.h"
#include "macro.h"
#include "syscalls.h"

struct filter_ctx;
static int dump_ctx(const struct filter_ctx *f, int fd);

/* System call numbers probed for the "unknown" filter: every name libseccomp has for the native
 * architecture lies below this (x86-64 ends in the 460s in 2026). */
#define SYSCALL_NR_SCAN 1024

static int rule_error(struct policy_error *e, const struct policy_rule *rule, int r,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int rule_error(struct policy_error *e, const struct policy_rule *rule, int r,
                      const char *fmt, ...)
{
    va_list ap;

    *e = (struct policy_error){.line = rule->line};
    (void)snprintf(e->file, sizeof(e->file), "%s", rule->file);
    va_start(ap, fmt);
    (void)vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return r;
}

static scmp_filter_ctx new_ctx(uint32_t default_action)
{
    scmp_filter_ctx ctx = seccomp_init(default_action);

    if (!ctx)
        return NULL;
    /* Foreign ABIs (i386 through int 0x80; x32, which libseccomp tells apart by number on
     * x86-64) kill the whole process rather than fail. */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0 ||
        /* A binary tree of system call numbers instead of a linear list. */
        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) < 0) {
        seccomp_release(ctx);
        return NULL;
    }
    return ctx;
}

static uint32_t rule_action(const struct policy_rule *r)
{
    switch (r->action) {
    case POLICY_ALLOW:
        return SCMP_ACT_ALLOW;
    case POLICY_ERRNO:
        return SCMP_ACT_ERRNO((uint16_t)r->errno_value);
    case POLICY_KILL:
        return SCMP_ACT_KILL_PROCESS;
    }
    return SCMP_ACT_KILL_PROCESS;
}

static struct scmp_arg_cmp to_scmp(const struct policy_rule *rule, const struct policy_cmp *c)
{
    static const enum scmp_compare ops[] = {
        [POLICY_EQ] = SCMP_CMP_EQ, [POLICY_NE] = SCMP_CMP_NE, [POLICY_LT] = SCMP_CMP_LT,
        [POLICY_LE] = SCMP_CMP_LE, [POLICY_GT] = SCMP_CMP_GT, [POLICY_GE] = SCMP_CMP_GE,
    };
    if (c->masked)
        return (struct scmp_arg_cmp){.arg = c->arg,
                                     .op = SCMP_CMP_MASKED_EQ,
                                     .datum_a = c->mask,
                                     .datum_b = c->value};
    /* A refusal catches every 64-bit alias of a 32-bit value (see weak_comparison()). */
    if (rule->refuse_if && c->op == POLICY_EQ && c->value <= 0xffffffffULL)
        return (struct scmp_arg_cmp){.arg = c->arg,
                                     .op = SCMP_CMP_MASKED_EQ,
                                     .datum_a = 0xffffffffULL,
                                     .datum_b = c->value};
    return (struct scmp_arg_cmp){.arg = c->arg, .op = ops[c->op], .datum_a = c->value};
}

static int add_rule(scmp_filter_ctx ctx, uint32_t default_action, uint32_t eperm_as, int nr,
                    const struct policy_rule *rule, struct policy_error *e)
{
    uint32_t action = rule_action(rule);
    int r;

    /* In the allow filter of a reporting sandbox, a plain EPERM refusal goes to the supervisor,
     * which answers EPERM and records the system call. */
    if (action == SCMP_ACT_ERRNO(EPERM))
        action = eperm_as;
    /* inotify's refusals are ENOSYS (filter_refusal_errno()); the supervisor answers them so. */
    if (eperm_as == SCMP_ACT_NOTIFY && action == SCMP_ACT_ERRNO(ENOSYS) &&
        filter_refusal_errno(nr) == ENOSYS)
        action = SCMP_ACT_NOTIFY;

    if (rule->n_terms == 0) {
        /* A refusal that repeats the filter's default documents the policy; libseccomp refuses
         * it as a rule (EACCES), and it needs none. */
        if (action == default_action)
            return 0;
        r = seccomp_rule_add(ctx, action, nr, 0);
        if (r < 0)
            return rule_error(e, rule, r, "libseccomp refused the rule for '%s': %s", rule->name,
                              strerror(-r));
        return 0;
    }
    for (size_t t = 0; t < rule->n_terms; t++) {
        struct scmp_arg_cmp cmp[POLICY_MAX_CMP];
        const struct policy_term *term = &rule->terms[t];

        for (size_t i = 0; i < term->n_cmp; i++)
            cmp[i] = to_scmp(rule, &term->cmp[i]);
        r = seccomp_rule_add_array(ctx, action, nr, (unsigned)term->n_cmp, cmp);
        if (r < 0)
            return rule_error(e, rule, r, "libseccomp refused the rule for '%s': %s", rule->name,
                              strerror(-r));
    }
    return 0;
}

static int compare_rule_names(const void *a, const void *b, void *userdata)
{
    const struct policy *p = userdata;
    const struct policy_rule *x = &p->rules[*(const size_t *)a], *y = &p->rules[*(const size_t *)b];
    int c = strcmp(x->name, y->name);
    return c ? c
             : (*(const size_t *)a > *(const size_t *)b) -
                   (*(const size_t *)a < *(const size_t *)b);
}

/* libseccomp drops rules silently where an unconditional rule meets other rules of the same
 * system call in one filter, or where rules of one system call with different actions overlap
 * (it keeps one). Refuse such policies instead. Sorting by name keeps this O(n log n). */
static int check_conflicts(const struct policy *p, struct policy_error *e)
{
    _cleanup_free_ size_t *order = calloc(p->n_rules ? p->n_rules : 1, sizeof(size_t));

    if (!order)
        return -ENOMEM;
    for (size_t i = 0; i < p->n_rules; i++)
        order[i] = i;
    qsort_r(order, p->n_rules, sizeof(size_t), compare_rule_names, (void *)p);

    for (size_t i = 0; i < p->n_rules;) {
        const struct policy_rule *first_allow = NULL, *first_refusal = NULL;
        size_t j = i;
        for (; j < p->n_rules && strcmp(p->rules[order[j]].name, p->rules[order[i]].name) == 0;
             j++) {
            const struct policy_rule *r = &p->rules[order[j]];
            const struct policy_rule **first = r->refuse_if ? &first_refusal : &first_allow;
            const struct policy_rule *o = *first;
            if (!o) {
                *first = r;
                continue;
            }
            bool same_action = o->action == r->action && o->errno_value == r->errno_value;
            if (r->refuse_if && !same_action)
                return rule_error(e, r, -EINVAL,
                                  "'%s' refuses differently from the rule at %s:%u (one action "
                                  "for all the refusals of a system call)",
                                  r->name, o->file, o->line);
            if (!r->refuse_if && !same_action)
                return rule_error(e, r, -EINVAL,
                                  "'%s' conflicts with the rule at %s:%u (one action for all "
                                  "its lines; use 'return ERRNO if ...' for exceptions)",
                                  r->name, o->file, o->line);
            if (!r->refuse_if && (o->n_terms == 0) != (r->n_terms == 0))
                return rule_error(e, r, -EINVAL,
                                  "'%s' conflicts with the rule at %s:%u (an unconditional rule "
                                  "and conditional rules for one system call cannot be combined; "
                                  "use 'return ERRNO if ...' for exceptions)",
                                  r->name, o->file, o->line);
        }
        /* Where the kernel lets nsbox watch refusals, the refuse program runs first and its
         * errno answers end the run of both (chain_programs()): a kill of the allow side would
         * no longer win over them, as it does between stacked filters. */
        if (first_allow && first_refusal && first_allow->action == POLICY_KILL &&
            first_refusal->action == POLICY_ERRNO)
            return rule_error(e, first_refusal, -EINVAL,
                              "'%s' is killed by the rule at %s:%u: it cannot also have "
                              "'return ERRNO if ...' exceptions (use 'kill if ...' or drop one)",
                              first_refusal->name, first_allow->file, first_allow->line);
        i = j;
    }
    return 0;
}

/* Comparisons that high bits could slip past. The kernel reads many arguments as 32-bit ints
 * and ignores the upper half, which seccomp sees (seccomp(2), "Caveats"). For a refusal, an
 * "==" is therefore made on the low 32 bits (it then also refuses the aliases); what cannot be
 * made safe that way is reported. Returns NULL or why the comparison is weak. */
static const char *weak_comparison(const struct policy_rule *rule, const struct policy_cmp *c)
{
    if (c->masked)
        return NULL;
    if (rule->refuse_if && (c->op == POLICY_LT || c->op == POLICY_LE))
        return "a refusal with < or <= compares all 64 bits: an argument the kernel reads as "
               "int can carry high bits past it";
    if (!rule->refuse_if && (c->op == POLICY_NE || c->op == POLICY_GT || c->op == POLICY_GE))
        return "an allow rule with !=, > or >= compares all 64 bits: an argument the kernel "
               "reads as int can carry high bits into it; allow the call and refuse the values "
               "with 'return ERRNO if argN & 0xffffffff == VALUE'";
    return NULL;
}

/* The libseccomp contexts of a policy, before export; refuse may be NULL. */
struct filter_ctx {
    scmp_filter_ctx allow, refuse;
};

static void ctx_free(struct filter_ctx *f)
{
    if (f->allow)
        seccomp_release(f->allow);
    if (f->refuse)
        seccomp_release(f->refuse);
    *f = (struct filter_ctx){0};
}

static int compile_ctx(const struct policy *p, filter_warn_fn warn, void *userdata, bool notify,
                       struct filter_ctx *ret, struct policy_error *e)
{
    struct filter_ctx f = {0};
    bool any_refusal = false;
    uint32_t refused = notify ? SCMP_ACT_NOTIFY : SCMP_ACT_ERRNO(EPERM);
    int r;

    f.allow = new_ctx(refused);
    if (!f.allow) {
        r = -ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < p->n_rules; i++)
        any_refusal = any_refusal || p->rules[i].refuse_if;
    if (any_refusal) {
        f.refuse = new_ctx(SCMP_ACT_ALLOW);
        if (!f.refuse) {
            r = -ENOMEM;
            goto fail;
        }
    }

    r = check_conflicts(p, e);
    if (r < 0)
        goto fail;

    for (size_t i = 0; i < p->n_rules; i++) {
        const struct policy_rule *rule = &p->rules[i];
        int nr = seccomp_syscall_resolve_name(rule->name);
        char why[400];
        bool skip = false;

        /* Negative numbers are libseccomp's pseudo system calls: names of other ABIs
         * (socketcall, stat64, ...) that can never match here. */
        if (nr == __NR_SCMP_ERROR || nr < 0) {
            (void)snprintf(why, sizeof(why), "%s system call '%s' (skipped)",
                           nr == __NR_SCMP_ERROR ? "unknown" : "not this architecture's",
                           rule->name);
            skip = true;
        } else {
            why[0] = '\0';
            for (size_t t = 0; t < rule->n_terms && !why[0]; t++)
                for (size_t k = 0; k < rule->terms[t].n_cmp && !why[0]; k++) {
                    const char *weak = weak_comparison(rule, &rule->terms[t].cmp[k]);
                    if (weak)
                        (void)snprintf(why, sizeof(why), "'%s': %s", rule->name, weak);
                }
        }
        if (why[0]) {
            if (!warn) {
                r = rule_error(e, rule, skip ? -ENOENT : -EINVAL, "%s", why);
                goto fail;
            }
            warn(rule, why, userdata);
            if (skip)
                continue;
        }
        if (nr == SCMP_SYS(seccomp) && (rule->action != POLICY_ALLOW || rule->n_terms > 0)) {
            r = rule_error(e, rule, -EINVAL,
                           "'seccomp' cannot be limited: nsbox installs its filters with it "
                           "(a further filter can only restrict more)");
            goto fail;
        }
        if (rule->refuse_if)
            r = add_rule(f.refuse, SCMP_ACT_ALLOW, SCMP_ACT_ERRNO(EPERM), nr, rule, e);
        else
            r = add_rule(f.allow, refused, refused, nr, rule, e);
        if (r < 0)
            goto fail;
    }

    /* The filters after the first are installed through seccomp(2), so the first must allow
     * it; another filter can only restrict further (seccomp(2)), so this widens nothing. */
    r = seccomp_rule_add(f.allow, SCMP_ACT_ALLOW, SCMP_SYS(seccomp), 0);
    if (r < 0 && r != -EEXIST) {
        (void)snprintf(e->message, sizeof(e->message), "libseccomp refused 'seccomp': %s",
                       strerror(-r));
        goto fail;
    }

    *ret = f;
    return 0;
fail:
    if (r == -ENOMEM)
        (void)snprintf(e->message, sizeof(e->message), "out of memory");
    ctx_free(&f);
    return r;
}

/* libseccomp 2.5 exports BPF only to a file descriptor: go through a memfd (filter.h). */
int filter_export_program(scmp_filter_ctx ctx, struct filter_program *ret)
{
    _cleanup_close_ int fd = memfd_create("nsbox-bpf", MFD_CLOEXEC);
    struct sock_filter *insns;
    off_t size;
    int r;

    if (fd < 0)
        return negative_errno();
    r = seccomp_export_bpf(ctx, fd);
    if (r < 0)
        return r;
    size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
        size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
        return -E2BIG;
    insns = malloc((size_t)size);
    if (!insns)
        return -ENOMEM;
    if (pread(fd, insns, (size_t)size, 0) != size) {
        free(insns);
        return -EIO;
    }
    *ret = (struct filter_program){.insns = insns,
                                   .n = (unsigned short)(size / (off_t)sizeof(*insns)),
                                   .owned = true};
    return 0;
}

/*
 * The "unknown" program, written directly: libseccomp would spend a rule, and BPF instructions
 * to run on every system call, on each of the ~400 numbers it knows. Here the known numbers
 * form a few ranges (two on x86-64), checked in order:
 *
 *     ld arch; jeq NATIVE else kill; ld nr; [x86-64: jge X32_BIT -> kill]
 *     for each range: jge lo else ENOSYS; jgt hi -> next range else allow
 *     ENOSYS: ret ERRNO(ENOSYS); allow: ret ALLOW; kill: ret KILL_PROCESS
 */
#define MAX_RANGES 32
static int build_unknown_program(struct filter_program *ret)
{
    struct {
        unsigned lo, hi;
    } ranges[MAX_RANGES];
    size_t n_ranges = 0, n = 0, size;
    uint32_t arch = seccomp_arch_native();
    bool x86_64 = arch == SCMP_ARCH_X86_64;
    struct sock_filter *p;
    int prev = -2;

    for (int nr = 0; nr < SYSCALL_NR_SCAN; nr++) {
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        if (!name)
            continue;
        free(name);
        if (nr != prev + 1) {
            if (n_ranges == MAX_RANGES)
                return -E2BIG;
            ranges[n_ranges++].lo = (unsigned)nr;
        }
        ranges[n_ranges - 1].hi = (unsigned)nr;
        prev = nr;
    }
    if (n_ranges == 0)
        return -ENOENT;

    size = 3 + (x86_64 ? 1 : 0) + 2 * n_ranges + 3;
    p = calloc(size, sizeof(*p));
    if (!p)
        return -ENOMEM;
        /* Offsets are relative to the next instruction; the three returns are the last three. */
#define TO_ENOSYS(i) ((uint8_t)(size - 3 - (i)-1))
#define TO_ALLOW(i) ((uint8_t)(size - 2 - (i)-1))
#define TO_KILL(i) ((uint8_t)(size - 1 - (i)-1))
    p[n] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                        offsetof(struct seccomp_data, arch));
    n++;
    p[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 0, TO_KILL(n));
    n++;
    p[n] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                        offsetof(struct seccomp_data, nr));
    n++;
    if (x86_64) {
        /* x32 system calls carry this bit on the x86-64 arch value (__X32_SYSCALL_BIT). */
        p[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, TO_KILL(n), 0);
        n++;
    }
    for (size_t i = 0; i < n_ranges; i++) {
        p[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, ranges[i].lo, 0,
                                            TO_ENOSYS(n));
        n++;
        p[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, ranges[i].hi, 0,
                                            TO_ALLOW(n));
        n++;
    }
    p[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
    p[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    p[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
#undef TO_ENOSYS
#undef TO_ALLOW
#undef TO_KILL
    *ret = (struct filter_program){.insns = p, .n = (unsigned short)n, .owned = true};
    return 0;
}

int filter_refusal_errno(long nr)
{
#ifdef SYS_inotify_init
    if (nr == SYS_inotify_init)
        return ENOSYS;
#endif
    if (nr == SYS_inotify_init1)
        return ENOSYS;
    return EPERM;
}

/*
 * The refuse program and the allow program as one, for a reporting sandbox. Stacked, the
 * kernel hands a SECCOMP_RET_USER_NOTIF to the listener of the filter whose answer won, and a
 * task can have one listener in its chain (has_duplicate_listener() and seccomp_run_filters()
 * in kernel/seccomp.c): the refuse filter's answers could not be reported. So the refuse
 * program runs first, its "allow" becomes a jump to the allow program appended after it, and
 * its EPERM answers become notifications. One instruction stands for one, so no jump inside
 * either program moves. Both start from the system call's data (libseccomp's programs load
 * the architecture first and use no scratch memory), so the allow program runs as it would
 * alone. The answer differs from the stacked filters' only where the allow side kills a call
 * the refuse side refuses, which check_conflicts() refuses.
 */
static int chain_programs(const struct filter_program *refuse, const struct filter_program *allow,
                          struct filter_program *ret)
{
    size_t n = (size_t)refuse->n + allow->n;
    struct sock_filter *p;

    if (n > BPF_MAXINSNS)
        return -E2BIG;
    p = malloc(n * sizeof(*p));
    if (!p)
        return -ENOMEM;
    memcpy(p, refuse->insns, refuse->n * sizeof(*p));
    memcpy(p + refuse->n, allow->insns, allow->n * sizeof(*p));
    for (unsigned i = 0; i < refuse->n; i++) {
        if (p[i].code != (BPF_RET | BPF_K))
            continue;
        if (p[i].k == SECCOMP_RET_ALLOW)
            p[i] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, refuse->n - i - 1);
        else if (p[i].k == (SECCOMP_RET_ERRNO | EPERM))
            p[i].k = SECCOMP_RET_USER_NOTIF;
    }
    *ret = (struct filter_program){.insns = p, .n = (unsigned short)n, .owned = true};
    return 0;
}

void filter_free(struct filter *f)
{
    for (unsigned i = 0; i < f->n_prog; i++)
        if (f->prog[i].owned)
            free((void *)f->prog[i].insns);
    *f = (struct filter){0};
}

int filter_compile(const struct policy *p, filter_warn_fn warn, void *userdata, bool notify,
                   struct filter *ret, struct policy_error *e)
{
    struct filter_ctx ctx = {0};
    struct filter f = {.notify = notify};
    int r;

    r = compile_ctx(p, warn, userdata, notify, &ctx, e);
    if (r < 0)
        return r;
    scmp_filter_ctx in_order[] = {ctx.allow, ctx.refuse};
    for (size_t i = 0; i < ELEMENTSOF(in_order); i++) {
        if (!in_order[i])
            continue;
        r = filter_export_program(in_order[i], &f.prog[f.n_prog]);
        if (r < 0) {
            *e = (struct policy_error){0};
            (void)snprintf(e->message, sizeof(e->message), "exporting the filter failed: %s",
                           strerror(-r));
            filter_free(&f);
            ctx_free(&ctx);
            return r;
        }
        f.n_prog++;
    }
    ctx_free(&ctx);
    if (notify && f.n_prog == 2) {
        struct filter_program one;
        r = chain_programs(&f.prog[1], &f.prog[0], &one);
        if (r < 0) {
            *e = (struct policy_error){0};
            (void)snprintf(e->message, sizeof(e->message),
                           "joining the allow and refuse filters failed: %s", strerror(-r));
            filter_free(&f);
            return r;
        }
        filter_free(&f);
        f = (struct filter){.prog = {one}, .n_prog = 1, .notify = notify};
    }
    r = build_unknown_program(&f.prog[f.n_prog]);
    if (r < 0) {
        *e = (struct policy_error){0};
        (void)snprintf(e->message, sizeof(e->message),
                       "building the filter for unknown system calls failed: %s", strerror(-r));
        filter_free(&f);
        return r;
    }
    f.n_prog++;
    *ret = f;
    return 0;
}

int filter_load(const struct filter *f, int *ret_listener)
{
    *ret_listener = -1;
    for (unsigned i = 0; i < f->n_prog; i++) {
        struct sock_fprog prog = {.len = f->prog[i].n,
                                  .filter = (struct sock_filter *)f->prog[i].insns};
        /* The allow program comes first; with notify it brings the listener (O_CLOEXEC). */
        unsigned flags = i == 0 && f->notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
        int r = sys_seccomp(SECCOMP_SET_MODE_FILTER, flags, &prog);
        if (r < 0)
            return negative_errno();
        if (flags)
            *ret_listener = r;
    }
    return 0;
}

int filter_refuse_sysv_ipc(struct filter *f, bool shm)
{
    struct filter_program *p = &f->prog[0];
    const uint32_t ret = f->notify ? SECCOMP_RET_USER_NOTIF
                                   : SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
    const int nrs[] = {__NR_semget, __NR_msgget, __NR_shmget};
    const unsigned m = shm ? 3 : 2; /* how many of nrs */
    /* Classic BPF jumps are relative (jt, jf count the instructions skipped): what follows the
     * prefix keeps its meaning. seccomp_data's arch first, as every seccomp filter must, so
     * that a number of another ABI is never taken for one of these (seccomp(2), "Caveats").
     * [0] arch, [1] native or on to the program, [2] nr, [3..m+2] each number to the answer,
     * [m+3] on to the program, [m+4] the answer; the program at m+5. */
    struct sock_filter prefix[3 + 3 + 2];
    const size_t k = m + 5;
    struct sock_filter *insns;

    prefix[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                             offsetof(struct seccomp_data, arch));
    prefix[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_arch_native(), 0,
                                             (uint8_t)(m + 3));
    prefix[2] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                             offsetof(struct seccomp_data, nr));
    for (unsigned i = 0; i < m; i++)
        prefix[3 + i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nrs[i],
                                                     (uint8_t)(m - i), 0);
    prefix[m + 3] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 1);
    prefix[m + 4] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret);

    if (f->n_prog == 0)
        return -EINVAL;
    if (p->n + k > BPF_MAXINSNS)
        return -E2BIG;
    insns = malloc((p->n + k) * sizeof(*insns));
    if (!insns)
        return -ENOMEM;
    memcpy(insns, prefix, k * sizeof(*insns));
    memcpy(insns + k, p->insns, p->n * sizeof(*insns));
    if (p->owned)
        free((void *)p->insns);
    *p = (struct filter_program){.insns = insns, .n = (unsigned short)(p->n + k), .owned = true};
    return 0;
}

bool filter_notify_supported(void)
{
    char buf[256];

    /* SECCOMP_RET_USER_NOTIF (Linux 5.0) and pidfd_getfd(2) (5.6), which the supervisor uses
     * to take the listener from the sandbox's init. */
    if (read_file_at(AT_FDCWD, "/proc/sys/kernel/seccomp/actions_avail", buf, sizeof(buf)) <= 0 ||
        !strstr(buf, "user_notif"))
        return false;
    return sys_pidfd_getfd(-1, 0, 0) < 0 && errno == EBADF;
}

int filter_dump(const struct policy *p, int fd, struct policy_error *e)
{
    struct filter_ctx f = {0};
    int r = compile_ctx(p, NULL, NULL, false, &f, e);

    if (r < 0)
        return r;
    r = dump_ctx(&f, fd);
    ctx_free(&f);
    return r;
}

static int dump_ctx(const struct filter_ctx *f, int fd)
{
    static const char *const titles[] = {
        "# filter 1 of 3, allow: the policy's allowed system calls; anything else fails with "
        "EPERM\n",
        "# filter 2 of 3, refuse: the policy's exceptions ('... if'); anything else is allowed\n",
        "# filter 3 of 3, unknown: system calls newer than libseccomp fail with ENOSYS\n",
    };
    scmp_filter_ctx ctx[] = {f->allow, f->refuse};
    struct filter_program unknown;
    FILE *out;
    int r;

    for (size_t i = 0; i < ELEMENTSOF(ctx); i++) {
        if (!ctx[i])
            continue;
        if (write(fd, titles[i], strlen(titles[i])) < 0)
            return negative_errno();
        r = seccomp_export_pfc(ctx[i], fd);
        if (r < 0)
            return r;
    }
    r = build_unknown_program(&unknown);
    if (r < 0)
        return r;
    out = fdopen(dup(fd), "w");
    if (!out) {
        free((void *)unknown.insns);
        return -ENOMEM;
    }
    fputs(titles[2], out);
    fputs("# classic BPF: code jt jf k\n", out);
    for (unsigned i = 0; i < unknown.n; i++)
        fprintf(out, "%3u: 0x%04x %3u %3u 0x%08x\n", i, unknown.insns[i].code, unknown.insns[i].jt,
                unknown.insns[i].jf, unknown.insns[i].k);
    free((void *)unknown.insns);
    return fclose(out) == 0 ? 0 : -EIO;
}
