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
#include "copy.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "proxy.h"
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

/*
 * Refused system calls are answered at a run's pace (supervise.c, NOTIF_BURST): a burst of
 * NOTIF_BURST at once, then one every NOTIF_INTERVAL_USEC; in between the listener is not
 * polled, and the caller waits in the kernel for its answer (a killable wait, seccomp_unotify(2),
 * so a step's timeout and the session's end still end it). A step, or a thread the interpreter
 * keeps between steps, looping on a refused call then cannot make the supervisor, outside every
 * limit of the sandbox, burn a CPU. The pace is the session's, across steps and between them.
 */

/*
 * Clients. Every connection is non-blocking and served in the supervisor's one poll loop, with
 * the sandbox, the step's pipes, the signals and the timers: no client can hold the session.
 * A client has REQUEST_DEADLINE_USEC from its connection to send its request whole, and
 * ANSWER_DEADLINE_USEC from the start of its answer to take it whole; past either it is told
 * (when it still can be) and dropped. A complete request waits its turn while another client's
 * step runs (one step at a time, first come, first served), without a deadline: the step ahead
 * of it has its own. At most CLIENTS_MAX connections are open; one more is refused with a line.
 */
#define CLIENTS_MAX 16
#define REQUEST_DEADLINE_USEC (10 * 1000000ULL)
#define ANSWER_DEADLINE_USEC (30 * 1000000ULL)
#define END_FLUSH_USEC 1000000ULL /* at the session's end, for the last answers to go out */
#define SAVE_DEADLINE_USEC (60 * 1000000ULL) /* for init to write /work at the session's end */

struct step_request {
    bool code;
    char *payload; /* argv NUL-separated, or the code */
    size_t size;
    bool has_stdin; /* "stdin_bytes" was given: the step's stdin is stdin_data, else /dev/null */
    char *stdin_data;
    size_t stdin_size;
    uint64_t timeout;      /* microseconds, 0 = none */
    uint64_t output_limit; /* bytes per stream */
    char *copy_paths;      /* "copy_out": sandbox paths, NUL-separated, or NULL */
    size_t copy_size, n_copy;
    uint64_t copy_max_bytes, copy_max_files;
};

enum client_state {
    CLIENT_FREE = 0,
    CLIENT_READING,  /* its request is coming in, until its deadline */
    CLIENT_QUEUED,   /* its request is read and waits for the running step's end */
    CLIENT_RUNNING,  /* its step runs */
    CLIENT_WRITING,  /* its answer goes out, until its deadline */
    CLIENT_STOPPING, /* it asked the session to stop: open until this process exits, so that
                      * its EOF says the sandbox is gone */
};

struct client {
    enum client_state state;
    int fd;    /* -1 once the peer hung up while its step waited or ran */
    char *buf; /* the request as it comes in, then the answer */
    size_t have, size, done;
    size_t want; /* the whole request's size, its line and the stdin bytes that follow it
                  * ("stdin_bytes"); 0 until the line is in */
    uint64_t deadline;
    uint64_t seq; /* the order of complete requests */
    struct step_request q;
    int pass_fd; /* sent with the answer's first bytes (SCM_RIGHTS): a step's copy-out stream */
};

struct stream {
    struct nsbox_stream *st;
    int fd;
    uint64_t limit;
    struct json_meter meter; /* the JSON size of what is kept (result.h) */
    bool full;
};

/* The running step. */
struct step {
    struct client *client; /* NULL: no step runs */
    struct step_request q;
    struct nsbox_result ret;
    struct audit audit;
    struct stream streams[2];
    struct nsbox_cgroup_stats before;
    uint64_t start, kill_at, drain_until;
    bool ended, interrupted;
    struct session_msg end;
    int copy_fd; /* the copy-out stream (a memfd), or -1 */
};

struct session_state {
    const struct nsbox_config *c;
    const struct session_options *o;
    char id[33];
    char sock_path[700];
    int notify_fd;        /* to `session start`, until the sandbox is up */
    const char *log_path; /* the audit log, checked at the start (audit_open()), or NULL */
    int control_fd;
    struct supervise_fds *fds;
    int listener; /* seccomp listener, once taken */
    int listen_fd;
    uint64_t start, last_active;
    uint64_t steps;
    const struct nsbox_result *run; /* the session's own result: its limits, as planned */
    const struct cgroup_leaf *leaf; /* the sandbox's cgroup leaf, or NULL (rlimits) */
    bool ended;                     /* init is gone */
    const char *end_reason;
    size_t save_warnings;        /* where the warnings of the session's end begin in its result */
    uint64_t notif_at;           /* when the next refused call may be answered (NOTIF_BURST) */
    struct nsbox_result between; /* what is reported between steps (refusals) */
    struct client clients[CLIENTS_MAX];
    uint64_t seq;
    struct step step;
    char *chunk; /* READ_CHUNK bytes, for the step's pipes */
};

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

static int control_send(int fd, const struct session_msg *m, const int *fds, int nfds)
{
    union {
        char buf[CMSG_SPACE(6 * sizeof(int))];
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
static bool handle_report(struct session_state *s, struct nsbox_result *ret)
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
    if (rep.type == REPORT_LISTENER) {
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

/* ---- one step's pipes --------------------------------------------------------------------- */

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

/* A memfd holding data, for a step to read (its code, its stdin): sealed whole (no write, no
 * size change, no more seals) and never executable. Made here, outside the sandbox, it is not
 * under the sandbox's vm.memfd_noexec: unsealed, a step of root's session could rewrite it
 * with a program and execve() it through /proc/self/fd, where nothing else it can write is
 * executable. MFD_NOEXEC_SEAL (Linux 6.3) makes it 0666 without x and seals that
 * (F_SEAL_EXEC); before 6.3 it is made 0444 (a step of root's session does not own it, so
 * cannot chmod it back), and the write seals hold the content. memfd_create(2), fcntl(2). */
static int memfd_with(const char *data, size_t size)
{
    int fd = memfd_create("nsbox-step", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
    size_t done = 0;

    if (fd < 0 && errno == EINVAL)
        fd = memfd_create("nsbox-step", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return negative_errno();
    if (fchmod(fd, 0444) < 0) {
        (void)close(fd);
        return -EIO;
    }
    while (done < size) {
        ssize_t n = RETRY_EINTR(write(fd, data + done, size - done));
        if (n <= 0) {
            (void)close(fd);
            return -EIO;
        }
        done += (size_t)n;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        (void)close(fd);
        return -EIO;
    }
    /* One open file description for all: the interpreter reads it from the start. */
    if (lseek(fd, 0, SEEK_SET) < 0) {
        (void)close(fd);
        return -EIO;
    }
    return fd;
}

static void add_warning(struct nsbox_result *ret, const char *text)
{
    size_t len = strlen(ret->warnings);
    (void)snprintf(ret->warnings + len, sizeof(ret->warnings) - len, "%s%s", len ? "\n" : "", text);
}

/* Run one step and fill ret. Returns 0, or -errno when the session can go on no longer. */

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

    *q = (struct step_request){.timeout = s->c->timeout,
                               .output_limit = s->c->output_limit,
                               .copy_max_bytes = s->c->copy_out_max_bytes,
                               .copy_max_files = s->c->copy_out_max_files};
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
         * command. (session-init.c takes at most SESSION_STEP_MAX_ARGS.) */
        if (json_array_size(argv) > SESSION_STEP_MAX_ARGS)
            return *why = "\"argv\" has more than " STRINGIFY(
                       SESSION_STEP_MAX_ARGS) " arguments, more than a step takes",
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

/* ---- clients ------------------------------------------------------------------------------ */

static void client_free(struct client *cl)
{
    if (cl->fd >= 0)
        (void)close(cl->fd);
    free(cl->buf);
    if (cl->pass_fd >= 0)
        (void)close(cl->pass_fd);
    free(cl->q.payload);
    free(cl->q.stdin_data);
    free(cl->q.copy_paths);
    *cl = (struct client){.fd = -1, .pass_fd = -1};
}

/* Write what the socket takes of the answer now. Done (or the peer gone): the connection is
 * closed. */
static void client_write(struct client *cl)
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
static void client_answer(struct client *cl, json_t *j, uint64_t now)
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
    cl->buf = text;
    cl->have = strlen(text);
    text[cl->have++] = '\n'; /* replaces the NUL: written with its length */
    cl->done = 0;
    cl->state = CLIENT_WRITING;
    cl->deadline = now + ANSWER_DEADLINE_USEC;
    client_write(cl);
}

static void client_error(struct client *cl, uint64_t now, const char *fmt, ...) _printf_(3, 4);
static void client_error(struct client *cl, uint64_t now, const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    client_answer(cl, json_pack("{s:s}", "error", text), now);
}

/* How the session ended, for the words of an answer. */
static const char *end_words(const struct session_state *s)
{
    const char *r = s->end_reason ? s->end_reason : "";

    if (strcmp(r, "stopped") == 0)
        return "it was stopped (nsbox session stop)";
    if (strcmp(r, "killed") == 0)
        return "it was killed (nsbox kill)";
    if (strcmp(r, "signal") == 0)
        return "its supervisor got a signal to end";
    if (strcmp(r, "lifetime") == 0)
        return "it reached its --lifetime";
    if (strcmp(r, "idle") == 0)
        return "it reached its --idle-timeout";
    return "its sandbox ended";
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
        if (!s->end_reason)
            s->end_reason = "stopped";
        return;
    }
    r = parse_request(s, j, &cl->q, &why);
    json_decref(j);
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
static void client_read(struct session_state *s, struct client *cl, uint64_t now)
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
        n = RETRY_EINTR(recv(cl->fd, cl->buf + cl->have, cl->size - cl->have, MSG_DONTWAIT));
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
static bool peer_in_own_user_namespace(int fd, pid_t pid)
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

static void client_accept(struct session_state *s, uint64_t now)
{
    /* (A bound per turn of the loop: a client that keeps connecting cannot keep it here.) */
    for (int k = 0; k < 64; k++) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        struct client *cl = NULL;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0)
            return; /* EAGAIN: all taken; or a connection that went away meanwhile */
        /* Only the caller's uid (the directory is already 0700, this holds if it were not),
         * and never from inside a sandbox. */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid()) {
            (void)close(fd);
            continue;
        }
        if (!peer_in_own_user_namespace(fd, cred.pid)) {
            static const char other[] =
                "{\"error\":\"the session takes steps only from its caller's user namespace "
                "(a sandbox, or a process in another user namespace, cannot drive it)\"}\n";
            (void)!send(fd, other, sizeof(other) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)close(fd);
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
                              .deadline = now + REQUEST_DEADLINE_USEC};
        /* The request is most often there already: read it now, not a poll later. */
        client_read(s, cl, now);
    }
}

/* A client's deadline passed: say so while it can be said, and drop it. */
static void client_expire(struct client *cl, uint64_t now)
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

/* ---- one step ---------------------------------------------------------------------------- */

/* Close the step's pipes and free what it holds; the step is over. */
static void step_clear(struct session_state *s)
{
    struct step *st = &s->step;

    for (int i = 0; i < 2; i++)
        if (st->streams[i].fd >= 0)
            (void)close(st->streams[i].fd);
    audit_close(&st->audit);
    if (st->copy_fd >= 0)
        (void)close(st->copy_fd);
    free(st->q.payload);
    free(st->q.stdin_data);
    free(st->q.copy_paths);
    nsbox_result_free(&st->ret);
    *st = (struct step){.audit = {.fd = -1}, .streams = {{.fd = -1}, {.fd = -1}}, .copy_fd = -1};
}

/* Send the step's result to its client. */
static void step_answer(struct session_state *s, uint64_t now)
{
    struct step *st = &s->step;
    struct nsbox_result *ret = &st->ret;
    const struct step_request *q = &st->q;
    uint32_t flags = st->end.flags;
    json_t *res;

    if (q->n_copy) {
        /* As a run's: copied only when the step ended by itself; the client unpacks it. */
        ret->copy_out_asked = true;
        if (ret->status != NSBOX_STATUS_ERROR && st->ended && !st->interrupted &&
            (flags & SESSION_COPY_TAKEN) && st->end.copy_err == 0) {
            ret->copy_out_done = true;
            ret->skipped_more += st->end.unlisted;
            ret->copy_out_lost += st->end.lost;
        } else if (st->ended && (flags & SESSION_COPY_TAKEN)) {
            char text[300];
            (void)snprintf(text, sizeof(text),
                           "copy-out failed inside the sandbox: %s%s; nothing was copied out",
                           strerror(st->end.copy_err),
                           st->end.copy_err == EFBIG
                               ? " (the stream passed RLIMIT_FSIZE: lower --copy-out-max-bytes "
                                 "or raise --memory)"
                           : st->end.copy_err == EOPNOTSUPP
                               ? " (libarchive, which nsbox loads for copies, could not be "
                                 "loaded when the session started)"
                               : "");
            add_warning(ret, text);
        } else
            add_warning(ret, "nothing was copied out: the step did not end by itself (its "
                             "timeout, or the session's end)");
    }
    /* --network allow=: the session's proxy report so far (every step's connections). */
    if (s->fds->proxy)
        proxy_report_snapshot(s->fds->proxy, &ret->network);
    if (st->audit.fd >= 0) {
        int ar = audit_end(&st->audit, ret);
        if (ar < 0 && ret->status != NSBOX_STATUS_ERROR) {
            ret->status = NSBOX_STATUS_ERROR;
            ret->exit_code = 125;
            (void)snprintf(ret->error_step, sizeof(ret->error_step), "audit log");
            (void)snprintf(ret->error, sizeof(ret->error),
                           "cannot write the step's result to the audit log '%s': %s", s->log_path,
                           strerror(-ar));
        }
    }
    res = result_to_json_object(ret);
    if (res) {
        (void)json_object_set_new(res, "session_id", json_string(s->id));
        (void)json_object_set_new(res, "step", json_integer((json_int_t)s->steps));
        if (q->code)
            (void)json_object_set_new(res, "interpreter",
                                      json_string(flags & SESSION_INTERPRETER_RESTARTED
                                                      ? "restarted"
                                                  : flags & SESSION_INTERPRETER_CRASHED ? "crashed"
                                                  : flags & SESSION_INTERPRETER_NEW     ? "started"
                                                                                        : "kept"));
        if (ret->status == NSBOX_STATUS_TIMEOUT) {
            char reason[300];
            (void)snprintf(reason, sizeof(reason),
                           "timed out after %.3g s: %s; the session%s go on",
                           (double)q->timeout / 1e6,
                           !q->code ? "the step's processes were killed"
                           : flags & SESSION_INTERPRETER_RESTARTED
                               ? "the Python interpreter ignored KeyboardInterrupt and was "
                                 "killed (its variables are lost)"
                               : "KeyboardInterrupt stopped the code",
                           q->code && !(flags & SESSION_INTERPRETER_RESTARTED)
                               ? ", its files and the interpreter's variables"
                               : " and its files");
            (void)json_object_set_new(res, "reason", json_string(reason));
        } else if (ret->status == NSBOX_STATUS_KILLED) {
            char reason[300];
            (void)snprintf(reason, sizeof(reason),
                           "was killed: the session ended during the step (%s); its sandbox is "
                           "gone, start a new session for further steps",
                           end_words(s));
            (void)json_object_set_new(res, "reason", json_string(reason));
        }
    }
    if (ret->copy_out_done) {
        st->client->pass_fd = st->copy_fd;
        st->copy_fd = -1;
    }
    client_answer(st->client, res, now);
    step_clear(s);
}

/* The step could not start, or could not be recorded: an error answer, the session goes on. */
static void step_refuse(struct session_state *s, uint64_t now, const char *fmt, ...) _printf_(3, 4);
static void step_refuse(struct session_state *s, uint64_t now, const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    client_answer(s->step.client, json_pack("{s:s}", "error", text), now);
    step_clear(s);
}

/* Start the step of client cl on init. Returns 0 (the step runs, or its client got an error),
 * or -errno when init cannot be reached: the session can go on no longer. */
static int step_start(struct session_state *s, struct client *cl, uint64_t now)
{
    struct step *st = &s->step;
    struct session_msg m;
    int out[2] = {-1, -1}, err[2] = {-1, -1}, payload_fd = -1, in_fd = -1, paths_fd = -1, r;
    int fds[6], nfds = 3;

    step_clear(s);
    st->client = cl;
    st->q = cl->q;
    cl->q = (struct step_request){0};
    cl->state = CLIENT_RUNNING;
    m = (struct session_msg){.type = st->q.code ? SESSION_CODE : SESSION_RUN};
    /* The sandbox's limits, as its setup placed them; the step's own clock and output. */
    st->ret = (struct nsbox_result){
        .memory = s->run->memory,
        .pids_limit = s->run->pids_limit,
        .cpus = s->run->cpus,
        .timeout = {st->q.timeout, NSBOX_ENFORCER_NONE},
        .output_limit = st->q.output_limit,
        .host_uid = s->run->host_uid,
        .host_gid = s->run->host_gid,
        .seccomp_reporting = s->run->seccomp_reporting,
    };
    memcpy(st->ret.limits_note, s->run->limits_note, sizeof(st->ret.limits_note));
    memcpy(st->ret.name, s->run->name, sizeof(st->ret.name));
    s->steps++;
    r = audit_step_start(s, &st->q, &st->audit);
    if (r < 0) {
        /* A step that cannot be recorded does not run, as a run would not. */
        step_refuse(s, now, "cannot write the audit log '%s': %s; the step does not run",
                    s->log_path, strerror(-r));
        return 0;
    }
    if (s->leaf)
        cgroup_leaf_stats(s->leaf, &st->before);
    st->ret.out.data = calloc(1, st->q.output_limit + 1);
    st->ret.err.data = calloc(1, st->q.output_limit + 1);
    payload_fd = st->ret.out.data && st->ret.err.data ? memfd_with(st->q.payload, st->q.size)
                                                      : -ENOMEM;
    /* Non-blocking on our read ends only: O_NONBLOCK of pipe2() would be on the write ends the
     * step gets too, and a step writing faster than we read would meet EAGAIN and lose output
     * that the result then called complete. */
    /* Its stdin, whole, in a memfd of its own (a file it reads to its end). */
    if (payload_fd >= 0 && st->q.has_stdin) {
        in_fd = memfd_with(st->q.stdin_data, st->q.stdin_size);
        if (in_fd < 0) {
            (void)close(payload_fd);
            payload_fd = in_fd;
        }
    }
    /* With "copy_out": the stream init writes when the step has ended, and the paths. */
    if (payload_fd >= 0 && st->q.n_copy) {
        st->copy_fd = memfd_create("nsbox-copy-out", MFD_CLOEXEC);
        paths_fd = st->copy_fd < 0 ? negative_errno()
                                   : memfd_with(st->q.copy_paths, st->q.copy_size);
        if (paths_fd < 0) {
            (void)close(payload_fd);
            if (in_fd >= 0)
                (void)close(in_fd);
            in_fd = -1;
            payload_fd = paths_fd;
        }
    }
    if (payload_fd < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
        fcntl(out[0], F_SETFL, O_NONBLOCK) < 0 || fcntl(err[0], F_SETFL, O_NONBLOCK) < 0) {
        r = payload_fd < 0 ? payload_fd : negative_errno();
        if (payload_fd >= 0)
            (void)close(payload_fd);
        if (in_fd >= 0)
            (void)close(in_fd);
        if (paths_fd >= 0)
            (void)close(paths_fd);
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0)
                (void)close(out[i]);
            if (err[i] >= 0)
                (void)close(err[i]);
        }
        step_refuse(s, now, "the supervisor cannot start the step: %s; the session goes on",
                    strerror(-r));
        return 0;
    }
    fds[0] = payload_fd;
    fds[1] = out[1];
    fds[2] = err[1];
    if (in_fd >= 0) {
        fds[nfds++] = in_fd;
        m.flags |= SESSION_STEP_STDIN;
    }
    if (paths_fd >= 0) {
        fds[nfds++] = st->copy_fd;
        fds[nfds++] = paths_fd;
        m.flags |= SESSION_STEP_COPY_OUT;
        m.copy_max_bytes = st->q.copy_max_bytes;
        m.copy_max_files = st->q.copy_max_files;
    }
    r = control_send(s->control_fd, &m, fds, nfds);
    if (in_fd >= 0)
        (void)close(in_fd);
    if (paths_fd >= 0)
        (void)close(paths_fd);
    (void)close(payload_fd);
    (void)close(out[1]);
    (void)close(err[1]);
    st->streams[0] = (struct stream){.st = &st->ret.out, .fd = out[0], .limit = st->q.output_limit};
    st->streams[1] = (struct stream){.st = &st->ret.err, .fd = err[0], .limit = st->q.output_limit};
    st->start = now_usec();
    st->kill_at = st->q.timeout ? st->start + st->q.timeout : UINT64_MAX;
    if (r < 0)
        s->end_reason = "sandbox ended"; /* init cannot be reached: the step is cut off */
    return r;
}

/* The step ended (init said so) and its pipes are read: its result. */
static void step_finish(struct session_state *s, uint64_t now)
{
    struct step *st = &s->step;
    struct nsbox_result *ret = &st->ret;

    if (!ret->wall_time)
        ret->wall_time = now - st->start;
    /* Read what an exec failure reported (written before the step's process exited). */
    while (handle_report(s, ret) && ret->status != NSBOX_STATUS_ERROR) {
        struct pollfd pr = {.fd = s->fds->report, .events = POLLIN};
        if (poll(&pr, 1, 0) <= 0)
            break;
    }
    if (ret->status == NSBOX_STATUS_ERROR) {
        step_answer(s, now);
        return;
    }
    if (s->leaf) {
        const struct nsbox_cgroup_stats *b = &st->before;
        /* The leaf is the session's: what this step added (the peak is the session's). */
        cgroup_leaf_stats(s->leaf, &ret->cgroup);
        ret->cgroup.oom_kills -= b->oom_kills < ret->cgroup.oom_kills ? b->oom_kills
                                                                      : ret->cgroup.oom_kills;
        ret->cgroup.pids_limit_hits -= b->pids_limit_hits < ret->cgroup.pids_limit_hits
                                           ? b->pids_limit_hits
                                           : ret->cgroup.pids_limit_hits;
        ret->cgroup.cpu_user -= b->cpu_user < ret->cgroup.cpu_user ? b->cpu_user
                                                                   : ret->cgroup.cpu_user;
        ret->cgroup.cpu_system -= b->cpu_system < ret->cgroup.cpu_system ? b->cpu_system
                                                                         : ret->cgroup.cpu_system;
    }
    if (st->interrupted) {
        ret->status = NSBOX_STATUS_TIMEOUT;
        ret->timeout.enforced_by = NSBOX_ENFORCER_NONE;
    } else if (st->end.end == SESSION_END_SIGNALED) {
        ret->status = NSBOX_STATUS_SIGNALED;
        ret->signal = st->end.code;
        /* The cgroup's OOM killer sends SIGKILL; memory.events says it was the OOM killer. */
        if (ret->cgroup.oom_kills > 0 && st->end.code == SIGKILL)
            ret->status = NSBOX_STATUS_OOM;
    } else {
        ret->status = NSBOX_STATUS_EXITED;
        ret->exit_code = st->end.code;
    }
    if (st->end.flags & SESSION_INTERPRETER_RESTARTED)
        add_warning(ret, "the step's time was up and the Python interpreter did not stop on "
                         "KeyboardInterrupt within 2 s: it was killed; the next step starts a "
                         "fresh interpreter (variables, imports and open files are lost)");
    if (st->end.flags & SESSION_INTERPRETER_CRASHED)
        add_warning(ret,
                    ret->cpus.enforced_by == NSBOX_ENFORCER_RLIMIT
                        ? "the session's Python interpreter died during the step (a crash, "
                          "os._exit(), or its CPU time: under rlimits, --cpus x --timeout is the "
                          "interpreter's RLIMIT_CPU, and its CPU time adds up over every step it "
                          "served; a cgroup's cpu.max has no such total); the next step starts a "
                          "fresh one (variables, imports and open files are lost)"
                        : "the session's Python interpreter died during the step (a crash, "
                          "os._exit(), or a limit); the next step starts a fresh one "
                          "(variables, imports and open files are lost)");
    step_answer(s, now);
}

/* The session ends during the step: it is cut off, and says why. */
static void step_cut(struct session_state *s, uint64_t now)
{
    struct nsbox_result *ret = &s->step.ret;

    for (int i = 0; i < 2; i++)
        if (s->step.streams[i].fd >= 0) {
            /* What the pipes hold now is kept; the rest is lost with the sandbox. */
            stream_read(&s->step.streams[i], s->chunk);
            s->step.streams[i].st->incomplete = s->step.streams[i].fd >= 0;
        }
    if (!ret->wall_time)
        ret->wall_time = now - s->step.start;
    if (s->step.ended && ret->status != NSBOX_STATUS_ERROR) {
        /* It had ended: only its pipes were still being read. */
        step_finish(s, now);
        return;
    }
    if (s->end_reason && strcmp(s->end_reason, "sandbox ended") != 0) {
        ret->status = NSBOX_STATUS_KILLED;
    } else if (ret->status != NSBOX_STATUS_ERROR) {
        ret->status = NSBOX_STATUS_ERROR;
        ret->exit_code = 125;
        (void)snprintf(ret->error_step, sizeof(ret->error_step), "session");
        (void)snprintf(ret->error, sizeof(ret->error),
                       "the session's sandbox ended during the step; the session is over");
    }
    step_answer(s, now);
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
        add_warning(ret, text);
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
        s->clients[i] = (struct client){.fd = -1, .pass_fd = -1};
    *st = (struct step){.audit = {.fd = -1}, .streams = {{.fd = -1}, {.fd = -1}}, .copy_fd = -1};
    s->chunk = malloc(READ_CHUNK);
    pfds = calloc(8 + CLIENTS_MAX + (fds->proxy ? proxy_max_pollfds(fds->proxy) : 0),
                  sizeof(*pfds));
    if (!s->chunk || !pfds)
        r = -ENOMEM;
    (void)fcntl(fds->report, F_SETFL, O_NONBLOCK);

    while (r == 0) {
        struct pollfd *p = pfds;
        struct client *pc[8 + CLIENTS_MAX] = {0};
        uint64_t now = now_usec(), until = UINT64_MAX;
        int np = 8, n_clients_end, timeout_ms;
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
        p[5] = (struct pollfd){.fd = ready ? s->listen_fd : -1, .events = POLLIN};
        p[6] = (struct pollfd){.fd = st->client ? st->streams[0].fd : -1, .events = POLLIN};
        p[7] = (struct pollfd){.fd = st->client ? st->streams[1].fd : -1, .events = POLLIN};
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
            uint64_t earliest = now - NOTIF_BURST * NOTIF_INTERVAL_USEC;
            s->notif_at = (s->notif_at > earliest ? s->notif_at : earliest) + NOTIF_INTERVAL_USEC;
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
            if (st->client && st->streams[i].fd >= 0 && p[6 + i].revents)
                stream_read(&st->streams[i], s->chunk);
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
        for (int i = 8; i < n_clients_end; i++) {
            struct client *cl = pc[i];
            if (cl->state == CLIENT_READING && p[i].revents)
                client_read(s, cl, now);
            else if (cl->state == CLIENT_WRITING && p[i].revents)
                client_write(cl);
            else if ((cl->state == CLIENT_QUEUED || cl->state == CLIENT_RUNNING) &&
                     (p[i].revents & (POLLHUP | POLLERR))) {
                /* Gone: a waiting step does not run; a running one runs to its end (its
                 * result goes to the audit log), its answer to nobody. */
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
        /* The next step, when none runs. */
        while (!st->client && !init_lost) {
            struct client *next = next_queued(s);
            if (!next)
                break;
            init_lost = step_start(s, next, now) < 0;
        }
        if (init_lost)
            break;
        if (ready && s->o->idle_timeout && !st->client &&
            now >= s->last_active + s->o->idle_timeout) {
            s->end_reason = "idle";
            break;
        }
    }

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
