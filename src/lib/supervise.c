/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "filter.h"
#include "headtail.h"
#include "macro.h"
#include "report.h"
#include "result.h"
#include "supervise.h"
#include "syscalls.h"
#include "termsafe.h"
#include "written.h"

/* How long the payload has after a forwarded SIGINT/SIGTERM/SIGHUP before the sandbox is
 * killed; a second signal kills at once. */
#define SIGNAL_GRACE_USEC (5 * 1000000ULL)

/*
 * Each system call the policy refuses is a seccomp user notification that this process,
 * outside every limit of the sandbox, receives and answers (two ioctls and a wake-up): a
 * payload looping on a refused call would make it burn most of a CPU. So answers are paced by
 * a generic cell rate algorithm: a burst of NOTIF_BURST at once, then one every
 * NOTIF_INTERVAL_USEC; in between the listener is not polled, and a caller waits in the kernel
 * for its answer (seccomp_unotify(2): the wait is killable, so the timeout and `nsbox kill`
 * still end it). The waiting is the payload's, not the supervisor's. An ordinary program makes
 * a few refused calls in all, never 1000 a second.
 */

/* How long nsbox keeps reading the output pipes once the sandbox's init has exited. In a pid
 * namespace of its own every writer is dead by then (the kernel killed and reaped the rest of
 * the namespace before init's pidfd became readable), so what the payload wrote is already in
 * the pipes and EOF follows at once: the grace costs an ordinary run nothing. A pipe still
 * open then is held by something outside the sandbox's processes: a background process of
 * --pid host, or a write end parked in a unix socket message in flight (an SCM_RIGHTS cycle
 * the kernel's collector frees only when some unix socket on the host is closed, unix_gc()),
 * or passed to a host process. Waiting for it would make the run's end the payload's choice
 * (it stopped `nsbox kill` and --timeout), so nsbox waits this long, reads what the pipes hold,
 * and finishes, saying that output may be missing. 200 ms covers a writer outside that was
 * mid-write or not yet scheduled when the payload ended (tens of ms on a busy host) and is
 * short enough that nobody waits on it. */
#define DRAIN_GRACE_USEC (200 * 1000ULL)

#define READ_CHUNK (64 * 1024)

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
};

/* The supervisor's state that signals change. */
struct supervisor {
    const struct supervise_fds *fds;
    bool init_running;
    bool killed_by_request; /* SIGUSR1 (`nsbox kill`) while the sandbox ran */
    bool stop;              /* a signal came after the sandbox ended: stop draining */
    int forwarded;          /* signals but SIGUSR1 received while the sandbox ran */
    uint64_t kill_at;       /* when to kill the sandbox (monotonic usec), UINT64_MAX: never */
    uint64_t notif_at;      /* when the next notification may be answered (see NOTIF_BURST) */
    /* Which entry of the result's refused[] a system call counts in (-1: refused_other), so
     * that a notification costs no name lookup and no malloc once its number was seen. */
    struct {
        uint32_t arch;
        int nr;
        int idx;
    } seen[NSBOX_REFUSED_MAX + 16];
    size_t n_seen;
};

void supervise_signal_set(sigset_t *set)
{
    static const int terminating[] = {SIGHUP,    SIGINT,  SIGQUIT,   SIGUSR1, SIGUSR2,
                                      SIGALRM,   SIGTERM, SIGSTKFLT, SIGXCPU, SIGXFSZ,
                                      SIGVTALRM, SIGPROF, SIGIO,     SIGPWR};

    sigemptyset(set);
    for (size_t i = 0; i < ELEMENTSOF(terminating); i++)
        sigaddset(set, terminating[i]);
    /* The real-time signals glibc leaves to programs (below SIGRTMIN are its own). */
    for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
        sigaddset(set, s);
}

/* Act on every signal waiting on the signalfd. SIGUSR1 (`nsbox kill`) kills the sandbox at
 * once; the first other one is forwarded (init passes it on to the payload's process group:
 * SIGINT, SIGTERM and SIGHUP as they are, any other as SIGTERM, the signal init forwards) with
 * SIGNAL_GRACE_USEC to end, a second kills. After the sandbox ended, any of them ends the
 * drain. */
static void handle_signals(struct supervisor *sv)
{
    struct signalfd_siginfo si;

    if (sv->fds->signalfd < 0)
        return;
    while (read(sv->fds->signalfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (!sv->init_running)
            sv->stop = true;
        else if (si.ssi_signo == SIGUSR1) {
            sv->killed_by_request = true;
            sv->kill_at = 0;
        } else if (sv->forwarded++ == 0) {
            int sig = (int)si.ssi_signo;

            if (sig != SIGINT && sig != SIGHUP)
                sig = SIGTERM;
            (void)sys_pidfd_send_signal(sv->fds->pidfd, sig);
            uint64_t grace = now_usec() + SIGNAL_GRACE_USEC;
            if (grace < sv->kill_at)
                sv->kill_at = grace;
        } else
            sv->kill_at = 0;
    }
}

/* Copy n bytes to st->copy_fd without blocking past sv->kill_at: a reader that stops reading
 * must not stop the wall clock, nor `nsbox kill` (signals are handled while waiting). Writes at
 * most PIPE_BUF bytes after each POLLOUT, which a pipe takes without blocking (pipe(7)). On
 * EPIPE, another error or the deadline, copying stops for good (capture goes on); EPIPE also
 * sets st->reader_gone. nsbox ignores SIGPIPE (cmd-run.c, cmd-session.c), so EPIPE comes back as an
 * error. */
static void copy_out(struct supervisor *sv, struct stream_state *st, const char *p, size_t n)
{
    while (n > 0 && st->copy_fd >= 0 && !sv->stop) {
        struct pollfd pfd[2] = {{.fd = st->copy_fd, .events = POLLOUT},
                                {.fd = sv->fds->signalfd, .events = POLLIN}};
        uint64_t now = now_usec();
        int timeout_ms = -1, k;
        ssize_t w;

        if (sv->kill_at != UINT64_MAX) {
            if (now >= sv->kill_at)
                break;
            timeout_ms = (int)((sv->kill_at - now + 999) / 1000);
        }
        k = poll(pfd, sv->fds->signalfd >= 0 ? 2 : 1, timeout_ms);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        if (pfd[1].revents) {
            handle_signals(sv);
            continue;
        }
        if (pfd[0].revents & POLLNVAL)
            break;
        /* POLLERR on a pipe or socket whose reader has gone: the write says EPIPE. */
        w = write(st->copy_fd, p, n < PIPE_BUF ? n : PIPE_BUF);
        if (w < 0 && (errno == EINTR || errno == EAGAIN) && !(pfd[0].revents & (POLLERR | POLLHUP)))
            continue;
        if (w < 0 && errno == EPIPE)
            st->reader_gone = true;
        if (w <= 0)
            break;
        p += w;
        n -= (size_t)w;
    }
    if (n > 0)
        st->copy_fd = -1;
}

/* Copy n bytes of output out, escaped for a terminal when the caller asked (termsafe.h). */
static void stream_copy(struct supervisor *sv, struct stream_state *st, const char *p, size_t n)
{
    if (st->copy_fd < 0)
        return;
    if (st->escaped)
        copy_out(sv, st, st->escaped, termsafe_escape(&st->term, p, n, st->escaped));
    else
        copy_out(sv, st, p, n);
}

/* All of the stream into the caller's file (--stdout-file), as it comes. A regular file: the
 * writes block only as long as the disk takes. The first failure (ENOSPC, EFBIG, EIO) stops
 * the writing for good and is said in the result (the file holds what came before it). */
static void stream_to_file(struct stream_state *st, const char *p, size_t n)
{
    st->s->file_asked = true;
    while (n > 0) {
        ssize_t w = write(st->file_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            st->s->file_error = w < 0 ? errno : EIO;
            st->file_fd = -1;
            if (st->s->file_error == EFBIG) {
                /* Past RLIMIT_FSIZE the kernel also sends this thread SIGXFSZ (setrlimit(2)),
                 * which nsbox blocks and would take from its signalfd for a signal to pass on:
                 * it is nsbox's own, so it is taken here instead. */
                sigset_t xfsz;
                struct timespec now = {0};
                sigemptyset(&xfsz);
                sigaddset(&xfsz, SIGXFSZ);
                (void)sigtimedwait(&xfsz, NULL, &now);
            }
            return;
        }
        st->s->file_bytes += (uint64_t)w;
        p += w;
        n -= (size_t)w;
    }
}

/* Read what is there; keep its start and its end within limit bytes, count everything
 * (headtail.h). Returns the bytes read, -EAGAIN when there is nothing to read now, 0 at EOF
 * (or on an error, which ends the stream the same way). */
static ssize_t stream_read(struct supervisor *sv, struct stream_state *st, char *buf)
{
    ssize_t n = read(st->fd, buf, READ_CHUNK);
    size_t keep;

    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? -EAGAIN : 0;
    if (n == 0)
        return 0;
    /* At most limit bytes, whose JSON string is at most JSON_OUTPUT_FACTOR x limit: the
     * result, and nsbox's memory while it encodes it, stay a small multiple of the limit
     * whatever the bytes are. What is copied out is what is kept: the head as it comes, the
     * tail once the stream has ended (stream_copy_tail()). */
    keep = headtail_add(&st->kept, buf, (size_t)n);
    if (keep > 0)
        stream_copy(sv, st, buf, keep);
    if (st->file_fd >= 0)
        stream_to_file(st, buf, (size_t)n);
    if (st->reader_gone) {
        /* Whoever reads nsbox's output has gone (`nsbox run ... | head -1`): stop reading the
         * program's pipe, as a shell pipeline would, so that its next write fails with EPIPE
         * (SIGPIPE, BrokenPipeError) rather than running on into a limit; the result keeps
         * what came before. Only where output is copied out as it comes (not under --json,
         * where nsbox's stdout gets only the result). */
        return 0;
    }
    return n;
}

/* The stream has ended: close the pipe. */
static void stream_close(struct supervisor *sv, struct stream_state *st)
{
    (void)sv;
    (void)close(st->fd);
    st->fd = -1;
}

/* Nothing more comes: the tail joins the head (headtail_finish()) and is copied out after it,
 * on a terminal behind a line that says what was cut between them, then what the escaping held
 * back. The sandbox has ended: a reader that does not read gets a second, not the rest of the
 * run's clock (which may be over), as copy_out() waits at most until sv->kill_at. */
static void stream_copy_tail(struct supervisor *sv, struct stream_state *st)
{
    struct nsbox_stream *s = st->s;
    size_t tail;

    if (!s->data)
        return;
    tail = headtail_finish(&st->kept);
    if (st->copy_fd < 0)
        return;
    sv->kill_at = now_usec() + 1000000ULL;
    if (tail > 0 && st->escaped) {
        char line[160];
        int n = snprintf(line, sizeof(line),
                         "%s[... %llu bytes, %llu lines cut (--output-limit)"
                         " ...]\n",
                         s->head > 0 && s->data[s->head - 1] != '\n' ? "\n" : "",
                         (unsigned long long)(s->total - s->captured),
                         (unsigned long long)s->cut_lines);
        copy_out(sv, st, st->escaped, termsafe_finish(&st->term, st->escaped));
        st->term = (struct termsafe){0};
        copy_out(sv, st, line, (size_t)n);
    }
    if (tail > 0)
        stream_copy(sv, st, s->data + s->head, tail);
    if (st->escaped && st->copy_fd >= 0)
        copy_out(sv, st, st->escaped, termsafe_finish(&st->term, st->escaped));
}

/* After the grace: read what the pipe holds now, at most its capacity (a writer outside could
 * keep it full forever), then stop reading. A stream not at EOF is marked incomplete. */
static void stream_finish(struct supervisor *sv, struct stream_state *st, char *buf)
{
    int capacity;
    ssize_t n = -EAGAIN;

    if (st->fd < 0)
        return;
    capacity = fcntl(st->fd, F_GETPIPE_SZ);
    for (int64_t left = capacity > 0 ? capacity : 1 << 20; left > 0; left -= n) {
        n = stream_read(sv, st, buf);
        if (n <= 0)
            break;
    }
    if (n != 0)
        st->s->incomplete = true;
    stream_close(sv, st);
}

static void record_refusal(struct supervisor *sv, struct nsbox_result *ret, uint32_t arch, int nr)
{
    char name[sizeof(ret->refused[0].name)];
    char *resolved = NULL;
    int idx = -1;

    for (size_t i = 0; i < sv->n_seen; i++)
        if (sv->seen[i].arch == arch && sv->seen[i].nr == nr) {
            if (sv->seen[i].idx < 0)
                ret->refused_other++;
            else
                ret->refused[sv->seen[i].idx].count++;
            return;
        }
    resolved = seccomp_syscall_resolve_num_arch(arch, nr);
    if (resolved)
        (void)snprintf(name, sizeof(name), "%s", resolved);
    else
        (void)snprintf(name, sizeof(name), "nr:%d", nr);
    free(resolved);
    for (size_t i = 0; i < ret->n_refused && idx < 0; i++)
        if (strcmp(ret->refused[i].name, name) == 0)
            idx = (int)i; /* the same name on another architecture */
    if (idx < 0 && ret->n_refused < NSBOX_REFUSED_MAX) {
        idx = (int)ret->n_refused++;
        memcpy(ret->refused[idx].name, name, sizeof(name));
        ret->refused[idx].count = 0;
    }
    if (idx < 0)
        ret->refused_other++;
    else
        ret->refused[idx].count++;
    if (sv->n_seen < ELEMENTSOF(sv->seen))
        sv->seen[sv->n_seen++] = (typeof(sv->seen[0])){.arch = arch, .nr = nr, .idx = idx};
}

/* Whether mode (a chmod or create mode, read as the kernel reads it, a umode_t) asks for a
 * set-user-ID or set-group-ID bit. */
static bool setid_mode(uint64_t mode)
{
    return ((mode_t)mode & (S_ISUID | S_ISGID)) != 0;
}

/* The refusals the notes explain, by what was asked (the policy's own lines for them are in
 * policy/refusals.rules). Only the native ABI reaches the listener, and each argument is read
 * as the kernel reads it. */
static void note_refusal(const struct seccomp_data *d, struct nsbox_result *ret)
{
    const __u64 *a = d->args;

    switch (d->nr) {
    case SYS_prlimit64:
        if ((int)a[1] == RLIMIT_CORE && a[2] != 0)
            ret->refused_core_limit = true;
        break;
#ifdef SYS_setrlimit
    case SYS_setrlimit:
        if ((int)a[0] == RLIMIT_CORE)
            ret->refused_core_limit = true;
        break;
#endif
#ifdef SYS_chmod
    case SYS_chmod:
    case SYS_creat:
    case SYS_mkdir:
    case SYS_mknod:
#endif
    case SYS_fchmod:
        ret->refused_setid_mode |= setid_mode(a[1]);
        break;
    case SYS_fchmodat:
#ifdef SYS_fchmodat2
    case SYS_fchmodat2:
#endif
    case SYS_mkdirat:
    case SYS_mknodat:
        ret->refused_setid_mode |= setid_mode(a[2]);
        break;
#ifdef SYS_open
    case SYS_open:
        ret->refused_setid_mode |= ((int)a[1] & (O_CREAT | O_TMPFILE)) && setid_mode(a[2]);
        break;
#endif
    case SYS_openat:
        ret->refused_setid_mode |= ((int)a[2] & (O_CREAT | O_TMPFILE)) && setid_mode(a[3]);
        break;
    case SYS_ioctl:
        if ((unsigned)a[1] == TIOCSETD)
            ret->refused_tty_ldisc = true;
        break;
#ifdef SYS_inotify_init
    case SYS_inotify_init:
#endif
    case SYS_inotify_init1:
        ret->refused_inotify = true;
        break;
    default:
        break;
    }
}

/* Whether a notification waits on the listener (a poll that does not wait). */
static bool listener_has_waiting(int listener)
{
    struct pollfd p = {.fd = listener, .events = POLLIN};

    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Answer one notification of the listener: init's own calls go through (it is nsbox's code,
 * and the policy is the payload's), everything else is refused with EPERM and recorded.
 * (seccomp_unotify(2).) Returns false when the listener is done (no more filter users). */
static bool answer_notification(struct supervisor *sv, int listener, pid_t init_pid,
                                bool no_network, struct nsbox_result *ret)
{
    struct seccomp_notif req;
    struct seccomp_notif_resp resp;

    /* The pace (NOTIF_BURST): a quiet spell earns a burst, never more. */
    (void)pace_take(&sv->notif_at, now_usec(), NOTIF_BURST, NOTIF_INTERVAL_USEC);
    memset(&req, 0, sizeof(req)); /* the kernel requires it zeroed */
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
        return errno == EINTR || errno == ENOENT; /* ENOENT: the caller died meanwhile */
    resp = (struct seccomp_notif_resp){.id = req.id};
    if ((pid_t)req.pid == init_pid)
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    else {
        resp.error = -filter_refusal_errno(req.data.nr);
        record_refusal(sv, ret, req.data.arch, req.data.nr);
        note_refusal(&req.data, ret);
        /* An internet socket where the sandbox has no network: the notes say how to get a
         * loopback interface. (Only the native ABI reaches the listener; the kernel reads the
         * family as an int.) */
        if (no_network && (req.data.nr == SYS_socket || req.data.nr == SYS_socketpair) &&
            ((int)req.data.args[0] == AF_INET || (int)req.data.args[0] == AF_INET6))
            ret->refused_inet_socket = true;
    }
    (void)ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    return true;
}

bool supervise_answer_notification(int listener, pid_t init_pid, bool no_network,
                                   struct nsbox_result *ret)
{
    /* A session's step has a result of its own: no cache of names that point into an earlier
     * step's; session.c keeps the pace itself (NOTIF_BURST, in its own loop). */
    struct supervisor one = {0};

    return answer_notification(&one, listener, init_pid, no_network, ret);
}

/* A report that needs no answer: a file written, a skipped step's warning, a failure, how the
 * payload ended. */
static void report_take(const struct nsbox_config *c, struct nsbox_result *ret,
                        const struct report *report, struct report *failure, struct report *final)
{
    if (report->type == REPORT_WRITTEN)
        written_add(ret, report);
    else if (report->type == REPORT_SKIPPED)
        /* An optional step the sandbox left out: a warning, passed on at once. */
        report_warning(c, ret, "optional setup step %s skipped: %s (%s)", report->step.name,
                       strerror(report->step.err), report->step.detail);
    else if (report->type == REPORT_SETUP_FAILED || report->type == REPORT_EXEC_FAILED) {
        if (!failure->type)
            *failure = *report;
    } else if (report->type != REPORT_LISTENER && report->type != REPORT_PROXY)
        *final = *report;
}

int supervise(const struct nsbox_config *c, struct supervise_fds *fds, uint64_t start,
              struct nsbox_result *ret)
{
    struct stream_state streams[2] = {
        {&ret->out, fds->out, c->stdout_fd, c->stdout_file_fd, c->output_limit},
        {&ret->err, fds->err, c->stderr_fd, c->stderr_file_fd, c->output_limit},
    };
    _cleanup_free_ char *escaped_out = NULL, *escaped_err = NULL;
    struct supervisor sv = {.fds = fds,
                            .init_running = true,
                            .kill_at = c->timeout ? start + c->timeout : UINT64_MAX};
    _cleanup_free_ char *buf = malloc(READ_CHUNK);
    struct report_reader reader = {0};
    struct report final = {0}, failure = {0};
    bool timed_out = false, killed = false;
    int report_fd = fds->report, init_status = 0, init_code = 0;
    /* The report pipe is watched while init may still hand something over (the proxy's socket,
     * the seccomp listener: they come last in its setup) and until how the payload ended is in;
     * later reports (a failure after the filters, or how the payload ended) wait in the pipe
     * and are read once init has exited. Each wake-up it spares is a switch between init and
     * the supervisor while init ends the run. */
    bool report_watched = true;
    uint64_t drain_until = UINT64_MAX;
    /* --stdin: nsbox's stdin is copied into the payload's stdin socket, a buffer at a time. */
    _cleanup_free_ char *in_buf = fds->stdin_dst >= 0 ? malloc(READ_CHUNK) : NULL;
    size_t in_len = 0, in_off = 0;
    bool in_eof = false;
    _cleanup_close_ int listener = -EBADF;
    _cleanup_free_ struct pollfd *pfds = NULL;
    int r = 0;

    for (size_t i = 0; i < 2; i++) {
        streams[i].s->file_asked = streams[i].file_fd >= 0;
        if (headtail_init(&streams[i].kept, streams[i].s, c->output_limit) < 0) {
            r = -ENOMEM;
            goto kill;
        }
        /* Non-blocking, so that reading what is left after the grace cannot block on a pipe
         * someone outside still holds open. Only the read end's file description changes. */
        if (fcntl(streams[i].fd, F_SETFL, O_NONBLOCK) < 0) {
            r = negative_errno();
            goto kill;
        }
    }
    if (c->stdout_escape && c->stdout_fd >= 0)
        streams[0].escaped = escaped_out = malloc(TERMSAFE_MAX_OUT(READ_CHUNK));
    if (c->stderr_escape && c->stderr_fd >= 0)
        streams[1].escaped = escaped_err = malloc(TERMSAFE_MAX_OUT(READ_CHUNK));
    if (!buf || !ret->out.data || !ret->err.data || (fds->stdin_dst >= 0 && !in_buf) ||
        (c->stdout_escape && c->stdout_fd >= 0 && !escaped_out) ||
        (c->stderr_escape && c->stderr_fd >= 0 && !escaped_err)) {
        r = -ENOMEM;
        goto kill;
    }

    if (fds->proxy) {
        pfds = calloc(8 + proxy_max_pollfds(fds->proxy), sizeof(*pfds));
        if (!pfds) {
            r = -ENOMEM;
            goto kill;
        }
    }
    while (sv.init_running || streams[0].fd >= 0 || streams[1].fd >= 0 ||
           (report_fd >= 0 && report_watched)) {
        struct pollfd p_small[8], *p = pfds ? pfds : p_small;
        size_t idx_proxy = 0, n_proxy = 0;
        bool proxy_polled = false;
        int np = 0, idx_pid = -1, idx_sig = -1, idx_rep = -1, idx_stream[2] = {-1, -1};
        int idx_in_src = -1, idx_in_dst = -1, idx_listener = -1;
        int timeout_ms = -1;
        uint64_t now = now_usec();

        if (sv.init_running) {
            if (now >= sv.kill_at) {
                if (!killed) {
                    (void)sys_pidfd_send_signal(fds->pidfd, SIGKILL);
                    if (fds->kill_group)
                        (void)kill(-fds->init_pid, SIGKILL);
                    killed = true;
                    timed_out = sv.forwarded == 0 && !sv.killed_by_request;
                }
            } else if (sv.kill_at != UINT64_MAX) {
                uint64_t ms = (sv.kill_at - now + 999) / 1000;
                timeout_ms = ms > 60000 ? 60000 : (int)ms;
            }
            idx_pid = np;
            p[np++] = (struct pollfd){.fd = fds->pidfd, .events = POLLIN};
        } else {
            /* The sandbox is gone: what is still open gets the grace, not more. */
            if (sv.stop || now >= drain_until)
                break;
            timeout_ms = (int)((drain_until - now + 999) / 1000);
        }
        if (fds->signalfd >= 0) {
            idx_sig = np;
            p[np++] = (struct pollfd){.fd = fds->signalfd, .events = POLLIN};
        }
        for (size_t i = 0; i < 2; i++)
            if (streams[i].fd >= 0) {
                idx_stream[i] = np;
                p[np++] = (struct pollfd){.fd = streams[i].fd, .events = POLLIN};
            }
        if (report_fd >= 0 && report_watched) {
            idx_rep = np;
            p[np++] = (struct pollfd){.fd = report_fd, .events = POLLIN};
        }
        if (listener >= 0 && now >= sv.notif_at) {
            idx_listener = np;
            p[np++] = (struct pollfd){.fd = listener, .events = POLLIN};
        } else if (listener >= 0) {
            /* Paced (NOTIF_BURST): look again when the next answer is due. */
            uint64_t ms = (sv.notif_at - now + 999) / 1000;
            if (timeout_ms < 0 || (uint64_t)timeout_ms > ms)
                timeout_ms = (int)ms;
            if (!ret->refused_throttled && listener_has_waiting(listener))
                ret->refused_throttled = true;
        }
        if (fds->stdin_dst >= 0 && sv.init_running) {
            if (in_off < in_len) {
                idx_in_dst = np;
                p[np++] = (struct pollfd){.fd = fds->stdin_dst, .events = POLLOUT};
            } else if (!in_eof) {
                idx_in_src = np;
                p[np++] = (struct pollfd){.fd = fds->stdin_src, .events = POLLIN};
            } else {
                /* All of nsbox's stdin is through: the payload reads EOF. */
                (void)shutdown(fds->stdin_dst, SHUT_WR);
                (void)close(fds->stdin_dst);
                fds->stdin_dst = -1;
            }
        }

        /* The proxy serves while the sandbox runs; once it is gone, nobody is left to talk
         * to (proxy_finish() closes what is open). */
        if (fds->proxy && sv.init_running) {
            proxy_polled = true;
            idx_proxy = (size_t)np;
            n_proxy = proxy_poll_fill(fds->proxy, p + np, now, &timeout_ms);
            np += (int)n_proxy;
        }

        if (poll(p, (nfds_t)np, timeout_ms) < 0) {
            if (errno == EINTR)
                continue;
            r = negative_errno();
            goto kill;
        }

        if (idx_sig >= 0 && p[idx_sig].revents)
            handle_signals(&sv);
        if (proxy_polled) /* its deadlines too, when it had no descriptor to wait on */
            proxy_poll_handle(fds->proxy, p + idx_proxy, n_proxy, now_usec());

        if (idx_listener >= 0 && p[idx_listener].revents) {
            if (!(p[idx_listener].revents & POLLIN) ||
                !answer_notification(&sv, listener, fds->init_pid,
                                     !c->network_host && !c->network_loopback &&
                                         !(c->network_allow && c->network_allow[0]),
                                     ret)) {
                (void)close(listener);
                listener = -EBADF;
            }
        }
        if (idx_in_src >= 0 && p[idx_in_src].revents) {
            ssize_t n = read(fds->stdin_src, in_buf, READ_CHUNK);
            if (n > 0) {
                in_len = (size_t)n;
                in_off = 0;
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN))
                in_eof = true;
        }
        if (idx_in_dst >= 0 && p[idx_in_dst].revents) {
            ssize_t n = send(fds->stdin_dst, in_buf + in_off, in_len - in_off,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0)
                in_off += (size_t)n;
            else if (n < 0 && errno != EINTR && errno != EAGAIN) {
                /* The payload closed its stdin (EPIPE): stop copying. */
                (void)close(fds->stdin_dst);
                fds->stdin_dst = -1;
            }
        }

        for (size_t i = 0; i < 2; i++)
            if (idx_stream[i] >= 0 && p[idx_stream[i]].revents &&
                stream_read(&sv, &streams[i], buf) == 0)
                stream_close(&sv, &streams[i]);

        if (idx_rep >= 0 && p[idx_rep].revents) {
            const struct report *report = &reader.rep;
            int k = report_read(report_fd, &reader);

            if (k > 0 && report->type == REPORT_PROXY && fds->proxy) {
                /* Take the proxy's listening socket; init waits for the byte. */
                int fd = sys_pidfd_getfd(fds->pidfd, report->code, 0);
                if (fd < 0) {
                    r = negative_errno();
                    goto kill;
                }
                proxy_set_listener(fds->proxy, fd);
                if (write(fds->sync, "x", 1) != 1) {
                    r = negative_errno();
                    goto kill;
                }
            } else if (k > 0 && report->type == REPORT_LISTENER) {
                /* Take init's seccomp listener; init waits for the byte (sandbox.c). */
                listener = sys_pidfd_getfd(fds->pidfd, report->code, 0);
                if (listener < 0) {
                    r = negative_errno();
                    goto kill;
                }
                if (write(fds->sync, "x", 1) != 1) {
                    r = negative_errno();
                    goto kill;
                }
                ret->seccomp_reporting = true;
                /* The pipe stays watched: the files the payload wrote (REPORT_WRITTEN, up to
                 * NSBOX_WRITTEN_MAX of them) can be more than a pipe holds, and init waits to
                 * write them before it exits. */
            } else if (k > 0) {
                report_take(c, ret, report, &failure, &final);
                if (final.type)
                    report_watched = false;
            } else if (k < 0) {
                (void)close(report_fd);
                report_fd = -1;
            }
        }

        if (idx_pid >= 0 && p[idx_pid].revents) {
            siginfo_t si = {0};
            /* Readable once init has exited; by then the kernel has killed and reaped every
             * other process of its pid namespace (zap_pid_ns_processes()). Tier 3's init is a
             * zombie until reaped below, which keeps its group's id its own. */
            if (fds->kill_group)
                (void)kill(-fds->init_pid, SIGKILL);
            if (RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)fds->pidfd, &si, WEXITED)) < 0) {
                r = negative_errno();
                goto kill;
            }
            sv.init_running = false;
            init_status = si.si_code;
            init_code = si.si_status;
            /* The timeout still applies while draining. */
            drain_until = now_usec() + DRAIN_GRACE_USEC;
            if (drain_until > sv.kill_at)
                drain_until = sv.kill_at;
        }
    }

    /* The grace is over (or a signal ended it): what the pipes hold is read, the rest of
     * what their holders might still write is not waited for. */
    for (size_t i = 0; i < 2; i++)
        stream_finish(&sv, &streams[i], buf);
    for (size_t i = 0; i < 2; i++) {
        stream_copy_tail(&sv, &streams[i]);
        headtail_done(&streams[i].kept);
    }
    if (report_fd >= 0) {
        /* What init said after the pipe stopped being watched; init is gone (or the run is
         * being given up), so nothing waits: non-blocking, until empty. */
        if (!report_watched && fcntl(report_fd, F_SETFL, O_NONBLOCK) == 0)
            while (report_read(report_fd, &reader) > 0)
                report_take(c, ret, &reader.rep, &failure, &final);
        (void)close(report_fd);
        report_fd = -1;
    }
    if (ret->out.incomplete || ret->err.incomplete) {
        char line[400];
        (void)snprintf(line, sizeof(line),
                       "%s%s%s %s still open %llu ms after the sandbox ended (held by a process "
                       "outside it, such as one --pid host left running, or by a descriptor "
                       "parked in a unix socket message): nsbox stopped reading, so output "
                       "written after that is missing",
                       ret->out.incomplete ? "stdout" : "",
                       ret->out.incomplete && ret->err.incomplete ? " and " : "",
                       ret->err.incomplete ? "stderr" : "",
                       ret->out.incomplete && ret->err.incomplete ? "were" : "was",
                       (unsigned long long)(DRAIN_GRACE_USEC / 1000));
        report_add_warning(ret, true, line);
    }
    ret->wall_time = now_usec() - start;

    if (fds->stdin_dst >= 0) {
        (void)close(fds->stdin_dst);
        fds->stdin_dst = -1;
    }
    if (final.type == REPORT_EXITED || final.type == REPORT_SIGNALED) {
        ret->shm_used = final.shm_used;
        ret->shm_free = final.shm_free;
        ret->work_used = final.work_used;
        ret->work_free = final.work_free;
        ret->copy_out_done = final.copy_taken && final.copy_err == 0;
        ret->skipped_more += final.copy_unlisted;
        ret->copy_out_lost += final.copy_lost;
        if (final.copy_taken && final.copy_err) {
            char line[300];
            (void)snprintf(line, sizeof(line),
                           "copy-out failed inside the sandbox: %s%s; nothing was copied out",
                           strerror(final.copy_err),
                           final.copy_err == EFBIG ? " (the stream passed RLIMIT_FSIZE: lower "
                                                     "--copy-out-max-bytes or raise --memory)"
                                                   : "");
            report_add_warning(ret, true, line);
        }
    }
    if (sv.killed_by_request) {
        ret->status = NSBOX_STATUS_KILLED;
        ret->signal = SIGKILL;
    } else if (timed_out) {
        ret->status = NSBOX_STATUS_TIMEOUT;
        ret->exit_code = 124;
    } else if (failure.type)
        report_to_result(&failure, ret);
    else if (final.type == REPORT_EXITED) {
        ret->status = NSBOX_STATUS_EXITED;
        ret->exit_code = final.code;
    } else if (final.type == REPORT_SIGNALED) {
        ret->status = NSBOX_STATUS_SIGNALED;
        ret->signal = final.code;
    } else if (killed || init_status == CLD_KILLED || init_status == CLD_DUMPED) {
        /* The whole sandbox was killed: by nsbox after a signal, or from outside. */
        ret->status = NSBOX_STATUS_SIGNALED;
        ret->signal = init_status == CLD_EXITED ? SIGKILL : init_code;
    } else {
        struct report unexpected = {.type = REPORT_SETUP_FAILED};
        (void)report_step_failed(&unexpected.step, 0, "init",
                                 "the sandbox's init exited with %d unexpectedly", init_code);
        report_to_result(&unexpected, ret);
    }
    return 0;

kill:
    (void)sys_pidfd_send_signal(fds->pidfd, SIGKILL);
    if (fds->kill_group && sv.init_running)
        (void)kill(-fds->init_pid, SIGKILL);
    if (sv.init_running) {
        siginfo_t si;
        (void)RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)fds->pidfd, &si, WEXITED));
    }
    for (size_t i = 0; i < 2; i++) {
        if (streams[i].fd >= 0)
            (void)close(streams[i].fd);
        if (streams[i].s->data)
            (void)headtail_finish(&streams[i].kept);
        headtail_done(&streams[i].kept);
    }
    if (report_fd >= 0)
        (void)close(report_fd);
    if (fds->stdin_dst >= 0)
        (void)close(fds->stdin_dst);
    ret->wall_time = now_usec() - start;
    return r;
}
