/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A sandbox's lifecycle inside the library (internal): what sandbox.c makes and tears down
 * (sandbox_open(), sandbox_close()), kept in one struct nsbox_sandbox so that a run
 * (nsbox_run(): open, supervise the payload, close) and a started sandbox
 * (nsbox_sandbox_start(): open in step mode, steps, nsbox_sandbox_stop(): close) are the same
 * code. lifecycle.c has the started sandbox's loop (its control channel to init, its reports,
 * the seccomp listener, the proxy, the save of /work), step.c one step.
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "control.h"
#include "headtail.h"
#include "nsbox.h"
#include "sandbox.h"
#include "supervise.h"

/* The running step (step.c). */
struct step_state {
    bool active; /* a step runs or is done and not yet taken */
    bool done;   /* over: nsbox_sandbox_step_end() takes its result */
    bool code;
    struct nsbox_result ret; /* its output is read by the supervisor (x->sv.streams) */
    struct nsbox_cgroup_stats before;
    uint64_t start, kill_at, drain_until, timeout;
    bool ended, interrupted;
    struct session_msg end;
    int copy_fd;    /* the copy-out stream (a memfd), or -1 */
    int outputs_fd; /* a code step's outputs channel (a memfd, outputs.h), or -1 */
    bool copy_asked;
    bool memory_lowered; /* the leaf's memory.max was lowered for it: put back at its end */
};

struct nsbox_sandbox {
    struct nsbox_config c; /* the caller's, copied; its strings stay the caller's */
    bool steps_mode;       /* a started sandbox: init runs steps (session-init.c) */
    struct sandbox_plan sb;
    struct cgroup_leaf leaf;
    struct proxy *proxy;
    int out[2], err[2], sync[2], report[2], in[2], control[2];
    int pidfd, sigfd;
    sigset_t saved_mask;
    bool mask_changed;
    bool attached_by_clone;
    bool opened;    /* sandbox_open() made the sandbox whole: sandbox_close() reports on it */
    uint64_t start; /* now_usec() when the sandbox was made */
    struct supervise_fds fds;

    /* A started sandbox. */
    struct supervisor sv;        /* its one loop (supervise.h), in steps mode */
    bool sv_ready;               /* sv was set up (supervisor_init()) */
    struct nsbox_result run;     /* the sandbox's own result */
    struct nsbox_result between; /* refusals between steps (recorded, not reported) */
    bool ready;                  /* init said it waits for steps */
    bool ended;                  /* init is gone (or the sandbox failed) */
    uint64_t steps;
    struct step_state step;
    int copy_out_fd; /* the last step's copy-out stream, until taken (step_copy_out()), or -1 */
    char *chunk;     /* STEP_READ_CHUNK bytes, for the step's pipes */
};

#define STEP_READ_CHUNK 65536
/* After a step's end, for its pipes to reach EOF. */
#define STEP_DRAIN_GRACE_USEC 200000
/* For init to write /work into the workspace at a started sandbox's end. */
#define SAVE_DEADLINE_USEC (60 * 1000000ULL)

/* Plan and make the sandbox of x->c (x->steps_mode: with a control channel, init in step
 * mode), as the header of sandbox.c orders it, up to the supervision. ret: the run's result.
 * Returns 0, or -errno with ret's error set; sandbox_close() cleans up either way. */
int sandbox_open(struct nsbox_sandbox *x, struct nsbox_result *ret);

/* What follows the supervision: the proxy's report, the diagnoses, the copy-out host side and
 * the workspace's save, the cell's outputs, leftovers, the cgroup's numbers; then everything
 * made is removed. r: the supervision's -errno or 0. Returns nsbox_run()'s return value. */
int sandbox_close(struct nsbox_sandbox *x, int r, struct nsbox_result *ret);

/* An empty x, every descriptor -EBADF: x must be zeroed already (calloc(3)); only the fields
 * that are not zero are set. */
void sandbox_state_init(struct nsbox_sandbox *x);

/* Where what the sandbox reports now belongs: the running step's result, the record of
 * refusals between steps, or (while it is set up) the sandbox's own. */
struct nsbox_result *lifecycle_report_target(struct nsbox_sandbox *x);

/* step.c */
/* The step is done (init said it ended and its pipes are read, or the sandbox ended). */
void step_state_finish(struct nsbox_sandbox *x);
/* Free what the step holds; x->step is empty after. */
void step_state_clear(struct nsbox_sandbox *x);
/* Add a line to ret's warnings. */
void result_add_warning(struct nsbox_result *ret, const char *text);
