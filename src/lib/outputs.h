/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A notebook cell's outputs (nsbox run --cell, a session's code steps): the cell driver
 * (cell.py) writes one JSON object a line to its outputs channel, a memfd the supervisor reads
 * when the cell has ended (outputs_read()); the result's "outputs" and "error" are made from
 * those lines (outputs_parse(), pure). What the driver writes is the payload's, so untrusted:
 * at most the limit is read, every line is parsed with jansson and only the documented shapes
 * are kept (a MIME type's value a string, or any JSON value for application/json).
 *
 * Records: {"type": "execute_result"|"display_data", "data": {MIME: value},
 * "dropped": {MIME: bytes}?} and {"type": "error", "name", "value", "traceback": [lines]}.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"

/* The outputs' budget when none is configured: the bytes of the channel's lines. */
#define OUTPUTS_LIMIT_DEFAULT (4ULL << 20)

/* What outputs_parse() left out, for the notes. */
struct outputs_stats {
    size_t n_outputs;       /* records kept */
    size_t n_invalid;       /* lines that were not a record of the documented shape */
    size_t n_dropped;       /* MIME entries the driver left out over the budget */
    uint64_t dropped_bytes; /* ... their size */
    char dropped_mime[32];  /* the first one's MIME type */
};

/*
 * Read the outputs channel fd (a memfd, from offset 0) into r->outputs: at most limit bytes,
 * up to the last whole line; r->outputs_total is its size. Returns 0, or -errno of fstat(2),
 * pread(2) or -ENOMEM (r unchanged).
 */
int outputs_read(int fd, uint64_t limit, struct nsbox_result *r);

/*
 * Parse the size bytes at data (the channel's lines): the outputs in order as a new JSON
 * array in *ret_outputs, the last error record as a new object in *ret_error (NULL if none);
 * either may be NULL when the caller does not want it. Fills *ret_stats if not NULL. Pure.
 * Returns 0, or -ENOMEM (nothing is returned then).
 */
int outputs_parse(const char *data, size_t size, json_t **ret_outputs, json_t **ret_error,
                  struct outputs_stats *ret_stats);

/* Add r's cell outputs ("outputs") and its uncaught exception ("error", unless the status is
 * "error") to the result's JSON object root; nothing when r is no cell. Pure. */
void outputs_json(const struct nsbox_result *r, json_t *root);

/* The notes on what r's outputs lack (left out over the budget, cut at the limit, lines that
 * were not outputs), each handed to note (if not NULL) and counted in *count: the part of
 * nsbox_result_notes() that is a cell's. Pure. */
void outputs_notes(const struct nsbox_result *r, void (*note)(const char *, void *), void *userdata,
                   size_t *count);
