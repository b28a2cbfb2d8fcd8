/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `nsbox mcp`'s tool calls (mcp-internal.h): each in a child of this same binary, or as a step
 * over a session's socket (mcp-session.c), watched by the server's one poll loop. What a result
 * says to the model is mcp-tools.c's.
 *
 * A run (run_python, run_command) is `nsbox run --result-fd 3 [the operator's options]
 * --timeout T --code -` (or `-- ARGV`): its stdout and stderr stream through pipes (progress
 * notifications), its JSON result comes on descriptor 3. A cancelled run's child gets SIGTERM:
 * nsbox run kills its sandbox, as for Ctrl-C, and the answer goes to nobody.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "mcp-internal.h"
#include "parse.h"
#include "registry.h"
#include "rmtree.h"
#include "syscalls.h"
#include "utf8.h"

#define PROGRESS_INTERVAL_USEC 250000
#define DRAIN_USEC 1000000
#define STDERR_TAIL 4096

void mcp_close_fd(int *fd)
{
    if (*fd >= 0)
        (void)close(*fd);
    *fd = -1;
}

bool mcp_drain(int *fd, struct mcp_buf *b, size_t cap, struct mcp_buf *progress)
{
    char chunk[65536];

    for (int i = 0; i < 16; i++) {
        ssize_t n = RETRY_EINTR(read(*fd, chunk, sizeof(chunk)));
        if (n < 0 && errno == EAGAIN)
            return true;
        if (n <= 0) {
            mcp_close_fd(fd);
            return false;
        }
        if (progress)
            (void)buf_append(progress, chunk, (size_t)n, MCP_PROGRESS_TEXT_MAX);
        if (b)
            (void)buf_append(b, chunk, (size_t)n, cap);
    }
    return true;
}

/* ---- children ---------------------------------------------------------------------------- */

/* fork and exec this binary with args; the pipes the child gets are returned (-1: /dev/null).
 * The child gets SIGTERM when the server dies (PR_SET_PDEATHSIG): nsbox then kills its sandbox
 * as it does for a Ctrl-C, so SIGKILL of the server leaves no run behind. */
pid_t mcp_spawn(char **args, int *ret_in, int *ret_out, int *ret_err, int *ret_res)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, res[2] = {-1, -1};
    pid_t ppid = getpid(), pid;

    if ((ret_in && pipe2(in, O_CLOEXEC) < 0) || pipe2(out, O_CLOEXEC) < 0 ||
        pipe2(err, O_CLOEXEC) < 0 || (ret_res && pipe2(res, O_CLOEXEC) < 0)) {
        int r = negative_errno();
        int fds[] = {in[0], in[1], out[0], out[1], err[0], err[1], res[0], res[1]};
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
            if (fds[i] >= 0)
                (void)close(fds[i]);
        return r;
    }
    pid = fork();
    if (pid < 0) {
        int r = negative_errno();
        int fds[] = {in[0], in[1], out[0], out[1], err[0], err[1], res[0], res[1]};
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
            if (fds[i] >= 0)
                (void)close(fds[i]);
        return r;
    }
    if (pid == 0) {
        sigset_t none;
        int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != ppid)
            _exit(125);
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        (void)signal(SIGPIPE, SIG_DFL);
        if (dup2(ret_in ? in[0] : devnull, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0 ||
            (ret_res && dup2(res[1], 3) < 0))
            _exit(125);
        /* Nothing else of the server's: its stdin and stdout are the client's. */
        (void)sys_close_range(ret_res ? 4 : 3, ~0U, 0);
        execv("/proc/self/exe", args);
        _exit(125);
    }
    *ret_out = out[0];
    (void)close(out[1]);
    *ret_err = err[0];
    (void)close(err[1]);
    if (ret_in) {
        *ret_in = in[1];
        (void)close(in[0]);
        (void)fcntl(*ret_in, F_SETFL, O_NONBLOCK);
    }
    if (ret_res) {
        *ret_res = res[0];
        (void)close(res[1]);
        (void)fcntl(*ret_res, F_SETFL, O_NONBLOCK);
    }
    (void)fcntl(*ret_out, F_SETFL, O_NONBLOCK);
    (void)fcntl(*ret_err, F_SETFL, O_NONBLOCK);
    return pid;
}

void mcp_args_add(struct args *a, const char *s)
{
    char **v = realloc(a->v, (a->n + 2) * sizeof(char *));

    if (!v)
        log_oom();
    a->v = v;
    a->v[a->n] = strdup(s);
    if (!a->v[a->n])
        log_oom();
    a->v[++a->n] = NULL;
}

void mcp_args_free(struct args *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
    *a = (struct args){0};
}

/* "nsbox CMD...", then the operator's run options. */
void mcp_args_start(struct args *a, const struct mcp_server *s, const char *const *cmd)
{
    mcp_args_add(a, "nsbox");
    for (; *cmd; cmd++)
        mcp_args_add(a, *cmd);
    for (int i = 0; i < s->n_run_opts; i++)
        mcp_args_add(a, s->run_opts[i]);
}

/* ---- calls ------------------------------------------------------------------------------- */

static void remove_tmpdir(struct mcp_call *c)
{
    _cleanup_close_ int fd = -EBADF;

    if (!c->tmpdir[0])
        return;
    fd = open(c->tmpdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0)
        (void)rmtree_below(fd);
    if (rmdir(c->tmpdir) < 0)
        log_warning("mcp: cannot remove '%s': %m", c->tmpdir);
    c->tmpdir[0] = '\0';
}

static void call_free(struct mcp_call *c)
{
    mcp_close_fd(&c->fd_in);
    mcp_close_fd(&c->fd_out);
    mcp_close_fd(&c->fd_err);
    mcp_close_fd(&c->fd_res);
    mcp_close_fd(&c->sock);
    buf_free(&c->res);
    buf_free(&c->stderr_tail);
    buf_free(&c->progress_text);
    free(c->out_dir);
    free(c->in_data);
    free(c->req);
    remove_tmpdir(c);
    json_decref(c->id);
    json_decref(c->progress_token);
    json_decref(c->args);
    *c = (struct mcp_call){.fd_in = -1,
                           .fd_out = -1,
                           .fd_err = -1,
                           .fd_res = -1,
                           .sock = -1,
                           .polled = -1};
}

/* The call's answer (result taken), unless it was cancelled (then nobody wants one). */
void mcp_call_finish(struct mcp_call *c, json_t *result)
{
    if (c->state != CALL_STOPPING)
        mcp_respond(c->id, result);
    else
        json_decref(result);
    call_free(c);
}

/* A call that ran nothing (refused for its arguments, its session not up) is in the audit log
 * too: a start record with what it asked for and an end record with why it did not run. */
static void audit_refusal(const struct mcp_call *c, const char *text)
{
    static const char *const names[] = {
        [TOOL_RUN_PYTHON] = "run_python",         [TOOL_RUN_COMMAND] = "run_command",
        [TOOL_PYTHON_SESSION] = "python_session", [TOOL_LIST_FILES] = "session_list_files",
        [TOOL_READ_FILE] = "session_read_file",   [TOOL_WRITE_FILE] = "session_write_file",
    };
    const struct mcp_server *s = c->server;
    struct audit a = {.fd = -1};
    struct nsbox_result r = {.status = NSBOX_STATUS_ERROR, .exit_code = 125};
    struct nsbox_config cc;
    json_t *code = json_object_get(c->args, "code");
    char id[33], why[300] = "", program[64];
    char *argv[] = {(char *)"nsbox", (char *)"mcp", (char *)"tools/call", (char *)names[c->tool],
                    NULL};
    int k;

    if (!s || !s->log_path || run_id_new(id) < 0)
        return;
    cc = *s->c;
    (void)snprintf(program, sizeof(program), "(mcp %s)", names[c->tool]);
    cc.argv = (char *const[]){program, NULL};
    if (json_is_string(code)) {
        cc.code = json_string_value(code);
        cc.code_size = json_string_length(code);
    }
    (void)snprintf(r.error_step, sizeof(r.error_step), "mcp");
    (void)snprintf(r.error, sizeof(r.error), "the call did not run: %s", text);
    k = audit_open(s->log_path, id, s->c, &a, why, sizeof(why));
    if (k >= 0)
        k = audit_start(&a, 4, argv, &cc, s->log_code_limit);
    if (k >= 0)
        k = audit_end(&a, &r);
    audit_close(&a);
    if (k < 0)
        log_error_errno(k, "mcp: cannot write the audit log '%s': %m%s%s", s->log_path,
                        why[0] ? ": " : "", why);
}

void mcp_call_fail(struct mcp_call *c, const char *fmt, ...)
{
    char text[2048];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (c->pid == 0 && !c->req)
        audit_refusal(c, text);
    mcp_call_finish(c, mcp_error_result(c, text));
}

static struct mcp_call *call_find(struct mcp_server *s, json_t *id)
{
    for (size_t i = 0; i < MCP_CALLS_MAX; i++)
        if (s->calls[i].state != CALL_FREE && json_equal(s->calls[i].id, id))
            return &s->calls[i];
    return NULL;
}

/* The timeout a call runs with: what it asked for, at most the operator's (0: none). */
int mcp_call_timeout(const struct mcp_server *s, struct mcp_call *c)
{
    json_t *t = json_object_get(c->args, "timeout");
    double max = (double)s->c->timeout / 1e6;

    c->timeout = max;
    if (!t)
        return 0;
    if (!json_is_number(t) || !(json_number_value(t) > 0) || json_number_value(t) > 1e6)
        return -EINVAL;
    if (max > 0 && json_number_value(t) > max)
        (void)snprintf(c->clamp_note, sizeof(c->clamp_note),
                       "the call asked for a timeout of %g s; this server allows at most %g s "
                       "(its --timeout), so it ran with %g s",
                       json_number_value(t), max, max);
    else
        c->timeout = json_number_value(t);
    return 0;
}

/* A run's memory limit: what the call asked for ("memory", Docker's syntax), at most the
 * operator's (0: the operator's as it is). Returns 0, or -EINVAL for a bad "memory". */
static int call_memory(const struct mcp_server *s, struct mcp_call *c)
{
    json_t *m = json_object_get(c->args, "memory");
    uint64_t asked, max = s->c->memory;
    size_t n = strlen(c->clamp_note);

    c->memory = 0;
    if (!m)
        return 0;
    if (!json_is_string(m) || parse_size(json_string_value(m), &asked) < 0 || asked == 0)
        return -EINVAL;
    if (max > 0 && asked > max)
        (void)snprintf(c->clamp_note + n, sizeof(c->clamp_note) - n,
                       "%sthe call asked for %s of memory; this server allows at most %llu MiB "
                       "(its --memory), so it ran with that",
                       n ? "; " : "", json_string_value(m), (unsigned long long)(max >> 20));
    else
        c->memory = asked;
    return 0;
}

/* A relative path inside /work that a file may be written to: no '..', '.', empty or
 * absolute components. */
static bool relative_path_ok(const char *p, size_t len)
{
    if (len == 0 || len > 1024 || p[0] == '/' || memchr(p, '\0', len))
        return false;
    for (const char *c = p; c < p + len;) {
        size_t n = strcspn(c, "/");
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        c += n + (c[n] == '/');
        if (c[-1] == '/' && c == p + len)
            return false; /* a trailing '/' */
    }
    return true;
}

/* The call's directory of what is copied in: fresh, 0700, in /tmp (nsbox copies it in as the
 * caller, so no one else needs to read it). */
static int make_tmpdir(struct mcp_call *c)
{
    if (c->tmpdir[0])
        return 0;
    (void)snprintf(c->tmpdir, sizeof(c->tmpdir), "/tmp/nsbox-mcp-XXXXXX");
    if (!mkdtemp(c->tmpdir)) {
        c->tmpdir[0] = '\0';
        return log_error_errno(negative_errno(), "mcp: cannot make a directory in /tmp: %m");
    }
    return 0;
}

/* --copy-out-dir: /work/out exists from the start (a copy-out of a missing path would be noted
 * in every result), and what it holds at the end goes into a new directory below the
 * operator's. Returns 0 or -errno. */
static int prepare_copy_out(const struct mcp_server *s, struct mcp_call *c)
{
    _cleanup_free_ char *out = NULL;

    if (make_tmpdir(c) < 0)
        return -EIO;
    if (asprintf(&out, "%s/out", c->tmpdir) < 0 ||
        asprintf(&c->out_dir, "%s/call-XXXXXX", s->copy_out_dir) < 0)
        log_oom();
    if (mkdir(out, 0700) < 0)
        return log_error_errno(negative_errno(), "mcp: cannot make '%s': %m", out);
    if (!mkdtemp(c->out_dir)) {
        int r = log_error_errno(negative_errno(), "mcp: cannot make a directory in '%s': %m",
                                s->copy_out_dir);
        free(c->out_dir);
        c->out_dir = NULL;
        return r;
    }
    /* For the client's user to open: as a directory made under the umask would be. */
    (void)chmod(c->out_dir, 0755);
    return 0;
}

/* A call's copy-out directory that got nothing (the code wrote no /work/out files) is
 * removed: DIR/call-XXXXXX/out, then DIR/call-XXXXXX (rmdir(2) fails on anything else). */
static void remove_empty_out_dir(struct mcp_call *c)
{
    _cleanup_free_ char *out = NULL;

    if (!c->out_dir)
        return;
    if (asprintf(&out, "%s/out", c->out_dir) < 0)
        log_oom();
    (void)rmdir(out);
    (void)rmdir(c->out_dir);
}

/* run_python's files into a fresh 0700 directory of the server's, copied in by nsbox
 * (--copy-in DIR/.:/work/). Returns 0, or -errno with *why set for the model. */
static int write_files(struct mcp_call *c, json_t *files, const char **why)
{
    const char *key;
    json_t *v;
    size_t total = 0;

    if (json_object_size(files) > 100)
        return *why = "\"files\" holds more than 100 files", -E2BIG;
    json_object_foreach(files, key, v) {
        if (!json_is_string(v))
            return *why = "\"files\": each value must be the file's text", -EINVAL;
        if (!relative_path_ok(key, strlen(key)))
            return *why = "\"files\": each key must be a relative path inside /work, without "
                          "'.', '..' or empty components",
                   -EINVAL;
        total += json_string_length(v);
    }
    if (total > (16U << 20))
        return *why = "\"files\" hold more than 16 MiB", -EFBIG;
    if (make_tmpdir(c) < 0)
        return *why = "the server cannot make a directory for the files", -EIO;
    json_object_foreach(files, key, v) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *p = json_string_value(v);
        size_t n = json_string_length(v);

        if (asprintf(&path, "%s/%s", c->tmpdir, key) < 0)
            log_oom();
        /* The parents, in a directory only this server can write. */
        for (char *slash = strchr(path + strlen(c->tmpdir) + 1, '/'); slash;
             slash = strchr(slash + 1, '/')) {
            *slash = '\0';
            if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return *why = "the server cannot write the files", negative_errno();
            *slash = '/';
        }
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return *why = errno == EEXIST || errno == EISDIR || errno == ENOTDIR
                              ? "\"files\": one path is both a file and a directory"
                              : "the server cannot write the files",
                   negative_errno();
        while (n > 0) {
            ssize_t w = RETRY_EINTR(write(fd, p, n));
            if (w <= 0)
                return *why = "the server cannot write the files", -EIO;
            p += w;
            n -= (size_t)w;
        }
    }
    return 0;
}

static void call_set_timeout_args(struct args *a, const struct mcp_call *c)
{
    char t[64];

    if (c->timeout > 0) {
        (void)snprintf(t, sizeof(t), "%.6f", c->timeout);
        mcp_args_add(a, "--timeout");
        mcp_args_add(a, t);
    }
}

/* run_python and run_command: `nsbox run --result-fd 3 ...` with the code or stdin on its
 * stdin. */
static void run_start(struct mcp_server *s, struct mcp_call *c)
{
    struct args a = {0};
    const char *why = NULL, *tool = c->tool == TOOL_RUN_PYTHON ? "run_python" : "run_command";
    json_t *code = json_object_get(c->args, "code"), *argv = json_object_get(c->args, "argv");
    json_t *files = json_object_get(c->args, "files"), *in = json_object_get(c->args, "stdin");
    char label[64];
    pid_t pid;
    int r;

    if (mcp_call_timeout(s, c) < 0)
        return mcp_call_fail(c,
                             "invalid arguments: \"timeout\" must be a number of seconds above 0");
    if (call_memory(s, c) < 0)
        return mcp_call_fail(c, "invalid arguments: \"memory\" must be a size such as \"128m\" "
                                "or \"1g\"");
    if (c->tool == TOOL_RUN_PYTHON) {
        if (!json_is_string(code))
            return mcp_call_fail(c, "invalid arguments: \"code\" (a string of Python) is required");
        if (json_string_length(code) > (16U << 20))
            return mcp_call_fail(c, "invalid arguments: \"code\" is longer than 16 MiB");
        if (files && !json_is_object(files))
            return mcp_call_fail(c, "invalid arguments: \"files\" must be an object of relative "
                                    "path -> text");
        if (files && json_object_size(files) && write_files(c, files, &why) < 0)
            return mcp_call_fail(c, "invalid arguments: %s", why);
    } else {
        size_t i;
        json_t *v;
        if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 256)
            return mcp_call_fail(c,
                                 "invalid arguments: \"argv\" must be a list of 1 to 256 strings, "
                                 "the program first");
        bool strings = true;
        json_array_foreach(argv, i, v) {
            if (!json_is_string(v) || memchr(json_string_value(v), '\0', json_string_length(v)))
                strings = false;
        }
        if (!strings)
            return mcp_call_fail(c, "invalid arguments: \"argv\" must be strings without NUL");
        if (in && (!json_is_string(in) || json_string_length(in) > (16U << 20)))
            return mcp_call_fail(c,
                                 "invalid arguments: \"stdin\" must be a string of at most 16 MiB");
    }

    mcp_args_start(&a, s, (const char *const[]){"run", "--result-fd", "3", NULL});
    call_set_timeout_args(&a, c);
    if (c->memory) {
        char m[32];
        (void)snprintf(m, sizeof(m), "%llu", (unsigned long long)c->memory);
        mcp_args_add(&a, "--memory");
        mcp_args_add(&a, m);
    }
    (void)snprintf(label, sizeof(label), "mcp.tool=%s", tool);
    mcp_args_add(&a, "--label");
    mcp_args_add(&a, label);
    if (s->copy_out_dir) {
        _cleanup_free_ char *spec = NULL;
        if (prepare_copy_out(s, c) < 0) {
            mcp_args_free(&a);
            return mcp_call_fail(c, "the server cannot prepare the copy-out of /work/out (its "
                                    "--copy-out-dir); see its stderr");
        }
        if (asprintf(&spec, "/work/out:%s", c->out_dir) < 0)
            log_oom();
        mcp_args_add(&a, "--copy-out");
        mcp_args_add(&a, spec);
    }
    if (c->tmpdir[0]) {
        _cleanup_free_ char *spec = NULL;
        if (asprintf(&spec, "%s/.:/work/", c->tmpdir) < 0)
            log_oom();
        mcp_args_add(&a, "--copy-in");
        mcp_args_add(&a, spec);
    }
    if (c->tool == TOOL_RUN_PYTHON) {
        /* A notebook cell, as python_session's steps are: the last expression's value,
         * display() and figures come back as outputs (images among them). */
        mcp_args_add(&a, "--cell");
        mcp_args_add(&a, "--code");
        mcp_args_add(&a, "-");
        c->in_size = json_string_length(code);
        c->in_data = malloc(c->in_size + 1);
        if (!c->in_data)
            log_oom();
        memcpy(c->in_data, json_string_value(code), c->in_size);
    } else {
        size_t i;
        json_t *v;
        if (in) {
            mcp_args_add(&a, "--stdin");
            c->in_size = json_string_length(in);
            c->in_data = malloc(c->in_size + 1);
            if (!c->in_data)
                log_oom();
            memcpy(c->in_data, json_string_value(in), c->in_size);
        }
        mcp_args_add(&a, "--");
        json_array_foreach(argv, i, v)
            mcp_args_add(&a, json_string_value(v));
    }
    pid = mcp_spawn(a.v, c->in_data ? &c->fd_in : NULL, &c->fd_out, &c->fd_err, &c->fd_res);
    mcp_args_free(&a);
    if (pid < 0) {
        r = (int)pid;
        return mcp_call_fail(c, "the server cannot start nsbox run: %s", strerror(-r));
    }
    c->pid = pid;
    c->state = CALL_RUNNING;
}

/* ---- the server's side ------------------------------------------------------------------- */

void mcp_call_start(struct mcp_server *s, json_t *id, const char *name, json_t *args,
                    json_t *progress_token)
{
    static const struct {
        const char *name;
        enum mcp_tool tool;
    } tools[] = {
        {"run_python", TOOL_RUN_PYTHON},         {"run_command", TOOL_RUN_COMMAND},
        {"python_session", TOOL_PYTHON_SESSION}, {"session_list_files", TOOL_LIST_FILES},
        {"session_read_file", TOOL_READ_FILE},   {"session_write_file", TOOL_WRITE_FILE},
    };
    struct mcp_call *c = NULL;
    size_t t;

    for (t = 0; t < ELEMENTSOF(tools) && strcmp(tools[t].name, name) != 0; t++)
        ;
    if (t == ELEMENTSOF(tools))
        return mcp_respond_error(id, -32602, "unknown tool '%.100s' (see tools/list)", name);
    if (call_find(s, id))
        return mcp_respond_error(id, -32600, "a request with this id is still running");
    for (size_t i = 0; i < MCP_CALLS_MAX && !c; i++)
        if (s->calls[i].state == CALL_FREE)
            c = &s->calls[i];
    if (!c)
        return mcp_respond(id, json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text",
                                         "the server runs " STRINGIFY(
                                             MCP_CALLS_MAX) " tool calls already: wait for one "
                                                            "to end",
                                         "isError", 1));
    c->tool = tools[t].tool;
    c->server = s;
    c->id = json_incref(id);
    c->progress_token = json_incref(progress_token);
    c->args = args ? json_incref(args) : json_object();
    c->started = now_usec();
    c->next_progress = c->started + PROGRESS_INTERVAL_USEC;
    c->state = CALL_RUNNING; /* until it is started or failed */
    if (c->tool == TOOL_RUN_PYTHON || c->tool == TOOL_RUN_COMMAND)
        run_start(s, c);
    else
        mcp_session_call(s, c);
}

void mcp_call_cancel(struct mcp_server *s, json_t *id)
{
    struct mcp_call *c = call_find(s, id);

    if (!c || c->state == CALL_STOPPING)
        return; /* already answered, or unknown: the notification is ignored */
    if (c->pid > 0 && !c->reaped) {
        /* nsbox run kills its sandbox and reports "killed"; the answer goes to nobody. */
        (void)kill(c->pid, SIGTERM);
        c->state = CALL_STOPPING;
        return;
    }
    /* A step: the hang-up interrupts it (interrupt_on_hangup); waiting: nothing started. */
    c->state = CALL_STOPPING;
    call_free(c);
}

/* A progress notification: the output since the last one, or how long it has run. */
static void progress(struct mcp_call *c, uint64_t now, bool force)
{
    char msg[MCP_PROGRESS_TEXT_MAX * 4 + 64];
    size_t n = 0;

    if (!c->progress_token || c->state != CALL_RUNNING)
        return;
    if (!force && now < c->next_progress)
        return;
    if (!force && c->progress_text.have == 0 && now < c->next_progress + 750000)
        return; /* nothing new: at most one a second */
    /* Valid UTF-8 only (a chunk may end mid-character, a program may print any bytes):
     * what is not becomes U+FFFD. */
    for (size_t i = 0; i < c->progress_text.have;) {
        const unsigned char *p = (const unsigned char *)c->progress_text.data + i;
        int len = utf8_check(p, c->progress_text.have - i);
        if (len > 0 && !(len == 1 && p[0] == 0)) {
            memcpy(msg + n, p, (size_t)len);
            n += (size_t)len;
            i += (size_t)len;
        } else {
            memcpy(msg + n, "\xef\xbf\xbd", 3);
            n += 3;
            i++;
        }
    }
    if (n == 0)
        n = (size_t)snprintf(msg, sizeof(msg), "running for %.0f s",
                             (double)(now - c->started) / 1e6);
    c->progress += 1;
    mcp_send(json_pack("{s:s,s:{s:O,s:f,s:s%}}", "method", "notifications/progress", "params",
                       "progressToken", c->progress_token, "progress", c->progress, "message", msg,
                       n),
             true);
    c->progress_text.have = 0;
    c->progress_text.overflow = false;
    c->next_progress = now + PROGRESS_INTERVAL_USEC;
}

static bool call_active(const struct mcp_call *c)
{
    return c->state == CALL_RUNNING || c->state == CALL_STOPPING;
}

size_t mcp_poll_fill(struct mcp_server *s, struct pollfd *p, int *timeout_ms)
{
    size_t n = 0;
    uint64_t now = now_usec(), until = UINT64_MAX;

    for (size_t i = 0; i < MCP_CALLS_MAX; i++) {
        struct mcp_call *c = &s->calls[i];
        c->polled = -1;
        if (!call_active(c))
            continue;
        /* Where its descriptors are: calls may start and end before mcp_poll_handle(). */
        c->polled = (int)n;
        p[n++] = (struct pollfd){.fd = c->fd_in, .events = POLLOUT};
        p[n++] = (struct pollfd){.fd = c->fd_out, .events = POLLIN};
        p[n++] = (struct pollfd){.fd = c->fd_err, .events = POLLIN};
        p[n++] = (struct pollfd){.fd = c->fd_res, .events = POLLIN};
        p[n++] = (struct pollfd){.fd = c->sock,
                                 .events = c->req_done < c->req_size ? POLLOUT : POLLIN};
        if (c->progress_token && c->state == CALL_RUNNING && c->next_progress < until)
            until = c->next_progress;
        if (c->reaped && c->drain_until < until)
            until = c->drain_until;
    }
    for (size_t i = 0; i < MCP_SESSIONS_MAX; i++) {
        struct mcp_session *x = &s->sessions[i];
        p[n++] = (struct pollfd){.fd = x->start_out, .events = POLLIN};
        p[n++] = (struct pollfd){.fd = x->start_err, .events = POLLIN};
        p[n++] = (struct pollfd){.fd = x->stop_fd, .events = POLLIN};
        if (x->state == SESSION_STOPPING && x->stop_deadline < until)
            until = x->stop_deadline;
        if (x->state == SESSION_STARTING && x->start_reaped && x->start_drain < until)
            until = x->start_drain;
    }
    if (until != UINT64_MAX) {
        uint64_t ms = until > now ? (until - now + 999) / 1000 : 0;
        if (*timeout_ms < 0 || ms < (uint64_t)*timeout_ms)
            *timeout_ms = (int)(ms > 60000 ? 60000 : ms);
    }
    return n;
}

/* A run's end: its child reaped and its pipes at EOF (or past their drain). */
static void run_check_done(struct mcp_call *c, uint64_t now)
{
    json_t *j;

    if (!c->reaped)
        return;
    if ((c->fd_out >= 0 || c->fd_err >= 0 || c->fd_res >= 0) && now < c->drain_until)
        return;
    progress(c, now, c->progress_text.have > 0);
    remove_empty_out_dir(c);
    if (c->state == CALL_STOPPING) {
        call_free(c);
        return;
    }
    j = c->res.have ? json_loadb(c->res.data, c->res.have, JSON_ALLOW_NUL, NULL) : NULL;
    if (!json_is_object(j)) {
        json_decref(j);
        return mcp_call_fail(c, "nsbox run ended without a result (%s %d)%s%s",
                             WIFSIGNALED(c->status) ? "signal" : "exit status",
                             WIFSIGNALED(c->status) ? WTERMSIG(c->status) : WEXITSTATUS(c->status),
                             c->stderr_tail.have ? ": " : "",
                             c->stderr_tail.have ? c->stderr_tail.data : "");
    }
    mcp_call_finish(c, mcp_run_result(c, j));
    json_decref(j);
}

/* The session x's start has ended and its pipes too (or their time is up): READY, or failed. */
static void session_check_started(struct mcp_server *s, struct mcp_session *x, uint64_t now)
{
    if (x->state != SESSION_STARTING || !x->start_reaped)
        return;
    if ((x->start_out >= 0 || x->start_err >= 0) && now < x->start_drain)
        return;
    mcp_session_started(s, x, x->start_status);
}

void mcp_poll_handle(struct mcp_server *s, struct pollfd *p, size_t n)
{
    uint64_t now = now_usec();
    size_t k;

    for (size_t i = 0; i < MCP_CALLS_MAX; i++) {
        struct mcp_call *c = &s->calls[i];
        struct pollfd *q = c->polled >= 0 && (size_t)c->polled + 5 <= n ? p + c->polled : NULL;
        if (!call_active(c) || !q)
            continue;
        if (q[0].revents && c->fd_in >= 0) {
            ssize_t w = RETRY_EINTR(
                write(c->fd_in, c->in_data + c->in_done, c->in_size - c->in_done));
            if (w > 0)
                c->in_done += (size_t)w;
            if ((w < 0 && errno != EAGAIN) || c->in_done >= c->in_size)
                mcp_close_fd(&c->fd_in);
        }
        if (q[1].revents && c->fd_out >= 0)
            (void)mcp_drain(&c->fd_out, NULL, 0, c->progress_token ? &c->progress_text : NULL);
        if (q[2].revents && c->fd_err >= 0) {
            /* The payload's stderr (with --result-fd nsbox says its own failures in the
             * result): its last few KiB are kept for a run that ends without a result. */
            if (c->stderr_tail.have > STDERR_TAIL)
                c->stderr_tail.have = 0;
            (void)mcp_drain(&c->fd_err, &c->stderr_tail, STDERR_TAIL * 2,
                            c->progress_token ? &c->progress_text : NULL);
        }
        if (q[3].revents && c->fd_res >= 0)
            (void)mcp_drain(&c->fd_res, &c->res, MCP_RESULT_MAX, NULL);
        if (q[4].revents && c->sock >= 0) {
            if (c->req_done < c->req_size) {
                ssize_t w = RETRY_EINTR(
                    send(c->sock, c->req + c->req_done, c->req_size - c->req_done, MSG_NOSIGNAL));
                if (w > 0)
                    c->req_done += (size_t)w;
                else if (w < 0 && errno != EAGAIN) {
                    c->req_done = c->req_size; /* the answer (or EOF) says the rest */
                }
            } else {
                bool open = mcp_drain(&c->sock, &c->res, MCP_RESULT_MAX, NULL);
                /* The streamed lines first, also when the answer and EOF came with them. */
                bool answered = mcp_step_streamed(c);
                if (!open || answered) {
                    mcp_close_fd(&c->sock);
                    mcp_step_done(c);
                    continue;
                }
            }
        }
        if (c->pid > 0)
            run_check_done(c, now);
        if (c->state == CALL_RUNNING)
            progress(c, now, false);
    }
    /* The sessions' come after every polled call's, three each, always. */
    k = n - 3 * MCP_SESSIONS_MAX;
    for (size_t i = 0; i < MCP_SESSIONS_MAX; i++) {
        struct mcp_session *x = &s->sessions[i];
        struct pollfd *q = p + k;
        k += 3;
        if (q[0].revents && x->start_out >= 0)
            (void)mcp_drain(&x->start_out, &x->out, 4096, NULL);
        if (q[1].revents && x->start_err >= 0)
            (void)mcp_drain(&x->start_err, &x->err, 4096, NULL);
        if (q[2].revents && x->stop_fd >= 0) {
            struct mcp_buf discard = {0};
            if (!mcp_drain(&x->stop_fd, &discard, 4096, NULL))
                mcp_session_free(x);
            buf_free(&discard);
        }
        session_check_started(s, x, now);
        if (x->state == SESSION_STOPPING && now >= x->stop_deadline) {
            log_warning("mcp: the session '%s' (%s) did not end within %u s of its stop", x->name,
                        x->id, MCP_STOP_WAIT_USEC / 1000000);
            mcp_session_free(x);
        }
    }
}

void mcp_reap(struct mcp_server *s)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        uint64_t now = now_usec();
        if (pid <= 0)
            return;
        for (size_t i = 0; i < MCP_CALLS_MAX; i++) {
            struct mcp_call *c = &s->calls[i];
            if (call_active(c) && c->pid == pid) {
                c->reaped = true;
                c->status = status;
                c->drain_until = now + DRAIN_USEC;
            }
        }
        for (size_t i = 0; i < MCP_SESSIONS_MAX; i++) {
            struct mcp_session *x = &s->sessions[i];
            if (x->state == SESSION_STARTING && x->start_pid == pid && !x->start_reaped) {
                /* Its id is read once its pipes end (the supervisor's stdio is /dev/null), or
                 * at start_drain: a supervisor that has not closed them yet must not hold us. */
                x->start_reaped = true;
                x->start_status = status;
                x->start_drain = now + DRAIN_USEC;
                session_check_started(s, x, now);
            }
        }
    }
}

bool mcp_shutdown_step(struct mcp_server *s, bool force)
{
    bool done = true;
    uint64_t now = now_usec();

    for (size_t i = 0; i < MCP_CALLS_MAX; i++) {
        struct mcp_call *c = &s->calls[i];
        if (c->state == CALL_FREE)
            continue;
        if (c->pid > 0 && !c->reaped) {
            if (c->state != CALL_STOPPING || force)
                (void)kill(c->pid, force ? SIGKILL : SIGTERM);
            c->state = CALL_STOPPING;
            done = false;
            continue;
        }
        if (c->pid > 0) {
            c->state = CALL_STOPPING;
            run_check_done(c, now);
            done = done && c->state == CALL_FREE;
            continue;
        }
        c->state = CALL_STOPPING;
        call_free(c);
    }
    for (size_t i = 0; i < MCP_SESSIONS_MAX; i++) {
        struct mcp_session *x = &s->sessions[i];
        if (x->state == SESSION_FREE)
            continue;
        if (x->state == SESSION_STARTING && force && x->start_pid > 0)
            (void)kill(x->start_pid, SIGKILL);
        else
            mcp_session_stop(x);
        if (x->state != SESSION_FREE)
            done = false;
    }
    return done;
}
