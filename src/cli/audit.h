/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The audit log: one JSON line per run written before the payload starts (who ran what, the
 * code and its SHA-256, the limits) and one with the result when it ends, appended to a file.
 * Each record is one write(2) to a file opened with O_APPEND, so records of concurrent runs
 * never interleave (write(2): the file offset update and the write are one atomic step).
 */
#pragma once

#include <stddef.h>

#include "nsbox.h"

struct audit {
    int fd;
    char run_id[33]; /* run_id_new() */
};

/* Open (create, mode 0600) the log at path for appending, for the run run_id of config c.
 * Refused, with the reason in why[why_size] (otherwise ""), are: a path through a symlink that
 * is not root's (the rule of -v sources, path_open_nofollow()), a log that is itself a symlink
 * (-ELOOP), not a regular file (-EINVAL; a FIFO is opened without blocking and refused), not
 * owned by the caller or with more than one name (-EPERM), and a log inside one of c's
 * writable binds, by device and inode (-EPERM): the audited code could edit it.
 * Returns 0 or -errno (also of open(2)). */
int audit_open(const char *path, const char *run_id, const struct nsbox_config *c,
               struct audit *ret, char *why, size_t why_size);

/* --stdout-file, --stderr-file: open the host file path (made 0600, or emptied) for the whole
 * stream, as audit_open() opens a log: as the caller, no symlink on the way but root's, none as
 * the file, a regular file of the caller's with one name, outside every :rw bind of c (the
 * run's code could rewrite it there). Returns 0 with *ret_fd (O_CLOEXEC, blocking), or -errno
 * with the reason in why when there is more to say than the errno. */
int output_file_open(const char *path, const struct nsbox_config *c, int *ret_fd, char *why,
                     size_t why_size);

/* Append the start record: nsbox's argv, the caller's uid, the payload's argv, the code (at most
 * code_limit bytes of it, and its SHA-256 over all of it), the limits. Returns 0 or -errno
 * (-EIO for a short write, -ENOMEM). */
int audit_start(struct audit *a, int argc, char *const argv[], const struct nsbox_config *c,
                size_t code_limit);

/* Append the end record with the run's result (as `nsbox run --json` prints it).
 * Returns 0 or -errno. */
int audit_end(struct audit *a, const struct nsbox_result *r);

/* Close the log; safe on a closed one. */
void audit_close(struct audit *a);
