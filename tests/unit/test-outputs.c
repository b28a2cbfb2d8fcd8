/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A cell's outputs (outputs.h): what is kept of the driver's lines, and how the result says
 * what was left out. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nsbox.h"
#include "outputs.h"
#include "result.h"

static const char lines[] =
    "{\"type\": \"execute_result\", \"data\": {\"text/plain\": \"42\"}}\n"
    "{\"type\": \"display_data\", \"data\": {\"text/plain\": \"<Figure>\", \"image/png\": "
    "\"iVBORw0K\", \"application/pdf\": \"JVBER\"}}\n"
    "{\"type\": \"display_data\", \"data\": {\"text/plain\": \"t\", \"application/json\": "
    "{\"a\": [1]}}, \"dropped\": {\"image/png\": 5000000, \"text/x-other\": 3}}\n"
    "{\"type\": \"error\", \"name\": \"ValueError\", \"value\": \"bad\", \"traceback\": "
    "[\"Traceback (most recent call last):\", 7, \"ValueError: bad\"]}\n";

Test(outputs, records_are_kept_in_order_with_their_mime_types)
{
    json_t *outputs = NULL, *error = NULL;
    struct outputs_stats st;

    cr_assert_eq(outputs_parse(lines, strlen(lines), &outputs, &error, &st), 0);
    cr_assert_eq(json_array_size(outputs), 3);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(outputs, 0), "type")),
                     "execute_result");
    json_t *fig = json_object_get(json_array_get(outputs, 1), "data");
    cr_expect_str_eq(json_string_value(json_object_get(fig, "image/png")), "iVBORw0K");
    /* A MIME type outside the documented list is left out. */
    cr_expect_null(json_object_get(fig, "application/pdf"));
    json_t *third = json_array_get(outputs, 2);
    cr_expect(json_is_object(json_object_get(json_object_get(third, "data"), "application/json")));
    cr_expect_eq(json_integer_value(
                     json_object_get(json_object_get(third, "dropped"), "image/png")),
                 5000000);
    cr_expect_null(json_object_get(json_object_get(third, "dropped"), "text/x-other"));
    cr_expect_eq(st.n_outputs, 3);
    cr_expect_eq(st.n_dropped, 1);
    cr_expect_eq(st.dropped_bytes, 5000000);
    cr_expect_str_eq(st.dropped_mime, "image/png");
    cr_expect_eq(st.n_invalid, 0);
    /* The error: its traceback's strings only. */
    cr_assert_not_null(error);
    cr_expect_str_eq(json_string_value(json_object_get(error, "name")), "ValueError");
    cr_expect_str_eq(json_string_value(json_object_get(error, "value")), "bad");
    cr_expect_eq(json_array_size(json_object_get(error, "traceback")), 2);
    json_decref(outputs);
    json_decref(error);
}

Test(outputs, lines_that_are_not_records_are_counted_and_left_out)
{
    static const char junk[] = "not json\n"
                               "{\"type\": \"display_data\", \"data\": {\"text/html\": \"<b>\"}}\n"
                               "{\"type\": \"display_data\", \"data\": {\"text/plain\": 3}}\n"
                               "{\"type\": \"stream\", \"data\": {\"text/plain\": \"x\"}}\n"
                               "[1, 2]\n"
                               "{\"type\": \"error\", \"name\": \"E\"}\n"
                               "\n"
                               "{\"type\": \"display_data\", \"data\": {\"text/plain\": \"ok\"}}";
    json_t *outputs = NULL, *error = NULL;
    struct outputs_stats st;

    cr_assert_eq(outputs_parse(junk, strlen(junk), &outputs, &error, &st), 0);
    cr_expect_eq(json_array_size(outputs), 1);
    cr_expect_null(error);
    cr_expect_eq(st.n_invalid, 6);
    json_decref(outputs);
}

static void collect(const char *sentence, void *userdata)
{
    json_array_append_new(userdata, json_string(sentence));
}

static bool any_note_has(json_t *notes, const char *text)
{
    size_t i;
    json_t *v;
    json_array_foreach(notes, i, v)
        if (strstr(json_string_value(v), text))
            return true;
    return false;
}

Test(outputs, the_result_holds_outputs_error_and_notes_of_what_was_left_out)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_EXITED,
                             .exit_code = 1,
                             .cell = true,
                             .outputs = strdup(lines),
                             .outputs_size = strlen(lines),
                             .outputs_total = strlen(lines) + 1000,
                             .outputs_limit = 4 << 20};
    json_t *j, *notes = json_array();

    r.out.data = strdup("");
    r.err.data = strdup("");
    j = result_to_json_object(&r);
    cr_assert_not_null(j);
    cr_expect_eq(json_array_size(json_object_get(j, "outputs")), 3);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "name")),
                     "ValueError");
    nsbox_result_notes(&r, collect, notes);
    cr_expect(any_note_has(notes, "1 part of the cell's outputs (image/png first, 5000000 "
                                  "bytes in all) was left out"));
    cr_expect(any_note_has(notes, "over the outputs' budget of 4 MiB (--outputs-limit; "));
    cr_expect(any_note_has(notes, "the cell's outputs were cut at 4 MiB (--outputs-limit)"));
    cr_expect(!any_note_has(notes, "not an output"));
    json_decref(notes);
    json_decref(j);
    free(r.outputs);
    free(r.out.data);
    free(r.err.data);
}

Test(outputs, without_a_cell_there_are_no_outputs_and_error_is_nsboxs_own)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_ERROR, .exit_code = 125, .cell = true};
    json_t *j;

    r.out.data = strdup("");
    r.err.data = strdup("");
    (void)snprintf(r.error_step, sizeof(r.error_step), "pivot_root");
    j = result_to_json_object(&r);
    cr_assert_not_null(j);
    /* status "error": "error" is nsbox's failure, never a cell's exception. */
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "step")),
                     "pivot_root");
    json_decref(j);
    r.cell = false;
    r.status = NSBOX_STATUS_EXITED;
    j = result_to_json_object(&r);
    cr_expect_null(json_object_get(j, "outputs"));
    cr_expect(json_is_null(json_object_get(j, "error")));
    json_decref(j);
    free(r.out.data);
    free(r.err.data);
}
