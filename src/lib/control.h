/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The control channel of a started sandbox (nsbox_sandbox_start(), lifecycle.c): a
 * SOCK_SEQPACKET socketpair inherited at clone, never held by a step. The sandbox's init does
 * not run one payload: it waits on the channel for steps and runs each in a child of its own
 * (session-init.c); the supervisor's side is lifecycle.c and step.c. Fixed-size messages, with
 * descriptors (SCM_RIGHTS) where said.
 */
#pragma once

#include <stdint.h>
#include <stdbool.h>

#include "macro.h"
#include "nsbox.h"

/* Messages on the control channel between the supervisor and init. Fixed size. */
enum session_msg_type {
    SESSION_READY = 1, /* init -> supervisor: set up, waiting for steps */
    SESSION_RUN,       /* -> init: run a program; fds: argv (a memfd, NUL-separated), out, err,
                        * its stdin (a memfd) with SESSION_STEP_STDIN, and with
                        * SESSION_STEP_COPY_OUT the copy-out stream's memfd and a memfd of the
                        * sandbox paths to copy (NUL-separated) */
    SESSION_CODE,      /* -> init: Python code in the session's interpreter; fds: code, out,
                        * err and maybe stdin, as for SESSION_RUN */
    SESSION_INTERRUPT, /* -> init: the step's time is up */
    SESSION_STEP_END,  /* init -> supervisor: the step ended, everything it started is gone */
    SESSION_SAVE,      /* -> init: the session ends between steps; kill every process of the
                        * sandbox and write /work into the copy-out memfd (a workspace's) */
    SESSION_SAVED,     /* init -> supervisor: written (code: 0, or the errno that stopped the
                        * stream; flags: 1 when it was taken; unlisted: skipped entries not
                        * in the stream) */
};

enum session_end {
    SESSION_END_EXITED = 0, /* code: exit status */
    SESSION_END_SIGNALED,   /* code: signal */
};

/* flags of SESSION_STEP_END */
/* The most arguments a program step takes (a request with more is refused). */
#define SESSION_STEP_MAX_ARGS NSBOX_STEP_MAX_ARGS

#define SESSION_INTERPRETER_NEW 1u         /* a fresh interpreter was started for this step */
#define SESSION_INTERPRETER_INTERRUPTED 2u /* KeyboardInterrupt ended the step; state kept */
#define SESSION_INTERPRETER_RESTARTED 4u   /* it did not stop within the grace: killed */
#define SESSION_INTERPRETER_CRASHED 8u     /* it died during the step */
#define SESSION_INTERPRETER_LOWERED                                                                \
    32u /* it ran the step under a lower RLIMIT_DATA (the step's "memory"), which a hard limit     \
         * keeps for good: it was ended after the step, the next code step starts a fresh one */

/* flags of SESSION_RUN and SESSION_CODE */
#define SESSION_STEP_STDIN 1u /* the step has a stdin memfd */
#define SESSION_STEP_COPY_OUT                                                                      \
    2u /* the step's end writes a copy-out stream (session exec                                    \
        * --copy-out), within copy_max_bytes and copy_max_files */
#define SESSION_STEP_OUTPUTS                                                                       \
    4u /* SESSION_CODE: the last descriptor is the cell's outputs channel (a memfd the             \
        * supervisor reads when the step has ended), for at most outputs_limit bytes */
#define SESSION_STEP_COPY_IN                                                                       \
    8u /* a copy-in stream (a memfd) follows the copy-out descriptors: init unpacks it below       \
        * "/" before the step runs; a failure is the step's error (a setup report, code 125) */
#define SESSION_STEP_LAST                                                                          \
    64u /* the sandbox's last step (a pool's member): nothing runs in it afterwards, so a          \
         * lowered limit needs no undoing */
/* ... and of SESSION_STEP_END */
#define SESSION_COPY_TAKEN                                                                         \
    16u /* the copy-out stream was written (copy_err: 0 or the errno that                          \
         * stopped it; unlisted: skipped entries not in it) */

/* Seconds the interpreter has, after SIGINT, to end a step before it is killed. */
#define SESSION_INTERRUPT_GRACE_USEC (2 * 1000 * 1000)

struct session_msg {
    int32_t type;
    int32_t end; /* enum session_end */
    int32_t code;
    uint32_t flags;
    int32_t copy_err;                        /* SESSION_SAVED, SESSION_STEP_END */
    uint64_t unlisted;                       /* SESSION_SAVED, SESSION_STEP_END */
    uint64_t lost;                           /* SESSION_SAVED, SESSION_STEP_END */
    uint64_t copy_max_bytes, copy_max_files; /* SESSION_RUN, SESSION_CODE */
    uint64_t outputs_limit;                  /* SESSION_CODE with SESSION_STEP_OUTPUTS */
    uint64_t memory; /* SESSION_RUN, SESSION_CODE: the step's lower memory limit in bytes, or 0
                      * (the sandbox's); enforced here under rlimits (the cgroup leaf's
                      * memory.max is the supervisor's to write) */
};

/* Send m with nfds descriptors (at most 8) on the control channel fd, without waiting (init
 * reads each message at once, and at most two are ever in flight). Returns 0 or -errno. */
int control_send(int fd, const struct session_msg *m, const int *fds, int nfds);
