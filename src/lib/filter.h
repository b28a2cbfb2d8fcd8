/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A seccomp policy compiled into filters (libseccomp) for the native architecture.
 *
 * libseccomp cannot compare one argument twice in a rule, and an unconditional rule silently
 * replaces conditional rules of the same system call. A policy is therefore compiled into up
 * to three filters that are stacked; for each system call the kernel takes the most restrictive
 * result, and between two errno results the one of the filter loaded last (seccomp(2)):
 *   allow    default EPERM; the policy's allow, "return ERRNO" and "kill" lines;
 *   refuse   default allow; the "return ERRNO if" and "kill if" lines (omitted when none);
 *   unknown  default ENOSYS; allows every system call this libseccomp knows, so that only
 *            newer ones (unknown here) fail with ENOSYS instead of EPERM.
 * System calls of another ABI (i386, x32) kill the process in all three. seccomp(2) itself is
 * always allowed: any filter the payload adds can only restrict it further.
 * A run loads them joined into as few programs as give the same answers (filter.c,
 * join_programs(); tests/unit/test-filter-chain.c checks every system call against the
 * stacked ones): with seccomp notifications one program (unknown, with the answers for the
 * calls the policy allows unconditionally; refuse; allow; the memfd program, memfd.h),
 * without them two (allow; unknown and refuse).
 */
#pragma once

#include <linux/filter.h>
#include <seccomp.h>
#include <stdbool.h>

#include "policy.h"

/* The dispatch program's "on to the policy's programs" (filter.c): a mark that joining turns
 * into a jump, never loaded (filter_load() refuses it: as SECCOMP_RET_ALLOW with data, the
 * kernel would allow the call). */
#define FILTER_RET_GO_ON (SECCOMP_RET_ALLOW | 1U)

/* One classic BPF program, ready for seccomp(SECCOMP_SET_MODE_FILTER). */
struct filter_program {
    const struct sock_filter *insns;
    unsigned short n; /* instructions */
    bool owned;       /* insns was malloc()ed */
};

/* The programs of a policy, in load order: allow, refuse if any, unknown; with notify, the
 * refuse and allow programs are one (the refuse part first), so that the listener sees both. */
struct filter {
    struct filter_program prog[3];
    unsigned n_prog;
    bool notify; /* the allow program's refusals go to a listener (SECCOMP_RET_USER_NOTIF) */
};

/* Called with a rule and what is wrong with it: a system call unknown on this architecture
 * (the rule is skipped), or a comparison that high bits of an argument could slip past. */
typedef void (*filter_warn_fn)(const struct policy_rule *rule, const char *message, void *userdata);

/*
 * Compile p into *ret. What warn is told about is an error instead when warn is NULL (-ENOENT
 * for an unknown system call, -EINVAL for a weak comparison): nsbox's own policy is held to
 * that. Conflicting rules (an unconditional and a conditional allow rule for one system call,
 * different actions among the lines of one system call) are an error (-EINVAL), since
 * libseccomp would drop some of them silently. In refusals ("... if"), "argN == V" compares the
 * low 32 bits, so that it also refuses V with high bits set.
 * notify: the EPERM answers (the allow program's default, "return EPERM" lines and "return
 * EPERM if" exceptions) and the ENOSYS answers of the calls filter_refusal_errno() names become
 * SECCOMP_RET_USER_NOTIF, for a supervisor that answers with filter_refusal_errno() and
 * records the system call; the refuse and allow programs are then joined into one. A policy
 * whose "kill" lines and "return ERRNO if" exceptions name one system call is an error
 * (-EINVAL): joined, the exception would win over the kill.
 * The unknown program is joined in front of the last one (filter.c says why the answers stay
 * those of the stacked filters): with notify *ret holds one program, without two; where that
 * would not fit classic BPF (a policy file of more than ~250 runs of numbers, or of a program
 * near BPF_MAXINSNS), it is stacked on its own after them, one program more.
 * Returns 0, -ENOMEM, or libseccomp's -errno; on error *e names the rule and *ret is untouched.
 */
int filter_compile(const struct policy *p, filter_warn_fn warn, void *userdata, bool notify,
                   struct filter *ret, struct policy_error *e);

/* p's three programs as filter_compile() without notify makes them, before any join: allow,
 * refuse (where p has refusals), unknown, to be stacked in that order. What the joined
 * programs are checked against (tests/unit/test-filter-chain.c). Returns as filter_compile(),
 * with every warning an error. */
int filter_compile_stacked(const struct policy *p, struct filter *ret, struct policy_error *e);

/* Join memfd's one program after f's last (in init, once vm.memfd_noexec says which one,
 * memfd.h): the last program's "allow" answers go on to it, so a call the policy allows gets
 * the memfd program's answer, and one the policy refuses keeps the policy's. Stacked (the memfd
 * filter first), the answers are the same but where a policy refuses memfd_create(2) by
 * notification: stacked, the memfd filter's EACCES would win over it; joined, the listener
 * answers EPERM and records the call. A policy that kills it or answers an errno gets the same
 * answer either way, but without notify where the allow program refuses it (EPERM, or its
 * errno): that program stays a filter of its own, loaded before the one the memfd program
 * joins, so for the memfds that program refuses EACCES wins the tie, where stacked the
 * policy's errno did (a refusal either way); the built-in policies allow it. Where the join would
 * pass BPF_MAXINSNS (a policy file's long program), memfd's program is stacked after f's last
 * instead, not copied (memfd must outlive f): loaded last, its EACCES then also wins over a
 * policy's own errno for the memfds it refuses. Returns 0, -EINVAL (no program in f, or not one in
 * memfd, or f's last answers with A), -E2BIG past BPF_MAXINSNS with no room to stack, -ENOMEM. */
int filter_join_memfd(struct filter *f, const struct filter *memfd);

/* The built-in policy/default.policy and policy/network.policy, compiled when nsbox was built
 * (filter-default.c, generated by nsbox-bpfgen), without and with notify. Not owned:
 * filter_free() on them does nothing. */
extern const struct filter filter_default;
extern const struct filter filter_default_notify;
extern const struct filter filter_network;
extern const struct filter filter_network_notify;

/* Load the programs into the calling thread, in order, with seccomp(2). no_new_privs must be
 * set already (or CAP_SYS_ADMIN held). With f->notify, *ret_listener is the listener's
 * descriptor (O_CLOEXEC), else -1. Returns 0, -EINVAL for a program that still holds
 * FILTER_RET_GO_ON (nothing loaded), or the kernel's -errno. */
int filter_load(const struct filter *f, int *ret_listener);

/* The errno a reported refusal of native system call nr gets: ENOSYS for inotify_init and
 * inotify_init1 (so that programs fall back to polling, as where inotify is missing), else
 * EPERM. */
int filter_refusal_errno(long nr);

/* Refuse semget(2) and msgget(2), and with shm shmget(2), in f, as the policy refuses a system
 * call (with f->notify, to the listener, which answers filter_refusal_errno(), EPERM, and
 * records it; else EPERM): for a run whose System V IPC nothing bounds. Semaphore sets and
 * message queues are kernel memory that no rlimit counts (a cgroup does), and nsbox sets none
 * of kernel.sem, kernel.msgmni or kernel.msgmnb; shared memory is bounded where init sets
 * kernel.shm* (root's runs, init.c), so shm is for the others. Without the get calls no object
 * exists in the sandbox's own IPC namespace, so semop, msgsnd, shmat and their kin have nothing
 * to work on. Seven or eight instructions are put before f's first program, which becomes
 * owned: for the native architecture only (another ABI goes on to the program, which refuses
 * it). Returns 0, -E2BIG past BPF_MAXINSNS, -EINVAL without a program, or -ENOMEM. */
int filter_refuse_sysv_ipc(struct filter *f, bool shm);

/* true if this kernel has SECCOMP_RET_USER_NOTIF and pidfd_getfd(2). */
bool filter_notify_supported(void);

/* Compile p and write its filters in libseccomp's pseudo filter code (PFC) to fd, each under a
 * heading. Returns 0 or a -errno, with *e filled as filter_compile(). */
int filter_dump(const struct policy *p, int fd, struct policy_error *e);

/* ctx's program, exported into *ret (malloc()ed, owned). Returns 0 or -errno. */
int filter_export_program(scmp_filter_ctx ctx, struct filter_program *ret);

/* Release what filter_compile() allocated; safe on a zeroed struct and on filter_default. */
void filter_free(struct filter *f);
