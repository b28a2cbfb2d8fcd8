/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <cap-ng.h>
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "caps.h"
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
    int r;

    capng_clear(CAPNG_SELECT_ALL);
    /* capng_apply() returns 0 or a negative code of its own (-1 .. -6), not an errno. It drops
     * the bounding set first, while CAP_SETPCAP is still effective. */
    r = capng_apply(CAPNG_SELECT_ALL);
    if (r != 0)
        return report_step_failed(e, -EPERM, "drop capabilities", "capng_apply: %d", r);

    /* Trust but verify: read every set back from the kernel. */
    if (capng_get_caps_process() != 0)
        return report_step_failed(e, -EPERM, "drop capabilities", "read them back");
    if (capng_have_capabilities(CAPNG_SELECT_CAPS) != CAPNG_NONE)
        return report_step_failed(e, -EPERM, "drop capabilities", "a capability survived");
    for (int cap = 0; cap <= CAP_LAST_CAP + 16; cap++) {
        int in_bounding = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (in_bounding < 0)
            break; /* EINVAL: past the kernel's last capability */
        if (in_bounding > 0)
            return report_step_failed(e, -EPERM, "drop capabilities",
                                      "capability %d survived in the bounding set", cap);
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) > 0)
            return report_step_failed(e, -EPERM, "drop capabilities",
                                      "capability %d survived in the ambient set", cap);
    }
    return 0;
}
