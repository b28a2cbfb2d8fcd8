/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A stream of a run's JSON result as the model reads it: the Python API's
 * Result._stream() (python/nsbox/result.py), in C for `nsbox mcp`, word for word and character
 * for character (python/tests/test_tools.py compares the two on real runs). Each line's
 * carriage-return updates collapse to their last state; where nsbox cut the stream (NAME_cut),
 * a marker line stands between its start (NAME) and its end (NAME_tail); over max characters,
 * the first and the last half of them are shown, with a marker between. Control characters
 * but tab and newline are shown as \xNN. Lengths count characters (code points), as Python's.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "mcp-internal.h"

#define TEXT_CAP (1U << 30) /* no cap of its own: what goes in is bounded */

static bool is_lead(unsigned char c)
{
    return (c & 0xc0) != 0x80;
}

/* Characters in s[0..n). */
static size_t chars(const char *s, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += is_lead((unsigned char)s[i]);
    return k;
}

/* The byte offset of character k of s[0..n) (n when there are fewer). */
static size_t offset(const char *s, size_t n, size_t k)
{
    size_t i = 0;

    for (; i < n; i++)
        if (is_lead((unsigned char)s[i]) && k-- == 0)
            return i;
    return n;
}

/* result.py's collapse_cr(): each line's "\r" updates as a terminal would end up showing them
 * (a shorter update overwrites the start of a longer one; trailing "\r"s go). Appends to out. */
static void collapse_cr(struct mcp_buf *out, const char *s, size_t n)
{
    for (;;) {
        const char *nl = memchr(s, '\n', n);
        size_t len = nl ? (size_t)(nl - s) : n, end = len;
        struct mcp_buf shown = {0};

        if (!memchr(s, '\r', len))
            (void)buf_append(out, s, len, TEXT_CAP);
        else {
            const char *p = s, *cr;
            while (end > 0 && s[end - 1] == '\r')
                end--;
            cr = memchr(p, '\r', end);
            (void)buf_append(&shown, p, cr ? (size_t)(cr - p) : end, TEXT_CAP);
            while (cr) {
                size_t part, skip;
                p = cr + 1;
                cr = memchr(p, '\r', end - (size_t)(p - s));
                part = cr ? (size_t)(cr - p) : end - (size_t)(p - s);
                /* part, then what is left of shown after as many characters. */
                skip = offset(shown.data ? shown.data : "", shown.have, chars(p, part));
                {
                    struct mcp_buf next = {0};
                    (void)buf_append(&next, p, part, TEXT_CAP);
                    (void)buf_append(&next, shown.data ? shown.data + skip : "", shown.have - skip,
                                     TEXT_CAP);
                    buf_free(&shown);
                    shown = next;
                }
            }
            (void)buf_append(out, shown.data ? shown.data : "", shown.have, TEXT_CAP);
            buf_free(&shown);
        }
        if (!nl)
            break;
        (void)buf_append(out, "\n", 1, TEXT_CAP);
        n -= len + 1;
        s = nl + 1;
    }
}

/* result.py's tool_text(): control characters but tab and newline (C0, DEL, C1) as \xNN. */
static void tool_text(struct mcp_buf *out, const char *s, size_t n)
{
    char esc[8];

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f) {
            (void)snprintf(esc, sizeof(esc), "\\x%02x", c);
            (void)buf_append(out, esc, strlen(esc), TEXT_CAP);
        } else if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
                   (unsigned char)s[i + 1] <= 0x9f) {
            (void)snprintf(esc, sizeof(esc), "\\x%02x", (unsigned char)s[++i]);
            (void)buf_append(out, esc, strlen(esc), TEXT_CAP);
        } else
            (void)buf_append(out, s + i, 1, TEXT_CAP);
    }
}

/* n with Python's "{:,}": thousands separated by commas. */
static void grouped(char *buf, size_t size, unsigned long long n)
{
    char digits[32];
    size_t len = (size_t)snprintf(digits, sizeof(digits), "%llu", n), j = 0;

    for (size_t i = 0; i < len && j + 2 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            buf[j++] = ',';
        buf[j++] = digits[i];
    }
    buf[j] = '\0';
}

/* One piece of the output, as result.py's out list holds them: whether the last was
 * non-empty and did not end with a newline decides a marker's newline. */
struct pieces {
    struct mcp_buf out;
    bool last_open;
};

static void piece(struct pieces *p, const char *s, size_t n, bool escape)
{
    size_t before = p->out.have;

    if (escape)
        tool_text(&p->out, s, n);
    else
        (void)buf_append(&p->out, s, n, TEXT_CAP);
    p->last_open = p->out.have > before && p->out.data[p->out.have - 1] != '\n';
}

static void marker(struct pieces *p, const char *line)
{
    if (p->last_open)
        piece(p, "\n", 1, false);
    piece(p, line, strlen(line), false);
    piece(p, "\n", 1, false);
}

char *mcp_stream_text(json_t *r, const char *name, size_t max_chars, char **ret_note)
{
    char key[32], cut_line[128], b[32], l[32];
    json_t *cut;
    const char *head, *tail;
    struct mcp_buf joined = {0};
    struct pieces p = {0};
    size_t at = 0, total, spans[2][2], n_spans = 1;
    bool has_cut, marked = false;

    *ret_note = NULL;
    head = json_string_value(json_object_get(r, name));
    (void)snprintf(key, sizeof(key), "%s_tail", name);
    tail = json_string_value(json_object_get(r, key));
    (void)snprintf(key, sizeof(key), "%s_cut", name);
    cut = json_object_get(r, key);
    has_cut = json_is_object(cut);
    collapse_cr(&joined, head ? head : "", head ? json_string_length(json_object_get(r, name)) : 0);
    if (has_cut) {
        at = chars(joined.data ? joined.data : "", joined.have);
        /* result.py: text + tail, the tail collapsed on its own. */
        (void)snprintf(key, sizeof(key), "%s_tail", name);
        collapse_cr(&joined, tail ? tail : "",
                    tail ? json_string_length(json_object_get(r, key)) : 0);
        grouped(b, sizeof(b),
                (unsigned long long)json_integer_value(json_object_get(cut, "bytes")));
        grouped(l, sizeof(l),
                (unsigned long long)json_integer_value(json_object_get(cut, "lines")));
        (void)snprintf(cut_line, sizeof(cut_line), "[... %s bytes, %s lines cut ...]", b, l);
    }
    if (!joined.data)
        (void)buf_append(&joined, "", 0, TEXT_CAP);
    total = chars(joined.data, joined.have);
    spans[0][0] = 0;
    spans[0][1] = total;
    if (total > max_chars) {
        spans[0][1] = max_chars - max_chars / 2;
        spans[1][0] = total - max_chars / 2;
        spans[1][1] = total;
        n_spans = 2;
    }
    for (size_t i = 0; i < n_spans; i++) {
        size_t a = spans[i][0], e = spans[i][1];
        size_t oa = offset(joined.data, joined.have, a), oe = offset(joined.data, joined.have, e);
        if (i > 0) {
            char gap[32], line[96];
            if (has_cut && spans[i - 1][1] <= at && at <= a) {
                marker(&p, cut_line);
                marked = true;
            }
            grouped(gap, sizeof(gap), (unsigned long long)(a - spans[i - 1][1]));
            (void)snprintf(line, sizeof(line), "[... %s characters cut for this output ...]", gap);
            marker(&p, line);
        }
        if (has_cut && !marked && a <= at && at <= e &&
            ((a < at && at < e) || at == total || i == n_spans - 1)) {
            size_t oat = offset(joined.data, joined.have, at);
            piece(&p, joined.data + oa, oat - oa, true);
            marker(&p, cut_line);
            piece(&p, joined.data + oat, oe - oat, true);
            marked = true;
        } else
            piece(&p, joined.data + oa, oe - oa, true);
    }
    if (n_spans > 1 &&
        asprintf(ret_note,
                 "%s cut for this output: its first %zu and last %zu characters are shown", name,
                 spans[0][1], spans[1][1] - spans[1][0]) < 0)
        log_oom();
    buf_free(&joined);
    if (!p.out.data)
        (void)buf_append(&p.out, "", 0, TEXT_CAP);
    return p.out.data;
}

/* The option names Result.as_tool_output() gives the Python API's keywords (result.py's
 * _CLI_OPTIONS): "--memory 256m" -> memory="256m", "--timeout 1" -> timeout=1, a bare
 * "--memory" -> memory=. */
static const char *const api_options[] = {"memory", "timeout", "cpus", "pids-limit",
                                          "output-limit"};

char *mcp_api_words(const char *s)
{
    struct mcp_buf out = {0};

    while (*s) {
        const char *name = NULL;
        size_t len = 0;

        if (s[0] == '-' && s[1] == '-')
            for (size_t i = 0; i < ELEMENTSOF(api_options); i++) {
                len = strlen(api_options[i]);
                if (strncmp(s + 2, api_options[i], len) == 0 &&
                    !isalnum((unsigned char)s[2 + len]) && s[2 + len] != '-') {
                    name = api_options[i];
                    break;
                }
            }
        if (!name) {
            (void)buf_append(&out, s, 1, SIZE_MAX);
            s++;
            continue;
        }
        for (size_t i = 0; i < len; i++)
            (void)buf_append(&out, name[i] == '-' ? "_" : &name[i], 1, SIZE_MAX);
        (void)buf_append(&out, "=", 1, SIZE_MAX);
        s += 2 + len;
        /* A value: " " digits ["." digits] [kmgKMG], ending at a word's end. */
        const char *v = s + 1, *e;
        if (*s != ' ' || !isdigit((unsigned char)*v))
            continue;
        for (e = v; isdigit((unsigned char)*e); e++)
            ;
        if (*e == '.' && isdigit((unsigned char)e[1]))
            for (e++; isdigit((unsigned char)*e); e++)
                ;
        bool unit = *e && strchr("kmgKMG", *e);
        if (isalnum((unsigned char)e[unit]) || e[unit] == '_')
            continue;
        if (unit)
            (void)buf_append(&out, "\"", 1, SIZE_MAX);
        (void)buf_append(&out, v, (size_t)(e - v) + unit, SIZE_MAX);
        if (unit)
            (void)buf_append(&out, "\"", 1, SIZE_MAX);
        s = e + unit;
    }
    if (!out.data)
        (void)buf_append(&out, "", 0, SIZE_MAX);
    return out.data;
}
