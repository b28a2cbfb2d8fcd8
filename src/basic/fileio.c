/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <time.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"

int read_fd_all(int fd, size_t max, char **ret, size_t *ret_len)
{
    size_t size = 0, cap = 4096;
    char *buf = malloc(cap);

    if (!buf)
        return -ENOMEM;
    for (;;) {
        ssize_t n;
        if (size + 1 >= cap) {
            char *bigger;
            if (cap > max + 1) {
                free(buf);
                return -EFBIG;
            }
            cap *= 2;
            bigger = realloc(buf, cap);
            if (!bigger) {
                free(buf);
                return -ENOMEM;
            }
            buf = bigger;
        }
        n = RETRY_EINTR(read(fd, buf + size, cap - size - 1));
        if (n < 0) {
            int r = negative_errno();
            free(buf);
            return r;
        }
        if (n == 0)
            break;
        size += (size_t)n;
    }
    if (size > max) {
        free(buf);
        return -EFBIG;
    }
    buf[size] = '\0';
    *ret = buf;
    *ret_len = size;
    return 0;
}

int read_regular_fd(int fd, size_t max, char **ret, size_t *ret_len)
{
    struct stat st;

    if (fstat(fd, &st) < 0)
        return negative_errno();
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    return read_fd_all(fd, max, ret, ret_len);
}

int read_regular_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    if (fd < 0)
        return negative_errno();
    return read_regular_fd(fd, max, ret, ret_len);
}

ssize_t read_file_at(int dirfd, const char *name, char *buf, size_t size)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return negative_errno();
    n = RETRY_EINTR(read(fd, buf, size - 1));
    if (n < 0)
        return negative_errno();
    buf[n] = '\0';
    return n;
}

int proc_self_status_read(char **ret)
{
    _cleanup_close_ int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    size_t len;

    if (fd < 0)
        return negative_errno();
    return read_fd_all(fd, 1 << 20, ret, &len);
}

int write_file_at(int dirfd, const char *name, const char *text)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC);
    size_t n = strlen(text);
    ssize_t k;

    if (fd < 0)
        return negative_errno();
    k = write(fd, text, n);
    if (k < 0)
        return negative_errno();
    return (size_t)k == n ? 0 : -EIO;
}

/* Linux start time of process pid (field 22 of /proc/PID/stat), or 0 if it is gone. */
int proc_stat_read(int dirfd, const char *name, char *buf, size_t size, const char **ret_state)
{
    ssize_t n = read_file_at(dirfd, name, buf, size);
    const char *p;

    if (n < 0)
        return (int)n;
    p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == '\0')
        return -EIO;
    *ret_state = p + 2;
    return 0;
}

const char *proc_stat_field(const char *state, unsigned n)
{
    const char *p = state;

    for (unsigned field = 3; field < n; field++) {
        p = strchr(p, ' ');
        if (!p)
            return NULL;
        p++;
    }
    return p;
}

unsigned long long process_start_time(pid_t pid)
{
    char path[64], buf[1024];
    const char *state, *p;

    (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (proc_stat_read(AT_FDCWD, path, buf, sizeof(buf), &state) < 0)
        return 0;
    /* A zombie has ended: nobody reaps an orphan at once where PID 1 is slow to (a container's
     * init), and until then it would count as running. */
    if (state[0] == 'Z' || state[0] == 'X')
        return 0;
    p = proc_stat_field(state, 22);
    return p ? strtoull(p, NULL, 10) : 0;
}

int proc_status_mask(const char *status, const char *key, uint64_t *ret)
{
    size_t klen = strlen(key);

    for (const char *p = status; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        unsigned long long v;
        char *end = NULL;

        if (strncmp(p, key, klen) != 0 || p[klen] != ':')
            continue;
        p += klen + 1;
        p += strspn(p, " \t");
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return -EINVAL;
        errno = 0;
        v = strtoull(p, &end, 16);
        if (errno || (*end && *end != '\n') || end - p > 16)
            return -EINVAL;
        *ret = (uint64_t)v;
        return 0;
    }
    return -ENOENT;
}

void hex_encode(const void *data, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *d = data;

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 0xf];
    }
    out[2 * n] = '\0';
}

uint64_t now_usec(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

int dir_ancestry(int dirfd, struct stat *ret, size_t max)
{
    int dir = fcntl(dirfd, F_DUPFD_CLOEXEC, 3), r = 0;
    size_t n = 0;

    if (dir < 0)
        return negative_errno();
    for (;;) {
        int up;
        if (n == max) {
            r = -ELOOP;
            break;
        }
        if (fstat(dir, &ret[n]) < 0) {
            r = negative_errno();
            break;
        }
        n++;
        /* "/" is its own parent (path_resolution(7)). */
        if (n > 1 && ret[n - 1].st_dev == ret[n - 2].st_dev &&
            ret[n - 1].st_ino == ret[n - 2].st_ino) {
            n--;
            break;
        }
        up = openat(dir, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (up < 0) {
            r = negative_errno();
            break;
        }
        (void)close(dir);
        dir = up;
    }
    (void)close(dir);
    return r < 0 ? r : (int)n;
}

ssize_t stat_find(const struct stat *st, const struct stat *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i].st_ino && ids[i].st_ino == st->st_ino && ids[i].st_dev == st->st_dev)
            return (ssize_t)i;
    return -1;
}

bool pace_take(uint64_t *at, uint64_t now, uint64_t burst, uint64_t interval)
{
    uint64_t earliest = now > burst * interval ? now - burst * interval : 0;
    bool paced = *at + interval > now;

    *at = (*at > earliest ? *at : earliest) + interval;
    return paced;
}

/* The kernel's own limit on the links in one path lookup (MAXSYMLINKS, include/linux/namei.h). */
#define PATH_MAX_SYMLINKS 40

/* Whether the symlink link (O_PATH|O_NOFOLLOW) in the directory dirfd is root's: only root can
 * have made it, and only root can have put it there. */
static int link_is_roots(int dirfd, int link)
{
    struct stat st, dir;

    if (fstat(link, &st) < 0 || fstat(dirfd, &dir) < 0)
        return negative_errno();
    return st.st_uid == 0 && dir.st_uid == 0 && (dir.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

int path_open_nofollow(const char *path, bool follow_root_links, char *walked, size_t size)
{
    char rest[2 * PATH_MAX], target[PATH_MAX];
    _cleanup_close_ int fd = -EBADF;
    unsigned links = 0;
    size_t len = 0; /* of walked */
    char *p = rest;

    if (size < 2)
        return -ENAMETOOLONG;
    walked[0] = '\0';
    if (path[0] != '/')
        return -EINVAL;
    if (strlen(path) >= sizeof(rest))
        return -ENAMETOOLONG;
    memcpy(rest, path, strlen(path) + 1);
    fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();

    for (;;) {
        _cleanup_close_ int next = -EBADF;
        char name[NAME_MAX + 1];
        struct stat st;
        size_t n;
        ssize_t k;
        int r;

        while (*p == '/')
            p++;
        if (*p == '\0')
            break;
        n = strcspn(p, "/");
        if (n > NAME_MAX)
            return -ENAMETOOLONG;
        memcpy(name, p, n);
        name[n] = '\0';
        p += n;
        if (strcmp(name, ".") == 0)
            continue;

        /* One name, O_NOFOLLOW: a symlink is opened as itself (open(2), O_PATH). */
        next = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0)
            return negative_errno();
        if (fstat(next, &st) < 0)
            return negative_errno();

        if (!S_ISLNK(st.st_mode)) {
            if (strcmp(name, "..") == 0) {
                char *slash = strrchr(walked, '/');
                len = slash ? (size_t)(slash - walked) : 0;
                walked[len] = '\0';
            } else {
                if (len + 1 + n >= size)
                    return -ENAMETOOLONG;
                walked[len++] = '/';
                memcpy(walked + len, name, n + 1);
                len += n;
            }
            (void)close(fd);
            fd = TAKE_FD(next);
            continue;
        }

        r = follow_root_links ? link_is_roots(fd, next) : 0;
        if (r <= 0 || ++links > PATH_MAX_SYMLINKS) {
            (void)snprintf(walked + len, size - len, "/%s", name);
            return r < 0 ? r : -ELOOP;
        }
        /* readlinkat(2) with an empty path reads the link an O_PATH descriptor refers to. */
        k = readlinkat(next, "", target, sizeof(target) - 1);
        if (k < 0)
            return negative_errno();
        target[k] = '\0';
        /* The link's target, then what was left of the path, walked by the same rule. */
        if ((size_t)k + 1 + strlen(p) >= sizeof(rest))
            return -ENAMETOOLONG;
        memmove(rest + k + 1, p, strlen(p) + 1);
        memcpy(rest, target, (size_t)k);
        rest[k] = '/';
        p = rest;
        if (target[0] == '/') {
            (void)close(fd);
            fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0)
                return negative_errno();
            len = 0;
            walked[0] = '\0';
        }
    }
    /* "file/" names a directory, as in any path lookup (path_resolution(7)). */
    if (path[strlen(path) - 1] == '/') {
        struct stat st;
        if (fstat(fd, &st) < 0)
            return negative_errno();
        if (!S_ISDIR(st.st_mode))
            return -ENOTDIR;
    }
    if (len == 0)
        (void)snprintf(walked, size, "/");
    return TAKE_FD(fd);
}

int why_fail(char *why, size_t why_size, int r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
    return r;
}

bool path_is_at_or_below(const char *path, const char *dir)
{
    size_t n = strlen(dir);

    /* Below "/" is every absolute path (its '/' is the separator too). */
    if (n == 1 && dir[0] == '/')
        return path[0] == '/';
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

ssize_t recv_first_fd(int sock, void *buf, size_t size, int flags, int *fd)
{
    /* Room for a few: more than one is refused by closing, and a message that brings more
     * than fit has them closed by the kernel (MSG_CTRUNC, unix(7)). */
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = buf, .iov_len = size};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = u.buf,
                         .msg_controllen = sizeof(u.buf)};
    ssize_t n = RETRY_EINTR(recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC));

    if (n < 0)
        return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int got;
                memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (*fd < 0)
                    *fd = got;
                else
                    (void)close(got);
            }
        }
    return n;
}
