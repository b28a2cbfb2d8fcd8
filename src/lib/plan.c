/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Validate a run's config and plan its sandbox, in the supervisor, before anything is made:
 * the payload's argv and environment; the mounts (checked, sorted parents first) and the mount
 * points the rootfs lacks; the --user's passwd and group lines; the copy-in stream packed and
 * the copy-out directories and the workspace opened; the host ids; the seccomp filter; the
 * cgroup leaf or the rlimit fallback; and a warning for every protection the config removes.
 * Errors go into the result (report_error()), warnings too (report_warning()).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "binds.h"
#include "cell.h"
#include "cgroup.h"
#include "config-check.h"
#include "copy.h"
#include "cpus.h"
#include "fileio.h"
#include "filter.h"
#include "idfiles.h"
#include "macro.h"
#include "mount.h"
#include "parse.h"
#include "plan.h"
#include "policyfile.h"
#include "proxy.h"
#include "report.h"
#include "syscalls.h"
#include "uidpool.h"

void plan_free(struct sandbox_plan *sb)
{
    if (sb->argv)
        for (char **a = sb->argv; *a; a++)
            free(*a);
    free(sb->argv);
    if (sb->envp)
        for (char **e = sb->envp; *e; e++)
            free(*e);
    free(sb->envp);
    /* calloc()ed with room for every bind and tmpfs and /tmp: unused entries are NULL. */
    for (size_t i = 0; sb->mounts && i < sb->config->n_binds + sb->config->n_tmpfs + 1; i++)
        free(sb->mounts[i].source_owned);
    free(sb->mounts);
    free(sb->passwd);
    free(sb->group);
    filter_free(&sb->filter);
    if (sb->copy_in_fd >= 0)
        (void)close(sb->copy_in_fd);
    if (sb->copy_out_fd >= 0)
        (void)close(sb->copy_out_fd);
    sb->copy_in_fd = sb->copy_out_fd = -EBADF;
    if (sb->outputs_fd >= 0)
        (void)close(sb->outputs_fd);
    sb->outputs_fd = -EBADF;
    for (size_t i = 0; sb->out_fds && i < sb->n_out; i++)
        if (sb->out_fds[i] >= 0)
            (void)close(sb->out_fds[i]);
    free(sb->out_fds);
    free(sb->out_host_paths);
    for (size_t i = 0; sb->out_shown && i < sb->n_out; i++)
        free((char *)sb->out_shown[i]);
    free(sb->out_shown);
    sb->out_fds = NULL;
    sb->out_host_paths = sb->out_shown = NULL;
    if (sb->ws.base_fd >= 0 && sb->ws_staging[0])
        (void)copy_remove_tree(sb->ws.base_fd, sb->ws_staging);
    workspace_close(&sb->ws);
    if (sb->host_ids_lock >= 0)
        (void)close(sb->host_ids_lock); /* the host ids go back to the pool */
    sb->host_ids_lock = -EBADF;
}

static size_t path_depth(const char *path)
{
    size_t d = 0;
    for (; *path; path++)
        d += *path == '/';
    return d;
}

/* The payload's environment: with env_inherit the caller's environ(7) (entries that are not
 * KEY=VALUE skipped), then the fixed base, then config->env, where a later KEY wins. The base
 * holds the thread counts of the CPUs the sandbox is pinned to (cpus.c), so a -e wins. */
int plan_env(struct sandbox_plan *sb, struct nsbox_result *ret)
{
    /* PYTHONUNBUFFERED: Python writes its output as it prints it, so what a payload printed
     * before a timeout or a kill reaches the result instead of dying in its buffer; `-e
     * PYTHONUNBUFFERED=` (empty: off, python(1)) buffers again. */
    /* --network allow=: the proxy for every scheme, in both spellings (curl reads only
     * http_proxy in lower case, CGI-minded tools only the upper), and nothing exempt. */
#define PROXY_URL "http://" PROXY_ADDRESS ":" STRINGIFY(PROXY_PORT)
    static const char *const proxy_env[] = {"HTTP_PROXY=" PROXY_URL,
                                            "HTTPS_PROXY=" PROXY_URL,
                                            "ALL_PROXY=" PROXY_URL,
                                            "http_proxy=" PROXY_URL,
                                            "https_proxy=" PROXY_URL,
                                            "all_proxy=" PROXY_URL,
                                            "NO_PROXY=",
                                            "no_proxy="};
#undef PROXY_URL
    char threads[3][48];
    const char *base[4 + ELEMENTSOF(threads) + ELEMENTSOF(proxy_env)] = {"PATH=" SANDBOX_PATH,
                                                                         "HOME=/tmp",
                                                                         "LANG=C.UTF-8",
                                                                         "PYTHONUNBUFFERED=1"};
    const struct nsbox_config *c = sb->config;
    const unsigned ncpus = cpus_count(c->cpus_milli);
    size_t n_base = 4;

    if (ncpus) /* --cpus unlimited: no counts */
        for (size_t i = 0; i < ELEMENTSOF(threads); i++)
            base[n_base++] = threads[i];
    if (sandbox_network_allow(c))
        for (size_t i = 0; i < ELEMENTSOF(proxy_env); i++)
            base[n_base++] = proxy_env[i];
    size_t n_inherited = 0, n_extra = 0, n = 0;

    (void)snprintf(threads[0], sizeof(threads[0]), "OPENBLAS_NUM_THREADS=%u", ncpus);
    (void)snprintf(threads[1], sizeof(threads[1]), "OMP_NUM_THREADS=%u", ncpus);
    (void)snprintf(threads[2], sizeof(threads[2]), "MKL_NUM_THREADS=%u", ncpus);

    if (c->env_inherit)
        while (environ[n_inherited])
            n_inherited++;
    if (c->env)
        while (c->env[n_extra])
            n_extra++;
    sb->envp = calloc(n_inherited + n_base + n_extra + 1, sizeof(char *));
    if (!sb->envp)
        return report_error(ret, -ENOMEM, "environment", "out of memory");

    for (size_t i = 0; i < n_inherited + n_base + n_extra; i++) {
        const char *kv = i < n_inherited            ? environ[i]
                         : i < n_inherited + n_base ? base[i - n_inherited]
                                                    : c->env[i - n_inherited - n_base];
        const char *eq = strchr(kv, '=');
        size_t key_len;
        size_t j;

        if (i < n_inherited && (!eq || !env_name_is_valid(kv, (size_t)(eq - kv))))
            continue;
        if (!eq || !env_name_is_valid(kv, (size_t)(eq - kv)))
            return report_error(ret, -EINVAL, "environment", "invalid environment entry '%s'", kv);
        key_len = (size_t)(eq - kv) + 1;
        for (j = 0; j < n; j++)
            if (strncmp(sb->envp[j], kv, key_len) == 0)
                break;
        if (j < n)
            free(sb->envp[j]);
        else
            n++;
        sb->envp[j] = strdup(kv);
        if (!sb->envp[j])
            return report_error(ret, -ENOMEM, "environment", "out of memory");
        if (strncmp(kv, "PATH=", 5) == 0)
            sb->path = sb->envp[j] + 5;
    }
    return 0;
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

static int plan_rootfs(struct sandbox_plan *sb, struct nsbox_result *ret, int *ret_fd)
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
static void plan_identity_files(struct sandbox_plan *sb, int rootfd, struct nsbox_result *ret)
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

struct warn_context {
    const struct nsbox_config *config;
    struct nsbox_result *result;
};

static void warn_policy(const struct policy_rule *rule, const char *message, void *userdata)
{
    struct warn_context *w = userdata;
    report_warning(w->config, w->result, "%s:%u: %s", rule->file, rule->line, message);
}

static int plan_filter(struct sandbox_plan *sb, struct nsbox_result *ret)
{
    struct policy policy = {0};
    struct policy_error e = {0};
    char where[512];
    int r;

    if (sb->config->seccomp_disabled)
        return 0;
    if (!sb->config->seccomp_policy) {
        /* The built-in ones, compiled at build time. */
        bool notify = filter_notify_supported();
        if (sb->config->network_host || sb->config->network_loopback ||
            sandbox_network_allow(sb->config))
            sb->filter = notify ? filter_network_notify : filter_network;
        else
            sb->filter = notify ? filter_default_notify : filter_default;
        return 0;
    }
    r = policy_load(sb->config->seccomp_policy, &policy, &e);
    if (r >= 0) {
        /* Unknown names are warnings in a user's policy (nsbox's own is checked when it is
         * built). */
        struct warn_context w = {sb->config, ret};
        r = filter_compile(&policy, warn_policy, &w, filter_notify_supported(), &sb->filter, &e);
        policy_free(&policy);
    }
    if (r < 0) {
        policy_error_format(&e, where, sizeof(where));
        return report_error(ret, r, "seccomp", "%s", where);
    }
    return 0;
}

/* Shared memory is not in RLIMIT_DATA (which counts private mappings): what bounds it without
 * a cgroup, for the limits_note. init_sysctls() sets kernel.shm* where it can; elsewhere
 * sandbox.c refuses shmget (filter_refuse_sysv_ipc()). */
static const char *shared_memory_note(const struct nsbox_config *c, const struct sandbox_plan *sb)
{
    if (c->memory == 0 || (c->seccomp_disabled && (!sb->host_root || c->uid == 0)))
        return "shared memory is not bounded (--memory unlimited, or --no-seccomp)";
    if (c->ipc_host)
        return "System V shared memory is the host's (--ipc host), /dev/shm is --shm-size, "
               "each memfd at most RLIMIT_FSIZE (--memory) but not their number";
    if (sb->host_root && c->uid != 0)
        return "shared memory: System V at most --memory in all (kernel.shmall), /dev/shm "
               "--shm-size, each memfd at most RLIMIT_FSIZE (--memory) but not their number";
    if (sb->host_root)
        return "shared memory: System V is refused, shmget (with --user 0 the sandbox's root owns "
               "kernel.shmall of its IPC namespace, which nsbox then cannot set), /dev/shm is "
               "--shm-size, each memfd at most RLIMIT_FSIZE (--memory) but not their number";
    return "shared memory: System V is refused, shmget (only the host's root can set "
           "kernel.shmall in the sandbox's IPC namespace), /dev/shm is --shm-size, each memfd at "
           "most RLIMIT_FSIZE "
           "(--memory) but not their number";
}

/* A cgroup leaf for the limits, or the rlimit fallback: explicit in the result, and an error
 * under NSBOX_CGROUP_REQUIRED. */
int plan_cgroup(const struct nsbox_config *c, struct sandbox_plan *sb, struct cgroup_leaf *leaf,
                struct nsbox_result *ret)
{
    char reason[1024] = "";
    enum nsbox_enforcer by;
    int r;

    r = cgroup_leaf_create(c, leaf, reason, sizeof(reason));
    if (r < 0)
        return report_error(ret, r, "cgroup", "%s", reason);
    if (r == 0 && c->cgroup == NSBOX_CGROUP_REQUIRED)
        return report_error(ret, -EOPNOTSUPP, "cgroup", "--cgroup required: %s", reason);
    sb->in_cgroup = r > 0;
    by = sb->in_cgroup ? NSBOX_ENFORCER_CGROUP : NSBOX_ENFORCER_RLIMIT;
    ret->memory.enforced_by = c->memory ? by : NSBOX_ENFORCER_NONE;
    ret->pids_limit.enforced_by = c->pids_limit ? by : NSBOX_ENFORCER_NONE;
    ret->cpus.enforced_by = c->cpus_milli && (sb->in_cgroup || c->timeout) ? by
                                                                           : NSBOX_ENFORCER_NONE;
    if (!sb->in_cgroup) {
        (void)snprintf(ret->limits_note, sizeof(ret->limits_note),
                       "%s; so memory is RLIMIT_DATA per process, pids is RLIMIT_NPROC for the "
                       "sandbox's uid, cpus is RLIMIT_CPU of cpus x timeout seconds per process; "
                       "%s",
                       reason, shared_memory_note(c, sb));
        if (c->cgroup == NSBOX_CGROUP_AUTO && (c->memory || c->pids_limit || c->cpus_milli))
            report_warning(c, ret,
                           "limits are enforced with rlimits, not a cgroup: %s (--cgroup off "
                           "chooses rlimits quietly, --cgroup required refuses to run)",
                           reason);
        /* Socket buffers are kernel memory: memory.max counts them, no rlimit does, and TCP's
         * (tcp_mem, tcp(7)) is one limit for the whole host. */
        if ((c->network_loopback || sandbox_network_allow(c)) && !c->network_host)
            report_warning(c, ret,
                           "--network %s without a cgroup: socket buffers are outside "
                           "--memory, so the payload can use up the host's TCP memory (tcp_mem) "
                           "while it runs; a cgroup leaf counts them",
                           c->network_loopback ? "loopback" : "allow=");
    }
    return 0;
}

/* Every protection the config removes is said out loud, before the payload starts. */
void plan_opt_out_warnings(const struct nsbox_config *c, struct nsbox_result *ret)
{
    if (c->seccomp_disabled)
        report_warning(c, ret,
                       "--no-seccomp: the payload runs without a seccomp filter; never use "
                       "this for untrusted code");
    if (c->network_host)
        report_warning(c, ret,
                       "--network host: the payload shares the host's network and its "
                       "abstract unix sockets%s",
                       c->seccomp_policy || c->seccomp_disabled
                           ? ""
                           : " (built-in policy network.policy: internet sockets allowed)");
    if (c->pid_host)
        report_warning(c, ret,
                       "--pid host: the payload sees every host process and can signal "
                       "those of its host uid (for root's sandboxes: only its own, unless "
                       "--host-user shares one), and what it starts in the background can "
                       "outlive the run (root's, with ids of its own: they are killed at "
                       "the end)");
    if (c->ipc_host)
        report_warning(c, ret,
                       "--ipc host: the payload shares the host's System V IPC and POSIX "
                       "message queues");
    if (c->env_inherit)
        report_warning(c, ret,
                       "--env-inherit: the payload gets nsbox's whole environment, "
                       "secrets included");
    if (c->keep_fds)
        report_warning(c, ret, "--keep-fds: descriptors nsbox inherited reach the payload");
}

/* The run's name and labels, checked and copied into the result. */
int plan_identity(const struct nsbox_config *c, struct nsbox_result *ret)
{
    size_t n = 0, key_len;

    if (c->name && !run_name_is_valid(c->name))
        return report_config_error(ret, -EINVAL,
                                   "invalid name '%s': expected [a-zA-Z0-9][a-zA-Z0-9_.-]*, at "
                                   "most %d "
                                   "bytes",
                                   c->name, NSBOX_NAME_MAX);
    if (c->name)
        (void)snprintf(ret->name, sizeof(ret->name), "%s", c->name);
    if (!c->labels || !c->labels[0])
        return 0;
    while (c->labels[n])
        if (!label_is_valid(c->labels[n++], &key_len))
            return report_config_error(ret, -EINVAL,
                                       "invalid label '%s': expected KEY=VALUE, KEY "
                                       "[a-zA-Z0-9][a-zA-Z0-9_./-]* "
                                       "of at most %d bytes, VALUE of at most %d bytes without "
                                       "control "
                                       "characters",
                                       c->labels[n - 1], LABEL_KEY_MAX, LABEL_VALUE_MAX);
    ret->labels = calloc(n + 1, sizeof(char *));
    if (!ret->labels)
        return report_config_error(ret, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        ret->labels[i] = strdup(c->labels[i]);
        if (!ret->labels[i])
            return report_config_error(ret, -ENOMEM, "out of memory");
    }
    return 0;
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
static int plan_host_ids(const struct nsbox_config *c, struct sandbox_plan *sb,
                         struct nsbox_result *ret)
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
    return 0;
}

/* A sandbox path for --copy-in, --copy-out, -w: absolute, no "." or "..", not in /proc or /dev. */
static int check_sandbox_path(const char *path, const char *what, struct nsbox_result *ret)
{
    if (!path_is_safe_target(path) || strcmp(path, "/") == 0)
        return report_config_error(ret, -EINVAL,
                                   "%s '%s' must be an absolute path inside the sandbox, not '/', "
                                   "without "
                                   "'.' or '..'",
                                   what, path ? path : "");
    if (path_is_at_or_below(path, "/proc") || path_is_at_or_below(path, "/dev"))
        return report_config_error(ret, -EINVAL, "%s '%s': /proc and /dev are nsbox's", what, path);
    return 0;
}

/* Open a host directory for copy-out, made (0755) when missing; never through a symlink but
 * root's (path_open_nofollow()), never in a writable bind of the run (dir_in_writable_bind()):
 * there the payload could rename the directory and plant a symlink in its place, and the
 * result's host_path would name a file of its choosing. */
static int open_copy_out_dir(const char *path, const struct nsbox_config *c,
                             struct nsbox_result *ret)
{
    char walked[PATH_MAX];
    struct stat st;
    bool made;
    int fd, r;

    if (!path || path[0] != '/')
        return report_config_error(ret, -EINVAL,
                                   "--copy-out host directory '%s' is not an "
                                   "absolute path",
                                   path ? path : "");
    made = mkdir(path, 0755) == 0;
    if (!made && errno != EEXIST)
        return report_error(ret, negative_errno(), "copy-out",
                            "cannot make the --copy-out directory '%s': %m", path);
    fd = path_open_nofollow(path, true, walked, sizeof(walked));
    if (fd == -ELOOP)
        return report_error(ret, fd, "copy-out",
                            "--copy-out %s: '%s' is a symlink, and nsbox follows only root's "
                            "symlinks in directories only root can write: name the real directory",
                            path, walked);
    if (fd < 0)
        return report_error(ret, fd, "copy-out", "--copy-out directory '%s': %s", path,
                            strerror(-fd));
    if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
        (void)close(fd);
        return report_error(ret, -ENOTDIR, "copy-out", "--copy-out '%s' is not a directory", path);
    }
    if ((r = dir_in_writable_bind(fd, c->binds, c->n_binds)) != -ENOENT) {
        (void)close(fd);
        if (made) /* nothing runs yet: the directory made a moment ago is the one named */
            (void)rmdir(path);
    }
    if (r >= 0)
        return report_error(ret, -EPERM, "copy-out", RW_COPY_OUT, path, c->binds[r].source);
    return r == -ENOENT ? fd : report_error(ret, r, "copy-out", "--copy-out '%s': %m", path);
}

/* Pack what goes in (--copy-in, the workspace) into a memfd for init to unpack, and open where
 * what comes out goes. All host paths are opened here, as the caller, refusing symlinks as -v
 * does; the sandbox never sees a host path. */
static int plan_copies(struct sandbox_plan *sb, struct nsbox_result *ret)
{
    const struct nsbox_config *c = sb->config;
    struct copy_caps in_caps = {.max_bytes = c->workdir_size, .fail = true};
    struct copy_packer *p = NULL;
    struct copy_stats stats;
    char why[512] = "";
    int r;

    if (c->workdir && (r = check_sandbox_path(c->workdir, "-w", ret)) < 0)
        return r;
    if (c->workdir_size == 0)
        return report_config_error(ret, -EINVAL, "--workdir-size must be above 0");
    if ((c->n_copy_out || c->workspace) && c->pid_host)
        return report_config_error(ret, -EINVAL,
                                   "--copy-out and --workspace need the sandbox's own pid "
                                   "namespace (not "
                                   "--pid host): the copy is taken when every process of the "
                                   "sandbox is "
                                   "gone, which only a pid namespace makes sure of");
    /* A workspace is /work: a mount over it would hide the workspace's files and have the
     * mount's saved into it instead. */
    for (size_t i = 0; c->workspace && i < sb->n_mounts; i++)
        if (path_is_at_or_below("/work", sb->mounts[i].target))
            return report_config_error(ret, -EINVAL,
                                       "--workspace is /work, and %s %s is mounted over it: drop "
                                       "one of "
                                       "the two",
                                       sb->mounts[i].is_tmpfs ? "--tmpfs" : "-v",
                                       sb->mounts[i].target);
    if ((c->n_copy_out || c->workspace) &&
        (c->copy_out_max_bytes == 0 || c->copy_out_max_files == 0))
        return report_config_error(ret, -EINVAL,
                                   "--copy-out-max-bytes and --copy-out-max-files must be above 0");
    /* What goes in is bounded by what the sandbox's tmpfs mounts can hold. */
    for (size_t i = 0; i < sb->n_mounts; i++)
        if (sb->mounts[i].is_tmpfs)
            in_caps.max_bytes += sb->mounts[i].size;
    /* ... and so is the number of files: a tmpfs holds one inode per KiB (mount.c). */
    in_caps.max_files = in_caps.max_bytes / 1024;

    if (!c->n_copy_in && !c->n_copy_out && !c->workspace)
        return 0;
    /* Now, while host libraries are reachable: init uses it inside (copy.h). */
    r = copy_load(why, sizeof(why));
    if (r < 0)
        return report_error(ret, r, "copy", "%s", why);

    if (c->workspace) {
        r = workspace_open(c->workspace, true, &sb->ws, why, sizeof(why));
        if (r < 0)
            return report_error(ret, r, "workspace", "%s", why);
        (void)snprintf(ret->workspace, sizeof(ret->workspace), "%s", c->workspace);
    }

    if (c->n_copy_in || c->workspace) {
        sb->copy_in_fd = memfd_create("nsbox-copy-in", MFD_CLOEXEC);
        if (sb->copy_in_fd < 0)
            return report_error(ret, negative_errno(), "copy-in", "memfd_create: %m");
        r = copy_packer_new(sb->copy_in_fd, &in_caps, &p, why, sizeof(why));
        if (r < 0)
            return report_error(ret, r, "copy-in", "%s", why);
        if (c->workspace) {
            /* The workspace holds what /work held: NAME/work (none yet on first use). */
            _cleanup_close_ int wfd = openat(sb->ws.dir_fd, "work",
                                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            char shown[sizeof(sb->ws.path) + 16], main_py[sizeof(shown) + 16];
            struct copy_source src = {.src_fd = wfd, .prefix = "work", .shown = shown};
            (void)snprintf(shown, sizeof(shown), "%s/work", sb->ws.path);
            (void)snprintf(main_py, sizeof(main_py), "%s/main.py", shown);
            /* Saved by a run without --code: --code's own main.py is the one (read-only). */
            if (c->code)
                src.exclude = main_py;
            if (wfd < 0 && errno != ENOENT) {
                r = report_error(ret, negative_errno(), "workspace", "%s/work: %m", sb->ws.path);
                goto in_fail_reported;
            }
            r = wfd < 0 ? 0 : copy_pack(p, &src, false, why, sizeof(why));
            if (r < 0)
                goto in_fail;
        }
        for (size_t i = 0; i < c->n_copy_in; i++) {
            const struct nsbox_copy *cp = &c->copy_in[i];
            char walked[PATH_MAX];
            _cleanup_close_ int fd = -EBADF;
            struct copy_source src;

            r = check_sandbox_path(cp->sandbox, "--copy-in target", ret);
            if (r < 0)
                goto in_fail_reported;
            if (!cp->host || cp->host[0] != '/') {
                r = report_config_error(ret, -EINVAL,
                                        "--copy-in source '%s' is not an "
                                        "absolute path",
                                        cp->host ? cp->host : "");
                goto in_fail_reported;
            }
            fd = path_open_nofollow(cp->host, true, walked, sizeof(walked));
            if (fd == -ELOOP) {
                r = report_error(ret, fd, "copy-in",
                                 "--copy-in %s: '%s' is a symlink, and nsbox follows only root's "
                                 "symlinks in directories only root can write: name the path it "
                                 "points to",
                                 cp->host, walked);
                goto in_fail_reported;
            }
            if (fd < 0) {
                r = report_error(ret, fd, "copy-in", "--copy-in source '%s': %s", cp->host,
                                 strerror(-fd));
                goto in_fail_reported;
            }
            src = (struct copy_source){.src_fd = fd, .prefix = cp->sandbox + 1, .shown = cp->host};
            if (c->code) /* the project's own main.py, run with --code: there already */
                src = (struct copy_source){.src_fd = fd,
                                           .prefix = cp->sandbox + 1,
                                           .shown = cp->host,
                                           .same_name = "work/main.py",
                                           .same_data = c->code,
                                           .same_size = c->code_size};
            r = copy_pack(p, &src, false, why, sizeof(why));
            if (r < 0)
                goto in_fail;
        }
        r = copy_packer_finish(p, &stats, why, sizeof(why));
        p = NULL;
        if (r < 0)
            return report_error(ret, r, "copy-in", "%s", why);
        if (stats.skipped) {
            copy_stats_named(&stats, why, sizeof(why));
            report_warning(c, ret,
                           "copy-in: %llu entr%s not copied (only regular files and directories "
                           "are: symlinks, devices, FIFOs and sockets are left out, and so are "
                           "files past the room of the sandbox's tmpfs mounts): %s",
                           (unsigned long long)stats.skipped,
                           stats.skipped == 1 ? "y was" : "ies were", why);
        }
    }

    if (c->n_copy_out || c->workspace) {
        size_t n = c->n_copy_out + (c->workspace ? 1 : 0);
        ret->copy_out_asked = true;
        sb->out_fds = calloc(n, sizeof(int));
        sb->out_host_paths = calloc(n, sizeof(char *));
        sb->out_shown = calloc(n, sizeof(char *));
        if (!sb->out_fds || !sb->out_host_paths || !sb->out_shown)
            return report_error(ret, -ENOMEM, "copy-out", "out of memory");
        for (size_t i = 0; i < n; i++)
            sb->out_fds[i] = -EBADF;
        sb->n_out = n;
        for (size_t i = 0; i < c->n_copy_out; i++) {
            r = check_sandbox_path(c->copy_out[i].sandbox, "--copy-out source", ret);
            if (r < 0)
                return r;
            r = open_copy_out_dir(c->copy_out[i].host, c, ret);
            if (r < 0)
                return r;
            sb->out_fds[i] = r;
            sb->out_host_paths[i] = c->copy_out[i].host;
            /* Owned: init wipes the memory of nsbox's argv, where the option's value lives. */
            sb->out_shown[i] = strdup(c->copy_out[i].sandbox);
            if (!sb->out_shown[i])
                return report_error(ret, -ENOMEM, "copy-out", "out of memory");
        }
        if (c->workspace) {
            /* A fresh staging directory: what a run copies back lands there, and replaces the
             * workspace only when complete (workspace_commit()). Ours under the lock. */
            (void)snprintf(sb->ws_staging, sizeof(sb->ws_staging), ".%s.new", c->workspace);
            r = copy_remove_tree(sb->ws.base_fd, sb->ws_staging);
            if (r >= 0 && mkdirat(sb->ws.base_fd, sb->ws_staging, 0700) < 0)
                r = negative_errno();
            if (r >= 0) {
                r = openat(sb->ws.base_fd, sb->ws_staging,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (r < 0)
                    r = negative_errno();
            }
            if (r < 0)
                return report_error(ret, r, "workspace",
                                    "cannot make the staging directory of workspace %s: %s",
                                    sb->ws.path, strerror(-r));
            sb->out_fds[n - 1] = r;
            sb->out_shown[n - 1] = strdup("/work");
            if (!sb->out_shown[n - 1])
                return report_error(ret, -ENOMEM, "workspace", "out of memory");
        }
        sb->copy_out_fd = memfd_create("nsbox-copy-out", MFD_CLOEXEC);
        if (sb->copy_out_fd < 0)
            return report_error(ret, negative_errno(), "copy-out", "memfd_create: %m");
    }
    return 0;

in_fail:
    if (r == -EFBIG)
        (void)report_error(ret, r, "copy-in",
                           "the files to copy in are larger than the sandbox's tmpfs mounts can "
                           "hold (%s; raise --workdir-size or the --tmpfs size)",
                           why);
    else
        (void)report_error(ret, r, "copy-in", "%s", why);
in_fail_reported:
    if (p)
        (void)copy_packer_finish(p, NULL, why, sizeof(why));
    return r;
}

int plan_sandbox(const struct nsbox_config *c, struct sandbox_plan *sb, struct nsbox_result *ret)
{
    _cleanup_close_ int rootfd = -EBADF;
    size_t n_args = 0;
    const char *why;
    int r;

    *sb = (struct sandbox_plan){.config = c,
                                .host_ids_lock = -EBADF,
                                .copy_in_fd = -EBADF,
                                .copy_out_fd = -EBADF,
                                .outputs_fd = -EBADF,
                                .ws = {.base_fd = -EBADF, .lock_fd = -EBADF, .dir_fd = -EBADF}};
    sb->rootfs = c->rootfs ? c->rootfs : nsbox_default_rootfs();
    r = plan_identity(c, ret);
    if (r < 0)
        return r;

    if (c->argv)
        while (c->argv[n_args])
            n_args++;
    r = config_check(c, ret);
    if (r < 0)
        return r;

    /* --code FILE [ARGS...] runs python3 /work/main.py ARGS...; --cell, nsbox's cell driver. */
    r = cell_plan_payload(c, n_args, &sb->argv, &sb->outputs_fd, &why);
    if (r < 0)
        return r == -EINVAL ? report_config_error(ret, r, "%s", why)
                            : report_config_error(ret, r, "the payload's argv: %m");

    r = plan_env(sb, ret);
    if (r < 0)
        return r;
    r = plan_mounts(sb, ret);
    if (r < 0)
        return r;
    r = plan_rootfs(sb, ret, &rootfd);
    if (r < 0)
        return r;
    plan_identity_files(sb, rootfd, ret);
    r = plan_copies(sb, ret);
    if (r < 0)
        return r;

    r = plan_host_ids(c, sb, ret);
    if (r < 0)
        return r;

    sb->host_root = sb->privileged && in_initial_user_namespace();

    plan_opt_out_warnings(c, ret);
    return plan_filter(sb, ret);
}
