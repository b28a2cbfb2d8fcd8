/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The payload of a run (plan_sandbox()): the program as given, --code's script, or --cell's
 * notebook cell, run by nsbox's cell driver (cell.py and cell-run.py, embedded at build time as
 * cell_run) with its outputs channel (outputs.h).
 */
#pragma once

#include <stddef.h>

#include "nsbox.h"

extern const char cell_run[];

/*
 * The payload's argv for config c, whose argv holds n_args arguments, as owned copies (the
 * sandbox's init wipes nsbox's own argv), NULL-terminated, into *ret_argv: c->argv; with code,
 * python3 /work/main.py ARGS...; with c->cell, python3 -c CELL-DRIVER LIMIT /work/main.py
 * ARGS..., and *ret_outputs_fd a new memfd for its outputs (else left as it is). Returns 0;
 * -EINVAL with *ret_why a sentence for the "config" error (--cell without code, with
 * --keep-fds, an outputs limit over 1 GiB); -ENOMEM; or -errno of memfd_create(2). What was
 * made before a failure stays in *ret_argv for the caller to free.
 */
int cell_plan_payload(const struct nsbox_config *c, size_t n_args, char ***ret_argv,
                      int *ret_outputs_fd, const char **ret_why);
