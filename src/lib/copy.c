/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Copy-in, copy-out and workspaces: the tar stream and the descriptor-only walks (copy.h). */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy.h"
#include "fileio.h"
#include "macro.h"
#include "parse.h"
#include "result.h"

/* The pax key that carries why an entry was not copied (an extended attribute, for libarchive:
 * written as a LIBARCHIVE.xattr record, read back as one). */
#define SKIP_KEY "nsbox.skipped"
/* The entry's enum nsbox_skip_kind, by name (result_skip_kind_name()): the reason is words
 * for a person, the kind what the host decides on (a workspace over a cap is not saved). */
#define SKIP_KIND_KEY "nsbox.skipped.kind"

/* Deeper trees are skipped: every level holds a descriptor. */
#define MAX_DEPTH 64

struct copy_packer {
    struct archive *a;
    struct copy_caps caps;
    struct copy_stats stats;
    bool list_skipped;
    dev_t dev; /* the filesystem of the source being packed: other mounts are skipped */
    const char *exclude;
    const struct copy_source *src; /* the source being packed (its same_*) */
};

/* libarchive is loaded with dlopen() when a run copies files, and only then: linked at build
 * time, it and what it pulls in (libxml2, ICU, libstdc++, five compressors) cost every nsbox
 * start about 1.8 ms of CPU in the dynamic loader (hyperfine, `nsbox --version`), as scope.c
 * says of libsystemd. The prototypes still come from <archive.h>, so each pointer is
 * type-checked against the header; the calls below go through the table by the macros that
 * follow it. Loaded by the supervisor before the sandbox is made, so the sandbox's init has it
 * mapped already (it cannot load anything from the host after pivot_root). */
static struct {
    __typeof__(archive_entry_filetype) *p_entry_filetype;
    __typeof__(archive_entry_free) *p_entry_free;
    __typeof__(archive_entry_new) *p_entry_new;
    __typeof__(archive_entry_pathname) *p_entry_pathname;
    __typeof__(archive_entry_perm) *p_entry_perm;
    __typeof__(archive_entry_set_filetype) *p_entry_set_filetype;
    __typeof__(archive_entry_set_pathname) *p_entry_set_pathname;
    __typeof__(archive_entry_set_perm) *p_entry_set_perm;
    __typeof__(archive_entry_set_size) *p_entry_set_size;
    __typeof__(archive_entry_size) *p_entry_size;
    __typeof__(archive_entry_xattr_add_entry) *p_entry_xattr_add_entry;
    __typeof__(archive_entry_xattr_next) *p_entry_xattr_next;
    __typeof__(archive_entry_xattr_reset) *p_entry_xattr_reset;
    __typeof__(archive_errno) *p_errno;
    __typeof__(archive_error_string) *p_error_string;
    __typeof__(archive_read_data) *p_read_data;
    __typeof__(archive_read_free) *p_read_free;
    __typeof__(archive_read_new) *p_read_new;
    __typeof__(archive_read_next_header) *p_read_next_header;
    __typeof__(archive_read_open_fd) *p_read_open_fd;
    __typeof__(archive_read_support_format_tar) *p_read_support_format_tar;
    __typeof__(archive_write_close) *p_write_close;
    __typeof__(archive_write_data) *p_write_data;
    __typeof__(archive_write_free) *p_write_free;
    __typeof__(archive_write_header) *p_write_header;
    __typeof__(archive_write_new) *p_write_new;
    __typeof__(archive_write_open_fd) *p_write_open_fd;
    __typeof__(archive_write_set_format_pax) *p_write_set_format_pax;
} ar;

static bool ar_loaded;

int copy_load(char *why, size_t why_size)
{
    static const struct {
        const char *name;
        size_t offset;
    } table[] = {
#define SYM(field, name) {#name, offsetof(__typeof__(ar), field)}
        SYM(p_entry_filetype, archive_entry_filetype),
        SYM(p_entry_free, archive_entry_free),
        SYM(p_entry_new, archive_entry_new),
        SYM(p_entry_pathname, archive_entry_pathname),
        SYM(p_entry_perm, archive_entry_perm),
        SYM(p_entry_set_filetype, archive_entry_set_filetype),
        SYM(p_entry_set_pathname, archive_entry_set_pathname),
        SYM(p_entry_set_perm, archive_entry_set_perm),
        SYM(p_entry_set_size, archive_entry_set_size),
        SYM(p_entry_size, archive_entry_size),
        SYM(p_entry_xattr_add_entry, archive_entry_xattr_add_entry),
        SYM(p_entry_xattr_next, archive_entry_xattr_next),
        SYM(p_entry_xattr_reset, archive_entry_xattr_reset),
        SYM(p_errno, archive_errno),
        SYM(p_error_string, archive_error_string),
        SYM(p_read_data, archive_read_data),
        SYM(p_read_free, archive_read_free),
        SYM(p_read_new, archive_read_new),
        SYM(p_read_next_header, archive_read_next_header),
        SYM(p_read_open_fd, archive_read_open_fd),
        SYM(p_read_support_format_tar, archive_read_support_format_tar),
        SYM(p_write_close, archive_write_close),
        SYM(p_write_data, archive_write_data),
        SYM(p_write_free, archive_write_free),
        SYM(p_write_header, archive_write_header),
        SYM(p_write_new, archive_write_new),
        SYM(p_write_open_fd, archive_write_open_fd),
        SYM(p_write_set_format_pax, archive_write_set_format_pax),
#undef SYM
    };
    void *lib;

    if (ar_loaded)
        return 0;
    /* The soname: "libarchive.so" comes only with libarchive-dev. */
    lib = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return why_fail(why, why_size, -EOPNOTSUPP,
                        "copying files needs libarchive (Debian: libarchive13): %s", dlerror());
    for (size_t i = 0; i < ELEMENTSOF(table); i++) {
        void *f = dlsym(lib, table[i].name);
        if (!f)
            return why_fail(why, why_size, -EOPNOTSUPP, "libarchive.so.13 lacks %s", table[i].name);
        memcpy((char *)&ar + table[i].offset, &f, sizeof(f));
    }
    ar_loaded = true;
    return 0;
}

#define archive_entry_filetype ar.p_entry_filetype
#define archive_entry_free ar.p_entry_free
#define archive_entry_new ar.p_entry_new
#define archive_entry_pathname ar.p_entry_pathname
#define archive_entry_perm ar.p_entry_perm
#define archive_entry_set_filetype ar.p_entry_set_filetype
#define archive_entry_set_pathname ar.p_entry_set_pathname
#define archive_entry_set_perm ar.p_entry_set_perm
#define archive_entry_set_size ar.p_entry_set_size
#define archive_entry_size ar.p_entry_size
#define archive_entry_xattr_add_entry ar.p_entry_xattr_add_entry
#define archive_entry_xattr_next ar.p_entry_xattr_next
#define archive_entry_xattr_reset ar.p_entry_xattr_reset
#define archive_errno ar.p_errno
#define archive_error_string ar.p_error_string
#define archive_read_data ar.p_read_data
#define archive_read_free ar.p_read_free
#define archive_read_new ar.p_read_new
#define archive_read_next_header ar.p_read_next_header
#define archive_read_open_fd ar.p_read_open_fd
#define archive_read_support_format_tar ar.p_read_support_format_tar
#define archive_write_close ar.p_write_close
#define archive_write_data ar.p_write_data
#define archive_write_free ar.p_write_free
#define archive_write_header ar.p_write_header
#define archive_write_new ar.p_write_new
#define archive_write_open_fd ar.p_write_open_fd
#define archive_write_set_format_pax ar.p_write_set_format_pax

static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

/* The mode a copy gets: 0755 if any execute bit was set, else 0644; directories 0755. */
static mode_t copy_mode(const struct stat *st)
{
    if (S_ISDIR(st->st_mode))
        return 0755;
    return st->st_mode & 0111 ? 0755 : 0644;
}

int copy_packer_new(int fd, const struct copy_caps *caps, struct copy_packer **ret, char *why,
                    size_t why_size)
{
    struct copy_packer *p;
    int r = copy_load(why, why_size);

    if (r < 0)
        return r;
    p = calloc(1, sizeof(*p));
    if (!p)
        return why_fail(why, why_size, -ENOMEM, "out of memory");
    p->caps = *caps;
    p->a = archive_write_new();
    if (!p->a || archive_write_set_format_pax(p->a) != ARCHIVE_OK ||
        archive_write_open_fd(p->a, fd) != ARCHIVE_OK) {
        r = why_fail(why, why_size, -EIO, "cannot start the copy stream: %s",
                     p->a ? archive_error_string(p->a) : "out of memory");
        if (p->a)
            archive_write_free(p->a);
        free(p);
        return r;
    }
    *ret = p;
    return 0;
}

static int write_error(struct copy_packer *p, char *why, size_t why_size)
{
    int e = archive_errno(p->a);
    return why_fail(why, why_size, e > 0 ? -e : -EIO, "writing the copy stream failed: %s",
                    archive_error_string(p->a) ? archive_error_string(p->a) : "unknown error");
}

static int put_header(struct copy_packer *p, const char *name, mode_t type, mode_t perm,
                      int64_t size, const char *skip_reason, enum nsbox_skip_kind kind, char *why,
                      size_t why_size)
{
    struct archive_entry *e = archive_entry_new();
    int r;

    if (!e)
        return why_fail(why, why_size, -ENOMEM, "out of memory");
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_size(e, size);
    if (skip_reason) {
        const char *k = result_skip_kind_name(kind);
        archive_entry_xattr_add_entry(e, SKIP_KEY, skip_reason, strlen(skip_reason));
        archive_entry_xattr_add_entry(e, SKIP_KIND_KEY, k, strlen(k));
    }
    r = archive_write_header(p->a, e);
    archive_entry_free(e);
    if (r < ARCHIVE_WARN)
        return write_error(p, why, why_size);
    return 0;
}

/* Leave name out, listed with reason and kind in the stream while the list has room; a kind
 * other than NSBOX_SKIP_NOT_COPIED is content that is missing (copy_stats.lost). A name the
 * unpacking side would refuse (copy_name_is_valid(): not UTF-8, hidden characters, cut at PATH_MAX)
 * is counted, never listed: one such entry would make it refuse the whole stream. */
static int skip(struct copy_packer *p, const char *name, const char *reason,
                enum nsbox_skip_kind kind, char *why, size_t why_size)
{
    p->stats.skipped++;
    p->stats.lost += kind != NSBOX_SKIP_NOT_COPIED;
    if (p->stats.n_named < COPY_NAMED_MAX && copy_name_is_valid(name))
        (void)snprintf(p->stats.named[p->stats.n_named++], sizeof(p->stats.named[0]), "/%s: %s",
                       name, reason);
    if (!p->list_skipped || p->stats.skipped_listed >= NSBOX_SKIPPED_MAX ||
        !copy_name_is_valid(name))
        return 0;
    p->stats.skipped_listed++;
    return put_header(p, name, AE_IFREG, 0644, 0, reason, kind, why, why_size);
}

void copy_stats_named(const struct copy_stats *stats, char *buf, size_t size)
{
    size_t at = 0;

    if (size == 0)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < stats->n_named && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? "; " : "", stats->named[i]);
    if (at < size && stats->skipped > stats->n_named)
        (void)snprintf(buf + at, size - at, ", and %llu more",
                       (unsigned long long)(stats->skipped - stats->n_named));
}

static int pack_file(struct copy_packer *p, int fd, const struct stat *st, const char *name,
                     char *why, size_t why_size)
{
    char buf[65536];
    uint64_t left = (uint64_t)st->st_size;
    int r;

    if (p->caps.max_files && p->stats.files >= p->caps.max_files)
        return p->caps.fail
                   ? why_fail(why, why_size, -EFBIG, "more than %llu files",
                              (unsigned long long)p->caps.max_files)
                   : skip(p, name, "over --copy-out-max-files", NSBOX_SKIP_OVER_CAP, why, why_size);
    if (p->caps.max_bytes && left > p->caps.max_bytes - p->stats.bytes)
        return p->caps.fail
                   ? why_fail(why, why_size, -EFBIG, "more than %llu bytes",
                              (unsigned long long)p->caps.max_bytes)
                   : skip(p, name, "over --copy-out-max-bytes", NSBOX_SKIP_OVER_CAP, why, why_size);
    r = put_header(p, name, AE_IFREG, copy_mode(st), st->st_size, NULL, NSBOX_SKIP_NOT_COPIED, why,
                   why_size);
    if (r < 0)
        return r;
    while (left > 0) {
        ssize_t n = read(fd, buf, left < sizeof(buf) ? left : sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            /* The size in the header is a promise: pad with zeros (the file shrank under a
             * writer; on the sandbox side none is alive) and say so. */
            memset(buf, 0, sizeof(buf));
            while (left > 0) {
                size_t k = left < sizeof(buf) ? left : sizeof(buf);
                if (archive_write_data(p->a, buf, k) < 0)
                    return write_error(p, why, why_size);
                left -= k;
            }
            return why_fail(why, why_size, n < 0 ? -errno : -EIO, "reading %s failed", name);
        }
        if (archive_write_data(p->a, buf, (size_t)n) < 0)
            return write_error(p, why, why_size);
        left -= (uint64_t)n;
    }
    p->stats.files++;
    p->stats.bytes += (uint64_t)st->st_size;
    return 0;
}

static int pack_dir(struct copy_packer *p, int dfd, char *name, size_t name_size, const char *shown,
                    int depth, char *why, size_t why_size);

/* Whether fd (a regular file, st) is src's same_name with src's same_data, read from offset 0;
 * fd's offset is back at 0 afterwards. */
static bool is_same_file(const struct copy_source *src, const char *name, int fd,
                         const struct stat *st)
{
    const char *want = src ? src->same_data : NULL;
    char buf[65536];
    size_t at = 0;
    bool same = true;

    if (!want || strcmp(name, src->same_name) != 0 || (uint64_t)st->st_size != src->same_size)
        return false;
    while (same && at < src->same_size) {
        size_t want_n = src->same_size - at < sizeof(buf) ? src->same_size - at : sizeof(buf);
        ssize_t n = pread(fd, buf, want_n, (off_t)at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        same = memcmp(buf, want + at, (size_t)n) == 0;
        at += (size_t)n;
    }
    return same;
}

/* One entry of a directory: dfd/entry, named name in the stream. */
static int pack_entry(struct copy_packer *p, int dfd, const char *entry, char *name,
                      size_t name_size, const char *shown, int depth, char *why, size_t why_size)
{
    _cleanup_close_ int fd = -EBADF;
    struct stat st;
    size_t len = strlen(name);
    char path[PATH_MAX + 1];
    int r;

    if (snprintf(name + len, name_size - len, "%s%s", len ? "/" : "", entry) >=
        (int)(name_size - len))
        return skip(p, name, "name too long", NSBOX_SKIP_UNREADABLE, why, why_size);
    (void)snprintf(path, sizeof(path), "%s/%s", shown, entry);
    if (has_control(entry) || !copy_name_is_valid(name)) {
        /* Not even listed by name: control characters are not passed on, and a name the
         * unpacking side refuses (not UTF-8, hidden characters) would fail the whole stream. */
        p->stats.skipped++;
        p->stats.lost++;
        r = 0;
        goto out;
    }
    if (p->exclude && strcmp(path, p->exclude) == 0) {
        r = 0;
        goto out;
    }
    if (fstatat(dfd, entry, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        r = skip(p, name, "cannot be read", NSBOX_SKIP_UNREADABLE, why, why_size);
        goto out;
    }
    if (S_ISLNK(st.st_mode))
        r = skip(p, name, "symlink (never followed)", NSBOX_SKIP_NOT_COPIED, why, why_size);
    else if (S_ISFIFO(st.st_mode))
        r = skip(p, name, "FIFO", NSBOX_SKIP_NOT_COPIED, why, why_size);
    else if (S_ISSOCK(st.st_mode))
        r = skip(p, name, "socket", NSBOX_SKIP_NOT_COPIED, why, why_size);
    else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
        r = skip(p, name, "device", NSBOX_SKIP_NOT_COPIED, why, why_size);
    else if (st.st_dev != p->dev)
        r = skip(p, name, "another mount (not crossed)", NSBOX_SKIP_NOT_COPIED, why, why_size);
    else if (S_ISDIR(st.st_mode)) {
        if (depth >= MAX_DEPTH) {
            r = skip(p, name, "too deep", NSBOX_SKIP_UNREADABLE, why, why_size);
            goto out;
        }
        if (p->caps.max_files && p->stats.dirs >= p->caps.max_files) {
            r = p->caps.fail ? why_fail(why, why_size, -EFBIG, "more than %llu directories",
                                        (unsigned long long)p->caps.max_files)
                             : skip(p, name, "over --copy-out-max-files (directories)",
                                    NSBOX_SKIP_OVER_CAP, why, why_size);
            goto out;
        }
        p->stats.dirs++;
        fd = openat(dfd, entry, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            r = skip(p, name, errno == EACCES ? "unreadable (permission denied)" : "cannot be read",
                     NSBOX_SKIP_UNREADABLE, why, why_size);
            goto out;
        }
        r = put_header(p, name, AE_IFDIR, 0755, 0, NULL, NSBOX_SKIP_NOT_COPIED, why, why_size);
        if (r >= 0)
            r = pack_dir(p, fd, name, name_size, path, depth + 1, why, why_size);
    } else {
        struct stat st2;
        /* O_NONBLOCK: should a FIFO have taken its place, the open does not hang. */
        fd = openat(dfd, entry, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st2) < 0 || !S_ISREG(st2.st_mode) || st2.st_ino != st.st_ino) {
            r = skip(p, name,
                     fd < 0 && errno == EACCES ? "unreadable (permission denied)"
                                               : "cannot be read",
                     NSBOX_SKIP_UNREADABLE, why, why_size);
            goto out;
        }
        if (is_same_file(p->src, name, fd, &st2)) {
            r = 0;
            goto out;
        }
        r = pack_file(p, fd, &st2, name, why, why_size);
    }
out:
    name[len] = '\0';
    return r;
}

static int pack_dir(struct copy_packer *p, int dfd, char *name, size_t name_size, const char *shown,
                    int depth, char *why, size_t why_size)
{
    _cleanup_closedir_ DIR *d = NULL;
    int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    struct dirent *de;

    if (fd < 0)
        return why_fail(why, why_size, -errno, "%s: %m", shown);
    d = fdopendir(fd);
    if (!d) {
        (void)close(fd);
        return why_fail(why, why_size, -errno, "%s: %m", shown);
    }
    while ((errno = 0, de = readdir(d))) {
        int r;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        r = pack_entry(p, dfd, de->d_name, name, name_size, shown, depth, why, why_size);
        if (r < 0)
            return r;
    }
    if (errno)
        return why_fail(why, why_size, -errno, "reading directory %s: %m", shown);
    return 0;
}

int copy_pack_skipped(struct copy_packer *p, const char *name, const char *reason,
                      enum nsbox_skip_kind kind, char *why, size_t why_size)
{
    p->list_skipped = true;
    return skip(p, name, reason, kind, why, why_size);
}

int copy_pack(struct copy_packer *p, const struct copy_source *src, bool list_skipped, char *why,
              size_t why_size)
{
    _cleanup_close_ int fd = -EBADF;
    char name[PATH_MAX + 1];
    struct stat st;
    int r;

    p->list_skipped = list_skipped;
    p->exclude = src->exclude;
    p->src = src;
    if (fstat(src->src_fd, &st) < 0)
        return why_fail(why, why_size, -errno, "%s: %m", src->shown);
    p->dev = st.st_dev;
    (void)snprintf(name, sizeof(name), "%s", src->prefix);
    /* Reopened for reading: src_fd may be an O_PATH descriptor. Through /proc/self/fd, which
     * reopens that very file, not a path (proc(5)). */
    {
        char self[64];
        (void)snprintf(self, sizeof(self), "/proc/self/fd/%d", src->src_fd);
        if (S_ISDIR(st.st_mode))
            fd = open(self, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        else if (S_ISREG(st.st_mode))
            fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        else
            return skip(p, name, "not a regular file or directory", NSBOX_SKIP_NOT_COPIED, why,
                        why_size);
        if (fd < 0)
            return why_fail(why, why_size, -errno, "%s: %m", src->shown);
    }
    if (S_ISREG(st.st_mode))
        r = is_same_file(src, name, fd, &st) ? 0 : pack_file(p, fd, &st, name, why, why_size);
    else {
        r = name[0]
                ? put_header(p, name, AE_IFDIR, 0755, 0, NULL, NSBOX_SKIP_NOT_COPIED, why, why_size)
                : 0;
        if (r >= 0)
            r = pack_dir(p, fd, name, sizeof(name), src->shown, 0, why, why_size);
    }
    p->src = NULL; /* src is the caller's, for this call */
    return r;
}

int copy_packer_finish(struct copy_packer *p, struct copy_stats *stats, char *why, size_t why_size)
{
    int r = 0;

    if (archive_write_close(p->a) != ARCHIVE_OK)
        r = write_error(p, why, why_size);
    archive_write_free(p->a);
    if (stats)
        *stats = p->stats;
    free(p);
    return r;
}

/* ---- unpacking --------------------------------------------------------------------------- */

/* Open (making it, 0755, when missing) each directory of rel below root, one component at a
 * time, never following a symlink. rel is modified and restored. Returns an fd or -errno. */
static int open_parents(int root, char *rel, const char **ret_last, uint64_t *made,
                        uint64_t max_made)
{
    int fd = fcntl(root, F_DUPFD_CLOEXEC, 3);
    char *p = rel;

    if (fd < 0)
        return -errno;
    for (;;) {
        char *slash = strchr(p, '/');
        int next;
        if (!slash)
            break;
        *slash = '\0';
        /* Past max_made (0: none) only directories that are there already are entered. */
        if ((!max_made || *made < max_made) && mkdirat(fd, p, 0755) == 0)
            (*made)++;
        else if (errno != EEXIST && (!max_made || *made < max_made)) {
            int r = -errno;
            *slash = '/';
            (void)close(fd);
            return r;
        }
        next = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        *slash = '/';
        (void)close(fd);
        if (next < 0)
            return errno == ENOENT && max_made && *made >= max_made ? -EFBIG : -errno;
        fd = next;
        p = slash + 1;
    }
    *ret_last = p;
    return fd;
}

static int add_copied(struct nsbox_result *res, const char *path, const char *host_path,
                      uint64_t size, const uint8_t digest[SHA256_DIGEST_SIZE])
{
    struct nsbox_copied_file *c;
    void *n = realloc(res->copied, (res->n_copied + 1) * sizeof(*res->copied));

    if (!n)
        return -ENOMEM;
    res->copied = n;
    c = &res->copied[res->n_copied];
    *c = (struct nsbox_copied_file){.path = strdup(path),
                                    .size = size,
                                    .host_path = host_path ? strdup(host_path) : NULL};
    if (!c->path || (host_path && !c->host_path)) {
        free(c->path);
        free(c->host_path);
        return -ENOMEM;
    }
    hex_encode(digest, SHA256_DIGEST_SIZE, c->sha256);
    res->n_copied++;
    return 0;
}

static int add_skipped(struct nsbox_result *res, const char *path, const char *reason,
                       enum nsbox_skip_kind kind)
{
    struct nsbox_skipped_file *s;
    void *n;

    if (res->n_skipped >= NSBOX_SKIPPED_MAX) {
        res->skipped_more++;
        return 0;
    }
    n = realloc(res->skipped, (res->n_skipped + 1) * sizeof(*res->skipped));
    if (!n)
        return -ENOMEM;
    res->skipped = n;
    s = &res->skipped[res->n_skipped];
    *s = (struct nsbox_skipped_file){.path = strdup(path), .reason = strdup(reason), .kind = kind};
    if (!s->path || !s->reason) {
        free(s->path);
        free(s->reason);
        return -ENOMEM;
    }
    res->n_skipped++;
    return 0;
}

/* The reason a skipped entry carries (into buf, size bytes), and its kind in *kind: one the
 * stream does not name is taken for content that is missing (NSBOX_SKIP_UNREADABLE). NULL when
 * the entry is not a skipped one. */
static const char *skip_reason(struct archive_entry *e, char *buf, size_t size,
                               enum nsbox_skip_kind *kind)
{
    const char *key, *reason = NULL;
    const void *value;
    size_t len;

    *kind = NSBOX_SKIP_UNREADABLE;
    if (archive_entry_xattr_reset(e) == 0)
        return NULL;
    while (archive_entry_xattr_next(e, &key, &value, &len) == ARCHIVE_OK)
        if (strcmp(key, SKIP_KEY) == 0) {
            size_t i, n = len < size - 1 ? len : size - 1;
            for (i = 0; i < n; i++) {
                char ch = ((const char *)value)[i];
                buf[i] = (unsigned char)ch < 0x20 || ch == 0x7f ? '?' : ch;
            }
            buf[i] = '\0';
            reason = buf;
        } else if (strcmp(key, SKIP_KIND_KEY) == 0) {
            for (int k = NSBOX_SKIP_NOT_COPIED; k <= NSBOX_SKIP_UNREADABLE; k++)
                if (len == strlen(result_skip_kind_name(k)) &&
                    memcmp(value, result_skip_kind_name(k), len) == 0)
                    *kind = (enum nsbox_skip_kind)k;
        }
    return reason;
}

/* Write the data of the current entry to a new or existing regular file dfd/name. */
static int unpack_file(struct archive *a, int dfd, const char *name, mode_t mode, bool host,
                       uint64_t expected, struct sha256_ctx *sha, char *why, size_t why_size,
                       const char *shown)
{
    _cleanup_close_ int fd = -EBADF;
    struct stat st;
    uint64_t total = 0;
    char buf[65536];

    /* O_NOFOLLOW: a symlink there is never written through (ELOOP); O_NONBLOCK: a FIFO there
     * does not hang the open, and fails the S_ISREG test. */
    fd = openat(dfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                mode);
    if (fd < 0)
        return why_fail(why, why_size, -errno, "cannot write %s: %m", shown);
    if (fstat(fd, &st) < 0)
        return why_fail(why, why_size, -errno, "cannot write %s: %m", shown);
    if (!S_ISREG(st.st_mode))
        return why_fail(why, why_size, -EEXIST,
                        "cannot write %s: something else than a regular "
                        "file is there",
                        shown);
    /* A second name of a file elsewhere would have that file overwritten. */
    if (host && st.st_nlink > 1)
        return why_fail(why, why_size, -EMLINK,
                        "cannot write %s: the file there has other hard "
                        "links; remove it first",
                        shown);
    if (ftruncate(fd, 0) < 0 || fchmod(fd, mode) < 0)
        return why_fail(why, why_size, -errno, "cannot write %s: %m", shown);
    for (;;) {
        ssize_t n = archive_read_data(a, buf, sizeof(buf));
        if (n == 0)
            break;
        if (n < 0)
            return why_fail(why, why_size, -EIO, "reading the copy stream failed: %s",
                            archive_error_string(a));
        total += (uint64_t)n;
        if (total > expected)
            return why_fail(why, why_size, -EIO, "the copy stream is corrupt");
        if (sha)
            sha256_update(sha, (size_t)n, (const uint8_t *)buf);
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return why_fail(why, why_size, -errno,
                                errno == ENOSPC ? "cannot write %s: no room left (%m)"
                                                : "cannot write %s: %m",
                                shown);
            off += w;
        }
    }
    if (total != expected)
        return why_fail(why, why_size, -EIO, "the copy stream is corrupt (short file)");
    return 0;
}

int copy_unpack(int fd, const struct copy_target *t, const struct copy_caps *caps,
                struct nsbox_result *res, char *why, size_t why_size)
{
    struct archive *a = NULL;
    struct archive_entry *e;
    /* Directories count too, each at most max_files as the packer counts them (copy_stats.dirs):
     * a stream of empty directories, or of files whose names make parents, costs inodes and
     * time on the host. Only those made count: one that was there is no new cost. */
    uint64_t bytes = 0, files = 0, dirs = 0;
    int r = 0, hr;

    r = copy_load(why, why_size);
    if (r < 0)
        return r;
    if (lseek(fd, 0, SEEK_SET) < 0)
        return why_fail(why, why_size, -errno, "copy stream: %m");
    a = archive_read_new();
    if (!a)
        return why_fail(why, why_size, -ENOMEM, "out of memory");
    if (archive_read_support_format_tar(a) != ARCHIVE_OK ||
        archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
        r = why_fail(why, why_size, -EIO, "reading the copy stream failed: %s",
                     archive_error_string(a));
        goto out;
    }
    while ((hr = archive_read_next_header(a, &e)) != ARCHIVE_EOF) {
        char name[PATH_MAX + 1], shown[PATH_MAX * 2], host_path[PATH_MAX * 2], reason[128];
        enum nsbox_skip_kind kind;
        const char *rel = name, *last = NULL, *pathname;
        size_t idx = 0;
        _cleanup_close_ int dfd = -EBADF;
        mode_t type;

        if (hr < ARCHIVE_WARN) {
            r = why_fail(why, why_size, -EIO, "reading the copy stream failed: %s",
                         archive_error_string(a));
            goto out;
        }
        pathname = archive_entry_pathname(e);
        if (!pathname) {
            r = why_fail(why, why_size, -EINVAL, "the copy stream has an invalid name");
            goto out;
        }
        (void)snprintf(name, sizeof(name), "%s", pathname);
        /* tar writes directories with a trailing '/'. */
        if (archive_entry_filetype(e) == AE_IFDIR && name[0] && name[strlen(name) - 1] == '/')
            name[strlen(name) - 1] = '\0';
        if (!copy_name_is_valid(name)) {
            r = why_fail(why, why_size, -EINVAL, "the copy stream has an invalid name");
            goto out;
        }
        if (t->indexed) {
            char *slash = strchr(name, '/'), *end = NULL;
            unsigned long i = strtoul(name, &end, 10);
            if (name[0] < '0' || name[0] > '9' || end == name || (*end != '/' && *end != '\0') ||
                i >= t->n_roots) {
                r = why_fail(why, why_size, -EINVAL, "the copy stream has an invalid name");
                goto out;
            }
            idx = i;
            if (!slash)
                continue; /* the root itself, a directory that exists */
            rel = slash + 1;
        }
        if (t->indexed && t->shown_roots) {
            /* rel starts with the root's own name: shown below the root's parent. */
            const char *root = t->shown_roots[idx], *slash = strrchr(root, '/');
            (void)snprintf(shown, sizeof(shown), "%.*s/%s", (int)(slash ? slash - root : 0), root,
                           rel);
        } else
            (void)snprintf(shown, sizeof(shown), "%s%s", t->shown_prefix ? t->shown_prefix : "",
                           rel);
        host_path[0] = '\0';
        if (t->root_paths && t->root_paths[idx])
            (void)snprintf(host_path, sizeof(host_path), "%s/%s", t->root_paths[idx], rel);

        if (skip_reason(e, reason, sizeof(reason), &kind)) {
            if (res && (r = add_skipped(res, shown, reason, kind)) < 0)
                goto out;
            continue;
        }
        type = archive_entry_filetype(e);
        if (type != AE_IFREG && type != AE_IFDIR) {
            if (res && (r = add_skipped(res, shown, "not a regular file or directory",
                                        NSBOX_SKIP_NOT_COPIED)) < 0)
                goto out;
            continue;
        }
        dfd = open_parents(t->root_fds[idx], (char *)rel, &last, &dirs, caps->max_files);
        if (dfd >= 0 && type == AE_IFDIR) {
            if (caps->max_files && dirs >= caps->max_files &&
                faccessat(dfd, last, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                (void)close(TAKE_FD(dfd));
                dfd = -EFBIG;
            } else if (mkdirat(dfd, last, 0755) == 0)
                dirs++;
            else if (errno != EEXIST) {
                r = why_fail(why, why_size, -errno, "cannot make %s: %m", shown);
                goto out;
            }
        }
        if (dfd == -EFBIG) {
            r = why_fail(why, why_size, -EFBIG,
                         "the copy stream is over its caps (more than %llu directories)",
                         (unsigned long long)caps->max_files);
            goto out;
        }
        if (dfd < 0) {
            r = why_fail(why, why_size, dfd, "cannot make the directories of %s: %s", shown,
                         strerror(-dfd));
            goto out;
        }
        if (type == AE_IFDIR)
            continue;
        {
            uint64_t size = archive_entry_size(e) < 0 ? 0 : (uint64_t)archive_entry_size(e);
            mode_t mode = archive_entry_perm(e) & 0111 ? 0755 : 0644;
            struct sha256_ctx sha;
            uint8_t digest[SHA256_DIGEST_SIZE];

            files++;
            bytes += size;
            if ((caps->max_files && files > caps->max_files) ||
                (caps->max_bytes && bytes > caps->max_bytes)) {
                r = why_fail(why, why_size, -EFBIG, "the copy stream is over its caps");
                goto out;
            }
            sha256_init(&sha);
            r = unpack_file(a, dfd, last, mode, t->host, size, &sha, why, why_size, shown);
            if (r < 0)
                goto out;
            sha256_digest(&sha, sizeof(digest), digest);
            if (res &&
                (r = add_copied(res, shown, host_path[0] ? host_path : NULL, size, digest)) < 0) {
                (void)why_fail(why, why_size, r, "out of memory");
                goto out;
            }
        }
    }
out:
    archive_read_free(a);
    return r;
}

int copy_open_nofollow(const char *path)
{
    int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    char buf[PATH_MAX];
    char *save = NULL, *part;

    if (fd < 0 || path[0] != '/' || strlen(path) >= sizeof(buf)) {
        if (fd >= 0)
            (void)close(fd);
        errno = EINVAL;
        return -1;
    }
    strcpy(buf, path);
    for (part = strtok_r(buf, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        bool last = !save || !*save;
        /* O_PATH | O_NOFOLLOW opens a symlink itself (open(2)), for the caller's fstat to see;
         * on the way, O_DIRECTORY refuses one (ENOTDIR). */
        int next = openat(fd, part, O_PATH | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY));
        int saved = errno;
        (void)close(fd);
        if (next < 0) {
            errno = saved;
            return -1;
        }
        fd = next;
    }
    return fd;
}

int copy_remove_tree(int parent_fd, const char *name)
{
    _cleanup_closedir_ DIR *d = NULL;
    struct dirent *de;
    int fd;

    if (unlinkat(parent_fd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    d = fdopendir(fd);
    if (!d) {
        (void)close(fd);
        return -errno;
    }
    while ((errno = 0, de = readdir(d))) {
        int r;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        r = copy_remove_tree(dirfd(d), de->d_name);
        if (r < 0)
            return r;
    }
    if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}
