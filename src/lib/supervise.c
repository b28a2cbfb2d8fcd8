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
static void relay_output(struct supervisor *sv, struct stream_state *st, const char *p, size_t n)
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
        relay_output(sv, st, st->escaped, termsafe_escape(&st->term, p, n, st->escaped));
    else
        relay_output(sv, st, p, n);
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
    if (st->on_output) /* a step's caller, as the output comes */
        st->on_output(st->out_fd, buf, (size_t)n, st->userdata);
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
 * run's clock (which may be over), as relay_output() waits at most until sv->kill_at. */
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
        relay_output(sv, st, st->escaped, termsafe_finish(&st->term, st->escaped));
        st->term = (struct termsafe){0};
        relay_output(sv, st, line, (size_t)n);
    }
    if (tail > 0)
        stream_copy(sv, st, s->data + s->head, tail);
    if (st->escaped && st->copy_fd >= 0)
        relay_output(sv, st, st->escaped, termsafe_finish(&st->term, st->escaped));
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

/* ---- the loop ----------------------------------------------------------------------------- */

int supervisor_init(struct supervisor *sv, const struct nsbox_config *c, struct supervise_fds *fds,
                    uint64_t start, struct nsbox_result *ret, bool steps)
{
    *sv = (struct supervisor){.c = c,
                              .fds = fds,
                              .ret = ret,
                              .steps = steps,
                              .init_running = true,
                              .kill_at = !steps && c->timeout ? start + c->timeout : UINT64_MAX,
                              .drain_until = UINT64_MAX,
                              .listener = -EBADF,
                              .report_fd = fds->report,
                              .report_watched = true,
                              .streams = {{.fd = -1, .copy_fd = -1, .file_fd = -1},
                                          {.fd = -1, .copy_fd = -1, .file_fd = -1}}};
    sv->buf = malloc(READ_CHUNK);
    if (!sv->buf)
        return -ENOMEM;
    if (steps)
        return 0;
    sv->streams[0] = (struct stream_state){&ret->out, fds->out, c->stdout_fd, c->stdout_file_fd,
                                           c->output_limit};
    sv->streams[1] = (struct stream_state){&ret->err, fds->err, c->stderr_fd, c->stderr_file_fd,
                                           c->output_limit};
    fds->out = fds->err = -1; /* the streams' now, closed with them */
    for (size_t i = 0; i < 2; i++) {
        sv->streams[i].s->file_asked = sv->streams[i].file_fd >= 0;
        if (headtail_init(&sv->streams[i].kept, sv->streams[i].s, c->output_limit) < 0)
            return -ENOMEM;
        /* Non-blocking, so that reading what is left after the grace cannot block on a pipe
         * someone outside still holds open. Only the read end's file description changes. */
        if (fcntl(sv->streams[i].fd, F_SETFL, O_NONBLOCK) < 0)
            return negative_errno();
    }
    if (c->stdout_escape && c->stdout_fd >= 0)
        sv->streams[0].escaped = sv->escaped[0] = malloc(TERMSAFE_MAX_OUT(READ_CHUNK));
    if (c->stderr_escape && c->stderr_fd >= 0)
        sv->streams[1].escaped = sv->escaped[1] = malloc(TERMSAFE_MAX_OUT(READ_CHUNK));
    if (fds->stdin_dst >= 0)
        sv->in_buf = malloc(READ_CHUNK);
    if (!ret->out.data || !ret->err.data || (fds->stdin_dst >= 0 && !sv->in_buf) ||
        (c->stdout_escape && c->stdout_fd >= 0 && !sv->escaped[0]) ||
        (c->stderr_escape && c->stderr_fd >= 0 && !sv->escaped[1]))
        return -ENOMEM;
    return 0;
}

void supervisor_free(struct supervisor *sv)
{
    for (size_t i = 0; i < 2; i++) {
        if (sv->streams[i].fd >= 0)
            (void)close(sv->streams[i].fd);
        sv->streams[i].fd = -1;
        headtail_done(&sv->streams[i].kept);
        free(sv->escaped[i]);
        sv->escaped[i] = NULL;
    }
    if (sv->listener >= 0)
        (void)close(sv->listener);
    sv->listener = -EBADF;
    free(sv->buf);
    free(sv->in_buf);
    sv->buf = sv->in_buf = NULL;
}

size_t supervisor_pollfds_max(const struct supervisor *sv)
{
    return 8 + (sv->fds->proxy ? proxy_max_pollfds(sv->fds->proxy) : 0);
}

int supervisor_step_streams(struct supervisor *sv, int out_fd, int err_fd, struct nsbox_result *ret,
                            uint64_t limit, void (*on_output)(int, const char *, size_t, void *),
                            void *userdata)
{
    int fds[2] = {out_fd, err_fd};

    for (int i = 0; i < 2; i++) {
        headtail_done(&sv->streams[i].kept);
        if (sv->streams[i].fd >= 0 && sv->streams[i].fd != fds[i])
            (void)close(sv->streams[i].fd);
        sv->streams[i] = (struct stream_state){.s = i ? &ret->err : &ret->out,
                                               .fd = fds[i],
                                               .copy_fd = -1,
                                               .file_fd = -1,
                                               .limit = limit,
                                               .on_output = on_output,
                                               .userdata = userdata,
                                               .out_fd = i + 1};
    }
    for (int i = 0; i < 2; i++)
        if (headtail_init(&sv->streams[i].kept, sv->streams[i].s, limit) < 0)
            return -ENOMEM;
    /* The refusals a step makes count in its own result: no cached index into another's. */
    sv->n_seen = 0;
    return 0;
}

bool supervisor_streams_done(const struct supervisor *sv)
{
    return sv->streams[0].fd < 0 && sv->streams[1].fd < 0;
}

void supervisor_streams_finish(struct supervisor *sv)
{
    for (size_t i = 0; i < 2; i++)
        stream_finish(sv, &sv->streams[i], sv->buf);
    for (size_t i = 0; i < 2; i++) {
        if (sv->streams[i].s)
            stream_copy_tail(sv, &sv->streams[i]);
        headtail_done(&sv->streams[i].kept);
    }
}

size_t supervisor_pollfds(struct supervisor *sv, struct pollfd *p, uint64_t *deadline)
{
    struct supervise_fds *fds = sv->fds;
    uint64_t now = now_usec(), until = *deadline;
    int np = 0, timeout_ms;

    sv->idx_pid = sv->idx_sig = sv->idx_rep = sv->idx_in_src = sv->idx_in_dst = -1;
    sv->idx_stream[0] = sv->idx_stream[1] = sv->idx_listener = -1;
    sv->proxy_polled = false;
    sv->n_proxy = 0;
    if (sv->init_running) {
        if (!sv->steps && now >= sv->kill_at) {
            if (!sv->killed) {
                (void)sys_pidfd_send_signal(fds->pidfd, SIGKILL);
                if (fds->kill_group)
                    (void)kill(-fds->init_pid, SIGKILL);
                sv->killed = true;
                sv->timed_out = sv->forwarded == 0 && !sv->killed_by_request;
            }
        } else if (sv->kill_at < until)
            until = sv->kill_at;
        sv->idx_pid = np;
        p[np++] = (struct pollfd){.fd = fds->pidfd, .events = POLLIN};
    } else if (sv->drain_until < until)
        until = sv->drain_until; /* the sandbox is gone: what is still open gets the grace */
    if (fds->signalfd >= 0) {
        sv->idx_sig = np;
        p[np++] = (struct pollfd){.fd = fds->signalfd, .events = POLLIN};
    }
    for (size_t i = 0; i < 2; i++)
        if (sv->streams[i].fd >= 0) {
            sv->idx_stream[i] = np;
            p[np++] = (struct pollfd){.fd = sv->streams[i].fd, .events = POLLIN};
        }
    if (sv->report_fd >= 0 && sv->report_watched) {
        sv->idx_rep = np;
        p[np++] = (struct pollfd){.fd = sv->report_fd, .events = POLLIN};
    }
    if (sv->listener >= 0 && now >= sv->notif_at) {
        sv->idx_listener = np;
        p[np++] = (struct pollfd){.fd = sv->listener, .events = POLLIN};
    } else if (sv->listener >= 0) {
        /* Paced (NOTIF_BURST): look again when the next answer is due. */
        if (sv->notif_at < until)
            until = sv->notif_at;
        if (sv->ret && !sv->ret->refused_throttled && (!sv->steps || sv->take_written) &&
            listener_has_waiting(sv->listener))
            sv->ret->refused_throttled = true;
    }
    if (fds->stdin_dst >= 0 && sv->init_running) {
        if (sv->in_off < sv->in_len) {
            sv->idx_in_dst = np;
            p[np++] = (struct pollfd){.fd = fds->stdin_dst, .events = POLLOUT};
        } else if (!sv->in_eof) {
            sv->idx_in_src = np;
            p[np++] = (struct pollfd){.fd = fds->stdin_src, .events = POLLIN};
        } else {
            /* All of nsbox's stdin is through: the payload reads EOF. */
            (void)shutdown(fds->stdin_dst, SHUT_WR);
            (void)close(fds->stdin_dst);
            fds->stdin_dst = -1;
        }
    }
    /* The proxy serves while the sandbox runs; once it is gone, nobody is left to talk to
     * (proxy_finish() closes what is open). */
    if (fds->proxy && sv->init_running) {
        timeout_ms = until == UINT64_MAX                  ? -1
                     : until <= now                       ? 0
                     : (until - now + 999) / 1000 > 60000 ? 60000
                                                          : (int)((until - now + 999) / 1000);
        sv->proxy_polled = true;
        sv->idx_proxy = (size_t)np;
        sv->n_proxy = proxy_poll_fill(fds->proxy, p + np, now, &timeout_ms);
        np += (int)sv->n_proxy;
        if (timeout_ms >= 0 && now + (uint64_t)timeout_ms * 1000 < until)
            until = now + (uint64_t)timeout_ms * 1000;
    }
    *deadline = until;
    return (size_t)np;
}

/* A report from init: the proxy's socket and the listener, taken (init waits for the byte);
 * a file written; a failure; how the payload ended (a run). */
static void handle_report(struct supervisor *sv, const struct report *report)
{
    struct supervise_fds *fds = sv->fds;

    if (report->type == REPORT_PROXY && fds->proxy) {
        /* Take the proxy's listening socket; init waits for the byte. */
        int fd = sys_pidfd_getfd(fds->pidfd, report->code, 0);
        if (fd < 0 || write(fds->sync, "x", 1) != 1) {
            sv->error = negative_errno();
            if (fd >= 0)
                (void)close(fd);
            return;
        }
        proxy_set_listener(fds->proxy, fd);
    } else if (report->type == REPORT_LISTENER) {
        /* Take init's seccomp listener: sent on the sync socket before this report, or (a
         * policy file) by pidfd_getfd(2), for which init waits for the byte (sandbox.c). */
        if (report->code < 0) {
            sv->listener = report_recv_fd(fds->sync);
            if (sv->listener < 0) {
                sv->error = sv->listener;
                sv->listener = -1;
                return;
            }
        } else {
            sv->listener = sys_pidfd_getfd(fds->pidfd, report->code, 0);
            if (sv->listener < 0 || write(fds->sync, "x", 1) != 1) {
                sv->error = negative_errno();
                return;
            }
        }
        if (sv->ret)
            sv->ret->seccomp_reporting = true;
        /* The pipe stays watched: the files the payload wrote (REPORT_WRITTEN, up to
         * NSBOX_WRITTEN_MAX of them) can be more than a pipe holds, and init waits to write
         * them before it exits. */
    } else if (!sv->steps) {
        report_take(sv->c, sv->ret, report, &sv->failure, &sv->final);
        if (sv->final.type)
            sv->report_watched = false;
    } else if (report->type == REPORT_WRITTEN) {
        /* The files a step wrote in /work, before its end; none outside a step. */
        if (sv->take_written)
            written_add(sv->ret, report);
    } else if (report->type == REPORT_SETUP_FAILED || report->type == REPORT_EXEC_FAILED ||
               report->type == REPORT_STEP_FAILED) {
        /* A setup failure ends the sandbox; a program that could not be run, or a step that
         * could not start (its copy-in, say), is its step's result. */
        report_to_result(report, sv->ret);
        if (report->type == REPORT_SETUP_FAILED)
            sv->setup_failed = true;
    }
}

void supervisor_reports(struct supervisor *sv)
{
    for (;;) {
        int k = report_read(sv->report_fd, &sv->reader);
        if (k > 0) {
            handle_report(sv, &sv->reader.rep);
            if (sv->error || !sv->report_watched)
                return;
            if (!sv->steps)
                return; /* a run reads one a wake-up, as it always did */
            continue;
        }
        if (k < 0) {
            (void)close(sv->report_fd);
            sv->report_fd = -1;
        }
        return;
    }
}

void supervisor_dispatch(struct supervisor *sv, const struct pollfd *p, size_t n)
{
    struct supervise_fds *fds = sv->fds;

    (void)n;
    if (sv->idx_sig >= 0 && p[sv->idx_sig].revents)
        handle_signals(sv);
    if (sv->proxy_polled) /* its deadlines too, when it had no descriptor to wait on */
        proxy_poll_handle(fds->proxy, p + sv->idx_proxy, sv->n_proxy, now_usec());
    if (sv->idx_listener >= 0 && p[sv->idx_listener].revents) {
        if (sv->ret != sv->seen_for) {
            sv->n_seen = 0; /* another result: no cached index into the last one's */
            sv->seen_for = sv->ret;
        }
        if (!(p[sv->idx_listener].revents & POLLIN) ||
            !answer_notification(sv, sv->listener, fds->init_pid,
                                 !sv->c->network_host && !sv->c->network_loopback &&
                                     !(sv->c->network_allow && sv->c->network_allow[0]),
                                 sv->ret)) {
            (void)close(sv->listener);
            sv->listener = -EBADF;
        }
    }
    if (sv->idx_in_src >= 0 && p[sv->idx_in_src].revents) {
        ssize_t k = read(fds->stdin_src, sv->in_buf, READ_CHUNK);
        if (k > 0) {
            sv->in_len = (size_t)k;
            sv->in_off = 0;
        } else if (k == 0 || (errno != EINTR && errno != EAGAIN))
            sv->in_eof = true;
    }
    if (sv->idx_in_dst >= 0 && p[sv->idx_in_dst].revents) {
        ssize_t k = send(fds->stdin_dst, sv->in_buf + sv->in_off, sv->in_len - sv->in_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0)
            sv->in_off += (size_t)k;
        else if (k < 0 && errno != EINTR && errno != EAGAIN) {
            /* The payload closed its stdin (EPIPE): stop copying. */
            (void)close(fds->stdin_dst);
            fds->stdin_dst = -1;
        }
    }
    for (size_t i = 0; i < 2; i++)
        if (sv->idx_stream[i] >= 0 && p[sv->idx_stream[i]].revents &&
            stream_read(sv, &sv->streams[i], sv->buf) == 0)
            stream_close(sv, &sv->streams[i]);
    if (sv->idx_rep >= 0 && p[sv->idx_rep].revents)
        supervisor_reports(sv);
    if (sv->error)
        return;
    if (sv->idx_pid >= 0 && p[sv->idx_pid].revents) {
        siginfo_t si = {0};
        if (sv->steps) {
            /* A started sandbox's init ends only when the sandbox does (lifecycle.c reaps). */
            sv->init_running = false;
            return;
        }
        /* Readable once init has exited; by then the kernel has killed and reaped every other
         * process of its pid namespace (zap_pid_ns_processes()). Tier 3's init is a zombie
         * until reaped below, which keeps its group's id its own. */
        if (fds->kill_group)
            (void)kill(-fds->init_pid, SIGKILL);
        if (RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)fds->pidfd, &si, WEXITED)) < 0) {
            sv->error = negative_errno();
            return;
        }
        sv->init_running = false;
        sv->init_status = si.si_code;
        sv->init_code = si.si_status;
        /* The timeout still applies while draining. */
        sv->drain_until = now_usec() + DRAIN_GRACE_USEC;
        if (sv->drain_until > sv->kill_at)
            sv->drain_until = sv->kill_at;
    }
}

/* A run is over: init has exited and every pipe is at EOF and the report read, or the grace
 * after init's exit is over, or a signal ended the drain. */
static bool run_over(const struct supervisor *sv)
{
    if (sv->init_running || sv->streams[0].fd >= 0 || sv->streams[1].fd >= 0 ||
        (sv->report_fd >= 0 && sv->report_watched))
        return !sv->init_running && (sv->stop || now_usec() >= sv->drain_until);
    return true;
}

/* How the run ended, once its loop is over. */
static void run_result(struct supervisor *sv, uint64_t start)
{
    struct nsbox_result *ret = sv->ret;
    const struct report *final = &sv->final;

    /* The grace is over (or a signal ended it): what the pipes hold is read, the rest of
     * what their holders might still write is not waited for. */
    supervisor_streams_finish(sv);
    if (sv->report_fd >= 0) {
        /* What init said after the pipe stopped being watched; init is gone (or the run is
         * being given up), so nothing waits: non-blocking, until empty. */
        if (!sv->report_watched && fcntl(sv->report_fd, F_SETFL, O_NONBLOCK) == 0)
            while (report_read(sv->report_fd, &sv->reader) > 0)
                report_take(sv->c, ret, &sv->reader.rep, &sv->failure, &sv->final);
        (void)close(sv->report_fd);
        sv->report_fd = -1;
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

    if (sv->fds->stdin_dst >= 0) {
        (void)close(sv->fds->stdin_dst);
        sv->fds->stdin_dst = -1;
    }
    if (final->type == REPORT_EXITED || final->type == REPORT_SIGNALED) {
        ret->shm_used = final->shm_used;
        ret->shm_free = final->shm_free;
        ret->work_used = final->work_used;
        ret->work_free = final->work_free;
        ret->copy_out_done = final->copy_taken && final->copy_err == 0;
        ret->skipped_more += final->copy_unlisted;
        ret->copy_out_lost += final->copy_lost;
        if (final->copy_taken && final->copy_err) {
            char line[300];
            (void)snprintf(line, sizeof(line),
                           "copy-out failed inside the sandbox: %s%s; nothing was copied out",
                           strerror(final->copy_err),
                           final->copy_err == EFBIG ? " (the stream passed RLIMIT_FSIZE: lower "
                                                      "--copy-out-max-bytes or raise --memory)"
                                                    : "");
            report_add_warning(ret, true, line);
        }
    }
    if (sv->killed_by_request) {
        ret->status = NSBOX_STATUS_KILLED;
        ret->signal = SIGKILL;
    } else if (sv->timed_out) {
        ret->status = NSBOX_STATUS_TIMEOUT;
        ret->exit_code = 124;
    } else if (sv->failure.type)
        report_to_result(&sv->failure, ret);
    else if (final->type == REPORT_EXITED) {
        ret->status = NSBOX_STATUS_EXITED;
        ret->exit_code = final->code;
    } else if (final->type == REPORT_SIGNALED) {
        ret->status = NSBOX_STATUS_SIGNALED;
        ret->signal = final->code;
    } else if (sv->killed || sv->init_status == CLD_KILLED || sv->init_status == CLD_DUMPED) {
        /* The whole sandbox was killed: by nsbox after a signal, or from outside. */
        ret->status = NSBOX_STATUS_SIGNALED;
        ret->signal = sv->init_status == CLD_EXITED ? SIGKILL : sv->init_code;
    } else {
        struct report unexpected = {.type = REPORT_SETUP_FAILED};
        (void)report_step_failed(&unexpected.step, 0, "init",
                                 "the sandbox's init exited with %d unexpectedly", sv->init_code);
        report_to_result(&unexpected, ret);
    }
}

int supervise(const struct nsbox_config *c, struct supervise_fds *fds, uint64_t start,
              struct nsbox_result *ret)
{
    struct supervisor sv;
    _cleanup_free_ struct pollfd *pfds = NULL;
    int r = supervisor_init(&sv, c, fds, start, ret, false);

    if (r >= 0) {
        pfds = calloc(supervisor_pollfds_max(&sv), sizeof(*pfds));
        if (!pfds)
            r = -ENOMEM;
    }
    while (r >= 0 && !run_over(&sv)) {
        uint64_t deadline = UINT64_MAX, now;
        size_t n = supervisor_pollfds(&sv, pfds, &deadline);
        int timeout_ms = -1;

        now = now_usec();
        if (deadline != UINT64_MAX)
            timeout_ms = deadline <= now ? 0
                         : (deadline - now + 999) / 1000 > 60000
                             ? 60000
                             : (int)((deadline - now + 999) / 1000);
        if (poll(pfds, (nfds_t)n, timeout_ms) < 0) {
            if (errno == EINTR)
                continue;
            r = negative_errno();
            break;
        }
        supervisor_dispatch(&sv, pfds, n);
        r = sv.error;
    }
    if (r >= 0) {
        run_result(&sv, start);
        supervisor_free(&sv);
        return 0;
    }

    /* The supervisor failed: the sandbox is killed and reaped, what was read is kept. */
    (void)sys_pidfd_send_signal(fds->pidfd, SIGKILL);
    if (fds->kill_group && sv.init_running)
        (void)kill(-fds->init_pid, SIGKILL);
    if (sv.init_running) {
        siginfo_t si;
        (void)RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)fds->pidfd, &si, WEXITED));
    }
    for (size_t i = 0; i < 2; i++) {
        if (sv.streams[i].fd >= 0)
            (void)close(sv.streams[i].fd);
        sv.streams[i].fd = -1;
        if (sv.streams[i].s && sv.streams[i].s->data)
            (void)headtail_finish(&sv.streams[i].kept);
    }
    if (sv.report_fd >= 0)
        (void)close(sv.report_fd);
    if (fds->stdin_dst >= 0)
        (void)close(fds->stdin_dst);
    fds->stdin_dst = -1;
    supervisor_free(&sv);
    ret->wall_time = now_usec() - start;
    return r;
}
