/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The one file that knows the order of the steps.
 *
 * Supervisor (the caller's process, outside):
 *   validate and plan (plan.c: argv, environment, mounts, the copy-in stream packed, the
 *   copy-out directories and the workspace opened, host ids, the seccomp filter compiled) ->
 *   the proxy (--network allow=) -> the cgroup leaf or rlimits (plan.c) -> pipes -> clone3(new
 *   user, pid, net, mount, ipc, uts and cgroup namespaces) -> write uid_map/gid_map -> release
 *   the child -> supervise (supervise.c) -> unpack the copy-out stream, save the workspace ->
 *   result.
 *
 * Sandbox init (PID 1 of the new pid namespace; everything here runs before untrusted code):
 *   wait for the id maps -> clone host mount sources -> sysctls of its own namespaces
 *   (user.max_*, vm.memfd_noexec, kernel.shm*) -> bind the rootfs read-only, mount /proc (with
 *   Docker's masks; mount points the rootfs lacks in a skeleton) and pivot_root -> switch to the
 *   sandbox ids -> /dev, tmpfs, /work, binds -> /etc/passwd and /etc/group with the --user's
 *   entry when the rootfs lacks it -> copy-in (copy.c) -> -w -> hostname -> pin to ceil(--cpus)
 *   CPUs (cpus.c) -> lo up (--network loopback, allow=) -> the proxy's listening socket, handed
 *   to the supervisor (--network allow=, proxy.h) -> wipe nsbox's command line from memory ->
 *   parent-death signal -> drop every capability -> no_new_privs -> new session -> RLIMIT_CORE
 *   and the per-user budgets' rlimits -> seccomp filters (handing the listener of
 *   refusals to the supervisor) -> non-dumpable -> fork the payload -> reap, forward signals;
 *   when the payload has ended, with copy-out: kill everything else and write the copy-out
 *   stream -> report how the payload ended (and how full /dev/shm and /work were), exit (which
 *   kills whatever is left in the pid namespace).
 *
 * Payload (PID 2), born under the filters:
 *   stdio -> close every other fd -> default signals -> rlimits -> execve.
 *
 * A step inside that fails is recorded as a struct report_step and sent to the supervisor on
 * the report pipe (report.h); the child then _exit()s, never exit().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"
#include "cgroup.h"
#include "config.h"
#include "cpus.h"
#include "copy.h"
#include "fileio.h"
#include "filter.h"
#include "idmap.h"
#include "macro.h"
#include "mount.h"
#include "plan.h"
#include "proxy.h"
#include "report.h"
#include "result.h"
#include "sandbox.h"
#include "supervise.h"
#include "syscalls.h"
#include "uidpool.h"

#define SANDBOX_HOSTNAME "nsbox"

/* Namespaces every sandbox gets. CLONE_NEWUSER first in the kernel's order of creation, so the
 * others are owned by the new user namespace (clone(2), user_namespaces(7)). */
#define SANDBOX_NAMESPACES                                                                         \
    (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |     \
     CLONE_NEWCGROUP)

/* The namespaces of this run: all of them, but those the config opted out of. */
static unsigned long sandbox_namespaces(const struct nsbox_config *c)
{
    unsigned long flags = SANDBOX_NAMESPACES;
    if (c->network_host)
        flags &= ~(unsigned long)CLONE_NEWNET;
    if (c->pid_host)
        flags &= ~(unsigned long)CLONE_NEWPID;
    if (c->ipc_host)
        flags &= ~(unsigned long)CLONE_NEWIPC;
    return flags;
}

void nsbox_config_init(struct nsbox_config *c)
{
    *c = (struct nsbox_config){
        .uid = SANDBOX_NOBODY,
        .gid = SANDBOX_NOBODY,
        .memory = 256ULL << 20,
        .pids_limit = 64,
        .cpus_milli = 500,
        .timeout = 10ULL * 1000000,
        .output_limit = 4000,
        .tmp_size = 16ULL << 20,
        .shm_size = 16ULL << 20,
        .workdir_size = 64ULL << 20,
        .copy_out_max_bytes = 64ULL << 20,
        .copy_out_max_files = 1000,
        .stdout_fd = -1,
        .stderr_fd = -1,
    };
}

const char *nsbox_default_rootfs(void)
{
    static char exe[4096];
    const char *env = getenv("NSBOX_ROOTFS");
    ssize_t n;

    if (env && env[0])
        return env;
    /* A binary that runs from the build tree uses the build tree's rootfs. */
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        if (strncmp(exe, NSBOX_BUILD_ROOT "/", strlen(NSBOX_BUILD_ROOT) + 1) == 0)
            return NSBOX_ROOTFS_BUILD;
    }
    return NSBOX_ROOTFS_INSTALLED;
}

void nsbox_result_free(struct nsbox_result *r)
{
    free(r->out.data);
    free(r->err.data);
    r->out.data = r->err.data = NULL;
    if (r->labels)
        for (char **l = r->labels; *l; l++)
            free(*l);
    free(r->labels);
    r->labels = NULL;
    for (size_t i = 0; r->copied && i < r->n_copied; i++) {
        free(r->copied[i].path);
        free(r->copied[i].host_path);
    }
    free(r->copied);
    r->copied = NULL;
    for (size_t i = 0; r->skipped && i < r->n_skipped; i++) {
        free(r->skipped[i].path);
        free(r->skipped[i].reason);
    }
    free(r->skipped);
    r->skipped = NULL;
    r->n_copied = r->n_skipped = 0;
}

/* ---- inside the sandbox ------------------------------------------------------------------- */

/* A payload step failed under the seccomp filters: an EPERM there is most likely the policy
 * refusing what nsbox does before execve, so say so. */
_noreturn_ static void payload_step_failed(int report_fd, int err, const char *name)
{
    struct report_step e;

    (void)report_step_failed(&e, -err, name, "%s",
                             err == EPERM ? "the seccomp policy must allow what nsbox does "
                                            "before execve: openat, dup2/dup3, fcntl, "
                                            "close_range, prlimit64, execve"
                                          : "");
    report_setup_failed(report_fd, &e);
}

static int set_rlimit(int resource, uint64_t value)
{
    struct rlimit rl = {.rlim_cur = value, .rlim_max = value};
    return setrlimit(resource, &rl) < 0 ? negative_errno() : 0;
}

#define THREAD_STACK (1ULL << 20) /* bytes: RLIMIT_STACK's soft limit under rlimits */

/* Lower the soft limit of resource to value, if it is above; the hard limit stays. */
static int lower_soft_rlimit(int resource, uint64_t value)
{
    struct rlimit rl;

    if (getrlimit(resource, &rl) < 0)
        return negative_errno();
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= value)
        return 0;
    rl.rlim_cur = value;
    return setrlimit(resource, &rl) < 0 ? negative_errno() : 0;
}

/* Stand-in limits where no cgroup holds the sandbox: per process (memory), per uid in the
 * sandbox's user namespace (processes), CPU seconds per process (cpus x timeout). */
static int payload_rlimits(const struct nsbox_config *c, bool in_cgroup, struct report_step *e)
{
    int r;

    if (in_cgroup)
        return 0; /* the cgroup leaf holds the limits, for the whole sandbox */
    if (c->memory) {
        /* RLIMIT_DATA (Linux 4.7+) counts private writable mappings, which is what a large
         * allocation is; RLIMIT_AS would also count reservations glibc never touches. */
        r = set_rlimit(RLIMIT_DATA, c->memory);
        if (r < 0)
            return report_step_failed(e, r, "setrlimit", "RLIMIT_DATA");
        /* Thread stacks are private writable mappings too, counted whole in RLIMIT_DATA
         * (is_data_mapping() in mm/internal.h), and glibc sizes them by RLIMIT_STACK's soft
         * limit, read once at start (8 MiB usually): 30 threads would take 256m. A soft limit
         * of THREAD_STACK gives them 1 MiB each, and the main thread's stack may grow as far;
         * the hard limit stays, so a program that needs a deeper main stack raises its soft
         * limit (resource.setrlimit), and one that needs big thread stacks asks for them
         * (threading.stack_size), both within RLIMIT_DATA. */
        r = lower_soft_rlimit(RLIMIT_STACK, THREAD_STACK);
        if (r < 0)
            return report_step_failed(e, r, "setrlimit", "RLIMIT_STACK");
    }
    if (c->pids_limit) {
        r = set_rlimit(RLIMIT_NPROC, c->pids_limit);
        if (r < 0)
            return report_step_failed(e, r, "setrlimit", "RLIMIT_NPROC");
    }
    if (c->cpus_milli && c->timeout) {
        /* cpus x timeout, kept at least 1 s away from the timeout so that the two never race
         * (result_rlimit_cpu_seconds()). */
        uint64_t seconds = result_rlimit_cpu_seconds(c->cpus_milli, c->timeout);
        /* The soft limit sends SIGXCPU, so the result can say which limit was hit; the hard
         * limit a second later is SIGKILL (setrlimit(2)). */
        struct rlimit rl = {.rlim_cur = seconds, .rlim_max = seconds + 1};
        if (setrlimit(RLIMIT_CPU, &rl) < 0)
            return report_step_failed(e, negative_errno(), "setrlimit", "RLIMIT_CPU");
    }
    return 0;
}

/* execve(2) PROGRAM, looking a name without '/' up in the sandbox's PATH as execvp(3) does. */
static int payload_execve(const struct sandbox *sb)
{
    const char *prog = sb->argv[0];
    char buf[4096];
    int saw_eacces = 0;

    if (strchr(prog, '/')) {
        execve(prog, sb->argv, sb->envp);
        return negative_errno();
    }
    for (const char *p = sb->path ? sb->path : SANDBOX_PATH;; p++) {
        size_t len = strcspn(p, ":");
        if (len > 0 && len + 1 + strlen(prog) < sizeof(buf)) {
            memcpy(buf, p, len);
            buf[len] = '/';
            strcpy(buf + len + 1, prog);
            execve(buf, sb->argv, sb->envp);
            if (errno == EACCES)
                saw_eacces = 1;
            else if (errno != ENOENT && errno != ENOTDIR)
                return negative_errno();
        }
        p += len;
        if (*p == '\0')
            break;
    }
    return saw_eacces ? -EACCES : -ENOENT;
}

_noreturn_ void sandbox_payload_exec(const struct sandbox *sb, int in_fd, int out_fd, int err_fd,
                                     int report_fd, int extra_fd)
{
    const struct nsbox_config *c = sb->config;
    struct report_step e = {0};
    sigset_t none;
    int r;

    /* Its own process group, so that forwarded signals reach its children too. */
    (void)setpgid(0, 0);

    /* stdin: /dev/null, or with --stdin a socket the supervisor copies nsbox's stdin into.
     * Never the caller's descriptor itself: through a terminal the payload could change its
     * modes, or inject input into it. The payload's end is made read-only. */
    if (in_fd < 0)
        in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    else
        (void)shutdown(in_fd, SHUT_WR);
    /* dup2(fd, fd) would keep O_CLOEXEC: when a descriptor already sits at 0, 1 or 2 (nsbox
     * started with those closed), clear the flag instead. */
    if (in_fd < 0 || (in_fd == 0 ? fcntl(0, F_SETFD, 0) : dup2(in_fd, 0)) < 0)
        payload_step_failed(report_fd, errno, "stdin");
    if ((out_fd == 1 ? fcntl(1, F_SETFD, 0) : dup2(out_fd, 1)) < 0 ||
        (err_fd == 2 ? fcntl(2, F_SETFD, 0) : dup2(err_fd, 2)) < 0)
        payload_step_failed(report_fd, errno, "stdout/stderr");
    /* The report pipe moves to fd 3 (close-on-exec); everything above it is closed, so no
     * descriptor of nsbox or of nsbox's caller reaches the payload. */
    if (c->keep_fds) {
        /* Opted out: the caller's inherited descriptors stay where they are; nsbox's own are
         * all close-on-exec. */
    } else {
        if (report_fd != 3) {
            if (dup3(report_fd, 3, O_CLOEXEC) < 0)
                payload_step_failed(report_fd, errno, "report pipe");
            report_fd = 3;
        }
        /* A session's Python interpreter (session-init.c) keeps its channel to init at fd 4. */
        if (extra_fd >= 0 && dup2(extra_fd, 4) < 0)
            payload_step_failed(report_fd, errno, "session channel");
        if (sys_close_range(extra_fd >= 0 ? 5 : 4, ~0U, 0) < 0)
            payload_step_failed(report_fd, errno, "close_range");
    }

    /* The signal mask survives execve(2): clear it (init reset the dispositions). */
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    (void)umask(022);

    /* The payload was born under the seccomp filters (loaded by init); only setrlimit(2),
     * which can only lower limits, and execve(2) remain. */
    r = payload_rlimits(c, sb->in_cgroup, &e);
    if (r < 0)
        report_setup_failed(report_fd, &e);

    r = payload_execve(sb);
    struct report rep = {.type = REPORT_EXEC_FAILED, .code = r == -ENOENT ? 127 : 126};
    (void)report_step_failed(&rep.step, r, "execve", "%s", sb->argv[0]);
    if (r == -ENOENT)
        (void)snprintf(rep.step.detail, sizeof(rep.step.detail),
                       strchr(sb->argv[0], '/') ? "%s: not found in the sandbox"
                                                : "%s: not found in the sandbox's PATH (%s)",
                       sb->argv[0], sb->path ? sb->path : SANDBOX_PATH);
    report_send(report_fd, &rep);
    _exit(rep.code);
}

/* How full /dev/shm is (shm_fd, opened by init before the payload existed, so no path the
 * payload could change is followed), for the report of how the payload ended. */
static void report_shm_usage(int shm_fd, struct report *rep)
{
    struct statfs st;

    if (shm_fd >= 0 && fstatfs(shm_fd, &st) == 0) {
        rep->shm_used = (uint64_t)(st.f_blocks - st.f_bfree) * (uint64_t)st.f_bsize;
        rep->shm_free = (uint64_t)st.f_bfree * (uint64_t)st.f_bsize;
    }
}

/* Copy-out, by init once the payload has ended: first every other process of the sandbox is
 * killed and reaped (kill(2) with -1 from a pid namespace's init reaches all of them and not
 * itself, pid_namespaces(7)), so nothing changes the tree while it is read and nothing is left
 * to race a check. Then each --copy-out source, and /work for a workspace, is packed into the
 * memfd at out_fd (copy.h), within the caps. Init is under the seccomp filters by now, as the
 * sandbox's uid: what the payload made unreadable is skipped. */
static void init_copy_out(const struct sandbox *sb, int out_fd, struct report *rep)
{
    const struct nsbox_config *c = sb->config;
    struct copy_caps caps = {.max_bytes = c->copy_out_max_bytes,
                             .max_files = c->copy_out_max_files};
    struct copy_packer *p = NULL;
    struct copy_stats stats = {0};
    char why[256];
    int r;

    /* Again before each wait: a fork in flight cannot leave a child unsignalled (copy_process()
     * restarts a fork with a fatal signal pending; this is the belt to those braces). */
    do
        (void)kill(-1, SIGKILL);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR);
    /* The stream is a file of this process's: RLIMIT_FSIZE applies, and its SIGXFSZ would end
     * init; EFBIG is reported instead. */
    (void)signal(SIGXFSZ, SIG_IGN);
    rep->copy_taken = true;
    r = copy_packer_new(out_fd, &caps, &p, why, sizeof(why));
    for (size_t i = 0; r >= 0 && i < sb->n_out; i++) {
        /* sb's copy: the config's strings may be in nsbox's argv, wiped by now. */
        const char *path = sb->out_shown[i];
        const char *base = strrchr(path, '/') + 1;
        char prefix[PATH_MAX];
        struct stat st;
        /* Entries are named "i/BASENAME/...": a directory lands in HOSTDIR as a directory of
         * its name, as with docker cp into an existing directory. */
        int fd = copy_open_nofollow(path);

        (void)snprintf(prefix, sizeof(prefix), "%zu/%s", i, base);
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
            (void)close(fd);
            fd = -1;
            errno = ELOOP;
        }
        if (fd < 0 || fstat(fd, &st) < 0) {
            /* Listed like any skipped entry, named by the source itself. */
            r = copy_pack_skipped(p, prefix,
                                  errno == ELOOP || errno == ENOTDIR ? "symlink (never followed)"
                                  : errno == ENOENT                ? "does not exist"
                                                                   : "cannot be read",
                                  why, sizeof(why));
            if (fd >= 0)
                (void)close(fd);
            continue;
        }
        r = copy_pack(p, &(struct copy_source){.src_fd = fd, .prefix = prefix, .shown = path,
                                               .exclude = i >= c->n_copy_out && c->code
                                                              ? "/work/main.py"
                                                              : NULL},
                      true, why, sizeof(why));
        (void)close(fd);
    }
    if (p) {
        int k = copy_packer_finish(p, &stats, why, sizeof(why));
        r = r < 0 ? r : k;
    }
    rep->copy_err = r < 0 ? -r : 0;
    rep->copy_unlisted = stats.skipped - stats.skipped_listed;
}

/* PID 1: reap everything, forward SIGINT/SIGTERM/SIGHUP to the payload's process group, and
 * leave with the payload (after the copy-out, if any). The kernel then kills all that remains
 * in the pid namespace (pid_namespaces(7)), so nothing the payload started outlives it. */
_noreturn_ static void init_loop(const struct sandbox *sb, pid_t payload, const sigset_t *mask,
                                 int report_fd, int shm_fd, int work_fd, int copy_out_fd)
{
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(mask, &si);

        if (sig < 0)
            continue;
        if (sig != SIGCHLD) {
            /* Blocked since the sandbox was made, so a signal that came during the setup waited
             * here instead of being lost. */
            if (kill(-payload, sig) < 0)
                (void)kill(payload, sig);
            continue;
        }
        for (;;) {
            int status;
            pid_t p = waitpid(-1, &status, WNOHANG);
            if (p <= 0)
                break;
            if (p != payload)
                continue;
            struct report rep = {.type = WIFSIGNALED(status) ? REPORT_SIGNALED : REPORT_EXITED,
                                 .code = WIFSIGNALED(status) ? WTERMSIG(status)
                                                             : WEXITSTATUS(status)};
            report_shm_usage(shm_fd, &rep);
            {
                struct statfs st;
                if (fstatfs(work_fd, &st) == 0) {
                    rep.work_used = (uint64_t)(st.f_blocks - st.f_bfree) * (uint64_t)st.f_bsize;
                    rep.work_free = (uint64_t)st.f_bfree * (uint64_t)st.f_bsize;
                }
            }
            if (copy_out_fd >= 0)
                init_copy_out(sb, copy_out_fd, &rep);
            report_send(report_fd, &rep);
            _exit(0);
        }
    }
}

struct child_fds {
    int sync;   /* read end: one byte once the id maps are written; POLLHUP if nsbox dies */
    int report; /* write end */
    int in;     /* the payload's end of the stdin socket, or -1 for /dev/null */
    int out;    /* write ends of the output pipes */
    int err;
    int session; /* a session's end of its control channel (session-init.c), else -1 */
};

/* Bring up lo, the one interface of a new network namespace, down until then (netdevice(7):
 * SIOCGIFFLAGS, SIOCSIFFLAGS). Needs CAP_NET_ADMIN in the user namespace that owns the network
 * namespace, which the sandbox holds until it drops its capabilities. */
static int loopback_up(void)
{
    struct ifreq ifr = {0};
    _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return negative_errno();
    (void)snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
        return negative_errno();
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
        return negative_errno();
    return 0;
}

/* The proxy's listening socket (proxy.h), in the sandbox's network namespace: a socket
 * belongs to the namespace of the process that created it (socket(7)), so the supervisor that
 * takes it accepts connections made inside. Returns the descriptor or -errno. */
static int proxy_listen_inside(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(PROXY_PORT)};
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return negative_errno();
    if (inet_pton(AF_INET, PROXY_ADDRESS, &sin.sin_addr) != 1)
        return -EINVAL;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 64) < 0)
        return negative_errno();
    return TAKE_FD(fd);
}

/* Zero this process's copy of the command line it was started with (the memory between
 * arg_start and arg_end, fields 48 and 49 of /proc/self/stat, proc(5)): the payload can read
 * /proc/1/cmdline, and nsbox's arguments name host paths and values meant for nsbox. */
static int wipe_own_cmdline(void)
{
    char buf[2048], *p;
    unsigned long start = 0, end = 0;
    _cleanup_close_ int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return negative_errno();
    n = RETRY_EINTR(read(fd, buf, sizeof(buf) - 1));
    if (n <= 0)
        return -EIO;
    buf[n] = '\0';
    /* Fields after the command name, which is in parentheses and may hold spaces. */
    p = strrchr(buf, ')');
    if (!p)
        return -EIO;
    p++;
    for (int field = 3; field < 48 && p; field++)
        p = strchr(p + 1, ' ');
    if (!p || sscanf(p, " %lu %lu", &start, &end) != 2 || end <= start)
        return -EIO;
    memset((void *)start, 0, end - start);
    return 0;
}

/* Write value to a sysctl under /proc/sys/ of the host's procfs, still reachable before
 * pivot_root (the sysctls below act on the writer's own namespaces, whatever procfs the file
 * is in). Returns 0, 0 when this kernel has no such file (where told to skip it), or -errno. */
static int write_sysctl(const char *name, const char *value, bool skip_missing,
                        struct report_step *e)
{
    char path[128];
    int r;

    (void)snprintf(path, sizeof(path), "/proc/sys/%s", name);
    r = write_file_at(AT_FDCWD, path, value);
    if (r == -ENOENT && skip_missing)
        return 0;
    if (r == -EROFS)
        /* Docker and Podman mount a container's /proc/sys read-only by default. */
        return report_step_failed(e, r, "sysctl",
                                  "%s = %s: /proc/sys is read-only, as in a container by default; "
                                  "'nsbox doctor' names the container setting that unmasks it",
                                  name, value);
    if (r < 0)
        return report_step_failed(e, r, "sysctl", "%s = %s", name, value);
    return 0;
}

/* The sandbox's own user namespace's budgets (kernel/ucount.c). What the payload uses is
 * charged to its uid in this namespace and, at the same time, to the namespace's creator in
 * the parent namespace: nsbox's caller, or host root for root's runs. Left at their default
 * (INT_MAX), only the caller's own budget bounds the sandbox, and it can spend all of it: the
 * caller's host processes then get EMFILE from inotify_init1. With these low ones, a run
 * takes at most this much of the caller's budget. Writable by the namespace's holder of
 * CAP_SYS_RESOURCE (set_permissions() in kernel/ucount.c); an entry the kernel lacks has no
 * budget to protect. */
static const struct {
    const char *name, *value;
} userns_budgets[] = {
    {"user/max_inotify_instances", "32"}, /* the host's default is 128 per uid */
    {"user/max_inotify_watches", "8192"},
    {"user/max_fanotify_groups", "8"},
    {"user/max_fanotify_marks", "8192"},
    /* The seccomp policy refuses new namespaces; these hold under --no-seccomp too. */
    {"user/max_user_namespaces", "16"},
    {"user/max_mnt_namespaces", "16"},
    {"user/max_pid_namespaces", "16"},
    {"user/max_net_namespaces", "16"},
    {"user/max_ipc_namespaces", "16"},
    {"user/max_uts_namespaces", "16"},
    {"user/max_cgroup_namespaces", "16"},
    {"user/max_time_namespaces", "16"},
};

/* Kernel settings of the sandbox's own namespaces, set by init while it holds every
 * capability in them and before it switches ids. */
static int sandbox_sysctls(const struct sandbox *sb, struct report_step *e)
{
    const struct nsbox_config *c = sb->config;
    int r;

    for (size_t i = 0; i < ELEMENTSOF(userns_budgets); i++) {
        r = write_sysctl(userns_budgets[i].name, userns_budgets[i].value, true, e);
        if (r < 0)
            return r;
    }

    /* vm.memfd_noexec=2 (per pid namespace since Linux 6.3, kernel/pid_sysctl.h): memfd_create
     * (MFD_EXEC) fails and every other memfd is sealed non-executable (F_SEAL_EXEC), so no
     * program written into memory runs through execveat(2) or /proc/self/fd/N. The file opens
     * for writing only to the host's root (test_perm() in fs/proc/proc_sysctl.c): in root's
     * runs, init's effective id is still host root until it switches ids (its creds keep the
     * caller's kuid across clone(CLONE_NEWUSER)); an ordinary user, or root of a container's
     * user namespace, cannot set it (README). Never under --pid host: that would set the
     * host's. A kernel without it is skipped. */
    if (sb->host_root && !c->pid_host) {
        r = write_sysctl("vm/memfd_noexec", "2", true, e);
        if (r < 0)
            return r;
    }

    /* System V shared memory is memory that no rlimit counts (RLIMIT_DATA counts private
     * mappings; a segment need not even stay attached): bound the sandbox's IPC namespace's
     * total (shmall, in pages) and each segment (shmmax) by --memory, and the number of
     * segments by about one per MiB of it (shmmni). These are per IPC namespace and open for
     * writing to the uid that is root in it, or to the host's root where none is
     * (ipc_permissions() in ipc/ipc_sysctl.c): as for memfd_noexec, the host's root only; the
     * limits_note says what an ordinary user's run gets. Never under --ipc host. A kernel
     * without System V IPC has none of them, and nothing to bound. With --user 0 the
     * namespace's root is mapped, so the files are its and not the host root's (EACCES):
     * as for an ordinary user, limits_note says they are not bounded. */
    if (sb->host_root && !c->ipc_host && c->memory && c->uid != 0) {
        long page = sysconf(_SC_PAGESIZE);
        uint64_t mni = c->memory >> 20;
        char v[32];

        (void)snprintf(v, sizeof(v), "%" PRIu64, c->memory);
        r = write_sysctl("kernel/shmmax", v, true, e);
        if (r < 0)
            return r;
        (void)snprintf(v, sizeof(v), "%" PRIu64, c->memory / (uint64_t)(page > 0 ? page : 4096));
        r = write_sysctl("kernel/shmall", v, true, e);
        if (r < 0)
            return r;
        (void)snprintf(v, sizeof(v), "%" PRIu64, mni < 16 ? 16 : mni > 4096 ? 4096 : mni);
        r = write_sysctl("kernel/shmmni", v, true, e);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Per-user budgets the kernel charges to the caller's uid through the sandbox's (see
 * userns_budgets): pending signals and POSIX timers (RLIMIT_SIGPENDING), POSIX message queue
 * bytes (RLIMIT_MSGQUEUE) and locked memory (RLIMIT_MEMLOCK) are counted per uid and up the
 * chain of user namespaces, each level against the limit of its own (inc_rlimit_ucounts() in
 * kernel/ucount.c). Inherited from the caller, the sandbox could take the caller's whole
 * budget; these cap what one run takes. Descriptors per process and the size of one file
 * are set too, rather than the caller's. */
#define BUDGET_SIGPENDING 256
#define BUDGET_MSGQUEUE (256 << 10) /* bytes: three queues of mq_open's default size */
#define BUDGET_MEMLOCK (64 << 10)   /* bytes: the kernel's default before 5.16 */
#define BUDGET_NOFILE 4096

/* RLIMIT_FSIZE: the largest file the payload may write or grow, memfds included (shmem checks
 * it on write, ftruncate and fallocate): the largest of --memory and the sizes of its tmpfs
 * mounts, a file bigger than anything the sandbox could hold. Without it one file in a :rw
 * bind could take the host's disk. Unlimited with --memory unlimited. */
static uint64_t sandbox_fsize(const struct sandbox *sb)
{
    const struct nsbox_config *c = sb->config;
    uint64_t max = c->shm_size;

    if (c->memory == 0)
        return RLIM_INFINITY;
    max = c->memory > max ? c->memory : max;
    max = c->workdir_size + c->code_size > max ? c->workdir_size + c->code_size : max;
    for (size_t i = 0; i < sb->n_mounts; i++)
        if (sb->mounts[i].is_tmpfs && sb->mounts[i].size > max)
            max = sb->mounts[i].size;
    return max;
}

/* Set both limits of resource to value, or to the caller's hard limit where that is lower:
 * raising a hard limit takes CAP_SYS_RESOURCE in the initial namespace (setrlimit(2)). */
static int lower_rlimit(int resource, uint64_t value)
{
    struct rlimit rl;

    if (getrlimit(resource, &rl) < 0)
        return negative_errno();
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < value)
        value = rl.rlim_max;
    return set_rlimit(resource, value);
}

static int sandbox_budgets(const struct sandbox *sb, struct report_step *e)
{
    static const struct {
        int resource;
        const char *name;
        uint64_t value;
    } fixed[] = {
        {RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING", BUDGET_SIGPENDING},
        {RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE", BUDGET_MSGQUEUE},
        {RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK", BUDGET_MEMLOCK},
        {RLIMIT_NOFILE, "RLIMIT_NOFILE", BUDGET_NOFILE},
        /* No real-time scheduling (it escapes the cgroup's cpu.max, which only bounds normal
         * tasks) and no raising of priority above the start's: the policy allows
         * sched_setattr and setpriority, and the kernel checks these (sched(7)). */
        {RLIMIT_RTPRIO, "RLIMIT_RTPRIO", 0},
        {RLIMIT_NICE, "RLIMIT_NICE", 0},
    };
    int r;

    for (size_t i = 0; i < ELEMENTSOF(fixed); i++) {
        r = lower_rlimit(fixed[i].resource, fixed[i].value);
        if (r < 0)
            return report_step_failed(e, r, "setrlimit", "%s", fixed[i].name);
    }
    r = lower_rlimit(RLIMIT_FSIZE, sandbox_fsize(sb));
    if (r < 0)
        return report_step_failed(e, r, "setrlimit", "RLIMIT_FSIZE");
    return 0;
}

/* Unpack the copy-in stream below the sandbox's "/", as the sandbox's uid, before the payload
 * exists: made only where the sandbox can write (EROFS elsewhere), never through a symlink. */
static int sandbox_copy_in(struct sandbox *sb, struct report_step *e)
{
    struct copy_caps caps = {0};
    _cleanup_close_ int root = -EBADF;
    int root_fds[1];
    char why[256];
    int r;

    if (sb->copy_in_fd < 0)
        return 0;
    root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return report_step_failed(e, negative_errno(), "copy-in", "open /");
    root_fds[0] = root;
    r = copy_unpack(sb->copy_in_fd, &(struct copy_target){.root_fds = root_fds, .n_roots = 1,
                                                          .shown_prefix = "/"},
                    &caps, NULL, why, sizeof(why));
    (void)close(sb->copy_in_fd);
    sb->copy_in_fd = -EBADF;
    if (r < 0)
        return report_step_failed(e, r, "copy-in", "%s%s", why,
                                  r == -ENOSPC ? "; raise --workdir-size or the --tmpfs size"
                                  : r == -EROFS
                                      ? "; copy below /work, /tmp or another writable mount"
                                      : "");
    return 0;
}

_noreturn_ static void sandbox_child(struct sandbox *sb, struct child_fds *fds)
{
    int dev_fds[MOUNT_N_DEVICES];
    struct report_step e = {0};
    struct pollfd pfd;
    sigset_t mask;
    pid_t payload, init_pid;
    int shm_fd, work_fd;
    char byte;
    int r;

    for (size_t i = 0; i < MOUNT_N_DEVICES; i++)
        dev_fds[i] = -EBADF;

    /* Until the supervisor has written the id maps, this process has no valid ids in its user
     * namespace. EOF means the supervisor gave up. */
    if (RETRY_EINTR(read(fds->sync, &byte, 1)) != 1)
        _exit(125);

    /* The cgroup namespace made by clone3 is rooted at nsbox's own cgroup; root it at the
     * sandbox's leaf instead, so the sandbox sees itself as "/" (cgroup_namespaces(7)). */
    if (sb->in_cgroup && unshare(CLONE_NEWCGROUP) < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "cgroup namespace"});

    r = mount_clone_sources(sb, dev_fds, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    r = sandbox_sysctls(sb, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    r = mount_enter_rootfs(sb, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);

    /* Now, before any file is created: files can only be created by an id mapped in the
     * namespace (EOVERFLOW otherwise), and for root's sandboxes the initial id (host root) is
     * not mapped. Supplementary groups can be cleared only where setgroups is "allow", which
     * is the privileged case; an ordinary user keeps their own groups (user_namespaces(7)). */
    r = caps_switch_ids(sb->config->uid, sb->config->gid, sb->privileged, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    /* In root's runs the switch changed init's kernel uid (to the pool's), which leaves it
     * non-dumpable (commit_creds() in kernel/cred.c). Ptrace access to a non-dumpable process,
     * which pidfd_getfd(2) of the seccomp listener needs, then takes CAP_SYS_PTRACE in the user
     * namespace its memory belongs to (__ptrace_may_access() in kernel/ptrace.c): the host's
     * root has it, a container's root does not (runtimes drop it), and the supervisor would
     * fail with EPERM. Dumpable again until the listener is taken: only nsbox's own code runs
     * until then, and init is made non-dumpable for good below, before any payload exists. */
    if (sb->privileged && !sb->config->seccomp_disabled &&
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "PR_SET_DUMPABLE"});

    r = mount_populate(sb, dev_fds, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    r = mount_identity_files(sb, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    r = sandbox_copy_in(sb, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    r = mount_enter_workdir(sb, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);

    /* Optional: the name only tells the payload it is in a sandbox; the UTS namespace is the
     * sandbox's own whether or not it is renamed. Container runtimes' default seccomp profiles
     * refuse sethostname(2) (EPERM; ENOSYS or EACCES from other profiles): the sandbox then
     * keeps the container's name, and the run's warnings say so. Any other error fails. */
    if (sethostname(SANDBOX_HOSTNAME, strlen(SANDBOX_HOSTNAME)) < 0) {
        if (errno != EPERM && errno != EACCES && errno != ENOSYS)
            report_setup_failed(fds->report,
                                &(struct report_step){.err = errno, .name = "sethostname"});
        report_skipped(fds->report, errno, "sethostname",
                       "refused, as a container's seccomp profile does: the sandbox's hostname "
                       "is the outer one, not '" SANDBOX_HOSTNAME "'");
    }
    /* The CPUs --cpus allows, for init and the payload it forks: plan_env() gave the payload
     * thread counts of the same number. */
    r = cpus_pin(cpus_count(sb->config->cpus_milli));
    if (r < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = -r, .name = "sched_setaffinity"});
    if ((sb->config->network_loopback || sandbox_network_allow(sb->config)) &&
        !sb->config->network_host) {
        r = loopback_up();
        if (r < 0)
            report_setup_failed(fds->report,
                                &(struct report_step){.err = -r, .name = "bring up lo"});
    }
    if (sandbox_network_allow(sb->config)) {
        r = proxy_listen_inside();
        if (r < 0)
            report_setup_failed(fds->report, &(struct report_step){.err = -r,
                                                                   .name = "proxy socket",
                                                                   .detail = PROXY_ADDRESS
                                                                   ":" STRINGIFY(PROXY_PORT)});
        /* The supervisor takes the listening socket with pidfd_getfd(2) (init is dumpable
         * still, as for the seccomp listener below) and says so on the sync pipe; init's
         * copy is closed before the payload exists, so the payload is only ever a client. */
        struct report rep = {.type = REPORT_PROXY, .code = r};
        report_send(fds->report, &rep);
        if (RETRY_EINTR(read(fds->sync, &byte, 1)) != 1)
            _exit(125);
        (void)close(r);
    }
    r = wipe_own_cmdline();
    if (r < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = -r, .name = "wipe command line"});

    /* Die with nsbox. Set after the id switch, which clears it (prctl(2)); then check that the
     * supervisor did not die before it was set. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "PR_SET_PDEATHSIG"});
    pfd = (struct pollfd){.fd = fds->sync, .events = POLLIN};
    if (poll(&pfd, 1, 0) != 0)
        _exit(125);

    r = caps_drop_all(&e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "no_new_privs"});
    /* No controlling terminal: TIOCSTI on the caller's terminal needs one. */
    if (setsid() < 0)
        report_setup_failed(fds->report, &(struct report_step){.err = errno, .name = "setsid"});

    /* Dispositions set to SIG_IGN (nsbox's caller may have ignored some) survive fork(2) and
     * execve(2): reset them here, once, for init and the payload it forks. */
    for (int sig = 1; sig < NSIG; sig++)
        (void)signal(sig, SIG_DFL);

    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "sigprocmask"});

    /* No core dumps. A limit of 1 (not 0) also stops a core_pattern pipe helper, which would
     * run as root outside the sandbox (core(5), fs/coredump.c); the default policy refuses
     * lowering it. Set before the filters, which refuse changing it. */
    r = set_rlimit(RLIMIT_CORE, 1);
    if (r < 0)
        report_setup_failed(fds->report, &(struct report_step){.err = -r, .name = "RLIMIT_CORE"});
    r = sandbox_budgets(sb, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);

    /* The seccomp filters, loaded here so that the payload is born under them; from here on
     * they apply to init too (the supervisor lets init's own refused calls through). */
    if (!sb->config->seccomp_disabled) {
        int listener = -1;
        r = filter_load(&sb->filter, &listener);
        if (r < 0)
            report_setup_failed(fds->report, &(struct report_step){.err = -r, .name = "seccomp"});
        if (listener >= 0) {
            /* The supervisor takes the listener with pidfd_getfd(2) and says so on the sync
             * pipe; only then does init become non-dumpable (which would stop pidfd_getfd for
             * an unprivileged supervisor) and drop its own copy, before any untrusted code
             * exists. The payload must never hold it: it could answer its own refusals. */
            struct report rep = {.type = REPORT_LISTENER, .code = listener};
            report_send(fds->report, &rep);
            if (RETRY_EINTR(read(fds->sync, &byte, 1)) != 1)
                _exit(125);
            (void)close(listener);
        }
    }
    /* Not ptrace-attachable and no core dumps, even by the payload's own uid. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "PR_SET_DUMPABLE"});

    /* Kept by init (at fd 4) to say, when the payload ends, whether /dev/shm was full; and
     * /work (at fd 5) likewise. Above fd 6 for now, so that moving the report pipe to 3 cannot
     * close them. The copy-out memfd goes to fd 6. */
    r = open("/dev/shm", O_PATH | O_DIRECTORY | O_CLOEXEC);
    shm_fd = r < 0 ? -1 : fcntl(r, F_DUPFD_CLOEXEC, 7);
    if (shm_fd < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "open /dev/shm"});
    (void)close(r);
    r = open("/work", O_PATH | O_DIRECTORY | O_CLOEXEC);
    work_fd = r < 0 ? -1 : fcntl(r, F_DUPFD_CLOEXEC, 7);
    if (work_fd < 0)
        report_setup_failed(fds->report, &(struct report_step){.err = errno, .name = "open /work"});
    (void)close(r);
    if (sb->copy_out_fd >= 0) {
        r = fcntl(sb->copy_out_fd, F_DUPFD_CLOEXEC, 7);
        if (r < 0)
            report_setup_failed(fds->report,
                                &(struct report_step){.err = errno, .name = "copy-out"});
        (void)close(sb->copy_out_fd);
        sb->copy_out_fd = r;
    }

    if (fds->session >= 0) {
        /* A session: init runs steps on request instead of one payload. It keeps the report
         * pipe (3), /dev/shm (4) and the control channel (5), nothing else. */
        int control = fcntl(fds->session, F_DUPFD_CLOEXEC, 6); /* above what moves below */
        if (control < 0 || (fds->report != 3 && dup3(fds->report, 3, O_CLOEXEC) < 0) ||
            dup3(shm_fd, 4, O_CLOEXEC) < 0 || dup3(control, 5, O_CLOEXEC) < 0)
            _exit(125);
        (void)sys_close_range(0, 2, 0);
        (void)sys_close_range(6, ~0U, 0);
        session_init(sb, &mask, 3, 4, 5);
    }

    init_pid = getpid();
    payload = fork();
    if (payload < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "fork payload"});
    if (payload == 0) {
        /* Without a pid namespace, the payload can see init and kill it: it must not live on,
         * unwatched and out of the wall clock (in a pid namespace, init's end ends all). */
        if (sb->config->pid_host &&
            (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != init_pid))
            _exit(125);
        (void)close(fds->sync);
        sandbox_payload_exec(sb, fds->in, fds->out, fds->err, fds->report, -1);
    }

    /* Both sides set the payload's process group, as shells do: whichever runs first, the
     * group exists before init forwards a signal to it (kill(-payload) would miss it). */
    (void)setpgid(payload, payload);

    /* Init keeps only the report pipe: not the caller's stdio, not the payload's pipes. */
    if (fds->report != 3 && dup3(fds->report, 3, O_CLOEXEC) < 0)
        _exit(125);
    if (dup3(shm_fd, 4, O_CLOEXEC) < 0 || dup3(work_fd, 5, O_CLOEXEC) < 0 ||
        (sb->copy_out_fd >= 0 && dup3(sb->copy_out_fd, 6, O_CLOEXEC) < 0))
        _exit(125);
    (void)sys_close_range(0, 2, 0);
    (void)sys_close_range(sb->copy_out_fd >= 0 ? 7 : 6, ~0U, 0);
    init_loop(sb, payload, &mask, 3, 4, 5, sb->copy_out_fd >= 0 ? 6 : -1);
}

/* ---- the supervisor ----------------------------------------------------------------------- */

/* Create the sandbox's init. With cgroup_fd >= 0 it is born in that cgroup
 * (CLONE_INTO_CGROUP, Linux 5.7), so the limits hold from its first instruction; *ret_attached
 * says whether that happened, or the caller must move it before releasing it. */
static int clone_sandbox(unsigned long namespaces, int cgroup_fd, int *ret_pidfd,
                         bool *ret_attached)
{
    struct nsbox_clone_args args = {
        .flags = namespaces | CLONE_PIDFD,
        .pidfd = (uint64_t)(uintptr_t)ret_pidfd,
        .exit_signal = SIGCHLD,
    };
    long pid;

    *ret_attached = false;
    if (cgroup_fd >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = (uint64_t)cgroup_fd;
        pid = sys_clone3(&args);
        if (pid >= 0) {
            *ret_attached = true;
            return (int)pid;
        }
        /* E2BIG/EINVAL: a kernel before 5.7 that has clone3 but not CLONE_INTO_CGROUP. */
        if (errno != E2BIG && errno != EINVAL)
            return -1;
        args.flags &= ~CLONE_INTO_CGROUP;
        args.cgroup = 0;
    }
    pid = sys_clone3(&args);
    if (pid < 0 && errno == ENOSYS) {
        /* Linux < 5.3. The child of a raw clone(2) must not rely on glibc's cached thread id
         * (raise(3)); nsbox's child does not. x86-64 argument order: flags, stack, parent_tid
         * (where CLONE_PIDFD stores the pidfd), child_tid, tls. */
        pid = syscall(SYS_clone, namespaces | CLONE_PIDFD | SIGCHLD,
                      NULL, ret_pidfd, NULL, 0);
    }
    return (int)pid;
}

static const char *clone_hint(int err)
{
    switch (err) {
    case EPERM:
    case EACCES:
        /* Under a seccomp filter already (PR_GET_SECCOMP answers 2): a container runtime's
         * default profile refuses clone(2) with namespace flags (Docker's, containerd's). */
        if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2)
            return " (refused by the seccomp filter nsbox runs under, as a container runtime's "
                   "default profile does: run the container with the profile "
                   "examples/seccomp-nsbox.json; 'nsbox doctor' names the setting)";
        return " (unprivileged user namespaces are disabled: check sysctl "
               "kernel.unprivileged_userns_clone and, on Ubuntu, "
               "kernel.apparmor_restrict_unprivileged_userns; 'nsbox' needs them)";
    case ENOSPC:
        return " (namespace limit reached: see sysctl user.max_user_namespaces)";
    case EINVAL:
        return " (this kernel lacks a namespace type nsbox needs)";
    default:
        return "";
    }
}

/* Below this much room, /dev/shm counts as full: a page fault of memory mapped from it finds
 * no page (tmpfs allocates in pages, and large folios where enabled). */
#define SHM_FULL_SLACK (64 * 1024)

/* A payload that died of SIGBUS with /dev/shm full ran out of --shm-size: a store to memory
 * mapped from a file there (POSIX shared memory, multiprocessing's) found no page, and the
 * kernel answers that with SIGBUS (shmem_fault()). Say so, rather than leave the caller to
 * suspect --memory. */
static void shm_diagnose(const struct nsbox_config *c, struct nsbox_result *ret)
{
    if (ret->status != NSBOX_STATUS_SIGNALED || ret->signal != SIGBUS || ret->shm_used == 0 ||
        ret->shm_free >= SHM_FULL_SLACK)
        return;
    ret->shm_full = true;
    report_warning(c, ret,
                   "the payload died of SIGBUS with /dev/shm full (%.3g MiB used of --shm-size "
                   "%.3g MiB): a write to memory mapped from a file there found no room; raise "
                   "--shm-size (this is not --memory)",
                   (double)ret->shm_used / (1 << 20), (double)c->shm_size / (1 << 20));
}

static void close_pair(int p[2])
{
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0) {
            (void)close(p[i]);
            p[i] = -EBADF;
        }
}

/* Why root may not map its pool ids: nsbox itself runs in a user namespace that does not map
 * them (a container's, rootless Podman's, Kubernetes' user namespaces map 65536 ids or so). */
static const char *host_ids_hint(const struct sandbox *sb, int r)
{
    if (r != -EPERM || sb->host_ids_lock < 0 ||
        (uidpool_mapped_here("/proc/self/uid_map", sb->host_uid) != 0 &&
         uidpool_mapped_here("/proc/self/gid_map", sb->host_gid) != 0))
        return "";
    return " (the host ids nsbox takes for root's runs, 2113929216 and up, are not mapped in the "
           "user namespace nsbox runs in, as in a container: choose ids mapped there with "
           "--host-user, e.g. --host-user 65534)";
}

/* Without a pid namespace, what the payload started in the background can outlive the run;
 * when the run's host ids are its own (uidpool.h), every process of them is the run's, and they
 * must all be gone before the ids go back to the pool. */
static void kill_leftovers(const struct sandbox *sb, struct nsbox_result *ret)
{
    int r;

    if (sb->host_ids_lock < 0 || !sb->config->pid_host)
        return;
    r = uidpool_kill_all(sb->host_uid);
    if (r >= 0)
        r = uidpool_mark(sb->host_ids_lock, sb->host_uid, false);
    if (r < 0)
        report_warning(sb->config, ret,
                       "--pid host: killing what the payload left in the background failed (%s): "
                       "processes of host uid %u may outlive the run (the next run of root to "
                       "take the id kills them first)",
                       strerror(-r), (unsigned)sb->host_uid);
}

/* Less than this free in /work: the payload's writes there may have met ENOSPC. */
#define WORK_FULL_SLACK (64 * 1024)

static void work_diagnose(const struct nsbox_config *c, struct nsbox_result *ret)
{
    if (ret->work_used == 0 || ret->work_free >= WORK_FULL_SLACK)
        return;
    ret->work_full = true;
    report_warning(c, ret,
                   "the working directory /work was full when the payload ended (%.3g MiB used): "
                   "writes there failed with ENOSPC (No space left on device); raise "
                   "--workdir-size (now %.3g MiB)",
                   (double)ret->work_used / (1 << 20), (double)c->workdir_size / (1 << 20));
}

/* The host side of copy-out: unpack the stream init wrote into the host directories opened by
 * plan_copies() (and the workspace's staging directory), then save the workspace if the copy
 * was complete. */
static void copy_out_finish(struct sandbox *sb, struct nsbox_result *ret)
{
    const struct nsbox_config *c = sb->config;
    struct copy_caps caps = {.max_bytes = c->copy_out_max_bytes,
                             .max_files = c->copy_out_max_files};
    char why[512] = "";
    int r;

    if (sb->copy_out_fd < 0 || ret->status == NSBOX_STATUS_ERROR)
        return;
    if (!ret->copy_out_done) {
        if (c->workspace)
            report_warning(c, ret,
                           "workspace '%s' was not saved: the payload did not end by itself (or "
                           "the copy failed), so its files are as before this run",
                           c->workspace);
        else
            report_warning(c, ret,
                           "nothing was copied out: the payload did not end by itself (a "
                           "timeout, a kill, a setup failure) or the copy failed");
        return;
    }
    r = copy_unpack(sb->copy_out_fd,
                    &(struct copy_target){.root_fds = sb->out_fds,
                                          .root_paths = sb->out_host_paths, .n_roots = sb->n_out,
                                          .indexed = true, .host = true,
                                          .shown_roots = sb->out_shown},
                    &caps, ret, why, sizeof(why));
    if (r < 0) {
        ret->copy_out_done = false;
        report_warning(c, ret, "copy-out failed on the host: %s; what was written before is listed",
                       why);
        if (c->workspace)
            report_warning(c, ret,
                           "workspace '%s' was not saved (its files are as before this run)",
                           c->workspace);
        return;
    }
    ret->copy_out_complete = ret->n_skipped == 0 && ret->skipped_more == 0;
    if (!ret->copy_out_complete)
        report_warning(c, ret,
                       "copy-out is not complete: %zu entr%s skipped (listed in copy_out.skipped, "
                       "with why: only regular files and directories are copied, within "
                       "--copy-out-max-files %llu and --copy-out-max-bytes %llu)",
                       ret->n_skipped + (size_t)ret->skipped_more,
                       ret->n_skipped + ret->skipped_more == 1 ? "y was" : "ies were",
                       (unsigned long long)c->copy_out_max_files,
                       (unsigned long long)c->copy_out_max_bytes);
    if (!c->workspace)
        return;
    /* A workspace is saved whole or not at all: a partial copy would leave the next step
     * files of two different runs. Only what is not a regular file or directory may be left
     * out (it never crosses anyway); a cap is a refusal. */
    for (size_t i = 0; i < ret->n_skipped; i++)
        if (strstr(ret->skipped[i].reason, "--copy-out-max") &&
            path_is_at_or_below(ret->skipped[i].path, "/work")) {
            report_warning(c, ret,
                           "workspace '%s' was not saved: /work is over --copy-out-max-files or "
                           "--copy-out-max-bytes (its files are as before this run)",
                           c->workspace);
            return;
        }
    r = workspace_commit(&sb->ws, sb->ws_staging, why, sizeof(why));
    if (r < 0) {
        report_warning(c, ret, "%s", why);
        return;
    }
    sb->ws_staging[0] = '\0';
    ret->workspace_saved = true;
}

static int run_sandbox(const struct nsbox_config *c, const struct session_hooks *hooks,
                       struct nsbox_result *ret)
{
    struct sandbox sb = {0};
    struct cgroup_leaf leaf = {.dir_fd = -EBADF, .parent_fd = -EBADF};
    bool attached_by_clone = false;
    int out[2] = {-EBADF, -EBADF}, err[2] = {-EBADF, -EBADF};
    int sync[2] = {-EBADF, -EBADF}, report[2] = {-EBADF, -EBADF}, in[2] = {-EBADF, -EBADF};
    _cleanup_close_ int pidfd = -EBADF, sigfd = -EBADF;
    sigset_t forward, saved_mask;
    bool mask_changed = false;
    struct proxy *proxy = NULL;
    uint64_t start;
    int pid, r;

    *ret = (struct nsbox_result){
        .memory = {c->memory, NSBOX_ENFORCER_NONE},
        .pids_limit = {c->pids_limit, NSBOX_ENFORCER_NONE},
        .cpus = {c->cpus_milli, NSBOX_ENFORCER_NONE},
        .timeout = {c->timeout, NSBOX_ENFORCER_NONE},
        .output_limit = c->output_limit,
        .workdir_size = c->workdir_size,
    };

    /* Signals first: one that comes while the run is planned waits in the signalfd and is acted
     * on once the sandbox exists (SIGUSR1 kills it at once, the others are forwarded), so every
     * signal ends in a result. */
    if (c->forward_signals) {
        supervise_signal_set(&forward); /* SIGUSR1 among them: `nsbox kill` */
        if (sigprocmask(SIG_BLOCK, &forward, &saved_mask) < 0) {
            r = report_error(ret, negative_errno(), "signals", "blocking signals failed: %m");
            goto out;
        }
        mask_changed = true;
        sigfd = signalfd(-1, &forward, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sigfd < 0) {
            r = report_error(ret, negative_errno(), "signals", "signalfd failed: %m");
            goto out;
        }
    }

    r = plan_sandbox(c, &sb, ret);
    if (r < 0)
        goto out;
    if (sandbox_network_allow(c)) {
        char why[512] = "";
        r = proxy_new(c, &proxy, why, sizeof(why));
        if (r < 0) {
            (void)report_error(ret, r, "config", "%s", r == -EINVAL ? why : strerror(-r));
            goto out;
        }
    }
    r = plan_cgroup(c, &sb, &leaf, ret);
    if (r < 0)
        goto out;

    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(sync, O_CLOEXEC) < 0 ||
        pipe2(report, O_CLOEXEC) < 0 ||
        /* A socket, so that the supervisor's writes can use MSG_NOSIGNAL: no SIGPIPE in the
         * caller's process when the payload closes its stdin. */
        (c->pass_stdin && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0)) {
        r = report_error(ret, negative_errno(), "pipe", "creating pipes failed: %m");
        goto out;
    }

    start = now_usec();
    pid = clone_sandbox(sandbox_namespaces(c), sb.in_cgroup ? leaf.dir_fd : -1, &pidfd,
                        &attached_by_clone);
    if (pid < 0) {
        r = negative_errno();
        (void)report_error(ret, r, "clone3", "creating the sandbox's namespaces failed: %s%s",
                           strerror(-r), clone_hint(-r));
        goto out;
    }
    if (pid == 0) {
        struct child_fds fds = {.sync = sync[0], .report = report[1], .out = out[1],
                                .err = err[1], .in = in[1],
                                .session = hooks ? hooks->init_fd : -1};
        if (hooks)
            (void)close(hooks->own_fd);
        if (in[0] >= 0)
            (void)close(in[0]);
        (void)close(out[0]);
        (void)close(err[0]);
        (void)close(sync[1]);
        (void)close(report[0]);
        if (sigfd >= 0)
            (void)close(sigfd);
        sandbox_child(&sb, &fds);
    }

    (void)close(out[1]);
    (void)close(err[1]);
    if (in[1] >= 0) {
        (void)close(in[1]);
        in[1] = -EBADF;
    }
    (void)close(sync[0]);
    (void)close(report[1]);
    out[1] = err[1] = sync[0] = report[1] = -EBADF;

    r = sb.in_cgroup && !attached_by_clone ? cgroup_leaf_attach(&leaf, pid) : 0;
    if (r >= 0)
        r = idmap_write(pid, c->uid, sb.host_uid, c->gid, sb.host_gid, !sb.privileged);
    if (r < 0 || write(sync[1], "x", 1) != 1) {
        siginfo_t si;
        if (r >= 0)
            r = negative_errno();
        (void)sys_pidfd_send_signal(pidfd, SIGKILL);
        (void)RETRY_EINTR(waitid((idtype_t)3 /* P_PIDFD */, (id_t)pidfd, &si, WEXITED));
        (void)report_error(ret, r, "uid_map", "writing the sandbox's uid_map/gid_map failed: %s%s",
                           strerror(-r), host_ids_hint(&sb, r));
        goto out;
    }

    {
        struct supervise_fds sfds = {.pidfd = pidfd, .out = TAKE_FD(out[0]),
                                     .err = TAKE_FD(err[0]), .report = TAKE_FD(report[0]),
                                     .signalfd = sigfd, .stdin_src = c->pass_stdin ? 0 : -1,
                                     .sync = sync[1], .init_pid = pid,
                                     .stdin_dst = in[0] >= 0 ? TAKE_FD(in[0]) : -1,
                                     .proxy = proxy};
        if (hooks) {
            (void)close(hooks->init_fd);
            r = hooks->supervise(c, &sfds, start, sb.in_cgroup ? &leaf : NULL, ret,
                                 hooks->userdata);
        } else
            r = supervise(c, &sfds, start, ret);
        if (r < 0)
            (void)report_error(
                ret, r, "supervise", "supervising the sandbox failed: %s%s", strerror(-r),
                proxy && r == -ENOSYS ? " (--network allow= takes the proxy's socket from the "
                                        "sandbox with pidfd_getfd(2), Linux 5.6 or later)"
                                      : "");
    }
    if (proxy)
        proxy_finish(proxy, &ret->network);
    shm_diagnose(c, ret);
    work_diagnose(c, ret);
    copy_out_finish(&sb, ret);
    kill_leftovers(&sb, ret);
    if (sb.in_cgroup) {
        cgroup_leaf_stats(&leaf, &ret->cgroup);
        /* The cgroup's OOM killer sends SIGKILL; memory.events says it was the OOM killer. */
        if (ret->cgroup.oom_kills > 0 && ret->status == NSBOX_STATUS_SIGNALED &&
            ret->signal == SIGKILL)
            ret->status = NSBOX_STATUS_OOM;
    }

out:
    if (leaf.dir_fd >= 0 && cgroup_leaf_destroy(&leaf) < 0 && ret->status != NSBOX_STATUS_ERROR)
        (void)report_error(ret, -EBUSY, "cgroup", "removing cgroup %s failed", leaf.path);
    close_pair(out);
    close_pair(err);
    close_pair(sync);
    close_pair(report);
    close_pair(in);
    if (mask_changed)
        (void)sigprocmask(SIG_SETMASK, &saved_mask, NULL);
    proxy_free(proxy);
    plan_free(&sb);
    /* Invalid configuration is the caller's error; everything else is reported in *ret. */
    return r == -EINVAL && ret->status == NSBOX_STATUS_ERROR &&
                   strcmp(ret->error_step, "config") == 0
               ? -EINVAL
               : 0;
}

int nsbox_run(const struct nsbox_config *c, struct nsbox_result *ret)
{
    return run_sandbox(c, NULL, ret);
}

int sandbox_run_session(const struct nsbox_config *c, const struct session_hooks *hooks,
                        struct nsbox_result *ret)
{
    return run_sandbox(c, hooks, ret);
}
