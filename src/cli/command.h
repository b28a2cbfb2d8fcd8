/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A table of commands: `nsbox COMMAND` (main.c), and the commands that have commands of their
 * own (`nsbox session start|exec|stop|ls`, `nsbox workspace ls|rm|export`, `nsbox policy
 * check|dump`, `nsbox rootfs build|verify`). A new command is a function of its own file and a
 * line in its table.
 */
#pragma once

/* nsbox's exit status when nsbox itself failed, bad arguments included. */
#define EXIT_NSBOX_FAILURE 125

struct command {
    const char *name;
    /* argv[0] is name. Returns the exit status. NULL: another form of the command above, for
     * the usage text only. */
    int (*main)(int argc, char *argv[]);
    /* For a usage text: the arguments after the name (NULL: none), and what the command does
     * ('\n' continues it on the next line). */
    const char *args;
    const char *summary;
};

/* The command of commands (ended by an entry without a name) called name, or NULL. */
const struct command *command_find(const struct command *commands, const char *name);
