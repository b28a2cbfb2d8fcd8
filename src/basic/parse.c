/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nsbox.h"
#include "parse.h"
#include "utf8.h"

int parse_decimal(const char *s, uint64_t unit, uint64_t *ret)
{
    uint64_t whole = 0, frac = 0, frac_scale = 1;
    const char *p = s;
    bool digits = false;

    if (!s || unit == 0)
        return -EINVAL;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        whole = whole * 10 + (uint64_t)(*p - '0');
        digits = true;
    }
    if (*p == '.') {
        p++;
        for (; *p >= '0' && *p <= '9'; p++) {
            /* Digits beyond 10^-18 cannot change a result scaled by a 64-bit unit. */
            if (frac_scale < UINT64_C(1000000000000000000)) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                frac_scale *= 10;
            }
            digits = true;
        }
    }
    if (!digits || *p != '\0')
        return -EINVAL;
    if (whole > UINT64_MAX / unit)
        return -ERANGE;

    uint64_t r = whole * unit;
    /* frac / frac_scale * unit without overflow: frac < frac_scale <= 10^18. */
    unsigned __int128 f = (unsigned __int128)frac * unit / frac_scale;
    if (f > UINT64_MAX - r)
        return -ERANGE;
    *ret = r + (uint64_t)f;
    return 0;
}

/* A number with a unit suffix: units[] maps each suffix (compared with cmp) to what one of it
 * is worth. Returns parse_decimal()'s result, or -EINVAL for a missing number or an unknown
 * suffix. */
struct unit {
    const char *suffix;
    uint64_t unit;
};

static int parse_with_unit(const char *s, const struct unit *units, size_t n_units,
                           int (*cmp)(const char *, const char *), uint64_t *ret)
{
    char number[64];
    size_t n;

    if (!s)
        return -EINVAL;
    n = strspn(s, "0123456789.");
    if (n == 0 || n >= sizeof(number))
        return -EINVAL;
    memcpy(number, s, n);
    number[n] = '\0';
    for (size_t i = 0; i < n_units; i++)
        if (cmp(s + n, units[i].suffix) == 0)
            return parse_decimal(number, units[i].unit, ret);
    return -EINVAL;
}

int parse_size(const char *s, uint64_t *ret_bytes)
{
    static const struct unit units[] = {
        {"", 1},
        {"b", 1},
        {"k", UINT64_C(1) << 10},
        {"kb", UINT64_C(1) << 10},
        {"kib", UINT64_C(1) << 10},
        {"m", UINT64_C(1) << 20},
        {"mb", UINT64_C(1) << 20},
        {"mib", UINT64_C(1) << 20},
        {"g", UINT64_C(1) << 30},
        {"gb", UINT64_C(1) << 30},
        {"gib", UINT64_C(1) << 30},
        {"t", UINT64_C(1) << 40},
        {"tb", UINT64_C(1) << 40},
        {"tib", UINT64_C(1) << 40},
    };

    return parse_with_unit(s, units, sizeof(units) / sizeof(units[0]), strcasecmp, ret_bytes);
}

int parse_duration(const char *s, uint64_t *ret_usec)
{
    static const struct unit units[] = {
        {"ms", 1000},  {"s", 1000000}, {"m", 60 * 1000000ULL}, {"h", 3600 * 1000000ULL},
        {"", 1000000},
    }; /* microseconds */
    uint64_t usec;
    int r = parse_with_unit(s, units, sizeof(units) / sizeof(units[0]), strcmp, &usec);

    if (r < 0)
        return r;
    if (usec == 0 || usec > UINT64_C(366) * 24 * 3600 * 1000000)
        return -ERANGE;
    *ret_usec = usec;
    return 0;
}

int parse_cpus(const char *s, uint64_t *ret_milli)
{
    uint64_t milli;
    int r = parse_decimal(s, 1000, &milli);
    if (r < 0)
        return r;
    if (milli == 0 || milli > 4096 * 1000)
        return -ERANGE;
    *ret_milli = milli;
    return 0;
}

int parse_count(const char *s, uint64_t max, uint64_t *ret)
{
    uint64_t v;
    int r;

    if (!s || strchr(s, '.'))
        return -EINVAL;
    r = parse_decimal(s, 1, &v);
    if (r < 0)
        return r;
    if (v == 0 || v > max)
        return -ERANGE;
    *ret = v;
    return 0;
}

bool path_is_safe_target(const char *path)
{
    const char *p;

    if (!path || path[0] != '/' || path[1] == '\0')
        return false;
    p = path + 1;
    for (;;) {
        size_t len = strcspn(p, "/");
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (p[len] == '\0')
            return true;
        p += len + 1;
    }
}

/* The length of a target without its trailing slashes, as Docker takes "/mnt/" for "/mnt"
 * ("/" itself stays, and is refused by path_is_safe_target()). */
static size_t target_length(const char *target, size_t len)
{
    while (len > 1 && target[len - 1] == '/')
        len--;
    return len;
}

int parse_bind(const char *spec, char **ret_source, char **ret_target, bool *ret_writable)
{
    const char *c1, *c2;
    char *source = NULL, *target = NULL;
    bool writable = false;

    if (!spec)
        return -EINVAL;
    c1 = strchr(spec, ':');
    if (!c1 || c1 == spec)
        return -EINVAL;
    c2 = strchr(c1 + 1, ':');
    if (c2) {
        if (strcmp(c2 + 1, "rw") == 0)
            writable = true;
        else if (strcmp(c2 + 1, "ro") != 0)
            return -EINVAL;
    } else
        c2 = c1 + strlen(c1);

    source = strndup(spec, (size_t)(c1 - spec));
    target = strndup(c1 + 1, target_length(c1 + 1, (size_t)(c2 - c1 - 1)));
    if (!source || !target) {
        free(source);
        free(target);
        return -ENOMEM;
    }
    if (!path_is_safe_target(target)) {
        free(source);
        free(target);
        return -EINVAL;
    }
    *ret_source = source;
    *ret_target = target;
    *ret_writable = writable;
    return 0;
}

/* Permission bits in octal, at most 07777, from the len bytes at s. */
static int parse_mode(const char *s, size_t len, unsigned *ret)
{
    unsigned long m = 0;

    if (len == 0)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '7')
            return -EINVAL;
        m = m * 8 + (unsigned long)(s[i] - '0');
        if (m > 07777)
            return -EINVAL;
    }
    *ret = (unsigned)m;
    return 0;
}

int parse_tmpfs(const char *spec, uint64_t default_size, char **ret_target, uint64_t *ret_size,
                unsigned *ret_mode, bool *ret_exec)
{
    const char *colon = strchr(spec ? spec : "", ':');
    uint64_t size = default_size;
    unsigned mode = 01777;
    bool exec = false;
    char *target;

    if (!spec)
        return -EINVAL;
    if (colon) {
        const char *opt = colon + 1;
        for (;;) {
            size_t len = strcspn(opt, ",");
            char value[64];
            if (len > 5 && strncmp(opt, "size=", 5) == 0) {
                if (len - 5 >= sizeof(value))
                    return -EINVAL;
                memcpy(value, opt + 5, len - 5);
                value[len - 5] = '\0';
                if (parse_size(value, &size) < 0 || size == 0)
                    return -EINVAL;
            } else if (len > 5 && strncmp(opt, "mode=", 5) == 0) {
                if (parse_mode(opt + 5, len - 5, &mode) < 0)
                    return -EINVAL;
            } else if (len == 4 && strncmp(opt, "exec", 4) == 0) {
                exec = true;
            } else if (len == 6 && strncmp(opt, "noexec", 6) == 0) {
                exec = false;
            } else
                return -EINVAL;
            if (opt[len] == '\0')
                break;
            opt += len + 1;
        }
    }
    target = colon ? strndup(spec, (size_t)(colon - spec)) : strdup(spec);
    if (!target)
        return -ENOMEM;
    if (!path_is_safe_target(target)) {
        free(target);
        return -EINVAL;
    }
    *ret_target = target;
    *ret_size = size;
    *ret_mode = mode;
    *ret_exec = exec;
    return 0;
}

void parsed_mount_done(struct parsed_mount *m)
{
    free(m->source);
    free(m->target);
    m->source = m->target = NULL;
}

/* One CSV field of --mount at *p, as Docker reads the value with encoding/csv: plain up to the
 * next ',', or wholly in double quotes, where "" stands for one '"' (so a field can hold ','
 * and '"'). Copies it to buf (size bytes, NUL-terminated) and moves *p past the ','. */
static int mount_field(const char **p, char *buf, size_t size)
{
    const char *s = *p;
    size_t n = 0;

    if (*s == '"') {
        for (s++;; s++) {
            if (*s == '\0')
                return -EINVAL; /* unterminated */
            if (*s == '"') {
                if (s[1] != '"')
                    break;
                s++;
            }
            if (n + 1 >= size)
                return -EINVAL;
            buf[n++] = *s;
        }
        s++;
        if (*s != ',' && *s != '\0')
            return -EINVAL;
    } else {
        for (; *s && *s != ','; s++) {
            if (*s == '"' || n + 1 >= size)
                return -EINVAL;
            buf[n++] = *s;
        }
    }
    buf[n] = '\0';
    *p = *s == ',' ? s + 1 : s;
    return 0;
}

/* Docker's boolean option values: the key alone, or =true/1/false/0. */
static int mount_bool(const char *value, bool *ret)
{
    if (!value || strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
        *ret = true;
    else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
        *ret = false;
    else
        return -EINVAL;
    return 0;
}

int parse_mount(const char *spec, uint64_t default_tmpfs_size, struct parsed_mount *ret)
{
    struct parsed_mount m = {.size = default_tmpfs_size, .mode = 01777};
    bool have_type = false, readonly = false, have_readonly = false, tmpfs_option = false;
    const char *p = spec;
    char field[8192];
    int r = -EINVAL;

    if (!spec || !*spec)
        return -EINVAL;
    while (*p) {
        char *value;

        if (mount_field(&p, field, sizeof(field)) < 0)
            goto fail;
        value = strchr(field, '=');
        if (value)
            *value++ = '\0';

        if (strcmp(field, "type") == 0 && value) {
            if (strcmp(value, "bind") == 0)
                m.is_tmpfs = false;
            else if (strcmp(value, "tmpfs") == 0)
                m.is_tmpfs = true;
            else
                goto fail; /* volume, image, npipe, cluster: nsbox has none of them */
            have_type = true;
        } else if ((strcmp(field, "source") == 0 || strcmp(field, "src") == 0) && value && *value) {
            free(m.source);
            m.source = strdup(value);
            if (!m.source)
                goto oom;
        } else if ((strcmp(field, "target") == 0 || strcmp(field, "dst") == 0 ||
                    strcmp(field, "destination") == 0) &&
                   value) {
            free(m.target);
            m.target = strndup(value, target_length(value, strlen(value)));
            if (!m.target)
                goto oom;
        } else if (strcmp(field, "readonly") == 0 || strcmp(field, "ro") == 0) {
            if (mount_bool(value, &readonly) < 0)
                goto fail;
            have_readonly = true;
        } else if (strcmp(field, "tmpfs-size") == 0 && value) {
            if (parse_size(value, &m.size) < 0 || m.size == 0)
                goto fail;
            tmpfs_option = true;
        } else if (strcmp(field, "tmpfs-mode") == 0 && value) {
            if (parse_mode(value, strlen(value), &m.mode) < 0)
                goto fail;
            tmpfs_option = true;
        } else
            goto fail;
    }

    /* Docker's rules: binds need a source; tmpfs takes none, and its options only go with it.
     * A type is required (Docker's default, a volume, does not exist in nsbox). A bind is
     * read-only unless readonly=false, as nsbox's -v is unless :rw (Docker's are writable): a
     * command copied from Docker fails visibly where it writes, and never gets write access
     * nobody asked nsbox for. A tmpfs is always writable (a read-only one would stay empty). */
    if (!have_type || !m.target || !path_is_safe_target(m.target))
        goto fail;
    if (m.is_tmpfs ? m.source || (have_readonly && readonly) : !m.source || tmpfs_option)
        goto fail;
    m.writable = m.is_tmpfs || (have_readonly && !readonly);
    *ret = m;
    return 0;

oom:
    r = -ENOMEM;
fail:
    parsed_mount_done(&m);
    return r;
}

int parse_user(const char *s, uid_t *ret_uid, gid_t *ret_gid)
{
    const char *colon;
    char buf[32];
    uint64_t uid, gid;
    size_t n;

    if (!s)
        return -EINVAL;
    colon = strchr(s, ':');
    n = colon ? (size_t)(colon - s) : strlen(s);
    if (n == 0 || n >= sizeof(buf) || strchr(s, '.'))
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (parse_decimal(buf, 1, &uid) < 0)
        return -EINVAL;
    if (colon) {
        if (colon[1] == '\0' || parse_decimal(colon + 1, 1, &gid) < 0)
            return -EINVAL;
    } else
        gid = uid;
    /* (uid_t)-1 means "unchanged" to setresuid(2) and can never be mapped. */
    if (uid >= UINT32_MAX || gid >= UINT32_MAX)
        return -ERANGE;
    *ret_uid = (uid_t)uid;
    *ret_gid = (gid_t)gid;
    return 0;
}

bool env_name_is_valid(const char *s, size_t len)
{
    if (!s || len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '=' || s[i] == '\0')
            return false;
    return true;
}

static bool is_alnum_ascii(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

bool run_name_is_valid(const char *name)
{
    size_t n;

    if (!name || !is_alnum_ascii(name[0]))
        return false;
    for (n = 1; name[n]; n++)
        if (!is_alnum_ascii(name[n]) && !strchr("_.-", name[n]))
            return false;
    return n <= NSBOX_NAME_MAX;
}

bool label_is_valid(const char *label, size_t *ret_key_len)
{
    size_t key_len, value_len = 0;
    const char *value;

    if (!label || !is_alnum_ascii(label[0]))
        return false;
    key_len = strcspn(label, "=");
    if (key_len > LABEL_KEY_MAX)
        return false;
    for (size_t i = 1; i < key_len; i++)
        if (!is_alnum_ascii(label[i]) && !strchr("_./-", label[i]))
            return false;
    value = label[key_len] == '=' ? label + key_len + 1 : label + key_len;
    /* C0 controls, DEL, and C1 controls in UTF-8 (U+0080..U+009F: 0xc2 0x80..0x9f), which
     * terminals act on (U+009B is a CSI). */
    for (; value[value_len]; value_len++) {
        unsigned char ch = (unsigned char)value[value_len];
        unsigned char next = (unsigned char)value[value_len + 1];
        if (ch < 0x20 || ch == 0x7f || (ch == 0xc2 && next >= 0x80 && next <= 0x9f))
            return false;
    }
    if (value_len > LABEL_VALUE_MAX)
        return false;
    *ret_key_len = key_len;
    return true;
}

bool copy_name_is_valid(const char *name)
{
    const char *p = name;

    if (!name || !*name || *name == '/' || strlen(name) >= PATH_MAX)
        return false;
    /* Well-formed UTF-8 without anything a reader cannot see (utf8.h: C0, DEL, C1, the line
     * separators, bidi and other format characters): such a name could hide what it is on
     * the host, and one that is not UTF-8 could not be said as it is in the JSON result (two
     * names would show as one). */
    for (size_t i = 0, n = strlen(name); i < n;) {
        int len = utf8_check((const unsigned char *)name + i, n - i);
        if (len <= 0 || (unsigned char)name[i] < 0x20 ||
            utf8_hidden(utf8_decode((const unsigned char *)name + i, len)))
            return false;
        i += (size_t)len;
    }
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (n > NAME_MAX)
            return false;
        p += n;
        if (*p == '/') {
            p++;
            if (!*p)
                return false; /* a trailing '/' */
        }
    }
    return true;
}
