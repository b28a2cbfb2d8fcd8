/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host side of copy-out (copy.h): copy_unpack() checks the caps again, directories
 * included, whatever the packer inside the sandbox did; a skipped entry keeps its kind; and
 * copy_in_open(). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy.h"

static char src[] = "/tmp/nsbox-test-copy-src-XXXXXX", dst[] = "/tmp/nsbox-test-copy-dst-XXXXXX";

static void setup(void)
{
    cr_assert(mkdtemp(src) && mkdtemp(dst));
}

static void teardown(void)
{
    char cmd[256];
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", src, dst);
    (void)!system(cmd);
}

static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    size_t n = 0;

    cr_assert(d);
    while ((de = readdir(d)))
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* A stream of 50 empty directories, packed with room for them (as a packer that does not count
 * them would write it), then unpacked under --copy-out-max-files 10 and 100. */
Test(copy, unpack_counts_directories_against_max_files, .init = setup, .fini = teardown)
{
    struct copy_packer *p = NULL;
    char why[512] = "", path[512];
    int stream = memfd_create("stream", MFD_CLOEXEC), srcfd, dstfd;
    const char *root = "";

    for (int i = 0; i < 50; i++) {
        (void)snprintf(path, sizeof(path), "%s/d%d", src, i);
        cr_assert_eq(mkdir(path, 0755), 0);
    }
    srcfd = open(src, O_PATH | O_DIRECTORY | O_CLOEXEC);
    cr_assert(stream >= 0 && srcfd >= 0);
    cr_assert_eq(copy_packer_new(stream, &(struct copy_caps){.max_files = 1000}, &p, why,
                                 sizeof(why)),
                 0, "%s", why);
    cr_assert_eq(copy_pack(p, &(struct copy_source){.src_fd = srcfd, .prefix = "", .shown = src},
                           false, why, sizeof(why)),
                 0, "%s", why);
    cr_assert_eq(copy_packer_finish(p, NULL, why, sizeof(why)), 0, "%s", why);

    dstfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cr_assert(dstfd >= 0);
    cr_expect_eq(copy_unpack(stream,
                             &(struct copy_target){.root_fds = &dstfd,
                                                   .n_roots = 1,
                                                   .host = true,
                                                   .shown_roots = &root},
                             &(struct copy_caps){.max_files = 10}, NULL, why, sizeof(why)),
                 -EFBIG, "%s", why);
    cr_expect(strstr(why, "more than 10 directories"), "%s", why);
    cr_expect_eq(count_entries(dst), 10);

    teardown();
    cr_assert(mkdir(src, 0700) == 0 || errno == EEXIST);
    cr_assert(mkdir(dst, 0700) == 0);
    (void)close(dstfd);
    dstfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cr_expect_eq(copy_unpack(stream,
                             &(struct copy_target){.root_fds = &dstfd,
                                                   .n_roots = 1,
                                                   .host = true,
                                                   .shown_roots = &root},
                             &(struct copy_caps){.max_files = 100}, NULL, why, sizeof(why)),
                 0, "%s", why);
    cr_expect_eq(count_entries(dst), 50);
    (void)close(dstfd);
    (void)close(srcfd);
    (void)close(stream);
}

/* A skipped entry's kind crosses the stream with its reason: the host decides on the kind (a
 * workspace over a cap is not saved), never on the reason's words. */
Test(copy, skipped_entries_keep_their_kind, .init = setup, .fini = teardown)
{
    struct nsbox_result res = {0};
    struct copy_packer *p = NULL;
    struct copy_stats stats;
    char why[512] = "", path[512];
    int stream = memfd_create("stream", MFD_CLOEXEC), srcfd, dstfd;
    const char *root = "";
    static const char big[4096];
    bool fifo = false, over = false, link = false;

    (void)snprintf(path, sizeof(path), "%s/fifo", src);
    cr_assert_eq(mkfifo(path, 0644), 0);
    (void)snprintf(path, sizeof(path), "%s/link", src);
    cr_assert_eq(symlink("/etc/passwd", path), 0);
    (void)snprintf(path, sizeof(path), "%s/big", src);
    {
        FILE *f = fopen(path, "w");
        cr_assert(f && fwrite(big, 1, sizeof(big), f) == sizeof(big) && fclose(f) == 0);
    }
    srcfd = open(src, O_PATH | O_DIRECTORY | O_CLOEXEC);
    cr_assert(stream >= 0 && srcfd >= 0);
    cr_assert_eq(copy_packer_new(stream, &(struct copy_caps){.max_bytes = 100}, &p, why,
                                 sizeof(why)),
                 0, "%s", why);
    cr_assert_eq(copy_pack(p, &(struct copy_source){.src_fd = srcfd, .prefix = "", .shown = src},
                           true, why, sizeof(why)),
                 0, "%s", why);
    cr_assert_eq(copy_packer_finish(p, &stats, why, sizeof(why)), 0, "%s", why);
    cr_expect_eq(stats.skipped, 3);
    cr_expect_eq(stats.lost, 1, "only the file over the cap is content that is missing");

    dstfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cr_assert(dstfd >= 0);
    cr_assert_eq(copy_unpack(stream,
                             &(struct copy_target){.root_fds = &dstfd,
                                                   .n_roots = 1,
                                                   .host = true,
                                                   .shown_prefix = "/work/",
                                                   .shown_roots = &root},
                             &(struct copy_caps){.max_bytes = 100}, &res, why, sizeof(why)),
                 0, "%s", why);
    cr_assert_eq(res.n_skipped, 3);
    for (size_t i = 0; i < res.n_skipped; i++) {
        const struct nsbox_skipped_file *s = &res.skipped[i];
        if (strcmp(s->path, "/work/fifo") == 0)
            fifo = s->kind == NSBOX_SKIP_NOT_COPIED;
        else if (strcmp(s->path, "/work/link") == 0)
            link = s->kind == NSBOX_SKIP_NOT_COPIED;
        else if (strcmp(s->path, "/work/big") == 0)
            over = s->kind == NSBOX_SKIP_OVER_CAP;
        else
            cr_expect_fail("unexpected skipped entry %s (%s)", s->path, s->reason);
    }
    cr_expect(fifo && link && over);
    nsbox_result_free(&res);
    (void)close(dstfd);
    (void)close(srcfd);
    (void)close(stream);
}

/* copy_in_open(), the opening of a --copy-in source that runs and session steps share: a file
 * opens; a missing one and a symlink in a directory others than root can write are refused,
 * each in the words both say. */
Test(copy, copy_in_open_refuses_a_symlink_and_names_a_missing_source, .init = setup,
     .fini = teardown)
{
    char why[1024] = "", file[512], link[512], missing[512], expect[2048];
    int fd;

    (void)snprintf(file, sizeof(file), "%s/a.txt", src);
    (void)snprintf(link, sizeof(link), "%s/link", src);
    (void)snprintf(missing, sizeof(missing), "%s/missing", src);
    fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    cr_assert(fd >= 0);
    (void)close(fd);
    cr_assert_eq(symlink("a.txt", link), 0);
    /* Root's links in directories only root can write are followed: make it another's. */
    if (geteuid() == 0)
        cr_assert_eq(chown(src, 65534, 65534), 0);

    fd = copy_in_open(file, why, sizeof(why));
    cr_expect(fd >= 0, "%s", why);
    if (fd >= 0)
        (void)close(fd);

    cr_expect_eq(copy_in_open(missing, why, sizeof(why)), -ENOENT);
    (void)snprintf(expect, sizeof(expect), "--copy-in source '%s': %s", missing, strerror(ENOENT));
    cr_expect_str_eq(why, expect);

    cr_expect_eq(copy_in_open(link, why, sizeof(why)), -ELOOP);
    (void)snprintf(expect, sizeof(expect),
                   "--copy-in %s: '%s' is a symlink, and nsbox follows only root's symlinks in "
                   "directories only root can write: name the path it points to",
                   link, link);
    cr_expect_str_eq(why, expect);
}
