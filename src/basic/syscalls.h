/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Every raw system call nsbox makes, and the kernel constants older headers lack, live here.
 * Each wrapper returns what the kernel returns (-1 with errno set on failure).
 */
#pragma once

#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef P_PIDFD
#define P_PIDFD 3 /* waitid(2) on a pidfd, Linux 5.4 */
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC 0x00000001
#endif
#ifndef FSMOUNT_CLOEXEC
#define FSMOUNT_CLOEXEC 0x00000001
#endif
#ifndef FSCONFIG_SET_STRING
#define FSCONFIG_SET_STRING 1
#define FSCONFIG_CMD_CREATE 6
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif

/* struct clone_args as of Linux 5.7 (CLONE_ARGS_SIZE_VER2), spelt out so that old headers work. */
struct nsbox_clone_args {
    uint64_t flags;
    uint64_t pidfd;
    uint64_t child_tid;
    uint64_t parent_tid;
    uint64_t exit_signal;
    uint64_t stack;
    uint64_t stack_size;
    uint64_t tls;
    uint64_t set_tid;
    uint64_t set_tid_size;
    uint64_t cgroup;
};

struct nsbox_mount_attr {
    uint64_t attr_set;
    uint64_t attr_clr;
    uint64_t propagation;
    uint64_t userns_fd;
};

/* clone3(2) without CLONE_VM behaves like fork(): it returns 0 in the child, which runs on a
 * copy of the parent's stack. */
static inline long sys_clone3(struct nsbox_clone_args *args)
{
    return syscall(SYS_clone3, args, sizeof(*args));
}

/* clone(2) as fork(2) does it (no new stack), for kernels without clone3 (Linux < 5.3); with
 * CLONE_PIDFD in flags the pidfd is stored in *ret_pidfd (the parent_tid argument). The child
 * must not rely on glibc's cached thread id (raise(3)). The argument order is x86-64's (flags,
 * stack, parent_tid, child_tid, tls). */
static inline long sys_clone_fork(unsigned long flags, int *ret_pidfd)
{
    return syscall(SYS_clone, flags, NULL, ret_pidfd, NULL, 0);
}

/* pidfd_open(2), Linux 5.3: a pidfd of an existing process (a child not yet reaped: no pid
 * reuse race). */
static inline int sys_pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static inline int sys_pidfd_send_signal(int pidfd, int sig)
{
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* pidfd_getfd(2), Linux 5.6: a copy of descriptor fd of the process pidfd names (needs
 * PTRACE_MODE_ATTACH_REALCREDS on it). */
static inline int sys_pidfd_getfd(int pidfd, int fd, unsigned flags)
{
    return (int)syscall(SYS_pidfd_getfd, pidfd, fd, flags);
}

static inline int sys_open_tree(int dfd, const char *path, unsigned flags)
{
    return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static inline int sys_move_mount(int from_dfd, const char *from_path, int to_dfd,
                                 const char *to_path, unsigned flags)
{
    return (int)syscall(SYS_move_mount, from_dfd, from_path, to_dfd, to_path, flags);
}

static inline int sys_mount_setattr(int dfd, const char *path, unsigned flags,
                                    struct nsbox_mount_attr *attr)
{
    return (int)syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof(*attr));
}

/* The file system context API (Linux 5.2): a filesystem made as a detached mount. */
static inline int sys_fsopen(const char *fstype, unsigned flags)
{
    return (int)syscall(SYS_fsopen, fstype, flags);
}

static inline int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux)
{
    return (int)syscall(SYS_fsconfig, fd, cmd, key, value, aux);
}

static inline int sys_fsmount(int fd, unsigned flags, unsigned attr_flags)
{
    return (int)syscall(SYS_fsmount, fd, flags, attr_flags);
}

static inline int sys_pivot_root(const char *new_root, const char *put_old)
{
    return (int)syscall(SYS_pivot_root, new_root, put_old);
}

/* getsockopt(2): a pidfd of a unix socket's peer (Linux 6.5; 77 on every architecture but a
 * few with their own socket.h numbering, which nsbox does not build for). */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
/* memfd_create(2) flags and a seal of Linux 6.3: a memfd that can never be executable. */
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif
#ifndef RESOLVE_NO_SYMLINKS
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#define RESOLVE_IN_ROOT 0x10
struct open_how {
    uint64_t flags;
    uint64_t mode;
    uint64_t resolve;
};
#endif

/* openat2(2), Linux 5.6. */
static inline int sys_openat2(int dfd, const char *path, struct open_how *how)
{
    return (int)syscall(SYS_openat2, dfd, path, how, sizeof(*how));
}

static inline int sys_close_range(unsigned first, unsigned last, unsigned flags)
{
    return (int)syscall(SYS_close_range, first, last, flags);
}

/* seccomp(2): operation SECCOMP_SET_MODE_FILTER with args a struct sock_fprog (with
 * SECCOMP_FILTER_FLAG_NEW_LISTENER it returns the listener's descriptor). */
static inline int sys_seccomp(unsigned operation, unsigned flags, void *args)
{
    return (int)syscall(SYS_seccomp, operation, flags, args);
}

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444 /* the same on every architecture */
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

/* landlock_create_ruleset(2), Linux 5.13; with LANDLOCK_CREATE_RULESET_VERSION (attr NULL,
 * size 0) it returns the Landlock ABI version. */
static inline int sys_landlock_create_ruleset(const void *attr, size_t size, uint32_t flags)
{
    return (int)syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

/* Landlock (landlock(7), include/uapi/linux/landlock.h), spelt out so that old headers work:
 * each right and flag with the ABI version that brought it. */
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#define NSBOX_LANDLOCK_RULE_PATH_BENEATH 1
#define NSBOX_LANDLOCK_RULE_NET_PORT 2               /* ABI 4 */
#define NSBOX_LANDLOCK_ACCESS_FS_EXECUTE (1ULL << 0) /* ABI 1, and the 12 below */
#define NSBOX_LANDLOCK_ACCESS_FS_WRITE_FILE (1ULL << 1)
#define NSBOX_LANDLOCK_ACCESS_FS_READ_FILE (1ULL << 2)
#define NSBOX_LANDLOCK_ACCESS_FS_READ_DIR (1ULL << 3)
#define NSBOX_LANDLOCK_ACCESS_FS_REMOVE_DIR (1ULL << 4)
#define NSBOX_LANDLOCK_ACCESS_FS_REMOVE_FILE (1ULL << 5)
#define NSBOX_LANDLOCK_ACCESS_FS_MAKE_CHAR (1ULL << 6)
#define NSBOX_LANDLOCK_ACCESS_FS_MAKE_DIR (1ULL << 7)
#define NSBOX_LANDLOCK_ACCESS_FS_MAKE_REG (1ULL << 8)
#define NSBOX_LANDLOCK_ACCESS_FS_MAKE_SOCK (1ULL << 9)
#define NSBOX_LANDLOCK_ACCESS_FS_MAKE_FIFO (1ULL << 10)
#define NSBOX_LANDLOCK_ACCESS_FS_MAKE_BLOCK (1ULL << 11)
#define NSBOX_LANDLOCK_ACCESS_FS_MAKE_SYM (1ULL << 12)
#define NSBOX_LANDLOCK_ACCESS_FS_REFER (1ULL << 13)     /* ABI 2 */
#define NSBOX_LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define NSBOX_LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#define NSBOX_LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)  /* ABI 4 */
#define NSBOX_LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#define NSBOX_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define NSBOX_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)

/* struct landlock_ruleset_attr as of ABI 6; the kernel takes a shorter size from older ABIs. */
struct nsbox_landlock_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net; /* ABI 4 */
    uint64_t scoped;             /* ABI 6 */
};

struct nsbox_landlock_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

struct nsbox_landlock_net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
};

static inline int sys_landlock_add_rule(int ruleset_fd, int rule_type, const void *attr,
                                        uint32_t flags)
{
    return (int)syscall(SYS_landlock_add_rule, ruleset_fd, rule_type, attr, flags);
}

/* Needs no_new_privs (or CAP_SYS_ADMIN in the user namespace); the domain holds for the thread
 * and everything it starts from then on. */
static inline int sys_landlock_restrict_self(int ruleset_fd, uint32_t flags)
{
    return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, flags);
}
