/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The sandbox's filesystem, built by its init in a fresh mount namespace, in phases that
 * sandbox.c calls in order:
 *   mount_clone_sources()  clone the host mounts the sandbox needs (device nodes, -v sources)
 *                          while host paths are still reachable;
 *   mount_enter_rootfs()   bind the rootfs read-only, make the mount points it lacks in a
 *                          skeleton, mount /proc in it, pivot_root into it, drop the old root;
 *   mount_populate()       /dev, tmpfs mounts, /work with the code, -v binds;
 *   mount_identity_files() the --user's /etc/passwd and /etc/group entries, when needed.
 * All return 0 or a -errno and fill *e with the step that failed.
 */
#pragma once

#include "report.h"
#include "plan.h"

/* The mount points nsbox makes in every sandbox besides those of its mounts (/tmp is one), as
 * names in the rootfs's top directory. Bit i of sandbox.rootfs_lacks says mount_base_points[i]
 * is missing there. */
#define MOUNT_N_BASE 3
extern const char *const mount_base_points[MOUNT_N_BASE];

/* Device nodes bound from the host into the sandbox's /dev. */
#define MOUNT_N_DEVICES 5
extern const char *const mount_devices[MOUNT_N_DEVICES];

/* Make every mount private (no propagation to or from the host), then clone each device node
 * and each -v source into a detached mount (open_tree(2) OPEN_TREE_CLONE), storing the fds in
 * dev_fds[] and sb->mounts[i].tree_fd. Bind sources are made nosuid, nodev and, unless :rw,
 * read-only, recursively, before they are attached anywhere. */
int mount_clone_sources(struct sandbox_plan *sb, int dev_fds[MOUNT_N_DEVICES],
                        struct report_step *e);

/* Bind sb->rootfs on itself read-only, nosuid, nodev; make the mount points the plan found
 * missing (sb->rootfs_lacks, sandbox_mount.missing) without writing to it, by covering the
 * directory that lacks one with a read-only "skeleton" tmpfs (see mount.c); mount a fresh /proc
 * in it (with /proc/sys and /proc/sysrq-trigger read-only); pivot_root(2) into it and detach
 * the old root, so that no host path is reachable any more. Leaves the working directory at
 * "/". */
int mount_enter_rootfs(const struct sandbox_plan *sb, struct report_step *e);

/* Mount a minimal read-only /dev, the tmpfs mounts, the writable /work tmpfs (with a read-only
 * main.py when code is given), and the -v binds; then chdir("/work"). Must run with the sandbox's
 * final credentials so that created files are owned by mapped ids. Consumes (closes) the fds
 * mount_clone_sources() made. */
int mount_populate(struct sandbox_plan *sb, int dev_fds[MOUNT_N_DEVICES], struct report_step *e);

/* chdir(2) to config->workdir (-w), made first (mode 0755, parents too) if it is missing, which
 * only works below a writable mount; a symlink on the way is refused (-ELOOP). No-op without
 * -w. Returns 0 or -errno, with *e filled. */
int mount_enter_workdir(const struct sandbox_plan *sb, struct report_step *e);
/* When the plan made them (sb->passwd, sb->group: the --user's ids are not in the rootfs's
 * files), bind read-only copies of /etc/passwd and /etc/group with the user's line over the
 * rootfs's, from a small tmpfs of their own. Runs after mount_populate(). */
int mount_identity_files(const struct sandbox_plan *sb, struct report_step *e);

/*
 * The mounts of -v, --tmpfs and the /tmp tmpfs (unless one is given) in sb->mounts, sorted
 * parents first (stable: a mount below another is made after it, so it lands on top). Targets
 * must be absolute without "." or "..", not in /proc or /dev, not above /work/main.py with
 * --code, and each used once; a bind's source is resolved on the host without symlinks but
 * root's (path_open_nofollow()). Needs sb->config. Called by plan_sandbox() (plan.h), in the
 * supervisor (mount-plan.c). Returns 0, -EINVAL, -ELOOP, -ENOMEM or the source's -errno, with
 * ret's error filled.
 */
int plan_mounts(struct sandbox_plan *sb, struct nsbox_result *ret);

/*
 * Open sb->rootfs (O_PATH) into *ret_fd and check it is a root filesystem: not the host's own
 * "/", with /usr or /bin; and find what it lacks of mount_base_points[] (sb->rootfs_lacks,
 * -ENOTDIR where one is not a directory) and of the targets of sb->mounts that are not below
 * another mount (sandbox_mount.missing, sb->n_missing), never through a symlink. Runs after
 * plan_mounts() (mount-plan.c). Returns 0, or -errno with ret's error filled.
 */
int plan_rootfs(struct sandbox_plan *sb, struct nsbox_result *ret, int *ret_fd);
