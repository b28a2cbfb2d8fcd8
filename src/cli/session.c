/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The supervisor of a session (session.h): started detached by `nsbox session start`, it makes
 * the sandbox, listens on the session's socket and runs one step at a time on the sandbox's
 * init, until it is stopped, killed (`nsbox kill`: SIGUSR1), idle or past its lifetime. One
 * poll(2) loop watches everything -- init, the step's pipes, the seccomp listener, the signals,
 * the timers and every client -- and no call in it waits on anyone. When it
 * ends, the sandbox ends with it: it kills init (and SIGKILL of the supervisor kills init by
 * PR_SET_PDEATHSIG), the cgroup leaf is removed as for a run, and the socket and the registry
 * record are removed (when the supervisor was SIGKILLed, by the next nsbox that sweeps the
 * registry).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "cgroup.h"
#include "copy.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "proxy.h"
#include "registry.h"
#include "report.h"
#include "result.h"
#include "sandbox.h"
#include "session-internal.h"
#include "session.h"
#include "written.h"
#include "supervise.h"
#include "syscalls.h"

#define EXIT_NSBOX_FAILURE 125
#define DRAIN_GRACE_USEC 200000 /* after a step's end, for its pipes to reach EOF */
/* The loop's descriptors before the clients': control, report, pidfd, signals, listener, socket,
 * the step's two pipes, --watch-pid's pidfd. */
#define FIXED_FDS 9

/* No network at all (--network none): a refused internet socket gets the notes' hint. */
static bool session_no_network(const struct nsbox_config *c)
{
    return !c->network_host && !c->network_loopback && !(c->network_allow && c->network_allow[0]);
}

/*
 * Refused system calls are answered at a run's pace (supervise.c, NOTIF_BURST): a burst of
 * NOTIF_BURST at once, then one every NOTIF_INTERVAL_USEC; in between the listener is not
 * polled, and the caller waits in the kernel for its answer (a killable wait, seccomp_unotify(2),
 * so a step's timeout and the session's end still end it). A step, or a thread the interpreter
 * keeps between steps, looping on a refused call then cannot make the supervisor, outside every
 * limit of the sandbox, burn a CPU. The pace is the session's, across steps and between them.
 */

/* Tell `session start` how it went (one line on a socketpair), and for "OK" wait for its
 * answer: one byte once it has printed the id. Returns false when it is gone (killed, Ctrl-C)
 * before that: then nobody knows the session's id, and a session that starts must end. A
 * written line alone would not do: it sits in the socket whether or not anyone reads it. */
static bool handle_signals(struct session_state *s);
static bool notify(struct session_state *s, const char *fmt, ...) _printf_(2, 3);
static bool notify(struct session_state *s, const char *fmt, ...)
{
    char buf[1024], ack;
    va_list ap;
    int n;
    bool ok = false;

    if (s->notify_fd < 0)
        return false;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0 &&
        RETRY_EINTR(send(s->notify_fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1,
                         MSG_NOSIGNAL)) > 0) {
        ok = strncmp(buf, "OK ", 3) != 0;
        /* The answer, or a signal to end (`nsbox kill`), whichever comes first: a caller
         * stuck writing the id (a full pipe) does not make the session deaf to signals. */
        while (!ok && s->fds) {
            struct pollfd p[2] = {{.fd = s->notify_fd, .events = POLLIN},
                                  {.fd = s->fds->signalfd, .events = POLLIN}};
            if (poll(p, 2, -1) < 0 && errno != EINTR)
                break;
            if (p[1].revents && handle_signals(s))
                break;
            if (p[0].revents) {
                ok = RETRY_EINTR(read(s->notify_fd, &ack, 1)) == 1;
                break;
            }
        }
    }
    (void)close(s->notify_fd);
    s->notify_fd = -1;
    return ok;
}

int session_socket_path(const char *id_or_name, char *buf, size_t size)
{
    char dir[512], id[40] = "", path[700];
    size_t n = strlen(id_or_name);
    int r = registry_path(dir, sizeof(dir));

    if (r < 0)
        return r;
    if (n == 32 && strspn(id_or_name, "0123456789abcdef") == 32)
        (void)snprintf(id, sizeof(id), "%s", id_or_name);
    else if (n > 0 && n <= NSBOX_NAME_MAX && !strchr(id_or_name, '/') && id_or_name[0] != '.') {
        /* A name: its file holds the run id (registry.h). */
        _cleanup_close_ int fd = -EBADF;
        ssize_t k;
        (void)snprintf(path, sizeof(path), "%s/%s.name", dir, id_or_name);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            return -ENOENT;
        k = RETRY_EINTR(read(fd, id, 32));
        if (k != 32 || strspn(id, "0123456789abcdef") != 32)
            return -ENOENT;
        id[32] = '\0';
    } else
        return -ENOENT;
    if ((size_t)snprintf(buf, size, "%s/%s.sock", dir, id) >= size)
        return -ENAMETOOLONG;
    return 0;
}

/* ---- the control channel ------------------------------------------------------------------ */

int control_send(int fd, const struct session_msg *m, const int *fds, int nfds)
{
    union {
        char buf[CMSG_SPACE(7 * sizeof(int))];
        struct cmsghdr align;
    } u = {0};
    struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

    if (nfds > 0) {
        struct cmsghdr *c;
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    /* Never waits: init reads each message at once, and at most two are ever in flight. */
    return RETRY_EINTR(sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 ? negative_errno() : 0;
}

/* ---- events common to every wait --------------------------------------------------------- */

/* Take the seccomp listener init offers on the report pipe; note a setup failure. Returns
 * false when the sandbox failed. */
bool handle_report(struct session_state *s, struct nsbox_result *ret)
{
    struct report rep;
    ssize_t n = RETRY_EINTR(read(s->fds->report, &rep, sizeof(rep)));

    if (n != sizeof(rep))
        return n < 0 && errno == EAGAIN;
    if (rep.type == REPORT_PROXY && s->fds->proxy) {
        /* --network allow=: the proxy's listening socket, taken as a run's supervisor takes it
         * (supervise.c); init waits for the byte. The proxy then serves in the session's loop. */
        int fd = sys_pidfd_getfd(s->fds->pidfd, rep.code, 0);
        if (fd < 0) {
            ret->status = NSBOX_STATUS_ERROR;
            ret->exit_code = 125;
            ret->error_errno = errno;
            (void)snprintf(ret->error_step, sizeof(ret->error_step), "network proxy");
            (void)snprintf(ret->error, sizeof(ret->error),
                           "cannot take the --network allow proxy's socket from the sandbox's "
                           "init (pidfd_getfd, Linux 5.6 or later): %s",
                           strerror(errno));
            return false;
        }
        proxy_set_listener(s->fds->proxy, fd);
        (void)!write(s->fds->sync, "x", 1);
        return true;
    }
    if (rep.type == REPORT_WRITTEN) {
        /* The files a step wrote in /work, before its end; none outside a step. */
        if (s->step.client)
            written_add(&s->step.ret, &rep);
        return true;
    }
    if (rep.type == REPORT_LISTENER) {
        /* init waits for the byte once it is taken (sandbox.c). */
        s->listener = sys_pidfd_getfd(s->fds->pidfd, rep.code, 0);
        if (s->listener < 0) {
            /* As for a run (supervise.c): without it refusals would go unrecorded. */
            ret->status = NSBOX_STATUS_ERROR;
            ret->exit_code = 125;
            ret->error_errno = errno;
            (void)snprintf(ret->error_step, sizeof(ret->error_step), "seccomp listener");
            (void)snprintf(ret->error, sizeof(ret->error),
                           "cannot take the seccomp listener from the sandbox's init "
                           "(pidfd_getfd): %s",
                           strerror(errno));
            return false;
        }
        ret->seccomp_reporting = true;
        (void)!write(s->fds->sync, "x", 1);
        return true;
    }
    /* A setup failure ends the session; a program that could not be run, or a step that could
     * not start (REPORT_STEP_FAILED: its copy-in, say), is its step's result. */
    if (rep.type == REPORT_SETUP_FAILED || rep.type == REPORT_EXEC_FAILED ||
        rep.type == REPORT_STEP_FAILED)
        report_to_result(&rep, ret);
    return rep.type != REPORT_SETUP_FAILED;
}

/* Signals to the supervisor: SIGUSR1 (`nsbox kill`), SIGTERM, SIGINT, SIGHUP end the session. */
static bool handle_signals(struct session_state *s)
{
    struct signalfd_siginfo si;
    bool end = false;

    while (read(s->fds->signalfd, &si, sizeof(si)) == sizeof(si)) {
        end = true;
        s->end_reason = si.ssi_signo == SIGUSR1 ? "killed" : "signal";
    }
    return end;
}

/* Make the session's control socket (s->sock_path, mode 0600 by the umask) and listen on it,
 * non-blocking. Returns its descriptor, or -errno. */
static int listen_on(struct session_state *s)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    mode_t old;
    int fd, r;

    if (strlen(s->sock_path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, s->sock_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return negative_errno();
    (void)unlink(s->sock_path);
    old = umask(0077);
    r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    (void)umask(old);
    if (r < 0 || listen(fd, 64) < 0) {
        r = negative_errno();
        (void)close(fd);
        return r;
    }
    return fd;
}

/* ---- the loop ----------------------------------------------------------------------------- */

static int until_ms(uint64_t now, uint64_t until)
{
    uint64_t ms;

    if (until == UINT64_MAX)
        return -1;
    if (now >= until)
        return 0;
    ms = (until - now + 999) / 1000;
    return ms > 60000 ? 60000 : (int)ms;
}

static bool listener_has_waiting(int listener)
{
    struct pollfd p = {.fd = listener, .events = POLLIN};

    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* The next queued request, first come first served, or NULL. */
static struct client *next_queued(struct session_state *s)
{
    struct client *next = NULL;

    for (size_t i = 0; i < CLIENTS_MAX; i++)
        if (s->clients[i].state == CLIENT_QUEUED && (!next || s->clients[i].seq < next->seq))
            next = &s->clients[i];
    return next;
}

/* Handle the control channel from init. Returns false when init is gone. */
static bool handle_control(struct session_state *s, short revents, bool *ready,
                           struct nsbox_result *ret, uint64_t now)
{
    struct session_msg m;
    ssize_t n = RETRY_EINTR(recv(s->control_fd, &m, sizeof(m), MSG_DONTWAIT));

    if (n == 0 || (n < 0 && errno != EAGAIN && (revents & (POLLHUP | POLLERR)))) {
        s->ended = true;
        return false;
    }
    if (n != sizeof(m))
        return true; /* nothing, or what init does not say: read, so poll(2) cannot spin on it */
    if (!*ready && m.type == SESSION_READY) {
        int r = listen_on(s);
        if (r < 0) {
            (void)snprintf(ret->error, sizeof(ret->error),
                           "cannot listen on the session's socket %s: %s", s->sock_path,
                           strerror(-r));
            ret->status = NSBOX_STATUS_ERROR;
            ret->exit_code = 125;
            return false;
        }
        s->listen_fd = r;
        *ready = true;
        s->last_active = now;
        if (!notify(s, "OK %s %s\n", s->id, s->sock_path)) {
            if (!s->end_reason)
                s->end_reason = "the caller of session start is gone";
            return false;
        }
    } else if (s->step.client && !s->step.ended && m.type == SESSION_STEP_END) {
        s->step.ended = true;
        s->step.end = m;
        s->step.drain_until = now + DRAIN_GRACE_USEC;
        s->step.ret.wall_time = now - s->step.start;
    }
    return true;
}

/*
 * With --workspace: whether the session's end saves it. It does when the session ends between
 * steps, by `session stop`, --idle-timeout or --lifetime: then init kills every process of the
 * sandbox (the interpreter too) and writes /work into the copy-out memfd, as a run's init does
 * when its payload has ended, and run_sandbox() (sandbox.c) unpacks it into the workspace's
 * staging directory and swaps it in, whole or not at all, as for a run. Not after `nsbox kill`
 * or a signal, and not when the end cut off a running step: its /work may be half-written, as
 * a run's after a timeout (which is not saved either). The wait for init is a poll(2) that
 * still hears `nsbox kill` (which ends it, unsaved) and answers refused system calls, bounded
 * by SAVE_DEADLINE_USEC. New clients are no longer taken (the socket is gone).
 */
static void session_save(struct session_state *s, bool step_cut, struct nsbox_result *ret)
{
    const char *reason = s->end_reason ? s->end_reason : "";
    char why_not[300] = "";
    uint64_t deadline = now_usec() + SAVE_DEADLINE_USEC;
    struct session_msg m = {.type = SESSION_SAVE};
    bool answered = false;

    s->save_warnings = strlen(ret->warnings);
    if (!s->c->workspace || ret->status == NSBOX_STATUS_ERROR)
        return;
    if (s->ended)
        (void)snprintf(why_not, sizeof(why_not), "the session's sandbox ended by itself");
    else if (step_cut)
        (void)snprintf(why_not, sizeof(why_not),
                       "the session ended (%s) while a step ran, and the step was killed: /work "
                       "may be half-written, as after a run's timeout",
                       end_words(s));
    else if (strcmp(reason, "stopped") != 0 && strcmp(reason, "idle") != 0 &&
             strcmp(reason, "lifetime") != 0)
        (void)snprintf(why_not, sizeof(why_not), "the session ended because %s",
                       strcmp(reason, "killed") == 0 || strcmp(reason, "signal") == 0 ? end_words(s)
                                                                                      : reason);
    else if (control_send(s->control_fd, &m, NULL, 0) < 0)
        (void)snprintf(why_not, sizeof(why_not), "the session's sandbox could not be reached");
    while (!why_not[0] && !answered) {
        struct pollfd p[4] = {
            {.fd = s->control_fd, .events = POLLIN},
            {.fd = s->fds->pidfd, .events = POLLIN},
            {.fd = s->fds->signalfd, .events = POLLIN},
            {.fd = s->listener, .events = POLLIN},
        };
        uint64_t now = now_usec();
        ssize_t n;

        if (now >= deadline) {
            (void)snprintf(why_not, sizeof(why_not),
                           "the sandbox did not hand over /work within %llu s",
                           (unsigned long long)(SAVE_DEADLINE_USEC / 1000000));
            break;
        }
        if (poll(p, 4, until_ms(now, deadline)) < 0 && errno != EINTR) {
            (void)snprintf(why_not, sizeof(why_not), "poll: %s", strerror(errno));
            break;
        }
        if (p[3].revents && !supervise_answer_notification(s->listener, s->fds->init_pid,
                                                           session_no_network(s->c), &s->between)) {
            (void)close(s->listener);
            s->listener = -1;
        }
        if (p[2].revents && handle_signals(s)) {
            (void)snprintf(why_not, sizeof(why_not), "%s while its workspace was being saved",
                           end_words(s));
            break;
        }
        if (!p[0].revents && !p[1].revents)
            continue;
        n = RETRY_EINTR(recv(s->control_fd, &m, sizeof(m), MSG_DONTWAIT));
        if (n == sizeof(m) && m.type == SESSION_SAVED) {
            answered = true;
            ret->copy_out_done = (m.flags & 1) && m.code == 0;
            ret->skipped_more += m.unlisted;
            ret->copy_out_lost += m.lost;
            if (!ret->copy_out_done)
                (void)snprintf(why_not, sizeof(why_not),
                               "copying /work failed inside the sandbox: %s%s",
                               strerror(m.code ? m.code : EIO),
                               m.code == EFBIG ? " (the stream passed RLIMIT_FSIZE: lower "
                                                 "--copy-out-max-bytes or raise --memory)"
                                               : "");
        } else if (n == 0 || (n < 0 && errno != EAGAIN) || p[1].revents) {
            (void)snprintf(why_not, sizeof(why_not),
                           "the session's sandbox ended while /work was being copied");
        }
    }
    if (why_not[0]) {
        char text[600];
        ret->copy_out_done = false;
        (void)snprintf(text, sizeof(text),
                       "workspace '%s' was not saved: %s; its files are as before this session",
                       s->c->workspace, why_not);
        add_outcome_warning(ret, text);
    }
}

/* The supervisor's loop (struct session_hooks): the sandbox, its steps, the clients, the
 * signals and the timers, all in one poll(2), nothing that blocks. */
static int session_supervise(const struct nsbox_config *c, struct supervise_fds *fds,
                             uint64_t start, const struct cgroup_leaf *leaf,
                             struct nsbox_result *ret, void *userdata)
{
    struct session_state *s = userdata;
    struct step *st = &s->step;
    bool ready = false, init_lost = false;
    struct pollfd *pfds = NULL;
    int r = 0;

    s->leaf = leaf;
    s->fds = fds;
    s->run = ret;
    s->listener = -1;
    s->listen_fd = -1;
    s->start = start;
    for (size_t i = 0; i < CLIENTS_MAX; i++)
        s->clients[i] = (struct client){.fd = -1, .pass_fd = -1, .in_fd = -1};
    *st = (struct step){.audit = {.fd = -1},
                        .streams = {{.fd = -1}, {.fd = -1}},
                        .copy_fd = -1,
                        .outputs_fd = -1,
                        .in_fd = -1};
    s->chunk = malloc(READ_CHUNK);
    /* --watch-pid: opened now, while that process is alive (it waits for `session start`,
     * which waits for us), so that the pidfd is that process's and no later one's. */
    s->watch_fd = -1;
    if (s->o->watch_pid > 0) {
        s->watch_fd = sys_pidfd_open(s->o->watch_pid);
        if (s->watch_fd < 0)
            s->end_reason = "watched";
    }
    pfds = calloc(FIXED_FDS + CLIENTS_MAX + (fds->proxy ? proxy_max_pollfds(fds->proxy) : 0),
                  sizeof(*pfds));
    if (!s->chunk || !pfds)
        r = -ENOMEM;
    (void)fcntl(fds->report, F_SETFL, O_NONBLOCK);

    while (r == 0) {
        struct pollfd *p = pfds;
        struct client *pc[FIXED_FDS + CLIENTS_MAX] = {0};
        uint64_t now = now_usec(), until = UINT64_MAX;
        int np = FIXED_FDS, n_clients_end, timeout_ms;
        size_t idx_proxy = 0, n_proxy = 0;
        bool proxy_polled = false;

        /* The timers: the session's idle and lifetime limits, the step's clock, the drain of
         * its pipes, each client's deadline, the pace of refused calls. */
        if (ready && s->o->idle_timeout && !st->client)
            until = s->last_active + s->o->idle_timeout;
        if (ready && s->o->lifetime && start + s->o->lifetime < until)
            until = start + s->o->lifetime;
        if (st->client && !st->ended && !st->interrupted && st->kill_at < until)
            until = st->kill_at;
        if (st->client && st->ended && st->drain_until < until)
            until = st->drain_until;
        p[0] = (struct pollfd){.fd = s->control_fd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = fds->report, .events = POLLIN};
        p[2] = (struct pollfd){.fd = fds->pidfd, .events = POLLIN};
        p[3] = (struct pollfd){.fd = fds->signalfd, .events = POLLIN};
        p[4] = (struct pollfd){.fd = -1};
        if (s->listener >= 0 && now >= s->notif_at)
            p[4] = (struct pollfd){.fd = s->listener, .events = POLLIN};
        else if (s->listener >= 0) {
            /* Paced (NOTIF_BURST): look again when the next answer is due. */
            if (s->notif_at < until)
                until = s->notif_at;
            if (st->client && !st->ret.refused_throttled && listener_has_waiting(s->listener))
                st->ret.refused_throttled = true;
        }
        p[5] = (struct pollfd){.fd = ready && now >= s->refused_at ? s->listen_fd : -1,
                               .events = POLLIN};
        if (ready && now < s->refused_at && s->refused_at < until)
            until = s->refused_at; /* paced (REFUSED_BURST): look again then */
        p[6] = (struct pollfd){.fd = st->client ? st->streams[0].fd : -1, .events = POLLIN};
        p[7] = (struct pollfd){.fd = st->client ? st->streams[1].fd : -1, .events = POLLIN};
        p[8] = (struct pollfd){.fd = s->watch_fd, .events = POLLIN};
        for (size_t i = 0; i < CLIENTS_MAX; i++) {
            struct client *cl = &s->clients[i];
            short ev;
            if (cl->fd < 0 || cl->state == CLIENT_FREE || cl->state == CLIENT_STOPPING)
                continue;
            /* Waiting or running: polled for nothing but its hang-up (POLLHUP, always
             * reported), so that a client gone meanwhile is noticed. */
            ev = cl->state == CLIENT_READING ? POLLIN : cl->state == CLIENT_WRITING ? POLLOUT : 0;
            if ((cl->state == CLIENT_READING || cl->state == CLIENT_WRITING) &&
                cl->deadline < until)
                until = cl->deadline;
            pc[np] = cl;
            p[np++] = (struct pollfd){.fd = cl->fd, .events = ev};
        }
        n_clients_end = np;
        timeout_ms = until_ms(now, until);
        /* --network allow=: the proxy serves while the sandbox runs, in this same loop. */
        if (fds->proxy && !s->ended) {
            proxy_polled = true;
            idx_proxy = (size_t)np;
            n_proxy = proxy_poll_fill(fds->proxy, p + np, now, &timeout_ms);
            np += (int)n_proxy;
        }
        if (poll(p, (nfds_t)np, timeout_ms) < 0 && errno != EINTR) {
            r = negative_errno();
            break;
        }
        now = now_usec();
        if (proxy_polled) /* its deadlines too, when it had no descriptor to wait on */
            proxy_poll_handle(fds->proxy, p + idx_proxy, n_proxy, now);

        if (p[4].revents) {
            (void)pace_take(&s->notif_at, now, NOTIF_BURST, NOTIF_INTERVAL_USEC);
            if (!supervise_answer_notification(s->listener, fds->init_pid, session_no_network(c),
                                               st->client ? &st->ret
                                               : ready    ? &s->between
                                                          : ret)) {
                (void)close(s->listener);
                s->listener = -1;
            }
        }
        if ((p[1].revents & POLLIN) && !handle_report(s, st->client ? &st->ret
                                                         : ready    ? &s->between
                                                                    : ret))
            break; /* setup failed: ret says why */
        for (int i = 0; i < 2; i++)
            if (st->client && st->streams[i].fd >= 0 && p[6 + i].revents) {
                ssize_t n = stream_read(&st->streams[i], s->chunk);
                if (n > 0 && st->q.stream)
                    client_stream(st->client, i ? "stderr" : "stdout", s->chunk, (size_t)n);
            }
        if (p[3].revents && handle_signals(s))
            break;
        if (p[8].revents || (s->o->watch_pid > 0 && s->watch_fd < 0)) {
            s->end_reason = "watched";
            break;
        }
        if (p[2].revents) {
            s->ended = true;
            if (!ready && ret->status != NSBOX_STATUS_ERROR) {
                (void)handle_report(s, ret);
                if (ret->status != NSBOX_STATUS_ERROR) {
                    ret->status = NSBOX_STATUS_ERROR;
                    ret->exit_code = 125;
                    (void)snprintf(ret->error, sizeof(ret->error),
                                   "the session's sandbox ended while it was set up");
                }
            }
            s->end_reason = "sandbox ended";
            break;
        }
        if (p[0].revents && !handle_control(s, p[0].revents, &ready, ret, now)) {
            if (s->ended)
                s->end_reason = "sandbox ended";
            break;
        }
        if (ready && s->o->lifetime && now >= start + s->o->lifetime) {
            s->end_reason = "lifetime";
            break;
        }

        /* The step: its clock, the end of its pipes. */
        if (st->client && !st->ended && !st->interrupted && now >= st->kill_at) {
            struct session_msg m = {.type = SESSION_INTERRUPT};
            (void)control_send(s->control_fd, &m, NULL, 0);
            st->interrupted = true;
        }
        if (st->client && st->ended && now >= st->drain_until)
            for (int i = 0; i < 2; i++)
                if (st->streams[i].fd >= 0) {
                    st->streams[i].st->incomplete = true;
                    (void)close(st->streams[i].fd);
                    st->streams[i].fd = -1;
                }
        if (st->client && st->ended && st->streams[0].fd < 0 && st->streams[1].fd < 0) {
            step_finish(s, now);
            s->last_active = now;
        }

        /* The clients. */
        for (int i = FIXED_FDS; i < n_clients_end; i++) {
            struct client *cl = pc[i];
            if (cl->state == CLIENT_READING && p[i].revents)
                client_read(s, cl, now);
            else if (cl->state == CLIENT_WRITING && p[i].revents)
                client_write(cl);
            else if ((cl->state == CLIENT_QUEUED || cl->state == CLIENT_RUNNING) &&
                     (p[i].revents & (POLLHUP | POLLERR))) {
                /* Gone: a waiting step does not run; a running one runs to its end (its
                 * result goes to the audit log), its answer to nobody -- unless it asked to be
                 * interrupted then (interrupt_on_hangup: `nsbox mcp`'s cancelled calls), as
                 * its timeout would: the session goes on. */
                if (cl->state == CLIENT_RUNNING && st->client == cl && st->q.interrupt_on_hangup &&
                    !st->ended && !st->interrupted) {
                    struct session_msg m = {.type = SESSION_INTERRUPT};
                    (void)control_send(s->control_fd, &m, NULL, 0);
                    st->interrupted = true;
                    st->hung_up = true;
                }
                (void)close(cl->fd);
                cl->fd = -1;
                if (cl->state == CLIENT_QUEUED)
                    client_free(cl);
            }
        }
        for (size_t i = 0; i < CLIENTS_MAX; i++) {
            struct client *cl = &s->clients[i];
            if ((cl->state == CLIENT_READING || cl->state == CLIENT_WRITING) && now >= cl->deadline)
                client_expire(cl, now);
        }
        if (ready && (p[5].revents & POLLIN))
            client_accept(s, now);
        if (s->end_reason && strcmp(s->end_reason, "stopped") == 0)
            break;
        /* The next step, when none runs; none past max_steps (a pool's member is single-use:
         * a request queued behind its one run gets the session's end, never that run's
         * sandbox, which the run may have left a thread in). */
        while (!st->client && !init_lost && !(s->o->max_steps && s->steps >= s->o->max_steps)) {
            struct client *next = next_queued(s);
            if (!next)
                break;
            init_lost = step_start(s, next, now) < 0;
        }
        if (init_lost)
            break;
        /* max_steps (a pool's member): done once the last step is answered and no answer
         * is still going out. */
        if (s->o->max_steps && s->steps >= s->o->max_steps && !st->client) {
            bool writing = false;
            for (size_t i = 0; i < CLIENTS_MAX; i++)
                writing |= s->clients[i].state == CLIENT_WRITING;
            if (!writing) {
                s->end_reason = "used";
                break;
            }
        }
        if (ready && s->o->idle_timeout && !st->client &&
            now >= s->last_active + s->o->idle_timeout) {
            s->end_reason = "idle";
            break;
        }
    }

    if (s->watch_fd >= 0)
        (void)close(s->watch_fd);
    /* The socket first: no new client meets a dying session. */
    if (s->listen_fd >= 0) {
        (void)unlink(s->sock_path);
        (void)close(s->listen_fd);
    }
    {
        uint64_t now = now_usec();
        bool cut = st->client && !st->ended;
        /* The running step is cut off; waiting requests and ones still coming are told. */
        if (st->client)
            step_cut(s, now);
        for (size_t i = 0; i < CLIENTS_MAX; i++) {
            struct client *cl = &s->clients[i];
            if (cl->state == CLIENT_QUEUED || cl->state == CLIENT_READING)
                client_error(cl, now,
                             "the session ended before this step ran: %s; start a new "
                             "session for further steps",
                             end_words(s));
        }
        session_save(s, cut, ret);
    }
    if (!s->ended) {
        siginfo_t si;
        (void)sys_pidfd_send_signal(fds->pidfd, SIGKILL);
        (void)RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)fds->pidfd, &si, WEXITED));
    } else {
        siginfo_t si;
        (void)RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)fds->pidfd, &si, WEXITED));
    }
    /* The answers still going out get a moment (the sandbox is gone: nothing else waits). */
    for (uint64_t end = now_usec() + END_FLUSH_USEC;;) {
        struct pollfd p[CLIENTS_MAX];
        struct client *pc[CLIENTS_MAX];
        uint64_t now = now_usec();
        int np = 0;

        for (size_t i = 0; i < CLIENTS_MAX; i++)
            if (s->clients[i].state == CLIENT_WRITING && now < s->clients[i].deadline) {
                pc[np] = &s->clients[i];
                p[np++] = (struct pollfd){.fd = s->clients[i].fd, .events = POLLOUT};
            }
        if (np == 0 || now >= end || poll(p, (nfds_t)np, until_ms(now, end)) < 0)
            break;
        for (int i = 0; i < np; i++)
            if (p[i].revents)
                client_write(pc[i]);
    }
    /* Every client but the ones that asked to stop: those see EOF when this process exits. */
    for (size_t i = 0; i < CLIENTS_MAX; i++)
        if (s->clients[i].state != CLIENT_STOPPING)
            client_free(&s->clients[i]);
    step_clear(s);
    free(s->chunk);
    s->chunk = NULL;
    free(pfds);
    if (s->listener >= 0)
        (void)close(s->listener);
    (void)close(fds->out);
    (void)close(fds->err);
    (void)close(fds->report);
    if (fds->stdin_dst >= 0)
        (void)close(fds->stdin_dst);
    if (ret->status != NSBOX_STATUS_ERROR)
        ret->status = NSBOX_STATUS_KILLED;
    return r;
}

/* ---- start -------------------------------------------------------------------------------- */

/* The answer to `stop`, once the sandbox is gone: how it ended and, with a workspace, whether
 * it was saved, with the warnings of the end (why not). One line, sent without waiting (the
 * socket holds it: nothing else was sent on it); the client then sees EOF when this process
 * exits. */
static void answer_stop(struct session_state *s, const struct nsbox_result *ret)
{
    json_t *warnings = json_array(), *ws = json_null();
    const char *w = ret->warnings +
                    (s->save_warnings < sizeof(ret->warnings) ? s->save_warnings : 0);
    char *text, *line;
    json_t *j;

    while (warnings && *w) {
        const char *nl = strchr(w, '\n');
        size_t len = nl ? (size_t)(nl - w) : strlen(w);
        if (len)
            (void)json_array_append_new(warnings, json_stringn(w, len));
        w += len + (nl ? 1 : 0);
    }
    if (s->c->workspace)
        ws = json_pack("{s:s,s:b}", "name", s->c->workspace, "saved", ret->workspace_saved);
    j = json_pack("{s:b,s:s,s:s,s:o,s:o}", "stopped", true, "session_id", s->id, "reason",
                  s->end_reason ? s->end_reason : "stopped", "workspace", ws, "warnings",
                  warnings ? warnings : json_array());
    text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    line = text ? malloc(strlen(text) + 2) : NULL;
    if (line)
        (void)sprintf(line, "%s\n", text);
    for (size_t i = 0; line && i < CLIENTS_MAX; i++) {
        struct client *cl = &s->clients[i];
        if (cl->state == CLIENT_STOPPING && cl->fd >= 0)
            (void)RETRY_EINTR(send(cl->fd, line, strlen(line), MSG_DONTWAIT | MSG_NOSIGNAL));
    }
    free(line);
    free(text);
}

_noreturn_ static void supervisor_main(const struct nsbox_config *config,
                                       const struct session_options *o, int argc, char *argv[],
                                       int notify_fd)
{
    struct session_state s = {.c = config, .o = o, .notify_fd = notify_fd, .control_fd = -1};
    struct nsbox_config c = *config;
    struct registry_run reg = {0};
    struct nsbox_result ret = {0};
    char why[600] = "", dir[512];
    int sp[2], null_fd, r;

    /* A write to the gone caller of `session start` is an error to act on, not a death. */
    (void)signal(SIGPIPE, SIG_IGN);
    /* Nothing of the caller's: its terminal or pipes would stay open as long as the session. */
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0 || dup2(null_fd, 2) < 0) {
        notify(&s, "ERR cannot open /dev/null: %s\n", strerror(errno));
        _exit(125);
    }
    (void)close(null_fd);
    /* Nor any other descriptor the caller let nsbox inherit: a pipe the caller waits on for
     * EOF must not stay open as long as the session. The pipe to `session start` moves to 3. */
    if ((notify_fd != 3 && dup3(notify_fd, 3, O_CLOEXEC) < 0) || sys_close_range(4, ~0U, 0) < 0) {
        notify(&s, "ERR cannot close inherited descriptors: %s\n", strerror(errno));
        _exit(125);
    }
    s.notify_fd = 3;
    log_set_quiet(true);

    r = run_id_new(s.id);
    if (r >= 0)
        r = registry_path(dir, sizeof(dir));
    if (r < 0) {
        notify(&s, "ERR cannot make the session's id or find its runtime directory: %s\n",
               strerror(-r));
        _exit(125);
    }
    (void)snprintf(s.sock_path, sizeof(s.sock_path), "%s/%s.sock", dir, s.id);
    r = registry_add(s.id, argc, argv, &c, NULL, &reg, why, sizeof(why));
    if (r < 0) {
        notify(&s, "ERR %s\n",
               why[0] ? why
                      : "cannot add the session to the registry of running "
                        "sandboxes; the session does not start");
        _exit(125);
    }
    if (o->log_path) {
        /* Checked now, so that a log that would be refused refuses the session. */
        struct audit audit = {.fd = -1};
        r = audit_open(o->log_path, s.id, &c, &audit, why, sizeof(why));
        audit_close(&audit);
        if (r < 0) {
            notify(&s, "ERR refusing the audit log '%s': %s; the session does not start\n",
                   o->log_path, why[0] ? why : strerror(-r));
            registry_remove(&reg);
            _exit(125);
        }
        s.log_path = o->log_path;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        notify(&s, "ERR socketpair: %s\n", strerror(errno));
        registry_remove(&reg);
        _exit(125);
    }
    s.control_fd = sp[0];
    /* libarchive, for a step's --copy-out: init, a fork of this process, cannot load it once it
     * is in the sandbox (copy.h). Loaded now, when a step may want it; without it such a step
     * is told (EOPNOTSUPP) and the session works otherwise. */
    (void)copy_load(why, sizeof(why));
    {
        struct session_hooks hooks = {.init_fd = sp[1],
                                      .own_fd = sp[0],
                                      .supervise = session_supervise,
                                      .userdata = &s};
        c.forward_signals = true;
        c.stdout_fd = c.stderr_fd = -1;
        c.warn = NULL;
        (void)sandbox_run_session(&c, &hooks, &ret);
    }
    if (s.notify_fd < 0)
        answer_stop(&s, &ret);
    /* Gone from the registry before the caller hears of the failure: a start that failed
     * leaves nothing behind by the time `session start` returns. */
    (void)unlink(s.sock_path);
    registry_remove(&reg);
    if (ret.status == NSBOX_STATUS_ERROR)
        notify(&s, "ERR %s\n", ret.error[0] ? ret.error : "the session's sandbox failed");
    else
        notify(&s, "ERR the session's sandbox ended before it was up\n");
    nsbox_result_free(&ret);
    _exit(ret.status == NSBOX_STATUS_ERROR && ret.exit_code ? 125 : 0);
}

_noreturn_ void session_member_main(const struct nsbox_config *config,
                                    const struct session_options *o, int argc, char *argv[],
                                    int notify_fd)
{
    supervisor_main(config, o, argc, argv, notify_fd);
}

int session_start(const struct nsbox_config *config, const struct session_options *o, int argc,
                  char *argv[])
{
    int p[2];
    pid_t pid;
    char buf[1100];
    size_t have = 0;
    int status;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0) {
        log_error_errno(negative_errno(), "session start: socketpair: %m");
        return EXIT_NSBOX_FAILURE;
    }
    pid = fork();
    if (pid < 0) {
        log_error_errno(negative_errno(), "session start: fork: %m");
        return EXIT_NSBOX_FAILURE;
    }
    if (pid == 0) {
        /* Detached: its own session, not a child of the caller's (double fork), so that the
         * caller's shell, terminal and process group have nothing to do with it. */
        (void)close(p[0]);
        if (setsid() < 0)
            _exit(125);
        pid = fork();
        if (pid < 0)
            _exit(125);
        if (pid == 0)
            supervisor_main(config, o, argc, argv, p[1]);
        _exit(0);
    }
    (void)close(p[1]);
    (void)RETRY_EINTR(waitpid(pid, &status, 0));
    /* One line: "OK ID SOCKET" (the supervisor then waits for our byte) or "ERR MESSAGE". */
    while (have < sizeof(buf) - 1 && !memchr(buf, '\n', have)) {
        ssize_t n = RETRY_EINTR(read(p[0], buf + have, sizeof(buf) - 1 - have));
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    buf[have] = '\0';
    if (have > 0 && buf[have - 1] == '\n')
        buf[--have] = '\0';
    if (strncmp(buf, "OK ", 3) == 0) {
        char *id = buf + 3, *sock = strchr(id, ' ');
        if (sock)
            *sock++ = '\0';
        if (o->json) {
            json_t *j = json_pack("{s:s,s:s}", "id", id, "socket", sock ? sock : "");
            char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
            if (t)
                (void)printf("%s\n", t);
            free(t);
            json_decref(j);
        } else
            (void)printf("%s\n", id);
        /* The id is out: now the session may live (without this byte it ends). */
        if (fflush(stdout) != 0 || RETRY_EINTR(send(p[0], "y", 1, MSG_NOSIGNAL)) != 1) {
            (void)close(p[0]);
            log_error("session start: cannot print the session's id; the session ends");
            return EXIT_NSBOX_FAILURE;
        }
        (void)close(p[0]);
        return 0;
    }
    (void)close(p[0]);
    log_error("session start failed: %s",
              strncmp(buf, "ERR ", 4) == 0 ? buf + 4 : "the supervisor ended without a word");
    return EXIT_NSBOX_FAILURE;
}
