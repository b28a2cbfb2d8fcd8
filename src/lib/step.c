/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One step of a started sandbox (lifecycle.h): its start on the sandbox's init (its code, stdin
 * and copy-out paths in sealed memfds, its stdout and stderr pipes, which the supervisor reads,
 * supervise.h), its end into a result, or its cut when the sandbox ends during it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "config-check.h"
#include "fileio.h"
#include "headtail.h"
#include "lifecycle.h"
#include "log.h"
#include "macro.h"
#include "outputs.h"
#include "proxy.h"
#include "report.h"
#include "syscalls.h"

void result_add_warning(struct nsbox_result *ret, const char *text)
{
    report_add_warning(ret, false, text);
}

/* A warning that explains the step's outcome (nsbox_result.outcome_warnings). */
static void result_add_outcome(struct nsbox_result *ret, const char *text)
{
    report_add_warning(ret, true, text);
}

/* A memfd holding data, for a step to read (its code, its stdin): sealed whole (no write, no
 * size change, no more seals) and never executable. Made here, outside the sandbox, it is not
 * under the sandbox's vm.memfd_noexec: unsealed, a step of root's session could rewrite it
 * with a program and execve() it through /proc/self/fd, where nothing else it can write is
 * executable. MFD_NOEXEC_SEAL (Linux 6.3) makes it 0666 without x and seals that
 * (F_SEAL_EXEC); before 6.3 it is made 0444 (a step of root's session does not own it, so
 * cannot chmod it back), and the write seals hold the content. memfd_create(2), fcntl(2). */
static int memfd_with(const char *data, size_t size)
{
    int fd = memfd_create("nsbox-step", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
    size_t done = 0;

    if (fd < 0 && errno == EINVAL)
        fd = memfd_create("nsbox-step", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return negative_errno();
    if (fchmod(fd, 0444) < 0) {
        (void)close(fd);
        return -EIO;
    }
    while (done < size) {
        ssize_t n = RETRY_EINTR(write(fd, data + done, size - done));
        if (n <= 0) {
            (void)close(fd);
            return -EIO;
        }
        done += (size_t)n;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        (void)close(fd);
        return -EIO;
    }
    /* One open file description for all: the interpreter reads it from the start. */
    if (lseek(fd, 0, SEEK_SET) < 0) {
        (void)close(fd);
        return -EIO;
    }
    return fd;
}

/* The leaf's memory.max for a step's lower limit, and memory.swap.max 0, as a run's leaf has
 * them (cgroup_leaf_create()): the kernel reclaims down to the new value at once, or its OOM
 * killer ends what holds more (memory.max in the kernel's cgroup-v2.rst). Returns 0 or -errno. */
static int leaf_memory(const struct nsbox_sandbox *x, uint64_t bytes)
{
    char value[32] = "max";
    int r;

    if (bytes)
        (void)snprintf(value, sizeof(value), "%" PRIu64, bytes);
    r = write_file_at(x->leaf.dir_fd, "memory.max", value);
    if (r >= 0 && bytes && !x->c.memory) {
        /* Without the sandbox's own limit, swap was not limited either. */
        r = write_file_at(x->leaf.dir_fd, "memory.swap.max", "0");
        if (r == -ENOENT)
            r = 0; /* no swap accounting: no swap to limit */
    }
    return r;
}

/* After a step that lowered it: the sandbox's own memory.max again, for the next step. A
 * failure leaves the lower limit (the safe side) and is said on the caller's log. */
static void step_memory_restore(struct nsbox_sandbox *x)
{
    int r = leaf_memory(x, x->c.memory);

    if (r >= 0 && !x->c.memory) {
        r = write_file_at(x->leaf.dir_fd, "memory.swap.max", "max");
        if (r == -ENOENT)
            r = 0;
    }
    if (r < 0)
        log_error_errno(r, "cannot put back the cgroup's memory.max after a step with a lower "
                           "--memory (%m): the next steps keep the lower limit");
    x->step.memory_lowered = false;
}

void step_state_clear(struct nsbox_sandbox *x)
{
    struct step_state *st = &x->step;

    for (int i = 0; i < 2; i++) {
        struct stream_state *ss = &x->sv.streams[i];
        if (ss->fd >= 0)
            (void)close(ss->fd);
        ss->fd = -1;
        headtail_done(&ss->kept);
        ss->s = NULL;
    }
    if (st->copy_fd >= 0)
        (void)close(st->copy_fd);
    if (st->outputs_fd >= 0)
        (void)close(st->outputs_fd);
    if (st->memory_lowered)
        step_memory_restore(x);
    nsbox_result_free(&st->ret);
    *st = (struct step_state){.copy_fd = -1, .outputs_fd = -1};
}

/* The argv of a program step, NUL-separated, in a new buffer of *size bytes; NULL: no memory
 * or too many arguments (*size 0). */
static char *argv_pack(char *const *argv, size_t *size)
{
    size_t n = 0, len = 0, at = 0;
    char *buf;

    *size = 0;
    for (; argv[n]; n++) {
        if (n >= NSBOX_STEP_MAX_ARGS)
            return NULL;
        len += strlen(argv[n]) + 1;
    }
    buf = malloc(len ? len : 1);
    for (size_t i = 0; buf && i < n; i++) {
        size_t l = strlen(argv[i]) + 1;
        memcpy(buf + at, argv[i], l);
        at += l;
    }
    *size = len;
    return buf;
}

/* The step could not start: its result says why; the sandbox goes on. Returns -EIO. */
static int step_refuse(struct nsbox_sandbox *x, struct nsbox_result *ret, int err, const char *text)
{
    *ret = x->step.ret;
    x->step.ret = (struct nsbox_result){0};
    (void)report_error(ret, -err, "step", "%s: %m; the step does not run", text);
    step_state_clear(x);
    return -EIO;
}

int nsbox_sandbox_step_begin(struct nsbox_sandbox *x, const struct nsbox_step *q,
                             struct nsbox_result *ret)
{
    struct step_state *st = &x->step;
    const struct nsbox_result *run = &x->run;
    struct session_msg m;
    int out[2] = {-1, -1}, err[2] = {-1, -1}, payload_fd = -1, in_fd = -1, paths_fd = -1, r;
    int fds[8], nfds = 3;
    _cleanup_free_ char *packed = NULL;
    const char *payload = q->code;
    size_t payload_size = q->code_size;

    *ret = (struct nsbox_result){0};
    if (x->ended)
        return report_error(ret, -ESHUTDOWN, "session",
                            "the sandbox has ended: only nsbox_sandbox_stop() is left");
    if (st->active)
        return report_error(ret, -EBUSY, "step", "a step runs: one at a time");
    if (!q->code && (!q->argv || !q->argv[0]))
        return report_config_error(ret, -EINVAL, "a step needs code or a program (argv)");
    if (q->memory && x->c.memory && q->memory > x->c.memory)
        return report_config_error(ret, -EINVAL,
                                   "a step's memory (%llu bytes) may not be above the "
                                   "sandbox's (%llu bytes)",
                                   (unsigned long long)q->memory, (unsigned long long)x->c.memory);
    /* What config_check() refuses in a run's config, refused in a step's too: a memory limit
     * below the floor (a cgroup's memory.max that low is the whole sandbox's, init's too), an
     * output limit past 1 GiB (kept in this process, outside every limit of the sandbox). */
    if (q->memory && q->memory < NSBOX_MEMORY_MIN)
        return report_config_error(ret, -EINVAL,
                                   "a step's memory must be at least 6 MiB (%llu bytes given), "
                                   "or 0: the sandbox's",
                                   (unsigned long long)q->memory);
    if (q->output_limit > (1ULL << 30))
        return report_config_error(ret, -EINVAL, "a step's output limit must be at most 1 GiB");
    /* The copy-in stream must be a memfd sealed against change, as `nsbox session` checks a
     * client's: init reads it whole, and any other descriptor (a step zeroed and copy_in_fd
     * left 0: the caller's stdin) would be read by the sandbox's init. fcntl(2) F_GET_SEALS
     * fails (EINVAL) on what is not a memfd. */
    if (q->copy_in_fd >= 0) {
        const int need = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
        int seals = fcntl(q->copy_in_fd, F_GET_SEALS);
        if (seals < 0 || (seals & need) != need)
            return report_config_error(ret, -EINVAL,
                                       "a step's copy_in_fd must be a memfd sealed against "
                                       "writes and size changes (-1: none)");
    }
    if (!q->code) {
        packed = argv_pack(q->argv, &payload_size);
        if (!packed && payload_size)
            return report_error(ret, -ENOMEM, "step", "out of memory");
        if (!packed)
            return report_config_error(ret, -EINVAL, "a step takes at most %d arguments",
                                       NSBOX_STEP_MAX_ARGS);
        payload = packed;
    }
    if (x->copy_out_fd >= 0) {
        (void)close(x->copy_out_fd);
        x->copy_out_fd = -1;
    }
    step_state_clear(x);
    st->active = true;
    st->code = q->code != NULL;
    st->timeout = q->timeout;
    st->copy_asked = q->copy_out && q->copy_out_size;
    m = (struct session_msg){.type = st->code ? SESSION_CODE : SESSION_RUN};
    /* The sandbox's limits, as its setup placed them; the step's own clock and output. */
    st->ret = (struct nsbox_result){
        .memory = {q->memory ? q->memory : run->memory.value, run->memory.enforced_by},
        .pids_limit = run->pids_limit,
        .cpus = run->cpus,
        .timeout = {q->timeout, NSBOX_ENFORCER_NONE},
        .output_limit = q->output_limit ? q->output_limit : x->c.output_limit,
        .host_uid = run->host_uid,
        .host_gid = run->host_gid,
        .seccomp_reporting = run->seccomp_reporting,
        .workdir_size = run->workdir_size,
    };
    memcpy(st->ret.limits_note, run->limits_note, sizeof(st->ret.limits_note));
    memcpy(st->ret.name, run->name, sizeof(st->ret.name));
    if (q->memory && (!x->c.memory || q->memory < x->c.memory) &&
        run->memory.enforced_by == NSBOX_ENFORCER_RLIMIT) {
        /* What a lower --memory of a step changes under rlimits, and what it cannot: the
         * System V budget (kernel.shmall) is the IPC namespace's, set once at the start. */
        size_t len = strlen(st->ret.limits_note);
        (void)snprintf(st->ret.limits_note + len, sizeof(st->ret.limits_note) - len,
                       "%sthis step's --memory %" PRIu64 "m lowers RLIMIT_DATA and RLIMIT_FSIZE "
                       "of its processes (or of the interpreter); System V shared memory stays "
                       "within the sandbox's own --memory (%" PRIu64 " MiB, 0: unlimited)",
                       len ? "; " : "", q->memory >> 20, x->c.memory >> 20);
    }
    x->steps++;
    /* A lower memory limit for this step: the leaf's, written before the step exists (fail
     * closed: not run above the limit it asked for); under rlimits init sets it. */
    if (x->sb.in_cgroup && q->memory && (!x->c.memory || q->memory < x->c.memory)) {
        r = leaf_memory(x, q->memory);
        st->memory_lowered = true; /* also half-written: put back */
        if (r < 0)
            return step_refuse(x, ret, -r,
                               "cannot write the cgroup's memory.max for the step's --memory");
    }
    if (x->sb.in_cgroup)
        cgroup_leaf_stats(&x->leaf, &st->before);
    payload_fd = memfd_with(payload, payload_size);
    /* Its stdin, whole, in a memfd of its own (a file it reads to its end). */
    if (payload_fd >= 0 && q->has_stdin) {
        in_fd = memfd_with(q->stdin_data, q->stdin_size);
        if (in_fd < 0) {
            (void)close(payload_fd);
            payload_fd = in_fd;
        }
    }
    /* With copy_out: the stream init writes when the step has ended, and the paths. */
    if (payload_fd >= 0 && st->copy_asked) {
        st->copy_fd = memfd_create("nsbox-copy-out", MFD_CLOEXEC);
        paths_fd = st->copy_fd < 0 ? negative_errno() : memfd_with(q->copy_out, q->copy_out_size);
        if (paths_fd < 0) {
            (void)close(payload_fd);
            if (in_fd >= 0)
                (void)close(in_fd);
            in_fd = -1;
            payload_fd = paths_fd;
        }
    }
    /* Non-blocking on our read ends only: O_NONBLOCK of pipe2() would be on the write ends the
     * step gets too, and a step writing faster than we read would meet EAGAIN and lose output
     * that the result then called complete. */
    if (payload_fd < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
        fcntl(out[0], F_SETFL, O_NONBLOCK) < 0 || fcntl(err[0], F_SETFL, O_NONBLOCK) < 0) {
        r = payload_fd < 0 ? payload_fd : negative_errno();
        if (payload_fd >= 0)
            (void)close(payload_fd);
        if (in_fd >= 0)
            (void)close(in_fd);
        if (paths_fd >= 0)
            (void)close(paths_fd);
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0)
                (void)close(out[i]);
            if (err[i] >= 0)
                (void)close(err[i]);
        }
        return step_refuse(x, ret, -r, "the supervisor cannot start the step");
    }
    /* A code step's outputs channel: the interpreter's, for this step only (last). */
    if (st->code) {
        st->outputs_fd = memfd_create("nsbox-outputs", MFD_CLOEXEC);
        if (st->outputs_fd < 0)
            result_add_warning(&st->ret, "the cell's outputs channel could not be made: its "
                                         "outputs are missing");
    }
    fds[0] = payload_fd;
    fds[1] = out[1];
    fds[2] = err[1];
    if (in_fd >= 0) {
        fds[nfds++] = in_fd;
        m.flags |= SESSION_STEP_STDIN;
    }
    if (paths_fd >= 0) {
        fds[nfds++] = st->copy_fd;
        fds[nfds++] = paths_fd;
        m.flags |= SESSION_STEP_COPY_OUT;
        m.copy_max_bytes = q->copy_out_max_bytes ? q->copy_out_max_bytes : x->c.copy_out_max_bytes;
        m.copy_max_files = q->copy_out_max_files ? q->copy_out_max_files : x->c.copy_out_max_files;
    }
    /* The copy-in stream its caller packed (a sealed memfd: `nsbox session` checks it). */
    if (q->copy_in_fd >= 0) {
        fds[nfds++] = q->copy_in_fd;
        m.flags |= SESSION_STEP_COPY_IN;
    }
    m.memory = q->memory;
    /* The sandbox's last step (a pool's member): a limit lowered for it needs no undoing. */
    if (q->last) {
        m.flags |= SESSION_STEP_LAST;
        st->memory_lowered = false;
    }
    if (st->outputs_fd >= 0) {
        fds[nfds++] = st->outputs_fd;
        m.flags |= SESSION_STEP_OUTPUTS;
        m.outputs_limit = OUTPUTS_LIMIT_DEFAULT;
    }
    /* The read ends are the supervisor's streams now (closed with the step). */
    r = supervisor_step_streams(&x->sv, out[0], err[0], &st->ret, st->ret.output_limit,
                                q->on_output, q->userdata);
    if (r >= 0)
        r = control_send(x->control[0], &m, fds, nfds);
    else
        r = -ENOMEM;
    if (in_fd >= 0)
        (void)close(in_fd);
    if (paths_fd >= 0)
        (void)close(paths_fd);
    (void)close(payload_fd);
    (void)close(out[1]);
    (void)close(err[1]);
    if (r == -ENOMEM)
        return step_refuse(x, ret, ENOMEM, "the supervisor cannot start the step");
    st->start = now_usec();
    st->kill_at = q->timeout ? st->start + q->timeout : UINT64_MAX;
    if (r < 0) {
        /* init cannot be reached: the sandbox is over, and the step with it. */
        x->ended = true;
        return report_error(ret, -ESHUTDOWN, "session",
                            "the sandbox's init cannot be reached: the sandbox has ended");
    }
    return 0;
}

void nsbox_sandbox_step_interrupt(struct nsbox_sandbox *x)
{
    struct session_msg m = {.type = SESSION_INTERRUPT};

    if (!x->step.active || x->step.done || x->step.ended || x->step.interrupted)
        return;
    (void)control_send(x->control[0], &m, NULL, 0);
    x->step.interrupted = true;
}

/* What the step's end says, once it ended and its pipes are read: the copy-out, the cell's
 * outputs, how it ended, the interpreter. */
static void step_outcome(struct nsbox_sandbox *x)
{
    struct step_state *st = &x->step;
    struct nsbox_result *ret = &st->ret;
    uint32_t flags = st->end.flags;

    if (st->copy_asked) {
        /* As a run's: copied only when the step ended by itself; the caller unpacks it. */
        ret->copy_out_asked = true;
        if (ret->status != NSBOX_STATUS_ERROR && st->ended && !st->interrupted &&
            (flags & SESSION_COPY_TAKEN) && st->end.copy_err == 0) {
            ret->copy_out_done = true;
            ret->skipped_more += st->end.unlisted;
            ret->copy_out_lost += st->end.lost;
        } else if (st->ended && (flags & SESSION_COPY_TAKEN)) {
            char text[300];
            (void)snprintf(text, sizeof(text),
                           "copy-out failed inside the sandbox: %s%s; nothing was copied out",
                           strerror(st->end.copy_err),
                           st->end.copy_err == EFBIG
                               ? " (the stream passed RLIMIT_FSIZE: lower --copy-out-max-bytes "
                                 "or raise --memory)"
                           : st->end.copy_err == EOPNOTSUPP
                               ? " (libarchive, which nsbox loads for copies, could not be "
                                 "loaded when the session started)"
                               : "");
            report_add_warning(ret, true, text);
        } else
            result_add_warning(ret, "nothing was copied out: the step did not end by itself "
                                    "(its timeout, or the session's end)");
    }
    /* A code step is a notebook cell: its outputs, as the driver wrote them (outputs.h). */
    if (st->outputs_fd >= 0 && ret->status != NSBOX_STATUS_ERROR) {
        int r;
        ret->cell = true;
        ret->outputs_limit = OUTPUTS_LIMIT_DEFAULT;
        r = outputs_read(st->outputs_fd, ret->outputs_limit, ret);
        if (r < 0) {
            char text[200];
            (void)snprintf(text, sizeof(text),
                           "the cell's outputs could not be read: %s; they are missing",
                           strerror(-r));
            result_add_warning(ret, text);
        }
    }
    if (st->code)
        ret->interpreter = flags & SESSION_INTERPRETER_RESTARTED ? NSBOX_INTERPRETER_RESTARTED
                           : flags & SESSION_INTERPRETER_CRASHED ? NSBOX_INTERPRETER_CRASHED
                           : flags & SESSION_INTERPRETER_NEW     ? NSBOX_INTERPRETER_STARTED
                                                                 : NSBOX_INTERPRETER_KEPT;
    /* --network allow=: the sandbox's proxy report so far (every step's connections). */
    if (x->proxy)
        proxy_report_snapshot(x->proxy, &ret->network);
}

void step_state_finish(struct nsbox_sandbox *x)
{
    struct step_state *st = &x->step;
    struct nsbox_result *ret = &st->ret;
    uint64_t now = now_usec();

    if (!ret->wall_time)
        ret->wall_time = now - st->start;
    /* Read what an exec failure reported (written before the step's process exited). */
    x->sv.ret = ret;
    x->sv.take_written = true;
    supervisor_reports(&x->sv);
    /* The streams, read as far as they will be (what the pipes hold past the drain's grace,
     * at most their capacity; one not at EOF is incomplete); the tails join the heads. */
    supervisor_streams_finish(&x->sv);
    sandbox_describe_rootfs(x->sb.rootfs, ret);
    st->done = true;
    if (ret->status == NSBOX_STATUS_ERROR) {
        step_outcome(x);
        return;
    }
    if (x->sb.in_cgroup) {
        const struct nsbox_cgroup_stats *b = &st->before;
        /* The leaf is the sandbox's: what this step added (the peak is the sandbox's). */
        cgroup_leaf_stats(&x->leaf, &ret->cgroup);
        ret->cgroup.oom_kills -= b->oom_kills < ret->cgroup.oom_kills ? b->oom_kills
                                                                      : ret->cgroup.oom_kills;
        ret->cgroup.pids_limit_hits -= b->pids_limit_hits < ret->cgroup.pids_limit_hits
                                           ? b->pids_limit_hits
                                           : ret->cgroup.pids_limit_hits;
        ret->cgroup.cpu_user -= b->cpu_user < ret->cgroup.cpu_user ? b->cpu_user
                                                                   : ret->cgroup.cpu_user;
        ret->cgroup.cpu_system -= b->cpu_system < ret->cgroup.cpu_system ? b->cpu_system
                                                                         : ret->cgroup.cpu_system;
    }
    if (st->interrupted) {
        ret->status = NSBOX_STATUS_TIMEOUT;
        ret->timeout.enforced_by = NSBOX_ENFORCER_NONE;
    } else if (st->end.end == SESSION_END_SIGNALED) {
        ret->status = NSBOX_STATUS_SIGNALED;
        ret->signal = st->end.code;
        /* The cgroup's OOM killer sends SIGKILL; memory.events says it was the OOM killer. */
        if (ret->cgroup.oom_kills > 0 && st->end.code == SIGKILL)
            ret->status = NSBOX_STATUS_OOM;
    } else {
        ret->status = NSBOX_STATUS_EXITED;
        ret->exit_code = st->end.code;
    }
    if (st->end.flags & SESSION_INTERPRETER_RESTARTED)
        result_add_outcome(ret,
                           "the step's time was up and the Python interpreter did not stop on "
                           "KeyboardInterrupt within 2 s: it was killed; the next step starts a "
                           "fresh interpreter (variables, imports and open files are lost)");
    if (st->end.flags & SESSION_INTERPRETER_LOWERED)
        result_add_outcome(ret, "the step's --memory was below the session's: the Python "
                                "interpreter ran it under that lower limit, which it could not "
                                "get rid of again, so it was ended; the next code step starts a "
                                "fresh one (variables, imports and open files are lost)");
    if (st->end.flags & SESSION_INTERPRETER_CRASHED)
        result_add_outcome(ret,
                           ret->cpus.enforced_by == NSBOX_ENFORCER_RLIMIT
                               ? "the session's Python interpreter died during the step (a crash, "
                                 "os._exit(), or its CPU time: under rlimits, --cpus x --timeout "
                                 "is the "
                                 "interpreter's RLIMIT_CPU, and its CPU time adds up over every "
                                 "step it "
                                 "served; a cgroup's cpu.max has no such total); the next step "
                                 "starts a "
                                 "fresh one (variables, imports and open files are lost)"
                               : "the session's Python interpreter died during the step (a crash, "
                                 "os._exit(), or a limit); the next step starts a fresh one "
                                 "(variables, "
                                 "imports and open files are lost)");
    step_outcome(x);
}

int nsbox_sandbox_step_end(struct nsbox_sandbox *x, struct nsbox_result *ret)
{
    struct step_state *st = &x->step;

    if (!st->active || !st->done)
        return -ESRCH;
    *ret = st->ret;
    st->ret = (struct nsbox_result){0};
    /* The streams' records pointed into the result just handed over. */
    for (int i = 0; i < 2; i++)
        x->sv.streams[i].s = NULL;
    if (ret->copy_out_done) {
        x->copy_out_fd = st->copy_fd;
        st->copy_fd = -1;
    }
    step_state_clear(x);
    return 0;
}

int nsbox_sandbox_step_cut(struct nsbox_sandbox *x, struct nsbox_result *ret)
{
    struct step_state *st = &x->step;

    if (!st->active)
        return -ESRCH;
    if (!st->done) {
        if (!st->ret.wall_time)
            st->ret.wall_time = now_usec() - st->start;
        if (st->ended && st->ret.status != NSBOX_STATUS_ERROR)
            step_state_finish(x); /* it had ended: only its pipes were still being read */
        else {
            /* What the pipes hold now is kept; the rest is lost with the sandbox. */
            supervisor_streams_finish(&x->sv);
            if (!x->ended)
                st->ret.status = NSBOX_STATUS_KILLED;
            else if (st->ret.status != NSBOX_STATUS_ERROR) {
                (void)report_error(&st->ret, 0, "session",
                                   "the session's sandbox ended during the step; the session is "
                                   "over");
            }
            sandbox_describe_rootfs(x->sb.rootfs, &st->ret);
            step_outcome(x);
            st->done = true;
        }
    }
    return nsbox_sandbox_step_end(x, ret);
}

int nsbox_sandbox_step_copy_out(struct nsbox_sandbox *x)
{
    int fd = x->copy_out_fd;

    if (fd < 0)
        return -ENOENT;
    x->copy_out_fd = -1;
    (void)lseek(fd, 0, SEEK_SET);
    return fd;
}
