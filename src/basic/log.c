/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "termsafe.h"

static char last_error[1024];
static bool quiet;

void log_set_quiet(bool q)
{
    quiet = q;
}

int reasonf(char *reason, size_t size, int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(reason, size, fmt, ap);
    va_end(ap);
    return r;
}

const char *log_last_error(void)
{
    return last_error;
}

static void log_v(const char *prefix, int r, const char *fmt, va_list ap)
{
    char buf[1024], shown[4 * sizeof(buf)];

    /* %m takes its text from errno: give it the error being reported. */
    if (r < 0)
        errno = -r;
    (void)vsnprintf(buf, sizeof(buf), fmt, ap);
    if (prefix[0] == '\0')
        (void)snprintf(last_error, sizeof(last_error), "%s", buf);
    if (quiet)
        return;
    /* A message quotes what others chose (argv, paths, a payload's values): its control and
     * hidden characters are shown escaped and its newlines too (termsafe.h), so that it can
     * neither act on a terminal nor start a line of its own. (last_error, for the JSON result,
     * keeps the text: JSON escapes it.) */
    (void)termsafe_escape_line(buf, strlen(buf), shown, sizeof(shown));
    /* One record, one write, so concurrent writers do not interleave inside a line. On a
     * terminal "nsbox:" is bold: the payload's output cannot be (its ESC is shown escaped,
     * termsafe.h), so its lines cannot pass for nsbox's. */
    (void)fprintf(stderr, "%snsbox:%s %s%s\n", isatty(STDERR_FILENO) ? "\033[1m" : "",
                  isatty(STDERR_FILENO) ? "\033[0m" : "", prefix, shown);
}

void log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v("", 0, fmt, ap);
    va_end(ap);
}

int log_error_errno(int r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v("", r, fmt, ap);
    va_end(ap);
    return r;
}

void log_warning(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v("warning: ", 0, fmt, ap);
    va_end(ap);
}

void log_oom(void)
{
    (void)fputs("nsbox: out of memory\n", stderr);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        log_oom();
    return p;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        log_oom();
    return p;
}
