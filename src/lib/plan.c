/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Validate a run's config and plan its sandbox, in the supervisor, before anything is made
 * (plan.h). plan_sandbox() calls each step in order: the run's name and labels; the config's
 * checks; the payload's argv (cell.h) and environment; the mounts (mount-plan.c) and the mount
 * points the rootfs lacks; the --user's passwd and group lines (ids-plan.c); the copy-in
 * stream packed and the copy-out directories and the workspace opened (copy-plan.c); the host
 * ids (ids-plan.c); a warning for every protection the config removes; the seccomp filter.
 * The cgroup leaf or the rlimit fallback is planned after it (plan_cgroup(), cgroup.c).
 * Errors go into the result (report_error()), warnings too (report_warning()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell.h"
#include "config-check.h"
#include "copy.h"
#include "cpus.h"
#include "filter.h"
#include "idfiles.h"
#include "macro.h"
#include "mount.h"
#include "parse.h"
#include "plan.h"
#include "policyfile.h"
#include "proxy.h"
#include "report.h"
#include "uidpool.h"

void plan_free(struct sandbox_plan *sb)
{
    if (sb->argv)
        for (char **a = sb->argv; *a; a++)
            free(*a);
    free(sb->argv);
    if (sb->envp)
        for (char **e = sb->envp; *e; e++)
            free(*e);
    free(sb->envp);
    /* calloc()ed with room for every bind and tmpfs and /tmp: unused entries are NULL. */
    for (size_t i = 0; sb->mounts && i < sb->config->n_binds + sb->config->n_tmpfs + 1; i++)
        free(sb->mounts[i].source_owned);
    free(sb->mounts);
    free(sb->passwd);
    free(sb->group);
    filter_free(&sb->filter);
    if (sb->copy_in_fd >= 0)
        (void)close(sb->copy_in_fd);
    if (sb->copy_out_fd >= 0)
        (void)close(sb->copy_out_fd);
    sb->copy_in_fd = sb->copy_out_fd = -EBADF;
    if (sb->outputs_fd >= 0)
        (void)close(sb->outputs_fd);
    sb->outputs_fd = -EBADF;
    for (size_t i = 0; sb->out_fds && i < sb->n_out; i++)
        if (sb->out_fds[i] >= 0)
            (void)close(sb->out_fds[i]);
    free(sb->out_fds);
    free(sb->out_host_paths);
    for (size_t i = 0; sb->out_shown && i < sb->n_out; i++)
        free((char *)sb->out_shown[i]);
    free(sb->out_shown);
    sb->out_fds = NULL;
    sb->out_host_paths = sb->out_shown = NULL;
    if (sb->ws.base_fd >= 0 && sb->ws_staging[0])
        (void)copy_remove_tree(sb->ws.base_fd, sb->ws_staging);
    workspace_close(&sb->ws);
    if (sb->host_ids_lock >= 0)
        (void)close(sb->host_ids_lock); /* the host ids go back to the pool */
    sb->host_ids_lock = -EBADF;
}

/* The payload's environment: with env_inherit the caller's environ(7) (entries that are not
 * KEY=VALUE skipped), then the fixed base, then config->env, where a later KEY wins. The base
 * holds the thread counts of the CPUs the sandbox is pinned to (cpus.c), so a -e wins. */
int plan_env(struct sandbox_plan *sb, struct nsbox_result *ret)
{
    /* PYTHONUNBUFFERED: Python writes its output as it prints it, so what a payload printed
     * before a timeout or a kill reaches the result instead of dying in its buffer; `-e
     * PYTHONUNBUFFERED=` (empty: off, python(1)) buffers again. */
    char threads[3][48];
    const char *base[4 + ELEMENTSOF(threads) + ELEMENTSOF(proxy_env)] = {"PATH=" SANDBOX_PATH,
                                                                         "HOME=/tmp",
                                                                         "LANG=C.UTF-8",
                                                                         "PYTHONUNBUFFERED=1"};
    const struct nsbox_config *c = sb->config;
    const unsigned ncpus = cpus_count(c->cpus_milli);
    size_t n_base = 4;

    if (ncpus) /* --cpus unlimited: no counts */
        for (size_t i = 0; i < ELEMENTSOF(threads); i++)
            base[n_base++] = threads[i];
    if (sandbox_network_allow(c))
        for (size_t i = 0; i < ELEMENTSOF(proxy_env); i++)
            base[n_base++] = proxy_env[i];
    size_t n_inherited = 0, n_extra = 0, n = 0;

    (void)snprintf(threads[0], sizeof(threads[0]), "OPENBLAS_NUM_THREADS=%u", ncpus);
    (void)snprintf(threads[1], sizeof(threads[1]), "OMP_NUM_THREADS=%u", ncpus);
    (void)snprintf(threads[2], sizeof(threads[2]), "MKL_NUM_THREADS=%u", ncpus);

    if (c->env_inherit)
        while (environ[n_inherited])
            n_inherited++;
    if (c->env)
        while (c->env[n_extra])
            n_extra++;
    sb->envp = calloc(n_inherited + n_base + n_extra + 1, sizeof(char *));
    if (!sb->envp)
        return report_error(ret, -ENOMEM, "environment", "out of memory");

    for (size_t i = 0; i < n_inherited + n_base + n_extra; i++) {
        const char *kv = i < n_inherited            ? environ[i]
                         : i < n_inherited + n_base ? base[i - n_inherited]
                                                    : c->env[i - n_inherited - n_base];
        const char *eq = strchr(kv, '=');
        size_t key_len;
        size_t j;

        if (i < n_inherited && (!eq || !env_name_is_valid(kv, (size_t)(eq - kv))))
            continue;
        if (!eq || !env_name_is_valid(kv, (size_t)(eq - kv)))
            return report_error(ret, -EINVAL, "environment", "invalid environment entry '%s'", kv);
        key_len = (size_t)(eq - kv) + 1;
        for (j = 0; j < n; j++)
            if (strncmp(sb->envp[j], kv, key_len) == 0)
                break;
        if (j < n)
            free(sb->envp[j]);
        else
            n++;
        sb->envp[j] = strdup(kv);
        if (!sb->envp[j])
            return report_error(ret, -ENOMEM, "environment", "out of memory");
        if (strncmp(kv, "PATH=", 5) == 0)
            sb->path = sb->envp[j] + 5;
    }
    return 0;
}

struct warn_context {
    const struct nsbox_config *config;
    struct nsbox_result *result;
};

static void warn_policy(const struct policy_rule *rule, const char *message, void *userdata)
{
    struct warn_context *w = userdata;
    report_warning(w->config, w->result, "%s:%u: %s", rule->file, rule->line, message);
}

static int plan_filter(struct sandbox_plan *sb, struct nsbox_result *ret)
{
    struct policy policy = {0};
    struct policy_error e = {0};
    char where[512];
    int r;

    if (sb->config->seccomp_disabled)
        return 0;
    if (!sb->config->seccomp_policy) {
        /* The built-in ones, compiled at build time. */
        bool notify = filter_notify_supported();
        if (sb->config->network_host || sb->config->network_loopback ||
            sandbox_network_allow(sb->config))
            sb->filter = notify ? filter_network_notify : filter_network;
        else
            sb->filter = notify ? filter_default_notify : filter_default;
        return 0;
    }
    r = policy_load(sb->config->seccomp_policy, &policy, &e);
    if (r >= 0) {
        /* Unknown names are warnings in a user's policy (nsbox's own is checked when it is
         * built). */
        struct warn_context w = {sb->config, ret};
        r = filter_compile(&policy, warn_policy, &w, filter_notify_supported(), &sb->filter, &e);
        policy_free(&policy);
    }
    if (r < 0) {
        policy_error_format(&e, where, sizeof(where));
        return report_error(ret, r, "seccomp", "%s", where);
    }
    return 0;
}

/* Every protection the config removes is said out loud, before the payload starts. */
void plan_opt_out_warnings(const struct nsbox_config *c, struct nsbox_result *ret)
{
    if (c->seccomp_disabled)
        report_warning(c, ret,
                       "--no-seccomp: the payload runs without a seccomp filter; never use "
                       "this for untrusted code");
    if (c->network_host)
        report_warning(c, ret,
                       "--network host: the payload shares the host's network and its "
                       "abstract unix sockets%s",
                       c->seccomp_policy || c->seccomp_disabled
                           ? ""
                           : " (built-in policy network.policy: internet sockets allowed)");
    if (c->pid_host)
        report_warning(c, ret,
                       "--pid host: the payload sees every host process and can signal "
                       "those of its host uid (for root's sandboxes: only its own, unless "
                       "--host-user shares one), and what it starts in the background can "
                       "outlive the run (root's, with ids of its own: they are killed at "
                       "the end)");
    if (c->ipc_host)
        report_warning(c, ret,
                       "--ipc host: the payload shares the host's System V IPC and POSIX "
                       "message queues");
    if (c->env_inherit)
        report_warning(c, ret,
                       "--env-inherit: the payload gets nsbox's whole environment, "
                       "secrets included");
    if (c->keep_fds)
        report_warning(c, ret, "--keep-fds: descriptors nsbox inherited reach the payload");
}

/* The run's name and labels, checked and copied into the result. */
int plan_identity(const struct nsbox_config *c, struct nsbox_result *ret)
{
    size_t n = 0, key_len;

    if (c->name && !run_name_is_valid(c->name))
        return report_config_error(ret, -EINVAL,
                                   "invalid name '%s': expected [a-zA-Z0-9][a-zA-Z0-9_.-]*, at "
                                   "most %d "
                                   "bytes",
                                   c->name, NSBOX_NAME_MAX);
    if (c->name)
        (void)snprintf(ret->name, sizeof(ret->name), "%s", c->name);
    if (!c->labels || !c->labels[0])
        return 0;
    while (c->labels[n])
        if (!label_is_valid(c->labels[n++], &key_len))
            return report_config_error(ret, -EINVAL,
                                       "invalid label '%s': expected KEY=VALUE, KEY "
                                       "[a-zA-Z0-9][a-zA-Z0-9_./-]* "
                                       "of at most %d bytes, VALUE of at most %d bytes without "
                                       "control "
                                       "characters",
                                       c->labels[n - 1], LABEL_KEY_MAX, LABEL_VALUE_MAX);
    ret->labels = calloc(n + 1, sizeof(char *));
    if (!ret->labels)
        return report_config_error(ret, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        ret->labels[i] = strdup(c->labels[i]);
        if (!ret->labels[i])
            return report_config_error(ret, -ENOMEM, "out of memory");
    }
    return 0;
}

void plan_init(struct sandbox_plan *sb, const struct nsbox_config *c)
{
    *sb = (struct sandbox_plan){.config = c,
                                .host_ids_lock = -EBADF,
                                .copy_in_fd = -EBADF,
                                .copy_out_fd = -EBADF,
                                .outputs_fd = -EBADF,
                                .ws = {.base_fd = -EBADF, .lock_fd = -EBADF, .dir_fd = -EBADF}};
}

int plan_sandbox(const struct nsbox_config *c, struct sandbox_plan *sb, struct nsbox_result *ret)
{
    _cleanup_close_ int rootfd = -EBADF;
    size_t n_args = 0;
    const char *why;
    int r;

    plan_init(sb, c);
    sb->rootfs = c->rootfs ? c->rootfs : nsbox_default_rootfs();
    r = plan_identity(c, ret);
    if (r < 0)
        return r;

    if (c->argv)
        while (c->argv[n_args])
            n_args++;
    r = config_check(c, ret);
    if (r < 0)
        return r;

    /* --code FILE [ARGS...] runs python3 /work/main.py ARGS...; --cell, nsbox's cell driver. */
    r = cell_plan_payload(c, n_args, &sb->argv, &sb->outputs_fd, &why);
    if (r < 0)
        return r == -EINVAL ? report_config_error(ret, r, "%s", why)
                            : report_config_error(ret, r, "the payload's argv: %m");

    r = plan_env(sb, ret);
    if (r < 0)
        return r;
    r = plan_mounts(sb, ret);
    if (r < 0)
        return r;
    r = plan_rootfs(sb, ret, &rootfd);
    if (r < 0)
        return r;
    plan_identity_files(sb, rootfd, ret);
    r = plan_copies(sb, ret);
    if (r < 0)
        return r;

    r = plan_host_ids(c, sb, ret);
    if (r < 0)
        return r;

    plan_opt_out_warnings(c, ret);
    return plan_filter(sb, ret);
}
