/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "caps.h"
#include "fileio.h"
#include "macro.h"
#include "report.h"

int caps_switch_ids(uid_t uid, gid_t gid, bool clear_groups, struct report_step *e)
{
    if (clear_groups && setgroups(0, NULL) < 0)
        return report_step_failed(e, negative_errno(), "switch ids", "setgroups");
    if (setresgid(gid, gid, gid) < 0)
        return report_step_failed(e, negative_errno(), "switch ids", "setresgid %u", (unsigned)gid);
    if (setresuid(uid, uid, uid) < 0)
        return report_step_failed(e, negative_errno(), "switch ids", "setresuid %u", (unsigned)uid);
    return 0;
}

int caps_drop_all(char **ret_status, struct report_step *e)
{
    static const char *const sets[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
    _cleanup_free_ char *status = NULL;
    int r;

    /* The bounding set first, while CAP_SETPCAP is still effective: one PR_CAPBSET_DROP per
     * capability (prctl(2); no call empties it at once), up to the kernel's last one, which
     * answers EINVAL past it. Done here rather than by capng_apply(CAPNG_SELECT_BOUNDS), which
     * reads /proc/PID/status before and after the loop to learn what the read-back below
     * checks anyway. */
    for (int cap = 0; cap < 64; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
            if (errno == EINVAL && cap > CAP_SETPCAP)
                break;
            return report_step_failed(e, negative_errno(), "drop capabilities",
                                      "PR_CAPBSET_DROP %d", cap);
        }

    /* Then the effective, permitted and inheritable sets (capset(2)) and the ambient set with
     * libcap-ng; capng_apply() returns 0 or a negative code of its own (-1 .. -6), not an errno. */
    capng_clear(CAPNG_SELECT_ALL);
    r = capng_apply(CAPNG_SELECT_CAPS | CAPNG_SELECT_AMBIENT);
    if (r != 0)
        return report_step_failed(e, -EPERM, "drop capabilities", "capng_apply: %d", r);

    /* Trust but verify: read every set back from the kernel, all five in one read of
     * /proc/self/status (proc(5): CapInh, CapPrm, CapEff, CapBnd, CapAmb, each a mask of all 64
     * bits, so also capabilities newer than libcap-ng and nsbox). It replaces a PR_CAPBSET_READ
     * and a PR_CAP_AMBIENT_IS_SET per capability (82 calls). This is the sandbox's procfs:
     * init is PID 1 there, and "self" is init. */
    r = proc_self_status_read(&status);
    if (r < 0)
        return report_step_failed(e, r, "drop capabilities", "read /proc/self/status");
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        uint64_t mask;
        r = proc_status_mask(status, sets[i], &mask);
        if (r < 0)
            return report_step_failed(e, r == -ENOENT ? -EPERM : r, "drop capabilities",
                                      "no %s in /proc/self/status", sets[i]);
        if (mask != 0)
            return report_step_failed(e, -EPERM, "drop capabilities",
                                      "%s is %#llx after dropping them all", sets[i],
                                      (unsigned long long)mask);
    }
    if (ret_status)
        *ret_status = TAKE_PTR(status);
    return 0;
}
