/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "macro.h"
#include "result.h"

int audit_open(const char *path, const char *run_id, struct audit *ret)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);

    if (fd < 0)
        return negative_errno();
    ret->fd = fd;
    (void)snprintf(ret->run_id, sizeof(ret->run_id), "%s", run_id);
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
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   ts.tv_nsec / 1000);
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
        for (size_t i = 0; i < sizeof(d); i++)
            (void)sprintf(hex + 2 * i, "%02x", d[i]);
        digest = json_string(hex);
        shown = c->code_size < code_limit ? c->code_size : code_limit;
        code = json_text(c->code, shown);
    }
    record = json_pack(
        "{s:s, s:o, s:s, s:i, s:i, s:o, s:o, s:o, s:o, s:I, s:b, s:{s:I, s:I, s:f, s:f}, s:s?, "
        "s:s}",
        "event", "start", "time", now_utc(), "run_id", a->run_id, "uid", (int)getuid(), "pid",
        (int)getpid(), "argv", string_array(argv, argc), "program",
        c->code ? json_null() : string_array(c->argv, -1), "code", code, "code_sha256", digest,
        "code_bytes", (json_int_t)c->code_size, "code_truncated", shown < c->code_size, "limits",
        "memory", (json_int_t)c->memory, "pids", (json_int_t)c->pids_limit, "cpus",
        (double)c->cpus_milli / 1000.0, "timeout", (double)c->timeout / 1e6, "rootfs",
        c->rootfs ? c->rootfs : nsbox_default_rootfs(), "seccomp",
        c->seccomp_disabled ? "disabled" : c->seccomp_policy ? c->seccomp_policy : "default");
    return append(a, record);
}

int audit_end(struct audit *a, const struct nsbox_result *r)
{
    json_t *result = result_to_json_object(r);

    if (!result)
        return -ENOMEM;
    return append(a, json_pack("{s:s, s:o, s:s, s:o}", "event", "end", "time", now_utc(),
                               "run_id", a->run_id, "result", result));
}
