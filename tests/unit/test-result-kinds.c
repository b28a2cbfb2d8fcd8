/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What code decides on is recorded as data where the message is made, never read back from
 * the message's words (report.h): which warnings explain the outcome ("outcome_warnings" in
 * the JSON result), whether an error is the caller's config (error_config), what kind of
 * thing a skipped copy-out entry is ("kind"), which notes the Python API acts on ("note_kinds"). */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nsbox.h"
#include "report.h"

static json_t *to_json(const struct nsbox_result *r)
{
    char *text = nsbox_result_to_json(r);
    json_t *j;

    cr_assert_not_null(text);
    j = json_loads(text, 0, NULL);
    free(text);
    cr_assert_not_null(j);
    return j;
}

static void expect_strings(json_t *list, const char *const *want, size_t n)
{
    cr_assert(json_is_array(list));
    cr_assert_eq(json_array_size(list), n, "%zu lines", json_array_size(list));
    for (size_t i = 0; i < n; i++)
        cr_expect_str_eq(json_string_value(json_array_get(list, i)), want[i]);
}

static unsigned n_called;

static void count_warning(const char *line, void *userdata)
{
    (void)line;
    (void)userdata;
    n_called++;
}

/* Every warning is in "warnings", in order; the outcome ones also in "outcome_warnings",
 * whatever their words: a host warning that names --workdir-size is not one. */
Test(result_kinds, outcome_warnings_are_marked_where_they_are_made)
{
    struct nsbox_config c;
    struct nsbox_result r = {0};
    json_t *j;
    static const char *const all[] = {
        "limits are enforced with rlimits, not a cgroup: no cgroup here",
        "the working directory /work was full: raise --workdir-size (now 8 MiB)",
        "p.policy:3: unknown system call 'copy-out' (workspace 'x', --workdir-size)",
        "the interpreter went away",
    };

    nsbox_config_init(&c);
    c.warn = count_warning;
    report_warning(&c, &r, "%s", all[0]);
    report_outcome_warning(&c, &r, "%s", all[1]);
    report_warning(&c, &r, "%s", all[2]);
    report_add_warning(&r, true, all[3]);
    cr_expect_eq(n_called, 3,
                 "the callback hears report_warning()'s and report_outcome_warning()'s");

    j = to_json(&r);
    expect_strings(json_object_get(j, "warnings"), all, 4);
    expect_strings(json_object_get(j, "outcome_warnings"), (const char *const[]){all[1], all[3]},
                   2);
    json_decref(j);
    nsbox_result_free(&r);
}

/* Always present: an empty list when there is none. */
Test(result_kinds, outcome_warnings_is_an_empty_list_without_any)
{
    struct nsbox_config c;
    struct nsbox_result r = {0};
    json_t *j;

    nsbox_config_init(&c);
    report_warning(&c, &r, "--keep-fds: descriptors nsbox inherited reach the payload");
    j = to_json(&r);
    cr_expect_eq(json_array_size(json_object_get(j, "warnings")), 1);
    cr_assert(json_is_array(json_object_get(j, "outcome_warnings")));
    cr_expect_eq(json_array_size(json_object_get(j, "outcome_warnings")), 0);
    json_decref(j);
    nsbox_result_free(&r);
}

/* An outcome warning is kept for the model even when "warnings" had no room left. */
Test(result_kinds, an_outcome_warning_survives_a_full_warnings_buffer)
{
    struct nsbox_result r = {0};
    char filler[200];

    memset(filler, 'w', sizeof(filler) - 1);
    filler[sizeof(filler) - 1] = '\0';
    for (int i = 0; i < 10; i++)
        report_add_warning(&r, false, filler);
    cr_assert_eq(strlen(r.warnings), sizeof(r.warnings) - 1);
    report_add_warning(&r, true, "workspace 'w' was not saved");
    cr_expect_str_eq(r.outcome_warnings, "workspace 'w' was not saved");
}

/* error_config is what nsbox_run() decides on: set by report_config_error() only, cleared by
 * any later error, whatever error_step says. */
Test(result_kinds, error_config_is_set_by_report_config_error_only)
{
    struct nsbox_result r = {0};

    cr_expect_eq(report_config_error(&r, -EINVAL, "--memory must be at least %s", "6m"), -EINVAL);
    cr_expect(r.error_config);
    cr_expect_str_eq(r.error_step, "config");
    cr_expect_str_eq(r.error, "--memory must be at least 6m");
    cr_expect_eq(r.error_errno, EINVAL);
    cr_expect_eq(r.exit_code, 125);
    cr_expect_eq(report_error(&r, -ENOENT, "pivot_root", "failed: %m"), -ENOENT);
    cr_expect_not(r.error_config);
    cr_expect_str_eq(r.error, "failed: No such file or directory");
    (void)report_error(&r, -EINVAL, "config", "a step of that name");
    cr_expect_not(r.error_config, "the step's name decides nothing");
}

/* A skipped entry's kind is in the JSON result, by name. */
Test(result_kinds, skipped_entries_say_their_kind)
{
    struct nsbox_skipped_file skipped[] = {
        {.path = "/work/fifo", .reason = "FIFO", .kind = NSBOX_SKIP_NOT_COPIED},
        {.path = "/work/big", .reason = "over --copy-out-max-bytes", .kind = NSBOX_SKIP_OVER_CAP},
        {.path = "/work/d",
         .reason = "unreadable (permission denied)",
         .kind = NSBOX_SKIP_UNREADABLE},
    };
    static const char *const kinds[] = {"not_copied", "over_cap", "unreadable"};
    struct nsbox_result r = {.copy_out_asked = true, .skipped = skipped, .n_skipped = 3};
    json_t *j = to_json(&r), *list = json_object_get(json_object_get(j, "copy_out"), "skipped");

    cr_assert_eq(json_array_size(list), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *e = json_array_get(list, i);
        cr_expect_str_eq(json_string_value(json_object_get(e, "kind")), kinds[i]);
        cr_expect_str_eq(json_string_value(json_object_get(e, "reason")), skipped[i].reason);
    }
    json_decref(j);
}

/* "note_kinds" has one entry per note, the kind where code acts on a note (the Python API's
 * hints), else null. */
Test(result_kinds, note_kinds_are_aligned_with_the_notes)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_EXITED, .refused_inet_socket = true};
    json_t *j = to_json(&r), *notes = json_object_get(j, "notes"),
           *kinds = json_object_get(j, "note_kinds");
    size_t at = SIZE_MAX;

    cr_assert(json_is_array(notes) && json_is_array(kinds));
    cr_assert_eq(json_array_size(kinds), json_array_size(notes));
    for (size_t i = 0; i < json_array_size(kinds); i++) {
        json_t *k = json_array_get(kinds, i);
        if (json_is_string(k)) {
            cr_expect_str_eq(json_string_value(k), "inet_socket_refused");
            at = i;
        } else
            cr_expect(json_is_null(k));
    }
    cr_assert_neq(at, SIZE_MAX, "no note marked");
    cr_expect(strstr(json_string_value(json_array_get(notes, at)), "AF_INET"));
    json_decref(j);

    r.refused_inet_socket = false;
    j = to_json(&r);
    for (size_t i = 0; i < json_array_size(json_object_get(j, "note_kinds")); i++)
        cr_expect(json_is_null(json_array_get(json_object_get(j, "note_kinds"), i)));
    json_decref(j);
}
