/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "idmap.h"
#include "macro.h"

int idmap_format(char *buf, size_t size, unsigned inside, unsigned outside)
{
    int n = snprintf(buf, size, "%u %u 1\n", inside, outside);
    if (n < 0 || (size_t)n >= size)
        return -ENOBUFS;
    return n;
}

int idmap_write(pid_t pid, uid_t inside_uid, uid_t host_uid, gid_t inside_gid, gid_t host_gid,
                bool deny_setgroups)
{
    char path[64], map[64];
    _cleanup_close_ int dirfd = -EBADF;
    int r;

    if (pid == 0)
        (void)snprintf(path, sizeof(path), "/proc/self");
    else
        (void)snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    dirfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return negative_errno();

    if (deny_setgroups) {
        r = write_file_at(dirfd, "setgroups", "deny");
        if (r < 0)
            return r;
    }
    r = idmap_format(map, sizeof(map), inside_uid, host_uid);
    if (r < 0)
        return r;
    r = write_file_at(dirfd, "uid_map", map);
    if (r < 0)
        return r;
    r = idmap_format(map, sizeof(map), inside_gid, host_gid);
    if (r < 0)
        return r;
    return write_file_at(dirfd, "gid_map", map);
}
