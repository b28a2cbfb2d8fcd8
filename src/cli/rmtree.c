/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Safe removal of a directory tree that another uid may still be changing (the self-test's
 * trial directories, which the sandbox's host uid could write): no symlink is ever followed,
 * the walk never leaves the tree's file system, and its depth costs no more than a bounded
 * number of descriptors. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "rmtree.h"

struct level {
    int fd; /* -1 while closed to stay within the descriptor limit */
    dev_t dev;
    ino_t ino;
};

#define OPEN_LEVELS 128 /* descriptors held open at most; deeper ones are closed and reopened */

/* Remove what can be removed of dir: its files, its empty directories. Returns 1 when the first
 * non-empty directory found must be entered (*ret_name), 0 when dir is empty, or -errno: of
 * reading dir, or of the first entry that cannot be removed (EACCES, EPERM, EBUSY), once the
 * rest of dir is done. Such an entry ends the walk: entering or reading dir again would only
 * find it again (an endless walk, or one stopped by its step budget). */
static int clear_one(int dir, char *ret_name, size_t size)
{
    int copy = dup(dir);
    DIR *d = copy >= 0 ? fdopendir(copy) : NULL;
    struct dirent *de;
    int failed = 0;

    if (!d) {
        if (copy >= 0)
            (void)close(copy);
        return -errno;
    }
    rewinddir(d); /* a dup shares the offset of an earlier walk */
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (unlinkat(dir, de->d_name, 0) == 0 || errno == ENOENT)
            continue;
        if (errno == EISDIR) {
            if (unlinkat(dir, de->d_name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                continue;
            if (errno == ENOTEMPTY || errno == EEXIST) { /* rmdir(2): either may say so */
                (void)snprintf(ret_name, size, "%s", de->d_name);
                (void)closedir(d);
                return 1;
            }
        }
        if (failed == 0)
            failed = -errno;
    }
    (void)closedir(d);
    return failed;
}

/* Remove everything below the directory top, however deep, never following a symlink, never
 * leaving its file system, holding at most OPEN_LEVELS descriptors: past that, an upper level
 * is closed and reopened later through ".." of the level below, checked against the device
 * and inode it had. Whatever a writer changes meanwhile is at worst left behind, never
 * followed. Returns 0 when top is empty, else -errno (rmtree.h). */
int rmtree_below(int top)
{
    _cleanup_free_ struct level *st = NULL;
    size_t n = 0, cap = 0;
    unsigned long budget = 1UL << 22;
    struct stat s0;
    int r = 0;

    if (fstat(top, &s0) < 0)
        return -errno;
    for (;;) {
        char name[NAME_MAX + 1];
        struct level *cur;
        int dir;

        if (budget-- == 0) {
            r = -E2BIG;
            break;
        }
        dir = n == 0 ? top : st[n - 1].fd;
        r = clear_one(dir, name, sizeof(name));
        if (r < 0)
            break;
        if (r == 1) {
            struct stat sub;
            int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 || fstat(fd, &sub) < 0 || sub.st_dev != s0.st_dev) {
                r = fd < 0 ? -errno : -EXDEV;
                if (fd >= 0)
                    (void)close(fd);
                break;
            }
            if (n == cap) {
                struct level *grown = realloc(st, (cap ? 2 * cap : 64) * sizeof(*st));
                if (!grown) {
                    (void)close(fd);
                    r = -ENOMEM;
                    break;
                }
                st = grown;
                cap = cap ? 2 * cap : 64;
            }
            st[n++] = (struct level){.fd = fd, .dev = sub.st_dev, .ino = sub.st_ino};
            if (n > OPEN_LEVELS && st[n - 1 - OPEN_LEVELS].fd >= 0) {
                (void)close(st[n - 1 - OPEN_LEVELS].fd);
                st[n - 1 - OPEN_LEVELS].fd = -1;
            }
            continue;
        }
        if (n == 0)
            return 0; /* top is empty */
        /* This level is empty: back up (its parent removes it on its next pass). */
        cur = &st[n - 1];
        if (n >= 2 && st[n - 2].fd < 0) {
            struct stat up;
            int fd = openat(cur->fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 || fstat(fd, &up) < 0 || up.st_dev != st[n - 2].dev ||
                up.st_ino != st[n - 2].ino) {
                if (fd >= 0)
                    (void)close(fd);
                r = -ELOOP;
                break;
            }
            st[n - 2].fd = fd;
        }
        (void)close(cur->fd);
        n--;
    }
    for (size_t i = 0; i < n; i++)
        if (st[i].fd >= 0)
            (void)close(st[i].fd);
    return r < 0 ? r : -ENOTEMPTY;
}
