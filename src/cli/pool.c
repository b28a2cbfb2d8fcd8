/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pool's process (pool.h): one poll(2) loop over its socket, its clients, its signals and
 * its members (each a session supervisor it forked: its start line, its preload's answer, its
 * pidfd). No third supervisor: the sandboxes, their steps and their limits are the sessions';
 * the pool only starts them, hands them out once and starts the next.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "pool.h"
#include "registry.h"
#include "syscalls.h"

#define EXIT_NSBOX_FAILURE 125
#define POOL_CLIENTS_MAX 64
/* Members alive at once: the waiting ones and the ones lent out, until they have ended. */
#define MEMBERS_MAX (POOL_SIZE_MAX + POOL_CLIENTS_MAX)
#define LINE_MAX_BYTES (1U << 20)            /* a member's start line or its preload's answer */
#define MEMBER_START_USEC (120 * 1000000ULL) /* for a member to be up with its preload done */
#define REFILL_BACKOFF_USEC 1000000ULL       /* after a member failed to start */
#define REQUEST_USEC (10 * 1000000ULL)       /* for a client to send its line */
/* Refused connections: a burst, then 100 a second, as a session's socket (session-internal.h). */
#define REFUSED_BURST 100
#define REFUSED_INTERVAL_USEC 10000ULL

enum member_state { M_FREE, M_STARTING, M_PRELOADING, M_READY, M_LEASED, M_ENDING };

struct member {
    enum member_state state;
    pid_t pid;
    int pidfd, fd; /* fd: the start line's socket, then the preload's connection */
    char id[33];
    char sock[700];
    char *buf;
    size_t have;
    uint64_t started, ready_at;
};

enum client_state { C_FREE, C_READING, C_WAITING, C_LEASE, C_STOPPING };

struct pool_client {
    enum client_state state;
    int fd;
    char buf[512];
    size_t have;
    uint64_t deadline, seq;
    int member; /* C_LEASE: its member, or -1 once that has ended */
};

struct pool {
    const struct nsbox_config *mc;
    const struct pool_options *o;
    int argc;
    char **argv;
    char id[33], sock_path[700];
    int notify_fd, listen_fd, signalfd;
    pid_t self;
    bool up, stopping;
    struct member m[MEMBERS_MAX];
    struct pool_client cl[POOL_CLIENTS_MAX];
    uint64_t seq, served, failures, refill_at, refill_usec_sum, refills;
    uint64_t refused_at; /* when the socket may be polled again (REFUSED_BURST) */
    char last_error[600];
};

static void member_fail(struct pool *p, struct member *m, const char *fmt, ...) _printf_(3, 4);

/* ---- members ------------------------------------------------------------------------------ */

/* Fork a member's supervisor (session_member_main()). Returns 0 or -errno. */
static int member_spawn(struct pool *p, struct member *m)
{
    int sp[2];
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
        return negative_errno();
    pid = fork();
    if (pid < 0) {
        int r = negative_errno();
        (void)close(sp[0]);
        (void)close(sp[1]);
        return r;
    }
    if (pid == 0) {
        sigset_t none;
        /* The member dies with the pool, whichever way the pool ends (prctl(2): the death
         * signal goes when the parent thread exits; the pool is one thread), and checks that
         * the pool did not end before the prctl. Its sandbox's init dies with it the same way
         * (sandbox.c), and the sandbox's processes with init (pid_namespaces(7)). */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != p->self)
            _exit(EXIT_NSBOX_FAILURE);
        (void)close(sp[0]);
        (void)sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        (void)signal(SIGPIPE, SIG_DFL);
        session_member_main(p->mc, &p->o->member, p->argc, p->argv, sp[1]);
    }
    (void)close(sp[1]);
    *m = (struct member){.state = M_STARTING, .pid = pid, .fd = sp[0], .started = now_usec()};
    m->pidfd = sys_pidfd_open(pid);
    if (m->pidfd < 0) {
        int r = negative_errno();
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
        (void)close(m->fd);
        *m = (struct member){.state = M_FREE, .pidfd = -1, .fd = -1};
        return r;
    }
    (void)fcntl(m->fd, F_SETFL, O_NONBLOCK);
    return 0;
}

/* End a member (its supervisor tears its sandbox down and removes its record); its pidfd then
 * says when it is gone. */
static void member_end(struct member *m)
{
    if (m->state == M_FREE || m->state == M_ENDING)
        return;
    (void)sys_pidfd_send_signal(m->pidfd, SIGTERM);
    if (m->fd >= 0) {
        (void)close(m->fd);
        m->fd = -1;
    }
    m->state = M_ENDING;
}

static void clients_refuse_waiting(struct pool *p, const char *why);

static void member_fail(struct pool *p, struct member *m, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(p->last_error, sizeof(p->last_error), fmt, ap);
    va_end(ap);
    p->failures++;
    p->refill_at = now_usec() + REFILL_BACKOFF_USEC;
    member_end(m);
    clients_refuse_waiting(p, p->last_error);
}

/* A line on the member's fd, read without blocking: 1 when whole (NUL-terminated in m->buf,
 * without its newline), 0 when more is to come, -1 at EOF or an error before it. */
static int member_read_line(struct member *m)
{
    for (;;) {
        ssize_t n;
        char *nl;
        if (!m->buf && !(m->buf = malloc(LINE_MAX_BYTES + 1)))
            return -1;
        if (m->have >= LINE_MAX_BYTES)
            return -1;
        n = RETRY_EINTR(read(m->fd, m->buf + m->have, LINE_MAX_BYTES - m->have));
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0)
            return -1;
        m->have += (size_t)n;
        nl = memchr(m->buf, '\n', m->have);
        if (nl) {
            *nl = '\0';
            return 1;
        }
    }
}

static void member_reset_line(struct member *m)
{
    free(m->buf);
    m->buf = NULL;
    m->have = 0;
}

/* Its start line: "OK ID SOCKET" (answered with one byte, then the preload goes to its socket)
 * or "ERR MESSAGE". */
static void member_started(struct pool *p, struct member *m)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    _cleanup_free_ char *req = NULL;
    char *id, *sock;
    json_t *j;
    int r = member_read_line(m), fd;

    if (r == 0)
        return;
    if (r < 0 || strncmp(m->buf, "OK ", 3) != 0) {
        member_fail(p, m, "a sandbox of the pool failed to start: %s",
                    r > 0 && strncmp(m->buf, "ERR ", 4) == 0
                        ? m->buf + 4
                        : "its supervisor ended without a word");
        member_reset_line(m);
        return;
    }
    id = m->buf + 3;
    sock = strchr(id, ' ');
    if (!sock || sock - id != 32 || strlen(sock + 1) >= sizeof(sa.sun_path)) {
        member_fail(p, m, "a sandbox of the pool sent a malformed start line");
        member_reset_line(m);
        return;
    }
    *sock++ = '\0';
    (void)snprintf(m->id, sizeof(m->id), "%s", id);
    (void)snprintf(m->sock, sizeof(m->sock), "%s", sock);
    member_reset_line(m);
    /* The byte without which it ends; then this socket has done its work. */
    if (RETRY_EINTR(send(m->fd, "y", 1, MSG_NOSIGNAL)) != 1) {
        member_fail(p, m, "a sandbox of the pool ended while it started");
        return;
    }
    (void)close(m->fd);
    m->fd = -1;
    /* The preload: the member's first step, before any untrusted code. */
    strcpy(sa.sun_path, m->sock);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (fd >= 0)
            (void)close(fd);
        member_fail(p, m, "cannot connect to a sandbox of the pool: %s", strerror(errno));
        return;
    }
    m->fd = fd;
    j = json_pack("{s:s,s:s}", "op", "code", "code", p->o->preload_code);
    req = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!req || RETRY_EINTR(send(fd, req, strlen(req), MSG_NOSIGNAL)) != (ssize_t)strlen(req) ||
        RETRY_EINTR(send(fd, "\n", 1, MSG_NOSIGNAL)) != 1) {
        member_fail(p, m, "cannot send the preload to a sandbox of the pool");
        return;
    }
    (void)fcntl(fd, F_SETFL, O_NONBLOCK);
    m->state = M_PRELOADING;
}

/* The last line of text (a traceback's "ModuleNotFoundError: ..."), cut to fit. */
static void last_line(const char *text, char *buf, size_t size)
{
    size_t n = text ? strlen(text) : 0;
    const char *start;

    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
        n--;
    start = text ? text + n : "";
    while (start > text && start[-1] != '\n')
        start--;
    (void)snprintf(buf, size, "%.*s", (int)(text + n - start), start);
}

/* The preload's answer: ready when it exited 0. */
static void member_preloaded(struct pool *p, struct member *m)
{
    json_t *ans, *err;
    const char *status;
    char why[300];
    int r = member_read_line(m);

    if (r == 0)
        return;
    ans = r > 0 ? json_loads(m->buf, JSON_ALLOW_NUL, NULL) : NULL;
    member_reset_line(m);
    status = json_string_value(json_object_get(ans, "status"));
    err = json_object_get(ans, "error");
    if (!ans || json_is_string(err) || json_object_get(err, "step")) {
        /* A string: the supervisor's refusal; an object with a "step": a step of the sandbox
         * failed (the interpreter could not make itself non-dumpable), not the preload's
         * modules (whose exception is an object with a "name"). */
        member_fail(p, m, "the preload of a sandbox of the pool did not run: %s",
                    !ans                 ? "the session ended without an answer"
                    : json_is_string(err) ? json_string_value(err)
                                          : json_string_value(json_object_get(err, "message"))
                                                ?: "a step of the sandbox failed");
    } else if (!status || strcmp(status, "exited") != 0 ||
               json_integer_value(json_object_get(ans, "exit_code")) != 0) {
        last_line(json_string_value(json_object_get(ans, "stderr")), why, sizeof(why));
        if (!why[0])
            (void)snprintf(why, sizeof(why), "%s",
                           json_string_value(json_object_get(ans, "reason"))
                               ?: "it did not end normally");
        member_fail(p, m,
                    "the preload '%s' failed in the pool's sandbox: %s; check the module "
                    "names (--preload M,...) and that the rootfs has them",
                    p->o->preload, why);
    } else {
        (void)close(m->fd);
        m->fd = -1;
        m->state = M_READY;
        m->ready_at = now_usec();
        p->refill_usec_sum += m->ready_at - m->started;
        p->refills++;
    }
    json_decref(ans);
}

/* Its supervisor is gone: reaped, and its lease (if any) told nothing (the client sees its own
 * step's answer, or the session's end). */
static void member_gone(struct pool *p, struct member *m)
{
    siginfo_t si = {0};
    int idx = (int)(m - p->m);

    if (m->state == M_STARTING || m->state == M_PRELOADING)
        member_fail(p, m,
                    "a sandbox of the pool ended before it was up (see the run options "
                    "given to 'nsbox pool start')");
    (void)RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)m->pidfd, &si, WEXITED));
    (void)close(m->pidfd);
    if (m->fd >= 0)
        (void)close(m->fd);
    member_reset_line(m);
    for (size_t i = 0; i < POOL_CLIENTS_MAX; i++)
        if (p->cl[i].state == C_LEASE && p->cl[i].member == idx)
            p->cl[i].member = -1;
    *m = (struct member){.state = M_FREE, .pidfd = -1, .fd = -1};
}

static size_t count(const struct pool *p, enum member_state a, enum member_state b)
{
    size_t n = 0;

    for (size_t i = 0; i < MEMBERS_MAX; i++)
        n += p->m[i].state == a || p->m[i].state == b;
    return n;
}

/* Start members until size are alive. A lent one counts until it has ended: the next one's
 * start (its interpreter, its imports: most of a CPU for a while) does not compete with the
 * run it serves. */
static void refill(struct pool *p, uint64_t now)
{
    if (p->stopping || now < p->refill_at)
        return;
    while (MEMBERS_MAX - count(p, M_FREE, M_FREE) < p->o->size) {
        struct member *m = NULL;
        int r;
        for (size_t i = 0; i < MEMBERS_MAX && !m; i++)
            if (p->m[i].state == M_FREE)
                m = &p->m[i];
        if (!m)
            return; /* every slot lent out: the next one that ends frees one */
        r = member_spawn(p, m);
        if (r < 0) {
            (void)snprintf(p->last_error, sizeof(p->last_error),
                           "cannot fork a sandbox of the pool: %s", strerror(-r));
            p->failures++;
            p->refill_at = now + REFILL_BACKOFF_USEC;
            return;
        }
    }
}

/* ---- clients ------------------------------------------------------------------------------ */

static void client_free(struct pool_client *c)
{
    if (c->fd >= 0)
        (void)close(c->fd);
    *c = (struct pool_client){.fd = -1, .member = -1};
}

/* One line to the client, without waiting (a few hundred bytes: the socket holds them). */
static void client_send(struct pool_client *c, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

    json_decref(j);
    if (text) {
        size_t n = strlen(text);
        text[n] = '\n';
        (void)RETRY_EINTR(send(c->fd, text, n + 1, MSG_DONTWAIT | MSG_NOSIGNAL));
    }
    free(text);
}

static void clients_refuse_waiting(struct pool *p, const char *why)
{
    if (!p->up)
        return;
    for (size_t i = 0; i < POOL_CLIENTS_MAX; i++)
        if (p->cl[i].state == C_WAITING) {
            client_send(&p->cl[i], json_pack("{s:s}", "error", why));
            client_free(&p->cl[i]);
        }
}

static json_t *status_json(const struct pool *p)
{
    return json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:s?,s:f}", "name", p->o->name, "id",
                     p->id, "size", (json_int_t)p->o->size, "ready",
                     (json_int_t)count(p, M_READY, M_READY), "starting",
                     (json_int_t)count(p, M_STARTING, M_PRELOADING), "leased",
                     (json_int_t)count(p, M_LEASED, M_ENDING), "served", (json_int_t)p->served,
                     "failures", (json_int_t)p->failures, "preload", p->o->preload, "last_error",
                     p->last_error[0] ? p->last_error : NULL, "refill_ms",
                     p->refills ? (double)p->refill_usec_sum / (double)p->refills / 1000.0 : 0.0);
}

/* Hand the oldest ready member to each waiting client, first come first served. */
static void serve_waiting(struct pool *p)
{
    for (;;) {
        struct pool_client *c = NULL;
        struct member *m = NULL;
        for (size_t i = 0; i < POOL_CLIENTS_MAX; i++)
            if (p->cl[i].state == C_WAITING && (!c || p->cl[i].seq < c->seq))
                c = &p->cl[i];
        for (size_t i = 0; i < MEMBERS_MAX; i++)
            if (p->m[i].state == M_READY && (!m || p->m[i].ready_at < m->ready_at))
                m = &p->m[i];
        if (!c || !m)
            return;
        /* One that died since this loop last looked is not handed out (its pidfd says so);
         * the client takes another if it dies after this (cmd-pool.c, pool.py). */
        if (poll(&(struct pollfd){.fd = m->pidfd, .events = POLLIN}, 1, 0) > 0) {
            member_gone(p, m);
            continue;
        }
        m->state = M_LEASED;
        c->state = C_LEASE;
        c->member = (int)(m - p->m);
        p->served++;
        client_send(c,
                    json_pack("{s:s,s:s,s:s}", "id", m->id, "socket", m->sock, "pool", p->o->name));
    }
}

static void client_request(struct pool *p, struct pool_client *c)
{
    json_t *j = json_loadb(c->buf, c->have, 0, NULL);
    const char *op = json_string_value(json_object_get(j, "op"));

    if (op && strcmp(op, "take") == 0 && !p->stopping) {
        c->state = C_WAITING;
        c->seq = ++p->seq;
    } else if (op && strcmp(op, "status") == 0) {
        client_send(c, status_json(p));
        client_free(c);
    } else if (op && strcmp(op, "stop") == 0) {
        c->state = C_STOPPING;
        p->stopping = true;
    } else {
        client_send(c, json_pack("{s:s}", "error",
                                 p->stopping ? "the pool is stopping"
                                             : "unknown request: the pool takes {\"op\": "
                                               "\"take\"|\"status\"|\"stop\"}"));
        client_free(c);
    }
    json_decref(j);
}

static void client_read(struct pool *p, struct pool_client *c)
{
    ssize_t n = RETRY_EINTR(read(c->fd, c->buf + c->have, sizeof(c->buf) - 1 - c->have));
    char *nl;

    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        client_free(c);
        return;
    }
    c->have += (size_t)n;
    nl = memchr(c->buf, '\n', c->have);
    if (nl) {
        c->have = (size_t)(nl - c->buf);
        client_request(p, c);
    } else if (c->have >= sizeof(c->buf) - 1) {
        client_send(c, json_pack("{s:s}", "error", "request too long"));
        client_free(c);
    }
}

/* The client let go of its member (closed, or sent anything more): the member ends, if it has
 * not already (its one step done). */
static void client_release(struct pool *p, struct pool_client *c)
{
    if (c->member >= 0)
        member_end(&p->m[c->member]);
    client_free(c);
}

/* Only this user's own processes (*ret_own), and none in another user namespace: an ordinary
 * user's sandboxes have the caller's uid on the host, and one that sees the socket through a
 * bind of the runtime directory could otherwise take the pool's sandboxes or stop the pool
 * (peer_in_own_user_namespace(), as a session's socket). */
static bool peer_is_own_user(int fd, bool *ret_own)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    *ret_own = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
    return *ret_own && peer_in_own_user_namespace(fd, cred.pid);
}

static void client_accept(struct pool *p, uint64_t now)
{
    /* A bound per turn of the loop, and refused connections paced as a session's are
     * (REFUSED_BURST): a sandbox that connects as fast as it can costs the pool, outside every
     * limit of the sandbox, an accept(2) and its checks each. */
    for (int k = 0; k < 64 && now >= p->refused_at; k++) {
        int fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        struct pool_client *c = NULL;
        bool own;
        if (fd < 0)
            return;
        if (!peer_is_own_user(fd, &own)) {
            static const char other[] =
                "{\"error\":\"the pool takes requests only from its caller's user namespace "
                "(a sandbox, or a process in another user namespace, cannot use it)\"}\n";
            if (own)
                (void)!send(fd, other, sizeof(other) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)close(fd);
            (void)pace_take(&p->refused_at, now, REFUSED_BURST, REFUSED_INTERVAL_USEC);
            continue;
        }
        for (size_t i = 0; i < POOL_CLIENTS_MAX && !c; i++)
            if (p->cl[i].state == C_FREE)
                c = &p->cl[i];
        if (!c) {
            static const char busy[] = "{\"error\":\"the pool has too many clients; try "
                                       "again\"}\n";
            (void)RETRY_EINTR(send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL));
            (void)close(fd);
            continue;
        }
        *c = (struct pool_client){.state = C_READING,
                                  .fd = fd,
                                  .member = -1,
                                  .deadline = now + REQUEST_USEC};
    }
}

/* ---- the loop ----------------------------------------------------------------------------- */

static bool notify_caller(struct pool *p, const char *fmt, ...) _printf_(2, 3);
static bool notify_caller(struct pool *p, const char *fmt, ...)
{
    char buf[1024], ack;
    va_list ap;
    int n;
    bool ok;

    if (p->notify_fd < 0)
        return false;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    ok = n > 0 &&
         RETRY_EINTR(send(p->notify_fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1,
                          MSG_NOSIGNAL)) > 0;
    /* After "OK": the caller's byte says it printed the id (as session_start()'s). */
    if (ok && strncmp(buf, "OK ", 3) == 0)
        ok = RETRY_EINTR(read(p->notify_fd, &ack, 1)) == 1;
    (void)close(p->notify_fd);
    p->notify_fd = -1;
    return ok;
}

static int pool_loop(struct pool *p)
{
    struct pollfd pfd[2 + MEMBERS_MAX * 2 + POOL_CLIENTS_MAX];
    void *who[2 + MEMBERS_MAX * 2 + POOL_CLIENTS_MAX];
    bool kind_pidfd[2 + MEMBERS_MAX * 2 + POOL_CLIENTS_MAX];

    for (;;) {
        uint64_t now = now_usec(), until = UINT64_MAX;
        nfds_t n = 2;
        int timeout_ms;

        refill(p, now);
        if (!p->up && count(p, M_READY, M_READY) >= p->o->size) {
            if (!notify_caller(p, "OK %s %s\n", p->id, p->sock_path))
                return -EPIPE;
            p->up = true;
        }
        if (!p->up && p->failures) /* the first fill failed: the caller hears why */
            return -EIO;
        serve_waiting(p);
        if (p->stopping) {
            for (size_t i = 0; i < MEMBERS_MAX; i++)
                member_end(&p->m[i]);
            if (count(p, M_ENDING, M_ENDING) == 0)
                return 0;
        }
        if (p->refill_at > now && p->refill_at < until)
            until = p->refill_at;
        pfd[0] = (struct pollfd){.fd = p->signalfd, .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = p->up && now >= p->refused_at ? p->listen_fd : -1,
                                 .events = POLLIN};
        if (p->up && now < p->refused_at && p->refused_at < until)
            until = p->refused_at; /* paced (REFUSED_BURST): look again then */
        for (size_t i = 0; i < MEMBERS_MAX; i++) {
            struct member *m = &p->m[i];
            if (m->state == M_FREE)
                continue;
            if ((m->state == M_STARTING || m->state == M_PRELOADING) &&
                now >= m->started + MEMBER_START_USEC)
                member_fail(p, m, "a sandbox of the pool was not up within %llu s",
                            (unsigned long long)(MEMBER_START_USEC / 1000000));
            else if (m->state == M_STARTING || m->state == M_PRELOADING) {
                if (m->started + MEMBER_START_USEC < until)
                    until = m->started + MEMBER_START_USEC;
                who[n] = m;
                kind_pidfd[n] = false;
                pfd[n++] = (struct pollfd){.fd = m->fd, .events = POLLIN};
            }
            who[n] = m;
            kind_pidfd[n] = true;
            pfd[n++] = (struct pollfd){.fd = m->pidfd, .events = POLLIN};
        }
        for (size_t i = 0; i < POOL_CLIENTS_MAX; i++) {
            struct pool_client *c = &p->cl[i];
            if (c->state == C_FREE)
                continue;
            if (c->state == C_READING && now >= c->deadline) {
                client_free(c);
                continue;
            }
            if (c->state == C_READING && c->deadline < until)
                until = c->deadline;
            who[n] = c;
            kind_pidfd[n] = false;
            /* Waiting, lent or stopping: watched for its hang-up (POLLIN: EOF or anything). */
            pfd[n++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
        }
        timeout_ms = until == UINT64_MAX ? -1 : (int)((until - now + 999) / 1000);
        if (poll(pfd, n, timeout_ms) < 0 && errno != EINTR)
            return negative_errno();
        if (pfd[0].revents) {
            struct signalfd_siginfo si;
            while (read(p->signalfd, &si, sizeof(si)) == sizeof(si))
                p->stopping = true;
        }
        if (pfd[1].revents)
            client_accept(p, now_usec());
        for (nfds_t i = 2; i < n; i++) {
            if (!pfd[i].revents)
                continue;
            if (who[i] >= (void *)p->m && who[i] < (void *)(p->m + MEMBERS_MAX)) {
                struct member *m = who[i];
                if (kind_pidfd[i])
                    member_gone(p, m);
                else if (m->state == M_STARTING)
                    member_started(p, m);
                else if (m->state == M_PRELOADING)
                    member_preloaded(p, m);
            } else {
                struct pool_client *c = who[i];
                if (c->state == C_READING)
                    client_read(p, c);
                else if (c->state == C_LEASE)
                    client_release(p, c);
                else if (c->state == C_WAITING || c->state == C_STOPPING)
                    client_free(c); /* gone while it waited */
            }
        }
    }
}

_noreturn_ static void pool_main(const struct nsbox_config *pool_config, struct pool *p)
{
    struct registry_run reg = {0};
    char why[300] = "", dir[512];
    sigset_t mask;
    int null_fd, r;

    (void)signal(SIGPIPE, SIG_IGN);
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0 || dup2(null_fd, 2) < 0) {
        (void)notify_caller(p, "ERR cannot open /dev/null: %s\n", strerror(errno));
        _exit(EXIT_NSBOX_FAILURE);
    }
    (void)close(null_fd);
    /* Nothing of the caller's (a pipe it waits on for EOF must not stay open with the pool). */
    if ((p->notify_fd != 3 && dup3(p->notify_fd, 3, O_CLOEXEC) < 0) ||
        sys_close_range(4, ~0U, 0) < 0) {
        (void)notify_caller(p, "ERR cannot close inherited descriptors: %s\n", strerror(errno));
        _exit(EXIT_NSBOX_FAILURE);
    }
    p->notify_fd = 3;
    log_set_quiet(true);
    p->self = getpid();
    for (size_t i = 0; i < MEMBERS_MAX; i++)
        p->m[i] = (struct member){.state = M_FREE, .pidfd = -1, .fd = -1};
    for (size_t i = 0; i < POOL_CLIENTS_MAX; i++)
        p->cl[i] = (struct pool_client){.fd = -1, .member = -1};

    r = run_id_new(p->id);
    if (r >= 0)
        r = registry_path(dir, sizeof(dir));
    if (r < 0) {
        (void)notify_caller(p, "ERR cannot make the pool's id or find its runtime directory: %s\n",
                            strerror(-r));
        _exit(EXIT_NSBOX_FAILURE);
    }
    (void)snprintf(p->sock_path, sizeof(p->sock_path), "%s/%s.sock", dir, p->id);
    r = registry_add(p->id, p->argc, p->argv, pool_config, NULL, &reg, why, sizeof(why));
    if (r < 0) {
        (void)notify_caller(p, "ERR %s\n",
                            why[0] ? why
                                   : "cannot add the pool to the registry of running "
                                     "sandboxes; the pool does not start");
        _exit(EXIT_NSBOX_FAILURE);
    }
    /* `nsbox kill` (SIGUSR1) and the usual signals to end: the members first. */
    (void)sigemptyset(&mask);
    (void)sigaddset(&mask, SIGUSR1);
    (void)sigaddset(&mask, SIGTERM);
    (void)sigaddset(&mask, SIGINT);
    (void)sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
        (p->signalfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        (void)notify_caller(p, "ERR signalfd: %s\n", strerror(errno));
        registry_remove(&reg);
        _exit(EXIT_NSBOX_FAILURE);
    }
    {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        mode_t old;
        p->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (p->listen_fd < 0 || strlen(p->sock_path) >= sizeof(sa.sun_path)) {
            (void)notify_caller(p, "ERR cannot make the pool's socket\n");
            registry_remove(&reg);
            _exit(EXIT_NSBOX_FAILURE);
        }
        strcpy(sa.sun_path, p->sock_path);
        (void)unlink(p->sock_path);
        old = umask(0077);
        r = bind(p->listen_fd, (struct sockaddr *)&sa, sizeof(sa));
        (void)umask(old);
        if (r < 0 || listen(p->listen_fd, 128) < 0) {
            (void)notify_caller(p, "ERR cannot listen on the pool's socket %s: %s\n", p->sock_path,
                                strerror(errno));
            registry_remove(&reg);
            _exit(EXIT_NSBOX_FAILURE);
        }
    }
    r = pool_loop(p);
    /* The socket first: no new client meets a dying pool. */
    (void)unlink(p->sock_path);
    (void)close(p->listen_fd);
    p->stopping = true;
    for (size_t i = 0; i < MEMBERS_MAX; i++)
        if (p->m[i].state != M_FREE) {
            member_end(&p->m[i]);
            (void)sys_pidfd_send_signal(p->m[i].pidfd, SIGTERM);
        }
    for (size_t i = 0; i < MEMBERS_MAX; i++)
        if (p->m[i].state != M_FREE)
            member_gone(p, &p->m[i]); /* waits for it (its supervisor tears its sandbox down) */
    registry_remove(&reg);
    if (!p->up)
        (void)notify_caller(p, "ERR %s\n",
                            p->last_error[0] ? p->last_error : "the pool ended while it started");
    for (size_t i = 0; i < POOL_CLIENTS_MAX; i++)
        if (p->cl[i].state == C_STOPPING) {
            client_send(&p->cl[i], json_pack("{s:b,s:s,s:I}", "stopped", true, "name", p->o->name,
                                             "served", (json_int_t)p->served));
            /* Left open: the EOF the client waits for comes with this process's exit. */
        }
    _exit(r < 0 && !p->up ? EXIT_NSBOX_FAILURE : 0);
}

int pool_start(const struct nsbox_config *pool_config, const struct nsbox_config *member_config,
               const struct pool_options *o, int argc, char *argv[])
{
    struct pool *p;
    char buf[1100];
    size_t have = 0;
    int sp[2], status;
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        log_error_errno(negative_errno(), "pool start: socketpair: %m");
        return EXIT_NSBOX_FAILURE;
    }
    pid = fork();
    if (pid < 0) {
        log_error_errno(negative_errno(), "pool start: fork: %m");
        return EXIT_NSBOX_FAILURE;
    }
    if (pid == 0) {
        /* Detached as a session's supervisor is (its own session, double fork). */
        (void)close(sp[0]);
        if (setsid() < 0)
            _exit(EXIT_NSBOX_FAILURE);
        pid = fork();
        if (pid < 0)
            _exit(EXIT_NSBOX_FAILURE);
        if (pid == 0) {
            p = calloc(1, sizeof(*p));
            if (!p)
                _exit(EXIT_NSBOX_FAILURE);
            *p = (struct pool){.mc = member_config,
                               .o = o,
                               .argc = argc,
                               .argv = argv,
                               .notify_fd = sp[1],
                               .listen_fd = -1,
                               .signalfd = -1};
            pool_main(pool_config, p);
        }
        _exit(0);
    }
    (void)close(sp[1]);
    (void)RETRY_EINTR(waitpid(pid, &status, 0));
    while (have < sizeof(buf) - 1 && !memchr(buf, '\n', have)) {
        ssize_t n = RETRY_EINTR(read(sp[0], buf + have, sizeof(buf) - 1 - have));
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
            json_t *j = json_pack("{s:s,s:s,s:s}", "id", id, "name", o->name, "socket",
                                  sock ? sock : "");
            char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
            if (t)
                (void)printf("%s\n", t);
            free(t);
            json_decref(j);
        } else
            (void)printf("%s\n", id);
        if (fflush(stdout) != 0 || RETRY_EINTR(send(sp[0], "y", 1, MSG_NOSIGNAL)) != 1) {
            (void)close(sp[0]);
            log_error("pool start: cannot print the pool's id; the pool ends");
            return EXIT_NSBOX_FAILURE;
        }
        (void)close(sp[0]);
        return 0;
    }
    (void)close(sp[0]);
    log_error("pool start failed: %s",
              strncmp(buf, "ERR ", 4) == 0 ? buf + 4 : "the pool's process ended without a word");
    return EXIT_NSBOX_FAILURE;
}
