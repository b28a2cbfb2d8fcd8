/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `nsbox run`'s options (cmd-run-options.h): argv -> config (getopt_long), for nsbox run and
 * `nsbox session start` (run_options_parse()). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
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
#include "netallow.h"
#include "nsbox.h"
#include "parse.h"
#include "supervise.h"

/* Largest --code file: the code lives in a tmpfs of its own size inside the sandbox. */
#define CODE_MAX (16U << 20)

static void usage_run(FILE *f)
{
    fputs("Usage: nsbox run [OPTIONS] [--] PROGRAM [ARGS...]\n"
          "       nsbox run [OPTIONS] --code FILE|- [--] [ARGS...]\n"
          "\n"
          "Run PROGRAM (looked up in the sandbox's PATH) or Python code in a fresh sandbox:\n"
          "new user, pid, net, mount, ipc, uts and cgroup namespaces, a read-only Python rootfs,\n"
          "no capabilities, no_new_privs and a seccomp filter.\n"
          "\n"
          "Options:\n"
          "  --code FILE|-          run FILE (or stdin) as /work/main.py with python3\n"
          "  --rootfs DIR           root filesystem (default: $NSBOX_ROOTFS, else the built one)\n"
          "  -v, --volume SRC:DST[:ro|rw]\n"
          "                         bind SRC at DST, read-only unless :rw\n"
          "  --mount type=bind,source=SRC,target=DST[,readonly=false]\n"
          "  --mount type=tmpfs,target=DST[,tmpfs-size=SIZE,tmpfs-mode=OCTAL]\n"
          "                         Docker's long form of -v and --tmpfs: SRC may hold ':', a\n"
          "                         field in double quotes ','; read-only unless readonly=false\n"
          "  --tmpfs DST[:size=SIZE,mode=OCTAL,exec]\n"
          "                         a tmpfs at DST (default /tmp:size=16m), noexec unless exec\n"
          "  --shm-size SIZE        size of /dev/shm (default 16m)\n"
          "  -w, --workdir DIR      the payload's working directory (default /work), made if\n"
          "                         missing where the sandbox can write\n"
          "  --workdir-size SIZE    size of the writable /work tmpfs (default 64m)\n"
          "  --copy-in HOST:SANDBOX copy a host file or directory in before the payload starts\n"
          "                         (repeatable; regular files and directories only)\n"
          "  --copy-out SANDBOX:HOSTDIR\n"
          "                         copy a file or directory out into HOSTDIR when the payload\n"
          "                         has ended (repeatable; listed in the JSON result)\n"
          "  --copy-out-max-bytes SIZE, --copy-out-max-files N\n"
          "                         caps of what is copied out (default 64m and 1000)\n"
          "  --workspace NAME       keep /work between runs in the workspace NAME (copied in at\n"
          "                         the start, back at the end; see 'nsbox workspace')\n"
          "  -e, --env KEY=VALUE    add to the environment (KEY alone: take it from nsbox's)\n"
          "  --env-file FILE        add the KEY=VALUE lines of FILE (# comments, KEY alone as -e)\n"
          "  --env-fd N             add the KEY=VALUE records read from descriptor N, each ended\n"
          "                         by a NUL byte (values may hold newlines; nothing on disk)\n"
          "  -u, --user UID[:GID]   ids inside the sandbox (default 65534:65534)\n"
          "  --host-user UID[:GID]  root only: the host ids the sandbox maps to (default: ids of\n"
          "                         the run's own from nsbox's range; see the result's host_uid)\n"
          "  -m, --memory SIZE      memory limit, e.g. 256m (default 256m; 'unlimited')\n"
          "  --pids-limit N         process limit (default 64; 'unlimited')\n"
          "  --cpus N               CPU limit, e.g. 0.5 (default 0.5; 'unlimited')\n"
          "  --timeout SECONDS      wall-clock limit, fractions allowed, or 250ms, 10m, 1h "
          "(default\n"
          "                         10; 'unlimited')\n"
          "  --output-limit BYTES   output kept per stream (default 4000): over it, its first\n"
          "                         half and its last half, with what was cut between counted\n"
          "  --cell                 with --code: run the code as a notebook cell (the value of a\n"
          "                         last expression, display() and plots become the result's\n"
          "                         outputs; an uncaught exception its error object)\n"
          "  --outputs-limit BYTES  a cell's outputs kept (default 4m)\n"
          "  --cgroup MODE          limits in a cgroup v2 leaf: auto (else rlimits, with a\n"
          "                         warning), required (else fail), off (rlimits) (default auto)\n"
          "  --cgroup-parent PATH   make the leaf below this cgroup (default: nsbox's own)\n"
          "  --landlock MODE        Landlock behind the namespaces: auto (where the kernel has\n"
          "                         it, else a note), required (else fail) (default auto)\n"
          "  --isolation MODE       auto: the full sandbox, or without the user namespace's\n"
          "                         user.max_* limits where /proc/sys is read-only (tier 2,\n"
          "                         with a warning); full: refuse tier 2; landlock: as auto,\n"
          "                         and where no user namespace can be made, tier 3 (no\n"
          "                         namespaces: Landlock, seccomp, rlimits; much weaker)\n"
          "                         (default auto)\n"
          "  --network none         no network (the default; 'host' is an opt-out)\n"
          "  --network loopback     only lo, up: the program can reach itself over TCP and UDP on\n"
          "                         127.0.0.1 and ::1, nothing else (policy: network.policy)\n"
          "  --network allow=HOST[,HOST...]\n"
          "                         only lo, and an HTTP proxy there (HTTP_PROXY and friends\n"
          "                         set) that reaches only these hosts: 'pypi.org',\n"
          "                         '*.example.com', an address, each with an optional :PORT\n"
          "                         (default 80 and 443); repeatable\n"
          "  --network allow-file=FILE\n"
          "                         the same, patterns read from FILE (one or more a line, #)\n"
          "  --add-host NAME:ADDRESS\n"
          "                         the proxy resolves NAME to ADDRESS (any range)\n"
          "  --network-max-connections N\n"
          "                         connections the proxy holds at once (default 32)\n"
          "  --network-max-bytes SIZE\n"
          "                         bytes the proxy relays in all (default 1g)\n"
          "  --pid private, --ipc private\n"
          "                         own pid and IPC namespaces (the default; 'host': opt-outs)\n"
          "  --seccomp FILE         seccomp policy (default: the built-in default.policy)\n"
          "  -i, --stdin            copy nsbox's stdin to the program (default: /dev/null)\n"
          "  --json                 print one JSON result object instead of the output\n"
          "  --result-fd N          write the JSON result to descriptor N (above 2); the output\n"
          "                         streams as without --json, and nsbox's own messages go\n"
          "                         only into the result\n"
          "  --raw-output           copy the output to a terminal byte for byte (default: its\n"
          "                         control characters are shown escaped, as \\x1b)\n"
          "  --stdout-file FILE     also write the whole stdout to FILE (made 0600, or emptied),\n"
          "                         whatever --output-limit keeps; never through a symlink, never\n"
          "                         inside a :rw bind\n"
          "  --stderr-file FILE     the same for stderr\n"
          "  --log FILE             append an audit record before and after the run (JSON lines;\n"
          "                         default $NSBOX_LOG); a run that cannot be logged does not "
          "start\n"
          "  --log-code-limit BYTES code kept in the audit log (default 64k; the SHA-256 covers "
          "all)\n"
          "  --name NAME            name the run: unique among your running sandboxes, for\n"
          "                         'nsbox ps' and 'nsbox kill NAME' ([a-zA-Z0-9][a-zA-Z0-9_.-]*)\n"
          "  --label KEY[=VALUE]    label the run (repeatable), to select it in 'nsbox ps' and\n"
          "                         'nsbox kill'\n"
          "  -h, --help             show this help\n"
          "\n"
          "Opt-outs: each removes one protection, with a warning; 'nsbox selftest --ablate' shows\n"
          "what each lets through. Never for untrusted code.\n"
          "  --network host         share the host's network (built-in policy: network.policy)\n"
          "  --pid host             share the host's pid namespace and /proc\n"
          "  --ipc host             share the host's System V IPC and POSIX message queues\n"
          "  --env-inherit          start from nsbox's whole environment\n"
          "  --keep-fds             pass descriptors nsbox inherited (above 2)\n"
          "  --no-seccomp           no seccomp filter\n"
          "  --landlock off         no Landlock wall behind the namespaces\n"
          "(Each written out in full. A limit set to 'unlimited' is no opt-out: the JSON result's\n"
          "limits show it as null.)\n"
          "\n"
          "Exit status: the program's; 128+N if signal N killed it; 124 on timeout;\n"
          "125 if nsbox failed; 126 if PROGRAM cannot be executed; 127 if it is not found.\n",
          f);
}

/* Docker's floor for --memory: below it not even a shell starts. */
#define MEMORY_MIN (6ULL << 20)

/* The CPUs this process may run on (sched_getaffinity(2)), which is what the sandbox can use:
 * --cpus above it would be a limit that never binds, so it is refused, as Docker does. */
static int usable_cpus(void)
{
    cpu_set_t set;
    long n;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The signals `nsbox run` acts on (SIGUSR1 is `nsbox kill`; supervise.h says which and why);
 * see block_run_signals(). */
void run_signals(sigset_t *set)
{
    supervise_signal_set(set);
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
 * names the file's line, and keep them for the config. Returns 0 or -EINVAL after a message. */
static int add_allow(struct run_args *a, const char *value)
{
    struct netallow check = {0};
    _cleanup_free_ char *text = NULL;
    char show[256];
    size_t len = 0;
    unsigned line = 0;
    int r;

    if (strncmp(value, "allow=", 6) == 0) {
        r = netallow_add(&check, value + 6);
        netallow_free(&check);
        if (r < 0)
            return BAD_VALUE("--network", shown(value, show, sizeof(show)),
                             "expected allow=PATTERN[,PATTERN...], each a host name "
                             "(pypi.org), *.domain, an IPv4 address or an [IPv6] one, with an "
                             "optional :PORT");
        text = strdup(value + 6);
    } else {
        const char *path = value + 11;
        r = read_regular_file(path, 1 << 20, &text, &len);
        if (r < 0)
            return log_error_errno(r, "--network allow-file=%s: reading it failed: %m",
                                   shown(path, show, sizeof(show)));
        r = netallow_add_text(&check, text, len, &line);
        netallow_free(&check);
        if (r < 0)
            return log_error_errno(-EINVAL,
                                   "--network allow-file=%s:%u: not a host name, "
                                   "*.domain, IPv4 or [IPv6] address with an optional :PORT",
                                   shown(path, show, sizeof(show)), line);
        /* One pattern list: lines and spaces become commas, comments go. */
        {
            size_t n = 0;
            bool comment = false;
            for (size_t i = 0; i < len; i++) {
                char ch = text[i];
                if (ch == '#')
                    comment = true;
                if (ch == '\n')
                    comment = false;
                if (comment || ch == '\r')
                    continue;
                if (ch == '\n' || ch == ' ' || ch == '\t')
                    ch = ',';
                if (ch == ',' && (n == 0 || text[n - 1] == ','))
                    continue;
                text[n++] = ch;
            }
            while (n > 0 && text[n - 1] == ',')
                n--;
            text[n] = '\0';
            if (n == 0)
                return log_error_errno(-EINVAL, "--network allow-file=%s: no pattern in it",
                                       shown(path, show, sizeof(show)));
        }
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

/* Append one KEY=VALUE entry (malloc()ed; owned by a from now on) to the payload's
 * environment. */
static void env_append(struct run_args *a, char *entry)
{
    a->env = realloc(a->env, (a->n_env + 2) * sizeof(char *));
    if (!a->env)
        log_oom();
    a->env[a->n_env++] = entry;
    a->env[a->n_env] = NULL;
}

/* -e's value, or a line of --env-file: KEY=VALUE, or KEY alone, which takes KEY's value from
 * nsbox's environment (Docker's -e KEY; nothing when it is unset). Returns 0 or -EINVAL. */
static int env_add(struct run_args *a, const char *spec)
{
    const char *eq = strchr(spec, '=');
    const char *v = NULL;
    char *entry = NULL;

    if (!env_name_is_valid(spec, eq ? (size_t)(eq - spec) : strlen(spec)))
        return -EINVAL;
    if (eq)
        entry = xstrdup(spec);
    else {
        v = getenv(spec);
        if (!v)
            return 0;
        entry = xmalloc(strlen(spec) + strlen(v) + 2);
        (void)sprintf(entry, "%s=%s", spec, v);
    }
    env_append(a, entry);
    return 0;
}

/* Most bytes --env-file and --env-fd read: more than execve(2) takes in an environment on a
 * default 8 MiB stack (a quarter of it), so no working environment is refused. */
#define ENV_INPUT_MAX (2U << 20)

/*
 * --env-file FILE: Docker's format. Lines of KEY=VALUE, the value taken as it is (no quotes,
 * no escapes, to the end of the line); KEY alone passes nsbox's own as -e KEY does; blank
 * lines and lines starting with '#' are skipped, as is white space before KEY. A value cannot
 * hold a newline: --env-fd can. Returns 0, or -errno after a one-line error with file:line.
 */
static int parse_env_file(struct run_args *a, const char *path)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0, line = 0;
    char shown_buf[64];
    int r;

    r = read_regular_file(path, ENV_INPUT_MAX, &buf, &len);
    if (r == -EFBIG)
        return log_error_errno(r, "--env-file %s: larger than %u bytes",
                               shown(path, shown_buf, sizeof(shown_buf)), ENV_INPUT_MAX);
    if (r < 0)
        return log_error_errno(r, "--env-file %s: %m", shown(path, shown_buf, sizeof(shown_buf)));
    if (memchr(buf, '\0', len))
        return log_error_errno(-EINVAL,
                               "--env-file %s: contains a NUL byte (for values with "
                               "any bytes, use --env-fd)",
                               shown(path, shown_buf, sizeof(shown_buf)));
    for (char *p = buf, *next = NULL; p < buf + len; p = next) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));

        next = nl ? nl + 1 : buf + len;
        if (nl)
            *nl = '\0';
        line++;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        if (strcspn(p, " \t=") < strcspn(p, "=") || env_add(a, p) < 0)
            return log_error_errno(-EINVAL, "--env-file %s:%zu: expected KEY=VALUE or KEY",
                                   shown(path, shown_buf, sizeof(shown_buf)), line);
    }
    return 0;
}

/*
 * --env-fd N: KEY=VALUE records each ended by a NUL byte, read to the end of descriptor N (a
 * pipe or a memfd), which is then closed. The value is any bytes but NUL, newlines included,
 * and never touches a disk or a command line: the Python API passes its env= this way, so that
 * variables meant for the program never become nsbox's own environment (LD_PRELOAD in nsbox's
 * environment would run code in nsbox, on the host). Returns 0, or -errno after a one-line
 * error.
 */
static int parse_env_fd(struct run_args *a, const char *value)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0, record = 0;
    char *end = NULL;
    long fd;
    int r;

    errno = 0;
    fd = strtol(value, &end, 10);
    if (errno || end == value || *end || fd < 3 || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0)
        return BAD_VALUE("--env-fd", value, "expected an open descriptor above 2, e.g. 3");
    r = read_fd_all((int)fd, ENV_INPUT_MAX, &buf, &len);
    (void)close((int)fd); /* read once; never handed on (not even by --keep-fds) */
    if (r == -EFBIG)
        return log_error_errno(r, "--env-fd %ld: more than %u bytes", fd, ENV_INPUT_MAX);
    if (r < 0)
        return log_error_errno(r, "--env-fd %ld: %m", fd);
    for (char *p = buf; p < buf + len; p += strlen(p) + 1) {
        const char *eq = strchr(p, '=');

        record++;
        if (p + strlen(p) == buf + len)
            return log_error_errno(-EINVAL, "--env-fd %ld: record %zu is not ended by a NUL byte",
                                   fd, record);
        if (!eq || !env_name_is_valid(p, (size_t)(eq - p)))
            return log_error_errno(-EINVAL, "--env-fd %ld: record %zu: expected KEY=VALUE", fd,
                                   record);
        env_append(a, xstrdup(p));
    }
    return 0;
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
            else if (parse_size(optarg, &c->memory) < 0 || c->memory < MEMORY_MIN)
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
            else if (c->cpus_milli > 1000ULL * (unsigned)usable_cpus()) {
                char why[96];
                (void)snprintf(why, sizeof(why),
                               "expected at most %d, the number of CPUs nsbox may run on here",
                               usable_cpus());
                return BAD_VALUE("--cpus", optarg, why);
            }
            break;
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
