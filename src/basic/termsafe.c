/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <string.h>

#include "termsafe.h"
#include "utf8.h"

#define WORD "nsbox:"
#define WORD_LEN (sizeof(WORD) - 1)

static size_t put_hex(char *out, unsigned char c)
{
    static const char digits[] = "0123456789abcdef";
    out[0] = '\\';
    out[1] = 'x';
    out[2] = digits[c >> 4];
    out[3] = digits[c & 0xf];
    return 4;
}

/* Escape s[0..n) to out + *o. Stops before a part that the bytes after s decide (a CR, an
 * unfinished UTF-8 character, a beginning of "nsbox:") unless final. Returns the bytes of s
 * consumed. */
static size_t escape_run(const unsigned char *s, size_t n, bool final, bool line, char *out,
                         size_t *o)
{
    size_t i = 0;

    while (i < n) {
        unsigned char c = s[i];
        size_t rest = n - i;
        int len;

        if (c == 'n' && !line) {
            size_t k = rest < WORD_LEN ? rest : WORD_LEN;
            if (memcmp(s + i, WORD, k) == 0) {
                if (k == WORD_LEN) {
                    memcpy(out + *o, TERMSAFE_MARK WORD, sizeof(TERMSAFE_MARK WORD) - 1);
                    *o += sizeof(TERMSAFE_MARK WORD) - 1;
                    i += WORD_LEN;
                    continue;
                }
                if (!final)
                    break;
            }
        }
        if (c == '\r' && !line) {
            if (rest < 2 && !final)
                break;
            if (rest >= 2 && s[i + 1] == '\n') {
                memcpy(out + *o, "\r\n", 2);
                *o += 2;
                i += 2;
            } else {
                *o += put_hex(out + *o, c);
                i++;
            }
            continue;
        }
        if (c == '\t' || (c == '\n' && !line) || (c >= 0x20 && c < 0x7f)) {
            out[(*o)++] = (char)c;
            i++;
            continue;
        }
        if (c < 0x80) { /* the other C0 controls (in a line, newline and CR too), DEL */
            *o += put_hex(out + *o, c);
            i++;
            continue;
        }
        len = utf8_check(s + i, rest);
        if (len < 0 && !final)
            break;
        if (len <= 0) { /* not UTF-8, or unfinished at the stream's end */
            *o += put_hex(out + *o, c);
            i++;
            continue;
        }
        if (utf8_hidden(utf8_decode(s + i, len)))
            for (int k = 0; k < len; k++)
                *o += put_hex(out + *o, s[i + (size_t)k]);
        else {
            memcpy(out + *o, s + i, (size_t)len);
            *o += (size_t)len;
        }
        i += (size_t)len;
    }
    return i;
}

size_t termsafe_escape(struct termsafe *t, const char *in, size_t n, char *out)
{
    const unsigned char *u = (const unsigned char *)in;
    size_t o = 0, used = 0, c;

    if (t->n_held > 0) {
        /* What was held needs at most WORD_LEN - 1 bytes more to be decided. */
        unsigned char tmp[sizeof(t->held) + WORD_LEN];
        size_t take = n < WORD_LEN ? n : WORD_LEN, total = t->n_held + take;

        memcpy(tmp, t->held, t->n_held);
        memcpy(tmp + t->n_held, u, take);
        c = escape_run(tmp, total, false, false, out, &o);
        if (c < t->n_held) {
            /* Still undecided: then all of the input was taken. */
            memmove(t->held, tmp + c, total - c);
            t->n_held = total - c;
            return o;
        }
        used = c - t->n_held;
        t->n_held = 0;
    }
    c = escape_run(u + used, n - used, false, false, out, &o);
    used += c;
    memcpy(t->held, u + used, n - used);
    t->n_held = n - used;
    return o;
}

size_t termsafe_finish(struct termsafe *t, char *out)
{
    size_t o = 0;

    (void)escape_run(t->held, t->n_held, true, false, out, &o);
    t->n_held = 0;
    return o;
}

size_t termsafe_escape_line(const char *in, size_t n, char *out, size_t size)
{
    size_t o = 0, i = 0;

    if (size == 0)
        return 0;
    /* In pieces that fit: a piece of k bytes writes at most 4 * k. */
    while (i < n && size - 1 - o >= 4 * 4) {
        size_t k = (size - 1 - o) / 4;
        size_t used;

        if (k > n - i)
            k = n - i;
        /* A piece must not split a UTF-8 character: end it before an unfinished one. */
        used = escape_run((const unsigned char *)in + i, k, k == n - i, true, out, &o);
        if (used == 0)
            used = escape_run((const unsigned char *)in + i, k, true, true, out, &o);
        i += used;
    }
    out[o] = '\0';
    return o;
}
