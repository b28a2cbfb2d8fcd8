/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "binds.h"
#include "fileio.h"
#include "macro.h"

size_t binds_writable_ids(const struct nsbox_bind *binds, size_t n, struct stat *ret)
{
    size_t found = 0;

    for (size_t i = 0; i < n; i++) {
        char walked[PATH_MAX];
        int fd = -EBADF;

        ret[i] = (struct stat){0};
        if (binds[i].writable && binds[i].source)
            fd = path_open_nofollow(binds[i].source, true, walked, sizeof(walked));
        if (fd < 0)
            continue;
        if (fstat(fd, &ret[i]) == 0)
            found++;
        else
            ret[i] = (struct stat){0};
        (void)close(fd);
    }
    return found;
}

int dir_in_writable_bind(int dirfd, const struct nsbox_bind *binds, size_t n)
{
    _cleanup_free_ struct stat *sources = NULL, *up = NULL;
    int k;

    if (n == 0)
        return -ENOENT;
    sources = calloc(n, sizeof(*sources));
    up = calloc(PATH_MAX / 2, sizeof(*up));
    if (!sources || !up)
        return -ENOMEM;
    if (binds_writable_ids(binds, n, sources) == 0)
        return -ENOENT;
    k = dir_ancestry(dirfd, up, PATH_MAX / 2);
    for (int i = 0; i < k; i++) {
        ssize_t found = stat_find(&up[i], sources, n);
        if (found >= 0)
            return (int)found;
    }
    return k < 0 ? k : -ENOENT;
}
