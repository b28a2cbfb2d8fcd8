/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Isolation tier 3: a run without namespaces, behind Landlock and seccomp (tier3.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cap-ng.h>
#include <seccomp.h>

#include "caps.h"
#include "cell.h"
#include "fileio.h"
#include "filter.h"
#include "init.h"
#include "landlock.h"
#include "memfd.h"
#include "macro.h"
#include "outputs.h"
#include "plan.h"
#include "report.h"
#include "sandbox.h"
#include "supervise.h"
#include "syscalls.h"
#include "tier3.h"
#include "uidpool.h"

/* ---- is it needed? ----------------------------------------------------------------------- */

int tier3_needed(const struct nsbox_config *c)
{
    int p[2];
    uid_t euid = geteuid();
    char byte, map[64];
    pid_t pid;
    ssize_t n;

    if (c->isolation != NSBOX_ISOLATION_LANDLOCK)
        return 0;
    (void)snprintf(map, sizeof(map), "0 %u 1", (unsigned)euid);
    /* A child tries what the sandbox needs first: a user namespace (refused by a container's
     * seccomp profile, EPERM, or by user.max_user_namespaces, ENOSPC), and, unprivileged, the
     * map of its own id, which Ubuntu's AppArmor restriction refuses in a namespace it lets be
     * made (apparmor_restrict_unprivileged_userns). Only the user namespace: with the others
     * the probe took about 2.7 ms more (a network namespace is slow to make and tear down),
     * and where the user namespace works the sandbox's other namespaces are owned by it. It
     * says yes with a byte on the pipe: a caller that ignores SIGCHLD gets no exit status to
     * read. Only with --isolation landlock: one fork more, never on an ordinary run's path. */
    if (pipe2(p, O_CLOEXEC) < 0)
        return 0;
    pid = fork();
    if (pid < 0) {
        (void)close(p[0]);
        (void)close(p[1]);
        return 0; /* the run fails as it would have */
    }
    if (pid == 0) {
        int fd;

        (void)close(p[0]);
        if (unshare(CLONE_NEWUSER) < 0)
            _exit(1);
        if (euid != 0) {
            fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write(fd, "deny", 4) != 4)
                _exit(1);
            (void)close(fd);
            fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
            if (fd < 0 || write(fd, map, strlen(map)) != (ssize_t)strlen(map))
                _exit(1);
        }
        _exit(write(p[1], "y", 1) == 1 ? 0 : 1);
    }
    (void)close(p[1]);
    n = RETRY_EINTR(read(p[0], &byte, 1));
    (void)close(p[0]);
    (void)RETRY_EINTR(waitpid(pid, NULL, 0));
    return n == 1 ? 0 : 1;
}

/* ---- the plan ---------------------------------------------------------------------------- */

struct tier3 {
    const struct nsbox_config *c;
    struct sandbox_plan sb; /* what sandbox_payload_exec(), init_budgets() and init_loop() read */
    int abi;
    uid_t uid; /* the program's ids: the caller's, or for root one of the pool's */
    gid_t gid;
    bool switch_ids;
    int pool_lock;
    char scratch[PATH_MAX];
    struct landlock_path *paths;
    size_t n_paths;
    char **etc_python; /* /etc/python3* (Debian's sitecustomize.py lives there) */
    size_t n_etc_python;
    struct filter extra;
    const struct filter *memfd; /* memfd.h's program by the host's vm.memfd_noexec, or NULL */
    pid_t supervisor;
    pid_t supervisor_pgid;
    char scratch_parent[PATH_MAX];
};

/* What tier 3 cannot honour: everything that takes a namespace, a cgroup, or an opt-out of a
 * protection tier 3 is made of. pid_host and ipc_host are honoured as they are: there is no
 * pid or IPC namespace to leave. A rootfs is not refused but left out with a warning
 * (tier3_run()): the Python API names its science tree by default, and leaving it out takes
 * nothing from the walls. */
static const char *refusal(const struct nsbox_config *c)
{
    if (c->n_binds)
        return "-v (binds need a mount namespace)";
    if (c->n_tmpfs)
        return "--tmpfs (a mount namespace)";
    if (c->n_copy_in || c->n_copy_out)
        return "--copy-in/--copy-out (use --code, or files the program writes in its scratch "
               "directory while it runs)";
    if (c->workspace)
        return "--workspace";
    if (c->workdir)
        return "-w (the program's directory is its scratch directory)";
    if (c->network_host || c->network_loopback || (c->network_allow && c->network_allow[0]))
        return "--network other than none (no network namespace: tier 3 refuses TCP instead)";
    if (c->uid != SANDBOX_NOBODY || c->gid != SANDBOX_NOBODY)
        return "--user (no user namespace: the program runs as the caller, or root's as a host "
               "id of nsbox's pool)";
    if (c->seccomp_disabled || c->seccomp_policy)
        return "--no-seccomp and --seccomp-policy (tier 3 is the default policy, or nothing)";
    if (c->landlock == NSBOX_LANDLOCK_OFF)
        return "--landlock off (Landlock is tier 3's wall)";
    if (c->cgroup == NSBOX_CGROUP_REQUIRED || c->cgroup_parent)
        return "--cgroup required and --cgroup-parent (tier 3 enforces the limits with rlimits)";
    if (c->env_inherit || c->keep_fds)
        return "--env-inherit and --keep-fds";
    return NULL;
}

static int add_path(struct tier3 *t, const char *path, bool write, bool exec, bool device)
{
    struct landlock_path *p = reallocarray(t->paths, t->n_paths + 1, sizeof(*p));

    if (!p)
        return -ENOMEM;
    t->paths = p;
    t->paths[t->n_paths++] = (struct landlock_path){path, write, exec, device, false};
    return 0;
}

/* The host paths the program may read: the smallest set a dynamically linked interpreter
 * needs. /usr holds the programs and libraries, /lib* and /bin the same on a system without
 * merged /usr (symlinks into /usr where it is merged: the rule lands on the target, as the
 * program's own lookups do). Of /etc only ld.so.cache (the dynamic loader finds libraries with
 * it), alternatives (Debian's symlinks for python3, java, ...), localtime (time zone) and
 * python3* (Debian's sitecustomize.py, which site.py imports at every start) — never passwd,
 * the SSL keys, the caller's configuration. Not /proc (the caller's other processes, their
 * environment), not /sys, not /home, not /tmp (TMPDIR is the scratch directory). */
static int plan_paths(struct tier3 *t)
{
    static const char *const exec_dirs[] = {"/usr",    "/lib", "/lib64", "/lib32",
                                            "/libx32", "/bin", "/sbin"};
    static const char *const etc[] = {"/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"};
    static const char *const devices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                          "/dev/urandom"};
    DIR *d;
    int r = 0;

    for (size_t i = 0; r >= 0 && i < ELEMENTSOF(exec_dirs); i++)
        r = add_path(t, exec_dirs[i], false, true, false);
    for (size_t i = 0; r >= 0 && i < ELEMENTSOF(etc); i++)
        r = add_path(t, etc[i], false, false, false);
    for (size_t i = 0; r >= 0 && i < ELEMENTSOF(devices); i++)
        r = add_path(t, devices[i], false, false, true);
    if (r >= 0)
        r = add_path(t, t->scratch, true, false, false);
    d = opendir("/etc");
    for (struct dirent *de; r >= 0 && d && (de = readdir(d));) {
        char *path, **v;
        if (strncmp(de->d_name, "python3", 7) != 0)
            continue;
        v = reallocarray(t->etc_python, t->n_etc_python + 1, sizeof(*v));
        if (!v || asprintf(&path, "/etc/%s", de->d_name) < 0) {
            if (v)
                t->etc_python = v;
            r = -ENOMEM;
            break;
        }
        t->etc_python = v;
        t->etc_python[t->n_etc_python++] = path;
        r = add_path(t, path, false, false, false);
    }
    if (d)
        (void)closedir(d);
    /* Last, for init alone (the program's own layer leaves it out, tier3_init()): removing
     * the scratch directory from its parent, which init does when nsbox died. */
    if (r >= 0) {
        const char *slash = strrchr(t->scratch, '/');
        (void)snprintf(t->scratch_parent, sizeof(t->scratch_parent), "%.*s",
                       slash == t->scratch ? 1 : (int)(slash - t->scratch), t->scratch);
        r = add_path(t, t->scratch_parent, false, false, false);
        if (r >= 0)
            t->paths[t->n_paths - 1].remove_dir = true;
    }
    return r;
}

/* The extra filter, stacked on the default policy's: setsid(2) and setpgid(2) refused, so that
 * the program and all it starts stay in init's process group, the one nsbox kills (there is
 * no pid namespace to do it); System V IPC, other processes' limits and scheduling, chmod
 * granting write to others, and truncate(2) (below); socket(2) of every family, AF_UNIX too; and
 * socketpair(2) of any family but AF_UNIX. The default policy allows AF_UNIX sockets, which in tier
 * 1 reach only the sandbox's own; here there is no mount namespace, and Landlock (to ABI 7 at
 * least) does not check connect(2) or sendmsg(2) to a named socket: the program could reach every
 * socket of the host its uid may write to, the caller's D-Bus session bus (/run/user/UID/bus, whose
 * systemd starts any command outside the sandbox), a rootless Docker's, an ssh or gpg agent. A
 * stream or seqpacket socketpair is all it keeps (asyncio's wake-up, multiprocessing's Pipe;
 * multiprocessing's locks need /dev/shm, refused anyway). */
static int plan_filter(struct tier3 *t)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int r;

    if (!ctx)
        return -ENOMEM;
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setsid), 0);
    if (r >= 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setpgid), 0);
    if (r >= 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 0);
    if (r >= 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socketpair), 1,
                             SCMP_A0(SCMP_CMP_NE, AF_UNIX));
    /* A datagram pair sends to any named socket with sendto(2)/sendmsg(2)'s address, which
     * unix_dgram_sendmsg() honours on a connected socket too; AF_UNIX's SOCK_RAW is made a
     * SOCK_DGRAM (unix_create() in net/unix/af_unix.c). Stream and seqpacket pairs ignore or
     * refuse an address. The type's low bits, SOCK_CLOEXEC and SOCK_NONBLOCK aside. */
    for (int type = SOCK_DGRAM; r >= 0 && type <= SOCK_RAW; type++)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socketpair), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, (scmp_datum_t)type));
    /* System V IPC: no IPC namespace, so shmget(2), msgget(2) and semget(2) name the host's
     * objects, which Landlock does not cover: an ordinary user's program would read and write
     * the caller's shared memory (an X server's MIT-SHM images of their screen) and semaphores,
     * and any run's objects would outlive it in the host's IPC namespace, where nothing
     * removes them. All of it refused; POSIX shared memory and message
     * queues are files Landlock refuses already (/dev/shm, the mqueue mount). */
    static const int sysv[] = {SCMP_SYS(shmget), SCMP_SYS(shmat),      SCMP_SYS(shmctl),
                               SCMP_SYS(shmdt),  SCMP_SYS(msgget),     SCMP_SYS(msgsnd),
                               SCMP_SYS(msgrcv), SCMP_SYS(msgctl),     SCMP_SYS(semget),
                               SCMP_SYS(semop),  SCMP_SYS(semtimedop), SCMP_SYS(semctl)};
    for (size_t i = 0; r >= 0 && i < ELEMENTSOF(sysv); i++)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), sysv[i], 0);
    /* Another process's limits and scheduling: prlimit(2), setpriority(2), ioprio_set(2) and
     * the sched_set* calls check only that the target has the caller's uid (or CAP_SYS_NICE,
     * CAP_SYS_RESOURCE), which Landlock's signal scope does not cover: an ordinary user's
     * program could set RLIMIT_CPU or RLIMIT_NOFILE of every process of the caller, or renice
     * them all (PRIO_USER), which the caller cannot undo without CAP_SYS_NICE. Only the
     * calling thread (pid 0) is left: what glibc's setrlimit(2), nice(3) and Python's
     * os.sched_setaffinity(0, ...) pass; a thread id other than 0 (pthread_setaffinity_np(3)
     * with OMP_PROC_BIND) is refused too. */
    static const int others[] = {SCMP_SYS(prlimit64), SCMP_SYS(sched_setaffinity),
                                 SCMP_SYS(sched_setattr), SCMP_SYS(sched_setparam),
                                 SCMP_SYS(sched_setscheduler)};
    for (size_t i = 0; r >= 0 && i < ELEMENTSOF(others); i++)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), others[i], 1, SCMP_A0(SCMP_CMP_NE, 0));
    /* setpriority(which, who, prio) and ioprio_set(which, who, ioprio): PRIO_PROCESS (0) and
     * IOPRIO_WHO_PROCESS (1) of who 0 only. */
    if (r >= 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setpriority), 1,
                             SCMP_A0(SCMP_CMP_NE, PRIO_PROCESS));
    if (r >= 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setpriority), 1,
                             SCMP_A1(SCMP_CMP_NE, 0));
    if (r >= 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioprio_set), 1,
                             SCMP_A0(SCMP_CMP_NE, 1));
    if (r >= 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioprio_set), 1,
                             SCMP_A1(SCMP_CMP_NE, 0));
    /* chmod(2) and its kin granting group or others write: Landlock does not check a file's
     * metadata, and an ordinary user's program runs as the caller, so it could make any file
     * of theirs it reaches by path (~/.bashrc) writable to every local user, who would then run
     * code as the caller. The set-id bits the default policy refuses already. Reading stays
     * grantable (shutil.copy() copies 0644 and 0755): the README says so. */
    static const struct {
        int nr;
        unsigned arg;
    } modes[] = {{SCMP_SYS(chmod), 1}, {SCMP_SYS(fchmod), 1}, {SCMP_SYS(fchmodat), 2}};
    static const scmp_datum_t write_bits[] = {S_IWGRP, S_IWOTH};
    for (size_t i = 0; r >= 0 && i < ELEMENTSOF(modes); i++)
        for (size_t b = 0; r >= 0 && b < ELEMENTSOF(write_bits); b++) {
            struct scmp_arg_cmp cmp = {modes[i].arg, SCMP_CMP_MASKED_EQ, write_bits[b],
                                       write_bits[b]};
            r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), modes[i].nr, 1, &cmp);
        }
    /* truncate(2) by path: Landlock checks it from ABI 3 only (LANDLOCK_ACCESS_FS_TRUNCATE);
     * on ABI 2 (Linux 5.19 to 6.1: Debian 12) the program, running as the caller, could empty
     * any file of theirs. Refused on every ABI, one behaviour everywhere: ftruncate(2) (what
     * Python's file.truncate() calls) needs a descriptor opened for writing, which Landlock
     * checked. */
    if (r >= 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(truncate), 0);
    if (r >= 0)
        r = filter_export_program(ctx, &t->extra.prog[0]);
    if (r >= 0)
        t->extra.n_prog = 1;
    seccomp_release(ctx);
    /* Memfds that could be executed, refused as in the other tiers (memfd.h): Landlock lets
     * every access to a memfd through, so a program written into one would run. By the host's
     * vm.memfd_noexec (tier 3 has no pid namespace of its own to set it in), read here: the
     * payload's Landlock layer does not let it read /proc/sys. */
    if (r >= 0)
        r = memfd_filter_here(&t->memfd);
    return r;
}

/* The environment: PATH, HOME and TMPDIR (the scratch directory), LANG and PYTHONUNBUFFERED,
 * then -e KEY=VALUE, a later KEY replacing an earlier one in its place. */
static int plan_env3(struct tier3 *t, struct nsbox_result *ret)
{
    const struct nsbox_config *c = t->c;
    size_t n = 0, max = 6;
    char **envp;

    for (size_t i = 0; c->env && c->env[i]; i++)
        max++;
    envp = t->sb.envp = calloc(max, sizeof(char *));
    if (!envp)
        return -ENOMEM;
    if (asprintf(&envp[n++], "PATH=%s", SANDBOX_PATH) < 0 ||
        asprintf(&envp[n++], "HOME=%s", t->scratch) < 0 ||
        asprintf(&envp[n++], "TMPDIR=%s", t->scratch) < 0 ||
        !(envp[n++] = strdup("LANG=C.UTF-8")) || !(envp[n++] = strdup("PYTHONUNBUFFERED=1")))
        return -ENOMEM;
    for (size_t i = 0; c->env && c->env[i]; i++) {
        const char *eq = strchr(c->env[i], '=');
        size_t k, key;
        if (!eq || eq == c->env[i])
            return report_config_error(ret, -EINVAL, "-e %s: expected KEY=VALUE", c->env[i]);
        key = (size_t)(eq - c->env[i]) + 1;
        for (k = 0; k < n && strncmp(envp[k], c->env[i], key) != 0; k++)
            ;
        if (k < n)
            free(envp[k]);
        if (!(envp[k] = strdup(c->env[i])))
            return -ENOMEM;
        if (k == n)
            n++;
    }
    for (size_t k = 0; k < n; k++)
        if (strncmp(envp[k], "PATH=", 5) == 0)
            t->sb.path = envp[k] + 5;
    return 0;
}

/* The program: argv as given, or --code's python3 main.py (--cell's driver) with main.py in
 * the scratch directory instead of /work. */
static int plan_argv(struct tier3 *t, struct nsbox_result *ret)
{
    const struct nsbox_config *c = t->c;
    const char *why = NULL;
    size_t n_args = 0;
    int r;

    while (c->argv && c->argv[n_args])
        n_args++;
    if (!c->code && n_args == 0)
        return report_config_error(ret, -EINVAL, "no program to run (give PROGRAM or --code)");
    /* With PROGRAM (no code), cell_plan_payload() copies it as it is. */
    r = cell_plan_payload(c, n_args, &t->sb.argv, &t->sb.outputs_fd, &why);
    if (r < 0)
        return why ? report_config_error(ret, r, "%s", why) : r;
    for (size_t i = 0; t->sb.argv[i]; i++)
        if (strcmp(t->sb.argv[i], "/work/main.py") == 0) {
            free(t->sb.argv[i]);
            if (asprintf(&t->sb.argv[i], "%s/main.py", t->scratch) < 0) {
                t->sb.argv[i] = NULL;
                return -ENOMEM;
            }
        }
    return 0;
}

static int write_code(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? negative_errno() : -EIO;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The scratch directory: mkdtemp(3) makes it 0700; root's is handed to the run's host id. With
 * --code, main.py (0444, as /work/main.py is read-only in tier 1). */
static int plan_scratch(struct tier3 *t, struct nsbox_result *ret)
{
    const char *base = getenv("TMPDIR");
    _cleanup_close_ int dir = -EBADF, fd = -EBADF;

    /* Root's program runs as another id, which must reach the directory: /tmp, whatever
     * root's TMPDIR is. */
    if (!base || base[0] != '/' || strlen(base) > PATH_MAX - 32 || t->switch_ids)
        base = "/tmp";
    (void)snprintf(t->scratch, sizeof(t->scratch), "%s/nsbox-tier3-XXXXXX", base);
    if (!mkdtemp(t->scratch)) {
        int r = negative_errno();
        t->scratch[0] = '\0';
        return report_error(ret, r, "scratch", "making a scratch directory in %s failed: %m", base);
    }
    dir = open(t->scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0 || (t->switch_ids && fchown(dir, t->uid, t->gid) < 0))
        return report_error(ret, negative_errno(), "scratch", "%s: %m", t->scratch);
    if (!t->c->code)
        return 0;
    fd = openat(dir, "main.py", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0 || write_code(fd, t->c->code, t->c->code_size) < 0)
        return report_error(ret, negative_errno(), "scratch", "writing %s/main.py failed: %m",
                            t->scratch);
    return 0;
}

/* Remove the scratch directory, whatever the program made of it: a directory it made
 * unreadable is made 0700 first (its owner may; root may anyway). Never follows a symlink. */
static int remove_tree(int parent, const char *name, int depth)
{
    _cleanup_close_ int fd = -EBADF;
    DIR *d;
    int r = 0;

    struct stat st;

    /* The type first: Landlock answers unlinkat() before the kernel says EISDIR, and init
     * (tier3_orphaned()) may remove directories from the parent, not files. */
    if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : negative_errno();
    if (!S_ISDIR(st.st_mode))
        return unlinkat(parent, name, 0) == 0 || errno == ENOENT ? 0 : negative_errno();
    if (depth > 256)
        return -ELOOP;
    {
        /* Made searchable and readable again (the program may have taken that away) through a
         * descriptor of the directory itself: a symlink the program swaps in for name after
         * the fstatat() above is never followed, so root's clean-up cannot chmod a path the
         * program picked. The chmod goes through /proc/self/fd (proc(5)): an O_PATH
         * descriptor takes no fchmod(). */
        _cleanup_close_ int path_fd = openat(parent, name,
                                             O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char self[64];

        if (path_fd < 0)
            return errno == ENOENT ? 0 : negative_errno();
        (void)snprintf(self, sizeof(self), "/proc/self/fd/%d", path_fd);
        if (chmod(self, 0700) < 0 && errno != EPERM)
            return negative_errno();
        fd = openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return negative_errno();
    }
    d = fdopendir(fd);
    if (!d)
        return negative_errno();
    TAKE_FD(fd);
    for (struct dirent *de; r >= 0 && (de = readdir(d));)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            r = remove_tree(dirfd(d), de->d_name, depth + 1);
    (void)closedir(d);
    if (r >= 0 && unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        r = negative_errno();
    return r;
}

/* ---- init, the one process nsbox starts (no namespace of its own) ----------------------- */

struct child_fds3 {
    int report, in, out, err;
};

/* Every capability set but the bounding set empty; that too for root, whose bounding set was
 * emptied before the switch. Read back from the kernel, as caps_drop_all() does. */
static int verify_no_caps(bool bounding, struct report_step *e)
{
    static const char *const sets[] = {"CapInh", "CapPrm", "CapEff", "CapAmb", "CapBnd"};
    _cleanup_free_ char *status = NULL;
    int r = proc_self_status_read(&status);

    if (r < 0)
        return report_step_failed(e, r, "drop capabilities", "read /proc/self/status");
    for (size_t i = 0; i < ELEMENTSOF(sets) - (bounding ? 0 : 1); i++) {
        uint64_t mask;
        r = proc_status_mask(status, sets[i], &mask);
        if (r < 0 || mask != 0)
            return report_step_failed(e, -EPERM, "drop capabilities", "%s is %#llx", sets[i],
                                      r < 0 ? ~0ULL : (unsigned long long)mask);
    }
    return 0;
}

/* When nsbox died: kill the program's group (init is not in it), wait (at most 2 s) until
 * nothing of it is left to write, and remove the scratch directory, which the supervisor
 * would have; then leave. Init's own Landlock layer lets it remove that one directory from
 * its parent (plan_paths()). */
_noreturn_ static void tier3_orphaned(const struct tier3 *t)
{
    const char *name = strrchr(t->scratch, '/') + 1;
    _cleanup_close_ int parent = -EBADF;

    (void)kill(-getpid(), SIGKILL);
    for (int i = 0; i < 2000 && kill(-getpid(), 0) == 0; i++) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        (void)usleep(1000);
    }
    /* O_PATH: not checked by Landlock, and no path the program could have changed (the parent
     * is not writable to it). */
    parent = open(t->scratch_parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (parent >= 0 && chdir("/") == 0)
        (void)remove_tree(parent, name, 0);
    _exit(125);
}

/* init_loop() without a pid namespace: reap, forward SIGINT, SIGTERM and SIGHUP to the
 * payload, report how it ended and leave (supervise() then kills the program's group). Where
 * nsbox itself died (the parent-death signal, SIGUSR2, with init reparented), what nsbox would
 * have done: tier3_orphaned(). A SIGUSR2 the program sends is ignored. */
_noreturn_ static void tier3_loop(const struct tier3 *t, pid_t payload, const sigset_t *mask,
                                  int report_fd)
{
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(mask, &si), status;
        pid_t p;

        if (sig < 0)
            continue;
        if (sig == SIGUSR2) {
            if (getppid() != t->supervisor)
                tier3_orphaned(t);
            continue;
        }
        if (sig != SIGCHLD) {
            (void)kill(payload, sig);
            continue;
        }
        while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
            if (p != payload)
                continue;
            struct report rep = {.type = WIFSIGNALED(status) ? REPORT_SIGNALED : REPORT_EXITED,
                                 .code = WIFSIGNALED(status) ? WTERMSIG(status)
                                                             : WEXITSTATUS(status)};
            report_send(report_fd, &rep);
            _exit(0);
        }
    }
}

_noreturn_ static void tier3_init(struct tier3 *t, struct child_fds3 *fds)
{
    struct report_step e = {0};
    sigset_t mask;
    pid_t payload, init_pid;
    int listener = -1, r;

    /* A process group whose id is init's pid: the payload is born in it, and init leaves it
     * once the payload exists, so that the group is the program's alone (init can then kill
     * it and live on: tier3_orphaned()). nsbox kills it at the end (supervise.h, kill_group);
     * the program's filter keeps everything in it. Init's pid, held by init until reaped,
     * cannot name another group meanwhile. The controlling terminal stays the caller's: the
     * program has no descriptor of it, and Landlock refuses opening /dev/tty. */
    if (setpgid(0, 0) < 0)
        report_setup_failed(fds->report, &(struct report_step){.err = errno, .name = "setpgid"});
    init_default_signals(NULL);

    /* Root's run becomes the pool's id: without a user namespace, uid 0 without capabilities
     * still owns root's files and may signal root's processes (kill(2) checks uids only). The
     * bounding set goes first, while CAP_SETPCAP is held; the switch to an id other than 0
     * clears the permitted and effective sets (capabilities(7)). */
    if (t->switch_ids) {
        capng_clear(CAPNG_SELECT_BOUNDS);
        if (capng_apply(CAPNG_SELECT_BOUNDS) != 0)
            report_setup_failed(fds->report, &(struct report_step){.err = EPERM,
                                                                   .name = "drop capabilities",
                                                                   .detail = "bounding set"});
        r = caps_switch_ids(t->uid, t->gid, true, &e);
        if (r < 0)
            report_setup_failed(fds->report, &e);
    }
    /* SIGUSR2, not SIGKILL, when nsbox dies: init then kills its whole group (tier3_loop()),
     * which no pid namespace would. Set after the id switch, which clears it (prctl(2)); then
     * check that nsbox did not die before. */
    if (prctl(PR_SET_PDEATHSIG, SIGUSR2, 0, 0, 0) < 0 || getppid() != t->supervisor)
        _exit(125);
    capng_clear(CAPNG_SELECT_CAPS);
    (void)capng_apply(CAPNG_SELECT_CAPS);
    (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    /* An ordinary user's bounding set stays (emptying it takes CAP_SETPCAP); with no_new_privs
     * no execve can gain a capability from it. */
    r = verify_no_caps(t->switch_ids, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    /* Not ptrace-attachable by the program (same uid): it holds nsbox's descriptors. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "no_new_privs"});
    if (chdir(t->scratch) < 0)
        report_setup_failed(fds->report, &(struct report_step){.err = errno,
                                                               .name = "chdir",
                                                               .detail = "scratch directory"});
    r = landlock_apply_paths(t->abi, t->paths, t->n_paths, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);

    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGUSR2);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "sigprocmask"});
    /* RLIMIT_CORE 1 (sandbox.c says why), the per-user budgets, RLIMIT_NOFILE and _FSIZE. */
    r = init_set_rlimit(RLIMIT_CORE, 1);
    if (r < 0)
        report_setup_failed(fds->report, &(struct report_step){.err = -r, .name = "RLIMIT_CORE"});
    r = init_budgets(&t->sb, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    /* The cell's channel above what sandbox_payload_exec() moves (dup2() onto its own number
     * would keep O_CLOEXEC), as sandbox.c does. */
    if (t->sb.outputs_fd >= 0) {
        r = fcntl(t->sb.outputs_fd, F_DUPFD_CLOEXEC, 7);
        if (r < 0)
            report_setup_failed(fds->report,
                                &(struct report_step){.err = errno, .name = "outputs"});
        t->sb.outputs_fd = r;
    }
    init_pid = getpid();
    payload = fork();
    if (payload < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "fork payload"});
    if (payload == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != init_pid)
            _exit(125);
        /* A Landlock layer of its own without the parent's rule (the last path), then the
         * filters: only nsbox's code runs until sandbox_payload_exec()'s execve. Its
         * setpgid(0, 0) is then refused: it stays in the group. */
        r = landlock_apply_paths(t->abi, t->paths, t->n_paths - 1, &e);
        if (r < 0)
            report_setup_failed(fds->report, &e);
        r = filter_load(&filter_default, &listener);
        if (r >= 0)
            r = filter_load(&t->extra, &listener);
        if (r >= 0 && t->memfd)
            r = filter_load(t->memfd, &listener);
        if (r < 0)
            report_setup_failed(fds->report, &(struct report_step){.err = -r, .name = "seccomp"});
        sandbox_payload_exec(&t->sb, fds->in, fds->out, fds->err, fds->report, t->sb.outputs_fd);
    }
    /* Init back in nsbox's group (the same session), and under the default policy. */
    if (setpgid(0, t->supervisor_pgid) < 0)
        report_setup_failed(fds->report, &(struct report_step){.err = errno, .name = "setpgid"});
    r = filter_load(&filter_default, &listener);
    if (r < 0)
        report_setup_failed(fds->report, &(struct report_step){.err = -r, .name = "seccomp"});
    if (fds->report != 3 && dup3(fds->report, 3, O_CLOEXEC) < 0)
        _exit(125);
    (void)sys_close_range(0, 2, 0);
    (void)sys_close_range(4, ~0U, 0);
    tier3_loop(t, payload, &mask, 3);
}

/* ---- the supervisor ---------------------------------------------------------------------- */

static void warn_tier3(const struct tier3 *t, struct nsbox_result *ret)
{
    report_warning(t->c, ret,
                   "isolation tier 3, much weaker than the full sandbox: no namespaces (no user "
                   "namespace can be made here); the host's programs run as %s under Landlock "
                   "(read /usr, /lib*, a few files of /etc; write only a scratch directory), "
                   "no sockets (seccomp), the default seccomp policy, no capabilities, rlimits; "
                   "it sees the host's processes%s; 'nsbox doctor' names the fix",
                   t->switch_ids ? "a host id of nsbox's pool" : "the caller's uid",
                   t->abi >= 6 ? "" : " and may signal those of its uid");
}

static void tier3_free(struct tier3 *t)
{
    if (t->sb.argv)
        for (char **a = t->sb.argv; *a; a++)
            free(*a);
    free(t->sb.argv);
    if (t->sb.envp)
        for (char **a = t->sb.envp; *a; a++)
            free(*a);
    free(t->sb.envp);
    if (t->sb.outputs_fd >= 0)
        (void)close(t->sb.outputs_fd);
    for (size_t i = 0; i < t->n_etc_python; i++)
        free(t->etc_python[i]);
    free(t->etc_python);
    free(t->paths);
    filter_free(&t->extra);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        (void)close(*fd);
    *fd = -EBADF;
}

int tier3_run(const struct nsbox_config *c, int sigfd, struct nsbox_result *ret)
{
    struct tier3 t = {.c = c,
                      .pool_lock = -EBADF,
                      .supervisor = getpid(),
                      .supervisor_pgid = getpgrp()};
    int out[2] = {-EBADF, -EBADF}, err[2] = {-EBADF, -EBADF}, rep[2] = {-EBADF, -EBADF},
        in[2] = {-EBADF, -EBADF};
    _cleanup_close_ int pidfd = -EBADF;
    const char *no;
    char detail[256] = "";
    uint64_t start;
    long pid;
    int r;

    t.sb.config = c;
    t.sb.outputs_fd = t.sb.copy_out_fd = t.sb.host_ids_lock = -EBADF;
    ret->isolation_tier = 3;
    ret->isolation_missing = NSBOX_MISSING_USER_NS | NSBOX_MISSING_PID_NS | NSBOX_MISSING_NET_NS |
                             NSBOX_MISSING_MOUNT_NS | NSBOX_MISSING_IPC_NS | NSBOX_MISSING_UTS_NS |
                             NSBOX_MISSING_CGROUP_NS | NSBOX_MISSING_ROOTFS | NSBOX_MISSING_CGROUP;

    if ((no = refusal(c))) {
        r = report_error(ret, -EINVAL, "isolation",
                         "--isolation landlock: no user namespace can be made here, so this run "
                         "would be tier 3, which has no %s; drop the option, or give nsbox user "
                         "namespaces ('nsbox doctor' names the fix)",
                         no);
        goto out;
    }
    r = plan_identity(c, ret);
    if (r < 0)
        goto out;
    t.abi = landlock_tier3_abi();
    if (t.abi < 0) {
        r = report_error(ret, t.abi, "landlock",
                         "--isolation landlock: no user namespace can be made here, and %s, so "
                         "nsbox has no wall to run the program behind (tier 3 needs Landlock ABI "
                         "2: Linux 5.19 or later with 'landlock' in the lsm= boot parameter); "
                         "'nsbox doctor' names the fix for a full sandbox",
                         t.abi == -EPROTO ? "this kernel has Landlock ABI 1 only"
                         : t.abi == -ENOSYS || t.abi == -EOPNOTSUPP
                             ? "this kernel has no Landlock enabled"
                             : "Landlock's system calls are refused (a seccomp filter)");
        goto out;
    }
    ret->landlock_abi = t.abi;
    ret->landlock_restricts = NSBOX_LANDLOCK_FS | (t.abi >= 4 ? NSBOX_LANDLOCK_NET : 0) |
                              (t.abi >= 6 ? NSBOX_LANDLOCK_SCOPE : 0);

    if (geteuid() == 0) {
        t.switch_ids = true;
        if (c->host_uid) {
            t.uid = c->host_uid;
            t.gid = c->host_gid ? c->host_gid : c->host_uid;
        } else {
            r = uidpool_acquire(&t.uid, &t.pool_lock, detail, sizeof(detail));
            if (r < 0) {
                (void)report_error(ret, r, "host ids",
                                   "taking a host id from nsbox's pool "
                                   "failed: %s%s%s",
                                   strerror(-r), detail[0] ? ": " : "", detail);
                goto out;
            }
            t.gid = t.uid;
            /* No pid namespace: until its processes are known dead, the slot says so. */
            r = uidpool_mark(t.pool_lock, t.uid, true);
            if (r < 0) {
                (void)report_error(ret, r, "host ids", "marking the pool's slot failed: %m");
                goto out;
            }
        }
    } else {
        t.uid = geteuid();
        t.gid = getegid();
        if ((c->host_uid && c->host_uid != t.uid) || (c->host_gid && c->host_gid != t.gid)) {
            r = report_config_error(ret, -EINVAL,
                                    "--host-user: an ordinary user's run is the user themself");
            goto out;
        }
    }
    ret->host_uid = t.uid;
    ret->host_gid = t.gid;

    r = plan_scratch(&t, ret);
    if (r < 0)
        goto out;
    r = plan_argv(&t, ret);
    if (r >= 0)
        r = plan_env3(&t, ret);
    if (r >= 0)
        r = plan_paths(&t);
    if (r >= 0)
        r = plan_filter(&t);
    if (r < 0) {
        if (ret->status != NSBOX_STATUS_ERROR)
            (void)report_error(ret, r, "plan", "planning the tier 3 run failed: %s", strerror(-r));
        goto out;
    }

    /* No /work tmpfs: the scratch directory is on the host's filesystem, each file bounded
     * by RLIMIT_FSIZE only (limits.workdir says none). */
    ret->workdir_size = 0;
    ret->memory.enforced_by = c->memory ? NSBOX_ENFORCER_RLIMIT : NSBOX_ENFORCER_NONE;
    ret->pids_limit.enforced_by = c->pids_limit ? NSBOX_ENFORCER_RLIMIT : NSBOX_ENFORCER_NONE;
    ret->cpus.enforced_by = c->cpus_milli && c->timeout ? NSBOX_ENFORCER_RLIMIT
                                                        : NSBOX_ENFORCER_NONE;
    (void)snprintf(ret->limits_note, sizeof(ret->limits_note),
                   "isolation tier 3 has no cgroup: memory is RLIMIT_DATA per process, pids is "
                   "RLIMIT_NPROC of the program's uid (%s), cpus is RLIMIT_CPU of cpus x "
                   "timeout seconds per process; the scratch directory and shared memory are "
                   "not bounded but by RLIMIT_FSIZE per file",
                   t.switch_ids ? "a host id of its own"
                                : "the caller's, with their other "
                                  "processes");
    warn_tier3(&t, ret);
    if (c->rootfs)
        report_warning(c, ret,
                       "--rootfs %s is not used at isolation tier 3: there is no mount namespace "
                       "to show it, so the host's own programs run (python3 from /usr/bin, with "
                       "the host's packages)",
                       c->rootfs);

    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0 ||
        (c->pass_stdin && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0)) {
        r = report_error(ret, negative_errno(), "pipe", "creating pipes failed: %m");
        goto out;
    }
    start = now_usec();
    {
        struct nsbox_clone_args args = {.flags = CLONE_PIDFD,
                                        .pidfd = (uint64_t)(uintptr_t)&pidfd,
                                        .exit_signal = SIGCHLD};
        pid = sys_clone3(&args);
        /* Docker's profile answers clone3 with ENOSYS, so that glibc falls back to clone. */
        if (pid < 0 && errno == ENOSYS)
            pid = sys_clone_fork(CLONE_PIDFD | SIGCHLD, &pidfd);
    }
    if (pid < 0) {
        r = report_error(ret, negative_errno(), "clone", "starting the program's init failed: %m");
        goto out;
    }
    if (pid == 0) {
        struct child_fds3 fds = {.report = rep[1], .in = in[1], .out = out[1], .err = err[1]};
        (void)close(out[0]);
        (void)close(err[0]);
        (void)close(rep[0]);
        if (in[0] >= 0)
            (void)close(in[0]);
        if (sigfd >= 0)
            (void)close(sigfd);
        tier3_init(&t, &fds);
    }
    close_fd(&out[1]);
    close_fd(&err[1]);
    close_fd(&rep[1]);
    close_fd(&in[1]);
    {
        struct supervise_fds sfds = {.pidfd = pidfd,
                                     .out = TAKE_FD(out[0]),
                                     .err = TAKE_FD(err[0]),
                                     .report = TAKE_FD(rep[0]),
                                     .signalfd = sigfd,
                                     .stdin_src = c->pass_stdin ? 0 : -1,
                                     .stdin_dst = in[0] >= 0 ? TAKE_FD(in[0]) : -1,
                                     .sync = -1,
                                     .init_pid = (pid_t)pid,
                                     .kill_group = true};
        r = supervise(c, &sfds, start, ret);
        if (r < 0)
            (void)report_error(ret, r, "supervise", "supervising the program failed: %s",
                               strerror(-r));
    }
    if (t.sb.outputs_fd >= 0 && ret->status != NSBOX_STATUS_ERROR) {
        ret->cell = true;
        ret->outputs_limit = c->outputs_limit ? c->outputs_limit : OUTPUTS_LIMIT_DEFAULT;
        if (outputs_read(t.sb.outputs_fd, ret->outputs_limit, ret) < 0)
            report_warning(c, ret, "the cell's outputs could not be read; they are missing");
    }
    r = 0;

out:
    /* Whatever of the pool's id is left (the group was killed; a process that left it by a
     * way nsbox did not foresee is not). A --host-user id is shared: not swept. */
    if (t.pool_lock >= 0) {
        if (uidpool_kill_all(t.uid) >= 0)
            (void)uidpool_mark(t.pool_lock, t.uid, false);
        close_fd(&t.pool_lock);
    }
    if (t.scratch[0]) {
        const char *slash = strrchr(t.scratch, '/');
        _cleanup_close_ int parent = -EBADF;
        char dir[PATH_MAX];

        (void)snprintf(dir, sizeof(dir), "%.*s", slash == t.scratch ? 1 : (int)(slash - t.scratch),
                       t.scratch);
        parent = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (parent < 0 || remove_tree(parent, slash + 1, 0) < 0)
            report_warning(c, ret, "the scratch directory %s could not be removed: %m", t.scratch);
    }
    close_fd(&out[0]);
    close_fd(&out[1]);
    close_fd(&err[0]);
    close_fd(&err[1]);
    close_fd(&rep[0]);
    close_fd(&rep[1]);
    close_fd(&in[0]);
    close_fd(&in[1]);
    tier3_free(&t);
    return r == -EINVAL && ret->status == NSBOX_STATUS_ERROR && ret->error_config ? -EINVAL : 0;
}
