/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host's side of a run's writable binds: which directories a run can write, by device and
 * inode (fileio.h's path_open_nofollow(), dir_ancestry(), stat_find()). */
#pragma once

#include <stddef.h>
#include <sys/stat.h>

#include "nsbox.h"

/* What a run can write on the host: the source of each writable bind in binds[n], opened as the
 * sandbox will bind it (path_open_nofollow(), root's symlinks followed), its device and inode
 * into ret[i]; ret[i] is zeroed for a read-only bind and for a source that cannot be opened
 * (the run then fails before the payload starts). Returns how many were found. */
size_t binds_writable_ids(const struct nsbox_bind *binds, size_t n, struct stat *ret);

/* Whether the directory dirfd, or one above it, is the source of one of the writable binds in
 * binds[n] (binds_writable_ids(), dir_ancestry()): a place the run can write, where what nsbox
 * puts is the sandbox's to rename or replace. Returns the bind's index, -ENOENT when none, or
 * another -errno (-ENOMEM, -ELOOP, of openat(2)). */
int dir_in_writable_bind(int dirfd, const struct nsbox_bind *binds, size_t n);
