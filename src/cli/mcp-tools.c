/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * `nsbox mcp`'s tools (mcp-internal.h): their schemas (python/nsbox/tools.json, embedded at
 * build time: one file for the server and the Python API), their descriptions completed from
 * the operator's configuration, and what a result says: structuredContent with nsbox's verdict
 * and content items for the model -- the text (the wording of the Python API's
 * Result.as_tool_output(), from the JSON result's reason and notes, which result.c words),
 * images (PNG, base64, within MCP_IMAGE_BUDGET) and isError when the code failed.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "macro.h"
#include "mcp-internal.h"
#include "result.h"

extern const char mcp_tools_json[];

#define STREAM_CHARS 20000 /* of each stream in the text; structuredContent has them whole */
#define PACKAGES_MAX 60

int buf_append(struct mcp_buf *b, const char *p, size_t n, size_t cap)
{
    if (b->have + n > cap) {
        b->overflow = true;
        n = cap > b->have ? cap - b->have : 0;
    }
    if (b->have + n + 1 > b->size) {
        size_t size = b->size ? b->size : 4096;
        char *d;
        while (size < b->have + n + 1)
            size *= 2;
        d = realloc(b->data, size);
        if (!d)
            log_oom();
        b->data = d;
        b->size = size;
    }
    memcpy(b->data + b->have, p, n);
    b->have += n;
    b->data[b->have] = '\0';
    return 0;
}

void buf_free(struct mcp_buf *b)
{
    free(b->data);
    *b = (struct mcp_buf){0};
}

/* The network the operator gave the sandboxes, in words for the model. */
static void describe_network(const struct nsbox_config *c, char *buf, size_t size)
{
    size_t n;

    if (c->network_host) {
        (void)snprintf(buf, size, "Network: the host's network.");
        return;
    }
    if (c->network_allow && c->network_allow[0]) {
        n = (size_t)snprintf(buf, size,
                             "Network: only HTTP and HTTPS through a proxy (set in "
                             "HTTP_PROXY/HTTPS_PROXY) to these hosts:");
        for (size_t i = 0; c->network_allow[i] && n < size; i++)
            n += (size_t)snprintf(buf + n, size - n, "%s %s", i ? "," : "", c->network_allow[i]);
        if (n < size)
            (void)snprintf(buf + n, size - n, "; everything else is refused.");
        return;
    }
    if (c->network_loopback) {
        (void)snprintf(buf, size, "Network: only loopback (127.0.0.1, ::1); nothing outside.");
        return;
    }
    (void)snprintf(buf, size,
                   "Network: none (sockets are refused): nothing can be downloaded "
                   "or pip-installed.");
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The Python packages of the rootfs (the top-level names in dist-packages), comma-separated. */
static void describe_packages(const struct nsbox_config *c, char *buf, size_t size)
{
    const char *root = c->rootfs ? c->rootfs : nsbox_default_rootfs();
    _cleanup_free_ char *path = NULL;
    char *names[PACKAGES_MAX];
    size_t k = 0, n = 0;
    struct dirent *e;
    DIR *d;

    buf[0] = '\0';
    if (asprintf(&path, "%s/usr/lib/python3/dist-packages", root) < 0)
        log_oom();
    d = opendir(path);
    if (!d)
        return;
    while ((e = readdir(d)) && k < PACKAGES_MAX) {
        size_t len = strlen(e->d_name);
        const char *dot = strchr(e->d_name, '.');
        if (e->d_name[0] == '_' || e->d_name[0] == '.')
            continue;
        if (dot &&
            !(len > 3 && strcmp(e->d_name + len - 3, ".py") == 0 && dot == e->d_name + len - 3))
            continue;
        names[k] = strndup(e->d_name, dot ? (size_t)(dot - e->d_name) : len);
        if (!names[k])
            log_oom();
        k++;
    }
    (void)closedir(d);
    qsort(names, k, sizeof(char *), compare_names);
    for (size_t i = 0; i < k; i++) {
        if (n < size)
            n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "", names[i]);
        free(names[i]);
    }
}

json_t *mcp_tools_load(const struct nsbox_config *c, const char *copy_out_dir, bool complete)
{
    json_t *root = json_loads(mcp_tools_json, 0, NULL), *tools, *defs, *t, *out;
    char net[1024], pkgs[2048], limits[300], mem[32], tmo[32];
    size_t i;

    tools = json_object_get(root, "tools");
    defs = json_object_get(root, "$defs");
    if (!json_is_array(tools) || !json_is_object(defs)) {
        json_decref(root);
        return NULL;
    }
    describe_network(c, net, sizeof(net));
    describe_packages(c, pkgs, sizeof(pkgs));
    if (c->memory)
        (void)snprintf(mem, sizeof(mem), "%llu MiB", (unsigned long long)(c->memory >> 20));
    else
        (void)snprintf(mem, sizeof(mem), "no limit");
    if (c->timeout)
        (void)snprintf(tmo, sizeof(tmo), "%g s", (double)c->timeout / 1e6);
    else
        (void)snprintf(tmo, sizeof(tmo), "no limit");
    (void)snprintf(limits, sizeof(limits),
                   "timeout %s, memory %s, %llu MiB of files in /work; output kept: %llu bytes "
                   "per stream.",
                   tmo, mem, (unsigned long long)(c->workdir_size >> 20),
                   (unsigned long long)c->output_limit);
    out = json_array();
    if (!out)
        log_oom();
    json_array_foreach(tools, i, t) {
        json_t *copy = json_deep_copy(t), *os = json_object_get(copy, "outputSchema");
        const char *ref = json_string_value(json_object_get(os, "$ref"));
        const char *name = json_string_value(json_object_get(copy, "name"));
        const char *desc = json_string_value(json_object_get(copy, "description"));

        if (!copy || !name || !desc) {
            json_decref(copy);
            json_decref(out);
            json_decref(root);
            return NULL;
        }
        /* Code that may reach hosts outside (--network allow=, host) acts on the world outside
         * (MCP's openWorldHint); loopback is the sandbox's own. */
        if (json_is_object(json_object_get(copy, "annotations")) &&
            strncmp(name, "session_", 8) != 0)
            (void)json_object_set_new(json_object_get(copy, "annotations"), "openWorldHint",
                                      json_boolean(c->network_host ||
                                                   (c->network_allow && c->network_allow[0])));
        /* One definition of the result, written once in the file, whole in each tool. */
        if (ref && strncmp(ref, "#/$defs/", 8) == 0)
            (void)json_object_set_new(copy, "outputSchema",
                                      json_deep_copy(json_object_get(defs, ref + 8)));
        if (complete && strncmp(name, "session_", 8) != 0) {
            _cleanup_free_ char *text = NULL;
            /* A session's memory is fixed when it starts: its steps ask for less time only. */
            if (asprintf(&text, "%s %s Limits of each call (a call may ask for less %s): %s%s%s%s",
                         desc, net, strcmp(name, "python_session") == 0 ? "time" : "time or memory",
                         limits,
                         copy_out_dir && strcmp(name, "python_session") != 0
                             ? " Files written below /work/out are handed to the user when "
                               "the call ends (linked in the result)."
                             : "",
                         pkgs[0] ? " Python packages besides the standard library: " : "",
                         pkgs[0] ? pkgs : "") < 0)
                log_oom();
            if (pkgs[0] && text[strlen(text) - 1] != '.') {
                char *t2 = NULL;
                if (asprintf(&t2, "%s.", text) < 0)
                    log_oom();
                free(text);
                text = t2;
            }
            (void)json_object_set_new(copy, "description", json_string(text));
        }
        (void)json_array_append_new(out, copy);
    }
    json_decref(root);
    return out;
}

#define TEXT_CAP (1U << 30) /* no cap of its own: the parts are bounded */

static void put(struct mcp_buf *b, const char *s)
{
    (void)buf_append(b, s, strlen(s), TEXT_CAP);
}

/* A file: URI of an absolute host path (RFC 8089): bytes outside RFC 3986's unreserved
 * characters and '/' percent-encoded. */
static char *file_uri(const char *path)
{
    struct mcp_buf b = {0};
    char esc[4];

    put(&b, "file://");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/", *p))
            (void)buf_append(&b, (const char *)p, 1, TEXT_CAP);
        else {
            (void)snprintf(esc, sizeof(esc), "%%%02X", *p);
            put(&b, esc);
        }
    }
    return b.data;
}

/* The MIME type of a file copied out, by its name's extension; NULL when unknown. */
static const char *mime_type(const char *path)
{
    static const char *const types[][2] = {
        {".png", "image/png"},  {".jpg", "image/jpeg"},    {".jpeg", "image/jpeg"},
        {".gif", "image/gif"},  {".svg", "image/svg+xml"}, {".pdf", "application/pdf"},
        {".csv", "text/csv"},   {".txt", "text/plain"},    {".json", "application/json"},
        {".html", "text/html"}, {".md", "text/markdown"},  {".py", "text/x-python"},
    };
    const char *dot = strrchr(path, '.');

    for (size_t i = 0; dot && i < ELEMENTSOF(types); i++)
        if (strcasecmp(dot, types[i][0]) == 0)
            return types[i][1];
    return NULL;
}

/* --copy-out-dir: a resource_link for each file copied out of /work/out (r's copy_out), and
 * the same in structuredContent's files_copied_out. */
static void copied_out(json_t *r, json_t *content, json_t *sc, struct mcp_buf *text)
{
    json_t *files = json_array(), *v;
    size_t i;

    if (!files)
        log_oom();
    json_array_foreach(json_object_get(json_object_get(r, "copy_out"), "copied"), i, v) {
        const char *path = json_string_value(json_object_get(v, "path"));
        const char *host = json_string_value(json_object_get(v, "host_path"));
        const char *mime;
        _cleanup_free_ char *uri = NULL;
        json_t *link;
        if (!path || !host || host[0] != '/')
            continue;
        uri = file_uri(host);
        mime = mime_type(path);
        link = json_pack("{s:s,s:s,s:s,s:O}", "type", "resource_link", "uri", uri, "name",
                         strncmp(path, "/work/", 6) == 0 ? path + 6 : path, "size",
                         json_object_get(v, "size"));
        if (!link)
            log_oom();
        if (mime)
            (void)json_object_set_new(link, "mimeType", json_string(mime));
        (void)json_array_append_new(content, link);
        (void)json_array_append_new(files, json_pack("{s:s,s:s,s:O,s:O}", "path", path, "uri", uri,
                                                     "size", json_object_get(v, "size"), "sha256",
                                                     json_object_get(v, "sha256")));
        put(text, json_array_size(files) == 1 ? "\n[copied out for the user: " : ", ");
        put(text, strncmp(path, "/work/", 6) == 0 ? path + 6 : path);
    }
    if (json_array_size(files))
        put(text, "]");
    (void)json_object_set_new(sc, "files_copied_out", files);
}

json_t *mcp_error_result(const struct mcp_call *c, const char *text)
{
    (void)c;
    /* text may quote a program's stderr or a path: any bytes, made UTF-8. */
    return json_pack("{s:[{s:s,s:o}],s:b}", "content", "type", "text", "text",
                     json_text(text, strlen(text)), "isError", 1);
}

json_t *mcp_note_result(const struct mcp_call *c, const char *status, const char *text,
                        const char *session)
{
    (void)c;
    return json_pack("{s:[{s:s,s:s}],s:{s:s,s:s,s:[],s:s,s:n,s:n},s:b}", "content", "type", "text",
                     "text", text, "structuredContent", "status", status, "reason", text, "notes",
                     "session", session, "exit_code", "error", "isError", 0);
}

json_t *mcp_run_result(const struct mcp_call *c, json_t *r)
{
    static const char *const keep[] = {"stdout_tail",
                                       "stderr_tail",
                                       "stdout_cut",
                                       "stderr_cut",
                                       "status",
                                       "exit_code",
                                       "signal",
                                       "reason",
                                       "limit",
                                       "error",
                                       "stdout",
                                       "stderr",
                                       "stdout_truncated",
                                       "stderr_truncated",
                                       "wall_time_ms",
                                       "files_written",
                                       "interpreter"};
    json_t *sc = json_object(), *notes = json_array(), *content = json_array(), *v;
    const char *status = json_string_value(json_object_get(r, "status"));
    const char *reason = json_string_value(json_object_get(r, "reason"));
    json_int_t code = json_integer_value(json_object_get(r, "exit_code"));
    bool ok = status && strcmp(status, "exited") == 0 && code == 0;
    struct mcp_buf text = {0};
    size_t i, image_bytes = 0, images_left_out = 0;
    char line[200];

    if (!sc || !notes || !content)
        log_oom();
    for (i = 0; i < ELEMENTSOF(keep); i++)
        if ((v = json_object_get(r, keep[i])))
            (void)json_object_set(sc, keep[i], v);
    if (!json_object_get(sc, "files_written"))
        (void)json_object_set_new(sc, "files_written", json_array());
    if (!json_object_get(sc, "reason"))
        (void)json_object_set_new(sc, "reason", json_null());
    /* nsbox's own failure is a string in "error" (status "error"). */
    if (!json_object_get(sc, "status"))
        (void)json_object_set_new(sc, "status", json_string("error"));
    (void)json_object_set_new(sc, "timeout", c->timeout > 0 ? json_real(c->timeout) : json_null());
    if (c->session_name[0])
        (void)json_object_set_new(sc, "session", json_string(c->session_name));

    /* The notes: the call's own (a limit lowered), nsbox's, the warnings that explain the
     * outcome. */
    if (c->clamp_note[0])
        (void)json_array_append_new(notes, json_string(c->clamp_note));
    json_array_foreach(json_object_get(r, "notes"), i, v)
        if (json_is_string(v))
            (void)json_array_append(notes, v);
    /* nsbox says which warnings those are (the others are about the host, which the model
     * cannot change): "outcome_warnings", as the Python API's as_tool_output(). */
    json_array_foreach(json_object_get(r, "outcome_warnings"), i, v)
        if (json_is_string(v))
            (void)json_array_append(notes, v);
    (void)json_object_set(sc, "notes", notes);

    /* The text: Result.as_tool_output()'s (its notes: the call's, nsbox's, the streams' cuts
     * for this text, the warnings that explain the outcome). */
    {
        char *so_note = NULL, *se_note = NULL;
        char *so = mcp_stream_text(r, "stdout", STREAM_CHARS, &so_note);
        char *se = mcp_stream_text(r, "stderr", STREAM_CHARS, &se_note);
        json_t *text_notes = json_array(), *w;
        size_t k;

        if (!text_notes)
            log_oom();
        if (c->clamp_note[0])
            (void)json_array_append_new(text_notes, json_string(c->clamp_note));
        json_array_foreach(json_object_get(r, "notes"), k, w)
            if (json_is_string(w)) {
                _cleanup_free_ char *words = mcp_api_words(json_string_value(w));
                (void)json_array_append_new(text_notes, json_string(words));
            }
        if (so_note)
            (void)json_array_append_new(text_notes, json_string(so_note));
        if (se_note)
            (void)json_array_append_new(text_notes, json_string(se_note));
        json_array_foreach(json_object_get(r, "outcome_warnings"), k, w)
            if (json_is_string(w))
                (void)json_array_append(text_notes, w);
        /* The outputs' text (a last expression's value, display()), as as_tool_output() shows
         * it after stdout; their images come as image items below. */
        struct mcp_buf outs = {0};
        json_array_foreach(json_object_get(r, "outputs"), k, w) {
            json_t *data = json_object_get(w, "data");
            json_t *plain = json_object_get(data, "text/plain");
            if (json_object_get(data, "image/png") || json_object_get(data, "image/jpeg") ||
                !json_is_string(plain) || json_string_length(plain) == 0)
                continue;
            if (outs.have)
                put(&outs, "\n");
            put(&outs, json_string_value(plain));
        }
        if (ok && !se[0] && json_array_size(text_notes) == 0) {
            size_t n = strlen(so);
            if (n && outs.have) {
                (void)buf_append(&text, so, so[n - 1] == '\n' ? n - 1 : n, TEXT_CAP);
                put(&text, "\n");
            } else if (n)
                put(&text, so);
            if (outs.have)
                (void)buf_append(&text, outs.data, outs.have, TEXT_CAP);
            if (!n && !outs.have)
                put(&text, "(no output)");
        } else {
            if (reason && reason[0])
                put(&text, reason);
            else {
                (void)snprintf(line, sizeof(line), "status %s, exit status %lld",
                               status ? status : "error", (long long)code);
                put(&text, line);
            }
            for (int t = 0; t < 3; t++) {
                const char *st = t == 0 ? so : t == 1 ? (outs.data ? outs.data : "") : se;
                size_t n = t == 1 ? outs.have : strlen(st);
                if (!n)
                    continue;
                put(&text, t == 0 ? "\n[stdout]\n" : t == 1 ? "\n[outputs]\n" : "\n[stderr]\n");
                (void)buf_append(&text, st, st[n - 1] == '\n' ? n - 1 : n, TEXT_CAP);
            }
            if (!so[0] && !se[0] && !outs.have)
                put(&text, "\n[no output]");
            json_array_foreach(text_notes, k, w) {
                put(&text, "\n[");
                put(&text, json_string_value(w));
                put(&text, "]");
            }
        }
        json_decref(text_notes);
        buf_free(&outs);
        free(so);
        free(se);
        free(so_note);
        free(se_note);
    }
    if (json_is_object(json_object_get(r, "copy_out")))
        copied_out(r, content, sc, &text);
    (void)json_array_insert_new(content, 0,
                                json_pack("{s:s,s:s%}", "type", "text", "text",
                                          text.data ? text.data : "", text.have));
    buf_free(&text);

    /* Rich outputs (Jupyter's MIME bundles): the results' text, and PNGs as images. */
    json_array_foreach(json_object_get(r, "outputs"), i, v) {
        json_t *data = json_object_get(v, "data");
        json_t *png = json_object_get(data, "image/png");
        if (json_is_string(png)) {
            if (image_bytes + json_string_length(png) > MCP_IMAGE_BUDGET) {
                images_left_out++;
                continue;
            }
            image_bytes += json_string_length(png);
            (void)json_array_append_new(content, json_pack("{s:s,s:O,s:s}", "type", "image", "data",
                                                           png, "mimeType", "image/png"));
        }
    }
    if (images_left_out) {
        (void)snprintf(line, sizeof(line),
                       "[%zu image(s) left out: the images of one result are at most %u MiB "
                       "(base64)]",
                       images_left_out, MCP_IMAGE_BUDGET >> 20);
        (void)json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", line));
        (void)json_array_append_new(notes, json_string(line));
    }
    json_decref(notes);
    return json_pack("{s:o,s:o,s:b}", "content", content, "structuredContent", sc, "isError", !ok);
}

json_t *mcp_file_result(const struct mcp_call *c, json_t *r)
{
    const char *out = json_string_value(json_object_get(r, "stdout"));
    const char *status = json_string_value(json_object_get(r, "status"));
    json_t *v, *j = out ? json_loadb(out, json_string_length(json_object_get(r, "stdout")),
                                     JSON_ALLOW_NUL, NULL)
                        : NULL;
    const char *err;
    struct mcp_buf text = {0};
    char line[600];
    size_t i;
    json_t *res;

    if (!json_is_object(j)) {
        /* The step did not end as the script does (its timeout, the session's end). */
        json_decref(j);
        (void)snprintf(line, sizeof(line), "the file step failed: %s",
                       json_string_value(json_object_get(r, "reason"))
                           ? json_string_value(json_object_get(r, "reason"))
                       : status ? status
                                : "no answer");
        return mcp_error_result(c, line);
    }
    err = json_string_value(json_object_get(j, "error"));
    if (err) {
        (void)snprintf(line, sizeof(line), "%s: %s",
                       json_string_value(json_object_get(j, "path"))
                           ? json_string_value(json_object_get(j, "path"))
                           : "",
                       err);
        put(&text, line);
    } else if (c->tool == TOOL_LIST_FILES) {
        json_array_foreach(json_object_get(j, "entries"), i, v) {
            (void)snprintf(line, sizeof(line), "%s%s%s (%lld bytes)\n",
                           json_string_value(json_object_get(v, "path")),
                           strcmp(json_string_value(json_object_get(v, "type")) ?: "",
                                  "directory") == 0
                               ? "/"
                               : "",
                           "", (long long)json_integer_value(json_object_get(v, "size")));
            put(&text, line);
        }
        if (json_array_size(json_object_get(j, "entries")) == 0)
            put(&text, "(no files)");
        if (json_is_true(json_object_get(j, "truncated")))
            put(&text, "[the list is cut at 1000 entries]");
    } else if (c->tool == TOOL_READ_FILE) {
        const char *enc = json_string_value(json_object_get(j, "encoding"));
        if (enc && strcmp(enc, "base64") == 0) {
            (void)snprintf(line, sizeof(line),
                           "%s is not UTF-8 text (%lld bytes); its content is in "
                           "structuredContent.content, base64",
                           json_string_value(json_object_get(j, "path")),
                           (long long)json_integer_value(json_object_get(j, "size")));
            put(&text, line);
        } else {
            const char *s = json_string_value(json_object_get(j, "content"));
            (void)buf_append(&text, s ? s : "",
                             s ? json_string_length(json_object_get(j, "content")) : 0, TEXT_CAP);
        }
        if (json_is_true(json_object_get(j, "truncated")))
            put(&text, "\n[cut: the file is longer than max_bytes]");
    } else {
        (void)snprintf(line, sizeof(line), "wrote %lld bytes to %s",
                       (long long)json_integer_value(json_object_get(j, "size")),
                       json_string_value(json_object_get(j, "path")));
        put(&text, line);
    }
    /* Lines cut with snprintf() may end inside a character: json_text() makes it UTF-8. */
    res = json_pack("{s:[{s:s,s:o}],s:O,s:b}", "content", "type", "text", "text",
                    json_text(text.data ? text.data : "", text.have), "structuredContent", j,
                    "isError", err != NULL);
    buf_free(&text);
    json_decref(j);
    return res;
}
