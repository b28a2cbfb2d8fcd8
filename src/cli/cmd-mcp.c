/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `nsbox mcp [RUN OPTIONS]`: the sandbox as a Model Context Protocol server over stdio
 * (mcp-internal.h). This file is the protocol: JSON-RPC 2.0 messages, one a line, read from
 * stdin and written to stdout (nothing else goes there: nsbox's own messages go to stderr),
 * initialize, ping, tools/list, tools/call, notifications/cancelled; and the one poll(2) loop.
 * What a tool call does is mcp-tools.c's.
 *
 * Bounded everywhere: a line longer than LINE_MAX gets an error answer and is skipped to its
 * newline without being kept; answers wait in a queue, and while the queue holds more than
 * QUEUE_HIGH bytes (a client that stopped reading) stdin is not read and progress
 * notifications are dropped, so neither the server's memory nor a sandbox waits on the client.
 * EOF on stdin, SIGTERM, SIGINT or SIGHUP end the server and every sandbox it made; each child
 * gets PR_SET_PDEATHSIG, so SIGKILL of the server ends its runs too.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "cmd-mcp.h"
#include "cmd-session.h"
#include "config.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "mcp-internal.h"
#include "result.h"

#define EXIT_NSBOX_FAILURE 125
#define LINE_MAX_BYTES (48U << 20) /* one message: 16 MiB of code, JSON-escaped, fits */
#define READ_CHUNK (64U << 10)
#define QUEUE_HIGH (16U << 20)
#define SHUTDOWN_GRACE_USEC (5U * 1000000)
#define SHUTDOWN_MAX_USEC (15U * 1000000)
#define FLUSH_GRACE_USEC (2U * 1000000)

/* The protocol revisions this server speaks, newest first. */
static const char *const protocols[] = {"2025-11-25", "2025-06-18", NULL};

struct out_msg {
    struct out_msg *next;
    size_t size, done;
    char data[];
};

static struct {
    struct out_msg *head, *tail;
    size_t bytes;
    bool broken; /* stdout is gone: nothing more is written */
} queue;

void mcp_send(json_t *j, bool droppable)
{
    char *text;
    size_t n;
    struct out_msg *m;

    if (!j)
        log_oom();
    if (queue.broken || (droppable && queue.bytes > QUEUE_HIGH)) {
        json_decref(j);
        return;
    }
    (void)json_object_set_new(j, "jsonrpc", json_string("2.0"));
    /* JSON_ENSURE_ASCII: whatever bytes a program printed, the line is valid UTF-8 and holds
     * no raw newline (jansson escapes control characters in strings). */
    text = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(6));
    json_decref(j);
    if (!text)
        log_oom();
    n = strlen(text);
    m = malloc(sizeof(*m) + n + 1);
    if (!m)
        log_oom();
    memcpy(m->data, text, n);
    m->data[n] = '\n';
    m->size = n + 1;
    m->done = 0;
    m->next = NULL;
    free(text);
    if (queue.tail)
        queue.tail->next = m;
    else
        queue.head = m;
    queue.tail = m;
    queue.bytes += m->size;
}

void mcp_respond(json_t *id, json_t *result)
{
    if (!result) {
        /* Not encodable (a bug, or out of memory): an error the client can see, not a crash. */
        mcp_respond_error(id, -32603, "internal error: the server could not encode the result");
        return;
    }
    mcp_send(json_pack("{s:O,s:o}", "id", id, "result", result), false);
}

void mcp_respond_error(json_t *id, int code, const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    /* A name the client sent, cut with %.Ns, may end inside a character: UTF-8 again. */
    mcp_send(json_pack("{s:O,s:{s:i,s:o}}", "id", id ? id : json_null(), "error", "code", code,
                       "message", json_text(text, strlen(text))),
             false);
}

/* Write what stdout takes now. */
static void queue_flush(void)
{
    while (queue.head && !queue.broken) {
        struct out_msg *m = queue.head;
        ssize_t n = RETRY_EINTR(write(STDOUT_FILENO, m->data + m->done, m->size - m->done));
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            queue.broken = true; /* EPIPE: the client is gone */
            break;
        }
        m->done += (size_t)n;
        if (m->done < m->size)
            continue;
        queue.bytes -= m->size;
        queue.head = m->next;
        if (!queue.head)
            queue.tail = NULL;
        free(m);
    }
    while (queue.broken && queue.head) {
        struct out_msg *m = queue.head;
        queue.head = m->next;
        free(m);
    }
    if (queue.broken) {
        queue.tail = NULL;
        queue.bytes = 0;
    }
}

static json_t *initialize_result(struct mcp_server *s, json_t *params)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));

    s->protocol = protocols[0];
    for (size_t i = 0; protocols[i]; i++)
        if (asked && strcmp(asked, protocols[i]) == 0)
            s->protocol = protocols[i];
    return json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion", s->protocol,
                     "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "nsbox",
                     "title", "nsbox sandbox", "version", NSBOX_VERSION, "instructions",
                     "Run Python (run_python, or python_session to keep state between calls) and "
                     "programs "
                     "(run_command) in isolated Linux sandboxes with no access to this machine's "
                     "files. "
                     "Each result says how the code ended and why (status, reason, notes): read "
                     "them before "
                     "retrying.");
}

static void handle_request(struct mcp_server *s, json_t *id, const char *method, json_t *params)
{
    if (strcmp(method, "initialize") == 0) {
        if (!json_is_object(params) ||
            !json_is_string(json_object_get(params, "protocolVersion"))) {
            mcp_respond_error(id, -32602, "initialize: params.protocolVersion must be a string");
            return;
        }
        mcp_respond(id, initialize_result(s, params));
    } else if (strcmp(method, "ping") == 0)
        mcp_respond(id, json_object());
    else if (strcmp(method, "tools/list") == 0)
        mcp_respond(id, json_pack("{s:O}", "tools", s->tools));
    else if (strcmp(method, "tools/call") == 0) {
        json_t *name = json_object_get(params, "name"),
               *args = json_object_get(params, "arguments");
        json_t *meta = json_object_get(params, "_meta");
        json_t *token = json_object_get(meta, "progressToken");

        if (!json_is_object(params) || !json_is_string(name)) {
            mcp_respond_error(id, -32602, "tools/call: params.name must be a tool's name");
            return;
        }
        if (args && !json_is_object(args) && !json_is_null(args)) {
            mcp_respond_error(id, -32602, "tools/call: params.arguments must be an object");
            return;
        }
        if (token && !json_is_string(token) && !json_is_integer(token))
            token = NULL;
        mcp_call_start(s, id, json_string_value(name), json_is_object(args) ? args : NULL, token);
    } else
        mcp_respond_error(id, -32601, "method not found: '%.200s'", method);
}

static void handle_notification(struct mcp_server *s, const char *method, json_t *params)
{
    /* notifications/initialized, notifications/progress, roots: nothing to do. */
    if (strcmp(method, "notifications/cancelled") == 0) {
        json_t *rid = json_object_get(params, "requestId");
        if (json_is_string(rid) || json_is_integer(rid))
            mcp_call_cancel(s, rid);
    }
}

/* One line from stdin: a message, handled; anything else answered with JSON-RPC's error. */
static void handle_line(struct mcp_server *s, const char *line, size_t len)
{
    json_error_t e;
    json_t *j, *id, *method, *params;

    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
        len--;
    if (len == 0)
        return;
    j = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    if (!j) {
        mcp_respond_error(NULL, -32700, "parse error: %s (line %d, column %d)", e.text, e.line,
                          e.column);
        return;
    }
    id = json_object_get(j, "id");
    method = json_object_get(j, "method");
    params = json_object_get(j, "params");
    if (!json_is_object(j)) {
        mcp_respond_error(NULL, -32600,
                          json_is_array(j) ? "invalid request: JSON-RPC batches are not part of "
                                             "MCP since 2025-06-18; send one message a line"
                                           : "invalid request: a message is a JSON object");
    } else if (!method && (json_object_get(j, "result") || json_object_get(j, "error"))) {
        /* A response: this server sends no requests, so there is nothing to match. */
    } else if (!json_is_string(json_object_get(j, "jsonrpc")) ||
               strcmp(json_string_value(json_object_get(j, "jsonrpc")), "2.0") != 0 ||
               !json_is_string(method) || (id && !json_is_string(id) && !json_is_integer(id)) ||
               (params && !json_is_object(params))) {
        mcp_respond_error(id && (json_is_string(id) || json_is_integer(id)) ? id : NULL, -32600,
                          "invalid request: expected {\"jsonrpc\": \"2.0\", \"id\": a string or "
                          "integer, \"method\": a string, \"params\": an object}");
    } else if (id)
        handle_request(s, id, json_string_value(method), params);
    else
        handle_notification(s, json_string_value(method), params);
    json_decref(j);
}

struct reader {
    char *buf;
    size_t have;
    bool discarding; /* inside a line that was too long: skipping to its newline */
    bool eof;
};

/* Read what stdin has; handle each whole line. */
static void read_stdin(struct mcp_server *s, struct reader *rd)
{
    char chunk[READ_CHUNK];
    ssize_t n = RETRY_EINTR(read(STDIN_FILENO, chunk, sizeof(chunk)));
    size_t off = 0;

    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        rd->eof = true;
        if (rd->have > 0 && !rd->discarding)
            handle_line(s, rd->buf, rd->have); /* a last line without its newline */
        rd->have = 0;
        return;
    }
    while (off < (size_t)n) {
        char *nl = memchr(chunk + off, '\n', (size_t)n - off);
        size_t take = nl ? (size_t)(nl - (chunk + off)) : (size_t)n - off;

        if (rd->discarding) {
            if (nl)
                rd->discarding = false;
        } else if (rd->have + take > LINE_MAX_BYTES) {
            /* Answered once, now; the rest of the line is read and dropped. */
            mcp_respond_error(NULL, -32600,
                              "invalid request: a message longer than %u MiB was skipped (the "
                              "code a tool takes is at most 16 MiB)",
                              LINE_MAX_BYTES >> 20);
            free(rd->buf);
            rd->buf = NULL;
            rd->have = 0;
            rd->discarding = !nl;
        } else {
            char *b = realloc(rd->buf, rd->have + take + 1);
            if (!b)
                log_oom();
            rd->buf = b;
            memcpy(rd->buf + rd->have, chunk + off, take);
            rd->have += take;
            if (nl) {
                handle_line(s, rd->buf, rd->have);
                rd->have = 0;
            }
        }
        off += take + (nl ? 1 : 0);
    }
    /* A line held at its size, not at the size it once reached. */
    if (rd->have == 0 && rd->buf) {
        free(rd->buf);
        rd->buf = NULL;
    }
}

static void usage(FILE *f)
{
    fputs("Usage: nsbox mcp [RUN OPTIONS]\n"
          "       nsbox mcp --print-tools mcp|openai|anthropic [RUN OPTIONS]\n"
          "\n"
          "Serve the sandbox as a Model Context Protocol server on stdin and stdout (JSON-RPC,\n"
          "one message a line; revisions 2025-06-18 and 2025-11-25). Tools: run_python,\n"
          "python_session, session_list_files, session_read_file, session_write_file,\n"
          "run_command. RUN OPTIONS are 'nsbox run's (--memory, --timeout, --network, --log,\n"
          "-v, ...): each call's sandbox gets them; a call may ask for a shorter --timeout\n"
          "(and a run for less --memory), never more. nsbox's own messages go to stderr. EOF\n"
          "on stdin ends the server and every sandbox it made.\n"
          "\n"
          "  --copy-out-dir DIR    copy what each run_python and run_command call wrote in\n"
          "                        /work/out into a new directory below DIR, and link the\n"
          "                        files in the result (MCP resource links)\n"
          "  --print-tools FORMAT  print the tools as MCP tools, OpenAI function tools or\n"
          "                        Anthropic tools (a JSON array) and exit\n"
          "  -h, --help            show this help\n",
          f);
}

/* The tools as FORMAT wants them. */
static int print_tools(json_t *tools, const char *format)
{
    json_t *out = json_array(), *t;
    size_t i;
    char *text;

    if (!out)
        log_oom();
    json_array_foreach(tools, i, t) {
        json_t *name = json_object_get(t, "name"), *desc = json_object_get(t, "description");
        json_t *in = json_object_get(t, "inputSchema");
        if (strcmp(format, "mcp") == 0)
            (void)json_array_append(out, t);
        else if (strcmp(format, "openai") == 0)
            (void)json_array_append_new(out,
                                        json_pack("{s:s,s:O,s:O,s:O}", "type", "function", "name",
                                                  name, "description", desc, "parameters", in));
        else if (strcmp(format, "anthropic") == 0)
            (void)json_array_append_new(out, json_pack("{s:O,s:O,s:O}", "name", name, "description",
                                                       desc, "input_schema", in));
        else {
            json_decref(out);
            log_error("--print-tools: unknown format '%s': expected mcp, openai or anthropic",
                      format);
            return EXIT_NSBOX_FAILURE;
        }
    }
    text = json_dumps(out, JSON_INDENT(2));
    json_decref(out);
    if (!text)
        log_oom();
    (void)printf("%s\n", text);
    free(text);
    return fflush(stdout) == 0 ? 0 : EXIT_NSBOX_FAILURE;
}

/* The value of option name at argv[*i] (--name VALUE or --name=VALUE), or NULL when argv[*i]
 * is another argument; *missing when the value is. */
static const char *option_value(int argc, char *argv[], int *i, const char *name, bool *missing)
{
    size_t len = strlen(name);

    if (strncmp(argv[*i], name, len) != 0)
        return NULL;
    if (argv[*i][len] == '=')
        return argv[*i] + len + 1;
    if (argv[*i][len] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

/* Strip mcp's own options (--print-tools, --copy-out-dir) and refuse what a server cannot
 * take. */
static int take_options(int *argc, char *argv[], const char **print, const char **copy_out_dir)
{
    int out = 0;

    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i], *v;
        bool missing = false;

        if ((v = option_value(*argc, argv, &i, "--print-tools", &missing))) {
            *print = v;
            continue;
        }
        if ((v = option_value(*argc, argv, &i, "--copy-out-dir", &missing))) {
            *copy_out_dir = v;
            continue;
        }
        if (missing)
            return log_error_errno(-EINVAL, "option '%s' needs a value", a);
        if (strcmp(a, "--") == 0 || strcmp(a, "--code") == 0 || strncmp(a, "--code=", 7) == 0 ||
            strcmp(a, "--json") == 0 || strncmp(a, "--result-fd", 11) == 0 ||
            strcmp(a, "-i") == 0 || strcmp(a, "--stdin") == 0 || strcmp(a, "--name") == 0 ||
            strncmp(a, "--name=", 7) == 0 || strcmp(a, "--copy-out") == 0 ||
            strncmp(a, "--copy-out=", 11) == 0 || strncmp(a, "--workspace", 11) == 0)
            return log_error_errno(-EINVAL,
                                   "'nsbox mcp' does not take '%s': the code and its stdin come "
                                   "with each tool call, the results go to the client, and "
                                   "each call's sandbox is its own",
                                   a);
        argv[out++] = argv[i];
    }
    *argc = out;
    argv[out] = NULL;
    return 0;
}

/* The signals that end the server, taken through a signalfd; SIGCHLD too, for the children. */
static int signals_fd(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, set, NULL) < 0)
        return negative_errno();
    return signalfd(-1, set, SFD_CLOEXEC | SFD_NONBLOCK);
}

static int serve(struct mcp_server *s)
{
    struct reader rd = {0};
    struct pollfd p[3 + MCP_POLLFDS];
    sigset_t set;
    int sfd = signals_fd(&set);
    uint64_t end_at = 0, done_at = 0;
    int in_flags = fcntl(STDIN_FILENO, F_GETFL), out_flags = fcntl(STDOUT_FILENO, F_GETFL);

    if (sfd < 0)
        return log_error_errno(sfd, "mcp: signalfd: %m");
    /* Neither a silent client nor a full pipe may block the loop. (The flags are the open file
     * description's, shared with the client: they are put back at the end.) */
    if (in_flags < 0 || out_flags < 0 || fcntl(STDIN_FILENO, F_SETFL, in_flags | O_NONBLOCK) < 0 ||
        fcntl(STDOUT_FILENO, F_SETFL, out_flags | O_NONBLOCK) < 0)
        return log_error_errno(negative_errno(), "mcp: cannot make stdin and stdout "
                                                 "non-blocking: %m");
    (void)signal(SIGPIPE, SIG_IGN);

    for (;;) {
        int timeout_ms = -1;
        size_t n;
        uint64_t now = now_usec();

        if (s->ending) {
            bool force = now >= end_at + SHUTDOWN_GRACE_USEC;
            bool done = mcp_shutdown_step(s, force);
            /* The answers still queued get a moment, not more: a client that stopped reading
             * must not keep the server. */
            if (done && !done_at)
                done_at = now;
            if (done && (!queue.head || queue.broken || now >= done_at + FLUSH_GRACE_USEC))
                break;
            if (now >= end_at + SHUTDOWN_MAX_USEC) {
                log_error("mcp: children still alive %u s after the end; leaving",
                          SHUTDOWN_MAX_USEC / 1000000);
                break;
            }
            timeout_ms = 100;
        }
        p[0] = (struct pollfd){.fd = sfd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = rd.eof || s->ending || queue.bytes > QUEUE_HIGH ? -1
                                                                                     : STDIN_FILENO,
                               .events = POLLIN};
        p[2] = (struct pollfd){.fd = queue.head && !queue.broken ? STDOUT_FILENO : -1,
                               .events = POLLOUT};
        n = mcp_poll_fill(s, p + 3, &timeout_ms);
        if (poll(p, 3 + n, timeout_ms) < 0 && errno != EINTR)
            return log_error_errno(negative_errno(), "mcp: poll: %m");
        if (p[0].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == sizeof(si))
                if (si.ssi_signo != SIGCHLD && !s->ending) {
                    s->ending = true;
                    end_at = now_usec();
                }
            mcp_reap(s);
        }
        if (p[1].revents)
            read_stdin(s, &rd);
        mcp_poll_handle(s, p + 3, n);
        mcp_reap(s);
        if (p[2].revents & (POLLERR | POLLHUP))
            queue.broken = true;
        queue_flush();
        if (rd.eof && !s->ending) {
            s->ending = true;
            end_at = now_usec();
        }
    }
    free(rd.buf);
    queue.broken = true;
    queue_flush();
    (void)fcntl(STDIN_FILENO, F_SETFL, in_flags);
    (void)fcntl(STDOUT_FILENO, F_SETFL, out_flags);
    (void)close(sfd);
    return 0;
}

int mcp_main(int argc, char *argv[])
{
    struct mcp_server s = {0};
    const char *print = NULL, *log_path = NULL;
    const struct nsbox_config *c = NULL;
    uint64_t code_limit = 0;
    bool json = false;
    int r, n = argc - 1;
    _cleanup_free_ char **opts = calloc((size_t)argc + 1, sizeof(char *));
    _cleanup_free_ char **parse = calloc((size_t)argc + 2, sizeof(char *));

    if (!opts || !parse)
        log_oom();
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        opts[i - 1] = argv[i];
    }
    if (take_options(&n, opts, &print, &s.copy_out_dir) < 0)
        return EXIT_NSBOX_FAILURE;
    if (s.copy_out_dir) {
        /* Absolute, and a directory now: each run's /work/out goes into a new one below. */
        char *real = realpath(s.copy_out_dir, NULL);
        struct stat st;
        if (!real || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
            log_error("--copy-out-dir '%s' is not a directory: make it first", s.copy_out_dir);
            free(real);
            return EXIT_NSBOX_FAILURE;
        }
        s.copy_out_dir = real;
    }
    /* The run options, checked once now (a server with a bad one does not start) and passed as
     * they are to each call's `nsbox run` / `nsbox session start`. */
    parse[0] = (char *)"mcp";
    for (int i = 0; i < n; i++)
        parse[i + 1] = opts[i];
    r = run_options_parse(n + 1, parse, &c, &json, &log_path, &code_limit);
    if (r < 0)
        return EXIT_NSBOX_FAILURE;
    s.c = c;
    s.log_path = log_path;
    s.log_code_limit = code_limit;
    if (log_path) {
        /* A server whose calls could not be recorded does not start (as a run does not). */
        struct audit a = {.fd = -1};
        char why[300] = "";
        r = audit_open(log_path, "0", c, &a, why, sizeof(why));
        audit_close(&a);
        if (r < 0) {
            if (why[0])
                log_error("refusing the audit log '%s': %s; the server does not start", log_path,
                          why);
            else
                log_error_errno(r, "cannot write the audit log '%s': %m; the server does not start",
                                log_path);
            return EXIT_NSBOX_FAILURE;
        }
    }
    s.run_opts = opts;
    s.n_run_opts = n;
    s.tools = mcp_tools_load(c, s.copy_out_dir, true);
    if (!s.tools) {
        log_error("mcp: the embedded tools file is broken (python/nsbox/tools.json)");
        return EXIT_NSBOX_FAILURE;
    }
    if (print) {
        r = print_tools(s.tools, print);
        json_decref(s.tools);
        free((char *)s.copy_out_dir);
        return r;
    }
    for (size_t i = 0; i < MCP_SESSIONS_MAX; i++)
        s.sessions[i] = (struct mcp_session){.start_out = -1, .start_err = -1, .stop_fd = -1};
    for (size_t i = 0; i < MCP_CALLS_MAX; i++)
        s.calls[i] = (struct mcp_call){.fd_in = -1,
                                       .fd_out = -1,
                                       .fd_err = -1,
                                       .fd_res = -1,
                                       .sock = -1,
                                       .polled = -1};
    r = serve(&s);
    json_decref(s.tools);
    free((char *)s.copy_out_dir);
    return r < 0 ? EXIT_NSBOX_FAILURE : 0;
}
