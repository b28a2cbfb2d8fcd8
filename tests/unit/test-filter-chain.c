/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The joined refuse+allow program of a reporting sandbox (chain_programs() in src/lib/filter.c)
 * answers every system call as the two programs stacked would, once its notifications are read
 * as the supervisor answers them (filter_refusal_errno()): run both on a small classic BPF
 * interpreter over every system call number of the native ABI, of x32 and of i386, with
 * argument values the refusals name. */
#include <criterion/criterion.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "filter.h"
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

static void compare_policy(const char *name)
{
    struct policy p = {0};
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

    cr_assert_eq(policy_load_builtin(name, &p, &e), 0, "%s", e.message);
    cr_assert_eq(filter_compile(&p, NULL, NULL, false, &stacked, &e), 0, "%s", e.message);
    cr_assert_eq(filter_compile(&p, NULL, NULL, true, &joined, &e), 0, "%s", e.message);
    cr_assert_eq(joined.n_prog + 1, stacked.n_prog, "%s: the joined filter is one program less",
                 name);
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
                uint32_t want = run_stack(&stacked, &d);
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
    policy_free(&p);
}

Test(filter_chain, default_policy_joined_answers_as_stacked)
{
    compare_policy("default.policy");
}

Test(filter_chain, network_policy_joined_answers_as_stacked)
{
    compare_policy("network.policy");
}
