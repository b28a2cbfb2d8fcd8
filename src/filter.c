/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The built-in first filter: a deny list over SCMP_ACT_ALLOW. Every rule names why it is there.
 * Refusals return EPERM ("the sandbox forbids this"); clone3 returns ENOSYS so that glibc falls
 * back to clone(2), whose flags a filter can inspect (clone3 passes them behind a pointer).
 */
#include <errno.h>
#include <linux/sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "filter.h"
#include "macro.h"

/* Namespace flags a process inside could pass to clone(2). CLONE_NEWTIME shares its bit with
 * the exit signal in clone(2) and exists only for clone3, which is refused outright. */
static const unsigned long clone_namespace_flags[] = {
    CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
    CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
};

static const struct deny_rule {
    const char *name;
    int err;
    const char *why;
} deny_rules[] = {
    /* Nested namespaces: a new user namespace hands back a full capability set in it, the
     * first step of most container escapes through kernel bugs. */
    {"unshare", EPERM, "new namespaces would restore capabilities"},
    {"setns", EPERM, "joining other namespaces"},
    {"clone3", ENOSYS, "flags hidden behind a pointer; glibc falls back to clone"},
    /* The filesystem view is fixed once the payload starts. */
    {"mount", EPERM, "changing the filesystem view"},
    {"umount2", EPERM, "revealing what is mounted over"},
    {"pivot_root", EPERM, "changing the root"},
    {"chroot", EPERM, "changing the root"},
    {"open_tree", EPERM, "new mount API"},
    {"move_mount", EPERM, "new mount API"},
    {"fsopen", EPERM, "new mount API"},
    {"fsconfig", EPERM, "new mount API"},
    {"fsmount", EPERM, "new mount API"},
    {"fspick", EPERM, "new mount API"},
    {"mount_setattr", EPERM, "new mount API"},
    /* Other processes' memory and state. */
    {"ptrace", EPERM, "inspecting and controlling processes"},
    {"process_vm_readv", EPERM, "reading another process's memory"},
    {"process_vm_writev", EPERM, "writing another process's memory"},
    {"kcmp", EPERM, "comparing kernel objects of processes"},
    /* Kernel keyrings are not namespaced: keys could leak between sandboxes and the host. */
    {"keyctl", EPERM, "the keyring is not namespaced"},
    {"add_key", EPERM, "the keyring is not namespaced"},
    {"request_key", EPERM, "the keyring is not namespaced"},
    /* Large kernel attack surfaces a Python payload never needs. */
    {"bpf", EPERM, "eBPF verifier and maps: large attack surface"},
    {"perf_event_open", EPERM, "performance events: large attack surface, side channels"},
    {"userfaultfd", EPERM, "used to win kernel races in exploits"},
    {"io_uring_setup", EPERM, "io_uring bypasses system-call filtering"},
    {"io_uring_enter", EPERM, "io_uring bypasses system-call filtering"},
    {"io_uring_register", EPERM, "io_uring bypasses system-call filtering"},
    /* Whole-machine operations. */
    {"kexec_load", EPERM, "replacing the running kernel"},
    {"kexec_file_load", EPERM, "replacing the running kernel"},
    {"init_module", EPERM, "loading kernel modules"},
    {"finit_module", EPERM, "loading kernel modules"},
    {"delete_module", EPERM, "unloading kernel modules"},
    {"reboot", EPERM, "rebooting the machine"},
    {"swapon", EPERM, "changing swap"},
    {"swapoff", EPERM, "changing swap"},
    {"acct", EPERM, "process accounting"},
    {"quotactl", EPERM, "disk quotas"},
    {"settimeofday", EPERM, "setting the clock"},
    {"clock_settime", EPERM, "setting the clock"},
    {"clock_adjtime", EPERM, "setting the clock"},
    /* File handles skip path-based permission checks (the 2014 "shocker" Docker escape). */
    {"open_by_handle_at", EPERM, "opening files by handle bypasses path checks"},
    {"name_to_handle_at", EPERM, "file handles are only useful to open_by_handle_at"},
};

/* ioctl(2) commands that push input into a terminal, a way out through the caller's tty
 * (CVE-2017-5226 in bubblewrap). The kernel uses only the low 32 bits of the command, so the
 * compare is masked: a high bit set cannot slip past. */
static const unsigned long tty_injection_ioctls[] = {TIOCSTI, TIOCLINUX};

/* Socket families that reach past the sandbox's network namespace: vsock is not namespaced, and
 * talks to the hypervisor and the host's other guests (AF_VSOCK, vsock(7)). */
static const int refused_socket_families[] = {AF_VSOCK};

int filter_build(scmp_filter_ctx *ret)
{
    scmp_filter_ctx ctx;
    int r;

    ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return -ENOMEM;

    /* seccomp_init() adds only the native architecture: foreign ABIs (i386 through int 0x80,
     * and x32 system calls on x86-64, which libseccomp checks by number) take the bad-arch
     * action. Make that explicit: kill the whole process. */
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r < 0)
        goto fail;

    for (size_t i = 0; i < ELEMENTSOF(deny_rules); i++) {
        int nr = seccomp_syscall_resolve_name(deny_rules[i].name);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not a system call on this architecture */
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO((unsigned)deny_rules[i].err), nr, 0);
        if (r < 0)
            goto fail;
    }

    for (size_t i = 0; i < ELEMENTSOF(clone_namespace_flags); i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, clone_namespace_flags[i],
                                     clone_namespace_flags[i]));
        if (r < 0)
            goto fail;
    }

    for (size_t i = 0; i < ELEMENTSOF(tty_injection_ioctls); i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, tty_injection_ioctls[i]));
        if (r < 0)
            goto fail;
    }

    for (size_t i = 0; i < ELEMENTSOF(refused_socket_families); i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)refused_socket_families[i]));
        if (r < 0)
            goto fail;
    }

    *ret = ctx;
    return 0;
fail:
    seccomp_release(ctx);
    return r;
}

int filter_load(scmp_filter_ctx ctx)
{
    return seccomp_load(ctx);
}

int filter_dump(scmp_filter_ctx ctx, int fd)
{
    return seccomp_export_pfc(ctx, fd);
}
