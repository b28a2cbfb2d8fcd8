/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The machine-readable result of a run (internal helpers; the encoder is in nsbox.h). */
#pragma once

#include <jansson.h>
#include <stddef.h>

/* Copy the n bytes at s into a new NUL-terminated string of valid UTF-8, replacing each byte
 * that is not part of a well-formed sequence (overlong forms, surrogates and code points above
 * U+10FFFF included) with U+FFFD. Embedded NUL bytes are kept. Pure.
 * Returns the string (length in *ret_len), or NULL when out of memory. */
char *utf8_sanitize(const char *s, size_t n, size_t *ret_len);

/* A JSON string of the n bytes at s, made valid UTF-8 by utf8_sanitize(). NULL when out of
 * memory. */
json_t *json_text(const char *s, size_t n);
