/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The files a payload created or changed in /work (written.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "written.h"

static int entry_add(struct written_snapshot *s, const char *path, const struct stat *st)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        struct written_entry *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n] = (struct written_entry){.path = strdup(path),
                                        .size = (uint64_t)st->st_size,
                                        .mtime_sec = st->st_mtim.tv_sec,
                                        .mtime_nsec = st->st_mtim.tv_nsec,
                                        .ctime_sec = st->st_ctim.tv_sec,
                                        .ctime_nsec = st->st_ctim.tv_nsec,
                                        .ino = st->st_ino};
    if (!s->v[s->n].path)
        return -ENOMEM;
    s->n++;
    return 0;
}

/* The regular files below dirfd (whose path below /work is prefix, "" at the top). */
static int walk(int dir_fd, const char *prefix, unsigned depth, dev_t dev, size_t *seen,
                struct written_snapshot *s)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    struct dirent *de;
    int r = 0;

    if (!d) {
        if (fd >= 0)
            (void)close(fd);
        return 0;
    }
    while (r == 0 && (de = readdir(d))) {
        char path[4096];
        struct stat st;

        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (++*seen > WRITTEN_WALK_MAX) {
            s->partial = true;
            break;
        }
        if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != dev)
            continue; /* gone, or another mount (main.py's bind, a -v bind) */
        if (snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "/" : "", de->d_name) >=
            (int)sizeof(path))
            continue;
        if (S_ISREG(st.st_mode))
            r = entry_add(s, path, &st);
        else if (S_ISDIR(st.st_mode)) {
            int sub;
            if (depth >= WRITTEN_DEPTH_MAX) {
                s->partial = true;
                continue;
            }
            sub = openat(dir_fd, de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0)
                continue;
            r = walk(sub, path, depth + 1, dev, seen, s);
            (void)close(sub);
        }
    }
    (void)closedir(d);
    return r;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const struct written_entry *)a)->path, ((const struct written_entry *)b)->path);
}

int written_snapshot_take(int work_fd, struct written_snapshot *s)
{
    struct stat st;
    size_t seen = 0;
    int r;

    *s = (struct written_snapshot){0};
    if (fstat(work_fd, &st) < 0)
        return negative_errno();
    r = walk(work_fd, "", 0, st.st_dev, &seen, s);
    if (r < 0) {
        written_snapshot_free(s);
        return r;
    }
    if (s->n > 1)
        qsort(s->v, s->n, sizeof(*s->v), by_path);
    s->taken = true;
    return 0;
}

/* Open the regular file path (components separated by '/') below dir_fd for reading, no
 * symlink followed, on dir_fd's file system. Returns the descriptor or -errno. */
static int open_below(int dir_fd, const char *path)
{
    char part[256];
    struct stat top, st;
    int cur = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);

    if (cur < 0 || fstat(cur, &top) < 0)
        goto fail;
    for (;;) {
        size_t n = strcspn(path, "/");
        int next;

        if (n == 0 || n >= sizeof(part))
            goto fail;
        memcpy(part, path, n);
        part[n] = '\0';
        if (!path[n]) {
            next = openat(cur, part, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
            (void)close(cur);
            if (next < 0)
                return negative_errno();
            if (fstat(next, &st) < 0 || !S_ISREG(st.st_mode) || st.st_dev != top.st_dev) {
                (void)close(next);
                return -EINVAL;
            }
            return next;
        }
        next = openat(cur, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        (void)close(cur);
        cur = next;
        if (cur < 0)
            return -ENOENT;
        path += n + 1;
    }
fail:
    if (cur >= 0)
        (void)close(cur);
    return -EINVAL;
}

/* SHA-256 of path below work_fd, in hex, within *budget bytes; "" past the budget or on an
 * error. */
static void hash_file(int work_fd, const char *path, uint64_t size, uint64_t *budget, char out[65])
{
    _cleanup_close_ int fd = -EBADF;
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE];
    char buf[65536];
    ssize_t n;

    out[0] = '\0';
    if (size > *budget)
        return;
    /* Beneath /work, one component at a time with O_NOFOLLOW (a name may have changed since
     * the walk, and openat2(2) is not in init's seccomp policy), on /work's file system.
     * O_NONBLOCK: a FIFO put there since cannot block. */
    fd = open_below(work_fd, path);
    if (fd < 0)
        return;
    sha256_init(&ctx);
    while ((n = RETRY_EINTR(read(fd, buf, sizeof(buf)))) > 0) {
        if ((uint64_t)n > *budget)
            return;
        *budget -= (uint64_t)n;
        sha256_update(&ctx, (size_t)n, (const uint8_t *)buf);
    }
    if (n < 0)
        return;
    sha256_digest(&ctx, sizeof(digest), digest);
    hex_encode(digest, sizeof(digest), out);
}

void written_report(int work_fd, const struct written_snapshot *before, int report_fd)
{
    struct written_snapshot after = {0};
    struct report end = {.type = REPORT_WRITTEN, .written_walked = true};
    uint64_t budget = WRITTEN_HASH_MAX;
    size_t listed = 0;

    if (!before->taken || written_snapshot_take(work_fd, &after) < 0)
        return;
    for (size_t i = 0; i < after.n; i++) {
        const struct written_entry *a = &after.v[i];
        /* An empty snapshot has no array: bsearch(3) takes none (UBSan: a null base). */
        const struct written_entry *b = before->n
                                            ? bsearch(a, before->v, before->n, sizeof(*a), by_path)
                                            : NULL;
        struct report w = {.type = REPORT_WRITTEN};

        if (b && b->size == a->size && b->ino == a->ino && b->mtime_sec == a->mtime_sec &&
            b->mtime_nsec == a->mtime_nsec && b->ctime_sec == a->ctime_sec &&
            b->ctime_nsec == a->ctime_nsec)
            continue;
        if (listed >= NSBOX_WRITTEN_MAX || strlen(a->path) >= sizeof(w.path)) {
            end.written_more++;
            continue;
        }
        (void)snprintf(w.path, sizeof(w.path), "%s", a->path);
        w.size = a->size;
        hash_file(work_fd, a->path, a->size, &budget, w.sha256);
        report_send(report_fd, &w);
        listed++;
    }
    end.written_partial = before->partial || after.partial;
    report_send(report_fd, &end);
    written_snapshot_free(&after);
}

void written_add(struct nsbox_result *ret, const struct report *w)
{
    struct nsbox_written_file *v;

    if (w->written_walked) {
        ret->written_known = true;
        ret->written_partial = w->written_partial;
        ret->written_more += w->written_more;
        return;
    }
    if (ret->n_written >= NSBOX_WRITTEN_MAX) {
        ret->written_more++;
        return;
    }
    v = realloc(ret->written, (ret->n_written + 1) * sizeof(*v));
    if (!v)
        return;
    ret->written = v;
    v[ret->n_written] = (struct nsbox_written_file){.size = w->size};
    /* %.*s: within the fields whatever the sandbox sent (no NUL needed). */
    if (asprintf(&v[ret->n_written].path, "/work/%.*s", (int)strnlen(w->path, sizeof(w->path)),
                 w->path) < 0)
        return;
    (void)snprintf(v[ret->n_written].sha256, sizeof(v[ret->n_written].sha256), "%.*s",
                   (int)strnlen(w->sha256, sizeof(w->sha256) - 1), w->sha256);
    ret->n_written++;
}

void written_snapshot_free(struct written_snapshot *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].path);
    free(s->v);
    *s = (struct written_snapshot){0};
}
