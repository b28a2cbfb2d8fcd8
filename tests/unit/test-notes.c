/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What nsbox_result_notes() says of a run's end, beside its reason (test-result.c has the rest). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "nsbox.h"

static void collect_note(const char *sentence, void *userdata)
{
    json_t *list = userdata;
    cr_assert_eq(json_array_append_new(list, json_string(sentence)), 0);
}

Test(notes, timeout_says_both_ways_on)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_TIMEOUT, .exit_code = 124};
    json_t *notes = json_array();
    const char *first;

    r.timeout.value = 2500000; /* 2.5 s */
    cr_assert_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    first = json_string_value(json_array_get(notes, 0));
    cr_expect(strstr(first, "(--timeout 2.5 s)"), "%s", first);
    cr_expect(strstr(first, "raise --timeout"), "%s", first);
    cr_expect(strstr(first, "endless loop"), "%s", first);
    json_decref(notes);

    /* The same program exiting in time: nothing to say. */
    r.status = NSBOX_STATUS_EXITED;
    r.exit_code = 0;
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 0);
}

/* Tier 3 says, in a note, what the program was given; a refusal says it in its error. */
Test(notes, tier_3_says_what_the_program_was_given)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_EXITED, .isolation_tier = 3};
    json_t *notes = json_array();

    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    cr_expect(strstr(json_string_value(json_array_get(notes, 0)), "isolation tier 3"), "got %s",
              json_dumps(notes, 0));
    r.status = NSBOX_STATUS_ERROR;
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 0);
    json_decref(notes);
}

Test(notes, refused_memfd_says_how_to_ask_for_one)
{
    char err[] = "  File \"/work/main.py\", line 2, in <module>\n"
                 "    fd = os.memfd_create('m')\n"
                 "PermissionError: [Errno 13] Permission denied\n";
    struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .exit_code = 1,
        .err = {.data = err, .captured = sizeof(err) - 1, .total = sizeof(err) - 1},
    };
    json_t *notes = json_array();

    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    cr_expect(strstr(json_string_value(json_array_get(notes, 0)), "MFD_NOEXEC_SEAL"), "got %s",
              json_dumps(notes, 0));
    json_decref(notes);
}
