/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Parsers for command-line values. Pure: no OS calls, no output; each returns 0 or a -errno
 * (-EINVAL for bad syntax, -ERANGE for a value out of range, -ENOMEM) and writes its ret_*
 * outputs only on success.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* A non-negative decimal with an optional fraction ("2", "0.5"), multiplied by unit and rounded
 * down. Returns -EINVAL for anything else (signs, spaces, exponents, "nan"), -ERANGE on
 * overflow of uint64_t. */
int parse_decimal(const char *s, uint64_t unit, uint64_t *ret);

/* A size in Docker's syntax: a decimal and an optional binary unit suffix, case-insensitive:
 * b, k/kb/kib, m/mb/mib, g/gb/gib, t/tb/tib ("256m" = 268435456 bytes). Returns bytes. */
int parse_size(const char *s, uint64_t *ret_bytes);

/* A duration: a decimal number of seconds ("1.5", "1.5s"), or of milliseconds, minutes or
 * hours with "ms", "m" or "h" ("250ms", "10m", "1h"), as Docker's durations. Returns
 * microseconds; -EINVAL for anything else, -ERANGE when it is 0 or longer than a year. */
int parse_duration(const char *s, uint64_t *ret_usec);

/* A CPU count as Docker's --cpus ("0.5"). Returns thousandths of a CPU; -ERANGE when it is
 * below 0.001 or above 4096. */
int parse_cpus(const char *s, uint64_t *ret_milli);

/* A positive whole number ("64"); -ERANGE for 0 or more than max. */
int parse_count(const char *s, uint64_t max, uint64_t *ret);

/* true if path is absolute, not "/", and has no empty, "." or ".." components. */
bool path_is_safe_target(const char *path);

/* `-v SOURCE:TARGET[:ro|rw]`. TARGET, without trailing slashes, must satisfy
 * path_is_safe_target(); SOURCE must be non-empty (a SOURCE with ':' needs --mount). The two
 * strings are malloc()ed; *ret_writable is true only for ":rw". */
int parse_bind(const char *spec, char **ret_source, char **ret_target, bool *ret_writable);

/* `--tmpfs TARGET[:OPTION,...]` with options size=SIZE, mode=OCTAL, exec and noexec (Docker's
 * syntax). Defaults: the given default_size, mode 01777, noexec (*ret_exec false). TARGET is
 * malloc()ed. */
int parse_tmpfs(const char *spec, uint64_t default_size, char **ret_target, uint64_t *ret_size,
                unsigned *ret_mode, bool *ret_exec);

/* One `--mount`. */
struct parsed_mount {
    bool is_tmpfs; /* type=tmpfs; else type=bind */
    char *source;  /* bind: as given (maybe relative), malloc()ed; tmpfs: NULL */
    char *target;  /* without trailing slashes, malloc()ed */
    bool writable; /* bind: readonly=false was given; tmpfs: always true */
    uint64_t size; /* tmpfs: bytes */
    unsigned mode; /* tmpfs: permission bits */
};

/* `--mount type=bind,source=SRC,target=DST[,readonly]` or `--mount
 * type=tmpfs,target=DST[,tmpfs-size=SIZE][,tmpfs-mode=OCTAL]`, Docker's syntax: comma-separated
 * KEY=VALUE fields in any order, a field in double quotes (CSV, "" for a quote) may hold ','
 * or '"'; keys source|src, target|dst|destination, readonly|ro (alone or =true|1|false|0);
 * unlike -v, SOURCE may hold ':'. A bind is read-only unless readonly=false (as -v is unless
 * :rw; Docker's are writable by default). A tmpfs
 * gets default_tmpfs_size and mode 01777 unless given, and cannot be readonly. Unknown keys and
 * types other than bind and tmpfs are -EINVAL. Free with parsed_mount_done(). */
int parse_mount(const char *spec, uint64_t default_tmpfs_size, struct parsed_mount *ret);
void parsed_mount_done(struct parsed_mount *m);

/* `--user UID[:GID]`, numeric ids only; GID defaults to UID. -ERANGE for (uid_t)-1. */
int parse_user(const char *s, uid_t *ret_uid, gid_t *ret_gid);

/* true if s starts with a valid environment variable name (non-empty, no '=', no NUL)
 * terminated by '=' or the end of the string. */
bool env_name_is_valid(const char *s, size_t len);

/* `--name NAME`, as Docker's container names: [a-zA-Z0-9][a-zA-Z0-9_.-]*, at most
 * NSBOX_NAME_MAX bytes. Safe as a file name and on a terminal. */
bool run_name_is_valid(const char *name);

/* Longest label key and value (bytes). */
#define LABEL_KEY_MAX 128
#define LABEL_VALUE_MAX 1024

/* `--label KEY=VALUE` or `--label KEY` (an empty value): KEY is [a-zA-Z0-9][a-zA-Z0-9_./-]*
 * ("com.example.suite"), VALUE anything but control characters (safe on a terminal). On true,
 * *ret_key_len is the length of KEY. */
bool label_is_valid(const char *label, size_t *ret_key_len);

/* A name in a copy stream (src/lib/copy.c), checked before anything is made by it: relative, no
 * empty, "." or ".." component, no trailing '/', no control character, components of at most
 * NAME_MAX and the whole under PATH_MAX bytes. */
bool copy_name_is_valid(const char *name);
