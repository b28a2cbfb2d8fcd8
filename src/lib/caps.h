/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Credentials and capabilities of the sandbox's processes (libcap-ng). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "report.h"

/*
 * Switch to uid:gid inside the user namespace: setgroups(2) to an empty list when
 * clear_groups (only possible where setgroups is "allow", i.e. a privileged caller), then
 * setresgid(2), then setresuid(2). Capabilities in the namespace are kept: the namespace's
 * root uid is not involved, so the setuid capability rules of capabilities(7) clear nothing.
 * Returns 0 or -errno of the failing call (-EPERM, -EINVAL for an unmapped id), with *e naming
 * it (step "switch ids").
 */
int caps_switch_ids(uid_t uid, gid_t gid, bool clear_groups, struct report_step *e);

/*
 * Empty every capability set of the calling process: the bounding set with PR_CAPBSET_DROP
 * (prctl(2)), then ambient, inheritable, permitted and effective with libcap-ng; then read
 * them all back from /proc/self/status and fail if any survived. Needs CAP_SETPCAP (held by
 * the namespace's creator) for the bounding set. On success, *ret_status (if not NULL) gets
 * that read of /proc/self/status (malloc'd, the caller frees it), for others to reuse.
 * Returns 0; -EPERM when a drop failed or capng_apply() did (its own codes are not errnos) or
 * a capability is still present afterwards, -errno of a failed read, with *e saying which
 * (step "drop capabilities").
 */
int caps_drop_all(char **ret_status, struct report_step *e);
