/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The plan of a run's filesystem (mount.h), in the supervisor, before any namespace exists:
 * the mounts of -v, --tmpfs and /tmp checked and sorted parents first, the rootfs checked, and
 * the mount points it lacks found, for init to make in a skeleton (mount.c). Called by
 * plan_sandbox() (plan.c); errors and warnings go into the result (report.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "mount.h"
#include "parse.h"
#include "plan.h"
#include "report.h"
#include "syscalls.h"

static size_t path_depth(const char *path)
{
    size_t d = 0;
    for (; *path; path++)
        d += *path == '/';
    return d;
}

int plan_mounts(struct sandbox_plan *sb, struct nsbox_result *ret)
{
    const struct nsbox_config *c = sb->config;
    bool have_tmp = false;
    size_t n = 0;

    sb->mounts = calloc(c->n_binds + c->n_tmpfs + 1, sizeof(*sb->mounts));
    if (!sb->mounts)
        return report_error(ret, -ENOMEM, "mounts", "out of memory");

    for (size_t i = 0; i < c->n_binds + c->n_tmpfs; i++) {
        struct sandbox_mount *m = &sb->mounts[n];
        const char *target;

        if (i < c->n_binds) {
            const struct nsbox_bind *b = &c->binds[i];
            char walked[PATH_MAX];
            int fd;

            if (!b->source || b->source[0] != '/')
                return report_error(ret, -EINVAL, "bind",
                                    "bind source '%s' is not an absolute path",
                                    b->source ? b->source : "");
            /* A symlink in a source may have been planted by an earlier run that had its
             * directory writable: following it would bind what the caller never named (a 0700
             * directory of root's, the caller's ~/.ssh). Only root's links in directories only
             * root can write are followed (path_open_nofollow()); here, as the caller, where
             * owners read true. The result has no symlink left: the sandbox's init opens it
             * again refusing every symlink, and binds that very descriptor
             * (mount_clone_sources()), so a link swapped in meanwhile is refused too. */
            fd = path_open_nofollow(b->source, true, walked, sizeof(walked));
            if (fd == -ELOOP)
                return report_error(ret, fd, "bind",
                                    "-v %s: '%s' is a symlink, and nsbox follows only root's "
                                    "symlinks in directories only root can write (a sandbox may "
                                    "have planted it): name the path it points to",
                                    b->source, walked);
            if (fd < 0)
                return report_error(ret, fd, "bind", "bind source '%s': %m", b->source);
            (void)close(fd);
            *m = (struct sandbox_mount){.target = b->target,
                                        .writable = b->writable,
                                        .source_owned = strdup(walked)};
            ret->writable_binds |= b->writable;
            if (!m->source_owned)
                return report_error(ret, -ENOMEM, "bind", "out of memory");
            m->source = m->source_owned;
        } else {
            const struct nsbox_tmpfs *t = &c->tmpfs[i - c->n_binds];
            if (t->size == 0)
                return report_error(ret, -EINVAL, "tmpfs", "tmpfs on %s has size 0", t->target);
            *m = (struct sandbox_mount){.is_tmpfs = true,
                                        .target = t->target,
                                        .size = t->size,
                                        .mode = t->mode,
                                        .exec = t->exec,
                                        .is_dir = true};
        }
        m->tree_fd = -EBADF;
        target = m->target;
        if (!path_is_safe_target(target))
            return report_error(ret, -EINVAL, "mounts",
                                "mount target '%s' must be an absolute path without '.' or '..'",
                                target ? target : "");
        /* /proc and /dev are nsbox's: a bind there could hand the payload a host device or a
         * second procfs view. */
        if (path_is_at_or_below(target, "/proc") || path_is_at_or_below(target, "/dev"))
            return report_error(ret, -EINVAL, "mounts",
                                "mount target '%s': /proc and /dev are managed by nsbox", target);
        if (c->code && path_is_at_or_below("/work/main.py", target))
            return report_error(ret, -EINVAL, "mounts",
                                "mount target '%s' would hide /work/main.py given by --code",
                                target);
        for (size_t j = 0; j < n; j++)
            if (strcmp(sb->mounts[j].target, target) == 0)
                return report_error(ret, -EINVAL, "mounts", "two mounts on '%s'", target);
        have_tmp = have_tmp || strcmp(target, "/tmp") == 0;
        n++;
    }
    if (!have_tmp)
        sb->mounts[n++] = (struct sandbox_mount){.is_tmpfs = true,
                                                 .target = "/tmp",
                                                 .size = c->tmp_size,
                                                 .mode = 01777,
                                                 .is_dir = true,
                                                 .tree_fd = -EBADF};

    /* Parents before children (insertion sort, stable): a mount below another lands on top. */
    for (size_t i = 1; i < n; i++) {
        struct sandbox_mount m = sb->mounts[i];
        size_t j = i;
        for (; j > 0 && path_depth(sb->mounts[j - 1].target) > path_depth(m.target); j--)
            sb->mounts[j] = sb->mounts[j - 1];
        sb->mounts[j] = m;
    }
    sb->n_mounts = n;
    return 0;
}

/* 1 if the rootfs (rootfd) lacks the absolute path, 0 if it has it or the lookup failed
 * otherwise (a symlink on the way, a file where a directory should be: mount_populate() says
 * which). Never through a symlink, never outside the rootfs (openat2(2) RESOLVE_BENEATH). A
 * single name is one fstatat(2), as cheap as the check of the base mount points always was. */
static int rootfs_lacks(int rootfd, const char *path)
{
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS};
    struct stat st;
    int fd;

    path += strspn(path, "/");
    if (!strchr(path, '/'))
        return fstatat(rootfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
    fd = sys_openat2(rootfd, path, &how);
    if (fd >= 0) {
        (void)close(fd);
        return 0;
    }
    return errno == ENOENT;
}

/* Which mount points the rootfs lacks, to be made in a skeleton (mount.c): the base ones
 * (mount_base_points[]) and the targets of mounts that are not below another mount (those are
 * made in that mount, as before: /tmp/x in the /tmp tmpfs). */
static int plan_mount_points(struct sandbox_plan *sb, int rootfd, struct nsbox_result *ret)
{
    for (size_t i = 0; i < MOUNT_N_BASE; i++) {
        struct stat st;
        if (fstatat(rootfd, mount_base_points[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                sb->rootfs_lacks |= 1U << i;
        } else if (!S_ISDIR(st.st_mode))
            return report_error(ret, -ENOTDIR, "rootfs",
                                "rootfs '%s': /%s is not a directory (nsbox mounts its own there; "
                                "remove it, or leave it out: nsbox then adds it)",
                                sb->rootfs, mount_base_points[i]);
    }
    for (size_t i = 0; i < sb->n_mounts; i++) {
        struct sandbox_mount *m = &sb->mounts[i];
        bool below = path_is_at_or_below(m->target, "/work");

        for (size_t j = 0; j < sb->n_mounts && !below; j++)
            below = j != i && path_depth(sb->mounts[j].target) < path_depth(m->target) &&
                    path_is_at_or_below(m->target, sb->mounts[j].target);
        if (!below && rootfs_lacks(rootfd, m->target) > 0) {
            m->missing = true;
            sb->n_missing++;
        }
    }
    return 0;
}

int plan_rootfs(struct sandbox_plan *sb, struct nsbox_result *ret, int *ret_fd)
{
    _cleanup_close_ int fd = -EBADF;
    struct stat st, host_root;

    fd = open(sb->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return report_error(ret, negative_errno(), "rootfs",
                            "rootfs '%s': %m (build it with 'ninja -C build' or 'nsbox rootfs "
                            "build DIR', install it with 'meson install', or point $NSBOX_ROOTFS "
                            "or --rootfs at one)",
                            sb->rootfs);
    if (fstat(fd, &st) == 0 && stat("/", &host_root) == 0 && st.st_dev == host_root.st_dev &&
        st.st_ino == host_root.st_ino)
        return report_error(ret, -EINVAL, "rootfs",
                            "rootfs '%s' is the host's own root: nsbox needs a separate root "
                            "filesystem (the built one, or a directory made with nsbox rootfs "
                            "build)",
                            sb->rootfs);
    /* A directory with neither /usr nor /bin is no root filesystem: most often the directory
     * above one (a copy of build/rootfs, whose tree is in tree/), which would run as an empty
     * root and end in a puzzling "not found". */
    if (fstatat(fd, "usr", &st, AT_SYMLINK_NOFOLLOW) < 0 &&
        fstatat(fd, "bin", &st, AT_SYMLINK_NOFOLLOW) < 0) {
        bool tree = fstatat(fd, "tree/usr", &st, AT_SYMLINK_NOFOLLOW) == 0;
        return report_error(ret, -ENOTDIR, "rootfs",
                            "rootfs '%s' has neither /usr nor /bin: not a root filesystem%s%s%s",
                            sb->rootfs, tree ? " (did you mean '" : "", tree ? sb->rootfs : "",
                            tree ? "/tree'?)" : " (nsbox rootfs build DIR makes one)");
    }
    /* Mount points it lacks are made without writing to it (mount.c, skeletons). */
    if (plan_mount_points(sb, fd, ret) < 0)
        return -ENOTDIR;
    *ret_fd = TAKE_FD(fd);
    return 0;
}
