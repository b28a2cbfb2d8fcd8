/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Files into and out of the sandbox, as a tar (pax) stream in a memfd, written and read with
 * libarchive. Nothing is ever bound: a copy-in stream is packed by the supervisor from host
 * files it opened itself, and unpacked by the sandbox's init below its own "/" before the
 * payload exists; a copy-out stream is packed by init after the payload and everything else in
 * the sandbox are dead, and unpacked by the supervisor below host directories it opened itself.
 *
 * Both directions walk and write through directory descriptors only, one component at a time,
 * with O_NOFOLLOW: a symlink is never followed, on either side. (libarchive's own disk reader
 * and writer resolve names relative to the process's working directory and change it; the
 * supervisor runs in the caller's process, where that is not ours to change.) Only regular
 * files and directories are copied, with modes 0644/0755 (0755 when any execute bit was set):
 * no setuid, setgid or sticky bit crosses. Entry names are checked on unpacking: no "..", ".",
 * empty or absolute component, no control character.
 *
 * All functions return >= 0 or a -errno, with a sentence in why[] (why_size bytes) on failure.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"

/* Load libarchive (dlopen) if it is not yet: the functions below do so themselves; the
 * supervisor calls it before the sandbox exists, whose init cannot load it any more. Returns
 * 0, or -EOPNOTSUPP with why[] filled. */
int copy_load(char *why, size_t why_size);

/* Caps of one copy (bytes and regular files in all); 0 = none. */
struct copy_caps {
    uint64_t max_bytes;
    uint64_t max_files;
    bool fail; /* packing: a cap hit ends the stream with -EFBIG (copy-in), rather than
                * skipping the file (copy-out) */
};

/* What a packing walk saw. */
#define COPY_NAMED_MAX 3

struct copy_stats {
    uint64_t bytes, files;   /* copied */
    uint64_t dirs;           /* copied (each at most max_files too: a stream of empty
                              * directories is not free either) */
    uint64_t skipped;        /* skipped entries in all */
    uint64_t skipped_listed; /* of those, written into the stream (at most NSBOX_SKIPPED_MAX) */
    /* Of those, regular files and directories (a cap, unreadable, too deep, a name the other
     * side could not take): content that is missing, where a symlink, FIFO, socket, device or
     * other mount never crosses anyway. A workspace is not saved with any (sandbox.c). */
    uint64_t lost;
    /* The first COPY_NAMED_MAX skipped entries, "/NAME: reason" (a name with hidden
     * characters is counted, never shown): what a warning names. */
    char named[COPY_NAMED_MAX][192];
    size_t n_named;
};

/* named, joined with "; " (and ", and N more"), into buf (size bytes; cut to fit). */
void copy_stats_named(const struct copy_stats *stats, char *buf, size_t size);

/* One thing to pack: the open file or directory src_fd (O_PATH is enough), whose entries are
 * named prefix/... in the stream (a file: prefix itself; a directory: prefix and its contents
 * below it). shown is the path reported for skipped entries (the sandbox's or the host's). */
struct copy_source {
    int src_fd;
    const char *prefix;
    const char *shown;
    const char *exclude; /* a path below shown not to copy (a workspace's main.py), or NULL */
    /* An entry named same_name in the stream whose bytes are same_data (same_size bytes) is
     * left out, not counted: that very file is there already (--code's /work/main.py). */
    const char *same_name;
    const void *same_data;
    size_t same_size;
};

/* A tar stream being written to fd (from its current offset). */
struct copy_packer;

int copy_packer_new(int fd, const struct copy_caps *caps, struct copy_packer **ret, char *why,
                    size_t why_size);
/* Pack one source. Skipped entries (not a regular file or directory, unreadable, past a cap,
 * a name with a control character, on another mount) are written as empty entries carrying
 * the reason (at most NSBOX_SKIPPED_MAX of them; the rest only counted) when list_skipped, else
 * only counted. Returns 0, or -errno when the stream cannot be written (-EFBIG: the memfd hit
 * RLIMIT_FSIZE). */
int copy_pack(struct copy_packer *p, const struct copy_source *src, bool list_skipped, char *why,
              size_t why_size);
/* List name as skipped for reason (a source that is missing or a symlink), of kind: other than
 * NSBOX_SKIP_NOT_COPIED, content that is missing (copy_stats.lost), as a source that exists but
 * cannot be read. */
int copy_pack_skipped(struct copy_packer *p, const char *name, const char *reason,
                      enum nsbox_skip_kind kind, char *why, size_t why_size);
/* Finish the stream and free p; *stats (may be NULL) gets the totals. */
int copy_packer_finish(struct copy_packer *p, struct copy_stats *stats, char *why, size_t why_size);

/* Where unpacked entries go: entry "i/rest" (with indexed) below roots[i], else "rest" below
 * roots[0]. A missing parent directory is made (0755). */
struct copy_target {
    const int *root_fds;
    const char *const *root_paths; /* shown in the result (host_path), or NULL entries */
    size_t n_roots;
    bool indexed;
    bool host;                      /* unpacking on the host: refuse to write through a hard link */
    const char *shown_prefix;       /* prefix of the paths shown as "path" (the sandbox's) */
    const char *const *shown_roots; /* with indexed: the sandbox path of each root */
};

/* Unpack the stream on fd (read from offset 0) into target. With result, every file written is
 * added to result->copied (path, host_path, size, SHA-256) and every entry that carries a skip
 * reason to result->skipped, with its kind; without, such entries are ignored. caps are checked
 * again here, -EFBIG beyond them. */
int copy_unpack(int fd, const struct copy_target *target, const struct copy_caps *caps,
                struct nsbox_result *result, char *why, size_t why_size);

/* The host side of a copy-out, a run's (sandbox-end.c) and a session step's (`nsbox session exec
 * --copy-out`) alike: unpack the stream on fd into target within caps (copy_unpack()), set
 * result->copy_out_complete, and add the outcome warnings both say -- the unpacking failed on
 * the host (result->copy_out_done is then false), or entries were skipped. c: the run's config
 * (its warn callback hears them), or NULL. Returns copy_unpack()'s value. */
int copy_out_unpack(int fd, const struct copy_target *target, const struct copy_caps *caps,
                    const struct nsbox_config *c, struct nsbox_result *result);

/* Open the absolute path with O_PATH one component at a time, never following a symlink: a
 * symlink on the way fails with ENOTDIR, a last component that is one is opened itself (for
 * fstat to see). Returns an fd or -1 with errno set. */
int copy_open_nofollow(const char *path);

/* Remove dirfd/name and everything below it, never following a symlink. Returns 0 or -errno;
 * a missing name is 0. */
int copy_remove_tree(int dirfd, const char *name);

struct sandbox_plan;

/*
 * The copies of a run (copy-plan.c, called by plan_sandbox() in plan.h after plan_mounts()):
 * checks -w, --workdir-size, --copy-in, --copy-out and --workspace; with any of them loads
 * libarchive (copy_load()); packs --copy-in's host files and the workspace's work/ into
 * sb->copy_in_fd, within what the tmpfs mounts hold (a warning for what was left out); opens
 * --copy-out's host directories (made when missing, refused in a writable bind: RW_COPY_OUT)
 * and the workspace's staging directory into sb->out_fds, and makes sb->copy_out_fd. Host
 * paths never through a symlink but root's. Returns 0, or -EINVAL, -EFBIG, -EPERM or another
 * -errno with ret's error filled; what was made is freed by plan_free().
 */
int plan_copies(struct sandbox_plan *sb, struct nsbox_result *ret);

/*
 * Open the --copy-in source host (an absolute host path) as the caller, for copy_pack(): never
 * through a symlink but root's in directories only root can write (path_open_nofollow()), as
 * -v's sources; runs (plan_copies()) and session steps (src/cli/step-in.c) alike, with the same
 * words (copy-plan.c). Returns the descriptor (O_CLOEXEC), or -ELOOP (a symlink on the way) or
 * the source's -errno with the sentence in why[] (why_size bytes).
 */
int copy_in_open(const char *host, char *why, size_t why_size);

/* How a --copy-out HOSTDIR (%s) inside a writable bind (its source, %s) is refused, by runs
 * (copy-plan.c) and session steps (session-client.c) alike. */
#define RW_COPY_OUT                                                                                \
    "--copy-out %s lies inside the writable bind -v %s:...:rw, where the sandbox could rename "    \
    "it and plant a symlink in its place (the result's host_path would then name a file of "       \
    "its choosing): copy out to a directory outside every :rw bind"
