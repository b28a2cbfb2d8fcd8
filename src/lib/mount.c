/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The sandbox's filesystem. Runs in the sandbox's init, inside its fresh user and mount
 * namespaces, before any untrusted code exists. Security-relevant choices are commented with
 * their reason; see mount.h for the phases.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "mount.h"
#include "syscalls.h"

const char *const mount_base_points[MOUNT_N_BASE] = {"proc", "dev", "work"};

const char *const mount_devices[MOUNT_N_DEVICES] = {
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
};

/* Size of the /dev tmpfs: it holds only empty mount-point files, symlinks and /dev/shm. */
#define DEV_TMPFS_OPTIONS "size=64k,nr_inodes=64,mode=0755"

/* Slack added to the code's size for the /work tmpfs (page rounding, directory entries). */
#define WORK_TMPFS_SLACK (64 * 1024)

static int set_mount_attr(int dfd, const char *path, unsigned flags, uint64_t set)
{
    struct nsbox_mount_attr attr = {.attr_set = set};
    return sys_mount_setattr(dfd, path, flags, &attr) < 0 ? negative_errno() : 0;
}

int mount_clone_sources(struct sandbox_plan *sb, int dev_fds[MOUNT_N_DEVICES],
                        struct report_step *e)
{
    /* A new mount namespace starts with the propagation of the one it was copied from: make
     * everything private first, so that nothing mounted here ever shows up on the host and host
     * mounts made later do not appear in here (mount_namespaces(7)). */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return report_step_failed(e, negative_errno(), "make mounts private", NULL);

    /* A user namespace cannot mknod(2) devices, so the few harmless device nodes are bound from
     * the host, as bubblewrap does. They are cloned now, while host paths are reachable. */
    for (size_t i = 0; i < MOUNT_N_DEVICES; i++) {
        dev_fds[i] = sys_open_tree(AT_FDCWD, mount_devices[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (dev_fds[i] < 0)
            return report_step_failed(e, negative_errno(), "clone device node", "%s",
                                      mount_devices[i]);
    }

    for (size_t i = 0; i < sb->n_mounts; i++) {
        struct sandbox_mount *m = &sb->mounts[i];
        uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        _cleanup_close_ int src = -EBADF;
        char walked[PATH_MAX];
        struct stat st;
        int r;

        if (m->is_tmpfs)
            continue;
        /* The source was walked by the supervisor, which followed only root's symlinks and
         * left none in m->source (plan_mounts()). Here it is opened once more, every symlink
         * refused (a link planted since is an error, never followed), and that descriptor is
         * what gets bound: no second lookup by name. Not followed in here in any case: this
         * process is in the sandbox's user namespace, where root's files do not read as
         * root's. (The supervisor's descriptor cannot be used: open_tree(2) clones only a
         * mount of the caller's own mount namespace, EINVAL otherwise, fs/namespace.c.) */
        src = path_open_nofollow(m->source, false, walked, sizeof(walked));
        if (src == -ELOOP)
            return report_step_failed(e, src, "bind source", "-v %s: %s became a symlink",
                                      m->source, walked);
        if (src < 0)
            return report_step_failed(e, src, "bind source", "%s", m->source);
        if (fstat(src, &st) < 0)
            return report_step_failed(e, negative_errno(), "bind source", "%s", m->source);
        m->is_dir = S_ISDIR(st.st_mode);
        /* AT_RECURSIVE: what is mounted below the source comes along, and is made read-only
         * with it. The attributes are set on the detached clone, so the sandbox never sees a
         * moment where a read-only bind is writable. */
        m->tree_fd = sys_open_tree(src, "",
                                   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                       AT_EMPTY_PATH);
        if (m->tree_fd < 0)
            return report_step_failed(e, negative_errno(), "clone bind source", "%s", m->source);
        if (!m->writable)
            attrs |= MOUNT_ATTR_RDONLY;
        r = set_mount_attr(m->tree_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, attrs);
        if (r < 0)
            return report_step_failed(e, r, "set bind attributes", "%s", m->source);
    }
    return 0;
}

/* What Docker's default maskedPaths hide, and why: host-wide kernel state that a pid
 * namespace does not narrow. Files get /dev/null bound over them, directories an empty
 * read-only tmpfs, as container runtimes do; an entry this kernel does not have is skipped.
 * (nsbox has no /sys, so /sys/firmware needs nothing.) */
static const char *const proc_masked[] = {
    "proc/keys",          /* keys of every uid mapped in the sandbox: for root's runs, those
                           * of host processes running as nobody (not namespaced) */
    "proc/timer_list",    /* every pending timer of the host, with pids and functions */
    "proc/timer_stats",   /* who sets timers (Linux < 4.11) */
    "proc/latency_stats", /* the host's scheduling latencies, by code path */
    "proc/sched_debug",   /* every task on every CPU of the host */
    "proc/kcore",         /* the kernel's memory as an ELF core */
    "proc/acpi",          /* firmware tables and knobs */
    "proc/asound",        /* the host's sound devices */
    "proc/scsi",          /* the host's SCSI devices; writing adds and removes them */
};

/* Cover each proc_masked entry that exists. Paths are relative to the rootfs (the working
 * directory); the host's /dev/null is still reachable, before pivot_root. Over-mounting parts
 * of a procfs is allowed once it is mounted (mount_too_revealing() in fs/namespace.c only
 * checks new procfs mounts). */
static int mask_proc(struct report_step *e)
{
    for (size_t i = 0; i < ELEMENTSOF(proc_masked); i++) {
        const char *path = proc_masked[i];
        struct stat st;
        int r;

        if (lstat(path, &st) < 0) {
            if (errno == ENOENT)
                continue;
            return report_step_failed(e, negative_errno(), "mask", "%s", path);
        }
        if (S_ISDIR(st.st_mode)) {
            if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      "size=4k,nr_inodes=1,mode=0555") < 0)
                return report_step_failed(e, negative_errno(), "mask", "%s", path);
            continue;
        }
        if (mount("/dev/null", path, NULL, MS_BIND, NULL) < 0)
            return report_step_failed(e, negative_errno(), "mask", "%s", path);
        /* Not nodev: the bound node is the device that reads as empty. */
        r = set_mount_attr(AT_FDCWD, path, 0,
                           MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        if (r < 0)
            return report_step_failed(e, r, "mask", "%s", path);
    }
    return 0;
}

static int populate_proc(bool pid_host, struct report_step *e)
{
    static const char *const read_only[] = {"proc/sys", "proc/sysrq-trigger"};

    if (pid_host) {
        /* Opted out of the pid namespace: a new procfs would need CAP_SYS_ADMIN over the
         * host's pid namespace (proc(5)), so the host's /proc is bound, with its submounts. */
        int r;
        if (mount("/proc", "proc", NULL, MS_BIND | MS_REC, NULL) < 0)
            return report_step_failed(e, negative_errno(), "bind the host's /proc", "--pid host");
        r = set_mount_attr(AT_FDCWD, "proc", AT_RECURSIVE,
                           MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (r < 0)
            return report_step_failed(e, r, "make the host's /proc nosuid, nodev, noexec",
                                      "--pid host");
    } else if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        /* A fresh procfs for the new pid namespace: it shows only the sandbox's processes.
         * Paths are relative to the new root, the working directory. It is mounted before the
         * old root goes: in a user namespace the kernel allows a new procfs only while a fully
         * visible one is mounted in the same mount namespace (mnt_already_visible() in
         * fs/namespace.c), so it also fails (EPERM) where the host's /proc has parts hidden by
         * over-mounts. */
        return report_step_failed(e, negative_errno(), "mount /proc",
                                  "a fully visible /proc is needed; a container's masks parts of "
                                  "it by "
                                  "default: 'nsbox doctor' names the container setting that "
                                  "unmasks it");
    }

    /* Kernel knobs stay read-only even for a payload that is root in its namespace; Docker
     * does the same. (Writes there are already refused to unmapped owners; this is a second
     * wall.) */
    for (size_t i = 0; i < ELEMENTSOF(read_only); i++) {
        int r;
        if (mount(read_only[i], read_only[i], NULL, MS_BIND | MS_REC, NULL) < 0) {
            if (errno == ENOENT)
                continue; /* a kernel without it (CONFIG_MAGIC_SYSRQ=n) */
            return report_step_failed(e, negative_errno(), "bind", "%s", read_only[i]);
        }
        r = set_mount_attr(AT_FDCWD, read_only[i], AT_RECURSIVE,
                           MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                               MOUNT_ATTR_NOEXEC);
        if (r < 0)
            return report_step_failed(e, r, "make read-only", "%s", read_only[i]);
    }
    return mask_proc(e);
}

/* ---- Mount points the rootfs lacks ----------------------------------------------------------
 *
 * A rootfs that lacks a mount point nsbox needs (/proc, /dev, /tmp, /work, the target of a -v or
 * --tmpfs: a `docker export`, a plain debootstrap) is never written to. Instead, the directory
 * that should hold the missing entry is covered with a "skeleton": a small tmpfs holding one
 * entry for each of the directory's own (an empty directory or file with that entry bound on it
 * read-only, recursively; a symlink copied as a symlink), plus the missing mount points. Once
 * every missing point is made, the whole tree is made read-only again. So the sandbox sees the
 * rootfs as it is, plus empty mount points, read-only, and the rootfs is left as it was. An
 * overlayfs would do the same at the top but not deeper: its copy-up of a rootfs directory
 * chowns it to the rootfs's owner, which is not mapped in the sandbox's user namespace
 * (EOVERFLOW, notify_change() in fs/attr.c); and it needs Linux 5.11 and user xattrs on tmpfs.
 *
 * Only a run whose plan found a point missing takes this path (plan_rootfs(), plan_mounts());
 * a rootfs that has them all costs nothing. It runs before pivot_root(2), where the host's
 * /proc is still visible (a new procfs needs that, populate_proc()).
 */

/* Most entries of one covered directory (its tmpfs gets an inode each). */
#define SKELETON_MAX_ENTRIES 100000

/* Cover the directory dir (an O_PATH descriptor) with a skeleton; on success *ret_fd is the
 * skeleton's root (O_PATH). Entries are listed and bound through dir, which keeps reaching the
 * covered directory once the tmpfs is on top of it. */
static int skeleton_cover(int dir, const char *where, int *ret_fd, struct report_step *e)
{
    _cleanup_close_ int fs = -EBADF, mnt = -EBADF;
    char value[32];
    size_t n = 0;
    struct stat st;
    DIR *d = NULL;
    int list, r = 0;

    /* Listed as the sandbox's user (the caller set the fs ids): a directory it cannot read is
     * not shown either. */
    list = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (list < 0)
        return report_step_failed(e, negative_errno(), "mount point",
                                  "cannot list %s to add a mount point", where);
    if (fstat(list, &st) < 0 || !(d = fdopendir(list))) {
        r = negative_errno();
        (void)close(list);
        return report_step_failed(e, r, "mount point", "%s", where);
    }
    for (struct dirent *de; (de = readdir(d));)
        n++;
    if (n > SKELETON_MAX_ENTRIES) {
        (void)closedir(d);
        return report_step_failed(e, -E2BIG, "mount point",
                                  "%s has more than %d entries: too many to add a mount point "
                                  "beside them",
                                  where, SKELETON_MAX_ENTRIES);
    }
    rewinddir(d);

    /* Symlink targets are the only data: a page each at most. */
    fs = sys_fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0) {
        r = negative_errno();
        goto out;
    }
    /* An inode per entry, and room for the missing mount points and their parents. */
    (void)snprintf(value, sizeof(value), "%zu", n + 256);
    /* The source names it in /proc/self/mountinfo. */
    if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "source", "nsbox-skeleton", 0) < 0 ||
        sys_fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", value, 0) < 0)
        goto fail;
    (void)snprintf(value, sizeof(value), "%zu", (n + 256) * 4096);
    if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", value, 0) < 0)
        goto fail;
    (void)snprintf(value, sizeof(value), "%04o", (unsigned)st.st_mode & 07777);
    if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", value, 0) < 0 ||
        sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        goto fail;
    mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (mnt < 0)
        goto fail;
    /* Attached first: a mount can be moved only onto a mount of this namespace. */
    if (sys_move_mount(mnt, "", dir, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        goto fail;

    for (struct dirent *de; (de = readdir(d));) {
        const char *name = de->d_name;
        _cleanup_close_ int tree = -EBADF;
        struct stat est;

        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        if (fstatat(list, name, &est, AT_SYMLINK_NOFOLLOW) < 0)
            goto fail_entry;
        if (S_ISLNK(est.st_mode)) {
            char target[PATH_MAX];
            ssize_t k = readlinkat(list, name, target, sizeof(target) - 1);
            if (k < 0)
                goto fail_entry;
            target[k] = '\0';
            if (symlinkat(target, mnt, name) < 0)
                goto fail_entry;
            continue;
        }
        if (S_ISDIR(est.st_mode)) {
            if (mkdirat(mnt, name, 0755) < 0)
                goto fail_entry;
        } else {
            int fd = openat(mnt, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd < 0)
                goto fail_entry;
            (void)close(fd);
        }
        /* The clone keeps the rootfs's read-only, nosuid and nodev (it is a copy of that
         * mount, fs/namespace.c clone_mnt()); AT_RECURSIVE brings a skeleton made below. */
        tree = sys_open_tree(list, name,
                             OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                 AT_SYMLINK_NOFOLLOW);
        if (tree < 0 || sys_move_mount(tree, "", mnt, name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
            goto fail_entry;
        continue;
    fail_entry:
        r = negative_errno();
        (void)closedir(d);
        return report_step_failed(e, r, "mount point", "copy %s/%s into a skeleton", where, name);
    }
    (void)closedir(d);
    *ret_fd = TAKE_FD(mnt);
    return 0;

fail:
    r = negative_errno();
out:
    (void)closedir(d);
    return report_step_failed(e, r, "mount point", "mount a tmpfs over %s", where);
}

/* Make the mount point path (relative to the tree's top, *top) as a directory or an empty file,
 * covering the deepest directory on the way that exists read-only with a skeleton. *top is
 * replaced when the top itself gets covered. */
static int make_mount_point(int *top, const char *path, bool is_dir, struct report_step *e)
{
    _cleanup_close_ int cur = -EBADF;
    const char *p = path;
    size_t depth = 0; /* components below the top that cur is at */

    path += strspn(path, "/");
    p = path;
    cur = openat(*top, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0)
        return report_step_failed(e, negative_errno(), "mount point", "/");
    for (;;) {
        char name[NAME_MAX + 1];
        size_t len;
        bool last;
        int next;

        while (*p == '/')
            p++;
        len = strcspn(p, "/");
        if (len == 0)
            return 0;
        if (len > NAME_MAX)
            return report_step_failed(e, -ENAMETOOLONG, "mount point", "/%s", path);
        memcpy(name, p, len);
        name[len] = '\0';
        p += len;
        last = p[strspn(p, "/")] == '\0';

        /* One name at a time, never through a symlink (the target would be elsewhere). */
        next = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT) {
            int r = 0;
            for (int attempt = 0; attempt < 2; attempt++) {
                if (!last || is_dir)
                    r = mkdirat(cur, name, 0755) < 0 ? negative_errno() : 0;
                else {
                    int fd = openat(cur, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
                                    0644);
                    r = fd < 0 ? negative_errno() : 0;
                    if (fd >= 0)
                        (void)close(fd);
                }
                if (r != -EROFS || attempt > 0)
                    break;
                /* The directory is the rootfs's (or a bind's clone of it): cover it. */
                {
                    char where[PATH_MAX];
                    size_t at = (size_t)(p - len - path); /* where name starts in path */
                    int skel = -EBADF;

                    while (at > 0 && path[at - 1] == '/')
                        at--;
                    (void)snprintf(where, sizeof(where), "/%.*s", (int)at, path);
                    r = skeleton_cover(cur, where, &skel, e);
                    if (r < 0)
                        return r;
                    (void)close(cur);
                    cur = skel;
                    if (depth == 0) {
                        int top_fd = openat(skel, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
                        if (top_fd < 0)
                            return report_step_failed(e, negative_errno(), "mount point", "/");
                        (void)close(*top);
                        *top = top_fd;
                    }
                }
            }
            if (r < 0)
                return report_step_failed(e, r, "mount point", "make /%s", path);
            next = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0)
            return report_step_failed(e, negative_errno(), "mount point", "/%s", path);
        (void)close(cur);
        cur = next;
        depth++;
        if (!last) {
            struct stat st;
            if (fstat(cur, &st) < 0)
                return report_step_failed(e, negative_errno(), "mount point", "/%s", path);
            if (S_ISLNK(st.st_mode))
                return report_step_failed(e, -ELOOP, "mount point", "/%s goes through a symlink",
                                          path);
            if (!S_ISDIR(st.st_mode))
                return report_step_failed(e, -ENOTDIR, "mount point",
                                          "/%s: a parent is not a directory", path);
        }
    }
}

/* Make the mount points the plan found missing in the rootfs (the working directory), then
 * make the tree read-only again; leaves the working directory at the tree's (new) top. */
static int make_missing_mount_points(const struct sandbox_plan *sb, struct report_step *e)
{
    _cleanup_close_ int top = -EBADF;
    int r;

    /* The skeletons' entries must be owned by an id mapped in the sandbox's user namespace
     * (may_create() in fs/namei.c, EOVERFLOW otherwise): for root's runs, init's own id (host
     * root) is not. So the filesystem ids become the sandbox's now, as all of init's ids do
     * right after pivot_root (caps_switch_ids()); nothing after this point reads a host path
     * that the sandbox's user could not. setfs[ug]id() report no error: read them back. */
    (void)setfsgid(sb->config->gid);
    (void)setfsuid(sb->config->uid);
    if ((uid_t)setfsuid((uid_t)-1) != sb->config->uid ||
        (gid_t)setfsgid((gid_t)-1) != sb->config->gid)
        return report_step_failed(e, -EPERM, "mount point", "switch the filesystem ids");

    top = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return report_step_failed(e, negative_errno(), "mount point", "open the rootfs");
    for (size_t i = 0; i < MOUNT_N_BASE; i++)
        if (sb->rootfs_lacks & (1U << i)) {
            r = make_mount_point(&top, mount_base_points[i], true, e);
            if (r < 0)
                return r;
        }
    for (size_t i = 0; i < sb->n_mounts; i++)
        if (sb->mounts[i].missing) {
            const struct sandbox_mount *m = &sb->mounts[i];
            r = make_mount_point(&top, m->target, m->is_tmpfs || m->is_dir, e);
            if (r < 0)
                return r;
        }

    /* Read-only, recursively: the skeletons, and any copy of one a later skeleton cloned. */
    r = set_mount_attr(top, "", AT_EMPTY_PATH | AT_RECURSIVE, MOUNT_ATTR_RDONLY);
    if (r < 0)
        return report_step_failed(e, r, "mount point", "make the skeleton read-only");
    if (fchdir(top) < 0)
        return report_step_failed(e, negative_errno(), "mount point", "enter the skeleton");
    return 0;
}

int mount_enter_rootfs(const struct sandbox_plan *sb, struct report_step *e)
{
    int r;

    /* A plain (non-recursive) bind: whatever the host has mounted below the rootfs stays out. */
    if (mount(sb->rootfs, sb->rootfs, NULL, MS_BIND, NULL) < 0)
        return report_step_failed(e, negative_errno(), "bind rootfs", "%s", sb->rootfs);

    /* mount_setattr(2) changes only the named attributes. A MS_REMOUNT would also have to
     * repeat every flag the kernel locked on the source mount when the user namespace copied
     * it (atime flags, noexec), or fail with EPERM. */
    r = set_mount_attr(AT_FDCWD, sb->rootfs, 0,
                       MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (r < 0)
        return report_step_failed(e, r, "make rootfs read-only", "%s", sb->rootfs);

    /* pivot_root(".", ".") stacks the old root on top of the new one; the lazy unmount then
     * drops it, and with it every host path (pivot_root(2), NOTES). */
    if (chdir(sb->rootfs) < 0)
        return report_step_failed(e, negative_errno(), "chdir rootfs", "%s", sb->rootfs);
    if (sb->rootfs_lacks || sb->n_missing) {
        r = make_missing_mount_points(sb, e);
        if (r < 0)
            return r;
    }
    r = populate_proc(sb->config->pid_host, e);
    if (r < 0)
        return r;
    if (sys_pivot_root(".", ".") < 0)
        return report_step_failed(e, negative_errno(), "pivot_root", NULL);
    if (umount2(".", MNT_DETACH) < 0)
        return report_step_failed(e, negative_errno(), "detach old root", NULL);
    if (chdir("/") < 0)
        return report_step_failed(e, negative_errno(), "chdir /", NULL);
    return 0;
}

/* One inode per KiB of size: without nr_inodes a tmpfs of a few MiB holds millions of empty
 * files, each costing kernel memory that no size limit counts. */
#define TMPFS_BYTES_PER_INODE 1024

static int mount_tmpfs(const char *target, unsigned long flags, uint64_t size, unsigned mode)
{
    char options[96];
    uint64_t inodes = size / TMPFS_BYTES_PER_INODE;

    (void)snprintf(options, sizeof(options), "size=%" PRIu64 ",nr_inodes=%" PRIu64 ",mode=%04o",
                   size, inodes < 64 ? 64 : inodes, mode);
    return mount("tmpfs", target, "tmpfs", flags, options) < 0 ? negative_errno() : 0;
}

/* Create the parent directories of path that do not exist (mode 0755). */
static int mkdir_parents(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);

    if (n >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return negative_errno();
        *p = '/';
    }
    return 0;
}

/* Make sure target exists with the right type for what is mounted on it. Only possible below
 * the sandbox's own writable tmpfs mounts (/tmp, /work before it is sealed); elsewhere the
 * read-only rootfs must already have it. */
static int ensure_mount_point(const char *target, bool is_dir, struct report_step *e)
{
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    struct stat st;
    int r, fd;

    /* A symlink on the way could have been planted by an earlier run in a writable bind; it
     * would move the mount somewhere else, /proc included. No code runs in the sandbox yet, so
     * checking once is enough. */
    fd = sys_openat2(AT_FDCWD, target, &how);
    if (fd >= 0)
        (void)close(fd);
    else if (errno == ELOOP || errno == EXDEV)
        return report_step_failed(e, -ELOOP, "mount point", "%s goes through a symlink", target);

    if (stat(target, &st) == 0) {
        if (is_dir && !S_ISDIR(st.st_mode))
            return report_step_failed(e, -ENOTDIR, "mount point", "%s is not a directory", target);
        if (!is_dir && S_ISDIR(st.st_mode))
            return report_step_failed(e, -EISDIR, "mount point", "%s is a directory", target);
        return 0;
    }
    if (errno != ENOENT)
        return report_step_failed(e, negative_errno(), "mount point", "%s", target);

    r = mkdir_parents(target);
    if (r >= 0) {
        if (is_dir)
            r = mkdir(target, 0755) < 0 ? negative_errno() : 0;
        else {
            int file_fd = open(target, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
            r = file_fd < 0 ? negative_errno() : 0;
            if (file_fd >= 0)
                (void)close(file_fd);
        }
    }
    if (r == -EROFS)
        return report_step_failed(e, r, "mount point",
                                  "%s does not exist in the read-only bind that holds it; nsbox "
                                  "makes "
                                  "missing mount points in the rootfs, /tmp, /work and other "
                                  "writable "
                                  "mounts only",
                                  target);
    if (r < 0)
        return report_step_failed(e, r, "mount point", "%s", target);
    return 0;
}

/* Pseudo-terminals: a devpts of the sandbox's own (a new instance, as every devpts mounted
 * in a user namespace is, devpts(5)), so that os.openpty(), pty.fork(), script and pexpect work,
 * as in Docker. Its ptys are not the caller's: the host's instance is not mounted, and the
 * payload has no controlling terminal (setsid) and no descriptor of one. Pushing input with
 * TIOCSTI/TIOCLINUX stays refused by seccomp. ptmxmode=0666: /dev/ptmx, a symlink to pts/ptmx,
 * opens for every uid; mode=0620 for the ptys. gid=5 (the tty group) only where the sandbox's
 * gid is 5: the mount fails on a gid the user namespace does not map, and with one gid mapped
 * the ptys belong to it, their opener's gid. max bounds the ptys of one run; the host's count
 * (kernel.pty.max) keeps kernel.pty.reserve for its own instance. */
#define DEVPTS_OPTIONS "newinstance,ptmxmode=0666,mode=0620,max=" STRINGIFY(DEVPTS_MAX)
#define DEVPTS_MAX 64

static int populate_devpts(const struct sandbox_plan *sb, struct report_step *e)
{
    const char *options = sb->config->gid == 5 ? DEVPTS_OPTIONS ",gid=5" : DEVPTS_OPTIONS;

    if (mkdir("/dev/pts", 0755) < 0)
        return report_step_failed(e, negative_errno(), "mkdir /dev/pts", NULL);
    if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, options) < 0)
        return report_step_failed(e, negative_errno(), "mount /dev/pts", "devpts %s", options);
    if (symlink("pts/ptmx", "/dev/ptmx") < 0)
        return report_step_failed(e, negative_errno(), "symlink", "/dev/ptmx");
    return 0;
}

static int populate_dev(const struct sandbox_plan *sb, int dev_fds[MOUNT_N_DEVICES],
                        struct report_step *e)
{
    static const struct {
        const char *path, *target;
    } links[] = {
        {"/dev/fd", "/proc/self/fd"},
        {"/dev/stdin", "/proc/self/fd/0"},
        {"/dev/stdout", "/proc/self/fd/1"},
        {"/dev/stderr", "/proc/self/fd/2"},
    };
    int r;

    /* A tmpfs mounted in a user namespace never honours device nodes of its own (SB_I_NODEV);
     * the only devices here are the bound host nodes. */
    if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, DEV_TMPFS_OPTIONS) < 0)
        return report_step_failed(e, negative_errno(), "mount /dev", NULL);

    for (size_t i = 0; i < MOUNT_N_DEVICES; i++) {
        int fd = open(mount_devices[i], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0)
            return report_step_failed(e, negative_errno(), "create device mount point", "%s",
                                      mount_devices[i]);
        (void)close(fd);
        if (sys_move_mount(dev_fds[i], "", AT_FDCWD, mount_devices[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
            return report_step_failed(e, negative_errno(), "bind device node", "%s",
                                      mount_devices[i]);
        (void)close(dev_fds[i]);
        dev_fds[i] = -EBADF;
    }

    for (size_t i = 0; i < ELEMENTSOF(links); i++)
        if (symlink(links[i].target, links[i].path) < 0)
            return report_step_failed(e, negative_errno(), "symlink", "%s", links[i].path);

    r = populate_devpts(sb, e);
    if (r < 0)
        return r;

    if (mkdir("/dev/shm", 01777) < 0)
        return report_step_failed(e, negative_errno(), "mkdir /dev/shm", NULL);
    r = mount_tmpfs("/dev/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC, sb->config->shm_size, 01777);
    if (r < 0)
        return report_step_failed(e, r, "mount /dev/shm", NULL);

    /* Non-recursive: /dev/shm stays writable. */
    r = set_mount_attr(AT_FDCWD, "/dev", 0, MOUNT_ATTR_RDONLY);
    if (r < 0)
        return report_step_failed(e, r, "make /dev read-only", NULL);
    return 0;
}

static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t k = RETRY_EINTR(write(fd, buf, n));
        if (k < 0)
            return negative_errno();
        buf += k;
        n -= (size_t)k;
    }
    return 0;
}

static int populate_work(const struct sandbox_plan *sb, struct report_step *e)
{
    const struct nsbox_config *c = sb->config;
    _cleanup_close_ int fd = -EBADF;
    int r;

    /* The payload's working directory, writable: a tmpfs of --workdir-size (plus room for the
     * code, which is not the payload's to use up). Owned by the sandbox's uid, as init has
     * switched ids by now. noexec, as the other writable mounts: nothing written here runs as a
     * program (python3 reads main.py). */
    r = mount_tmpfs("/work", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                    c->workdir_size + c->code_size + WORK_TMPFS_SLACK, 0755);
    if (r < 0)
        return report_step_failed(e, r, "mount /work", NULL);
    if (!c->code)
        return 0;

    fd = open("/work/main.py", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
    if (fd < 0)
        return report_step_failed(e, negative_errno(), "write /work/main.py", NULL);
    r = write_all(fd, c->code, c->code_size);
    if (r < 0)
        return report_step_failed(e, r, "write /work/main.py", NULL);
    /* The payload owns the file (same uid) and could chmod and rewrite it; bound read-only on
     * itself, a write, chmod or truncate gets EROFS, and as a mount point it cannot be
     * unlinked or renamed over (EBUSY, do_unlinkat()/do_renameat2() refuse mount points). */
    if (mount("/work/main.py", "/work/main.py", NULL, MS_BIND, NULL) < 0)
        return report_step_failed(e, negative_errno(), "bind /work/main.py read-only", NULL);
    r = set_mount_attr(AT_FDCWD, "/work/main.py", 0,
                       MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                           MOUNT_ATTR_NOEXEC);
    if (r < 0)
        return report_step_failed(e, r, "bind /work/main.py read-only", NULL);
    return 0;
}

int mount_populate(struct sandbox_plan *sb, int dev_fds[MOUNT_N_DEVICES], struct report_step *e)
{
    int r;

    /* Modes below are exactly what is written. */
    (void)umask(0);

    r = populate_dev(sb, dev_fds, e);
    if (r < 0)
        return r;
    r = populate_work(sb, e);
    if (r < 0)
        return r;

    /* sb->mounts is sorted parents-first, so a mount below another target lands on top of it. */
    for (size_t i = 0; i < sb->n_mounts; i++) {
        struct sandbox_mount *m = &sb->mounts[i];

        r = ensure_mount_point(m->target, m->is_tmpfs || m->is_dir, e);
        if (r < 0)
            return r;
        if (m->is_tmpfs) {
            /* noexec unless asked (Docker's --tmpfs default): no program dropped into a
             * writable place runs, /tmp included. */
            r = mount_tmpfs(m->target, MS_NOSUID | MS_NODEV | (m->exec ? 0 : MS_NOEXEC), m->size,
                            m->mode);
            if (r < 0)
                return report_step_failed(e, r, "mount tmpfs", "%s", m->target);
        } else {
            if (sys_move_mount(m->tree_fd, "", AT_FDCWD, m->target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return report_step_failed(e, negative_errno(), "bind", "%s on %s", m->source,
                                          m->target);
            (void)close(m->tree_fd);
            m->tree_fd = -EBADF;
        }
    }

    if (chdir("/work") < 0)
        return report_step_failed(e, negative_errno(), "chdir /work", NULL);
    return 0;
}

int mount_enter_workdir(const struct sandbox_plan *sb, struct report_step *e)
{
    const char *dir = sb->config->workdir;
    int r;

    if (!dir)
        return 0;
    /* Made like a mount point: never through a symlink (one planted in a writable bind by an
     * earlier run), and only where the sandbox can write. */
    r = ensure_mount_point(dir, true, e);
    if (r < 0) {
        (void)snprintf(e->name, sizeof(e->name), "workdir");
        return r;
    }
    if (chdir(dir) < 0)
        return report_step_failed(e, negative_errno(), "workdir", "-w %s", dir);
    return 0;
}

/* Write text to a new file name (mode 0644) in the directory dfd. */
static int write_new_file(int dfd, const char *name, const char *text)
{
    _cleanup_close_ int fd = openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
                                    0644);
    if (fd < 0)
        return negative_errno();
    return write_all(fd, text, strlen(text));
}

int mount_identity_files(const struct sandbox_plan *sb, struct report_step *e)
{
    static const char *const targets[] = {"/etc/passwd", "/etc/group"};
    const char *texts[] = {sb->passwd, sb->group};
    _cleanup_close_ int fs = -EBADF, mnt = -EBADF;
    char value[32];
    int r;

    if (!sb->passwd && !sb->group)
        return 0;

    /* A tmpfs of their own, only as large as the two files. */
    fs = sys_fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0)
        return report_step_failed(e, negative_errno(), "identity files", "fsopen tmpfs");
    (void)snprintf(value, sizeof(value), "%zu",
                   (sb->passwd ? strlen(sb->passwd) : 0) + (sb->group ? strlen(sb->group) : 0) +
                       2 * 4096);
    if (sys_fsconfig(fs, FSCONFIG_SET_STRING, "source", "nsbox-identity", 0) < 0 ||
        sys_fsconfig(fs, FSCONFIG_SET_STRING, "size", value, 0) < 0 ||
        sys_fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", "8", 0) < 0 ||
        sys_fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
        sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return report_step_failed(e, negative_errno(), "identity files", "configure tmpfs");
    mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC,
                      MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
    if (mnt < 0)
        return report_step_failed(e, negative_errno(), "identity files", "fsmount tmpfs");
    for (size_t i = 0; i < ELEMENTSOF(targets); i++)
        if (texts[i]) {
            r = write_new_file(mnt, targets[i] + strlen("/etc/"), texts[i]);
            if (r < 0)
                return report_step_failed(e, r, "identity files", "write %s", targets[i]);
        }
    r = set_mount_attr(mnt, "", AT_EMPTY_PATH, MOUNT_ATTR_RDONLY);
    if (r < 0)
        return report_step_failed(e, r, "identity files", "make the tmpfs read-only");

    /* A file of a mount can be cloned (and so bound) only once the mount is in this namespace
     * (open_tree(2) on a detached one is EINVAL before Linux 6.15, fs/namespace.c): it is
     * attached on /dev for a moment, its files cloned, and detached again; the clones stay.
     * No untrusted code runs yet. */
    if (sys_move_mount(mnt, "", AT_FDCWD, "/dev", MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return report_step_failed(e, negative_errno(), "identity files", "attach the tmpfs");
    for (size_t i = 0; i < ELEMENTSOF(targets) && r >= 0; i++) {
        struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                               .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
        _cleanup_close_ int tree = -EBADF, target = -EBADF;

        if (!texts[i])
            continue;
        /* The plan read the file without following a symlink: bind where it read. */
        target = sys_openat2(AT_FDCWD, targets[i], &how);
        tree = sys_open_tree(mnt, targets[i] + strlen("/etc/"),
                             OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (target < 0 || tree < 0 ||
            sys_move_mount(tree, "", target, "",
                           MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
            r = report_step_failed(e, negative_errno(), "identity files", "bind %s", targets[i]);
    }
    if (umount2("/dev", MNT_DETACH) < 0 && r >= 0)
        r = report_step_failed(e, negative_errno(), "identity files", "detach the tmpfs");
    return r < 0 ? r : 0;
}
