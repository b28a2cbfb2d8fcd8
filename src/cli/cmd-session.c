/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox session start|exec|stop|ls`: the command line of sessions (session.h). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cmd-session.h"
#include "command.h"
#include "copy.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "registry.h"
#include "result.h"
#include "session.h"
#include "step-in.h"
#include "termsafe.h"

#define EXIT_NSBOX_FAILURE 125
#define CODE_MAX (16U << 20)
/* A step's stdin: with its request, within the 16 MiB the session takes (REQUEST_MAX). */
#define STDIN_MAX (15U << 20)
#define SESSION_LABEL "nsbox.session"

static void usage(FILE *f)
{
    fputs("Usage:\n"
          "  nsbox session start [RUN OPTIONS] [--idle-timeout S] [--lifetime S] [--json]\n"
          "      start a sandbox that stays up for many steps; print its id (--json: its id and\n"
          "      socket). RUN OPTIONS are those of 'nsbox run' (--memory, --tmpfs, -v, --name,\n"
          "      ...); --timeout is each step's default. --idle-timeout: end it after S\n"
          "      seconds without a step; --lifetime: end it S seconds after its start.\n"
          "      --watch-pid PID: end it when process PID ends (nsbox mcp's sessions end with\n"
          "      the server, however it ends).\n"
          "      --workspace NAME: its files in /work from the start, saved back when the\n"
          "      session ends between steps (stop, idle, lifetime), not when it is killed.\n"
          "  nsbox session exec ID|NAME [--timeout S] [--output-limit N] [--json]\n"
          "                     [--raw-output] [-i] [--copy-out SANDBOXPATH:HOSTDIR]...\n"
          "                     [--copy-out-max-bytes SIZE] [--copy-out-max-files N]\n"
          "                     [--memory SIZE] [--copy-in HOSTPATH:SANDBOXPATH]...\n"
          "                     (--code FILE|- | [--] PROGRAM [ARGS...])\n"
          "      run one step in the session: a program, or Python code in the session's\n"
          "      interpreter, whose variables, imports and open files live on between steps.\n"
          "      Everything the step started is killed when it ends. Exit status as for\n"
          "      'nsbox run'; --json prints the result; on a terminal the output's control\n"
          "      characters are shown escaped, as by 'nsbox run' (--raw-output: not).\n"
          "      -i, --stdin: the step reads nsbox's stdin (read whole first, up to 15 MiB);\n"
          "      without it, /dev/null. --copy-out: copy SANDBOXPATH into HOSTDIR when the\n"
          "      step has ended by itself, as 'nsbox run --copy-out' does. --copy-in: copy a\n"
          "      host file or directory in before the step, as 'nsbox run --copy-in' does.\n"
          "      --memory: a lower memory limit for this step only (never above the\n"
          "      session's); a code step under rlimits then ends the interpreter after it.\n"
          "  nsbox session stop [--json] ID|NAME\n"
          "      end the session and wait until its sandbox is gone (and its --workspace\n"
          "      saved, when it ends between steps); --json: how it ended, whether it was saved\n"
          "  nsbox session ls [--json]\n"
          "      list this user's sessions (they are in 'nsbox ps' too, and 'nsbox kill' ends\n"
          "      them)\n",
          f);
}

/* Strip --idle-timeout and --lifetime (session start's own options) from argv, in place. */
static int take_session_options(int *argc, char *argv[], struct session_options *o)
{
    int out = 0;

    for (int i = 0; i < *argc; i++) {
        const char *names[] = {"--idle-timeout", "--lifetime"};
        const char *pid = NULL;
        uint64_t *dst[] = {&o->idle_timeout, &o->lifetime};
        bool taken = false;

        if (strcmp(argv[i], "--") == 0) {
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        if (strcmp(argv[i], "--watch-pid") == 0 && i + 1 < *argc)
            pid = argv[++i];
        else if (strncmp(argv[i], "--watch-pid=", 12) == 0)
            pid = argv[i] + 12;
        if (pid || strcmp(argv[i], "--watch-pid") == 0) {
            uint64_t v;
            if (!pid || parse_count(pid, INT_MAX, &v) < 0 || v == 0)
                return log_error_errno(-EINVAL, "--watch-pid needs a process id");
            o->watch_pid = (pid_t)v;
            continue;
        }
        for (size_t k = 0; k < 2 && !taken; k++) {
            size_t len = strlen(names[k]);
            const char *value = NULL;
            if (strcmp(argv[i], names[k]) == 0) {
                if (i + 1 >= *argc)
                    return log_error_errno(-EINVAL, "option '%s' needs a value", names[k]);
                value = argv[++i];
            } else if (strncmp(argv[i], names[k], len) == 0 && argv[i][len] == '=')
                value = argv[i] + len + 1;
            else
                continue;
            if (parse_duration(value, dst[k]) < 0 || *dst[k] == 0)
                return log_error_errno(-EINVAL,
                                       "invalid %s '%s': a positive duration in "
                                       "seconds (or with ms, s, m, h)",
                                       names[k], value);
            taken = true;
        }
        if (!taken)
            argv[out++] = argv[i];
    }
    *argc = out;
    argv[out] = NULL;
    return 0;
}

static int start_main(int argc, char *argv[])
{
    struct session_options o = {0};
    const struct nsbox_config *parsed;
    struct nsbox_config c;
    _cleanup_free_ char **labels = NULL;
    size_t n = 0;
    int r, nargc = argc;
    _cleanup_free_ char **args = calloc((size_t)argc + 1, sizeof(char *));

    if (!args)
        log_oom();
    for (int i = 0; i < argc; i++)
        args[i] = argv[i];
    if (take_session_options(&nargc, args, &o) < 0)
        return EXIT_NSBOX_FAILURE;
    r = run_options_parse(nargc, args, &parsed, &o.json, &o.log_path, &o.log_code_limit);
    if (r < 0)
        return EXIT_NSBOX_FAILURE;
    c = *parsed;
    /* A step's end kills every other process in the sandbox's pid namespace: without one of its
     * own that would be the host's. Steps get their stdio from the session, not nsbox's. */
    if (c.pid_host || c.keep_fds || c.pass_stdin) {
        log_error("'nsbox session start' does not take %s: %s",
                  c.pid_host   ? "--pid host"
                  : c.keep_fds ? "--keep-fds"
                               : "--stdin/-i",
                  c.pid_host ? "the end of each step kills every process in the sandbox's own "
                               "pid namespace"
                             : "steps get /dev/null and pipes of the session for stdio");
        return EXIT_NSBOX_FAILURE;
    }
    /* --copy-out is a step's (session exec --copy-out). --workspace is the session's: in /work
     * from its start, saved when it ends between steps (session.c). */
    if (c.n_copy_out) {
        log_error("'nsbox session start' does not take --copy-out: give it to a step, 'nsbox "
                  "session exec ID --copy-out SANDBOXPATH:HOSTDIR ...'");
        return EXIT_NSBOX_FAILURE;
    }
    /* /work is the run's writable working directory (--workdir-size), kept between steps. */
    /* Marked for `nsbox session ls` (a label, so `nsbox ps --filter label=nsbox.session` too). */
    while (c.labels && c.labels[n])
        n++;
    labels = calloc(n + 2, sizeof(char *));
    if (!labels)
        log_oom();
    for (size_t i = 0; i < n; i++)
        labels[i] = c.labels[i];
    labels[n] = (char *)SESSION_LABEL "=1";
    c.labels = labels;
    /* What `nsbox ps` shows as the command (the parser's stand-in program is none). */
    c.argv = (char *const[]){"(session)", NULL};
    /* The argv the registry shows: `nsbox session start ...`. */
    return session_start(&c, &o, argc + 2, argv - 2);
}

/* Connect to session id's socket. Returns the fd, or EXIT_NSBOX_FAILURE's -1 after one line. */
static int session_connect(const char *id)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char path[700];
    int fd, r = session_socket_path(id, path, sizeof(path));

    if (r == -ENOENT) {
        log_error("no session '%s': give the id 'nsbox session start' printed, or its --name "
                  "(see 'nsbox session ls')",
                  id);
        return -1;
    }
    if (r < 0 || strlen(path) >= sizeof(sa.sun_path)) {
        log_error_errno(r < 0 ? r : -ENAMETOOLONG, "cannot find session '%s': %m", id);
        return -1;
    }
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        log_error_errno(negative_errno(), "socket: %m");
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = negative_errno();
        (void)close(fd);
        if (r == -ENOENT || r == -ECONNREFUSED)
            log_error("session '%s' is not running (it was stopped, killed, or reached its idle "
                      "or lifetime limit; see 'nsbox session ls')",
                      id);
        else
            log_error_errno(r, "cannot connect to session '%s': %m", id);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = RETRY_EINTR(send(fd, p, n, MSG_NOSIGNAL));
        if (k <= 0)
            return -EIO;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* send_all() of line, its first byte carrying pass_fd when it is >= 0 (SCM_RIGHTS: a step's
 * copy-in stream, which the session takes with the request's first bytes). */
static int send_line(int fd, const char *line, int pass_fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u = {0};
    struct iovec iov = {.iov_base = (char *)line, .iov_len = 1};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = u.buf,
                         .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

    if (pass_fd < 0)
        return send_all(fd, line, strlen(line));
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    if (RETRY_EINTR(sendmsg(fd, &msg, MSG_NOSIGNAL)) != 1)
        return -EIO;
    return send_all(fd, line + 1, strlen(line) - 1);
}

/* Read the answer: one line. Returns its length (with the newline), or -errno; an error that
 * comes after the whole line (the session closed a connection it did not take, with the
 * request unread: ECONNRESET) does not count. A descriptor that comes with it (SCM_RIGHTS: a
 * step's copy-out stream) is put in *ret_fd (close-on-exec), else -1. */
static ssize_t read_line(int fd, size_t max, char **ret, int *ret_fd)
{
    size_t have = 0, size = 65536;
    char *buf = malloc(size);

    *ret = NULL;
    while (buf) {
        ssize_t n;
        if (have + 1 >= size) {
            char *b = size >= max ? NULL : realloc(buf, size * 2);
            if (!b)
                break;
            buf = b;
            size *= 2;
        }
        n = recv_first_fd(fd, buf + have, size - have - 1, 0, ret_fd);
        if (n < 0 && have == 0) {
            int r = negative_errno();
            free(buf);
            return r;
        }
        if (n > 0)
            have += (size_t)n;
        if (n <= 0 || memchr(buf + have - (size_t)n, '\n', (size_t)n)) {
            buf[have] = '\0';
            *ret = buf;
            return (ssize_t)have;
        }
    }
    free(buf);
    return -ENOMEM;
}

/* Send request (a JSON object) and data (its stdin_bytes, or none), and read the answer's
 * line. Returns the parsed answer, NULL
 * when the connection ended without one. */
static json_t *transact(int fd, json_t *request, const char *data, size_t data_size, int pass_fd,
                        char **ret_line, int *ret_fd)
{
    char *text = json_dumps(request, JSON_COMPACT), *line = NULL;
    char *buf = NULL;
    size_t have;
    ssize_t n;

    *ret_line = NULL;
    *ret_fd = -1;
    /* The line in one write, so that the supervisor finds it whole in one read. */
    if (!text || asprintf(&line, "%s\n", text) < 0)
        log_oom();
    free(text);
    /* A request the session did not take (it refused the connection: too many open) still
     * has its answer to read. */
    if (send_line(fd, line, pass_fd) >= 0 && data_size)
        (void)send_all(fd, data, data_size); /* the step's stdin, after the line */
    free(line);
    n = read_line(fd, 256U << 20, &buf, ret_fd);
    if (n <= 0) {
        free(buf);
        return NULL;
    }
    have = (size_t)n;
    *ret_line = buf;
    if (buf[have - 1] != '\n')
        return NULL; /* cut off: the caller says so */
    /* JSON_ALLOW_NUL: a step's output may hold NUL bytes (\u0000), which must not make its
     * answer unreadable. */
    return json_loadb(buf, have, JSON_ALLOW_NUL, NULL);
}

/* Write the step's text to fd; on a terminal (unless --raw-output) escaped as `nsbox run` does
 * (termsafe.h): the program's output must not drive the caller's terminal. */
static void write_text(int fd, json_t *s, bool raw)
{
    const char *p = json_string_value(s);
    size_t n = json_string_length(s);
    _cleanup_free_ char *escaped = NULL;

    if (p && n > 0 && !raw && isatty(fd)) {
        struct termsafe t = {0};
        size_t len;
        escaped = malloc(TERMSAFE_MAX_OUT(n) + TERMSAFE_MAX_OUT(0));
        if (!escaped)
            log_oom();
        len = termsafe_escape(&t, p, n, escaped);
        len += termsafe_finish(&t, escaped + len);
        p = escaped;
        n = len;
    }
    while (p && n > 0) {
        ssize_t k = RETRY_EINTR(write(fd, p, n));
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

/* A stream of the step's answer: its start, and its end when the middle was cut at
 * --output-limit ("stdout_tail"), on a terminal behind a line saying what was cut, as nsbox run
 * shows it. */
static void write_stream(int fd, json_t *ans, const char *name, bool raw)
{
    char key[16], line[160];
    json_t *tail, *cut;

    write_text(fd, json_object_get(ans, name), raw);
    (void)snprintf(key, sizeof(key), "%s_tail", name);
    tail = json_object_get(ans, key);
    if (!json_is_string(tail) || json_string_length(tail) == 0)
        return;
    (void)snprintf(key, sizeof(key), "%s_cut", name);
    cut = json_object_get(ans, key);
    if (!raw && isatty(fd)) {
        size_t head = json_string_length(json_object_get(ans, name));
        const char *h = json_string_value(json_object_get(ans, name));
        int n = snprintf(line, sizeof(line),
                         "%s[... %" JSON_INTEGER_FORMAT " bytes, %" JSON_INTEGER_FORMAT
                         " lines cut (--output-limit) ...]\n",
                         head > 0 && h && h[head - 1] != '\n' ? "\n" : "",
                         json_integer_value(json_object_get(cut, "bytes")),
                         json_integer_value(json_object_get(cut, "lines")));
        (void)RETRY_EINTR(write(fd, line, (size_t)n));
    }
    write_text(fd, tail, raw);
}

/* A step's --copy-out: the host directories, opened by this process (the caller's) before the
 * step runs, as a run's plan_copies() opens them; the stream the session sends back with the
 * answer is unpacked here, below them, with copy.h's walk by directory descriptors. */
#define STEP_COPY_OUT_MAX 64
struct step_copy {
    size_t n;
    char *sandbox[STEP_COPY_OUT_MAX]; /* argv's strings, cut */
    char *host[STEP_COPY_OUT_MAX];    /* absolute, allocated */
    int fds[STEP_COPY_OUT_MAX];
    bool made[STEP_COPY_OUT_MAX]; /* host[i] was made for the step */
    json_t *dirs; /* for the request's "copy_out_dirs": each host directory's ancestry */
    struct copy_caps caps;
};

static void step_copy_free(struct step_copy *sc)
{
    for (size_t i = 0; i < sc->n; i++) {
        free(sc->host[i]);
        (void)close(sc->fds[i]);
    }
    sc->n = 0;
    json_decref(sc->dirs);
    sc->dirs = NULL;
}

/* Add {"host": path, "ids": ["DEV:INO", ...]} for the directory fd to sc->dirs. */
static int step_copy_ancestry(struct step_copy *sc, int fd, const char *path)
{
    _cleanup_free_ struct stat *up = calloc(PATH_MAX / 2, sizeof(*up));
    json_t *ids = json_array(), *e;
    int n;

    if (!up || !ids || (!sc->dirs && !(sc->dirs = json_array())))
        log_oom();
    n = dir_ancestry(fd, up, PATH_MAX / 2);
    for (int i = 0; i < n; i++) {
        char text[48];
        (void)snprintf(text, sizeof(text), "%ju:%ju", (uintmax_t)up[i].st_dev,
                       (uintmax_t)up[i].st_ino);
        (void)json_array_append_new(ids, json_string(text));
    }
    e = json_pack("{s:s, s:o}", "host", path, "ids", ids);
    if (n < 0 || !e || json_array_append_new(sc->dirs, e) < 0)
        return n < 0 ? n : -ENOMEM;
    return 0;
}

/* --copy-out SANDBOXPATH:HOSTDIR, as for nsbox run: HOSTDIR made (0755) when missing, relative
 * to the current directory, never reached through a symlink but root's. Returns 0, or -errno
 * after one line. */
static int step_copy_add(struct step_copy *sc, char *arg)
{
    char *colon = strchr(arg, ':'), cwd[PATH_MAX], resolved[PATH_MAX], walked[PATH_MAX];
    const char *host;
    struct stat st;
    size_t len;
    int fd, r;

    if (sc->n == STEP_COPY_OUT_MAX)
        return log_error("at most %d --copy-out per step", STEP_COPY_OUT_MAX), -E2BIG;
    if (!colon || colon == arg || arg[0] != '/' || !colon[1])
        return log_error("invalid --copy-out '%s': expected SANDBOXPATH:HOSTDIR with an absolute "
                         "SANDBOXPATH",
                         arg),
               -EINVAL;
    *colon = '\0';
    host = colon + 1;
    len = strlen(arg);
    while (len > 1 && arg[len - 1] == '/')
        arg[--len] = '\0';
    if (!path_is_safe_target(arg) || path_is_at_or_below(arg, "/proc") ||
        path_is_at_or_below(arg, "/dev"))
        return log_error("invalid --copy-out source '%s': an absolute path inside the sandbox, "
                         "not '/', without '.' or '..', not in /proc or /dev",
                         arg),
               -EINVAL;
    if (host[0] == '/')
        r = snprintf(resolved, sizeof(resolved), "%s", host);
    else if (getcwd(cwd, sizeof(cwd)))
        r = snprintf(resolved, sizeof(resolved), "%s/%s", cwd, host);
    else
        return log_error_errno(negative_errno(), "--copy-out %s: %m", host);
    if (r < 0 || (size_t)r >= sizeof(resolved))
        return log_error("--copy-out %s: the path is too long", host), -ENAMETOOLONG;
    sc->made[sc->n] = mkdir(resolved, 0755) == 0;
    if (!sc->made[sc->n] && errno != EEXIST)
        return log_error_errno(negative_errno(), "cannot make the --copy-out directory '%s': %m",
                               resolved);
    fd = path_open_nofollow(resolved, true, walked, sizeof(walked));
    if (fd == -ELOOP)
        return log_error("--copy-out %s: '%s' is a symlink, and nsbox follows only root's "
                         "symlinks in directories only root can write: name the real directory",
                         resolved, walked),
               fd;
    if (fd < 0)
        return log_error_errno(fd, "--copy-out directory '%s': %m", resolved);
    if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
        (void)close(fd);
        return log_error("--copy-out '%s' is not a directory", resolved), -ENOTDIR;
    }
    /* The session's supervisor refuses a directory in a writable bind of the sandbox (it knows
     * the binds): the directory and those above it, by device and inode (dir_ancestry()). */
    r = step_copy_ancestry(sc, fd, resolved);
    if (r < 0) {
        (void)close(fd);
        return log_error_errno(r, "--copy-out directory '%s': %m", resolved);
    }
    sc->sandbox[sc->n] = arg;
    sc->host[sc->n] = strdup(resolved);
    if (!sc->host[sc->n])
        log_oom();
    sc->fds[sc->n++] = fd;
    return 0;
}

/* Add text to the answer's "warnings" and, as every warning this adds explains the step's
 * outcome (its copy-out), to "outcome_warnings" (nsbox_result.outcome_warnings). */
static void add_warning_json(json_t *ans, const char *text)
{
    static const char *const keys[] = {"warnings", "outcome_warnings"};

    for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
        json_t *w = json_object_get(ans, keys[i]);
        if (!json_is_array(w)) {
            w = json_array();
            (void)json_object_set_new(ans, keys[i], w);
        }
        (void)json_array_append_new(w, json_string(text));
    }
}

/* Unpack the step's copy-out stream (stream_fd, or -1 when none came) below the host
 * directories, and put what was copied and skipped in the answer's "copy_out", as a run's. */
static void step_copy_finish(struct step_copy *sc, json_t *ans, int stream_fd)
{
    struct nsbox_result res = {0};
    json_t *co = json_object_get(ans, "copy_out");
    char text[700];

    res.copy_out_asked = true;
    res.copy_out_done = json_is_true(json_object_get(co, "done"));
    res.skipped_more = (uint64_t)json_integer_value(json_object_get(co, "skipped_unlisted"));
    if (res.copy_out_done && stream_fd < 0) {
        res.copy_out_done = false;
        add_warning_json(ans, "the session sent no copy-out stream: nothing was copied out");
    } else if (res.copy_out_done) {
        /* The library's host side of a copy-out, as a run's; its warnings into the answer. */
        (void)
            copy_out_unpack(stream_fd,
                            &(struct copy_target){.root_fds = sc->fds,
                                                  .root_paths = (const char *const *)sc->host,
                                                  .n_roots = sc->n,
                                                  .indexed = true,
                                                  .host = true,
                                                  .shown_roots = (const char *const *)sc->sandbox},
                            &sc->caps, NULL, &res);
        for (const char *w = res.outcome_warnings; *w;) {
            size_t len = strcspn(w, "\n");
            (void)snprintf(text, sizeof(text), "%.*s", (int)len, w);
            if (len)
                add_warning_json(ans, text);
            w += len + (w[len] == '\n');
        }
    }
    (void)json_object_set_new(ans, "copy_out", result_copy_out_json(&res));
    nsbox_result_free(&res);
}

/* With --json, a step that did not run still prints a result, as `nsbox run --json` does for
 * its own failures: status "error", exit_code 125, the step, and what was said on stderr. */
static int exec_fail(bool json, const char *step)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_ERROR, .exit_code = EXIT_NSBOX_FAILURE};
    char *text;

    if (json) {
        (void)snprintf(r.error_step, sizeof(r.error_step), "%s", step);
        (void)snprintf(r.error, sizeof(r.error), "%s", log_last_error());
        text = nsbox_result_to_json(&r);
        if (text)
            (void)printf("%s\n", text);
        free(text);
        (void)fflush(stdout);
    }
    return EXIT_NSBOX_FAILURE;
}

static int exec_main(int argc, char *argv[])
{
    static const struct option options[] = {
        {"timeout", required_argument, NULL, 't'},
        {"output-limit", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'j'},
        {"raw-output", no_argument, NULL, 'r'},
        {"code", required_argument, NULL, 'c'},
        {"stdin", no_argument, NULL, 'i'},
        {"interactive", no_argument, NULL, 'i'},
        {"copy-out", required_argument, NULL, 'O'},
        {"copy-out-max-bytes", required_argument, NULL, 'B'},
        {"copy-out-max-files", required_argument, NULL, 'F'},
        {"memory", required_argument, NULL, 'm'},
        {"copy-in", required_argument, NULL, 'I'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    /* --memory and --copy-in, as given, for nsbox run's parser (step_in_prepare()) */
    _cleanup_free_ char **in_args = calloc((size_t)argc * 2 + 1, sizeof(char *));
    size_t n_in_args = 0;
    bool have_memory = false;
    uint64_t memory = 0;
    _cleanup_close_ int copy_in_fd = -EBADF;
    struct step_copy sc = {.caps = {.max_bytes = 64ULL << 20, .max_files = 1000}};
    const char *id, *code_path = NULL;
    bool json = false, raw = false, have_timeout = false, have_limit = false, pass_in = false;
    uint64_t timeout = 0, limit = 0;
    _cleanup_free_ char *code = NULL, *line = NULL, *in = NULL;
    size_t code_size = 0, in_size = 0;
    _cleanup_close_ int fd = -EBADF, stream_fd = -EBADF;
    json_t *req, *ans, *v;
    int opt, status;

    if (argc < 2 || argv[1][0] == '-') {
        log_error("usage: nsbox session exec ID|NAME [--timeout S] [--output-limit N] [--json] "
                  "[-i] (--code FILE|- | [--] PROGRAM [ARGS...])");
        return EXIT_NSBOX_FAILURE;
    }
    id = argv[1];
    argc--;
    argv++;
    optind = 1;
    if (!in_args)
        log_oom();
    while ((opt = getopt_long(argc, argv, "+im:", options, NULL)) != -1) {
        switch (opt) {
        case 'm':
        case 'I':
            in_args[n_in_args++] = opt == 'm' ? (char *)"--memory" : (char *)"--copy-in";
            in_args[n_in_args++] = optarg;
            break;
        case 't':
            if (parse_duration(optarg, &timeout) < 0) {
                log_error("invalid --timeout '%s'", optarg);
                return EXIT_NSBOX_FAILURE;
            }
            have_timeout = true;
            break;
        case 'o':
            if (parse_size(optarg, &limit) < 0) {
                log_error("invalid --output-limit '%s'", optarg);
                return EXIT_NSBOX_FAILURE;
            }
            have_limit = true;
            break;
        case 'j':
            json = true;
            break;
        case 'r':
            raw = true;
            break;
        case 'c':
            code_path = optarg;
            break;
        case 'i':
            pass_in = true;
            break;
        case 'O':
            if (step_copy_add(&sc, optarg) < 0) {
                step_copy_free(&sc);
                return EXIT_NSBOX_FAILURE;
            }
            break;
        case 'B':
            if (parse_size(optarg, &sc.caps.max_bytes) < 0 || sc.caps.max_bytes == 0 ||
                sc.caps.max_bytes > (1ULL << 40)) {
                log_error("invalid --copy-out-max-bytes '%s': expected a size such as 64m", optarg);
                step_copy_free(&sc);
                return EXIT_NSBOX_FAILURE;
            }
            break;
        case 'F':
            if (parse_count(optarg, 1000000, &sc.caps.max_files) < 0) {
                log_error("invalid --copy-out-max-files '%s': expected a number of files from 1 "
                          "to 1000000",
                          optarg);
                step_copy_free(&sc);
                return EXIT_NSBOX_FAILURE;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            log_error("invalid option for 'nsbox session exec' (see 'nsbox session --help')");
            return EXIT_NSBOX_FAILURE;
        }
    }
    if (!code_path == (optind >= argc)) {
        log_error("'nsbox session exec' takes --code FILE|- or a program, one of them");
        return EXIT_NSBOX_FAILURE;
    }
    if (pass_in && code_path && strcmp(code_path, "-") == 0) {
        log_error("'nsbox session exec' takes --stdin or --code -, not both: give the code in a "
                  "file");
        return EXIT_NSBOX_FAILURE;
    }
    if (n_in_args) {
        int fd_in = -1;
        if (step_in_prepare((int)n_in_args, in_args, &have_memory, &memory, &fd_in) < 0)
            return exec_fail(json, "arguments");
        copy_in_fd = fd_in;
    }
    if (pass_in) {
        /* Read whole, before the step: it gets it as a file it reads to its end. */
        int r = read_fd_all(STDIN_FILENO, STDIN_MAX, &in, &in_size);
        if (r == -EFBIG) {
            log_error("the step's stdin is larger than %u MiB: give it as a file (-v) instead",
                      STDIN_MAX >> 20);
            return EXIT_NSBOX_FAILURE;
        }
        if (r < 0)
            return log_error_errno(r, "cannot read stdin for the step: %m"), EXIT_NSBOX_FAILURE;
    }
    if (code_path) {
        int r = strcmp(code_path, "-") == 0
                    ? read_fd_all(STDIN_FILENO, CODE_MAX, &code, &code_size)
                    : read_regular_file(code_path, CODE_MAX, &code, &code_size);
        if (r < 0)
            return log_error_errno(r, "cannot read code file '%s': %m", code_path),
                   EXIT_NSBOX_FAILURE;
        req = json_pack("{s:s,s:s%}", "op", "code", "code", code, code_size);
    } else {
        json_t *a = json_array();
        for (int i = optind; a && i < argc; i++)
            (void)json_array_append_new(a, json_string(argv[i]));
        req = json_pack("{s:s,s:o}", "op", "exec", "argv", a);
    }
    if (!req) {
        log_error("the request is not valid UTF-8 text");
        return EXIT_NSBOX_FAILURE;
    }
    if (have_timeout)
        (void)json_object_set_new(req, "timeout", json_real((double)timeout / 1e6));
    if (have_limit)
        (void)json_object_set_new(req, "output_limit", json_integer((json_int_t)limit));
    if (pass_in)
        (void)json_object_set_new(req, "stdin_bytes", json_integer((json_int_t)in_size));
    if (have_memory)
        (void)json_object_set_new(req, "memory", json_integer((json_int_t)memory));
    if (copy_in_fd >= 0)
        (void)json_object_set_new(req, "copy_in", json_true());
    if (sc.n) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < sc.n; i++)
            (void)json_array_append_new(a, json_string(sc.sandbox[i]));
        (void)json_object_set_new(req, "copy_out", a);
        (void)json_object_set_new(req, "copy_out_dirs", json_incref(sc.dirs));
        (void)json_object_set_new(req, "copy_out_max_bytes",
                                  json_integer((json_int_t)sc.caps.max_bytes));
        (void)json_object_set_new(req, "copy_out_max_files",
                                  json_integer((json_int_t)sc.caps.max_files));
    }

    (void)signal(SIGPIPE, SIG_IGN);
    fd = session_connect(id);
    if (fd < 0) {
        json_decref(req);
        return EXIT_NSBOX_FAILURE;
    }
    ans = transact(fd, req, in, in_size, copy_in_fd, &line, &stream_fd);
    json_decref(req);
    if (!ans && line && line[0] && line[strlen(line) - 1] != '\n') {
        log_error("session '%s': the step's answer was cut off after %zu bytes (the session "
                  "closes a connection whose answer is not read within 30 s)",
                  id, strlen(line));
        return EXIT_NSBOX_FAILURE;
    }
    if (!ans) {
        log_error("session '%s' ended without an answer to the step", id);
        return EXIT_NSBOX_FAILURE;
    }
    if ((v = json_object_get(ans, "error")) && json_is_string(v)) {
        log_error("session '%s': %s", id, json_string_value(v));
        /* Refused (a directory in a writable bind, ...): the directories made for it go; an
         * empty one only (rmdir(2)), whatever the sandbox did meanwhile. */
        for (size_t i = 0; i < sc.n; i++)
            if (sc.made[i])
                (void)rmdir(sc.host[i]);
        step_copy_free(&sc);
        json_decref(ans);
        return exec_fail(json, "session");
    }
    v = json_object_get(ans, "exit_code");
    status = json_is_integer(v) ? (int)json_integer_value(v) : EXIT_NSBOX_FAILURE;
    if (sc.n) {
        step_copy_finish(&sc, ans, stream_fd);
        step_copy_free(&sc);
        if (json) {
            char *text = json_dumps(ans, JSON_COMPACT | JSON_REAL_PRECISION(6));
            if (!text)
                log_oom();
            free(line);
            line = NULL;
            if (asprintf(&line, "%s\n", text) < 0)
                log_oom();
            free(text);
        }
    }
    if (json) {
        (void)fputs(line, stdout);
    } else {
        const char *st = json_string_value(json_object_get(ans, "status"));
        size_t i;
        json_t *w;

        write_stream(STDOUT_FILENO, ans, "stdout", raw);
        /* A code step is a notebook cell: its outputs' text/plain after its output, as a
         * notebook shows them (the images are in the JSON result only). */
        json_array_foreach(json_object_get(ans, "outputs"), i, w) {
            write_text(STDOUT_FILENO, json_object_get(json_object_get(w, "data"), "text/plain"),
                       raw);
            (void)!write(STDOUT_FILENO, "\n", 1);
        }
        write_stream(STDERR_FILENO, ans, "stderr", raw);
        json_array_foreach(json_object_get(ans, "warnings"), i, w)
            if (json_is_string(w))
                log_warning("%s", json_string_value(w));
        if (json_is_string(json_object_get(ans, "error")))
            log_error("%s", json_string_value(json_object_get(ans, "error")));
        else if (st && strcmp(st, "exited") != 0 && json_is_string(json_object_get(ans, "reason")))
            log_error("the step ended: %s", json_string_value(json_object_get(ans, "reason")));
        /* As nsbox run does: what else the caller should know (limits, refusals, truncation). */
        json_array_foreach(json_object_get(ans, "notes"), i, w)
            if (json_is_string(w))
                log_warning("%s", json_string_value(w));
    }
    json_decref(ans);
    return fflush(stdout) == 0 ? status : EXIT_NSBOX_FAILURE;
}

static int stop_main(int argc, char *argv[])
{
    _cleanup_close_ int fd = -EBADF;
    _cleanup_free_ char *line = NULL;
    const char *id = argc == 2                                     ? argv[1]
                     : argc == 3 && strcmp(argv[1], "--json") == 0 ? argv[2]
                     : argc == 3 && strcmp(argv[2], "--json") == 0 ? argv[1]
                                                                   : NULL;
    bool json = argc == 3;
    _cleanup_close_ int stream_fd = -EBADF;
    json_t *req, *ans, *w;
    size_t i;

    if (!id) {
        log_error("usage: nsbox session stop [--json] ID|NAME");
        return EXIT_NSBOX_FAILURE;
    }
    (void)signal(SIGPIPE, SIG_IGN);
    fd = session_connect(id);
    if (fd < 0)
        return EXIT_NSBOX_FAILURE;
    req = json_pack("{s:s}", "op", "stop");
    /* The answer comes once the sandbox is gone, {"stopped": true, "workspace": ...,
     * "warnings": [...]}, and the supervisor then exits (EOF); {"error": ...} is a refusal (the
     * session did not take the request). */
    ans = transact(fd, req, NULL, 0, -1, &line, &stream_fd);
    json_decref(req);
    if (ans && json_is_string(json_object_get(ans, "error"))) {
        log_error("session '%s': %s", id, json_string_value(json_object_get(ans, "error")));
        json_decref(ans);
        return EXIT_NSBOX_FAILURE;
    }
    if (json && ans)
        (void)printf("%s", line);
    else if (json)
        /* Ended without a word (killed meanwhile): still one line of JSON. */
        (void)printf("{\"stopped\":true,\"session_id\":null,\"reason\":\"unknown\","
                     "\"workspace\":null,\"warnings\":[\"the session ended without an "
                     "answer (it was killed or reached a limit meanwhile)\"]}\n");
    else
        json_array_foreach(json_object_get(ans, "warnings"), i, w)
            if (json_is_string(w))
                log_warning("session '%s': %s", id, json_string_value(w));
    json_decref(ans);
    return fflush(stdout) == 0 ? 0 : EXIT_NSBOX_FAILURE;
}

static int ls_main(int argc, char *argv[])
{
    char *filter[] = {(char *)"label=" SESSION_LABEL};
    bool json = argc == 2 && strcmp(argv[1], "--json") == 0;

    if (argc > 2 || (argc == 2 && !json)) {
        log_error("usage: nsbox session ls [--json]");
        return EXIT_NSBOX_FAILURE;
    }
    return registry_ps(json, filter, 1);
}

static const struct command session_commands[] = {
    {.name = "start", .main = start_main},
    {.name = "exec", .main = exec_main},
    {.name = "stop", .main = stop_main},
    {.name = "ls", .main = ls_main},
    {},
};

int session_main(int argc, char *argv[])
{
    const struct command *c;

    if (argc < 2) {
        log_error("session: give a command: start, exec, stop or ls (see 'nsbox session --help')");
        return EXIT_NSBOX_FAILURE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    c = command_find(session_commands, argv[1]);
    if (c)
        return c->main(argc - 1, argv + 1);
    log_error("unknown session command '%s' (see 'nsbox session --help')", argv[1]);
    return EXIT_NSBOX_FAILURE;
}
