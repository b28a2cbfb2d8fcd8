/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The start and the end of a stream kept within a limit (headtail.h). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "headtail.h"

/* Feed s[0..n) in pieces of chunk bytes under limit, finish; returns the bytes that went to the
 * head as they came (what a caller copies out live). */
static size_t feed(struct nsbox_stream *st, uint64_t limit, const char *s, size_t n, size_t chunk)
{
    struct headtail h;
    size_t live = 0;

    *st = (struct nsbox_stream){0};
    cr_assert_eq(headtail_init(&h, st, limit), 0);
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        size_t m = headtail_add(&h, s + off, k);
        /* The head takes a prefix of each piece, and only while nothing went to the tail. */
        cr_assert_leq(m, k);
        cr_assert(memcmp(st->data + live, s + off, m) == 0);
        live += m;
    }
    (void)headtail_finish(&h);
    (void)headtail_finish(&h); /* idempotent */
    headtail_done(&h);
    cr_assert_eq(st->total, n);
    cr_assert_eq(st->head > st->captured ? 0 : 1, 1);
    cr_assert_eq(st->data[st->captured], '\0');
    return live;
}

static size_t json_len(const char *s, size_t n)
{
    json_t *j = json_text(s, n);
    char *dump = json_dumps(j, JSON_ENCODE_ANY);
    size_t len = strlen(dump) - 2; /* the quotes */

    free(dump);
    json_decref(j);
    return len;
}

Test(headtail, under_the_limit_keeps_everything_as_one_text)
{
    const char *text = "line 1\nline 2\nline 3\n";
    struct nsbox_stream st;

    for (size_t chunk = 1; chunk <= 32; chunk++) {
        feed(&st, 64, text, strlen(text), chunk);
        cr_expect_str_eq(st.data, text);
        cr_expect_eq(st.captured, strlen(text));
        cr_expect_eq(st.head, st.captured);
        cr_expect_not(st.truncated);
        cr_expect_eq(st.cut_lines, 0);
        free(st.data);
    }
    /* Exactly the limit: nothing cut, head and tail meet. */
    feed(&st, 8, "abcdefgh", 8, 3);
    cr_expect_str_eq(st.data, "abcdefgh");
    cr_expect_not(st.truncated);
    free(st.data);
}

Test(headtail, over_the_limit_keeps_the_start_and_the_end)
{
    char text[8192];
    size_t n = 0;
    struct nsbox_stream st;

    for (int i = 0; i < 500; i++)
        n += (size_t)sprintf(text + n, "%d\n", i);
    for (size_t chunk = 1; chunk <= 4096; chunk *= 4) {
        size_t live = feed(&st, 100, text, n, chunk);
        cr_expect_eq(live, 50, "the head is the first half");
        cr_expect_eq(st.head, 50);
        cr_expect(memcmp(st.data, text, 50) == 0);
        /* The tail is the end, from the first line's start within the last 50 bytes ("7\n"
         * of 487 dropped). */
        cr_expect_str_eq(st.data + st.head, "488\n489\n490\n491\n492\n493\n494\n495\n496\n497\n"
                                            "498\n499\n");
        cr_expect(st.truncated);
        cr_expect_eq(st.captured, 50 + 48);
        /* Every newline is counted once: kept in the head (0 to 19), in the tail, or cut. */
        cr_expect_eq(st.cut_lines, 500 - 20 - 12, "cut %llu lines",
                     (unsigned long long)st.cut_lines);
        free(st.data);
    }
}

Test(headtail, the_final_exception_line_survives_long_logging)
{
    /* 18 KB of logging, then a traceback's end: 4000 bytes keep the ValueError. */
    char *text = malloc(32768);
    size_t n = 0;
    struct nsbox_stream st;

    for (int i = 0; n < 18 * 1024; i++)
        n += (size_t)sprintf(text + n, "INFO:root:step %d of the long job done\n", i);
    n += (size_t)sprintf(text + n, "Traceback (most recent call last):\n  File \"<string>\", "
                                   "line 5, in <module>\nValueError: bad row 17\n");
    feed(&st, 4000, text, n, 4096);
    cr_expect(st.truncated);
    cr_expect_not_null(strstr(st.data + st.head, "ValueError: bad row 17\n"));
    cr_expect_eq(strncmp(st.data, "INFO:root:step 0 ", 17), 0);
    cr_expect_eq(st.total - st.captured + st.captured, n);
    free(st.data);
    free(text);
}

Test(headtail, the_tail_starts_at_a_whole_character)
{
    /* No newline to start at: the tail's first byte is not in the middle of a character. */
    char text[3000];
    size_t n = 0;
    struct nsbox_stream st;

    while (n + 3 <= sizeof(text)) {
        memcpy(text + n, "\xe2\x82\xac", 3); /* U+20AC */
        n += 3;
    }
    feed(&st, 101, text, n, 7);
    cr_expect_eq(st.head, 51);
    cr_expect_eq((unsigned char)st.data[st.head] & 0xc0, 0xc0 & 0xe0, "tail starts mid-character");
    cr_expect_eq((st.captured - st.head) % 3, 0);
    free(st.data);
}

Test(headtail, the_json_of_each_half_stays_within_twice_its_bytes)
{
    /* Control bytes are \u0001 in JSON, six bytes each: each half keeps a third of itself. */
    char text[10000];
    struct nsbox_stream st;

    memset(text, 1, sizeof(text));
    feed(&st, 1000, text, sizeof(text), 512);
    cr_expect(st.truncated);
    cr_expect_leq(json_len(st.data, st.head), 2 * 500);
    cr_expect_leq(json_len(st.data + st.head, st.captured - st.head), 2 * 500);
    cr_expect_geq(st.captured - st.head, 150, "the tail keeps what fits: %zu",
                  st.captured - st.head);
    free(st.data);
    /* Below the limit but over the JSON bound: the middle is cut, and said so. */
    feed(&st, 1000, text, 900, 900);
    cr_expect(st.truncated);
    cr_expect_lt(st.captured, 900);
    cr_expect_leq(json_len(st.data, st.head), 1000);
    cr_expect_leq(json_len(st.data + st.head, st.captured - st.head), 1000);
    free(st.data);
}

Test(headtail, tiny_limits)
{
    struct nsbox_stream st;

    feed(&st, 0, "hello\n", 6, 2);
    cr_expect_eq(st.captured, 0);
    cr_expect(st.truncated);
    cr_expect_eq(st.cut_lines, 1);
    free(st.data);
    feed(&st, 1, "hello\n", 6, 1);
    cr_expect_str_eq(st.data, "h");
    cr_expect_eq(st.head, 1);
    free(st.data);
    feed(&st, 3, "hello\n", 6, 6);
    cr_expect_str_eq(st.data, "he\n");
    cr_expect_eq(st.head, 2);
    cr_expect_eq(st.cut_lines, 0);
    free(st.data);
}
