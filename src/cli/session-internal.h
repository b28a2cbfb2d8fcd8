/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The parts of a session's supervisor (session.h), shared by its three files:
 *   session.c         the loop (the sandbox's descriptors, nsbox_sandbox_pollfds(), with the
 *                     socket's listener, the signals, the timers and the clients), the end,
 *                     and the start (detaching)
 *   session-client.c  the clients: accepting them (the peer checks), reading and parsing a
 *                     request, the answer, the deadlines
 *   session-step.c    one step: its request to nsbox_sandbox_step_begin(), its audit record,
 *                     its answer
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit.h"
#include "macro.h"
#include "result.h"
#include "session.h"

#define REQUEST_MAX (16u << 20) /* bytes of one request: the code of a step and more */

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

/* Why a session ends (the "reason" of the stop answer: session_reason_token()). */
enum session_reason {
    SESSION_REASON_NONE = 0,
    SESSION_REASON_STOPPED,       /* `nsbox session stop` */
    SESSION_REASON_KILLED,        /* `nsbox kill` (SIGUSR1) */
    SESSION_REASON_SIGNAL,        /* another signal to the supervisor */
    SESSION_REASON_LIFETIME,      /* --lifetime */
    SESSION_REASON_IDLE,          /* --idle-timeout */
    SESSION_REASON_WATCHED,       /* --watch-pid's process ended */
    SESSION_REASON_USED,          /* a pool's member ran its one step */
    SESSION_REASON_SANDBOX_ENDED, /* the sandbox ended by itself (or init could not be reached) */
    SESSION_REASON_CALLER_GONE,   /* the caller of `session start` went before it had the id */
    SESSION_REASON_FAILED,        /* the supervisor itself failed */
};

/* The running step: the command's side of it (the library's is nsbox_sandbox_step_begin()'s). */
struct step {
    struct client *client; /* NULL: no step runs */
    struct step_request q;
    struct audit audit;
    bool hung_up; /* interrupted because its client hung up (interrupt_on_hangup) */
    int in_fd;    /* the copy-in stream its client sent, or -1 */
};

struct session_state {
    const struct nsbox_config *c;
    const struct session_options *o;
    char id[33];
    char sock_path[700];
    int notify_fd;        /* to `session start`, until the sandbox is up */
    const char *log_path; /* the audit log, checked at the start (audit_open()), or NULL */
    struct nsbox_sandbox *sandbox;
    struct nsbox_result run; /* the sandbox's result at its start: its limits, as planned */
    int signal_fd;           /* SIGUSR1 (`nsbox kill`), SIGTERM, SIGINT, SIGHUP end the session */
    int listen_fd;
    int watch_fd; /* pidfd of session_options.watch_pid, or -1 */
    uint64_t start, last_active;
    uint64_t steps;
    bool ended;              /* the sandbox is gone */
    enum session_reason end; /* why the session ends; SESSION_REASON_NONE while it runs */
    uint64_t refused_at;     /* when the socket may be polled again (REFUSED_BURST) */
    struct client clients[CLIENTS_MAX];
    uint64_t seq;
    struct step step;
};

/* session-client.c */
void client_free(struct client *cl);
void client_write(struct client *cl);
void client_answer(struct client *cl, json_t *j, uint64_t now);
void client_error(struct client *cl, uint64_t now, const char *fmt, ...) _printf_(3, 4);
const char *end_words(const struct session_state *s);
/* The stop answer's "reason" for how the session ended: "stopped", "killed", ... */
const char *session_reason_token(enum session_reason end);
void client_read(struct session_state *s, struct client *cl, uint64_t now);
void client_accept(struct session_state *s, uint64_t now);
void client_expire(struct client *cl, uint64_t now);
/* A running step's output (n bytes of stream "stdout" or "stderr") to its client, which asked
 * with "stream": one line {"stream", "data"}, never waiting: dropped when the socket is full. */
void client_stream(struct client *cl, const char *name, const char *data, size_t n);

/* session-step.c */
void step_clear(struct session_state *s);
/* Start the step of client cl on the sandbox. Returns 0 (the step runs, or its client got an
 * error), or -ESHUTDOWN when the sandbox is gone: the session can go on no longer. */
int step_start(struct session_state *s, struct client *cl, uint64_t now);
/* The step is done (NSBOX_SANDBOX_STEP_DONE): its answer. */
void step_finish(struct session_state *s, uint64_t now);
/* The session ends during the step: it is cut off (unless it had ended and only its pipes were
 * still read), and its client told. Returns whether it was cut off. */
bool step_cut(struct session_state *s, uint64_t now);
