/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The plan of a run's copies (copy.h), in the supervisor, before any namespace exists: what
 * goes in (--copy-in, the workspace) packed into a memfd for init to unpack, and where what
 * comes out goes (--copy-out's host directories, the workspace's staging directory) opened.
 * Called by plan_sandbox() (plan.c); errors and warnings go into the result (report.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "binds.h"
#include "copy.h"
#include "fileio.h"
#include "macro.h"
#include "parse.h"
#include "plan.h"
#include "report.h"
#include "workspace.h"

/* A sandbox path for --copy-in, --copy-out, -w: absolute, no "." or "..", not in /proc or /dev. */
static int check_sandbox_path(const char *path, const char *what, struct nsbox_result *ret)
{
    if (!path_is_safe_target(path) || strcmp(path, "/") == 0)
        return report_config_error(ret, -EINVAL,
                                   "%s '%s' must be an absolute path inside the sandbox, not '/', "
                                   "without "
                                   "'.' or '..'",
                                   what, path ? path : "");
    if (path_is_at_or_below(path, "/proc") || path_is_at_or_below(path, "/dev"))
        return report_config_error(ret, -EINVAL, "%s '%s': /proc and /dev are nsbox's", what, path);
    return 0;
}

/* Open a host directory for copy-out, made (0755) when missing; never through a symlink but
 * root's (path_open_nofollow()), never in a writable bind of the run (dir_in_writable_bind()):
 * there the payload could rename the directory and plant a symlink in its place, and the
 * result's host_path would name a file of its choosing. */
static int open_copy_out_dir(const char *path, const struct nsbox_config *c,
                             struct nsbox_result *ret)
{
    char walked[PATH_MAX];
    struct stat st;
    bool made;
    int fd, r;

    if (!path || path[0] != '/')
        return report_config_error(ret, -EINVAL,
                                   "--copy-out host directory '%s' is not an "
                                   "absolute path",
                                   path ? path : "");
    made = mkdir(path, 0755) == 0;
    if (!made && errno != EEXIST)
        return report_error(ret, negative_errno(), "copy-out",
                            "cannot make the --copy-out directory '%s': %m", path);
    fd = path_open_nofollow(path, true, walked, sizeof(walked));
    if (fd == -ELOOP)
        return report_error(ret, fd, "copy-out",
                            "--copy-out %s: '%s' is a symlink, and nsbox follows only root's "
                            "symlinks in directories only root can write: name the real directory",
                            path, walked);
    if (fd < 0)
        return report_error(ret, fd, "copy-out", "--copy-out directory '%s': %s", path,
                            strerror(-fd));
    if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
        (void)close(fd);
        return report_error(ret, -ENOTDIR, "copy-out", "--copy-out '%s' is not a directory", path);
    }
    if ((r = dir_in_writable_bind(fd, c->binds, c->n_binds)) != -ENOENT) {
        (void)close(fd);
        if (made) /* nothing runs yet: the directory made a moment ago is the one named */
            (void)rmdir(path);
    }
    if (r >= 0)
        return report_error(ret, -EPERM, "copy-out", RW_COPY_OUT, path, c->binds[r].source);
    return r == -ENOENT ? fd : report_error(ret, r, "copy-out", "--copy-out '%s': %m", path);
}

int copy_in_open(const char *host, char *why, size_t why_size)
{
    char walked[PATH_MAX];
    int fd;

    fd = path_open_nofollow(host, true, walked, sizeof(walked));
    if (fd == -ELOOP)
        (void)snprintf(why, why_size,
                       "--copy-in %s: '%s' is a symlink, and nsbox follows only root's symlinks "
                       "in directories only root can write: name the path it points to",
                       host, walked);
    else if (fd < 0)
        (void)snprintf(why, why_size, "--copy-in source '%s': %s", host, strerror(-fd));
    return fd;
}

/* Pack what goes in (--copy-in, the workspace) into a memfd for init to unpack, and open where
 * what comes out goes. All host paths are opened here, as the caller, refusing symlinks as -v
 * does; the sandbox never sees a host path. */
int plan_copies(struct sandbox_plan *sb, struct nsbox_result *ret)
{
    const struct nsbox_config *c = sb->config;
    struct copy_caps in_caps = {.max_bytes = c->workdir_size, .fail = true};
    struct copy_packer *p = NULL;
    struct copy_stats stats;
    char why[512] = "";
    int r;

    if (c->workdir && (r = check_sandbox_path(c->workdir, "-w", ret)) < 0)
        return r;
    if (c->workdir_size == 0)
        return report_config_error(ret, -EINVAL, "--workdir-size must be above 0");
    if ((c->n_copy_out || c->workspace) && c->pid_host)
        return report_config_error(ret, -EINVAL,
                                   "--copy-out and --workspace need the sandbox's own pid "
                                   "namespace (not "
                                   "--pid host): the copy is taken when every process of the "
                                   "sandbox is "
                                   "gone, which only a pid namespace makes sure of");
    /* A workspace is /work: a mount over it would hide the workspace's files and have the
     * mount's saved into it instead. */
    for (size_t i = 0; c->workspace && i < sb->n_mounts; i++)
        if (path_is_at_or_below("/work", sb->mounts[i].target))
            return report_config_error(ret, -EINVAL,
                                       "--workspace is /work, and %s %s is mounted over it: drop "
                                       "one of "
                                       "the two",
                                       sb->mounts[i].is_tmpfs ? "--tmpfs" : "-v",
                                       sb->mounts[i].target);
    if ((c->n_copy_out || c->workspace) &&
        (c->copy_out_max_bytes == 0 || c->copy_out_max_files == 0))
        return report_config_error(ret, -EINVAL,
                                   "--copy-out-max-bytes and --copy-out-max-files must be above 0");
    /* What goes in is bounded by what the sandbox's tmpfs mounts can hold. */
    for (size_t i = 0; i < sb->n_mounts; i++)
        if (sb->mounts[i].is_tmpfs)
            in_caps.max_bytes += sb->mounts[i].size;
    /* ... and so is the number of files: a tmpfs holds one inode per KiB (mount.c). */
    in_caps.max_files = in_caps.max_bytes / 1024;

    if (!c->n_copy_in && !c->n_copy_out && !c->workspace)
        return 0;
    /* Now, while host libraries are reachable: init uses it inside (copy.h). */
    r = copy_load(why, sizeof(why));
    if (r < 0)
        return report_error(ret, r, "copy", "%s", why);

    if (c->workspace) {
        r = workspace_open(c->workspace, true, &sb->ws, why, sizeof(why));
        if (r < 0)
            return report_error(ret, r, "workspace", "%s", why);
        (void)snprintf(ret->workspace, sizeof(ret->workspace), "%s", c->workspace);
    }

    if (c->n_copy_in || c->workspace) {
        sb->copy_in_fd = memfd_create("nsbox-copy-in", MFD_CLOEXEC);
        if (sb->copy_in_fd < 0)
            return report_error(ret, negative_errno(), "copy-in", "memfd_create: %m");
        r = copy_packer_new(sb->copy_in_fd, &in_caps, &p, why, sizeof(why));
        if (r < 0)
            return report_error(ret, r, "copy-in", "%s", why);
        if (c->workspace) {
            /* The workspace holds what /work held: NAME/work (none yet on first use). */
            _cleanup_close_ int wfd = openat(sb->ws.dir_fd, "work",
                                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            char shown[sizeof(sb->ws.path) + 16], main_py[sizeof(shown) + 16];
            struct copy_source src = {.src_fd = wfd, .prefix = "work", .shown = shown};
            (void)snprintf(shown, sizeof(shown), "%s/work", sb->ws.path);
            (void)snprintf(main_py, sizeof(main_py), "%s/main.py", shown);
            /* Saved by a run without --code: --code's own main.py is the one (read-only). */
            if (c->code)
                src.exclude = main_py;
            if (wfd < 0 && errno != ENOENT) {
                r = report_error(ret, negative_errno(), "workspace", "%s/work: %m", sb->ws.path);
                goto in_fail_reported;
            }
            r = wfd < 0 ? 0 : copy_pack(p, &src, false, why, sizeof(why));
            if (r < 0)
                goto in_fail;
        }
        for (size_t i = 0; i < c->n_copy_in; i++) {
            const struct nsbox_copy *cp = &c->copy_in[i];
            _cleanup_close_ int fd = -EBADF;
            struct copy_source src;

            r = check_sandbox_path(cp->sandbox, "--copy-in target", ret);
            if (r < 0)
                goto in_fail_reported;
            if (!cp->host || cp->host[0] != '/') {
                r = report_config_error(ret, -EINVAL,
                                        "--copy-in source '%s' is not an "
                                        "absolute path",
                                        cp->host ? cp->host : "");
                goto in_fail_reported;
            }
            fd = copy_in_open(cp->host, why, sizeof(why));
            if (fd < 0) {
                r = report_error(ret, fd, "copy-in", "%s", why);
                goto in_fail_reported;
            }
            src = (struct copy_source){.src_fd = fd, .prefix = cp->sandbox + 1, .shown = cp->host};
            if (c->code) /* the project's own main.py, run with --code: there already */
                src = (struct copy_source){.src_fd = fd,
                                           .prefix = cp->sandbox + 1,
                                           .shown = cp->host,
                                           .same_name = "work/main.py",
                                           .same_data = c->code,
                                           .same_size = c->code_size};
            r = copy_pack(p, &src, false, why, sizeof(why));
            if (r < 0)
                goto in_fail;
        }
        r = copy_packer_finish(p, &stats, why, sizeof(why));
        p = NULL;
        if (r < 0)
            return report_error(ret, r, "copy-in", "%s", why);
        if (stats.skipped) {
            copy_stats_named(&stats, why, sizeof(why));
            report_warning(c, ret,
                           "copy-in: %llu entr%s not copied (only regular files and directories "
                           "are: symlinks, devices, FIFOs and sockets are left out, and so are "
                           "files past the room of the sandbox's tmpfs mounts): %s",
                           (unsigned long long)stats.skipped,
                           stats.skipped == 1 ? "y was" : "ies were", why);
        }
    }

    if (c->n_copy_out || c->workspace) {
        size_t n = c->n_copy_out + (c->workspace ? 1 : 0);
        ret->copy_out_asked = true;
        sb->out_fds = calloc(n, sizeof(int));
        sb->out_host_paths = calloc(n, sizeof(char *));
        sb->out_shown = calloc(n, sizeof(char *));
        if (!sb->out_fds || !sb->out_host_paths || !sb->out_shown)
            return report_error(ret, -ENOMEM, "copy-out", "out of memory");
        for (size_t i = 0; i < n; i++)
            sb->out_fds[i] = -EBADF;
        sb->n_out = n;
        for (size_t i = 0; i < c->n_copy_out; i++) {
            r = check_sandbox_path(c->copy_out[i].sandbox, "--copy-out source", ret);
            if (r < 0)
                return r;
            r = open_copy_out_dir(c->copy_out[i].host, c, ret);
            if (r < 0)
                return r;
            sb->out_fds[i] = r;
            sb->out_host_paths[i] = c->copy_out[i].host;
            /* Owned: init wipes the memory of nsbox's argv, where the option's value lives. */
            sb->out_shown[i] = strdup(c->copy_out[i].sandbox);
            if (!sb->out_shown[i])
                return report_error(ret, -ENOMEM, "copy-out", "out of memory");
        }
        if (c->workspace) {
            /* A fresh staging directory: what a run copies back lands there, and replaces the
             * workspace only when complete (workspace_commit()). Ours under the lock. */
            (void)snprintf(sb->ws_staging, sizeof(sb->ws_staging), ".%s.new", c->workspace);
            r = copy_remove_tree(sb->ws.base_fd, sb->ws_staging);
            if (r >= 0 && mkdirat(sb->ws.base_fd, sb->ws_staging, 0700) < 0)
                r = negative_errno();
            if (r >= 0) {
                r = openat(sb->ws.base_fd, sb->ws_staging,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (r < 0)
                    r = negative_errno();
            }
            if (r < 0)
                return report_error(ret, r, "workspace",
                                    "cannot make the staging directory of workspace %s: %s",
                                    sb->ws.path, strerror(-r));
            sb->out_fds[n - 1] = r;
            sb->out_shown[n - 1] = strdup("/work");
            if (!sb->out_shown[n - 1])
                return report_error(ret, -ENOMEM, "workspace", "out of memory");
        }
        sb->copy_out_fd = memfd_create("nsbox-copy-out", MFD_CLOEXEC);
        if (sb->copy_out_fd < 0)
            return report_error(ret, negative_errno(), "copy-out", "memfd_create: %m");
    }
    return 0;

in_fail:
    if (r == -EFBIG)
        (void)report_error(ret, r, "copy-in",
                           "the files to copy in are larger than the sandbox's tmpfs mounts can "
                           "hold (%s; raise --workdir-size or the --tmpfs size)",
                           why);
    else
        (void)report_error(ret, r, "copy-in", "%s", why);
in_fail_reported:
    if (p)
        (void)copy_packer_finish(p, NULL, why, sizeof(why));
    return r;
}

/* An outcome warning, heard by c's warn callback when there is a config. */
static void copy_outcome(const struct nsbox_config *c, struct nsbox_result *ret, const char *text)
{
    if (c)
        report_outcome_warning(c, ret, "%s", text);
    else
        report_add_warning(ret, true, text);
}

int copy_out_unpack(int fd, const struct copy_target *target, const struct copy_caps *caps,
                    const struct nsbox_config *c, struct nsbox_result *ret)
{
    char why[512] = "", text[800];
    int r = copy_unpack(fd, target, caps, ret, why, sizeof(why));

    if (r < 0) {
        ret->copy_out_done = false;
        (void)snprintf(text, sizeof(text),
                       "copy-out failed on the host: %s; what was written before is listed", why);
        copy_outcome(c, ret, text);
        return r;
    }
    ret->copy_out_complete = ret->n_skipped == 0 && ret->skipped_more == 0;
    if (!ret->copy_out_complete) {
        (void)snprintf(text, sizeof(text),
                       "copy-out is not complete: %zu entr%s skipped (listed in copy_out.skipped, "
                       "with why: only regular files and directories are copied, within "
                       "--copy-out-max-files %llu and --copy-out-max-bytes %llu)",
                       ret->n_skipped + (size_t)ret->skipped_more,
                       ret->n_skipped + ret->skipped_more == 1 ? "y was" : "ies were",
                       (unsigned long long)caps->max_files, (unsigned long long)caps->max_bytes);
        copy_outcome(c, ret, text);
    }
    return r;
}
