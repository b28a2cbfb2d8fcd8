/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The sandbox's steps that sandbox.c, init.c and session-init.c share (internal); the plan they
 * act on is plan.h's. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nsbox.h"
#include "plan.h"

/* Exec sb->argv as a payload (in a child of init, under the filters): stdio from in_fd (-1:
 * /dev/null), out_fd and err_fd, the report pipe at fd 3 (close-on-exec), extra_fd (if >= 0) at
 * fd 4 kept across execve, every other descriptor closed; rlimits; execve. Never returns. */
_Noreturn void sandbox_payload_exec(const struct sandbox_plan *sb, int in_fd, int out_fd,
                                    int err_fd, int report_fd, int extra_fd);

/* When ret's stderr mentions ModuleNotFoundError: ret->rootfs and ret->rootfs_profile for its
 * note (nsbox_result_notes()), the profile read from rootfs/usr/share/nsbox/profile beneath
 * the tree, never through a symlink (openat2(2) RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS).
 * Otherwise nothing (no work on an ordinary run's path). */
void sandbox_describe_rootfs(const char *rootfs, struct nsbox_result *ret);

/* Init's loop in a session (session-init.c): fds report_fd, shm_fd and control_fd are open,
 * and copy_out_fd (the workspace's copy-out memfd, written on SESSION_SAVE) or -1; signals in
 * mask blocked. Never returns. */
_Noreturn void session_init(const struct sandbox_plan *sb, const sigset_t *mask, int report_fd,
                            int shm_fd, int control_fd, int copy_out_fd);
