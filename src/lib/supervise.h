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

#include "headtail.h"
#include "nsbox.h"
#include "proxy.h"
#include "report.h"
#include "termsafe.h"

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

#define SUPERVISE_READ_CHUNK (64 * 1024)

/* One output stream of the payload (a run) or of a step (a started sandbox). */
struct stream_state {
    struct nsbox_stream *s;
    int fd;      /* read end (O_NONBLOCK), -1 at EOF */
    int copy_fd; /* where output is copied as it arrives, or -1 */
    int file_fd; /* where all of it is written (nsbox_config.stdout_file_fd), or -1 */
    uint64_t limit;
    struct headtail kept; /* the start and the end of the stream (headtail.h) */
    char *escaped;        /* copy_fd is a terminal: the copy is escaped here, else NULL */
    struct termsafe term;
    bool reader_gone; /* copy_fd's reader went away (EPIPE): pass that on */
    /* A step's caller (nsbox_step.on_output): every byte read, as it comes; or NULL. */
    void (*on_output)(int fd, const char *data, size_t size, void *userdata);
    void *userdata;
    int out_fd; /* 1 or 2, for on_output */
};

/*
 * The supervisor: the one loop that serves a sandbox, for a run (supervise()) and for a
 * started sandbox's steps (lifecycle.c) alike. Its events come from supervisor_pollfds(),
 * poll(2) and supervisor_dispatch(): the sandbox's init (its pidfd), its report pipe, the
 * seccomp listener (paced), the output streams, and for a run the caller's signals and stdin;
 * the proxy of --network allow= serves in the same loop. A run's clock kills the sandbox; a
 * step's is lifecycle.c's (it interrupts the step on the control channel).
 */
struct supervisor {
    const struct nsbox_config *c;
    struct supervise_fds *fds;
    struct nsbox_result *ret; /* where what the sandbox reports goes now */
    bool steps;               /* a started sandbox (lifecycle.c): no run clock, no signals */
    bool take_written;        /* steps: a step runs, its files written go to ret */
    int error;                /* -errno: the supervisor itself failed */
    bool setup_failed;        /* steps: init reported a setup failure */
    bool init_running;
    bool killed_by_request; /* SIGUSR1 (`nsbox kill`) while the sandbox ran */
    bool stop;              /* a signal came after the sandbox ended: stop draining */
    bool killed, timed_out;
    int forwarded; /* signals but SIGUSR1 received while the sandbox ran */
    int init_status, init_code;
    uint64_t kill_at;     /* when to kill the sandbox (monotonic usec), UINT64_MAX: never */
    uint64_t drain_until; /* after init's exit, the end of the grace for the pipes */
    uint64_t notif_at;    /* when the next notification may be answered (see NOTIF_BURST) */
    int listener;         /* the seccomp listener, once taken, or -EBADF */
    /* Which entry of seen_for's refused[] a system call counts in (-1: refused_other), so
     * that a notification costs no name lookup and no malloc once its number was seen. */
    struct {
        uint32_t arch;
        int nr;
        int idx;
    } seen[NSBOX_REFUSED_MAX + 16];
    size_t n_seen;
    const struct nsbox_result *seen_for;
    /* The report pipe: watched while init may still hand something over and until how the
     * payload ended is in (a run); always (steps). */
    int report_fd;
    bool report_watched;
    struct report_reader reader;
    struct report final, failure;
    /* --stdin: the caller's stdin copied into the payload's stdin socket, a buffer at a time. */
    char *in_buf;
    size_t in_len, in_off;
    bool in_eof;
    struct stream_state streams[2];
    char *buf, *escaped[2];
    /* Where supervisor_pollfds() put what, for supervisor_dispatch(). */
    int idx_pid, idx_sig, idx_rep, idx_stream[2], idx_in_src, idx_in_dst, idx_listener;
    size_t idx_proxy, n_proxy;
    bool proxy_polled;
};

/* Set sv up for a run (steps false: the payload's streams are fds->out and fds->err) or a
 * started sandbox (steps true: no streams until supervisor_step_streams()). start: now_usec()
 * when the sandbox was made. Returns 0 or -ENOMEM/-errno; supervisor_free() either way. */
int supervisor_init(struct supervisor *sv, const struct nsbox_config *c, struct supervise_fds *fds,
                    uint64_t start, struct nsbox_result *ret, bool steps);
/* Free what supervisor_init() allocated; close the listener and the streams' pipes. */
void supervisor_free(struct supervisor *sv);
/* At most how many entries supervisor_pollfds() fills. */
size_t supervisor_pollfds_max(const struct supervisor *sv);
/* Fill p with what to poll now, lower *deadline (monotonic usec) to when dispatch must run
 * even without an event. Returns the number filled. */
size_t supervisor_pollfds(struct supervisor *sv, struct pollfd *p, uint64_t *deadline);
/* Act on p's events (as supervisor_pollfds() filled them) and on the clock. Sets sv->error
 * when the supervisor failed and sv->setup_failed when init reported a setup failure (steps). */
void supervisor_dispatch(struct supervisor *sv, const struct pollfd *p, size_t n);
/* Read what the report pipe has (steps: every whole report there is; a run: one). */
void supervisor_reports(struct supervisor *sv);
/* A step's output pipes (steps mode): read into ret's streams, within limit bytes each, passed
 * to on_output as they come. Returns 0 or -ENOMEM. */
int supervisor_step_streams(struct supervisor *sv, int out_fd, int err_fd, struct nsbox_result *ret,
                            uint64_t limit, void (*on_output)(int, const char *, size_t, void *),
                            void *userdata);
/* Whether both streams reached EOF (or were never opened). */
bool supervisor_streams_done(const struct supervisor *sv);
/* Read what the streams' pipes hold now (at most their capacity), mark a stream not at EOF
 * incomplete, close them; the tails join the heads. */
void supervisor_streams_finish(struct supervisor *sv);

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
