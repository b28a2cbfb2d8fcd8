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

int caps_drop_all(struct report_step *e)
{
    static const char *const sets[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
    int r;

    capng_clear(CAPNG_SELECT_ALL);
    /* capng_apply() returns 0 or a negative code of its own (-1 .. -6), not an errno. It drops
     * the bounding set first, while CAP_SETPCAP is still effective. */
    r = capng_apply(CAPNG_SELECT_ALL);
    if (r != 0)
        return report_step_failed(e, -EPERM, "drop capabilities", "capng_apply: %d", r);

    /* Trust but verify: read every set back from the kernel, all five in one read of
     * /proc/self/status (proc(5): CapInh, CapPrm, CapEff, CapBnd, CapAmb, each a mask of all 64
     * bits, so also capabilities newer than libcap-ng and nsbox). It replaces a PR_CAPBSET_READ
     * and a PR_CAP_AMBIENT_IS_SET per capability (82 calls) and libcap-ng's capget(2) read-back
     * (capng_get_caps_process() reads this file as well). This is the sandbox's procfs: init
     * is PID 1 there, and "self" is init. */
    char status[4096];
    ssize_t n = read_file_at(AT_FDCWD, "/proc/self/status", status, sizeof(status));
    if (n < 0)
        return report_step_failed(e, (int)n, "drop capabilities", "read /proc/self/status");
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
    return 0;
}
