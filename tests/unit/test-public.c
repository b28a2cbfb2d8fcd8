/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The public checks and probes the nsbox command reaches the library through (src/lib/public.c):
 * each gives a C caller what the command gets, through include/nsbox.h alone. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nsbox.h"

static char *const true_argv[] = {"/bin/true", NULL};

Test(public, config_check_refuses_memory_below_floor)
{
    struct nsbox_config c;
    struct nsbox_result r = {0};

    nsbox_config_init(&c);
    c.argv = true_argv;
    cr_assert_eq(nsbox_config_check(&c, &r), 0);
    c.memory = NSBOX_MEMORY_MIN - 1;
    cr_assert_eq(nsbox_config_check(&c, &r), -EINVAL);
    cr_assert_str_eq(r.error_step, "config");
    cr_assert(strstr(r.error, "--memory"), "error: %s", r.error);
    c.memory = NSBOX_MEMORY_MIN;
    memset(&r, 0, sizeof(r));
    cr_assert_eq(nsbox_config_check(&c, &r), 0);
}

Test(public, network_allow_check)
{
    cr_assert_eq(nsbox_network_allow_check("pypi.org,*.example.com:443,10.0.0.1,[::1]:80"), 0);
    cr_assert_eq(nsbox_network_allow_check("pypi.org,"), -EINVAL);
    cr_assert_eq(nsbox_network_allow_check("a b"), -EINVAL);
    cr_assert_eq(nsbox_network_allow_check("host:99999"), -EINVAL);
}

Test(public, signal_set)
{
    sigset_t set;

    nsbox_signal_set(&set);
    cr_assert(sigismember(&set, SIGTERM) && sigismember(&set, SIGINT));
    cr_assert(sigismember(&set, SIGHUP) && sigismember(&set, SIGUSR1));
    cr_assert(!sigismember(&set, SIGPIPE) && !sigismember(&set, SIGSEGV));
    cr_assert(!sigismember(&set, SIGKILL) && !sigismember(&set, SIGCHLD));
}

/* A writable bind's source is found by device and inode, a read-only one never is. */
Test(public, config_writable_bind)
{
    char rw[] = "/tmp/nsbox-test-public-XXXXXX", ro[] = "/tmp/nsbox-test-public-XXXXXX";
    char below[sizeof(rw) + 8];
    struct nsbox_bind binds[2];
    struct nsbox_config c;
    struct stat ids[2];

    cr_assert(mkdtemp(rw) && mkdtemp(ro));
    (void)snprintf(below, sizeof(below), "%s/sub", rw);
    cr_assert_eq(mkdir(below, 0700), 0);
    nsbox_config_init(&c);
    binds[0] = (struct nsbox_bind){.source = ro, .target = "/mnt/ro", .writable = false};
    binds[1] = (struct nsbox_bind){.source = rw, .target = "/mnt/rw", .writable = true};
    c.binds = binds;
    c.n_binds = 2;
    cr_assert_eq(stat(below, &ids[0]), 0);
    cr_assert_eq(stat(rw, &ids[1]), 0);
    cr_assert_eq(nsbox_config_writable_bind(&c, ids, 1), -ENOENT); /* "sub" is no bind's source */
    cr_assert_eq(nsbox_config_writable_bind(&c, ids, 2), 1);       /* the one above it is */
    cr_assert_eq(stat(ro, &ids[0]), 0);
    cr_assert_eq(nsbox_config_writable_bind(&c, ids, 1), -ENOENT); /* read-only */
    c.n_binds = 0;
    cr_assert_eq(nsbox_config_writable_bind(&c, ids + 1, 1), -ENOENT);
    cr_assert_eq(rmdir(below), 0);
    cr_assert_eq(rmdir(rw), 0);
    cr_assert_eq(rmdir(ro), 0);
}

static void count_warning(const char *file, unsigned line, const char *message, void *userdata)
{
    (void)file;
    (void)line;
    (void)message;
    (*(unsigned *)userdata)++;
}

Test(public, policy_check_and_dump)
{
    char path[] = "/tmp/nsbox-test-public-XXXXXX", error[512] = "";
    struct nsbox_policy_stats stats;
    unsigned warnings = 0;
    int fd;

    cr_assert_eq(nsbox_policy_check(NULL, count_warning, &warnings, &stats, error, sizeof(error)),
                 0, "%s", error);
    cr_assert(stats.rules > 0 && stats.filters > 0 && stats.instructions > stats.filters);

    fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert(write(fd, "read\nread write\n", 16) == 16);
    cr_assert_eq(close(fd), 0);
    cr_assert_eq(nsbox_policy_check(path, NULL, NULL, &stats, error, sizeof(error)), -EINVAL);
    cr_assert(strstr(error, path) && strstr(error, ":2:"), "error: %s", error);

    fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    cr_assert(fd >= 0);
    cr_assert_eq(nsbox_policy_dump(NULL, fd, error, sizeof(error)), 0, "%s", error);
    cr_assert_eq(nsbox_policy_dump(path, fd, error, sizeof(error)), -EINVAL);
    (void)close(fd);
    cr_assert_eq(unlink(path), 0);
}
