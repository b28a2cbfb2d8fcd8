/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The plan of a run's ids, in the supervisor, before any namespace exists: the host ids the
 * sandbox's ids map to (uidpool.h) and, for --user ids the rootfs does not name, copies of its
 * /etc/passwd and /etc/group with a line added (idfiles.h). Called by plan_sandbox() (plan.c);
 * errors and warnings go into the result (report.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "idfiles.h"
#include "macro.h"
#include "parse.h"
#include "plan.h"
#include "report.h"
#include "syscalls.h"
#include "uidpool.h"

/* The rootfs's etc/NAME (never through a symlink, never outside it), at most IDFILES_MAX
 * bytes: trusted data, but a passwd file of gigabytes would be copied into every run. */
static int read_rootfs_file(int rootfd, const char *path, char **ret, size_t *ret_len)
{
    struct open_how how = {.flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS};
    _cleanup_close_ int fd = -EBADF;

    fd = sys_openat2(rootfd, path, &how);
    if (fd < 0)
        return negative_errno();
    return read_regular_fd(fd, IDFILES_MAX, ret, ret_len);
}

/* For --user ids the rootfs's /etc/passwd or /etc/group does not name, copies of them with a
 * line added ("sandbox"), which init binds over the originals for this run
 * (mount_identity_files()); the rootfs is never written. The default ids need nothing: every
 * rootfs nsbox builds (and Debian's, Alpine's) has nobody and nogroup, and not reading the
 * files keeps them off every run's start. A file the rootfs lacks, holds as a symlink, or that
 * is over IDFILES_MAX is left as it is, with a warning. */
void plan_identity_files(struct sandbox_plan *sb, int rootfd, struct nsbox_result *ret)
{
    const struct nsbox_config *c = sb->config;
    static const char *const paths[] = {"/etc/passwd", "/etc/group"};

    if (c->uid == SANDBOX_NOBODY && c->gid == SANDBOX_NOBODY)
        return;
    for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
        _cleanup_free_ char *text = NULL;
        bool mounted_over = false;
        size_t len = 0;
        int r;

        /* A -v or --tmpfs on the file or a directory above it says what the sandbox sees
         * there: the rootfs's file is not it, and is left alone. */
        for (size_t j = 0; j < sb->n_mounts; j++)
            mounted_over = mounted_over || path_is_at_or_below(paths[i], sb->mounts[j].target);
        if (mounted_over)
            continue;
        r = read_rootfs_file(rootfd, paths[i] + 1, &text, &len);
        if (r >= 0)
            r = i == 0 ? idfiles_passwd(text, len, c->uid, c->gid, &sb->passwd)
                       : idfiles_group(text, len, c->gid, &sb->group);
        if (r < 0) {
            errno = -r;
            report_warning(c, ret,
                           "--user %u:%u: the rootfs's %s was left as it is (%m), so the %s has "
                           "no name in it",
                           (unsigned)c->uid, (unsigned)c->gid, paths[i], i == 0 ? "user" : "group");
        }
    }
}

/* The initial user namespace's inode number (PROC_USER_INIT_INO in include/linux/proc_ns.h);
 * other namespaces' are allocated from 0xF0000000 up (proc_alloc_inum()). */
#define PROC_USER_INIT_INO 0xEFFFFFFDU

/* Whether nsbox runs in the initial user namespace, where its uid 0 is the host's root. */
static bool in_initial_user_namespace(void)
{
    struct stat st;
    return stat("/proc/self/ns/user", &st) == 0 && st.st_ino == PROC_USER_INIT_INO;
}

/*
 * The host ids the sandbox's ids map to. Root outside must not be root anywhere: root's
 * sandbox maps to ids of its own from nsbox's range (uidpool.c: why, which range, how runs
 * share it), so an escape lands without privileges and shares nothing, not even with the
 * host's nobody; config->host_uid chooses other ids instead. An ordinary user maps to
 * themself, the only id an unprivileged writer may map (user_namespaces(7)).
 */
int plan_host_ids(const struct nsbox_config *c, struct sandbox_plan *sb, struct nsbox_result *ret)
{
    char detail[256];
    uid_t id = 0;
    int r;

    sb->privileged = geteuid() == 0;
    if (!sb->privileged) {
        if ((c->host_uid && c->host_uid != geteuid()) || (c->host_gid && c->host_gid != getegid()))
            return report_config_error(ret, -EINVAL,
                                       "--host-user is for root: an ordinary user's sandbox maps "
                                       "to the "
                                       "user themself (uid %u, gid %u), the only ids it may map",
                                       (unsigned)geteuid(), (unsigned)getegid());
        sb->host_uid = geteuid();
        sb->host_gid = getegid();
    } else if (c->host_uid) {
        sb->host_uid = c->host_uid;
        sb->host_gid = c->host_gid ? c->host_gid : c->host_uid;
        if (sb->host_uid == (uid_t)-1 || sb->host_gid == (gid_t)-1)
            return report_config_error(ret, -EINVAL, "host ids must not be -1");
        report_warning(c, ret,
                       "--host-user %u:%u: the sandbox runs as these host ids, shared with every "
                       "other process and file of theirs (without it, each run of root has ids of "
                       "its own)",
                       (unsigned)sb->host_uid, (unsigned)sb->host_gid);
    } else if (!in_initial_user_namespace() &&
               (uidpool_mapped_here("/proc/self/uid_map", UIDPOOL_BASE) != 1 ||
                uidpool_mapped_here("/proc/self/gid_map", UIDPOOL_BASE) != 1)) {
        /* Root of a user namespace that does not map the pool (a container's, rootless
         * Podman's, a Kubernetes pod's map 65536 ids or so): no id of the pool can be mapped
         * from here. Its nobody is the one id such a namespace is sure to have that is not its
         * root; said in the result, and --host-user chooses another. */
        if (c->host_gid)
            return report_config_error(ret, -EINVAL, "a host gid needs a host uid");
        sb->host_uid = SANDBOX_NOBODY;
        sb->host_gid = SANDBOX_NOBODY;
        report_warning(c, ret,
                       "nsbox runs as root of a user namespace that does not map its id range "
                       "(%u and up), as in a container: the sandbox runs as that namespace's "
                       "nobody (65534), shared with its other processes of that id; --host-user "
                       "UID[:GID] chooses other ids",
                       (unsigned)UIDPOOL_BASE);
    } else {
        if (c->host_gid)
            return report_config_error(ret, -EINVAL, "a host gid needs a host uid");
        r = uidpool_acquire(&id, &sb->host_ids_lock, detail, sizeof(detail));
        if (r < 0)
            return report_error(ret, r, "host ids",
                                "taking host ids of the sandbox's own failed: %s (--host-user "
                                "UID[:GID] chooses them instead)",
                                detail);
        sb->host_uid = id;
        sb->host_gid = id;
        /* Without a pid namespace, processes of the id can outlive the payload: say so in the
         * pool until kill_leftovers() has killed them, for the case that nsbox is killed. */
        r = c->pid_host ? uidpool_mark(sb->host_ids_lock, id, true) : 0;
        if (r < 0)
            return report_error(ret, r, "host ids", "marking host uid %u in %s failed: %s",
                                (unsigned)id, uidpool_lock_path(), strerror(-r));
    }
    ret->host_uid = sb->host_uid;
    ret->host_gid = sb->host_gid;
    sb->host_root = sb->privileged && in_initial_user_namespace();
    return 0;
}
