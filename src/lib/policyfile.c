/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "policyfile.h"

/* Built-in files are named "policy/NAME" in messages, as in the source tree. */
#define BUILTIN_PREFIX "policy/"
/* Largest policy file read from disk, and all of a policy's files together. */
#define POLICY_FILE_MAX (1 << 20)
#define POLICY_TOTAL_MAX (4 << 20)

const struct policy_builtin *policy_builtin_find(const char *name)
{
    for (const struct policy_builtin *b = policy_builtins; b->name; b++)
        if (strcmp(b->name, name) == 0)
            return b;
    return NULL;
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
    return read_regular_file(path, POLICY_FILE_MAX, ret, ret_len);
}

static int builtin_text(const struct policy_builtin *b, char **ret_text, size_t *ret_len,
                        char **ret_file)
{
    *ret_text = malloc(b->size + 1);
    *ret_file = malloc(strlen(BUILTIN_PREFIX) + strlen(b->name) + 1);
    if (!*ret_text || !*ret_file) {
        free(*ret_text);
        free(*ret_file);
        return -ENOMEM;
    }
    memcpy(*ret_text, b->text, b->size);
    (*ret_text)[b->size] = '\0';
    *ret_len = b->size;
    (void)sprintf(*ret_file, "%s%s", BUILTIN_PREFIX, b->name);
    return 0;
}

struct include_context {
    bool builtin; /* the top file is built in */
    size_t total; /* bytes read so far, against POLICY_TOTAL_MAX */
};

static int include_one(const char *name, const char *from_file, char **ret_text, size_t *ret_len,
                       char **ret_file, void *userdata);

/* The same file may be included many times: the total is bounded, not just each file. */
static int include_file(const char *name, const char *from_file, char **ret_text, size_t *ret_len,
                        char **ret_file, void *userdata)
{
    struct include_context *ctx = userdata;
    int r = include_one(name, from_file, ret_text, ret_len, ret_file, userdata);

    if (r < 0)
        return r;
    ctx->total += *ret_len;
    if (ctx->total > POLICY_TOTAL_MAX) {
        free(*ret_text);
        free(*ret_file);
        return -EFBIG;
    }
    return 0;
}

static int include_one(const char *name, const char *from_file, char **ret_text, size_t *ret_len,
                       char **ret_file, void *userdata)
{
    const struct include_context *ctx = userdata;
    const struct policy_builtin *b;
    const char *slash;
    char *path;
    int r;

    if (!ctx->builtin && name[0] != '/') {
        slash = strrchr(from_file, '/');
        path = malloc((slash ? (size_t)(slash - from_file) + 1 : 0) + strlen(name) + 1);
        if (!path)
            return -ENOMEM;
        (void)sprintf(path, "%.*s%s", slash ? (int)(slash - from_file) + 1 : 0, from_file, name);
        r = read_file(path, ret_text, ret_len);
        if (r != -ENOENT) {
            if (r < 0)
                free(path);
            else
                *ret_file = path;
            return r;
        }
        free(path);
    } else if (!ctx->builtin) {
        r = read_file(name, ret_text, ret_len);
        if (r < 0)
            return r;
        *ret_file = strdup(name);
        if (!*ret_file) {
            free(*ret_text);
            return -ENOMEM;
        }
        return 0;
    }
    b = policy_builtin_find(name);
    if (!b)
        return -ENOENT;
    return builtin_text(b, ret_text, ret_len, ret_file);
}

int policy_load_builtin(const char *name, struct policy *ret, struct policy_error *e)
{
    struct include_context ctx = {.builtin = true};
    const struct policy_builtin *b = policy_builtin_find(name);
    _cleanup_free_ char *text = NULL, *file = NULL;
    size_t len = 0;
    int r;

    *ret = (struct policy){0};
    if (!b) {
        *e = (struct policy_error){0};
        (void)snprintf(e->file, sizeof(e->file), "%s", name);
        (void)snprintf(e->message, sizeof(e->message), "no built-in policy of that name");
        return -ENOENT;
    }
    r = builtin_text(b, &text, &len, &file);
    if (r < 0)
        return r;
    ctx.total = len;
    r = policy_parse(text, len, file, include_file, &ctx, ret, e);
    if (r < 0)
        policy_free(ret);
    return r;
}

int policy_load(const char *path, struct policy *ret, struct policy_error *e)
{
    struct include_context ctx = {.builtin = false};
    _cleanup_free_ char *text = NULL, *file = NULL;
    size_t len = 0;
    int r;

    if (!path)
        return policy_load_builtin("default.policy", ret, e);
    *ret = (struct policy){0};
    r = read_file(path, &text, &len);
    if (r < 0) {
        *e = (struct policy_error){0};
        (void)snprintf(e->file, sizeof(e->file), "%s", path);
        (void)snprintf(e->message, sizeof(e->message), "cannot read the policy: %s",
                       r == -EINVAL ? "not a regular file" : strerror(-r));
        return r;
    }
    file = strdup(path);
    if (!file)
        return -ENOMEM;
    ctx.total = len;
    r = policy_parse(text, len, file, include_file, &ctx, ret, e);
    if (r < 0)
        policy_free(ret);
    return r;
}
