/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nsbox.h"
#include "result.h"

static char *sanitize(const char *s, size_t n, size_t *len)
{
    char *out = utf8_sanitize(s, n, len);
    cr_assert_not_null(out);
    return out;
}

Test(utf8, valid_text_is_unchanged)
{
    static const char *const ok[] = {"", "hello", "gr\xc3\xbc\xc3\x9f", "\xe2\x82\xac",
                                     "\xf0\x9f\x98\x80", "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        size_t len;
        char *out = sanitize(ok[i], strlen(ok[i]), &len);
        cr_expect_eq(len, strlen(ok[i]));
        cr_expect_str_eq(out, ok[i]);
        free(out);
    }
}

Test(utf8, invalid_bytes_become_replacement_characters)
{
    static const struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"\xff", 1, "\xef\xbf\xbd"},
        {"a\x80z", 3, "a\xef\xbf\xbdz"},
        {"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong '/' */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate */
        {"\xf4\x90\x80\x80", 4,
         "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},         /* above U+10FFFF */
        {"\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd"},                 /* cut by truncation */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len;
        char *out = sanitize(cases[i].in, cases[i].n, &len);
        cr_expect_str_eq(out, cases[i].want, "case %zu", i);
        free(out);
    }
}

Test(utf8, nul_bytes_are_kept)
{
    size_t len;
    char *out = sanitize("a\0b", 3, &len);
    cr_expect_eq(len, 3);
    cr_expect_eq(memcmp(out, "a\0b", 3), 0);
    free(out);
}

static json_t *encode(const struct nsbox_result *r)
{
    char *text = nsbox_result_to_json(r);
    json_error_t err;
    json_t *j;

    cr_assert_not_null(text);
    j = json_loads(text, 0, &err);
    cr_assert_not_null(j, "not JSON: %s (%s)", text, err.text);
    free(text);
    return j;
}

Test(result, exited)
{
    char out[] = "hi\n\xff";
    struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .exit_code = 3,
        .wall_time = 12345,
        .out = {.data = out, .captured = 4, .total = 100, .truncated = true},
        .memory = {256 << 20, NSBOX_ENFORCER_RLIMIT},
        .pids_limit = {64, NSBOX_ENFORCER_RLIMIT},
        .cpus = {500, NSBOX_ENFORCER_CGROUP},
        .timeout = {1500000, NSBOX_ENFORCER_NONE},
    };
    json_t *j = encode(&r);

    cr_expect_str_eq(json_string_value(json_object_get(j, "status")), "exited");
    cr_expect_eq(json_integer_value(json_object_get(j, "exit_code")), 3);
    cr_expect(json_is_null(json_object_get(j, "signal")));
    cr_expect_float_eq(json_real_value(json_object_get(j, "wall_time_ms")), 12.345, 1e-9);
    cr_expect_str_eq(json_string_value(json_object_get(j, "stdout")), "hi\n\xef\xbf\xbd");
    cr_expect_str_eq(json_string_value(json_object_get(j, "stderr")), "");
    cr_expect_eq(json_integer_value(json_object_get(j, "stdout_bytes")), 100);
    cr_expect(json_is_true(json_object_get(j, "stdout_truncated")));
    cr_expect(json_is_false(json_object_get(j, "stderr_truncated")));
    cr_expect(json_is_null(json_object_get(j, "error")));

    json_t *limits = json_object_get(j, "limits");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(limits, "memory"), "bytes")),
                 256 << 20);
    cr_expect_str_eq(
        json_string_value(json_object_get(json_object_get(limits, "memory"), "enforced_by")),
        "rlimit");
    cr_expect_float_eq(
        json_real_value(json_object_get(json_object_get(limits, "cpus"), "cpus")), 0.5, 1e-9);
    cr_expect_float_eq(
        json_real_value(json_object_get(json_object_get(limits, "timeout"), "seconds")), 1.5,
        1e-9);
    /* One rlimit among cgroup limits makes the whole "rlimit". */
    cr_expect_str_eq(json_string_value(json_object_get(j, "limits_enforced_by")), "rlimit");
    json_decref(j);
}

Test(result, signaled_timeout_error)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_SIGNALED, .signal = 9};
    json_t *j = encode(&r);
    cr_expect_str_eq(json_string_value(json_object_get(j, "status")), "signaled");
    cr_expect_eq(json_integer_value(json_object_get(j, "signal")), 9);
    cr_expect_eq(json_integer_value(json_object_get(j, "exit_code")), 137);
    cr_expect_str_eq(json_string_value(json_object_get(j, "limits_enforced_by")), "none");
    json_decref(j);

    r = (struct nsbox_result){.status = NSBOX_STATUS_TIMEOUT};
    cr_expect_eq(nsbox_exit_status(&r), 124);

    r = (struct nsbox_result){.status = NSBOX_STATUS_ERROR, .exit_code = 127, .error_errno = 2};
    strcpy(r.error_step, "execve");
    strcpy(r.error, "python4: not found");
    cr_expect_eq(nsbox_exit_status(&r), 127);
    j = encode(&r);
    json_t *e = json_object_get(j, "error");
    cr_expect_str_eq(json_string_value(json_object_get(e, "step")), "execve");
    cr_expect_eq(json_integer_value(json_object_get(e, "errno")), 2);
    cr_expect_str_eq(json_string_value(json_object_get(e, "message")), "python4: not found");
    json_decref(j);

    r.exit_code = 0;
    cr_expect_eq(nsbox_exit_status(&r), 125, "an error never exits 0");
}

Test(result, host_ids)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_EXITED};
    json_t *j = encode(&r);
    /* Not chosen (the run failed before): null, never a made-up 0. */
    cr_expect(json_is_null(json_object_get(j, "host_uid")));
    cr_expect(json_is_null(json_object_get(j, "host_gid")));
    json_decref(j);

    r.host_uid = 2113929217;
    r.host_gid = 2113929218;
    j = encode(&r);
    cr_expect_eq(json_integer_value(json_object_get(j, "host_uid")), 2113929217);
    cr_expect_eq(json_integer_value(json_object_get(j, "host_gid")), 2113929218);
    json_decref(j);
}
