/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "termsafe.h"
#include "utf8.h"

/* Escape s[0..n) fed in pieces of chunk bytes, then finish; returns a malloc()ed string. */
static char *escape(const char *s, size_t n, size_t chunk)
{
    struct termsafe t = {0};
    char *out = malloc(TERMSAFE_MAX_OUT(n) + TERMSAFE_MAX_OUT(0) + 1);
    size_t o = 0;

    cr_assert_not_null(out);
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        size_t m = termsafe_escape(&t, s + off, k, out + o);
        cr_assert_leq(m, TERMSAFE_MAX_OUT(k));
        o += m;
    }
    o += termsafe_finish(&t, out + o);
    out[o] = '\0';
    return out;
}

static const struct {
    const char *in;
    const char *want;
} cases[] = {
    {"hello\tworld\n", "hello\tworld\n"},
    {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
    /* OSC 52: write the clipboard */
    {"\x1b]52;c;aGk=\x07", "\\x1b]52;c;aGk=\\x07"},
    /* a window title, ended by ST */
    {"\x1b]0;pwned\x1b\\", "\\x1b]0;pwned\\x1b\\"},
    /* a cursor-position query, whose answer the terminal types into its input */
    {"\x1b[6n", "\\x1b[6n"},
    /* CSI as one 8-bit byte (not UTF-8) and as UTF-8 U+009B */
    {"\x9b"
     "6n",
     "\\x9b6n"},
    {"\xc2\x9b"
     "6n",
     "\\xc2\\x9b6n"},
    /* right-to-left override, line separator */
    {"\xe2\x80\xae:xobsn", "\\xe2\\x80\\xae:xobsn"},
    {"a\xe2\x80\xa8"
     "b",
     "a\\xe2\\x80\\xa8b"},
    /* format characters (Cf): zero-width space, word joiner, BOM, soft hyphen, a tag */
    {"ns\xe2\x80\x8b"
     "box:",
     "ns\\xe2\\x80\\x8bbox:"},
    {"\xe2\x81\xa0nsbox:", "\\xe2\\x81\\xa0[program] nsbox:"},
    {"\xef\xbb\xbfx", "\\xef\\xbb\\xbfx"},
    {"ns\xc2\xad"
     "box",
     "ns\\xc2\\xadbox"},
    {"\xf3\xa0\x80\x81", "\\xf3\\xa0\\x80\\x81"},
    /* CR LF is a newline; a lone CR or backspace would overwrite what is on the line */
    {"a\r\nb", "a\r\nb"},
    {"a\rb", "a\\x0db"},
    {"ab\b\bX", "ab\\x08\\x08X"},
    {"\x7f\x01", "\\x7f\\x01"},
    {"\r", "\\x0d"},
    /* nsbox's own lines cannot be imitated */
    {"nsbox: error: all good\n", "[program] nsbox: error: all good\n"},
    {"x\nnsbox: y nsbox: z", "x\n[program] nsbox: y [program] nsbox: z"},
    {"nsbox", "nsbox"},
    {"nsbo", "nsbo"},
    {"nsbonsbox:", "nsbo[program] nsbox:"},
    /* not UTF-8, or cut short at the end */
    {"\xff\xc0\xaf", "\\xff\\xc0\\xaf"},
    {"ok\xe2\x82", "ok\\xe2\\x82"},
    {"\xed\xa0\x80", "\\xed\\xa0\\x80"},
};

Test(termsafe, escapes_controls_and_marks_nsbox_lines)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = escape(cases[i].in, strlen(cases[i].in), strlen(cases[i].in) + 1);
        cr_expect_str_eq(out, cases[i].want, "case %zu", i);
        free(out);
    }
}

/* The same output whatever the read() boundaries: one byte at a time, and split in two at
 * every point. */
Test(termsafe, chunk_boundaries_do_not_matter)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *in = cases[i].in;
        size_t n = strlen(in);
        char *out = escape(in, n, 1);
        cr_expect_str_eq(out, cases[i].want, "case %zu, byte by byte", i);
        free(out);
        for (size_t cut = 1; cut < n; cut++) {
            struct termsafe t = {0};
            char buf[256];
            size_t o = termsafe_escape(&t, in, cut, buf);
            o += termsafe_escape(&t, in + cut, n - cut, buf + o);
            o += termsafe_finish(&t, buf + o);
            buf[o] = '\0';
            cr_expect_str_eq(buf, cases[i].want, "case %zu, cut at %zu", i, cut);
        }
    }
}

/* Random bytes in random pieces: what comes out has no control character but tab, newline and
 * the CR of a CR LF, is UTF-8 without a hidden code point, and has "nsbox:" only after the
 * mark; and it is what one piece gives. */
Test(termsafe, random_output_is_inert)
{
    static const char alphabet[] = "nsbox:\r\n\t\x1b\x07\x08\x7f\x9b\xc2\xe2\x80\xae\xa8\xf0\x9f"
                                   "\x98\xff a[]";
    char in[300];

    srand(11);
    for (int trial = 0; trial < 3000; trial++) {
        size_t n = (size_t)(rand() % (int)sizeof(in));
        char *out, *whole;

        for (size_t i = 0; i < n; i++)
            in[i] = alphabet[rand() % (int)(sizeof(alphabet) - 1)];
        out = escape(in, n, 1 + (size_t)(rand() % 16));
        whole = escape(in, n, n + 1);
        cr_assert_str_eq(out, whole, "trial %d", trial);
        for (const unsigned char *p = (const unsigned char *)out; *p;) {
            int len = utf8_check(p, strlen((const char *)p));
            cr_assert_gt(len, 0, "trial %d: not UTF-8 at %zu", trial,
                         (size_t)(p - (const unsigned char *)out));
            if (*p < 0x20 || *p == 0x7f)
                cr_assert(*p == '\t' || *p == '\n' || (*p == '\r' && p[1] == '\n'),
                          "trial %d: control 0x%02x passed", trial, *p);
            if (len == 2)
                cr_assert(!(p[0] == 0xc2 && p[1] <= 0x9f), "trial %d: C1 passed", trial);
            if (len == 3)
                cr_assert(!(p[0] == 0xe2 && p[1] == 0x80 && p[2] >= 0xa8 && p[2] <= 0xae),
                          "trial %d: a separator or bidi control passed", trial);
            if (strncmp((const char *)p, "nsbox:", 6) == 0)
                cr_assert((const char *)p - out >= (long)strlen(TERMSAFE_MARK) &&
                              strncmp((const char *)p - strlen(TERMSAFE_MARK), TERMSAFE_MARK,
                                      strlen(TERMSAFE_MARK)) == 0,
                          "trial %d: unmarked nsbox:", trial);
            p += len;
        }
        free(out);
        free(whole);
    }
}

Test(termsafe, a_line_keeps_to_its_line)
{
    char out[64];
    const char *in = "a\nnsbox: b\r\n\x1b[2J\xc2\x9b\xe2\x80\x8b\xc3\xa9\t";

    cr_expect_eq(termsafe_escape_line(in, strlen(in), out, sizeof(out)), strlen(out));
    cr_expect_str_eq(out, "a\\x0ansbox: b\\x0d\\x0a\\x1b[2J\\xc2\\x9b\\xe2\\x80\\x8b\xc3\xa9\t");
    /* Cut where it does not fit, never inside an escape or a character. */
    cr_expect_eq(termsafe_escape_line("\x01\x01\x01\x01\x01", 5, out, 18), 16);
    cr_expect_str_eq(out, "\\x01\\x01\\x01\\x01");
    cr_expect_eq(termsafe_escape_line("ab", 2, out, 1), 0);
}
