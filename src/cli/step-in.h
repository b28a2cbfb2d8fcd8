/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a session step (`nsbox session exec`, `nsbox run --pool`) takes in besides its code:
 * a lower --memory and --copy-in files (step-in.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The step's --memory and --copy-in options, args[n] as given ("--memory", VALUE,
 * "--copy-in", HOSTPATH:SANDBOXPATH, ...): read by `nsbox run`'s own parser (the same formats,
 * the same floor, the same messages), and the copy-in sources opened and packed here, in the
 * caller's process, as a run packs them (copy-plan.c: never through a symlink but root's), into a
 * memfd sealed against every change, for the session's init to unpack below "/".
 * *ret_memory: the --memory given (0: unlimited), with *ret_has_memory; *ret_fd: the stream
 * (close-on-exec), or -1 without --copy-in. Returns 0, or -EINVAL/-errno after one line on
 * stderr. */
int step_in_prepare(int n, char **args, bool *ret_has_memory, uint64_t *ret_memory, int *ret_fd);
