/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Logging at the boundary: one line on stderr, prefixed "nsbox: ". Pure modules never log. */
#pragma once

#include <stdbool.h>

#include "macro.h"

/* Print "nsbox: MESSAGE\n" to stderr. Returns nothing; never fails the caller. */
void log_error(const char *fmt, ...) _printf_(1, 2);

/* Print "nsbox: MESSAGE\n" where %m in fmt expands to strerror(-r). Returns r (a -errno), so
 * callers can write `return log_error_errno(r, "...: %m", ...)`. */
int log_error_errno(int r, const char *fmt, ...) _printf_(2, 3);

/* true: log_error() and log_warning() print nothing (log_last_error() still records), for
 * `nsbox run --result-fd`, whose result carries what they would say. */
void log_set_quiet(bool quiet);

/* The text of the last error logged (without "nsbox: "), or "". */
const char *log_last_error(void);

/* Format a one-line reason into the caller's buffer reason (size bytes, always terminated)
 * instead of logging it, for steps whose caller decides what a failure means (a fallback, or
 * an error). Returns r, so that `return reasonf(reason, size, -EINVAL, "...")` reads as one. */
int reasonf(char *reason, size_t size, int r, const char *fmt, ...) _printf_(4, 5);

/* As log_error, prefixed "nsbox: warning: ". */
void log_warning(const char *fmt, ...) _printf_(1, 2);

/* As log_error but for unbounded allocation failure in the CLI: prints and aborts. */
_noreturn_ void log_oom(void);

void *xmalloc(size_t n);
char *xstrdup(const char *s);
