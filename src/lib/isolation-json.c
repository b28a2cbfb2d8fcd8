/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The result's "isolation" field (isolation.h). Pure: also in the unit tests' library. */
#include "isolation.h"
#include "macro.h"

static const struct {
    unsigned bit;
    const char *name;
} missing_names[] = {
    {NSBOX_MISSING_USERNS_LIMITS, "user.max_* limits"},
    {NSBOX_MISSING_SHM_LIMITS, "kernel.shm* limits"},
    {NSBOX_MISSING_USER_NS, "user namespace"},
    {NSBOX_MISSING_PID_NS, "pid namespace"},
    {NSBOX_MISSING_NET_NS, "network namespace"},
    {NSBOX_MISSING_MOUNT_NS, "mount namespace"},
    {NSBOX_MISSING_IPC_NS, "ipc namespace"},
    {NSBOX_MISSING_UTS_NS, "uts namespace"},
    {NSBOX_MISSING_CGROUP_NS, "cgroup namespace"},
    {NSBOX_MISSING_ROOTFS, "rootfs"},
    {NSBOX_MISSING_CGROUP, "cgroup"},
};

json_t *isolation_json(const struct nsbox_result *ret)
{
    json_t *list;

    if (ret->isolation_tier == 0)
        return json_null();
    list = json_array();
    for (size_t i = 0; list && i < ELEMENTSOF(missing_names); i++)
        if (ret->isolation_missing & missing_names[i].bit)
            (void)json_array_append_new(list, json_string(missing_names[i].name));
    return json_pack("{s:i, s:o}", "tier", ret->isolation_tier, "missing",
                     list ? list : json_array());
}
