/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The plan of one run, shared by the supervisor and the sandbox's init (internal). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "filter.h"
#include "nsbox.h"
#include "workspace.h"

/* The ids a sandbox runs as by default (nobody, nogroup), inside and, for root's runs in a
 * container's user namespace, outside. */
#define SANDBOX_NOBODY 65534
/* The payload's PATH unless -e sets one; also where a program name is looked up without it. */
#define SANDBOX_PATH "/usr/local/bin:/usr/bin:/bin"

/* --network allow=: the proxy's mode (proxy.h). */
static inline bool sandbox_network_allow(const struct nsbox_config *c)
{
    return c->network_allow && c->network_allow[0] && !c->network_host;
}

/* A mount inside the sandbox from -v or --tmpfs, in the order it is applied. */
struct sandbox_mount {
    bool is_tmpfs;
    const char *source; /* bind: absolute host path, without symlinks (plan_mounts()) */
    char *source_owned; /* bind: the allocation source points to */
    const char *target; /* absolute path inside the sandbox */
    bool writable;      /* bind */
    bool is_dir;        /* bind: the source is a directory */
    uint64_t size;      /* tmpfs: bytes */
    unsigned mode;      /* tmpfs */
    bool exec;          /* tmpfs: programs on it may run (--tmpfs DST:exec); else noexec */
    int tree_fd;        /* bind: the detached clone of the source (child side), or -1 */
    bool missing;       /* the target is not in the rootfs: made in a skeleton (mount.c) */
};

struct sandbox {
    const struct nsbox_config *config;
    const char *rootfs;
    char **argv;      /* what the payload execs */
    char **envp;      /* the payload's whole environment */
    const char *path; /* the PATH value in envp, for the program lookup */
    uid_t host_uid;   /* outside ids the inside ids map to */
    gid_t host_gid;
    bool privileged;   /* nsbox was started by root: map to an unprivileged host id */
    bool host_root;    /* ... by uid 0 of the initial user namespace, not a container's root:
                        * init may set the sysctls only the host's root may */
    int host_ids_lock; /* holds host_uid's slot of the pool (uidpool.h) for the run, or -EBADF */
    struct sandbox_mount *mounts; /* sorted parents-first */
    size_t n_mounts;
    size_t n_missing;       /* mounts whose target the rootfs lacks (.missing) */
    unsigned rootfs_lacks;  /* bit i: the rootfs lacks mount_base_points[i] (mount.h) */
    char *passwd;           /* the rootfs's /etc/passwd plus the --user's line, or NULL */
    char *group;            /* the rootfs's /etc/group plus the --user's group, or NULL */
    struct filter filter;   /* empty when seccomp is disabled */
    bool in_cgroup;         /* the sandbox is born in a cgroup leaf that holds its limits */
    bool sysctls_read_only; /* /proc/sys is read-only: isolation tier 2 (isolation.h) */
    /* Landlock (landlock.h): the ABI version whose rights init applies (0: none) and what it
     * restricts (NSBOX_LANDLOCK_*), planned by the supervisor. */
    int landlock_abi;
    unsigned landlock_restricts;

    /* Copy-in and copy-out streams (copy.h): memfds made by the supervisor, inherited by init;
     * -EBADF when not used. */
    int copy_in_fd;
    int copy_out_fd;
    /* config->cell: the cell's outputs channel (outputs.h), a memfd made by the supervisor,
     * the payload's fd 4; -EBADF otherwise. */
    int outputs_fd;
    /* Where copy-out entry "i/..." goes: config->copy_out[i]'s host directory, then (last) the
     * workspace's staging directory. */
    int *out_fds;
    const char **out_host_paths;
    const char **out_shown;
    size_t n_out;
    struct workspace ws; /* config->workspace, opened and locked; fds -EBADF otherwise */
    char ws_staging[NSBOX_NAME_MAX + 16];
};

/* Exec sb->argv as a payload (in a child of init, under the filters): stdio from in_fd (-1:
 * /dev/null), out_fd and err_fd, the report pipe at fd 3 (close-on-exec), extra_fd (if >= 0) at
 * fd 4 kept across execve, every other descriptor closed; rlimits; execve. Never returns. */
_Noreturn void sandbox_payload_exec(const struct sandbox *sb, int in_fd, int out_fd, int err_fd,
                                    int report_fd, int extra_fd);

/* When ret's stderr mentions ModuleNotFoundError: ret->rootfs and ret->rootfs_profile for its
 * note (nsbox_result_notes()), the profile read from rootfs/usr/share/nsbox/profile beneath
 * the tree, never through a symlink (openat2(2) RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS).
 * Otherwise nothing (no work on an ordinary run's path). */
void sandbox_describe_rootfs(const char *rootfs, struct nsbox_result *ret);

/* Init's loop in a session (session-init.c): fds report_fd, shm_fd and control_fd are open,
 * and copy_out_fd (the workspace's copy-out memfd, written on SESSION_SAVE) or -1; signals in
 * mask blocked. Never returns. */
_Noreturn void session_init(const struct sandbox *sb, const sigset_t *mask, int report_fd,
                            int shm_fd, int control_fd, int copy_out_fd);
