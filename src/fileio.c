/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <time.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
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

int read_regular_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;

    if (fd < 0)
        return negative_errno();
    if (fstat(fd, &st) < 0)
        return negative_errno();
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    return read_fd_all(fd, max, ret, ret_len);
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
unsigned long long process_start_time(pid_t pid)
{
    char path[64], buf[1024], *p;
    _cleanup_close_ int fd = -EBADF;
    ssize_t n;

    (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p)
        return 0;
    for (int field = 2; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}


uint64_t now_usec(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}
