/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The payload of a run: a program, --code's script, or --cell's notebook cell (cell.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cell.h"
#include "macro.h"
#include "outputs.h"

static const char *cell_config_error(const struct nsbox_config *c)
{
    if (!c->code)
        return "--cell runs Python code: give --code";
    if (c->keep_fds)
        return "--cell and --keep-fds exclude each other (a cell's outputs channel is the "
               "payload's fd 4, which --keep-fds leaves to the caller)";
    if (c->outputs_limit > (1ULL << 30))
        return "--outputs-limit must be at most 1 GiB";
    return NULL;
}

int cell_plan_payload(const struct nsbox_config *c, size_t n_args, char ***ret_argv,
                      int *ret_outputs_fd, const char **ret_why)
{
    char limit[24];
    const char *cell_head[] = {"python3", "-c", cell_run, limit, "/work/main.py"};
    const char *code_head[] = {"python3", "/work/main.py"};
    const char **head = c->cell ? cell_head : c->code ? code_head : NULL;
    size_t n_head = c->cell ? ELEMENTSOF(cell_head) : c->code ? ELEMENTSOF(code_head) : 0;
    char **argv;
    int fd;

    if (c->cell && (*ret_why = cell_config_error(c)))
        return -EINVAL;
    (void)snprintf(limit, sizeof(limit), "%llu",
                   (unsigned long long)(c->outputs_limit ? c->outputs_limit
                                                         : OUTPUTS_LIMIT_DEFAULT));
    argv = *ret_argv = calloc(n_head + n_args + 1, sizeof(char *));
    if (!argv)
        return -ENOMEM;
    for (size_t i = 0; i < n_head + n_args; i++)
        if (!(argv[i] = strdup(i < n_head ? head[i] : c->argv[i - n_head])))
            return -ENOMEM;
    if (!c->cell)
        return 0;
    /* The cell's outputs channel: the payload's fd 4, read by the supervisor at the end. */
    fd = memfd_create("nsbox-outputs", MFD_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    *ret_outputs_fd = fd;
    return 0;
}
