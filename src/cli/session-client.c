/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A session's clients (session-internal.h): every connection accepted (only the caller's uid,
 * only from its user namespace), its request read and parsed, its answer written, and the
 * deadlines of both. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "parse.h"
#include "copy.h"
#include "pool.h"
#include "session-internal.h"
#include "syscalls.h"

#include "session-internal.h"

/* A step's --copy-out directories (the request's "copy_out_dirs", one for each path of
 * "copy_out": {"host", "ids": ["DEV:INO", ...]}, the directory and those above it, from
 * dir_ancestry()), checked against the session's writable binds: one inside them is refused
 * (RW_COPY_OUT). The client is the caller's own nsbox; the check keeps the sandbox, which
 * outlives the step, from redirecting what the step's result lists. Returns 0, or -errno with
 * *why set. */
static int check_copy_dirs(const struct session_state *s, json_t *dirs, size_t n, const char **why)
{
    static char text[1024];
    size_t i, k;
    json_t *d, *id;

    if (!json_is_array(dirs) || json_array_size(dirs) != n)
        return *why = "\"copy_out_dirs\" must list each --copy-out directory", -EINVAL;
    if (s->c->n_binds == 0)
        return 0;
    json_array_foreach(dirs, i, d) {
        const char *host = json_string_value(json_object_get(d, "host"));
        json_t *ids = json_object_get(d, "ids");
        _cleanup_free_ struct stat *st = NULL;
        int b;
        if (!host || !json_is_array(ids) || json_array_size(ids) == 0)
            return *why = "\"copy_out_dirs\": each must have \"host\" and \"ids\"", -EINVAL;
        st = calloc(json_array_size(ids), sizeof(*st));
        if (!st)
            return -ENOMEM;
        json_array_foreach(ids, k, id) {
            uintmax_t dev, ino;
            if (!json_is_string(id) || sscanf(json_string_value(id), "%ju:%ju", &dev, &ino) != 2)
                return *why = "\"copy_out_dirs\": an id is not DEV:INO", -EINVAL;
            st[k] = (struct stat){.st_dev = (dev_t)dev, .st_ino = (ino_t)ino};
        }
        b = nsbox_config_writable_bind(s->c, st, json_array_size(ids));
        if (b >= 0) {
            (void)snprintf(text, sizeof(text), RW_COPY_OUT, host, s->c->binds[b].source);
            return *why = text, -EPERM;
        }
        if (b != -ENOENT)
            return b;
    }
    return 0;
}

/* bytes as --memory takes them: "unlimited" (0), "NNNm" when whole MiB, else bytes. */
static void size_words(uint64_t bytes, char *buf, size_t size)
{
    if (bytes == 0)
        (void)snprintf(buf, size, "unlimited");
    else if (bytes % (1ULL << 20) == 0)
        (void)snprintf(buf, size, "%" PRIu64 "m", bytes >> 20);
    else
        (void)snprintf(buf, size, "%" PRIu64, bytes);
}

/* A client's request (j) as a step to run: its argv or code, timeout, output limit, stdin and
 * copy-out. Returns 0, or -errno with *why saying what is wrong, in words for the client. */
static int parse_request(const struct session_state *s, json_t *j, struct step_request *q,
                         const char **why)
{
    json_t *argv = json_object_get(j, "argv"), *code = json_object_get(j, "code");
    json_t *timeout = json_object_get(j, "timeout"), *limit = json_object_get(j, "output_limit");
    json_t *in = json_object_get(j, "stdin_bytes");
    const char *op = json_string_value(json_object_get(j, "op"));
    json_t *copy = json_object_get(j, "copy_out");
    json_t *max_bytes = json_object_get(j, "copy_out_max_bytes");
    json_t *max_files = json_object_get(j, "copy_out_max_files");
    json_t *hangup = json_object_get(j, "interrupt_on_hangup");
    json_t *memory = json_object_get(j, "memory"), *copy_in = json_object_get(j, "copy_in");
    json_t *stream = json_object_get(j, "stream");
    int r;

    *q = (struct step_request){.timeout = s->c->timeout,
                               .output_limit = s->c->output_limit,
                               .copy_max_bytes = s->c->copy_out_max_bytes,
                               .copy_max_files = s->c->copy_out_max_files};
    if (hangup) {
        if (!json_is_boolean(hangup))
            return *why = "\"interrupt_on_hangup\" must be true or false", -EINVAL;
        q->interrupt_on_hangup = json_is_true(hangup);
    }
    if (stream) {
        if (!json_is_boolean(stream))
            return *why = "\"stream\" must be true or false", -EINVAL;
        /* The copy-out stream's descriptor rides on the answer's first bytes. */
        if (json_is_true(stream) && copy)
            return *why = "\"stream\" and \"copy_out\" exclude each other", -EINVAL;
        q->stream = json_is_true(stream);
    }
    if (max_bytes) {
        if (!json_is_integer(max_bytes) || json_integer_value(max_bytes) <= 0)
            return *why = "\"copy_out_max_bytes\" must be a number of bytes above 0", -EINVAL;
        q->copy_max_bytes = (uint64_t)json_integer_value(max_bytes);
    }
    if (max_files) {
        if (!json_is_integer(max_files) || json_integer_value(max_files) <= 0)
            return *why = "\"copy_out_max_files\" must be a number of files above 0", -EINVAL;
        q->copy_max_files = (uint64_t)json_integer_value(max_files);
    }
    if (copy) {
        size_t i;
        json_t *v;
        if (!json_is_array(copy) || json_array_size(copy) == 0 || json_array_size(copy) > 64)
            return *why = "\"copy_out\" must be a list of 1 to 64 sandbox paths", -EINVAL;
        json_array_foreach(copy, i, v) {
            const char *path = json_string_value(v);
            if (!path || memchr(path, '\0', json_string_length(v)) || !path_is_safe_target(path) ||
                path_is_at_or_below(path, "/proc") || path_is_at_or_below(path, "/dev"))
                return *why = "\"copy_out\": each path must be an absolute path inside the "
                              "sandbox, not '/', without '.' or '..', not in /proc or /dev",
                       -EINVAL;
            q->copy_size += json_string_length(v) + 1;
        }
        q->copy_paths = malloc(q->copy_size);
        if (!q->copy_paths)
            return -ENOMEM;
        q->copy_size = 0;
        json_array_foreach(copy, i, v) {
            memcpy(q->copy_paths + q->copy_size, json_string_value(v), json_string_length(v) + 1);
            q->copy_size += json_string_length(v) + 1;
        }
        q->n_copy = json_array_size(copy);
        r = check_copy_dirs(s, json_object_get(j, "copy_out_dirs"), q->n_copy, why);
        if (r < 0)
            return r;
    }
    if (memory) {
        /* A step can only lower the sandbox's limit: the rest of the sandbox (its tmpfs, its
         * System V budget, a pool's preload) was sized for that one, and a cgroup's memory.max
         * or a hard RLIMIT_DATA above it would be a limit the sandbox was never given. */
        static char text[400];
        char asked[32], own[32];
        if (!json_is_integer(memory) || json_integer_value(memory) < 0)
            return *why = "\"memory\" must be a number of bytes (0: unlimited)", -EINVAL;
        q->memory = (uint64_t)json_integer_value(memory);
        /* nsbox run's floor, which a client's own request could skip: below it a step dies of
         * SIGSEGV as it starts, and a cgroup's memory.max that low (the whole sandbox's) lets
         * the OOM killer end any of its processes, init's too. */
        if (q->memory && q->memory < NSBOX_MEMORY_MIN)
            return *why = "\"memory\" must be at least 6m (6291456 bytes), or 0: unlimited",
                   -EINVAL;
        if (s->c->memory && (q->memory == 0 || q->memory > s->c->memory)) {
            const char *what = s->o->max_steps ? "pool" : "session";
            size_words(q->memory, asked, sizeof(asked));
            size_words(s->c->memory, own, sizeof(own));
            (void)snprintf(text, sizeof(text),
                           "--memory %s is above the %s's --memory %s: a run or step can only "
                           "lower its sandbox's memory limit; start the %s with a higher one "
                           "('nsbox %s start ... --memory SIZE')",
                           asked, what, own, what, what);
            return *why = text, -EINVAL;
        }
    }
    if (copy_in) {
        if (!json_is_boolean(copy_in))
            return *why = "\"copy_in\" must be true or false", -EINVAL;
        q->copy_in = json_is_true(copy_in);
    }
    if (timeout) {
        /* Above 0: a step's timeout cannot be switched off (nor rounded down to nothing). */
        if (!json_is_number(timeout) || !(json_number_value(timeout) > 0) ||
            json_number_value(timeout) > 1e6)
            return *why = "\"timeout\" must be a number of seconds above 0 (at most 1000000)",
                   -EINVAL;
        q->timeout = (uint64_t)(json_number_value(timeout) * 1e6);
        if (q->timeout == 0)
            q->timeout = 1;
    }
    if (limit) {
        if (!json_is_integer(limit) || json_integer_value(limit) < 0 ||
            json_integer_value(limit) > (64 << 20))
            return *why = "\"output_limit\" must be a number of bytes up to 64 MiB", -EINVAL;
        q->output_limit = (uint64_t)json_integer_value(limit);
    }
    if (in) {
        if (!json_is_integer(in) || json_integer_value(in) < 0 ||
            json_integer_value(in) > REQUEST_MAX)
            return *why = "\"stdin_bytes\" must be a number of bytes up to 16 MiB, the bytes "
                          "of the step's stdin that follow the request's line",
                   -EINVAL;
        q->has_stdin = true;
        q->stdin_size = (size_t)json_integer_value(in);
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
        /* All of them or none: a program run with its last arguments cut off is another
         * command. (session-init.c takes at most NSBOX_STEP_MAX_ARGS.) */
        if (json_array_size(argv) > NSBOX_STEP_MAX_ARGS)
            return *why = "\"argv\" has more than " STRINGIFY(
                       NSBOX_STEP_MAX_ARGS) " arguments, more than a step takes",
                   -E2BIG;
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

/* The copy-in stream a client sent must be a memfd sealed against every change: init reads it
 * whole and never waits on it (a pipe or socket could hold init, and so the session, for as
 * long as the client liked), and what it unpacks is what the client packed. */
static bool copy_in_fd_ok(int fd)
{
    const int need = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
    int seals = fcntl(fd, F_GET_SEALS);
    return seals >= 0 && (seals & need) == need;
}

/* ---- clients ------------------------------------------------------------------------------ */

void client_free(struct client *cl)
{
    if (cl->fd >= 0)
        (void)close(cl->fd);
    free(cl->buf);
    if (cl->pass_fd >= 0)
        (void)close(cl->pass_fd);
    if (cl->in_fd >= 0)
        (void)close(cl->in_fd);
    free(cl->q.payload);
    free(cl->q.stdin_data);
    free(cl->q.copy_paths);
    free(cl->pending);
    *cl = (struct client){.fd = -1, .pass_fd = -1, .in_fd = -1};
}

/* Send what the socket takes of p[0..n) now, never waiting. Returns the bytes sent (0: none,
 * also when the peer is gone). */
static size_t send_now(int fd, const char *p, size_t n)
{
    ssize_t k = RETRY_EINTR(send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL));
    return k > 0 ? (size_t)k : 0;
}

void client_stream(struct client *cl, const char *name, const char *data, size_t n)
{
    char *line;
    size_t len, sent;
    json_t *j;

    if (cl->fd < 0)
        return;
    if (cl->pending_len) {
        /* The last line first, whole: output dropped meanwhile is in the answer anyway. */
        sent = send_now(cl->fd, cl->pending, cl->pending_len);
        memmove(cl->pending, cl->pending + sent, cl->pending_len - sent);
        cl->pending_len -= sent;
        if (cl->pending_len)
            return;
    }
    j = json_pack("{s:s,s:o}", "stream", name, "data", json_text(data, n));
    line = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!line)
        return;
    len = strlen(line);
    line[len++] = '\n'; /* replaces the NUL: sent with its length */
    sent = send_now(cl->fd, line, len);
    if (sent > 0 && sent < len) {
        /* Half a line is out: the rest must follow before anything else. */
        memmove(line, line + sent, len - sent);
        cl->pending = line;
        cl->pending_len = len - sent;
        return;
    }
    free(line);
}

/* Write what the socket takes of the answer now. Done (or the peer gone): the connection is
 * closed. */
void client_write(struct client *cl)
{
    while (cl->done < cl->have) {
        ssize_t n;

        if (cl->pass_fd >= 0) {
            /* The step's copy-out stream rides on the answer's first bytes, for the client to
             * unpack as the caller (cmd-session.c): the supervisor writes nothing on the host. */
            union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
            } u = {0};
            struct iovec iov = {.iov_base = cl->buf + cl->done, .iov_len = cl->have - cl->done};
            struct msghdr msg = {.msg_iov = &iov,
                                 .msg_iovlen = 1,
                                 .msg_control = u.buf,
                                 .msg_controllen = sizeof(u.buf)};
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &cl->pass_fd, sizeof(int));
            n = RETRY_EINTR(sendmsg(cl->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL));
            if (n > 0) {
                (void)close(cl->pass_fd);
                cl->pass_fd = -1;
            }
        } else
            n = RETRY_EINTR(
                send(cl->fd, cl->buf + cl->done, cl->have - cl->done, MSG_DONTWAIT | MSG_NOSIGNAL));
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0)
            break;
        cl->done += (size_t)n;
    }
    client_free(cl);
}

/* Give the client its answer, one line of JSON (j is taken), and send what goes at once. */
void client_answer(struct client *cl, json_t *j, uint64_t now)
{
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;

    json_decref(j);
    if (!text || cl->fd < 0) {
        /* No answer can be made (out of memory), or nobody is left to take it. */
        free(text);
        client_free(cl);
        return;
    }
    free(cl->buf);
    cl->have = strlen(text);
    text[cl->have++] = '\n'; /* replaces the NUL: written with its length */
    if (cl->pending_len) {
        /* A streamed line's rest goes first (client_stream()). */
        char *both = malloc(cl->pending_len + cl->have);
        if (!both) {
            free(text);
            client_free(cl);
            return;
        }
        memcpy(both, cl->pending, cl->pending_len);
        memcpy(both + cl->pending_len, text, cl->have);
        cl->have += cl->pending_len;
        free(text);
        text = both;
        free(cl->pending);
        cl->pending = NULL;
        cl->pending_len = 0;
    }
    cl->buf = text;
    cl->done = 0;
    cl->state = CLIENT_WRITING;
    cl->deadline = now + ANSWER_DEADLINE_USEC;
    client_write(cl);
}

void client_error(struct client *cl, uint64_t now, const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    client_answer(cl, json_pack("{s:s}", "error", text), now);
}

const char *session_reason_token(enum session_reason end)
{
    static const char *const tokens[] = {
        [SESSION_REASON_NONE] = "stopped",
        [SESSION_REASON_STOPPED] = "stopped",
        [SESSION_REASON_KILLED] = "killed",
        [SESSION_REASON_SIGNAL] = "signal",
        [SESSION_REASON_LIFETIME] = "lifetime",
        [SESSION_REASON_IDLE] = "idle",
        [SESSION_REASON_WATCHED] = "watched",
        [SESSION_REASON_USED] = "used",
        [SESSION_REASON_SANDBOX_ENDED] = "sandbox ended",
        [SESSION_REASON_CALLER_GONE] = "the caller of session start is gone",
        [SESSION_REASON_FAILED] = "the supervisor failed",
    };

    return (size_t)end < ELEMENTSOF(tokens) ? tokens[end] : "stopped";
}

/* How the session ended, for the words of an answer. */
const char *end_words(const struct session_state *s)
{
    switch (s->end) {
    case SESSION_REASON_STOPPED:
        return "it was stopped (nsbox session stop)";
    case SESSION_REASON_KILLED:
        return "it was killed (nsbox kill)";
    case SESSION_REASON_SIGNAL:
        return "its supervisor got a signal to end";
    case SESSION_REASON_LIFETIME:
        return "it reached its --lifetime";
    case SESSION_REASON_IDLE:
        return "it reached its --idle-timeout";
    case SESSION_REASON_WATCHED:
        return "the process it watched (--watch-pid) ended";
    case SESSION_REASON_USED:
        return "it was a pool's single-use sandbox, and its one step has run";
    default:
        return "its sandbox ended";
    }
}

/* A request is in: {"op": "stop"} ends the session, a step waits its turn (CLIENT_QUEUED). */
static void client_request(struct session_state *s, struct client *cl, size_t len, uint64_t now)
{
    json_error_t e;
    json_t *j = json_loadb(cl->buf, len, 0, &e);
    const char *why = NULL, *op;
    int r;

    if (!json_is_object(j)) {
        json_decref(j);
        client_error(cl, now,
                     "the request is not one line of JSON (%s): send one JSON object "
                     "and a newline",
                     j ? "not an object" : e.text);
        return;
    }
    op = json_string_value(json_object_get(j, "op"));
    if (op && strcmp(op, "stop") == 0) {
        json_decref(j);
        cl->state = CLIENT_STOPPING;
        if (!s->end)
            s->end = SESSION_REASON_STOPPED;
        return;
    }
    r = parse_request(s, j, &cl->q, &why);
    json_decref(j);
    if (r >= 0 && cl->q.copy_in && (cl->in_fd < 0 || !copy_in_fd_ok(cl->in_fd))) {
        why = "\"copy_in\": the request's first bytes must bring the copy-in stream, a memfd "
              "sealed against writes, shrinking and growing (SCM_RIGHTS)";
        r = -EBADMSG;
    }
    if (r >= 0 && !cl->q.copy_in && cl->in_fd >= 0) {
        (void)close(cl->in_fd); /* not asked for */
        cl->in_fd = -1;
    }
    if (r >= 0 && cl->q.has_stdin && len + 1 + cl->q.stdin_size > REQUEST_MAX) {
        why = "the request and its stdin are larger than 16 MiB: the session does not take them";
        r = -EFBIG;
    }
    if (r < 0) {
        free(cl->q.payload);
        free(cl->q.copy_paths);
        cl->q = (struct step_request){0};
        client_error(cl, now, "%s", why ? why : strerror(-r));
        return;
    }
    /* The step's stdin follows the line: the request is whole with it (client_read()). */
    cl->want = len + 1 + (cl->q.has_stdin ? cl->q.stdin_size : 0);
}

/* The request is whole: it waits its turn. */
static void client_queue(struct session_state *s, struct client *cl)
{
    size_t off = cl->want - cl->q.stdin_size;

    if (cl->q.has_stdin) {
        /* Its own copy (at least one byte, so that malloc(0) says nothing). */
        cl->q.stdin_data = malloc(cl->q.stdin_size + 1);
        if (cl->q.stdin_data)
            memcpy(cl->q.stdin_data, cl->buf + off, cl->q.stdin_size);
    }
    free(cl->buf);
    cl->buf = NULL;
    cl->have = cl->size = 0;
    if (cl->q.has_stdin && !cl->q.stdin_data) {
        client_error(cl, now_usec(), "the supervisor is out of memory for the step's stdin");
        return;
    }
    cl->state = CLIENT_QUEUED;
    cl->seq = ++s->seq;
}

/* Read what the client sent; a whole line is its request. */
void client_read(struct session_state *s, struct client *cl, uint64_t now)
{
    for (;;) {
        ssize_t n;
        char *nl;

        if (cl->have == cl->size) {
            size_t size = cl->size ? cl->size * 2 : 4096;
            char *b = size > REQUEST_MAX ? NULL : realloc(cl->buf, size);
            if (!b) {
                client_error(cl, now,
                             "the request is larger than %u MiB: the session does not "
                             "take it",
                             REQUEST_MAX >> 20);
                return;
            }
            cl->buf = b;
            cl->size = size;
        }
        n = recv_first_fd(cl->fd, cl->buf + cl->have, cl->size - cl->have, MSG_DONTWAIT,
                          &cl->in_fd);
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            if (cl->have == 0)
                client_free(cl); /* connected and went away: nothing to answer */
            else if (cl->want)
                client_error(cl, now,
                             "the request's stdin ended after %zu of its %zu bytes "
                             "(\"stdin_bytes\"): send them all after the line",
                             cl->have - (cl->want - cl->q.stdin_size), cl->q.stdin_size);
            else
                client_error(cl, now,
                             "the request ended after %zu bytes without its end of "
                             "line: send one JSON object and a newline",
                             cl->have);
            return;
        }
        nl = cl->want ? NULL : memchr(cl->buf + cl->have, '\n', (size_t)n);
        cl->have += (size_t)n;
        if (nl) {
            client_request(s, cl, (size_t)(nl - cl->buf), now);
            if (cl->state != CLIENT_READING)
                return; /* stop, or an error */
        }
        if (cl->want && cl->have >= cl->want) {
            client_queue(s, cl);
            return;
        }
    }
}

/*
 * Whether the peer of a connection runs in this process's user namespace. The socket's 0700
 * directory and the uid check keep out every other user, but not a sandbox of the caller's own
 * uid (an ordinary user's sandboxes are the caller's uid on the host) that sees the socket
 * file through a bind of the runtime directory, /tmp or /: connect(2) needs only write
 * permission on the socket file, which a read-only mount does not take away (the kernel's
 * unix_find_bsd() checks the inode, not the mount), and a network namespace does not cover
 * path-bound sockets. Every sandbox has a user namespace of its own; nsbox's clients, started
 * by the caller, share the supervisor's. The peer's pid (SO_PEERCRED, in this pid namespace)
 * names its /proc/PID/ns/user; the peer's pidfd (SO_PEERPIDFD, Linux 6.5) pins that pid while
 * it is read, and before 6.5 a peer would have to exit and its pid be reused in between.
 * Reading another namespace's link needs ptrace access (proc(5)), which the caller has over
 * the sandboxes it made; anything that cannot be read is refused.
 */
bool peer_in_own_user_namespace(int fd, pid_t pid)
{
    struct stat own, peer;
    char path[64];
    int pidfd = -1;
    socklen_t len = sizeof(pidfd);
    bool same;

    if (pid <= 0 || stat("/proc/self/ns/user", &own) < 0)
        return false;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
        pidfd = -1;
    (void)snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
    same = stat(path, &peer) == 0 && peer.st_dev == own.st_dev && peer.st_ino == own.st_ino;
    /* Still the same process (a pidfd's process cannot be replaced by another of its pid). */
    if (same && pidfd >= 0 && sys_pidfd_send_signal(pidfd, 0) < 0)
        same = false;
    if (pidfd >= 0)
        (void)close(pidfd);
    return same;
}

void client_accept(struct session_state *s, uint64_t now)
{
    /* (A bound per turn of the loop: a client that keeps connecting cannot keep it here; and
     * refused ones are paced, REFUSED_BURST.) */
    for (int k = 0; k < 64 && now >= s->refused_at; k++) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        struct client *cl = NULL;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        bool ours;

        if (fd < 0)
            return; /* EAGAIN: all taken; or a connection that went away meanwhile */
        /* Only the caller's uid (the directory is already 0700, this holds if it were not),
         * and never from inside a sandbox. */
        ours = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == getuid();
        if (!ours || !peer_in_own_user_namespace(fd, cred.pid)) {
            static const char other[] =
                "{\"error\":\"the session takes steps only from its caller's user namespace "
                "(a sandbox, or a process in another user namespace, cannot drive it)\"}\n";
            if (ours)
                (void)!send(fd, other, sizeof(other) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)close(fd);
            (void)pace_take(&s->refused_at, now, REFUSED_BURST, REFUSED_INTERVAL_USEC);
            continue;
        }
        for (size_t i = 0; i < CLIENTS_MAX && !cl; i++)
            if (s->clients[i].state == CLIENT_FREE)
                cl = &s->clients[i];
        if (!cl) {
            static const char busy[] = "{\"error\":\"the session has " STRINGIFY(
                CLIENTS_MAX) " connections open "
                             "already (steps waiting, or clients that are slow to send or read): "
                             "try again "
                             "when one has ended; nsbox kill ends the session regardless\"}\n";
            (void)!send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)close(fd);
            continue;
        }
        *cl = (struct client){.state = CLIENT_READING,
                              .fd = fd,
                              .pass_fd = -1,
                              .in_fd = -1,
                              .deadline = now + REQUEST_DEADLINE_USEC};
        /* The request is most often there already: read it now, not a poll later. */
        client_read(s, cl, now);
    }
}

/* A client's deadline passed: say so while it can be said, and drop it. */
void client_expire(struct client *cl, uint64_t now)
{
    if (cl->state == CLIENT_READING)
        client_error(cl, now,
                     "the request did not come whole within %llu s of the connection "
                     "(%zu bytes, no end of line): the session does not wait for a client; send "
                     "the whole request, one line of JSON, at once",
                     (unsigned long long)(REQUEST_DEADLINE_USEC / 1000000), cl->have);
    else
        /* It did not take its answer in time: cut off (its client sees a line without its
         * end; the step's result is in the audit log, if there is one). */
        client_free(cl);
}
