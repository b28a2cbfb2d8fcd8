/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox run`'s options (cmd-run-options.h): argv -> config (getopt_long), for nsbox run and
 * `nsbox session start` (run_options_parse()); the --help text is cmd-run-usage.c, -e,
 * --env-file and --env-fd are cmd-run-env.c. Ranges and combinations of the config are the
 * library's to check (config_check(), src/lib/config-check.c): here, argv's syntax only. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd-run-options.h"
#include "cmd-session.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "nsbox.h"
#include "parse.h"

/* Largest --code file: the code lives in a tmpfs of its own size inside the sandbox. */
#define CODE_MAX (16U << 20)

/* The signals `nsbox run` acts on (SIGUSR1 is `nsbox kill`; nsbox_signal_set() says which);
 * see block_run_signals(). */
void run_signals(sigset_t *set)
{
    nsbox_signal_set(set);
}

static int load_code(const char *path, char **ret, size_t *ret_size)
{
    int r;

    if (strcmp(path, "-") == 0) {
        /* While nsbox waits for the code (typed at a terminal, perhaps), Ctrl-C ends it as it
         * would any program: nothing of the run exists yet, no record, no sandbox. */
        sigset_t set, saved;
        run_signals(&set);
        (void)sigprocmask(SIG_UNBLOCK, &set, &saved);
        r = read_fd_all(STDIN_FILENO, CODE_MAX, ret, ret_size);
        (void)sigprocmask(SIG_SETMASK, &saved, NULL);
    } else
        r = read_regular_file(path, CODE_MAX, ret, ret_size);
    if (r == -ENOMEM)
        log_oom();
    if (r == -EFBIG)
        return log_error_errno(r, "code file '%s' is larger than %u MiB", path, CODE_MAX >> 20);
    if (r == -EINVAL)
        return log_error_errno(r, "code file '%s' is not a regular file", path);
    if (r < 0)
        return log_error_errno(r, "cannot read code file '%s': %m", path);
    return 0;
}

/* "unlimited" (Docker's -1 too) is 0 in the config. */
static bool is_unlimited(const char *s)
{
    return strcmp(s, "unlimited") == 0 || strcmp(s, "-1") == 0;
}

enum {
    ARG_CODE = 0x100,
    ARG_ROOTFS,
    ARG_TMPFS,
    ARG_MOUNT,
    ARG_SHM_SIZE,
    ARG_PIDS_LIMIT,
    ARG_CPUS,
    ARG_TIMEOUT,
    ARG_OUTPUT_LIMIT,
    ARG_CELL,
    ARG_OUTPUTS_LIMIT,
    ARG_NETWORK,
    ARG_SECCOMP,
    ARG_NO_SECCOMP,
    ARG_CGROUP,
    ARG_CGROUP_PARENT,
    ARG_LANDLOCK,
    ARG_ISOLATION,
    ARG_LOG,
    ARG_STDOUT_FILE,
    ARG_STDERR_FILE,
    ARG_LOG_CODE_LIMIT,
    ARG_JSON,
    ARG_PID,
    ARG_IPC,
    ARG_ENV_INHERIT,
    ARG_KEEP_FDS,
    ARG_RESULT_FD,
    ARG_NAME,
    ARG_LABEL,
    ARG_ADD_HOST,
    ARG_NETWORK_MAX_CONNECTIONS,
    ARG_NETWORK_MAX_BYTES,
    ARG_RAW_OUTPUT,
    ARG_HOST_USER,
    ARG_ENV_FILE,
    ARG_ENV_FD,
    ARG_WORKDIR_SIZE,
    ARG_COPY_IN,
    ARG_COPY_OUT,
    ARG_COPY_OUT_MAX_BYTES,
    ARG_COPY_OUT_MAX_FILES,
    ARG_WORKSPACE,
};

void run_args_free(struct run_args *a)
{
    for (size_t i = 0; i < a->config.n_binds; i++) {
        free((char *)a->binds[i].source);
        free((char *)a->binds[i].target);
    }
    for (size_t i = 0; i < a->config.n_tmpfs; i++)
        free((char *)a->tmpfs[i].target);
    for (size_t i = 0; i < a->n_env; i++)
        free(a->env[i]);
    for (size_t i = 0; i < a->config.n_copy_in; i++) {
        free((char *)a->copy_in[i].host);
        free((char *)a->copy_in[i].sandbox);
    }
    for (size_t i = 0; i < a->config.n_copy_out; i++)
        free((char *)a->copy_out[i].host);
    free(a->copy_in);
    free(a->copy_out);
    free(a->binds);
    free(a->tmpfs);
    free(a->env);
    free(a->labels); /* the strings are argv's */
    for (size_t i = 0; i < a->n_allow; i++)
        free(a->allow[i]);
    free(a->allow);
    free(a->hosts);
    free(a->code);
}

/* Whether the option getopt_long() just took was written out in full as name ("--keep-fds",
 * "--pid=host"), not abbreviated ("--keep"). Opt-outs must be: removing a protection is never
 * an accident of a prefix. */
static bool spelled_in_full(char *argv[], const char *name)
{
    const char *tok = argv[optind - 1];
    size_t n;

    if (optarg && tok == optarg && optind >= 2)
        tok = argv[optind - 2];
    n = strcspn(tok, "=");
    return n == strlen(name) && strncmp(tok, name, n) == 0;
}

#define OPT_OUT_IN_FULL(name, what)                                                                \
    do {                                                                                           \
        if (!spelled_in_full(argv, name))                                                          \
            return log_error_errno(-EINVAL, "an opt-out must be spelled in full: %s", what);       \
    } while (0)

/* The value of --network, --pid or --ipc (just taken by getopt_long()): own (the sandbox's own
 * namespace, the default) or "host" (an opt-out, so spelled in full); expected lists the
 * accepted values for the error. Returns 0 with *host set, or -EINVAL after a one-line error. */
static int parse_share(char *argv[], const char *opt, const char *own, const char *expected,
                       bool *host)
{
    if (strcmp(optarg, own) == 0) {
        *host = false;
        return 0;
    }
    if (strcmp(optarg, "host") != 0)
        return log_error_errno(-EINVAL, "invalid value '%s' for %s: expected %s", optarg, opt,
                               expected);
    if (!spelled_in_full(argv, opt))
        return log_error_errno(-EINVAL, "an opt-out must be spelled in full: %s host", opt);
    *host = true;
    return 0;
}

/* value for a one-line message: control characters (which a terminal would act on, or which
 * would break the line) shown as '?', cut at size. */
const char *shown(const char *value, char *buf, size_t size)
{
    size_t i = 0;

    for (; value[i] && i + 1 < size; i++)
        buf[i] = (unsigned char)value[i] < 0x20 || value[i] == 0x7f ? '?' : value[i];
    buf[i] = '\0';
    return buf;
}

#define BAD_VALUE(opt, value, what)                                                                \
    log_error_errno(-EINVAL, "invalid value '%s' for %s: %s", value, opt, what)

/* --network allow=PATTERNS or allow-file=FILE: check the patterns here, for a message that
 * names the option (and the file's line), and keep them for the config; nsbox_run() checks
 * them again, for every caller. Returns 0 or -EINVAL after a message. */
static int add_allow(struct run_args *a, const char *value)
{
    _cleanup_free_ char *text = NULL;
    char show[256];
    unsigned line = 0;
    int r;

    if (strncmp(value, "allow=", 6) == 0) {
        r = nsbox_network_allow_check(value + 6);
        if (r < 0)
            return BAD_VALUE("--network", shown(value, show, sizeof(show)),
                             "expected allow=PATTERN[,PATTERN...], each a host name "
                             "(pypi.org), *.domain, an IPv4 address or an [IPv6] one, with an "
                             "optional :PORT");
        text = strdup(value + 6);
    } else {
        /* The file's format is the library's (nsbox_network_allow_file()). */
        const char *path = value + 11;
        r = nsbox_network_allow_file(path, &text, &line);
        if (r == -EBADMSG && line > 0)
            return log_error_errno(-EINVAL,
                                   "--network allow-file=%s:%u: not a host name, "
                                   "*.domain, IPv4 or [IPv6] address with an optional :PORT",
                                   shown(path, show, sizeof(show)), line);
        if (r == -EBADMSG)
            return log_error_errno(-EINVAL, "--network allow-file=%s: no pattern in it",
                                   shown(path, show, sizeof(show)));
        if (r == -ENOMEM)
            log_oom();
        if (r == -EINVAL)
            return log_error_errno(r, "--network allow-file=%s: not a regular file",
                                   shown(path, show, sizeof(show)));
        if (r < 0)
            return log_error_errno(r, "--network allow-file=%s: reading it failed: %m",
                                   shown(path, show, sizeof(show)));
    }
    if (!text)
        log_oom();
    a->allow = realloc(a->allow, (a->n_allow + 2) * sizeof(*a->allow));
    if (!a->allow)
        log_oom();
    a->allow[a->n_allow++] = TAKE_PTR(text);
    a->allow[a->n_allow] = NULL;
    return 0;
}

/* fd number in value, if it is a descriptor above 2 open for writing: returns it, or -EINVAL. */
int result_fd_check(const char *value)
{
    char *end = NULL;
    long fd;
    int fl;

    errno = 0;
    fd = strtol(value, &end, 10);
    if (errno || end == value || *end || fd < 3 || fd > INT_MAX)
        return -EINVAL;
    fl = fcntl((int)fd, F_GETFL);
    if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
        return -EINVAL;
    return (int)fd;
}

/* The value of --result-fd: a descriptor above 2, open for writing. It is made close-on-exec
 * (so that not even --keep-fds hands it to the payload, which could forge a result through it);
 * the sandbox's init closes it with everything else it does not need. Returns the fd, or
 * -EINVAL after a one-line error. */
static int parse_result_fd(const char *value)
{
    int fd = result_fd_check(value);

    if (fd < 0)
        return BAD_VALUE("--result-fd", value,
                         "expected a descriptor above 2 that is open for writing, e.g. 3");
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return log_error_errno(negative_errno(), "--result-fd %d: %m", fd);
    return fd;
}

/* Add a bind from -v or --mount: source as given (relative to the current directory, as in
 * Docker; nothing is resolved here: the sandbox walks the path once, refusing symlinks it did
 * not make sure of, plan_mounts()), target malloc()ed (taken, also on failure). */
static int add_bind(struct run_args *a, const char *option, const char *value, const char *source,
                    char *target, bool writable)
{
    struct nsbox_config *c = &a->config;
    char resolved[PATH_MAX];
    int r;

    if (source[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd))) {
            r = log_error_errno(negative_errno(), "bind source '%s': %m", source);
            free(target);
            return r;
        }
        if (snprintf(resolved, sizeof(resolved), "%s/%s", cwd, source) >= (int)sizeof(resolved)) {
            free(target);
            return BAD_VALUE(option, value, "the source path is too long");
        }
    } else if (snprintf(resolved, sizeof(resolved), "%s", source) >= (int)sizeof(resolved)) {
        free(target);
        return BAD_VALUE(option, value, "the source path is too long");
    }
    a->binds = realloc(a->binds, (c->n_binds + 1) * sizeof(*a->binds));
    if (!a->binds)
        log_oom();
    a->binds[c->n_binds++] = (struct nsbox_bind){.source = xstrdup(resolved),
                                                 .target = target,
                                                 .writable = writable};
    return 0;
}

/* The sandbox side of --copy-in HOST:SANDBOX or --copy-out SANDBOX:HOSTDIR, as docker cp reads
 * it: for copy-in, a SANDBOX ending in '/' is a directory the copy goes into under the host
 * path's last name (returned allocated; else a copy of SANDBOX); for copy-out, SANDBOX's
 * trailing slashes name the same directory and are cut (in place: argv's). Returns 0, or
 * -EINVAL when a copy-in's host path has no last name ("/"). */
static int copy_sandbox_path(bool in, char *sandbox, const char *host, char **ret)
{
    size_t len = strlen(sandbox), hlen = strlen(host), base;

    if (!in) {
        while (len > 1 && sandbox[len - 1] == '/')
            sandbox[--len] = '\0';
        *ret = sandbox;
        return 0;
    }
    if (len <= 1 || sandbox[len - 1] != '/') {
        *ret = xstrdup(sandbox);
        return 0;
    }
    while (len > 1 && sandbox[len - 2] == '/') /* "/work//" is "/work/" */
        len--;
    while (hlen > 1 && host[hlen - 1] == '/')
        hlen--;
    for (base = hlen; base > 0 && host[base - 1] != '/';)
        base--;
    /* "DIR/." (".", "$PWD/."): DIR's contents go into the directory, as with docker cp. */
    if (hlen - base == 1 && host[base] == '.') {
        if (asprintf(ret, "%.*s", (int)(len > 1 ? len - 1 : len), sandbox) < 0)
            log_oom();
        return 0;
    }
    if (base == hlen || (hlen - base == 2 && host[base] == '.' && host[base + 1] == '.'))
        return -EINVAL;
    if (asprintf(ret, "%.*s%.*s", (int)len, sandbox, (int)(hlen - base), host + base) < 0)
        log_oom();
    return 0;
}

int parse_run_args(int argc, char *argv[], struct run_args *a)
{
    static const struct option options[] = {
        {"code", required_argument, NULL, ARG_CODE},
        {"rootfs", required_argument, NULL, ARG_ROOTFS},
        {"volume", required_argument, NULL, 'v'},
        {"tmpfs", required_argument, NULL, ARG_TMPFS},
        {"mount", required_argument, NULL, ARG_MOUNT},
        {"shm-size", required_argument, NULL, ARG_SHM_SIZE},
        {"env", required_argument, NULL, 'e'},
        {"env-file", required_argument, NULL, ARG_ENV_FILE},
        {"env-fd", required_argument, NULL, ARG_ENV_FD},
        {"user", required_argument, NULL, 'u'},
        {"memory", required_argument, NULL, 'm'},
        {"pids-limit", required_argument, NULL, ARG_PIDS_LIMIT},
        {"cpus", required_argument, NULL, ARG_CPUS},
        {"timeout", required_argument, NULL, ARG_TIMEOUT},
        {"output-limit", required_argument, NULL, ARG_OUTPUT_LIMIT},
        {"cell", no_argument, NULL, ARG_CELL},
        {"outputs-limit", required_argument, NULL, ARG_OUTPUTS_LIMIT},
        {"network", required_argument, NULL, ARG_NETWORK},
        {"seccomp", required_argument, NULL, ARG_SECCOMP},
        {"no-seccomp", no_argument, NULL, ARG_NO_SECCOMP},
        {"cgroup", required_argument, NULL, ARG_CGROUP},
        {"cgroup-parent", required_argument, NULL, ARG_CGROUP_PARENT},
        {"landlock", required_argument, NULL, ARG_LANDLOCK},
        {"isolation", required_argument, NULL, ARG_ISOLATION},
        {"log", required_argument, NULL, ARG_LOG},
        {"stdout-file", required_argument, NULL, ARG_STDOUT_FILE},
        {"stderr-file", required_argument, NULL, ARG_STDERR_FILE},
        {"log-code-limit", required_argument, NULL, ARG_LOG_CODE_LIMIT},
        {"stdin", no_argument, NULL, 'i'},
        {"interactive", no_argument, NULL, 'i'},
        {"json", no_argument, NULL, ARG_JSON},
        {"pid", required_argument, NULL, ARG_PID},
        {"ipc", required_argument, NULL, ARG_IPC},
        {"env-inherit", no_argument, NULL, ARG_ENV_INHERIT},
        {"keep-fds", no_argument, NULL, ARG_KEEP_FDS},
        {"result-fd", required_argument, NULL, ARG_RESULT_FD},
        {"name", required_argument, NULL, ARG_NAME},
        {"label", required_argument, NULL, ARG_LABEL},
        {"add-host", required_argument, NULL, ARG_ADD_HOST},
        {"network-max-connections", required_argument, NULL, ARG_NETWORK_MAX_CONNECTIONS},
        {"network-max-bytes", required_argument, NULL, ARG_NETWORK_MAX_BYTES},
        {"raw-output", no_argument, NULL, ARG_RAW_OUTPUT},
        {"host-user", required_argument, NULL, ARG_HOST_USER},
        {"workdir", required_argument, NULL, 'w'},
        {"workdir-size", required_argument, NULL, ARG_WORKDIR_SIZE},
        {"copy-in", required_argument, NULL, ARG_COPY_IN},
        {"copy-out", required_argument, NULL, ARG_COPY_OUT},
        {"copy-out-max-bytes", required_argument, NULL, ARG_COPY_OUT_MAX_BYTES},
        {"copy-out-max-files", required_argument, NULL, ARG_COPY_OUT_MAX_FILES},
        {"workspace", required_argument, NULL, ARG_WORKSPACE},
        {"help", no_argument, NULL, 'h'},
        {},
    };
    struct nsbox_config *c = &a->config;
    char show[256];
    int opt, r;

    /* '+': stop at PROGRAM, so its own options are left alone. ':' and opterr = 0: nsbox
     * words its own one-line errors. */
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:v:e:u:m:w:ih", options, NULL)) != -1) {
        switch (opt) {
        case ARG_CODE:
            /* One program: a second --code would silently replace the first. */
            if (a->code_path)
                return BAD_VALUE("--code", optarg, "--code is given twice; a run has one program");
            a->code_path = optarg;
            break;
        case ARG_ROOTFS:
            c->rootfs = optarg;
            break;
        case 'v': {
            char *source = NULL, *target = NULL;
            bool writable = false;

            r = parse_bind(optarg, &source, &target, &writable);
            if (r == -ENOMEM)
                log_oom();
            if (r < 0)
                return BAD_VALUE("--volume", optarg,
                                 "expected SOURCE:TARGET[:ro|rw] with an absolute TARGET (a "
                                 "SOURCE with ':' needs --mount type=bind,source=...)");
            r = add_bind(a, "--volume", optarg, source, target, writable);
            free(source);
            if (r < 0)
                return r;
            break;
        }
        case ARG_MOUNT: {
            struct parsed_mount m;

            r = parse_mount(optarg, c->tmp_size, &m);
            if (r == -ENOMEM)
                log_oom();
            if (r < 0)
                return BAD_VALUE("--mount", optarg,
                                 "expected type=bind,source=SRC,target=DST[,readonly=false] or "
                                 "type=tmpfs,target=DST[,tmpfs-size=SIZE][,tmpfs-mode=OCTAL] "
                                 "with an absolute DST");
            if (m.is_tmpfs) {
                a->tmpfs = realloc(a->tmpfs, (c->n_tmpfs + 1) * sizeof(*a->tmpfs));
                if (!a->tmpfs)
                    log_oom();
                a->tmpfs[c->n_tmpfs++] = (struct nsbox_tmpfs){.target = TAKE_PTR(m.target),
                                                              .size = m.size,
                                                              .mode = m.mode};
                parsed_mount_done(&m);
                break;
            }
            /* The same path as -v: the same rules for the source (plan_mounts()). */
            r = add_bind(a, "--mount", optarg, m.source, TAKE_PTR(m.target), m.writable);
            parsed_mount_done(&m);
            if (r < 0)
                return r;
            break;
        }
        case ARG_TMPFS: {
            struct nsbox_tmpfs *t;
            char *target = NULL;
            uint64_t size;
            unsigned mode;
            bool exec;

            r = parse_tmpfs(optarg, c->tmp_size, &target, &size, &mode, &exec);
            if (r == -ENOMEM)
                log_oom();
            if (r < 0)
                return BAD_VALUE("--tmpfs", optarg,
                                 "expected TARGET[:size=SIZE,mode=OCTAL,exec]: an absolute "
                                 "TARGET, a SIZE above 0 such as 16m, an octal MODE");
            a->tmpfs = realloc(a->tmpfs, (c->n_tmpfs + 1) * sizeof(*a->tmpfs));
            if (!a->tmpfs)
                log_oom();
            t = &a->tmpfs[c->n_tmpfs++];
            *t = (struct nsbox_tmpfs){.target = target, .size = size, .mode = mode, .exec = exec};
            break;
        }
        case ARG_SHM_SIZE:
            if (parse_size(optarg, &c->shm_size) < 0 || c->shm_size == 0)
                return BAD_VALUE("--shm-size", optarg, "expected a size such as 16m");
            break;
        case 'e':
            if (env_add(a, optarg) < 0)
                return BAD_VALUE("--env", optarg, "expected KEY=VALUE or KEY");
            break;
        case ARG_ENV_FILE:
            r = parse_env_file(a, optarg);
            if (r < 0)
                return r;
            break;
        case ARG_ENV_FD:
            r = parse_env_fd(a, optarg);
            if (r < 0)
                return r;
            break;
        case 'u':
            if (parse_user(optarg, &c->uid, &c->gid) < 0)
                return BAD_VALUE("--user", optarg, "expected UID[:GID], numeric");
            break;
        case ARG_HOST_USER:
            /* 0 is host root, which a sandbox never maps to. */
            if (parse_user(optarg, &c->host_uid, &c->host_gid) < 0 || c->host_uid == 0 ||
                c->host_gid == 0)
                return BAD_VALUE("--host-user", optarg, "expected UID[:GID], numeric, not 0");
            break;
        case 'm':
            if (is_unlimited(optarg))
                c->memory = 0;
            else if (parse_size(optarg, &c->memory) < 0) /* its floor: config_check() */
                return BAD_VALUE("--memory", optarg, "expected a size of at least 6m, e.g. 256m");
            break;
        case ARG_PIDS_LIMIT:
            if (is_unlimited(optarg))
                c->pids_limit = 0;
            else if (parse_count(optarg, 1U << 22, &c->pids_limit) < 0)
                return BAD_VALUE("--pids-limit", optarg, "expected a whole number from 1");
            break;
        case ARG_CPUS:
            if (is_unlimited(optarg))
                c->cpus_milli = 0;
            else if (parse_cpus(optarg, &c->cpus_milli) < 0)
                return BAD_VALUE("--cpus", optarg, "expected a number from 0.001, e.g. 0.5");
            break; /* its ceiling, the CPUs nsbox may run on: config_check() */
        case ARG_TIMEOUT:
            if (strcmp(optarg, "unlimited") == 0) /* not -1: a negative time is a mistake */
                c->timeout = 0;
            else if (parse_duration(optarg, &c->timeout) < 0)
                return BAD_VALUE("--timeout", optarg,
                                 "expected seconds above 0, fractions allowed (1.5), or with a "
                                 "unit: 250ms, 10m, 1h; or unlimited");
            break;
        case ARG_OUTPUT_LIMIT:
            if (parse_size(optarg, &c->output_limit) < 0 || c->output_limit > (1U << 30))
                return BAD_VALUE("--output-limit", optarg, "expected bytes, at most 1g");
            break;
        case ARG_CELL:
            c->cell = true;
            break;
        case ARG_OUTPUTS_LIMIT:
            if (parse_size(optarg, &c->outputs_limit) < 0 || c->outputs_limit == 0 ||
                c->outputs_limit > (1U << 30))
                return BAD_VALUE("--outputs-limit", optarg, "expected bytes, above 0, at most 1g");
            break;
        case ARG_NETWORK:
            if (strncmp(optarg, "allow=", 6) == 0 || strncmp(optarg, "allow-file=", 11) == 0) {
                r = add_allow(a, optarg);
                if (r < 0)
                    return r;
                c->network_loopback = c->network_host = false;
                break;
            }
            /* Another mode replaces the allowlist, as a later --network wins. */
            for (size_t i = 0; i < a->n_allow; i++)
                free(a->allow[i]);
            a->n_allow = 0;
            if (a->allow)
                a->allow[0] = NULL;
            c->network_loopback = strcmp(optarg, "loopback") == 0;
            if (c->network_loopback) {
                c->network_host = false;
                break;
            }
            r = parse_share(argv, "--network", "none", "none, loopback or host, or allow=HOSTS",
                            &c->network_host);
            if (r < 0)
                return r;
            break;
        case ARG_PID:
            r = parse_share(argv, "--pid", "private", "private or host", &c->pid_host);
            if (r < 0)
                return r;
            break;
        case ARG_IPC:
            r = parse_share(argv, "--ipc", "private", "private or host", &c->ipc_host);
            if (r < 0)
                return r;
            break;
        case ARG_ENV_INHERIT:
            OPT_OUT_IN_FULL("--env-inherit", "--env-inherit");
            c->env_inherit = true;
            break;
        case ARG_KEEP_FDS:
            OPT_OUT_IN_FULL("--keep-fds", "--keep-fds");
            c->keep_fds = true;
            break;
        case ARG_SECCOMP:
            c->seccomp_policy = optarg;
            break;
        case ARG_NO_SECCOMP:
            OPT_OUT_IN_FULL("--no-seccomp", "--no-seccomp");
            c->seccomp_disabled = true;
            break;
        case ARG_CGROUP:
            if (strcmp(optarg, "auto") == 0)
                c->cgroup = NSBOX_CGROUP_AUTO;
            else if (strcmp(optarg, "required") == 0)
                c->cgroup = NSBOX_CGROUP_REQUIRED;
            else if (strcmp(optarg, "off") == 0)
                c->cgroup = NSBOX_CGROUP_OFF;
            else
                return BAD_VALUE("--cgroup", optarg, "expected auto, required or off");
            break;
        case ARG_LANDLOCK:
            if (strcmp(optarg, "auto") == 0)
                c->landlock = NSBOX_LANDLOCK_AUTO;
            else if (strcmp(optarg, "required") == 0)
                c->landlock = NSBOX_LANDLOCK_REQUIRED;
            else if (strcmp(optarg, "off") == 0) {
                OPT_OUT_IN_FULL("--landlock", "--landlock off");
                c->landlock = NSBOX_LANDLOCK_OFF;
            } else
                return BAD_VALUE("--landlock", optarg, "expected auto, required or off");
            break;
        case ARG_ISOLATION:
            if (strcmp(optarg, "auto") == 0)
                c->isolation = NSBOX_ISOLATION_AUTO;
            else if (strcmp(optarg, "full") == 0)
                c->isolation = NSBOX_ISOLATION_FULL;
            else if (strcmp(optarg, "landlock") == 0)
                c->isolation = NSBOX_ISOLATION_LANDLOCK;
            else
                return BAD_VALUE("--isolation", optarg, "expected auto, full or landlock");
            break;
        case ARG_LOG:
            a->log_path = optarg;
            break;
        case ARG_STDOUT_FILE:
        case ARG_STDERR_FILE:
            if (!optarg[0])
                return BAD_VALUE(opt == ARG_STDOUT_FILE ? "--stdout-file" : "--stderr-file", optarg,
                                 "expected a file path");
            *(opt == ARG_STDOUT_FILE ? &a->stdout_file : &a->stderr_file) = optarg;
            break;
        case 'w':
            c->workdir = optarg;
            break;
        case ARG_WORKDIR_SIZE:
            if (parse_size(optarg, &c->workdir_size) < 0 || c->workdir_size == 0)
                return BAD_VALUE("--workdir-size", optarg, "expected a size such as 64m");
            break;
        case ARG_COPY_IN:
        case ARG_COPY_OUT: {
            bool in = opt == ARG_COPY_IN;
            /* HOST:SANDBOX or SANDBOX:HOSTDIR; a host path is made absolute from the current
             * directory, as -v's; nothing is resolved here (plan_copies()). */
            const char *colon = strchr(optarg, ':');
            const char *host = in ? optarg : colon ? colon + 1 : NULL;
            size_t host_len = in && colon ? (size_t)(colon - optarg) : host ? strlen(host) : 0;
            char resolved[PATH_MAX], cwd[PATH_MAX], *arg = optarg;
            struct nsbox_copy **list = in ? &a->copy_in : &a->copy_out;
            size_t *n = in ? &c->n_copy_in : &c->n_copy_out;
            char *sandbox;

            if (!colon || host_len == 0 || (in ? !colon[1] : colon == optarg) ||
                (in ? colon[1] != '/' : optarg[0] != '/'))
                return BAD_VALUE(in ? "--copy-in" : "--copy-out", optarg,
                                 in ? "expected HOSTPATH:SANDBOXPATH with an absolute "
                                      "SANDBOXPATH"
                                    : "expected SANDBOXPATH:HOSTDIR with an absolute "
                                      "SANDBOXPATH");
            if (host[0] == '/')
                r = snprintf(resolved, sizeof(resolved), "%.*s", (int)host_len, host);
            else if (getcwd(cwd, sizeof(cwd)))
                r = snprintf(resolved, sizeof(resolved), "%s/%.*s", cwd, (int)host_len, host);
            else
                return log_error_errno(negative_errno(), "%s: %m", optarg);
            if (r < 0 || (size_t)r >= sizeof(resolved))
                return BAD_VALUE(in ? "--copy-in" : "--copy-out", optarg, "the path is too long");
            sandbox = in ? arg + (colon - optarg) + 1 : arg;
            if (!in)
                arg[colon - optarg] = '\0'; /* optarg is argv's, ours to cut */
            r = copy_sandbox_path(in, sandbox, resolved, &sandbox);
            if (r < 0)
                return BAD_VALUE(in ? "--copy-in" : "--copy-out", optarg,
                                 "a SANDBOXPATH ending in '/' is a directory the copy goes into "
                                 "under the source's name, and the source has no name (name it, "
                                 "or DIR/. for its contents)");
            *list = realloc(*list, (*n + 1) * sizeof(**list));
            if (!*list)
                log_oom();
            (*list)[(*n)++] = (struct nsbox_copy){.host = xstrdup(resolved), .sandbox = sandbox};
            break;
        }
        case ARG_COPY_OUT_MAX_BYTES:
            if (parse_size(optarg, &c->copy_out_max_bytes) < 0 || c->copy_out_max_bytes == 0)
                return BAD_VALUE("--copy-out-max-bytes", optarg, "expected a size such as 64m");
            break;
        case ARG_COPY_OUT_MAX_FILES: {
            char *end = NULL;
            errno = 0;
            c->copy_out_max_files = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || c->copy_out_max_files == 0 || optarg[0] == '-')
                return BAD_VALUE("--copy-out-max-files", optarg, "expected a number above 0");
            break;
        }
        case ARG_WORKSPACE:
            if (!run_name_is_valid(optarg))
                return BAD_VALUE("--workspace", shown(optarg, show, sizeof(show)),
                                 "expected [a-zA-Z0-9][a-zA-Z0-9_.-]*, at most " STRINGIFY(
                                     NSBOX_NAME_MAX) " bytes");
            c->workspace = optarg;
            break;
        case ARG_NAME:
            if (!run_name_is_valid(optarg))
                return BAD_VALUE("--name", shown(optarg, show, sizeof(show)),
                                 "expected [a-zA-Z0-9][a-zA-Z0-9_.-]*, at most " STRINGIFY(
                                     NSBOX_NAME_MAX) " bytes");
            c->name = optarg;
            break;
        case ARG_LABEL: {
            size_t key_len;

            if (!label_is_valid(optarg, &key_len))
                return BAD_VALUE("--label", shown(optarg, show, sizeof(show)),
                                 "expected KEY=VALUE or KEY: KEY [a-zA-Z0-9][a-zA-Z0-9_./-]* of "
                                 "at most " STRINGIFY(LABEL_KEY_MAX) " bytes, VALUE of at "
                                                                     "most " STRINGIFY(
                                                                         LABEL_VALUE_MAX) " bytes "
                                                                                          "without "
                                                                                          "control "
                                                                                          "characte"
                                                                                          "rs");
            a->labels = realloc(a->labels, (a->n_labels + 2) * sizeof(*a->labels));
            if (!a->labels)
                log_oom();
            a->labels[a->n_labels++] = optarg;
            a->labels[a->n_labels] = NULL;
            break;
        }
        case ARG_ADD_HOST:
            if (!strchr(optarg, ':'))
                return BAD_VALUE("--add-host", shown(optarg, show, sizeof(show)),
                                 "expected NAME:ADDRESS, e.g. pypi.example:192.0.2.7");
            a->hosts = realloc(a->hosts, (a->n_hosts + 2) * sizeof(*a->hosts));
            if (!a->hosts)
                log_oom();
            a->hosts[a->n_hosts++] = optarg;
            a->hosts[a->n_hosts] = NULL;
            break;
        case ARG_NETWORK_MAX_CONNECTIONS:
            if (parse_count(optarg, 1024, &c->network_max_connections) < 0)
                return BAD_VALUE("--network-max-connections", optarg,
                                 "expected a number from 1 to 1024");
            break;
        case ARG_NETWORK_MAX_BYTES:
            if (parse_size(optarg, &c->network_max_bytes) < 0 || c->network_max_bytes == 0)
                return BAD_VALUE("--network-max-bytes", optarg,
                                 "expected bytes above 0, e.g. 100m");
            break;
        case ARG_LOG_CODE_LIMIT:
            if (parse_size(optarg, &a->log_code_limit) < 0 || a->log_code_limit > CODE_MAX)
                return BAD_VALUE("--log-code-limit", optarg, "expected bytes, at most 16m");
            break;
        case ARG_CGROUP_PARENT:
            if (optarg[0] == '\0' || strstr(optarg, ".."))
                return BAD_VALUE("--cgroup-parent", optarg,
                                 "expected a cgroup path below the cgroup2 mount, e.g. "
                                 "/test.slice");
            c->cgroup_parent = optarg;
            break;
        case 'i':
            c->pass_stdin = true;
            break;
        case ARG_JSON:
            a->json = true;
            break;
        case ARG_RESULT_FD:
            r = parse_result_fd(optarg);
            if (r < 0)
                return r;
            a->result_fd = r;
            break;
        case ARG_RAW_OUTPUT:
            a->raw_output = true;
            break;
        case 'h':
            usage_run(stdout);
            exit(EXIT_SUCCESS);
        case ':':
            return log_error_errno(-EINVAL, "option '%s' needs a value (see 'nsbox run --help')",
                                   argv[optind - 1]);
        default: {
            /* With --code, a script's own options are the usual culprit. */
            const char *hint = a->code_path ? "; put the script's arguments after --" : "";
            if (optopt)
                return log_error_errno(-EINVAL, "unknown option '-%c' (see 'nsbox run --help'%s)",
                                       optopt, hint);
            return log_error_errno(-EINVAL, "unknown option '%s' (see 'nsbox run --help'%s)",
                                   argv[optind - 1], hint);
        }
        }
    }

    c->argv = argv + optind;
    if (c->cell && !a->code_path)
        return log_error_errno(-EINVAL, "--cell runs Python code as a notebook cell: give it "
                                        "with --code FILE (or --code - for stdin)");
    if (a->code_path) {
        if (strcmp(a->code_path, "-") == 0 && c->pass_stdin)
            return log_error_errno(-EINVAL, "--code - reads the code from stdin; it cannot be "
                                            "combined with --stdin");
        r = load_code(a->code_path, &a->code, &c->code_size);
        if (r < 0)
            return r;
        c->code = a->code;
    } else if (optind >= argc)
        return log_error_errno(-EINVAL, "no program given: nsbox run [OPTIONS] [--] PROGRAM "
                                        "[ARGS...] (see 'nsbox run --help')");
    if (c->seccomp_disabled && c->seccomp_policy)
        return log_error_errno(-EINVAL, "--seccomp and --no-seccomp exclude each other");
    if (a->json && a->result_fd >= 0)
        return log_error_errno(-EINVAL, "--json and --result-fd exclude each other (--json prints "
                                        "the result instead of the output, --result-fd beside it)");
    c->env = a->env;
    c->labels = a->labels;
    c->network_allow = a->n_allow ? a->allow : NULL;
    c->network_hosts = a->hosts;
    c->binds = a->binds;
    c->tmpfs = a->tmpfs;
    c->copy_in = a->copy_in;
    c->copy_out = a->copy_out;
    return 0;
}

/* For `nsbox session start` (cmd-session.c): `nsbox run`'s options, without a program, into a
 * config that lives until nsbox exits. argv[0] is the subcommand's name. Returns 0 or -EINVAL
 * (said on stderr); *ret_json: --json was given; the audit log (--log, else $NSBOX_LOG) or
 * NULL, and --log-code-limit. */
int run_options_parse(int argc, char *argv[], const struct nsbox_config **ret, bool *ret_json,
                      const char **ret_log_path, uint64_t *ret_log_code_limit)
{
    static struct run_args a = {.result_fd = -1};
    /* The config points into it (its argv), so it lives until nsbox exits, as a does. */
    static char **args = NULL;
    int r;

    args = calloc((size_t)argc + 3, sizeof(char *));
    if (!args)
        log_oom();
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0 || strcmp(argv[i], "--code") == 0 ||
            strncmp(argv[i], "--code=", 7) == 0 || strcmp(argv[i], "--result-fd") == 0) {
            return log_error_errno(-EINVAL, "'nsbox session start' takes no program, --code or "
                                            "--result-fd: steps come with 'nsbox session exec'");
        }
        args[i] = argv[i];
    }
    /* A stand-in program for the parser: a session's init runs none of its own. */
    args[argc] = (char *)"--";
    args[argc + 1] = (char *)"true";
    nsbox_config_init(&a.config);
    a.log_code_limit = 64 * 1024;
    r = parse_run_args(argc + 2, args, &a);
    if (r < 0)
        return r;
    if (a.stdout_file || a.stderr_file)
        return log_error_errno(-EINVAL, "'nsbox session start' takes no --stdout-file or "
                                        "--stderr-file: a step's output is in its answer");
    if (!a.log_path && getenv("NSBOX_LOG") && getenv("NSBOX_LOG")[0])
        a.log_path = getenv("NSBOX_LOG");
    *ret = &a.config;
    *ret_json = a.json;
    *ret_log_path = a.log_path;
    *ret_log_code_limit = a.log_code_limit;
    return 0;
}
