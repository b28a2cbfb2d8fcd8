/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The files a payload wrote in /work (written.h), on a directory below /tmp. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "written.h"

static char top[] = "/tmp/nsbox-written-XXXXXX";
static int top_fd = -1;

static void setup(void)
{
    cr_assert_not_null(mkdtemp(top));
    top_fd = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC);
    cr_assert_geq(top_fd, 0);
}

static void teardown(void)
{
    char cmd[128];
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    if (system(cmd) != 0)
        cr_log_warn("cannot remove %s", top);
    (void)close(top_fd);
}

static void put(const char *name, const char *text)
{
    int fd = openat(top_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0, "%s", name);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    (void)close(fd);
}

/* written_report() into a pipe, read back into a result. */
static void report(const struct written_snapshot *before, struct nsbox_result *ret)
{
    int p[2];
    struct report rep;

    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    /* Room for every report: nobody reads while they are written. */
    cr_assert_geq(fcntl(p[1], F_SETPIPE_SZ, 1 << 20), 0);
    written_report(top_fd, before, p[1]);
    (void)close(p[1]);
    while (read(p[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep)) {
        cr_assert_eq(rep.type, REPORT_WRITTEN);
        written_add(ret, &rep);
    }
    (void)close(p[0]);
}

TestSuite(written, .init = setup, .fini = teardown);

Test(written, new_and_changed_files_with_their_sha256)
{
    struct written_snapshot before;
    struct nsbox_result ret = {0};

    put("same.txt", "unchanged");
    put("changed.txt", "x");
    cr_assert_eq(mkdirat(top_fd, "sub", 0755), 0);
    cr_assert_eq(written_snapshot_take(top_fd, &before), 0);
    cr_expect_eq(before.n, 2);
    put("changed.txt", "xy");
    put("sub/new.txt", "hello");
    cr_assert_eq(symlinkat("/etc/passwd", top_fd, "link"), 0);
    cr_assert_eq(mkfifoat(top_fd, "fifo", 0644), 0);
    report(&before, &ret);
    cr_assert(ret.written_known);
    cr_assert_eq(ret.n_written, 2, "listed %zu", ret.n_written);
    cr_expect_str_eq(ret.written[0].path, "/work/changed.txt");
    cr_expect_eq(ret.written[0].size, 2);
    cr_expect_str_eq(ret.written[1].path, "/work/sub/new.txt");
    /* sha256("hello") */
    cr_expect_str_eq(ret.written[1].sha256,
                     "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    cr_expect_eq(ret.written_more, 0);
    cr_expect_not(ret.written_partial);
    for (size_t i = 0; i < ret.n_written; i++)
        free(ret.written[i].path);
    free(ret.written);
    written_snapshot_free(&before);
}

Test(written, at_most_the_listed_many)
{
    struct written_snapshot before;
    struct nsbox_result ret = {0};
    char name[32];

    cr_assert_eq(written_snapshot_take(top_fd, &before), 0);
    for (int i = 0; i < NSBOX_WRITTEN_MAX + 5; i++) {
        (void)snprintf(name, sizeof(name), "f%03d", i);
        put(name, "");
    }
    report(&before, &ret);
    cr_expect_eq(ret.n_written, NSBOX_WRITTEN_MAX);
    cr_expect_eq(ret.written_more, 5);
    for (size_t i = 0; i < ret.n_written; i++)
        free(ret.written[i].path);
    free(ret.written);
    written_snapshot_free(&before);
}

Test(written, nothing_without_a_snapshot_before)
{
    struct written_snapshot none = {0};
    struct nsbox_result ret = {0};

    put("a", "b");
    report(&none, &ret);
    cr_expect_not(ret.written_known);
    cr_expect_eq(ret.n_written, 0);
}
