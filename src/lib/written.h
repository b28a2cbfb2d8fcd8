/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The files a payload created or changed in /work, for the result's files_written.
 *
 * Init walks /work once before the payload starts (names, sizes, times and inodes of its regular
 * files: /work is nearly empty then, a few stat calls) and again when the payload has ended,
 * and reports each regular file that is new or whose size, mtime, ctime or inode changed, with
 * its SHA-256, on the report pipe (REPORT_WRITTEN), before the payload's end. Bounded: each walk
 * looks at WRITTEN_WALK_MAX entries at most, WRITTEN_DEPTH_MAX directories deep, and stays on
 * /work's own file system (the code's main.py and -v binds below /work are other mounts); at
 * most NSBOX_WRITTEN_MAX files are listed, and WRITTEN_HASH_MAX bytes hashed in all (a file
 * past that is listed without its SHA-256). Every descriptor is opened beneath the walk's
 * directory with O_NOFOLLOW: a symlink is never followed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "report.h"

#define WRITTEN_WALK_MAX 10000
#define WRITTEN_DEPTH_MAX 32
#define WRITTEN_HASH_MAX (16ULL << 20)

struct written_entry {
    char *path; /* below /work, without a leading "/" */
    uint64_t size;
    int64_t mtime_sec, ctime_sec;
    long mtime_nsec, ctime_nsec;
    ino_t ino;
};

struct written_snapshot {
    struct written_entry *v; /* sorted by path */
    size_t n, cap;
    bool partial; /* a bound stopped the walk */
    bool taken;
};

/* Walk the directory work_fd (/work, O_PATH is enough) into *s. Returns 0 or -ENOMEM (a
 * directory that cannot be read is left out, as the walk is best effort). */
int written_snapshot_take(int work_fd, struct written_snapshot *s);

/* Walk work_fd again and send a REPORT_WRITTEN on report_fd for each regular file new or changed
 * against before (at most NSBOX_WRITTEN_MAX), then one with written_walked, written_more and
 * written_partial to end the list. Nothing when before was not taken (files_written stays
 * unknown). */
void written_report(int work_fd, const struct written_snapshot *before, int report_fd);

/* In the supervisor: a REPORT_WRITTEN into ret (written, n_written, and at the list's end
 * written_known, written_partial, written_more). What the sandbox sent is data: each field is
 * read within its size. At most NSBOX_WRITTEN_MAX files; out of memory, one is left out. */
void written_add(struct nsbox_result *ret, const struct report *w);

void written_snapshot_free(struct written_snapshot *s);
