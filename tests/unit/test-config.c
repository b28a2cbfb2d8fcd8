/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The library's own checks of a config (config-check.c), through nsbox_run() as any caller
 * makes it: a value out of range is refused with -EINVAL and the result's error_step "config"
 * before anything is made; and the allowlist file's format (nsbox_network_allow_file()). */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nsbox.h"

static struct nsbox_config config;
static struct nsbox_result result;
static char *const true_argv[] = {"/bin/true", NULL};

static void setup(void)
{
    nsbox_config_init(&config);
    config.argv = true_argv;
    memset(&result, 0, sizeof(result));
}

static void teardown(void)
{
    nsbox_result_free(&result);
}

TestSuite(config, .init = setup, .fini = teardown);

static void expect_refused(const char *contains)
{
    cr_assert_eq(nsbox_run(&config, &result), -EINVAL);
    cr_assert_eq(result.status, NSBOX_STATUS_ERROR);
    cr_assert_str_eq(result.error_step, "config");
    cr_assert(result.error_config);
    cr_assert_eq(result.error_errno, EINVAL);
    cr_assert(strstr(result.error, contains), "error: %s", result.error);
    cr_assert_eq(nsbox_exit_status(&result), 125);
}

Test(config, memory_below_the_floor_is_refused_by_nsbox_run)
{
    config.memory = (6ULL << 20) - 1;
    expect_refused("at least 6m");
}

Test(config, memory_of_one_mib_is_refused_by_nsbox_run)
{
    config.memory = 1ULL << 20;
    expect_refused("--memory must be at least 6m");
}

Test(config, more_cpus_than_usable_are_refused_by_nsbox_run)
{
    cpu_set_t set;
    char want[64];

    cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    config.cpus_milli = 1000ULL * (unsigned)CPU_COUNT(&set) + 500;
    (void)snprintf(want, sizeof(want), "at most %d", CPU_COUNT(&set));
    expect_refused(want);
}

Test(config, a_bad_allow_pattern_is_refused_by_nsbox_run)
{
    char *const allow[] = {"pypi.org,not/valid", NULL};

    config.network_allow = allow;
    cr_assert_eq(nsbox_run(&config, &result), -EINVAL);
    cr_assert_str_eq(result.error_step, "config");
}

/* A failure that is not the config's: reported in the result, nsbox_run() returns 0. */
Test(config, a_missing_rootfs_is_no_config_error)
{
    config.rootfs = "/nonexistent/nsbox-rootfs";
    cr_assert_eq(nsbox_run(&config, &result), 0);
    cr_assert_eq(result.status, NSBOX_STATUS_ERROR);
    cr_assert_not(result.error_config, "step %s: %s", result.error_step, result.error);
}

static char path[64];

static void write_file(const char *text)
{
    int fd;

    (void)snprintf(path, sizeof(path), "/tmp/nsbox-test-allow.XXXXXX");
    fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    (void)close(fd);
}

Test(config, allow_file_patterns_become_one_list)
{
    char *patterns = NULL;
    unsigned line = 99;

    write_file("# the index\npypi.org files.pythonhosted.org\n\n*.example.com:8443 # a port\r\n"
               "[2001:db8::1]\n");
    cr_assert_eq(nsbox_network_allow_file(path, &patterns, &line), 0);
    (void)unlink(path);
    cr_assert_str_eq(patterns, "pypi.org,files.pythonhosted.org,*.example.com:8443,[2001:db8::1]");
    free(patterns);
}

Test(config, allow_file_bad_line_is_named)
{
    char *patterns = NULL;
    unsigned line = 0;

    write_file("# the index\npypi.org files.pythonhosted.org\n\nnot/valid\n");
    cr_assert_eq(nsbox_network_allow_file(path, &patterns, &line), -EBADMSG);
    (void)unlink(path);
    cr_assert_eq(line, 4);
    cr_assert_null(patterns);
}

Test(config, allow_file_without_patterns_is_refused)
{
    char *patterns = NULL;
    unsigned line = 99;

    write_file("# nothing\n\n   \n");
    cr_assert_eq(nsbox_network_allow_file(path, &patterns, &line), -EBADMSG);
    (void)unlink(path);
    cr_assert_eq(line, 0);
}

Test(config, allow_file_not_regular_or_missing)
{
    char *patterns = NULL;
    unsigned line;

    cr_assert_eq(nsbox_network_allow_file("/tmp", &patterns, &line), -EINVAL);
    cr_assert_eq(nsbox_network_allow_file("/nonexistent/allow", &patterns, &line), -ENOENT);
}
