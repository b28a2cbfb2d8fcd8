/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nsbox.h"
#include "macro.h"
#include "result.h"

static char *sanitize(const char *s, size_t n, size_t *len)
{
    char *out = utf8_sanitize(s, n, len);
    cr_assert_not_null(out);
    return out;
}

Test(utf8, valid_text_is_unchanged)
{
    static const char *const ok[] = {"",
                                     "hello",
                                     "gr\xc3\xbc\xc3\x9f",
                                     "\xe2\x82\xac",
                                     "\xf0\x9f\x98\x80",
                                     "\xed\x9f\xbf",
                                     "\xf4\x8f\xbf\xbf"};
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
         "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* above U+10FFFF */
        {"\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd"},          /* cut by truncation */
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
        .out = {.data = out, .captured = 4, .head = 4, .total = 100, .truncated = true},
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
    cr_expect_str_eq(json_string_value(json_object_get(j, "stdout_tail")), "");
    cr_expect(json_is_null(json_object_get(j, "stderr_cut")));
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "stdout_cut"), "bytes")),
                 96);
    cr_expect(json_is_null(json_object_get(j, "error")));

    json_t *limits = json_object_get(j, "limits");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(limits, "memory"), "bytes")),
                 256 << 20);
    cr_expect_str_eq(json_string_value(
                         json_object_get(json_object_get(limits, "memory"), "enforced_by")),
                     "rlimit");
    cr_expect_float_eq(json_real_value(json_object_get(json_object_get(limits, "cpus"), "cpus")),
                       0.5, 1e-9);
    cr_expect_float_eq(json_real_value(
                           json_object_get(json_object_get(limits, "timeout"), "seconds")),
                       1.5, 1e-9);
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

static void reason_of(const struct nsbox_result *r, char *buf, size_t size)
{
    nsbox_result_reason(r, buf, size);
}

/* Whether got equals want; takes want (a new reference) and releases it. */
static bool json_equal_new(json_t *got, json_t *want)
{
    bool eq = json_equal(got, want);
    json_decref(want);
    return eq;
}

static void collect_note(const char *sentence, void *userdata)
{
    json_t *list = userdata;
    cr_assert_eq(json_array_append_new(list, json_string(sentence)), 0);
}

Test(explain, rlimit_cpu_seconds_never_within_a_second_of_the_timeout)
{
    static const struct {
        uint64_t cpus_milli, timeout_usec, want;
    } cases[] = {
        {500, 10000000, 5},   /* 5 s of CPU, 5 s before the timeout: kept */
        {500, 4000000, 2},    /* 2 s before: kept */
        {500, 2000000, 1},    /* exactly 1 s before: kept */
        {500, 1900000, 3},    /* 1 s, 0.9 s before: moved past the timeout */
        {500, 1000000, 2},    /* rounded up to 1 s, the timeout itself: moved */
        {1000, 10000000, 11}, /* 10 s, the timeout itself: moved */
        {2000, 10000000, 20}, /* 10 s past: kept */
        {100, 500000, 2},     /* rounded up to 1 s, 0.5 s past: moved */
        {0, 10000000, 0},     {500, 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        cr_expect_eq(result_rlimit_cpu_seconds(cases[i].cpus_milli, cases[i].timeout_usec),
                     cases[i].want, "case %zu: got %llu", i,
                     (unsigned long long)result_rlimit_cpu_seconds(cases[i].cpus_milli,
                                                                   cases[i].timeout_usec));
}

/* Every way a run ends: its sentence, its limit and whether that stopped the payload. */
Test(explain, each_end_has_a_sentence_and_a_limit)
{
    struct nsbox_result base = {
        .memory = {256 << 20, NSBOX_ENFORCER_RLIMIT},
        .pids_limit = {64, NSBOX_ENFORCER_RLIMIT},
        .cpus = {500, NSBOX_ENFORCER_RLIMIT},
        .timeout = {10000000, NSBOX_ENFORCER_NONE},
        .output_limit = 4000,
        .wall_time = 410000,
    };
    static const struct {
        enum nsbox_status status;
        int exit_code, signal;
        bool cgroup;
        const char *reason;
        enum nsbox_limit limit;
        bool stopped;
    } cases[] = {
        {NSBOX_STATUS_EXITED, 3, 0, false, "exited with status 3", NSBOX_LIMIT_NONE, false},
        {NSBOX_STATUS_SIGNALED, 0, SIGSEGV, false, "killed by SIGSEGV (signal 11)",
         NSBOX_LIMIT_NONE, false},
        {NSBOX_STATUS_SIGNALED, 0, SIGXCPU, false,
         "stopped: CPU time limit: the payload used up its 5 s of CPU time (--cpus 0.5 x "
         "--timeout 10 s, RLIMIT_CPU under rlimits) and was killed by SIGXCPU",
         NSBOX_LIMIT_CPU, true},
        /* In a cgroup nsbox sets no RLIMIT_CPU: a SIGXCPU is the payload's own. */
        {NSBOX_STATUS_SIGNALED, 0, SIGXCPU, true, "killed by SIGXCPU (signal 24)", NSBOX_LIMIT_NONE,
         false},
        {NSBOX_STATUS_TIMEOUT, 124, 0, false, "timed out after 10 s; the sandbox was killed",
         NSBOX_LIMIT_TIMEOUT, true},
        {NSBOX_STATUS_OOM, 137, SIGKILL, true,
         "stopped: out of memory (limit 256 MiB, after 0.41 s); the cgroup's OOM killer killed "
         "the payload",
         NSBOX_LIMIT_MEMORY, true},
        {NSBOX_STATUS_KILLED, 137, SIGKILL, false, "killed on request (nsbox kill)",
         NSBOX_LIMIT_NONE, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct nsbox_result r = base;
        char reason[600];
        bool stopped = !cases[i].stopped;
        enum nsbox_enforcer by = cases[i].cgroup ? NSBOX_ENFORCER_CGROUP : NSBOX_ENFORCER_RLIMIT;

        r.status = cases[i].status;
        r.exit_code = cases[i].exit_code;
        r.signal = cases[i].signal;
        r.memory.enforced_by = r.pids_limit.enforced_by = r.cpus.enforced_by = by;
        r.cgroup.valid = cases[i].cgroup;
        reason_of(&r, reason, sizeof(reason));
        cr_expect_str_eq(reason, cases[i].reason, "case %zu", i);
        cr_expect_eq(nsbox_result_limit(&r, &stopped), cases[i].limit, "case %zu", i);
        cr_expect_eq(stopped, cases[i].stopped, "case %zu", i);
    }
}

Test(explain, error_reason_is_the_error)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_ERROR, .exit_code = 125};
    char reason[600];

    (void)snprintf(r.error, sizeof(r.error), "sandbox setup failed at rootfs: No such file");
    r.out.truncated = true; /* no limit for nsbox's own failure */
    reason_of(&r, reason, sizeof(reason));
    cr_expect_str_eq(reason, r.error);
    cr_expect_eq(nsbox_result_limit(&r, NULL), NSBOX_LIMIT_NONE);
    reason_of(&r, reason, 8); /* cut, still terminated */
    cr_expect_str_eq(reason, "sandbox");
}

Test(explain, notes_in_order_and_in_json)
{
    char out[] = "abc", err[] = "e";
    struct nsbox_result r = {
        .status = NSBOX_STATUS_SIGNALED,
        .signal = SIGBUS,
        .memory = {64 << 20, NSBOX_ENFORCER_RLIMIT},
        .pids_limit = {8, NSBOX_ENFORCER_RLIMIT},
        .cpus = {500, NSBOX_ENFORCER_RLIMIT},
        .timeout = {10000000, NSBOX_ENFORCER_NONE},
        .output_limit = 3,
        .out = {.data = out,
                .captured = 3,
                .head = 2,
                .total = 100,
                .truncated = true,
                .cut_lines = 7},
        .err = {.data = err, .captured = 1, .total = 1},
        .seccomp_reporting = true,
        .refused = {{"socket", 2}, {"mount", 1}},
        .n_refused = 2,
        .refused_other = 4,
    };
    json_t *notes = json_array(), *j, *want;

    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 3);
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 3);
    want = json_pack("[s, s, s]",
                     "the payload died of SIGBUS; if it ran out of memory: under rlimits, --memory "
                     "64m caps its writable mappings (RLIMIT_DATA), not its use, and a program "
                     "denied a mapping may crash instead of failing cleanly",
                     "the seccomp policy refused: socket (2), mount (1), and others",
                     "stdout cut: kept its first 2 and last 1 of 100 bytes; 97 bytes (7 lines) "
                     "between them were cut (--output-limit)");
    cr_expect(json_equal(notes, want), "got %s", json_dumps(notes, 0));
    j = encode(&r);
    cr_expect(json_equal(json_object_get(j, "notes"), want));
    cr_expect_str_eq(json_string_value(json_object_get(j, "reason")),
                     "killed by SIGBUS (signal 7)");
    /* The crash is not a limit kill under rlimits; the truncation is the limit it ran into. */
    cr_expect(
        json_equal_new(json_object_get(j, "limit"),
                       json_pack("{s:s, s:i, s:s, s:s, s:b}", "name", "output", "value", 3, "unit",
                                 "bytes", "enforced_by", "supervisor", "stopped", 0)));
    cr_expect_eq(json_integer_value(
                     json_object_get(json_object_get(json_object_get(j, "limits"), "output"),
                                     "bytes")),
                 3);
    json_decref(notes);
    json_decref(want);
    json_decref(j);
}

Test(explain, refused_inet_socket_says_how_to_get_local_sockets)
{
    struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .exit_code = 1,
        .seccomp_reporting = true,
        .refused = {{"socket", 1}},
        .n_refused = 1,
    };
    json_t *notes = json_array();

    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 1);
    r.refused_inet_socket = true;
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 2);
    cr_expect(strstr(json_string_value(json_array_get(notes, 1)), "--network loopback"), "got %s",
              json_dumps(notes, 0));
    json_decref(notes);
}

/* Each refusal the notes explain (issue 30, issue 24): one note each, after the list of refused
 * calls, saying why nsbox refuses and what works instead. */
Test(explain, refusals_say_why_and_what_works_instead)
{
    static const struct {
        const char *call;
        size_t flag; /* offset of the bool in struct nsbox_result */
        const char *why, *instead;
    } cases[] = {
        {"chmod", offsetof(struct nsbox_result, refused_setid_mode),
         "set-user-ID or set-group-ID bit was refused", "use a mode without them (0o755"},
        {"prlimit64", offsetof(struct nsbox_result, refused_core_limit),
         "setting RLIMIT_CORE was refused (EPERM; Python's resource.setrlimit raises ValueError)",
         "leave RLIMIT_CORE as it is"},
        {"ioctl", offsetof(struct nsbox_result, refused_tty_ldisc),
         "line discipline (ioctl TIOCSETD) was refused", "keep N_TTY"},
        {"inotify_init1", offsetof(struct nsbox_result, refused_inotify),
         "inotify was refused (ENOSYS", "poll for changes instead"},
    };

    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        struct nsbox_result r = {
            .status = NSBOX_STATUS_EXITED,
            .exit_code = 1,
            .seccomp_reporting = true,
            .n_refused = 1,
        };
        json_t *notes = json_array();
        const char *got;

        (void)snprintf(r.refused[0].name, sizeof(r.refused[0].name), "%s", cases[i].call);
        r.refused[0].count = 1;
        cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 1, "%s", cases[i].call);
        *(bool *)((char *)&r + cases[i].flag) = true;
        cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 2, "%s", cases[i].call);
        got = json_string_value(json_array_get(notes, 1));
        cr_expect(got && strstr(got, cases[i].why), "got %s", json_dumps(notes, 0));
        cr_expect(got && strstr(got, cases[i].instead), "got %s", json_dumps(notes, 0));
        json_decref(notes);
    }
}

Test(explain, isolation_in_json)
{
    struct nsbox_result r = {.status = NSBOX_STATUS_EXITED, .isolation_tier = 1};
    json_t *j = encode(&r), *want = json_pack("{s:i, s:[]}", "tier", 1, "missing");

    cr_assert(j);
    cr_expect(json_equal(json_object_get(j, "isolation"), want), "got %s",
              json_dumps(json_object_get(j, "isolation"), 0));
    json_decref(j);
    json_decref(want);

    /* Tier 2: what it left out, by name. */
    r.isolation_tier = 2;
    r.isolation_missing = NSBOX_MISSING_USERNS_LIMITS | NSBOX_MISSING_SHM_LIMITS;
    j = encode(&r);
    want = json_pack("{s:i, s:[s, s]}", "tier", 2, "missing", "user.max_* limits",
                     "kernel.shm* limits");
    cr_expect(json_equal(json_object_get(j, "isolation"), want), "got %s",
              json_dumps(json_object_get(j, "isolation"), 0));
    json_decref(j);
    json_decref(want);

    /* Tier 3: every namespace, the rootfs and the cgroup. */
    r.isolation_tier = 3;
    r.isolation_missing = NSBOX_MISSING_USER_NS | NSBOX_MISSING_PID_NS | NSBOX_MISSING_NET_NS |
                          NSBOX_MISSING_MOUNT_NS | NSBOX_MISSING_IPC_NS | NSBOX_MISSING_UTS_NS |
                          NSBOX_MISSING_CGROUP_NS | NSBOX_MISSING_ROOTFS | NSBOX_MISSING_CGROUP;
    j = encode(&r);
    want = json_pack("{s:i, s:[s, s, s, s, s, s, s, s, s]}", "tier", 3, "missing", "user namespace",
                     "pid namespace", "network namespace", "mount namespace", "ipc namespace",
                     "uts namespace", "cgroup namespace", "rootfs", "cgroup");
    cr_expect(json_equal(json_object_get(j, "isolation"), want), "got %s",
              json_dumps(json_object_get(j, "isolation"), 0));
    json_decref(j);
    json_decref(want);

    /* A run that failed before its tier was decided: null. */
    r = (struct nsbox_result){.status = NSBOX_STATUS_ERROR};
    j = encode(&r);
    cr_expect(json_is_null(json_object_get(j, "isolation")));
    json_decref(j);
}

Test(explain, landlock_in_json_and_notes)
{
    struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .landlock_abi = 6,
        .landlock_restricts = NSBOX_LANDLOCK_FS | NSBOX_LANDLOCK_SCOPE,
    };
    json_t *j = encode(&r),
           *want = json_pack("{s:i, s:[s, s]}", "abi", 6, "restricts", "fs", "scope");
    json_t *notes = json_array();

    cr_assert(j);
    cr_expect(json_equal(json_object_get(j, "landlock"), want), "got %s",
              json_dumps(json_object_get(j, "landlock"), 0));
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 0);
    json_decref(j);

    /* Missing: null in the JSON, and a note that names --landlock required. */
    r.landlock_abi = 0;
    r.landlock_restricts = 0;
    r.landlock_missing = ENOSYS;
    j = encode(&r);
    cr_assert(j);
    cr_expect(json_is_null(json_object_get(j, "landlock")));
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    cr_expect(strstr(json_string_value(json_array_get(notes, 0)), "--landlock required"), "got %s",
              json_dumps(notes, 0));
    r.landlock_missing = EPROTO;
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    cr_expect(strstr(json_string_value(json_array_get(notes, 1)), "ABI 1"), "got %s",
              json_dumps(notes, 0));
    /* A run that failed says why in its error, not in a note. */
    r.status = NSBOX_STATUS_ERROR;
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 0);
    json_decref(notes);
    json_decref(want);
    json_decref(j);
}

Test(explain, cgroup_oom_and_pids_in_json)
{
    struct nsbox_result r = {
        .status = NSBOX_STATUS_OOM,
        .signal = SIGKILL,
        .wall_time = 1500000,
        .memory = {1 << 30, NSBOX_ENFORCER_CGROUP},
        .pids_limit = {64, NSBOX_ENFORCER_CGROUP},
        .cpus = {500, NSBOX_ENFORCER_CGROUP},
        .timeout = {10000000, NSBOX_ENFORCER_NONE},
        .output_limit = 4000,
        .cgroup = {.valid = true, .oom_kills = 1, .pids_limit_hits = 3},
    };
    json_t *j = encode(&r), *notes;

    cr_expect_str_eq(json_string_value(json_object_get(j, "reason")),
                     "stopped: out of memory (limit 1 GiB, after 1.5 s); the cgroup's OOM killer "
                     "killed the payload");
    cr_expect(json_equal_new(json_object_get(j, "limit"),
                             json_pack("{s:s, s:I, s:s, s:s, s:b}", "name", "memory", "value",
                                       (json_int_t)1 << 30, "unit", "bytes", "enforced_by",
                                       "cgroup", "stopped", 1)));
    notes = json_object_get(j, "notes");
    cr_expect_eq(json_array_size(notes), 1);
    cr_expect_str_eq(json_string_value(json_array_get(notes, 0)),
                     "the process limit (--pids-limit 64) refused 3 forks");
    json_decref(j);

    /* The same forks refused by a payload that then exits: pids is the limit it ran into. */
    r.status = NSBOX_STATUS_EXITED;
    r.exit_code = 1;
    j = encode(&r);
    cr_expect(
        json_equal_new(json_object_get(j, "limit"),
                       json_pack("{s:s, s:i, s:s, s:s, s:b}", "name", "pids", "value", 64, "unit",
                                 "processes", "enforced_by", "cgroup", "stopped", 0)));
    json_decref(j);
}

/* Bytes of the JSON string nsbox writes for s[0..n) (json_dump_exact(): jansson's, with the
 * hidden characters escaped), quotes not counted. */
static size_t json_size(const char *s, size_t n)
{
    json_t *j = json_text(s, n);
    char *text;
    size_t len;

    cr_assert_not_null(j);
    text = json_dump_exact(j, JSON_ENCODE_ANY | JSON_COMPACT);
    cr_assert_not_null(text);
    len = strlen(text) - 2;
    free(text);
    json_decref(j);
    return len;
}

/* Feed s to a meter in chunks of chunk bytes, as the supervisor does; returns the bytes kept. */
static size_t meter_feed(const char *s, size_t n, size_t chunk, uint64_t bound)
{
    struct json_meter m = {0};
    size_t kept = 0;

    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        size_t fit = json_meter_fit(&m, s, kept, k, bound);
        cr_assert_leq(fit, k);
        kept += fit;
        if (fit < k)
            break;
    }
    return kept;
}

Test(json_meter, text_of_two_character_escapes_fits_twice_its_length)
{
    char s[300];
    memset(s, '\n', 100);
    memcpy(s + 100, "\"\\\t", 3);
    cr_expect_eq(meter_feed(s, 103, 7, 2 * 103), 103);
    cr_expect_eq(json_size(s, 103), 2 * 103);
    memset(s, 'a', 300);
    cr_expect_eq(meter_feed(s, 300, 300, 300), 300);
}

Test(json_meter, control_bytes_are_cut_at_the_bound)
{
    char s[100];
    memset(s, 0x01, sizeof(s));
    /* \u0001 is 6 bytes: 33 of them in 200. */
    cr_expect_eq(meter_feed(s, sizeof(s), 1, 200), 33);
    cr_expect_eq(meter_feed(s, sizeof(s), 100, 200), 33);
    cr_expect_eq(json_size(s, 33), 198);
}

Test(json_meter, utf8_split_across_chunks_costs_its_length)
{
    /* "é€😀" as 2 + 3 + 4 bytes: 9 bytes of JSON, fed in one chunk or a byte at a time (then
     * up to 3 bytes of an unfinished character count as 9 until it is finished). */
    const char *s = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    cr_expect_eq(meter_feed(s, 9, 9, 9), 9);
    cr_expect_eq(meter_feed(s, 9, 1, 14), 9);
    cr_expect_eq(json_size(s, 9), 9);
    /* One byte short of the bound: the 4-byte character's first bytes are kept only while
     * they fit as U+FFFDs should the stream end there (3 bytes each): one of them. */
    cr_expect_eq(meter_feed(s, 9, 1, 8), 6);
    cr_expect_eq(json_size(s, 6), 8);
}

Test(json_meter, invalid_bytes_count_as_replacement_characters)
{
    const char *s = "\xff\xfe\x80";
    cr_expect_eq(meter_feed(s, 3, 1, 9), 3);
    cr_expect_eq(json_size(s, 3), 9);
    cr_expect_eq(meter_feed(s, 3, 3, 8), 2);
}

/* Random mixtures, random chunk sizes, random bounds: what is kept never encodes to more than
 * the bound, and text that fits is kept whole unless it fits only within the 5 bytes by which
 * an unfinished sequence at a chunk's end can be overcounted (3 bytes of a 4-byte character
 * counted as 9). */
Test(json_meter, never_passes_the_bound)
{
    static const char alphabet[][4] = {"a",    "\n",   "\"",   "\x01", "\x1b", "\x7f",
                                       "\xc3", "\xa9", "\xe2", "\x82", "\xac", "\xf0",
                                       "\x9f", "\xff", "\xed", "\xa0", "\0",   "\xc2",
                                       "\x9d", "\x80", "\x8b", "\xf3", "\xa0", "\x81"};
    char s[512];

    srand(7);
    for (int trial = 0; trial < 2000; trial++) {
        size_t n = (size_t)(rand() % (int)sizeof(s));
        size_t chunk = 1 + (size_t)(rand() % 64);
        uint64_t bound = (uint64_t)(rand() % 1200);
        size_t kept;

        for (size_t i = 0; i < n; i++)
            s[i] = alphabet[rand() % (int)(sizeof(alphabet) / sizeof(alphabet[0]))][0];
        kept = meter_feed(s, n, chunk, bound);
        cr_assert_leq(json_size(s, kept), bound, "trial %d: kept %zu of %zu", trial, kept, n);
        if (json_size(s, n) + 5 <= bound)
            cr_assert_eq(kept, n, "trial %d: cut text that fits", trial);
        if (chunk >= n && json_size(s, n) <= bound)
            cr_assert_eq(kept, n, "trial %d: cut text that fits, in one chunk", trial);
    }
}

Test(json_dump, exact_buffer_matches_json_dumps)
{
    json_t *j = json_pack("{s:s, s:i, s:[s, f]}", "a", "b\n\x01", "c", 42, "d", "e", 1.5);
    char *want = json_dumps(j, JSON_COMPACT), *got = json_dump_exact(j, JSON_COMPACT);

    cr_assert_not_null(got);
    cr_expect_str_eq(got, want);
    free(want);
    free(got);
    json_decref(j);
}

Test(json_dump, hidden_characters_are_escaped_value_unchanged)
{
    /* DEL, C1 CSI and OSC, the line separator, a right-to-left override, a zero-width space, a
     * BOM and U+E0001 (a tag, above U+FFFF: a surrogate pair); visible non-ASCII stays. */
    const char *s = "a\x7f\xc2\x9b\xc2\x9d\xe2\x80\xa8\xe2\x80\xae\xe2\x80\x8b\xef\xbb\xbf"
                    "\xf3\xa0\x80\x81\xc3\xa9\xe2\x82\xac";
    json_t *j = json_pack("{s:s}", "k", s), *back;
    char *got = json_dump_exact(j, JSON_COMPACT);

    cr_assert_not_null(got);
    cr_expect_str_eq(got, "{\"k\":\"a\\u007f\\u009b\\u009d\\u2028\\u202e\\u200b\\ufeff"
                          "\\udb40\\udc01\xc3\xa9\xe2\x82\xac\"}");
    back = json_loads(got, 0, NULL);
    cr_assert_not_null(back);
    cr_expect_str_eq(json_string_value(json_object_get(back, "k")), s);
    cr_expect_eq(json_size(s, strlen(s)), strlen(got) - strlen("{\"k\":\"\"}"));
    free(got);
    json_decref(back);
    json_decref(j);
}

Test(json_meter, hidden_characters_cost_their_escapes)
{
    /* U+009D: 2 bytes become 6; U+E0001: 4 bytes become 12; DEL: 1 becomes 6. */
    cr_expect_eq(meter_feed("\xc2\x9d\xc2\x9d", 4, 4, 11), 2);
    cr_expect_eq(meter_feed("\xf3\xa0\x80\x81", 4, 4, 11), 0);
    cr_expect_eq(meter_feed("\xf3\xa0\x80\x81", 4, 1, 12), 4);
    cr_expect_eq(meter_feed("\x7f\x7f", 2, 2, 11), 1);
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

Test(explain, network_refusals_and_cut_in_notes_and_json)
{
    char out[] = "", err[] = "";
    static struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .output_limit = 10,
        .network =
            {
                .enabled = true,
                .connections = {{"pypi.org", 443, true, "", 10, 20000},
                                {"evil.example", 443, false, "not in --network allow", 0, 0},
                                {"", 0, false, "more than one Host header", 0, 0}},
                .n_connections = 3,
                .connections_total = 3,
                .connections_refused = 2,
                .bytes_sent = 10,
                .bytes_received = 20000,
                .bytes_limit_hit = true,
                .hosts = {{"pypi.org", 443, 1, 10, 20000}, {"", 0, 2, 5, 6}},
                .n_hosts = 2,
            },
    };
    json_t *notes = json_array(), *j, *want, *net;

    r.out = (struct nsbox_stream){.data = out};
    r.err = (struct nsbox_stream){.data = err};
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 2);
    want = json_pack("[s, s]",
                     "the network proxy (--network allow) refused 2 connections: "
                     "evil.example:443 (not in --network allow), more than one Host header",
                     "the network proxy cut the connections at --network-max-bytes (20010 bytes "
                     "relayed)");
    cr_expect(json_equal(notes, want), "got %s", json_dumps(notes, 0));
    j = encode(&r);
    net = json_object_get(j, "network");
    cr_expect_eq(json_integer_value(json_object_get(net, "connections_refused")), 2);
    cr_expect(json_is_true(json_object_get(net, "bytes_limit_hit")));
    cr_expect(json_equal_new(json_array_get(json_object_get(net, "connections"), 2),
                             json_pack("{s:n, s:n, s:b, s:s, s:i, s:i}", "host", "port", "allowed",
                                       0, "reason", "more than one Host header", "bytes_sent", 0,
                                       "bytes_received", 0)));
    /* The totals by host; the last entry, for all others, has no host and no port. */
    cr_expect(json_equal_new(json_object_get(net, "hosts"),
                             json_pack("[{s:s, s:i, s:i, s:i, s:i}, {s:n, s:n, s:i, s:i, s:i}]",
                                       "host", "pypi.org", "port", 443, "connections", 1,
                                       "bytes_sent", 10, "bytes_received", 20000, "host", "port",
                                       "connections", 2, "bytes_sent", 5, "bytes_received", 6)));
    json_decref(notes);
    json_decref(want);
    json_decref(j);
    /* Without --network allow=: null. */
    r.network.enabled = false;
    j = encode(&r);
    cr_expect(json_is_null(json_object_get(j, "network")));
    json_decref(j);
}

/* The proxy's pace and budget of lookups (proxy.h): counted in the JSON, said in the notes
 * only when they bit. */
Test(explain, network_pace_and_lookup_budget)
{
    char out[] = "", err[] = "";
    static struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .output_limit = 10,
        .network = {.enabled = true, .lookups = 3},
    };
    json_t *notes = json_array(), *want, *j, *net;

    r.out = (struct nsbox_stream){.data = out};
    r.err = (struct nsbox_stream){.data = err};
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 0);
    j = encode(&r);
    net = json_object_get(j, "network");
    cr_expect_eq(json_integer_value(json_object_get(net, "lookups")), 3);
    cr_expect_eq(json_integer_value(json_object_get(net, "connections_throttled")), 0);
    json_decref(j);

    r.network.connections_throttled = 400;
    r.network.lookups_throttled = 224;
    r.network.lookups = 256;
    r.network.lookups_refused_budget = 1;
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 2);
    want =
        json_pack("[s, s]",
                  "the network proxy paced the program (its work is outside the sandbox's limits): "
                  "400 "
                  "connections waited for their turn (200 at once, then 100 a second) and 224 new "
                  "names "
                  "for their lookup (32 at once, then 20 a second); reusing connections "
                  "(keep-alive, one "
                  "CONNECT tunnel) and names avoids the wait",
                  "the network proxy refused 1 connection to names it had not looked up yet: a run "
                  "may "
                  "look up 256 names; names looked up already, --add-host NAME:ADDRESS and address "
                  "patterns still work");
    cr_expect(json_equal(notes, want), "got %s", json_dumps(notes, 0));
    j = encode(&r);
    net = json_object_get(j, "network");
    cr_expect_eq(json_integer_value(json_object_get(net, "connections_throttled")), 400);
    cr_expect_eq(json_integer_value(json_object_get(net, "lookups_throttled")), 224);
    cr_expect_eq(json_integer_value(json_object_get(net, "lookups")), 256);
    cr_expect_eq(json_integer_value(json_object_get(net, "lookups_refused_budget")), 1);
    json_decref(j);
    json_decref(notes);
    json_decref(want);
}

/* shmget refused (sandbox.c: no cgroup, kernel.shm* out of reach): a note says why and what
 * works instead; not for a refusal under a cgroup (a policy's own). */
Test(explain, sysv_shm_refused_under_rlimits)
{
    char out[] = "", err[] = "";
    static struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .output_limit = 10,
        .memory = {.value = 256 << 20, .enforced_by = NSBOX_ENFORCER_RLIMIT},
        .refused = {{"mount", 1}, {"shmget", 2}},
        .n_refused = 2,
    };
    json_t *notes = json_array(), *want;

    r.out = (struct nsbox_stream){.data = out};
    r.err = (struct nsbox_stream){.data = err};
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 2);
    want = json_pack("[s, s]", "the seccomp policy refused: mount (1), shmget (2)",
                     "System V shared memory (shmget) is refused in this run: without a cgroup "
                     "nothing would hold it within --memory (only the host's root can set "
                     "kernel.shmall in the sandbox's IPC namespace); POSIX shared memory works, "
                     "in /dev/shm (shm_open, multiprocessing.shared_memory), within --shm-size");
    cr_expect(json_equal(notes, want), "got %s", json_dumps(notes, 0));
    json_decref(notes);
    notes = json_array();
    r.memory.enforced_by = NSBOX_ENFORCER_CGROUP;
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    json_decref(notes);
    json_decref(want);
}

/* semget and msgget refused (sandbox.c: no cgroup): a note for each, saying what works. */
Test(explain, sysv_semaphores_and_messages_refused_under_rlimits)
{
    char out[] = "", err[] = "";
    static struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .output_limit = 10,
        .memory = {.value = 64 << 20, .enforced_by = NSBOX_ENFORCER_RLIMIT},
        .refused = {{"msgget", 1}, {"semget", 3}},
        .n_refused = 2,
    };
    json_t *notes = json_array(), *want;

    r.out = (struct nsbox_stream){.data = out};
    r.err = (struct nsbox_stream){.data = err};
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 3);
    want = json_pack("[s, s, s]", "the seccomp policy refused: msgget (1), semget (3)",
                     "System V message queues (msgget) are refused in this run: without a cgroup "
                     "nothing would hold their kernel memory within --memory; POSIX ones work "
                     "(mq_open, within RLIMIT_MSGQUEUE; or a pipe or a socket)",
                     "System V semaphores (semget) are refused in this run: without a cgroup "
                     "nothing would hold their kernel memory within --memory; POSIX ones work "
                     "(sem_open, multiprocessing's locks)");
    cr_expect(json_equal(notes, want), "got %s", json_dumps(notes, 0));
    json_decref(notes);
    notes = json_array();
    r.memory.enforced_by = NSBOX_ENFORCER_CGROUP;
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    json_decref(notes);
    json_decref(want);
}

/* What the program's stderr says of a limit it met: the only witness under rlimits. */
Test(explain, stderr_witnesses_of_memory_pids_and_space)
{
    char memerr[] = "Traceback (most recent call last):\nMemoryError\n";
    char forkerr[] = "  pid = os.fork()\nBlockingIOError: [Errno 11] Resource temporarily "
                     "unavailable\n";
    char bare[] = "BlockingIOError: [Errno 11] Resource temporarily unavailable\n";
    char nospc[] = "OSError: [Errno 28] No space left on device\n";
    char other[] = "ValueError: bad\n";
    struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .exit_code = 1,
        .memory = {64 << 20, NSBOX_ENFORCER_RLIMIT},
        .pids_limit = {4, NSBOX_ENFORCER_RLIMIT},
    };
    json_t *notes = json_array();

    r.err = (struct nsbox_stream){.data = other, .captured = strlen(other)};
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 0);

    r.err = (struct nsbox_stream){.data = memerr, .captured = strlen(memerr)};
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    cr_expect(strstr(json_string_value(json_array_get(notes, 0)), "--memory 64m (under rlimits, "
                                                                  "RLIMIT_DATA"));
    r.memory.enforced_by = NSBOX_ENFORCER_CGROUP;
    json_array_clear(notes);
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    cr_expect(strstr(json_string_value(json_array_get(notes, 0)), "the cgroup's memory.max"));
    r.status = NSBOX_STATUS_OOM; /* the reason says it already */
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 0);
    r.status = NSBOX_STATUS_EXITED;
    r.memory.value = 0; /* no limit: nothing to raise */
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 0);

    r.err = (struct nsbox_stream){.data = forkerr, .captured = strlen(forkerr)};
    json_array_clear(notes);
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    cr_expect(strstr(json_string_value(json_array_get(notes, 0)),
                     "a fork or thread start that failed with EAGAIN"));
    cr_expect(
        strstr(json_string_value(json_array_get(notes, 0)), "--pids-limit 4 is RLIMIT_NPROC"));
    r.err = (struct nsbox_stream){.data = bare, .captured = strlen(bare)};
    json_array_clear(notes);
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    cr_expect(strstr(json_string_value(json_array_get(notes, 0)),
                     "; if a fork or a thread start failed with it"));
    /* A cgroup counts refused forks itself (pids.events): no guess from the text. */
    r.pids_limit.enforced_by = NSBOX_ENFORCER_CGROUP;
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 0);

    {
        char denied[] = "sh: 1: cannot create /data/x: Permission denied\n";
        struct nsbox_result d = {.status = NSBOX_STATUS_EXITED,
                                 .exit_code = 2,
                                 .host_uid = 1000,
                                 .host_gid = 1000,
                                 .err = {.data = denied, .captured = strlen(denied)}};
        cr_expect_eq(nsbox_result_notes(&d, NULL, NULL), 0); /* no writable bind */
        d.writable_binds = true;
        json_array_clear(notes);
        cr_expect_eq(nsbox_result_notes(&d, collect_note, notes), 1);
        cr_expect(strstr(json_string_value(json_array_get(notes, 0)),
                         "writes there as host uid 1000, gid 1000, so"));
    }

    r.err = (struct nsbox_stream){.data = nospc, .captured = strlen(nospc)};
    json_array_clear(notes);
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    cr_expect(strstr(json_string_value(json_array_get(notes, 0)), "/tmp (--tmpfs /tmp:size=...)"));
    r.work_full = true; /* measured: that warning names --workdir-size already */
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 0);
    json_decref(notes);
}

Test(json, a_stream_cut_between_its_head_and_its_tail)
{
    char out[] = "start\nend\n";
    struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .out = {.data = out,
                .captured = 10,
                .head = 6,
                .total = 5000,
                .truncated = true,
                .cut_lines = 212},
    };
    json_t *j = encode(&r), *cut = json_object_get(j, "stdout_cut");

    cr_expect_str_eq(json_string_value(json_object_get(j, "stdout")), "start\n");
    cr_expect_str_eq(json_string_value(json_object_get(j, "stdout_tail")), "end\n");
    cr_expect_eq(json_integer_value(json_object_get(cut, "bytes")), 4990);
    cr_expect_eq(json_integer_value(json_object_get(cut, "lines")), 212);
    cr_expect_eq(json_integer_value(json_object_get(cut, "head_bytes")), 6);
    cr_expect_eq(json_integer_value(json_object_get(cut, "tail_bytes")), 4);
    /* Nothing cut: one text, an empty tail, no cut. */
    r.out = (struct nsbox_stream){.data = out, .captured = 10, .total = 10};
    json_decref(j);
    j = encode(&r);
    cr_expect_str_eq(json_string_value(json_object_get(j, "stdout")), "start\nend\n");
    cr_expect_str_eq(json_string_value(json_object_get(j, "stdout_tail")), "");
    cr_expect(json_is_null(json_object_get(j, "stdout_cut")));
    json_decref(j);
}

Test(explain, a_missing_module_names_the_rootfs_and_the_way_to_get_it)
{
    char err[] = "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
                 "ModuleNotFoundError: No module named 'pandas'\n";
    char evil[] = "ModuleNotFoundError: No module named 'x\x1b]0;t\x07'\n";
    struct nsbox_result r = {
        .status = NSBOX_STATUS_EXITED,
        .exit_code = 1,
        .err = {.data = err, .captured = sizeof(err) - 1, .total = sizeof(err) - 1},
        .rootfs = "/usr/share/nsbox/rootfs",
        .rootfs_profile = "minimal",
    };
    json_t *notes = json_array(), *want;

    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    want = json_pack("[s]",
                     "the program's stderr mentions ModuleNotFoundError (pandas): the rootfs "
                     "/usr/share/nsbox/rootfs (profile minimal) does not have it. If it is a "
                     "module of your own, put its file beside the code in the working "
                     "directory (--copy-in, files= in Python). The "
                     "science profile has numpy, pandas, matplotlib, seaborn, scipy, "
                     "scikit-learn, openpyxl and requests: `nsbox rootfs build --profile "
                     "science DIR`; any Debian package: `nsbox rootfs build --packages "
                     "python3-NAME DIR` (with --profile to start from); then --rootfs DIR");
    cr_expect(json_equal(notes, want), "got %s", json_dumps(notes, 0));
    json_decref(notes);
    json_decref(want);
    /* A name that is not a plain module name is not quoted; a tree without a profile says
     * none. */
    r.err = (struct nsbox_stream){.data = evil, .captured = sizeof(evil) - 1};
    r.rootfs_profile[0] = '\0';
    notes = json_array();
    cr_expect_eq(nsbox_result_notes(&r, collect_note, notes), 1);
    cr_expect(strncmp(json_string_value(json_array_get(notes, 0)),
                      "the program's stderr mentions ModuleNotFoundError: the rootfs "
                      "/usr/share/nsbox/rootfs does not have it.",
                      100) == 0,
              "got %s", json_string_value(json_array_get(notes, 0)));
    json_decref(notes);
    /* Without the rootfs (the supervisor saw no ModuleNotFoundError): no note. */
    r.rootfs[0] = '\0';
    cr_expect_eq(nsbox_result_notes(&r, NULL, NULL), 0);
}
