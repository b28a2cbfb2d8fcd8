/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The memfd filters' compiler (memfd.h), run at build time by nsbox-bpfgen. */
#include <errno.h>
#include <sys/mman.h>

#include "memfd.h"
#include "syscalls.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

int memfd_filter_compile(bool refuse_unsealed, struct filter *ret)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    struct filter f = {0};
    int r;

    if (!ctx)
        return -ENOMEM;
    /* The flags are an unsigned int: only the low 32 bits are compared (as the policy's
     * refusals do), so high bits set cannot slip past. */
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r >= 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(memfd_create), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, MFD_EXEC, MFD_EXEC));
    if (r >= 0 && refuse_unsealed)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(memfd_create), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, MFD_NOEXEC_SEAL, 0));
    if (r >= 0)
        r = filter_export_program(ctx, &f.prog[0]);
    seccomp_release(ctx);
    if (r < 0)
        return r;
    f.n_prog = 1;
    *ret = f;
    return 0;
}
