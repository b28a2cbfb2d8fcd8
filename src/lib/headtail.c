/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The output kept of a stream: its start and its end (headtail.h). Pure. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "headtail.h"

static uint64_t count_newlines(const char *p, size_t n)
{
    uint64_t lines = 0;
    const char *end = p + n;

    while (p < end && (p = memchr(p, '\n', (size_t)(end - p)))) {
        lines++;
        p++;
    }
    return lines;
}

int headtail_init(struct headtail *h, struct nsbox_stream *s, uint64_t limit)
{
    *h = (struct headtail){.s = s, .head_max = limit - limit / 2, .tail_max = limit / 2};
    s->data = malloc(limit + 1);
    if (!s->data)
        return -ENOMEM;
    s->data[0] = '\0';
    if (h->tail_max > 0) {
        h->ring = malloc(h->tail_max);
        if (!h->ring) {
            free(s->data);
            s->data = NULL;
            return -ENOMEM;
        }
    }
    return 0;
}

static void ring_add(struct headtail *h, const char *p, size_t n)
{
    size_t first;

    h->ring_total += n;
    if (h->tail_max == 0)
        return;
    if (n >= h->tail_max) {
        memcpy(h->ring, p + n - h->tail_max, h->tail_max);
        h->ring_pos = 0;
        return;
    }
    first = h->tail_max - h->ring_pos < n ? h->tail_max - h->ring_pos : n;
    memcpy(h->ring + h->ring_pos, p, first);
    memcpy(h->ring, p + first, n - first);
    h->ring_pos = (h->ring_pos + n) % h->tail_max;
}

size_t headtail_add(struct headtail *h, const char *p, size_t n)
{
    struct nsbox_stream *s = h->s;
    size_t k = 0;

    s->total += n;
    h->newlines += count_newlines(p, n);
    if (!h->head_full) {
        k = h->head_max - s->captured < n ? h->head_max - s->captured : n;
        if (k > 0) {
            size_t fit;

            memcpy(s->data + s->captured, p, k);
            /* The head's JSON string stays within JSON_OUTPUT_FACTOR x its bytes (result.h). */
            fit = json_meter_fit(&h->meter, s->data, s->captured, k,
                                 JSON_OUTPUT_FACTOR * (uint64_t)h->head_max);
            if (fit < k)
                h->head_full = true;
            k = fit;
            s->captured += k;
            s->data[s->captured] = '\0';
            s->head = s->captured;
        }
        if (k < n)
            h->head_full = true;
    }
    if (k < n)
        ring_add(h, p + k, n - k);
    s->truncated = s->total > s->captured;
    return k;
}

/* Whether t[start..n) fits within bound bytes of JSON string. */
static bool tail_fits(const char *t, size_t start, size_t n, uint64_t bound)
{
    struct json_meter m = {0};

    return json_meter_fit(&m, t + start, 0, n - start, bound) == n - start;
}

static bool utf8_continuation(char c)
{
    return ((unsigned char)c & 0xc0) == 0x80;
}

size_t headtail_finish(struct headtail *h)
{
    struct nsbox_stream *s = h->s;
    uint64_t bound = JSON_OUTPUT_FACTOR * (uint64_t)h->tail_max;
    size_t n = h->ring_total < h->tail_max ? (size_t)h->ring_total : h->tail_max;
    size_t head = s->head, start = 0;
    char *t = s->data + head;

    if (h->finished)
        return s->captured - s->head;
    h->finished = true;
    if (n > 0) {
        /* The ring's oldest byte is at ring_pos once it has wrapped. */
        size_t oldest = h->ring_total > h->tail_max ? h->ring_pos : 0;
        memcpy(t, h->ring + oldest, n - oldest);
        memcpy(t + (n - oldest), h->ring, oldest);
    }
    if (h->ring_total > n) {
        /* Bytes were cut before the tail: start it at a whole character, and at a line's
         * start where one begins in its first half, so that the model reads whole lines. */
        const char *nl;

        while (start < n && start < 3 && utf8_continuation(t[start]))
            start++;
        nl = memchr(t + start, '\n', n / 2 > start ? n / 2 - start : 0);
        if (nl && (size_t)(nl - t) + 1 < n)
            start = (size_t)(nl - t) + 1;
    }
    if (!tail_fits(t, start, n, bound)) {
        /* Control characters or bytes that are not UTF-8 cost more than 2 bytes of JSON
         * each: keep the longest end that fits, from a whole character. The cost only falls
         * as the start moves right (but into a character: see below), so a binary search. */
        size_t lo = start, hi = n;

        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (tail_fits(t, mid, n, bound))
                hi = mid;
            else
                lo = mid + 1;
        }
        start = lo;
        while (start < n && (utf8_continuation(t[start]) || !tail_fits(t, start, n, bound)))
            start++;
    }
    memmove(t, t + start, n - start);
    n -= start;
    s->captured = head + n;
    s->data[s->captured] = '\0';
    s->truncated = s->total > s->captured;
    s->cut_lines = h->newlines - count_newlines(s->data, s->captured);
    /* Nothing cut: one text, the head's and the tail's bytes in order. */
    if (!s->truncated)
        s->head = s->captured;
    return s->captured - s->head;
}

void headtail_done(struct headtail *h)
{
    free(h->ring);
    h->ring = NULL;
}
