/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nsbox-probe: run inside the sandbox, make system calls with arguments chosen to fail
 * harmlessly (bad pointers, bad descriptors, invalid flags) and print, one per line,
 *   NAME ERRNO        (0 when the call succeeded)
 * The tests compare that with what the seccomp policy should answer: a call the filter allows
 * fails with EFAULT, EBADF or EINVAL, or succeeds; one it refuses fails with the policy's errno.
 * Static, so that it runs in any rootfs; built without sanitizers.
 *
 *   nsbox-probe [NAME...]    (no NAME: every probe)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BAD 1UL /* a pointer no process can have mapped */
#define NOFD ((unsigned long)-1)
#define CWD ((unsigned long)AT_FDCWD)
#define SETUID 04755UL
#define SETGID 02755UL
#define HIGH (1UL << 32) /* a bit the kernel ignores in an int or mode_t argument */
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* Linux 6.6; the same number on every architecture */
#endif

static const struct probe {
    const char *name;
    long nr;
    unsigned long a[6];
} probes[] = {
    /* refused by the default policy */
    {"unshare", SYS_unshare, {~0UL}},
    {"setns", SYS_setns, {NOFD, 0}},
    {"clone-newuser", SYS_clone, {CLONE_NEWUSER | CLONE_THREAD}},
    {"clone-newns", SYS_clone, {CLONE_NEWNS | CLONE_THREAD}},
    {"clone-newnet", SYS_clone, {CLONE_NEWNET | CLONE_THREAD}},
    {"clone-newpid", SYS_clone, {CLONE_NEWPID | CLONE_THREAD}},
    {"clone3", SYS_clone3, {BAD, 0}},
    {"openat2", SYS_openat2, {CWD, BAD, BAD, 24}},
    {"mount", SYS_mount, {BAD, BAD, BAD, 0, BAD}},
    {"umount2", SYS_umount2, {BAD, 0}},
    {"pivot_root", SYS_pivot_root, {BAD, BAD}},
    {"chroot", SYS_chroot, {BAD}},
    {"open_tree", SYS_open_tree, {NOFD, BAD, 0}},
    {"move_mount", SYS_move_mount, {NOFD, BAD, NOFD, BAD, 0}},
    {"fsopen", SYS_fsopen, {BAD, 0}},
    {"mknod-chr", SYS_mknod, {BAD, S_IFCHR | 0600, 0x103}},
    {"mknod-chr-high", SYS_mknod, {BAD, HIGH | S_IFCHR | 0600, 0x103}},
    {"mknodat-blk", SYS_mknodat, {CWD, BAD, S_IFBLK | 0600, 0x800}},
    {"mknod-fifo-setuid", SYS_mknod, {BAD, S_IFIFO | SETUID, 0}},
    {"mknodat-fifo-setgid", SYS_mknodat, {CWD, BAD, S_IFIFO | SETGID, 0}},
    {"sched_setscheduler-fifo", SYS_sched_setscheduler, {0, SCHED_FIFO, BAD}},
    {"sched_setscheduler-rr", SYS_sched_setscheduler, {0, SCHED_RR, BAD}},
    {"socket-udplite", SYS_socket, {AF_INET, SOCK_DGRAM, 136 /* IPPROTO_UDPLITE */}},
    {"socket-netlink-route", SYS_socket, {AF_NETLINK, SOCK_DGRAM, 0 /* NETLINK_ROUTE */}},
    {"socket-netlink-audit", SYS_socket, {AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */}},
    {"ptrace", SYS_ptrace, {0xdead, 0, 0, 0}},
    {"process_vm_readv", SYS_process_vm_readv, {0, BAD, 1, BAD, 1, 0}},
    {"process_vm_writev", SYS_process_vm_writev, {0, BAD, 1, BAD, 1, 0}},
    {"keyctl", SYS_keyctl, {~0UL}},
    {"add_key", SYS_add_key, {BAD, BAD, BAD, 0, 0}},
    {"request_key", SYS_request_key, {BAD, BAD, BAD, 0}},
    {"bpf", SYS_bpf, {~0UL, BAD, 0}},
    {"perf_event_open", SYS_perf_event_open, {BAD, 0, ~0UL, ~0UL, 0}},
    {"userfaultfd", SYS_userfaultfd, {~0UL}},
    {"io_uring_setup", SYS_io_uring_setup, {1, BAD}},
    {"kexec_load", SYS_kexec_load, {0, 0, BAD, 0}},
    {"init_module", SYS_init_module, {BAD, 0, BAD}},
    {"finit_module", SYS_finit_module, {NOFD, BAD, 0}},
    {"delete_module", SYS_delete_module, {BAD, 0}},
    {"reboot", SYS_reboot, {0, 0, 0, 0}},
    {"swapon", SYS_swapon, {BAD, 0}},
    {"acct", SYS_acct, {BAD}},
    {"settimeofday", SYS_settimeofday, {BAD, BAD}},
    {"clock_settime", SYS_clock_settime, {0, BAD}},
    {"open_by_handle_at", SYS_open_by_handle_at, {NOFD, BAD, 0}},
    {"name_to_handle_at", SYS_name_to_handle_at, {NOFD, BAD, BAD, BAD, 0}},
    {"socket-inet", SYS_socket, {AF_INET, SOCK_STREAM, 0}},
    {"socket-inet6", SYS_socket, {AF_INET6, SOCK_DGRAM, 0}},
    {"socket-netlink", SYS_socket, {AF_NETLINK, SOCK_RAW, 0}},
    {"socket-vsock", SYS_socket, {40 /* AF_VSOCK */, SOCK_STREAM, 0}},
    {"socket-inet-high-bits", SYS_socket, {(1UL << 32) | AF_INET, SOCK_STREAM, 0}},
    {"socketpair-inet", SYS_socketpair, {AF_INET, SOCK_STREAM, 0, BAD}},
    {"setrlimit-core", SYS_setrlimit, {4 /* RLIMIT_CORE */, BAD}},
    {"prlimit64-core", SYS_prlimit64, {0, 4 /* RLIMIT_CORE */, BAD, 0}},
    {"ioctl-tiocsti", SYS_ioctl, {0, TIOCSTI, BAD}},
    {"ioctl-tiocsti-high", SYS_ioctl, {0, TIOCSTI | (1UL << 32), BAD}},
    {"ioctl-tioclinux", SYS_ioctl, {0, TIOCLINUX, BAD}},
    {"ioctl-tiocsetd", SYS_ioctl, {0, TIOCSETD, BAD}},
    {"ioctl-tiocsetd-high", SYS_ioctl, {0, TIOCSETD | (1UL << 32), BAD}},
    {"inotify_init", SYS_inotify_init, {0}},
    {"inotify_init1", SYS_inotify_init1, {~0UL /* bad flags: EINVAL where allowed */}},
    {"personality-norandom", SYS_personality, {0x0040000 /* ADDR_NO_RANDOMIZE */}},
    {"chmod-setuid", SYS_chmod, {BAD, SETUID}},
    {"chmod-setgid", SYS_chmod, {BAD, SETGID}},
    {"chmod-setuid-high", SYS_chmod, {BAD, HIGH | SETUID}},
    {"fchmod-setuid", SYS_fchmod, {NOFD, SETUID}},
    {"fchmod-setgid", SYS_fchmod, {NOFD, SETGID}},
    {"fchmodat-setuid", SYS_fchmodat, {CWD, BAD, SETUID}},
    {"fchmodat-setgid", SYS_fchmodat, {CWD, BAD, SETGID}},
    {"fchmodat2-setuid", SYS_fchmodat2, {CWD, BAD, SETUID, 0}},
    {"creat-setuid", SYS_creat, {BAD, SETUID}},
    {"creat-setgid", SYS_creat, {BAD, SETGID}},
    {"mkdir-setgid", SYS_mkdir, {BAD, SETGID}},
    {"mkdirat-setuid", SYS_mkdirat, {CWD, BAD, SETUID}},
    {"open-creat-setuid", SYS_open, {BAD, O_CREAT | O_WRONLY, SETUID}},
    {"open-creat-setgid", SYS_open, {BAD, O_CREAT | O_WRONLY, SETGID}},
    {"open-tmpfile-setuid", SYS_open, {BAD, O_TMPFILE | O_WRONLY, SETUID}},
    {"openat-creat-setuid", SYS_openat, {CWD, BAD, O_CREAT | O_WRONLY, SETUID}},
    {"openat-creat-setgid-high", SYS_openat, {CWD, BAD, HIGH | O_CREAT | O_WRONLY, HIGH | SETGID}},
    {"openat-tmpfile-setgid", SYS_openat, {CWD, BAD, O_TMPFILE | O_WRONLY, SETGID}},
    /* allowed by the default policy */
    {"read", SYS_read, {NOFD, BAD, 1}},
    {"write", SYS_write, {NOFD, BAD, 1}},
    {"openat", SYS_openat, {NOFD, BAD, 0}},
    {"socket-unix", SYS_socket, {AF_UNIX, SOCK_STREAM, 0}},
    {"socketpair-unix", SYS_socketpair, {AF_UNIX, SOCK_STREAM, 0, BAD}},
    {"prlimit64-core-query", SYS_prlimit64, {0, 4 /* RLIMIT_CORE */, 0, BAD}},
    {"setrlimit-nofile", SYS_setrlimit, {7 /* RLIMIT_NOFILE */, BAD}},
    {"ioctl-tiocgwinsz", SYS_ioctl, {0, TIOCGWINSZ, BAD}},
    {"clone-thread-only", SYS_clone, {CLONE_THREAD}},
    {"personality-query", SYS_personality, {0xffffffffUL}},
    {"prctl", SYS_prctl, {~0UL}},
    {"getpid", SYS_getpid, {0}},
    {"chmod-0755", SYS_chmod, {BAD, 0755}},
    {"fchmod-0644", SYS_fchmod, {NOFD, 0644}},
    {"fchmodat-1777", SYS_fchmodat, {CWD, BAD, 01777}},
    {"mkdir-0755", SYS_mkdir, {BAD, 0755}},
    {"creat-0644", SYS_creat, {BAD, 0644}},
    {"openat-creat-0755", SYS_openat, {CWD, BAD, O_CREAT | O_WRONLY, 0755}},
    {"openat-setuid-without-creat", SYS_openat, {CWD, BAD, O_RDONLY, SETUID}},
    {"mknod-fifo", SYS_mknod, {BAD, S_IFIFO | 0644, 0}},
    {"mknod-fifo-high", SYS_mknod, {BAD, HIGH | S_IFIFO | 0644, 0}},
    {"mknod-sock", SYS_mknod, {BAD, S_IFSOCK | 0644, 0}},
    {"mknod-regular", SYS_mknod, {BAD, 0644, 0}},
    {"mknodat-fifo", SYS_mknodat, {CWD, BAD, S_IFIFO | 0600, 0}},
    {"mknodat-reg", SYS_mknodat, {CWD, BAD, S_IFREG | 0600, 0}},
    {"sched_setscheduler-other", SYS_sched_setscheduler, {0, SCHED_OTHER, BAD}},
    {"sched_setscheduler-batch", SYS_sched_setscheduler, {0, SCHED_BATCH, BAD}},
    {"sched_setscheduler-idle-reset",
     SYS_sched_setscheduler,
     {0, SCHED_IDLE | SCHED_RESET_ON_FORK, BAD}},
    {"sched_setattr", SYS_sched_setattr, {0, BAD, 0}},
    {"sched_setparam", SYS_sched_setparam, {0, BAD}},
    {"setpriority", SYS_setpriority, {~0UL /* bad which */, 0, 0}},
    {"sync", SYS_sync, {0}},
    {"syncfs", SYS_syncfs, {NOFD}},
    {"getcpu", SYS_getcpu, {0, 0, 0}},
    {"ioprio_get", SYS_ioprio_get, {~0UL /* bad which */, 0}},
    {"ioprio_set", SYS_ioprio_set, {~0UL, 0, 0}},
    {"mlockall", SYS_mlockall, {0 /* no flags: EINVAL */}},
    {"munlockall", SYS_munlockall, {0}},
    {"get_mempolicy", SYS_get_mempolicy, {0, 0, 0, 0, ~0UL /* bad flags */}},
    {"set_mempolicy", SYS_set_mempolicy, {~0UL /* bad mode */, 0, 0}},
    {"mbind", SYS_mbind, {0, 0, ~0UL /* bad mode */, 0, 0, 0}},
    {"landlock_create_ruleset", SYS_landlock_create_ruleset, {0, 0, ~0UL /* bad flags */}},
    {"landlock_add_rule", SYS_landlock_add_rule, {NOFD, 1, BAD, 0}},
    {"landlock_restrict_self", SYS_landlock_restrict_self, {NOFD, 0}},
    /* a number no kernel or libseccomp knows */
    {"nr-1000", 1000, {0}},
};

static void run(const struct probe *p)
{
    long r;

    errno = 0;
    r = syscall(p->nr, p->a[0], p->a[1], p->a[2], p->a[3], p->a[4], p->a[5]);
    if (r >= 0 && (p->nr == SYS_socket || p->nr == SYS_inotify_init))
        (void)close((int)r);
    printf("%s %d\n", p->name, r < 0 ? errno : 0);
    fflush(stdout);
}

int main(int argc, char *argv[])
{
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        int selected = argc < 2;
        for (int j = 1; j < argc; j++)
            selected = selected || strcmp(argv[j], probes[i].name) == 0;
        if (selected)
            run(&probes[i]);
    }
    return 0;
}
