/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The seccomp policy language (policy/README.md). Pure: no OS calls, no output; files named by
 * @include are fetched through a callback, so the parser runs on strings in tests and fuzzers.
 *
 *   # comment                       to the end of the line, anywhere
 *   @include groups/basic-io.group  one level deep
 *   read                            allow
 *   socket: arg0 == AF_UNIX         allow only when the condition holds
 *   keyctl: return EPERM            refuse with an errno
 *   kexec_load: kill                kill the process
 *   ioctl: return EPERM if arg1 & 0xffffffff == TIOCSTI
 *                                   refuse when the condition holds; otherwise the other
 *                                   lines about the syscall decide
 *
 * A condition is terms joined by "||", each term comparisons joined by "&&":
 * argN [& MASK] OP VALUE with OP one of == != < <= > >= (only == and != with a mask); values are
 * numbers (decimal, 0x hex, 0 octal) or named constants (AF_*, SOCK_*, TIOC*, CLONE_*, PR_*,
 * ...), optionally or-ed: CLONE_NEWNS|CLONE_NEWUSER.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POLICY_MAX_CMP 6 /* comparisons in one term (one per system-call argument) */
#define POLICY_NAME_MAX 64
#define POLICY_MAX_RULES 10000 /* in one policy, includes counted: bounds memory and time */

enum policy_op { POLICY_EQ, POLICY_NE, POLICY_LT, POLICY_LE, POLICY_GT, POLICY_GE };

struct policy_cmp {
    unsigned arg; /* 0..5 */
    enum policy_op op;
    bool masked; /* compare (argN & mask) */
    uint64_t mask;
    uint64_t value;
};

struct policy_term {
    struct policy_cmp cmp[POLICY_MAX_CMP];
    size_t n_cmp;
};

enum policy_action { POLICY_ALLOW, POLICY_ERRNO, POLICY_KILL };

struct policy_rule {
    char name[POLICY_NAME_MAX]; /* system call name as written */
    enum policy_action action;
    int errno_value;           /* POLICY_ERRNO */
    bool refuse_if;            /* "return ERRNO if ..." / "kill if ...": an exception */
    struct policy_term *terms; /* OR of terms; none: unconditional */
    size_t n_terms;
    char file[256]; /* where it was written, for messages */
    unsigned line;
};

struct policy {
    struct policy_rule *rules;
    size_t n_rules;
};

struct policy_error {
    char file[256];
    unsigned line;   /* 1-based; 0 when not about a line */
    unsigned column; /* 1-based; 0 when not about a column */
    char message[256];
};

/*
 * Fetch the text of an included file. name is as written after @include; from_file is the
 * file that includes it. On success, *ret_text (malloc()ed, owned by the caller) holds *ret_len
 * bytes and *ret_file (malloc()ed) the name to use in messages. Returns 0 or a -errno.
 */
typedef int (*policy_include_fn)(const char *name, const char *from_file, char **ret_text,
                                 size_t *ret_len, char **ret_file, void *userdata);

/*
 * Parse len bytes of text (named file in messages) and append its rules to *p. include may be
 * NULL, and then @include is an error.
 * Returns 0; -EINVAL for a syntax error, -E2BIG past POLICY_MAX_RULES rules, -ENOENT (or the
 * callback's error) for an include that cannot be read, -ELOOP for an include inside an included
 * file, -ENOMEM; on error *e is filled with file, line, column and message, and *p may hold the
 * rules read before it.
 */
int policy_parse(const char *text, size_t len, const char *file, policy_include_fn include,
                 void *userdata, struct policy *p, struct policy_error *e);

/* Release the rules of *p; safe on a zeroed or already freed policy. */
void policy_free(struct policy *p);

/* The value of a named constant ("AF_UNIX"); false if the name is unknown. */
bool policy_constant(const char *name, size_t len, uint64_t *ret);

/* The errno value of a name ("EPERM"); false if unknown. */
bool policy_errno(const char *name, size_t len, int *ret);

/* Format e as "file:line:column: message" into buf ("file:line: ", "file: " without them;
 * the message alone for an error about no file). */
void policy_error_format(const struct policy_error *e, char *buf, size_t size);
