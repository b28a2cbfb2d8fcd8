/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The joined programs a run loads (join_programs() in src/lib/filter.c: unknown, refuse and
 * allow as one with notify, and a memfd program after them, filter_join_memfd()) answer every
 * system call as the programs stacked would (allow, refuse, unknown, with the memfd filter
 * loaded before them), once notifications are read as the supervisor answers them
 * (filter_refusal_errno()): run both on a small classic BPF interpreter over every system call
 * number of the native ABI, of x32, of i386 and of another architecture, with argument values
 * the refusals name. */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "macro.h"
#include "memfd.h"
#include "policyfile.h"

/* Classic BPF as seccomp runs it (kernel/bpf/core.c, net/core/filter.c's checker): A, X and 16
 * words of scratch memory; loads of seccomp_data only. Fails the test on an instruction it does
 * not know, so that a program it cannot judge never passes. */
static uint32_t run_bpf(const struct sock_filter *p, unsigned n, const struct seccomp_data *d)
{
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
    const unsigned char *data = (const unsigned char *)d;

    for (unsigned pc = 0; pc < n; pc++) {
        const struct sock_filter *i = &p[pc];
        uint32_t src = BPF_SRC(i->code) == BPF_X ? x : i->k;
        switch (BPF_CLASS(i->code)) {
        case BPF_LD:
            if (i->code == (BPF_LD | BPF_W | BPF_ABS)) {
                cr_assert_leq(i->k + 4, sizeof(*d));
                memcpy(&a, data + i->k, 4);
            } else if (i->code == (BPF_LD | BPF_IMM))
                a = i->k;
            else if (i->code == (BPF_LD | BPF_MEM))
                a = mem[i->k];
            else
                cr_assert_fail("BPF_LD %#x", i->code);
            break;
        case BPF_LDX:
            if (i->code == (BPF_LDX | BPF_IMM))
                x = i->k;
            else if (i->code == (BPF_LDX | BPF_MEM))
                x = mem[i->k];
            else
                cr_assert_fail("BPF_LDX %#x", i->code);
            break;
        case BPF_ST:
            mem[i->k] = a;
            break;
        case BPF_STX:
            mem[i->k] = x;
            break;
        case BPF_ALU:
            switch (BPF_OP(i->code)) {
            case BPF_ADD:
                a += src;
                break;
            case BPF_SUB:
                a -= src;
                break;
            case BPF_AND:
                a &= src;
                break;
            case BPF_OR:
                a |= src;
                break;
            case BPF_XOR:
                a ^= src;
                break;
            case BPF_LSH:
                a <<= src;
                break;
            case BPF_RSH:
                a >>= src;
                break;
            case BPF_NEG:
                a = -a;
                break;
            default:
                cr_assert_fail("BPF_ALU %#x", i->code);
            }
            break;
        case BPF_JMP:
            if (BPF_OP(i->code) == BPF_JA) {
                pc += i->k;
                break;
            }
            {
                bool t;
                switch (BPF_OP(i->code)) {
                case BPF_JEQ:
                    t = a == src;
                    break;
                case BPF_JGT:
                    t = a > src;
                    break;
                case BPF_JGE:
                    t = a >= src;
                    break;
                case BPF_JSET:
                    t = (a & src) != 0;
                    break;
                default:
                    cr_assert_fail("BPF_JMP %#x", i->code);
                    t = false;
                }
                pc += t ? i->jt : i->jf;
            }
            break;
        case BPF_RET:
            return BPF_RVAL(i->code) == BPF_A ? a : i->k;
        case BPF_MISC:
            if (BPF_MISCOP(i->code) == BPF_TAX)
                x = a;
            else
                a = x;
            break;
        }
    }
    cr_assert_fail("a program ran off its end");
    return 0;
}

/* Stacked filters: the answer of highest precedence wins, which is the lowest action as a
 * signed number; the kernel runs the last loaded first and keeps the first of equal ones
 * (seccomp_run_filters() in kernel/seccomp.c). */
static uint32_t run_stack(const struct filter *f, const struct seccomp_data *d)
{
    uint32_t best = SECCOMP_RET_ALLOW;
    for (unsigned i = f->n_prog; i-- > 0;) {
        uint32_t r = run_bpf(f->prog[i].insns, f->prog[i].n, d);
        if ((int32_t)(r & SECCOMP_RET_ACTION_FULL) < (int32_t)(best & SECCOMP_RET_ACTION_FULL))
            best = r;
    }
    return best;
}

/* What the payload gets: a notification as the supervisor answers a process other than init. */
static uint32_t as_answered(uint32_t r, const struct seccomp_data *d, bool native)
{
    if ((r & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF) {
        cr_assert(native, "a foreign ABI's call reached the listener (nr %#x)", d->nr);
        return SECCOMP_RET_ERRNO | (uint32_t)filter_refusal_errno(d->nr);
    }
    return r;
}

static const uint64_t values[] = {
    0,
    1,
    2,
    3,
    4,
    5,
    7,
    0x10,
    0x40,
    0x200,
    0x400,
    0x410000,
    0x410040,
    0755,
    0644,
    02000,
    04000,
    06755,
    0x5412,
    0x541c,
    0x5423,
    0x100005412ULL,
    0x100005423ULL,
    0xffffffffULL,
    0xffffffff00000004ULL,
    0x7fffffff,
    0x80000000ULL,
    0xffffffffffffffffULL,
    0x10000000000ULL,
    /* clone/unshare flags, sockets' families and types, personalities, scheduling policies */
    0x10000000,
    0x20000000,
    0x40000000,
    0x00020000,
    0x7e020000,
    10,
    16,
    17,
    38,
    0x0008,
};
#define N_VALUES (sizeof(values) / sizeof(values[0]))

/* Run memfd (NULL: none) and f as the kernel runs them stacked: memfd loaded first. */
static uint32_t run_with_memfd(const struct filter *memfd, const struct filter *f,
                               const struct seccomp_data *d)
{
    uint32_t r = run_stack(f, d);
    if (memfd) {
        uint32_t m = run_stack(memfd, d); /* older: wins only by higher precedence */
        if ((int32_t)(m & SECCOMP_RET_ACTION_FULL) < (int32_t)(r & SECCOMP_RET_ACTION_FULL))
            r = m;
    }
    return r;
}

static void compare_loaded(const char *name, struct policy *pp, bool notify,
                           const struct filter *memfd, unsigned want_progs)
{
    struct policy p = *pp;
    struct policy_error e = {0};
    struct filter stacked = {0}, joined = {0};
    static const struct {
        uint32_t arch;
        uint32_t bias;
        bool native;
    } abis[] = {
        {AUDIT_ARCH_X86_64, 0, true},
        {AUDIT_ARCH_X86_64, 0x40000000, false}, /* x32 */
        {AUDIT_ARCH_I386, 0, false},
        {AUDIT_ARCH_AARCH64, 0, false},
    };
    unsigned long compared = 0, refused = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ULL;

    cr_assert_eq(filter_compile_stacked(&p, &stacked, &e), 0, "%s", e.message);
    cr_assert_eq(filter_compile(&p, NULL, NULL, notify, &joined, &e), 0, "%s: %s", name, e.message);
    cr_assert_eq(stacked.n_prog, 3, "%s: allow, refuse and unknown stacked", name);
    if (want_progs)
        cr_assert_eq(joined.n_prog, want_progs, "%s: %u programs", name, joined.n_prog);
    /* The dispatch program's mark is joined away, and "allow" is SECCOMP_RET_ALLOW itself (the
     * kernel caches only that as always allowed). */
    for (unsigned i = 0; i < joined.n_prog; i++)
        for (unsigned k = 0; k < joined.prog[i].n; k++)
            if (joined.prog[i].insns[k].code == (BPF_RET | BPF_K) &&
                (joined.prog[i].insns[k].k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ALLOW)
                cr_assert_eq(joined.prog[i].insns[k].k, SECCOMP_RET_ALLOW, "%s: insn %u", name, k);
    if (memfd)
        cr_assert_eq(filter_join_memfd(&joined, memfd), 0, "%s: memfd program", name);
    for (size_t k = 0; k < sizeof(abis) / sizeof(abis[0]); k++)
        for (uint32_t nr = 0; nr < 600; nr++)
            for (unsigned t = 0; t < 6 * N_VALUES + 300; t++) {
                struct seccomp_data d = {.nr = (int)(nr + abis[k].bias),
                                         .arch = abis[k].arch,
                                         .instruction_pointer = 0x401000};
                if (t < 6 * N_VALUES)
                    d.args[t / N_VALUES] = values[t % N_VALUES];
                else
                    for (int a = 0; a < 6; a++) {
                        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                        d.args[a] = values[(seed >> 33) % N_VALUES];
                    }
                uint32_t want = run_with_memfd(memfd, &stacked, &d);
                /* With notify, every EPERM is a notification, answered as the supervisor does
                 * (ENOSYS for the inotify calls a policy file does not name otherwise). */
                if (notify && abis[k].native && want == (SECCOMP_RET_ERRNO | EPERM))
                    want = SECCOMP_RET_ERRNO | (uint32_t)filter_refusal_errno(d.nr);
                uint32_t got = as_answered(run_stack(&joined, &d), &d, abis[k].native);
                cr_assert_eq(got, want,
                             "%s: arch %#x nr %u args %#llx %#llx %#llx %#llx: joined %#x, "
                             "stacked %#x",
                             name, d.arch, (unsigned)d.nr, (unsigned long long)d.args[0],
                             (unsigned long long)d.args[1], (unsigned long long)d.args[2],
                             (unsigned long long)d.args[3], got, want);
                compared++;
                refused += (want & SECCOMP_RET_ACTION_FULL) != SECCOMP_RET_ALLOW;
            }
    cr_log_info("%s: %lu calls compared, %lu not allowed", name, compared, refused);
    cr_assert_gt(refused, 0);
    filter_free(&stacked);
    filter_free(&joined);
}

static void compare_policy(const char *name, bool notify, const struct filter *memfd)
{
    struct policy p = {0};
    struct policy_error e = {0};

    cr_assert_eq(policy_load_builtin(name, &p, &e), 0, "%s", e.message);
    compare_loaded(name, &p, notify, memfd, notify ? 1 : 2);
    policy_free(&p);
}

/* What a run loads: the reporting program, with the memfd program of each level. */
Test(filter_chain, default_policy_joined_answers_as_stacked)
{
    compare_policy("default.policy", true, NULL);
    compare_policy("default.policy", true, &filter_memfd_hugetlb);
    compare_policy("default.policy", true, &filter_memfd_exec);
    compare_policy("default.policy", true, &filter_memfd_unsealed);
}

Test(filter_chain, network_policy_joined_answers_as_stacked)
{
    compare_policy("network.policy", true, NULL);
    compare_policy("network.policy", true, &filter_memfd_unsealed);
}

/* Without notify (a kernel before 5.6): unknown joined before refuse, allow stacked under. */
Test(filter_chain, without_notify_joined_answers_as_stacked)
{
    compare_policy("default.policy", false, &filter_memfd_unsealed);
    compare_policy("network.policy", false, &filter_memfd_hugetlb);
}

/* The join itself: "allow" answers of the first program go on to the second, nothing else. */
Test(filter_chain, a_join_only_continues_allowed_calls)
{
    static const struct sock_filter allow_odd[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 1, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
    };
    static const struct sock_filter refuse_3[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 13),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct filter f = {.prog = {{.insns = allow_odd, .n = 4}}, .n_prog = 1};
    const struct filter second = {.prog = {{.insns = refuse_3, .n = 4}}, .n_prog = 1};

    cr_assert_eq(filter_join_memfd(&f, &second), 0);
    cr_assert_eq(f.n_prog, 1);
    cr_assert_eq(f.prog[0].n, 8);
    for (int nr = 0; nr < 8; nr++) {
        struct seccomp_data d = {.nr = nr, .arch = AUDIT_ARCH_X86_64};
        uint32_t want = nr % 2 == 0 ? SECCOMP_RET_ERRNO | 1
                        : nr == 3   ? SECCOMP_RET_ERRNO | 13
                                    : SECCOMP_RET_ALLOW;
        cr_assert_eq(run_bpf(f.prog[0].insns, f.prog[0].n, &d), want, "nr %d", nr);
    }
    filter_free(&f);

    /* A program that still holds the dispatch program's mark is never loaded (it would allow
     * what the policy decides); nothing else is looked at first. */
    static const struct sock_filter marked[] = {BPF_STMT(BPF_RET | BPF_K, FILTER_RET_GO_ON)};
    const struct filter m = {.prog = {{.insns = marked, .n = 1}}, .n_prog = 1};
    int listener = 0;
    cr_assert_eq(filter_load(&m, &listener), -EINVAL);
    cr_assert_eq(listener, -1);

    /* An answer taken from A cannot be told apart from "allow": refused. */
    static const struct sock_filter from_a[] = {BPF_STMT(BPF_RET | BPF_A, 0)};
    struct filter g = {.prog = {{.insns = from_a, .n = 1}}, .n_prog = 1};
    cr_assert_eq(filter_join_memfd(&g, &second), -EINVAL);
    cr_assert_eq(g.prog[0].insns, from_a, "left as it was");
}

/* A policy of lines for every number libseccomp knows but seccomp: line() writes the i-th
 * one's (nr, name) into buf as snprintf() does. */
typedef int (*line_fn)(char *buf, size_t size, const char *name, int nr, unsigned i);
static char *each_system_call(line_fn line, size_t *ret_len)
{
    size_t size = 1 << 20, n = 0;
    char *text = malloc(size);
    unsigned i = 0;

    cr_assert_not_null(text);
    for (int nr = 0; nr < 1024; nr++) {
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        if (name && strcmp(name, "seccomp") != 0) {
            int w = line(text + n, size - n, name, nr, i++);
            cr_assert(w >= 0 && (size_t)w < size - n);
            n += (size_t)w;
        }
        free(name);
    }
    *ret_len = n;
    return text;
}

static int every_other_refused_sometimes(char *buf, size_t size, const char *name, int nr,
                                         unsigned i)
{
    (void)nr;
    if (i % 2)
        return snprintf(buf, size, "%s\n", name);
    return snprintf(buf, size, "%s\n%s: return EPERM if arg5 == 0x5a5a5a5a\n", name, name);
}

/* A policy file (--seccomp) that alternates calls allowed whatever their arguments with calls
 * that have an exception: ~460 runs of numbers, too many for the dispatch program's 8-bit
 * jumps. The stacked filters compile it; so must the joined ones, with the same answers. */
Test(filter_chain, a_policy_of_many_runs_compiles_and_answers_as_stacked)
{
    struct policy p = {0};
    struct policy_error e = {0};
    size_t len;
    char *text = each_system_call(every_other_refused_sometimes, &len);

    cr_assert_eq(policy_parse(text, len, "runs.policy", NULL, NULL, &p, &e), 0, "%s", e.message);
    free(text);
    compare_loaded("runs.policy", &p, true, &filter_memfd_unsealed, 2);
    policy_free(&p);
}

/* The lines a call gets in a policy file of random shape: every mix fast_allowed() must tell
 * apart (one allow; two; an allow and a refusal, in either order; conditional allows;
 * refusals of every action), in runs of every length for the dispatch program. */
#define N_SHAPES 13
static uint64_t shape_seed;
static bool shape_memfd_allowed;

static int random_shape(char *buf, size_t size, const char *name, int nr, unsigned i)
{
    (void)i;
    shape_seed = shape_seed * 6364136223846793005ULL + 1442695040888963407ULL;
    /* Half the calls allowed outright, the rest spread over the shapes and none. */
    unsigned k = (shape_seed >> 40) % 2 ? 0 : (unsigned)((shape_seed >> 33) % (N_SHAPES + 3));
    if (shape_memfd_allowed && nr == __NR_memfd_create)
        k = 0;
    switch (k) {
    case 0:
        return snprintf(buf, size, "%s\n", name);
    case 1:
        return snprintf(buf, size, "%s\n%s\n", name, name);
    case 2:
        return snprintf(buf, size, "%s: arg0 == 1\n", name);
    case 3:
        return snprintf(buf, size, "%s: arg0 == 1 || arg1 & 0x10 == 0x10\n", name);
    case 4:
        return snprintf(buf, size, "%s: return EPERM\n", name);
    case 5:
        return snprintf(buf, size, "%s: return EACCES\n", name);
    case 6:
        return snprintf(buf, size, "%s: kill\n", name);
    case 7:
        return snprintf(buf, size, "%s\n%s: return EPERM if arg0 == 1\n", name, name);
    case 8:
        return snprintf(buf, size, "%s: return EPERM if arg1 & 0x10 == 0x10\n", name);
    case 9:
        return snprintf(buf, size, "%s: return EACCES if arg0 == 0x10\n%s\n", name, name);
    case 10:
        return snprintf(buf, size, "%s: arg0 == 3\n%s: return EPERM if arg1 == 2\n", name, name);
    case 11:
        return snprintf(buf, size, "%s: kill if arg0 == 4\n%s\n", name, name);
    case 12:
        return snprintf(buf, size, "%s: return ENOSYS\n", name);
    }
    return 0; /* N_SHAPES and above: not named */
}

/* Policy files of random shapes (a fixed seed), joined and stacked, with and without notify.
 * Without notify the allow program stays a filter of its own, so where it refuses
 * memfd_create(2) the memfd program's EACCES wins over its errno (filter_join_memfd()): there
 * memfd_create is allowed outright. */
Test(filter_chain, policy_files_of_random_shape_joined_answer_as_stacked)
{
    const struct filter *memfds[] = {NULL, &filter_memfd_hugetlb, &filter_memfd_exec,
                                     &filter_memfd_unsealed};

    shape_seed = 0x2545f4914f6cdd1dULL;
    for (unsigned i = 0; i < 16; i++) {
        struct policy p = {0};
        struct policy_error e = {0};
        char name[32];
        size_t len;
        bool notify = i % 2 == 0;

        shape_memfd_allowed = !notify;
        char *text = each_system_call(random_shape, &len);
        (void)snprintf(name, sizeof(name), "random-%u.policy", i);
        cr_assert_eq(policy_parse(text, len, name, NULL, NULL, &p, &e), 0, "%s: %s", name,
                     e.message);
        free(text);
        compare_loaded(name, &p, notify, memfds[i / 2 % ELEMENTSOF(memfds)], 0);
        policy_free(&p);
    }
}

/* A policy's program too long for the memfd program to join it (a policy file near classic
 * BPF's 4,096 instructions; the stacked filters loaded the memfd filter on its own): the run
 * still gets the memfd program, stacked after the policy's, whose listener stays first. */
Test(filter_chain, a_program_too_long_to_join_still_takes_the_memfd_program)
{
    struct sock_filter *p = calloc(BPF_MAXINSNS, sizeof(*p));
    const unsigned n = BPF_MAXINSNS - 2;

    cr_assert_not_null(p);
    p[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                        offsetof(struct seccomp_data, nr));
    for (unsigned i = 1; i < n - 1; i++)
        p[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffff, 0, 0);
    p[n - 1] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct filter f = {.prog = {{.insns = p, .n = (unsigned short)n, .owned = true}},
                       .n_prog = 1,
                       .notify = true};

    cr_assert_eq(filter_join_memfd(&f, &filter_memfd_exec), 0);
    cr_assert_eq(f.prog[0].insns, p, "the policy's program first, as it was");
    cr_assert_eq(f.n_prog, 2);
    struct seccomp_data d = {.nr = __NR_memfd_create, .arch = AUDIT_ARCH_X86_64};
    cr_assert_eq(run_stack(&f, &d), SECCOMP_RET_ALLOW);
    d.args[1] = 0x10; /* MFD_EXEC */
    cr_assert_eq(run_stack(&f, &d), SECCOMP_RET_ERRNO | EACCES);
    d.args[1] = 0x4; /* MFD_HUGETLB */
    cr_assert_eq(run_stack(&f, &d), SECCOMP_RET_ERRNO | EACCES);
    filter_free(&f);
}
