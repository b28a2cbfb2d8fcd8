/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Landlock (landlock(7)): a second wall behind the mount and network namespaces, planned by the
 * supervisor and applied by the sandbox's init once its filesystem is complete, before the
 * seccomp filters:
 *   files    read: the sandbox's whole tree (what lies below its "/"), nothing outside it;
 *            execute: the rootfs and the binds, never the tmpfs mounts (/tmp, /work, /dev/shm,
 *            every --tmpfs but DST:exec), /dev or /proc; write: the tmpfs mounts, :rw binds,
 *            the device nodes in /dev and /proc's files;
 *   network  (ABI 4) TCP bind and connect refused without a network, only the proxy's port
 *            under --network allow=; untouched under --network loopback and host;
 *   scope    (ABI 6) signals only to the sandbox's own processes (not under --pid host),
 *            abstract unix sockets only of its own (not under --network host).
 * Rights are attached to inodes, not mounts (a :ro and a :rw bind of one directory share
 * them), and hold for a path the sandbox reaches any way, a descriptor it inherited included.
 */
#pragma once

#include "report.h"
#include "plan.h"

/* The newest Landlock ABI nsbox knows (7 adds only audit-logging flags, no right). */
#define LANDLOCK_ABI_KNOWN 7

/* In the supervisor: probe the kernel's ABI and decide what init applies (sb->landlock_*),
 * recording it in ret (landlock_abi, landlock_restricts, landlock_missing) and, for
 * NSBOX_LANDLOCK_OFF, a warning. Returns 0, or -EOPNOTSUPP (after report_error(), step
 * "landlock") under NSBOX_LANDLOCK_REQUIRED where the kernel has no usable Landlock. */
int landlock_plan(const struct nsbox_config *c, struct sandbox_plan *sb, struct nsbox_result *ret);

/* In init, holding CAP_SYS_ADMIN in its namespaces (before it drops its capabilities) and
 * before the seccomp filters: build the ruleset sb planned (opening each path once, O_PATH)
 * and restrict init, and so everything it starts. What it leaves out (the mqueue rule, where
 * mounting mqueue is refused) goes to report_fd with report_skipped(). Returns 0 or -errno
 * with *e filled (step "landlock"). */
int landlock_apply(const struct sandbox_plan *sb, int report_fd, struct report_step *e);

/* Tier 3 (tier3.h): the kernel's Landlock ABI, at most LANDLOCK_ABI_KNOWN, or -errno: -ENOSYS
 * or -EOPNOTSUPP without Landlock, -EPERM where a seccomp filter refuses it, -EPROTO for ABI 1
 * (which nsbox does not use). */
int landlock_tier3_abi(void);

/* A host path tier 3 grants: read (files and directories below it), and write, execute, or
 * the rights of a device node (write, truncate, ioctl) where set; or, with remove_dir, only
 * the removal of directories right below it. */
struct landlock_path {
    const char *path;
    bool write, exec, device, remove_dir;
};

/* Restrict the calling process (no_new_privs set, or CAP_SYS_ADMIN) to paths[0..n) and, at ABI
 * 4, no TCP bind or connect at all; at ABI 6 also signals and abstract unix sockets only within
 * its own domain. Every right of the ABI is handled, so anything not granted is refused. A
 * path that does not exist is skipped. Returns 0 or -errno with *e filled (step "landlock"). */
int landlock_apply_paths(int abi, const struct landlock_path *paths, size_t n,
                         struct report_step *e);
