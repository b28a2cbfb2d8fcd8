/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The cgroup v2 leaf of one run: placement (delegation by ownership), limits, statistics,
 * kill and removal. See Documentation/admin-guide/cgroup-v2.rst, "Delegation" and "No Internal
 * Process Constraint".
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nsbox.h"

struct cgroup_leaf {
    int dir_fd;      /* the leaf directory (O_DIRECTORY), for CLONE_INTO_CGROUP and files */
    int parent_fd;   /* its parent directory, for rmdir */
    char name[96];   /* the leaf's name in its parent */
    char path[1024]; /* the leaf's path below the cgroup2 mount, for messages and JSON */
};

/*
 * Make a leaf for one run and write its limits: memory.max and memory.swap.max=0 from
 * c->memory, pids.max from c->pids_limit, cpu.max from c->cpus_milli (500 -> "50000 100000").
 * Leaves of earlier runs whose nsbox is gone are removed on the way.
 *
 * Where the leaf goes (README.md, "Limits"), the first that can hold it:
 *   1. c->cgroup_parent, if given, and nothing else;
 *   2. the caller's own cgroup, if delegated to it (writable) and offering the controllers.
 *      As a cgroup holding processes cannot enable controllers for children, the caller first
 *      moves itself into the child leaf "nsbox-supervisor", but only if it is the only process
 *      there: a cgroup that holds others (a terminal's scope with its shell) is left untouched;
 *   3. a transient scope with Delegate=yes from the caller's systemd user manager over D-Bus
 *      (scope_start_delegated(), scope.h), which moves the caller into it; then as in 2. That
 *      costs a bus round trip and a job; where 2 does, no bus is touched. The scope is the
 *      manager's: it goes away when nsbox exits;
 *   4. the nearest ancestor of the own cgroup within the subtree delegated to the caller (each
 *      cgroup on the way owned by the caller's uid, its cgroup.procs and cgroup.subtree_control
 *      writable by it; never the root cgroup; never for root) that offers the controllers and
 *      enables them for children, or holds no process and can enable them (they stay enabled).
 *      The caller stays where it is; the sandbox is born in the leaf (CLONE_INTO_CGROUP).
 *
 * Returns 1 with *ret filled when a leaf is ready; 0 when cgroup v2 cannot hold the sandbox
 * here (no cgroup2 mount, a controller missing, no place above), with the reason in
 * reason[size], which then names every attempt and why it failed; a -errno when a step that
 * should have worked failed (a limit that could not be written), also with reason, and then
 * nothing is left behind. Blocks for at most SCOPE_TIMEOUT_USEC in the D-Bus exchange.
 */
int cgroup_leaf_create(const struct nsbox_config *c, struct cgroup_leaf *ret, char *reason,
                       size_t size);

/*
 * Where cgroup_leaf_create() would put a leaf for c, without changing anything: no cgroup is
 * made, no controller enabled, nobody moved, no scope started (for step 3 only whether the
 * systemd user manager answers on the user bus is asked, so a start job that would fail is not
 * foreseen). Returns 1 with the place and why the places before it did not do in what[size],
 * 0 with the reason a run would fall back to rlimits, or a -errno with the reason a run would
 * fail.
 */
int cgroup_placement(const struct nsbox_config *c, char *what, size_t size);

/* Move process pid into the leaf (for kernels without CLONE_INTO_CGROUP). Returns 0 or
 * -errno. */
int cgroup_leaf_attach(const struct cgroup_leaf *leaf, pid_t pid);

/* Read the leaf's statistics into *ret (fields the kernel lacks stay 0). Returns 0. */
void cgroup_leaf_stats(const struct cgroup_leaf *leaf, struct nsbox_cgroup_stats *ret);

/* Kill every process in the leaf (cgroup.kill, Linux 5.14; else SIGKILL to each pid in
 * cgroup.procs until it is empty), then remove it and close its descriptors. Safe to call on a
 * leaf that failed to be made (dir_fd < 0). Returns 0 or the -errno of rmdir(2). */
int cgroup_leaf_destroy(struct cgroup_leaf *leaf);

struct sandbox_plan;

/*
 * Make the cgroup leaf for c's limits in *leaf, or choose the rlimit fallback: sets
 * sb->in_cgroup, ret's enforced_by fields and limits_note, with a warning where the fallback
 * was not asked for. Called by sandbox.c after plan_sandbox() (plan.h). Returns 0, or -errno
 * (-EOPNOTSUPP under --cgroup required without a leaf).
 */
int plan_cgroup(const struct nsbox_config *c, struct sandbox_plan *sb, struct cgroup_leaf *leaf,
                struct nsbox_result *ret);
