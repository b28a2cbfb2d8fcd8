/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8 validation shared by the pure modules that handle the payload's output (result.c,
 * termsafe.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The code point of the well-formed sequence of len bytes at s (utf8_check()'s length). */
static inline uint32_t utf8_decode(const unsigned char *s, int len)
{
    switch (len) {
    case 1:
        return s[0];
    case 2:
        return (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
    case 3:
        return (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
    default:
        return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
               (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
    }
}

/*
 * Code points that are well-formed but not text one can see, which nsbox never shows raw
 * (termsafe.h) nor writes raw into JSON (result.h): DEL and the C1 controls (U+007F-U+009F: a
 * terminal acts on them), the line and paragraph separators (U+2028, U+2029: line breaks to
 * some readers, not to others), and the format characters, Unicode's general category Cf
 * (UnicodeData.txt, Unicode 15.1): invisible ones (soft hyphen, zero-width space and joiners,
 * word joiner, BOM) that make "ns\u200bbox:" look like "nsbox:", and the bidirectional
 * controls (UAX #9) that make text read in another order than it was written. The joiners in
 * emoji sequences are among them: shown escaped, such an emoji falls apart into its pieces.
 */
static inline bool utf8_hidden(uint32_t cp)
{
    return (cp >= 0x7f && cp <= 0x9f) || cp == 0x00ad || (cp >= 0x0600 && cp <= 0x0605) ||
           cp == 0x061c || cp == 0x06dd || cp == 0x070f || cp == 0x0890 || cp == 0x0891 ||
           cp == 0x08e2 || cp == 0x180e || (cp >= 0x200b && cp <= 0x200f) ||
           (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) ||
           (cp >= 0x2066 && cp <= 0x206f) || cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb) ||
           cp == 0x110bd || cp == 0x110cd || (cp >= 0x13430 && cp <= 0x1343f) ||
           (cp >= 0x1bca0 && cp <= 0x1bca3) || (cp >= 0x1d173 && cp <= 0x1d17a) || cp == 0xe0001 ||
           (cp >= 0xe0020 && cp <= 0xe007f);
}
