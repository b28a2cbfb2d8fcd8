/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Untrusted output made safe to show on a terminal (pure).
 *
 * A terminal acts on what it is sent: ESC and CSI sequences move the cursor and rewrite lines,
 * OSC sequences set the window title or write the clipboard (OSC 52), and queries (cursor
 * position, device attributes) make the terminal type its answer into its own input, where the
 * shell reads it after nsbox exits. So every control character is shown escaped as \xHH (one
 * per byte), which leaves the sequence it started as inert, visible text:
 *   - C0 controls but tab and newline, and DEL; a carriage return too (it would let a line
 *     overwrite itself, or nsbox's next line), except in CR LF, which shows as a plain newline;
 *   - bytes that are not UTF-8 (a terminal in a legacy 8-bit mode takes 0x9b as CSI);
 *   - C1 controls written as UTF-8 (U+0080-U+009F: xterm, for one, acts on them), the line and
 *     paragraph separators and the format characters (Unicode category Cf: the bidirectional
 *     controls, which can make text read in another order than it was written, and the
 *     invisible ones, zero-width space, word joiner, BOM, soft hyphen...), utf8_hidden().
 * And "nsbox:" anywhere in the output is shown as TERMSAFE_MARK "nsbox:", so that no line the
 * payload writes reads as one of nsbox's own, wherever its lines break on the screen. That mark
 * is a courtesy: the proof of a line of nsbox's own is its bold "nsbox:" on a terminal
 * (log.c), which no output can make, since its ESC is shown escaped; a look-alike made of
 * other letters (Cyrillic, fullwidth) is not marked, and shows in the payload's plain type.
 *
 * Escaping works across read() boundaries: a UTF-8 character, a CR LF or an "nsbox:" split
 * between two calls is held back until the next call (at most a few bytes) or
 * termsafe_finish().
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Put before "nsbox:" in the payload's output. */
#define TERMSAFE_MARK "[program] "

struct termsafe {
    unsigned char held[8]; /* bytes not decided yet (see above) */
    size_t n_held;
};

/* Bytes of output termsafe_escape() writes at most for n bytes of input (each byte can become
 * four, "nsbox:" six plus the mark, and the bytes held from before come out too). */
#define TERMSAFE_MAX_OUT(n) (4 * ((n) + 8) + 2 * sizeof(TERMSAFE_MARK))

/* Escape the n bytes at in, continuing what earlier calls on t saw; write the result to out,
 * which has room for TERMSAFE_MAX_OUT(n) bytes. Returns the bytes written (not NUL-terminated).
 * Start t zeroed. */
size_t termsafe_escape(struct termsafe *t, const char *in, size_t n, char *out);

/* The end of the stream: write what t still holds, escaped as final (an unfinished UTF-8
 * character as its bytes, a lone CR as \x0d), to out (room for TERMSAFE_MAX_OUT(0) bytes).
 * Returns the bytes written; t is then empty. */
size_t termsafe_finish(struct termsafe *t, char *out);

/* One line of text for a terminal that nsbox writes itself, quoting what others chose (argv,
 * paths, the payload's values): in[0..n) escaped as termsafe_escape() does, and newlines and
 * carriage returns too, so that the text stays on its line; no mark before "nsbox:". Writes at
 * most size - 1 bytes and a NUL to out, cutting the text (never inside an escape) where it does
 * not fit. Returns the bytes written, NUL not counted. */
size_t termsafe_escape_line(const char *in, size_t n, char *out, size_t size);
