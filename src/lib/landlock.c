/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Landlock as a second wall: what landlock.h says, with the why of each rule. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "landlock.h"
#include "macro.h"
#include "proxy.h"
#include "syscalls.h"

/* ---- the rights, by ABI --------------------------------------------------------------- */

#define FS_READ (NSBOX_LANDLOCK_ACCESS_FS_READ_FILE | NSBOX_LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_EXEC NSBOX_LANDLOCK_ACCESS_FS_EXECUTE
/* What a writable mount allows beyond reading: never device nodes (MAKE_CHAR, MAKE_BLOCK; the
 * mounts are nodev and seccomp refuses them too). */
#define FS_WRITE                                                                                   \
    (NSBOX_LANDLOCK_ACCESS_FS_WRITE_FILE | NSBOX_LANDLOCK_ACCESS_FS_REMOVE_DIR |                   \
     NSBOX_LANDLOCK_ACCESS_FS_REMOVE_FILE | NSBOX_LANDLOCK_ACCESS_FS_MAKE_DIR |                    \
     NSBOX_LANDLOCK_ACCESS_FS_MAKE_REG | NSBOX_LANDLOCK_ACCESS_FS_MAKE_SOCK |                      \
     NSBOX_LANDLOCK_ACCESS_FS_MAKE_FIFO | NSBOX_LANDLOCK_ACCESS_FS_MAKE_SYM |                      \
     NSBOX_LANDLOCK_ACCESS_FS_REFER | NSBOX_LANDLOCK_ACCESS_FS_TRUNCATE)
/* The rights a rule on a file (not a directory) may carry; the kernel refuses others (EINVAL,
 * landlock_append_fs_rule() in security/landlock/fs.c). */
#define FS_FILE_RIGHTS                                                                             \
    (NSBOX_LANDLOCK_ACCESS_FS_EXECUTE | NSBOX_LANDLOCK_ACCESS_FS_WRITE_FILE |                      \
     NSBOX_LANDLOCK_ACCESS_FS_READ_FILE | NSBOX_LANDLOCK_ACCESS_FS_TRUNCATE |                      \
     NSBOX_LANDLOCK_ACCESS_FS_IOCTL_DEV)

/* Every filesystem right the ABI knows: a right left unhandled would be allowed everywhere
 * (landlock(7)), so all are handled, and rules grant back what the mounts allow. */
static uint64_t fs_handled(int abi)
{
    uint64_t all = (NSBOX_LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0-12 */

    if (abi >= 2)
        all |= NSBOX_LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        all |= NSBOX_LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        all |= NSBOX_LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return all;
}

/* ---- the plan, in the supervisor -------------------------------------------------------- */

int landlock_plan(const struct nsbox_config *c, struct sandbox_plan *sb, struct nsbox_result *ret)
{
    int abi;

    if (c->landlock == NSBOX_LANDLOCK_OFF) {
        report_warning(c, ret,
                       "--landlock off: no Landlock wall behind the mount and network "
                       "namespaces");
        return 0;
    }
    /* The version probe (landlock_create_ruleset(2)): ENOSYS without CONFIG_SECURITY_LANDLOCK,
     * EOPNOTSUPP where it is built but not enabled at boot (lsm=). */
    abi = sys_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 0)
        ret->landlock_missing = errno;
    else if (abi < 2)
        /* ABI 1 refuses every link and rename across directories (EXDEV: REFER cannot be
         * handled, so it is never granted), which breaks ordinary programs. */
        ret->landlock_missing = EPROTO;
    if (ret->landlock_missing) {
        if (c->landlock == NSBOX_LANDLOCK_REQUIRED)
            return report_error(ret, -EOPNOTSUPP, "landlock",
                                "--landlock required: %s (Landlock needs Linux 5.19 or later "
                                "with CONFIG_SECURITY_LANDLOCK and 'landlock' in the lsm= boot "
                                "parameter or CONFIG_LSM)",
                                ret->landlock_missing == EPROTO
                                    ? "this kernel has Landlock ABI 1 only, which nsbox does "
                                      "not use"
                                : ret->landlock_missing == ENOSYS ? "this kernel has no Landlock"
                                : ret->landlock_missing == EOPNOTSUPP
                                    ? "Landlock is built into this kernel but not enabled"
                                    : "its system calls were refused, as a container's seccomp "
                                      "profile may do");
        return 0;
    }
    if (abi > LANDLOCK_ABI_KNOWN)
        abi = LANDLOCK_ABI_KNOWN;
    sb->landlock_abi = abi;
    sb->landlock_restricts = NSBOX_LANDLOCK_FS;
    /* TCP only where the sandbox has no network of its own to serve on: none (seccomp refuses
     * internet sockets too) and allow= (only the proxy). --network loopback is for serving and
     * connecting on lo; host shares the host's network. */
    if (abi >= 4 && !c->network_host && (!c->network_loopback || sandbox_network_allow(c)))
        sb->landlock_restricts |= NSBOX_LANDLOCK_NET;
    /* Each scope follows its namespace's opt-out: --pid host lets the payload signal the host's
     * processes of its uid, --network host reach the host's abstract sockets. */
    if (abi >= 6 && (!c->pid_host || !c->network_host))
        sb->landlock_restricts |= NSBOX_LANDLOCK_SCOPE;
    ret->landlock_abi = abi;
    ret->landlock_restricts = sb->landlock_restricts;
    return 0;
}

/* ---- the ruleset, in init ---------------------------------------------------------------- */

/* Where a mount of the sandbox is and what it allows. */
struct place {
    const char *path;
    uint64_t rights;
};

struct builder {
    int ruleset;
    int report_fd; /* for report_skipped() */
    uint64_t handled;
    const struct place *places;
    size_t n_places;
    struct report_step *e;
};

static int add_path_rule(struct builder *b, int fd, uint64_t rights, bool is_dir, const char *path)
{
    struct nsbox_landlock_path_beneath_attr attr = {
        .allowed_access = rights & b->handled & (is_dir ? ~0ULL : FS_FILE_RIGHTS),
        .parent_fd = fd,
    };

    if (attr.allowed_access == 0)
        return 0;
    if (sys_landlock_add_rule(b->ruleset, NSBOX_LANDLOCK_RULE_PATH_BENEATH, &attr, 0) < 0)
        return report_step_failed(b->e, negative_errno(), "landlock", "rule for %s", path);
    return 0;
}

/* Whether a mount that must not get EXECUTE lies strictly below path. */
static bool noexec_below(const struct builder *b, const char *path)
{
    for (size_t i = 0; i < b->n_places; i++) {
        const char *p = b->places[i].path;
        if (!(b->places[i].rights & FS_EXEC) && strcmp(p, path) != 0 &&
            path_is_at_or_below(p, path))
            return true;
    }
    return false;
}

static bool is_place(const struct builder *b, const char *path)
{
    for (size_t i = 0; i < b->n_places; i++)
        if (strcmp(b->places[i].path, path) == 0)
            return true;
    return false;
}

/* Grant EXECUTE on what lies below the directory dir (at path), but not on the mounts that must
 * not have it: a right granted on a directory holds for everything below it, across mount
 * points (is_access_to_paths_allowed() in security/landlock/fs.c walks up to the root), so a
 * rule on "/" would let /tmp execute. Each entry gets its own rule instead; a directory on the
 * way to such a mount is split in turn, and the places themselves get their own rules. Only the
 * directories on the way are listed. */
static int grant_exec_split(struct builder *b, int dir, const char *path, int depth)
{
    _cleanup_close_ int list = -EBADF;
    DIR *d;
    int r = 0;

    if (depth > 32)
        return report_step_failed(b->e, -ELOOP, "landlock", "%s: too deep", path);
    list = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (list < 0)
        return report_step_failed(b->e, negative_errno(), "landlock", "list %s", path);
    d = fdopendir(list);
    if (!d)
        return report_step_failed(b->e, negative_errno(), "landlock", "list %s", path);
    TAKE_FD(list);
    for (struct dirent *de; r >= 0 && (de = readdir(d));) {
        char child[PATH_MAX];
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (snprintf(child, sizeof(child), "%s/%s", strcmp(path, "/") == 0 ? "" : path,
                     de->d_name) >= (int)sizeof(child))
            continue;
        /* A mount of its own has its own rule; a symlink is never followed (a rule on its
         * target would be wherever it points). */
        if (is_place(b, child) || de->d_type == DT_LNK)
            continue;
        /* O_PATH opens are not checked by Landlock. The type comes from the directory entry
         * where the filesystem gives it (one system call less an entry), else from fstat. */
        fd = openat(dir, de->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        st.st_mode = de->d_type == DT_DIR ? S_IFDIR : de->d_type == DT_REG ? S_IFREG : 0;
        if (fd < 0 || (st.st_mode == 0 && fstat(fd, &st) < 0)) {
            r = report_step_failed(b->e, negative_errno(), "landlock", "open %s", child);
            break;
        }
        if (S_ISLNK(st.st_mode))
            continue;
        if (S_ISDIR(st.st_mode) && noexec_below(b, child))
            r = grant_exec_split(b, fd, child, depth + 1);
        else
            r = add_path_rule(b, fd, FS_EXEC, S_ISDIR(st.st_mode), child);
    }
    (void)closedir(d);
    return r;
}

/* The rule of one place, and EXECUTE below it where it allows that but a mount below must not
 * get it. */
static int add_place(struct builder *b, const struct place *p)
{
    /* Through the mounts, never a symlink: the mount points were made without one
     * (ensure_mount_point() in mount.c), and no untrusted code has run since. */
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    _cleanup_close_ int fd = sys_openat2(AT_FDCWD, p->path, &how);
    struct stat st;
    uint64_t rights = p->rights;
    bool split;
    int r;

    /* A container's profile may answer openat2 with ENOSYS (its seccomp filter predates it). */
    if (fd < 0 && errno == ENOSYS)
        fd = open(p->path, O_PATH | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0)
        return report_step_failed(b->e, negative_errno(), "landlock", "open %s", p->path);
    split = (rights & FS_EXEC) && S_ISDIR(st.st_mode) && noexec_below(b, p->path);
    if (split)
        rights &= ~FS_EXEC;
    r = add_path_rule(b, fd, rights, S_ISDIR(st.st_mode), p->path);
    if (r < 0 || !split)
        return r;
    return grant_exec_split(b, fd, p->path, 0);
}

/* POSIX message queues are files of the IPC namespace's mqueue filesystem, created below the
 * root of its internal mount (ipc_ns->mq_mnt, ipc/mqueue.c), which no path of the sandbox
 * reaches: Landlock's walk stops at that mount's root and refuses (is_access_to_paths_allowed()
 * in security/landlock/fs.c), so mq_open(3) would fail with EACCES. A mount of mqueue made
 * here is the same superblock, the same root inode: a rule on it lets the queues work as
 * before. Needs CAP_SYS_ADMIN over the sandbox's own IPC namespace (so not under --ipc host,
 * where the queues stay refused); a kernel without mqueue (ENODEV) has none to allow. */
static int add_mqueue_rule(struct builder *b)
{
    _cleanup_close_ int fs = sys_fsopen("mqueue", FSOPEN_CLOEXEC), mnt = -EBADF;

    if (fs < 0 && errno == ENODEV)
        return 0;
    if (fs >= 0 && sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) >= 0)
        mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC,
                          MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
    if (mnt < 0) {
        /* A container's seccomp profile may refuse the new mount API (EPERM, ENOSYS): the
         * queues are then refused, which takes nothing away from the wall; the run's warnings
         * say so. */
        if (errno != EPERM && errno != EACCES && errno != ENOSYS)
            return report_step_failed(b->e, negative_errno(), "landlock", "mount mqueue");
        report_skipped(b->report_fd, errno, "landlock mqueue rule",
                       "mounting mqueue was refused: POSIX message queues (mq_open) are refused "
                       "under Landlock in this run");
        return 0;
    }
    return add_path_rule(b, mnt, FS_READ | FS_WRITE, true, "mqueue");
}

static int add_fs_rules(const struct sandbox_plan *sb, struct builder *b)
{
    const uint64_t rw = FS_READ | FS_WRITE;
    /* "/" first, then the fixed mounts, then the -v and --tmpfs ones. */
    struct place *places = calloc(sb->n_mounts + 5, sizeof(*places));
    size_t n = 0;
    int r = 0;

    if (!places)
        return report_step_failed(b->e, -ENOMEM, "landlock", NULL);
    /* The rootfs: read and execute. Read holds below "/" for every mount of the sandbox, and
     * nothing outside the sandbox's tree is below it: not the host's root (gone with
     * pivot_root), not a directory the caller left open (--keep-fds). */
    places[n++] = (struct place){"/", FS_READ | FS_EXEC};
    /* /proc: its files of the sandbox's own processes are writable (/proc/self/comm,
     * oom_score_adj, attr/); nothing there executes. */
    places[n++] = (struct place){"/proc", FS_READ | NSBOX_LANDLOCK_ACCESS_FS_WRITE_FILE |
                                              NSBOX_LANDLOCK_ACCESS_FS_TRUNCATE};
    /* /dev: the bound nodes (/dev/null, ...) and the ptys are written to and take ioctls
     * (termios; shells open /dev/null with O_TRUNC). It is read-only, so nothing is made. */
    places[n++] = (struct place){"/dev", FS_READ | NSBOX_LANDLOCK_ACCESS_FS_WRITE_FILE |
                                             NSBOX_LANDLOCK_ACCESS_FS_TRUNCATE |
                                             NSBOX_LANDLOCK_ACCESS_FS_IOCTL_DEV};
    places[n++] = (struct place){"/dev/shm", rw};
    places[n++] = (struct place){"/work", rw};
    for (size_t i = 0; i < sb->n_mounts; i++) {
        const struct sandbox_mount *m = &sb->mounts[i];
        uint64_t rights = m->is_tmpfs ? rw | (m->exec ? FS_EXEC : 0)
                                      : FS_READ | FS_EXEC | (m->writable ? FS_WRITE : 0);
        places[n++] = (struct place){m->target, rights};
    }
    b->places = places;
    b->n_places = n;
    for (size_t i = 0; r >= 0 && i < n; i++)
        r = add_place(b, &places[i]);
    free(places);
    b->places = NULL;
    if (r >= 0 && !sb->config->ipc_host)
        r = add_mqueue_rule(b);
    return r;
}

int landlock_apply(const struct sandbox_plan *sb, int report_fd, struct report_step *e)
{
    const struct nsbox_config *c = sb->config;
    struct nsbox_landlock_ruleset_attr attr = {0};
    struct builder b = {.ruleset = -EBADF, .report_fd = report_fd, .e = e};
    size_t size;
    int r;

    if (sb->landlock_abi == 0)
        return 0;
    b.handled = fs_handled(sb->landlock_abi);
    attr.handled_access_fs = b.handled;
    size = offsetof(struct nsbox_landlock_ruleset_attr, handled_access_net);
    if (sb->landlock_restricts & NSBOX_LANDLOCK_NET)
        attr.handled_access_net = NSBOX_LANDLOCK_ACCESS_NET_BIND_TCP |
                                  NSBOX_LANDLOCK_ACCESS_NET_CONNECT_TCP;
    if (sb->landlock_abi >= 4)
        size = offsetof(struct nsbox_landlock_ruleset_attr, scoped);
    if (sb->landlock_restricts & NSBOX_LANDLOCK_SCOPE)
        attr.scoped = (c->pid_host ? 0 : NSBOX_LANDLOCK_SCOPE_SIGNAL) |
                      (c->network_host ? 0 : NSBOX_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET);
    if (sb->landlock_abi >= 6)
        size = sizeof(attr);

    b.ruleset = sys_landlock_create_ruleset(&attr, size, 0);
    if (b.ruleset < 0)
        return report_step_failed(e, negative_errno(), "landlock", "create the ruleset (ABI %d)",
                                  sb->landlock_abi);
    r = add_fs_rules(sb, &b);
    if (r >= 0 && (sb->landlock_restricts & NSBOX_LANDLOCK_NET) && sandbox_network_allow(c)) {
        /* Under --network allow= the proxy is the only way out: its port on lo (a rule only
         * where TCP is handled at all: ABI 4 and later; an older ABI refuses a port rule with
         * EINVAL, as Debian 12's 6.1 did to every --network allow= run). */
        struct nsbox_landlock_net_port_attr port =
            {.allowed_access = NSBOX_LANDLOCK_ACCESS_NET_CONNECT_TCP, .port = PROXY_PORT};
        if (sys_landlock_add_rule(b.ruleset, NSBOX_LANDLOCK_RULE_NET_PORT, &port, 0) < 0)
            r = report_step_failed(e, negative_errno(), "landlock", "rule for port %d", PROXY_PORT);
    }
    if (r >= 0 && sys_landlock_restrict_self(b.ruleset, 0) < 0)
        r = report_step_failed(e, negative_errno(), "landlock", "landlock_restrict_self");
    (void)close(b.ruleset);
    return r < 0 ? r : 0;
}

/* ---- tier 3: a ruleset of host paths, without namespaces (tier3.c) ----------------------- */

int landlock_tier3_abi(void)
{
    int abi = sys_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

    if (abi < 0)
        return negative_errno();
    /* ABI 1 cannot grant REFER (landlock_plan() says why it is not used). */
    if (abi < 2)
        return -EPROTO;
    return abi > LANDLOCK_ABI_KNOWN ? LANDLOCK_ABI_KNOWN : abi;
}

int landlock_apply_paths(int abi, const struct landlock_path *paths, size_t n,
                         struct report_step *e)
{
    struct nsbox_landlock_ruleset_attr attr = {0};
    struct builder b = {.ruleset = -EBADF, .report_fd = -1, .e = e};
    size_t size = offsetof(struct nsbox_landlock_ruleset_attr, handled_access_net);
    int r = 0;

    b.handled = fs_handled(abi);
    attr.handled_access_fs = b.handled;
    /* TCP handled with no port rule: every bind and connect refused (ABI 4). */
    if (abi >= 4) {
        attr.handled_access_net = NSBOX_LANDLOCK_ACCESS_NET_BIND_TCP |
                                  NSBOX_LANDLOCK_ACCESS_NET_CONNECT_TCP;
        size = offsetof(struct nsbox_landlock_ruleset_attr, scoped);
    }
    /* Without a pid namespace and a network namespace, these scopes are all that keep the
     * program from signalling the caller's other processes of its uid and from reaching the
     * host's abstract unix sockets (ABI 6). */
    if (abi >= 6) {
        attr.scoped = NSBOX_LANDLOCK_SCOPE_SIGNAL | NSBOX_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
        size = sizeof(attr);
    }
    b.ruleset = sys_landlock_create_ruleset(&attr, size, 0);
    if (b.ruleset < 0)
        return report_step_failed(e, negative_errno(), "landlock", "create the ruleset (ABI %d)",
                                  abi);
    for (size_t i = 0; r >= 0 && i < n; i++) {
        uint64_t rights = paths[i].remove_dir
                              ? NSBOX_LANDLOCK_ACCESS_FS_REMOVE_DIR
                              : (paths[i].write ? FS_READ | FS_WRITE : FS_READ) |
                                    (paths[i].exec ? FS_EXEC : 0) |
                                    (paths[i].device ? NSBOX_LANDLOCK_ACCESS_FS_WRITE_FILE |
                                                           NSBOX_LANDLOCK_ACCESS_FS_TRUNCATE |
                                                           NSBOX_LANDLOCK_ACCESS_FS_IOCTL_DEV
                                                     : 0);
        /* Following symlinks: /lib is one on a merged-/usr system, and the rule then lands on
         * its target, which is what the program reaches through it. A path this host lacks
         * is left out (tier3.c lists candidates). */
        _cleanup_close_ int fd = open(paths[i].path, O_PATH | O_CLOEXEC);
        struct stat st;

        if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
            continue;
        if (fd < 0 || fstat(fd, &st) < 0) {
            r = report_step_failed(e, negative_errno(), "landlock", "open %s", paths[i].path);
            break;
        }
        r = add_path_rule(&b, fd, rights, S_ISDIR(st.st_mode), paths[i].path);
    }
    if (r >= 0 && sys_landlock_restrict_self(b.ruleset, 0) < 0)
        r = report_step_failed(e, negative_errno(), "landlock", "landlock_restrict_self");
    (void)close(b.ruleset);
    return r < 0 ? r : 0;
}
