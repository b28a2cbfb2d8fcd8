/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nsbox.h"
#include "result.h"
#include "utf8.h"

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_sequence_length(const unsigned char *s, size_t n)
{
    int len = utf8_check(s, n);
    return len > 0 ? (size_t)len : 0;
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

/* Bytes jansson writes for an ASCII character in a string (without JSON_ENSURE_ASCII): the
 * two-character escapes of RFC 8259 section 7, \u00XX for the other controls below 0x20. */
static unsigned json_ascii_cost(unsigned char c)
{
    switch (c) {
    case '"':
    case '\\':
    case '\b':
    case '\f':
    case '\n':
    case '\r':
    case '\t':
        return 2;
    default:
        return c < 0x20 ? 6 : 1;
    }
}

size_t json_meter_fit(struct json_meter *m, const char *s, size_t kept, size_t n, uint64_t bound)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t end = kept + n, i = m->settled, tail;
    uint64_t cost = m->cost;

    while (i < end) {
        size_t len = 1;
        unsigned w;

        if (u[i] < 0x80)
            w = json_ascii_cost(u[i]);
        else {
            int l = utf8_check(u + i, end - i);
            if (l < 0)
                break; /* unfinished: settled when more bytes come */
            if (l > 0) {
                len = (size_t)l;
                w = (unsigned)l;
            } else
                w = 3; /* U+FFFD, see utf8_sanitize() */
        }
        if (cost + w > bound) {
            /* The cut goes before this character. Bytes already kept never land here: their
             * worst case was counted when they were kept, and settling only lowers it. */
            m->cost = cost;
            m->settled = i;
            return i > kept ? i - kept : 0;
        }
        cost += w;
        i += len;
    }
    /* An unfinished sequence ends s: kept only as far as it fits as U+FFFDs, its cost should the
     * stream end there. */
    tail = end - i;
    if (cost + 3 * (uint64_t)tail > bound)
        tail = (size_t)((bound - cost) / 3);
    m->cost = cost;
    m->settled = i;
    return i + tail > kept ? i + tail - kept : 0;
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

char *json_dump_exact(const json_t *j, size_t flags)
{
    size_t n = json_dumpb(j, NULL, 0, flags);
    char *text;

    if (n == 0)
        return NULL;
    text = malloc(n + 1);
    if (!text)
        return NULL;
    if (json_dumpb(j, text, n, flags) != n) {
        free(text);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

char *nsbox_result_to_json(const struct nsbox_result *r)
{
    json_t *root = result_to_json_object(r);
    char *text;

    if (!root)
        return NULL;
    text = json_dump_exact(root, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(root);
    return text;
}

json_t *result_to_json_object(const struct nsbox_result *r)
{
    json_t *root, *limits, *error = NULL;
    json_t *out_text = stream_text(&r->out), *err_text = stream_text(&r->err);
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
    (void)json_object_set_new(root, "stdout_incomplete", json_boolean(r->out.incomplete));
    (void)json_object_set_new(root, "stderr_incomplete", json_boolean(r->err.incomplete));
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
    {
        /* Who the run is: its --name and --labels (a later KEY wins). */
        json_t *labels = json_object();
        for (char **l = r->labels; labels && l && *l; l++) {
            size_t key_len = strcspn(*l, "=");
            char key[256];
            (void)snprintf(key, sizeof(key), "%.*s", (int)key_len, *l);
            (void)json_object_set_new(labels, key,
                                      json_text((*l)[key_len] ? *l + key_len + 1 : "",
                                                (*l)[key_len] ? strlen(*l + key_len + 1) : 0));
        }
        (void)json_object_set_new(root, "name", r->name[0] ? json_string(r->name) : json_null());
        (void)json_object_set_new(root, "labels", labels ? labels : json_null());
    }
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
    return root;
}
