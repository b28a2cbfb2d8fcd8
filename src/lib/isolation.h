/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The tier of isolation a run gets (README, "Isolation tiers"), decided by the supervisor
 * before the sandbox is made:
 *   tier 1  the full sandbox;
 *   tier 2  the full sandbox without what a container denies that is not a wall: where
 *           /proc/sys is read-only (Docker's and Podman's default, a Kubernetes pod's), init
 *           cannot set the sysctls of the sandbox's own namespaces (init_sysctls()): the user
 *           namespace's user.max_* budgets stay the kernel's, and root's vm.memfd_noexec and
 *           kernel.shm* give way to the seccomp filters an ordinary user's run gets.
 * NSBOX_ISOLATION_FULL refuses tier 2. A masked /proc that refuses a fresh procfs mount is a
 * wall: the mount step fails, as in tier 1.
 */
#pragma once

#include <jansson.h>

#include "plan.h"

/* Decide the run's tier, after plan_sandbox() (which sets sb->host_root) and before
 * plan_cgroup(): sets sb->sysctls_read_only (and clears sb->host_root, whose one power is
 * writing /proc/sys), ret->isolation_tier and ret->isolation_missing, with one warning for
 * tier 2. Returns 0, or -EPERM (ret: status error, step "isolation") when
 * NSBOX_ISOLATION_FULL meets tier 2. */
int isolation_plan(const struct nsbox_config *c, struct sandbox_plan *sb, struct nsbox_result *ret);

/* {"tier": N, "missing": [...]} of ret, or null for a run that failed before its tier was
 * decided. */
json_t *isolation_json(const struct nsbox_result *ret);
