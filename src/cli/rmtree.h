/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Safe removal of a directory tree that another uid may still be changing. */
#pragma once

/*
 * Remove everything below the directory open as top (not top itself), however deep, never
 * following a symlink and never leaving top's file system (st_dev). It holds a bounded number
 * of descriptors: deeper levels are reopened through ".." and checked against the device and
 * inode they had, so whatever a writer moves meanwhile is at worst left behind, never
 * followed.
 * Returns 0 when top is empty, else -errno: of the first entry the caller may not remove
 * (-EACCES, -EPERM, -EBUSY; the walk stops in that directory once the rest of it is removed),
 * -ELOOP (the tree moved under the walk), -EXDEV (another file system below top), -E2BIG (more
 * than about four million steps), -ENOMEM, or of openat(2)/fstat(2)/fdopendir(3).
 */
int rmtree_below(int top);
