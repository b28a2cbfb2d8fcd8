/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The supervisor: the nsbox process outside the sandbox. It waits for the sandbox's init on a
 * pidfd, captures the payload's output, enforces the wall clock, forwards signals and collects
 * the reports the sandbox sends over its report pipe; with --network allow= it also serves the
 * proxy (proxy.h) in the same poll loop.
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nsbox.h"
#include "proxy.h"

/*
 * The signals `nsbox run` acts on: every one whose default action would end nsbox (signal(7))
 * and that another process can send, but SIGPIPE (ignored: a closed stdout must not end the
 * run) and the ones the kernel sends for nsbox's own faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGTRAP, SIGSYS, SIGABRT: blocking those would not stop them, abort(3) unblocks its own).
 * SIGUSR1 is `nsbox kill`; SIGINT, SIGTERM and SIGHUP are forwarded to the payload; every other
 * one counts as SIGTERM, so that no signal ends nsbox without a result, an audit "end" record
 * and the sandbox torn down. Blocked from run_main()'s start to its exit and read on a
 * signalfd; the payload starts with none blocked.
 */
void supervise_signal_set(sigset_t *set);

struct supervise_fds {
    int pidfd; /* of the sandbox's init; never closed here */
    int out;   /* read ends of the payload's stdout and stderr pipes, closed here */
    int err;
    int report;     /* read end of the report pipe, closed here */
    int signalfd;   /* supervise_signal_set()'s when forwarding signals, else -1; not closed here */
    int stdin_src;  /* the caller's stdin to relay to the payload, or -1; not closed here */
    int stdin_dst;  /* the supervisor's end of the payload's stdin socket, or -1; closed here */
    int sync;       /* write end of the sync pipe: one byte tells init the listener was taken */
    pid_t init_pid; /* the sandbox's init, as this process sees it */
    struct proxy *proxy; /* --network allow=: served here (proxy.h), or NULL; not freed here */
    /* Tier 3 (tier3.h), which has no pid namespace to take its processes with it: init leads
     * a process group the program cannot leave, and every kill of init, and init's end, also
     * kills that group (kill(-init_pid), while init is not reaped yet, so the id is still
     * its). */
    bool kill_group;
};

/*
 * Run until the sandbox's init has exited and been reaped and every pipe has reached EOF, or
 * a short grace (DRAIN_GRACE_USEC in supervise.c) after init's exit, whichever is first: a pipe
 * something outside the sandbox still holds open cannot keep nsbox waiting (its stream is then
 * marked incomplete, with a warning). Signals on fds->signalfd are handled throughout.
 * start: now_usec() when the sandbox was created. Fills ret's status, exit_code, signal,
 * wall_time (until this returns), out, err and error fields.
 * Returns 0, or -errno when the supervisor itself failed (poll(2), waitid(2)), after killing and
 * reaping the sandbox.
 */
int supervise(const struct nsbox_config *c, struct supervise_fds *fds, uint64_t start,
              struct nsbox_result *ret);

/* The pace at which refused system calls are answered, by runs (supervise()) and sessions
 * (session.c) alike: a burst of NOTIF_BURST at once, then one every NOTIF_INTERVAL_USEC
 * (microseconds), the listener not polled in between (supervise.c says why). */
#define NOTIF_BURST 1000
#define NOTIF_INTERVAL_USEC 1000 /* 1000 answers a second */

/* Answer one notification of the seccomp listener: the sandbox's init's own calls (init_pid, as
 * this process sees it) go through, everything else is refused with EPERM and recorded in ret.
 * Returns false when the listener is done (no more filter users). For the session supervisor
 * (session.c), which runs its own loop. */
bool supervise_answer_notification(int listener, pid_t init_pid, bool no_network,
                                   struct nsbox_result *ret);
