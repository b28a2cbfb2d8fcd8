/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* uid_map, gid_map and setgroups of the sandbox's user namespace (user_namespaces(7)). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Format the one-line map "INSIDE OUTSIDE 1\n" into buf (size bytes). Pure.
 * Returns the length written, or -ENOBUFS when buf is too small. */
int idmap_format(char *buf, size_t size, unsigned inside, unsigned outside);

/*
 * Write the maps of the user namespace of process pid, from its parent (or, pid 0, of the
 * caller's own namespace, from inside it: /proc/self): inside uid -> host_uid and inside gid ->
 * host_gid, a single id each.
 *
 * deny_setgroups: write "deny" to /proc/PID/setgroups first. Required before an unprivileged
 * writer may write gid_map (Linux 3.19, CVE-2014-8989: otherwise setgroups(2) could drop a group
 * that denies access). A privileged writer leaves it "allow" so the sandbox can clear its
 * supplementary groups itself.
 *
 * Returns 0, or -errno from open(2)/write(2): -EPERM when the caller may not map host_uid or
 * host_gid, -ESRCH/-ENOENT when the process is gone.
 */
int idmap_write(pid_t pid, uid_t inside_uid, uid_t host_uid, gid_t inside_gid, gid_t host_gid,
                bool deny_setgroups);
