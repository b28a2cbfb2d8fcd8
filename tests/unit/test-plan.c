/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The parts of the plan that need no OS state (plan.h): environment merge, mounts (mount.h),
 * identity, opt-out warnings; and the wording of failures (report.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mount.h"
#include "nsbox.h"
#include "plan.h"
#include "report.h"
#include "sandbox.h"

static struct nsbox_config config;
static struct nsbox_result result;
static struct sandbox_plan sb;

static void setup(void)
{
    nsbox_config_init(&config);
    config.cpus_milli = 0; /* no thread counts, unless a test asks */
    memset(&result, 0, sizeof(result));
    sb = (struct sandbox_plan){.config = &config,
                               .host_ids_lock = -EBADF,
                               .copy_in_fd = -EBADF,
                               .copy_out_fd = -EBADF,
                               .outputs_fd = -EBADF,
                               .ws = {.base_fd = -EBADF, .lock_fd = -EBADF, .dir_fd = -EBADF}};
}

static void teardown(void)
{
    plan_free(&sb);
    nsbox_result_free(&result);
}

TestSuite(plan, .init = setup, .fini = teardown);

static size_t env_count(void)
{
    size_t n = 0;
    while (sb.envp[n])
        n++;
    return n;
}

static const char *env_get(const char *key)
{
    size_t len = strlen(key);
    for (char **e = sb.envp; *e; e++)
        if (strncmp(*e, key, len) == 0 && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

Test(plan, env_base)
{
    static const char *const want[] = {"PATH=" SANDBOX_PATH, "HOME=/tmp", "LANG=C.UTF-8",
                                       "PYTHONUNBUFFERED=1"};

    cr_assert_eq(plan_env(&sb, &result), 0);
    cr_assert_eq(env_count(), 4);
    for (size_t i = 0; i < 4; i++)
        cr_expect_str_eq(sb.envp[i], want[i]);
    cr_expect_str_eq(sb.path, SANDBOX_PATH);
}

Test(plan, env_thread_counts_follow_cpus)
{
    config.cpus_milli = 1000; /* one CPU on every machine */
    cr_assert_eq(plan_env(&sb, &result), 0);
    cr_expect_str_eq(env_get("OPENBLAS_NUM_THREADS"), "1");
    cr_expect_str_eq(env_get("OMP_NUM_THREADS"), "1");
    cr_expect_str_eq(env_get("MKL_NUM_THREADS"), "1");
}

Test(plan, env_later_key_wins_in_place_of_the_first)
{
    char *const env[] = {"PATH=/opt/bin",     "FOO=1", "OMP_NUM_THREADS=8", "FOO=2",
                         "PYTHONUNBUFFERED=", NULL};

    config.cpus_milli = 1000;
    config.env = env;
    cr_assert_eq(plan_env(&sb, &result), 0);
    cr_expect_str_eq(sb.envp[0], "PATH=/opt/bin");
    cr_expect_str_eq(sb.path, "/opt/bin");
    cr_expect_str_eq(env_get("OMP_NUM_THREADS"), "8"); /* an -e wins over --cpus */
    cr_expect_str_eq(env_get("PYTHONUNBUFFERED"), "");
    cr_expect_str_eq(env_get("FOO"), "2");
    cr_expect_eq(env_count(), 8); /* 4 base + 3 thread counts + FOO */
    cr_expect_str_eq(sb.envp[7], "FOO=2");
}

Test(plan, env_invalid_entry_is_refused)
{
    static const char *const bad[] = {"FOO", "=x", ""};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *const env[] = {(char *)bad[i], NULL};
        plan_free(&sb);
        setup();
        config.env = env;
        cr_expect_eq(plan_env(&sb, &result), -EINVAL, "%s", bad[i]);
        cr_expect_eq(result.status, NSBOX_STATUS_ERROR);
        cr_expect_eq(result.exit_code, 125);
        cr_expect_str_eq(result.error_step, "environment");
        cr_expect_not_null(strstr(result.error, bad[i]));
    }
}

Test(plan, env_inherit_skips_what_is_not_key_value)
{
    cr_assert_eq(setenv("NSBOX_TEST_PLAN", "kept", 1), 0);
    cr_assert_eq(setenv("HOME", "/root-of-the-caller", 1), 0);
    config.env_inherit = true;
    cr_assert_eq(plan_env(&sb, &result), 0);
    cr_expect_str_eq(env_get("NSBOX_TEST_PLAN"), "kept");
    cr_expect_str_eq(env_get("HOME"), "/tmp"); /* the base comes after the inherited */
}

Test(plan, env_proxy_with_network_allow)
{
    char *const allow[] = {"example.org", NULL};

    config.network_allow = allow;
    cr_assert_eq(plan_env(&sb, &result), 0);
    cr_expect_not_null(env_get("HTTPS_PROXY"));
    cr_expect_str_eq(env_get("https_proxy"), env_get("HTTPS_PROXY"));
    cr_expect_str_eq(env_get("NO_PROXY"), "");
}

static struct nsbox_tmpfs tmpfs(const char *target)
{
    return (struct nsbox_tmpfs){.target = target, .size = 1 << 20, .mode = 0755};
}

Test(plan, mounts_add_tmp)
{
    cr_assert_eq(plan_mounts(&sb, &result), 0);
    cr_assert_eq(sb.n_mounts, 1);
    cr_expect_str_eq(sb.mounts[0].target, "/tmp");
    cr_expect(sb.mounts[0].is_tmpfs);
    cr_expect_eq(sb.mounts[0].size, config.tmp_size);
    cr_expect_eq(sb.mounts[0].mode, 01777);
}

Test(plan, mounts_given_tmp_is_not_doubled)
{
    struct nsbox_tmpfs t[] = {tmpfs("/tmp")};

    config.tmpfs = t;
    config.n_tmpfs = 1;
    cr_assert_eq(plan_mounts(&sb, &result), 0);
    cr_assert_eq(sb.n_mounts, 1);
    cr_expect_eq(sb.mounts[0].mode, 0755);
}

Test(plan, mounts_are_sorted_parents_first_and_stable)
{
    struct nsbox_tmpfs t[] = {tmpfs("/a/b/c"), tmpfs("/x/y"), tmpfs("/a"), tmpfs("/a/b"),
                              tmpfs("/z")};
    static const char *const want[] = {"/a", "/z", "/tmp", "/x/y", "/a/b", "/a/b/c"};

    config.tmpfs = t;
    config.n_tmpfs = 5;
    cr_assert_eq(plan_mounts(&sb, &result), 0);
    cr_assert_eq(sb.n_mounts, 6);
    for (size_t i = 0; i < 6; i++)
        cr_expect_str_eq(sb.mounts[i].target, want[i], "mount %zu", i);
}

Test(plan, mounts_bind_source_resolved)
{
    struct nsbox_bind b[] = {{.source = "/", .target = "/host", .writable = true}};

    config.binds = b;
    config.n_binds = 1;
    cr_assert_eq(plan_mounts(&sb, &result), 0);
    cr_assert_eq(sb.n_mounts, 2);
    cr_expect_str_eq(sb.mounts[0].source, "/");
    cr_expect(sb.mounts[0].writable);
    cr_expect_not(sb.mounts[0].is_tmpfs);
    cr_expect_eq(sb.mounts[0].tree_fd, -EBADF);
}

Test(plan, mounts_refused)
{
    static const struct {
        const char *target;
        uint64_t size;
        bool code;
        const char *step, *says;
    } bad[] = {
        {"relative", 1, false, "mounts", "absolute path"},
        {"/a/../proc", 1, false, "mounts", "absolute path"},
        {"/a/./b", 1, false, "mounts", "absolute path"},
        {"/proc", 1, false, "mounts", "/proc and /dev"},
        {"/dev/shm", 1, false, "mounts", "/proc and /dev"},
        {"/work", 1, true, "mounts", "/work/main.py"},
        {"/data", 0, false, "tmpfs", "size 0"},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct nsbox_tmpfs t[] = {{.target = bad[i].target, .size = bad[i].size}};
        plan_free(&sb);
        nsbox_result_free(&result);
        setup();
        config.tmpfs = t;
        config.n_tmpfs = 1;
        config.code = bad[i].code ? "print(1)" : NULL;
        cr_expect_eq(plan_mounts(&sb, &result), -EINVAL, "%s", bad[i].target);
        cr_expect_str_eq(result.error_step, bad[i].step, "%s", bad[i].target);
        cr_expect_not_null(strstr(result.error, bad[i].says), "%s: %s", bad[i].target,
                           result.error);
    }
}

Test(plan, mounts_code_allows_work_below_main)
{
    struct nsbox_tmpfs t[] = {tmpfs("/work/data")};

    config.tmpfs = t;
    config.n_tmpfs = 1;
    config.code = "print(1)";
    cr_expect_eq(plan_mounts(&sb, &result), 0);
}

Test(plan, mounts_two_on_one_target)
{
    struct nsbox_tmpfs t[] = {tmpfs("/data")};
    struct nsbox_bind b[] = {{.source = "/", .target = "/data"}};

    config.tmpfs = t;
    config.n_tmpfs = 1;
    config.binds = b;
    config.n_binds = 1;
    cr_expect_eq(plan_mounts(&sb, &result), -EINVAL);
    cr_expect_not_null(strstr(result.error, "two mounts on '/data'"));
}

Test(plan, mounts_relative_bind_source)
{
    struct nsbox_bind b[] = {{.source = "etc", .target = "/etc2"}};

    config.binds = b;
    config.n_binds = 1;
    cr_expect_eq(plan_mounts(&sb, &result), -EINVAL);
    cr_expect_str_eq(result.error_step, "bind");
}

Test(plan, identity_name_and_labels)
{
    char *const labels[] = {"team=ml", "job=42", NULL};

    config.name = "run-1";
    config.labels = labels;
    cr_assert_eq(plan_identity(&config, &result), 0);
    cr_expect_str_eq(result.name, "run-1");
    cr_assert_not_null(result.labels);
    cr_expect_str_eq(result.labels[0], "team=ml");
    cr_expect_str_eq(result.labels[1], "job=42");
    cr_expect_null(result.labels[2]);
}

Test(plan, identity_refused)
{
    char *const labels[] = {"ok=1", "=nokey", NULL};

    config.name = "-bad";
    cr_expect_eq(plan_identity(&config, &result), -EINVAL);
    cr_expect_str_eq(result.error_step, "config");
    cr_expect_not_null(strstr(result.error, "invalid name '-bad'"));

    config.name = NULL;
    config.labels = labels;
    cr_expect_eq(plan_identity(&config, &result), -EINVAL);
    cr_expect_not_null(strstr(result.error, "invalid label '=nokey'"));
}

static void count_warning(const char *message, void *userdata)
{
    (void)message;
    (*(int *)userdata)++;
}

Test(plan, every_opt_out_is_a_warning)
{
    int calls = 0;

    plan_opt_out_warnings(&config, &result);
    cr_expect_str_eq(result.warnings, "");
    config.warn = count_warning;
    config.warn_userdata = &calls;
    config.seccomp_disabled = config.network_host = config.pid_host = config.ipc_host = true;
    config.env_inherit = config.keep_fds = true;
    plan_opt_out_warnings(&config, &result);
    cr_expect_eq(calls, 6);
    for (const char *w = "--no-seccomp\0--network host\0--pid host\0--ipc host\0--env-inherit\0"
                         "--keep-fds\0";
         *w; w += strlen(w) + 1)
        cr_expect_not_null(strstr(result.warnings, w), "%s", w);
}

Test(report, setup_failure_is_worded)
{
    struct report rep = {.type = REPORT_SETUP_FAILED};
    struct nsbox_result r = {0};

    cr_expect_eq(report_step_failed(&rep.step, -EPERM, "pivot_root", NULL), -EPERM);
    report_to_result(&rep, &r);
    cr_expect_eq(r.status, NSBOX_STATUS_ERROR);
    cr_expect_eq(r.exit_code, 125);
    cr_expect_eq(r.error_errno, EPERM);
    cr_expect_str_eq(r.error_step, "pivot_root");
    cr_expect_str_eq(r.error, "sandbox setup failed at pivot_root: Operation not permitted");

    (void)report_step_failed(&rep.step, 0, "init", "exited with %d", 3);
    report_to_result(&rep, &r);
    cr_expect_str_eq(r.error, "sandbox setup failed at init: failed (exited with 3)");
}

Test(report, exec_failure_is_worded)
{
    struct report rep = {.type = REPORT_EXEC_FAILED, .code = 127};
    struct nsbox_result r = {0};

    (void)report_step_failed(&rep.step, -ENOENT, "execve", "nope: not found in the sandbox");
    report_to_result(&rep, &r);
    cr_expect_eq(r.exit_code, 127);
    cr_expect_str_eq(r.error, "nope: not found in the sandbox");

    rep.code = 126;
    (void)report_step_failed(&rep.step, -EACCES, "execve", "%s", "/work/x");
    report_to_result(&rep, &r);
    cr_expect_eq(r.exit_code, 126);
    cr_expect_str_eq(r.error, "/work/x: Permission denied");
}

Test(report, supervisor_error_keeps_its_errno_for_percent_m)
{
    struct nsbox_result r = {0};

    cr_expect_eq(report_error(&r, -ENOENT, "rootfs", "rootfs '%s': %m", "/x"), -ENOENT);
    cr_expect_str_eq(r.error, "rootfs '/x': No such file or directory");
    cr_expect_eq(r.error_errno, ENOENT);
    cr_expect_eq(r.exit_code, 125);
}

Test(plan, a_cell_needs_code_and_a_bounded_outputs_limit)
{
    static char *const args[] = {"python3", NULL};

    config.cell = true;
    config.argv = args;
    cr_expect_eq(plan_sandbox(&config, &sb, &result), -EINVAL);
    cr_expect_not_null(strstr(result.error, "--cell runs Python code: give --code"), "%s",
                       result.error);
    plan_free(&sb);
    nsbox_result_free(&result);
    memset(&result, 0, sizeof(result));
    config.code = "1";
    config.code_size = 1;
    config.outputs_limit = 2ULL << 30;
    cr_expect_eq(plan_sandbox(&config, &sb, &result), -EINVAL);
    cr_expect_not_null(strstr(result.error, "--outputs-limit must be at most 1 GiB"));
    plan_free(&sb);
    nsbox_result_free(&result);
    memset(&result, 0, sizeof(result));
    config.outputs_limit = 0;
    config.keep_fds = true;
    cr_expect_eq(plan_sandbox(&config, &sb, &result), -EINVAL);
    cr_expect_not_null(strstr(result.error, "--cell and --keep-fds exclude each other"));
}
