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
#include "sandbox.h"

/* The two programs, compiled at build time by nsbox-bpfgen (filter-default.c). */
extern const struct filter filter_memfd_exec;     /* refuses MFD_EXEC */
extern const struct filter filter_memfd_unsealed; /* ... and memfds without MFD_NOEXEC_SEAL */

/* Compile one of them (refuse_unsealed: the second) into *ret. Returns 0 or -errno. */
int memfd_filter_compile(bool refuse_unsealed, struct filter *ret);

/* In init, before the policy's filters, in a sandbox where init did not set vm.memfd_noexec=2
 * itself: load the program this pid namespace's vm.memfd_noexec calls for (0: the second, 1:
 * the first, 2 or a kernel without it: none). Returns 0 or -errno with *e filled. */
int memfd_filter_load(const struct sandbox *sb, struct report_step *e);
