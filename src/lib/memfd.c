/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Memfds the payload could execute: see memfd.h for why a seccomp filter. */
#include <errno.h>
#include <fcntl.h>

#include "fileio.h"
#include "memfd.h"
#include "syscalls.h"

int memfd_filter_here(const struct filter **ret)
{
    char value[16] = "";
    int r;

    /* The pid namespace's own value, the larger of its own and its parents' (read through
     * pid_mfd_noexec_dointvec_minmax(), kernel/pid_sysctl.h). */
    *ret = NULL;
    r = read_file_at(AT_FDCWD, "/proc/sys/vm/memfd_noexec", value, sizeof(value));
    if (r == -ENOENT)
        return 0; /* before Linux 6.3: no way to make a memfd that cannot be executed */
    if (r < 0)
        return r;
    *ret = value[0] == '2'   ? &filter_memfd_hugetlb
           : value[0] == '1' ? &filter_memfd_exec
                             : &filter_memfd_unsealed;
    return 0;
}

int memfd_filter_join(struct sandbox_plan *sb, struct report_step *e)
{
    const struct filter *memfd;
    int r = memfd_filter_here(&memfd);

    if (r < 0)
        return report_step_failed(e, r, "seccomp", "read /proc/sys/vm/memfd_noexec");
    if (!memfd)
        return 0;
    r = filter_join_memfd(&sb->filter, memfd);
    if (r < 0)
        return report_step_failed(e, r, "seccomp", "the memfd filter");
    return 0;
}
