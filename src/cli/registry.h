/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The per-user registry of running sandboxes, for `nsbox ps` and `nsbox kill`, without a daemon:
 * each running nsbox keeps a small JSON file in a private runtime directory
 * ($XDG_RUNTIME_DIR/nsbox, else /run/user/UID/nsbox, else /tmp/nsbox-UID; mode 0700, owned by
 * the user, never a symlink). `nsbox kill` sends the named nsbox SIGUSR1, on which it kills its
 * sandbox whole and reports the status "killed".
 *
 * A run with a name (--name) also holds NAME.name there, holding its run id: created with
 * O_EXCL while the directory is locked (flock(2)), after the record it names, and removed before
 * it. Under the lock a name is taken only when no file holds it or the run holding it is gone,
 * so of two runs with one name exactly one starts.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "nsbox.h"

/* A fresh run id: 128 random bits as 32 hex digits. Returns 0 or -errno of getrandom(2). */
int run_id_new(char ret[33]);

/* The registry's directory in buf (made if missing). Returns 0 or -errno; -EPERM when it is
 * not the user's own, 0700. */
int registry_path(char *buf, size_t size);

/* What registry_add() made, for registry_remove(). */
struct registry_run {
    char path[700];      /* the record, or "" */
    char name_path[700]; /* the name's file, or "" */
};

/* Record this process's run, after removing the records of nsbox processes that are gone
 * (SIGKILLed: they could not remove their own). The record holds nsbox's argv, the command as
 * `nsbox ps` shows it (for --code: "python3", code_path or "<stdin>" for "-", the arguments),
 * the limits, c->name and c->labels.
 * Returns 0 or -errno: -EPERM when the directory is not the user's own, 0700; -EEXIST when a
 * running sandbox of the user has the name c->name (why[why_size] then says which). */
int registry_add(const char *run_id, int argc, char *const argv[], const struct nsbox_config *c,
                 const char *code_path, struct registry_run *ret, char *why, size_t why_size);

/* Remove the name's file, then the record (safe on an empty one). */
void registry_remove(const struct registry_run *run);

/* `nsbox ps [--json] [--filter F]...`: print the user's running sandboxes that match every kind
 * of filter given (Docker's syntax; several of one kind: any of them for name= and id=, all of
 * them for label=): name=REGEX (POSIX extended, searched in the name), id=PREFIX of the run id,
 * label=KEY or label=KEY=VALUE. Records of dead nsbox processes are removed on the way.
 * Returns the exit status (125 for an invalid filter). */
int registry_ps(bool json, char *const filters[], size_t n_filters);

/* `nsbox kill RUN-ID|NAME`, `nsbox kill --all`, `nsbox kill --label KEY[=VALUE]...`: kill the
 * user's sandboxes and wait (at most 5 s) until their nsbox has reported. target is a whole run
 * id, else a name, else a prefix naming one run id; NULL with no labels means all; labels
 * (all must match) select every run that has them. Returns the exit status: 0, or 1 when none
 * (or, for a prefix, more than one) matched or one did not end. */
int registry_kill(const char *target, char *const labels[], size_t n_labels);
