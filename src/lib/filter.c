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
                       const bool *fast, struct filter_ctx *ret, struct policy_error *e)
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
        if (fast && nr < SYSCALL_NR_SCAN && fast[nr])
            continue; /* allowed by the dispatch program before this one runs */
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

/*
 * The system calls a policy allows whatever their arguments and says nothing else about: one
 * unconditional "allow" line, no other line (no refusal, no second line) for the same call.
 * fast[nr] for nr below SYSCALL_NR_SCAN. Returns how many.
 */
static unsigned fast_allowed(const struct policy *p, bool fast[SYSCALL_NR_SCAN])
{
    unsigned char lines[SYSCALL_NR_SCAN] = {0};
    unsigned n = 0;

    memset(fast, 0, SYSCALL_NR_SCAN * sizeof(*fast));
    for (size_t i = 0; i < p->n_rules; i++) {
        int nr = seccomp_syscall_resolve_name(p->rules[i].name);
        if (nr < 0 || nr >= SYSCALL_NR_SCAN)
            continue;
        if (lines[nr] < 2)
            lines[nr]++;
        fast[nr] = lines[nr] == 1 && p->rules[i].action == POLICY_ALLOW && !p->rules[i].refuse_if &&
                   p->rules[i].n_terms == 0;
    }
    for (int nr = 0; nr < SYSCALL_NR_SCAN; nr++)
        n += fast[nr];
    return n;
}

enum { R_ENOSYS, R_FAST, R_ON, R_KILL }; /* the dispatch program's four returns, in order */
enum { K_UNKNOWN, K_FAST, K_ON };        /* the kinds of system call number it tells apart */
static const unsigned kind_answer[] = {[K_UNKNOWN] = R_ENOSYS, [K_FAST] = R_FAST, [K_ON] = R_ON};

/* The search over runs first..last (first < last) at p[*n]: each node compares the number with
 * the highest of the runs on its left (jgt: right, else left); a side of one run jumps to its
 * answer among the returns at ret0. Every target lies after the node (BPF jumps only forward). */
static void emit_search(struct sock_filter *p, size_t *n, size_t ret0, const unsigned *hi,
                        const unsigned *kinds, size_t first, size_t last)
{
    size_t mid = (first + last) / 2, at = (*n)++, jf_to, jt_to;

    if (mid == first)
        jf_to = ret0 + kind_answer[kinds[first]];
    else {
        jf_to = *n;
        emit_search(p, n, ret0, hi, kinds, first, mid);
    }
    if (mid + 1 == last)
        jt_to = ret0 + kind_answer[kinds[last]];
    else {
        jt_to = *n;
        emit_search(p, n, ret0, hi, kinds, mid + 1, last);
    }
    p[at] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, hi[mid],
                                         (uint8_t)(jt_to - at - 1), (uint8_t)(jf_to - at - 1));
}

/*
 * The dispatch program: the unknown program's checks, and the answer for the calls fast[]
 * names, before the policy's programs. The numbers below SYSCALL_NR_SCAN fall into runs of one
 * kind (unknown to libseccomp: ENOSYS; fast: allowed here; the rest: on to the policy's
 * programs), found by a binary search (emit_search(), one instruction a run and seven
 * comparisons for the ~90 runs of the built-in policies):
 *
 *     ld arch; jeq NATIVE else kill; ld nr; [x86-64: jge X32_BIT -> kill]
 *     the search; the last run reaches up to 2^32 - 1 (unknown)
 *     ENOSYS: ret ERRNO(ENOSYS); fast: ret ALLOW; on: ret FILTER_RET_GO_ON;
 *     kill: ret KILL_PROCESS
 *
 * "on" is the mark that joining the policy's programs after this one turns into a jump to them
 * (it is never loaded: filter_load() refuses a program that holds it); "allow" answers the fast
 * calls without them, and a later join (the memfd program) continues from it as from any
 * "allow". The policy would answer these calls "allow" (and the unknown program too), so the
 * answer is the stacked filters'; the program is about half the size of libseccomp's tree for
 * them (a seccomp(2) load costs in proportion, JIT and all). A plain "allow" also keeps these
 * calls in the kernel's cache of calls a filter always allows, which skips the filter
 * (seccomp_cache_prepare() in kernel/seccomp.c takes only SECCOMP_RET_ALLOW itself, without
 * data). Returns -E2BIG where a jump would be longer than classic
 * BPF's 255, -EINVAL if the last number scanned is known, -ENOMEM.
 */
static int build_dispatch_program(const bool fast[SYSCALL_NR_SCAN], struct filter_program *ret)
{
    unsigned hi[SYSCALL_NR_SCAN], kinds[SYSCALL_NR_SCAN];
    size_t n_runs = 0, n = 0, size, ret0;
    uint32_t arch = seccomp_arch_native();
    bool x86_64 = arch == SCMP_ARCH_X86_64;
    struct sock_filter *p;

    for (int nr = 0; nr < SYSCALL_NR_SCAN; nr++) {
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        unsigned kind = !name ? K_UNKNOWN : fast[nr] ? K_FAST : K_ON;
        free(name);
        if (n_runs == 0 || kinds[n_runs - 1] != kind)
            kinds[n_runs++] = kind;
        hi[n_runs - 1] = (unsigned)nr;
    }
    /* The last run reaches past SYSCALL_NR_SCAN: unknown, as everything above it is. */
    if (kinds[n_runs - 1] != K_UNKNOWN || n_runs < 2)
        return -EINVAL;

    ret0 = 3 + (x86_64 ? 1 : 0) + (n_runs - 1);
    size = ret0 + 4;
    if (size - 3 > 255) /* the longest jump: from the arch check to the kill */
        return -E2BIG;
    p = calloc(size, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p[n] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                        offsetof(struct seccomp_data, arch));
    n++;
    p[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 0,
                                        (uint8_t)(ret0 + R_KILL - n - 1));
    n++;
    p[n] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                        offsetof(struct seccomp_data, nr));
    n++;
    if (x86_64) {
        /* x32 system calls carry this bit on the x86-64 arch value (__X32_SYSCALL_BIT). */
        p[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U,
                                            (uint8_t)(ret0 + R_KILL - n - 1), 0);
        n++;
    }
    emit_search(p, &n, ret0, hi, kinds, 0, n_runs - 1);
    if (n != ret0) { /* one node a run but the last */
        free(p);
        return -EINVAL;
    }
    p[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
    p[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    p[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, FILTER_RET_GO_ON);
    p[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
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
 * Two programs as one: first runs, and each of its "allow" answers becomes a jump to second,
 * appended after it; with notify, first's EPERM answers also become notifications. One
 * instruction stands for one, so no jump inside either program moves (classic BPF jumps count
 * the instructions skipped; BPF_JA's offset is 32 bits, so any distance is reached). Both start
 * from the system call's data (libseccomp's programs and ours load the architecture first and
 * use no scratch memory, and an answer taken from A is refused), so second runs as it would
 * alone.
 *
 * Stacked, the kernel keeps the answer of highest precedence and, between equal ones, that of
 * the filter loaded last (seccomp_run_filters() in kernel/seccomp.c); joined, a call gets first's
 * answer unless first allows it, and then second's. The two agree wherever second never answers
 * a call that first refuses with one of higher precedence (or, for equal ones, where second
 * would be loaded last). The joins made here, each checked against the stacked filters by
 * tests/unit/test-filter-chain.c:
 *   refuse then allow (notify): stacked, the kernel hands a SECCOMP_RET_USER_NOTIF to the
 *     listener of the filter whose answer won, and a task can have one listener in its chain
 *     (has_duplicate_listener()): the refuse filter's answers could not be reported. The
 *     answer differs only where the allow side kills a call the refuse side refuses, which
 *     check_conflicts() refuses.
 *   unknown then the policy's last program: unknown answers only calls libseccomp cannot name
 *     (ENOSYS, which the policy answers with its default, EPERM, or a notification: equal or
 *     lower) and foreign ABIs (kill, as the policy does).
 *   the policy's program then a memfd filter (filter_join_memfd()).
 * One program instead of three saves a seccomp(2) load in each run's start (tens of
 * microseconds each) and a filter run on every system call of the payload.
 */
static int join_programs(const struct filter_program *first, const struct filter_program *second,
                         bool notify, uint32_t go_on, struct filter_program *ret)
{
    size_t n = (size_t)first->n + second->n;
    struct sock_filter *p;

    if (n > BPF_MAXINSNS)
        return -E2BIG;
    for (unsigned i = 0; i < first->n; i++)
        if (first->insns[i].code == (BPF_RET | BPF_A))
            return -EINVAL; /* an answer computed at run time: cannot tell "allow" */
    p = malloc(n * sizeof(*p));
    if (!p)
        return -ENOMEM;
    memcpy(p, first->insns, first->n * sizeof(*p));
    memcpy(p + first->n, second->insns, second->n * sizeof(*p));
    for (unsigned i = 0; i < first->n; i++) {
        if (p[i].code != (BPF_RET | BPF_K))
            continue;
        if (p[i].k == go_on)
            p[i] = (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, first->n - i - 1);
        else if (notify && p[i].k == (SECCOMP_RET_ERRNO | EPERM))
            p[i].k = SECCOMP_RET_USER_NOTIF;
    }
    *ret = (struct filter_program){.insns = p, .n = (unsigned short)n, .owned = true};
    return 0;
}

/* Replace f's program i by the join of first and second (join_programs()). */
static int join_into(struct filter *f, unsigned i, const struct filter_program *first,
                     const struct filter_program *second, bool notify, uint32_t go_on)
{
    struct filter_program one;
    int r = join_programs(first, second, notify, go_on, &one);

    if (r < 0)
        return r;
    if (f->prog[i].owned)
        free((void *)f->prog[i].insns);
    f->prog[i] = one;
    return 0;
}

static void filter_program_free(struct filter_program *p)
{
    if (p->owned)
        free((void *)p->insns);
    *p = (struct filter_program){0};
}

void filter_free(struct filter *f)
{
    for (unsigned i = 0; i < f->n_prog; i++)
        if (f->prog[i].owned)
            free((void *)f->prog[i].insns);
    *f = (struct filter){0};
}

static int compile_programs(const struct policy *p, filter_warn_fn warn, void *userdata,
                            bool notify, bool join, struct filter *ret, struct policy_error *e)
{
    struct filter_ctx ctx = {0};
    struct filter f = {.notify = notify};
    struct filter_program unknown = {0};
    const char *what = NULL;
    bool fast[SYSCALL_NR_SCAN];
    /* The dispatch program answers the fast calls for the joined program of a reporting
     * sandbox; stacked, each program must answer all. */
    bool fast_ok = notify && join && fast_allowed(p, fast) > 0;
    int r;

    r = compile_ctx(p, warn, userdata, notify, fast_ok ? fast : NULL, &ctx, e);
    if (r < 0)
        return r;
    scmp_filter_ctx in_order[] = {ctx.allow, ctx.refuse};
    for (size_t i = 0; i < ELEMENTSOF(in_order); i++) {
        if (!in_order[i])
            continue;
        r = filter_export_program(in_order[i], &f.prog[f.n_prog]);
        if (r < 0) {
            what = "exporting the filter";
            break;
        }
        f.n_prog++;
    }
    ctx_free(&ctx);
    if (r >= 0 && notify && f.n_prog == 2) {
        /* The refuse program first, the allow program after it. */
        r = join_into(&f, 0, &f.prog[1], &f.prog[0], true, SECCOMP_RET_ALLOW);
        if (r >= 0) {
            filter_program_free(&f.prog[1]);
            f.n_prog = 1;
        } else
            what = "joining the allow and refuse filters";
    }
    if (r >= 0) {
        r = fast_ok ? build_dispatch_program(fast, &unknown) : build_unknown_program(&unknown);
        if (r < 0)
            what = "building the filter for unknown system calls";
    }
    if (r >= 0 && join) {
        r = join_into(&f, f.n_prog - 1, &unknown, &f.prog[f.n_prog - 1], false,
                      fast_ok ? FILTER_RET_GO_ON : SECCOMP_RET_ALLOW);
        if (r < 0)
            what = "joining the filter for unknown system calls";
        filter_program_free(&unknown);
    } else if (r >= 0)
        f.prog[f.n_prog++] = unknown;
    if (r < 0) {
        *e = (struct policy_error){0};
        (void)snprintf(e->message, sizeof(e->message), "%s failed: %s", what, strerror(-r));
        filter_program_free(&unknown);
        filter_free(&f);
        return r;
    }
    *ret = f;
    return 0;
}

static void warned_already(const struct policy_rule *rule, const char *message, void *userdata)
{
}

int filter_compile(const struct policy *p, filter_warn_fn warn, void *userdata, bool notify,
                   struct filter *ret, struct policy_error *e)
{
    int r = compile_programs(p, warn, userdata, notify, true, ret, e);

    /* Joined, a policy file can be too much for classic BPF where the stacked filters were
     * not: more than about 250 runs of numbers for the dispatch program's 8-bit jumps, or a
     * program that does not leave room for the unknown program in front. Then the unknown
     * program is stacked on its own, as before the join: the same answers, one seccomp(2) load
     * more. compile_ctx() ran in full before either, so its warnings were given already. */
    if (r == -E2BIG)
        r = compile_programs(p, warn ? warned_already : NULL, NULL, notify, false, ret, e);
    return r;
}

int filter_compile_stacked(const struct policy *p, struct filter *ret, struct policy_error *e)
{
    return compile_programs(p, NULL, NULL, false, false, ret, e);
}

int filter_join_memfd(struct filter *f, const struct filter *memfd)
{
    int r;

    if (f->n_prog == 0 || memfd->n_prog != 1)
        return -EINVAL;
    r = join_into(f, f->n_prog - 1, &f->prog[f->n_prog - 1], &memfd->prog[0], false,
                  SECCOMP_RET_ALLOW);
    /* A policy file's program too long to take it (up to BPF_MAXINSNS is fine on its own):
     * the memfd program stacked after it, as a filter of its own, instead. The first program
     * keeps the listener (filter_load()). */
    if (r == -E2BIG && f->n_prog < ELEMENTSOF(f->prog)) {
        f->prog[f->n_prog++] = (struct filter_program){.insns = memfd->prog[0].insns,
                                                       .n = memfd->prog[0].n};
        r = 0;
    }
    return r;
}

int filter_load(const struct filter *f, int *ret_listener)
{
    *ret_listener = -1;
    /* A dispatch program's mark, left unjoined, would allow what the policy decides. */
    for (unsigned i = 0; i < f->n_prog; i++)
        for (unsigned k = 0; k < f->prog[i].n; k++)
            if (f->prog[i].insns[k].code == (BPF_RET | BPF_K) &&
                f->prog[i].insns[k].k == FILTER_RET_GO_ON)
                return -EINVAL;
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
    int r = compile_ctx(p, NULL, NULL, false, NULL, &f, e);

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
