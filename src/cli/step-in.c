/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A session step's --memory and --copy-in (step-in.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cmd-run-options.h"
#include "copy.h"
#include "syscalls.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "step-in.h"

/* What one step may copy in: the session's tmpfs mounts bound it again when init unpacks
 * (ENOSPC there is the step's error); this keeps the stream, in this process's memory, from
 * being larger than any sandbox's tmpfs would sensibly be. */
#define STEP_COPY_IN_MAX_BYTES (4ULL << 30)
#define STEP_COPY_IN_MAX_FILES (1ULL << 20)

/* Pack the copy-ins of config c into a new memfd, sealed. Returns it, or -errno after a line. */
static int pack(const struct nsbox_config *c)
{
    struct copy_caps caps = {.max_bytes = STEP_COPY_IN_MAX_BYTES,
                             .max_files = STEP_COPY_IN_MAX_FILES,
                             .fail = true};
    struct copy_packer *p = NULL;
    _cleanup_close_ int fd = -EBADF;
    char why[512] = "";
    int r;

    r = copy_load(why, sizeof(why));
    if (r < 0)
        return log_error_errno(r, "copy-in: %s", why);
    /* Never executable: it goes into the sandbox's init (memfd_with() in session-step.c). */
    fd = memfd_create("nsbox-copy-in", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
    if (fd < 0 && errno == EINVAL)
        fd = memfd_create("nsbox-copy-in", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return log_error_errno(negative_errno(), "copy-in: memfd_create: %m");
    r = copy_packer_new(fd, &caps, &p, why, sizeof(why));
    if (r < 0)
        return log_error_errno(r, "copy-in: %s", why);
    for (size_t i = 0; i < c->n_copy_in; i++) {
        const struct nsbox_copy *cp = &c->copy_in[i];
        /* As large as log.c's line, which held these words before copy_in_open() did. */
        char opened[1024];
        _cleanup_close_ int src_fd = -EBADF;

        /* As copy-plan.c's check_sandbox_path(), and as the session checks a copy-out's. */
        if (!path_is_safe_target(cp->sandbox) || path_is_at_or_below(cp->sandbox, "/proc") ||
            path_is_at_or_below(cp->sandbox, "/dev")) {
            r = log_error_errno(-EINVAL,
                                "invalid --copy-in target '%s': an absolute path inside the "
                                "sandbox, not '/', without '.' or '..', not in /proc or /dev",
                                cp->sandbox);
            goto fail;
        }
        /* The same opening, and the same words, as a run's (copy-plan.c). */
        src_fd = copy_in_open(cp->host, opened, sizeof(opened));
        if (src_fd < 0) {
            r = log_error_errno(src_fd, "%s", opened);
            goto fail;
        }
        r = copy_pack(p,
                      &(struct copy_source){.src_fd = src_fd,
                                            .prefix = cp->sandbox + 1,
                                            .shown = cp->host},
                      false, why, sizeof(why));
        if (r < 0) {
            if (r == -EFBIG)
                log_error("--copy-in: the files are larger than a step takes (%s; at most %llu "
                          "GiB and %llu files)",
                          why, STEP_COPY_IN_MAX_BYTES >> 30, STEP_COPY_IN_MAX_FILES);
            else
                log_error("--copy-in: %s", why);
            goto fail;
        }
    }
    r = copy_packer_finish(p, NULL, why, sizeof(why));
    p = NULL;
    if (r < 0)
        return log_error_errno(r, "--copy-in: %s", why);
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
        return log_error_errno(negative_errno(), "copy-in: sealing the stream: %m");
    return TAKE_FD(fd);

fail:
    if (p)
        (void)copy_packer_finish(p, NULL, why, sizeof(why));
    return r;
}

int step_in_prepare(int n, char **args, bool *ret_has_memory, uint64_t *ret_memory, int *ret_fd)
{
    /* Lives until nsbox exits: the config's copy-in list points into it. */
    static struct run_args a = {.result_fd = -1};
    _cleanup_free_ char **argv = calloc((size_t)n + 4, sizeof(char *));
    int r;

    *ret_has_memory = false;
    *ret_memory = 0;
    *ret_fd = -1;
    if (!argv)
        log_oom();
    argv[0] = (char *)"exec";
    for (int i = 0; i < n; i++) {
        argv[i + 1] = args[i];
        if (strcmp(args[i], "--memory") == 0)
            *ret_has_memory = true;
    }
    /* A stand-in program for the parser, as run_options_parse() gives it. */
    argv[n + 1] = (char *)"--";
    argv[n + 2] = (char *)"true";
    nsbox_config_init(&a.config);
    {
        /* Called after the caller's own getopt_long() loop, whose optind it still needs: 0
         * makes getopt start afresh (getopt(3), glibc). */
        int saved = optind;
        optind = 0;
        r = parse_run_args(n + 3, argv, &a);
        optind = saved;
    }
    if (r < 0)
        return r;
    {
        /* The library's checks of a run's values (the --memory floor): a step's are a run's. */
        struct nsbox_result res = {0};
        r = nsbox_config_check(&a.config, &res);
        if (r < 0) {
            log_error("%s", res.error);
            return r;
        }
    }
    *ret_memory = a.config.memory;
    if (a.config.n_copy_in) {
        r = pack(&a.config);
        if (r < 0)
            return r;
        *ret_fd = r;
    }
    return 0;
}
