/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The parts of a session's supervisor (session.h), shared by its three files:
 *   session.c         the control channel to init, the events of every wait, the socket's
 *                     listener, the loop, the save of /work at the session's end, and the
 *                     start (detaching)
 *   session-client.c  the clients: accepting them (the peer checks), reading and parsing a
 *                     request, the answer, the deadlines
 *   session-step.c    one step: its start on init (its memfds and pipes), its end, its answer
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit.h"
#include "cgroup.h"
#include "headtail.h"
#include "macro.h"
#include "result.h"
#include "session.h"
#include "supervise.h"

#define REQUEST_MAX (16u << 20) /* bytes of one request: the code of a step and more */
#define READ_CHUNK 65536

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
/* Connections refused (another uid, another user namespace: a sandbox of the caller's own uid
 * that sees the socket through a bind) cost this process, outside every limit of the sandbox,
 * an accept(2), its checks and an answer each: paced as refused system calls are, a burst of
 * REFUSED_BURST, then one every REFUSED_INTERVAL_USEC; in between the socket is not polled and
 * connections wait in its listen queue (the caller's clients too: they cannot be told apart
 * before they are accepted). */
#define REFUSED_BURST 100
#define REFUSED_INTERVAL_USEC 10000ULL /* 100 a second */
#define REQUEST_DEADLINE_USEC (10 * 1000000ULL)
#define ANSWER_DEADLINE_USEC (30 * 1000000ULL)
#define END_FLUSH_USEC 1000000ULL /* at the session's end, for the last answers to go out */
#define SAVE_DEADLINE_USEC (60 * 1000000ULL) /* for init to write /work at the session's end */

struct step_request {
    bool code;
    char *payload; /* argv NUL-separated, or the code */
    size_t size;
    bool has_stdin; /* "stdin_bytes" was given: the step's stdin is stdin_data, else /dev/null */
    bool interrupt_on_hangup; /* its client's hang-up interrupts the step (a cancelled call) */
    bool stream; /* "stream": its output also goes to the client as it comes (client_stream()) */
    char *stdin_data;
    size_t stdin_size;
    uint64_t timeout;      /* microseconds, 0 = none */
    uint64_t output_limit; /* bytes per stream */
    char *copy_paths;      /* "copy_out": sandbox paths, NUL-separated, or NULL */
    size_t copy_size, n_copy;
    uint64_t copy_max_bytes, copy_max_files;
    uint64_t memory; /* "memory": the step's lower limit in bytes; 0: the sandbox's */
    bool copy_in;    /* "copy_in": a copy-in stream came with the request (client.in_fd) */
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
    int pass_fd;   /* sent with the answer's first bytes (SCM_RIGHTS): a step's copy-out stream */
    int in_fd;     /* came with the request (SCM_RIGHTS): the step's copy-in stream, or -1 */
    char *pending; /* the rest of a streamed line the socket did not take whole: written first */
    size_t pending_len;
};

struct stream {
    struct nsbox_stream *st;
    int fd;
    struct headtail kept; /* the start and the end of the stream (headtail.h) */
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
    bool hung_up; /* interrupted because its client hung up (interrupt_on_hangup) */
    struct session_msg end;
    int copy_fd;         /* the copy-out stream (a memfd), or -1 */
    int outputs_fd;      /* a code step's outputs channel (a memfd, outputs.h), or -1 */
    int in_fd;           /* the copy-in stream its client sent, or -1 */
    bool memory_lowered; /* the leaf's memory.max was lowered for it: put back at its end */
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
    int watch_fd; /* pidfd of session_options.watch_pid, or -1 */
    uint64_t start, last_active;
    uint64_t steps;
    const struct nsbox_result *run; /* the session's own result: its limits, as planned */
    const struct cgroup_leaf *leaf; /* the sandbox's cgroup leaf, or NULL (rlimits) */
    bool ended;                     /* init is gone */
    const char *end_reason;
    size_t save_warnings;        /* where the warnings of the session's end begin in its result */
    uint64_t notif_at;           /* when the next refused call may be answered (NOTIF_BURST) */
    uint64_t refused_at;         /* when the socket may be polled again (REFUSED_BURST) */
    struct nsbox_result between; /* what is reported between steps (refusals) */
    struct client clients[CLIENTS_MAX];
    uint64_t seq;
    struct step step;
    char *chunk; /* READ_CHUNK bytes, for the step's pipes */
};

/* session.c */
int control_send(int fd, const struct session_msg *m, const int *fds, int nfds);
bool handle_report(struct session_state *s, struct nsbox_result *ret);

/* session-client.c */
void client_free(struct client *cl);
void client_write(struct client *cl);
void client_answer(struct client *cl, json_t *j, uint64_t now);
void client_error(struct client *cl, uint64_t now, const char *fmt, ...) _printf_(3, 4);
const char *end_words(const struct session_state *s);
void client_read(struct session_state *s, struct client *cl, uint64_t now);
void client_accept(struct session_state *s, uint64_t now);
void client_expire(struct client *cl, uint64_t now);
/* A running step's output (n bytes of stream "stdout" or "stderr") to its client, which asked
 * with "stream": one line {"stream", "data"}, never waiting: dropped when the socket is full. */
void client_stream(struct client *cl, const char *name, const char *data, size_t n);

/* session-step.c */
/* Read what the step's pipe has (into buf, READ_CHUNK bytes), keep what fits. Returns the bytes
 * read, 0 at EOF, on an error or when there was nothing. */
ssize_t stream_read(struct stream *x, char *buf);
void add_warning(struct nsbox_result *ret, const char *text);
void add_outcome_warning(struct nsbox_result *ret, const char *text);
void step_clear(struct session_state *s);
int step_start(struct session_state *s, struct client *cl, uint64_t now);
void step_finish(struct session_state *s, uint64_t now);
void step_cut(struct session_state *s, uint64_t now);
