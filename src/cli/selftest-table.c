/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox selftest's attacks: for each, what it tries, the protection that stops it, the opt-out
 * of `nsbox run` that --ablate removes it with, what it needs on the host (its setup), and how
 * its success is judged. The attack programs are the functions of the same names in
 * selftest-attacks.py; a new attack goes in both, with its entry last in the table (the order
 * of the table and of the JSON). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "selftest-internal.h"
#include "syscalls.h"

/* ---- helpers -------------------------------------------------------------------------- */

void selftest_random_hex(char *buf, size_t bytes)
{
    unsigned char r[32];
    if (bytes > sizeof(r))
        bytes = sizeof(r);
    if (getrandom(r, bytes, 0) != (ssize_t)bytes)
        for (size_t i = 0; i < bytes; i++)
            r[i] = (unsigned char)(rand() ^ (int)getpid());
    hex_encode(r, bytes, buf);
}

static void new_canary(struct trial *t)
{
    char hex[33];
    selftest_random_hex(hex, 16);
    (void)snprintf(t->secret, sizeof(t->secret), "NSBOX-CANARY-%s", hex);
}

/* A new directory below the trial's, handed to the sandbox's host ids through its descriptor:
 * the only place of the self-test they may write. Returns its descriptor or -errno. */
static int make_host_uid_dir(const struct ctx *c, struct trial *t, const char *name)
{
    int fd;
    if (mkdirat(t->dir_fd, name, 0755) < 0)
        return -errno;
    fd = openat(t->dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (c->root && fchown(fd, c->host_uid, c->host_gid) < 0) {
        int r = -errno;
        (void)close(fd);
        return r;
    }
    t->sub_is_host_uid = true;
    return fd;
}

/* ---- the attacks' setups --------------------------------------------------------------- */

static int setup_read_host_file(const struct ctx *c, struct trial *t)
{
    (void)c;
    new_canary(t);
    (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%s/secret", t->dir);
    add_arg(t, t->buf[0]);
    if (t->mode == MODE_ABLATED) {
        (void)snprintf(t->buf[1], sizeof(t->buf[1]), "%s:/mnt:ro", t->dir);
        add_opt(t, "-v");
        add_opt(t, t->buf[1]);
    }
    /* Readable by the sandbox's host uid, as most of a user's files are. */
    return selftest_write_new_file(t->dir_fd, "secret", t->secret, 0644);
}

static int listen_tcp(const struct ctx *c, struct trial *t)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    (void)c;

    t->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (t->fd < 0 || bind(t->fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(t->fd, SOMAXCONN) < 0 || getsockname(t->fd, (struct sockaddr *)&a, &len) < 0) {
        (void)snprintf(t->skip, sizeof(t->skip), "no TCP listener on 127.0.0.1: %s",
                       strerror(errno));
        return 0;
    }
    new_canary(t);
    t->secret_to_env = true;
    (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%u", (unsigned)ntohs(a.sin_port));
    add_arg(t, t->buf[0]);
    return 0;
}

static int listen_abstract(const struct ctx *c, struct trial *t)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char hex[17];
    (void)c;

    selftest_random_hex(hex, 8);
    (void)snprintf(t->buf[0], sizeof(t->buf[0]), "nsbox-selftest-%s", hex);
    memcpy(a.sun_path + 1, t->buf[0], strlen(t->buf[0]));
    t->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (t->fd < 0 ||
        bind(t->fd, (struct sockaddr *)&a,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(t->buf[0]))) < 0 ||
        listen(t->fd, SOMAXCONN) < 0) {
        (void)snprintf(t->skip, sizeof(t->skip), "no abstract unix socket: %s", strerror(errno));
        return 0;
    }
    new_canary(t);
    t->secret_to_env = true;
    add_arg(t, t->buf[0]);
    return 0;
}

static int setup_memory(const struct ctx *c, struct trial *t)
{
    (void)c;
    add_arg(t, "512");
    return 0;
}

static int setup_fork_bomb(const struct ctx *c, struct trial *t)
{
    (void)c;
    add_arg(t, "200");
    return 0;
}

static int setup_persistence(const struct ctx *c, struct trial *t)
{
    new_canary(t);
    t->secret_to_env = true; /* what the attack writes, so that nobody else can fake it */
    /* The code directory: the caller's, so writable by the sandbox's host uid. */
    t->sub_fd = make_host_uid_dir(c, t, "work");
    if (t->sub_fd < 0)
        return t->sub_fd;
    (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%s/work", t->dir);
    if (t->mode == MODE_CONTROL) {
        add_arg(t, t->buf[0]);
        return 0;
    }
    (void)snprintf(t->buf[1], sizeof(t->buf[1]), "%.400s:/work%s", t->buf[0],
                   t->mode == MODE_ABLATED ? ":rw" : "");
    add_opt(t, "-v");
    add_opt(t, t->buf[1]);
    add_arg(t, "/work");
    return 0;
}

static int setup_env(const struct ctx *c, struct trial *t)
{
    (void)c;
    new_canary(t);
    t->env_token = true;
    return 0;
}

static int setup_inherited_fd(const struct ctx *c, struct trial *t)
{
    (void)c;
    int r;
    new_canary(t);
    r = selftest_write_new_file(t->dir_fd, "fd-secret", t->secret, 0600);
    if (r < 0)
        return r;
    /* Deliberately without O_CLOEXEC: a descriptor a careless caller leaves open. */
    t->pass_fd = openat(t->dir_fd, "fd-secret", O_RDONLY | O_NOFOLLOW);
    if (t->pass_fd < 0)
        return -errno;
    return 0;
}

static int setup_signal(const struct ctx *c, struct trial *t)
{
    pid_t parent = getpid();
    t->victim = fork();
    if (t->victim < 0)
        return -errno;
    if (t->victim == 0) {
        /* A process of the sandbox's host uid: what the payload could reach if it saw it. It
         * dies with the self-test: the death signal is set after the id switch, which clears
         * it (prctl(2)), and then the parent is checked. */
        if (c->host_ids_lock >= 0)
            (void)close(c->host_ids_lock); /* not for a process of the sandbox's uid */
        if (c->root &&
            (setgroups(0, NULL) < 0 || setresgid(c->host_gid, c->host_gid, c->host_gid) < 0 ||
             setresuid(c->host_uid, c->host_uid, c->host_uid) < 0))
            _exit(1);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
            _exit(1);
        for (;;)
            (void)pause();
    }
    (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%d", (int)t->victim);
    add_arg(t, t->buf[0]);
    return 0;
}

static int setup_as_root_caller(const struct ctx *c, struct trial *t)
{
    t->as_caller = true;
    if (t->mode == MODE_CONTROL && !c->root)
        (void)snprintf(t->skip, sizeof(t->skip),
                       "only root can do this even without a sandbox; run the self-test as "
                       "root for this control");
    return 0;
}

/* Open the host's id(1) as a file root can trust: no symlink on the way, every directory and
 * the file owned by root and writable by nobody else. Returns a descriptor or -errno. */
static int open_trusted_id(void)
{
    static const char *const parts[] = {"usr", "bin", "id"};
    _cleanup_close_ int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;

    for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
        bool last = i + 1 == ELEMENTSOF(parts);
        int fd;
        if (dir < 0 || fstat(dir, &st) < 0)
            return -errno;
        if (st.st_uid != 0 || (st.st_mode & 022))
            return -EPERM;
        fd = openat(dir, parts[i],
                    (last ? O_RDONLY : O_PATH | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);
        (void)close(dir);
        dir = fd;
    }
    if (dir < 0 || fstat(dir, &st) < 0)
        return -errno;
    /* One link: a multi-call binary (busybox) linked as id would pick its applet by name. */
    if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) || st.st_nlink != 1)
        return -EPERM;
    return TAKE_FD(dir);
}

static int setup_setuid(const struct ctx *c, struct trial *t)
{
    _cleanup_close_ int in = -EBADF, out = -EBADF;
    char buf[65536];
    ssize_t n;

    if (!c->root) {
        (void)snprintf(t->skip, sizeof(t->skip),
                       "planting a setuid program owned by another user needs root");
        return 0;
    }
    /* Without protected hardlinks, the sandbox's host group could keep a hard link of the
     * setuid copy for good (proc(5), /proc/sys/fs/protected_hardlinks). */
    {
        char value[8] = "";
        if (read_file_at(AT_FDCWD, "/proc/sys/fs/protected_hardlinks", value, sizeof(value)) < 0 ||
            value[0] != '1') {
            (void)snprintf(t->skip, sizeof(t->skip),
                           "fs.protected_hardlinks is not 1, so a setuid copy could be kept by "
                           "a hard link");
            return 0;
        }
    }
    /* A setuid-root copy of the host's id(1), which only prints ids, in a root-owned
     * directory that only the sandbox's host group may enter, for the trial alone. */
    in = open_trusted_id();
    if (in < 0) {
        (void)snprintf(t->skip, sizeof(t->skip),
                       "no trustworthy /usr/bin/id on the host (root-owned, writable by root "
                       "only) to make setuid: %s",
                       strerror(-in));
        return 0;
    }
    if (mkdirat(t->dir_fd, "suid", 0750) < 0)
        return -errno;
    t->sub_fd = openat(t->dir_fd, "suid", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (t->sub_fd < 0 || fchown(t->sub_fd, 0, c->host_gid) < 0 || fchmod(t->sub_fd, 0750) < 0)
        return -errno;
    out = openat(t->sub_fd, "id", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
    if (out < 0)
        return -errno;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n)
            return -EIO;
    if (n < 0 || fchown(out, 0, 0) < 0 || fchmod(out, 04755) < 0)
        return -errno;
    t->remove_after_run = "id";
    (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%s/suid", t->dir);
    (void)snprintf(t->buf[1], sizeof(t->buf[1]), "%s/suid/id", t->dir);
    if (t->mode == MODE_CONTROL) {
        add_arg(t, t->buf[1]);
        return 0;
    }
    (void)snprintf(t->buf[2], sizeof(t->buf[2]), "%.400s:/mnt:ro", t->buf[0]);
    add_opt(t, "-v");
    add_opt(t, t->buf[2]);
    add_arg(t, "/mnt/id");
    return 0;
}

static int setup_tiocsti(const struct ctx *c, struct trial *t)
{
    char legacy[8] = "";
    int slave;
    (void)c;

    /* Then it cannot succeed on this host at all: not a test of nsbox. */
    if (read_file_at(AT_FDCWD, "/proc/sys/dev/tty/legacy_tiocsti", legacy, sizeof(legacy)) >= 0 &&
        legacy[0] == '0') {
        (void)snprintf(t->skip, sizeof(t->skip),
                       "this kernel refuses TIOCSTI to everyone (dev.tty.legacy_tiocsti = 0)");
        return 0;
    }
    /* A terminal standing in for the caller's: nobody's controlling terminal yet. */
    t->fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (t->fd < 0 || grantpt(t->fd) < 0 || unlockpt(t->fd) < 0 || !ptsname(t->fd)) {
        (void)snprintf(t->skip, sizeof(t->skip), "no pseudo-terminal: %s", strerror(errno));
        return 0;
    }
    slave = open(ptsname(t->fd), O_RDWR | O_NOCTTY); /* inherited by the run */
    if (slave < 0) {
        (void)snprintf(t->skip, sizeof(t->skip), "no pseudo-terminal: %s", strerror(errno));
        return 0;
    }
    t->pass_fd = slave;
    (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%d", slave);
    add_arg(t, t->buf[0]);
    return 0;
}

static int setup_sysv_ipc(const struct ctx *c, struct trial *t)
{
    unsigned key;
    void *p;

    new_canary(t);
    for (int i = 0; i < 16; i++) {
        if (getrandom(&key, sizeof(key), 0) != sizeof(key))
            key = (unsigned)rand();
        key &= 0x7fffffff;
        if (key == 0) /* IPC_PRIVATE */
            continue;
        /* Readable by everyone, as IPC objects that programs share often are. */
        t->shmid = shmget((key_t)key, 4096, IPC_CREAT | IPC_EXCL | 0644);
        if (t->shmid >= 0 || errno != EEXIST)
            break;
    }
    if (t->shmid < 0) {
        (void)snprintf(t->skip, sizeof(t->skip), "no System V shared memory: %s", strerror(errno));
        return 0;
    }
    /* Recorded, so that the next self-test removes it if this one is killed. */
    (void)snprintf(t->shm_record, sizeof(t->shm_record), "shm-%d-%u", t->shmid, key);
    (void)selftest_write_new_file(c->dir_fd, t->shm_record, "", 0600);
    t->top_fd = c->dir_fd;
    p = shmat(t->shmid, NULL, 0);
    if (p == (void *)-1)
        return -errno;
    (void)snprintf(p, 4096, "%s", t->secret);
    (void)shmdt(p);
    (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%u", key);
    add_arg(t, t->buf[0]);
    return 0;
}

static int setup_fill_tmp(const struct ctx *c, struct trial *t)
{
    if (t->mode == MODE_CONTROL) {
        t->sub_fd = make_host_uid_dir(c, t, "tmp");
        if (t->sub_fd < 0)
            return t->sub_fd;
        (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%s/tmp", t->dir);
    }
    add_arg(t, t->mode == MODE_CONTROL ? t->buf[0] : "/tmp");
    add_arg(t, "64");
    return 0;
}

static int setup_flood(const struct ctx *c, struct trial *t)
{
    (void)c;
    add_arg(t, STRINGIFY(SELFTEST_FLOOD_MIB));
    return 0;
}

static int setup_runaway(const struct ctx *c, struct trial *t)
{
    (void)c;
    add_arg(t, "4");
    add_opt(t, "--timeout"); /* ablated: the table's --timeout unlimited comes after it */
    add_opt(t, "2");
    return 0;
}

static int setup_leftover(const struct ctx *c, struct trial *t)
{
    char hex[33];
    (void)c;
    selftest_random_hex(hex, 16);
    (void)snprintf(t->secret, sizeof(t->secret), "nsbox-selftest-leftover-%s", hex);
    t->secret_to_env = true;
    return 0;
}

static int setup_tmpfs_persistence(const struct ctx *c, struct trial *t)
{
    new_canary(t);
    t->secret_to_env = true; /* to the earlier run only (two_runs) */
    if (t->mode == MODE_SANDBOX) {
        add_arg(t, "/tmp");
        add_arg(t, "/work");
        return 0;
    }
    /* Ablated: a directory of the host, writable by the sandbox's host uid, bound at both
     * instead of the tmpfs mounts; control: that directory itself. */
    t->sub_fd = make_host_uid_dir(c, t, "kept");
    if (t->sub_fd < 0)
        return t->sub_fd;
    (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%s/kept", t->dir);
    if (t->mode == MODE_CONTROL) {
        add_arg(t, t->buf[0]);
        add_arg(t, t->buf[0]);
        return 0;
    }
    (void)snprintf(t->buf[1], sizeof(t->buf[1]), "%.400s:/tmp:rw", t->buf[0]);
    (void)snprintf(t->buf[2], sizeof(t->buf[2]), "%.400s:/work:rw", t->buf[0]);
    add_opt(t, "-v");
    add_opt(t, t->buf[1]);
    add_opt(t, "-v");
    add_opt(t, t->buf[2]);
    add_arg(t, "/tmp");
    add_arg(t, "/work");
    return 0;
}

/* inotify-outside: a process of the host writes /dev/null every 20 ms while the trial runs (the
 * trial's clean-up kills it, as it does a victim); the attack watches for 3 s. */
static int setup_devnull_writer(const struct ctx *c, struct trial *t)
{
    pid_t parent = getpid();
    t->victim = fork();
    if (t->victim < 0)
        return -errno;
    if (t->victim == 0) {
        if (c->host_ids_lock >= 0)
            (void)close(c->host_ids_lock);
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
            _exit(1);
        for (;;) {
            if (write(fd, "x", 1) < 0)
                _exit(1);
            (void)usleep(20000);
        }
    }
    add_arg(t, "3");
    return 0;
}

/* The Landlock ABI this kernel offers, or 0 (landlock_create_ruleset(2)); the attacks that only
 * Landlock stops are not tried where it is missing (nsbox does not use ABI 1). */
static int landlock_abi(void)
{
    int abi = sys_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 2 ? 0 : abi;
}

/* Every run of a Landlock attack has the protection in front of Landlock removed (opts, here);
 * the ablated one also has --landlock off (the table's opt_out), so the two runs differ in
 * Landlock alone. */
static bool landlock_skip(struct trial *t, int abi_needed, const char *what)
{
    int abi = landlock_abi();

    if (abi >= abi_needed)
        return false;
    (void)snprintf(t->skip, sizeof(t->skip),
                   abi ? "this kernel's Landlock (ABI %d) does not restrict %s (ABI %d does)"
                       : "this kernel has no Landlock nsbox uses (ABI 2 or later)",
                   abi, what, abi_needed);
    return true;
}

static int setup_landlock_host_dir(const struct ctx *c, struct trial *t)
{
    int r;
    (void)c;

    if (t->mode != MODE_CONTROL && landlock_skip(t, 2, "files"))
        return 0;
    new_canary(t);
    r = selftest_write_new_file(t->dir_fd, "secret", t->secret, 0644);
    if (r < 0)
        return r;
    /* Deliberately without O_CLOEXEC: the trial's directory, handed to the run. */
    t->pass_fd = openat(t->dir_fd, ".", O_RDONLY | O_DIRECTORY);
    if (t->pass_fd < 0)
        return -errno;
    (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%d", t->pass_fd);
    add_arg(t, t->buf[0]);
    if (t->mode != MODE_CONTROL)
        add_opt(t, "--keep-fds");
    return 0;
}

static int setup_landlock_tmpfs_exec(const struct ctx *c, struct trial *t)
{
    if (t->mode != MODE_CONTROL && landlock_skip(t, 2, "files"))
        return 0;
    if (t->mode == MODE_CONTROL) {
        t->sub_fd = make_host_uid_dir(c, t, "exec");
        if (t->sub_fd < 0)
            return t->sub_fd;
        (void)snprintf(t->buf[0], sizeof(t->buf[0]), "%s/exec", t->dir);
        add_arg(t, t->buf[0]);
        return 0;
    }
    add_arg(t, "/tmp");
    add_opt(t, "--no-seccomp");
    return 0;
}

static int setup_landlock_tcp(const struct ctx *c, struct trial *t)
{
    int r;

    if (t->mode != MODE_CONTROL && landlock_skip(t, 4, "TCP"))
        return 0;
    r = listen_tcp(c, t);
    if (r < 0 || t->skip[0])
        return r;
    /* Deliberately without SOCK_CLOEXEC: a socket of the host's network namespace. */
    t->pass_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (t->pass_fd < 0)
        return -errno;
    /* listen_tcp() put the port in args[0]: the descriptor goes first. */
    (void)snprintf(t->buf[1], sizeof(t->buf[1]), "%d", t->pass_fd);
    t->args[1] = t->args[0];
    t->args[0] = t->buf[1];
    t->n_args = 2;
    if (t->mode != MODE_CONTROL)
        add_opt(t, "--keep-fds");
    return 0;
}

const struct attack selftest_attacks_table[] = {
    {
        .name = "read-host-file",
        .tried = "read a canary file planted on the host",
        .protection = "its own root filesystem: host paths are not there unless bound",
        .opt_out = "-v DIR:/mnt:ro",
        .setup = setup_read_host_file,
        .judge = JUDGE_CANARY,
    },
    {
        .name = "network-egress",
        .tried = "send a nonce to a TCP listener on the host's 127.0.0.1",
        .protection = "network namespace; seccomp allows only AF_UNIX sockets",
        .opt_out = "--network host",
        .setup = listen_tcp,
        .judge = JUDGE_LISTENER,
    },
    {
        .name = "memory",
        .tried = "allocate and touch 512 MiB",
        .protection = "--memory 256m",
        .opt_out = "--memory unlimited",
        .enders = "oom (signal 9, SIGKILL)|signaled (signal 9, SIGKILL)",
        .setup = setup_memory,
        .judge = JUDGE_REPORT,
        .report = "allocated",
    },
    {
        .name = "fork-bomb",
        .tried = "start 200 processes",
        .protection = "--pids-limit 64",
        .opt_out = "--pids-limit unlimited",
        .setup = setup_fork_bomb,
        .judge = JUDGE_REPORT,
        .report = "forked 200",
    },
    {
        .name = "persistence",
        .tried = "write a file into the code directory for the next run",
        .protection = "the code directory is bound read-only (-v DIR:/work)",
        .opt_out = "-v DIR:/work:rw",
        .setup = setup_persistence,
        .judge = JUDGE_FILE_LEFT,
    },
    {
        .name = "env-credentials",
        .tried = "find a secret exported in the caller's environment",
        .protection = "a clean environment (PATH, HOME, LANG, thread counts, -e only)",
        .opt_out = "--env-inherit",
        .setup = setup_env,
        .judge = JUDGE_CANARY,
    },
    {
        .name = "inherited-fd",
        .tried = "read a file through a descriptor the caller left open",
        .protection = "descriptors above 2 closed before execve",
        .opt_out = "--keep-fds",
        .setup = setup_inherited_fd,
        .judge = JUDGE_CANARY,
    },
    {
        .name = "signal-outside",
        .tried = "SIGKILL a host process of the sandbox's own host uid",
        .protection = "pid namespace",
        .opt_out = "--pid host",
        .setup = setup_signal,
        .judge = JUDGE_VICTIM_KILLED,
    },
    {
        .name = "proc-writes",
        .tried = "open /proc/sysrq-trigger and /proc/sys/kernel/core_pattern for writing",
        .protection = "host uid is never root; /proc/sys and /proc/sysrq-trigger read-only",
        .no_opt_out = "the sandbox maps to an unprivileged host uid, which the kernel refuses "
                      "these files; nsbox has no opt-out for that",
        .setup = setup_as_root_caller,
        .judge = JUDGE_REPORT,
        .report = "opened",
    },
    {
        .name = "nested-userns",
        .tried = "unshare a user namespace to regain capabilities",
        .protection = "seccomp refuses unshare and clone with namespace flags",
        .opt_out = "--no-seccomp",
        .judge = JUDGE_REPORT,
        .report = "a new user namespace with capabilities",
    },
    {
        .name = "setuid",
        .tried = "run a setuid-root program planted on the host and bound in",
        .protection = "one-uid user namespace; nosuid mounts; no_new_privs",
        .no_opt_out = "a setuid file owned by a host uid the sandbox does not map never changes "
                      "ids (user_namespaces(7)); nsbox has no opt-out for that",
        .setup = setup_setuid,
        /* The program only prints ids: what it printed is all there is to see. */
        .judge = JUDGE_REPORT,
        .report = "setuid program ran with other ids",
    },
    {
        .name = "tiocsti",
        .tried = "push input into a terminal standing in for the caller's",
        .protection = "no terminal reaches the sandbox (descriptors closed, new session); "
                      "seccomp refuses TIOCSTI",
        .opt_out = "--keep-fds --no-seccomp",
        .setup = setup_tiocsti,
        .judge = JUDGE_TERMINAL_INPUT,
    },
    {
        .name = "abstract-socket",
        .tried = "send a nonce to an abstract unix socket of the host",
        .protection = "network namespace (abstract sockets belong to it)",
        .opt_out = "--network host",
        .setup = listen_abstract,
        .judge = JUDGE_LISTENER,
    },
    {
        .name = "sysv-ipc",
        .tried = "read a System V shared memory segment of the host",
        .protection = "IPC namespace",
        .opt_out = "--ipc host",
        .setup = setup_sysv_ipc,
        .judge = JUDGE_CANARY,
    },
    {
        .name = "hostname",
        .tried = "set the hostname (to its current value)",
        .protection = "UTS namespace; no capabilities; seccomp refuses sethostname",
        .no_opt_out = "the host's hostname needs CAP_SYS_ADMIN over the host's UTS namespace, "
                      "which nothing in a user namespace has; nsbox has no opt-out for that",
        .setup = setup_as_root_caller,
        .judge = JUDGE_REPORT,
        .report = "set the hostname",
    },
    {
        .name = "fill-tmp",
        .tried = "write 64 MiB into /tmp",
        .protection = "--tmpfs /tmp:size=16m",
        .opt_out = "--tmpfs /tmp:size=128m",
        .setup = setup_fill_tmp,
        .judge = JUDGE_REPORT,
        .report = "wrote 64 MiB",
    },
    {
        .name = "output-flood",
        .tried = "print " STRINGIFY(SELFTEST_FLOOD_MIB) " MiB to the caller",
        .protection = "--output-limit 4000 (bytes kept per stream)",
        .opt_out = "--output-limit 32m",
        .setup = setup_flood,
        .judge = JUDGE_FLOOD_DELIVERED,
    },
    {
        .name = "runaway",
        .tried = "keep running for 4 s",
        .protection =
            "--timeout 2 (and RLIMIT_CPU of --cpus x --timeout where limits fall back to rlimits)",
        .opt_out = "--timeout unlimited",
        .enders = "timeout|signaled (signal 24, SIGXCPU)|signaled (signal 9, SIGKILL)",
        .setup = setup_runaway,
        .judge = JUDGE_REPORT,
        .report = "still running",
    },
    {
        .name = "leftover-process",
        .tried = "leave a process behind after the payload exits",
        .protection = "pid namespace (its init's exit kills all); cgroup.kill",
        .opt_out = "--pid host --cgroup off",
        .setup = setup_leftover,
        .judge = JUDGE_PROCESS_LEFT,
    },
    {
        .name = "tmpfs-persistence",
        .tried = "leave files in /tmp and /work for a later run",
        .protection = "/tmp and /work are tmpfs mounts that die with the run",
        .opt_out = "-v DIR:/tmp:rw -v DIR:/work:rw",
        .setup = setup_tmpfs_persistence,
        /* The later run gets no nonce: it can only print one it found. */
        .judge = JUDGE_CANARY,
        .two_runs = true,
    },
    {
        .name = "tty-ldisc",
        .tried = "change a new pty's line discipline (TIOCSETD; asking for a missing one would "
                 "load a kernel module)",
        .protection = "seccomp refuses TIOCSETD",
        .opt_out = "--no-seccomp",
        .judge = JUDGE_REPORT,
        .report = "TIOCSETD accepted",
    },
    {
        .name = "inotify-outside",
        .tried = "watch /dev/null with inotify while a host process writes it",
        .protection = "seccomp refuses inotify_init and inotify_init1 (ENOSYS)",
        .opt_out = "--no-seccomp",
        .setup = setup_devnull_writer,
        .judge = JUDGE_REPORT,
        .report = "inotify events on /dev/null caused outside the sandbox",
    },
    {
        .name = "landlock-host-dir",
        .tried = "open a host file through a directory descriptor the caller left open "
                 "(passed with --keep-fds in every run)",
        .protection = "Landlock: nothing outside the sandbox's own tree opens",
        .opt_out = "--landlock off",
        .setup = setup_landlock_host_dir,
        .judge = JUDGE_CANARY,
    },
    {
        .name = "landlock-tmpfs-exec",
        .tried = "run a program written into /tmp, then into a tmpfs it mounts itself in a "
                 "user namespace of its own (with --no-seccomp in every run)",
        .protection = "tmpfs mounts are noexec; Landlock refuses executing there, mounting, and "
                      "writing into a mount of its own",
        .opt_out = "--landlock off",
        .setup = setup_landlock_tmpfs_exec,
        .judge = JUDGE_REPORT,
        .report = "ran a program it wrote",
    },
    {
        .name = "landlock-tcp",
        .tried = "send a nonce to the host's 127.0.0.1 through an unconnected TCP socket the "
                 "caller left open (passed with --keep-fds in every run)",
        .protection = "Landlock refuses TCP connect without a network (ABI 4)",
        .opt_out = "--landlock off",
        .setup = setup_landlock_tcp,
        .judge = JUDGE_LISTENER,
    },
};

const size_t selftest_n_attacks = ELEMENTSOF(selftest_attacks_table);
