/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What follows a sandbox's supervision (sandbox-end.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "copy.h"
#include "fileio.h"
#include "outputs.h"
#include "report.h"
#include "sandbox-end.h"
#include "uidpool.h"
#include "workspace.h"

/* Below this much room, /dev/shm counts as full: a page fault of memory mapped from it finds
 * no page (tmpfs allocates in pages, and large folios where enabled). */
#define SHM_FULL_SLACK (64 * 1024)

/* A payload that died of SIGBUS with /dev/shm full ran out of --shm-size: a store to memory
 * mapped from a file there (POSIX shared memory, multiprocessing's) found no page, and the
 * kernel answers that with SIGBUS (shmem_fault()). Say so, rather than leave the caller to
 * suspect --memory. */
void shm_diagnose(const struct nsbox_config *c, struct nsbox_result *ret)
{
    if (ret->status != NSBOX_STATUS_SIGNALED || ret->signal != SIGBUS || ret->shm_used == 0 ||
        ret->shm_free >= SHM_FULL_SLACK)
        return;
    ret->shm_full = true;
    report_outcome_warning(c, ret,
                           "the payload died of SIGBUS with /dev/shm full (%.3g MiB used of "
                           "--shm-size "
                           "%.3g MiB): a write to memory mapped from a file there found no room; "
                           "raise "
                           "--shm-size (this is not --memory)",
                           (double)ret->shm_used / (1 << 20), (double)c->shm_size / (1 << 20));
}

/* Without a pid namespace, what the payload started in the background can outlive the run;
 * when the run's host ids are its own (uidpool.h), every process of them is the run's, and they
 * must all be gone before the ids go back to the pool. */
void kill_leftovers(const struct sandbox_plan *sb, struct nsbox_result *ret)
{
    int r;

    if (sb->host_ids_lock < 0 || !sb->config->pid_host)
        return;
    r = uidpool_kill_all(sb->host_uid);
    if (r >= 0)
        r = uidpool_mark(sb->host_ids_lock, sb->host_uid, false);
    if (r < 0)
        report_warning(sb->config, ret,
                       "--pid host: killing what the payload left in the background failed (%s): "
                       "processes of host uid %u may outlive the run (the next run of root to "
                       "take the id kills them first)",
                       strerror(-r), (unsigned)sb->host_uid);
}

/* Less than this free in /work: the payload's writes there may have met ENOSPC. */
#define WORK_FULL_SLACK (64 * 1024)

void work_diagnose(const struct nsbox_config *c, struct nsbox_result *ret)
{
    if (ret->work_used == 0 || ret->work_free >= WORK_FULL_SLACK)
        return;
    ret->work_full = true;
    report_outcome_warning(c, ret,
                           "the working directory /work was full when the payload ended (%.3g MiB "
                           "used): "
                           "writes there failed with ENOSPC (No space left on device); raise "
                           "--workdir-size (now %.3g MiB)",
                           (double)ret->work_used / (1 << 20), (double)c->workdir_size / (1 << 20));
}

/* A cell's outputs (config->cell): what the driver wrote to the channel, read once the payload
 * has ended (a process it left behind may still write; kill_leftovers() comes after, and what
 * it adds later is not read). */
void outputs_finish(struct sandbox_plan *sb, struct nsbox_result *ret)
{
    const struct nsbox_config *c = sb->config;
    int r;

    if (sb->outputs_fd < 0 || ret->status == NSBOX_STATUS_ERROR)
        return;
    ret->cell = true;
    ret->outputs_limit = c->outputs_limit ? c->outputs_limit : OUTPUTS_LIMIT_DEFAULT;
    r = outputs_read(sb->outputs_fd, ret->outputs_limit, ret);
    if (r < 0)
        report_warning(c, ret, "the cell's outputs could not be read: %s; they are missing",
                       strerror(-r));
}

/* The host side of copy-out: unpack the stream init wrote into the host directories opened by
 * plan_copies() (and the workspace's staging directory), then save the workspace if the copy
 * was complete. A session's supervisor has said itself why a copy was not taken. */
void copy_out_finish(struct sandbox_plan *sb, struct nsbox_result *ret, bool session)
{
    const struct nsbox_config *c = sb->config;
    struct copy_caps caps = {.max_bytes = c->copy_out_max_bytes,
                             .max_files = c->copy_out_max_files};
    char why[512] = "";
    int r;

    if (sb->copy_out_fd < 0 || ret->status == NSBOX_STATUS_ERROR)
        return;
    if (!ret->copy_out_done) {
        if (session)
            return;
        if (c->workspace)
            report_outcome_warning(c, ret,
                                   "workspace '%s' was not saved: the payload did not end by "
                                   "itself (or "
                                   "the copy failed), so its files are as before this run",
                                   c->workspace);
        else
            report_warning(c, ret,
                           "nothing was copied out: the payload did not end by itself (a "
                           "timeout, a kill, a setup failure) or the copy failed");
        return;
    }
    r = copy_out_unpack(sb->copy_out_fd,
                        &(struct copy_target){.root_fds = sb->out_fds,
                                              .root_paths = sb->out_host_paths,
                                              .n_roots = sb->n_out,
                                              .indexed = true,
                                              .host = true,
                                              .shown_roots = sb->out_shown},
                        &caps, c, ret);
    if (r < 0) {
        if (c->workspace)
            report_outcome_warning(c, ret,
                                   "workspace '%s' was not saved (its files are as before this %s)",
                                   c->workspace, session ? "session" : "run");
        return;
    }
    if (!c->workspace)
        return;
    /* A workspace is saved whole or not at all: a partial copy would leave the next step
     * files of two different runs. Only what is not a regular file or directory may be left
     * out (it never crosses anyway); a cap is a refusal. */
    for (size_t i = 0; i < ret->n_skipped; i++)
        if (ret->skipped[i].kind == NSBOX_SKIP_OVER_CAP &&
            path_is_at_or_below(ret->skipped[i].path, "/work")) {
            report_outcome_warning(c, ret,
                                   "workspace '%s' was not saved: /work is over "
                                   "--copy-out-max-files or "
                                   "--copy-out-max-bytes (its files are as before this %s)",
                                   c->workspace, session ? "session" : "run");
            return;
        }
    /* Also what the list had no room for, and every other loss of content (an unreadable
     * directory, a name the host cannot take): counted whether listed or not. */
    if (ret->copy_out_lost > 0) {
        report_outcome_warning(c, ret,
                               "workspace '%s' was not saved: %llu regular file%s or director%s "
                               "could not "
                               "be copied (over a cap, unreadable, too deep, or a name that is not "
                               "UTF-8 "
                               "or holds hidden characters; see copy_out.skipped); its files are "
                               "as "
                               "before this %s",
                               c->workspace, (unsigned long long)ret->copy_out_lost,
                               ret->copy_out_lost == 1 ? "" : "s",
                               ret->copy_out_lost == 1 ? "y" : "ies", session ? "session" : "run");
        return;
    }
    r = workspace_commit(&sb->ws, sb->ws_staging, why, sizeof(why));
    if (r < 0) {
        report_warning(c, ret, "%s", why);
        return;
    }
    sb->ws_staging[0] = '\0';
    ret->workspace_saved = true;
}
