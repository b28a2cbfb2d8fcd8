/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The host ids of root's sandboxes: each run of root gets a uid and gid of its own from a
 * reserved range, held for the run's lifetime (uidpool.c says why this range and how).
 *
 * An ordinary user's sandbox maps to the user themself (the only id an unprivileged writer of
 * uid_map may name) and never uses the pool.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* 0x7E000000 + 0…4095: 2113929216…2113933311, as both uid and gid. */
#define UIDPOOL_BASE 0x7E000000U
#define UIDPOOL_SIZE 4096U

/* The lock of the pool: one byte-range lock per slot (fcntl(2) open file description locks). */
#define UIDPOOL_DIR "/run/nsbox"
#define UIDPOOL_LOCK "uid-pool"

/*
 * The pool in use: UIDPOOL_BASE and UIDPOOL_DIR/UIDPOOL_LOCK, or with NSBOX_UID_POOL=test
 * (nsbox's own test suite) the next UIDPOOL_SIZE ids and a lock file of their own, so that the
 * suite's pool-filling tests never touch the ids of real runs. Never fail.
 */
unsigned uidpool_base(void);
const char *uidpool_lock_name(void);
const char *uidpool_lock_path(void);

/*
 * Pure: the first slot, counting from start and wrapping around after size slots, for which
 * take(slot, userdata) returns > 0. take() returns > 0 when it took the slot, 0 to go on to
 * the next one, or -errno to stop. Returns the slot (0…size-1), take()'s -errno, or -EBUSY
 * when no slot of the size could be taken.
 */
int uidpool_choose(unsigned start, unsigned size, int (*take)(unsigned slot, void *userdata),
                   void *userdata);

/*
 * Take a free slot of the pool for one run: its id (UIDPOOL_BASE + slot, as uid and gid) is
 * locked for no other nsbox of this host (the lock on UIDPOOL_DIR/UIDPOOL_LOCK, a root-owned
 * 0700 directory, is held through *ret_lock_fd: it is released when the last copy of that
 * descriptor is closed, also when the process is killed) and no passwd or group entry names it.
 * A slot marked as possibly left with processes (uidpool_mark()) is swept first
 * (uidpool_kill_all()) and unmarked. Root only. *ret_lock_fd is O_CLOEXEC.
 *
 * Returns 0, or -errno: -EPERM when the directory or lock file is not root's alone (detail says
 * which), -EBUSY when every slot is taken or in use, or open(2)/fcntl(2)'s error.
 */
int uidpool_acquire(uid_t *ret_id, int *ret_lock_fd, char *detail, size_t detail_size);

/*
 * Mark id's slot, held through lock_fd, as one whose processes may outlive their run (a run
 * without its own pid namespace, from before its first process until they are killed), or
 * clear the mark: the next uidpool_acquire() of a slot still marked, left so by an nsbox that
 * was killed, kills what runs as the id before handing it out. Returns 0 or -errno (pwrite(2)).
 */
int uidpool_mark(int lock_fd, uid_t id, bool may_have_processes);

/*
 * Pure: whether the id map text (the format of /proc/PID/uid_map: lines "INSIDE OUTSIDE
 * COUNT", user_namespaces(7)) maps id, as an id of the namespace it describes. Returns 1 or 0,
 * or -EINVAL for a malformed line.
 */
int uidpool_map_covers(const char *map, unsigned id);

/*
 * Pure: whether the text of /etc/subuid or /etc/subgid (subuid(5): lines "NAME:START:COUNT",
 * NAME a login or a uid) hands id to someone as a subordinate id, for their own user
 * namespaces (newuidmap(1)): a sandbox's uid there would share it with that user's
 * containers. Lines that do not parse (comments, blank lines) are skipped. Returns 1 or 0.
 */
int uidpool_subid_covers(const char *text, unsigned id);

/* The sources nsswitch.conf(5) names for a database (uidpool_nss_sources()). */
enum {
    UIDPOOL_NSS_FILES = 1 << 0,   /* "files": /etc/passwd, /etc/group */
    UIDPOOL_NSS_SYSTEMD = 1 << 1, /* "systemd": nss-systemd(8) */
    UIDPOOL_NSS_OTHER = 1 << 2,   /* anything else (ldap, sss, nis, compat, winbind, ...) */
};

/*
 * Pure: the sources the text of nsswitch.conf(5) names for database (e.g. "passwd"): lines
 * "DATABASE: SOURCE [ACTION] SOURCE ...", '#' to the end of a line a comment, bracketed
 * actions skipped. Returns a mask of UIDPOOL_NSS_*, or UIDPOOL_NSS_OTHER when the text has no
 * line for database or the line names no source (glibc then uses a built-in default).
 */
int uidpool_nss_sources(const char *text, const char *database);

/*
 * Pure: whether the text of /etc/passwd or /etc/group (passwd(5), group(5): lines
 * "NAME:PASSWORD:ID:...") has an entry whose id (the third field) is id. Lines whose third
 * field is not a number are skipped. Returns 1 or 0.
 */
int uidpool_db_names(const char *text, unsigned id);

/*
 * Whether the user namespace of this process maps id: map_path is "/proc/self/uid_map" or
 * "/proc/self/gid_map". Returns 1 or 0, or -errno when the file cannot be read.
 */
int uidpool_mapped_here(const char *map_path, unsigned id);

/*
 * Kill every process whose real or saved uid is id (kill(2) with pid -1, from a child that
 * switched to id): what a run without its own pid namespace left behind, before its id goes
 * back to the pool. Root only. Returns 0, or -errno from fork(2)/waitpid(2) or from the child's
 * setresuid(2).
 */
int uidpool_kill_all(uid_t id);

struct nsbox_config;
struct nsbox_result;
struct sandbox_plan;

/*
 * The host ids the sandbox's ids map to, in sb->host_uid and sb->host_gid (and ret's): an
 * ordinary user's own; for root, c->host_uid/host_gid (with a warning), else a slot of the
 * pool held by sb->host_ids_lock (marked with --pid host), else, as root of a user namespace
 * that does not map the pool, its nobody (with a warning). Sets sb->privileged and
 * sb->host_root (root of the initial user namespace). Not pure: it takes a slot of the pool,
 * in the supervisor (ids-plan.c, called by plan_sandbox() in plan.h). Returns 0, -EINVAL for
 * host ids an ordinary user or a lone gid asks for, or the pool's -errno, with ret's error
 * filled.
 */
int plan_host_ids(const struct nsbox_config *c, struct sandbox_plan *sb, struct nsbox_result *ret);
