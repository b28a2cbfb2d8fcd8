/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One trial of nsbox selftest: the attack set up on the host (selftest-table.c), run inside
 * `nsbox run` (this binary) or bare, watched with a deadline, judged the way its table entry
 * says (enum judge), and everything it made removed. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "rmtree.h"
#include "selftest-internal.h"

/* src/cli/selftest-attacks.py, generated into selftest-attacks.c at build time. */
extern const char selftest_attacks[];

#define OUTPUT_MAX (64U << 20) /* bytes kept of one trial's output */
#define TRIAL_TIMEOUT_MS                                                                           \
    (120 * 1000) /* a trial that hangs this long is killed (nsbox run's                            \
                  * own --timeout 60 comes first) */

struct outcome {
    bool ran;
    char status[48]; /* the result's status, or exited/signaled/timeout for a control run */
    char *out;       /* the attack's stdout */
    size_t out_len;
    char *errout; /* the attack's stderr */
    size_t errout_len;
    char err[1024]; /* nsbox's error message, or why nothing ran */
};

int selftest_write_new_file(int dirfd, const char *name, const char *text, mode_t mode)
{
    _cleanup_close_ int fd = openat(dirfd, name,
                                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    size_t n = strlen(text);
    if (fd < 0)
        return -errno;
    if (write(fd, text, n) != (ssize_t)n)
        return -EIO;
    if (fchmod(fd, mode) < 0) /* past the umask */
        return -errno;
    return 0;
}

/* ---- judging: one function per enum judge ------------------------------------------------ */

static bool out_has(const struct outcome *o, const char *needle)
{
    return o->out && memmem(o->out, o->out_len, needle, strlen(needle)) != NULL;
}

/* The attack said "SUCCEEDED <word>...". */
static bool said(const struct outcome *o, const char *word)
{
    char needle[128];
    (void)snprintf(needle, sizeof(needle), "SUCCEEDED %s", word);
    return out_has(o, needle);
}

/* Say whether a connection that reached the listener during the run sent the nonce. Every
 * pending connection is read, within one deadline of 3 s for all: a local user who connected
 * first can neither hide the attack's connection nor stall the self-test. */
static bool listener_got(int fd, const char *nonce)
{
    long deadline = (long)(now_usec() / 1000) + 3000;

    if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
        return false;
    for (;;) {
        _cleanup_close_ int conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        char buf[128] = "";
        size_t n = 0;

        if (conn < 0)
            return false;
        while (n < sizeof(buf) - 1) {
            struct pollfd p = {.fd = conn, .events = POLLIN};
            long left = deadline - (long)(now_usec() / 1000);
            ssize_t k;
            if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                return false;
            k = read(conn, buf + n, sizeof(buf) - 1 - n);
            if (k <= 0)
                break;
            n += (size_t)k;
            buf[n] = '\0';
            if (strstr(buf, nonce))
                return true;
        }
    }
}

/* A regular file of the sandbox's host uid holding this trial's nonce. */
static bool file_left(const struct ctx *c, const struct trial *t)
{
    char buf[128];
    struct stat st;
    ssize_t n;
    _cleanup_close_ int fd = openat(t->sub_fd, "persisted.txt",
                                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != c->host_uid)
        return false;
    n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return strstr(buf, t->secret) != NULL;
}

static bool victim_killed(struct trial *t)
{
    for (int i = 0; i < 100; i++) {
        int status;
        pid_t p = waitpid(t->victim, &status, WNOHANG);
        if (p == t->victim) {
            t->victim = 0;
            return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        }
        (void)usleep(10000);
    }
    return false;
}

static bool terminal_input(const struct trial *t)
{
    char buf[256];
    ssize_t n;
    /* Only TIOCSTI (or a write to the master, which only this process holds) puts bytes into
     * the terminal's input queue. */
    if (fcntl(t->pass_fd, F_SETFL, O_NONBLOCK) < 0)
        return false;
    n = read(t->pass_fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return strstr(buf, "nsbox-selftest-injected") != NULL;
}

/* Kill every process of uid whose environment holds the entry NSBOX_SELFTEST_SECRET=tag
 * (the tag is in no command line); returns how many there were. */
static unsigned kill_tagged(const char *tag, uid_t uid)
{
    _cleanup_closedir_ DIR *d = opendir("/proc");
    char entry[160];
    unsigned found = 0;
    struct dirent *de;

    if (!d)
        return 0;
    (void)snprintf(entry, sizeof(entry), "NSBOX_SELFTEST_SECRET=%s", tag);
    while ((de = readdir(d))) {
        _cleanup_free_ char *env = NULL;
        _cleanup_close_ int dir = -EBADF;
        struct stat st;
        size_t n = 0;
        int fd;
        pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);

        if (pid <= 0 || pid == getpid())
            continue;
        dir = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0 || fstat(dir, &st) < 0 || st.st_uid != uid)
            continue;
        fd = openat(dir, "environ", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        (void)read_fd_all(fd, 1U << 20, &env, &n);
        (void)close(fd);
        /* Whole entries only: "X=... NSBOX_SELFTEST_SECRET=tag" in another variable is not. */
        for (size_t i = 0; env && i < n; i += strlen(env + i) + 1)
            if (strcmp(env + i, entry) == 0) {
                found++;
                (void)kill(pid, SIGKILL);
                break;
            }
    }
    return found;
}

/* Whether attack a got through in this trial, the way its table entry says. */
static bool judge(const struct ctx *c, const struct attack *a, struct trial *t,
                  const struct outcome *o)
{
    switch (a->judge) {
    case JUDGE_REPORT:
        return said(o, a->report);
    case JUDGE_CANARY:
        return out_has(o, t->secret);
    case JUDGE_LISTENER:
        return listener_got(t->fd, t->secret);
    case JUDGE_FILE_LEFT:
        return file_left(c, t);
    case JUDGE_VICTIM_KILLED:
        return victim_killed(t);
    case JUDGE_TERMINAL_INPUT:
        return terminal_input(t);
    case JUDGE_FLOOD_DELIVERED:
        return o->out_len >= (size_t)SELFTEST_FLOOD_MIB << 20;
    case JUDGE_PROCESS_LEFT:
        return kill_tagged(t->secret, c->host_uid) > 0;
    }
    return false; /* not reached: every judge is handled above (-Wswitch) */
}

/* ---- running one trial ----------------------------------------------------------------- */

/* Empty a directory the sandbox's host uid owns as that uid, in a child: root never deletes
 * inside a tree another uid can still change. */
static void clear_as_host_uid(const struct ctx *c, int dirfd)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (c->host_ids_lock >= 0)
            (void)close(c->host_ids_lock); /* not for a process of the sandbox's uid */
        if (setgroups(0, NULL) < 0 || setresgid(c->host_gid, c->host_gid, c->host_gid) < 0 ||
            setresuid(c->host_uid, c->host_uid, c->host_uid) < 0)
            _exit(1);
        _exit(rmtree_below(dirfd) < 0);
    }
    if (pid > 0)
        (void)waitpid(pid, NULL, 0);
}

static void trial_cleanup(const struct ctx *c, struct trial *t)
{
    if (t->pass_fd >= 0)
        (void)close(t->pass_fd);
    if (t->fd >= 0)
        (void)close(t->fd);
    if (t->sub_fd >= 0) {
        if (t->remove_after_run)
            (void)unlinkat(t->sub_fd, t->remove_after_run, 0);
        if (t->sub_is_host_uid && c->root)
            clear_as_host_uid(c, t->sub_fd);
        /* Taken back before it is removed: nothing of the sandbox's host uid may add to it
         * meanwhile. */
        if (fchown(t->sub_fd, geteuid(), getegid()) < 0 || fchmod(t->sub_fd, 0700) < 0) {
            /* then the removal below may have to race a writer; it never follows one */
        }
        (void)close(t->sub_fd);
    }
    if (t->dir_fd >= 0)
        (void)close(t->dir_fd);
    if (t->victim > 0) {
        (void)kill(t->victim, SIGKILL);
        (void)waitpid(t->victim, NULL, 0);
    }
    if (t->shmid >= 0 && shmctl(t->shmid, IPC_RMID, NULL) == 0 && t->shm_record[0])
        (void)unlinkat(t->top_fd, t->shm_record, 0);
    *t = (struct trial){.pass_fd = -1,
                        .fd = -1,
                        .sub_fd = -1,
                        .dir_fd = -1,
                        .shmid = -1,
                        .top_fd = -1};
}

static void append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n > OUTPUT_MAX)
        return; /* drained, not kept */
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = realloc(*buf, *cap);
        if (!*buf)
            log_oom();
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* Run argv with stdout and stderr captured; with drop, as the sandbox's host ids. */
static int spawn(const struct ctx *c, char **argv, const struct trial *t, bool drop,
                 struct outcome *o)
{
    int out[2], err[2], status;
    size_t cap = 0, err_cap = 0;
    struct timespec start, now;
    pid_t pid;
    bool open_out = true, open_err = true, timed_out = false;

    if (pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(err, O_CLOEXEC) < 0) {
        (void)close(out[0]);
        (void)close(out[1]);
        return -errno;
    }
    pid = fork();
    if (pid < 0) {
        int r = -errno;
        (void)close(out[0]);
        (void)close(out[1]);
        (void)close(err[0]);
        (void)close(err[1]);
        return r;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
            _exit(125);
        (void)setpgid(0, 0);
        if (t->env_token && setenv("NSBOX_SELFTEST_TOKEN", t->secret, 1) < 0)
            _exit(125);
        if (t->secret_to_env && setenv("NSBOX_SELFTEST_SECRET", t->secret, 1) < 0)
            _exit(125);
        if (drop && c->root &&
            (setgroups(0, NULL) < 0 || setresgid(c->host_gid, c->host_gid, c->host_gid) < 0 ||
             setresuid(c->host_uid, c->host_uid, c->host_uid) < 0))
            _exit(125);
        if (t->mode == MODE_CONTROL) {
            /* A bare attack gets the trial's variables and no more: its process is readable by
             * other processes of its uid, and the caller's environment is not theirs. */
            char *envp[8];
            size_t k = 0;
            envp[k++] = (char *)"PATH=/usr/bin:/bin";
            envp[k++] = (char *)"LANG=C.UTF-8";
            envp[k++] = (char *)"HOME=/";
            for (const char *const *v =
                     (const char *const[]){"NSBOX_SELFTEST_TOKEN", "NSBOX_SELFTEST_SECRET", NULL};
                 *v; v++) {
                const char *val = getenv(*v);
                if (val) {
                    char *e = malloc(strlen(*v) + strlen(val) + 2);
                    if (!e)
                        _exit(125);
                    (void)sprintf(e, "%s=%s", *v, val);
                    envp[k++] = e;
                }
            }
            envp[k] = NULL;
            if (chdir("/") < 0)
                _exit(125);
            execve(argv[0], argv, envp);
        } else
            execv(argv[0], argv);
        _exit(127);
    }
    (void)close(out[1]);
    (void)close(err[1]);
    (void)clock_gettime(CLOCK_MONOTONIC, &start);
    while (open_out || open_err) {
        struct pollfd p[2] = {{.fd = open_out ? out[0] : -1, .events = POLLIN},
                              {.fd = open_err ? err[0] : -1, .events = POLLIN}};
        long left;
        int k;

        (void)clock_gettime(CLOCK_MONOTONIC, &now);
        left = TRIAL_TIMEOUT_MS -
               (long)((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
        if (left <= 0) {
            timed_out = true;
            (void)kill(-pid, SIGKILL);
            (void)kill(pid, SIGKILL);
            break;
        }
        if (selftest_interrupted && !timed_out) {
            /* Once: nsbox run tears its sandbox down on SIGTERM and then closes its pipes. */
            timed_out = true;
            (void)kill(pid, SIGTERM);
        }
        k = poll(p, 2, (int)left);
        if (k < 0 && errno != EINTR)
            break;
        if (open_out && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[65536];
            ssize_t n = read(out[0], buf, sizeof(buf));
            if (n <= 0)
                open_out = false;
            else
                append(&o->out, &o->out_len, &cap, buf, (size_t)n);
        }
        if (open_err && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[65536];
            ssize_t n = read(err[0], buf, sizeof(buf));
            if (n <= 0)
                open_err = false;
            else
                append(&o->errout, &o->errout_len, &err_cap, buf, (size_t)n);
        }
    }
    (void)close(out[0]);
    (void)close(err[0]);
    if (waitpid(pid, &status, 0) < 0)
        return -errno;
    o->ran = true;
    if (selftest_interrupted)
        (void)snprintf(o->status, sizeof(o->status), "interrupted");
    else if (timed_out)
        (void)snprintf(o->status, sizeof(o->status), "timeout");
    else if (WIFSIGNALED(status))
        (void)snprintf(o->status, sizeof(o->status), "signaled");
    else
        (void)snprintf(o->status, sizeof(o->status), "exited %d", WEXITSTATUS(status));
    return 0;
}

/* Replace o's raw output (nsbox's JSON result) with the payload's stdout, and take its status. */
static void take_json_result(struct ctx *c, struct outcome *o)
{
    json_error_t error;
    json_t *root = o->out ? json_loadb(o->out, o->out_len, 0, &error) : NULL;
    json_t *out, *err;
    const char *s;

    if (!root) {
        (void)snprintf(o->status, sizeof(o->status), "error");
        (void)snprintf(o->err, sizeof(o->err), "nsbox run printed no JSON result: %.*s",
                       o->errout ? (int)MIN(strcspn(o->errout, "\n"), 500) : 0,
                       o->errout ? o->errout : "");
        return;
    }
    s = json_string_value(json_object_get(root, "status"));
    if (json_is_integer(json_object_get(root, "signal"))) {
        int sig = (int)json_integer_value(json_object_get(root, "signal"));
        const char *abbrev = sigabbrev_np(sig);
        (void)snprintf(o->status, sizeof(o->status), "%s (signal %d, SIG%s)", s ? s : "error", sig,
                       abbrev ? abbrev : "?");
    } else
        (void)snprintf(o->status, sizeof(o->status), "%s", s ? s : "error");
    err = json_object_get(root, "error");
    if (json_is_object(err)) {
        s = json_string_value(json_object_get(err, "message"));
        (void)snprintf(o->err, sizeof(o->err), "%s", s ? s : "");
    }
    s = json_string_value(json_object_get(root, "limits_enforced_by"));
    if (s && strcmp(s, "none") != 0 && !c->limits_by[0]) {
        const char *note = json_string_value(json_object_get(root, "limits_note"));
        (void)snprintf(c->limits_by, sizeof(c->limits_by), "%s", s);
        (void)snprintf(c->limits_note, sizeof(c->limits_note), "%s", note ? note : "");
    }
    /* nsbox's own stderr (its warnings) gives way to the payload's. */
    free(o->out);
    free(o->errout);
    o->out = o->errout = NULL;
    o->out_len = o->errout_len = 0;
    out = json_object_get(root, "stdout");
    if (json_is_string(out)) {
        /* The start and, when the middle was cut, the end (a verdict's line comes last). */
        json_t *tail = json_object_get(root, "stdout_tail");
        size_t tail_len = json_is_string(tail) ? json_string_length(tail) : 0;
        o->out_len = json_string_length(out);
        o->out = xmalloc(o->out_len + tail_len + 1);
        memcpy(o->out, json_string_value(out), o->out_len + 1);
        if (tail_len) {
            memcpy(o->out + o->out_len, json_string_value(tail), tail_len + 1);
            o->out_len += tail_len;
        }
    }
    out = json_object_get(root, "stderr");
    if (json_is_string(out)) {
        o->errout_len = json_string_length(out);
        o->errout = xmalloc(o->errout_len + 1);
        memcpy(o->errout, json_string_value(out), o->errout_len + 1);
    }
    json_decref(root);
}

/* The line of the attack's output that explains its verdict. */
static void detail_line(const struct outcome *o, const char *prefix, char *buf, size_t size)
{
    const char *p = o->out ? strstr(o->out, prefix) : NULL;
    size_t n;
    if (!p) {
        buf[0] = '\0';
        return;
    }
    n = strcspn(p, "\n");
    (void)snprintf(buf, size, "%.*s", (int)MIN(n, size - 1), p);
}

/* Whether the attack program said "nsbox-selftest: WORD NAME" on stderr. */
static bool marked(const struct outcome *o, const char *word, const char *name)
{
    char needle[96];
    (void)snprintf(needle, sizeof(needle), "nsbox-selftest: %s %s\n", word, name);
    return o->errout && memmem(o->errout, o->errout_len, needle, strlen(needle)) != NULL;
}

/* Whether status is one of enders ("a|b|c"). */
static bool ended_by(const char *enders, const char *status)
{
    size_t n = strlen(status);
    for (const char *p = enders; p && *p;) {
        size_t len = strcspn(p, "|");
        if (len == n && strncmp(p, status, n) == 0)
            return true;
        p += len + (p[len] == '|');
    }
    return false;
}

/* The last line of the attack's stderr, e.g. the end of a Python traceback. */
static void last_line(const struct outcome *o, char *buf, size_t size)
{
    size_t end = o->errout_len, start;
    while (end > 0 && o->errout[end - 1] == '\n')
        end--;
    start = end;
    while (start > 0 && o->errout[start - 1] != '\n')
        start--;
    (void)snprintf(buf, size, "%.*s", (int)MIN(end - start, size - 1), o->errout + start);
}

/* The command line of one run of attack a into argv (64 entries): `nsbox run` with the trial's
 * options, or the bare python3 of --control; step, if not NULL, is the attack's first argument
 * (a two-run attack's "plant" or "find"). */
static void trial_argv(const struct ctx *c, const struct attack *a, const struct trial *t,
                       const char *step, char **argv)
{
    size_t n = 0;

    if (t->mode == MODE_CONTROL) {
        argv[n++] = (char *)c->python;
    } else {
        argv[n++] = (char *)c->exe;
        argv[n++] = (char *)"run";
        argv[n++] = (char *)"--json";
        /* Time is the protection of one attack only (runaway, which sets its own): the others
         * get a minute, so that a slow machine does not stop them for the wrong reason. */
        argv[n++] = (char *)"--timeout";
        argv[n++] = (char *)"60";
        if (c->rootfs) {
            argv[n++] = (char *)"--rootfs";
            argv[n++] = (char *)c->rootfs;
        }
        if (c->host_user[0]) {
            argv[n++] = (char *)"--host-user";
            argv[n++] = (char *)c->host_user;
        }
        if (t->secret_to_env) {
            argv[n++] = (char *)"-e";
            argv[n++] = (char *)"NSBOX_SELFTEST_SECRET";
        }
        for (size_t i = 0; i < t->n_opts; i++)
            argv[n++] = (char *)t->opts[i];
        argv[n++] = (char *)"--";
        argv[n++] = (char *)"python3";
    }
    argv[n++] = (char *)"-I";
    argv[n++] = (char *)"-B";
    argv[n++] = (char *)"-c";
    argv[n++] = (char *)selftest_attacks;
    argv[n++] = (char *)a->name;
    if (step)
        argv[n++] = (char *)step;
    for (size_t i = 0; i < t->n_args; i++)
        argv[n++] = (char *)t->args[i];
    argv[n] = NULL;
}

/* The earlier run of a two-run attack ("plant", with the nonce): it must run to its end, or
 * the later run would have nothing to find for another reason than the protection. Returns 0,
 * or -1 with *v the error. */
static int earlier_run(struct ctx *c, const struct attack *a, struct trial *t, struct verdict *v)
{
    struct outcome o = {0};
    char *argv[64], line[400] = "";
    int r;

    trial_argv(c, a, t, "plant", argv);
    r = spawn(c, argv, t, t->mode == MODE_CONTROL && !t->as_caller, &o);
    if (r >= 0 && t->mode != MODE_CONTROL)
        take_json_result(c, &o);
    if (r < 0)
        (void)snprintf(v->detail, sizeof(v->detail), "cannot start the trial: %s", strerror(-r));
    else if (t->mode != MODE_CONTROL && strcmp(o.status, "error") == 0)
        (void)snprintf(v->detail, sizeof(v->detail), "nsbox run failed (the earlier run): %.380s",
                       o.err);
    else if (!marked(&o, "DONE", a->name)) {
        last_line(&o, line, sizeof(line));
        (void)snprintf(v->detail, sizeof(v->detail), "the earlier run did not finish (%s%s%s)",
                       o.status, line[0] ? ": " : "", line);
    }
    free(o.out);
    free(o.errout);
    if (!v->detail[0])
        return 0;
    v->word = "error";
    return -1;
}

void selftest_run_trial(struct ctx *c, const struct attack *a, enum mode mode, struct verdict *v)
{
    static const char *const mode_names[] = {"sandbox", "ablated", "control"};
    struct trial t = {.mode = mode,
                      .pass_fd = -1,
                      .fd = -1,
                      .sub_fd = -1,
                      .dir_fd = -1,
                      .shmid = -1,
                      .top_fd = -1};
    struct outcome o = {0};
    char *argv[64], name[64], line[400];
    bool success;
    int r;

    /* Owned by the caller (root for root), like everything of the self-test but the
     * subdirectories an attack must be able to write: nothing the sandbox's host uid could
     * swap for a symlink under root's feet. */
    (void)snprintf(name, sizeof(name), "%s-%s", a->name, mode_names[mode]);
    (void)snprintf(t.dir, sizeof(t.dir), "%s/%s", c->dir, name);
    if (mkdirat(c->dir_fd, name, 0755) < 0 ||
        (t.dir_fd = openat(c->dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        fchmod(t.dir_fd, 0755) < 0) {
        v->word = "error";
        (void)snprintf(v->detail, sizeof(v->detail), "cannot make %.300s: %s", t.dir,
                       strerror(errno));
        trial_cleanup(c, &t);
        return;
    }
    r = a->setup ? a->setup(c, &t) : 0;
    if (r < 0) {
        v->word = "error";
        (void)snprintf(v->detail, sizeof(v->detail), "setting up the attack failed: %s",
                       strerror(-r));
        trial_cleanup(c, &t);
        return;
    }
    /* The ablated run gets the table's opt_out, after the setup's own options (the last of a
     * repeated option wins); one that names the trial's DIR is the setup's to spell. */
    if (mode == MODE_ABLATED && a->opt_out && !strstr(a->opt_out, "DIR")) {
        char *save = NULL;
        (void)snprintf(t.ablate, sizeof(t.ablate), "%s", a->opt_out);
        for (char *w = strtok_r(t.ablate, " ", &save); w; w = strtok_r(NULL, " ", &save))
            add_opt(&t, w);
    }
    if (t.skip[0]) {
        v->word = "skipped";
        v->good = true;
        (void)snprintf(v->detail, sizeof(v->detail), "%s", t.skip);
        trial_cleanup(c, &t);
        return;
    }

    if (a->two_runs) {
        if (earlier_run(c, a, &t, v) < 0) {
            trial_cleanup(c, &t);
            return;
        }
        t.secret_to_env = false; /* the later run has only what the earlier one left */
    }
    trial_argv(c, a, &t, a->two_runs ? "find" : NULL, argv);

    r = spawn(c, argv, &t, mode == MODE_CONTROL && !t.as_caller, &o);
    if (r < 0) {
        v->word = "error";
        (void)snprintf(v->detail, sizeof(v->detail), "cannot start the trial: %s", strerror(-r));
        trial_cleanup(c, &t);
        return;
    }
    if (mode != MODE_CONTROL)
        take_json_result(c, &o);
    if (t.remove_after_run)
        (void)unlinkat(t.sub_fd, t.remove_after_run, 0);
    success = judge(c, a, &t, &o);
    line[0] = '\0';

    if (mode != MODE_CONTROL && strcmp(o.status, "error") == 0) {
        /* nsbox could not run the attack: nothing was tested. */
        v->word = "error";
        (void)snprintf(v->detail, sizeof(v->detail), "nsbox run failed: %.400s", o.err);
    } else if (!success && !marked(&o, "TRIED", a->name)) {
        /* Not blocked: never tried (no python3, a broken rootfs, ...). */
        v->word = "error";
        last_line(&o, line, sizeof(line));
        (void)snprintf(v->detail, sizeof(v->detail), "the attack did not start (%s%s%s)", o.status,
                       line[0] ? ": " : "", line);
    } else if (!success && !marked(&o, "DONE", a->name) && !ended_by(a->enders, o.status)) {
        /* Not blocked either: it stopped half-way for a reason that is not its protection. */
        v->word = "error";
        last_line(&o, line, sizeof(line));
        (void)snprintf(v->detail, sizeof(v->detail), "the attack did not finish (%s%s%s)", o.status,
                       line[0] ? ": " : "", line);
    } else if (mode == MODE_SANDBOX) {
        v->word = success ? "NOT BLOCKED" : "blocked";
        v->good = !success;
    } else {
        v->word = success ? "succeeded" : mode == MODE_ABLATED ? "still blocked" : "failed";
        v->good = success;
    }
    if (!v->detail[0]) {
        detail_line(&o, success ? "SUCCEEDED" : "blocked:", line, sizeof(line));
        if (a->judge == JUDGE_FLOOD_DELIVERED)
            (void)snprintf(line, sizeof(line), "the caller got %zu bytes", o.out_len);
        else if (a->judge == JUDGE_PROCESS_LEFT)
            (void)snprintf(line, sizeof(line),
                           success ? "a process outlived the run (killed now)"
                                   : "no process outlived the run");
        (void)snprintf(v->detail, sizeof(v->detail), "%s%s%s", o.status, line[0] ? ": " : "", line);
    }
    free(o.out);
    free(o.errout);
    trial_cleanup(c, &t);
}
