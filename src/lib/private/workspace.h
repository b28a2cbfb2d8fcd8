/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Workspaces: directories nsbox keeps for the caller, below
 * $XDG_STATE_HOME/nsbox/workspaces/ (default ~/.local/state), one per NAME. The sandbox never
 * sees them: a run copies a workspace into its /work and /work back into it (copy.h), through
 * a staging directory swapped in with renameat2(RENAME_EXCHANGE) once the copy is complete.
 * One run at a time: flock(2) on NAME.lock beside it, held for the run.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct workspace {
    int base_fd; /* .../nsbox/workspaces, O_PATH */
    int lock_fd; /* NAME.lock, locked, or -EBADF */
    int dir_fd;  /* NAME, O_RDONLY directory */
    char name[129];
    char path[4096]; /* .../workspaces/NAME, for messages */
};

/* The workspaces directory, made (0700) when create and missing. Its owner must be the
 * caller, and group and others must not write it (-EPERM otherwise). Returns an O_PATH fd or
 * -errno, with a sentence in why[]; path[] (path_size bytes) gets its path. */
int workspace_base_open(bool create, char *path, size_t path_size, char *why, size_t why_size);

/* Open (making it when create) the workspace name and take its lock without waiting: -EBUSY
 * when another run holds it, -ENOENT when missing and !create, -EPERM when not the caller's.
 * *ws is filled; release it with workspace_close(). */
int workspace_open(const char *name, bool create, struct workspace *ws, char *why, size_t why_size);

/* Replace the workspace's files with those in the staging directory staging (below base_fd):
 * exchanged atomically, then the old tree removed. */
int workspace_commit(struct workspace *ws, const char *staging, char *why, size_t why_size);

/* Close the descriptors (and so release the lock). Safe on a zeroed-and-closed ws. */
void workspace_close(struct workspace *ws);
