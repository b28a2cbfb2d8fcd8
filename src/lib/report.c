/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "report.h"

_Static_assert(sizeof(struct report) <= PIPE_BUF, "a report must be one atomic write (pipe(7))");

int report_step_failed(struct report_step *s, int r, const char *name, const char *detail_fmt, ...)
{
    s->err = r < 0 ? -r : 0;
    (void)snprintf(s->name, sizeof(s->name), "%s", name);
    s->detail[0] = '\0';
    if (detail_fmt) {
        va_list ap;
        va_start(ap, detail_fmt);
        (void)vsnprintf(s->detail, sizeof(s->detail), detail_fmt, ap);
        va_end(ap);
    }
    return r;
}

void report_send(int fd, const struct report *rep)
{
    (void)!write(fd, rep, sizeof(*rep));
}

_noreturn_ void report_setup_failed(int fd, const struct report_step *s)
{
    struct report rep = {.type = REPORT_SETUP_FAILED, .step = *s};
    report_send(fd, &rep);
    _exit(125);
}

void report_skipped(int fd, int err, const char *name, const char *detail)
{
    struct report rep = {.type = REPORT_SKIPPED};

    (void)report_step_failed(&rep.step, -err, name, "%s", detail);
    report_send(fd, &rep);
}

int report_read(int fd, struct report_reader *rd)
{
    ssize_t n;

    if (rd->have == sizeof(rd->rep))
        rd->have = 0; /* the last call returned a whole one */
    n = read(fd, (char *)&rd->rep + rd->have, sizeof(rd->rep) - rd->have);
    if (n == 0)
        return -EPIPE;
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : negative_errno();
    rd->have += (size_t)n;
    return rd->have == sizeof(rd->rep);
}

void report_to_result(const struct report *rep, struct nsbox_result *ret)
{
    const struct report_step *s = &rep->step;
    int exit_code = rep->type == REPORT_EXEC_FAILED ? rep->code : 125;

    ret->status = NSBOX_STATUS_ERROR;
    ret->exit_code = exit_code;
    ret->error_errno = s->err;
    ret->error_config = false;
    (void)snprintf(ret->error_step, sizeof(ret->error_step), "%s", s->name);
    if (exit_code == 126 || exit_code == 127)
        /* 127 carries its own explanation ("not found in the sandbox's PATH"). */
        (void)snprintf(ret->error, sizeof(ret->error), "%s%s%s", s->detail,
                       exit_code == 127 ? "" : ": ", exit_code == 127 ? "" : strerror(s->err));
    else
        (void)snprintf(ret->error, sizeof(ret->error), "sandbox setup failed at %s: %s%s%s%s",
                       s->name, s->err ? strerror(s->err) : "failed", s->detail[0] ? " (" : "",
                       s->detail, s->detail[0] ? ")" : "");
}

static int report_verror(struct nsbox_result *ret, int r, const char *step, const char *fmt,
                         va_list ap)
{
    ret->status = NSBOX_STATUS_ERROR;
    ret->exit_code = 125;
    ret->error_errno = r < 0 ? -r : 0;
    ret->error_config = false;
    (void)snprintf(ret->error_step, sizeof(ret->error_step), "%s", step);
    if (r < 0)
        errno = -r; /* for %m */
    (void)vsnprintf(ret->error, sizeof(ret->error), fmt, ap);
    return r;
}

int report_error(struct nsbox_result *ret, int r, const char *step, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    r = report_verror(ret, r, step, fmt, ap);
    va_end(ap);
    return r;
}

int report_config_error(struct nsbox_result *ret, int r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    r = report_verror(ret, r, "config", fmt, ap);
    va_end(ap);
    ret->error_config = true;
    return r;
}

/* Append line to buf (size bytes), '\n'-separated; cut when full. */
static void append_line(char *buf, size_t size, const char *line)
{
    size_t n = strlen(buf);
    (void)snprintf(buf + n, size - n, "%s%s", n ? "\n" : "", line);
}

void report_add_warning(struct nsbox_result *ret, bool outcome, const char *line)
{
    append_line(ret->warnings, sizeof(ret->warnings), line);
    if (outcome)
        append_line(ret->outcome_warnings, sizeof(ret->outcome_warnings), line);
}

static void report_vwarning(const struct nsbox_config *c, struct nsbox_result *ret, bool outcome,
                            const char *fmt, va_list ap)
{
    char line[512];

    if (!fmt) /* never; said for the compiler, which sees a path with UBSan's checks */
        return;
    (void)vsnprintf(line, sizeof(line), fmt, ap);
    report_add_warning(ret, outcome, line);
    if (c->warn)
        c->warn(line, c->warn_userdata);
}

void report_warning(const struct nsbox_config *c, struct nsbox_result *ret, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report_vwarning(c, ret, false, fmt, ap);
    va_end(ap);
}

void report_outcome_warning(const struct nsbox_config *c, struct nsbox_result *ret, const char *fmt,
                            ...)
{
    va_list ap;

    va_start(ap, fmt);
    report_vwarning(c, ret, true, fmt, ap);
    va_end(ap);
}

/* A message of one byte with room for one descriptor (SCM_RIGHTS, unix(7)): what
 * report_send_fd() sends and report_recv_fd() takes. */
struct fd_message {
    char byte;
    struct iovec iov;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr msg;
};

static void fd_message_init(struct fd_message *m)
{
    *m = (struct fd_message){.byte = 'f'};
    m->iov = (struct iovec){.iov_base = &m->byte, .iov_len = 1};
    m->msg = (struct msghdr){.msg_iov = &m->iov,
                             .msg_iovlen = 1,
                             .msg_control = m->u.buf,
                             .msg_controllen = sizeof(m->u.buf)};
}

int report_send_fd(int sock, int fd)
{
    struct fd_message m;
    struct cmsghdr *c;

    fd_message_init(&m);
    c = CMSG_FIRSTHDR(&m.msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return RETRY_EINTR(sendmsg(sock, &m.msg, MSG_NOSIGNAL)) == 1 ? 0 : negative_errno();
}

int report_recv_fd(int sock)
{
    struct fd_message m;
    int fd = -1;
    ssize_t n;

    fd_message_init(&m);
    n = RETRY_EINTR(recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT));
    if (n < 0)
        return negative_errno();
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m.msg); c; c = CMSG_NXTHDR(&m.msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        /* Every descriptor that came is ours to close; only a single one is the answer. */
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (fd < 0 && c->cmsg_len == CMSG_LEN(sizeof(int)))
                fd = got;
            else
                (void)close(got);
        }
    }
    if (n != 1 || fd < 0 || (m.msg.msg_flags & MSG_CTRUNC)) {
        if (fd >= 0)
            (void)close(fd);
        return -EBADMSG;
    }
    return fd;
}
