/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The output kept of a stream: its start and its end (pure).
 *
 * A program's last lines are the ones that say how it ended (a traceback's final exception
 * line, a summary, an error after long logging), so a stream over its limit keeps both ends:
 * the first half of the limit as it arrives (the head, which a caller may copy out live), the
 * last half in a ring that always holds the latest bytes (the tail). When the stream ends, the
 * tail is put after the head in the stream's data, starting at a whole UTF-8 character and, when
 * it was cut, at a line's start where one begins in its first half; what lies between is cut,
 * counted in bytes and newlines. Each half's JSON string stays within JSON_OUTPUT_FACTOR x its
 * bytes (result.h), so the result stays within that bound of the limit whatever the bytes are.
 * Used by a run's supervisor (supervise.c) and a session's step (session-step.c) alike.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"
#include "result.h"

struct headtail {
    struct nsbox_stream *s; /* data holds the head; the tail joins it at headtail_finish() */
    size_t head_max;        /* limit - limit / 2 */
    size_t tail_max;        /* limit / 2 */
    struct json_meter meter;
    bool head_full; /* the head takes no more (its bytes or its JSON bound) */
    char *ring;     /* tail_max bytes, the latest of what came after the head */
    size_t ring_pos;
    uint64_t ring_total; /* bytes that went to the ring in all */
    uint64_t newlines;   /* newlines in the whole stream */
    bool finished;
};

/* Set h up for s with limit bytes kept at most: s->data gets limit + 1 bytes (NUL-terminated,
 * empty), h a ring of limit / 2. Returns 0 or -ENOMEM (then nothing is allocated). */
int headtail_init(struct headtail *h, struct nsbox_stream *s, uint64_t limit);

/* n bytes more of the stream. Returns how many of them, from p on, joined the head (the
 * bytes a caller copies out as they come); the rest went to the tail. Counts s->total. */
size_t headtail_add(struct headtail *h, const char *p, size_t n);

/* The stream has ended: the tail joins the head in s->data; s->captured, s->head,
 * s->truncated and s->cut_lines are set. Idempotent. Returns the tail's bytes in s->data
 * (at s->data + s->head). */
size_t headtail_finish(struct headtail *h);

/* Free the ring (s->data stays the stream's). */
void headtail_done(struct headtail *h);
