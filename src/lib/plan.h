/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The plan of a run: the config validated and turned into a struct sandbox_plan (below), in the
 * supervisor, before any namespace exists. It needs no step order: sandbox.c calls
 * plan_sandbox(), then plan_cgroup() (cgroup.h), and the sandbox's init and the supervisor act
 * on the plan.
 *
 * plan_sandbox() (plan.c) is the orchestrator and plans what belongs to no one feature (the
 * payload's argv and environment, the run's name and labels, the seccomp filter, the opt-out
 * warnings); each feature plans its own part in its own module, declared in its own header:
 * the mounts and the rootfs's mount points (plan_mounts(), plan_rootfs(): mount.h,
 * mount-plan.c), the identity files and the host ids (plan_identity_files(): idfiles.h,
 * plan_host_ids(): uidpool.h, both ids-plan.c), the copies and the workspace (plan_copies():
 * copy.h, copy-plan.c), the cgroup leaf or the rlimits (plan_cgroup(): cgroup.h, cgroup.c).
 *
 * Every function fills ret's error (report_error(): status error, exit status 125, error_step
 * "config" for the caller's mistakes, report_config_error()) and returns its -errno on failure, and
 * adds a warning (report_warning()) for what it leaves out or falls back on. Among them,
 * plan_env(), plan_mounts() with tmpfs mounts only, plan_identity() and plan_opt_out_warnings()
 * need no OS state (tests/unit/test-plan.c).
 */
#pragma once

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

struct sandbox_plan {
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

/*
 * Fill *sb from the config c: argv, environment, mounts, the rootfs's missing mount points and
 * identity files, the copy streams, the host ids, the seccomp filter; the name, the labels, the
 * host ids and the warnings go into ret. *sb is reset first; free it with plan_free(), also
 * after a failure. Returns 0 or -errno (-EINVAL for an invalid config).
 */
int plan_sandbox(const struct nsbox_config *c, struct sandbox_plan *sb, struct nsbox_result *ret);

/* Free what plan_sandbox() made in sb, close its descriptors, remove the workspace's staging
 * directory if it is still there, and give the host ids back to the pool. */
void plan_free(struct sandbox_plan *sb);

/* An empty plan for config c, every descriptor -EBADF: what plan_sandbox() starts from, and
 * what plan_free() may be given when planning never began. */
void plan_init(struct sandbox_plan *sb, const struct nsbox_config *c);

/*
 * The payload's environment in sb->envp (sb->path pointing at its PATH value): with
 * env_inherit the caller's environ(7) (entries that are not KEY=VALUE skipped), then the fixed
 * base (PATH, HOME, LANG, PYTHONUNBUFFERED, the thread counts of --cpus, the proxy's
 * variables with --network allow=), then config->env, where a later KEY wins and keeps the
 * place of the first. Needs sb->config. Returns 0, -EINVAL for an -e that is not KEY=VALUE,
 * -ENOMEM.
 */
int plan_env(struct sandbox_plan *sb, struct nsbox_result *ret);

/* The run's name and labels, checked (run_name_is_valid(), label_is_valid()) and copied into
 * ret. Returns 0, -EINVAL or -ENOMEM. */
int plan_identity(const struct nsbox_config *c, struct nsbox_result *ret);

/* A warning in ret for every protection c removes (--no-seccomp, --network host, --pid host,
 * --ipc host, --env-inherit, --keep-fds). */
void plan_opt_out_warnings(const struct nsbox_config *c, struct nsbox_result *ret);
