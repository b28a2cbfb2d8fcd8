/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The rootfs a run uses when the config names none (nsbox_default_rootfs(), nsbox.h), and the
 * rootfs a run that failed to import a module ran on, with its profile (sandbox_describe_rootfs(),
 * sandbox.h), for the result's hint. Moved as they were from sandbox.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fileio.h"
#include "macro.h"
#include "sandbox.h"
#include "syscalls.h"

void sandbox_describe_rootfs(const char *rootfs, struct nsbox_result *ret)
{
    static const char needle[] = "ModuleNotFoundError";
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
    _cleanup_close_ int dir = -EBADF, fd = -EBADF;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    const char *p;

    if (!rootfs || !ret->err.data ||
        !memmem(ret->err.data, ret->err.captured, needle, sizeof(needle) - 1))
        return;
    (void)snprintf(ret->rootfs, sizeof(ret->rootfs), "%s", rootfs);
    dir = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return;
    fd = sys_openat2(dir, "usr/share/nsbox/profile", &how);
    if (fd < 0 || read_regular_fd(fd, 16384, &text, &len) < 0)
        return;
    /* "profile=NAME" on a line of its own (rootfs/nsbox-rootfs-build). */
    for (p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, "profile=", 8) == 0) {
            size_t n = strcspn(p + 8, "\n");
            if (n < sizeof(ret->rootfs_profile))
                (void)snprintf(ret->rootfs_profile, sizeof(ret->rootfs_profile), "%.*s", (int)n,
                               p + 8);
            break;
        }
}

const char *nsbox_default_rootfs(void)
{
    static char exe[4096];
    const char *env = getenv("NSBOX_ROOTFS");
    ssize_t n;

    if (env && env[0])
        return env;
    /* A binary that runs from the build tree uses the build tree's rootfs. */
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        if (strncmp(exe, NSBOX_BUILD_ROOT "/", strlen(NSBOX_BUILD_ROOT) + 1) == 0)
            return NSBOX_ROOTFS_BUILD;
    }
    return NSBOX_ROOTFS_INSTALLED;
}
