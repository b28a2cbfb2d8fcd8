/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `nsbox mcp`'s sessions (mcp-internal.h): python_session and the file tools. A session is
 * `nsbox session start --json [the operator's options] --watch-pid SERVER` (so that it ends
 * with the server, however the server ends), started when a call first names it; each call is
 * a step, one connection to the session's socket with session-client.c's request line
 * ({"interrupt_on_hangup": true}: a cancelled call hangs up, which interrupts the step and
 * keeps the session). The file tools run as program steps (python3 -c), never in the session's
 * interpreter, so the code's variables stay as they were.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "mcp-internal.h"

#define FILE_STEP_TIMEOUT 30.0
#define FILE_OUTPUT_LIMIT (8U << 20)
#define WRITE_MAX (8U << 20)

/* ---- sessions ---------------------------------------------------------------------------- */

static struct mcp_session *session_find(struct mcp_server *s, const char *name)
{
    for (size_t i = 0; i < MCP_SESSIONS_MAX; i++) {
        struct mcp_session *x = &s->sessions[i];
        if ((x->state == SESSION_STARTING || x->state == SESSION_READY) &&
            strcmp(x->name, name) == 0)
            return x;
    }
    return NULL;
}

void mcp_session_free(struct mcp_session *x)
{
    mcp_close_fd(&x->start_out);
    mcp_close_fd(&x->start_err);
    mcp_close_fd(&x->stop_fd);
    buf_free(&x->out);
    buf_free(&x->err);
    *x = (struct mcp_session){.start_out = -1, .start_err = -1, .stop_fd = -1};
}

static int session_connect(const struct mcp_session *x)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(x->sock) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, x->sock);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return negative_errno();
    /* A unix stream socket connects at once or not at all (ECONNREFUSED, ENOENT: the session
     * is gone; EAGAIN: its backlog is full). */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int r = negative_errno();
        (void)close(fd);
        return r;
    }
    (void)fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* Ask the session to end; the server waits for its socket to close (SESSION_STOPPING). */
void mcp_session_stop(struct mcp_session *x)
{
    static const char stop[] = "{\"op\":\"stop\"}\n";
    int fd;

    if (x->state == SESSION_STARTING) {
        /* `session start` killed before it printed the id: the session ends by itself. */
        if (x->start_pid > 0)
            (void)kill(x->start_pid, SIGTERM);
        return;
    }
    if (x->state != SESSION_READY)
        return;
    fd = session_connect(x);
    if (fd < 0 || RETRY_EINTR(send(fd, stop, sizeof(stop) - 1, MSG_NOSIGNAL)) < 0) {
        if (fd >= 0)
            (void)close(fd);
        mcp_session_free(x); /* gone already */
        return;
    }
    x->stop_fd = fd;
    x->stop_deadline = now_usec() + MCP_STOP_WAIT_USEC;
    x->state = SESSION_STOPPING;
}

static struct mcp_session *session_start(struct mcp_server *s, const char *name, const char **why)
{
    struct mcp_session *x = NULL;
    struct args a = {0};
    char label[100], pid[32];
    pid_t p;

    for (size_t i = 0; i < MCP_SESSIONS_MAX && !x; i++)
        if (s->sessions[i].state == SESSION_FREE)
            x = &s->sessions[i];
    if (!x)
        return *why = "this connection has " STRINGIFY(MCP_SESSIONS_MAX) " sessions already: "
                                                                         "close one (close: "
                                                                         "true) first",
               NULL;
    mcp_args_start(&a, s, (const char *const[]){"session", "start", "--json", NULL});
    (void)snprintf(label, sizeof(label), "mcp.session=%s", name);
    mcp_args_add(&a, "--label");
    mcp_args_add(&a, label);
    (void)snprintf(label, sizeof(label), "mcp.server=%d", (int)getpid());
    mcp_args_add(&a, "--label");
    mcp_args_add(&a, label);
    /* SIGKILL of the server must not leave its sessions behind (a session is detached from
     * `session start`, so no PR_SET_PDEATHSIG reaches it): the supervisor ends with us. */
    (void)snprintf(pid, sizeof(pid), "%d", (int)getpid());
    mcp_args_add(&a, "--watch-pid");
    mcp_args_add(&a, pid);
    p = mcp_spawn(a.v, NULL, &x->start_out, &x->start_err, NULL);
    mcp_args_free(&a);
    if (p < 0)
        return *why = "the server cannot start nsbox session start", NULL;
    x->start_pid = p;
    (void)snprintf(x->name, sizeof(x->name), "%s", name);
    x->state = SESSION_STARTING;
    return x;
}

/* The session's start ended: READY with its id and socket, or failed (its calls get why). */
void mcp_session_started(struct mcp_server *s, struct mcp_session *x, int status)
{
    json_t *j = x->out.data ? json_loads(x->out.data, 0, NULL) : NULL;
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *sock = json_string_value(json_object_get(j, "socket"));

    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && id && sock && strlen(id) == 32) {
        (void)snprintf(x->id, sizeof(x->id), "%s", id);
        (void)snprintf(x->sock, sizeof(x->sock), "%s", sock);
        x->state = SESSION_READY;
    }
    json_decref(j);
    for (size_t i = 0; i < MCP_CALLS_MAX; i++) {
        struct mcp_call *c = &s->calls[i];
        if (c->state != CALL_WAIT_SESSION || c->session != x)
            continue;
        if (x->state == SESSION_READY)
            mcp_step_start(s, c);
        else
            mcp_call_fail(c, "the session '%s' could not start: %s", x->name,
                          x->err.data && x->err.data[0] ? x->err.data
                                                        : "nsbox session start failed");
    }
    if (x->state != SESSION_READY)
        mcp_session_free(x);
    else {
        mcp_close_fd(&x->start_out);
        mcp_close_fd(&x->start_err);
        x->start_pid = 0;
    }
}

/* ---- session steps ----------------------------------------------------------------------- */

/* The file tools run as program steps in the session (python3 -c), never in its interpreter:
 * the code's variables stay as they are. Each prints one JSON object. */
static const char list_script[] =
    "import json,os,stat,sys\n"
    "def main(arg):\n"
    "    p=os.path.normpath(os.path.join('/work',arg))\n"
    "    if p!='/work' and not p.startswith('/work/'):\n"
    "        return {'path':p,'entries':[],'error':'the path must be inside /work'}\n"
    "    if not os.path.isdir(p):\n"
    "        return {'path':p,'entries':[],'error':'not a directory'}\n"
    "    out=[];cut=False;top=p.count('/')\n"
    "    for root,dirs,files in os.walk(p):\n"
    "        dirs.sort()\n"
    "        for n in dirs+sorted(files):\n"
    "            f=os.path.join(root,n)\n"
    "            try: st=os.lstat(f)\n"
    "            except OSError: continue\n"
    "            m=st.st_mode\n"
    "            t=('directory' if stat.S_ISDIR(m) else 'file' if stat.S_ISREG(m) else\n"
    "               'symlink' if stat.S_ISLNK(m) else 'other')\n"
    "            if len(out)>=1000: cut=True; break\n"
    "            out.append({'path':os.path.relpath(f,'/work'),'type':t,'size':st.st_size})\n"
    "        if cut: break\n"
    "        if root.count('/')-top>=3: dirs[:]=[]\n"
    "    return {'path':p,'entries':out,'truncated':cut,'error':None}\n"
    "r=main(sys.argv[1]);print(json.dumps(r));sys.exit(1 if r['error'] else 0)\n";

static const char read_script[] =
    "import base64,json,os,sys\n"
    "def main(arg,mx):\n"
    "    p=os.path.normpath(os.path.join('/work',arg))\n"
    "    if p!='/work' and not p.startswith('/work/'):\n"
    "        return {'path':p,'error':'the path must be inside /work'}\n"
    "    try:\n"
    "        with open(p,'rb') as f:\n"
    "            size=os.fstat(f.fileno()).st_size;data=f.read(mx+1)\n"
    "    except OSError as e:\n"
    "        return {'path':p,'error':e.strerror}\n"
    "    cut=len(data)>mx;data=data[:mx]\n"
    "    for k in range(4 if cut else 1):\n"
    "        try: t=data[:len(data)-k].decode('utf-8')\n"
    "        except UnicodeDecodeError: continue\n"
    "        if '\\0' not in t:\n"
    "            return {'path':p,'size':size,'encoding':'utf-8','content':t,\n"
    "                    'truncated':cut or k>0,'error':None}\n"
    "        break\n"
    "    return {'path':p,'size':size,'encoding':'base64','content':base64.b64encode(data)\n"
    "            .decode(),'truncated':cut,'error':None}\n"
    "r=main(sys.argv[1],int(sys.argv[2]));print(json.dumps(r));sys.exit(1 if r['error'] else 0)\n";

static const char write_script[] =
    "import base64,binascii,json,os,sys\n"
    "def main(arg,enc):\n"
    "    p=os.path.normpath(os.path.join('/work',arg))\n"
    "    if not p.startswith('/work/'):\n"
    "        return {'path':p,'error':'the path must be a file inside /work'}\n"
    "    data=sys.stdin.buffer.read()\n"
    "    try:\n"
    "        if enc=='base64': data=base64.b64decode(data,validate=True)\n"
    "        os.makedirs(os.path.dirname(p),exist_ok=True)\n"
    "        with open(p,'wb') as f: f.write(data)\n"
    "    except (OSError,binascii.Error) as e:\n"
    "        return {'path':p,'error':getattr(e,'strerror',None) or str(e)}\n"
    "    return {'path':p,'size':len(data),'error':None}\n"
    "r=main(sys.argv[1],sys.argv[2]);print(json.dumps(r));sys.exit(1 if r['error'] else 0)\n";

/* The step's request line (and its stdin bytes) for the session's socket. */
static void step_request(struct mcp_call *c)
{
    json_t *req, *a = c->args;
    const char *path = json_string_value(json_object_get(a, "path"));
    const char *data = NULL;
    size_t data_size = 0;
    char *text;

    if (c->tool == TOOL_PYTHON_SESSION)
        req = json_pack("{s:s,s:O}", "op", "code", "code", json_object_get(a, "code"));
    else {
        char num[32];
        json_t *argv = json_pack("[s,s,s,s]", "python3", "-c",
                                 c->tool == TOOL_LIST_FILES  ? list_script
                                 : c->tool == TOOL_READ_FILE ? read_script
                                                             : write_script,
                                 path ? path : ".");
        if (c->tool == TOOL_READ_FILE) {
            json_t *m = json_object_get(a, "max_bytes");
            (void)snprintf(num, sizeof(num), "%lld",
                           m ? (long long)json_integer_value(m) : (long long)(1 << 20));
            (void)json_array_append_new(argv, json_string(num));
        } else if (c->tool == TOOL_WRITE_FILE) {
            const char *enc = json_string_value(json_object_get(a, "encoding"));
            (void)json_array_append_new(argv, json_string(enc ? enc : "utf-8"));
            data = json_string_value(json_object_get(a, "content"));
            data_size = json_string_length(json_object_get(a, "content"));
        }
        req = json_pack("{s:s,s:o,s:i}", "op", "exec", "argv", argv, "output_limit",
                        (int)FILE_OUTPUT_LIMIT);
        if (data)
            (void)json_object_set_new(req, "stdin_bytes", json_integer((json_int_t)data_size));
    }
    if (!req)
        log_oom();
    if (c->timeout > 0)
        (void)json_object_set_new(req, "timeout", json_real(c->timeout));
    /* Its output as it comes, for the progress notifications the client asked for. */
    if (c->progress_token)
        (void)json_object_set_new(req, "stream", json_true());
    /* A cancelled call hangs up: the session then interrupts the step and goes on. */
    (void)json_object_set_new(req, "interrupt_on_hangup", json_true());
    text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!text)
        log_oom();
    c->req_size = strlen(text) + 1 + data_size;
    c->req = realloc(text, c->req_size + 1);
    if (!c->req)
        log_oom();
    c->req[strlen(c->req)] = '\n';
    if (data_size)
        memcpy(c->req + c->req_size - data_size, data, data_size);
    c->req_done = 0;
}

/* Whether c's session slot still holds the session its step went to. */
static bool session_is(const struct mcp_call *c)
{
    return c->session && c->session->state == SESSION_READY &&
           strcmp(c->session->id, c->session_id) == 0;
}

bool mcp_step_streamed(struct mcp_call *c)
{
    static const char prefix[] = "{\"stream\":";

    for (;;) {
        char *nl = c->res.have ? memchr(c->res.data, '\n', c->res.have) : NULL;
        size_t len;
        json_t *j, *data;

        if (!nl)
            return false;
        len = (size_t)(nl - c->res.data) + 1;
        if (len < sizeof(prefix) || memcmp(c->res.data, prefix, sizeof(prefix) - 1) != 0)
            return true; /* the answer */
        j = json_loadb(c->res.data, len, JSON_ALLOW_NUL, NULL);
        data = json_object_get(j, "data");
        if (json_is_string(data))
            (void)buf_append(&c->progress_text, json_string_value(data), json_string_length(data),
                             MCP_PROGRESS_TEXT_MAX);
        json_decref(j);
        memmove(c->res.data, c->res.data + len, c->res.have - len);
        c->res.have -= len;
        c->res.data[c->res.have] = '\0';
    }
}

void mcp_step_start(struct mcp_server *s, struct mcp_call *c)
{
    struct mcp_session *x = c->session;
    int fd = session_connect(x);

    (void)s;
    if (fd < 0) {
        const char *name = x->name;
        char text[300];
        (void)snprintf(text, sizeof(text),
                       "the session '%s' is gone (%s: it was stopped, killed, or reached a "
                       "limit); the next python_session call starts a new one (its variables "
                       "and files are lost)",
                       name, strerror(-fd));
        mcp_session_free(x);
        return mcp_call_finish(c, mcp_error_result(c, text));
    }
    c->sock = fd;
    (void)snprintf(c->session_id, sizeof(c->session_id), "%s", x->id);
    step_request(c);
    c->state = CALL_RUNNING;
}

/* The answer's line is in: the call's result. */
void mcp_step_done(struct mcp_call *c)
{
    json_t *j = json_loadb(c->res.data ? c->res.data : "", c->res.have, JSON_ALLOW_NUL, NULL);

    if (!json_is_object(j)) {
        json_decref(j);
        if (c->res.have == 0 && session_is(c))
            mcp_session_free(c->session);
        return mcp_call_fail(c, "the session ended without an answer to the step (it was stopped, "
                                "killed, or its sandbox died); the next python_session call starts "
                                "a new one");
    }
    if (json_is_string(json_object_get(j, "error")) && !json_object_get(j, "status")) {
        char text[1200];
        (void)snprintf(text, sizeof(text), "the session refused the step: %s",
                       json_string_value(json_object_get(j, "error")));
        json_decref(j);
        return mcp_call_fail(c, "%s", text);
    }
    if (c->tool == TOOL_PYTHON_SESSION) {
        json_t *r = mcp_run_result(c, j);
        if (c->session_close && session_is(c))
            mcp_session_stop(c->session);
        json_decref(j);
        return mcp_call_finish(c, r);
    }
    mcp_call_finish(c, mcp_file_result(c, j));
    json_decref(j);
}

/* python_session and the file tools: find or start the session, then the step. */
void mcp_session_call(struct mcp_server *s, struct mcp_call *c)
{
    json_t *a = c->args, *name_j = json_object_get(a, "session"),
           *code = json_object_get(a, "code");
    const char *name = name_j ? json_string_value(name_j) : "default", *why = NULL;
    bool reset = json_is_true(json_object_get(a, "reset"));
    bool close = json_is_true(json_object_get(a, "close"));
    static const char name_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789_.-";
    struct mcp_session *x;

    if (!name || !name[0] || strlen(name) > 64 || strspn(name, name_chars) != strlen(name) ||
        name[0] == '.' || name[0] == '-' || name[0] == '_')
        return mcp_call_fail(c, "invalid arguments: \"session\" must be a name of 1 to 64 letters, "
                                "digits, '_', '.' or '-', starting with a letter or digit");
    if (mcp_call_timeout(s, c) < 0)
        return mcp_call_fail(c,
                             "invalid arguments: \"timeout\" must be a number of seconds above 0");
    x = session_find(s, name);
    if (c->tool == TOOL_PYTHON_SESSION) {
        if ((json_object_get(a, "reset") && !json_is_boolean(json_object_get(a, "reset"))) ||
            (json_object_get(a, "close") && !json_is_boolean(json_object_get(a, "close"))))
            return mcp_call_fail(c, "invalid arguments: \"reset\" and \"close\" are true or false");
        if (code && !json_is_string(code))
            return mcp_call_fail(c, "invalid arguments: \"code\" must be a string of Python");
        if (code && json_string_length(code) > (15U << 20))
            return mcp_call_fail(c, "invalid arguments: \"code\" is longer than 15 MiB");
        if (!code && !reset && !close)
            return mcp_call_fail(c, "invalid arguments: give \"code\" to run, or \"reset\" or "
                                    "\"close\"");
        bool existed = x != NULL;
        if (reset && x) {
            if (x->state == SESSION_STARTING)
                return mcp_call_fail(c,
                                     "the session '%s' is still starting: reset it once it is up",
                                     name);
            mcp_session_stop(x);
            x = NULL;
        }
        if (!code) {
            char text[300];
            if (close && x)
                mcp_session_stop(x);
            (void)snprintf(text, sizeof(text),
                           close ? (existed ? "the session '%s' was closed"
                                            : "there was no session '%s'")
                                 : "the session '%s' was reset: the next call starts it afresh",
                           name);
            return mcp_call_finish(c, mcp_note_result(c, close ? "closed" : "reset", text, name));
        }
        c->session_close = close;
    } else {
        json_t *path = json_object_get(a, "path");
        if (path ? !json_is_string(path) || json_string_length(path) > 4096 ||
                       memchr(json_string_value(path), '\0', json_string_length(path))
                 : c->tool != TOOL_LIST_FILES)
            return mcp_call_fail(c, "invalid arguments: \"path\" must be a path under /work");
        if (c->tool == TOOL_READ_FILE && json_object_get(a, "max_bytes")) {
            json_t *m = json_object_get(a, "max_bytes");
            if (!json_is_integer(m) || json_integer_value(m) < 1 ||
                json_integer_value(m) > (1 << 20))
                return mcp_call_fail(c, "invalid arguments: \"max_bytes\" must be 1 to 1048576");
        }
        if (c->tool == TOOL_WRITE_FILE) {
            json_t *content = json_object_get(a, "content"), *enc = json_object_get(a, "encoding");
            if (!json_is_string(content) || json_string_length(content) > WRITE_MAX * 2)
                return mcp_call_fail(c, "invalid arguments: \"content\" must be a string of at "
                                        "most 8 MiB");
            if (enc && (!json_is_string(enc) || (strcmp(json_string_value(enc), "utf-8") != 0 &&
                                                 strcmp(json_string_value(enc), "base64") != 0)))
                return mcp_call_fail(c, "invalid arguments: \"encoding\" is utf-8 or base64");
        }
        if (!x && c->tool != TOOL_WRITE_FILE)
            return mcp_call_fail(c,
                                 "there is no session '%s': run python_session (or "
                                 "session_write_file) first",
                                 name);
        /* The file steps have their own bound: 30 s, at most the server's. */
        if (!c->timeout || c->timeout > FILE_STEP_TIMEOUT)
            c->timeout = FILE_STEP_TIMEOUT;
        c->clamp_note[0] = '\0';
    }
    if (!x) {
        x = session_start(s, name, &why);
        if (!x)
            return mcp_call_fail(c, "%s", why);
    }
    c->session = x;
    (void)snprintf(c->session_name, sizeof(c->session_name), "%s", name);
    if (x->state == SESSION_STARTING)
        c->state = CALL_WAIT_SESSION;
    else
        mcp_step_start(s, c);
}
