/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nsbox.h"
#include "result.h"

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0 (RFC 3629, table 3-7
 * of the Unicode standard). */
static size_t utf8_sequence_length(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else
        return 0;

    if (n < len)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

char *utf8_sanitize(const char *s, size_t n, size_t *ret_len)
{
    /* Each invalid byte becomes 3 bytes (U+FFFD). */
    char *out = malloc(n * 3 + 1);
    size_t o = 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_sequence_length((const unsigned char *)s + i, n - i);
        if (len == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
        }
    }
    out[o] = '\0';
    *ret_len = o;
    return out;
}

const char *nsbox_status_to_string(enum nsbox_status status)
{
    switch (status) {
    case NSBOX_STATUS_EXITED:
        return "exited";
    case NSBOX_STATUS_SIGNALED:
        return "signaled";
    case NSBOX_STATUS_TIMEOUT:
        return "timeout";
    case NSBOX_STATUS_ERROR:
        return "error";
    case NSBOX_STATUS_OOM:
        return "oom";
    case NSBOX_STATUS_KILLED:
        return "killed";
    }
    return "error";
}

const char *nsbox_enforcer_to_string(enum nsbox_enforcer enforcer)
{
    switch (enforcer) {
    case NSBOX_ENFORCER_NONE:
        return "none";
    case NSBOX_ENFORCER_RLIMIT:
        return "rlimit";
    case NSBOX_ENFORCER_CGROUP:
        return "cgroup";
    }
    return "none";
}

int nsbox_exit_status(const struct nsbox_result *result)
{
    switch (result->status) {
    case NSBOX_STATUS_EXITED:
        return result->exit_code;
    case NSBOX_STATUS_SIGNALED:
        return 128 + result->signal;
    case NSBOX_STATUS_TIMEOUT:
        return 124;
    case NSBOX_STATUS_ERROR:
        return result->exit_code == 126 || result->exit_code == 127 ? result->exit_code : 125;
    case NSBOX_STATUS_OOM:
    case NSBOX_STATUS_KILLED:
        return 128 + 9; /* SIGKILL */
    }
    return 125;
}

json_t *json_text(const char *s, size_t n)
{
    size_t len = 0;
    char *clean = utf8_sanitize(s, n, &len);
    json_t *j;

    if (!clean)
        return NULL;
    j = json_stringn_nocheck(clean, len);
    free(clean);
    return j;
}

static json_t *stream_text(const struct nsbox_stream *s)
{
    return json_text(s->data ? s->data : "", s->data ? s->captured : 0);
}

static json_t *limit_object(const char *key, json_t *value, enum nsbox_enforcer e)
{
    if (e == NSBOX_ENFORCER_NONE) {
        json_decref(value);
        value = json_null();
    }
    return json_pack("{s:o, s:s}", key, value, "enforced_by", nsbox_enforcer_to_string(e));
}

char *nsbox_result_to_json(const struct nsbox_result *r)
{
    json_t *root, *limits, *error = NULL;
    json_t *out_text = stream_text(&r->out), *err_text = stream_text(&r->err);
    char *text = NULL;
    enum nsbox_enforcer overall = NSBOX_ENFORCER_NONE;

    if (!out_text || !err_text) {
        json_decref(out_text);
        json_decref(err_text);
        return NULL;
    }
    if (r->status == NSBOX_STATUS_ERROR)
        error = json_pack("{s:s, s:i, s:s}", "step", r->error_step, "errno", r->error_errno,
                          "message", r->error);

    /* "cgroup" only when every limit that is set is a cgroup's; else the weakest mechanism. */
    const struct nsbox_limit_report *all[] = {&r->memory, &r->pids_limit, &r->cpus};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i]->enforced_by != NSBOX_ENFORCER_NONE &&
            (overall == NSBOX_ENFORCER_NONE || all[i]->enforced_by == NSBOX_ENFORCER_RLIMIT))
            overall = all[i]->enforced_by;

    limits = json_pack(
        "{s:o, s:o, s:o, s:{s:o, s:s}}", "memory",
        limit_object("bytes", json_integer((json_int_t)r->memory.value), r->memory.enforced_by),
        "pids", limit_object("max", json_integer((json_int_t)r->pids_limit.value),
                             r->pids_limit.enforced_by),
        "cpus", limit_object("cpus", json_real((double)r->cpus.value / 1000.0),
                             r->cpus.enforced_by),
        "timeout", "seconds",
        r->timeout.value ? json_real((double)r->timeout.value / 1e6) : json_null(),
        "enforced_by", r->timeout.value ? "supervisor" : "none");

    root = json_pack("{s:s, s:i, s:o, s:f, s:o, s:o, s:I, s:I, s:b, s:b, s:o, s:o, s:s, s:s?}",
                     "status", nsbox_status_to_string(r->status), "exit_code",
                     nsbox_exit_status(r), "signal",
                     r->status == NSBOX_STATUS_SIGNALED || r->status == NSBOX_STATUS_OOM ||
                             r->status == NSBOX_STATUS_KILLED
                         ? json_integer(r->status == NSBOX_STATUS_SIGNALED ? r->signal : 9)
                         : json_null(),
                     "wall_time_ms", (double)r->wall_time / 1000.0, "stdout", out_text, "stderr",
                     err_text, "stdout_bytes", (json_int_t)r->out.total, "stderr_bytes",
                     (json_int_t)r->err.total, "stdout_truncated", r->out.truncated,
                     "stderr_truncated", r->err.truncated, "error", error ? error : json_null(),
                     "limits", limits, "limits_enforced_by", nsbox_enforcer_to_string(overall),
                     "limits_note", r->limits_note[0] ? r->limits_note : NULL);
    if (!root)
        return NULL;
    {
        /* Every warning, the opt-outs among them: a result says what protection it ran without. */
        json_t *list = json_array();
        for (const char *w = r->warnings; list && *w;) {
            size_t n = strcspn(w, "\n");
            (void)json_array_append_new(list, json_text(w, n));
            w += n + (w[n] == '\n');
        }
        (void)json_object_set_new(root, "warnings", list ? list : json_null());
    }
    if (r->seccomp_reporting) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < r->n_refused; i++)
            (void)json_array_append_new(list, json_pack("{s:s, s:I}", "syscall", r->refused[i].name,
                                                        "count", (json_int_t)r->refused[i].count));
        if (list && r->refused_other)
            (void)json_array_append_new(list, json_pack("{s:s, s:I}", "syscall", "(others)",
                                                        "count", (json_int_t)r->refused_other));
        (void)json_object_set_new(root, "seccomp_refused", list ? list : json_null());
    } else
        (void)json_object_set_new(root, "seccomp_refused", json_null());
    (void)json_object_set_new(root, "host_uid",
                              r->host_uid ? json_integer((json_int_t)r->host_uid) : json_null());
    (void)json_object_set_new(root, "host_gid",
                              r->host_uid ? json_integer((json_int_t)r->host_gid) : json_null());
    if (r->cgroup.valid)
        (void)json_object_set_new(
            root, "cgroup",
            json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "path", r->cgroup.path, "memory_peak",
                      (json_int_t)r->cgroup.memory_peak, "oom_kills",
                      (json_int_t)r->cgroup.oom_kills, "pids_limit_hits",
                      (json_int_t)r->cgroup.pids_limit_hits, "cpu_user_usec",
                      (json_int_t)r->cgroup.cpu_user, "cpu_system_usec",
                      (json_int_t)r->cgroup.cpu_system));
    else
        (void)json_object_set_new(root, "cgroup", json_null());
    text = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(root);
    return text;
}
