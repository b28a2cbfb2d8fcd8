/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The payload's environment from `nsbox run`'s -e, --env-file and --env-fd (cmd-run-options.h):
 * the values parsed into run_args.env; the merge with the sandbox's own variables is the
 * library's (plan_env()). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd-run-options.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "parse.h"

#define BAD_VALUE(opt, value, what)                                                                \
    log_error_errno(-EINVAL, "invalid value '%s' for %s: %s", value, opt, what)

/* Append one KEY=VALUE entry (malloc()ed; owned by a from now on) to the payload's
 * environment. */
static void env_append(struct run_args *a, char *entry)
{
    a->env = realloc(a->env, (a->n_env + 2) * sizeof(char *));
    if (!a->env)
        log_oom();
    a->env[a->n_env++] = entry;
    a->env[a->n_env] = NULL;
}

/* -e's value, or a line of --env-file: KEY=VALUE, or KEY alone, which takes KEY's value from
 * nsbox's environment (Docker's -e KEY; nothing when it is unset). Returns 0 or -EINVAL. */
int env_add(struct run_args *a, const char *spec)
{
    const char *eq = strchr(spec, '=');
    const char *v = NULL;
    char *entry = NULL;

    if (!env_name_is_valid(spec, eq ? (size_t)(eq - spec) : strlen(spec)))
        return -EINVAL;
    if (eq)
        entry = xstrdup(spec);
    else {
        v = getenv(spec);
        if (!v)
            return 0;
        entry = xmalloc(strlen(spec) + strlen(v) + 2);
        (void)sprintf(entry, "%s=%s", spec, v);
    }
    env_append(a, entry);
    return 0;
}

/* Most bytes --env-file and --env-fd read: more than execve(2) takes in an environment on a
 * default 8 MiB stack (a quarter of it), so no working environment is refused. */
#define ENV_INPUT_MAX (2U << 20)

/*
 * --env-file FILE: Docker's format. Lines of KEY=VALUE, the value taken as it is (no quotes,
 * no escapes, to the end of the line); KEY alone passes nsbox's own as -e KEY does; blank
 * lines and lines starting with '#' are skipped, as is white space before KEY. A value cannot
 * hold a newline: --env-fd can. Returns 0, or -errno after a one-line error with file:line.
 */
int parse_env_file(struct run_args *a, const char *path)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0, line = 0;
    char shown_buf[64];
    int r;

    r = read_regular_file(path, ENV_INPUT_MAX, &buf, &len);
    if (r == -EFBIG)
        return log_error_errno(r, "--env-file %s: larger than %u bytes",
                               shown(path, shown_buf, sizeof(shown_buf)), ENV_INPUT_MAX);
    if (r < 0)
        return log_error_errno(r, "--env-file %s: %m", shown(path, shown_buf, sizeof(shown_buf)));
    if (memchr(buf, '\0', len))
        return log_error_errno(-EINVAL,
                               "--env-file %s: contains a NUL byte (for values with "
                               "any bytes, use --env-fd)",
                               shown(path, shown_buf, sizeof(shown_buf)));
    for (char *p = buf, *next = NULL; p < buf + len; p = next) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));

        next = nl ? nl + 1 : buf + len;
        if (nl)
            *nl = '\0';
        line++;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        if (strcspn(p, " \t=") < strcspn(p, "=") || env_add(a, p) < 0)
            return log_error_errno(-EINVAL, "--env-file %s:%zu: expected KEY=VALUE or KEY",
                                   shown(path, shown_buf, sizeof(shown_buf)), line);
    }
    return 0;
}

/*
 * --env-fd N: KEY=VALUE records each ended by a NUL byte, read to the end of descriptor N (a
 * pipe or a memfd), which is then closed. The value is any bytes but NUL, newlines included,
 * and never touches a disk or a command line: the Python API passes its env= this way, so that
 * variables meant for the program never become nsbox's own environment (LD_PRELOAD in nsbox's
 * environment would run code in nsbox, on the host). Returns 0, or -errno after a one-line
 * error.
 */
int parse_env_fd(struct run_args *a, const char *value)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0, record = 0;
    char *end = NULL;
    long fd;
    int r;

    errno = 0;
    fd = strtol(value, &end, 10);
    if (errno || end == value || *end || fd < 3 || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0)
        return BAD_VALUE("--env-fd", value, "expected an open descriptor above 2, e.g. 3");
    r = read_fd_all((int)fd, ENV_INPUT_MAX, &buf, &len);
    (void)close((int)fd); /* read once; never handed on (not even by --keep-fds) */
    if (r == -EFBIG)
        return log_error_errno(r, "--env-fd %ld: more than %u bytes", fd, ENV_INPUT_MAX);
    if (r < 0)
        return log_error_errno(r, "--env-fd %ld: %m", fd);
    for (char *p = buf; p < buf + len; p += strlen(p) + 1) {
        const char *eq = strchr(p, '=');

        record++;
        if (p + strlen(p) == buf + len)
            return log_error_errno(-EINVAL, "--env-fd %ld: record %zu is not ended by a NUL byte",
                                   fd, record);
        if (!eq || !env_name_is_valid(p, (size_t)(eq - p)))
            return log_error_errno(-EINVAL, "--env-fd %ld: record %zu: expected KEY=VALUE", fd,
                                   record);
        env_append(a, xstrdup(p));
    }
    return 0;
}
