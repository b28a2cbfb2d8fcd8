/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tier of isolation a run gets: see isolation.h. */
#include <errno.h>
#include <sys/statvfs.h>

#include "isolation.h"
#include "report.h"

/* Whether /proc/sys is mounted read-only here: the runtimes bind it read-only over the
 * container's procfs (statvfs(3) reports the mount's MS_RDONLY as ST_RDONLY). One system
 * call; a /proc/sys that cannot be looked at is left to init_sysctls() to fail on. */
static bool proc_sys_read_only(void)
{
    struct statvfs st;
    return statvfs("/proc/sys", &st) == 0 && (st.f_flag & ST_RDONLY);
}

int isolation_plan(const struct nsbox_config *c, struct sandbox_plan *sb, struct nsbox_result *ret)
{
    ret->isolation_tier = 1;
    if (!proc_sys_read_only())
        return 0;

    /* A read-only /proc/sys is a mount over a directory that is not empty, locked once
     * clone3() copies it into the sandbox's user namespace: /proc is then not "fully visible"
     * and the kernel refuses a fresh procfs (mnt_already_visible() in fs/namespace.c; EPERM).
     * Checked on Linux 6.1 and 6.12: a wall, said here before the sandbox is made rather than
     * as the sysctl or mount step it would stop at. Only --pid host, which binds the host's
     * /proc instead, gets further. */
    if (!c->pid_host)
        return report_error(ret, -EPERM, "mount /proc",
                            "/proc/sys is read-only here, as in a container's masked /proc "
                            "by default: the kernel refuses the sandbox a fresh /proc under such "
                            "a mount; 'nsbox doctor' names the container setting that unmasks "
                            "it");
    if (c->isolation == NSBOX_ISOLATION_FULL)
        return report_error(ret, -EPERM, "isolation",
                            "--isolation full: /proc/sys is read-only here, as in a container "
                            "by default, so the sandbox's user namespace cannot get its own "
                            "user.max_* limits (tier 2); 'nsbox doctor' names the container "
                            "setting that unmasks it, or drop --isolation full");

    ret->isolation_tier = 2;
    ret->isolation_missing = NSBOX_MISSING_USERNS_LIMITS;
    /* The kernel.shm* that init would set in the host root's runs (init_sysctls()); without
     * them System V shared memory is refused by seccomp, as in an ordinary user's run
     * (sandbox.c), or counted by the cgroup. */
    if (sb->host_root && !c->ipc_host && c->memory && c->uid != 0)
        ret->isolation_missing |= NSBOX_MISSING_SHM_LIMITS;
    sb->sysctls_read_only = true;
    sb->host_root = false;
    report_warning(c, ret,
                   "isolation tier 2: /proc/sys is read-only (a container's default), so the "
                   "sandbox's user namespace keeps the kernel's user.max_* limits: inotify and "
                   "new namespaces are refused by seccomp%s, fanotify needs the host's "
                   "CAP_SYS_ADMIN%s; 'nsbox doctor' names the fix (--isolation full refuses this)",
                   c->seccomp_disabled ? " (not under --no-seccomp: then only the caller's own "
                                         "per-user budget bounds them)"
                                       : "",
                   ret->isolation_missing & NSBOX_MISSING_SHM_LIMITS
                       ? "; kernel.shm* is not set either (System V shared memory as in an "
                         "ordinary user's run, see limits_note)"
                       : "");
    return 0;
}
