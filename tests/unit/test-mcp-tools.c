/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox mcp's tools and results (src/cli/mcp-tools.c): the schemas as served, and what a
 * result says to the model from a run's JSON result, including what a run of today cannot
 * produce yet (rich outputs' images, copy-out links). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "mcp-internal.h"
#include "nsbox.h"

static json_t *load(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    cr_assert_not_null(j, "%s: %s", text, e.text);
    return j;
}

static const char *text0(json_t *r)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
}

Test(mcp_tools, served_with_schemas_and_descriptions)
{
    struct nsbox_config c;
    json_t *t, *tools;
    size_t i;
    char *const allow[] = {(char *)"pypi.org", NULL};

    nsbox_config_init(&c);
    c.rootfs = "/nonexistent"; /* no packages: the sentence is left out */
    tools = mcp_tools_load(&c, NULL, true);
    cr_assert_not_null(tools);
    cr_assert_eq(json_array_size(tools), 6);
    json_array_foreach(tools, i, t) {
        json_t *os = json_object_get(t, "outputSchema");
        cr_assert_str_eq(json_string_value(json_object_get(os, "type")), "object");
        cr_assert_null(json_object_get(os, "$ref"));
        cr_assert_str_eq(json_string_value(
                             json_object_get(json_object_get(t, "inputSchema"), "type")),
                         "object");
    }
    t = json_array_get(tools, 0);
    cr_assert(strstr(json_string_value(json_object_get(t, "description")), "Network: none"));
    cr_assert(strstr(json_string_value(json_object_get(t, "description")), "timeout 10 s"));
    cr_assert_null(strstr(json_string_value(json_object_get(t, "description")), "packages"));
    cr_assert(json_is_false(json_object_get(json_object_get(t, "annotations"), "openWorldHint")));
    json_decref(tools);

    c.network_allow = allow;
    tools = mcp_tools_load(&c, "/srv/out", true);
    t = json_array_get(tools, 0);
    cr_assert(strstr(json_string_value(json_object_get(t, "description")), "hosts: pypi.org"));
    cr_assert(strstr(json_string_value(json_object_get(t, "description")), "/work/out"));
    cr_assert(json_is_true(json_object_get(json_object_get(t, "annotations"), "openWorldHint")));
    /* The session's files are the session's: no network words there. */
    cr_assert_null(
        strstr(json_string_value(json_object_get(json_array_get(tools, 3), "description")),
               "Network"));
    json_decref(tools);
}

Test(mcp_tools, clean_success_is_the_output_alone)
{
    struct mcp_call call = {.timeout = 10};
    json_t *r = load("{\"status\": \"exited\", \"exit_code\": 0, \"stdout\": \"42\\n\", "
                     "\"stderr\": \"\", \"reason\": \"exited with status 0\", \"notes\": []}");
    json_t *res = mcp_run_result(&call, r);

    cr_assert_str_eq(text0(res), "42\n");
    cr_assert(json_is_false(json_object_get(res, "isError")));
    cr_assert_eq(json_array_size(json_object_get(res, "content")), 1);
    cr_assert_eq(json_array_size(
                     json_object_get(json_object_get(res, "structuredContent"), "files_written")),
                 0);
    json_decref(res);
    json_decref(r);

    r = load("{\"status\": \"exited\", \"exit_code\": 0, \"stdout\": \"\", \"stderr\": \"\", "
             "\"notes\": []}");
    res = mcp_run_result(&call, r);
    cr_assert_str_eq(text0(res), "(no output)");
    json_decref(res);
    json_decref(r);
}

Test(mcp_tools, failure_says_reason_streams_and_notes)
{
    struct mcp_call call = {.timeout = 3};
    json_t *r, *res;

    (void)snprintf(call.clamp_note, sizeof(call.clamp_note), "asked for more");
    r = load("{\"status\": \"timeout\", \"exit_code\": 124, \"stdout\": \"a\\u001b[31mb\\n\", "
             "\"stderr\": \"err\\n\", \"reason\": \"timed out after 3 s; the sandbox was "
             "killed\", \"limit\": {\"name\": \"timeout\"}, \"notes\": [\"a note\"], "
             "\"warnings\": [\"limits are enforced with rlimits\", \"/work is full "
             "(--workdir-size)\"], \"outcome_warnings\": [\"/work is full (--workdir-size)\"], "
             "\"error\": {\"name\": \"KeyboardInterrupt\"}}");
    res = mcp_run_result(&call, r);
    cr_assert_str_eq(text0(res), "timed out after 3 s; the sandbox was killed\n[stdout]\n"
                                 "a\\x1b[31mb\n[stderr]\nerr\n[asked for more]\n[a note]\n"
                                 "[/work is full (--workdir-size)]");
    cr_assert(json_is_true(json_object_get(res, "isError")));
    {
        json_t *sc = json_object_get(res, "structuredContent");
        cr_assert_str_eq(json_string_value(json_object_get(sc, "status")), "timeout");
        cr_assert_eq(json_array_size(json_object_get(sc, "notes")), 3);
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(sc, "error"), "name")),
                         "KeyboardInterrupt");
        cr_assert_eq(json_real_value(json_object_get(sc, "timeout")), 3.0);
    }
    json_decref(res);
    json_decref(r);
}

/* Which warnings reach the model is the result's "outcome_warnings", not their words: a host
 * warning that names an option (a policy file's line) stays out, an outcome warning in any words
 * comes in, in the text and in structuredContent's notes. */
Test(mcp_tools, outcome_warnings_decide_not_words)
{
    struct mcp_call call = {0};
    json_t *r, *res, *notes;

    r = load("{\"status\": \"exited\", \"exit_code\": 1, \"stdout\": \"\", \"stderr\": \"\", "
             "\"reason\": \"exited with status 1\", \"notes\": [], "
             "\"warnings\": [\"p.policy:3: workspace 'x' copy-out --workdir-size\", "
             "\"the interpreter went away\"], "
             "\"outcome_warnings\": [\"the interpreter went away\"]}");
    res = mcp_run_result(&call, r);
    cr_assert_str_eq(text0(res), "exited with status 1\n[no output]\n[the interpreter went away]");
    notes = json_object_get(json_object_get(res, "structuredContent"), "notes");
    cr_assert_eq(json_array_size(notes), 1);
    cr_assert_str_eq(json_string_value(json_array_get(notes, 0)), "the interpreter went away");
    json_decref(res);
    json_decref(r);
}

Test(mcp_tools, images_within_a_budget_and_results_text)
{
    struct mcp_call call = {0};
    size_t big = MCP_IMAGE_BUDGET;
    char *png = malloc(big + 1);
    json_t *r, *res, *content;

    cr_assert_not_null(png);
    memset(png, 'A', big);
    png[big] = '\0';
    r = load("{\"status\": \"exited\", \"exit_code\": 0, \"stdout\": \"\", \"stderr\": \"\", "
             "\"notes\": [], \"outputs\": [{\"type\": \"display_data\", \"data\": "
             "{\"image/png\": \"iVBORw0KGgo=\", \"text/plain\": \"<Figure>\"}}, "
             "{\"type\": \"execute_result\", \"data\": {\"text/plain\": \"42\"}}]}");
    /* A second image that does not fit with the first. */
    json_array_append_new(json_object_get(r, "outputs"),
                          json_pack("{s:s,s:{s:s}}", "type", "display_data", "data", "image/png",
                                    png));
    res = mcp_run_result(&call, r);
    content = json_object_get(res, "content");
    cr_assert_eq(json_array_size(content), 3, "%s", json_dumps(content, 0));
    /* The value is the text (no "(no output)" before it): the first item, as the Python API's
     * as_tool_output() shows it; the figure's text/plain is its image. */
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 0), "text")), "42");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 1), "type")),
                     "image");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 1), "mimeType")),
                     "image/png");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 1), "data")),
                     "iVBORw0KGgo=");
    cr_assert(strstr(json_string_value(json_object_get(json_array_get(content, 2), "text")),
                     "1 image(s) left out"));
    free(png);
    json_decref(res);
    json_decref(r);
}

Test(mcp_tools, files_copied_out_are_links)
{
    struct mcp_call call = {0};
    json_t *r = load("{\"status\": \"exited\", \"exit_code\": 0, \"stdout\": \"ok\\n\", "
                     "\"stderr\": \"\", \"notes\": [], \"copy_out\": {\"done\": true, "
                     "\"copied\": [{\"path\": \"/work/out/a b%.PNG\", \"host_path\": "
                     "\"/srv/o/call-x/out/a b%.PNG\", \"size\": 5, \"sha256\": \"00\"}]}}");
    json_t *res = mcp_run_result(&call, r);
    json_t *link = json_array_get(json_object_get(res, "content"), 1);

    cr_assert_str_eq(json_string_value(json_object_get(link, "type")), "resource_link");
    cr_assert_str_eq(json_string_value(json_object_get(link, "uri")),
                     "file:///srv/o/call-x/out/a%20b%25.PNG");
    cr_assert_str_eq(json_string_value(json_object_get(link, "name")), "out/a b%.PNG");
    cr_assert_str_eq(json_string_value(json_object_get(link, "mimeType")), "image/png");
    cr_assert_eq(json_integer_value(json_object_get(link, "size")), 5);
    cr_assert_str_eq(text0(res), "ok\n\n[copied out for the user: out/a b%.PNG]");
    json_decref(res);
    json_decref(r);
}

Test(mcp_tools, long_streams_cut_between_characters)
{
    struct mcp_call call = {0};
    json_t *r = json_pack("{s:s,s:i,s:s,s:s,s:[]}", "status", "exited", "exit_code", 1, "stdout",
                          "", "stderr", "", "notes");
    json_t *res;
    char *big = malloc(3 * 30000 + 1);
    const char *text;

    cr_assert_not_null(big);
    for (size_t i = 0; i < 30000; i++)
        memcpy(big + 3 * i, "\xe2\x82\xac", 3); /* U+20AC, three bytes */
    big[3 * 30000] = '\0';
    json_object_set_new(r, "stdout", json_string(big));
    res = mcp_run_result(&call, r);
    text = text0(res);
    cr_assert_not_null(text, "the text item is missing (not UTF-8?)");
    /* The first and the last 10,000 characters, a marker between, and the note. */
    cr_assert(strstr(text, "\xe2\x82\xac\n[... 10,000 characters cut for this output ...]\n"
                           "\xe2\x82\xac"));
    cr_assert(strstr(text, "[stdout cut for this output: its first 10000 and last 10000 "
                           "characters are shown]"));
    free(big);
    json_decref(res);
    json_decref(r);
}

Test(mcp_tools, carriage_returns_and_nsbox_cut)
{
    struct mcp_call call = {0};
    json_t *r = load(
        "{\"status\": \"exited\", \"exit_code\": 2, \"stdout\": \"10%\\r50%\\r100%\\n"
        "ab\", \"stdout_tail\": \"yz\\r\\nend\\n\", \"stdout_cut\": {\"bytes\": 14731, "
        "\"lines\": 212}, \"stderr\": \"\", \"notes\": [], \"reason\": \"exited with status 2\"}");
    json_t *res = mcp_run_result(&call, r);

    cr_assert_str_eq(text0(res), "exited with status 2\n[stdout]\n100%\nab\n"
                                 "[... 14,731 bytes, 212 lines cut ...]\nyz\nend");
    json_decref(res);
    json_decref(r);
}

Test(mcp_tools, buf_keeps_its_cap)
{
    struct mcp_buf b = {0};

    buf_append(&b, "abcdef", 6, 4);
    cr_assert_eq(b.have, 4);
    cr_assert(b.overflow);
    cr_assert_str_eq(b.data, "abcd");
    buf_free(&b);
}

/* A note names the options as the Python API's keywords, as Result.as_tool_output() does. */
Test(mcp_tools, notes_name_the_api_keywords)
{
    static const char *const cases[][2] = {
        {"raise --memory if it needs more, within --memory 256m (x)",
         "raise memory= if it needs more, within memory=\"256m\" (x)"},
        {"the process limit (--pids-limit 64) refused 1 forks",
         "the process limit (pids_limit=64) refused 1 forks"},
        {"its time limit (--timeout 2.5 s): raise --timeout;",
         "its time limit (timeout=2.5 s): raise timeout=;"},
        {"were cut (--output-limit)", "were cut (output_limit=)"},
        /* Not an option of the API, or not a whole name: unchanged. */
        {"--copy-in, --memoryless, --network none, --timeouts 3",
         "--copy-in, --memoryless, --network none, --timeouts 3"},
        {"--memory 64mb --cpus 2x --", "memory= 64mb cpus= 2x --"},
        {"", ""},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = mcp_api_words(cases[i][0]);
        cr_expect_str_eq(got, cases[i][1]);
        free(got);
    }
}
