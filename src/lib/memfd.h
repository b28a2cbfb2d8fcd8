/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Memfds the payload could execute, where vm.memfd_noexec could not be set (issue 24, item 6).
 *
 * Root's runs set vm.memfd_noexec=2 in the sandbox's pid namespace (init.c): memfd_create(2)
 * with MFD_EXEC fails and every other memfd is sealed non-executable. An ordinary user cannot
 * write that file (only the host's root can, test_perm() in fs/proc/proc_sysctl.c), and
 * Landlock does not help: a memfd lives on the kernel's internal shm mount, and Landlock lets
 * every access to an internal filesystem through (is_access_to_paths_allowed() in
 * security/landlock/fs.c stops at the disconnected root of a MNT_INTERNAL mount with access
 * allowed; memfds are made by alloc_file_pseudo() on shm_mnt, a kern_mount(), mm/memfd.c and
 * mm/shmem.c), so execveat(fd, "", AT_EMPTY_PATH) and execve("/proc/self/fd/N") run what the
 * payload wrote, whatever the ruleset. So there a seccomp filter of its own refuses, with
 * EACCES as the kernel does, memfd_create with MFD_EXEC and, where the pid namespace's
 * vm.memfd_noexec is 0, memfd_create without MFD_NOEXEC_SEAL: the memfds that remain can never
 * be executable (F_SEAL_EXEC, mode 0666). A kernel before 6.3 has neither flag (no
 * /proc/sys/vm/memfd_noexec): there memfds stay executable, as the README says.
 */
#pragma once

#include "filter.h"
#include "report.h"
#include "plan.h"

/* What a memfd filter refuses: each level also what the ones before it do. Hugetlb memfds
 * everywhere: their F_SEAL_EXEC does not stop chmod +x (hugetlbfs_setattr() in
 * fs/hugetlbfs/inode.c, Linux 6.18), so where the host has huge pages (vm.nr_hugepages) one
 * made with MFD_NOEXEC_SEAL, also under vm.memfd_noexec=2, runs what the payload wrote in it. */
enum memfd_refuse {
    MEMFD_REFUSE_HUGETLB,  /* vm.memfd_noexec=2 */
    MEMFD_REFUSE_EXEC,     /* vm.memfd_noexec=1: and MFD_EXEC */
    MEMFD_REFUSE_UNSEALED, /* vm.memfd_noexec=0: and memfds without MFD_NOEXEC_SEAL */
};

/* The three programs, compiled at build time by nsbox-bpfgen (filter-default.c). */
extern const struct filter filter_memfd_hugetlb;  /* refuses MFD_HUGETLB */
extern const struct filter filter_memfd_exec;     /* ... and MFD_EXEC */
extern const struct filter filter_memfd_unsealed; /* ... and memfds without MFD_NOEXEC_SEAL */

/* Compile the program of level what into *ret. Returns 0 or -errno. */
int memfd_filter_compile(enum memfd_refuse what, struct filter *ret);

/* The program this pid namespace's vm.memfd_noexec calls for (see memfd_filter_join()), in
 * *ret; NULL on a kernel without it (before 6.3). Returns 0 or read(2)'s -errno. */
int memfd_filter_here(const struct filter **ret);

/* In init, before the policy's filters are loaded: join the program this pid namespace's
 * vm.memfd_noexec calls for (0: unsealed, 1: exec, 2, as init sets it in root's runs:
 * hugetlb; a kernel without it, before 6.3, has no non-executable memfd: none) after the last
 * of sb->filter's programs (filter_join_memfd()), which then answers for it. Returns 0 or
 * -errno with *e filled. */
int memfd_filter_join(struct sandbox_plan *sb, struct report_step *e);
