/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A started sandbox (nsbox.h: nsbox_sandbox_start() and after): made by sandbox_open() as a
 * run's sandbox is, with its init in step mode (session-init.c) on a control channel
 * (control.h), and served by the same supervisor loop as a run (supervise.h, in steps mode:
 * init's pidfd and report pipe, the seccomp listener, the running step's pipes, the proxy of
 * --network allow=) plus the control channel and the step's clock, which are this file's.
 * nsbox_sandbox_pollfds() hands all of it to the caller's poll(2) and nsbox_sandbox_dispatch()
 * acts on it; the library's own waits (start, a step) are that same pair in a loop, so a
 * caller with a loop of its own (`nsbox session`) and one without run the same code. One step
 * at a time (step.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "copy.h"
#include "fileio.h"
#include "lifecycle.h"
#include "macro.h"
#include "proxy.h"
#include "report.h"
#include "syscalls.h"
#include "tier3.h"
#include "written.h"

int control_send(int fd, const struct session_msg *m, const int *fds, int nfds)
{
    union {
        char buf[CMSG_SPACE(8 * sizeof(int))];
        struct cmsghdr align;
    } u = {0};
    struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

    if (nfds < 0 || nfds > 8)
        return -EINVAL;
    if (nfds > 0) {
        struct cmsghdr *c;
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    /* Never waits: init reads each message at once, and at most two are ever in flight. */
    return RETRY_EINTR(sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 ? negative_errno() : 0;
}

/* No network at all (--network none): a refused internet socket gets the notes' hint. */
static bool no_network(const struct nsbox_config *c)
{
    return !c->network_host && !c->network_loopback && !(c->network_allow && c->network_allow[0]);
}

struct nsbox_result *lifecycle_report_target(struct nsbox_sandbox *x)
{
    return x->step.active && !x->step.done ? &x->step.ret : x->ready ? &x->between : &x->run;
}

static int teardown(struct nsbox_sandbox *x, const char *no_save, int cancel_fd,
                    struct nsbox_result *ret);

/* Where the supervisor's reports and refusals go now. */
static void aim(struct nsbox_sandbox *x)
{
    x->sv.ret = lifecycle_report_target(x);
    x->sv.take_written = x->step.active && !x->step.done;
}

size_t nsbox_sandbox_pollfds_max(const struct nsbox_sandbox *x)
{
    return 1 + supervisor_pollfds_max(&x->sv);
}

size_t nsbox_sandbox_pollfds(struct nsbox_sandbox *x, struct pollfd *p, uint64_t *deadline)
{
    struct step_state *st = &x->step;
    uint64_t until = *deadline;
    size_t n;

    p[0] = (struct pollfd){.fd = -1};
    if (x->ended)
        return 1;
    p[0] = (struct pollfd){.fd = x->control[0], .events = POLLIN};
    /* The step's clock, then the drain of its pipes. */
    if (st->active && !st->done) {
        if (!st->ended && !st->interrupted && st->kill_at < until)
            until = st->kill_at;
        if (st->ended && st->drain_until < until)
            until = st->drain_until;
    }
    aim(x);
    n = supervisor_pollfds(&x->sv, p + 1, &until);
    *deadline = until;
    return 1 + n;
}

/* The control channel from init. Returns the NSBOX_SANDBOX_* bits. */
static unsigned handle_control(struct nsbox_sandbox *x, short revents, uint64_t now)
{
    struct session_msg m;
    ssize_t n = RETRY_EINTR(recv(x->control[0], &m, sizeof(m), MSG_DONTWAIT));

    if (n == 0 || (n < 0 && errno != EAGAIN && (revents & (POLLHUP | POLLERR)))) {
        x->ended = true;
        return NSBOX_SANDBOX_ENDED;
    }
    if (n != sizeof(m))
        return 0; /* nothing, or what init does not say: read, so poll(2) cannot spin on it */
    if (!x->ready && m.type == SESSION_READY) {
        x->ready = true;
        return NSBOX_SANDBOX_READY;
    }
    if (x->step.active && !x->step.done && !x->step.ended && m.type == SESSION_STEP_END) {
        x->step.ended = true;
        x->step.end = m;
        x->step.drain_until = now + STEP_DRAIN_GRACE_USEC;
        x->step.ret.wall_time = now - x->step.start;
    }
    return 0;
}

unsigned nsbox_sandbox_dispatch(struct nsbox_sandbox *x, const struct pollfd *p, size_t n)
{
    struct step_state *st = &x->step;
    uint64_t now;
    unsigned ev = 0;

    if (x->ended)
        return NSBOX_SANDBOX_ENDED;
    aim(x);
    supervisor_dispatch(&x->sv, p + 1, n - 1);
    if (x->sv.error) {
        (void)report_error(lifecycle_report_target(x), x->sv.error, "supervise",
                           "supervising the sandbox failed: %m");
        if (lifecycle_report_target(x) != &x->run)
            (void)report_error(&x->run, x->sv.error, "supervise",
                               "supervising the sandbox failed: %m");
        x->ended = true;
        return NSBOX_SANDBOX_ENDED;
    }
    if (x->sv.setup_failed) {
        x->ended = true; /* the result says why */
        return NSBOX_SANDBOX_ENDED;
    }
    if (!x->sv.init_running) {
        x->ended = true;
        if (!x->ready && x->run.status != NSBOX_STATUS_ERROR) {
            x->sv.ret = &x->run;
            supervisor_reports(&x->sv);
            if (x->run.status != NSBOX_STATUS_ERROR)
                (void)report_error(&x->run, 0, "session",
                                   "the session's sandbox ended while it was set up");
        }
        return NSBOX_SANDBOX_ENDED;
    }
    now = now_usec();
    if (p[0].fd >= 0 && p[0].revents)
        ev |= handle_control(x, p[0].revents, now);
    if (ev & NSBOX_SANDBOX_ENDED)
        return ev;

    /* The step: its clock, the end of its pipes. */
    if (st->active && !st->done) {
        if (!st->ended && !st->interrupted && now >= st->kill_at)
            nsbox_sandbox_step_interrupt(x);
        if (st->ended && (now >= st->drain_until || supervisor_streams_done(&x->sv))) {
            step_state_finish(x);
            ev |= NSBOX_SANDBOX_STEP_DONE;
        }
    }
    return ev;
}

/* The caller's loop, for the library's own waits: until one of the bits in want happened (or
 * the sandbox ended), or cancel_fd (-1: none) became readable. Returns the bits, -ECANCELED, or
 * -errno of poll(2). */
static int wait_for(struct nsbox_sandbox *x, unsigned want, int cancel_fd)
{
    _cleanup_free_ struct pollfd *p = calloc(nsbox_sandbox_pollfds_max(x) + 1, sizeof(*p));
    unsigned ev = 0;

    if (!p)
        return -ENOMEM;
    while (!(ev & (want | NSBOX_SANDBOX_ENDED))) {
        uint64_t deadline = UINT64_MAX, now;
        size_t n = nsbox_sandbox_pollfds(x, p, &deadline);
        int ms = -1;

        now = now_usec();
        if (deadline != UINT64_MAX)
            ms = deadline <= now                         ? 0
                 : (deadline - now + 999) / 1000 > 60000 ? 60000
                                                         : (int)((deadline - now + 999) / 1000);
        /* After the sandbox's: dispatch() takes the proxy's entries as the ones past its own. */
        p[n] = (struct pollfd){.fd = cancel_fd, .events = POLLIN};
        if (poll(p, (nfds_t)n + 1, ms) < 0) {
            if (errno == EINTR)
                continue;
            return negative_errno();
        }
        if (p[n].revents)
            return -ECANCELED;
        ev |= nsbox_sandbox_dispatch(x, p, n);
    }
    return (int)ev;
}

/* What a started sandbox's record shows for its program (plan.c wants one; init runs none). */
static char *const step_mode_argv[] = {(char *)"(session)", NULL};

int nsbox_sandbox_start(const struct nsbox_config *config, int cancel_fd,
                        struct nsbox_sandbox **ret_sandbox, struct nsbox_result *ret)
{
    struct nsbox_sandbox *x;
    char why[512];
    int r;

    *ret_sandbox = NULL;
    if (config->forward_signals ||
        (config->isolation == NSBOX_ISOLATION_LANDLOCK && tier3_needed(config))) {
        *ret = (struct nsbox_result){0};
        return report_config_error(ret, -EINVAL,
                                   config->forward_signals
                                       ? "forward_signals is nsbox_run()'s: the "
                                         "caller of a started sandbox handles "
                                         "its own signals"
                                       : "--isolation landlock: no user namespace can "
                                         "be made here, and a session or "
                                         "pool needs one (tier 3 runs one program at "
                                         "a time: nsbox run); 'nsbox "
                                         "doctor' names the fix");
    }
    x = calloc(1, sizeof(*x)); /* zeroed, as sandbox_state_init() wants it */
    if (!x) {
        *ret = (struct nsbox_result){0};
        return report_error(ret, -ENOMEM, "memory", "out of memory");
    }
    sandbox_state_init(x);
    x->c = *config;
    /* Each step brings its own program or code and stdin. */
    x->c.argv = step_mode_argv;
    x->c.code = NULL;
    x->c.code_size = 0;
    x->c.pass_stdin = false;
    x->steps_mode = true;
    x->step = (struct step_state){.copy_fd = -1, .outputs_fd = -1};
    x->copy_out_fd = -1;
    /* libarchive, for a step's copy-out: init, a fork of this process, cannot load it once it
     * is in the sandbox (copy.h). Loaded now, when a step may want it; without it such a step
     * is told (EOPNOTSUPP) and the sandbox works otherwise. */
    (void)copy_load(why, sizeof(why));
    r = sandbox_open(x, &x->run);
    if (r >= 0) {
        (void)fcntl(x->fds.report, F_SETFL, O_NONBLOCK);
        r = supervisor_init(&x->sv, &x->c, &x->fds, x->start, &x->run, true);
        x->sv_ready = true;
        if (r < 0)
            (void)report_error(&x->run, r, "supervise", "supervising the sandbox failed: %s",
                               strerror(-r));
    }
    if (r >= 0) {
        /* The sandbox's setup (a workspace's files into /work, say) may take seconds: the
         * caller's signals (cancel_fd) end it meanwhile, as they end a run's. */
        r = wait_for(x, NSBOX_SANDBOX_READY, cancel_fd);
        if (r == -ECANCELED)
            (void)report_error(&x->run, r, "start",
                               "the sandbox's start was cancelled while it was set up "
                               "(cancel_fd)");
        else if (r < 0)
            (void)report_error(&x->run, r, "supervise", "supervising the sandbox failed: %m");
        else if (!x->ready)
            r = -EIO;
    }
    if (r < 0) {
        int t = teardown(x, "the sandbox did not start", -1, ret);
        return t == -EINVAL      ? -EINVAL
               : r == -ENOMEM    ? -ENOMEM
               : r == -ECANCELED ? -ECANCELED
                                 : -EIO;
    }
    /* The caller's copy, without the lists (the sandbox's own result keeps them until
     * nsbox_sandbox_stop() hands it over). */
    *ret = x->run;
    ret->out = ret->err = (struct nsbox_stream){0};
    ret->labels = NULL;
    ret->written = NULL;
    ret->copied = NULL;
    ret->skipped = NULL;
    ret->outputs = NULL;
    ret->n_written = ret->n_copied = ret->n_skipped = 0;
    *ret_sandbox = x;
    return 0;
}

int nsbox_sandbox_step(struct nsbox_sandbox *x, const struct nsbox_step *step,
                       struct nsbox_result *ret)
{
    int r = nsbox_sandbox_step_begin(x, step, ret);

    if (r == -EIO)
        return 0; /* *ret says why it could not start; the sandbox goes on */
    if (r < 0)
        return r;
    r = wait_for(x, NSBOX_SANDBOX_STEP_DONE, -1);
    if (r >= 0 && ((unsigned)r & NSBOX_SANDBOX_STEP_DONE))
        return nsbox_sandbox_step_end(x, ret);
    (void)nsbox_sandbox_step_cut(x, ret);
    if (r < 0)
        (void)report_error(ret, r, "supervise", "supervising the sandbox failed: %m");
    return -ESHUTDOWN;
}

/*
 * With a workspace: save /work into it (no_save NULL) or say why not. Init kills every process
 * of the sandbox (the interpreter too) and writes /work into the copy-out memfd, as a run's
 * init does when its payload has ended, and sandbox_close() unpacks it into the workspace's
 * staging directory and swaps it in, whole or not at all, as for a run. Not when the sandbox
 * ended by itself or a step was cut off: its /work may be half-written, as a run's after a
 * timeout (which is not saved either). The wait still answers refused system calls, and gives
 * up when cancel_fd becomes readable or after SAVE_DEADLINE_USEC.
 */
static void save(struct nsbox_sandbox *x, const char *no_save, int cancel_fd)
{
    struct nsbox_result *ret = &x->run;
    char why_not[400] = "";
    uint64_t deadline = now_usec() + SAVE_DEADLINE_USEC;
    struct session_msg m = {.type = SESSION_SAVE};
    bool answered = false;

    if (!x->c.workspace || ret->status == NSBOX_STATUS_ERROR)
        return;
    if (x->ended)
        (void)snprintf(why_not, sizeof(why_not), "the session's sandbox ended by itself");
    else if (no_save)
        (void)snprintf(why_not, sizeof(why_not), "%s", no_save);
    else if (x->step.active && !x->step.done)
        (void)snprintf(why_not, sizeof(why_not),
                       "a step was still running: /work may be half-written");
    else if (control_send(x->control[0], &m, NULL, 0) < 0)
        (void)snprintf(why_not, sizeof(why_not), "the session's sandbox could not be reached");
    while (!why_not[0] && !answered) {
        struct pollfd p[4] = {
            {.fd = x->control[0], .events = POLLIN},
            {.fd = x->pidfd, .events = POLLIN},
            {.fd = cancel_fd, .events = POLLIN},
            {.fd = x->sv.listener, .events = POLLIN},
        };
        uint64_t now = now_usec();
        ssize_t n;

        if (now >= deadline) {
            (void)snprintf(why_not, sizeof(why_not),
                           "the sandbox did not hand over /work within %llu s",
                           (unsigned long long)(SAVE_DEADLINE_USEC / 1000000));
            break;
        }
        if (poll(p, 4,
                 (int)((deadline - now + 999) / 1000 > 60000 ? 60000
                                                             : (deadline - now + 999) / 1000)) <
                0 &&
            errno != EINTR) {
            (void)snprintf(why_not, sizeof(why_not), "poll: %s", strerror(errno));
            break;
        }
        if (p[3].revents && !supervise_answer_notification(x->sv.listener, x->fds.init_pid,
                                                           no_network(&x->c), &x->between)) {
            (void)close(x->sv.listener);
            x->sv.listener = -EBADF;
        }
        if (p[2].revents) {
            (void)snprintf(why_not, sizeof(why_not),
                           "its supervisor was told to end while the workspace was being saved");
            break;
        }
        if (!p[0].revents && !p[1].revents)
            continue;
        n = RETRY_EINTR(recv(x->control[0], &m, sizeof(m), MSG_DONTWAIT));
        if (n == sizeof(m) && m.type == SESSION_SAVED) {
            answered = true;
            ret->copy_out_done = (m.flags & 1) && m.code == 0;
            ret->skipped_more += m.unlisted;
            ret->copy_out_lost += m.lost;
            if (!ret->copy_out_done)
                (void)snprintf(why_not, sizeof(why_not),
                               "copying /work failed inside the sandbox: %s%s",
                               strerror(m.code ? m.code : EIO),
                               m.code == EFBIG ? " (the stream passed RLIMIT_FSIZE: lower "
                                                 "--copy-out-max-bytes or raise --memory)"
                                               : "");
        } else if (n == 0 || (n < 0 && errno != EAGAIN) || p[1].revents) {
            (void)snprintf(why_not, sizeof(why_not),
                           "the session's sandbox ended while /work was being copied");
        }
    }
    if (why_not[0]) {
        char text[600];
        ret->copy_out_done = false;
        (void)snprintf(text, sizeof(text),
                       "workspace '%s' was not saved: %s; its files are as before this session",
                       x->c.workspace, why_not);
        report_add_warning(ret, true, text);
    }
}

/* End and free x (nsbox_sandbox_stop()). Returns sandbox_close()'s value. */
static int teardown(struct nsbox_sandbox *x, const char *no_save, int cancel_fd,
                    struct nsbox_result *ret)
{
    int r;

    if (x->pidfd >= 0) {
        siginfo_t si;
        save(x, no_save, cancel_fd);
        if (!x->ended)
            (void)sys_pidfd_send_signal(x->pidfd, SIGKILL);
        (void)RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)x->pidfd, &si, WEXITED));
        x->ended = true;
        if (x->run.status != NSBOX_STATUS_ERROR)
            x->run.status = NSBOX_STATUS_KILLED;
    }
    step_state_clear(x);
    if (x->copy_out_fd >= 0)
        (void)close(x->copy_out_fd);
    if (x->sv_ready)
        supervisor_free(&x->sv); /* the listener, the streams */
    if (x->fds.out >= 0)
        (void)close(x->fds.out);
    if (x->fds.err >= 0)
        (void)close(x->fds.err);
    if (x->fds.report >= 0)
        (void)close(x->fds.report);
    if (x->fds.stdin_dst >= 0)
        (void)close(x->fds.stdin_dst);
    r = sandbox_close(x, 0, &x->run);
    if (ret)
        *ret = x->run;
    else
        nsbox_result_free(&x->run);
    nsbox_result_free(&x->between);
    free(x);
    return r;
}

int nsbox_sandbox_stop(struct nsbox_sandbox *x, const char *no_save, int cancel_fd,
                       struct nsbox_result *ret)
{
    bool leaf_kept;

    if (!x)
        return 0;
    (void)teardown(x, no_save, cancel_fd, ret);
    leaf_kept = ret && ret->status == NSBOX_STATUS_ERROR && ret->error_errno == EBUSY;
    return leaf_kept ? -EBUSY : 0;
}
