/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Workspaces: where they are, who owns them, one run at a time (workspace.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy.h"
#include "fileio.h"
#include "macro.h"
#include "parse.h"
#include "syscalls.h"
#include "workspace.h"

/* Whether st is a directory of the caller's that nobody else can write. */
static int check_owner(const struct stat *st, const char *path, char *why, size_t why_size)
{
    if (!S_ISDIR(st->st_mode))
        return why_fail(why, why_size, -ENOTDIR, "%s is not a directory", path);
    if (st->st_uid != geteuid())
        return why_fail(why, why_size, -EPERM,
                        "%s belongs to uid %u, not to you (uid %u): nsbox uses only workspaces of "
                        "the caller's own",
                        path, (unsigned)st->st_uid, (unsigned)geteuid());
    if (st->st_mode & 022)
        return why_fail(why, why_size, -EPERM,
                        "%s is writable by group or others (mode %04o): make it 0700", path,
                        (unsigned)(st->st_mode & 07777));
    return 0;
}

int workspace_base_open(bool create, char *path, size_t path_size, char *why, size_t why_size)
{
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char walked[PATH_MAX];
    struct stat st;
    int fd, r;

    /* XDG Base Directory: a relative $XDG_STATE_HOME is invalid and ignored. */
    if (state && state[0] == '/')
        r = snprintf(path, path_size, "%s/nsbox/workspaces", state);
    else if (home && home[0] == '/')
        r = snprintf(path, path_size, "%s/.local/state/nsbox/workspaces", home);
    else
        return why_fail(why, why_size, -ENOENT,
                        "neither $XDG_STATE_HOME nor $HOME is an absolute path: nsbox does not "
                        "know "
                        "where to keep workspaces");
    if (r < 0 || (size_t)r >= path_size)
        return why_fail(why, why_size, -ENAMETOOLONG, "the workspaces path is too long");
    if (create) {
        /* mkdir -p, 0700 for what is made (XDG: the state directory is the user's only). */
        for (char *p = path + 1; (p = strchr(p, '/')); p++) {
            *p = '\0';
            r = mkdir(path, 0700) < 0 && errno != EEXIST ? -errno : 0;
            *p = '/';
            if (r < 0)
                return why_fail(why, why_size, r, "cannot make the workspaces directory %s: %s",
                                path, strerror(-r));
        }
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
            return why_fail(why, why_size, -errno, "cannot make %s: %m", path);
    }
    /* Only root's symlinks are followed on the way (as for -v sources). */
    fd = path_open_nofollow(path, true, walked, sizeof(walked));
    if (fd == -ENOENT && !create)
        return why_fail(why, why_size, fd, "no workspaces yet (%s does not exist)", path);
    if (fd == -ELOOP)
        return why_fail(why, why_size, fd,
                        "%s: '%s' is a symlink, and nsbox follows only root's symlinks in "
                        "directories only root can write; set $XDG_STATE_HOME to the real path",
                        path, walked);
    if (fd < 0)
        return why_fail(why, why_size, fd, "%s: %s", path, strerror(-fd));
    if (fstat(fd, &st) < 0 || (r = check_owner(&st, path, why, why_size)) < 0) {
        r = r < 0 ? r : why_fail(why, why_size, -errno, "%s: %m", path);
        (void)close(fd);
        return r;
    }
    return fd;
}

int workspace_open(const char *name, bool create, struct workspace *ws, char *why, size_t why_size)
{
    char lock_name[NSBOX_NAME_MAX + 8];
    struct stat st;
    int r;

    *ws = (struct workspace){.base_fd = -EBADF, .lock_fd = -EBADF, .dir_fd = -EBADF};
    if (!run_name_is_valid(name) ||
        (strlen(name) > 5 && strcmp(name + strlen(name) - 5, ".lock") == 0))
        return why_fail(why, why_size, -EINVAL,
                        "invalid workspace name '%s': expected [a-zA-Z0-9][a-zA-Z0-9_.-]*, at most "
                        "%d bytes, not ending in .lock",
                        name, NSBOX_NAME_MAX);
    (void)snprintf(ws->name, sizeof(ws->name), "%s", name);
    r = workspace_base_open(create, ws->path, sizeof(ws->path), why, why_size);
    if (r < 0)
        return r;
    ws->base_fd = r;
    if (strlen(ws->path) + strlen(name) + 2 > sizeof(ws->path))
        return why_fail(why, why_size, -ENAMETOOLONG, "the workspace path is too long");
    strcat(ws->path, "/");
    strcat(ws->path, name);

    if (!create && fstatat(ws->base_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
        return why_fail(why, why_size, -ENOENT, "no workspace '%s' (nsbox workspace ls lists them)",
                        name);
    /* The lock first: whoever holds it owns NAME and its staging directory. */
    (void)snprintf(lock_name, sizeof(lock_name), "%s.lock", name);
    ws->lock_fd = openat(ws->base_fd, lock_name,
                         O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (ws->lock_fd < 0)
        return why_fail(why, why_size, -errno, "cannot open the lock of workspace %s: %m",
                        ws->path);
    if (fstat(ws->lock_fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
        return why_fail(why, why_size, -EPERM, "the lock of workspace %s is not a file of yours",
                        ws->path);
    if (flock(ws->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EWOULDBLOCK)
            return why_fail(why, why_size, -EBUSY,
                            "workspace '%s' is in use by another run or session: one at a time "
                            "per workspace (wait for it, or use another workspace)",
                            name);
        return why_fail(why, why_size, -errno, "cannot lock workspace %s: %m", ws->path);
    }

    if (create && mkdirat(ws->base_fd, name, 0700) < 0 && errno != EEXIST)
        return why_fail(why, why_size, -errno, "cannot make workspace %s: %m", ws->path);
    ws->dir_fd = openat(ws->base_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ws->dir_fd < 0 && errno == ENOENT)
        return why_fail(why, why_size, -ENOENT, "no workspace '%s' (nsbox workspace ls lists them)",
                        name);
    if (ws->dir_fd < 0)
        return why_fail(why, why_size, -errno, "cannot open workspace %s: %m", ws->path);
    if (fstat(ws->dir_fd, &st) < 0)
        return why_fail(why, why_size, -errno, "%s: %m", ws->path);
    return check_owner(&st, ws->path, why, why_size);
}

int workspace_commit(struct workspace *ws, const char *staging, char *why, size_t why_size)
{
    int fd, r;

    /* RENAME_EXCHANGE (Linux 3.15): the workspace is either the old tree or the new one,
     * whatever happens in between. */
    if (renameat2(ws->base_fd, staging, ws->base_fd, ws->name, RENAME_EXCHANGE) < 0)
        return why_fail(why, why_size, -errno, "cannot save workspace %s: %m", ws->path);
    fd = openat(ws->base_fd, ws->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        (void)close(ws->dir_fd);
        ws->dir_fd = fd;
    }
    r = copy_remove_tree(ws->base_fd, staging);
    if (r < 0)
        return why_fail(why, why_size, r,
                        "saved workspace %s, but removing its old files failed: %s", ws->path,
                        strerror(-r));
    return 0;
}

void workspace_close(struct workspace *ws)
{
    if (ws->dir_fd >= 0)
        (void)close(ws->dir_fd);
    if (ws->lock_fd >= 0)
        (void)close(ws->lock_fd);
    if (ws->base_fd >= 0)
        (void)close(ws->base_fd);
    ws->dir_fd = ws->lock_fd = ws->base_fd = -EBADF;
}
