/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cgroup v2 leaves (cgroup.h). Runs in the supervisor, outside the sandbox. Every path it opens
 * is below the cgroup2 mount and reached through directory descriptors; nothing the sandbox can
 * write is ever followed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "scope.h"

#define SUPERVISOR_LEAF "nsbox-supervisor"
#define LEAF_PREFIX "nsbox-run-"
/* cpu.max period: 100 ms, the kernel's default (cgroup-v2.rst, "CPU Interface Files"). */
#define CPU_PERIOD_USEC UINT64_C(100000)

/* The value of "key N" in a flat keyed file such as memory.events, or 0. */
static uint64_t keyed_value(const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, key, n) == 0 && p[n] == ' ')
            return strtoull(p + n + 1, NULL, 10);
    return 0;
}

/* true if every word of want appears in the space-separated list have. */
static bool has_words(const char *have, const char *want, char *missing, size_t size)
{
    bool ok = true;
    missing[0] = '\0';
    for (const char *w = want; *w;) {
        size_t n = strcspn(w, " ");
        bool found = false;
        for (const char *h = have; *h;) {
            size_t m = strcspn(h, " \n");
            if (m == n && strncmp(h, w, n) == 0)
                found = true;
            h += m;
            h += strspn(h, " \n");
        }
        if (!found) {
            size_t len = strlen(missing);
            (void)snprintf(missing + len, size - len, "%s%.*s", len ? " " : "", (int)n, w);
            ok = false;
        }
        w += n;
        w += strspn(w, " ");
    }
    return ok;
}

/* The cgroup2 mount point and the caller's cgroup below it, from /proc/self/mountinfo and
 * /proc/self/cgroup (cgroups(7)). */
static int find_cgroup2(char *mnt, size_t mnt_size, char *own, size_t own_size)
{
    _cleanup_fclose_ FILE *f = NULL;
    char *line = NULL;
    size_t cap = 0;
    bool found = false;

    f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return negative_errno();
    while (!found && getline(&line, &cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
        char root[256], point[512];
        const char *dash = strstr(line, " - ");
        if (!dash || strncmp(dash + 3, "cgroup2 ", 8) != 0)
            continue;
        if (sscanf(line, "%*s %*s %*s %255s %511s", root, point) != 2 || strcmp(root, "/") != 0)
            continue;
        (void)snprintf(mnt, mnt_size, "%s", point);
        found = true;
    }
    free(line);
    if (!found)
        return -ENOENT;

    fclose(f);
    f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return negative_errno();
    line = NULL;
    cap = 0;
    found = false;
    while (!found && getline(&line, &cap, f) > 0)
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            (void)snprintf(own, own_size, "%s", line + 3);
            found = true;
        }
    free(line);
    return found ? 0 : -ENOENT;
}

static void kill_all_in(int dirfd)
{
    char buf[4096];

    /* cgroup.kill (Linux 5.14) kills the whole subtree at once, forks included. */
    if (write_file_at(dirfd, "cgroup.kill", "1") == 0)
        return;
    for (int round = 0; round < 100; round++) {
        bool any = false;
        if (read_file_at(dirfd, "cgroup.procs", buf, sizeof(buf)) <= 0)
            return;
        for (char *p = buf; *p;) {
            long pid = strtol(p, &p, 10);
            if (pid > 0) {
                (void)kill((pid_t)pid, SIGKILL);
                any = true;
            }
            p += strspn(p, "\n");
        }
        if (!any)
            return;
        (void)usleep(1000);
    }
}

/* rmdir(2) a leaf, waiting briefly for killed processes to leave it (EBUSY meanwhile). */
static int remove_leaf(int parent_fd, const char *name)
{
    for (int i = 0; i < 500; i++) {
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY)
            return negative_errno();
        (void)usleep(2000);
    }
    return -EBUSY;
}

/* Remove the empty leaves of earlier runs whose nsbox is gone (it was SIGKILLed before it could
 * remove them; its parent-death signal emptied them). Only rmdir(2), which fails on a leaf that
 * still holds processes: whether an nsbox is alive cannot be told reliably from here (it may
 * live in another pid namespace, or behind hidepid), so nothing is ever killed. */
static void remove_stale_leaves(int parent_fd)
{
    int fd = dup(parent_fd);
    DIR *d;
    struct dirent *de;

    if (fd < 0)
        return;
    d = fdopendir(fd);
    if (!d) {
        (void)close(fd);
        return;
    }
    while ((de = readdir(d))) {
        int pid = 0;
        unsigned long long start = 0;

        if (sscanf(de->d_name, LEAF_PREFIX "%d-%llu-", &pid, &start) != 2)
            continue;
        if (pid > 0 && process_start_time(pid) == start)
            continue; /* its nsbox is alive: a leaf in use, not stale */
        (void)unlinkat(parent_fd, de->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

/* Move the calling process into the sibling leaf SUPERVISOR_LEAF of own_fd's cgroup. */
static int move_self_to_supervisor_leaf(int own_fd)
{
    _cleanup_close_ int fd = -EBADF;

    if (mkdirat(own_fd, SUPERVISOR_LEAF, 0755) < 0 && errno != EEXIST)
        return negative_errno();
    fd = openat(own_fd, SUPERVISOR_LEAF, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    return write_file_at(fd, "cgroup.procs", "0");
}

static const char *delegation_hint(void)
{
    return "run nsbox in a delegated cgroup (e.g. systemd-run --user --scope -p Delegate=yes "
           "nsbox ...), give --cgroup-parent a subtree you own, or run it as root";
}

/* true if the calling user may write dirfd/name (cgroupfs enforces plain file permissions). */
static bool writable_at(int dirfd, const char *name)
{
    return faccessat(dirfd, name, W_OK, AT_EACCESS) == 0;
}

/*
 * cgroup_leaf_create() below the cgroup parent. When it returns 0 because parent is not
 * delegated to the caller (not writable by it; or its controllers are not enabled for it but
 * the hierarchy has them, so a cgroup the caller owns could), *ret_not_delegated is set and
 * reason holds what was found, without a hint: the caller may still ask systemd for a scope.
 */
static int leaf_create_in(const struct nsbox_config *c, int mnt_fd, const char *parent,
                          bool parent_is_own, struct cgroup_leaf *ret, char *reason, size_t size,
                          bool *ret_not_delegated)
{
    char path[1200], controllers[256], want[64] = "", missing[64];
    _cleanup_close_ int parent_fd = -EBADF, leaf_fd = -EBADF;
    struct cgroup_leaf leaf = {.dir_fd = -EBADF, .parent_fd = -EBADF};
    static unsigned counter;
    int r;

    *ret_not_delegated = false;
    (void)snprintf(path, sizeof(path), "%s", parent[0] == '/' ? parent + 1 : parent);
    if (path[0] == '\0')
        (void)snprintf(path, sizeof(path), ".");
    parent_fd = openat(mnt_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent_fd < 0) {
        if (c->cgroup_parent)
            return reasonf(reason, size, -errno, "--cgroup-parent %s: %s", c->cgroup_parent,
                           strerror(errno));
        return reasonf(reason, size, 0, "cannot open cgroup %s: %s", parent, strerror(errno));
    }

    if (c->memory)
        strcat(want, "memory");
    if (c->pids_limit)
        strcat(strcat(want, want[0] ? " " : ""), "pids");
    if (c->cpus_milli)
        strcat(strcat(want, want[0] ? " " : ""), "cpu");

    if (read_file_at(parent_fd, "cgroup.controllers", controllers, sizeof(controllers)) < 0)
        return reasonf(reason, size, 0, "cgroup %s is not a cgroup v2 directory", parent);
    if (!has_words(controllers, want, missing, sizeof(missing))) {
        char root[256], root_missing[64];
        /* Missing here but offered by the root cgroup, in a cgroup the caller cannot write:
         * that is a delegation problem, which a delegated scope can solve. On a hybrid host
         * the root offers nothing and no scope would help. */
        if (!writable_at(parent_fd, "cgroup.subtree_control") &&
            read_file_at(mnt_fd, "cgroup.controllers", root, sizeof(root)) >= 0 &&
            has_words(root, want, root_missing, sizeof(root_missing))) {
            *ret_not_delegated = true;
            return reasonf(reason, size, 0,
                           "cgroup v2 controllers '%s' are not enabled in %s, which is not "
                           "delegated to uid %u",
                           missing, parent, (unsigned)geteuid());
        }
        return reasonf(reason, size, 0,
                       "cgroup v2 controllers '%s' are not available in %s (a hybrid host "
                       "binds them to cgroup v1, or they are not delegated)",
                       missing, parent);
    }

    /* Controllers must be enabled in the parent for its children. A cgroup that holds
     * processes (other than the root) cannot do that (EBUSY, "no internal processes"): when the
     * parent is nsbox's own cgroup, nsbox first moves itself into a sibling leaf. */
    if (read_file_at(parent_fd, "cgroup.subtree_control", controllers, sizeof(controllers)) >= 0 &&
        !has_words(controllers, want, missing, sizeof(missing))) {
        char enable[96] = "";
        for (const char *w = want; *w;) {
            size_t n = strcspn(w, " ");
            size_t len = strlen(enable);
            (void)snprintf(enable + len, sizeof(enable) - len, "%s+%.*s", len ? " " : "",
                           (int)n, w);
            w += n + (w[n] == ' ');
        }
        r = write_file_at(parent_fd, "cgroup.subtree_control", enable);
        if (r == -EBUSY && parent_is_own) {
            r = move_self_to_supervisor_leaf(parent_fd);
            if (r >= 0)
                r = write_file_at(parent_fd, "cgroup.subtree_control", enable);
        }
        if (r == -EACCES || r == -EPERM || r == -EROFS) {
            *ret_not_delegated = true;
            return reasonf(reason, size, 0, "cgroup %s is not delegated to uid %u", parent,
                           (unsigned)geteuid());
        }
        if (r == -EBUSY)
            return reasonf(reason, size, 0,
                           "cgroup %s holds other processes, so its controllers cannot be "
                           "enabled for a leaf: %s",
                           parent, delegation_hint());
        if (r < 0)
            return reasonf(reason, size, 0, "enabling '%s' in %s failed: %s", enable, parent,
                           strerror(-r));
    }

    remove_stale_leaves(parent_fd);

    (void)snprintf(leaf.name, sizeof(leaf.name), LEAF_PREFIX "%d-%llu-%u", (int)getpid(),
                   process_start_time(getpid()), counter++);
    if (mkdirat(parent_fd, leaf.name, 0755) < 0) {
        if (errno == EACCES || errno == EPERM || errno == EROFS) {
            *ret_not_delegated = true;
            return reasonf(reason, size, 0, "cgroup %s is not delegated to uid %u", parent,
                           (unsigned)geteuid());
        }
        return reasonf(reason, size, -errno, "creating cgroup %s/%s failed: %s", parent,
                       leaf.name, strerror(errno));
    }
    leaf_fd = openat(parent_fd, leaf.name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (leaf_fd < 0) {
        r = -errno;
        (void)unlinkat(parent_fd, leaf.name, AT_REMOVEDIR);
        return reasonf(reason, size, r, "opening cgroup %s/%s failed: %s", parent, leaf.name,
                       strerror(-r));
    }

    /* Every limit is written before the sandbox exists; one that cannot be written is an
     * error, never a silent weaker sandbox. */
    {
        char value[64];
        const char *knob = NULL;
        r = 0;
        if (c->memory) {
            (void)snprintf(value, sizeof(value), "%" PRIu64, c->memory);
            knob = "memory.max";
            r = write_file_at(leaf_fd, knob, value);
            if (r >= 0) {
                /* Without swap accounting (no memory.swap.max) there is no swap to limit. */
                knob = "memory.swap.max";
                r = write_file_at(leaf_fd, knob, "0");
                if (r == -ENOENT)
                    r = 0;
            }
        }
        if (r >= 0 && c->pids_limit) {
            (void)snprintf(value, sizeof(value), "%" PRIu64, c->pids_limit);
            knob = "pids.max";
            r = write_file_at(leaf_fd, knob, value);
        }
        if (r >= 0 && c->cpus_milli) {
            (void)snprintf(value, sizeof(value), "%" PRIu64 " %" PRIu64,
                           c->cpus_milli * CPU_PERIOD_USEC / 1000, CPU_PERIOD_USEC);
            knob = "cpu.max";
            r = write_file_at(leaf_fd, knob, value);
        }
        if (r < 0) {
            (void)reasonf(reason, size, r, "writing %s of cgroup %s/%s failed: %s", knob, parent,
                          leaf.name, strerror(-r));
            (void)unlinkat(parent_fd, leaf.name, AT_REMOVEDIR);
            return r;
        }
    }

    (void)snprintf(leaf.path, sizeof(leaf.path), "%.900s%s%s", strcmp(parent, "/") ? parent : "",
                   "/", leaf.name);
    leaf.dir_fd = TAKE_FD(leaf_fd);
    leaf.parent_fd = TAKE_FD(parent_fd);
    *ret = leaf;
    return 1;
}

/* true if cgroup path own is the scope unit's cgroup: its last component is unit. */
static bool in_unit(const char *own, const char *unit)
{
    const char *last = strrchr(own, '/');
    return strcmp(last ? last + 1 : own, unit) == 0;
}

/*
 * Nothing is delegated where nsbox is: ask the user's systemd manager for a delegated scope
 * (scope.h), then make the leaf in it as in any delegated cgroup. first is why the own cgroup
 * did not do. Every failure ends as 0 (the rlimit fallback) with a reason that says what was
 * tried; a leaf that fails in the scope keeps leaf_create_in()'s verdict.
 */
static int leaf_create_in_user_scope(const struct nsbox_config *c, int mnt_fd, const char *first,
                                     struct cgroup_leaf *ret, char *reason, size_t size)
{
    char mnt[512], own[512], unit[64] = "", why[256] = "", in_scope[400] = "";
    bool not_delegated = false;
    int r;

    r = scope_start_delegated(unit, sizeof(unit), why, sizeof(why));
    if (r < 0)
        return reasonf(reason, size, 0,
                       "%s, and asking the systemd user manager over D-Bus for a delegated "
                       "scope failed (%s): %s",
                       first, why, delegation_hint());
    if (find_cgroup2(mnt, sizeof(mnt), own, sizeof(own)) < 0 || !in_unit(own, unit))
        return reasonf(reason, size, 0,
                       "%s, and the systemd user manager started the delegated scope %s but did "
                       "not move nsbox into it (nsbox is in %s): %s",
                       first, unit, own, delegation_hint());
    r = leaf_create_in(c, mnt_fd, own, true, ret, in_scope, sizeof(in_scope), &not_delegated);
    if (r == 0)
        return reasonf(reason, size, 0,
                       "%s; the systemd user manager's delegated scope %s did not do either: %s",
                       first, unit, in_scope);
    if (r < 0)
        return reasonf(reason, size, r, "%s", in_scope);
    return r;
}

int cgroup_leaf_create(const struct nsbox_config *c, struct cgroup_leaf *ret, char *reason,
                       size_t size)
{
    char mnt[512], own[512], first[400];
    _cleanup_close_ int mnt_fd = -EBADF;
    const char *parent;
    bool parent_is_own, not_delegated = false;
    int r;

    if (c->cgroup == NSBOX_CGROUP_OFF)
        return reasonf(reason, size, 0, "cgroups turned off (--cgroup off)");
    if (find_cgroup2(mnt, sizeof(mnt), own, sizeof(own)) < 0)
        return reasonf(reason, size, 0, "no cgroup v2 hierarchy is mounted");
    if (c->cgroup_parent && (strstr(c->cgroup_parent, "..") || c->cgroup_parent[0] == '\0'))
        return reasonf(reason, size, -EINVAL,
                       "--cgroup-parent '%s': expected a path below the cgroup2 mount without '..'",
                       c->cgroup_parent);
    parent = c->cgroup_parent ? c->cgroup_parent : own;
    parent_is_own = !c->cgroup_parent || strcmp(c->cgroup_parent, own) == 0;

    mnt_fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (mnt_fd < 0)
        return reasonf(reason, size, 0, "cannot open the cgroup2 mount %s: %s", mnt,
                       strerror(errno));

    r = leaf_create_in(c, mnt_fd, parent, parent_is_own, ret, first, sizeof(first), &not_delegated);
    if (r != 0 || !not_delegated)
        return reasonf(reason, size, r, "%s", first);
    /* A --cgroup-parent is the caller's explicit choice: no scope elsewhere instead. */
    if (c->cgroup_parent)
        return reasonf(reason, size, 0, "%s: %s", first, delegation_hint());
    return leaf_create_in_user_scope(c, mnt_fd, first, ret, reason, size);
}

int cgroup_leaf_attach(const struct cgroup_leaf *leaf, pid_t pid)
{
    char buf[32];
    (void)snprintf(buf, sizeof(buf), "%d", (int)pid);
    return write_file_at(leaf->dir_fd, "cgroup.procs", buf);
}

void cgroup_leaf_stats(const struct cgroup_leaf *leaf, struct nsbox_cgroup_stats *ret)
{
    char buf[2048];

    *ret = (struct nsbox_cgroup_stats){.valid = true};
    (void)snprintf(ret->path, sizeof(ret->path), "%s", leaf->path);
    if (read_file_at(leaf->dir_fd, "memory.peak", buf, sizeof(buf)) > 0)
        ret->memory_peak = strtoull(buf, NULL, 10);
    if (read_file_at(leaf->dir_fd, "memory.events", buf, sizeof(buf)) > 0)
        ret->oom_kills = keyed_value(buf, "oom_kill");
    if (read_file_at(leaf->dir_fd, "pids.events", buf, sizeof(buf)) > 0)
        ret->pids_limit_hits = keyed_value(buf, "max");
    if (read_file_at(leaf->dir_fd, "cpu.stat", buf, sizeof(buf)) > 0) {
        ret->cpu_user = keyed_value(buf, "user_usec");
        ret->cpu_system = keyed_value(buf, "system_usec");
    }
}

int cgroup_leaf_destroy(struct cgroup_leaf *leaf)
{
    int r = 0;

    if (leaf->dir_fd >= 0) {
        kill_all_in(leaf->dir_fd);
        (void)close(leaf->dir_fd);
        leaf->dir_fd = -EBADF;
        r = remove_leaf(leaf->parent_fd, leaf->name);
    }
    if (leaf->parent_fd >= 0) {
        /* The shared SUPERVISOR_LEAF stays: nsbox is in it until it exits, and the next run in
         * this cgroup uses it again. */
        (void)close(leaf->parent_fd);
        leaf->parent_fd = -EBADF;
    }
    return r;
}
