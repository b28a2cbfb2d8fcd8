/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The checks of a config that need nothing resolved yet: limits out of range, options that
 * exclude each other. They live in the library, where nsbox_run() applies them to every
 * caller (the command, a C program, the Python API through the command); the command parses
 * argv and leaves the ranges to these. Also the network allowlist file's format
 * (nsbox_network_allow_file()), which the command's --network allow-file= reads with it.
 */
#include <errno.h>
#include <stdlib.h>

#include "config-check.h"
#include "cpus.h"
#include "fileio.h"
#include "macro.h"
#include "netallow.h"
#include "report.h"
#include "sandbox.h"

/* The largest allowlist file: a list of hosts, not a data set. */
#define ALLOW_FILE_MAX (1U << 20)

int config_check(const struct nsbox_config *c, struct nsbox_result *ret)
{
    size_t n_args = 0;
    unsigned usable;

    if (c->argv)
        while (c->argv[n_args])
            n_args++;
    if (!c->code && n_args == 0)
        return report_config_error(ret, -EINVAL, "no program to run (give PROGRAM or --code)");
    if (c->uid == (uid_t)-1 || c->gid == (gid_t)-1)
        return report_config_error(ret, -EINVAL, "uid and gid must not be -1");
    if (c->tmp_size == 0 || c->shm_size == 0)
        return report_config_error(ret, -EINVAL, "tmpfs sizes must be above 0");
    if (c->output_limit > (1ULL << 30))
        return report_config_error(ret, -EINVAL, "the output limit must be at most 1 GiB");
    /* 0 is no limit. */
    if (c->memory && c->memory < NSBOX_MEMORY_MIN)
        return report_config_error(ret, -EINVAL,
                                   "--memory must be at least 6m (6 MiB), e.g. 256m: below it not "
                                   "even "
                                   "a shell starts (%llu bytes given)",
                                   (unsigned long long)c->memory);
    /* More CPUs than this process may run on would be a limit that never binds: refused, as
     * Docker does. */
    usable = cpus_usable();
    if (c->cpus_milli > 1000ULL * usable)
        return report_config_error(ret, -EINVAL,
                                   "--cpus must be at most %u, the number of CPUs nsbox may run on "
                                   "here "
                                   "(%llu.%03llu given)",
                                   usable, (unsigned long long)(c->cpus_milli / 1000),
                                   (unsigned long long)(c->cpus_milli % 1000));
    if (c->network_host && c->network_allow && c->network_allow[0])
        return report_config_error(ret, -EINVAL,
                                   "--network host and --network allow= exclude each other");
    if (c->network_hosts && c->network_hosts[0] && !sandbox_network_allow(c))
        return report_config_error(ret, -EINVAL,
                                   "--add-host names hosts for the proxy of --network allow=, "
                                   "which is "
                                   "not on");
    /* The patterns before anything is made (proxy_new() parses them again for its list). */
    for (char *const *s = c->network_allow; !c->network_host && s && *s; s++) {
        struct netallow check = {0};
        int r = netallow_add(&check, *s);
        netallow_free(&check);
        if (r == -ENOMEM)
            return report_config_error(ret, r, "out of memory");
        if (r < 0)
            return report_config_error(ret, r,
                                       "--network allow: '%s' is not a list of host, *.domain, "
                                       "IPv4 or "
                                       "[IPv6] address patterns with an optional :PORT",
                                       *s);
    }
    if (c->network_max_connections > 1024)
        return report_config_error(ret, -EINVAL, "--network-max-connections must be at most 1024");
    return 0;
}

int nsbox_network_allow_file(const char *path, char **ret_patterns, unsigned *ret_line)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r;

    *ret_line = 0;
    r = read_regular_file(path, ALLOW_FILE_MAX, &text, &len);
    if (r < 0)
        return r; /* -EINVAL: not a regular file */
    r = netallow_file_patterns(text, len, ret_line);
    if (r == -EINVAL)
        return -EBADMSG;
    if (r < 0)
        return r;
    *ret_patterns = TAKE_PTR(text);
    return 0;
}
