/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The per-user registry of running sandboxes, for `nsbox ps` and `nsbox kill`, without a daemon:
 * each running nsbox keeps a small JSON file in a private runtime directory
 * ($XDG_RUNTIME_DIR/nsbox, else /run/user/UID/nsbox, else /tmp/nsbox-UID; mode 0700, owned by
 * the user, never a symlink). `nsbox kill` sends the named nsbox SIGUSR1, on which it kills its
 * sandbox whole and reports the status "killed".
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "nsbox.h"

/* A fresh run id: 128 random bits as 32 hex digits. Returns 0 or -errno of getrandom(2). */
int run_id_new(char ret[33]);

/* Record this process's run, after removing the records of nsbox processes that are gone
 * (SIGKILLed: they could not remove their own). ret_path[size] receives the file to pass to
 * registry_remove().
 * Returns 0 or -errno (-EPERM when the directory is not the user's own, 0700). */
int registry_add(const char *run_id, int argc, char *const argv[], const struct nsbox_config *c,
                 char *ret_path, size_t size);

/* Remove the record (safe with an empty path). */
void registry_remove(const char *path);

/* `nsbox ps [--json]`: print the user's running sandboxes; records of dead nsbox processes are
 * removed on the way. Returns the exit status. */
int registry_ps(bool json);

/* `nsbox kill RUN-ID|--all`: kill the user's sandboxes and wait (at most 5 s) until their nsbox
 * has reported. run_id may be a prefix naming one sandbox; NULL means all. Returns the exit
 * status: 0, or 1 when none (or more than one) matched or one did not end. */
int registry_kill(const char *run_id);
