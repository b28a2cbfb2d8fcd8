/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The one file that knows the order of the steps.
 *
 * Supervisor (the caller's process, outside):
 *   [--isolation landlock where a child cannot make a user namespace (tier3_needed()): tier 3,
 *   tier3.c, instead of everything below; its steps are in tier3.h]
 *   validate and plan (plan.c: argv, environment, the seccomp filter compiled; mounts,
 *   mount-plan.c; the copy-in stream packed, the copy-out directories and the workspace opened,
 *   copy-plan.c; host ids, ids-plan.c; the Landlock ABI probed, landlock.c; the tier of
 *   isolation, isolation.c: tier 2 where /proc/sys is read-only) -> the proxy (--network
 *   allow=) -> the cgroup leaf or rlimits (cgroup.c) -> pipes and the sync socket (and a
 *   started sandbox's control channel) -> clone3(new user, pid, net, mount, ipc, uts and
 *   cgroup namespaces) -> write uid_map/gid_map and release the child (root's runs, and runs
 *   in a cgroup; an ordinary user's run outside one writes its own maps:
 *   child_writes_maps()) -> supervise (supervise.c; a started sandbox's steps, lifecycle.c)
 *   -> unpack the copy-out stream, save the workspace (sandbox-end.c) -> result.
 *
 * Sandbox init (PID 1 of the new pid namespace; everything here runs before untrusted code):
 *   write its own id maps (an ordinary user's run outside a cgroup) -> clone host mount
 * sources -> sysctls of its own namespaces (user.max_*, vm.memfd_noexec, kernel.shm*; none in
 * tier 2) -> the supervisor's byte that its id maps are written (first, where it moves init
 * into the cgroup after the clone) -> bind the rootfs
 * read-only, mount /proc (with Docker's masks; mount points the rootfs lacks in a skeleton) and
 * pivot_root -> switch to the sandbox ids -> /dev, tmpfs, /work, binds -> /etc/passwd and
 * /etc/group with the --user's entry when the rootfs lacks it -> copy-in (copy.c) -> -w -> hostname
 * -> pin to ceil(--cpus) CPUs (cpus.c) -> lo up (--network loopback, allow=) -> the proxy's
 * listening socket, handed to the supervisor (--network allow=, proxy.h) -> wipe nsbox's command
 * line from memory -> parent-death signal -> Landlock (landlock.c: the files, TCP ports, signals
 * and abstract sockets the mounts and namespaces allow, once more) -> drop every capability ->
 *   no_new_privs -> new session -> RLIMIT_CORE and the per-user budgets' rlimits -> the
 *   seccomp program (filter.c: the policy's filters joined into one, memfd.c's program after
 *   them by the vm.memfd_noexec in force; the listener of refusals sent to the supervisor over
 *   the sync socket, or with a policy file (or when that send fails) taken by it with
 *   pidfd_getfd(2); init's copy closed) -> non-dumpable
 *   -> start the payload (clone(CLONE_VM | CLONE_VFORK), as posix_spawn(3) does) -> reap,
 *   forward signals; when the payload has ended, with copy-out: kill everything else and
 *   write the copy-out stream -> report how the payload ended (and how full /dev/shm and
 *   /work were), exit (which kills whatever is left in the pid namespace).
 *
 * Payload (PID 2), born under the filters:
 *   stdio -> close every other fd -> default signals -> rlimits -> execve.
 *
 * A step inside that fails is recorded as a struct report_step and sent to the supervisor on
 * the report pipe (report.h); the child then _exit()s, never exit().
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
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
#include "init.h"
#include "isolation.h"
#include "landlock.h"
#include "lifecycle.h"
#include "macro.h"
#include "memfd.h"
#include "mount.h"
#include "outputs.h"
#include "plan.h"
#include "proxy.h"
#include "report.h"
#include "sandbox-end.h"
#include "sandbox.h"
#include "supervise.h"
#include "syscalls.h"
#include "tier3.h"
#include "uidpool.h"
#include "written.h"

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
        .stdout_file_fd = -1,
        .stderr_file_fd = -1,
    };
}

void nsbox_result_free(struct nsbox_result *r)
{
    free(r->out.data);
    free(r->err.data);
    r->out.data = r->err.data = NULL;
    free(r->outputs);
    r->outputs = NULL;
    if (r->labels)
        for (char **l = r->labels; *l; l++)
            free(*l);
    free(r->labels);
    r->labels = NULL;
    for (size_t i = 0; r->written && i < r->n_written; i++)
        free(r->written[i].path);
    free(r->written);
    r->written = NULL;
    r->n_written = 0;
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

struct child_fds {
    int sync;   /* a unix socket: one byte once the id maps are written, and after the proxy's
                 * socket and the seccomp listener are taken; POLLHUP if nsbox dies */
    int report; /* write end */
    int in;     /* the payload's end of the stdin socket, or -1 for /dev/null */
    int out;    /* write ends of the output pipes */
    int err;
    int session; /* a session's end of its control channel (session-init.c), else -1 */
};

struct payload_args {
    struct sandbox_plan *sb;
    struct child_fds *fds;
    pid_t init_pid;
};

/* The payload's stack until its execve(2). It is started the way posix_spawn(3) starts a
 * program, with clone(2)'s CLONE_VM | CLONE_VFORK on a stack of its own, not with fork(2):
 * init is suspended until the payload has called execve (or exited), and no copy of init's
 * memory is made. fork(2) write-protects the parent's pages for copy-on-write, which flushes
 * their TLB entries on every CPU the memory was used on (dup_mmap(), kernel/fork.c): an
 * inter-processor interrupt that a VM's busy host took up to a millisecond to answer. Until
 * execve the payload runs only nsbox's code, on this stack, with descriptors, signal mask and
 * umask of its own (no CLONE_FILES, CLONE_FS or CLONE_SIGHAND); it touches none of init's
 * memory but what it reads. */
#if defined(__SANITIZE_ADDRESS__)
#define NSBOX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NSBOX_ASAN 1
#endif
#endif
#ifndef NSBOX_ASAN
#define NSBOX_ASAN 0
static char payload_stack[64 << 10] __attribute__((aligned(16)));
#endif

static int payload_main(void *userdata)
{
    const struct payload_args *a = userdata;

    /* Without a pid namespace, the payload can see init and kill it: it must not live on,
     * unwatched and out of the wall clock (in a pid namespace, init's end ends all). */
    if (a->sb->config->pid_host &&
        (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != a->init_pid))
        _exit(125);
    (void)close(a->fds->sync);
    sandbox_payload_exec(a->sb, a->fds->in, a->fds->out, a->fds->err, a->fds->report,
                         a->sb->outputs_fd);
}

/* Whether init hands the seccomp listener over on the sync socket (SCM_RIGHTS) rather than
 * having the supervisor take it with pidfd_getfd(2): under the built-in policies, which allow
 * sendmsg(2), which init then makes under the filter it has just loaded. A policy file may
 * refuse it, and the refusal would wait for the listener it carries. */
static bool listener_by_socket(const struct sandbox_plan *sb)
{
    return !sb->config->seccomp_policy;
}

/* Whether the sandbox's init writes its own id maps, sparing a round trip to the supervisor
 * (which would write them and then wake it). user_namespaces(7): a process with CAP_SETUID
 * (CAP_SETGID) in its new namespace, which the child of clone3 has, may write the maps of it
 * itself when they map only its own effective uid (gid) and setgroups(2) is denied first, the
 * maps an ordinary user's sandbox has (plan_host_ids()). Root's map ids that are not its own,
 * which only a writer with CAP_SETUID in the parent namespace may, and a sandbox whose cgroup
 * the supervisor must still attach it to waits for the supervisor before it does anything. */
static bool child_writes_maps(const struct sandbox_plan *sb)
{
    return !sb->privileged && !sb->in_cgroup;
}

_noreturn_ static void sandbox_child(struct sandbox_plan *sb, struct child_fds *fds,
                                     bool attached_by_clone)
{
    int dev_fds[MOUNT_N_DEVICES];
    struct report_step e = {0};
    struct pollfd pfd;
    sigset_t mask;
    pid_t payload, init_pid;
    int shm_fd, work_fd;
    struct written_snapshot before = {0};
    char byte;
    int r;

    for (size_t i = 0; i < MOUNT_N_DEVICES; i++)
        dev_fds[i] = -EBADF;

    /* Until the id maps are written, this process has no valid ids in its user namespace. An
     * ordinary user's sandbox outside a cgroup writes its own (child_writes_maps()); otherwise
     * the supervisor writes them and says so with a byte, EOF meaning it gave up. What needs
     * no ids of the namespace comes first, while the supervisor writes them: cloning the
     * mount sources and the sysctls check the caller's kernel ids, which the maps do not
     * change (a process's kuid is its own from clone(2) on), and create no file. So the byte
     * is there when init reads it, instead of init sleeping until the supervisor wakes it.
     * Not where the supervisor moves init into its cgroup after the clone (a kernel before
     * 5.7): init does nothing before it is there. */
    bool maps_first = !child_writes_maps(sb) && sb->in_cgroup && !attached_by_clone;
    if (child_writes_maps(sb)) {
        r = idmap_write(0, sb->config->uid, sb->host_uid, sb->config->gid, sb->host_gid, true);
        if (r < 0)
            report_setup_failed(fds->report,
                                &(struct report_step){.err = -r, .name = "uid_map/gid_map"});
    } else if (maps_first && RETRY_EINTR(read(fds->sync, &byte, 1)) != 1)
        _exit(125);

    /* The cgroup namespace made by clone3 is rooted at nsbox's own cgroup; root it at the
     * sandbox's leaf instead, so the sandbox sees itself as "/" (cgroup_namespaces(7)). */
    if (sb->in_cgroup && unshare(CLONE_NEWCGROUP) < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "cgroup namespace"});

    r = mount_clone_sources(sb, dev_fds, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    r = init_sysctls(sb, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    if (!child_writes_maps(sb) && !maps_first && RETRY_EINTR(read(fds->sync, &byte, 1)) != 1)
        _exit(125);
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
     * which pidfd_getfd(2) of the seccomp listener and of the proxy's socket needs, then takes
     * CAP_SYS_PTRACE in the user namespace its memory belongs to (__ptrace_may_access() in
     * kernel/ptrace.c): the host's root has it, a container's root does not (runtimes drop it),
     * and the supervisor would fail with EPERM. Dumpable again until they are taken: only
     * nsbox's own code runs until then, and init is made non-dumpable for good below, before
     * any payload exists. */
    if (sb->privileged &&
        ((!sb->config->seccomp_disabled && !listener_by_socket(sb)) ||
         sandbox_network_allow(sb->config)) &&
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "PR_SET_DUMPABLE"});

    r = mount_populate(sb, dev_fds, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    r = mount_identity_files(sb, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    r = init_copy_in(sb, &e);
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
        r = init_loopback_up();
        if (r < 0)
            report_setup_failed(fds->report,
                                &(struct report_step){.err = -r, .name = "bring up lo"});
    }
    if (sandbox_network_allow(sb->config)) {
        r = init_proxy_listen();
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
    r = init_wipe_cmdline();
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

    /* Landlock, while init still holds CAP_SYS_ADMIN in its namespaces, which
     * landlock_restrict_self(2) takes instead of no_new_privs and the mqueue rule needs (see
     * landlock.c); the filesystem is complete and the proxy's socket bound. */
    r = landlock_apply(sb, fds->report, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);
    _cleanup_free_ char *status = NULL;
    r = caps_drop_all(&status, &e);
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
    init_default_signals(status);

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
    r = init_set_rlimit(RLIMIT_CORE, 1);
    if (r < 0)
        report_setup_failed(fds->report, &(struct report_step){.err = -r, .name = "RLIMIT_CORE"});
    r = init_budgets(sb, &e);
    if (r < 0)
        report_setup_failed(fds->report, &e);

    /* The seccomp filters, loaded here so that the payload is born under them; from here on
     * they apply to init too (the supervisor lets init's own refused calls through). */
    if (!sb->config->seccomp_disabled) {
        int listener = -1;
        /* Memfds that could be executed are refused by a program of their own (memfd.h),
         * joined after the policy's: where init could not set vm.memfd_noexec=2
         * (init_sysctls()), those it would have made non-executable; everywhere, hugetlb ones,
         * whose seal does not hold. */
        r = memfd_filter_join(sb, &e);
        if (r < 0)
            report_setup_failed(fds->report, &e);
        r = filter_load(&sb->filter, &listener);
        if (r < 0)
            report_setup_failed(fds->report, &(struct report_step){.err = -r, .name = "seccomp"});
        if (listener >= 0 && listener_by_socket(sb)) {
            /* Sent over the sync socket (SCM_RIGHTS, unix(7)), then said on the report pipe;
             * init drops its own copy at once and goes on without waiting: the supervisor
             * takes it from the socket when it reads the report, and a refusal meanwhile
             * waits in the listener's queue. The payload never holds it (it could answer its
             * own refusals): init closes it before the payload exists.
             * The send can fail where the one below cannot: with ETOOMANYREFS once the
             * descriptors in flight of init's host uid are more than its RLIMIT_NOFILE
             * (too_many_unix_fds() in net/unix/af_unix.c), a count that another sandbox of
             * the same uid can fill (an ordinary user's runs share one). Then the hand-over
             * below, dumpable again for it as before the filter (root's init). */
            r = report_send_fd(fds->sync, listener);
            if (r >= 0) {
                (void)close(listener);
                listener = -1;
                report_send(fds->report, &(struct report){.type = REPORT_LISTENER, .code = -1});
            } else if (sb->privileged && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
                report_setup_failed(fds->report,
                                    &(struct report_step){.err = errno, .name = "PR_SET_DUMPABLE"});
        }
        if (listener >= 0) {
            /* The supervisor takes the listener with pidfd_getfd(2) and says so on the sync
             * socket; only then does init become non-dumpable (which would stop pidfd_getfd
             * for an unprivileged supervisor) and drop its own copy, before any untrusted code
             * exists. The payload must never hold it: it could answer its own refusals. Init
             * uses only write(2) and read(2) here, under the filter just loaded: a policy file
             * may refuse anything else (sendmsg(2) of SCM_RIGHTS, say), and a refusal here
             * would wait for a supervisor that has no listener yet to answer it. */
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
    if (sb->outputs_fd >= 0) {
        /* The cell's outputs channel, for the payload (its fd 4); init does not keep it. */
        r = fcntl(sb->outputs_fd, F_DUPFD_CLOEXEC, 7);
        if (r < 0)
            report_setup_failed(fds->report,
                                &(struct report_step){.err = errno, .name = "outputs"});
        (void)close(sb->outputs_fd);
        sb->outputs_fd = r;
    }
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
         * pipe (3), /dev/shm (4), the control channel (5) and, with a workspace, the copy-out
         * memfd (6, written when the session ends), nothing else. */
        int control = fcntl(fds->session, F_DUPFD_CLOEXEC, 7); /* above what moves below */
        if (control < 0 || (fds->report != 3 && dup3(fds->report, 3, O_CLOEXEC) < 0) ||
            dup3(shm_fd, 4, O_CLOEXEC) < 0 || dup3(control, 5, O_CLOEXEC) < 0 ||
            (sb->copy_out_fd >= 0 && dup3(sb->copy_out_fd, 6, O_CLOEXEC) < 0))
            _exit(125);
        (void)sys_close_range(0, 2, 0);
        (void)sys_close_range(sb->copy_out_fd >= 0 ? 7 : 6, ~0U, 0);
        session_init(sb, &mask, 3, 4, 5, sb->copy_out_fd >= 0 ? 6 : -1);
    }

    /* /work as the payload will find it, to tell what it wrote (written.h). Best effort: a walk
     * that fails leaves files_written unknown, and the run goes on. */
    (void)written_snapshot_take(work_fd, &before);

    init_pid = getpid();
#if NSBOX_ASAN
    /* AddressSanitizer cannot follow a process onto a stack of its own in init's memory: it
     * warns on the payload's stderr ("ignoring requested __asan_handle_no_return") and may
     * report false errors. The sanitizer build forks. */
    payload = fork();
    if (payload == 0)
        _exit(payload_main(&(struct payload_args){.sb = sb, .fds = fds, .init_pid = init_pid}));
#else
    payload = clone(payload_main, payload_stack + sizeof(payload_stack),
                    CLONE_VM | CLONE_VFORK | SIGCHLD,
                    &(struct payload_args){.sb = sb, .fds = fds, .init_pid = init_pid});
#endif
    if (payload < 0)
        report_setup_failed(fds->report,
                            &(struct report_step){.err = errno, .name = "fork payload"});

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
    init_loop(sb, payload, &mask, 3, 4, 5, sb->copy_out_fd >= 0 ? 6 : -1, &before);
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
    /* Linux < 5.3: clone(2), whose child must not rely on glibc's cached thread id (raise(3));
     * nsbox's child does not. */
    if (pid < 0 && errno == ENOSYS)
        pid = sys_clone_fork(namespaces | CLONE_PIDFD | SIGCHLD, ret_pidfd);
    return (int)pid;
}

/* Where no user namespace can be made, the default names the weaker tier 3, never takes it. */
#define TIER3_HINT                                                                                 \
    "; or, much weaker, --isolation landlock runs the program without namespaces behind "          \
    "Landlock and seccomp (README, 'Isolation tiers')"

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
                   "examples/seccomp-nsbox.json; 'nsbox doctor' names the setting" TIER3_HINT ")";
        return " (unprivileged user namespaces are disabled: check sysctl "
               "kernel.unprivileged_userns_clone and, on Ubuntu, "
               "kernel.apparmor_restrict_unprivileged_userns; 'nsbox' needs them" TIER3_HINT ")";
    case ENOSPC:
        return " (namespace limit reached: see sysctl user.max_user_namespaces" TIER3_HINT ")";
    case EINVAL:
        return " (this kernel lacks a namespace type nsbox needs)";
    default:
        return "";
    }
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
static const char *host_ids_hint(const struct sandbox_plan *sb, int r)
{
    if (r != -EPERM || sb->host_ids_lock < 0 ||
        (uidpool_mapped_here("/proc/self/uid_map", sb->host_uid) != 0 &&
         uidpool_mapped_here("/proc/self/gid_map", sb->host_gid) != 0))
        return "";
    return " (the host ids nsbox takes for root's runs, 2113929216 and up, are not mapped in the "
           "user namespace nsbox runs in, as in a container: choose ids mapped there with "
           "--host-user, e.g. --host-user 65534)";
}

void sandbox_state_init(struct nsbox_sandbox *x)
{
    /* Only what is not zero: x is 160 KiB, most of it a step's results and the loop's state,
     * which a run never touches, and calloc(3) hands memory that large over as fresh zero pages
     * of its own mmap(2). Writing all of it would fault in each of its 40 pages before the
     * clone, and copy them again as the supervisor and init write to them afterwards. */
    plan_init(&x->sb, &x->c); /* sandbox_close() frees it even when planning never began */
    x->leaf.dir_fd = x->leaf.parent_fd = -EBADF;
    for (size_t i = 0; i < 2; i++)
        x->out[i] = x->err[i] = x->sync[i] = x->report[i] = x->in[i] = x->control[i] = -EBADF;
    x->pidfd = x->sigfd = -EBADF;
    x->fds = (struct supervise_fds){.out = -EBADF,
                                    .err = -EBADF,
                                    .report = -EBADF,
                                    .signalfd = -EBADF,
                                    .stdin_src = -1,
                                    .stdin_dst = -EBADF,
                                    .sync = -EBADF};
}

/* Signals first: one that comes while the run is planned waits in the signalfd and is acted on
 * once the sandbox exists (SIGUSR1 kills it at once, the others are forwarded), so every signal
 * ends in a result. Returns 0 or -errno (ret says it). */
static int sandbox_signals(struct nsbox_sandbox *x, struct nsbox_result *ret)
{
    struct sigaction sa;
    sigset_t forward;

    /* With SIGCHLD ignored (SIG_IGN or SA_NOCLDWAIT, inherited across execve(2) from a caller
     * that set it), the kernel reaps the sandbox's init itself and waitid(2) fails with ECHILD
     * once the payload has run (signal(7), wait(2)): nsbox could not say how it ended. */
    if (sigaction(SIGCHLD, NULL, &sa) == 0 &&
        (sa.sa_handler == SIG_IGN || (sa.sa_flags & SA_NOCLDWAIT)))
        return report_error(ret, -ECHILD, "signals",
                            "SIGCHLD is ignored in this process (SIG_IGN or SA_NOCLDWAIT), so the "
                            "kernel would reap the sandbox before nsbox learns how it ended; set "
                            "it back to SIG_DFL before running a sandbox");
    if (!x->c.forward_signals)
        return 0;
    supervise_signal_set(&forward); /* SIGUSR1 among them: `nsbox kill` */
    if (sigprocmask(SIG_BLOCK, &forward, &x->saved_mask) < 0)
        return report_error(ret, negative_errno(), "signals", "blocking signals failed: %m");
    x->mask_changed = true;
    x->sigfd = signalfd(-1, &forward, SFD_CLOEXEC | SFD_NONBLOCK);
    if (x->sigfd < 0)
        return report_error(ret, negative_errno(), "signals", "signalfd failed: %m");
    return 0;
}

int sandbox_open(struct nsbox_sandbox *x, struct nsbox_result *ret)
{
    const struct nsbox_config *c = &x->c;
    struct sandbox_plan *sb = &x->sb;
    int pid, r;

    *ret = (struct nsbox_result){
        .memory = {c->memory, NSBOX_ENFORCER_NONE},
        .pids_limit = {c->pids_limit, NSBOX_ENFORCER_NONE},
        .cpus = {c->cpus_milli, NSBOX_ENFORCER_NONE},
        .timeout = {c->timeout, NSBOX_ENFORCER_NONE},
        .output_limit = c->output_limit,
        .workdir_size = c->workdir_size,
    };

    r = sandbox_signals(x, ret);
    if (r < 0)
        return r;
    r = plan_sandbox(c, sb, ret);
    if (r < 0)
        return r;
    r = landlock_plan(c, sb, ret);
    if (r < 0)
        return r;
    r = isolation_plan(c, sb, ret);
    if (r < 0)
        return r;
    if (sandbox_network_allow(c)) {
        char why[512] = "";
        r = proxy_new(c, &x->proxy, why, sizeof(why));
        if (r < 0)
            return report_config_error(ret, r, "%s", r == -EINVAL ? why : strerror(-r));
    }
    r = plan_cgroup(c, sb, &x->leaf, ret);
    if (r < 0)
        return r;
    /* System V IPC is counted by no rlimit: without a cgroup, only kernel.shm* of the sandbox's
     * IPC namespace bound its shared memory, which init sets in root's runs only (init.c says
     * why), and nothing bounds semaphore sets and message queues (2 GiB of semaphores, 488 MiB
     * of messages held under --memory 64m). So semget(2) and msgget(2) are refused, and shmget(2)
     * where kernel.shm* is out of reach (a note says so when they were): a segment outside
     * --memory held 640 MiB under --memory 256m. POSIX shared memory in /dev/shm, --shm-size,
     * POSIX semaphores and message queues (RLIMIT_MSGQUEUE) work. */
    if (!sb->in_cgroup && c->memory && !c->ipc_host && !c->seccomp_disabled) {
        r = filter_refuse_sysv_ipc(&sb->filter, !sb->host_root || c->uid == 0);
        if (r < 0)
            return report_error(ret, r, "seccomp", "refusing System V IPC failed: %m");
    }

    if (pipe2(x->out, O_CLOEXEC) < 0 || pipe2(x->err, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x->sync) < 0 ||
        pipe2(x->report, O_CLOEXEC) < 0 ||
        /* A socket, so that the supervisor's writes can use MSG_NOSIGNAL: no SIGPIPE in the
         * caller's process when the payload closes its stdin. */
        (c->pass_stdin && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, x->in) < 0) ||
        /* A started sandbox's control channel (control.h). */
        (x->steps_mode && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, x->control) < 0))
        return report_error(ret, negative_errno(), "pipe", "creating pipes failed: %m");

    x->start = now_usec();
    pid = clone_sandbox(sandbox_namespaces(c), sb->in_cgroup ? x->leaf.dir_fd : -1, &x->pidfd,
                        &x->attached_by_clone);
    if (pid < 0) {
        r = negative_errno();
        return report_error(ret, r, "clone3", "creating the sandbox's namespaces failed: %s%s",
                            strerror(-r), clone_hint(-r));
    }
    if (pid == 0) {
        struct child_fds fds = {.sync = x->sync[0],
                                .report = x->report[1],
                                .out = x->out[1],
                                .err = x->err[1],
                                .in = x->in[1],
                                .session = x->steps_mode ? x->control[1] : -1};
        if (x->control[0] >= 0)
            (void)close(x->control[0]);
        if (x->in[0] >= 0)
            (void)close(x->in[0]);
        (void)close(x->out[0]);
        (void)close(x->err[0]);
        (void)close(x->sync[1]);
        (void)close(x->report[0]);
        if (x->sigfd >= 0)
            (void)close(x->sigfd);
        sandbox_child(sb, &fds, x->attached_by_clone);
    }

    (void)close(x->out[1]);
    (void)close(x->err[1]);
    (void)close(x->sync[0]);
    (void)close(x->report[1]);
    x->out[1] = x->err[1] = x->sync[0] = x->report[1] = -EBADF;
    if (x->in[1] >= 0) {
        (void)close(x->in[1]);
        x->in[1] = -EBADF;
    }
    if (x->control[1] >= 0) {
        (void)close(x->control[1]);
        x->control[1] = -EBADF;
    }

    r = sb->in_cgroup && !x->attached_by_clone ? cgroup_leaf_attach(&x->leaf, pid) : 0;
    if (r >= 0 && !child_writes_maps(sb))
        r = idmap_write(pid, c->uid, sb->host_uid, c->gid, sb->host_gid, !sb->privileged);
    if (r < 0 || (!child_writes_maps(sb) && write(x->sync[1], "x", 1) != 1)) {
        siginfo_t si;
        if (r >= 0)
            r = negative_errno();
        (void)sys_pidfd_send_signal(x->pidfd, SIGKILL);
        (void)RETRY_EINTR(waitid((idtype_t)P_PIDFD, (id_t)x->pidfd, &si, WEXITED));
        return report_error(ret, r, "uid_map", "writing the sandbox's uid_map/gid_map failed: %s%s",
                            strerror(-r), host_ids_hint(sb, r));
    }
    x->fds = (struct supervise_fds){.pidfd = x->pidfd,
                                    .out = TAKE_FD(x->out[0]),
                                    .err = TAKE_FD(x->err[0]),
                                    .report = TAKE_FD(x->report[0]),
                                    .signalfd = x->sigfd,
                                    .stdin_src = c->pass_stdin ? 0 : -1,
                                    .sync = x->sync[1],
                                    .init_pid = pid,
                                    .stdin_dst = x->in[0] >= 0 ? TAKE_FD(x->in[0]) : -1,
                                    .proxy = x->proxy};
    x->opened = true;
    return 0;
}

int sandbox_close(struct nsbox_sandbox *x, int r, struct nsbox_result *ret)
{
    const struct nsbox_config *c = &x->c;
    struct sandbox_plan *sb = &x->sb;

    /* Only a sandbox made whole was supervised: one whose making failed after the clone
     * (its uid_map, its cgroup) keeps the error sandbox_open() reported, and has nothing to
     * report on. */
    if (x->opened) {
        if (r < 0)
            (void)report_error(ret, r, "supervise", "supervising the sandbox failed: %s%s",
                               strerror(-r),
                               x->proxy && r == -ENOSYS
                                   ? " (--network allow= takes the proxy's socket from the "
                                     "sandbox with pidfd_getfd(2), Linux 5.6 or later)"
                                   : "");
        if (x->proxy)
            proxy_finish(x->proxy, &ret->network);
        shm_diagnose(c, ret);
        sandbox_describe_rootfs(sb->rootfs, ret);
        work_diagnose(c, ret);
        copy_out_finish(sb, ret, x->steps_mode);
        outputs_finish(sb, ret);
        kill_leftovers(sb, ret);
        if (sb->in_cgroup) {
            cgroup_leaf_stats(&x->leaf, &ret->cgroup);
            /* The cgroup's OOM killer sends SIGKILL; memory.events says it was the OOM
             * killer. */
            if (ret->cgroup.oom_kills > 0 && ret->status == NSBOX_STATUS_SIGNALED &&
                ret->signal == SIGKILL)
                ret->status = NSBOX_STATUS_OOM;
        }
    }

    if (x->leaf.dir_fd >= 0 && cgroup_leaf_destroy(&x->leaf) < 0 &&
        ret->status != NSBOX_STATUS_ERROR)
        (void)report_error(ret, -EBUSY, "cgroup", "removing cgroup %s failed", x->leaf.path);
    close_pair(x->out);
    close_pair(x->err);
    close_pair(x->sync);
    close_pair(x->report);
    close_pair(x->in);
    close_pair(x->control);
    if (x->pidfd >= 0)
        (void)close(x->pidfd);
    if (x->sigfd >= 0)
        (void)close(x->sigfd);
    x->pidfd = x->sigfd = -EBADF;
    if (x->mask_changed)
        (void)sigprocmask(SIG_SETMASK, &x->saved_mask, NULL);
    x->mask_changed = false;
    proxy_free(x->proxy);
    x->proxy = NULL;
    plan_free(sb);
    /* Invalid configuration is the caller's error; everything else is reported in *ret. */
    return r == -EINVAL && ret->status == NSBOX_STATUS_ERROR && ret->error_config ? -EINVAL : 0;
}

int nsbox_run(const struct nsbox_config *c, struct nsbox_result *ret)
{
    _cleanup_free_ struct nsbox_sandbox *x = calloc(1, sizeof(*x)); /* sandbox_state_init() */
    int r;

    if (!x) {
        *ret = (struct nsbox_result){0};
        return report_error(ret, -ENOMEM, "memory", "out of memory");
    }
    /* Tier 3 (tier3.h), only under --isolation landlock and only where no user namespace can
     * be made: a path of its own, without the sandbox's steps. */
    sandbox_state_init(x);
    x->c = *c;
    if (c->isolation == NSBOX_ISOLATION_LANDLOCK && tier3_needed(c)) {
        *ret = (struct nsbox_result){0};
        r = sandbox_signals(x, ret);
        if (r >= 0)
            r = tier3_run(c, x->sigfd, ret);
        if (x->sigfd >= 0)
            (void)close(x->sigfd);
        if (x->mask_changed)
            (void)sigprocmask(SIG_SETMASK, &x->saved_mask, NULL);
        return r == -EINVAL ? -EINVAL : 0;
    }
    r = sandbox_open(x, ret);
    if (r >= 0)
        r = supervise(&x->c, &x->fds, x->start, ret);
    return sandbox_close(x, r, ret);
}
