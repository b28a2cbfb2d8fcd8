/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox pool start|ls|status|stop` and `nsbox run --pool NAME`: the command line of pools
 * (pool.h). */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cmd-pool.h"
#include "cmd-session.h"
#include "command.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "pool.h"
#include "registry.h"
#include "result.h"
#include "session.h"

#define EXIT_NSBOX_FAILURE 125
#define PRELOAD_MAX 32
#define RUN_TAKES 3 /* takes per run (a sandbox handed out may have died since) */

static void usage(FILE *f)
{
    fputs("Usage:\n"
          "  nsbox pool start NAME --size N [--preload MODULE,...] [--json] [RUN OPTIONS]\n"
          "      start N sandboxes ahead (RUN OPTIONS as for 'nsbox run': --rootfs, --memory,\n"
          "      -v, --network, ...; --timeout is each run's default), each with its Python\n"
          "      interpreter up and the --preload modules imported before any untrusted code;\n"
          "      print the pool's id once all are up (a preload that fails is an error here).\n"
          "      Each sandbox serves one run and is destroyed; the pool starts the next in the\n"
          "      background. The pool is in 'nsbox ps'; 'nsbox kill NAME' ends it.\n"
          "  nsbox run --pool NAME [--timeout S] [--memory SIZE] [--output-limit N] [-i]\n"
          "            [--json] [--raw-output] [--copy-in HOSTPATH:SANDBOXPATH]...\n"
          "            [--copy-out SANDBOXPATH:HOSTDIR]... (--code FILE|- [--cell] |\n"
          "            [--] PROGRAM ...)\n"
          "      run in a fresh sandbox of the pool; --memory lowers the pool's limit for this\n"
          "      run (never above it), --copy-in files land before the run starts; other run\n"
          "      options belong to the pool ('nsbox pool start') and are refused here\n"
          "  nsbox pool ls [--json]         list this user's pools\n"
          "  nsbox pool status NAME         its counts, as JSON (ready, starting, served, ...)\n"
          "  nsbox pool stop NAME           end the pool and every sandbox of it\n",
          f);
}

/* A connection to pool name's socket. Returns the fd, or -1 after one line. */
static int pool_connect(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char path[700];
    int fd, r = session_socket_path(name, path, sizeof(path));

    if (r < 0 || strlen(path) >= sizeof(sa.sun_path)) {
        log_error("no pool '%s': give the NAME of 'nsbox pool start NAME' (see 'nsbox pool ls')",
                  name);
        return -1;
    }
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = negative_errno();
        if (fd >= 0)
            (void)close(fd);
        log_error_errno(r, "pool '%s' is not running (%m; see 'nsbox pool ls')", name);
        return -1;
    }
    return fd;
}

/* Send {"op": op} and read the answer's line. Returns it parsed, or NULL (EOF first). */
static json_t *pool_ask(int fd, const char *op)
{
    char req[64], buf[4096];
    size_t have = 0;

    (void)snprintf(req, sizeof(req), "{\"op\":\"%s\"}\n", op);
    if (RETRY_EINTR(send(fd, req, strlen(req), MSG_NOSIGNAL)) != (ssize_t)strlen(req))
        return NULL;
    while (have < sizeof(buf) - 1 && !memchr(buf, '\n', have)) {
        ssize_t n = RETRY_EINTR(read(fd, buf + have, sizeof(buf) - 1 - have));
        if (n <= 0)
            return NULL;
        have += (size_t)n;
    }
    return json_loadb(buf, have, 0, NULL);
}

/* Strip --size and --preload (pool start's own options) from argv, in place. */
static int take_pool_options(int *argc, char *argv[], struct pool_options *o)
{
    int out = 0;

    for (int i = 0; i < *argc; i++) {
        const char *names[] = {"--size", "--preload"};
        const char *value = NULL;
        size_t k;

        if (strcmp(argv[i], "--") == 0) {
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        for (k = 0; k < 2; k++) {
            size_t len = strlen(names[k]);
            if (strcmp(argv[i], names[k]) == 0) {
                if (i + 1 >= *argc)
                    return log_error_errno(-EINVAL, "option '%s' needs a value", names[k]);
                value = argv[++i];
                break;
            }
            if (strncmp(argv[i], names[k], len) == 0 && argv[i][len] == '=') {
                value = argv[i] + len + 1;
                break;
            }
        }
        if (!value) {
            argv[out++] = argv[i];
            continue;
        }
        if (k == 0) {
            uint64_t n;
            if (parse_count(value, POOL_SIZE_MAX, &n) < 0)
                return log_error_errno(-EINVAL,
                                       "invalid --size '%s': a number of sandboxes from 1 to %d",
                                       value, POOL_SIZE_MAX);
            o->size = (unsigned)n;
        } else
            o->preload = value;
    }
    *argc = out;
    argv[out] = NULL;
    return 0;
}

/* --preload a,b.c -> "__import__('a')\n__import__('b.c')\n": imports that bind no name in the
 * interpreter's globals (the run's code starts with none of the pool's). Module names only
 * (Python identifiers joined by dots): nothing else is run as code. */
static int preload_code(const char *list, char **ret)
{
    size_t n = 0, len = strlen(list);
    char *code = malloc(len * 2 + 64), *w = code;
    const char *s = list;

    if (!code)
        log_oom();
    while (*s) {
        size_t k = strcspn(s, ",");
        bool ok = k > 0;
        for (size_t i = 0; i < k && ok; i++) {
            char ch = s[i];
            bool start = i == 0 || s[i - 1] == '.';
            ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
                 (!start && ch >= '0' && ch <= '9') || (!start && ch == '.' && i + 1 < k);
        }
        if (!ok || ++n > PRELOAD_MAX) {
            free(code);
            return log_error_errno(-EINVAL,
                                   "invalid --preload '%s': module names (such as pandas or "
                                   "matplotlib.pyplot), at most %d, separated by commas",
                                   list, PRELOAD_MAX);
        }
        w += sprintf(w, "__import__('%.*s')\n", (int)k, s);
        s += k + (s[k] == ',');
    }
    if (n == 0)
        (void)strcpy(code, "pass\n"); /* still a first step: the interpreter is up */
    *ret = code;
    return 0;
}

static int start_main(int argc, char *argv[])
{
    static struct pool_options o = {.size = 0, .preload = ""};
    static struct nsbox_config pc, mc;
    const struct nsbox_config *parsed;
    char *code = NULL, label_pool[300], label_member[300];
    char **pool_labels, **member_labels;
    size_t n = 0;
    int nargc;
    _cleanup_free_ char **args = NULL;

    if (argc < 2 || argv[1][0] == '-') {
        log_error("usage: nsbox pool start NAME --size N [--preload MODULE,...] [RUN OPTIONS]");
        return EXIT_NSBOX_FAILURE;
    }
    o.name = argv[1];
    if (strlen(o.name) > NSBOX_NAME_MAX || strchr(o.name, '/') || strchr(o.name, '=') ||
        o.name[0] == '.') {
        log_error("invalid pool name '%s': at most %d characters, no '/' or '=', not "
                  "starting with '.'",
                  o.name, NSBOX_NAME_MAX);
        return EXIT_NSBOX_FAILURE;
    }
    nargc = argc - 1;
    args = calloc((size_t)argc + 1, sizeof(char *));
    if (!args)
        log_oom();
    for (int i = 1; i < argc; i++)
        args[i - 1] = argv[i];
    if (take_pool_options(&nargc, args, &o) < 0)
        return EXIT_NSBOX_FAILURE;
    if (o.size == 0) {
        log_error("'nsbox pool start' needs --size N: how many sandboxes wait ready");
        return EXIT_NSBOX_FAILURE;
    }
    if (preload_code(o.preload, &code) < 0)
        return EXIT_NSBOX_FAILURE;
    o.preload_code = code;
    if (run_options_parse(nargc, args, &parsed, &o.json, &o.member.log_path,
                          &o.member.log_code_limit) < 0)
        return EXIT_NSBOX_FAILURE;
    mc = *parsed;
    /* What a session start refuses (its steps need their own pid namespace and the session's
     * stdio), and what a single-use sandbox cannot keep: a workspace saved at its end, or a
     * name of its own (the pool has NAME). */
    if (mc.pid_host || mc.keep_fds || mc.pass_stdin || mc.n_copy_out || mc.workspace || mc.name) {
        log_error("'nsbox pool start' does not take %s",
                  mc.pid_host     ? "--pid host: each run's end kills every process in the "
                                    "sandbox's own pid namespace"
                  : mc.keep_fds   ? "--keep-fds"
                  : mc.pass_stdin ? "--stdin/-i: give it to the run ('nsbox run --pool NAME -i')"
                  : mc.n_copy_out ? "--copy-out: give it to the run ('nsbox run --pool NAME "
                                    "--copy-out SANDBOXPATH:HOSTDIR')"
                  : mc.workspace  ? "--workspace: a pool's sandboxes are single-use"
                                  : "--name: the pool's name is its NAME argument");
        return EXIT_NSBOX_FAILURE;
    }
    /* A writable bind is shared by every sandbox of the pool, one after another: what run N
     * writes there (a json.py beside the code, a .pth) is imported by later runs and by their
     * trusted preload, so no sandbox would be one "no earlier code has touched". */
    for (size_t i = 0; i < mc.n_binds; i++)
        if (mc.binds[i].writable) {
            log_error("'nsbox pool start' does not take the writable bind -v %s:%s:rw: every "
                      "run of the pool would see what earlier runs wrote there; bind it :ro, or "
                      "take files out of each run with 'nsbox run --pool NAME --copy-out'",
                      mc.binds[i].source, mc.binds[i].target);
            return EXIT_NSBOX_FAILURE;
        }
    while (mc.labels && mc.labels[n])
        n++;
    pool_labels = calloc(n + 2, sizeof(char *));
    member_labels = calloc(n + 2, sizeof(char *));
    if (!pool_labels || !member_labels)
        log_oom();
    (void)snprintf(label_pool, sizeof(label_pool), POOL_LABEL "=%s", o.name);
    (void)snprintf(label_member, sizeof(label_member), POOL_MEMBER_LABEL "=%s", o.name);
    for (size_t i = 0; i < n; i++)
        pool_labels[i] = member_labels[i] = mc.labels[i];
    pool_labels[n] = label_pool;
    member_labels[n] = label_member;
    pc = mc;
    pc.name = o.name;
    pc.labels = pool_labels;
    pc.argv = (char *const[]){"(pool)", NULL};
    mc.labels = member_labels;
    mc.argv = (char *const[]){"(pool member)", NULL};
    /* Each member: its preload and one step (session.c ends it then), no idle limit. */
    o.member.max_steps = 2;
    return pool_start(&pc, &mc, &o, argc + 1, argv - 1);
}

static int ls_main(int argc, char *argv[])
{
    char *filter[] = {(char *)"label=" POOL_LABEL};
    bool json = argc == 2 && strcmp(argv[1], "--json") == 0;

    if (argc > 2 || (argc == 2 && !json)) {
        log_error("usage: nsbox pool ls [--json]");
        return EXIT_NSBOX_FAILURE;
    }
    return registry_ps(json, filter, 1);
}

static int status_main(int argc, char *argv[])
{
    _cleanup_close_ int fd = -EBADF;
    json_t *ans;
    char *text;

    if (argc != 2) {
        log_error("usage: nsbox pool status NAME");
        return EXIT_NSBOX_FAILURE;
    }
    fd = pool_connect(argv[1]);
    if (fd < 0)
        return EXIT_NSBOX_FAILURE;
    ans = pool_ask(fd, "status");
    text = ans ? json_dumps(ans, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(ans);
    if (!text) {
        log_error("pool '%s' sent no status (it is ending)", argv[1]);
        return EXIT_NSBOX_FAILURE;
    }
    (void)printf("%s\n", text);
    free(text);
    return fflush(stdout) == 0 ? 0 : EXIT_NSBOX_FAILURE;
}

static int stop_main(int argc, char *argv[])
{
    _cleanup_close_ int fd = -EBADF;
    char buf[256];

    if (argc != 2) {
        log_error("usage: nsbox pool stop NAME");
        return EXIT_NSBOX_FAILURE;
    }
    (void)signal(SIGPIPE, SIG_IGN);
    fd = pool_connect(argv[1]);
    if (fd < 0)
        return EXIT_NSBOX_FAILURE;
    if (RETRY_EINTR(send(fd, "{\"op\":\"stop\"}\n", 14, MSG_NOSIGNAL)) != 14) {
        log_error("pool '%s' did not take the stop", argv[1]);
        return EXIT_NSBOX_FAILURE;
    }
    /* EOF once the pool and all its sandboxes are gone. */
    while (RETRY_EINTR(read(fd, buf, sizeof(buf))) > 0)
        ;
    return 0;
}

static const struct command pool_commands[] = {
    {.name = "start", .main = start_main},
    {.name = "ls", .main = ls_main},
    {.name = "status", .main = status_main},
    {.name = "stop", .main = stop_main},
    {},
};

int pool_main(int argc, char *argv[])
{
    const struct command *c;

    if (argc < 2) {
        log_error("pool: give a command: start, ls, status or stop (see 'nsbox pool --help')");
        return EXIT_NSBOX_FAILURE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    c = command_find(pool_commands, argv[1]);
    if (c)
        return c->main(argc - 1, argv + 1);
    log_error("unknown pool command '%s' (see 'nsbox pool --help')", argv[1]);
    return EXIT_NSBOX_FAILURE;
}

/* ---- nsbox run --pool --------------------------------------------------------------------- */

const char *run_pool_name(int argc, char *argv[])
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--pool") == 0)
            return i + 1 < argc ? argv[i + 1] : "";
        if (strncmp(argv[i], "--pool=", 7) == 0)
            return argv[i] + 7;
    }
    return NULL;
}

/* The run options a sandbox already up can honour: they go with the step. */
static bool per_run_option(const char *arg, bool *takes_value)
{
    static const char *const with_value[] = {"--pool",
                                             "--timeout",
                                             "--output-limit",
                                             "--code",
                                             "--copy-out",
                                             "--copy-out-max-bytes",
                                             "--copy-out-max-files",
                                             "--memory",
                                             "-m",
                                             "--copy-in"};
    static const char *const flags[] = {"--json",  "--raw-output",  "-i",
                                        "--stdin", "--interactive", "--cell"};

    for (size_t i = 0; i < ELEMENTSOF(with_value); i++) {
        size_t len = strlen(with_value[i]);
        if (strcmp(arg, with_value[i]) == 0) {
            *takes_value = true;
            return true;
        }
        if (strncmp(arg, with_value[i], len) == 0 && arg[len] == '=') {
            *takes_value = false;
            return true;
        }
    }
    for (size_t i = 0; i < ELEMENTSOF(flags); i++)
        if (strcmp(arg, flags[i]) == 0) {
            *takes_value = false;
            return true;
        }
    return false;
}

/* nsbox's own failure before the step: one line on stderr and, with --json, the JSON result
 * `nsbox run --json` prints for its own failures (status "error", exit_code 125, the step). */
static int run_pool_fail(bool json, const char *step, const char *fmt, ...) _printf_(3, 4);
static int run_pool_fail(bool json, const char *step, const char *fmt, ...)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_ERROR, .exit_code = EXIT_NSBOX_FAILURE};
    char *text;
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(r.error, sizeof(r.error), fmt, ap);
    va_end(ap);
    /* Said once: a message log_last_error() holds was said on stderr already. */
    if (strcmp(r.error, log_last_error()) != 0)
        log_error("%s", r.error);
    if (json) {
        (void)snprintf(r.error_step, sizeof(r.error_step), "%s", step);
        text = nsbox_result_to_json(&r);
        if (text)
            (void)printf("%s\n", text);
        free(text);
    }
    return EXIT_NSBOX_FAILURE;
}

/* Whether a unix socket at path takes connections (the probe connection is closed at once:
 * the session drops a client that hung up before its request). */
static bool socket_alive(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    _cleanup_close_ int fd = -EBADF;

    if (!path || strlen(path) >= sizeof(sa.sun_path))
        return false;
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    return fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

int run_pool_main(int argc, char *argv[])
{
    const char *name = run_pool_name(argc, argv);
    _cleanup_close_ int lease = -EBADF;
    _cleanup_free_ char **args = calloc((size_t)argc + 4, sizeof(char *));
    const char *id;
    json_t *ans;
    int n = 0, i, status;
    bool json = false, cell = false, code = false;

    if (!args)
        log_oom();
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        json |= strcmp(argv[i], "--json") == 0;
    if (!name || !name[0] || name[0] == '-')
        return run_pool_fail(json, "arguments",
                             "--pool needs the NAME of a pool ('nsbox pool start NAME ...')");
    /* `session exec MEMBER` with the run's per-run options; every other option would need
     * another sandbox (its rootfs, mounts, network, limits are the pool's): refused. */
    args[n++] = (char *)"session";
    args[n++] = (char *)"exec";
    args[n++] = NULL; /* the member's id, below */
    for (i = 1; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0; i++) {
        bool takes_value;
        if (!per_run_option(argv[i], &takes_value))
            return run_pool_fail(json, "arguments",
                                 "'nsbox run --pool' does not take %s: it would need another "
                                 "sandbox than the pool's (give it to 'nsbox pool start'); a pool "
                                 "run takes --timeout, --memory (at most the pool's), "
                                 "--output-limit, -i, --copy-in, --copy-out, --code, --cell, "
                                 "--json and --raw-output",
                                 argv[i]);
        if (strcmp(argv[i], "--pool") == 0 || strncmp(argv[i], "--pool=", 7) == 0) {
            i += takes_value;
            continue;
        }
        code |= strcmp(argv[i], "--code") == 0 || strncmp(argv[i], "--code=", 7) == 0;
        /* A pool's code step is a notebook cell already (its outputs in the result). */
        if (strcmp(argv[i], "--cell") == 0) {
            cell = true;
            continue;
        }
        args[n++] = argv[i];
        if (takes_value && i + 1 < argc)
            args[n++] = argv[++i];
    }
    for (; i < argc; i++)
        args[n++] = argv[i];
    if (cell && !code)
        return run_pool_fail(json, "arguments",
                             "--cell runs Python code as a notebook cell: give it with --code "
                             "FILE (or --code - for stdin)");

    (void)signal(SIGPIPE, SIG_IGN);
    for (int attempt = 0;; attempt++) {
        lease = pool_connect(name);
        if (lease < 0)
            return run_pool_fail(json, "pool", "%s", log_last_error());
        ans = pool_ask(lease, "take");
        if (!ans || !json_is_string(json_object_get(ans, "id"))) {
            status = run_pool_fail(json, "pool", "pool '%s' gave no sandbox: %s", name,
                                   json_string_value(json_object_get(ans, "error"))
                                       ?: "it ended (stopped or killed)");
            json_decref(ans);
            return status;
        }
        /* A sandbox killed from outside after its hand-out has run nothing: another is
         * taken (its socket is gone or refuses). */
        if (attempt + 1 >= RUN_TAKES ||
            socket_alive(json_string_value(json_object_get(ans, "socket"))))
            break;
        json_decref(ans);
        (void)close(lease);
        lease = -EBADF;
    }
    id = json_string_value(json_object_get(ans, "id"));
    args[2] = (char *)id;
    /* The lease (this connection) is held until the step's answer is in: then the member ends,
     * whatever happened to this process. */
    status = session_main(n, args);
    json_decref(ans);
    return status;
}
