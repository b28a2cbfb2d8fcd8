/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small file and process helpers shared by the modules that talk to the OS. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Read all of fd into a malloc()ed, NUL-terminated buffer; at most max bytes (-EFBIG beyond).
 * Returns 0 (length in *ret_len), -ENOMEM, or read(2)'s -errno. */
int read_fd_all(int fd, size_t max, char **ret, size_t *ret_len);

/* recvmsg(2) of at most size bytes on sock (flags as recvmsg's, MSG_CMSG_CLOEXEC added),
 * taking the descriptors that come with them (SCM_RIGHTS, unix(7)): the first into *fd if *fd
 * is still -1, every other closed. Returns the bytes read, or -1 with errno set. */
ssize_t recv_first_fd(int sock, void *buf, size_t size, int flags, int *fd);

/* read_fd_all() of fd if it is a regular file (fstat(2)), else -EINVAL: for a descriptor opened
 * with O_NONBLOCK, so that a FIFO opened by mistake cannot block. */
int read_regular_fd(int fd, size_t max, char **ret, size_t *ret_len);

/* read_fd_all() of the regular file at path. Opened with O_NONBLOCK, so that a FIFO cannot
 * block; anything but a regular file is -EINVAL. */
int read_regular_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* Read up to size - 1 bytes of dirfd/name into buf, NUL-terminated. Returns the length or
 * -errno. For kernel interface files (procfs, cgroupfs). */
ssize_t read_file_at(int dirfd, const char *name, char *buf, size_t size);

/* The whole of /proc/self/status, malloc()ed and NUL-terminated, into *ret. Not a fixed
 * buffer: its Groups line comes before the signal and capability masks and holds each
 * supplementary group (an ordinary user keeps theirs, shown as the overflow gid where the
 * sandbox does not map them), so a user in a few hundred groups pushes the masks past 4 KiB, and
 * a value cut at the buffer's end would parse as a shorter one (proc(5), NGROUPS_MAX 65536).
 * Returns 0, -EFBIG past 1 MiB, or -errno. */
int proc_self_status_read(char **ret);

/* Write text to dirfd/name in one write(2): kernel interface files (uid_map, cgroup knobs)
 * take a value per write. Returns 0, -errno, or -EIO for a short write. */
int write_file_at(int dirfd, const char *name, const char *text);

/*
 * Read a /proc/PID/stat file (dirfd and name as for openat(2)) into buf (size bytes, cut to
 * fit) and find the fields after the command name: that one is in parentheses and may hold
 * spaces and parentheses itself, so the last ')' ends it (proc(5)). Returns 0 with *ret_state
 * pointing into buf at field 3 (the state letter), -errno of openat(2) or read(2), or -EIO for
 * a file without it.
 */
int proc_stat_read(int dirfd, const char *name, char *buf, size_t size, const char **ret_state);

/* Field n (n >= 3, numbered as in proc(5)) of the line whose field 3 proc_stat_read() found at
 * state; NULL if the line is shorter. */
const char *proc_stat_field(const char *state, unsigned n);

/* Pure: the hexadecimal mask of the line "KEY:\tHEX" of the text of /proc/PID/status
 * (proc(5): CapInh, CapPrm, CapEff, CapBnd, CapAmb, SigIgn, SigCgt, ...) in *ret. Returns 0,
 * -ENOENT when the text has no such line, -EINVAL when its value is not a 64-bit hex number. */
int proc_status_mask(const char *status, const char *key, uint64_t *ret);

/* Write the n bytes at data as 2n lowercase hex digits and a NUL to out (2n + 1 bytes). */
void hex_encode(const void *data, size_t n, char *out);

/* The start time of process pid (field 22 of /proc/PID/stat, clock ticks since boot), or 0 if
 * there is no such process or it is a zombie (it has ended): with the pid, it names a process
 * across pid reuse. */
unsigned long long process_start_time(pid_t pid);

/* Whether the absolute path is dir or below it, by its components ("/a/bc" is not below
 * "/a/b"); no "." or ".." is resolved. */
bool path_is_at_or_below(const char *path, const char *dir);

/* The monotonic clock (CLOCK_MONOTONIC), in microseconds. Cannot fail. */
uint64_t now_usec(void);

/* A pace (a generic cell rate algorithm): a burst of `burst` events at once, then one every
 * interval microseconds; *at is when the next event may be (0 to start). Call it for an event
 * at now >= *at: it moves *at on, and returns true when the event came after the burst was
 * used up (it was paced: it had waited for its turn, or would have). A quiet spell earns a
 * burst back, never more. Cannot fail. */
bool pace_take(uint64_t *at, uint64_t now, uint64_t burst, uint64_t interval);

/*
 * Open the absolute path as an O_PATH descriptor one component at a time, with O_NOFOLLOW: the
 * kernel never follows a symlink on the way. A symlink met on the way (the last component
 * included) is followed by this function only when follow_root_links is true and root made it
 * where only root can write: the link is owned by uid 0 and so is the directory holding it,
 * which its group and others cannot write (/home -> /var/home, merged /usr's /lib -> usr/lib).
 * No sandbox can make such a link (none runs as host root), so a link planted by an earlier run
 * in a writable bind is always refused; so is the caller's own. At most 40 links are followed.
 *
 * The uid test needs the host's view of owners: call it with follow_root_links only outside
 * the sandbox's user namespace, where uid 0 is root (inside, unmapped owners read as 65534).
 *
 * walked[size] receives the path walked, without symlinks, "." or "..", on success; with -ELOOP
 * for a refused symlink, the path of that symlink. Returns the descriptor (O_CLOEXEC), -EINVAL
 * for a relative path, -ENOTDIR for a path ending in '/' that is not a directory,
 * -ENAMETOOLONG, -ELOOP, or the -errno of openat(2)/readlinkat(2).
 */
int path_open_nofollow(const char *path, bool follow_root_links, char *walked, size_t size);

/* The devices and inodes of the directory dirfd and of every directory above it, walking up
 * with ".." to "/", into ret[max] (the directory first). By device and inode, so another name
 * for a directory ("D/../D", a link, a host bind mount of it) is no way around a check of them.
 * Returns how many, or -ELOOP past max, or the -errno of openat(2)/fstat(2). */
int dir_ancestry(int dirfd, struct stat *ret, size_t max);

/* Whether st (a directory of dir_ancestry()) is one of ids[n] (st_dev and st_ino; entries with
 * st_ino 0 are unused): its index, or -1. */
ssize_t stat_find(const struct stat *st, const struct stat *ids, size_t n);

/* Write the printf(3)-style message into why (why_size bytes, cut to fit) and return r: the
 * "-errno, and a sentence saying why" of functions whose caller words the error. */
int why_fail(char *why, size_t why_size, int r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
