/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stddef.h>
#include <string.h>

#include "command.h"

const struct command *command_find(const struct command *commands, const char *name)
{
    for (const struct command *c = commands; c->name; c++)
        if (c->main && strcmp(c->name, name) == 0)
            return c;
    return NULL;
}
