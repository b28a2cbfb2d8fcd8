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
    int dir_fd;     /* the leaf directory (O_DIRECTORY), for CLONE_INTO_CGROUP and files */
    int parent_fd;  /* its parent directory, for rmdir */
    char name[96];  /* the leaf's name in its parent */
    char path[1024]; /* the leaf's path below the cgroup2 mount, for messages and JSON */
};

/*
 * Make a leaf for one run and write its limits: memory.max and memory.swap.max=0 from
 * c->memory, pids.max from c->pids_limit, cpu.max from c->cpus_milli (500 -> "50000 100000").
 * The parent is c->cgroup_parent, else the caller's own cgroup; when the parent holds processes
 * (the caller) and its controllers are not enabled for children, the caller moves itself into
 * the sibling leaf "nsbox-supervisor" first. Leaves of earlier runs whose nsbox is gone are
 * removed on the way.
 *
 * When the caller's own cgroup is not delegated to it (not writable; or its controllers are not
 * enabled for it while the root cgroup has them) and no c->cgroup_parent was given, the caller
 * asks its systemd user manager over D-Bus for a transient scope with Delegate=yes
 * (scope_start_delegated(), scope.h), is moved into it by the manager, and the leaf is made
 * there as in any delegated cgroup. That costs a bus round trip and a job (see README.md,
 * "Limits"); where the own cgroup is delegated, no bus is touched. The scope is the manager's:
 * it goes away when nsbox exits.
 *
 * Returns 1 with *ret filled when a leaf is ready; 0 when cgroup v2 cannot hold the sandbox
 * here (no cgroup2 mount, a controller missing, nothing delegated to this user and no delegated
 * scope from a user manager), with the reason in reason[size], which then names every attempt
 * (the scope's included); a -errno when a step that should have worked failed (a limit that
 * could not be written), also with reason, and then nothing is left behind. Blocks for at most
 * SCOPE_TIMEOUT_USEC in the D-Bus exchange.
 */
int cgroup_leaf_create(const struct nsbox_config *c, struct cgroup_leaf *ret, char *reason,
                       size_t size);

/* Move process pid into the leaf (for kernels without CLONE_INTO_CGROUP). Returns 0 or
 * -errno. */
int cgroup_leaf_attach(const struct cgroup_leaf *leaf, pid_t pid);

/* Read the leaf's statistics into *ret (fields the kernel lacks stay 0). Returns 0. */
void cgroup_leaf_stats(const struct cgroup_leaf *leaf, struct nsbox_cgroup_stats *ret);

/* Kill every process in the leaf (cgroup.kill, Linux 5.14; else SIGKILL to each pid in
 * cgroup.procs until it is empty), then remove it and close its descriptors. Safe to call on a
 * leaf that failed to be made (dir_fd < 0). Returns 0 or the -errno of rmdir(2). */
int cgroup_leaf_destroy(struct cgroup_leaf *leaf);
