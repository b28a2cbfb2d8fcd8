/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The plan of a run: the config validated and turned into a struct sandbox (sandbox.h), in the
 * supervisor, before any namespace exists. It needs no step order: sandbox.c calls
 * plan_sandbox(), then plan_cgroup(), and the sandbox's init and the supervisor act on the plan.
 *
 * Every function fills ret's error (report_error(): status error, exit status 125, error_step
 * "config" for the caller's mistakes, report_config_error()) and returns its -errno on failure, and
 * adds a warning (report_warning()) for what it leaves out or falls back on. Among them,
 * plan_env(), plan_mounts() with tmpfs mounts only, plan_identity() and plan_opt_out_warnings()
 * need no OS state (tests/unit/test-plan.c).
 */
#pragma once

#include "nsbox.h"
#include "sandbox.h"

struct cgroup_leaf;

/*
 * Fill *sb from the config c: argv, environment, mounts, the rootfs's missing mount points and
 * identity files, the copy streams, the host ids, the seccomp filter; the name, the labels, the
 * host ids and the warnings go into ret. *sb is reset first; free it with plan_free(), also
 * after a failure. Returns 0 or -errno (-EINVAL for an invalid config).
 */
int plan_sandbox(const struct nsbox_config *c, struct sandbox *sb, struct nsbox_result *ret);

/* Free what plan_sandbox() made in sb, close its descriptors, remove the workspace's staging
 * directory if it is still there, and give the host ids back to the pool. */
void plan_free(struct sandbox *sb);

/*
 * Make the cgroup leaf for c's limits (cgroup.h) in *leaf, or choose the rlimit fallback:
 * sets sb->in_cgroup, ret's enforced_by fields and limits_note, with a warning where the
 * fallback was not asked for. Returns 0, or -errno (-EOPNOTSUPP under --cgroup required
 * without a leaf).
 */
int plan_cgroup(const struct nsbox_config *c, struct sandbox *sb, struct cgroup_leaf *leaf,
                struct nsbox_result *ret);

/*
 * The payload's environment in sb->envp (sb->path pointing at its PATH value): with
 * env_inherit the caller's environ(7) (entries that are not KEY=VALUE skipped), then the fixed
 * base (PATH, HOME, LANG, PYTHONUNBUFFERED, the thread counts of --cpus, the proxy's
 * variables with --network allow=), then config->env, where a later KEY wins and keeps the
 * place of the first. Needs sb->config. Returns 0, -EINVAL for an -e that is not KEY=VALUE,
 * -ENOMEM.
 */
int plan_env(struct sandbox *sb, struct nsbox_result *ret);

/*
 * The mounts of -v, --tmpfs and the /tmp tmpfs (unless one is given) in sb->mounts, sorted
 * parents first (stable: a mount below another is made after it, so it lands on top). Targets
 * must be absolute without "." or "..", not in /proc or /dev, not above /work/main.py with
 * --code, and each used once; a bind's source is resolved on the host without symlinks but
 * root's (path_open_nofollow()). Needs sb->config. Returns 0, -EINVAL, -ELOOP, -ENOMEM or the
 * source's -errno.
 */
int plan_mounts(struct sandbox *sb, struct nsbox_result *ret);

/* The run's name and labels, checked (run_name_is_valid(), label_is_valid()) and copied into
 * ret. Returns 0, -EINVAL or -ENOMEM. */
int plan_identity(const struct nsbox_config *c, struct nsbox_result *ret);

/* A warning in ret for every protection c removes (--no-seccomp, --network host, --pid host,
 * --ipc host, --env-inherit, --keep-fds). */
void plan_opt_out_warnings(const struct nsbox_config *c, struct nsbox_result *ret);

/* How a --copy-out HOSTDIR (%s) inside a writable bind (its source, %s) is refused, by runs
 * (plan.c) and session steps (session-client.c) alike. */
#define RW_COPY_OUT                                                                                \
    "--copy-out %s lies inside the writable bind -v %s:...:rw, where the sandbox could rename "    \
    "it and plant a symlink in its place (the result's host_path would then name a file of "       \
    "its choosing): copy out to a directory outside every :rw bind"
