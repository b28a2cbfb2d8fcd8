/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policy files: the built-in ones (policy/ embedded at build time) and files on disk. */
#pragma once

#include <stddef.h>

#include "policy.h"

struct policy_builtin {
    const char *name; /* relative to policy/: "default.policy", "groups/basic-io.group" */
    const char *text;
    size_t size; /* bytes */
};

/* Generated from policy/ by policy/embed.py; ends with a NULL name. */
extern const struct policy_builtin policy_builtins[];

/* The built-in file called name, or NULL. */
const struct policy_builtin *policy_builtin_find(const char *name);

/*
 * Parse the policy file at path into *ret, or the built-in policy/default.policy when path is
 * NULL. @include names a file relative to the including file's directory; when there is none,
 * a built-in file of that name (so user policies can include nsbox's groups). Built-in files
 * include only built-in files.
 * Returns 0, or -errno as policy_parse() (-ENOENT/-EACCES for an unreadable path), with *e
 * filled; *ret is released on error.
 */
int policy_load(const char *path, struct policy *ret, struct policy_error *e);

/*
 * Parse the built-in policy file name ("default.policy", "network.policy") with its includes,
 * which are built-in files too. Returns 0; -ENOENT when nsbox carries no file of that name;
 * -ENOMEM; or a -errno of policy_parse() (-EINVAL for a syntax error), with *e filled.
 */
int policy_load_builtin(const char *name, struct policy *ret, struct policy_error *e);
