/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libFuzzer target for the policy parser: any bytes in, no crash, no leak, no undefined
 * behaviour out. Included files come from a fixed in-memory table, the first input line can
 * name one of them, so includes are fuzzed too.
 *
 *   meson setup build-fuzz -Dfuzz=true --native-file tests/fuzz/clang.ini
 *   ninja -C build-fuzz tests/fuzz/fuzz-policy && build-fuzz/tests/fuzz/fuzz-policy policy/
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int include_fixed(const char *name, const char *from, char **ret_text, size_t *ret_len,
                         char **ret_file, void *userdata)
{
    static const char group[] = "# g\nclose\nread\nsocket: arg0 == AF_UNIX\n";
    (void)from;
    (void)userdata;
    if (strcmp(name, "g.group") != 0)
        return -ENOENT;
    *ret_text = strdup(group);
    *ret_file = strdup(name);
    if (!*ret_text || !*ret_file) {
        free(*ret_text);
        free(*ret_file);
        return -ENOMEM;
    }
    *ret_len = sizeof(group) - 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct policy p = {0};
    struct policy_error e = {0};
    char buf[600];

    (void)policy_parse((const char *)data, size, "fuzz.policy", include_fixed, NULL, &p, &e);
    policy_error_format(&e, buf, sizeof(buf));
    policy_free(&p);
    return 0;
}
