/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target for the proxy's request head parser and the allowlist patterns (netallow.c):
 * any bytes in, no crash, no read past the input, no undefined behaviour out. The first byte
 * chooses what the rest is: a request head (checked: an accepted head ends inside the input,
 * with a normalised host that normalises to itself; a plain request's head as the proxy
 * rewrites it for upstream is checked line by line, see check_rewrite()) or a pattern list.
 *
 *   meson setup build-fuzz -Dfuzz=true --native-file tests/fuzz/clang.ini
 *   ninja -C build-fuzz tests/fuzz/fuzz-httphead && build-fuzz/tests/fuzz/fuzz-httphead
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "netallow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The rewritten head (httphead_rewrite()) of an accepted plain request: it always fits the
 * proxy's buffer; "METHOD /..." in origin form; every line ends in CRLF, and the head ends at
 * its first empty line, the last bytes; no hop-by-hop header but the closing
 * "Connection: close"; the client's one Host line, unchanged. */
static void check_rewrite(const char *buf, const struct httphead *h)
{
    char out[HTTPHEAD_MAX + 128];
    const char *host_in = NULL, *p, *end;
    int r = httphead_rewrite(buf, h, out, sizeof(out));
    unsigned n_host = 0;
    size_t n;

    if (r <= 0)
        abort();
    n = (size_t)r;
    if (memcmp(out, buf, h->method_len) != 0 || out[h->method_len] != ' ' ||
        out[h->method_len + 1] != '/')
        abort();
    for (size_t i = 0; i < n; i++)
        if ((out[i] == '\n') != (i > 0 && out[i - 1] == '\r'))
            abort(); /* a bare LF, or a CR not before LF */
    if (n < 4 || memcmp(out + n - 4, "\r\n\r\n", 4) != 0 || memmem(out, n - 2, "\r\n\r\n", 4))
        abort();
    /* The input's Host line (httphead_parse() accepted one at most). */
    for (p = buf; p < buf + h->head_len - 4; p++)
        if (p[0] == '\n' && strncasecmp(p + 1, "host:", 5) == 0) {
            host_in = p + 1;
            break;
        }
    end = out + n - 2;
    p = (const char *)memchr(out, '\n', n) + 1;
    while (p < end) {
        const char *le = (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon)
            abort();
        if (httphead_is_hop_header(p, (size_t)(colon - p)) &&
            !(le == end && memcmp(p, "Connection: close\r\n", 19) == 0))
            abort();
        if (colon - p == 4 && strncasecmp(p, "host", 4) == 0) {
            const char *hl = host_in ? memchr(host_in, '\n', (size_t)(buf + h->head_len - host_in))
                                     : NULL;
            n_host++;
            if (!hl || hl - host_in + 1 != le - p || memcmp(p, host_in, (size_t)(le - p)) != 0)
                abort();
        }
        p = le;
    }
    if (n_host != (host_in ? 1 : 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1) {
        /* A copy of exactly size - 1 bytes, so that ASan sees any read past the end. */
        char *buf = malloc(size - 1 ? size - 1 : 1);
        struct httphead h;
        const char *why = NULL;
        int r;

        if (!buf)
            return 0;
        memcpy(buf, data + 1, size - 1);
        r = httphead_parse(buf, size - 1, &h, &why);
        if (!why)
            abort();
        if (r > 0) {
            char again[NETALLOW_HOST_MAX + 1];
            bool is_ip = false;
            if ((size_t)r > size - 1 || h.head_len != (size_t)r)
                abort();
            if (netallow_host_normalise(h.host, strlen(h.host), again, &is_ip) < 0 ||
                strcmp(again, h.host) != 0 || is_ip != h.is_ip)
                abort();
            if (h.kind == HTTPHEAD_FORWARD)
                check_rewrite(buf, &h);
        }
        free(buf);
    } else {
        char *spec = strndup((const char *)data + 1, size - 1);
        struct netallow list = {0};
        char text[512];
        unsigned line = 0;

        if (!spec)
            return 0;
        if (netallow_add(&list, spec) == 0)
            netallow_describe(&list, text, sizeof(text));
        (void)netallow_add_text(&list, (const char *)data + 1, size - 1, &line);
        netallow_free(&list);
        free(spec);
    }
    return 0;
}
