/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idfiles.h"

/* Field i (0-based) of the ':'-separated line [line, end): its start and length, or false. */
static bool field(const char *line, const char *end, unsigned i, const char **ret, size_t *ret_len)
{
    const char *p = line;

    for (; i > 0; i--) {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (!colon)
            return false;
        p = colon + 1;
    }
    *ret = p;
    *ret_len = (size_t)((const char *)(memchr(p, ':', (size_t)(end - p)) ?: end) - p);
    return true;
}

/* Whether a line of text has name as field 0 (when name) or the decimal id as field id_field. */
static bool has(const char *text, size_t len, const char *name, unsigned id_field, unsigned id)
{
    char want[16];
    size_t want_len = (size_t)snprintf(want, sizeof(want), "%u", id);

    for (const char *line = text, *stop = text + len; line < stop;) {
        const char *end = memchr(line, '\n', (size_t)(stop - line)) ?: stop;
        const char *f;
        size_t n;

        if (name) {
            if (field(line, end, 0, &f, &n) && n == strlen(name) && memcmp(f, name, n) == 0)
                return true;
        } else if (field(line, end, id_field, &f, &n) && n == want_len && memcmp(f, want, n) == 0)
            return true;
        line = end + 1;
    }
    return false;
}

/* text, a '\n' if it does not end in one, the chosen name and rest: 1, -EEXIST or -ENOMEM. */
static int add_line(const char *text, size_t len, unsigned id, const char *rest, char **ret)
{
    char name[32];
    char *out;

    (void)snprintf(name, sizeof(name), "%s", IDFILES_NAME);
    if (has(text, len, name, 0, 0)) {
        (void)snprintf(name, sizeof(name), "%s-%u", IDFILES_NAME, id);
        if (has(text, len, name, 0, 0))
            return -EEXIST;
    }
    if (asprintf(&out, "%.*s%s%s%s\n", (int)len, text, len > 0 && text[len - 1] != '\n' ? "\n" : "",
                 name, rest) < 0)
        return -ENOMEM;
    *ret = out;
    return 1;
}

int idfiles_passwd(const char *text, size_t len, uid_t uid, gid_t gid, char **ret)
{
    char rest[96];

    if (has(text, len, NULL, 2, (unsigned)uid))
        return 0;
    (void)snprintf(rest, sizeof(rest), ":x:%u:%u:nsbox sandbox:/tmp:/bin/sh", (unsigned)uid,
                   (unsigned)gid);
    return add_line(text, len, (unsigned)uid, rest, ret);
}

int idfiles_group(const char *text, size_t len, gid_t gid, char **ret)
{
    char rest[32];

    if (has(text, len, NULL, 2, (unsigned)gid))
        return 0;
    (void)snprintf(rest, sizeof(rest), ":x:%u:", (unsigned)gid);
    return add_line(text, len, (unsigned)gid, rest, ret);
}
