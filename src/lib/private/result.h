/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The machine-readable result of a run (internal helpers; the encoder is in nsbox.h). */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"

/* Copy the n bytes at s into a new NUL-terminated string of valid UTF-8, replacing each byte
 * that is not part of a well-formed sequence (overlong forms, surrogates and code points above
 * U+10FFFF included) with U+FFFD. Embedded NUL bytes are kept. Pure.
 * Returns the string (length in *ret_len), or NULL when out of memory. */
char *utf8_sanitize(const char *s, size_t n, size_t *ret_len);

/* A JSON string of the n bytes at s, made valid UTF-8 by utf8_sanitize(). NULL when out of
 * memory. */
json_t *json_text(const char *s, size_t n);

/* bytes as nsbox's notes say a size: "4 MiB" when a whole number of KiB, MiB or GiB, else
 * "1000 bytes". */
void result_format_size(char *buf, size_t size, uint64_t bytes);

/* The RLIMIT_CPU soft limit, in seconds, that stands for --cpus under rlimits: cpus x timeout
 * rounded up to whole seconds (RLIMIT_CPU's unit), except that a limit less than 1 s away from
 * the timeout is moved to 1 s past it. One thread uses at most one second of CPU per second of
 * wall clock, so a limit that close could only fire together with the timeout, and which of
 * them ended a busy loop would be a race; moved, the timeout always wins it, and a limit well
 * below the timeout still stops a busy payload before it. Pure; 0 when either is 0 (none). */
uint64_t result_rlimit_cpu_seconds(uint64_t cpus_milli, uint64_t timeout_usec);

/* The result as a JSON object (what nsbox_result_to_json() encodes), or NULL when out of
 * memory. */
json_t *result_to_json_object(const struct nsbox_result *r);

/* The result's "copy_out" object (null unless r->copy_out_asked): done, complete, copied,
 * skipped (path, reason, kind), skipped_unlisted. A new reference, or NULL when out of memory. */
json_t *result_copy_out_json(const struct nsbox_result *r);

/* Which of the notes (1-based; 0: none) are the ones a caller acts on by what they are, not by
 * their words (the Python API puts its own hint in their place or beside them). */
struct result_note_marks {
    size_t inet_socket;      /* an AF_INET/AF_INET6 socket refused without a network */
    size_t module_not_found; /* stderr mentions ModuleNotFoundError (the rootfs lacks it) */
};

/* nsbox_result_notes(), and with marks (may be NULL) which notes are which. */
size_t result_notes(const struct nsbox_result *r, void (*note)(const char *, void *),
                    void *userdata, struct result_note_marks *marks);

/* The JSON result's "note_kinds": n entries, one per note, each null or the kind of a marked
 * note ("inet_socket_refused", "module_not_found"); a new reference, or NULL when out of
 * memory. */
json_t *result_note_kinds_json(const struct result_note_marks *marks, size_t n);

/* The name of a skipped entry's kind, in the copy stream and the JSON result ("not_copied",
 * "over_cap", "unreadable"; an unknown kind is "unreadable": content that may be missing). */
const char *result_skip_kind_name(enum nsbox_skip_kind kind);

/* json_dumps() into a buffer of the exact size, with one byte to spare after the NUL-terminated
 * text (for a newline): jansson's own buffer grows by doubling with a copy each time, which at
 * the size of a result with a large --output-limit holds up to three times the text at once.
 * DEL, the C1 controls, U+2028, U+2029 and the format characters (utf8_hidden()) are written
 * as \uXXXX escapes, which jansson writes raw: the same JSON value, but nothing a terminal
 * acts on, nor text hidden or reordered when the JSON is shown. Returns a malloc()ed string,
 * or NULL when out of memory. */
char *json_dump_exact(const json_t *j, size_t flags);

/* json_dumpfd() with json_dump_exact()'s escapes, streamed (no copy of the text in memory).
 * Returns 0, or -EIO when jansson or write(2) failed. */
int result_json_dump_fd(const json_t *j, size_t flags, int fd);

/* The JSON string of a captured stream (without its quotes) is at most this many times
 * --output-limit bytes (README, "JSON result"): text of newlines, quotes and backslashes, each
 * escaped with two characters, fits whole; other control characters and hidden characters
 * (\u00XX, 6 bytes; 12 for a hidden one above U+FFFF) and bytes that are not UTF-8 (U+FFFD,
 * 3 bytes) end the kept text sooner. */
#define JSON_OUTPUT_FACTOR 2

/* The size of captured output's JSON string, counted as it arrives, so that capture stops
 * where the encoding would pass a bound, instead of the result (and nsbox's memory) growing to
 * six times the output kept. Start zeroed. */
struct json_meter {
    uint64_t cost;  /* bytes of JSON for the first settled bytes */
    size_t settled; /* bytes whose encoding is known; after them at most an unfinished UTF-8
                     * sequence */
};

/* s holds the kept bytes s[0..kept) and n new ones after them. Returns how many of the new
 * bytes can be kept so that json_text() of what is kept stays within bound bytes (quotes not
 * counted) whatever follows; fewer than n means the stream is full: keep no more. An unfinished
 * UTF-8 sequence at the end counts as 3 bytes a byte (U+FFFD). Pure. */
size_t json_meter_fit(struct json_meter *m, const char *s, size_t kept, size_t n, uint64_t bound);

/* ---- the output fields (result-output.c) ---- */

/* The bytes of s's head: all that was kept when nothing was cut (headtail.h). */
size_t result_stream_head(const struct nsbox_stream *s);

/* The JSON string of s's head ("stdout"), NULL when out of memory. */
json_t *result_stream_text(const struct nsbox_stream *s);

/* Into root: stdout_tail, stderr_tail, stdout_cut, stderr_cut (what was cut between the head
 * and the tail: {bytes, lines, head_bytes, tail_bytes} or null), stdout_file, stderr_file
 * ({bytes, complete, error} or null), files_written ([{path, size, sha256}] or null),
 * files_written_unlisted, files_written_partial. */
void result_output_json(const struct nsbox_result *r, json_t *root);

/* The module of the last "No module named 'X'" in r's stderr, as far as it is a plain dotted
 * name (what the program printed is quoted only when it is that), into buf[size]; "" if
 * none. */
void result_module_not_found(const struct nsbox_result *r, char *buf, size_t size);
