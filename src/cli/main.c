/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The nsbox command: argv[1] names a command of commands[], which its own file runs. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <jansson.h>

#include "cmd-policy.h"
#include "cmd-ps.h"
#include "cmd-run.h"
#include "cmd-pool.h"
#include "cmd-session.h"
#include "cmd-workspace.h"
#include "command.h"
#include "config.h"
#include "cmd-doctor.h"
#include "cmd-mcp.h"
#include "log.h"
#include "cmd-rootfs.h"
#include "cmd-selftest.h"

/* Every command, in the order `nsbox --help` lists them. */
static const struct command commands[] = {
    {.name = "run",
     .main = run_main,
     .summary = "run a program or Python code in a sandbox (nsbox run --help)"},
    {.name = "workspace",
     .main = workspace_main,
     .args = "ls | rm NAME | export NAME DIR",
     .summary = "list, remove or copy out this user's workspaces"},
    {.name = "ps",
     .main = ps_main,
     .args = "[--json] [--filter name=REGEX|id=PREFIX|label=KEY[=VALUE]]...",
     .summary = "list this user's running sandboxes"},
    {.name = "kill",
     .main = kill_main,
     .args = "RUN-ID|NAME | --all | --label KEY[=VALUE]...",
     .summary = "kill this user's sandboxes (their result says \"killed\")"},
    {.name = "session",
     .main = session_main,
     .args = "start|exec|stop|ls ...",
     .summary = "one live sandbox for many steps (nsbox session --help)"},
    {.name = "pool",
     .main = pool_main,
     .args = "start|ls|status|stop ...",
     .summary = "sandboxes started ahead, each for one run (nsbox pool --help)"},
    {.name = "mcp",
     .main = mcp_main,
     .args = "[RUN OPTIONS] [--copy-out-dir DIR] | --print-tools mcp|openai|anthropic",
     .summary = "serve the sandbox as an MCP server on stdio (nsbox mcp --help)"},
    {.name = "doctor",
     .main = doctor_main,
     .args = "[--rootfs DIR]",
     .summary = "check that nsbox can work on this host, and explain what is missing"},
    {.name = "selftest",
     .main = selftest_main,
     .args = "[--ablate] [--control] [--json] [--only NAMES] [--rootfs DIR]",
     .summary = "attack a sandbox on this host and show each attack blocked (and, with\n"
                "--ablate, succeeding when its protection is removed)"},
    {.name = "rootfs",
     .main = rootfs_main,
     .args = "build [--profile minimal|science] [--packages P,...] [--suite S] DIR",
     .summary = "build a root filesystem with mmdebstrap (nsbox rootfs --help)"},
    {.name = "rootfs",
     .args = "verify DIR",
     .summary = "check that a root filesystem's programs find their libraries and that\n"
                "its profile's imports work in a sandbox"},
    {.name = "policy",
     .main = policy_main,
     .args = "check FILE",
     .summary = "parse and compile a seccomp policy, report its errors and warnings"},
    {.name = "policy",
     .args = "dump [FILE]",
     .summary = "print the compiled filters of FILE (default: the built-in policy)"},
    {},
};

/* Where the summaries start in the usage text. */
#define SUMMARY_COLUMN 13

static void usage(FILE *f)
{
    fputs("Usage: nsbox COMMAND [OPTIONS]\n"
          "\n"
          "Commands:\n",
          f);
    for (const struct command *c = commands; c->name; c++) {
        /* "  NAME ARGS", then the summary at SUMMARY_COLUMN: on the same line when that leaves
         * a space, else on the next; each '\n' in the summary starts a line there again. */
        int used = fprintf(f, "  %s%s%s", c->name, c->args ? " " : "", c->args ? c->args : "");
        const char *s = c->summary;

        if (used < 0 || used >= SUMMARY_COLUMN - 1) {
            (void)fputc('\n', f);
            used = 0;
        }
        for (;;) {
            size_t len = strcspn(s, "\n");

            (void)fprintf(f, "%*s%.*s\n", SUMMARY_COLUMN - used, "", (int)len, s);
            if (!s[len])
                break;
            s += len + 1;
            used = 0;
        }
    }
    fputs("\n"
          "Options:\n"
          "  -h, --help     show this help\n"
          "  --version      show the version\n",
          f);
}

int main(int argc, char *argv[])
{
    const struct command *c;

    /* A caller that ignores SIGCHLD (a server's SIG_IGN, inherited across execve(2)) would have
     * the kernel reap nsbox's children, whose exit status nsbox needs (signal(7)). */
    (void)signal(SIGCHLD, SIG_DFL);

    /* Descriptors 0-2 must be open, or nsbox's own pipes would land on them. */
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd)
            return EXIT_NSBOX_FAILURE;

    /* jansson seeds its hash function on first use by reading /dev/urandom (an open, a read
     * and a close in every run); from getrandom(2) here it costs one call. Zero would ask
     * jansson to seed itself (json_object_seed(3)). */
    {
        size_t seed = 0;
        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed) && seed != 0)
            json_object_seed(seed);
    }

    if (argc < 2) {
        usage(stderr);
        return EXIT_NSBOX_FAILURE;
    }
    if (strcmp(argv[1], "--version") == 0) {
        (void)printf("nsbox %s\n", NSBOX_VERSION);
        return EXIT_SUCCESS;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return EXIT_SUCCESS;
    }
    c = command_find(commands, argv[1]);
    if (c)
        return c->main(argc - 1, argv + 1);

    log_error("unknown command '%s' (see 'nsbox --help')", argv[1]);
    return EXIT_NSBOX_FAILURE;
}
