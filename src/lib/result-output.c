/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The result's output fields (result.h): a stream's start, its end and what was cut between
 * them (headtail.h), the files it went to, the files the payload wrote (written.h), and what
 * stderr says of a missing module, and the kinds of the notes. Pure. */
#include <ctype.h>
#include <jansson.h>
#include <string.h>

#include "result.h"

/* The bytes of s's head: all that was kept when nothing was cut (headtail.h). */
size_t result_stream_head(const struct nsbox_stream *s)
{
    return s->truncated && s->head <= s->captured ? s->head : s->captured;
}

/* The module of the last "No module named 'X'" in stderr, as far as it is a plain dotted name
 * (what the program printed is quoted only when it is that), into buf; "" if none. */
void result_module_not_found(const struct nsbox_result *r, char *buf, size_t size)
{
    static const char key[] = "No module named '";
    const char *p = r->err.data, *end = r->err.data + r->err.captured, *last = NULL;
    size_t n = 0;

    while (p < end && (p = memmem(p, (size_t)(end - p), key, sizeof(key) - 1))) {
        p += sizeof(key) - 1;
        last = p;
    }
    buf[0] = '\0';
    if (!last)
        return;
    while (last + n < end && n + 1 < size &&
           (isalnum((unsigned char)last[n]) || last[n] == '_' || last[n] == '.'))
        n++;
    if (last + n < end && last[n] == '\'' && n > 0) {
        memcpy(buf, last, n);
        buf[n] = '\0';
    }
}

json_t *result_stream_text(const struct nsbox_stream *s)
{
    return json_text(s->data ? s->data : "", s->data ? result_stream_head(s) : 0);
}

/* The end of a stream kept after a cut ("" when nothing was cut). */
static json_t *stream_tail_text(const struct nsbox_stream *s)
{
    size_t head = result_stream_head(s);

    return json_text(s->data ? s->data + head : "", s->data ? s->captured - head : 0);
}

/* The files the payload wrote in /work: [{path, size, sha256}], or null when unknown. */
static json_t *written_json(const struct nsbox_result *r)
{
    json_t *list;

    if (!r->written_known)
        return json_null();
    list = json_array();
    for (size_t i = 0; list && i < r->n_written; i++) {
        const struct nsbox_written_file *f = &r->written[i];
        json_t *path = json_text(f->path, strlen(f->path));
        (void)json_array_append_new(list,
                                    json_pack("{s:o, s:I, s:s?}", "path", path ? path : json_null(),
                                              "size", (json_int_t)f->size, "sha256",
                                              f->sha256[0] ? f->sha256 : NULL));
    }
    return list;
}

/* The file the whole stream went to: {bytes, complete, error}, or null without one. */
static json_t *stream_file_json(const struct nsbox_stream *s)
{
    if (!s->file_asked)
        return json_null();
    return json_pack("{s:I, s:b, s:s?}", "bytes", (json_int_t)s->file_bytes, "complete",
                     s->file_error == 0 && !s->incomplete && s->file_bytes == s->total, "error",
                     s->file_error ? strerror(s->file_error) : NULL);
}

/* What was cut between a stream's head and its tail, or null. */
static json_t *stream_cut_json(const struct nsbox_stream *s)
{
    if (!s->truncated)
        return json_null();
    return json_pack("{s:I, s:I, s:I, s:I}", "bytes", (json_int_t)(s->total - s->captured), "lines",
                     (json_int_t)s->cut_lines, "head_bytes", (json_int_t)result_stream_head(s),
                     "tail_bytes", (json_int_t)(s->captured - result_stream_head(s)));
}

void result_output_json(const struct nsbox_result *r, json_t *root)
{
    /* What the payload wrote in /work, copied out or not. */
    (void)json_object_set_new(root, "files_written", written_json(r));
    (void)json_object_set_new(root, "files_written_unlisted",
                              json_integer((json_int_t)r->written_more));
    (void)json_object_set_new(root, "files_written_partial", json_boolean(r->written_partial));
    /* --stdout-file, --stderr-file: what reached the file. */
    (void)json_object_set_new(root, "stdout_file", stream_file_json(&r->out));
    (void)json_object_set_new(root, "stderr_file", stream_file_json(&r->err));
    /* Over --output-limit the start and the end of each stream are kept, half the limit each:
     * "stdout" is the start, "stdout_tail" the end, "stdout_cut" what lay between them. */
    (void)json_object_set_new(root, "stdout_tail", stream_tail_text(&r->out));
    (void)json_object_set_new(root, "stderr_tail", stream_tail_text(&r->err));
    (void)json_object_set_new(root, "stdout_cut", stream_cut_json(&r->out));
    (void)json_object_set_new(root, "stderr_cut", stream_cut_json(&r->err));
}

json_t *result_note_kinds_json(const struct result_note_marks *marks, size_t n)
{
    json_t *kinds = json_array();

    for (size_t i = 1; kinds && i <= n; i++)
        (void)json_array_append_new(kinds,
                                    i == marks->inet_socket ? json_string("inet_socket_refused")
                                    : i == marks->module_not_found ? json_string("module_not_found")
                                                                   : json_null());
    return kinds;
}
