/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `nsbox session`: the command's side of a session (the sandbox and its steps are the
 * library's: nsbox_sandbox_start() and the functions after it in nsbox.h).
 *
 * The supervisor is the caller's own nsbox process, detached (session_start()). It starts the
 * sandbox (nsbox_sandbox_start()) and serves its steps to clients that reach it through a unix
 * socket, SESSION_ID.sock, in the caller's 0700 registry directory; it accepts connections of
 * the caller's uid only (SO_PEERCRED). The sandbox has its own mount and network namespaces,
 * so it can reach neither.
 *
 * Client protocol (one request per connection): the client sends one JSON object and a
 * newline, {"op": "exec", "argv": [...]} or {"op": "code", "code": "..."} with optional
 * "timeout" (seconds), "output_limit" (bytes), "stdin_bytes" (N: the line is followed by N
 * bytes, the step's stdin, as they are), "memory" (bytes: a lower limit for this step only, at
 * least 6 MiB; 0: none, allowed only where the sandbox has none) and "copy_in": true (a sealed
 * memfd, a copy-in stream (copy.h) the client packed, rides on the request's first bytes with
 * SCM_RIGHTS; init unpacks it below "/" before the step), or {"op": "stop"}; the supervisor
 * answers with one line of JSON: the result as `nsbox run --json` prints it, plus "session_id"
 * and "step", or {"error": "..."}. After "stop" it closes the connection when the sandbox is
 * gone. The supervisor serves every connection in its one poll loop without blocking
 * (session.c): a request must come whole within 10 s of the connection and the answer be read
 * within 30 s, else the client is told (while it can be) and dropped; steps run one at a time,
 * in the order their requests came.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"
#include "nsbox.h"

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
