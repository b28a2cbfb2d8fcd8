/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The supervisor of a session (session.h): started detached by `nsbox session start`, it makes
 * the sandbox, listens on the session's socket and runs one step at a time on the sandbox's
 * init, until it is stopped, killed (`nsbox kill`: SIGUSR1), idle or past its lifetime. When it
 * ends, the sandbox ends with it: it kills init (and SIGKILL of the supervisor kills init by
 * PR_SET_PDEATHSIG), the cgroup leaf is removed as for a run, and the socket and the registry
 * record are removed (when the supervisor was SIGKILLed, by the next nsbox that sweeps the
 * registry).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "cgroup.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "registry.h"
#include "report.h"
#include "result.h"
#include "sandbox.h"
#include "session.h"
#include "supervise.h"
#include "syscalls.h"

#define EXIT_NSBOX_FAILURE 125
#define REQUEST_MAX (16u << 20) /* bytes of one request: the code of a step and more */
#define READ_CHUNK 65536
#define DRAIN_GRACE_USEC 200000 /* after a step's end, for its pipes to reach EOF */

/* No network at all (--network none): a refused internet socket gets the notes' hint. */
static bool session_no_network(const struct nsbox_config *c)
{
    return !c->network_host && !c->network_loopback && !(c->network_allow && c->network_allow[0]);
}

struct session_state {
    const struct nsbox_config *c;
    const struct session_options *o;
    char id[33];
    char sock_path[700];
    int notify_fd; /* to `session start`, until the sandbox is up */
    const char *log_path; /* the audit log, checked at the start (audit_open()), or NULL */
    int control_fd;
    struct supervise_fds *fds;
    int listener;  /* seccomp listener, once taken */
    int listen_fd;
    uint64_t start, last_active;
    uint64_t steps;
    const struct nsbox_result *run; /* the session's own result: its limits, as planned */
    const struct cgroup_leaf *leaf; /* the sandbox's cgroup leaf, or NULL (rlimits) */
    bool ended;    /* init is gone */
    const char *end_reason;
};

/* Tell `session start` how it went (one line on a socketpair), and for "OK" wait for its
 * answer: one byte once it has printed the id. Returns false when it is gone (killed, Ctrl-C)
 * before that: then nobody knows the session's id, and a session that starts must end. A
 * written line alone would not do: it sits in the socket whether or not anyone reads it. */
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
    if (n > 0 && RETRY_EINTR(send(s->notify_fd, buf,
                                  (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1,
                                  MSG_NOSIGNAL)) > 0)
        ok = strncmp(buf, "OK ", 3) != 0 || RETRY_EINTR(read(s->notify_fd, &ack, 1)) == 1;
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

static int control_send(int fd, const struct session_msg *m, const int *fds, int nfds)
{
    union {
        char buf[CMSG_SPACE(3 * sizeof(int))];
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
    return RETRY_EINTR(sendmsg(fd, &msg, MSG_NOSIGNAL)) < 0 ? negative_errno() : 0;
}

/* ---- events common to every wait --------------------------------------------------------- */

/* Take the seccomp listener init offers on the report pipe; note a setup failure. Returns
 * false when the sandbox failed. */
static bool handle_report(struct session_state *s, struct nsbox_result *ret)
{
    struct report rep;
    ssize_t n = RETRY_EINTR(read(s->fds->report, &rep, sizeof(rep)));

    if (n != sizeof(rep))
        return n < 0 && errno == EAGAIN;
    if (rep.type == REPORT_LISTENER) {
        s->listener = sys_pidfd_getfd(s->fds->pidfd, rep.code, 0);
        (void)!write(s->fds->sync, "x", 1);
        return true;
    }
    /* A setup failure ends the session; a program that could not be run is its step's result. */
    if (rep.type == REPORT_SETUP_FAILED || rep.type == REPORT_EXEC_FAILED)
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

/* ---- one step ---------------------------------------------------------------------------- */

struct stream {
    struct nsbox_stream *st;
    int fd;
    uint64_t limit;
    struct json_meter meter; /* the JSON size of what is kept (result.h) */
    bool full;
};

static void stream_read(struct stream *x, char *buf)
{
    ssize_t n = RETRY_EINTR(read(x->fd, buf, READ_CHUNK));

    if (n <= 0) {
        if (n < 0 && errno == EAGAIN)
            return;
        (void)close(x->fd);
        x->fd = -1;
        return;
    }
    x->st->total += (uint64_t)n;
    if (!x->full && x->st->captured < x->limit) {
        size_t keep = (size_t)n, fit;
        if (keep > x->limit - x->st->captured)
            keep = (size_t)(x->limit - x->st->captured);
        memcpy(x->st->data + x->st->captured, buf, keep);
        /* As for a run (supervise.c): the JSON string of what is kept stays within
         * JSON_OUTPUT_FACTOR x the limit, whatever the bytes are. */
        fit = json_meter_fit(&x->meter, x->st->data, x->st->captured, keep,
                             JSON_OUTPUT_FACTOR * x->limit);
        if (fit < keep)
            x->full = true;
        x->st->captured += fit;
        x->st->data[x->st->captured] = '\0';
    }
    x->st->truncated = x->st->total > x->st->captured;
}

static int memfd_with(const char *data, size_t size)
{
    int fd = memfd_create("nsbox-step", MFD_CLOEXEC);
    size_t done = 0;

    if (fd < 0)
        return negative_errno();
    while (done < size) {
        ssize_t n = RETRY_EINTR(write(fd, data + done, size - done));
        if (n <= 0) {
            (void)close(fd);
            return -EIO;
        }
        done += (size_t)n;
    }
    /* One open file description for all: the interpreter reads it from the start. */
    if (lseek(fd, 0, SEEK_SET) < 0) {
        (void)close(fd);
        return -EIO;
    }
    return fd;
}

struct step_request {
    bool code;
    char *payload; /* argv NUL-separated, or the code */
    size_t size;
    uint64_t timeout;      /* microseconds, 0 = none */
    uint64_t output_limit; /* bytes per stream */
};

static void add_warning(struct nsbox_result *ret, const char *text)
{
    size_t len = strlen(ret->warnings);
    (void)snprintf(ret->warnings + len, sizeof(ret->warnings) - len, "%s%s", len ? "\n" : "",
                   text);
}

/* Run one step and fill ret. Returns 0, or -errno when the session can go on no longer. */
static int run_step(struct session_state *s, const struct step_request *q, int client_fd,
                    struct nsbox_result *ret, uint32_t *ret_flags)
{
    int out[2] = {-1, -1}, err[2] = {-1, -1}, payload_fd;
    struct stream streams[2];
    struct session_msg m = {.type = q->code ? SESSION_CODE : SESSION_RUN}, end = {0};
    uint64_t start = now_usec(), kill_at = q->timeout ? start + q->timeout : UINT64_MAX;
    /* --lifetime holds during a step too: the step is cut off and the session ends. */
    uint64_t end_of_life = s->o->lifetime ? s->start + s->o->lifetime : UINT64_MAX;
    uint64_t drain_until = UINT64_MAX;
    bool ended = false, interrupted = false, dead = false;
    _cleanup_free_ char *buf = malloc(READ_CHUNK);
    int r = 0;

    struct nsbox_cgroup_stats before = {0};

    if (s->leaf)
        cgroup_leaf_stats(s->leaf, &before);
    ret->out.data = calloc(1, q->output_limit + 1);
    ret->err.data = calloc(1, q->output_limit + 1);
    if (!buf || !ret->out.data || !ret->err.data)
        return -ENOMEM;
    payload_fd = memfd_with(q->payload, q->size);
    if (payload_fd < 0)
        return payload_fd;
    /* Non-blocking on our read ends only: O_NONBLOCK of pipe2() would be on the write ends the
     * step gets too, and a step writing faster than we read would meet EAGAIN and lose output
     * that the result then called complete. */
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
        fcntl(out[0], F_SETFL, O_NONBLOCK) < 0 || fcntl(err[0], F_SETFL, O_NONBLOCK) < 0) {
        r = negative_errno();
        goto fail;
    }
    r = control_send(s->control_fd, &m, (int[]){payload_fd, out[1], err[1]}, 3);
    (void)close(payload_fd);
    (void)close(out[1]);
    (void)close(err[1]);
    payload_fd = out[1] = err[1] = -1;
    if (r < 0)
        goto fail;
    streams[0] = (struct stream){.st = &ret->out, .fd = out[0], .limit = q->output_limit};
    streams[1] = (struct stream){.st = &ret->err, .fd = err[0], .limit = q->output_limit};

    while (!ended || streams[0].fd >= 0 || streams[1].fd >= 0) {
        struct pollfd p[7];
        int np = 0, timeout = -1;
        uint64_t now = now_usec(), until = ended ? drain_until : interrupted ? UINT64_MAX : kill_at;

        if (!ended && end_of_life < until)
            until = end_of_life;

        p[np++] = (struct pollfd){.fd = s->control_fd, .events = POLLIN};
        p[np++] = (struct pollfd){.fd = s->fds->report, .events = POLLIN};
        p[np++] = (struct pollfd){.fd = s->fds->pidfd, .events = POLLIN};
        p[np++] = (struct pollfd){.fd = s->fds->signalfd, .events = POLLIN};
        p[np++] = (struct pollfd){.fd = s->listener, .events = POLLIN};
        p[np++] = (struct pollfd){.fd = streams[0].fd, .events = POLLIN};
        p[np++] = (struct pollfd){.fd = streams[1].fd, .events = POLLIN};
        if (until != UINT64_MAX)
            timeout = now >= until ? 0 : (int)((until - now + 999) / 1000);
        if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR) {
            r = negative_errno();
            break;
        }
        now = now_usec();
        if (p[4].revents && !supervise_answer_notification(s->listener, s->fds->init_pid,
                                                           session_no_network(s->c), ret)) {
            (void)close(s->listener);
            s->listener = -1;
        }
        if (p[1].revents & POLLIN)
            (void)handle_report(s, ret);
        for (int i = 0; i < 2; i++)
            if (streams[i].fd >= 0 && p[5 + i].revents)
                stream_read(&streams[i], buf);
        if (p[3].revents && handle_signals(s)) {
            /* The session ends: the step with it. */
            if (!ended)
                ret->status = NSBOX_STATUS_KILLED;
            dead = true;
            r = -ECANCELED;
            break;
        }
        if (p[2].revents) {
            s->ended = true;
            dead = true;
            r = -ESRCH;
            break;
        }
        if ((p[0].revents & (POLLHUP | POLLERR)) && ended) {
            s->ended = true; /* init is gone; the pidfd says so too */
            dead = true;
            r = -ESRCH;
            break;
        }
        if (p[0].revents && !ended) {
            ssize_t n = RETRY_EINTR(recv(s->control_fd, &end, sizeof(end), MSG_DONTWAIT));
            if (n == sizeof(end) && end.type == SESSION_STEP_END) {
                ended = true;
                drain_until = now + DRAIN_GRACE_USEC;
                ret->wall_time = now - start;
            } else if (n == 0) {
                s->ended = true;
                dead = true;
                r = -ESRCH;
                break;
            }
        }
        if (!ended && now >= end_of_life) {
            ret->status = NSBOX_STATUS_KILLED;
            s->end_reason = "lifetime";
            dead = true;
            r = -ECANCELED;
            break;
        }
        if (!ended && !interrupted && now >= kill_at) {
            m = (struct session_msg){.type = SESSION_INTERRUPT};
            (void)control_send(s->control_fd, &m, NULL, 0);
            interrupted = true;
        }
        if (ended && now >= drain_until) {
            for (int i = 0; i < 2; i++)
                if (streams[i].fd >= 0) {
                    streams[i].st->incomplete = true;
                    (void)close(streams[i].fd);
                    streams[i].fd = -1;
                }
        }
    }
    (void)client_fd;
    for (int i = 0; i < 2; i++)
        if (streams[i].fd >= 0) {
            (void)close(streams[i].fd);
            streams[i].fd = -1;
        }
    if (dead) {
        if (ret->status != NSBOX_STATUS_KILLED) {
            ret->status = NSBOX_STATUS_ERROR;
            ret->exit_code = 125;
            (void)snprintf(ret->error_step, sizeof(ret->error_step), "session");
            (void)snprintf(ret->error, sizeof(ret->error),
                           "the session's sandbox ended during the step; the session is over");
        }
        return r;
    }
    if (!ret->wall_time)
        ret->wall_time = now_usec() - start;
    /* Read what an exec failure reported (written before the step's process exited). */
    while (handle_report(s, ret) && ret->status != NSBOX_STATUS_ERROR) {
        struct pollfd pr = {.fd = s->fds->report, .events = POLLIN};
        if (poll(&pr, 1, 0) <= 0)
            break;
    }
    if (ret->status == NSBOX_STATUS_ERROR)
        return 0;
    if (s->leaf) {
        /* The leaf is the session's: what this step added (the peak is the session's). */
        cgroup_leaf_stats(s->leaf, &ret->cgroup);
        ret->cgroup.oom_kills -= before.oom_kills < ret->cgroup.oom_kills ? before.oom_kills
                                                                          : ret->cgroup.oom_kills;
        ret->cgroup.pids_limit_hits -= before.pids_limit_hits < ret->cgroup.pids_limit_hits
                                           ? before.pids_limit_hits
                                           : ret->cgroup.pids_limit_hits;
        ret->cgroup.cpu_user -= before.cpu_user < ret->cgroup.cpu_user ? before.cpu_user
                                                                       : ret->cgroup.cpu_user;
        ret->cgroup.cpu_system -= before.cpu_system < ret->cgroup.cpu_system
                                      ? before.cpu_system
                                      : ret->cgroup.cpu_system;
    }
    if (interrupted) {
        ret->status = NSBOX_STATUS_TIMEOUT;
        ret->timeout.enforced_by = NSBOX_ENFORCER_NONE;
    } else if (end.end == SESSION_END_SIGNALED) {
        ret->status = NSBOX_STATUS_SIGNALED;
        ret->signal = end.code;
        /* The cgroup's OOM killer sends SIGKILL; memory.events says it was the OOM killer. */
        if (ret->cgroup.oom_kills > 0 && end.code == SIGKILL)
            ret->status = NSBOX_STATUS_OOM;
    } else {
        ret->status = NSBOX_STATUS_EXITED;
        ret->exit_code = end.code;
    }
    if (end.flags & SESSION_INTERPRETER_RESTARTED)
        add_warning(ret, "the step's time was up and the Python interpreter did not stop on "
                         "KeyboardInterrupt within 2 s: it was killed; the next step starts a "
                         "fresh interpreter (variables, imports and open files are lost)");
    if (end.flags & SESSION_INTERPRETER_CRASHED)
        add_warning(ret, "the session's Python interpreter died during the step; the next step "
                         "starts a fresh one (variables, imports and open files are lost)");
    *ret_flags = end.flags;
    return 0;

fail:
    if (payload_fd >= 0)
        (void)close(payload_fd);
    for (int i = 0; i < 2; i++) {
        if (out[i] >= 0)
            (void)close(out[i]);
        if (err[i] >= 0)
            (void)close(err[i]);
    }
    return r;
}

/* ---- clients ------------------------------------------------------------------------------ */

static void reply(int fd, json_t *j)
{
    char *text = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6));
    size_t len, done = 0;

    json_decref(j);
    if (!text)
        return;
    len = strlen(text);
    text[len] = '\n'; /* replaces the NUL: written with its length */
    while (done < len + 1) {
        ssize_t n = RETRY_EINTR(send(fd, text + done, len + 1 - done, MSG_NOSIGNAL));
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    free(text);
}

static void reply_error(int fd, const char *message)
{
    reply(fd, json_pack("{s:s}", "error", message));
}

/* Read one request line (a JSON object) from the client. */
static json_t *read_request(int fd)
{
    size_t have = 0, size = 4096;
    char *buf = malloc(size);
    json_t *j = NULL;

    /* A client has 10 s to send its request: it cannot hold the session idle-proof. */
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){.tv_sec = 10},
                     sizeof(struct timeval));
    while (buf) {
        ssize_t n;
        if (have == size) {
            char *b = size >= REQUEST_MAX ? NULL : realloc(buf, size * 2);
            if (!b)
                break;
            buf = b;
            size *= 2;
        }
        n = RETRY_EINTR(recv(fd, buf + have, size - have, 0));
        if (n <= 0)
            break;
        if (memchr(buf + have, '\n', (size_t)n)) {
            have += (size_t)n;
            j = json_loadb(buf, have, JSON_DISABLE_EOF_CHECK, NULL);
            break;
        }
        have += (size_t)n;
    }
    free(buf);
    return j;
}

static int parse_request(const struct session_state *s, json_t *j, struct step_request *q,
                         const char **why)
{
    json_t *argv = json_object_get(j, "argv"), *code = json_object_get(j, "code");
    json_t *timeout = json_object_get(j, "timeout"), *limit = json_object_get(j, "output_limit");
    const char *op = json_string_value(json_object_get(j, "op"));

    *q = (struct step_request){.timeout = s->c->timeout, .output_limit = s->c->output_limit};
    if (timeout) {
        if (!json_is_number(timeout) || json_number_value(timeout) < 0 ||
            json_number_value(timeout) > 1e6)
            return *why = "\"timeout\" must be a number of seconds", -EINVAL;
        q->timeout = (uint64_t)(json_number_value(timeout) * 1e6);
    }
    if (limit) {
        if (!json_is_integer(limit) || json_integer_value(limit) < 0 ||
            json_integer_value(limit) > (64 << 20))
            return *why = "\"output_limit\" must be a number of bytes up to 64 MiB", -EINVAL;
        q->output_limit = (uint64_t)json_integer_value(limit);
    }
    if (op && strcmp(op, "code") == 0 && json_is_string(code)) {
        q->code = true;
        q->size = json_string_length(code);
        q->payload = malloc(q->size + 1);
        if (!q->payload)
            return -ENOMEM;
        memcpy(q->payload, json_string_value(code), q->size);
        return 0;
    }
    if (op && strcmp(op, "exec") == 0 && json_is_array(argv) && json_array_size(argv) > 0) {
        size_t i;
        json_t *v;
        json_array_foreach(argv, i, v) {
            if (!json_is_string(v) || memchr(json_string_value(v), '\0', json_string_length(v)))
                return *why = "\"argv\" must be strings without NUL", -EINVAL;
            q->size += json_string_length(v) + 1;
        }
        q->payload = malloc(q->size);
        if (!q->payload)
            return -ENOMEM;
        q->size = 0;
        json_array_foreach(argv, i, v) {
            memcpy(q->payload + q->size, json_string_value(v), json_string_length(v) + 1);
            q->size += json_string_length(v) + 1;
        }
        return 0;
    }
    return *why = "a request is {\"op\": \"exec\", \"argv\": [...]}, {\"op\": \"code\", \"code\": "
                  "\"...\"} or {\"op\": \"stop\"}",
           -EINVAL;
}

/* With an audit log: its start record for the step, as for a run (audit.h), its own run id,
 * nsbox's argv given as `nsbox session exec SESSION-ID step N`. Returns 0 or -errno. */
static int audit_step_start(struct session_state *s, const struct step_request *q,
                            struct audit *ret)
{
    struct nsbox_config c = *s->c;
    char step[24], id[33], why[300];
    char *argv[64 + 1] = {0};
    char *const nsbox_argv[] = {"nsbox", "session", "exec", s->id, "step", step, NULL};
    size_t n = 0;
    int r;

    if (!s->log_path)
        return 0;
    r = run_id_new(id);
    if (r < 0)
        return r;
    (void)snprintf(step, sizeof(step), "%" PRIu64, s->steps);
    if (q->code) {
        c.code = q->payload;
        c.code_size = q->size;
    } else {
        /* The argv, NUL-separated; the first 64 arguments are recorded. */
        for (size_t i = 0; i < q->size && n < 64; i += strlen(q->payload + i) + 1)
            argv[n++] = q->payload + i;
        c.code = NULL;
        c.argv = argv;
    }
    c.timeout = q->timeout;
    r = audit_open(s->log_path, id, &c, ret, why, sizeof(why));
    if (r >= 0)
        r = audit_start(ret, 6, nsbox_argv, &c, s->o->log_code_limit);
    return r;
}

/* Serve one connection. Returns 1 when the session is to stop (client_fd is then kept open
 * and closed by the process's exit, so that the client sees EOF when the sandbox is gone), 0 to
 * go on, or -errno when the session cannot go on. */
static int serve(struct session_state *s, int client_fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    json_t *j, *res;
    struct step_request q = {0};
    struct nsbox_result ret = {0};
    const char *why = NULL, *op;
    struct audit audit = {.fd = -1};
    uint32_t flags = 0;
    int r;

    /* Only the caller's uid: the directory is already 0700, this holds if it were not. */
    if (getsockopt(client_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid())
        return 0;
    j = read_request(client_fd);
    if (!j) {
        reply_error(client_fd, "the request is not one line of JSON");
        return 0;
    }
    op = json_string_value(json_object_get(j, "op"));
    if (op && strcmp(op, "stop") == 0) {
        json_decref(j);
        s->end_reason = "stopped";
        return 1;
    }
    r = parse_request(s, j, &q, &why);
    json_decref(j);
    if (r < 0) {
        reply_error(client_fd, why ? why : strerror(-r));
        free(q.payload);
        return 0;
    }
    /* The sandbox's limits, as its setup placed them; the step's own clock and output. */
    ret = (struct nsbox_result){
        .memory = s->run->memory,
        .pids_limit = s->run->pids_limit,
        .cpus = s->run->cpus,
        .timeout = {q.timeout, NSBOX_ENFORCER_NONE},
        .output_limit = q.output_limit,
        .host_uid = s->run->host_uid,
        .host_gid = s->run->host_gid,
    };
    memcpy(ret.limits_note, s->run->limits_note, sizeof(ret.limits_note));
    memcpy(ret.name, s->run->name, sizeof(ret.name));
    s->steps++;
    r = audit_step_start(s, &q, &audit);
    if (r < 0) {
        /* A step that cannot be recorded does not run, as a run would not. */
        char text[600];
        (void)snprintf(text, sizeof(text), "cannot write the audit log '%s': %s; the step does "
                       "not run", s->log_path, strerror(-r));
        reply_error(client_fd, text);
        audit_close(&audit);
        free(q.payload);
        nsbox_result_free(&ret);
        return 0;
    }
    r = run_step(s, &q, client_fd, &ret, &flags);
    if (audit.fd >= 0) {
        int ar = audit_end(&audit, &ret);
        audit_close(&audit);
        if (ar < 0 && ret.status != NSBOX_STATUS_ERROR) {
            ret.status = NSBOX_STATUS_ERROR;
            ret.exit_code = 125;
            (void)snprintf(ret.error_step, sizeof(ret.error_step), "audit log");
            (void)snprintf(ret.error, sizeof(ret.error),
                           "cannot write the step's result to the audit log '%s': %s",
                           s->log_path, strerror(-ar));
        }
    }
    free(q.payload);
    res = result_to_json_object(&ret);
    if (res) {
        (void)json_object_set_new(res, "session_id", json_string(s->id));
        (void)json_object_set_new(res, "step", json_integer((json_int_t)s->steps));
        if (q.code)
            (void)json_object_set_new(
                res, "interpreter",
                json_string(flags & SESSION_INTERPRETER_RESTARTED  ? "restarted"
                            : flags & SESSION_INTERPRETER_CRASHED  ? "crashed"
                            : flags & SESSION_INTERPRETER_NEW      ? "started"
                                                                   : "kept"));
        if (ret.status == NSBOX_STATUS_TIMEOUT) {
            char reason[300];
            (void)snprintf(reason, sizeof(reason),
                           "timed out after %.3g s: %s; the session%s go on",
                           (double)q.timeout / 1e6,
                           !q.code ? "the step's processes were killed"
                           : flags & SESSION_INTERPRETER_RESTARTED
                               ? "the Python interpreter ignored KeyboardInterrupt and was "
                                 "killed (its variables are lost)"
                               : "KeyboardInterrupt stopped the code",
                           q.code && !(flags & SESSION_INTERPRETER_RESTARTED)
                               ? ", its files and the interpreter's variables"
                               : " and its files");
            (void)json_object_set_new(res, "reason", json_string(reason));
        }
        reply(client_fd, res);
    }
    nsbox_result_free(&ret);
    s->last_active = now_usec();
    return r < 0 ? r : 0;
}

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

/* The supervisor's loop (struct session_hooks). */
static int session_supervise(const struct nsbox_config *c, struct supervise_fds *fds,
                             uint64_t start, const struct cgroup_leaf *leaf,
                             struct nsbox_result *ret, void *userdata)
{
    struct session_state *s = userdata;

    s->leaf = leaf;
    bool ready = false;
    int r = 0;

    s->fds = fds;
    s->run = ret;
    s->listener = -1;
    s->listen_fd = -1;
    s->start = start;
    (void)c;
    (void)fcntl(fds->report, F_SETFL, O_NONBLOCK);

    for (;;) {
        struct pollfd p[6] = {
            {.fd = s->control_fd, .events = POLLIN},
            {.fd = fds->report, .events = POLLIN},
            {.fd = fds->pidfd, .events = POLLIN},
            {.fd = fds->signalfd, .events = POLLIN},
            {.fd = s->listener, .events = POLLIN},
            {.fd = s->listen_fd, .events = POLLIN},
        };
        uint64_t now = now_usec(), until = UINT64_MAX;
        int timeout = -1;

        if (ready && s->o->idle_timeout)
            until = s->last_active + s->o->idle_timeout;
        if (ready && s->o->lifetime && start + s->o->lifetime < until)
            until = start + s->o->lifetime;
        if (until != UINT64_MAX)
            timeout = now >= until ? 0 : (int)((until - now + 999) / 1000);
        if (poll(p, 6, timeout) < 0 && errno != EINTR) {
            r = negative_errno();
            break;
        }
        now = now_usec();
        if (p[4].revents && !supervise_answer_notification(s->listener, fds->init_pid,
                                                           session_no_network(c), ret)) {
            (void)close(s->listener);
            s->listener = -1;
        }
        if ((p[1].revents & POLLIN) && !handle_report(s, ret))
            break; /* setup failed: ret says why */
        if (p[3].revents && handle_signals(s))
            break;
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
        if (p[0].revents && !ready) {
            struct session_msg m;
            ssize_t n = RETRY_EINTR(recv(s->control_fd, &m, sizeof(m), MSG_DONTWAIT));
            if (n == sizeof(m) && m.type == SESSION_READY) {
                r = listen_on(s);
                if (r < 0) {
                    (void)snprintf(ret->error, sizeof(ret->error),
                                   "cannot listen on the session's socket %s: %s", s->sock_path,
                                   strerror(-r));
                    ret->status = NSBOX_STATUS_ERROR;
                    ret->exit_code = 125;
                    break;
                }
                s->listen_fd = r;
                r = 0;
                ready = true;
                s->last_active = now;
                if (!notify(s, "OK %s %s\n", s->id, s->sock_path)) {
                    s->end_reason = "the caller of session start is gone";
                    break;
                }
            } else if (n == 0) {
                s->ended = true;
                break;
            }
        } else if (p[0].revents & (POLLHUP | POLLERR)) {
            s->ended = true;
            break;
        } else if (p[0].revents & POLLIN) {
            /* Init says nothing between steps; whatever it is, read it, so that it cannot
             * keep poll(2) spinning. */
            struct session_msg m;
            (void)!recv(s->control_fd, &m, sizeof(m), MSG_DONTWAIT);
        }
        if (ready && p[5].revents) {
            int client = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (client >= 0) {
                /* Blocking for the request and the answer. */
                (void)fcntl(client, F_SETFL, 0);
                r = serve(s, client);
                if (r == 1) {
                    r = 0;
                    break; /* client stays open until this process exits */
                }
                (void)close(client);
                if (r < 0) {
                    r = 0;
                    break;
                }
            }
        }
        if (ready && until != UINT64_MAX && now >= until) {
            s->end_reason = s->o->lifetime && now >= start + s->o->lifetime ? "lifetime"
                                                                             : "idle";
            break;
        }
    }

    /* The socket first: no new client meets a dying session. */
    if (s->listen_fd >= 0) {
        (void)unlink(s->sock_path);
        (void)close(s->listen_fd);
    }
    if (!s->ended) {
        siginfo_t si;
        (void)sys_pidfd_send_signal(fds->pidfd, SIGKILL);
        (void)RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)fds->pidfd, &si, WEXITED));
    } else {
        siginfo_t si;
        (void)RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)fds->pidfd, &si, WEXITED));
    }
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

_noreturn_ static void supervisor_main(const struct nsbox_config *config,
                                       const struct session_options *o, int argc, char *argv[],
                                       int notify_fd)
{
    struct session_state s = {.c = config, .o = o, .notify_fd = notify_fd, .control_fd = -1};
    struct nsbox_config c = *config;
    struct registry_run reg = {0};
    struct nsbox_result ret = {0};
    char why[300] = "", dir[512];
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
    if ((notify_fd != 3 && dup3(notify_fd, 3, O_CLOEXEC) < 0) ||
        sys_close_range(4, ~0U, 0) < 0) {
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
        notify(&s, "ERR %s\n", why[0] ? why : "cannot add the session to the registry of running "
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
    {
        struct session_hooks hooks = {.init_fd = sp[1], .own_fd = sp[0],
                                      .supervise = session_supervise, .userdata = &s};
        c.forward_signals = true;
        c.stdout_fd = c.stderr_fd = -1;
        c.warn = NULL;
        (void)sandbox_run_session(&c, &hooks, &ret);
    }
    if (ret.status == NSBOX_STATUS_ERROR)
        notify(&s, "ERR %s\n", ret.error[0] ? ret.error : "the session's sandbox failed");
    else
        notify(&s, "ERR the session's sandbox ended before it was up\n");
    (void)unlink(s.sock_path);
    registry_remove(&reg);
    nsbox_result_free(&ret);
    _exit(ret.status == NSBOX_STATUS_ERROR && ret.exit_code ? 125 : 0);
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
