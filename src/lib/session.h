/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sessions: one live sandbox for many steps (`nsbox session`).
 *
 * The supervisor is the caller's own nsbox process, detached (session_start()). It makes the
 * sandbox as `nsbox run` does (sandbox_run_session()), but the sandbox's init does not run one
 * payload: it waits on a control channel (a SOCK_SEQPACKET socketpair inherited at clone, never
 * held by a step) for step requests and runs each step in a child of its own (session-init.c).
 * Clients reach the supervisor through a unix socket, SESSION_ID.sock, in the caller's 0700
 * registry directory; it accepts connections of the caller's uid only (SO_PEERCRED). The
 * sandbox has its own mount and network namespaces, so it can reach neither.
 *
 * Client protocol (one request per connection): the client sends one JSON object and a
 * newline, {"op": "exec", "argv": [...]} or {"op": "code", "code": "..."} with optional
 * "timeout" (seconds), "output_limit" (bytes), "stdin_bytes" (N: the line is followed by N
 * bytes, the step's stdin, as they are), "memory" (bytes: a lower limit for this step only, at
 * least 6 MiB; 0: none, allowed only where the sandbox has none) and "copy_in": true (a sealed
 * memfd, a copy-in stream (copy.h) the client packed, rides on the request's first bytes with
 * SCM_RIGHTS; init unpacks it below "/" before the step), or {"op": "stop"}; the supervisor
 * answers
 * with one line of JSON: the result as `nsbox run --json` prints it, plus "session_id" and
 * "step", or {"error": "..."}. After "stop" it closes the connection when the sandbox is gone.
 * The supervisor serves every connection in its one poll loop without blocking (session.c): a
 * request must come whole within 10 s of the connection and the answer be read within 30 s,
 * else the client is told (while it can be) and dropped; steps run one at a time, in the order
 * their requests came.
 */
#pragma once

#include <stdint.h>

#include "macro.h"
#include "nsbox.h"

/* Messages on the control channel between the supervisor and init. Fixed size. */
enum session_msg_type {
    SESSION_READY = 1, /* init -> supervisor: set up, waiting for steps */
    SESSION_RUN,       /* -> init: run a program; fds: argv (a memfd, NUL-separated), out, err,
                        * its stdin (a memfd) with SESSION_STEP_STDIN, and with
                        * SESSION_STEP_COPY_OUT the copy-out stream's memfd and a memfd of the
                        * sandbox paths to copy (NUL-separated) */
    SESSION_CODE,      /* -> init: Python code in the session's interpreter; fds: code, out,
                        * err and maybe stdin, as for SESSION_RUN */
    SESSION_INTERRUPT, /* -> init: the step's time is up */
    SESSION_STEP_END,  /* init -> supervisor: the step ended, everything it started is gone */
    SESSION_SAVE,      /* -> init: the session ends between steps; kill every process of the
                        * sandbox and write /work into the copy-out memfd (a workspace's) */
    SESSION_SAVED,     /* init -> supervisor: written (code: 0, or the errno that stopped the
                        * stream; flags: 1 when it was taken; unlisted: skipped entries not
                        * in the stream) */
};

enum session_end {
    SESSION_END_EXITED = 0, /* code: exit status */
    SESSION_END_SIGNALED,   /* code: signal */
};

/* flags of SESSION_STEP_END */
/* The most arguments a program step takes (a request with more is refused). */
#define SESSION_STEP_MAX_ARGS 4096

#define SESSION_INTERPRETER_NEW 1u         /* a fresh interpreter was started for this step */
#define SESSION_INTERPRETER_INTERRUPTED 2u /* KeyboardInterrupt ended the step; state kept */
#define SESSION_INTERPRETER_RESTARTED 4u   /* it did not stop within the grace: killed */
#define SESSION_INTERPRETER_CRASHED 8u     /* it died during the step */
#define SESSION_INTERPRETER_LOWERED                                                                \
    32u /* it ran the step under a lower RLIMIT_DATA (the step's "memory"), which a hard limit     \
         * keeps for good: it was ended after the step, the next code step starts a fresh one */

/* flags of SESSION_RUN and SESSION_CODE */
#define SESSION_STEP_STDIN 1u /* the step has a stdin memfd */
#define SESSION_STEP_COPY_OUT                                                                      \
    2u /* the step's end writes a copy-out stream (session exec                                    \
        * --copy-out), within copy_max_bytes and copy_max_files */
#define SESSION_STEP_OUTPUTS                                                                       \
    4u /* SESSION_CODE: the last descriptor is the cell's outputs channel (a memfd the             \
        * supervisor reads when the step has ended), for at most outputs_limit bytes */
#define SESSION_STEP_COPY_IN                                                                       \
    8u /* a copy-in stream (a memfd) follows the copy-out descriptors: init unpacks it below       \
        * "/" before the step runs; a failure is the step's error (a setup report, code 125) */
#define SESSION_STEP_LAST                                                                          \
    64u /* the sandbox's last step (a pool's member): nothing runs in it afterwards, so a          \
         * lowered limit needs no undoing */
/* ... and of SESSION_STEP_END */
#define SESSION_COPY_TAKEN                                                                         \
    16u /* the copy-out stream was written (copy_err: 0 or the errno that                          \
         * stopped it; unlisted: skipped entries not in it) */

/* Seconds the interpreter has, after SIGINT, to end a step before it is killed. */
#define SESSION_INTERRUPT_GRACE_USEC (2 * 1000 * 1000)

struct session_msg {
    int32_t type;
    int32_t end; /* enum session_end */
    int32_t code;
    uint32_t flags;
    int32_t copy_err;                        /* SESSION_SAVED, SESSION_STEP_END */
    uint64_t unlisted;                       /* SESSION_SAVED, SESSION_STEP_END */
    uint64_t lost;                           /* SESSION_SAVED, SESSION_STEP_END */
    uint64_t copy_max_bytes, copy_max_files; /* SESSION_RUN, SESSION_CODE */
    uint64_t outputs_limit;                  /* SESSION_CODE with SESSION_STEP_OUTPUTS */
    uint64_t memory; /* SESSION_RUN, SESSION_CODE: the step's lower memory limit in bytes, or 0
                      * (the sandbox's); enforced here under rlimits (the cgroup leaf's
                      * memory.max is the supervisor's to write) */
};

struct session_options {
    uint64_t idle_timeout;   /* microseconds; 0: none */
    uint64_t lifetime;       /* microseconds; 0: none */
    bool json;               /* print {"id": ..., "socket": ...} */
    const char *log_path;    /* the audit log: a start and an end record per step; or NULL */
    uint64_t log_code_limit; /* bytes of a step's code kept in the log */
    uint64_t max_steps;      /* end once this many steps have ended and been answered; 0: none
                              * (a pool's member: its preload and one step, pool.h) */
    pid_t watch_pid;         /* --watch-pid: end when this process ends (`nsbox mcp`); 0: none */
};

/* `nsbox session start`: detach a supervisor running config's sandbox, wait until it is up and
 * print its id. argc/argv: nsbox's command line, for `nsbox ps`. Returns the exit status (0,
 * or 125 with one line on stderr). */
int session_start(const struct nsbox_config *config, const struct session_options *o, int argc,
                  char *argv[]);

/* A pool's member (pool.h): run the session's supervisor in this process, a child of the pool
 * that forked it (neither detached nor registered apart from its own record), telling its start
 * on notify_fd as session_start()'s supervisor does: "OK ID SOCKET\n" (then it waits for one
 * byte, without which it ends) or "ERR MESSAGE\n". Never returns. */
_noreturn_ void session_member_main(const struct nsbox_config *config,
                                    const struct session_options *o, int argc, char *argv[],
                                    int notify_fd);

/* The socket of session id_or_name in buf. Returns 0, -ENOENT (no such session: a malformed
 * id, or no name) or another -errno. */
int session_socket_path(const char *id_or_name, char *buf, size_t size);
