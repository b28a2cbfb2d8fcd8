/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "fileio.h"
#include "macro.h"
#include "result.h"

/* Refuse a log the run's own payload could edit: the log file or one of the directories above
 * it is the source of a writable bind. Compared by device and inode (dir_ancestry(), walking up
 * from the directory the log was opened in: "D/../D", links the caller may use, and the same
 * directory reached over a host bind mount of it are caught, not only a string prefix). */
static int check_not_in_writable_bind(int dirfd, const struct stat *log_st,
                                      const struct nsbox_config *c, const char *what, char *why,
                                      size_t why_size)
{
    _cleanup_free_ struct stat *up = NULL;
    int k, n;

    if (c->n_binds == 0)
        return 0;
    up = calloc(PATH_MAX / 2 + 1, sizeof(*up));
    if (!up)
        return -ENOMEM;
    up[0] = *log_st;
    n = dir_ancestry(dirfd, up + 1, PATH_MAX / 2);
    if (n < 0)
        return n;
    k = nsbox_config_writable_bind(c, up, (size_t)n + 1);
    if (k == -ENOENT)
        return 0;
    if (k < 0)
        return k;
    (void)snprintf(why, why_size,
                   "it lies inside the writable bind -v %s:...:rw of this run, where the code it "
                   "%s could edit it; put the %s outside every :rw bind",
                   c->binds[k].source, strcmp(what, "log") == 0 ? "audits" : "runs", what);
    return -EPERM;
}

/* Open the host file path for writing, as the caller, where the run's code cannot reach it:
 * no symlink on the way but root's, none as the file, a regular file of the caller's with one
 * name, outside every :rw bind of c. flags: O_APPEND (a log) or O_TRUNC (truncated only once
 * all that is checked). what names it in *why ("log", "output file"). Returns 0 with *ret_fd,
 * or -errno (with *why set where the reason is more than the errno). */
static int open_outside_binds(const char *path, int flags, const char *what,
                              const struct nsbox_config *c, int *ret_fd, char *why, size_t why_size)
{
    char abs[PATH_MAX], walked[PATH_MAX], *slash;
    _cleanup_close_ int dirfd = -EBADF, fd = -EBADF;
    struct stat st;
    int r;

    why[0] = '\0';
    if (path[0] == '/')
        r = snprintf(abs, sizeof(abs), "%s", path);
    else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)))
            return negative_errno();
        r = snprintf(abs, sizeof(abs), "%s/%s", cwd, path);
    }
    if (r < 0 || (size_t)r >= sizeof(abs))
        return -ENAMETOOLONG;
    slash = strrchr(abs, '/');
    if (slash[1] == '\0' || strcmp(slash + 1, ".") == 0 || strcmp(slash + 1, "..") == 0)
        return -EISDIR;
    *slash = '\0';

    /* The directory by the rule of -v sources: a sandbox with a writable bind could have made
     * a directory on the way a symlink to one of the caller's. */
    dirfd = path_open_nofollow(abs[0] ? abs : "/", true, walked, sizeof(walked));
    if (dirfd == -ELOOP) {
        (void)snprintf(why, why_size,
                       "'%s' is a symlink, and nsbox follows only root's symlinks in directories "
                       "only root can write (a sandbox may have planted it): name the real path",
                       walked);
        return dirfd;
    }
    if (dirfd < 0)
        return dirfd;

    /* O_NOFOLLOW: a symlink as the log itself is refused (ELOOP), not followed to a file of
     * the caller's that the next record would be appended to. O_NONBLOCK: a FIFO must not
     * block the run; it is refused below. */
    fd = openat(dirfd, slash + 1,
                O_WRONLY | (flags & O_APPEND) | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW |
                    O_NONBLOCK,
                0600);
    if (fd < 0 && errno == ELOOP) {
        (void)snprintf(why, why_size,
                       "it is a symlink (a sandbox may have planted it): name the file itself");
        return -ELOOP;
    }
    /* ENXIO: a FIFO without a reader (open(2), O_NONBLOCK), or a socket. */
    if ((fd < 0 && errno == ENXIO) || (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode))) {
        (void)snprintf(why, why_size, "it is not a regular file");
        return -EINVAL;
    }
    if (fd < 0)
        return negative_errno();
    if (fstat(fd, &st) < 0)
        return negative_errno();
    if (st.st_uid != geteuid()) {
        (void)snprintf(why, why_size, "it belongs to uid %u, not to the caller (uid %u)",
                       (unsigned)st.st_uid, (unsigned)geteuid());
        return -EPERM;
    }
    /* A second name for the log (a hard link) is a second place to change it from. */
    if (st.st_nlink != 1) {
        (void)snprintf(why, why_size, "it has %ju names (hard links); %s has one",
                       (uintmax_t)st.st_nlink,
                       strcmp(what, "log") == 0 ? "an audit log" : "an output file");
        return -EPERM;
    }
    r = check_not_in_writable_bind(dirfd, &st, c, what, why, why_size);
    if (r < 0)
        return r;
    /* Emptied only now: a file refused above keeps what it held. */
    if ((flags & O_TRUNC) && ftruncate(fd, 0) < 0)
        return negative_errno();

    *ret_fd = TAKE_FD(fd);
    return 0;
}

int audit_open(const char *path, const char *run_id, const struct nsbox_config *c,
               struct audit *ret, char *why, size_t why_size)
{
    int fd = -EBADF, r = open_outside_binds(path, O_APPEND, "log", c, &fd, why, why_size);

    if (r < 0)
        return r;
    ret->fd = fd;
    (void)snprintf(ret->run_id, sizeof(ret->run_id), "%s", run_id);
    return 0;
}

int output_file_open(const char *path, const struct nsbox_config *c, int *ret_fd, char *why,
                     size_t why_size)
{
    int fd = -EBADF, r = open_outside_binds(path, O_TRUNC, "output file", c, &fd, why, why_size);

    if (r < 0)
        return r;
    /* Written by the supervisor as output comes: blocking writes to a regular file. */
    if (fcntl(fd, F_SETFL, 0) < 0) {
        r = negative_errno();
        (void)close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

void audit_close(struct audit *a)
{
    if (a->fd >= 0)
        (void)close(a->fd);
    a->fd = -1;
}

static json_t *now_utc(void)
{
    struct timespec ts;
    struct tm tm;
    char buf[64];

    (void)clock_gettime(CLOCK_REALTIME, &ts);
    (void)gmtime_r(&ts.tv_sec, &tm);
    (void)snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
    return json_string(buf);
}

static json_t *string_array(char *const *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && (n < 0 ? v && v[i] != NULL : i < n); i++)
        if (json_array_append_new(a, json_text(v[i], strlen(v[i]))) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* One record, one write(2). */
static int append(struct audit *a, json_t *record)
{
    char *line;
    size_t n;
    ssize_t k;

    if (!record)
        return -ENOMEM;
    line = json_dump_exact(record, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(record);
    if (!line)
        return -ENOMEM;
    n = strlen(line);
    line[n] = '\n'; /* the terminating NUL becomes the newline; n + 1 bytes are written */
    k = write(a->fd, line, n + 1);
    free(line);
    if (k < 0)
        return negative_errno();
    return (size_t)k == n + 1 ? 0 : -EIO;
}

int audit_start(struct audit *a, int argc, char *const argv[], const struct nsbox_config *c,
                size_t code_limit)
{
    json_t *record, *code = json_null(), *digest = json_null();
    size_t shown = 0;

    if (c->code) {
        struct sha256_ctx ctx;
        uint8_t d[SHA256_DIGEST_SIZE];
        char hex[2 * SHA256_DIGEST_SIZE + 1];

        sha256_init(&ctx);
        sha256_update(&ctx, c->code_size, (const uint8_t *)c->code);
        sha256_digest(&ctx, sizeof(d), d);
        hex_encode(d, sizeof(d), hex);
        digest = json_string(hex);
        shown = c->code_size < code_limit ? c->code_size : code_limit;
        code = json_text(c->code, shown);
    }
    record = json_pack("{s:s, s:o, s:s, s:i, s:i, s:o, s:o, s:o, s:o, s:I, s:b, s:{s:I, s:I, s:f, "
                       "s:f}, s:s?, "
                       "s:s}",
                       "event", "start", "time", now_utc(), "run_id", a->run_id, "uid",
                       (int)getuid(), "pid", (int)getpid(), "argv", string_array(argv, argc),
                       "program", c->code ? json_null() : string_array(c->argv, -1), "code", code,
                       "code_sha256", digest, "code_bytes", (json_int_t)c->code_size,
                       "code_truncated", shown < c->code_size, "limits", "memory",
                       (json_int_t)c->memory, "pids", (json_int_t)c->pids_limit, "cpus",
                       (double)c->cpus_milli / 1000.0, "timeout", (double)c->timeout / 1e6,
                       "rootfs", c->rootfs ? c->rootfs : nsbox_default_rootfs(), "seccomp",
                       c->seccomp_disabled ? "disabled"
                       : c->seccomp_policy ? c->seccomp_policy
                                           : "default");
    /* What the payload may reach: the mode, and the hosts of --network allow=. */
    if (record) {
        bool allow = c->network_allow && c->network_allow[0] && !c->network_host;
        uint64_t conns = c->network_max_connections ? c->network_max_connections
                                                    : NSBOX_NETWORK_MAX_CONNECTIONS_DEFAULT;
        uint64_t bytes = c->network_max_bytes ? c->network_max_bytes
                                              : NSBOX_NETWORK_MAX_BYTES_DEFAULT;
        (void)json_object_set_new(record, "network",
                                  json_string(c->network_host       ? "host"
                                              : allow               ? "allow"
                                              : c->network_loopback ? "loopback"
                                                                    : "none"));
        (void)json_object_set_new(record, "network_allow",
                                  allow ? string_array(c->network_allow, -1) : json_null());
        /* The caller's own name-to-address word (reached whatever its range), and the
         * proxy's bounds as they apply (the defaults when not given). */
        (void)json_object_set_new(record, "network_hosts",
                                  allow && c->network_hosts ? string_array(c->network_hosts, -1)
                                                            : json_null());
        (void)json_object_set_new(record, "network_max_connections",
                                  allow ? json_integer((json_int_t)conns) : json_null());
        (void)json_object_set_new(record, "network_max_bytes",
                                  allow ? json_integer((json_int_t)bytes) : json_null());
    }
    return append(a, record);
}

/* A cell's outputs in the log: each one's text/plain, and the names of the MIME types left out
 * (base64 images would make each record up to --outputs-limit long). */
static void outputs_text_only(json_t *result)
{
    json_t *o;
    size_t i;

    json_array_foreach(json_object_get(result, "outputs"), i, o) {
        json_t *data = json_object_get(o, "data"), *omitted = json_array(), *v;
        const char *k;
        void *tmp;

        json_object_foreach_safe(data, tmp, k, v)
            if (strcmp(k, "text/plain") != 0) {
                (void)json_array_append_new(omitted, json_string(k));
                (void)json_object_del(data, k);
            }
        if (json_array_size(omitted))
            (void)json_object_set_new(o, "omitted", omitted);
        else
            json_decref(omitted);
    }
}

int audit_end(struct audit *a, const struct nsbox_result *r)
{
    json_t *result = result_to_json_object(r);

    if (!result)
        return -ENOMEM;
    outputs_text_only(result);
    return append(a, json_pack("{s:s, s:o, s:s, s:o}", "event", "end", "time", now_utc(), "run_id",
                               a->run_id, "result", result));
}
