/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Steps of the sandbox's init (PID 1 of its pid namespace), called by sandbox.c in the order
 * its header comment gives. Those that take a struct report_step fill it on failure (step and
 * detail, report.h); the others return a bare -errno and sandbox.c names the step. The
 * payload's own steps are sandbox_payload_exec() (sandbox.h), also used by a session's init.
 */
#pragma once

#include "written.h"

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "copy.h"
#include "report.h"
#include "sandbox.h"

/* Kernel settings of the sandbox's own namespaces: the user namespace's budgets (user.max_*),
 * vm.memfd_noexec and kernel.shm* where the host's root runs it. While init holds every
 * capability in them, before it switches ids and before pivot_root (through the host's
 * /proc/sys). Returns 0 or -errno. */
int init_sysctls(const struct sandbox_plan *sb, struct report_step *e);

/* Unpack the copy-in stream (sb->copy_in_fd, then closed) below "/", as the sandbox's uid.
 * No-op without one. Returns 0 or -errno. */
int init_copy_in(struct sandbox_plan *sb, struct report_step *e);

/* Bring up lo in the sandbox's network namespace (needs CAP_NET_ADMIN there). Returns 0 or
 * -errno of ioctl(2). */
int init_loopback_up(void);

/* The proxy's listening socket on PROXY_ADDRESS:PROXY_PORT in the sandbox's network namespace
 * (proxy.h), for the supervisor to take. Returns the descriptor or -errno. */
int init_proxy_listen(void);

/* Set every signal this process ignores or catches back to SIG_DFL (those already at SIG_DFL are
 * left alone), for init and the payload it forks. status is a read of /proc/self/status made
 * since the dispositions last changed (caps_drop_all()'s), or NULL to read it here. Cannot
 * fail: a signal whose disposition cannot be changed (SIGKILL, SIGSTOP, glibc's own) is
 * skipped, as signal(2) refuses it; an unreadable status resets all. */
void init_default_signals(const char *status);

/* Zero this process's copy of nsbox's command line, which /proc/1/cmdline shows. Returns 0,
 * or -errno (-EIO for a /proc/self/stat it cannot read). */
int init_wipe_cmdline(void);

/* Set both limits of resource to value (setrlimit(2)). Returns 0 or -errno. */
int init_set_rlimit(int resource, uint64_t value);

/* The per-user budgets charged through the sandbox's user namespace (RLIMIT_SIGPENDING,
 * _MSGQUEUE, _MEMLOCK), RLIMIT_NOFILE, RLIMIT_FSIZE (the largest file the sandbox could
 * hold), no real-time priority and no raised nice value; each lowered to the caller's hard
 * limit where that is lower. Returns 0 or -errno. */
int init_budgets(const struct sandbox_plan *sb, struct report_step *e);

/* The RLIMIT_FSIZE init_budgets() sets: the largest of sb's --memory, --shm-size, /work and
 * tmpfs sizes (a session step with a lower --memory gets it from a config with that memory);
 * RLIM_INFINITY with --memory unlimited. */
uint64_t sandbox_fsize(const struct sandbox_plan *sb);

/* The copy-out (--copy-out, a workspace's /work) once the payload has ended, or a session
 * ends: kill and reap every other process of the pid namespace, then pack sb->out_shown's
 * sources into the memfd out_fd within the caps. rep gets copy_taken, copy_err (0 or the errno
 * that stopped the stream) and copy_unlisted. */
void init_copy_out(const struct sandbox_plan *sb, int out_fd, struct report *rep);

/* Pack paths[0..n) (absolute sandbox paths, opened with O_NOFOLLOW one component at a time)
 * into the memfd out_fd as entries "i/BASENAME/...", within caps; exclude_in_last (or NULL) is
 * a path below the last one left out. Skipped entries are listed in the stream. rep gets
 * copy_taken, copy_err and copy_unlisted as for init_copy_out(). Returns 0 or -errno. Does not
 * kill anything first: the caller makes sure nothing changes the tree meanwhile, or that it
 * does not matter (a session step's copy-out, session-init.c). */
int init_pack_out(const char *const *paths, size_t n, const struct copy_caps *caps,
                  const char *exclude_in_last, int out_fd, struct report *rep);

/* PID 1's loop once the payload (pid payload) runs: reap every child, forward the signals in
 * mask but SIGCHLD to the payload's process group; when the payload has ended, write the
 * copy-out stream to copy_out_fd (if >= 0), report the files it wrote in /work against before
 * (written_report()), report how it ended with how full /dev/shm (shm_fd) and /work (work_fd)
 * were on report_fd, and _exit(). */
_Noreturn void init_loop(const struct sandbox_plan *sb, pid_t payload, const sigset_t *mask,
                         int report_fd, int shm_fd, int work_fd, int copy_out_fd,
                         const struct written_snapshot *before);
