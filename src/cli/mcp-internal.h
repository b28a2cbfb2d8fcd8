/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `nsbox mcp`: what the protocol (cmd-mcp.c: stdin/stdout, JSON-RPC, the loop) and the tools
 * (mcp-tools.c: a call's child or session step, its result as MCP content) share.
 *
 * One thread, one poll(2) loop. A tool call runs in a child: `nsbox run --result-fd 3` (this
 * same binary, /proc/self/exe) for run_python and run_command, `nsbox session start --json`
 * once per session, and a session's steps over its socket (the protocol of session-client.c),
 * so calls run side by side and a cancellation is a signal or a hang-up, never a wait.
 */
#pragma once

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"
#include "nsbox.h"

#define MCP_CALLS_MAX 16                   /* tool calls at once; more get an error result */
#define MCP_SESSIONS_MAX 8                 /* live python_session sandboxes of one connection */
#define MCP_RESULT_MAX (64U << 20)         /* a child's JSON result or a step's answer */
#define MCP_IMAGE_BUDGET (4U << 20)        /* base64 bytes of images in one tool result */
#define MCP_PROGRESS_TEXT_MAX 4096         /* output kept for the next progress notification */
#define MCP_STOP_WAIT_USEC (10U * 1000000) /* for a stopped session to end */

enum mcp_call_state {
    CALL_FREE,
    CALL_WAIT_SESSION, /* its session is starting */
    CALL_RUNNING,      /* its child or its step runs */
    CALL_STOPPING,     /* cancelled: its child was signalled / its step interrupted */
};

enum mcp_tool {
    TOOL_RUN_PYTHON,
    TOOL_RUN_COMMAND,
    TOOL_PYTHON_SESSION,
    TOOL_LIST_FILES,
    TOOL_READ_FILE,
    TOOL_WRITE_FILE,
};

/* A growing buffer with a cap. */
struct mcp_buf {
    char *data;
    size_t have, size;
    bool overflow; /* more came than the cap: the rest was dropped */
};

enum mcp_session_state {
    SESSION_FREE,
    SESSION_STARTING, /* `nsbox session start` runs */
    SESSION_READY,
    SESSION_STOPPING, /* {"op": "stop"} sent; waiting for the socket to close */
};

struct mcp_session {
    enum mcp_session_state state;
    char name[65];
    char id[33];
    char sock[700];
    pid_t start_pid;   /* `nsbox session start`, while SESSION_STARTING */
    bool start_reaped; /* ... has ended with start_status; its pipes drain until start_drain */
    int start_status;
    uint64_t start_drain;
    int start_out, start_err;
    struct mcp_buf out, err;
    int stop_fd; /* SESSION_STOPPING: the connection that asked it to stop */
    uint64_t stop_deadline;
};

struct mcp_call {
    enum mcp_call_state state;
    enum mcp_tool tool;
    json_t *id;             /* the request's id */
    json_t *progress_token; /* _meta.progressToken, or NULL */
    json_t *args;           /* the arguments (a reference) */
    const struct mcp_server *server;
    uint64_t started, next_progress;
    double progress;
    char clamp_note[400]; /* said when the call asked for more than the server allows */
    double timeout;       /* seconds the call runs with; 0: none */
    uint64_t memory;      /* bytes a run asked for (within the operator's); 0: the operator's */

    /* A run (run_python, run_command): the child and its pipes. */
    pid_t pid;
    bool reaped;
    int status;
    int fd_in, fd_out, fd_err, fd_res;
    char *in_data; /* what goes to the child's stdin (code, or the command's stdin) */
    size_t in_size, in_done;
    struct mcp_buf res, stderr_tail;
    char tmpdir[64];              /* run_python's files, copied in; removed at the end */
    char *out_dir;                /* --copy-out-dir's directory of this call, or NULL */
    struct mcp_buf progress_text; /* output not yet sent as progress */

    /* A session step: the connection to the session's socket. */
    struct mcp_session *session; /* its slot: compare session_id before acting on it, the slot
                                  * may hold another session by the time the step ends */
    char session_name[65];
    char session_id[33]; /* the session's id when the step was sent */
    bool session_close;  /* close the session after the step */
    int sock;
    char *req; /* the request's line and its stdin bytes */
    size_t req_size, req_done;
    uint64_t drain_until; /* after the child is reaped: the pipes' last bytes */
    int polled;           /* its first pollfd in mcp_poll_fill()'s array, or -1 */
};

struct mcp_server {
    const struct nsbox_config *c; /* the operator's command line */
    char **run_opts;              /* ... as argv, passed on to every child */
    int n_run_opts;
    json_t *tools;            /* the tools as served (descriptions completed) */
    const char *protocol;     /* the revision agreed in initialize */
    const char *copy_out_dir; /* --copy-out-dir, made absolute, or NULL */
    const char *log_path;     /* the audit log (--log, $NSBOX_LOG), or NULL */
    uint64_t log_code_limit;
    struct mcp_call calls[MCP_CALLS_MAX];
    struct mcp_session sessions[MCP_SESSIONS_MAX];
    bool ending;
};

/* cmd-mcp.c */
/* Queue one JSON-RPC message (j is taken) for stdout. droppable: a progress notification,
 * left out when the client is far behind in reading. */
void mcp_send(json_t *j, bool droppable);
void mcp_respond(json_t *id, json_t *result);
void mcp_respond_error(json_t *id, int code, const char *fmt, ...) _printf_(3, 4);

/* mcp-call.c */
/* Close *fd (if open) and set it to -1. */
void mcp_close_fd(int *fd);
/* Read what fd has into b (at most cap kept) and into progress (if not NULL). Returns false at
 * EOF or an error (fd closed), true while it stays open. */
bool mcp_drain(int *fd, struct mcp_buf *b, size_t cap, struct mcp_buf *progress);
/* fork and exec this binary (/proc/self/exe) with args; the pipes it gets (its stdin if ret_in,
 * its stdout and stderr, descriptor 3 if ret_res) are returned non-blocking. Returns its pid or
 * -errno. */
pid_t mcp_spawn(char **args, int *ret_in, int *ret_out, int *ret_err, int *ret_res);
/* A growing argv of owned strings: "nsbox CMD...", then the operator's run options. */
struct args {
    char **v;
    size_t n;
};
void mcp_args_start(struct args *a, const struct mcp_server *s, const char *const *cmd);
void mcp_args_add(struct args *a, const char *s);
void mcp_args_free(struct args *a);
/* Answer call c with result (taken; unless it was cancelled) and free it. */
void mcp_call_finish(struct mcp_call *c, json_t *result);
/* Answer call c with an error result saying fmt..., and free it. */
void mcp_call_fail(struct mcp_call *c, const char *fmt, ...) _printf_(2, 3);
/* The timeout c runs with into c->timeout: what it asked for, at most the operator's
 * (c->clamp_note says so). Returns 0, or -EINVAL for a bad "timeout". */
int mcp_call_timeout(const struct mcp_server *s, struct mcp_call *c);

/* mcp-session.c */
/* python_session and the file tools: find or start the session, then the step. */
void mcp_session_call(struct mcp_server *s, struct mcp_call *c);
/* Send the step of call c (its session is READY). */
void mcp_step_start(struct mcp_server *s, struct mcp_call *c);
/* Take the streamed output lines ({"stream", "data"}) at the start of c->res into
 * c->progress_text. Returns true once the answer's line is there (the rest of c->res). */
bool mcp_step_streamed(struct mcp_call *c);
/* The answer's line of c's step is in c->res (or the connection closed): answer the call. */
void mcp_step_done(struct mcp_call *c);
/* `session start` of x ended with status: READY, or failed (its waiting calls are told). */
void mcp_session_started(struct mcp_server *s, struct mcp_session *x, int status);
/* Ask x to end; the server waits for its socket to close (SESSION_STOPPING). */
void mcp_session_stop(struct mcp_session *x);
void mcp_session_free(struct mcp_session *x);

/* mcp-tools.c (no system calls but the rootfs's directory read: unit-tested in
 * tests/unit/test-mcp-tools.c) */
/* Append n bytes at p to b, keeping at most cap (b->overflow says what was dropped). */
int buf_append(struct mcp_buf *b, const char *p, size_t n, size_t cap);
void buf_free(struct mcp_buf *b);
/* mcp-text.c: stream name ("stdout", "stderr") of the JSON result r as the model reads it
 * (the Python API's Result._stream()): its start, nsbox's cut marker and its end, carriage
 * returns collapsed, at most max_chars characters (its first and last halves beyond, and then
 * *ret_note says so), control characters as \xNN. Returns a new string. */
char *mcp_stream_text(json_t *r, const char *name, size_t max_chars, char **ret_note);
/* mcp-text.c: note s as the model reads it (the Python API's as_tool_output()): the command's
 * option names given as keywords ("--memory 256m" -> memory="256m"). Returns a new string. */
char *mcp_api_words(const char *s);

/* A CallToolResult (a new reference) ... */
/* ... saying text, with isError (an argument refused, a session gone, nsbox failed); */
json_t *mcp_error_result(const struct mcp_call *c, const char *text);
/* ... of a python_session without code (status "closed" or "reset"); */
json_t *mcp_note_result(const struct mcp_call *c, const char *status, const char *text,
                        const char *session);
/* ... of a run or a session's code step, from its JSON result r (`nsbox run --json`'s); */
json_t *mcp_run_result(const struct mcp_call *c, json_t *r);
/* ... of a file tool, from its step's JSON result r (the script's JSON in its stdout). */
json_t *mcp_file_result(const struct mcp_call *c, json_t *r);

/* The tools file (python/nsbox/tools.json, embedded) with each description completed from the
 * operator's config c: its network, limits and the rootfs's packages. NULL on a broken file. */
json_t *mcp_tools_load(const struct nsbox_config *c, const char *copy_out_dir, bool complete);
/* Start the tools/call of name with args (an object) for request id; answers (now or when it
 * ends) through mcp_respond(). */
void mcp_call_start(struct mcp_server *s, json_t *id, const char *name, json_t *args,
                    json_t *progress_token);
/* notifications/cancelled for request id: stop its child or interrupt its step; no answer. */
void mcp_call_cancel(struct mcp_server *s, json_t *id);
/* Fill pollfds for every call and session (at most MCP_POLLFDS), and lower *timeout_ms to the
 * next deadline. Returns the number used. */
#define MCP_POLLFDS (MCP_CALLS_MAX * 5 + MCP_SESSIONS_MAX * 3)
size_t mcp_poll_fill(struct mcp_server *s, struct pollfd *p, int *timeout_ms);
/* Act on what poll() said of the descriptors mcp_poll_fill() gave (and on SIGCHLD: reap). */
void mcp_poll_handle(struct mcp_server *s, struct pollfd *p, size_t n);
/* Reap children that ended (after SIGCHLD). */
void mcp_reap(struct mcp_server *s);
/* The end: signal every child, stop every session. Returns true when nothing is left. */
bool mcp_shutdown_step(struct mcp_server *s, bool force);
