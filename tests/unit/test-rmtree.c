/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rmtree_below(): the self-test's removal of trees the sandbox's host uid could write. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rmtree.h"

static char top[] = "/tmp/nsbox-test-rmtree-XXXXXX";
static char outside[] = "/tmp/nsbox-test-rmtree-out-XXXXXX";

static void setup(void)
{
    cr_assert_not_null(mkdtemp(top));
    cr_assert_not_null(mkdtemp(outside));
}

static void teardown(void)
{
    char cmd[2 * PATH_MAX];
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", top, outside);
    (void)!system(cmd);
}

static int entries(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    int n = 0;
    cr_assert_not_null(d, "%s: %s", path, strerror(errno));
    while ((de = readdir(d)))
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    (void)closedir(d);
    return n;
}

static void touch_at(int dir, const char *name)
{
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0, "%s: %s", name, strerror(errno));
    (void)close(fd);
}

/* 300 levels, each with a file, a link and the next level: deeper than the 128 descriptors the
 * walk keeps open, with a descriptor limit that would not fit one per level. */
Test(rmtree, removes_a_tree_deeper_than_its_descriptors, .init = setup, .fini = teardown)
{
    struct rlimit old, low = {.rlim_cur = 200, .rlim_max = 0};
    int fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC), dir = fd;

    cr_assert_geq(fd, 0);
    for (int i = 0; i < 300; i++) {
        int next;
        touch_at(dir, "file");
        cr_assert_eq(symlinkat("/nonexistent", dir, "link"), 0);
        cr_assert_eq(mkdirat(dir, "d", 0755), 0);
        next = openat(dir, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(next, 0);
        if (dir != fd)
            (void)close(dir);
        dir = next;
    }
    (void)close(dir);
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    low.rlim_max = old.rlim_max;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    cr_assert_eq(rmtree_below(fd), 0);
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    cr_assert_eq(entries(top), 0);
    (void)close(fd);
}

/* A link to a directory outside is removed, never followed: what it points at stays whole. */
Test(rmtree, never_follows_a_symlink, .init = setup, .fini = teardown)
{
    char path[PATH_MAX];
    int out = open(outside, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    cr_assert_geq(out, 0);
    cr_assert_geq(fd, 0);
    touch_at(out, "precious");
    cr_assert_eq(mkdirat(out, "sub", 0755), 0);
    cr_assert_eq(mkdirat(fd, "a", 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/a/to-outside", top);
    cr_assert_eq(symlink(outside, path), 0);
    (void)snprintf(path, sizeof(path), "%s/to-outside", top);
    cr_assert_eq(symlink(outside, path), 0);
    cr_assert_eq(rmtree_below(fd), 0);
    cr_assert_eq(entries(top), 0);
    cr_assert_eq(entries(outside), 2);
    cr_assert_eq(faccessat(out, "precious", F_OK, 0), 0);
    (void)close(out);
    (void)close(fd);
}

/* The walk of the test below, as the caller (not root). Returns 0 when it went as it should,
 * else which check failed (1-5), with a line on stderr. */
static int stuck_walk(void)
{
    struct timespec t0, t1;
    int fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ro = -1, r, bad = 0;

    if (fd < 0 || mkdirat(fd, "ro", 0755) < 0 ||
        (ro = openat(fd, "ro", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return 1;
    touch_at(ro, "kept");
    if (mkdirat(ro, "sub", 0755) < 0 || fchmod(ro, 0555) < 0)
        return 2;
    (void)clock_gettime(CLOCK_MONOTONIC, &t0);
    r = rmtree_below(fd);
    (void)clock_gettime(CLOCK_MONOTONIC, &t1);
    (void)fchmod(ro, 0755);
    if (r != -EACCES)
        bad = 3;
    else if (t1.tv_sec - t0.tv_sec >= 2)
        bad = 4;
    else if (faccessat(ro, "kept", F_OK, 0) < 0 || faccessat(ro, "sub", F_OK, 0) < 0)
        bad = 5;
    if (bad)
        (void)fprintf(stderr, "rmtree_below: %s after %ld s (check %d)\n", strerror(-r),
                      (long)(t1.tv_sec - t0.tv_sec), bad);
    (void)close(ro);
    (void)close(fd);
    return bad;
}

/* An entry the caller may not remove (a file in a directory it made read-only) ends the walk
 * with the error, and at once: the directory is not entered again and again until the step
 * budget (four million steps) runs out. Root may remove it, so root runs the walk as nobody. */
Test(rmtree, stops_at_what_it_cannot_remove, .init = setup, .fini = teardown)
{
    int status;
    pid_t pid;

    if (geteuid() != 0) {
        cr_assert_eq(stuck_walk(), 0);
        return;
    }
    cr_assert_eq(chown(top, 65534, 65534), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
            setresuid(65534, 65534, 65534) < 0)
            _exit(9);
        _exit(stuck_walk());
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the walk as uid 65534: %#x", status);
}
