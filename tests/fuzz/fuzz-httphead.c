/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target for the proxy's request head parser and the allowlist patterns (netallow.c):
 * any bytes in, no crash, no read past the input, no undefined behaviour out. The first byte
 * chooses what the rest is: a request head (checked: an accepted head ends inside the input,
 * with a normalised host that normalises to itself) or a pattern list.
 *
 *   meson setup build-fuzz -Dfuzz=true --native-file tests/fuzz/clang.ini
 *   ninja -C build-fuzz tests/fuzz/fuzz-httphead && build-fuzz/tests/fuzz/fuzz-httphead
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netallow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
