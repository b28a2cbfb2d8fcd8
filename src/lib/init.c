/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The steps the sandbox takes inside, one function each: init's set-up before the payload
 * exists, the payload's last steps before execve (sandbox_payload_exec()), and init's loop
 * until the payload has ended. sandbox.c calls them in their order (its header comment lists
 * it); nothing here knows the order but where a comment says what must come before.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "copy.h"
#include "fileio.h"
#include "init.h"
#include "macro.h"
#include "proxy.h"
#include "report.h"
#include "result.h"
#include "sandbox.h"
#include "syscalls.h"

/* ---- init's set-up, before the payload exists ---- */

/* Bring up lo, the one interface of a new network namespace, down until then (netdevice(7):
 * SIOCGIFFLAGS, SIOCSIFFLAGS). Needs CAP_NET_ADMIN in the user namespace that owns the network
 * namespace, which the sandbox holds until it drops its capabilities. */
int init_loopback_up(void)
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
int init_proxy_listen(void)
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

void init_default_signals(const char *status)
{
    _cleanup_free_ char *own = NULL;
    uint64_t ign, cgt;

    /* Which signals are not at SIG_DFL, from one read of /proc/self/status (proc(5): SigIgn and
     * SigCgt, bit n-1 for signal n), instead of a sigaction(2) for each of the 64: the others
     * need nothing. If the file cannot be read or parsed, every signal is reset as before. */
    if (!status && proc_self_status_read(&own) >= 0)
        status = own;
    if (!status || proc_status_mask(status, "SigIgn", &ign) < 0 ||
        proc_status_mask(status, "SigCgt", &cgt) < 0)
        ign = cgt = UINT64_MAX;
    for (int sig = 1; sig < NSIG && sig <= 64; sig++)
        if ((ign | cgt) & (1ULL << (sig - 1)))
            (void)signal(sig, SIG_DFL);
}

/* Zero this process's copy of the command line it was started with (the memory between
 * arg_start and arg_end, fields 48 and 49 of /proc/self/stat, proc(5)): the payload can read
 * /proc/1/cmdline, and nsbox's arguments name host paths and values meant for nsbox. */
int init_wipe_cmdline(void)
{
    char buf[2048];
    const char *state, *p;
    unsigned long start = 0, end = 0;
    int r;

    r = proc_stat_read(AT_FDCWD, "/proc/self/stat", buf, sizeof(buf), &state);
    if (r < 0)
        return r;
    p = proc_stat_field(state, 48);
    if (!p || sscanf(p, "%lu %lu", &start, &end) != 2 || end <= start)
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
};

/* New namespaces, in runs whose seccomp policy does not refuse them (--no-seccomp, a policy
 * file): 16 of each kind. The built-in policies refuse them (policy/refusals.rules); there, as
 * a second wall, user.max_user_namespaces is 0 and the others are left alone: making any other
 * kind takes CAP_SYS_ADMIN in the caller's user namespace (clone(2), unshare(2)), and the
 * payload has no capability in the sandbox's, so it can make none without a user namespace
 * of its own first. One write instead of eight (about 15 us each, on the path to
 * the payload's start). */
static const struct {
    const char *name, *value;
} userns_namespaces[] = {
    {"user/max_user_namespaces", "16"},   {"user/max_mnt_namespaces", "16"},
    {"user/max_pid_namespaces", "16"},    {"user/max_net_namespaces", "16"},
    {"user/max_ipc_namespaces", "16"},    {"user/max_uts_namespaces", "16"},
    {"user/max_cgroup_namespaces", "16"}, {"user/max_time_namespaces", "16"},
};

/* Kernel settings of the sandbox's own namespaces, set by init while it holds every
 * capability in them and before it switches ids. */
int init_sysctls(const struct sandbox_plan *sb, struct report_step *e)
{
    const struct nsbox_config *c = sb->config;
    int r;

    /* Tier 2 (isolation.h): /proc/sys is read-only, and the result says what is missing. */
    if (sb->sysctls_read_only)
        return 0;
    for (size_t i = 0; i < ELEMENTSOF(userns_budgets); i++) {
        r = write_sysctl(userns_budgets[i].name, userns_budgets[i].value, true, e);
        if (r < 0)
            return r;
    }
    if (!c->seccomp_disabled && !c->seccomp_policy) {
        r = write_sysctl("user/max_user_namespaces", "0", true, e);
        if (r < 0)
            return r;
    } else
        for (size_t i = 0; i < ELEMENTSOF(userns_namespaces); i++) {
            r = write_sysctl(userns_namespaces[i].name, userns_namespaces[i].value, true, e);
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
uint64_t sandbox_fsize(const struct sandbox_plan *sb)
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
    return init_set_rlimit(resource, value);
}

int init_budgets(const struct sandbox_plan *sb, struct report_step *e)
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
int init_copy_in(struct sandbox_plan *sb, struct report_step *e)
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
    r = copy_unpack(sb->copy_in_fd,
                    &(struct copy_target){.root_fds = root_fds, .n_roots = 1, .shown_prefix = "/"},
                    &caps, NULL, why, sizeof(why));
    (void)close(sb->copy_in_fd);
    sb->copy_in_fd = -EBADF;
    if (r < 0)
        return report_step_failed(e, r, "copy-in", "%s%s", why,
                                  r == -ENOSPC ? "; raise --workdir-size or the --tmpfs size"
                                  : r == -EROFS
                                      ? "; copy below /work, /tmp or another writable mount, "
                                        "not onto a read-only file there (--code's "
                                        "/work/main.py is one)"
                                      : "");
    return 0;
}

/* ---- the payload, from fork to execve ---- */

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

int init_set_rlimit(int resource, uint64_t value)
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
        r = init_set_rlimit(RLIMIT_DATA, c->memory);
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
        r = init_set_rlimit(RLIMIT_NPROC, c->pids_limit);
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
static int payload_execve(const struct sandbox_plan *sb)
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

_noreturn_ void sandbox_payload_exec(const struct sandbox_plan *sb, int in_fd, int out_fd,
                                     int err_fd, int report_fd, int extra_fd)
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

/* ---- init, once the payload runs ---- */

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

int init_pack_out(const char *const *paths, size_t n, const struct copy_caps *caps,
                  const char *exclude_in_last, int out_fd, struct report *rep)
{
    struct copy_packer *p = NULL;
    struct copy_stats stats = {0};
    char why[256];
    int r;

    /* The stream is a file of this process's: RLIMIT_FSIZE applies, and its SIGXFSZ would end
     * init; EFBIG is reported instead. */
    (void)signal(SIGXFSZ, SIG_IGN);
    rep->copy_taken = true;
    r = copy_packer_new(out_fd, caps, &p, why, sizeof(why));
    for (size_t i = 0; r >= 0 && i < n; i++) {
        const char *path = paths[i];
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
            enum nsbox_skip_kind kind = errno != ELOOP && errno != ENOTDIR && errno != ENOENT
                                            ? NSBOX_SKIP_UNREADABLE
                                            : NSBOX_SKIP_NOT_COPIED;
            r = copy_pack_skipped(p, prefix,
                                  errno == ELOOP || errno == ENOTDIR ? "symlink (never followed)"
                                  : errno == ENOENT                  ? "does not exist"
                                                                     : "cannot be read",
                                  kind, why, sizeof(why));
            if (fd >= 0)
                (void)close(fd);
            continue;
        }
        r = copy_pack(p,
                      &(struct copy_source){.src_fd = fd,
                                            .prefix = prefix,
                                            .shown = path,
                                            .exclude = i == n - 1 ? exclude_in_last : NULL},
                      true, why, sizeof(why));
        (void)close(fd);
    }
    if (p) {
        int k = copy_packer_finish(p, &stats, why, sizeof(why));
        r = r < 0 ? r : k;
    }
    rep->copy_err = r < 0 ? -r : 0;
    rep->copy_unlisted = stats.skipped - stats.skipped_listed;
    rep->copy_lost = stats.lost;
    return r < 0 ? r : 0;
}

/* Copy-out, by init once the payload has ended: first every other process of the sandbox is
 * killed and reaped (kill(2) with -1 from a pid namespace's init reaches all of them and not
 * itself, pid_namespaces(7)), so nothing changes the tree while it is read and nothing is left
 * to race a check. Then each --copy-out source, and /work for a workspace, is packed into the
 * memfd at out_fd (copy.h), within the caps. Init is under the seccomp filters by now, as the
 * sandbox's uid: what the payload made unreadable is skipped. */
void init_copy_out(const struct sandbox_plan *sb, int out_fd, struct report *rep)
{
    const struct nsbox_config *c = sb->config;
    struct copy_caps caps = {.max_bytes = c->copy_out_max_bytes,
                             .max_files = c->copy_out_max_files};

    /* Again before each wait: a fork in flight cannot leave a child unsignalled (copy_process()
     * restarts a fork with a fatal signal pending; this is the belt to those braces). */
    do
        (void)kill(-1, SIGKILL);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR);
    /* sb's copies: the config's strings may be in nsbox's argv, wiped by now. The workspace's
     * /work is last; --code's main.py stays out of it. */
    (void)init_pack_out(sb->out_shown, sb->n_out, &caps,
                        c->workspace && c->code ? "/work/main.py" : NULL, out_fd, rep);
}

/* PID 1: reap everything, forward SIGINT/SIGTERM/SIGHUP to the payload's process group, and
 * leave with the payload (after the copy-out, if any). The kernel then kills all that remains
 * in the pid namespace (pid_namespaces(7)), so nothing the payload started outlives it. */
_noreturn_ void init_loop(const struct sandbox_plan *sb, pid_t payload, const sigset_t *mask,
                          int report_fd, int shm_fd, int work_fd, int copy_out_fd,
                          const struct written_snapshot *before)
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
            /* The files it wrote in /work (written.h), each reported before its end. */
            written_report(work_fd, before, report_fd);
            report_send(report_fd, &rep);
            _exit(0);
        }
    }
}
