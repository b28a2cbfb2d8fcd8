/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The sandbox's filesystem. Runs in the sandbox's init, inside its fresh user and mount
 * namespaces, before any untrusted code exists. Security-relevant choices are commented with
 * their reason; see mount.h for the phases.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "mount.h"
#include "syscalls.h"

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

int mount_clone_sources(struct sandbox *sb, int dev_fds[MOUNT_N_DEVICES], struct step_error *e)
{
    /* A new mount namespace starts with the propagation of the one it was copied from: make
     * everything private first, so that nothing mounted here ever shows up on the host and host
     * mounts made later do not appear in here (mount_namespaces(7)). */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return step_fail(e, negative_errno(), "make mounts private", NULL);

    /* A user namespace cannot mknod(2) devices, so the few harmless device nodes are bound from
     * the host, as bubblewrap does. They are cloned now, while host paths are reachable. */
    for (size_t i = 0; i < MOUNT_N_DEVICES; i++) {
        dev_fds[i] = sys_open_tree(AT_FDCWD, mount_devices[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (dev_fds[i] < 0)
            return step_fail(e, negative_errno(), "clone device node", "%s", mount_devices[i]);
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
            return step_fail(e, src, "bind source", "-v %s: %s became a symlink", m->source,
                             walked);
        if (src < 0)
            return step_fail(e, src, "bind source", "%s", m->source);
        if (fstat(src, &st) < 0)
            return step_fail(e, negative_errno(), "bind source", "%s", m->source);
        m->is_dir = S_ISDIR(st.st_mode);
        /* AT_RECURSIVE: what is mounted below the source comes along, and is made read-only
         * with it. The attributes are set on the detached clone, so the sandbox never sees a
         * moment where a read-only bind is writable. */
        m->tree_fd = sys_open_tree(src, "",
                                   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                       AT_EMPTY_PATH);
        if (m->tree_fd < 0)
            return step_fail(e, negative_errno(), "clone bind source", "%s", m->source);
        if (!m->writable)
            attrs |= MOUNT_ATTR_RDONLY;
        r = set_mount_attr(m->tree_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, attrs);
        if (r < 0)
            return step_fail(e, r, "set bind attributes", "%s", m->source);
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
static int mask_proc(struct step_error *e)
{
    for (size_t i = 0; i < ELEMENTSOF(proc_masked); i++) {
        const char *path = proc_masked[i];
        struct stat st;
        int r;

        if (lstat(path, &st) < 0) {
            if (errno == ENOENT)
                continue;
            return step_fail(e, negative_errno(), "mask", "%s", path);
        }
        if (S_ISDIR(st.st_mode)) {
            if (mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      "size=4k,nr_inodes=1,mode=0555") < 0)
                return step_fail(e, negative_errno(), "mask", "%s", path);
            continue;
        }
        if (mount("/dev/null", path, NULL, MS_BIND, NULL) < 0)
            return step_fail(e, negative_errno(), "mask", "%s", path);
        /* Not nodev: the bound node is the device that reads as empty. */
        r = set_mount_attr(AT_FDCWD, path, 0,
                           MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
        if (r < 0)
            return step_fail(e, r, "mask", "%s", path);
    }
    return 0;
}

static int populate_proc(bool pid_host, struct step_error *e)
{
    static const char *const read_only[] = {"proc/sys", "proc/sysrq-trigger"};

    if (pid_host) {
        /* Opted out of the pid namespace: a new procfs would need CAP_SYS_ADMIN over the
         * host's pid namespace (proc(5)), so the host's /proc is bound, with its submounts. */
        int r;
        if (mount("/proc", "proc", NULL, MS_BIND | MS_REC, NULL) < 0)
            return step_fail(e, negative_errno(), "bind the host's /proc", "--pid host");
        r = set_mount_attr(AT_FDCWD, "proc", AT_RECURSIVE,
                           MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (r < 0)
            return step_fail(e, r, "make the host's /proc nosuid, nodev, noexec", "--pid host");
    } else if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        /* A fresh procfs for the new pid namespace: it shows only the sandbox's processes.
         * Paths are relative to the new root, the working directory. It is mounted before the
         * old root goes: in a user namespace the kernel allows a new procfs only while a fully
         * visible one is mounted in the same mount namespace (mnt_already_visible() in
         * fs/namespace.c), so it also fails (EPERM) where the host's /proc has parts hidden by
         * over-mounts. */
        return step_fail(e, negative_errno(), "mount /proc",
                         "a fully visible /proc is needed on the host");
    }

    /* Kernel knobs stay read-only even for a payload that is root in its namespace; Docker
     * does the same. (Writes there are already refused to unmapped owners; this is a second
     * wall.) */
    for (size_t i = 0; i < ELEMENTSOF(read_only); i++) {
        int r;
        if (mount(read_only[i], read_only[i], NULL, MS_BIND | MS_REC, NULL) < 0) {
            if (errno == ENOENT)
                continue; /* a kernel without it (CONFIG_MAGIC_SYSRQ=n) */
            return step_fail(e, negative_errno(), "bind", "%s", read_only[i]);
        }
        r = set_mount_attr(AT_FDCWD, read_only[i], AT_RECURSIVE,
                           MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                               MOUNT_ATTR_NOEXEC);
        if (r < 0)
            return step_fail(e, r, "make read-only", "%s", read_only[i]);
    }
    return mask_proc(e);
}

int mount_enter_rootfs(const struct sandbox *sb, struct step_error *e)
{
    int r;

    /* A plain (non-recursive) bind: whatever the host has mounted below the rootfs stays out. */
    if (mount(sb->rootfs, sb->rootfs, NULL, MS_BIND, NULL) < 0)
        return step_fail(e, negative_errno(), "bind rootfs", "%s", sb->rootfs);

    /* mount_setattr(2) changes only the named attributes. A MS_REMOUNT would also have to
     * repeat every flag the kernel locked on the source mount when the user namespace copied
     * it (atime flags, noexec), or fail with EPERM. */
    r = set_mount_attr(AT_FDCWD, sb->rootfs, 0,
                       MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (r < 0)
        return step_fail(e, r, "make rootfs read-only", "%s", sb->rootfs);

    /* pivot_root(".", ".") stacks the old root on top of the new one; the lazy unmount then
     * drops it, and with it every host path (pivot_root(2), NOTES). */
    if (chdir(sb->rootfs) < 0)
        return step_fail(e, negative_errno(), "chdir rootfs", "%s", sb->rootfs);
    r = populate_proc(sb->config->pid_host, e);
    if (r < 0)
        return r;
    if (sys_pivot_root(".", ".") < 0)
        return step_fail(e, negative_errno(), "pivot_root", NULL);
    if (umount2(".", MNT_DETACH) < 0)
        return step_fail(e, negative_errno(), "detach old root", NULL);
    if (chdir("/") < 0)
        return step_fail(e, negative_errno(), "chdir /", NULL);
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
static int ensure_mount_point(const char *target, bool is_dir, struct step_error *e)
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
        return step_fail(e, -ELOOP, "mount point", "%s goes through a symlink", target);

    if (stat(target, &st) == 0) {
        if (is_dir && !S_ISDIR(st.st_mode))
            return step_fail(e, -ENOTDIR, "mount point", "%s is not a directory", target);
        if (!is_dir && S_ISDIR(st.st_mode))
            return step_fail(e, -EISDIR, "mount point", "%s is a directory", target);
        return 0;
    }
    if (errno != ENOENT)
        return step_fail(e, negative_errno(), "mount point", "%s", target);

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
        return step_fail(e, r, "mount point",
                         "%s does not exist in the read-only rootfs; mount points outside /tmp "
                         "and /work must exist in the rootfs",
                         target);
    if (r < 0)
        return step_fail(e, r, "mount point", "%s", target);
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

static int populate_devpts(const struct sandbox *sb, struct step_error *e)
{
    const char *options = sb->config->gid == 5 ? DEVPTS_OPTIONS ",gid=5" : DEVPTS_OPTIONS;

    if (mkdir("/dev/pts", 0755) < 0)
        return step_fail(e, negative_errno(), "mkdir /dev/pts", NULL);
    if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, options) < 0)
        return step_fail(e, negative_errno(), "mount /dev/pts", "devpts %s", options);
    if (symlink("pts/ptmx", "/dev/ptmx") < 0)
        return step_fail(e, negative_errno(), "symlink", "/dev/ptmx");
    return 0;
}

static int populate_dev(const struct sandbox *sb, int dev_fds[MOUNT_N_DEVICES],
                        struct step_error *e)
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
        return step_fail(e, negative_errno(), "mount /dev", NULL);

    for (size_t i = 0; i < MOUNT_N_DEVICES; i++) {
        int fd = open(mount_devices[i], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0)
            return step_fail(e, negative_errno(), "create device mount point", "%s",
                             mount_devices[i]);
        (void)close(fd);
        if (sys_move_mount(dev_fds[i], "", AT_FDCWD, mount_devices[i], MOVE_MOUNT_F_EMPTY_PATH) <
            0)
            return step_fail(e, negative_errno(), "bind device node", "%s", mount_devices[i]);
        (void)close(dev_fds[i]);
        dev_fds[i] = -EBADF;
    }

    for (size_t i = 0; i < ELEMENTSOF(links); i++)
        if (symlink(links[i].target, links[i].path) < 0)
            return step_fail(e, negative_errno(), "symlink", "%s", links[i].path);

    r = populate_devpts(sb, e);
    if (r < 0)
        return r;

    if (mkdir("/dev/shm", 01777) < 0)
        return step_fail(e, negative_errno(), "mkdir /dev/shm", NULL);
    r = mount_tmpfs("/dev/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC, sb->config->shm_size, 01777);
    if (r < 0)
        return step_fail(e, r, "mount /dev/shm", NULL);

    /* Non-recursive: /dev/shm stays writable. */
    r = set_mount_attr(AT_FDCWD, "/dev", 0, MOUNT_ATTR_RDONLY);
    if (r < 0)
        return step_fail(e, r, "make /dev read-only", NULL);
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

static int populate_work(const struct sandbox *sb, struct step_error *e)
{
    const struct nsbox_config *c = sb->config;
    _cleanup_close_ int fd = -EBADF;
    int r;

    /* noexec: python3 reads main.py; nothing here is a program to run. */
    r = mount_tmpfs("/work", MS_NOSUID | MS_NODEV | MS_NOEXEC, c->code_size + WORK_TMPFS_SLACK,
                    0755);
    if (r < 0)
        return step_fail(e, r, "mount /work", NULL);
    if (!c->code)
        return 0;

    fd = open("/work/main.py", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
    if (fd < 0)
        return step_fail(e, negative_errno(), "write /work/main.py", NULL);
    r = write_all(fd, c->code, c->code_size);
    if (r < 0)
        return step_fail(e, r, "write /work/main.py", NULL);
    return 0;
}

int mount_populate(struct sandbox *sb, int dev_fds[MOUNT_N_DEVICES], struct step_error *e)
{
    _cleanup_close_ int work_fd = -EBADF;
    int r;

    /* Modes below are exactly what is written. */
    (void)umask(0);

    r = populate_dev(sb, dev_fds, e);
    if (r < 0)
        return r;
    r = populate_work(sb, e);
    if (r < 0)
        return r;
    /* Holds on to the /work tmpfs itself, so the seal below reaches it even when a bind is
     * mounted over /work. */
    work_fd = open("/work", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (work_fd < 0)
        return step_fail(e, negative_errno(), "open /work", NULL);

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
                return step_fail(e, r, "mount tmpfs", "%s", m->target);
        } else {
            if (sys_move_mount(m->tree_fd, "", AT_FDCWD, m->target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return step_fail(e, negative_errno(), "bind", "%s on %s", m->source, m->target);
            (void)close(m->tree_fd);
            m->tree_fd = -EBADF;
        }
    }

    /* Sealed last, non-recursively: mount points could be made below /work until now, and
     * writable binds there stay writable. */
    r = set_mount_attr(work_fd, "", AT_EMPTY_PATH, MOUNT_ATTR_RDONLY);
    if (r < 0)
        return step_fail(e, r, "make /work read-only", NULL);

    if (chdir("/work") < 0)
        return step_fail(e, negative_errno(), "chdir /work", NULL);
    return 0;
}
