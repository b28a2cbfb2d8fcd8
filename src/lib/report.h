/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The report pipe: what the sandbox tells the supervisor, and how a failed step is recorded.
 *
 * Inside (init and the payload before execve), a step that fails fills a struct report_step
 * (report_step_failed()); at the point of no return it is sent as a struct report on an
 * O_CLOEXEC pipe and the process _exit()s (report_setup_failed()), never exit(). The
 * supervisor reads reports as they come (report_read()) and words a failure in the result
 * (report_to_result()): "sandbox setup failed at STEP: ERROR (DETAIL)". A step of the
 * supervisor itself that fails (planning, clone3, the id maps) goes into the result directly
 * (report_error()).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"

/* A setup step inside the sandbox that failed, or was left out (REPORT_SKIPPED). */
struct report_step {
    int err;          /* errno value (positive), or 0 */
    char name[64];    /* "pivot_root", "mount /proc", ... */
    char detail[192]; /* what it acted on, or a hint; may be empty */
};

/*
 * Record in *s that step name failed with r (a -errno, or 0 when there is no errno) and return
 * r, so that a step can end with `return report_step_failed(s, r, ...)`. detail_fmt may be
 * NULL. The one way to record a failed step inside the sandbox.
 */
int report_step_failed(struct report_step *s, int r, const char *name, const char *detail_fmt, ...)
    __attribute__((format(printf, 4, 5)));

enum report_type {
    REPORT_SETUP_FAILED = 1, /* step: a setup step in the sandbox failed */
    REPORT_EXEC_FAILED,      /* step: execve of the program failed; code is 126 or 127 */
    REPORT_EXITED,           /* code: the payload's exit status */
    REPORT_SIGNALED,         /* code: the signal that killed the payload */
    REPORT_LISTENER,         /* code: init's descriptor of the seccomp listener, to take; or
                              * -1: it waits on the sync socket (report_recv_fd()) */
    REPORT_PROXY,            /* code: init's descriptor of the proxy's listening socket */
    REPORT_SKIPPED,          /* step: an optional setup step was refused and left out; the
                              * run goes on and the result's warnings say so */
    REPORT_WRITTEN,          /* path, size, sha256: a file the payload wrote in /work
                              * (written.h), sent before REPORT_EXITED/REPORT_SIGNALED */
    REPORT_STEP_FAILED,      /* step: a session step could not start (its copy-in, the
                              * interpreter's lower limit): its error, status 125; init and the
                              * session go on, where REPORT_SETUP_FAILED ends the session */
};

/* One message from the sandbox. Smaller than PIPE_BUF, so each write(2) is atomic. */
struct report {
    int type;
    int code;
    struct report_step step;
    /* REPORT_EXITED, REPORT_SIGNALED: bytes used and free in /dev/shm when the payload ended
     * (a full /dev/shm ends writes to memory mapped from it with SIGBUS). */
    uint64_t shm_used, shm_free;
    /* ... and in the /work tmpfs. */
    uint64_t work_used, work_free;
    /* ... and whether the copy-out stream was written (copy_err: 0, or the errno that stopped
     * it), with the number of skipped entries not listed in it. */
    bool copy_taken;
    int copy_err;
    uint64_t copy_unlisted;
    uint64_t copy_lost; /* regular files and directories left out (copy_stats.lost) */
    /* ... and whether init walked /work for the files written (written.h), how many it did
     * not list, and whether a bound stopped a walk. */
    bool written_walked, written_partial;
    uint64_t written_more;
    /* REPORT_WRITTEN: the file, below /work; its SHA-256 in hex, or "" (over the budget). */
    char path[256];
    uint64_t size;
    char sha256[65];
};

/* ---- inside the sandbox ---- */

/* Write rep to the report pipe fd. Best effort: when the supervisor is gone there is nobody to
 * tell. */
void report_send(int fd, const struct report *rep);

/* Send the failed step s (REPORT_SETUP_FAILED) and _exit(125). */
_Noreturn void report_setup_failed(int fd, const struct report_step *s);

/* An optional setup step was refused (err: a positive errno): send REPORT_SKIPPED, which the
 * supervisor turns into a warning, and go on. */
void report_skipped(int fd, int err, const char *name, const char *detail);

/* Pass descriptor fd over the unix socket sock (SCM_RIGHTS, unix(7)) with one byte; the
 * receiver gets its own copy (report_recv_fd()), so the sender may close fd at once. Returns 0
 * or -errno. */
int report_send_fd(int sock, int fd);

/* ---- in the supervisor ---- */

/* The descriptor report_send_fd() passed on sock, close-on-exec, without waiting (it must be
 * there already). Returns it, -EAGAIN when nothing waits, -EBADMSG when the message carried no
 * single descriptor (any it carried is closed), or recvmsg(2)'s -errno. */
int report_recv_fd(int sock);

/* A report being read from a non-blocking pipe: reads may return part of one. */
struct report_reader {
    struct report rep;
    size_t have;
};

/*
 * Read what fd holds of the next report. Returns 1 when rd->rep is a whole report (the next
 * call starts another), 0 when none is complete yet (also on EINTR and EAGAIN), -EPIPE at
 * end of file, or another -errno of read(2).
 */
int report_read(int fd, struct report_reader *rd);

/* Word a REPORT_SETUP_FAILED or REPORT_STEP_FAILED (exit status 125), or REPORT_EXEC_FAILED
 * (rep->code, 126 or 127) in ret: status, exit_code, error_step, error_errno and error. */
void report_to_result(const struct report *rep, struct nsbox_result *ret);

/* Add a warning to ret->warnings (a line; cut when full) and pass it to c->warn at once: one
 * about the host or the caller's options (a fallback, an opt-out), which the program cannot
 * change. */
void report_warning(const struct nsbox_config *c, struct nsbox_result *ret, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for a warning that explains the run's outcome and names what to change (a full
 * /work or /dev/shm, a workspace not saved, copy-out incomplete): also added to
 * ret->outcome_warnings, which is what a model is shown (the MCP text, as_tool_output()). */
void report_outcome_warning(const struct nsbox_config *c, struct nsbox_result *ret, const char *fmt,
                            ...) __attribute__((format(printf, 3, 4)));
/* Add line to ret->warnings, and to ret->outcome_warnings when outcome (see above), without
 * passing it to a callback: for warnings that arise after the payload started. */
void report_add_warning(struct nsbox_result *ret, bool outcome, const char *line);

/*
 * A step of the supervisor failed (planning the run, clone3, the id maps, supervising): record
 * it in ret as the run's error (status error, exit status 125) with the message fmt, in which
 * %m is r's. Returns r (a -errno).
 */
int report_error(struct nsbox_result *ret, int r, const char *step, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same for the caller's mistake in its config: error_step "config" and error_config set,
 * which makes nsbox_run() return -EINVAL when r is -EINVAL. */
int report_config_error(struct nsbox_result *ret, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
