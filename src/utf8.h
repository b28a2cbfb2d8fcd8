/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8 validation shared by the pure modules that handle the payload's output (result.c,
 * termsafe.c). */
#pragma once

#include <stddef.h>

/* The well-formed UTF-8 sequence at s (at most n bytes, n >= 1): its length; 0 when s[0]
 * starts none; -1 when s[0..n) is a proper prefix of one, which more bytes may finish.
 * Overlong forms, surrogates and code points above U+10FFFF are not well-formed (RFC 3629,
 * table 3-7 of the Unicode standard). */
static inline int utf8_check(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else
        return 0;

    if (n >= 2 && (s[1] < lo || s[1] > hi))
        return 0;
    for (size_t i = 2; i < len && i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n < len ? -1 : (int)len;
}
