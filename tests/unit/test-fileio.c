/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* path_open_nofollow(): the walk that -v sources and the audit log's directories go through. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"

static char top[] = "/tmp/nsbox-test-fileio-XXXXXX";

/* top/a/b (directories), top/l -> a (a link of the caller's), top/abs -> top/a. */
static void setup(void)
{
    char path[PATH_MAX];

    cr_assert_not_null(mkdtemp(top));
    (void)snprintf(path, sizeof(path), "%s/a", top);
    cr_assert_eq(mkdir(path, 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/a/b", top);
    cr_assert_eq(mkdir(path, 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/l", top);
    cr_assert_eq(symlink("a", path), 0);
}

static void teardown(void)
{
    char cmd[PATH_MAX + 16];
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    (void)!system(cmd);
}

static int walk(const char *rel, bool follow, char *walked)
{
    char path[PATH_MAX];
    int fd;

    (void)snprintf(path, sizeof(path), "%s%s", top, rel);
    fd = path_open_nofollow(path, follow, walked, PATH_MAX);
    if (fd >= 0)
        (void)close(fd);
    return fd < 0 ? fd : 0;
}

Test(fileio, walks_without_symlinks, .init = setup, .fini = teardown)
{
    char walked[PATH_MAX], want[PATH_MAX];

    cr_expect_eq(walk("/a/b", false, walked), 0);
    (void)snprintf(want, sizeof(want), "%s/a/b", top);
    cr_expect_str_eq(walked, want);
    cr_expect_eq(walk("//a/./b/../b/", false, walked), 0);
    cr_expect_str_eq(walked, want);
    cr_expect_eq(walk("/a/nothing", false, walked), -ENOENT);
    cr_expect_eq(path_open_nofollow("relative", false, walked, sizeof(walked)), -EINVAL);
    cr_expect_eq(path_open_nofollow("/", false, walked, sizeof(walked)) >= 0, true);
    cr_expect_str_eq(walked, "/");
}

Test(fileio, refuses_symlinks, .init = setup, .fini = teardown)
{
    char walked[PATH_MAX], want[PATH_MAX];

    (void)snprintf(want, sizeof(want), "%s/l", top);
    cr_expect_eq(walk("/l/b", false, walked), -ELOOP);
    cr_expect_str_eq(walked, want);
    cr_expect_eq(walk("/l", false, walked), -ELOOP);
    cr_expect_str_eq(walked, want);
}

Test(fileio, follows_only_roots_links_in_roots_directories, .init = setup, .fini = teardown)
{
    char walked[PATH_MAX], want[PATH_MAX];

    /* mkdtemp's directory is the caller's, 0700. */
    (void)snprintf(want, sizeof(want), "%s/a/b", top);
    if (geteuid() == 0) {
        cr_expect_eq(walk("/l/b", true, walked), 0);
        cr_expect_str_eq(walked, want);
        /* A directory others may write: its links could be anybody's doing. */
        cr_assert_eq(chmod(top, 0775), 0);
    }
    cr_expect_eq(walk("/l/b", true, walked), -ELOOP);
}

Test(fileio, trailing_slash_means_directory, .init = setup, .fini = teardown)
{
    char walked[PATH_MAX], path[PATH_MAX];
    int fd;

    (void)snprintf(path, sizeof(path), "%s/f", top);
    fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    (void)close(fd);
    cr_expect_eq(walk("/f", false, walked), 0);
    cr_expect_eq(walk("/f/", false, walked), -ENOTDIR);
}

Test(hex, encodes_lowercase_with_a_nul)
{
    static const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
    char out[2 * sizeof(bytes) + 1];

    memset(out, 'x', sizeof(out));
    hex_encode(bytes, sizeof(bytes), out);
    cr_expect_str_eq(out, "000fa5ff");
    hex_encode(bytes, 0, out);
    cr_expect_str_eq(out, "");
}

/* A command name may hold spaces and parentheses: the fields start after the last ')'. */
Test(proc_stat, fields_after_a_tricky_command_name)
{
    char path[] = "/tmp/nsbox-test-stat-XXXXXX";
    static const char line[] = "42 (a) b) (c) S 1 42 42 0 -1 4194560 99 0 0 0 7 3 0 0 20 0 1 0 "
                               "123456 1000\n";
    char buf[256];
    const char *state = NULL, *p;
    int fd = mkstemp(path);

    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
    (void)close(fd);
    cr_assert_eq(proc_stat_read(AT_FDCWD, path, buf, sizeof(buf), &state), 0);
    cr_expect_eq(state[0], 'S');
    p = proc_stat_field(state, 3);
    cr_expect_eq(p, state);
    p = proc_stat_field(state, 4);
    cr_expect_eq(strtol(p, NULL, 10), 1);
    p = proc_stat_field(state, 22);
    cr_assert_not_null(p);
    cr_expect_eq(strtoull(p, NULL, 10), 123456);
    cr_expect_null(proc_stat_field(state, 40));
    (void)unlink(path);
}

Test(proc_stat, own_start_time_and_missing_process)
{
    char buf[1024];
    const char *state = NULL;

    cr_expect_eq(proc_stat_read(AT_FDCWD, "/proc/self/stat", buf, sizeof(buf), &state), 0);
    cr_expect(strchr("RS", state[0]) != NULL);
    cr_expect_gt(process_start_time(getpid()), 0);
    cr_expect_eq(proc_stat_read(AT_FDCWD, "/proc/0/stat", buf, sizeof(buf), &state), -ENOENT);
    cr_expect_eq(process_start_time(0), 0);
}

/* The pace of refused system calls and of the proxy's work: a burst, then one an interval. */
Test(pace, burst_then_interval)
{
    uint64_t at = 0, now = 1000000000;
    size_t taken = 0, paced = 0;

    /* At one instant: the burst (and the one due now), then nothing until later. */
    while (now >= at) {
        paced += pace_take(&at, now, 10, 1000);
        taken++;
    }
    cr_expect_eq(taken, 11);
    cr_expect_eq(paced, 1);
    cr_expect_eq(at, now + 1000);
    /* Busy: one an interval, each paced. */
    now = at;
    cr_expect(pace_take(&at, now, 10, 1000));
    cr_expect_eq(at, now + 1000);
    /* A quiet spell earns the burst back, never more. */
    now += 1000000;
    taken = paced = 0;
    while (now >= at) {
        paced += pace_take(&at, now, 10, 1000);
        taken++;
    }
    cr_expect_eq(taken, 11);
    cr_expect_eq(paced, 1);
}

Test(proc_status, masks)
{
    const char *status = "Name:\tnsbox\nUmask:\t0000\nSigIgn:\t0000000000001000\n"
                         "SigCgt:\t0000000180014002\nCapInh:\t0000000000000000\n"
                         "CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\nBad:\tzz\n"
                         "Long:\t10000000000000000\nLast:\tFFFFFFFFFFFFFFFF";
    uint64_t m = 7;

    cr_expect_eq(proc_status_mask(status, "SigIgn", &m), 0);
    cr_expect_eq(m, 1ULL << (SIGPIPE - 1)); /* signal n is bit n-1 */
    cr_expect_eq(proc_status_mask(status, "SigCgt", &m), 0);
    cr_expect_eq(m, 0x180014002ULL);
    cr_expect_eq(proc_status_mask(status, "CapBnd", &m), 0);
    cr_expect_eq(m, 0x1ffffffffffULL);
    cr_expect_eq(proc_status_mask(status, "CapInh", &m), 0);
    cr_expect_eq(m, 0);
    cr_expect_eq(proc_status_mask(status, "Last", &m), 0); /* last line, no newline */
    cr_expect_eq(m, UINT64_MAX);
    cr_expect_eq(proc_status_mask(status, "CapEff", &m), -ENOENT);
    cr_expect_eq(proc_status_mask(status, "Cap", &m), -ENOENT); /* a prefix is not a key */
    cr_expect_eq(proc_status_mask(status, "Name", &m), -EINVAL);
    cr_expect_eq(proc_status_mask(status, "Bad", &m), -EINVAL);
    cr_expect_eq(proc_status_mask(status, "Long", &m), -EINVAL); /* more than 64 bits */
    cr_expect_eq(proc_status_mask("", "SigIgn", &m), -ENOENT);
}

Test(path, at_or_below_by_components)
{
    cr_expect(path_is_at_or_below("/a/b", "/a/b"));
    cr_expect(path_is_at_or_below("/a/b/c", "/a/b"));
    cr_expect(!path_is_at_or_below("/a/bc", "/a/b"));
    cr_expect(!path_is_at_or_below("/a", "/a/b"));
    /* Everything is below "/" (landlock.c splits its execute right by it). */
    cr_expect(path_is_at_or_below("/proc", "/"));
    cr_expect(path_is_at_or_below("/", "/"));
    cr_expect(!path_is_at_or_below("proc", "/"));
}
