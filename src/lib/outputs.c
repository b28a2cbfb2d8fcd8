/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A notebook cell's outputs: read from their channel, and parsed into the result (outputs.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "outputs.h"
#include "result.h"

int outputs_read(int fd, uint64_t limit, struct nsbox_result *r)
{
    struct stat st;
    size_t want, have = 0;
    char *buf;

    if (fstat(fd, &st) < 0)
        return negative_errno();
    want = st.st_size < 0 ? 0 : (uint64_t)st.st_size > limit ? (size_t)limit : (size_t)st.st_size;
    buf = malloc(want + 1);
    if (!buf)
        return -ENOMEM;
    while (have < want) {
        ssize_t n = RETRY_EINTR(pread(fd, buf + have, want - have, (off_t)have));
        if (n < 0) {
            int e = negative_errno();
            free(buf);
            return e;
        }
        if (n == 0)
            break;
        have += (size_t)n;
    }
    /* Only whole lines: a record cut at the limit is not one. */
    while (have > 0 && buf[have - 1] != '\n')
        have--;
    buf[have] = '\0';
    free(r->outputs);
    r->outputs = buf;
    r->outputs_size = have;
    r->outputs_total = st.st_size < 0 ? 0 : (uint64_t)st.st_size;
    return 0;
}

/* The MIME types kept, as the driver offers them (cell.py's list). */
static const char *const kept_mimes[] = {"text/plain",      "text/html",  "text/markdown",
                                         "image/png",       "image/jpeg", "image/svg+xml",
                                         "application/json"};

static bool mime_kept(const char *m)
{
    for (size_t i = 0; i < ELEMENTSOF(kept_mimes); i++)
        if (strcmp(m, kept_mimes[i]) == 0)
            return true;
    return false;
}

/* An output record as the result holds it, or NULL if rec is not one. */
static json_t *output_of(json_t *rec, const char *type, struct outputs_stats *stats)
{
    json_t *data = json_object_get(rec, "data"), *dropped = json_object_get(rec, "dropped");
    json_t *out_data, *v, *out;
    const char *k;

    if (!json_is_object(data) || !json_is_string(json_object_get(data, "text/plain")))
        return NULL;
    out_data = json_object();
    if (!out_data)
        return NULL;
    json_object_foreach(data, k, v)
        if (mime_kept(k) && (json_is_string(v) || strcmp(k, "application/json") == 0))
            (void)json_object_set(out_data, k, v);
    out = json_pack("{s:s, s:o}", "type", type, "data", out_data);
    if (out && json_is_object(dropped)) {
        json_t *d = json_object();
        json_object_foreach(dropped, k, v)
            if (mime_kept(k) && json_is_integer(v) && json_integer_value(v) >= 0) {
                if (stats->n_dropped++ == 0)
                    (void)snprintf(stats->dropped_mime, sizeof(stats->dropped_mime), "%s", k);
                stats->dropped_bytes += (uint64_t)json_integer_value(v);
                if (d)
                    (void)json_object_set(d, k, v);
            }
        if (d && json_object_size(d))
            (void)json_object_set_new(out, "dropped", d);
        else
            json_decref(d);
    }
    return out;
}

static json_t *error_of(json_t *rec)
{
    json_t *name = json_object_get(rec, "name"), *value = json_object_get(rec, "value");
    json_t *tb = json_object_get(rec, "traceback"), *lines, *v;
    size_t i;

    if (!json_is_string(name) || !json_is_string(value) || !json_is_array(tb))
        return NULL;
    lines = json_array();
    json_array_foreach(tb, i, v)
        if (json_is_string(v))
            (void)json_array_append(lines, v);
    return json_pack("{s:O, s:O, s:o}", "name", name, "value", value, "traceback", lines);
}

int outputs_parse(const char *data, size_t size, json_t **ret_outputs, json_t **ret_error,
                  struct outputs_stats *ret_stats)
{
    struct outputs_stats stats = {0};
    json_t *outputs = json_array(), *error = NULL;

    if (!outputs)
        return -ENOMEM;
    for (size_t at = 0; at < size;) {
        const char *nl = memchr(data + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
        json_t *rec = len ? json_loadb(data + at, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
        const char *type = json_string_value(json_object_get(rec, "type"));
        json_t *item = NULL;

        at += len + 1;
        if (len == 0)
            continue;
        if (type && (strcmp(type, "execute_result") == 0 || strcmp(type, "display_data") == 0))
            item = output_of(rec, type, &stats);
        else if (type && strcmp(type, "error") == 0) {
            item = error_of(rec);
            if (item) {
                json_decref(error);
                error = item;
                item = NULL;
                json_decref(rec);
                continue;
            }
        }
        json_decref(rec);
        if (!item) {
            stats.n_invalid++;
            continue;
        }
        (void)json_array_append_new(outputs, item);
        stats.n_outputs++;
    }
    if (ret_outputs)
        *ret_outputs = outputs;
    else
        json_decref(outputs);
    if (ret_error)
        *ret_error = error;
    else
        json_decref(error);
    if (ret_stats)
        *ret_stats = stats;
    return 0;
}

void outputs_json(const struct nsbox_result *r, json_t *root)
{
    json_t *outputs = NULL, *exc = NULL;

    /* The uncaught exception is "error" only when the cell ran: with status "error", "error"
     * is nsbox's own failure. */
    if (!r->cell ||
        outputs_parse(r->outputs ? r->outputs : "", r->outputs_size, &outputs, &exc, NULL) < 0)
        return;
    (void)json_object_set_new(root, "outputs", outputs);
    if (exc && r->status != NSBOX_STATUS_ERROR)
        (void)json_object_set_new(root, "error", exc);
    else
        json_decref(exc);
}

/* One note, formatted, handed to the caller's function (as result.c's notes are). */
static void note_printf(void (*note)(const char *, void *), void *userdata, size_t *count,
                        const char *fmt, ...) _printf_(4, 5);
static void note_printf(void (*note)(const char *, void *), void *userdata, size_t *count,
                        const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    (*count)++;
    if (note)
        note(buf, userdata);
}

void outputs_notes(const struct nsbox_result *r, void (*note)(const char *, void *), void *userdata,
                   size_t *count)
{
    struct outputs_stats st = {0};
    char limit[32];

    if (!r->cell ||
        outputs_parse(r->outputs ? r->outputs : "", r->outputs_size, NULL, NULL, &st) < 0)
        return;
    result_format_size(limit, sizeof(limit), r->outputs_limit);
    if (st.n_dropped)
        note_printf(note, userdata, count,
                    "%zu part%s of the cell's outputs (%s first, %llu bytes in all) %s left out: "
                    "over the outputs' budget of %s (--outputs-limit; a figure is drawn smaller "
                    "first): show fewer or smaller images, or save them to files",
                    st.n_dropped, st.n_dropped == 1 ? "" : "s", st.dropped_mime,
                    (unsigned long long)st.dropped_bytes, st.n_dropped == 1 ? "was" : "were",
                    limit);
    if (r->outputs_total > r->outputs_size)
        note_printf(note, userdata, count,
                    "the cell's outputs were cut at %s (--outputs-limit): %llu of %llu bytes "
                    "kept, the later outputs are lost",
                    limit, (unsigned long long)r->outputs_size,
                    (unsigned long long)r->outputs_total);
    if (st.n_invalid)
        note_printf(note, userdata, count,
                    "%zu line%s on the cell's outputs channel (fd 4) %s not an output and left "
                    "out (something in the cell wrote to that descriptor)",
                    st.n_invalid, st.n_invalid == 1 ? "" : "s", st.n_invalid == 1 ? "was" : "were");
}
