/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <cap-ng.h>
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "caps.h"
#include "macro.h"

int caps_switch_ids(uid_t uid, gid_t gid, bool clear_groups)
{
    if (clear_groups && setgroups(0, NULL) < 0)
        return negative_errno();
    if (setresgid(gid, gid, gid) < 0)
        return negative_errno();
    if (setresuid(uid, uid, uid) < 0)
        return negative_errno();
    return 0;
}

int caps_drop_all(void)
{
    int r;

    capng_clear(CAPNG_SELECT_ALL);
    /* capng_apply() returns 0 or a negative code of its own (-1 .. -6), not an errno. It drops
     * the bounding set first, while CAP_SETPCAP is still effective. */
    r = capng_apply(CAPNG_SELECT_ALL);
    if (r != 0)
        return -EPERM;

    /* Trust but verify: read every set back from the kernel. */
    if (capng_get_caps_process() != 0)
        return -EPERM;
    if (capng_have_capabilities(CAPNG_SELECT_CAPS) != CAPNG_NONE)
        return -EPERM;
    for (int cap = 0; cap <= CAP_LAST_CAP + 16; cap++) {
        int in_bounding = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (in_bounding < 0)
            break; /* EINVAL: past the kernel's last capability */
        if (in_bounding > 0)
            return -EPERM;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) > 0)
            return -EPERM;
    }
    return 0;
}
