/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One step of a session (session-internal.h): its start on the sandbox's init (its code, stdin
 * and copy-out paths in sealed memfds, its stdout and stderr pipes), its pipes read, its end,
 * its result answered to its client, or its cut when the session ends during it. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "cgroup.h"
#include "fileio.h"
#include "headtail.h"
#include "log.h"
#include "macro.h"
#include "outputs.h"
#include "proxy.h"
#include "registry.h"
#include "report.h"
#include "result.h"
#include "sandbox.h"
#include "session-internal.h"
#include "session.h"
#include "syscalls.h"

#include "session-internal.h"

/* ---- one step's pipes --------------------------------------------------------------------- */

ssize_t stream_read(struct stream *x, char *buf)
{
    ssize_t n = RETRY_EINTR(read(x->fd, buf, READ_CHUNK));

    if (n <= 0) {
        if (n < 0 && errno == EAGAIN)
            return 0;
        (void)close(x->fd);
        x->fd = -1;
        return 0;
    }
    /* As for a run (supervise.c): the start and the end of the stream, their JSON string
     * within JSON_OUTPUT_FACTOR x the limit, whatever the bytes are (headtail.h). */
    (void)headtail_add(&x->kept, buf, (size_t)n);
    return n;
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

void add_warning(struct nsbox_result *ret, const char *text)
{
    report_add_warning(ret, false, text);
}

void add_outcome_warning(struct nsbox_result *ret, const char *text)
{
    report_add_warning(ret, true, text);
}

/* With an audit log: its start record for the step, as for a run (audit.h), its own run id,
 * nsbox's argv given as `nsbox session exec SESSION-ID step N`. Returns 0 or -errno. */
static int audit_step_start(struct session_state *s, const struct step_request *q,
                            struct audit *ret)
{
    struct nsbox_config c = *s->c;
    char step[24], id[33], why[300];
    char *argv[64 + 1] = {0};
    char *const nsbox_argv[] = {"nsbox", "session", "exec", s->id, "step", step, NULL};
    size_t n = 0;
    int r;

    if (!s->log_path)
        return 0;
    r = run_id_new(id);
    if (r < 0)
        return r;
    (void)snprintf(step, sizeof(step), "%" PRIu64, s->steps);
    if (q->code) {
        c.code = q->payload;
        c.code_size = q->size;
    } else {
        /* The argv, NUL-separated; the first 64 arguments are recorded. */
        for (size_t i = 0; i < q->size && n < 64; i += strlen(q->payload + i) + 1)
            argv[n++] = q->payload + i;
        c.code = NULL;
        c.argv = argv;
    }
    c.timeout = q->timeout;
    if (q->memory)
        c.memory = q->memory; /* the step's own, lower limit */
    r = audit_open(s->log_path, id, &c, ret, why, sizeof(why));
    if (r >= 0)
        r = audit_start(ret, 6, nsbox_argv, &c, s->o->log_code_limit);
    return r;
}

/* ---- one step ---------------------------------------------------------------------------- */

/* The leaf's memory.max for a step's lower limit, and memory.swap.max 0, as a run's leaf has
 * them (cgroup_leaf_create()): the kernel reclaims down to the new value at once, or its OOM
 * killer ends what holds more (memory.max in the kernel's cgroup-v2.rst). Returns 0 or -errno. */
static int leaf_memory(const struct session_state *s, uint64_t bytes)
{
    char value[32] = "max";
    int r;

    if (bytes)
        (void)snprintf(value, sizeof(value), "%" PRIu64, bytes);
    r = write_file_at(s->leaf->dir_fd, "memory.max", value);
    if (r >= 0 && bytes && !s->c->memory) {
        /* Without the sandbox's own limit, swap was not limited either. */
        r = write_file_at(s->leaf->dir_fd, "memory.swap.max", "0");
        if (r == -ENOENT)
            r = 0; /* no swap accounting: no swap to limit */
    }
    return r;
}

/* After a step that lowered it: the sandbox's own memory.max again, for the next step. A
 * failure leaves the lower limit (the safe side) and is said on nsbox's stderr. */
static void step_memory_restore(struct session_state *s)
{
    int r = leaf_memory(s, s->c->memory);

    if (r >= 0 && !s->c->memory) {
        r = write_file_at(s->leaf->dir_fd, "memory.swap.max", "max");
        if (r == -ENOENT)
            r = 0;
    }
    if (r < 0)
        log_error_errno(r,
                        "session %s: cannot put back the cgroup's memory.max after a step "
                        "with a lower --memory (%m): the next steps keep the lower limit",
                        s->id);
    s->step.memory_lowered = false;
}

/* Close the step's pipes and free what it holds; the step is over. */
void step_clear(struct session_state *s)
{
    struct step *st = &s->step;

    for (int i = 0; i < 2; i++) {
        if (st->streams[i].fd >= 0)
            (void)close(st->streams[i].fd);
        headtail_done(&st->streams[i].kept);
    }
    audit_close(&st->audit);
    if (st->copy_fd >= 0)
        (void)close(st->copy_fd);
    if (st->outputs_fd >= 0)
        (void)close(st->outputs_fd);
    free(st->q.payload);
    free(st->q.stdin_data);
    free(st->q.copy_paths);
    if (st->in_fd >= 0)
        (void)close(st->in_fd);
    if (st->memory_lowered)
        step_memory_restore(s);
    nsbox_result_free(&st->ret);
    *st = (struct step){.audit = {.fd = -1},
                        .streams = {{.fd = -1}, {.fd = -1}},
                        .copy_fd = -1,
                        .outputs_fd = -1,
                        .in_fd = -1};
}

/* Send the step's result to its client. */
static void step_answer(struct session_state *s, uint64_t now)
{
    struct step *st = &s->step;
    struct nsbox_result *ret = &st->ret;
    const struct step_request *q = &st->q;
    uint32_t flags = st->end.flags;
    json_t *res;

    /* The tails join the heads: the streams are read as far as they will be. */
    for (int i = 0; i < 2; i++)
        if (st->streams[i].kept.s && st->streams[i].kept.s->data)
            (void)headtail_finish(&st->streams[i].kept);
    sandbox_describe_rootfs(s->c->rootfs ? s->c->rootfs : nsbox_default_rootfs(), ret);
    if (q->n_copy) {
        /* As a run's: copied only when the step ended by itself; the client unpacks it. */
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
            add_outcome_warning(ret, text);
        } else
            add_warning(ret, "nothing was copied out: the step did not end by itself (its "
                             "timeout, or the session's end)");
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
            add_warning(ret, text);
        }
    }
    /* Its status says timeout (the same interruption); the audit log must not take it for one. */
    if (st->hung_up)
        add_warning(ret, "the step was interrupted because its client hung up (a cancelled "
                         "call), not by its timeout");
    /* --network allow=: the session's proxy report so far (every step's connections). */
    if (s->fds->proxy)
        proxy_report_snapshot(s->fds->proxy, &ret->network);
    if (st->audit.fd >= 0) {
        int ar = audit_end(&st->audit, ret);
        if (ar < 0 && ret->status != NSBOX_STATUS_ERROR) {
            ret->status = NSBOX_STATUS_ERROR;
            ret->exit_code = 125;
            (void)snprintf(ret->error_step, sizeof(ret->error_step), "audit log");
            (void)snprintf(ret->error, sizeof(ret->error),
                           "cannot write the step's result to the audit log '%s': %s", s->log_path,
                           strerror(-ar));
        }
    }
    res = result_to_json_object(ret);
    if (res) {
        (void)json_object_set_new(res, "session_id", json_string(s->id));
        (void)json_object_set_new(res, "step", json_integer((json_int_t)s->steps));
        if (q->code)
            (void)json_object_set_new(res, "interpreter",
                                      json_string(flags & SESSION_INTERPRETER_RESTARTED
                                                      ? "restarted"
                                                  : flags & SESSION_INTERPRETER_CRASHED ? "crashed"
                                                  : flags & SESSION_INTERPRETER_NEW     ? "started"
                                                                                        : "kept"));
        if (st->hung_up) {
            char reason[300];
            (void)snprintf(reason, sizeof(reason),
                           "was interrupted: its client hung up before the step ended (a "
                           "cancelled call): %s; the session goes on",
                           !q->code ? "the step's processes were killed"
                           : flags & SESSION_INTERPRETER_RESTARTED
                               ? "the Python interpreter ignored KeyboardInterrupt and was "
                                 "killed (its variables are lost)"
                               : "KeyboardInterrupt stopped the code");
            (void)json_object_set_new(res, "reason", json_string(reason));
        } else if (ret->status == NSBOX_STATUS_TIMEOUT) {
            char reason[300];
            (void)snprintf(reason, sizeof(reason),
                           "timed out after %.3g s: %s; the session%s go on",
                           (double)q->timeout / 1e6,
                           !q->code ? "the step's processes were killed"
                           : flags & SESSION_INTERPRETER_RESTARTED
                               ? "the Python interpreter ignored KeyboardInterrupt and was "
                                 "killed (its variables are lost)"
                               : "KeyboardInterrupt stopped the code",
                           q->code && !(flags & SESSION_INTERPRETER_RESTARTED)
                               ? ", its files and the interpreter's variables"
                               : " and its files");
            (void)json_object_set_new(res, "reason", json_string(reason));
        } else if (ret->status == NSBOX_STATUS_KILLED) {
            char reason[300];
            (void)snprintf(reason, sizeof(reason),
                           "was killed: the session ended during the step (%s); its sandbox is "
                           "gone, start a new session for further steps",
                           end_words(s));
            (void)json_object_set_new(res, "reason", json_string(reason));
        }
    }
    if (ret->copy_out_done) {
        st->client->pass_fd = st->copy_fd;
        st->copy_fd = -1;
    }
    client_answer(st->client, res, now);
    step_clear(s);
}

/* The step could not start, or could not be recorded: an error answer, the session goes on. */
static void step_refuse(struct session_state *s, uint64_t now, const char *fmt, ...) _printf_(3, 4);
static void step_refuse(struct session_state *s, uint64_t now, const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    client_answer(s->step.client, json_pack("{s:s}", "error", text), now);
    step_clear(s);
}

/* Start the step of client cl on init. Returns 0 (the step runs, or its client got an error),
 * or -errno when init cannot be reached: the session can go on no longer. */
int step_start(struct session_state *s, struct client *cl, uint64_t now)
{
    struct step *st = &s->step;
    struct session_msg m;
    int out[2] = {-1, -1}, err[2] = {-1, -1}, payload_fd = -1, in_fd = -1, paths_fd = -1, r;
    int fds[8], nfds = 3;

    step_clear(s);
    st->client = cl;
    st->q = cl->q;
    cl->q = (struct step_request){0};
    st->in_fd = cl->in_fd;
    cl->in_fd = -1;
    cl->state = CLIENT_RUNNING;
    m = (struct session_msg){.type = st->q.code ? SESSION_CODE : SESSION_RUN};
    /* The sandbox's limits, as its setup placed them; the step's own clock and output. */
    st->ret = (struct nsbox_result){
        .memory = {st->q.memory ? st->q.memory : s->run->memory.value, s->run->memory.enforced_by},
        .pids_limit = s->run->pids_limit,
        .cpus = s->run->cpus,
        .timeout = {st->q.timeout, NSBOX_ENFORCER_NONE},
        .output_limit = st->q.output_limit,
        .host_uid = s->run->host_uid,
        .host_gid = s->run->host_gid,
        .seccomp_reporting = s->run->seccomp_reporting,
        .workdir_size = s->run->workdir_size,
    };
    memcpy(st->ret.limits_note, s->run->limits_note, sizeof(st->ret.limits_note));
    if (st->q.memory && (!s->c->memory || st->q.memory < s->c->memory) &&
        s->run->memory.enforced_by == NSBOX_ENFORCER_RLIMIT) {
        /* What a lower --memory of a step changes under rlimits, and what it cannot: the
         * System V budget (kernel.shmall) is the IPC namespace's, set once at the start. */
        size_t len = strlen(st->ret.limits_note);
        (void)snprintf(st->ret.limits_note + len, sizeof(st->ret.limits_note) - len,
                       "%sthis step's --memory %" PRIu64 "m lowers RLIMIT_DATA and RLIMIT_FSIZE "
                       "of its processes (or of the interpreter); System V shared memory stays "
                       "within the sandbox's own --memory (%" PRIu64 " MiB, 0: unlimited)",
                       len ? "; " : "", st->q.memory >> 20, s->c->memory >> 20);
    }
    memcpy(st->ret.name, s->run->name, sizeof(st->ret.name));
    s->steps++;
    r = audit_step_start(s, &st->q, &st->audit);
    if (r < 0) {
        /* A step that cannot be recorded does not run, as a run would not. */
        step_refuse(s, now, "cannot write the audit log '%s': %s; the step does not run",
                    s->log_path, strerror(-r));
        return 0;
    }
    /* A lower memory limit for this step: the leaf's, written before the step exists (fail
     * closed: not run above the limit it asked for); under rlimits init sets it. */
    if (s->leaf && st->q.memory && (!s->c->memory || st->q.memory < s->c->memory)) {
        r = leaf_memory(s, st->q.memory);
        st->memory_lowered = true; /* also half-written: put back */
        if (r < 0) {
            step_refuse(s, now,
                        "cannot write the cgroup's memory.max for the step's --memory: %s; the "
                        "step does not run",
                        strerror(-r));
            return 0;
        }
    }
    if (s->leaf)
        cgroup_leaf_stats(s->leaf, &st->before);
    payload_fd = headtail_init(&st->streams[0].kept, &st->ret.out, st->q.output_limit) == 0 &&
                         headtail_init(&st->streams[1].kept, &st->ret.err, st->q.output_limit) == 0
                     ? memfd_with(st->q.payload, st->q.size)
                     : -ENOMEM;
    /* Non-blocking on our read ends only: O_NONBLOCK of pipe2() would be on the write ends the
     * step gets too, and a step writing faster than we read would meet EAGAIN and lose output
     * that the result then called complete. */
    /* Its stdin, whole, in a memfd of its own (a file it reads to its end). */
    if (payload_fd >= 0 && st->q.has_stdin) {
        in_fd = memfd_with(st->q.stdin_data, st->q.stdin_size);
        if (in_fd < 0) {
            (void)close(payload_fd);
            payload_fd = in_fd;
        }
    }
    /* With "copy_out": the stream init writes when the step has ended, and the paths. */
    if (payload_fd >= 0 && st->q.n_copy) {
        st->copy_fd = memfd_create("nsbox-copy-out", MFD_CLOEXEC);
        paths_fd = st->copy_fd < 0 ? negative_errno()
                                   : memfd_with(st->q.copy_paths, st->q.copy_size);
        if (paths_fd < 0) {
            (void)close(payload_fd);
            if (in_fd >= 0)
                (void)close(in_fd);
            in_fd = -1;
            payload_fd = paths_fd;
        }
    }
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
        step_refuse(s, now, "the supervisor cannot start the step: %s; the session goes on",
                    strerror(-r));
        return 0;
    }
    /* A code step's outputs channel: the interpreter's, for this step only (last). */
    if (st->q.code) {
        st->outputs_fd = memfd_create("nsbox-outputs", MFD_CLOEXEC);
        if (st->outputs_fd < 0)
            add_warning(&st->ret, "the cell's outputs channel could not be made: its outputs "
                                  "are missing");
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
        m.copy_max_bytes = st->q.copy_max_bytes;
        m.copy_max_files = st->q.copy_max_files;
    }
    /* The copy-in stream its client packed (session-client.c checked it is a sealed memfd). */
    if (st->in_fd >= 0) {
        fds[nfds++] = st->in_fd;
        m.flags |= SESSION_STEP_COPY_IN;
    }
    m.memory = st->q.memory;
    /* A pool's member ends after this step: a limit lowered for it needs no undoing. */
    if (s->o->max_steps && s->steps >= s->o->max_steps) {
        m.flags |= SESSION_STEP_LAST;
        st->memory_lowered = false;
    }
    if (st->outputs_fd >= 0) {
        fds[nfds++] = st->outputs_fd;
        m.flags |= SESSION_STEP_OUTPUTS;
        m.outputs_limit = OUTPUTS_LIMIT_DEFAULT;
    }
    r = control_send(s->control_fd, &m, fds, nfds);
    if (in_fd >= 0)
        (void)close(in_fd);
    if (paths_fd >= 0)
        (void)close(paths_fd);
    (void)close(payload_fd);
    (void)close(out[1]);
    (void)close(err[1]);
    st->streams[0].st = &st->ret.out;
    st->streams[0].fd = out[0];
    st->streams[1].st = &st->ret.err;
    st->streams[1].fd = err[0];
    st->start = now_usec();
    st->kill_at = st->q.timeout ? st->start + st->q.timeout : UINT64_MAX;
    if (r < 0)
        s->end_reason = "sandbox ended"; /* init cannot be reached: the step is cut off */
    return r;
}

/* The step ended (init said so) and its pipes are read: its result. */
void step_finish(struct session_state *s, uint64_t now)
{
    struct step *st = &s->step;
    struct nsbox_result *ret = &st->ret;

    if (!ret->wall_time)
        ret->wall_time = now - st->start;
    /* Read what an exec failure reported (written before the step's process exited). */
    while (handle_report(s, ret) && ret->status != NSBOX_STATUS_ERROR) {
        struct pollfd pr = {.fd = s->fds->report, .events = POLLIN};
        if (poll(&pr, 1, 0) <= 0)
            break;
    }
    if (ret->status == NSBOX_STATUS_ERROR) {
        step_answer(s, now);
        return;
    }
    if (s->leaf) {
        const struct nsbox_cgroup_stats *b = &st->before;
        /* The leaf is the session's: what this step added (the peak is the session's). */
        cgroup_leaf_stats(s->leaf, &ret->cgroup);
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
        add_outcome_warning(ret,
                            "the step's time was up and the Python interpreter did not stop on "
                            "KeyboardInterrupt within 2 s: it was killed; the next step starts a "
                            "fresh interpreter (variables, imports and open files are lost)");
    if (st->end.flags & SESSION_INTERPRETER_LOWERED)
        add_outcome_warning(ret,
                            "the step's --memory was below the session's: the Python interpreter "
                            "ran it under that lower limit, which it could not get rid of again, "
                            "so "
                            "it was ended; the next code step starts a fresh one (variables, "
                            "imports and open files are lost)");
    if (st->end.flags & SESSION_INTERPRETER_CRASHED)
        add_outcome_warning(ret,
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
                                  "(variables, imports and open files are lost)");
    step_answer(s, now);
}

/* The session ends during the step: it is cut off, and says why. */
void step_cut(struct session_state *s, uint64_t now)
{
    struct nsbox_result *ret = &s->step.ret;

    for (int i = 0; i < 2; i++)
        if (s->step.streams[i].fd >= 0) {
            /* What the pipes hold now is kept; the rest is lost with the sandbox. */
            stream_read(&s->step.streams[i], s->chunk);
            s->step.streams[i].st->incomplete = s->step.streams[i].fd >= 0;
        }
    if (!ret->wall_time)
        ret->wall_time = now - s->step.start;
    if (s->step.ended && ret->status != NSBOX_STATUS_ERROR) {
        /* It had ended: only its pipes were still being read. */
        step_finish(s, now);
        return;
    }
    if (s->end_reason && strcmp(s->end_reason, "sandbox ended") != 0) {
        ret->status = NSBOX_STATUS_KILLED;
    } else if (ret->status != NSBOX_STATUS_ERROR) {
        ret->status = NSBOX_STATUS_ERROR;
        ret->exit_code = 125;
        (void)snprintf(ret->error_step, sizeof(ret->error_step), "session");
        (void)snprintf(ret->error, sizeof(ret->error),
                       "the session's sandbox ended during the step; the session is over");
    }
    step_answer(s, now);
}
