/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* JSON text of a result (result.h): jansson's text with every character a terminal or an editor
 * would hide (utf8_hidden()) written as a \u escape, in memory (json_dump_exact()) or streamed
 * to a descriptor (result_json_dump_fd()). Pure but for write(2). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "result.h"
#include "utf8.h"

static size_t put_u(char *out, uint32_t unit)
{
    return (size_t)sprintf(out, "\\u%04x", (unsigned)unit);
}

/* Copy jansson's JSON text in[0..n) to out (room for 6 * n bytes) with every utf8_hidden()
 * character written as a \u escape: in JSON text such characters can only stand in strings,
 * where the escape is the same character (RFC 8259, section 7), so the value is unchanged.
 * Stops before an unfinished UTF-8 sequence at the end unless final (jansson writes only
 * well-formed UTF-8, so then there is none). Returns the bytes of in consumed; *o advances. */
static size_t json_hide(const unsigned char *in, size_t n, bool final, char *out, size_t *o)
{
    size_t i = 0;

    while (i < n) {
        int len = utf8_check(in + i, n - i);
        uint32_t cp;

        if (len < 0 && !final)
            break;
        if (len <= 0)
            len = 1;
        cp = utf8_decode(in + i, len);
        if (len > 1 || cp == 0x7f) {
            if (utf8_hidden(cp) && cp > 0xffff) {
                *o += put_u(out + *o, 0xd800 + ((cp - 0x10000) >> 10));
                *o += put_u(out + *o, 0xdc00 + ((cp - 0x10000) & 0x3ff));
            } else if (utf8_hidden(cp))
                *o += put_u(out + *o, cp);
            else {
                memcpy(out + *o, in + i, (size_t)len);
                *o += (size_t)len;
            }
        } else
            out[(*o)++] = (char)in[i];
        i += (size_t)len;
    }
    return i;
}

char *json_dump_exact(const json_t *j, size_t flags)
{
    size_t n = json_dumpb(j, NULL, 0, flags), hidden = 0, o = 0;
    char *text, *safe;

    if (n == 0)
        return NULL;
    text = malloc(n + 1);
    if (!text)
        return NULL;
    if (json_dumpb(j, text, n, flags) != n) {
        free(text);
        return NULL;
    }
    text[n] = '\0';
    /* Most texts hold no hidden character: keep them as they are. */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        int len = c == 0x7f ? 1 : c >= 0x80 ? utf8_check((unsigned char *)text + i, n - i) : 0;

        if (len > 0 && utf8_hidden(utf8_decode((unsigned char *)text + i, len)))
            hidden++;
        if (len > 1)
            i += (size_t)len - 1;
    }
    if (hidden == 0)
        return text;
    safe = malloc(n + 12 * hidden + 1);
    if (!safe) {
        free(text);
        return NULL;
    }
    (void)json_hide((unsigned char *)text, n, true, safe, &o);
    safe[o] = '\0';
    free(text);
    return safe;
}

struct json_fd_sink {
    int fd;
    unsigned char held[4]; /* an unfinished UTF-8 sequence from the last chunk */
    size_t n_held;
};

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int json_fd_write(const char *buffer, size_t size, void *data)
{
    struct json_fd_sink *sink = data;
    const unsigned char *u = (const unsigned char *)buffer;
    char out[6 * 512 + 6 * 8];

    while (size > 0 || sink->n_held > 0) {
        unsigned char piece[512 + 4];
        size_t take = size < 512 ? size : 512, total, used, o = 0;

        memcpy(piece, sink->held, sink->n_held);
        memcpy(piece + sink->n_held, u, take);
        total = sink->n_held + take;
        used = json_hide(piece, total, false, out, &o);
        sink->n_held = total - used;
        memcpy(sink->held, piece + used, sink->n_held);
        u += take;
        size -= take;
        if (write_all(sink->fd, out, o) < 0)
            return -1;
        if (take == 0)
            break; /* an unfinished sequence waits for the next chunk */
    }
    return 0;
}

int result_json_dump_fd(const json_t *j, size_t flags, int fd)
{
    struct json_fd_sink sink = {.fd = fd};
    char out[6 * 8];
    size_t o = 0;

    if (json_dump_callback(j, json_fd_write, &sink, flags) < 0)
        return -EIO;
    (void)json_hide(sink.held, sink.n_held, true, out, &o);
    return write_all(fd, out, o) < 0 ? -EIO : 0;
}
