/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A session's init: PID 1 of the sandbox, set up as for a run (sandbox.c), then a step runner.
 *
 * It waits on the control channel (fd 5, a SOCK_SEQPACKET socket to the supervisor) for a step,
 * runs it in a child (its own session and process group, under the filters init loaded, made
 * by sandbox_payload_exec() as a run's payload is), and when the step ends kills everything
 * the step started -- its process group, then every other process in the pid namespace but
 * the session's Python interpreter -- before it says the step ended. Python steps go to that
 * interpreter (session-repl.py, started on the first one, over a socketpair at its fd 4).
 *
 * No step holds the control channel: it is close-on-exec and closed in each step's child, and
 * init is not dumpable, so /proc/1/fd is closed to the steps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"
#include "fileio.h"
#include "init.h"
#include "macro.h"
#include "report.h"
#include "sandbox.h"
#include "control.h"
#include "syscalls.h"
#include "written.h"

extern const char session_repl[]; /* session-repl.py, embedded at build time */

#define STEP_FDS                                                                                   \
    8                    /* of a step: its argv or code, stdout, stderr, its stdin if it has one,  \
                          * the copy-out stream and paths if it copies out, its copy-in stream,    \
                          * and a cell's outputs channel */
#define STEP_COPY_MAX 64 /* sources of one step's copy-out */

struct runner {
    const struct sandbox_plan *sb;
    int report_fd, control_fd, proc_fd;
    pid_t step;           /* the running program step, or 0 */
    bool code_step;       /* a Python step is running in the interpreter */
    pid_t repl;           /* the interpreter, or 0 */
    int repl_status;      /* how it ended (wait(2)'s status), once reaped */
    int repl_fd;          /* init's end of its socket, or -1 */
    uint32_t flags;       /* of the running step */
    uint64_t grace_until; /* a Python step interrupted: killed if it has not ended by then */
    bool interrupted;     /* the step's time was up: no copy-out, as after a run's timeout */
    int copy_fd;          /* the step's copy-out stream (a memfd), or -1 */
    char *copy_paths;     /* its sources, NUL-separated */
    size_t copy_size;
    struct copy_caps copy_caps;
    uint64_t memory;   /* the running program step's lower memory limit, or 0 (spawn()) */
    bool repl_lowered; /* the interpreter's RLIMIT_DATA was lowered for the running step */
    bool last;         /* the running step is the sandbox's last (SESSION_STEP_LAST) */
    int work_fd;       /* /work (O_PATH), or -1: files_written unknown */
    struct written_snapshot before; /* /work before the running step (written.h) */
};

static void init_send(struct runner *rn, const struct session_msg *m)
{
    /* Best effort: without the supervisor the sandbox dies of PR_SET_PDEATHSIG anyway. */
    (void)!send(rn->control_fd, m, sizeof(*m), MSG_NOSIGNAL);
}

/* Receive one message and up to STEP_FDS descriptors (close-on-exec). Returns the number of
 * fds, or -errno; -EPIPE when the supervisor is gone. */
static int control_recv(int fd, struct session_msg *m, int fds[STEP_FDS])
{
    union {
        char buf[CMSG_SPACE(STEP_FDS * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = u.buf,
                         .msg_controllen = sizeof(u.buf)};
    ssize_t n = RETRY_EINTR(recvmsg(fd, &msg, MSG_CMSG_CLOEXEC));
    int nfds = 0;

    if (n < 0)
        return negative_errno();
    if (n == 0)
        return -EPIPE;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            int *p = (int *)CMSG_DATA(c);
            for (size_t i = 0; i < k; i++) {
                if (nfds < STEP_FDS)
                    fds[nfds++] = p[i];
                else
                    (void)close(p[i]);
            }
        }
    if (n != sizeof(*m) || (msg.msg_flags & MSG_CTRUNC)) {
        for (int i = 0; i < nfds; i++)
            (void)close(fds[i]);
        return -EBADMSG;
    }
    return nfds;
}

/* The whole contents of memfd fd, NUL-terminated, or NULL. */
static char *read_memfd(int fd, size_t *ret_size)
{
    struct stat st;
    char *buf;
    size_t have = 0;

    if (fstat(fd, &st) < 0 || st.st_size < 0 || st.st_size > (64 << 20))
        return NULL;
    buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        return NULL;
    while (have < (size_t)st.st_size) {
        ssize_t n = RETRY_EINTR(pread(fd, buf + have, (size_t)st.st_size - have, (off_t)have));
        if (n <= 0) {
            free(buf);
            return NULL;
        }
        have += (size_t)n;
    }
    buf[have] = '\0';
    *ret_size = have;
    return buf;
}

/* Whether /proc/PID/stat says the process is a zombie (or is gone). */
static bool is_dead(int proc_fd, const char *pid)
{
    char path[sizeof(((struct dirent *)0)->d_name) + 8], buf[256];
    const char *state;

    (void)snprintf(path, sizeof(path), "%s/stat", pid);
    /* Gone (ENOENT/ESRCH) or a zombie is dead; a state that cannot be read is not: such a
     * process is killed all the same (fail closed). */
    switch (proc_stat_read(proc_fd, path, buf, sizeof(buf), &state)) {
    case 0:
        return state[0] == 'Z' || state[0] == 'X';
    case -ENOENT:
    case -ESRCH:
        return true;
    default:
        return false;
    }
}

/* Kill every process in the pid namespace but init and the interpreter, until none is left
 * alive: what a step forked, also what left its process group and session (a daemon). A
 * process killed now cannot fork again, so each pass finds only what was forked before the
 * last one's kills; the pids limit bounds how many that can be. kill(-1, SIGKILL) would do it
 * in one call (PID 1 is spared, kill(2)), but would take the interpreter too. */
static void kill_all_but_interpreter(struct runner *rn)
{
    for (int pass = 0; pass < 10000; pass++) {
        int fd = openat(rn->proc_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        struct dirent *de;
        int alive = 0;

        if (!d) {
            if (fd >= 0)
                (void)close(fd);
            if (!rn->repl)
                (void)kill(-1, SIGKILL);
            return;
        }
        while ((de = readdir(d))) {
            char *end;
            long pid = strtol(de->d_name, &end, 10);
            if (*end || pid <= 1 || pid == rn->repl || is_dead(rn->proc_fd, de->d_name))
                continue;
            (void)kill((pid_t)pid, SIGKILL);
            alive++;
        }
        closedir(d);
        if (alive == 0)
            return;
        if (pass > 0)
            (void)nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
}

/* Reap every child but the interpreter; note its death. */
static void reap(struct runner *rn, int *ret_step_status, bool *ret_step_done, bool *ret_repl_died)
{
    for (;;) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p <= 0)
            return;
        if (p == rn->step) {
            *ret_step_status = status;
            *ret_step_done = true;
        } else if (p == rn->repl) {
            rn->repl_status = status;
            *ret_repl_died = true;
        }
    }
}

static void repl_forget(struct runner *rn)
{
    if (rn->repl_fd >= 0)
        (void)close(rn->repl_fd);
    rn->repl_fd = -1;
    rn->repl = 0;
}

/* A step's copy-out, once everything it started is gone (the interpreter is spared: it is the
 * session's, and the steps trust each other, see README). Not after its timeout, as a run's
 * copy-out is not. */
static void step_copy_out(struct runner *rn, struct session_msg *m)
{
    const char *paths[STEP_COPY_MAX];
    size_t n = 0;
    struct report rep = {0};

    if (rn->copy_fd < 0)
        return;
    for (size_t i = 0; i < rn->copy_size && n < STEP_COPY_MAX; i += strlen(rn->copy_paths + i) + 1)
        if (rn->copy_paths[i] == '/' && strrchr(rn->copy_paths + i, '/')[1])
            paths[n++] = rn->copy_paths + i;
    if (!rn->interrupted) {
        (void)init_pack_out(paths, n, &rn->copy_caps, NULL, rn->copy_fd, &rep);
        m->flags |= rep.copy_taken ? SESSION_COPY_TAKEN : 0;
        m->copy_err = rep.copy_err;
        m->unlisted = rep.copy_unlisted;
        m->lost = rep.copy_lost;
    }
    (void)close(rn->copy_fd);
    rn->copy_fd = -1;
    free(rn->copy_paths);
    rn->copy_paths = NULL;
    rn->copy_size = 0;
}

/* The end of a step: nothing it started stays. */
static void step_end(struct runner *rn, int end, int code)
{
    struct session_msg m = {.type = SESSION_STEP_END, .end = end, .code = code, .flags = rn->flags};
    int status;
    bool done = false, died = false;

    if (rn->step > 0)
        (void)kill(-rn->step, SIGKILL);
    kill_all_but_interpreter(rn);
    reap(rn, &status, &done, &died);
    if (died)
        repl_forget(rn);
    /* An interpreter whose hard RLIMIT_DATA was lowered for this step cannot have it back
     * (raising a hard limit needs CAP_SYS_RESOURCE, setrlimit(2)): it goes, and the next code
     * step starts a fresh one with the session's limit. Not after the sandbox's last step:
     * nothing runs in it any more. */
    if (rn->repl_lowered && rn->repl && !rn->last) {
        (void)kill(rn->repl, SIGKILL);
        (void)waitpid(rn->repl, NULL, 0);
        repl_forget(rn);
        m.flags |= SESSION_INTERPRETER_LOWERED;
    }
    rn->repl_lowered = false;
    rn->last = false;
    rn->memory = 0;
    step_copy_out(rn, &m);
    /* The files the step wrote in /work, reported before its end (written.h). */
    if (rn->work_fd >= 0)
        written_report(rn->work_fd, &rn->before, rn->report_fd);
    written_snapshot_free(&rn->before);
    rn->interrupted = false;
    rn->step = 0;
    rn->code_step = false;
    rn->flags = 0;
    rn->grace_until = 0;
    init_send(rn, &m);
}

/* The step cannot run: its error (worded as a run's failed setup step: the supervisor puts it
 * in the step's result), and its end with status 125. REPORT_STEP_FAILED, not
 * REPORT_SETUP_FAILED, which would end the session: a copy-in that an earlier step's symlink
 * or a read-only target refuses is this step's error only. */
static void step_failed(struct runner *rn, int r, const char *name, const char *detail)
{
    struct report rep = {.type = REPORT_STEP_FAILED};

    (void)report_step_failed(&rep.step, r, name, "%s", detail);
    report_send(rn->report_fd, &rep);
    step_end(rn, SESSION_END_EXITED, 125);
}

/* The step's copy-in stream (a memfd its client packed), unpacked below "/" as a run's init
 * does (init_copy_in()): as the sandbox's uid, only where the sandbox can write, never through
 * a symlink (an earlier step's included). Returns 0, or -errno after step_failed(). */
static int step_copy_in(struct runner *rn, int fd)
{
    struct copy_caps caps = {0};
    _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int root_fds[1] = {root};
    char why[256] = "", detail[400];
    int r;

    if (root < 0) {
        r = -errno;
        step_failed(rn, r, "copy-in", "open /");
        return r;
    }
    r = copy_unpack(fd,
                    &(struct copy_target){.root_fds = root_fds, .n_roots = 1, .shown_prefix = "/"},
                    &caps, NULL, why, sizeof(why));
    if (r < 0) {
        (void)snprintf(detail, sizeof(detail), "%s%s", why,
                       r == -ENOSPC  ? "; the sandbox's --workdir-size or --tmpfs is full"
                       : r == -EROFS ? "; copy below /work, /tmp or another writable mount"
                                     : "");
        step_failed(rn, r, "copy-in", detail);
    }
    return r;
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            (void)close(fds[i]);
}

/* Whether the supervisor's interrupt (the step's time is up) came while init unpacked the
 * step's copy-in: it waits on the control channel, taken here. Sent on to the interpreter just
 * after the code, it would come before the code runs, when session-repl.py ignores SIGINT (one
 * between steps must not end it), and the code would run on past its time until the grace's
 * SIGKILL took the interpreter and its variables. */
static bool time_up_meanwhile(int control_fd)
{
    struct session_msg m;
    int fds[STEP_FDS];
    int n;

    if (recv(control_fd, &m, sizeof(m), MSG_PEEK | MSG_DONTWAIT) != (ssize_t)sizeof(m) ||
        m.type != SESSION_INTERRUPT)
        return false;
    n = control_recv(control_fd, &m, fds);
    if (n > 0)
        close_fds(fds, n);
    return true;
}

/* Fork a child of init that becomes argv: its own session (and so process group), without the
 * control channel or the interpreter's socket. */
static pid_t spawn(struct runner *rn, char **argv, int in, int out, int err, int extra_fd)
{
    pid_t pid = fork();

    if (pid == 0) {
        struct sandbox_plan step = *rn->sb;
        struct nsbox_config config = *rn->sb->config;
        /* A step's lower --memory: sandbox_payload_exec() sets RLIMIT_DATA from the config
         * under rlimits (soft and hard, in this child only: the interpreter is spawned with
         * rn->memory 0). With a cgroup the supervisor wrote the leaf's memory.max. */
        if (rn->memory) {
            struct rlimit fsize;
            config.memory = rn->memory;
            step.config = &config;
            /* ... and RLIMIT_FSIZE (a memfd's size too) as a run with that --memory has it. */
            if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && sandbox_fsize(&step) < fsize.rlim_max)
                fsize.rlim_max = sandbox_fsize(&step);
            fsize.rlim_cur = fsize.rlim_max;
            if (setrlimit(RLIMIT_FSIZE, &fsize) < 0)
                report_setup_failed(rn->report_fd,
                                    &(struct report_step){.err = errno, .name = "setrlimit"});
        }
        (void)close(rn->control_fd);
        if (rn->repl_fd >= 0 && rn->repl_fd != extra_fd)
            (void)close(rn->repl_fd);
        (void)close(rn->proc_fd);
        (void)setsid();
        step.argv = argv;
        sandbox_payload_exec(&step, in, out, err, rn->report_fd, extra_fd);
    }
    return pid;
}

static void run_program(struct runner *rn, const int *fds, int n, bool has_stdin)
{
    size_t size = 0, argc = 0;
    _cleanup_free_ char *text = read_memfd(fds[0], &size);
    char *argv[SESSION_STEP_MAX_ARGS + 1];

    if (text)
        for (size_t i = 0; i < size && argc < SESSION_STEP_MAX_ARGS; i += strlen(text + i) + 1)
            argv[argc++] = text + i;
    argv[argc] = NULL;
    if (argc == 0) {
        step_end(rn, SESSION_END_EXITED, 125);
        return;
    }
    rn->step = spawn(rn, argv, has_stdin && n > 3 ? fds[3] : -1, fds[1], fds[2], -1);
    if (rn->step < 0) {
        rn->step = 0;
        step_end(rn, SESSION_END_EXITED, 125);
    }
}

static int repl_start(struct runner *rn)
{
    int sp[2];
    char *argv[] = {"python3", "-c", (char *)session_repl, NULL};
    int null_fd;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return negative_errno();
    null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd < 0) {
        close_fds(sp, 2);
        return negative_errno();
    }
    rn->repl_fd = sp[0];
    rn->repl = spawn(rn, argv, -1, null_fd, null_fd, sp[1]);
    (void)close(sp[1]);
    (void)close(null_fd);
    if (rn->repl < 0) {
        repl_forget(rn);
        return -EAGAIN;
    }
    return 0;
}

/* fds: the code, stdout, stderr, then (n > 3) the stdin if has_stdin, then the outputs
 * channel if outputs_fd >= 0 (its descriptor is among fds, last). */
static void run_code(struct runner *rn, const int *fds, int n, bool has_stdin, int outputs_fd,
                     uint64_t outputs_limit, uint64_t memory)
{
    union {
        char buf[CMSG_SPACE(STEP_FDS * sizeof(int))];
        struct cmsghdr align;
    } u = {0};
    char text[64];
    /* "run", the letters of the descriptors after the first three (session-repl.py), and the
     * outputs' limit. */
    struct iovec iov = {.iov_base = text,
                        .iov_len = (size_t)snprintf(text, sizeof(text), "run%s%s %llu",
                                                    has_stdin ? "i" : "",
                                                    outputs_fd >= 0 ? "o" : "",
                                                    (unsigned long long)outputs_limit)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = u.buf,
                         .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

    if (!rn->repl) {
        /* A fresh one sets its own limits from the config as it starts (spawn()): with the
         * step's lower memory it is born under it, and no prlimit() from here can race with
         * its own setrlimit() (sandbox_payload_exec() sets the hard limit too). */
        rn->memory = memory;
        int r = repl_start(rn);
        rn->memory = 0;
        if (r < 0) {
            step_end(rn, SESSION_END_EXITED, 125);
            return;
        }
        rn->flags |= SESSION_INTERPRETER_NEW;
        rn->repl_lowered = memory != 0;
        memory = 0;
    }
    /* The step's lower memory limit, under rlimits: the interpreter's RLIMIT_DATA, soft and
     * hard. Only the soft one would be undone by the step's own code (resource.setrlimit() may
     * raise a soft limit up to the hard one, setrlimit(2)); a lowered hard limit cannot be
     * raised by anyone in the sandbox (no CAP_SYS_RESOURCE), so the code runs under it for
     * good, and step_end() ends this interpreter unless the step is the sandbox's last. Set by
     * init (same uid, prlimit(2)) before the code is sent: the session's preload and earlier
     * steps ran before it, never this step's code. */
    if (memory) {
        struct sandbox_plan step = *rn->sb;
        struct nsbox_config config = *rn->sb->config;
        uint64_t fsize;

        config.memory = memory;
        step.config = &config;
        fsize = sandbox_fsize(&step); /* as a run with that --memory has it (init_budgets()) */
        {
            struct rlimit now;
            if (prlimit(rn->repl, RLIMIT_FSIZE, NULL, &now) == 0 && now.rlim_max < fsize)
                fsize = now.rlim_max; /* lowered only, never raised */
        }
        rn->repl_lowered = true; /* from here on, maybe: ended after the step */
        if (prlimit(rn->repl, RLIMIT_DATA, &(struct rlimit){memory, memory}, NULL) < 0 ||
            prlimit(rn->repl, RLIMIT_FSIZE, &(struct rlimit){fsize, fsize}, NULL) < 0) {
            /* Not run above the limit it asked for (fail closed). */
            step_failed(rn, -errno, "setrlimit",
                        "RLIMIT_DATA and RLIMIT_FSIZE of the session's interpreter for the "
                        "step's memory limit");
            return;
        }
    }
    rn->repl_lowered |= memory != 0;
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
    rn->code_step = true;
    /* Never blocks init: an interpreter that does not take its step is as good as dead. */
    if (RETRY_EINTR(sendmsg(rn->repl_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0) {
        (void)kill(rn->repl, SIGKILL);
        rn->flags |= SESSION_INTERPRETER_CRASHED;
        repl_forget(rn);
        step_end(rn, SESSION_END_SIGNALED, SIGKILL);
    }
}

/* A code step whose interpreter died ends as the interpreter did: os._exit(3) is "exited with
 * status 3", a crash its signal (SIGSEGV), a kill SIGKILL; never a SIGKILL it did not get. */
static void step_end_interpreter_died(struct runner *rn, int status)
{
    rn->flags |= SESSION_INTERPRETER_CRASHED;
    if (WIFEXITED(status))
        step_end(rn, SESSION_END_EXITED, WEXITSTATUS(status));
    else
        step_end(rn, SESSION_END_SIGNALED, WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL);
}

/* The interpreter's answer: the step's exit status as decimal digits, or EOF. */
static void repl_answer(struct runner *rn)
{
    char buf[32];
    ssize_t n = RETRY_EINTR(recv(rn->repl_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT));
    char *end;
    long code;

    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0) {
        /* The interpreter is gone (or closed its socket): kill it, the step crashed. One
         * that is exiting already keeps its own status (the kill does not change it). */
        int status = W_EXITCODE(0, SIGKILL);
        (void)kill(rn->repl, SIGKILL);
        (void)waitpid(rn->repl, &status, 0);
        repl_forget(rn);
        if (rn->code_step)
            step_end_interpreter_died(rn, status);
        return;
    }
    if (!rn->code_step)
        return; /* not asked: the step's own code writing to the socket */
    buf[n] = '\0';
    if (buf[0] == 'E' && (rn->flags & SESSION_INTERPRETER_NEW)) {
        /* session-repl.py, started for this step, could not make itself non-dumpable: while it
         * is, a program step (same uid) can read and rewrite its memory through /proc/PID/mem.
         * It serves no step (fail closed); each code step tries a fresh one. Forged by the
         * step's own code, it ends only that step; from an older interpreter it means
         * nothing (status 1, as any answer that is not one). */
        code = strtol(buf + 1, &end, 10);
        (void)kill(rn->repl, SIGKILL);
        (void)waitpid(rn->repl, NULL, 0);
        repl_forget(rn);
        step_failed(rn, code > 0 && code < 4096 ? (int)-code : -EPERM, "prctl PR_SET_DUMPABLE",
                    "the session's Python interpreter cannot make itself non-dumpable, so its "
                    "memory would be open to program steps; it needs ctypes in the rootfs's "
                    "Python and prctl allowed by the seccomp policy");
        return;
    }
    code = strtol(buf, &end, 10);
    if (end == buf || code < 0 || code > 255)
        code = 1;
    if (*end == 'i')
        rn->flags |= SESSION_INTERPRETER_INTERRUPTED;
    step_end(rn, SESSION_END_EXITED, (int)code);
}

static void interrupt(struct runner *rn)
{
    /* (One that comes after the step's end, which crossed it on the channel, is not the next
     * step's.) */
    if (rn->step > 0 || rn->code_step)
        rn->interrupted = true;
    if (rn->step > 0) {
        /* The step's time is up: its group now, the rest at its end. */
        (void)kill(-rn->step, SIGKILL);
        (void)kill(rn->step, SIGKILL);
    } else if (rn->code_step && rn->repl > 0 && !rn->grace_until) {
        (void)kill(rn->repl, SIGINT);
        rn->grace_until = now_usec() + SESSION_INTERRUPT_GRACE_USEC;
    }
}

/* The session ends between steps and its workspace is to be saved: the copy-out of a run
 * (init.c), with the interpreter and everything else killed first. Init then waits for its
 * end (the supervisor kills it). */
static void save(struct runner *rn, int copy_out_fd)
{
    struct report rep = {0};
    struct session_msg m = {.type = SESSION_SAVED, .code = EBADF};

    if (copy_out_fd >= 0) {
        init_copy_out(rn->sb, copy_out_fd, &rep);
        repl_forget(rn);
        rn->step = 0;
        rn->code_step = false;
        m.code = rep.copy_err;
        m.flags = rep.copy_taken ? 1 : 0;
        m.unlisted = rep.copy_unlisted;
        m.lost = rep.copy_lost;
    }
    init_send(rn, &m);
}

_noreturn_ void session_init(const struct sandbox_plan *sb, const sigset_t *mask, int report_fd,
                             int shm_fd, int control_fd, int copy_out_fd)
{
    struct runner rn = {.sb = sb,
                        .report_fd = report_fd,
                        .control_fd = control_fd,
                        .repl_fd = -1,
                        .copy_fd = -1,
                        .work_fd = -1};
    struct session_msg ready = {.type = SESSION_READY};
    int sigfd;

    (void)shm_fd;
    rn.proc_fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rn.proc_fd < 0)
        report_setup_failed(report_fd, &(struct report_step){.err = errno, .name = "open /proc"});
    sigfd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd < 0)
        report_setup_failed(report_fd, &(struct report_step){.err = errno, .name = "signalfd"});
    rn.work_fd = open("/work", O_PATH | O_DIRECTORY | O_CLOEXEC);
    init_send(&rn, &ready);

    for (;;) {
        struct pollfd p[3] = {
            {.fd = control_fd, .events = POLLIN},
            {.fd = sigfd, .events = POLLIN},
            {.fd = rn.repl_fd, .events = POLLIN},
        };
        int timeout = -1;

        if (rn.grace_until) {
            uint64_t now = now_usec();
            timeout = now >= rn.grace_until ? 0 : (int)((rn.grace_until - now) / 1000 + 1);
        }
        if (poll(p, 3, timeout) < 0 && errno != EINTR)
            _exit(125);

        if (p[1].revents) {
            struct signalfd_siginfo si;
            int status = 0;
            bool done = false, died = false;
            while (read(sigfd, &si, sizeof(si)) == sizeof(si))
                ; /* SIGCHLD; others (the supervisor's SIGINT etc.) mean nothing here */
            reap(&rn, &status, &done, &died);
            if (died) {
                repl_forget(&rn);
                if (rn.code_step)
                    step_end_interpreter_died(&rn, rn.repl_status);
            }
            if (done)
                step_end(&rn, WIFSIGNALED(status) ? SESSION_END_SIGNALED : SESSION_END_EXITED,
                         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        }
        if (rn.repl_fd >= 0 && p[2].fd == rn.repl_fd && p[2].revents)
            repl_answer(&rn);
        if (rn.grace_until && now_usec() >= rn.grace_until && rn.code_step) {
            /* It did not stop on KeyboardInterrupt: a fresh one for the next step. */
            (void)kill(rn.repl, SIGKILL);
            (void)waitpid(rn.repl, NULL, 0);
            repl_forget(&rn);
            rn.flags |= SESSION_INTERPRETER_RESTARTED;
            step_end(&rn, SESSION_END_SIGNALED, SIGKILL);
        }
        if (p[0].revents) {
            struct session_msg m;
            int fds[STEP_FDS] = {-1, -1, -1, -1};
            int n = control_recv(control_fd, &m, fds);

            if (n == -EPIPE || (n < 0 && n != -EBADMSG && n != -EAGAIN))
                _exit(0); /* the supervisor is gone: the kernel kills the rest */
            if (n < 0)
                continue;
            if (m.type == SESSION_INTERRUPT)
                interrupt(&rn);
            else if (m.type == SESSION_SAVE && !rn.step && !rn.code_step)
                save(&rn, copy_out_fd);
            else if ((m.type == SESSION_RUN || m.type == SESSION_CODE) && n >= 3 && !rn.step &&
                     !rn.code_step) {
                /* fds: argv or code, out, err, [stdin], [copy-out stream, its paths] */
                int step_n = (m.flags & SESSION_STEP_STDIN) && n > 3 ? 4 : 3;
                int outputs_fd = -1, in_at = step_n + ((m.flags & SESSION_STEP_COPY_OUT) ? 2 : 0);
                if (m.type == SESSION_CODE && (m.flags & SESSION_STEP_OUTPUTS) && n > step_n)
                    outputs_fd = fds[n - 1];
                if ((m.flags & SESSION_STEP_COPY_OUT) && n >= step_n + 2 + (outputs_fd >= 0)) {
                    rn.copy_paths = read_memfd(fds[step_n + 1], &rn.copy_size);
                    if (rn.copy_paths) {
                        rn.copy_fd = fds[step_n];
                        fds[step_n] = -1;
                        rn.copy_caps = (struct copy_caps){.max_bytes = m.copy_max_bytes,
                                                          .max_files = m.copy_max_files};
                    }
                }
                uint64_t memory = 0;
                rn.last = (m.flags & SESSION_STEP_LAST) != 0;
                /* /work as the step finds it (written.h; best effort): taken again after its
                 * copy-in, whose files are not what it wrote. */
                written_snapshot_free(&rn.before);
                if (rn.work_fd >= 0)
                    (void)written_snapshot_take(rn.work_fd, &rn.before);
                if (m.flags & SESSION_STEP_COPY_IN) {
                    /* Asked for and not come whole, or not unpacked: the step's error. */
                    if (in_at >= n - (outputs_fd >= 0)) {
                        step_failed(&rn, -EBADMSG, "copy-in", "the stream did not come");
                        close_fds(fds, n);
                        continue;
                    }
                    if (step_copy_in(&rn, fds[in_at]) < 0) {
                        close_fds(fds, n);
                        continue;
                    }
                    written_snapshot_free(&rn.before);
                    if (rn.work_fd >= 0)
                        (void)written_snapshot_take(rn.work_fd, &rn.before);
                    if (time_up_meanwhile(control_fd)) {
                        /* Ended as an interrupted step of its kind ends: the interpreter, which
                         * never saw the code, keeps its variables. */
                        rn.interrupted = true;
                        if (m.type == SESSION_CODE) {
                            rn.flags |= SESSION_INTERPRETER_INTERRUPTED;
                            step_end(&rn, SESSION_END_EXITED, 1);
                        } else
                            step_end(&rn, SESSION_END_SIGNALED, SIGKILL);
                        close_fds(fds, n);
                        continue;
                    }
                }
                /* A lower memory limit than the sandbox's, under rlimits (with a cgroup the
                 * supervisor lowered the leaf's memory.max). */
                if (m.memory && !rn.sb->in_cgroup &&
                    (!rn.sb->config->memory || m.memory < rn.sb->config->memory))
                    memory = m.memory;
                if (m.type == SESSION_RUN) {
                    rn.memory = memory;
                    run_program(&rn, fds, step_n, step_n > 3);
                } else {
                    int code_fds[STEP_FDS], k = 0;
                    for (int i = 0; i < step_n; i++)
                        code_fds[k++] = fds[i];
                    if (outputs_fd >= 0)
                        code_fds[k++] = outputs_fd;
                    run_code(&rn, code_fds, k, step_n > 3, outputs_fd, m.outputs_limit, memory);
                }
            }
            close_fds(fds, n);
        }
    }
}
