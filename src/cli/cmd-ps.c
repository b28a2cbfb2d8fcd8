/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox ps and nsbox kill: this user's running sandboxes, listed and killed (registry.h). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd-ps.h"
#include "command.h"
#include "log.h"
#include "macro.h"
#include "registry.h"

#define PS_USAGE "usage: nsbox ps [--json] [--filter name=REGEX|id=PREFIX|label=KEY[=VALUE]]..."
#define KILL_USAGE                                                                                 \
    "usage: nsbox kill RUN-ID|NAME | nsbox kill --all | nsbox kill --label KEY[=VALUE]..."

/* nsbox ps [--json] [-f|--filter KEY=VALUE]... */
int ps_main(int argc, char *argv[])
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"filter", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {},
    };
    _cleanup_free_ char **filters = NULL;
    size_t n = 0;
    bool json = false;
    int opt;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:f:h", options, NULL)) != -1)
        switch (opt) {
        case 'j':
            json = true;
            break;
        case 'f':
            filters = realloc(filters, (n + 1) * sizeof(*filters));
            if (!filters)
                log_oom();
            filters[n++] = optarg;
            break;
        case 'h':
            (void)printf("%s\n", PS_USAGE);
            return EXIT_SUCCESS;
        default:
            log_error(PS_USAGE);
            return EXIT_NSBOX_FAILURE;
        }
    if (optind < argc) {
        log_error(PS_USAGE);
        return EXIT_NSBOX_FAILURE;
    }
    return registry_ps(json, filters, n);
}

/* nsbox kill RUN-ID|NAME | --all | --label KEY[=VALUE]... */
int kill_main(int argc, char *argv[])
{
    static const struct option options[] = {
        {"all", no_argument, NULL, 'a'},
        {"label", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {},
    };
    _cleanup_free_ char **labels = NULL;
    size_t n = 0;
    bool all = false;
    int opt;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:h", options, NULL)) != -1)
        switch (opt) {
        case 'a':
            all = true;
            break;
        case 'l':
            labels = realloc(labels, (n + 1) * sizeof(*labels));
            if (!labels)
                log_oom();
            labels[n++] = optarg;
            break;
        case 'h':
            (void)printf("%s\n", KILL_USAGE);
            return EXIT_SUCCESS;
        default:
            log_error(KILL_USAGE);
            return EXIT_NSBOX_FAILURE;
        }
    /* Exactly one way to choose: a run, --all, or labels. */
    if ((optind < argc) + all + (n > 0) != 1 || argc - optind > 1) {
        log_error(KILL_USAGE);
        return EXIT_NSBOX_FAILURE;
    }
    return registry_kill(optind < argc ? argv[optind] : NULL, labels, n);
}
