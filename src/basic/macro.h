/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The small cleanup vocabulary nsbox uses everywhere (see HACKING.md). */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _noreturn_ __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

static inline void freep(void *p)
{
    free(*(void **)p);
}

/* close() is never retried: on Linux the descriptor is gone even when it reports EINTR. */
static inline void closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        (void)close(*fd);
        errno = saved;
    }
}

static inline void fclosep(FILE **f)
{
    if (*f)
        (void)fclose(*f);
}

static inline void closedirp(DIR **d)
{
    if (*d)
        (void)closedir(*d);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_closedir_ _cleanup_(closedirp)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Hand ownership out of a _cleanup_ variable. */
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _fd_ = (fd);                                                                           \
        (fd) = -EBADF;                                                                             \
        _fd_;                                                                                      \
    })
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _p_ = (p);                                                                   \
        (p) = NULL;                                                                                \
        _p_;                                                                                       \
    })

/* Retry a blocking call interrupted by a signal. */
#define RETRY_EINTR(expr)                                                                          \
    ({                                                                                             \
        long _r_;                                                                                  \
        do                                                                                         \
            _r_ = (long)(expr);                                                                    \
        while (_r_ < 0 && errno == EINTR);                                                         \
        _r_;                                                                                       \
    })

static inline int negative_errno(void)
{
    return errno > 0 ? -errno : -EIO;
}
