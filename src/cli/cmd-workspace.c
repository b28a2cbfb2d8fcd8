/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox workspace ls | rm NAME | export NAME DIR: this user's workspaces (workspace.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd-workspace.h"
#include "copy.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "workspace.h"

#define EXIT_NSBOX_FAILURE 125

static int usage_error(void)
{
    log_error("usage: nsbox workspace ls | rm NAME | export NAME DIR");
    return EXIT_NSBOX_FAILURE;
}

/* Bytes and files below dirfd, never following a symlink. */
static void tree_size(int dirfd, uint64_t *bytes, uint64_t *files, int depth)
{
    _cleanup_closedir_ DIR *d = NULL;
    struct dirent *de;
    int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);

    if (fd < 0 || depth > 64 || !(d = fdopendir(fd))) {
        if (fd >= 0 && !d)
            (void)close(fd);
        return;
    }
    while ((de = readdir(d))) {
        struct stat st;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISREG(st.st_mode)) {
            *bytes += (uint64_t)st.st_size;
            (*files)++;
        } else if (S_ISDIR(st.st_mode)) {
            _cleanup_close_ int sub = openat(dirfd, de->d_name,
                                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                tree_size(sub, bytes, files, depth + 1);
        }
    }
}

static int ls(void)
{
    char path[4096], why[512];
    _cleanup_close_ int base = workspace_base_open(false, path, sizeof(path), why, sizeof(why));
    _cleanup_closedir_ DIR *d = NULL;
    struct dirent *de;
    int fd;

    if (base == -ENOENT)
        return 0; /* none yet */
    if (base < 0) {
        log_error("%s", why);
        return EXIT_NSBOX_FAILURE;
    }
    fd = openat(base, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || !(d = fdopendir(fd))) {
        log_error_errno(negative_errno(), "%s: %m", path);
        if (fd >= 0)
            (void)close(fd);
        return EXIT_NSBOX_FAILURE;
    }
    (void)printf("%-32s %10s %8s\n", "NAME", "BYTES", "FILES");
    while ((de = readdir(d))) {
        _cleanup_close_ int ws = -EBADF;
        uint64_t bytes = 0, files = 0;
        if (!run_name_is_valid(de->d_name) ||
            (strlen(de->d_name) > 5 && strcmp(de->d_name + strlen(de->d_name) - 5, ".lock") == 0))
            continue;
        ws = openat(base, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ws < 0)
            continue;
        tree_size(ws, &bytes, &files, 0);
        (void)printf("%-32s %10llu %8llu\n", de->d_name, (unsigned long long)bytes,
                     (unsigned long long)files);
    }
    return 0;
}

static int rm(const char *name)
{
    struct workspace ws;
    char why[512], lock[NSBOX_NAME_MAX + 8];
    int r = workspace_open(name, false, &ws, why, sizeof(why));

    if (r < 0) {
        log_error("%s", why);
        workspace_close(&ws);
        return EXIT_NSBOX_FAILURE;
    }
    r = copy_remove_tree(ws.base_fd, name);
    if (r >= 0) {
        (void)snprintf(lock, sizeof(lock), "%s.lock", name);
        (void)unlinkat(ws.base_fd, lock, 0);
    }
    workspace_close(&ws);
    if (r < 0) {
        log_error_errno(r, "removing workspace '%s' failed: %m", name);
        return EXIT_NSBOX_FAILURE;
    }
    return 0;
}

/* Copy the workspace into dir through the same stream and checks as copy-out: regular files
 * and directories, written below dir by descriptor, never through a symlink. */
static int export(const char *name, const char *dir)
{
    struct workspace ws;
    struct copy_caps caps = {0};
    struct copy_packer *p = NULL;
    char why[512], resolved[PATH_MAX * 2], walked[PATH_MAX], cwd[PATH_MAX];
    _cleanup_close_ int mem = -EBADF, out = -EBADF;
    struct nsbox_result res = {0};
    int r;

    if (dir[0] == '/')
        (void)snprintf(resolved, sizeof(resolved), "%s", dir);
    else if (getcwd(cwd, sizeof(cwd)))
        (void)snprintf(resolved, sizeof(resolved), "%s/%s", cwd, dir);
    else
        return log_error_errno(negative_errno(), "%s: %m", dir), EXIT_NSBOX_FAILURE;
    r = workspace_open(name, false, &ws, why, sizeof(why));
    if (r < 0) {
        log_error("%s", why);
        workspace_close(&ws);
        return EXIT_NSBOX_FAILURE;
    }
    if (mkdir(resolved, 0755) < 0 && errno != EEXIST) {
        r = log_error_errno(negative_errno(), "cannot make '%s': %m", resolved);
        goto out;
    }
    out = path_open_nofollow(resolved, true, walked, sizeof(walked));
    if (out < 0) {
        r = log_error_errno(out, "'%s': %s", out == -ELOOP ? walked : resolved,
                            out == -ELOOP ? "a symlink (nsbox follows only root's)"
                                          : strerror(-out));
        goto out;
    }
    mem = memfd_create("nsbox-export", MFD_CLOEXEC);
    if (mem < 0) {
        r = log_error_errno(negative_errno(), "memfd_create: %m");
        goto out;
    }
    r = copy_packer_new(mem, &caps, &p, why, sizeof(why));
    if (r >= 0) {
        _cleanup_close_ int work = openat(ws.dir_fd, "work",
                                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (work >= 0)
            r = copy_pack(p, &(struct copy_source){.src_fd = work, .prefix = "", .shown = ws.path},
                          true, why, sizeof(why));
    }
    if (p) {
        int k = copy_packer_finish(p, NULL, why, sizeof(why));
        r = r < 0 ? r : k;
    }
    if (r >= 0) {
        int roots[1] = {out};
        const char *paths[1] = {resolved};
        r = copy_unpack(mem,
                        &(struct copy_target){.root_fds = roots,
                                              .root_paths = paths,
                                              .n_roots = 1,
                                              .host = true,
                                              .shown_prefix = "/work/"},
                        &caps, &res, why, sizeof(why));
    }
    if (r < 0) {
        log_error("exporting workspace '%s' failed: %s", name, why);
        goto out;
    }
    for (size_t i = 0; i < res.n_skipped; i++)
        log_warning("not exported: %s (%s)", res.skipped[i].path, res.skipped[i].reason);
    (void)printf("exported %zu files of workspace '%s' to %s\n", res.n_copied, name, resolved);
out:
    nsbox_result_free(&res);
    workspace_close(&ws);
    return r < 0 ? EXIT_NSBOX_FAILURE : 0;
}

int workspace_main(int argc, char *argv[])
{
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        (void)printf("Usage: nsbox workspace ls | rm NAME | export NAME DIR\n\n"
                     "Workspaces keep /work between runs (nsbox run --workspace NAME). They live\n"
                     "below $XDG_STATE_HOME/nsbox/workspaces (default ~/.local/state).\n");
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "ls") == 0)
        return ls();
    if (argc == 3 && strcmp(argv[1], "rm") == 0)
        return rm(argv[2]);
    if (argc == 4 && strcmp(argv[1], "export") == 0)
        return export(argv[2], argv[3]);
    return usage_error();
}
