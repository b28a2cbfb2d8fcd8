/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libnsbox: run a program in a daemonless, setuid-free Linux namespace sandbox.
 *
 * The nsbox command line is this library's first user. A caller fills a struct nsbox_config
 * (start from nsbox_config_init()), calls nsbox_run(), reads the struct nsbox_result and frees it
 * with nsbox_result_free(). Every function that can fail returns a negative errno value.
 *
 * Units: sizes are bytes, times are microseconds, CPU shares are thousandths of a CPU.
 */
#pragma once

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What libnsbox exports: the functions declared here, each marked NSBOX_EXPORT, and nothing
 * else. The library is built with -fvisibility=hidden (meson's gnu_symbol_visibility), so that
 * its internal functions stay out of libnsbox.so's dynamic symbol table (tests/install/run
 * checks that it holds exactly these). */
#if defined(__GNUC__) && __GNUC__ >= 4
#define NSBOX_EXPORT __attribute__((visibility("default")))
#else
#define NSBOX_EXPORT
#endif

/* What enforced a resource limit (see nsbox_result.limits). */
enum nsbox_enforcer {
    NSBOX_ENFORCER_NONE = 0, /* the limit was not set ("unlimited") */
    NSBOX_ENFORCER_RLIMIT,   /* setrlimit(2) in the payload: per process, see README */
    NSBOX_ENFORCER_CGROUP,   /* a cgroup v2 leaf holding the whole sandbox */
};

/* Whether the sandbox must sit in a cgroup v2 leaf (see README, "Limits"). */
enum nsbox_cgroup_mode {
    NSBOX_CGROUP_AUTO = 0, /* a cgroup leaf where cgroup v2 is delegated, else rlimits */
    NSBOX_CGROUP_REQUIRED, /* a cgroup leaf, or fail (NSBOX_STATUS_ERROR, step "cgroup") */
    NSBOX_CGROUP_OFF,      /* rlimits only */
};

/* Landlock, a second wall behind the mount and network namespaces (README, "Landlock"). */
enum nsbox_landlock_mode {
    NSBOX_LANDLOCK_AUTO = 0, /* applied where the kernel has it (ABI 2 or later), else a note */
    NSBOX_LANDLOCK_REQUIRED, /* applied, or fail (NSBOX_STATUS_ERROR, step "landlock") */
    NSBOX_LANDLOCK_OFF,      /* an opt-out: not applied, and a warning says so */
};

/* Which tiers of isolation a run may take (README, "Isolation tiers"): tier 1 is the full
 * sandbox; tier 2 the full sandbox without what a container denies that is not a wall (the user
 * namespace's user.max_* sysctls where /proc/sys is read-only); tier 3, where no user namespace
 * can be made at all, no namespaces: the host's programs under Landlock (read-only /usr, /lib*
 * and a few files of /etc, writes only in a private scratch directory, no TCP), the default
 * seccomp policy, no_new_privs, no capabilities, rlimits and the wall clock. Weaker, and said
 * so; only on request. nsbox_result.isolation_tier and .isolation_missing say which a run got. */
enum nsbox_isolation_mode {
    NSBOX_ISOLATION_AUTO = 0, /* tier 1, or tier 2 with a warning; where no user namespace can
                               * be made, fail (step "clone3", naming NSBOX_ISOLATION_LANDLOCK) */
    NSBOX_ISOLATION_FULL,     /* tier 1, or fail (NSBOX_STATUS_ERROR, step "isolation") */
    NSBOX_ISOLATION_LANDLOCK, /* as AUTO, and tier 3 (with a warning) where no user namespace
                               * can be made; then options that need namespaces (binds, copies,
                               * a workspace, --network other than none, sessions) fail (step
                               * "isolation"), and so does a kernel without Landlock ABI 2 */
};

/* What a run's tier left out (nsbox_result.isolation_missing). */
#define NSBOX_MISSING_USERNS_LIMITS (1U << 0) /* user.max_* of the sandbox's user namespace */
#define NSBOX_MISSING_SHM_LIMITS (1U << 1)    /* kernel.shm* (System V IPC refused instead) */
/* Tier 3 leaves out every namespace, the rootfs and the cgroup: */
#define NSBOX_MISSING_USER_NS (1U << 2)
#define NSBOX_MISSING_PID_NS (1U << 3)   /* it can signal the caller's processes of its uid */
#define NSBOX_MISSING_NET_NS (1U << 4)   /* the host's network, behind Landlock and seccomp */
#define NSBOX_MISSING_MOUNT_NS (1U << 5) /* the host's files, behind Landlock */
#define NSBOX_MISSING_IPC_NS (1U << 6)
#define NSBOX_MISSING_UTS_NS (1U << 7)
#define NSBOX_MISSING_CGROUP_NS (1U << 8)
#define NSBOX_MISSING_ROOTFS (1U << 9)  /* the host's own /usr, not nsbox's rootfs */
#define NSBOX_MISSING_CGROUP (1U << 10) /* limits by rlimits only */

/* What Landlock restricted in a run (nsbox_result.landlock_restricts). */
#define NSBOX_LANDLOCK_FS (1U << 0)    /* files: only the sandbox's own tree, as its mounts say */
#define NSBOX_LANDLOCK_NET (1U << 1)   /* TCP bind and connect (ABI 4) */
#define NSBOX_LANDLOCK_SCOPE (1U << 2) /* signals and abstract unix sockets (ABI 6) */

/* What the cgroup leaf saw; valid only when the limits were enforced by a cgroup. */
struct nsbox_cgroup_stats {
    bool valid;
    char path[1024];          /* the leaf, below the cgroup2 mount */
    uint64_t memory_peak;     /* bytes (memory.peak, Linux 5.19), 0 if unknown */
    uint64_t oom_kills;       /* memory.events oom_kill */
    uint64_t pids_limit_hits; /* pids.events max: forks refused by pids.max */
    uint64_t cpu_user;        /* microseconds (cpu.stat user_usec) */
    uint64_t cpu_system;      /* microseconds (cpu.stat system_usec) */
};

/* Longest run name (bytes), see nsbox_config.name. */
#define NSBOX_NAME_MAX 128

/* One bind mount from the host into the sandbox (`-v SOURCE:TARGET[:ro|rw]`). */
struct nsbox_bind {
    const char *source; /* absolute host path */
    const char *target; /* absolute path inside the sandbox */
    bool writable;      /* false: read-only (the default) */
};

/* One copy between the host and the sandbox (`--copy-in HOST:SANDBOX`,
 * `--copy-out SANDBOX:HOSTDIR`). */
struct nsbox_copy {
    const char *host;    /* copy-in: the file or directory to copy (absolute); copy-out: the
                          * directory the copies go to (absolute; made if missing) */
    const char *sandbox; /* absolute path inside the sandbox: copy-in, where the copy goes;
                          * copy-out, the file or directory to copy */
};

/* One tmpfs inside the sandbox (`--tmpfs PATH:size=16m`). */
struct nsbox_tmpfs {
    const char *target; /* absolute path inside the sandbox */
    uint64_t size;      /* bytes, > 0 */
    unsigned mode;      /* permission bits of its root directory, e.g. 01777 */
    bool exec;          /* false (the default): mounted noexec, as Docker's --tmpfs */
};

struct nsbox_config {
    /* The root filesystem directory. Mount points it lacks (/proc, /dev, /tmp, /work, bind and
     * tmpfs targets) are made in a read-only tmpfs skeleton over it; it is never written.
     * NULL means nsbox_default_rootfs(). */
    const char *rootfs;

    /* Program and arguments, NULL-terminated; argv[0] without a '/' is looked up in the
     * sandbox's PATH inside the rootfs. Ignored when code is set. */
    char *const *argv;

    /* Python source to run as the read-only file /work/main.py with `python3 /work/main.py`,
     * or NULL. Not copied: it must stay valid during nsbox_run(). */
    const char *code;
    size_t code_size; /* bytes */
    /* true: the code runs as a notebook cell (`nsbox run --cell`; cell.py): the value of its
     * last expression and what it display()s or plots become the result's outputs, written by
     * nsbox's cell driver to a channel (a memfd at the payload's fd 4) that the supervisor
     * reads when the run has ended, at most outputs_limit bytes (0: 4 MiB), and an uncaught
     * exception becomes the result's error object. Needs code. */
    bool cell;
    uint64_t outputs_limit;

    /* Environment additions, "KEY=VALUE" strings, NULL-terminated or NULL. The payload's
     * environment is PATH, HOME=/tmp, LANG=C.UTF-8 and PYTHONUNBUFFERED=1 plus these (a KEY
     * here overrides; "PYTHONUNBUFFERED=" buffers Python's output again). */
    char *const *env;

    /* Bind mounts and extra tmpfs mounts, in the order they are applied. */
    const struct nsbox_bind *binds;
    size_t n_binds;
    const struct nsbox_tmpfs *tmpfs; /* a tmpfs on /tmp is added unless one is listed here */
    size_t n_tmpfs;

    uid_t uid; /* user id inside the sandbox (default 65534) */
    gid_t gid; /* group id inside the sandbox (default 65534) */

    /* The host ids the sandbox's ids map to, for a caller that is root. 0 (the default): a uid
     * and gid of the run's own, from nsbox's reserved range (2113929216…2113933311), held for
     * the run only, so that no other sandbox and no host process shares them; the result's
     * host_uid says which. Non-zero: exactly these ids (host_gid 0: the same number as
     * host_uid), shared with whatever else runs as them; 0 is never mapped. An ordinary
     * user's sandbox always maps to the user themself: host_uid must then be 0 or that user's
     * uid, host_gid 0 or their gid. */
    uid_t host_uid;
    gid_t host_gid;

    uint64_t memory;       /* bytes; 0 = unlimited (default 256 MiB); at least 6 MiB (-EINVAL) */
    uint64_t pids_limit;   /* processes; 0 = unlimited (default 64) */
    uint64_t cpus_milli;   /* thousandths of a CPU; 0 = unlimited (default 500); at most the
                            * CPUs the caller may run on (sched_getaffinity(2); -EINVAL) */
    uint64_t timeout;      /* wall clock, microseconds; 0 = none (default 10 s) */
    uint64_t output_limit; /* bytes captured per stream (default 4000); fewer when their JSON
                            * string would pass twice this (control characters, bytes that are
                            * not UTF-8: README, "JSON result") */
    uint64_t tmp_size;     /* bytes of the default /tmp tmpfs (default 16 MiB) */
    uint64_t shm_size;     /* bytes of the /dev/shm tmpfs (default 16 MiB) */

    /* The seccomp policy file (policy/README.md), or NULL for the built-in default policy. */
    const char *seccomp_policy;
    /* true: no seccomp filter at all. For demonstrating what the filter stops; never for
     * untrusted code. */
    bool seccomp_disabled;

    /* Landlock (default NSBOX_LANDLOCK_AUTO): the files the sandbox may read, write and
     * execute, the TCP ports it may bind and connect to, and the processes and abstract unix
     * sockets it may reach, restricted once more by the kernel's Landlock LSM, as the mounts
     * and namespaces already do. NSBOX_LANDLOCK_OFF is an opt-out. */
    enum nsbox_landlock_mode landlock;

    /* The tiers of isolation the run may take (default NSBOX_ISOLATION_AUTO). */
    enum nsbox_isolation_mode isolation;

    /* Where the limits are enforced (default NSBOX_CGROUP_AUTO). */
    enum nsbox_cgroup_mode cgroup;
    /* The cgroup (a path below the cgroup2 mount, e.g. "/test.slice/runs") whose children the
     * sandboxes' leaves become, or NULL for the caller's own cgroup. */
    const char *cgroup_parent;

    /* true: the caller's fd 0 is copied to the payload's stdin (a socket; the payload never
     * gets the caller's descriptor); false: the payload's stdin is /dev/null (the default). */
    bool pass_stdin;

    /* Where the payload's output is copied as it arrives, up to output_limit bytes per stream,
     * or -1 to only capture it into the result (the default). */
    int stdout_fd;
    int stderr_fd;
    /* Where the whole stream is written as it arrives, whatever output_limit keeps: a regular
     * file the caller opened for writing (nsbox run --stdout-file: outside every writable bind,
     * never through a symlink), or -1 (the default). nsbox writes to it and never closes it.
     * A failed write stops the writing and says so (nsbox_stream.file_error). */
    int stdout_file_fd;
    int stderr_file_fd;
    /* true: what is copied to stdout_fd (stderr_fd) is first made safe to show on a terminal:
     * control characters shown escaped as \xHH and "nsbox:" marked (README, "Output on a
     * terminal"). The output in the result stays byte for byte. For a terminal only. */
    bool stdout_escape;
    bool stderr_escape;

    /* Called with each warning (one line, no "nsbox: " prefix) as soon as it arises, before
     * the payload starts; NULL to only collect them in nsbox_result.warnings. */
    void (*warn)(const char *message, void *userdata);
    void *warn_userdata;

    /* true: while nsbox_run() runs, SIGINT, SIGTERM, SIGHUP and every other signal that would
     * end the process (supervise_signal_set()) are blocked in the calling thread and forwarded
     * to the payload (SIGINT and SIGHUP as they are, the others as SIGTERM) (SIGUSR1 kills the
     * sandbox: NSBOX_STATUS_KILLED); a second one, or the payload ignoring the first for 5 s, kills
     * the sandbox. false (the default): the caller's signal handling is untouched. */
    bool forward_signals;

    /* Opt-outs. Each removes one protection, loudly: nsbox_run() adds a warning naming it.
     * They exist to show what each protection stops (`nsbox selftest --ablate`) and for
     * trusted code that needs the host's resource; never set them for untrusted code. */
    /* true: no network namespace: the payload shares the host's network, and the built-in
     * policy becomes policy/network.policy (AF_INET and AF_INET6 sockets allowed; a policy
     * given in seccomp_policy is used as it is). Docker's --network host. */
    bool network_host;
    /* true: no pid namespace: the payload sees and can signal the host's processes of its
     * host uid, /proc is the host's, and processes it starts in the background outlive the
     * run unless a cgroup leaf holds them or the run's host ids are its own (root's runs
     * without host_uid: nsbox then kills every process of them at the end). Docker's --pid
     * host. */
    bool pid_host;
    /* true: no IPC namespace: System V IPC objects and POSIX message queues are the host's.
     * Docker's --ipc host. */
    bool ipc_host;
    /* true: the payload's environment starts from the caller's whole environ(7) (then PATH,
     * HOME, LANG and env as usual): every secret exported there reaches it. */
    bool env_inherit;
    /* true: descriptors the caller left open without FD_CLOEXEC (above 2) reach the payload;
     * false: everything above stderr is closed before execve (close_range(2)). */
    bool keep_fds;

    /* Not an opt-out: true brings up lo in the sandbox's own network namespace and the built-in
     * policy becomes policy/network.policy, so the payload can serve and connect on 127.0.0.1
     * and ::1 to itself; the host's network and its lo stay out of reach. Ignored with
     * network_host. Docker's --network none has lo up in the same way. */
    bool network_loopback;

    /* Not an opt-out: a non-empty list gives the sandbox the network of network_loopback plus
     * an HTTP proxy at 127.0.0.1:3128 inside it (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY
     * set, in both cases), which nsbox runs outside and which reaches only these hosts: each
     * string is one or more patterns separated by commas, "host", "*.domain" (the names below
     * domain), an IPv4 address or an IPv6 one in brackets, each with an optional ":PORT" (else
     * ports 80 and 443). Names are resolved outside, and one that resolves to a loopback,
     * private, link-local or otherwise non-public address is refused (an address pattern or
     * network_hosts is the caller's word). NULL-terminated, or NULL. -EINVAL for a bad pattern
     * and with network_host. README, "Network allowlist". */
    char *const *network_allow;
    /* "NAME:ADDRESS" strings (Docker's --add-host), NULL-terminated, or NULL: the proxy of
     * network_allow resolves NAME to ADDRESS without asking DNS, whatever range it is in.
     * -EINVAL for a bad entry, and without network_allow. */
    char *const *network_hosts;
    /* Connections the proxy holds open at once (default 32, at most 1024 (-EINVAL); more are
     * answered with a 503), and bytes it relays in all, both ways (default 1 GiB; past it
     * every connection is cut). 0 means the default. */
    uint64_t network_max_connections;
    uint64_t network_max_bytes;

    /* A name for the run (Docker's --name), or NULL: [a-zA-Z0-9][a-zA-Z0-9_.-]*, at most
     * NSBOX_NAME_MAX bytes (-EINVAL otherwise). nsbox_run() checks it and reports it in
     * nsbox_result.name; the nsbox command also keeps it unique among the caller's running
     * sandboxes (`nsbox ps`, `nsbox kill NAME`). */
    const char *name;
    /* Labels (Docker's --label): "KEY=VALUE" strings, or "KEY" for an empty value,
     * NULL-terminated, or NULL. KEY is [a-zA-Z0-9][a-zA-Z0-9_./-]*, at most 128 bytes; VALUE at
     * most 1024 bytes without control characters (-EINVAL otherwise). A later KEY wins.
     * Reported in nsbox_result.labels; `nsbox ps --filter label=` and `nsbox kill --label`
     * select runs by them. */
    char *const *labels;

    /* The working directory: /work is a tmpfs of workdir_size bytes (default 64 MiB; the
     * code's own size is added to it), writable by the payload, nosuid, nodev, noexec, holding
     * the code as the read-only /work/main.py. workdir (Docker's -w), or NULL for /work: the
     * payload's working directory, made (mode 0755) if missing, where the sandbox can write. */
    uint64_t workdir_size;
    const char *workdir;

    /* Files copied into the sandbox before the payload starts (never bound): each host path is
     * opened by nsbox refusing symlinks as -v sources do (only root's, in directories only root
     * can write, are followed); a directory is copied recursively, regular files and
     * directories only, without setuid, setgid or sticky bits. The copies land below writable
     * places of the sandbox (/work, /tmp, a tmpfs), owned by the payload's uid. */
    const struct nsbox_copy *copy_in;
    size_t n_copy_in;
    /* Files copied out of the sandbox after the payload has ended (and everything else in the
     * sandbox has been killed), before it is torn down; not after a timeout, a kill or a setup
     * failure. Regular files and directories only (symlinks, devices, FIFOs and sockets are
     * skipped and listed in the result), at most copy_out_max_files files (default 1000) and
     * copy_out_max_bytes bytes (default 64 MiB) in all: a file past a cap is skipped and listed,
     * and nsbox_result.copy_out_complete is false. Written below each host directory through
     * descriptors only (O_NOFOLLOW, no path the sandbox made is ever followed), mode 0644 or
     * 0755, never setuid. Needs the pid namespace (not with pid_host). */
    const struct nsbox_copy *copy_out;
    size_t n_copy_out;
    uint64_t copy_out_max_bytes;
    uint64_t copy_out_max_files;

    /* A workspace (README, "Workspaces"): a directory nsbox keeps for the caller below
     * $XDG_STATE_HOME/nsbox/workspaces/NAME (default ~/.local/state), made 0700 on first use.
     * Its files are copied into /work before the payload starts and /work is copied back into
     * it when the payload has ended, with the copy-out caps; a run that hits a cap, times out or
     * is killed leaves the workspace as it was (a warning says so). One run at a time: a second
     * run on a workspace in use fails (step "workspace"). NAME is [a-zA-Z0-9][a-zA-Z0-9_.-]*,
     * at most NSBOX_NAME_MAX bytes. NULL: none. */
    const char *workspace;
};

enum nsbox_status {
    NSBOX_STATUS_EXITED,   /* the payload exited; exit_code is its status */
    NSBOX_STATUS_SIGNALED, /* a signal killed the payload; signal says which */
    NSBOX_STATUS_TIMEOUT,  /* the wall-clock limit ran out and the sandbox was killed */
    NSBOX_STATUS_ERROR,    /* nsbox could not start the payload; error says why */
    NSBOX_STATUS_OOM,      /* the cgroup's OOM killer killed the payload (signal is SIGKILL) */
    NSBOX_STATUS_KILLED,   /* killed on request (`nsbox kill`, SIGUSR1 to nsbox) */
};

struct nsbox_stream {
    char *data;      /* captured bytes, NUL-terminated (not necessarily UTF-8), owned */
    size_t captured; /* bytes in data, <= output_limit, their JSON string <= 2 x output_limit */
    uint64_t total;  /* bytes the payload wrote to the stream in all */
    bool truncated;  /* total > captured: total - captured bytes were cut between the head and
                      * the tail */
    /* Over output_limit, the start and the end of the stream are kept, half the limit each:
     * data[0..head) is the start (the head), data[head..captured) the end (the tail), and
     * total - captured bytes holding cut_lines newlines were cut between them. Nothing cut:
     * head == captured. */
    size_t head;
    uint64_t cut_lines;
    /* With stdout_file_fd (stderr_file_fd): bytes written to it, and 0 or the errno of the
     * write that failed (the file then holds the first file_bytes bytes). */
    bool file_asked;
    uint64_t file_bytes;
    int file_error;
    /* The pipe had not reached end-of-file when nsbox stopped reading it, a short grace after
     * the sandbox ended: a process outside the sandbox held it open (one --pid host left
     * running, a descriptor passed out in a unix socket message), so output may be missing
     * (a warning says so too). */
    bool incomplete;
};

/* A system call the seccomp policy refused, and how often (see nsbox_result.refused). */
struct nsbox_refused_syscall {
    char name[32]; /* "mount", or "nr:NNN" for a number without a name */
    uint64_t count;
};
#define NSBOX_REFUSED_MAX 64

/* One connection the proxy of network_allow took (see nsbox_result.network). */
struct nsbox_network_connection {
    char host[254]; /* as the client named it (normalised), or "" if it named none */
    uint16_t port;
    bool allowed;        /* the proxy connected it upstream */
    char reason[96];     /* why it was refused or cut, or "" */
    uint64_t bytes_sent; /* from the payload to the host */
    uint64_t bytes_received;
};
#define NSBOX_NETWORK_MAX 64

/* The allowed connections of one host and port, all of them (the connection list keeps only
 * NSBOX_NETWORK_MAX). A host below a wildcard pattern is counted under the pattern
 * ("*.example.com") once fewer than NSBOX_NETWORK_HOSTS_WILDCARD entries are left; the last
 * entry, host "" and port 0, counts whatever no entry was left for. */
struct nsbox_network_host {
    char host[254];
    uint16_t port;
    uint64_t connections;
    uint64_t bytes_sent, bytes_received;
};
#define NSBOX_NETWORK_HOSTS_MAX 64
#define NSBOX_NETWORK_HOSTS_WILDCARD 16

/* What the proxy of network_allow did; enabled is false without it. */
struct nsbox_network_report {
    bool enabled;
    /* In order of arrival; refused ones take at most half of the list, so that requests that
     * are refused cannot push an allowed one out. */
    struct nsbox_network_connection connections[NSBOX_NETWORK_MAX];
    size_t n_connections;
    uint64_t connections_omitted; /* connections not in the list */
    uint64_t connections_total, connections_refused;
    uint64_t bytes_sent, bytes_received; /* all connections */
    bool bytes_limit_hit;                /* network_max_bytes was reached: connections were cut */
    bool connections_limit_hit;          /* a connection was refused for network_max_connections */
    /* The proxy's pace and budget (its work is outside the sandbox's limits): connections
     * accepted after its burst was used up (each waited for its turn in the listen queue),
     * name lookups made (each a process of the supervisor's), lookups that came after their
     * burst was used up (a connection waited for its turn), and connections refused because
     * the run's budget of lookups was spent. See README.md, "Network allowlist". */
    uint64_t connections_throttled;
    uint64_t lookups, lookups_throttled, lookups_refused_budget;
    /* Every allowed connection's bytes, by host and port, in order of first arrival. */
    struct nsbox_network_host hosts[NSBOX_NETWORK_HOSTS_MAX];
    size_t n_hosts;
};

/* A file copied out of the sandbox (see nsbox_config.copy_out). */
struct nsbox_copied_file {
    char *path;      /* inside the sandbox, absolute */
    char *host_path; /* where it was written on the host; NULL for a workspace's files */
    uint64_t size;   /* bytes */
    char sha256[65]; /* lowercase hex */
};

/* A regular file the payload created or changed in /work (see nsbox_result.written). */
#define NSBOX_WRITTEN_MAX 100
struct nsbox_written_file {
    char *path;      /* absolute ("/work/out/plot.png") */
    uint64_t size;   /* bytes, when the payload ended */
    char sha256[65]; /* lowercase hex; "" past the 16 MiB hashed per run */
};

/* What kind of thing a skipped entry is (nsbox_skipped_file.kind): what code decides on, where
 * reason is only the words for a person. */
enum nsbox_skip_kind {
    /* Not a regular file or directory (a symlink, FIFO, socket, device, another mount), or a
     * source that does not exist: it never crosses, so nothing of its content is missing. */
    NSBOX_SKIP_NOT_COPIED = 0,
    /* A regular file or directory over copy_out_max_files or copy_out_max_bytes. */
    NSBOX_SKIP_OVER_CAP,
    /* A regular file or directory that could not be read or named (unreadable, too deep, a
     * name too long): its content is missing. */
    NSBOX_SKIP_UNREADABLE,
};

/* Something not copied out, and why ("symlink", "fifo", "over --copy-out-max-bytes", ...). */
struct nsbox_skipped_file {
    char *path;
    char *reason;
    enum nsbox_skip_kind kind;
};
#define NSBOX_SKIPPED_MAX 100

struct nsbox_limit_report {
    uint64_t value; /* as configured, in the config's units */
    enum nsbox_enforcer enforced_by;
};

/* The Python interpreter of a started sandbox, after a code step (struct nsbox_result). */
enum nsbox_interpreter {
    NSBOX_INTERPRETER_NONE = 0,  /* not a code step */
    NSBOX_INTERPRETER_STARTED,   /* a fresh interpreter was started for this step */
    NSBOX_INTERPRETER_KEPT,      /* the step ran in the interpreter of the steps before */
    NSBOX_INTERPRETER_RESTARTED, /* its time was up and it ignored KeyboardInterrupt: killed,
                                  * its state lost; the next code step starts a fresh one */
    NSBOX_INTERPRETER_CRASHED,   /* it died during the step; the next starts a fresh one */
};

struct nsbox_result {
    enum nsbox_status status;
    int exit_code;           /* NSBOX_STATUS_EXITED: the payload's exit status */
    int signal;              /* NSBOX_STATUS_SIGNALED: the signal number */
    uint64_t wall_time;      /* microseconds from sandbox creation until nsbox_run() stopped
                                supervising it (output drained) */
    struct nsbox_stream out; /* the payload's stdout */
    struct nsbox_stream err; /* the payload's stderr */

    /* NSBOX_STATUS_ERROR: the step that failed ("pivot_root", "execve", ...), the errno it
     * failed with (0 if none applies) and a one-line message without the "nsbox: " prefix. */
    char error_step[64];
    int error_errno;
    char error[512];
    /* NSBOX_STATUS_ERROR: the error is the caller's mistake in its config (error_step
     * "config"); nsbox_run() then returned -EINVAL when the mistake was an invalid value. */
    bool error_config;

    /* The system calls the policy refused with EPERM, in the order first seen, when the kernel
     * lets nsbox watch them (SECCOMP_RET_USER_NOTIF and pidfd_getfd(2), Linux 5.6), a policy's
     * "return EPERM if ..." exceptions included; so are inotify_init and inotify_init1, refused
     * with ENOSYS. Other ENOSYS answers (clone3, openat2) are not recorded. refused_other counts
     * the refusals of system calls past the first NSBOX_REFUSED_MAX. refused_throttled: the
     * program made refused calls faster than the supervisor answers them (a burst of 1000,
     * then 1000 a second), so some of its calls waited for their EPERM. */
    bool seccomp_reporting;
    struct nsbox_refused_syscall refused[NSBOX_REFUSED_MAX];
    size_t n_refused;
    uint64_t refused_other;
    bool refused_throttled;
    /* Among them, an AF_INET or AF_INET6 socket in a sandbox without a network (neither
     * network_loopback nor network_host): the notes say how to get local sockets. */
    bool refused_inet_socket;
    /* Among them, what the notes explain: a set-user-ID or set-group-ID bit in a chmod or a
     * create mode; RLIMIT_CORE set (nsbox keeps it at 1); a terminal's line discipline changed
     * (TIOCSETD); an inotify instance (ENOSYS). */
    bool refused_setid_mode;
    bool refused_core_limit;
    bool refused_tty_ldisc;
    bool refused_inotify;

    /* Lines of warnings for the caller, '\n'-separated (unknown system calls in a user's
     * policy, which are skipped), or "". */
    char warnings[1024];
    /* Of those, the lines that explain this run's outcome and name what to change (a full
     * /work or /dev/shm, a workspace not saved, copy-out incomplete, output that may be
     * missing, a session's Python interpreter restarted), in the same order and words, or "":
     * what a model running code is shown. The other warnings are about the host or the
     * caller's options (the rlimit fallback, an opt-out), which the program cannot change. A
     * line is kept here even when warnings had no room left for it. */
    char outcome_warnings[1024];

    struct nsbox_limit_report memory, pids_limit, cpus, timeout;
    /* Bytes used and free in /dev/shm when the payload ended (0 and 0 if unknown). A
     * payload that dies of SIGBUS with it full ran out of --shm-size, not of --memory: then
     * shm_full is true and a warning says so. */
    uint64_t shm_used, shm_free;
    bool shm_full;
    /* Landlock as applied: the ABI version whose rights nsbox handled (0: not applied) and
     * what it restricted (NSBOX_LANDLOCK_FS, _NET, _SCOPE). landlock_missing: the errno that
     * said this kernel has no usable Landlock (ENOSYS, EOPNOTSUPP; EPROTO for ABI 1, which
     * nsbox does not use), or 0; the notes then say so. */
    int landlock_abi;
    unsigned landlock_restricts;
    int landlock_missing;
    /* The tier of isolation the run got (1 or 2; 0 when it failed before the plan said) and
     * what that tier left out (NSBOX_MISSING_*; 0 in tier 1). */
    int isolation_tier;
    unsigned isolation_missing;
    /* Why limits were not enforced by a cgroup, or "". */
    char limits_note[1024];
    struct nsbox_cgroup_stats cgroup;

    /* config->name, or "". */
    char name[NSBOX_NAME_MAX + 1];
    /* Copies of config->labels, "KEY=VALUE" (a later KEY wins in the JSON), NULL-terminated,
     * owned (nsbox_result_free()); NULL when there are none. */
    char **labels;
    /* The host ids the sandbox ran as (for root's runs, from nsbox's range unless
     * config.host_uid chose them), or 0 when the run failed before they were chosen. Files the
     * payload creates through a writable bind belong to them on the host. */
    uid_t host_uid;
    gid_t host_gid;
    /* The run had a writable bind (-v SRC:DST:rw): a "Permission denied" of the program then
     * gets a note naming the host ids it writes as. */
    bool writable_binds;

    /* Bytes of output kept per stream (the config's output_limit), for the explanations. */
    uint64_t output_limit;

    /* Set only when the payload's stderr mentions ModuleNotFoundError, for its note: the
     * rootfs the sandbox ran on, and the profile `nsbox rootfs build` recorded in it
     * (usr/share/nsbox/profile), or "" when it has none. */
    char rootfs[256];
    char rootfs_profile[32];

    /* The proxy of config.network_allow: every connection, allowed or refused. */
    struct nsbox_network_report network;
    /* Bytes used and free in the /work tmpfs when the payload ended (0 and 0 if unknown);
     * work_full: less than a page was free, so the payload's writes there may have failed with
     * ENOSPC (a warning names --workdir-size). */
    uint64_t work_used, work_free;
    bool work_full;
    uint64_t workdir_size; /* bytes, as configured */

    /* Copy-out (config.copy_out, config.workspace): what was copied and what was not.
     * copy_out_done: the copy was taken (the payload ended by itself). copy_out_complete: every
     * file was copied; false when anything was skipped. Owned (nsbox_result_free()). */
    bool copy_out_asked; /* config.copy_out or config.workspace was given */
    bool copy_out_done, copy_out_complete;
    struct nsbox_copied_file *copied;
    size_t n_copied;
    struct nsbox_skipped_file *skipped;
    size_t n_skipped;
    uint64_t skipped_more; /* skipped entries past the NSBOX_SKIPPED_MAX listed */
    /* Of the skipped entries, listed or not, the regular files and directories (over a cap,
     * unreadable, too deep, a name the host cannot take): their content is missing. A
     * workspace is not saved when there is any. */
    uint64_t copy_out_lost;
    /* The regular files the payload created or changed in /work, found by comparing a walk
     * of /work before it started with one after it ended (name, size, mtime, ctime, inode),
     * copied out or not: at most NSBOX_WRITTEN_MAX, owned (nsbox_result_free()).
     * written_known: the walk after was made (not when the run was killed or timed out, or
     * failed to start); written_more: files past the list; written_partial: a walk stopped at
     * its bound (10000 entries, 32 levels), so files may be missing. */
    bool written_known, written_partial;
    struct nsbox_written_file *written;
    size_t n_written;
    uint64_t written_more;
    /* The workspace used, or "", and whether it was saved. */
    char workspace[NSBOX_NAME_MAX + 1];
    bool workspace_saved;

    /* A notebook cell's outputs (config.cell, a session's code step): cell is true and outputs
     * holds the lines the cell driver wrote (JSON, one object a line, NUL-terminated), at most
     * outputs_limit bytes up to a whole line; outputs_total is how many it wrote. Owned
     * (nsbox_result_free()); NULL when the cell wrote none. */
    bool cell;
    char *outputs;
    size_t outputs_size;
    uint64_t outputs_total, outputs_limit;

    /* A step of a started sandbox (nsbox_sandbox_step()): the Python interpreter a code step
     * ran in; NSBOX_INTERPRETER_NONE for a program step and for nsbox_run(). */
    enum nsbox_interpreter interpreter;
};

/* A limit a run can end by or run into (see nsbox_result_limit()). */
enum nsbox_limit {
    NSBOX_LIMIT_NONE = 0,
    NSBOX_LIMIT_TIMEOUT, /* the wall clock: the sandbox was killed (NSBOX_STATUS_TIMEOUT) */
    NSBOX_LIMIT_MEMORY,  /* the cgroup's memory.max: its OOM killer (NSBOX_STATUS_OOM) */
    NSBOX_LIMIT_PIDS,    /* the cgroup's pids.max refused forks; the payload went on */
    NSBOX_LIMIT_CPU,     /* RLIMIT_CPU under rlimits: SIGXCPU killed the payload */
    NSBOX_LIMIT_OUTPUT,  /* output past output_limit was dropped; the payload went on */
};

/* Fill *config with the defaults listed in struct nsbox_config. Cannot fail. */
NSBOX_EXPORT void nsbox_config_init(struct nsbox_config *config);

/* The rootfs used when config->rootfs is NULL: $NSBOX_ROOTFS if set, else the build tree's
 * rootfs when running from the build tree and it exists, else the installed data directory.
 * Returns a static string; never NULL. */
NSBOX_EXPORT const char *nsbox_default_rootfs(void);

/* Read a network allowlist file (the command's --network allow-file=FILE) into one string for
 * nsbox_config.network_allow: one or more patterns a line as there (separated by spaces or
 * commas), blank lines and '#' comments skipped; at most 1 MiB. On success *ret_patterns is a
 * malloc()ed string of the patterns separated by commas (free(3) it). Returns 0; -EBADMSG when
 * a line is not a list of patterns (*ret_line is that line, 1-based) or the file holds none
 * (*ret_line 0); -EINVAL when path is not a regular file; -EFBIG above 1 MiB; -ENOMEM; or
 * open(2)'s and read(2)'s -errno. nsbox_run() checks the patterns once more, as any in
 * network_allow. */
NSBOX_EXPORT int nsbox_network_allow_file(const char *path, char **ret_patterns,
                                          unsigned *ret_line);

/* The lowest memory limit (nsbox_config.memory): below it not even a shell starts (Docker's
 * floor for --memory). The defaults nsbox_config's network_max_connections and
 * network_max_bytes stand for when 0. */
#define NSBOX_MEMORY_MIN (6ULL << 20)
#define NSBOX_NETWORK_MAX_CONNECTIONS_DEFAULT 32
#define NSBOX_NETWORK_MAX_BYTES_DEFAULT (1ULL << 30)

/* The checks nsbox_run() makes of a config before it resolves or opens anything: values out of
 * range (memory below NSBOX_MEMORY_MIN, cpus above the usable CPUs, ...) and options that
 * exclude each other. Opens nothing. Returns 0, or -EINVAL with ret's status, error_step
 * ("config") and error (a sentence naming the option) set; it allocates nothing in ret. */
NSBOX_EXPORT int nsbox_config_check(const struct nsbox_config *config, struct nsbox_result *ret);

/* Whether patterns (nsbox_config.network_allow's syntax: comma-separated host names, *.domain,
 * IPv4 or [IPv6] addresses, each with an optional :PORT) parse. Returns 0, -EINVAL for a bad
 * pattern, or -ENOMEM. */
NSBOX_EXPORT int nsbox_network_allow_check(const char *patterns);

/* Fill *set with the signals nsbox_run() blocks and forwards under forward_signals: each one
 * whose default action ends the process and that another process can send, but SIGPIPE and the
 * ones the kernel sends for the process's own faults (SIGSEGV, SIGBUS, ...). Cannot fail. */
NSBOX_EXPORT void nsbox_signal_set(sigset_t *set);

/* Where a run of config would get its cgroup v2 leaf, without changing anything (nothing made,
 * moved or started). Returns 1 with the place, and why the places before it did not do, in
 * what[size]; 0 with the reason a run would fall back to rlimits; or a -errno with the reason a
 * run would fail. */
NSBOX_EXPORT int nsbox_cgroup_placement(const struct nsbox_config *config, char *what, size_t size);

/* The writable bind of config (an index into config->binds) whose source, opened as the sandbox
 * would bind it, is one of the files or directories ids[n] name by st_dev and st_ino (say a path
 * and every directory above it): a place the run can write. Returns the index, -ENOENT when
 * none (or no source can be opened), or -ENOMEM. */
NSBOX_EXPORT int nsbox_config_writable_bind(const struct nsbox_config *config,
                                            const struct stat *ids, size_t n);

/* A seccomp policy's size once compiled (nsbox_policy_check()). */
struct nsbox_policy_stats {
    size_t rules;          /* rules after @include */
    unsigned filters;      /* BPF programs as a run loads them (1 where the kernel has seccomp
                            * notifications), before the run joins its memfd program */
    unsigned instructions; /* BPF instructions in all */
};
/* A policy's warning: the file and 1-based line of the rule it is about. */
typedef void (*nsbox_policy_warn_fn)(const char *file, unsigned line, const char *message,
                                     void *userdata);

/* Parse and compile the seccomp policy file at path (nsbox_config.seccomp's format) as a run
 * would; NULL: the built-in policy. Each warning goes to warn (if not NULL). Returns 0 with *ret
 * filled, or a -errno (-ENOENT/-EACCES for an unreadable file, -EINVAL for a syntax error,
 * -ENOMEM) with "file:line:column: what" in error[size]. */
NSBOX_EXPORT int nsbox_policy_check(const char *path, nsbox_policy_warn_fn warn, void *userdata,
                                    struct nsbox_policy_stats *ret, char *error, size_t size);

/* Write the compiled filters of the policy at path (NULL: the built-in one) to fd as readable
 * BPF, each under a heading. Returns 0, or a -errno as nsbox_policy_check() (or write(2)'s). */
NSBOX_EXPORT int nsbox_policy_dump(const char *path, int fd, char *error, size_t size);

/* Lease a host uid (also the gid) from nsbox's pool of host ids, as a run without host_uid
 * takes one, for a caller that runs several sandboxes as one host user (host_uid, host_gid)
 * whose processes may outlive a run. Root only. Returns a lock descriptor (O_CLOEXEC) that
 * holds the lease while any copy of it is open, with the id in *ret_id; or -EPERM (the pool's
 * directory is not root's alone), -EBUSY (every id taken) or open(2)'s and fcntl(2)'s -errno,
 * with a sentence in detail[size]. A lease left by a killed caller is swept (its processes
 * killed) before the id is handed out again. */
NSBOX_EXPORT int nsbox_host_ids_lease(uid_t *ret_id, char *detail, size_t size);

/* End a lease of nsbox_host_ids_lease(): kill every process running as id, then close lock_fd.
 * Returns 0, or the -errno of fork(2)/waitpid(2)/setresuid(2) or pwrite(2) (the lease is then
 * left marked, so that the next taker sweeps it). */
NSBOX_EXPORT int nsbox_host_ids_release(int lock_fd, uid_t id);

/*
 * Run the configured payload in a fresh sandbox and wait for it to end.
 *
 * On return, the sandbox and everything in it are gone: every process has been killed and
 * reaped and every descriptor nsbox opened is closed. (One exception, opted into: with pid_host,
 * no cgroup leaf and host ids not the run's own, processes the payload left in the background
 * survive it.) If the calling process dies, the kernel
 * kills the sandbox too (PR_SET_PDEATHSIG on the sandbox's init).
 *
 * Returns 0 when the payload ran or nsbox reports why it could not (status NSBOX_STATUS_ERROR,
 * with error_step, error_errno and error set; 125/126/127 from nsbox_exit_status()); *ret is then
 * filled and must be released with nsbox_result_free().
 * Returns -EINVAL for an invalid config (message in ret->error, *ret still filled).
 * The sandbox setup errors (-EPERM from clone3 when user namespaces are disabled, -ENOENT for a
 * missing rootfs, ...) are reported in *ret with return value 0, not as a negative return;
 * so is a calling process that ignores SIGCHLD (SIG_IGN or SA_NOCLDWAIT: the kernel would reap
 * the sandbox before nsbox learned how it ended; step "signals", errno ECHILD).
 */
NSBOX_EXPORT int nsbox_run(const struct nsbox_config *config, struct nsbox_result *ret);

/*
 * A started sandbox: one sandbox, many steps (`nsbox session`, pools). nsbox_sandbox_start()
 * makes the sandbox from a config with every protection nsbox_run() applies (the config's
 * argv, code, stdin and copy_out are not used: each step brings its own); its init then runs
 * steps, one at a time, until nsbox_sandbox_stop(). A step is a program (its own processes,
 * killed when it ends) or Python code in the sandbox's one interpreter, which keeps its
 * variables from step to step; /work and every file a step writes stay for the next step.
 * Not thread-safe: one thread uses a sandbox at a time. The caller keeps the config's strings
 * valid until nsbox_sandbox_stop() returns. Signals are the caller's: config->forward_signals
 * must be false (block and handle them yourself, as `nsbox session` does).
 */
struct nsbox_sandbox;

/* The most arguments a program step takes. */
#define NSBOX_STEP_MAX_ARGS 4096

/* One step of a started sandbox. Zero it, then set what you need (the defaults are the zeros
 * but copy_in_fd, which must be -1 when there is none). */
struct nsbox_step {
    /* Python code for the sandbox's interpreter (code_size bytes; need not be
     * NUL-terminated), or NULL for a program step. */
    const char *code;
    size_t code_size;
    /* A program step: the program and its arguments, NULL-terminated (argv[0] looked up in the
     * sandbox's PATH), at most NSBOX_STEP_MAX_ARGS of them. */
    char *const *argv;
    uint64_t timeout;      /* microseconds; 0: none. Past it a program step's processes are
                            * killed, a code step gets KeyboardInterrupt (2 s, then the
                            * interpreter is killed) */
    uint64_t output_limit; /* bytes kept of each of stdout and stderr; 0: the config's */
    /* The step's stdin: stdin_size bytes (a file the step reads to its end) when has_stdin,
     * else /dev/null. */
    bool has_stdin;
    const char *stdin_data;
    size_t stdin_size;
    /* Bytes: a memory limit for this step only, below the sandbox's (config->memory), at
     * least 6 MiB; 0: the sandbox's. Under rlimits a code step then runs in an interpreter
     * that is ended after it (a hard limit cannot be raised again). */
    uint64_t memory;
    /* A copy-in stream (copy.h's format, as `nsbox session exec --copy-in` packs it) in a
     * sealed memfd, unpacked below "/" before the step runs; -1: none. Not closed here. */
    int copy_in_fd;
    /* Sandbox paths to copy out when the step ends by itself, copy_out_size bytes of
     * NUL-terminated paths, within copy_out_max_bytes and copy_out_max_files (0: the config's
     * copy_out_max_*); the stream is then nsbox_sandbox_step_copy_out()'s. NULL: none. */
    const char *copy_out;
    size_t copy_out_size;
    uint64_t copy_out_max_bytes, copy_out_max_files;
    /* The sandbox's last step: nothing runs in it after this one (a pool's single-use
     * sandbox), so a lowered memory limit is not put back. */
    bool last;
    /* Called with output as it comes (fd 1: stdout, 2: stderr), from within
     * nsbox_sandbox_step() or nsbox_sandbox_dispatch(); NULL: none. The result keeps it too. */
    void (*on_output)(int fd, const char *data, size_t size, void *userdata);
    void *userdata;
};

/*
 * Make a sandbox from config and wait until its init is ready for steps; when cancel_fd (-1:
 * none) becomes readable meanwhile (the caller's signalfd: setting up a workspace's /work can
 * take seconds), the sandbox is torn down and -ECANCELED returned. *ret gets the
 * sandbox's own result: its limits and how they are enforced, its warnings, and on failure the
 * error (status NSBOX_STATUS_ERROR, error_step, error, as nsbox_run() says them); on success
 * without its lists (labels and the like come with nsbox_sandbox_stop()'s result). Free it
 * with nsbox_result_free(). On success *ret_sandbox is the sandbox, which nsbox_sandbox_stop()
 * ends and frees.
 * Returns 0 (the sandbox is ready), -EINVAL for an invalid config (also forward_signals set,
 * or isolation tier 3, which runs one program at a time), -ENOMEM, -ECANCELED (cancel_fd), or
 * -EIO when the sandbox could not be made or ended while being set up (*ret says why). Nothing
 * is left on failure.
 */
NSBOX_EXPORT int nsbox_sandbox_start(const struct nsbox_config *config, int cancel_fd,
                                     struct nsbox_sandbox **ret_sandbox, struct nsbox_result *ret);

/*
 * Run one step and wait for it: *ret is the step's result, as nsbox_run()'s for a run
 * (status, exit_code, output, refused calls, files written in /work, a code step's notebook
 * outputs and interpreter), its wall_time from the step's start. A step the sandbox could not
 * start (its copy-in failed, a program that does not exist) is status NSBOX_STATUS_ERROR with
 * the sandbox still usable. Free *ret with nsbox_result_free().
 * Returns 0 (the step ran, or *ret says why it could not), -EINVAL (neither code nor argv, a
 * memory above the sandbox's or below 6 MiB, an output_limit above 1 GiB, or a copy_in_fd that
 * is not a memfd sealed against writes and size changes), -EBUSY (a step runs:
 * nsbox_sandbox_step_begin()), or -ESHUTDOWN when the sandbox has ended (it was killed, or its init
 * died): *ret says how, and only nsbox_sandbox_stop() is left.
 */
NSBOX_EXPORT int nsbox_sandbox_step(struct nsbox_sandbox *sandbox, const struct nsbox_step *step,
                                    struct nsbox_result *ret);

/*
 * End the sandbox and free it. With config->workspace, /work is saved into the workspace when
 * no_save is NULL and no step runs; no_save is otherwise why it is not (a warning says
 * "workspace 'NAME' was not saved: NO_SAVE; its files are as before this session").
 * cancel_fd (-1: none), when it becomes readable during the save (a signal's signalfd), gives
 * the save up. A step still running is killed (take its result first with
 * nsbox_sandbox_step_cut()). *ret gets the sandbox's result as nsbox_sandbox_start() filled
 * it, with the end's warnings (the workspace's save, what could not be cleaned up) and status
 * NSBOX_STATUS_KILLED (or NSBOX_STATUS_ERROR when the sandbox failed); free it with
 * nsbox_result_free(). sandbox may be NULL (nothing is done). Returns 0, or -EBUSY when the
 * cgroup leaf could not be removed (*ret says so).
 */
NSBOX_EXPORT int nsbox_sandbox_stop(struct nsbox_sandbox *sandbox, const char *no_save,
                                    int cancel_fd, struct nsbox_result *ret);

/*
 * For callers with an event loop of their own (`nsbox session` serves its clients in one):
 * nsbox_sandbox_step() is nsbox_sandbox_step_begin(), then nsbox_sandbox_pollfds(), poll(2)
 * and nsbox_sandbox_dispatch() until it says NSBOX_SANDBOX_STEP_DONE, then
 * nsbox_sandbox_step_end(). Between steps the loop must still run: the sandbox answers the
 * system calls its policy refuses, serves --network allow='s proxy, and notices its end there.
 */

/* Start a step without waiting. *ret gets the error when it cannot start (with every negative
 * return; after -EIO the sandbox is still usable); otherwise the step's result comes from
 * nsbox_sandbox_step_end(). Returns 0, -EINVAL, -EBUSY, -ESHUTDOWN (as nsbox_sandbox_step()),
 * -ENOMEM or -EIO. */
NSBOX_EXPORT int nsbox_sandbox_step_begin(struct nsbox_sandbox *sandbox,
                                          const struct nsbox_step *step, struct nsbox_result *ret);

/* At most how many descriptors nsbox_sandbox_pollfds() fills. */
NSBOX_EXPORT size_t nsbox_sandbox_pollfds_max(const struct nsbox_sandbox *sandbox);

/* Fill fds (room for nsbox_sandbox_pollfds_max()) with what to poll now; *deadline (monotonic
 * microseconds, CLOCK_MONOTONIC as now_usec() reads it; UINT64_MAX: none) is lowered to when
 * dispatch must be called even without an event. Returns the number filled. */
NSBOX_EXPORT size_t nsbox_sandbox_pollfds(struct nsbox_sandbox *sandbox, struct pollfd *fds,
                                          uint64_t *deadline);

/* What nsbox_sandbox_dispatch() saw (bits). */
#define NSBOX_SANDBOX_READY 1u     /* init is set up and waits for steps (once) */
#define NSBOX_SANDBOX_STEP_DONE 2u /* the running step is over: nsbox_sandbox_step_end() */
#define NSBOX_SANDBOX_ENDED 4u     /* the sandbox is gone (or failed): nsbox_sandbox_stop() */

/* Act on the events of fds (as nsbox_sandbox_pollfds() filled them, n of them, after poll(2))
 * and on the clock. Returns the NSBOX_SANDBOX_* bits of what happened. */
NSBOX_EXPORT unsigned nsbox_sandbox_dispatch(struct nsbox_sandbox *sandbox,
                                             const struct pollfd *fds, size_t n);

/* Interrupt the running step now, as its timeout would (its status says timeout); nothing
 * when no step runs. */
NSBOX_EXPORT void nsbox_sandbox_step_interrupt(struct nsbox_sandbox *sandbox);

/* The result of the step that is done (NSBOX_SANDBOX_STEP_DONE) into *ret. Returns 0, or
 * -ESRCH when no step is done. */
NSBOX_EXPORT int nsbox_sandbox_step_end(struct nsbox_sandbox *sandbox, struct nsbox_result *ret);

/* The sandbox is ending while a step runs: what the step's pipes hold is kept, and *ret is its
 * result, status NSBOX_STATUS_KILLED (or NSBOX_STATUS_ERROR when the sandbox itself ended
 * during it). Returns 0, or -ESRCH when no step runs. */
NSBOX_EXPORT int nsbox_sandbox_step_cut(struct nsbox_sandbox *sandbox, struct nsbox_result *ret);

/* The copy-out stream of the last step that ended (copy.h's format in a memfd, positioned at
 * its start), now the caller's to read and close; -ENOENT when it has none (no copy_out, or
 * ret->copy_out_done false). */
NSBOX_EXPORT int nsbox_sandbox_step_copy_out(struct nsbox_sandbox *sandbox);

/* Release what nsbox_run() allocated in *result; safe on a zeroed or already freed result. */
NSBOX_EXPORT void nsbox_result_free(struct nsbox_result *result);

/*
 * The exit status the nsbox command reports for a result: the payload's status; 128+N when
 * signal N killed it (137 for an OOM kill); 124 on timeout; 126 when the program could not be
 * executed; 127 when it was not found; 125 for any other nsbox failure.
 */
NSBOX_EXPORT int nsbox_exit_status(const struct nsbox_result *result);

/*
 * Encode *result (with the limits the run had) as one JSON object, as `nsbox run --json` prints it.
 * Captured output that is not valid UTF-8 is encoded with U+FFFD for each invalid byte.
 * Returns a malloc()ed NUL-terminated string, or NULL when out of memory.
 */
NSBOX_EXPORT char *nsbox_result_to_json(const struct nsbox_result *result);

/* "exited", "signaled", "timeout", "error", "oom" or "killed". */
NSBOX_EXPORT const char *nsbox_status_to_string(enum nsbox_status status);

/* "none", "rlimit" or "cgroup". */
NSBOX_EXPORT const char *nsbox_enforcer_to_string(enum nsbox_enforcer enforcer);

/*
 * The limit that ended the run, or else the one it ran into. A limit that stopped the payload
 * comes first (timeout, memory: the cgroup's OOM killer, cpu: SIGXCPU from RLIMIT_CPU under
 * rlimits); then pids (forks refused by a cgroup's pids.max; rlimits cannot tell) and output
 * (truncated), which the payload ran on past. *ret_stopped (may be NULL) says whether the
 * limit stopped the payload. Under rlimits, a MemoryError or a crash is the payload's own end,
 * not a limit (nsbox_result_notes() gives the hint). Cannot fail.
 */
NSBOX_EXPORT enum nsbox_limit nsbox_result_limit(const struct nsbox_result *result,
                                                 bool *ret_stopped);

/* "none", "timeout", "memory", "pids", "cpu" or "output". */
NSBOX_EXPORT const char *nsbox_limit_to_string(enum nsbox_limit limit);

/*
 * The one sentence that says how the run ended, as `nsbox run` prints it on stderr and as
 * the JSON result's "reason": "exited with status 3", "killed by SIGSEGV (signal 11)",
 * "timed out after 5 s; the sandbox was killed", "stopped: out of memory (limit 256 MiB, after
 * 0.41 s)", "stopped: CPU time limit ...", "killed on request (nsbox kill)", or nsbox's error.
 * Written to buf (size bytes, always NUL-terminated, cut if too small). Cannot fail.
 */
NSBOX_EXPORT void nsbox_result_reason(const struct nsbox_result *result, char *buf, size_t size);

/*
 * Calls note(sentence, userdata) for each further thing the caller should know about the run,
 * in a fixed order: the rlimit memory hint for a SIGSEGV/SIGBUS, a MemoryError on the captured
 * stderr, forks refused by pids.max (or, under rlimits, a failed fork that stderr shows), an
 * ENOSPC on stderr, the system calls the seccomp policy refused, the network proxy's
 * refusals, what a tier-3 run was given (isolation_tier 3), each truncated stream. The same
 * sentences are `nsbox run`'s warnings on stderr and the JSON result's "notes". sentence is valid
 * only during the call. Returns the number of notes. Cannot fail.
 */
NSBOX_EXPORT size_t nsbox_result_notes(const struct nsbox_result *result,
                                       void (*note)(const char *sentence, void *userdata),
                                       void *userdata);

#ifdef __cplusplus
}
#endif
