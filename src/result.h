/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The machine-readable result of a run (internal helpers; the encoder is in nsbox.h). */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Copy the n bytes at s into a new NUL-terminated string of valid UTF-8, replacing each byte
 * that is not part of a well-formed sequence (overlong forms, surrogates and code points above
 * U+10FFFF included) with U+FFFD. Embedded NUL bytes are kept. Pure.
 * Returns the string (length in *ret_len), or NULL when out of memory. */
char *utf8_sanitize(const char *s, size_t n, size_t *ret_len);

/* A JSON string of the n bytes at s, made valid UTF-8 by utf8_sanitize(). NULL when out of
 * memory. */
json_t *json_text(const char *s, size_t n);

/* The RLIMIT_CPU soft limit, in seconds, that stands for --cpus under rlimits: cpus x timeout
 * rounded up to whole seconds (RLIMIT_CPU's unit), except that a limit less than 1 s away from
 * the timeout is moved to 1 s past it. One thread uses at most one second of CPU per second of
 * wall clock, so a limit that close could only fire together with the timeout, and which of
 * them ended a busy loop would be a race; moved, the timeout always wins it, and a limit well
 * below the timeout still stops a busy payload before it. Pure; 0 when either is 0 (none). */
uint64_t result_rlimit_cpu_seconds(uint64_t cpus_milli, uint64_t timeout_usec);
