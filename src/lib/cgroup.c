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
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "plan.h"
#include "report.h"
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

/* The controllers c's limits need, space-separated ("memory pids cpu"), or "". */
static void wanted_controllers(const struct nsbox_config *c, char *want, size_t size)
{
    (void)snprintf(want, size, "%s%s%s%s%s", c->memory ? "memory" : "",
                   c->memory && c->pids_limit ? " " : "", c->pids_limit ? "pids" : "",
                   (c->memory || c->pids_limit) && c->cpus_milli ? " " : "",
                   c->cpus_milli ? "cpu" : "");
}

/*
 * How many processes cgroup dirfd holds directly (its cgroup.procs), and in *ret_only_self
 * whether the calling process is the only one. A list too long for the buffer counts as many.
 */
static int count_procs(int dirfd, bool *ret_only_self)
{
    char buf[4096];
    ssize_t n = read_file_at(dirfd, "cgroup.procs", buf, sizeof(buf));
    int count = 0;
    bool self = false;

    *ret_only_self = false;
    if (n < 0)
        return (int)n;
    for (char *p = buf; *p;) {
        long pid = strtol(p, &p, 10);
        if (pid > 0) {
            count++;
            self = self || pid == (long)getpid();
        }
        p += strspn(p, "\n");
    }
    if ((size_t)n >= sizeof(buf) - 1)
        count = INT32_MAX;
    *ret_only_self = count == 1 && self;
    return count;
}

/*
 * Move the calling process into SUPERVISOR_LEAF, a child of own_fd's cgroup, so that the
 * cgroup is empty and may enable controllers for children. *ret_created says whether this call
 * made the directory (an earlier run in the same cgroup may have left it).
 */
static int move_self_to_supervisor_leaf(int own_fd, bool *ret_created)
{
    _cleanup_close_ int fd = -EBADF;

    *ret_created = mkdirat(own_fd, SUPERVISOR_LEAF, 0755) == 0;
    if (!*ret_created && errno != EEXIST)
        return negative_errno();
    fd = openat(own_fd, SUPERVISOR_LEAF, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    return write_file_at(fd, "cgroup.procs", "0");
}

/*
 * Move every process of cgroup own_fd into its child SUPERVISOR_LEAF: for the root of a cgroup
 * namespace that is not the hierarchy's root, a container's own cgroup (below). All of its
 * processes are the container's, and a container's init does the same before it makes
 * children (systemd's "init.scope"). A process forked meanwhile appears in the next read of
 * cgroup.procs: read again until the cgroup is empty, a bounded number of times.
 */
static int move_all_to_supervisor_leaf(int own_fd, bool *ret_created)
{
    _cleanup_close_ int fd = -EBADF;
    char buf[4096];
    int r;

    *ret_created = mkdirat(own_fd, SUPERVISOR_LEAF, 0755) == 0;
    if (!*ret_created && errno != EEXIST)
        return negative_errno();
    fd = openat(own_fd, SUPERVISOR_LEAF, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    for (int round = 0; round < 8; round++) {
        ssize_t n = read_file_at(own_fd, "cgroup.procs", buf, sizeof(buf));
        bool any = false;

        if (n < 0)
            return (int)n;
        for (char *p = buf, *end; *p; p = end + strspn(end, "\n")) {
            long pid = strtol(p, &end, 10);
            char v[24];

            if (end == p)
                break;
            any = true;
            (void)snprintf(v, sizeof(v), "%ld", pid);
            r = write_file_at(fd, "cgroup.procs", v);
            if (r < 0 && r != -ESRCH) /* ESRCH: it exited meanwhile */
                return r;
        }
        if (!any)
            return 0;
    }
    return -EBUSY;
}

/* Undo move_self_to_supervisor_leaf(): back into own_fd's cgroup (possible while it enables no
 * controllers), and the directory removed if this run made it and it is empty. */
static void undo_supervisor_leaf(int own_fd, bool created)
{
    (void)write_file_at(own_fd, "cgroup.procs", "0");
    if (created)
        (void)unlinkat(own_fd, SUPERVISOR_LEAF, AT_REMOVEDIR);
}

static const char *delegation_hint(void)
{
    if (geteuid() == 0)
        return "run nsbox in a delegated cgroup (e.g. systemd-run --scope -p Delegate=yes "
               "nsbox ..., or Delegate=yes in its service), or give --cgroup-parent a cgroup for "
               "nsbox's leaves";
    return "run nsbox in a delegated cgroup (e.g. systemd-run --user --scope -p Delegate=yes "
           "nsbox ...), give --cgroup-parent a subtree you own, or run it as root";
}

/* true if the calling user may write dirfd/name (cgroupfs enforces plain file permissions). */
static bool writable_at(int dirfd, const char *name)
{
    return faccessat(dirfd, name, W_OK, AT_EACCESS) == 0;
}

/*
 * Whether root may treat its own cgroup as its to divide: the root cgroup (of the hierarchy or
 * of a cgroup namespace: nobody else manages it), or one its manager delegated. systemd marks a
 * unit's cgroup with Delegate=yes with the xattr trusted.delegate=1 (only a process with
 * CAP_SYS_ADMIN can set trusted.*), and with user.delegate=1 as well (systemd's "Control Group
 * APIs and Delegation", https://systemd.io/CGROUP_DELEGATION/; since v251). Any other cgroup
 * belongs to a manager's unit (a service's, a session's scope): enabling controllers there and
 * moving nsbox into a child would break the rule that a unit's processes live in its cgroup,
 * and leave the unit unable to start a process there again (the review of 1bd8bde: a service's
 * cgroup). An ordinary user needs no such test: cgroupfs lets it write only where a delegation
 * gave it the files.
 */
static bool root_may_use(int dirfd, bool is_root_cgroup)
{
    char value[8];
    ssize_t n;

    if (is_root_cgroup)
        return true;
    n = fgetxattr(dirfd, "trusted.delegate", value, sizeof(value) - 1);
    if (n < 0)
        n = fgetxattr(dirfd, "user.delegate", value, sizeof(value) - 1);
    if (n <= 0)
        return false;
    value[n] = '\0';
    return strcmp(value, "1") == 0;
}

/* Where a leaf may go, and what nsbox may do there to make one. */
enum parent_kind {
    PARENT_GIVEN,    /* --cgroup-parent: used as it is; nsbox does not move */
    PARENT_OWN,      /* nsbox's own cgroup: nsbox moves itself into SUPERVISOR_LEAF, if alone */
    PARENT_ANCESTOR, /* an ancestor of nsbox's cgroup within the delegation: nsbox stays put */
};

/*
 * cgroup_leaf_create() below the cgroup parent (a path below the mount). Returns 1 with *ret
 * filled, 0 when parent cannot hold the leaf (why in reason, naming parent, without a hint), or
 * a -errno (with reason) when a step that should have worked failed. With dry, nothing is
 * changed: 1 then means a run would make its leaf here, and reason says how.
 */
static int leaf_create_in(const struct nsbox_config *c, int mnt_fd, const char *parent,
                          enum parent_kind kind, bool dry, struct cgroup_leaf *ret, char *reason,
                          size_t size)
{
    char path[1200], controllers[256], want[64], missing[64], enable[96] = "";
    _cleanup_close_ int parent_fd = -EBADF, leaf_fd = -EBADF;
    struct cgroup_leaf leaf = {.dir_fd = -EBADF, .parent_fd = -EBADF};
    bool is_root, ns_root = false, moved = false, created = false, only_self = false;
    static unsigned counter;
    int r;

    (void)snprintf(path, sizeof(path), "%s", parent[0] == '/' ? parent + 1 : parent);
    is_root = path[0] == '\0';
    if (is_root)
        (void)snprintf(path, sizeof(path), ".");
    parent_fd = openat(mnt_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent_fd < 0) {
        if (kind == PARENT_GIVEN)
            return reasonf(reason, size, -errno, "--cgroup-parent %s: %s", c->cgroup_parent,
                           strerror(errno));
        return reasonf(reason, size, 0, "cannot open cgroup %s: %s", parent, strerror(errno));
    }
    /* "/" in a private cgroup namespace (a container's, cgroup_namespaces(7)) is the container's
     * own cgroup, not the hierarchy's root: it has cgroup.type, which only non-root cgroups
     * have (cgroup-v2.rst), and the no-internal-process constraint applies to it. */
    if (is_root && faccessat(parent_fd, "cgroup.type", F_OK, 0) == 0) {
        is_root = false;
        ns_root = true;
    }

    if (kind == PARENT_OWN && geteuid() == 0 && !root_may_use(parent_fd, is_root))
        return reasonf(reason, size, 0,
                       "cgroup %s is not delegated to nsbox (no trusted.delegate, systemd's "
                       "mark of Delegate=yes)",
                       parent);

    wanted_controllers(c, want, sizeof(want));
    if (read_file_at(parent_fd, "cgroup.controllers", controllers, sizeof(controllers)) < 0)
        return reasonf(reason, size, 0, "cgroup %s is not a cgroup v2 directory", parent);
    if (!has_words(controllers, want, missing, sizeof(missing)))
        return reasonf(reason, size, 0,
                       "cgroup %s does not have the controllers '%s' (its parent does not "
                       "enable them for it)",
                       parent, missing);

    /* Controllers must be enabled in the parent for its children. A cgroup that holds
     * processes (other than the root) cannot do that (EBUSY, cgroup-v2.rst "No Internal Process
     * Constraint"): in nsbox's own cgroup, nsbox first moves itself into the child leaf
     * SUPERVISOR_LEAF, but only where it is alone: the processes of others (the shell of a
     * terminal's scope, the program that started nsbox) are never moved, and a cgroup they are
     * in is left as it is, without a directory of nsbox's in it. */
    if (read_file_at(parent_fd, "cgroup.subtree_control", controllers, sizeof(controllers)) >= 0 &&
        !has_words(controllers, want, missing, sizeof(missing))) {
        for (const char *w = missing; *w;) {
            size_t n = strcspn(w, " ");
            size_t len = strlen(enable);
            (void)snprintf(enable + len, sizeof(enable) - len, "%s+%.*s", len ? " " : "", (int)n,
                           w);
            w += n + (w[n] == ' ');
        }
        r = writable_at(parent_fd, "cgroup.subtree_control") ? 0 : -EACCES;
        if (r == 0 && !is_root && count_procs(parent_fd, &only_self) > 0)
            r = kind == PARENT_OWN && only_self      ? 1
                : ns_root && kind != PARENT_ANCESTOR ? 2
                                                     : -EBUSY;
        if (dry) {
            if (r >= 0)
                return reasonf(reason, size, 1, "a leaf below %s, after %s'%s' there", parent,
                               r == 1   ? "moving nsbox into " SUPERVISOR_LEAF " and enabling "
                               : r == 2 ? "moving the container's processes into " SUPERVISOR_LEAF
                                          " and enabling "
                                        : "enabling ",
                               missing);
        } else if (r >= 0) {
            if (r == 1) {
                r = move_self_to_supervisor_leaf(parent_fd, &created);
                moved = r >= 0;
            } else if (r == 2) {
                /* A container's own cgroup: all of its processes go, as its init would do. */
                r = move_all_to_supervisor_leaf(parent_fd, &created);
                moved = r >= 0;
            }
            if (r >= 0)
                r = write_file_at(parent_fd, "cgroup.subtree_control", enable);
            /* Another process came in meanwhile (or the move failed): nsbox goes back to
             * where it was, and a directory it made goes. */
            if (r < 0 && (moved || created))
                undo_supervisor_leaf(parent_fd, created);
        }
        if (r == -EACCES || r == -EPERM || r == -EROFS)
            return reasonf(reason, size, 0, "cgroup %s is not delegated to uid %u", parent,
                           (unsigned)geteuid());
        if (r == -EBUSY)
            return reasonf(reason, size, 0,
                           "cgroup %s holds %sprocesses, so it cannot enable controllers for "
                           "a leaf",
                           parent, kind == PARENT_OWN ? "other " : "");
        if (r < 0)
            return reasonf(reason, size, 0, "enabling '%s' in %s failed: %s", enable, parent,
                           strerror(-r));
    }
    if (dry) {
        if (!writable_at(parent_fd, "."))
            return reasonf(reason, size, 0, "cgroup %s is not delegated to uid %u", parent,
                           (unsigned)geteuid());
        return reasonf(reason, size, 1, "a leaf below %s", parent);
    }

    remove_stale_leaves(parent_fd);

    (void)snprintf(leaf.name, sizeof(leaf.name), LEAF_PREFIX "%d-%llu-%u", (int)getpid(),
                   process_start_time(getpid()), counter++);
    if (mkdirat(parent_fd, leaf.name, 0755) < 0) {
        if (errno == EACCES || errno == EPERM || errno == EROFS)
            return reasonf(reason, size, 0, "cgroup %s is not delegated to uid %u", parent,
                           (unsigned)geteuid());
        return reasonf(reason, size, -errno, "creating cgroup %s/%s failed: %s", parent, leaf.name,
                       strerror(errno));
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

    (void)snprintf(leaf.path, sizeof(leaf.path), "%.900s%s%s", is_root || ns_root ? "" : parent,
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
 * Ask the user's systemd manager for a delegated scope (scope.h), then make the leaf in it as
 * in any delegated cgroup. Returns as leaf_create_in(); on 0, reason says what was tried. With
 * dry, only whether the manager answers on the user bus is asked (no scope is started): 1 then
 * means a run would ask it.
 */
static int leaf_create_in_user_scope(const struct nsbox_config *c, int mnt_fd, bool dry,
                                     struct cgroup_leaf *ret, char *reason, size_t size)
{
    char mnt[512], own[512], unit[64] = "", why[256] = "", in_scope[400] = "";
    int r;

    if (dry) {
        r = scope_manager_reachable(why, sizeof(why));
        if (r < 0)
            return reasonf(reason, size, 0,
                           "the systemd user manager is not reachable over D-Bus for a "
                           "delegated scope (%s)",
                           why);
        return reasonf(reason, size, 1,
                       "a leaf in a delegated scope asked of the systemd user manager over "
                       "D-Bus (it answers on the user bus; the scope itself was not started)");
    }
    r = scope_start_delegated(unit, sizeof(unit), why, sizeof(why));
    if (r < 0)
        return reasonf(reason, size, 0,
                       "asking the systemd user manager over D-Bus for a delegated scope "
                       "failed (%s)",
                       why);
    if (find_cgroup2(mnt, sizeof(mnt), own, sizeof(own)) < 0 || !in_unit(own, unit))
        return reasonf(reason, size, 0,
                       "the systemd user manager started the delegated scope %s but did not "
                       "move nsbox into it (nsbox is in %s)",
                       unit, own);
    r = leaf_create_in(c, mnt_fd, own, PARENT_OWN, false, ret, in_scope, sizeof(in_scope));
    if (r == 0)
        return reasonf(reason, size, 0,
                       "the systemd user manager's delegated scope %s did not do either: %s", unit,
                       in_scope);
    if (r < 0)
        return reasonf(reason, size, r, "%s", in_scope);
    return r;
}

/*
 * The nearest ancestor of own that can hold a leaf, within the subtree delegated to the caller:
 * walking up from own's parent while the cgroup's directory is owned by the caller's uid and
 * its cgroup.procs and cgroup.subtree_control are writable by it (what delegating a cgroup
 * hands over: cgroup-v2.rst, "Model of Delegation"). The first cgroup that fails that is above
 * the delegation point, and neither it nor anything above is used; nor is the root cgroup.
 * Never for root, which owns every cgroup, delegated or not. Returns as leaf_create_in().
 */
static int leaf_create_in_ancestor(const struct nsbox_config *c, int mnt_fd, const char *own,
                                   bool dry, struct cgroup_leaf *ret, char *reason, size_t size)
{
    char path[512], top[512] = "", why[400] = "";
    uid_t uid = geteuid();
    unsigned tried = 0;
    int r;

    if (uid == 0)
        return reasonf(reason, size, 0,
                       "the cgroups above %s were not tried (root owns every cgroup, so "
                       "ownership does not show a delegation)",
                       own);
    (void)snprintf(path, sizeof(path), "%s", own);
    for (;;) {
        _cleanup_close_ int fd = -EBADF;
        char *slash = strrchr(path, '/');
        struct stat st;

        if (!slash || slash == path)
            break; /* the next one up is the root cgroup */
        *slash = '\0';
        fd = openat(mnt_fd, path + 1, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != uid || !writable_at(fd, "cgroup.procs") ||
            !writable_at(fd, "cgroup.subtree_control"))
            break;
        tried++;
        (void)snprintf(top, sizeof(top), "%s", path);
        r = leaf_create_in(c, mnt_fd, path, PARENT_ANCESTOR, dry, ret, why, sizeof(why));
        if (r != 0)
            return reasonf(reason, size, r, "%s", why);
    }
    if (!tried)
        return reasonf(reason, size, 0, "no cgroup above %s is delegated to uid %u", own,
                       (unsigned)uid);
    /* why is the delegation point's: the last one that could have done. */
    return reasonf(reason, size, 0,
                   "no cgroup above %s up to the delegation point %s can hold a leaf (%s)", own,
                   top, why);
}

/*
 * The placement, in order: --cgroup-parent alone if given; else nsbox's own cgroup; else a
 * delegated scope of the systemd user manager; else the nearest ancestor within the
 * delegation; else 0 with a reason naming each attempt. With dry, nothing is changed and
 * reason says where a run would get its leaf and why the places before did not do.
 */
static int place(const struct nsbox_config *c, bool dry, struct cgroup_leaf *ret, char *reason,
                 size_t size)
{
    char mnt[512], own[512], want[64], have[256], missing[64] = "";
    char at_own[600] = "", at_scope[400] = "", above[700] = "";
    _cleanup_close_ int mnt_fd = -EBADF;
    int r;

    if (c->cgroup == NSBOX_CGROUP_OFF)
        return reasonf(reason, size, 0, "cgroups turned off (--cgroup off)");
    if (find_cgroup2(mnt, sizeof(mnt), own, sizeof(own)) < 0)
        return reasonf(reason, size, 0, "no cgroup v2 hierarchy is mounted");
    if (c->cgroup_parent && (strstr(c->cgroup_parent, "..") || c->cgroup_parent[0] == '\0'))
        return reasonf(reason, size, -EINVAL,
                       "--cgroup-parent '%s': expected a path below the cgroup2 mount without '..'",
                       c->cgroup_parent);
    mnt_fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (mnt_fd < 0)
        return reasonf(reason, size, 0, "cannot open the cgroup2 mount %s: %s", mnt,
                       strerror(errno));

    /* What the hierarchy's root does not offer, no cgroup below it has: no place would do. */
    wanted_controllers(c, want, sizeof(want));
    if (read_file_at(mnt_fd, "cgroup.controllers", have, sizeof(have)) < 0)
        have[0] = '\0';
    if (!has_words(have, want, missing, sizeof(missing)))
        return reasonf(reason, size, 0,
                       "cgroup v2 controllers '%s' are not available in this hierarchy (a hybrid "
                       "host binds them to cgroup v1; a container may not have been given them)",
                       missing);

    /* A --cgroup-parent is the caller's explicit choice: no other place instead. */
    if (c->cgroup_parent) {
        r = leaf_create_in(c, mnt_fd, c->cgroup_parent, PARENT_GIVEN, dry, ret, at_own,
                           sizeof(at_own));
        if (r != 0)
            return reasonf(reason, size, r, "%s", at_own);
        return reasonf(reason, size, 0, "%s: %s", at_own, delegation_hint());
    }

    r = leaf_create_in(c, mnt_fd, own, PARENT_OWN, dry, ret, at_own, sizeof(at_own));
    if (r != 0)
        return reasonf(reason, size, r, "%s", at_own);

    r = leaf_create_in_user_scope(c, mnt_fd, dry, ret, at_scope, sizeof(at_scope));
    if (r > 0 && dry)
        return reasonf(reason, size, 1, "%s, as %s", at_scope, at_own);
    if (r != 0)
        return reasonf(reason, size, r, "%s", at_scope);

    /* A scope that was started but did not do has moved nsbox: walk up from where it is. */
    if (!dry && find_cgroup2(mnt, sizeof(mnt), own, sizeof(own)) < 0)
        return reasonf(reason, size, 0, "%s; %s; /proc/self/cgroup is no longer readable", at_own,
                       at_scope);
    r = leaf_create_in_ancestor(c, mnt_fd, own, dry, ret, above, sizeof(above));
    if (r > 0 && dry)
        return reasonf(reason, size, 1, "%s, as %s and %s", above, at_own, at_scope);
    if (r != 0)
        return reasonf(reason, size, r, "%s", above);
    return reasonf(reason, size, 0, "%s; %s; %s: %s", at_own, at_scope, above, delegation_hint());
}

int cgroup_leaf_create(const struct nsbox_config *c, struct cgroup_leaf *ret, char *reason,
                       size_t size)
{
    return place(c, false, ret, reason, size);
}

int cgroup_placement(const struct nsbox_config *c, char *what, size_t size)
{
    struct cgroup_leaf unused = {.dir_fd = -EBADF, .parent_fd = -EBADF};

    return place(c, true, &unused, what, size);
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
