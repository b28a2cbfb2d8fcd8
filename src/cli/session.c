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
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "registry.h"
#include "result.h"
#include "session-internal.h"
#include "session.h"
#include "syscalls.h"

#define EXIT_NSBOX_FAILURE 125
/* The loop's descriptors before the clients': signals, the socket, --watch-pid's pidfd. The
 * sandbox's (nsbox_sandbox_pollfds()) come after the clients'. */
#define FIXED_FDS 3

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
        while (!ok && s->signal_fd >= 0) {
            struct pollfd p[2] = {{.fd = s->notify_fd, .events = POLLIN},
                                  {.fd = s->signal_fd, .events = POLLIN}};
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

/* Signals to the supervisor: SIGUSR1 (`nsbox kill`), SIGTERM, SIGINT, SIGHUP end the session. */
static bool handle_signals(struct session_state *s)
{
    struct signalfd_siginfo si;
    bool end = false;

    while (read(s->signal_fd, &si, sizeof(si)) == sizeof(si)) {
        end = true;
        s->end = si.ssi_signo == SIGUSR1 ? SESSION_REASON_KILLED : SESSION_REASON_SIGNAL;
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

/* The next queued request, first come first served, or NULL. */
static struct client *next_queued(struct session_state *s)
{
    struct client *next = NULL;

    for (size_t i = 0; i < CLIENTS_MAX; i++)
        if (s->clients[i].state == CLIENT_QUEUED && (!next || s->clients[i].seq < next->seq))
            next = &s->clients[i];
    return next;
}

/*
 * With --workspace: whether the session's end saves it (nsbox_sandbox_stop() does the save). It
 * does when the session ends between steps, by `session stop`, --idle-timeout or --lifetime;
 * not after `nsbox kill` or a signal, and not when the end cut off a running step: its /work
 * may be half-written, as a run's after a timeout (which is not saved either). Returns NULL
 * (save) or why not, in buf.
 */
static const char *save_refusal(const struct session_state *s, bool step_cut, char *buf,
                                size_t size)
{
    if (step_cut)
        (void)snprintf(buf, size,
                       "the session ended (%s) while a step ran, and the step was killed: /work "
                       "may be half-written, as after a run's timeout",
                       end_words(s));
    else if (s->end != SESSION_REASON_STOPPED && s->end != SESSION_REASON_IDLE &&
             s->end != SESSION_REASON_LIFETIME)
        (void)snprintf(buf, size, "the session ended because %s",
                       s->end == SESSION_REASON_KILLED || s->end == SESSION_REASON_SIGNAL
                           ? end_words(s)
                           : session_reason_token(s->end));
    else
        return NULL;
    return buf;
}

/* The supervisor's loop: the sandbox (nsbox_sandbox_pollfds()), its steps, the clients, the
 * signals and the timers, all in one poll(2), nothing that blocks. Returns 0 or -errno. */
static int session_loop(struct session_state *s)
{
    struct step *st = &s->step;
    size_t n_sandbox = nsbox_sandbox_pollfds_max(s->sandbox);
    _cleanup_free_ struct pollfd *pfds = calloc(FIXED_FDS + CLIENTS_MAX + n_sandbox, sizeof(*pfds));
    bool init_lost = false;
    int r = 0;

    if (!pfds)
        return -ENOMEM;
    while (r == 0) {
        struct pollfd *p = pfds;
        struct client *pc[FIXED_FDS + CLIENTS_MAX] = {0};
        uint64_t now = now_usec(), until = UINT64_MAX;
        int np = FIXED_FDS, n_clients_end, timeout_ms;
        size_t ns;
        unsigned ev;

        /* The timers: the session's idle and lifetime limits, each client's deadline, the pace
         * of refused connections; the sandbox's own (its step's clock) come with its fds. */
        if (s->o->idle_timeout && !st->client)
            until = s->last_active + s->o->idle_timeout;
        if (s->o->lifetime && s->start + s->o->lifetime < until)
            until = s->start + s->o->lifetime;
        p[0] = (struct pollfd){.fd = s->signal_fd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = now >= s->refused_at ? s->listen_fd : -1, .events = POLLIN};
        if (now < s->refused_at && s->refused_at < until)
            until = s->refused_at; /* paced (REFUSED_BURST): look again then */
        p[2] = (struct pollfd){.fd = s->watch_fd, .events = POLLIN};
        for (size_t i = 0; i < CLIENTS_MAX; i++) {
            struct client *cl = &s->clients[i];
            short events;
            if (cl->fd < 0 || cl->state == CLIENT_FREE || cl->state == CLIENT_STOPPING)
                continue;
            /* Waiting or running: polled for nothing but its hang-up (POLLHUP, always
             * reported), so that a client gone meanwhile is noticed. */
            events = cl->state == CLIENT_READING   ? POLLIN
                     : cl->state == CLIENT_WRITING ? POLLOUT
                                                   : 0;
            if ((cl->state == CLIENT_READING || cl->state == CLIENT_WRITING) &&
                cl->deadline < until)
                until = cl->deadline;
            pc[np] = cl;
            p[np++] = (struct pollfd){.fd = cl->fd, .events = events};
        }
        n_clients_end = np;
        ns = nsbox_sandbox_pollfds(s->sandbox, p + np, &until);
        timeout_ms = until_ms(now, until);
        if (poll(p, (nfds_t)np + ns, timeout_ms) < 0 && errno != EINTR) {
            r = negative_errno();
            break;
        }
        now = now_usec();

        ev = nsbox_sandbox_dispatch(s->sandbox, p + np, ns);
        if (p[0].revents && handle_signals(s))
            break;
        if (p[2].revents || (s->o->watch_pid > 0 && s->watch_fd < 0)) {
            s->end = SESSION_REASON_WATCHED;
            break;
        }
        if (ev & NSBOX_SANDBOX_ENDED) {
            s->ended = true;
            s->end = SESSION_REASON_SANDBOX_ENDED;
            break;
        }
        if (s->o->lifetime && now >= s->start + s->o->lifetime) {
            s->end = SESSION_REASON_LIFETIME;
            break;
        }
        if (ev & NSBOX_SANDBOX_STEP_DONE) {
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
                    !st->hung_up) {
                    nsbox_sandbox_step_interrupt(s->sandbox);
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
        if (p[1].revents & POLLIN)
            client_accept(s, now);
        if (s->end == SESSION_REASON_STOPPED)
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
                s->end = SESSION_REASON_USED;
                break;
            }
        }
        if (s->o->idle_timeout && !st->client && now >= s->last_active + s->o->idle_timeout) {
            s->end = SESSION_REASON_IDLE;
            break;
        }
    }
    return r;
}

/* The session's end: the socket goes, the running step is cut off, waiting requests are told,
 * the sandbox is stopped (saving the workspace when it may), and the last answers go out. */
static void session_end(struct session_state *s, struct nsbox_result *ret)
{
    struct step *st = &s->step;
    uint64_t now = now_usec();
    bool cut = false;
    char why[400];
    const char *no_save;

    if (s->watch_fd >= 0)
        (void)close(s->watch_fd);
    /* The socket first: no new client meets a dying session. */
    if (s->listen_fd >= 0) {
        (void)unlink(s->sock_path);
        (void)close(s->listen_fd);
        s->listen_fd = -1;
    }
    /* A step that had ended, its pipes still read, is not cut off: its answer is whole. */
    if (st->client)
        cut = step_cut(s, now);
    for (size_t i = 0; i < CLIENTS_MAX; i++) {
        struct client *cl = &s->clients[i];
        if (cl->state == CLIENT_QUEUED || cl->state == CLIENT_READING)
            client_error(cl, now,
                         "the session ended before this step ran: %s; start a new session for "
                         "further steps",
                         end_words(s));
    }
    no_save = save_refusal(s, cut, why, sizeof(why));
    (void)nsbox_sandbox_stop(s->sandbox, no_save, s->signal_fd, ret);
    /* A signal gave the save up (cancel_fd): the session ends by it, and the answer to `stop`
     * says so (its reason "killed" or "signal"), as for a signal between steps. */
    if (s->c->workspace && !no_save && !ret->workspace_saved)
        (void)handle_signals(s);
    s->sandbox = NULL;
    /* The answers still going out get a moment (the sandbox is gone: nothing else waits). */
    for (uint64_t end = now_usec() + END_FLUSH_USEC;;) {
        struct pollfd p[CLIENTS_MAX];
        struct client *pc[CLIENTS_MAX];
        int np = 0;

        now = now_usec();
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
}

/* ---- start -------------------------------------------------------------------------------- */

/* The answer to `stop`, once the sandbox is gone: how it ended and, with a workspace, whether
 * it was saved, with the warnings of the end (why not). One line, sent without waiting (the
 * socket holds it: nothing else was sent on it); the client then sees EOF when this process
 * exits. */
static void answer_stop(struct session_state *s, const struct nsbox_result *ret)
{
    json_t *warnings = json_array(), *ws = json_null();
    size_t start_warnings = strlen(s->run.warnings);
    const char *w = ret->warnings + (start_warnings < sizeof(ret->warnings) ? start_warnings : 0);
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
                  session_reason_token(s->end), "workspace", ws, "warnings",
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
    struct session_state s = {.c = config,
                              .o = o,
                              .notify_fd = notify_fd,
                              .signal_fd = -1,
                              .listen_fd = -1,
                              .watch_fd = -1,
                              .step = {.audit = {.fd = -1}, .in_fd = -1}};
    struct nsbox_config c = *config;
    struct registry_run reg = {0};
    struct nsbox_result ret = {0};
    char why[600] = "", dir[512];
    sigset_t set;
    int null_fd, r;

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
    for (size_t i = 0; i < CLIENTS_MAX; i++)
        s.clients[i] = (struct client){.fd = -1, .pass_fd = -1, .in_fd = -1};
    /* Signals: blocked from here on and read in the loop, so that every one that would end
     * this process ends the session instead, the sandbox torn down (SIGUSR1 is `nsbox kill`). */
    nsbox_signal_set(&set);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
        (s.signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        notify(&s, "ERR cannot block signals: %s\n", strerror(errno));
        registry_remove(&reg);
        _exit(125);
    }
    /* --watch-pid: opened now, while that process is alive (it waits for `session start`,
     * which waits for us), so that the pidfd is that process's and no later one's. */
    if (o->watch_pid > 0) {
        s.watch_fd = sys_pidfd_open(o->watch_pid);
        if (s.watch_fd < 0) {
            notify(&s, "ERR the process to watch (--watch-pid %d) is gone: %s\n", (int)o->watch_pid,
                   strerror(errno));
            registry_remove(&reg);
            _exit(125);
        }
    }
    c.forward_signals = false;
    c.stdout_fd = c.stderr_fd = -1;
    /* Every request carries its output limit (session-client.c: the session's by default), and
     * a step's 0 is the sandbox's (nsbox_step): with the sandbox's 0, a request's 0 keeps
     * nothing, as nsbox run --output-limit 0 does. */
    c.output_limit = 0;
    c.warn = NULL;
    /* The signals end a start too (a workspace's files may take seconds to set up). */
    r = nsbox_sandbox_start(&c, s.signal_fd, &s.sandbox, &s.run);
    if (r >= 0) {
        s.start = s.last_active = now_usec();
        r = listen_on(&s);
        if (r < 0) {
            (void)snprintf(why, sizeof(why), "cannot listen on the session's socket %s: %s",
                           s.sock_path, strerror(-r));
            (void)nsbox_sandbox_stop(s.sandbox, why, -1, &ret);
            nsbox_result_free(&ret);
            registry_remove(&reg);
            notify(&s, "ERR %s\n", why);
            _exit(125);
        }
        s.listen_fd = r;
        if (!notify(&s, "OK %s %s\n", s.id, s.sock_path))
            s.end = SESSION_REASON_CALLER_GONE;
        else
            r = session_loop(&s);
        if (r < 0 && !s.end)
            s.end = SESSION_REASON_FAILED;
        session_end(&s, &ret);
        answer_stop(&s, &ret);
    } else {
        ret = s.run;
        if (r == -ECANCELED && handle_signals(&s))
            (void)snprintf(ret.error, sizeof(ret.error),
                           "the session was ended (%s) while its sandbox was set up",
                           s.end == SESSION_REASON_KILLED ? "nsbox kill" : "a signal");
    }
    /* Gone from the registry before the caller hears of the failure: a start that failed
     * leaves nothing behind by the time `session start` returns. */
    (void)unlink(s.sock_path);
    registry_remove(&reg);
    if (ret.status == NSBOX_STATUS_ERROR)
        notify(&s, "ERR %s\n", ret.error[0] ? ret.error : "the session's sandbox failed");
    else
        notify(&s, "ERR the session's sandbox ended before it was up\n");
    r = ret.status == NSBOX_STATUS_ERROR && ret.exit_code ? 125 : 0;
    nsbox_result_free(&ret);
    _exit(r);
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
