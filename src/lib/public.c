/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The public entry points (include/nsbox.h) that stand over internal modules for what a caller
 * does besides running: check a config before a run, ask where a run's cgroup would go, check
 * or show a seccomp policy, lease host ids from the pool. The nsbox command reaches the library
 * through these and nsbox.h (HACKING.md, "What the command may include"), so that a C caller gets
 * the same checks; each is a thin wrapper, the work stays in its module.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binds.h"
#include "cgroup.h"
#include "config-check.h"
#include "fileio.h"
#include "filter.h"
#include "macro.h"
#include "netallow.h"
#include "policyfile.h"
#include "supervise.h"
#include "uidpool.h"

int nsbox_config_check(const struct nsbox_config *config, struct nsbox_result *ret)
{
    return config_check(config, ret);
}

int nsbox_network_allow_check(const char *patterns)
{
    struct netallow check = {0};
    int r = netallow_add(&check, patterns);

    netallow_free(&check);
    return r;
}

void nsbox_signal_set(sigset_t *set)
{
    supervise_signal_set(set);
}

int nsbox_cgroup_placement(const struct nsbox_config *config, char *what, size_t size)
{
    return cgroup_placement(config, what, size);
}

int nsbox_config_writable_bind(const struct nsbox_config *config, const struct stat *ids, size_t n)
{
    _cleanup_free_ struct stat *sources = NULL;

    if (config->n_binds == 0)
        return -ENOENT;
    sources = calloc(config->n_binds, sizeof(*sources));
    if (!sources)
        return -ENOMEM;
    if (binds_writable_ids(config->binds, config->n_binds, sources) == 0)
        return -ENOENT;
    for (size_t i = 0; i < n; i++) {
        ssize_t b = stat_find(&ids[i], sources, config->n_binds);
        if (b >= 0)
            return (int)b;
    }
    return -ENOENT;
}

struct warn_relay {
    nsbox_policy_warn_fn warn;
    void *userdata;
};

static void relay_warning(const struct policy_rule *rule, const char *message, void *userdata)
{
    struct warn_relay *w = userdata;

    if (w->warn)
        w->warn(rule->file, rule->line, message, w->userdata);
}

/* The policy at path (NULL: the built-in one) parsed into *ret; on failure its file:line: what
 * in error[size]. */
static int load(const char *path, struct policy *ret, char *error, size_t size)
{
    struct policy_error e = {0};
    int r = policy_load(path, ret, &e);

    if (r < 0)
        policy_error_format(&e, error, size);
    return r;
}

int nsbox_policy_check(const char *path, nsbox_policy_warn_fn warn, void *userdata,
                       struct nsbox_policy_stats *ret, char *error, size_t size)
{
    struct warn_relay relay = {.warn = warn, .userdata = userdata};
    struct policy_error e = {0};
    struct policy policy = {0};
    struct filter f = {0};
    int r;

    *ret = (struct nsbox_policy_stats){0};
    r = load(path, &policy, error, size);
    if (r < 0)
        return r;
    r = filter_compile(&policy, relay_warning, &relay, filter_notify_supported(), &f, &e);
    if (r < 0) {
        policy_error_format(&e, error, size);
        policy_free(&policy);
        return r;
    }
    ret->rules = policy.n_rules;
    ret->filters = f.n_prog;
    for (unsigned i = 0; i < f.n_prog; i++)
        ret->instructions += f.prog[i].n;
    filter_free(&f);
    policy_free(&policy);
    return 0;
}

int nsbox_policy_dump(const char *path, int fd, char *error, size_t size)
{
    struct policy_error e = {0};
    struct policy policy = {0};
    int r = load(path, &policy, error, size);

    if (r < 0)
        return r;
    r = filter_dump(&policy, fd, &e);
    if (r < 0)
        policy_error_format(&e, error, size);
    policy_free(&policy);
    return r;
}

int nsbox_host_ids_lease(uid_t *ret_id, char *detail, size_t size)
{
    int lock = -EBADF, r;
    uid_t id;

    r = uidpool_acquire(&id, &lock, detail, size);
    if (r < 0)
        return r;
    r = uidpool_mark(lock, id, true);
    if (r < 0) {
        (void)snprintf(detail, size, "marking host uid %u in the pool failed: %s", (unsigned)id,
                       strerror(-r));
        (void)close(lock);
        return r;
    }
    *ret_id = id;
    return lock;
}

int nsbox_host_ids_release(int lock_fd, uid_t id)
{
    int r = uidpool_kill_all(id);

    if (r >= 0)
        r = uidpool_mark(lock_fd, id, false);
    (void)close(lock_fd);
    return r;
}
