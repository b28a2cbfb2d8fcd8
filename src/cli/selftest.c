/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox selftest: the attacks of src/cli/selftest-attacks.py, run inside `nsbox run` on this host,
 * judged by what reached the host where the host can see it (a listener reached, a victim
 * killed, a file written), else by the attack's own report, and only once it ran to its end. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
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
#include <sys/wait.h>
#include <dirent.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "nsbox.h"
#include "selftest.h"
#include "uidpool.h"

/* src/cli/selftest-attacks.py, generated into selftest-attacks.c at build time. */
extern const char selftest_attacks[];

#define OUTPUT_MAX (64U << 20) /* bytes kept of one trial's output */
#define TRIAL_TIMEOUT_MS                                                                           \
    (120 * 1000) /* a trial that hangs this long is killed (nsbox run's                            \
                  * own --timeout 60 comes first) */
#define FLOOD_MIB 16

enum mode { MODE_SANDBOX, MODE_ABLATED, MODE_CONTROL };

/* SIGINT, SIGTERM or SIGHUP to the self-test: the running trial is ended (its nsbox run gets
 * SIGTERM and tears its sandbox down), then everything the self-test made is removed. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
}

struct ctx {
    char exe[PATH_MAX];
    const char *rootfs; /* --rootfs, or NULL for nsbox's default */
    char dir[128];      /* this self-test's temporary directory, owned by the caller */
    int dir_fd;
    char python[PATH_MAX];
    uid_t host_uid; /* the host ids a sandbox of this caller runs as */
    gid_t host_gid;
    bool root;
    /* Root: the self-test holds host_uid's slot of nsbox's pool for its whole life (uidpool.h)
     * and gives it to every run with --host-user, so that it knows the id beforehand (its
     * victim, the directories the sandbox may write) and no other run shares it. */
    int host_ids_lock;
    char host_user[32]; /* "UID:GID" for --host-user, or "" */
    char limits_by[32]; /* what enforced the limits in the sandbox runs */
    char limits_note[1024];
};

#define MAX_ARGS 4
#define MAX_OPTS 8
struct trial {
    enum mode mode;
    char dir[256]; /* a directory of this trial's own, owned by the caller, mode 0755 */
    int dir_fd;
    int sub_fd;           /* a subdirectory of the attack's (persistence, fill-tmp, setuid) */
    bool sub_is_host_uid; /* sub_fd belongs to the sandbox's host uid */
    const char *args[MAX_ARGS];
    size_t n_args;
    const char *opts[MAX_OPTS]; /* extra `nsbox run` options (sandbox and ablated runs) */
    size_t n_opts;
    char buf[4][512]; /* storage for args and opts */
    char ablate[96];  /* the attack's opt_out, split into opts in the ablated run */
    char secret[80];  /* a canary or nonce only the attack could bring back */
    char skip[256];   /* not tried, and why */
    int pass_fd;      /* left open for the run (not close-on-exec), or -1 */
    int fd;           /* a listener, or the pty's master, or -1 */
    pid_t victim;
    int shmid;
    char shm_record[48]; /* "shm-ID-KEY" in the self-test's directory while the segment lives */
    int top_fd;          /* the self-test's directory, for shm_record */
    bool as_caller;      /* control: run as the caller itself, not as the sandbox's host ids */
    bool env_token;      /* NSBOX_SELFTEST_TOKEN=secret in nsbox's environment, not passed on */
    bool secret_to_env;  /* NSBOX_SELFTEST_SECRET=secret given to the attack (-e) */
};

struct outcome {
    bool ran;
    char status[48]; /* the result's status, or exited/signaled/timeout for a control run */
    char *out;       /* the attack's stdout */
    size_t out_len;
    char *errout; /* the attack's stderr */
    size_t errout_len;
    char err[1024]; /* nsbox's error message, or why nothing ran */
};

struct attack {
    const char *name;
    const char *tried;
    const char *protection;
    const char *opt_out;    /* what --ablate removes, as `nsbox run` options */
    const char *no_opt_out; /* when opt_out is NULL: why no opt-out can remove it */
    /* How a blocked attack may end without saying DONE: statuses separated by '|' ("oom (signal
     * 9)|timeout"), or NULL: it must finish. */
    const char *enders;
    int (*setup)(const struct ctx *c, struct trial *t);
    /* Whether the attack got through, judged from outside; NULL: judged by its own report,
     * "SUCCEEDED <report>..." in its output (where nothing outside can tell). */
    bool (*succeeded)(const struct ctx *c, struct trial *t, const struct outcome *o);
    const char *report;
};

/* ---- helpers -------------------------------------------------------------------------- */

static void random_hex(char *buf, size_t bytes)
{
    unsigned char r[32];
    if (bytes > sizeof(r))
        bytes = sizeof(r);
    if (getrandom(r, bytes, 0) != (ssize_t)bytes)
        for (size_t i = 0; i < bytes; i++)
            r[i] = (unsigned char)(rand() ^ (int)getpid());
    for (size_t i = 0; i < bytes; i++)
        (void)sprintf(buf + 2 * i, "%02x", r[i]);
}

static void new_canary(struct trial *t)
{
    char hex[33];
    random_hex(hex, 16);
    (void)snprintf(t->secret, sizeof(t->secret), "NSBOX-CANARY-%s", hex);
}

static bool out_has(const struct outcome *o, const char *needle)
{
    return o->out && memmem(o->out, o->out_len, needle, strlen(needle)) != NULL;
}

/* The attack said "SUCCEEDED <word>...". */
static bool said(const struct outcome *o, const char *word)
{
    char needle[128];
    (void)snprintf(needle, sizeof(needle), "SUCCEEDED %s", word);
    return out_has(o, needle);
}

static void add_arg(struct trial *t, const char *arg)
{
    if (t->n_args < MAX_ARGS)
        t->args[t->n_args++] = arg;
}

static void add_opt(struct trial *t, const char *opt)
{
    if (t->n_opts < MAX_OPTS)
        t->opts[t->n_opts++] = opt;
}

/* Create name below dirfd (never following a symlink, never an existing file) and write text. */
static int write_text_at(int dirfd, const char *name, const char *text, mode_t mode)
{
    _cleanup_close_ int fd =
        openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    size_t n = strlen(text);
    if (fd < 0)
        return -errno;
    if (write(fd, text, n) != (ssize_t)n)
        return -EIO;
    if (fchmod(fd, mode) < 0) /* past the umask */
        return -errno;
    return 0;
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

/* Say whether a connection that reached the listener during the run sent the nonce. Every
 * pending connection is read, within one deadline of 3 s for all: a local user who connected
 * first can neither hide the attack's connection nor stall the self-test. */
static bool listener_got(int fd, const char *nonce)
{
    long deadline = (long)(now_usec() / 1000) + 3000;

    if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
        return false;
    for (;;) {
        _cleanup_close_ int conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        char buf[128] = "";
        size_t n = 0;

        if (conn < 0)
            return false;
        while (n < sizeof(buf) - 1) {
            struct pollfd p = {.fd = conn, .events = POLLIN};
            long left = deadline - (long)(now_usec() / 1000);
            ssize_t k;
            if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                return false;
            k = read(conn, buf + n, sizeof(buf) - 1 - n);
            if (k <= 0)
                break;
            n += (size_t)k;
            buf[n] = '\0';
            if (strstr(buf, nonce))
                return true;
        }
    }
}

/* ---- the attacks: setup and judgement ------------------------------------------------------ */

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
    return write_text_at(t->dir_fd, "secret", t->secret, 0644);
}

static bool canary_in_output(const struct ctx *c, struct trial *t, const struct outcome *o)
{
    (void)c;
    return out_has(o, t->secret);
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

    random_hex(hex, 8);
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

static bool listener_reached(const struct ctx *c, struct trial *t, const struct outcome *o)
{
    (void)c;
    (void)o;
    return listener_got(t->fd, t->secret);
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

static bool persistence_succeeded(const struct ctx *c, struct trial *t, const struct outcome *o)
{
    char buf[128];
    struct stat st;
    ssize_t n;
    _cleanup_close_ int fd =
        openat(t->sub_fd, "persisted.txt", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    (void)c;
    (void)o;
    /* A regular file of the sandbox's host uid holding this trial's nonce. */
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != c->host_uid)
        return false;
    n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return strstr(buf, t->secret) != NULL;
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
    r = write_text_at(t->dir_fd, "fd-secret", t->secret, 0600);
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

static bool victim_killed(const struct ctx *c, struct trial *t, const struct outcome *o)
{
    (void)c;
    (void)o;
    for (int i = 0; i < 100; i++) {
        int status;
        pid_t p = waitpid(t->victim, &status, WNOHANG);
        if (p == t->victim) {
            t->victim = 0;
            return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        }
        (void)usleep(10000);
    }
    return false;
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

static int setup_nested_userns(const struct ctx *c, struct trial *t)
{
    (void)c;
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

static bool setuid_succeeded(const struct ctx *c, struct trial *t, const struct outcome *o)
{
    (void)c;
    (void)unlinkat(t->sub_fd, "id", 0); /* at once: it lives no longer than the trial */
    return said(o, "setuid program ran with other ids");
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

static bool tiocsti_succeeded(const struct ctx *c, struct trial *t, const struct outcome *o)
{
    char buf[256];
    ssize_t n;
    (void)c;
    (void)o;
    /* Only TIOCSTI (or a write to the master, which only this process holds) puts bytes into
     * the terminal's input queue. */
    if (fcntl(t->pass_fd, F_SETFL, O_NONBLOCK) < 0)
        return false;
    n = read(t->pass_fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return strstr(buf, "nsbox-selftest-injected") != NULL;
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
    (void)write_text_at(c->dir_fd, t->shm_record, "", 0600);
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
    add_arg(t, STRINGIFY(FLOOD_MIB));
    return 0;
}

static bool flood_succeeded(const struct ctx *c, struct trial *t, const struct outcome *o)
{
    (void)c;
    (void)t;
    return o->out_len >= (size_t)FLOOD_MIB << 20;
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
    random_hex(hex, 16);
    (void)snprintf(t->secret, sizeof(t->secret), "nsbox-selftest-leftover-%s", hex);
    t->secret_to_env = true;
    return 0;
}

/* Kill every process of uid whose environment holds the entry NSBOX_SELFTEST_SECRET=tag
 * (the tag is in no command line); returns how many there were. */
static unsigned kill_tagged(const char *tag, uid_t uid)
{
    _cleanup_closedir_ DIR *d = opendir("/proc");
    char entry[160];
    unsigned found = 0;
    struct dirent *de;

    if (!d)
        return 0;
    (void)snprintf(entry, sizeof(entry), "NSBOX_SELFTEST_SECRET=%s", tag);
    while ((de = readdir(d))) {
        _cleanup_free_ char *env = NULL;
        _cleanup_close_ int dir = -EBADF;
        struct stat st;
        size_t n = 0;
        int fd;
        pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);

        if (pid <= 0 || pid == getpid())
            continue;
        dir = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0 || fstat(dir, &st) < 0 || st.st_uid != uid)
            continue;
        fd = openat(dir, "environ", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        (void)read_fd_all(fd, 1U << 20, &env, &n);
        (void)close(fd);
        /* Whole entries only: "X=... NSBOX_SELFTEST_SECRET=tag" in another variable is not. */
        for (size_t i = 0; env && i < n; i += strlen(env + i) + 1)
            if (strcmp(env + i, entry) == 0) {
                found++;
                (void)kill(pid, SIGKILL);
                break;
            }
    }
    return found;
}

static bool leftover_succeeded(const struct ctx *c, struct trial *t, const struct outcome *o)
{
    (void)o;
    return kill_tagged(t->secret, c->host_uid) > 0;
}

static const struct attack attacks[] = {
    {"read-host-file", "read a canary file planted on the host",
     "its own root filesystem: host paths are not there unless bound", "-v DIR:/mnt:ro", NULL, NULL,
     setup_read_host_file, canary_in_output},
    {"network-egress", "send a nonce to a TCP listener on the host's 127.0.0.1",
     "network namespace; seccomp allows only AF_UNIX sockets", "--network host", NULL, NULL,
     listen_tcp, listener_reached},
    {"memory", "allocate and touch 512 MiB", "--memory 256m", "--memory unlimited", NULL,
     "oom (signal 9, SIGKILL)|signaled (signal 9, SIGKILL)", setup_memory, NULL, "allocated"},
    {"fork-bomb", "start 200 processes", "--pids-limit 64", "--pids-limit unlimited", NULL, NULL,
     setup_fork_bomb, NULL, "forked 200"},
    {"persistence", "write a file into the code directory for the next run",
     "the code directory is bound read-only (-v DIR:/work)", "-v DIR:/work:rw", NULL, NULL,
     setup_persistence, persistence_succeeded},
    {"env-credentials", "find a secret exported in the caller's environment",
     "a clean environment (PATH, HOME, LANG, thread counts, -e only)", "--env-inherit", NULL, NULL, setup_env,
     canary_in_output},
    {"inherited-fd", "read a file through a descriptor the caller left open",
     "descriptors above 2 closed before execve", "--keep-fds", NULL, NULL, setup_inherited_fd,
     canary_in_output},
    {"signal-outside", "SIGKILL a host process of the sandbox's own host uid", "pid namespace",
     "--pid host", NULL, NULL, setup_signal, victim_killed},
    {"proc-writes", "open /proc/sysrq-trigger and /proc/sys/kernel/core_pattern for writing",
     "host uid is never root; /proc/sys and /proc/sysrq-trigger read-only", NULL,
     "the sandbox maps to an unprivileged host uid, which the kernel refuses these files; "
     "nsbox has no opt-out for that",
     NULL, setup_as_root_caller, NULL, "opened"},
    {"nested-userns", "unshare a user namespace to regain capabilities",
     "seccomp refuses unshare and clone with namespace flags", "--no-seccomp", NULL, NULL,
     setup_nested_userns, NULL, "a new user namespace with capabilities"},
    {"setuid", "run a setuid-root program planted on the host and bound in",
     "one-uid user namespace; nosuid mounts; no_new_privs", NULL,
     "a setuid file owned by a host uid the sandbox does not map never changes ids "
     "(user_namespaces(7)); nsbox has no opt-out for that",
     NULL, setup_setuid, setuid_succeeded},
    {"tiocsti", "push input into a terminal standing in for the caller's",
     "no terminal reaches the sandbox (descriptors closed, new session); seccomp refuses TIOCSTI",
     "--keep-fds --no-seccomp", NULL, NULL, setup_tiocsti, tiocsti_succeeded},
    {"abstract-socket", "send a nonce to an abstract unix socket of the host",
     "network namespace (abstract sockets belong to it)", "--network host", NULL, NULL,
     listen_abstract, listener_reached},
    {"sysv-ipc", "read a System V shared memory segment of the host", "IPC namespace", "--ipc host",
     NULL, NULL, setup_sysv_ipc, canary_in_output},
    {"hostname", "set the hostname (to its current value)",
     "UTS namespace; no capabilities; seccomp refuses sethostname", NULL,
     "the host's hostname needs CAP_SYS_ADMIN over the host's UTS namespace, which nothing in a "
     "user namespace has; nsbox has no opt-out for that",
     NULL, setup_as_root_caller, NULL, "set the hostname"},
    {"fill-tmp", "write 64 MiB into /tmp", "--tmpfs /tmp:size=16m", "--tmpfs /tmp:size=128m", NULL,
     NULL, setup_fill_tmp, NULL, "wrote 64 MiB"},
    {"output-flood", "print " STRINGIFY(FLOOD_MIB) " MiB to the caller",
     "--output-limit 4000 (bytes kept per stream)", "--output-limit 32m", NULL, NULL, setup_flood,
     flood_succeeded},
    {"runaway", "keep running for 4 s",
     "--timeout 2 (and RLIMIT_CPU of --cpus x --timeout where limits fall back to rlimits)",
     "--timeout unlimited", NULL,
     "timeout|signaled (signal 24, SIGXCPU)|signaled (signal 9, SIGKILL)", setup_runaway, NULL,
     "still running"},
    {"leftover-process", "leave a process behind after the payload exits",
     "pid namespace (its init's exit kills all); cgroup.kill", "--pid host --cgroup off", NULL,
     NULL, setup_leftover, leftover_succeeded},
};

/* ---- running one trial ----------------------------------------------------------------- */

static int remove_below(int top);

/* Empty a directory the sandbox's host uid owns as that uid, in a child: root never deletes
 * inside a tree another uid can still change. */
static void clear_as_host_uid(const struct ctx *c, int dirfd)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (c->host_ids_lock >= 0)
            (void)close(c->host_ids_lock); /* not for a process of the sandbox's uid */
        if (setgroups(0, NULL) < 0 || setresgid(c->host_gid, c->host_gid, c->host_gid) < 0 ||
            setresuid(c->host_uid, c->host_uid, c->host_uid) < 0)
            _exit(1);
        _exit(remove_below(dirfd) < 0);
    }
    if (pid > 0)
        (void)waitpid(pid, NULL, 0);
}

static void trial_cleanup(const struct ctx *c, struct trial *t)
{
    if (t->pass_fd >= 0)
        (void)close(t->pass_fd);
    if (t->fd >= 0)
        (void)close(t->fd);
    if (t->sub_fd >= 0) {
        if (t->sub_is_host_uid && c->root)
            clear_as_host_uid(c, t->sub_fd);
        /* Taken back before it is removed: nothing of the sandbox's host uid may add to it
         * meanwhile. */
        if (fchown(t->sub_fd, geteuid(), getegid()) < 0 || fchmod(t->sub_fd, 0700) < 0) {
            /* then the removal below may have to race a writer; it never follows one */
        }
        (void)close(t->sub_fd);
    }
    if (t->dir_fd >= 0)
        (void)close(t->dir_fd);
    if (t->victim > 0) {
        (void)kill(t->victim, SIGKILL);
        (void)waitpid(t->victim, NULL, 0);
    }
    if (t->shmid >= 0 && shmctl(t->shmid, IPC_RMID, NULL) == 0 && t->shm_record[0])
        (void)unlinkat(t->top_fd, t->shm_record, 0);
    *t = (struct trial){
        .pass_fd = -1, .fd = -1, .sub_fd = -1, .dir_fd = -1, .shmid = -1, .top_fd = -1};
}

static void append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n > OUTPUT_MAX)
        return; /* drained, not kept */
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = realloc(*buf, *cap);
        if (!*buf)
            log_oom();
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* Run argv with stdout and stderr captured; with drop, as the sandbox's host ids. */
static int spawn(const struct ctx *c, char **argv, const struct trial *t, bool drop,
                 struct outcome *o)
{
    int out[2], err[2], status;
    size_t cap = 0, err_cap = 0;
    struct timespec start, now;
    pid_t pid;
    bool open_out = true, open_err = true, timed_out = false;

    if (pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(err, O_CLOEXEC) < 0) {
        (void)close(out[0]);
        (void)close(out[1]);
        return -errno;
    }
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
            _exit(125);
        (void)setpgid(0, 0);
        if (t->env_token && setenv("NSBOX_SELFTEST_TOKEN", t->secret, 1) < 0)
            _exit(125);
        if (t->secret_to_env && setenv("NSBOX_SELFTEST_SECRET", t->secret, 1) < 0)
            _exit(125);
        if (drop && c->root &&
            (setgroups(0, NULL) < 0 || setresgid(c->host_gid, c->host_gid, c->host_gid) < 0 ||
             setresuid(c->host_uid, c->host_uid, c->host_uid) < 0))
            _exit(125);
        if (t->mode == MODE_CONTROL) {
            /* A bare attack gets the trial's variables and no more: its process is readable by
             * other processes of its uid, and the caller's environment is not theirs. */
            char *envp[8];
            size_t k = 0;
            envp[k++] = (char *)"PATH=/usr/bin:/bin";
            envp[k++] = (char *)"LANG=C.UTF-8";
            envp[k++] = (char *)"HOME=/";
            for (const char *const *v =
                     (const char *const[]){"NSBOX_SELFTEST_TOKEN", "NSBOX_SELFTEST_SECRET", NULL};
                 *v; v++) {
                const char *val = getenv(*v);
                if (val) {
                    char *e = malloc(strlen(*v) + strlen(val) + 2);
                    if (!e)
                        _exit(125);
                    (void)sprintf(e, "%s=%s", *v, val);
                    envp[k++] = e;
                }
            }
            envp[k] = NULL;
            if (chdir("/") < 0)
                _exit(125);
            execve(argv[0], argv, envp);
        } else
            execv(argv[0], argv);
        _exit(127);
    }
    (void)close(out[1]);
    (void)close(err[1]);
    (void)clock_gettime(CLOCK_MONOTONIC, &start);
    while (open_out || open_err) {
        struct pollfd p[2] = {{.fd = open_out ? out[0] : -1, .events = POLLIN},
                              {.fd = open_err ? err[0] : -1, .events = POLLIN}};
        long left;
        int k;

        (void)clock_gettime(CLOCK_MONOTONIC, &now);
        left = TRIAL_TIMEOUT_MS -
               (long)((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
        if (left <= 0) {
            timed_out = true;
            (void)kill(-pid, SIGKILL);
            (void)kill(pid, SIGKILL);
            break;
        }
        if (interrupted && !timed_out) {
            /* Once: nsbox run tears its sandbox down on SIGTERM and then closes its pipes. */
            timed_out = true;
            (void)kill(pid, SIGTERM);
        }
        k = poll(p, 2, (int)left);
        if (k < 0 && errno != EINTR)
            break;
        if (open_out && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[65536];
            ssize_t n = read(out[0], buf, sizeof(buf));
            if (n <= 0)
                open_out = false;
            else
                append(&o->out, &o->out_len, &cap, buf, (size_t)n);
        }
        if (open_err && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[65536];
            ssize_t n = read(err[0], buf, sizeof(buf));
            if (n <= 0)
                open_err = false;
            else
                append(&o->errout, &o->errout_len, &err_cap, buf, (size_t)n);
        }
    }
    (void)close(out[0]);
    (void)close(err[0]);
    if (waitpid(pid, &status, 0) < 0)
        return -errno;
    o->ran = true;
    if (interrupted)
        (void)snprintf(o->status, sizeof(o->status), "interrupted");
    else if (timed_out)
        (void)snprintf(o->status, sizeof(o->status), "timeout");
    else if (WIFSIGNALED(status))
        (void)snprintf(o->status, sizeof(o->status), "signaled");
    else
        (void)snprintf(o->status, sizeof(o->status), "exited %d", WEXITSTATUS(status));
    return 0;
}

/* Replace o's raw output (nsbox's JSON result) with the payload's stdout, and take its status. */
static void take_json_result(struct ctx *c, struct outcome *o)
{
    json_error_t error;
    json_t *root = o->out ? json_loadb(o->out, o->out_len, 0, &error) : NULL;
    json_t *out, *err;
    const char *s;

    if (!root) {
        (void)snprintf(o->status, sizeof(o->status), "error");
        (void)snprintf(o->err, sizeof(o->err), "nsbox run printed no JSON result: %.*s",
                       o->errout ? (int)MIN(strcspn(o->errout, "\n"), 500) : 0,
                       o->errout ? o->errout : "");
        return;
    }
    s = json_string_value(json_object_get(root, "status"));
    if (json_is_integer(json_object_get(root, "signal"))) {
        int sig = (int)json_integer_value(json_object_get(root, "signal"));
        const char *abbrev = sigabbrev_np(sig);
        (void)snprintf(o->status, sizeof(o->status), "%s (signal %d, SIG%s)", s ? s : "error", sig,
                       abbrev ? abbrev : "?");
    } else
        (void)snprintf(o->status, sizeof(o->status), "%s", s ? s : "error");
    err = json_object_get(root, "error");
    if (json_is_object(err)) {
        s = json_string_value(json_object_get(err, "message"));
        (void)snprintf(o->err, sizeof(o->err), "%s", s ? s : "");
    }
    s = json_string_value(json_object_get(root, "limits_enforced_by"));
    if (s && strcmp(s, "none") != 0 && !c->limits_by[0]) {
        const char *note = json_string_value(json_object_get(root, "limits_note"));
        (void)snprintf(c->limits_by, sizeof(c->limits_by), "%s", s);
        (void)snprintf(c->limits_note, sizeof(c->limits_note), "%s", note ? note : "");
    }
    /* nsbox's own stderr (its warnings) gives way to the payload's. */
    free(o->out);
    free(o->errout);
    o->out = o->errout = NULL;
    o->out_len = o->errout_len = 0;
    out = json_object_get(root, "stdout");
    if (json_is_string(out)) {
        o->out_len = json_string_length(out);
        o->out = xmalloc(o->out_len + 1);
        memcpy(o->out, json_string_value(out), o->out_len + 1);
    }
    out = json_object_get(root, "stderr");
    if (json_is_string(out)) {
        o->errout_len = json_string_length(out);
        o->errout = xmalloc(o->errout_len + 1);
        memcpy(o->errout, json_string_value(out), o->errout_len + 1);
    }
    json_decref(root);
}

struct verdict {
    const char *word; /* blocked, not blocked, succeeded, still blocked, skipped, error */
    char detail[512];
    bool good; /* what the self-test wants from this mode */
};

/* The line of the attack's output that explains its verdict. */
static void detail_line(const struct outcome *o, const char *prefix, char *buf, size_t size)
{
    const char *p = o->out ? strstr(o->out, prefix) : NULL;
    size_t n;
    if (!p) {
        buf[0] = '\0';
        return;
    }
    n = strcspn(p, "\n");
    (void)snprintf(buf, size, "%.*s", (int)MIN(n, size - 1), p);
}

/* Whether the attack program said "nsbox-selftest: WORD NAME" on stderr. */
static bool marked(const struct outcome *o, const char *word, const char *name)
{
    char needle[96];
    (void)snprintf(needle, sizeof(needle), "nsbox-selftest: %s %s\n", word, name);
    return o->errout && memmem(o->errout, o->errout_len, needle, strlen(needle)) != NULL;
}

/* Whether status is one of enders ("a|b|c"). */
static bool ended_by(const char *enders, const char *status)
{
    size_t n = strlen(status);
    for (const char *p = enders; p && *p;) {
        size_t len = strcspn(p, "|");
        if (len == n && strncmp(p, status, n) == 0)
            return true;
        p += len + (p[len] == '|');
    }
    return false;
}

/* The last line of the attack's stderr, e.g. the end of a Python traceback. */
static void last_line(const struct outcome *o, char *buf, size_t size)
{
    size_t end = o->errout_len, start;
    while (end > 0 && o->errout[end - 1] == '\n')
        end--;
    start = end;
    while (start > 0 && o->errout[start - 1] != '\n')
        start--;
    (void)snprintf(buf, size, "%.*s", (int)MIN(end - start, size - 1), o->errout + start);
}

static void run_trial(struct ctx *c, const struct attack *a, enum mode mode, struct verdict *v)
{
    static const char *const mode_names[] = {"sandbox", "ablated", "control"};
    struct trial t = {.mode = mode,
                      .pass_fd = -1,
                      .fd = -1,
                      .sub_fd = -1,
                      .dir_fd = -1,
                      .shmid = -1,
                      .top_fd = -1};
    struct outcome o = {0};
    char *argv[64], name[64], line[400];
    size_t n = 0;
    bool success;
    int r;

    /* Owned by the caller (root for root), like everything of the self-test but the
     * subdirectories an attack must be able to write: nothing the sandbox's host uid could
     * swap for a symlink under root's feet. */
    (void)snprintf(name, sizeof(name), "%s-%s", a->name, mode_names[mode]);
    (void)snprintf(t.dir, sizeof(t.dir), "%s/%s", c->dir, name);
    if (mkdirat(c->dir_fd, name, 0755) < 0 ||
        (t.dir_fd = openat(c->dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        fchmod(t.dir_fd, 0755) < 0) {
        v->word = "error";
        (void)snprintf(v->detail, sizeof(v->detail), "cannot make %.300s: %s", t.dir,
                       strerror(errno));
        trial_cleanup(c, &t);
        return;
    }
    r = a->setup(c, &t);
    if (r < 0) {
        v->word = "error";
        (void)snprintf(v->detail, sizeof(v->detail), "setting up the attack failed: %s",
                       strerror(-r));
        trial_cleanup(c, &t);
        return;
    }
    /* The ablated run gets the table's opt_out, after the setup's own options (the last of a
     * repeated option wins); one that names the trial's DIR is the setup's to spell. */
    if (mode == MODE_ABLATED && a->opt_out && !strstr(a->opt_out, "DIR")) {
        char *save = NULL;
        (void)snprintf(t.ablate, sizeof(t.ablate), "%s", a->opt_out);
        for (char *w = strtok_r(t.ablate, " ", &save); w; w = strtok_r(NULL, " ", &save))
            add_opt(&t, w);
    }
    if (t.skip[0]) {
        v->word = "skipped";
        v->good = true;
        (void)snprintf(v->detail, sizeof(v->detail), "%s", t.skip);
        trial_cleanup(c, &t);
        return;
    }

    if (mode == MODE_CONTROL) {
        argv[n++] = c->python;
    } else {
        argv[n++] = c->exe;
        argv[n++] = (char *)"run";
        argv[n++] = (char *)"--json";
        /* Time is the protection of one attack only (runaway, which sets its own): the others
         * get a minute, so that a slow machine does not stop them for the wrong reason. */
        argv[n++] = (char *)"--timeout";
        argv[n++] = (char *)"60";
        if (c->rootfs) {
            argv[n++] = (char *)"--rootfs";
            argv[n++] = (char *)c->rootfs;
        }
        if (c->host_user[0]) {
            argv[n++] = (char *)"--host-user";
            argv[n++] = (char *)c->host_user;
        }
        if (t.secret_to_env) {
            argv[n++] = (char *)"-e";
            argv[n++] = (char *)"NSBOX_SELFTEST_SECRET";
        }
        for (size_t i = 0; i < t.n_opts; i++)
            argv[n++] = (char *)t.opts[i];
        argv[n++] = (char *)"--";
        argv[n++] = (char *)"python3";
    }
    argv[n++] = (char *)"-I";
    argv[n++] = (char *)"-B";
    argv[n++] = (char *)"-c";
    argv[n++] = (char *)selftest_attacks;
    argv[n++] = (char *)a->name;
    for (size_t i = 0; i < t.n_args; i++)
        argv[n++] = (char *)t.args[i];
    argv[n] = NULL;

    r = spawn(c, argv, &t, mode == MODE_CONTROL && !t.as_caller, &o);
    if (r < 0) {
        v->word = "error";
        (void)snprintf(v->detail, sizeof(v->detail), "cannot start the trial: %s", strerror(-r));
        trial_cleanup(c, &t);
        return;
    }
    if (mode != MODE_CONTROL)
        take_json_result(c, &o);
    success = a->succeeded ? a->succeeded(c, &t, &o) : said(&o, a->report);
    line[0] = '\0';

    if (mode != MODE_CONTROL && strcmp(o.status, "error") == 0) {
        /* nsbox could not run the attack: nothing was tested. */
        v->word = "error";
        (void)snprintf(v->detail, sizeof(v->detail), "nsbox run failed: %.400s", o.err);
    } else if (!success && !marked(&o, "TRIED", a->name)) {
        /* Not blocked: never tried (no python3, a broken rootfs, ...). */
        v->word = "error";
        last_line(&o, line, sizeof(line));
        (void)snprintf(v->detail, sizeof(v->detail), "the attack did not start (%s%s%s)", o.status,
                       line[0] ? ": " : "", line);
    } else if (!success && !marked(&o, "DONE", a->name) && !ended_by(a->enders, o.status)) {
        /* Not blocked either: it stopped half-way for a reason that is not its protection. */
        v->word = "error";
        last_line(&o, line, sizeof(line));
        (void)snprintf(v->detail, sizeof(v->detail), "the attack did not finish (%s%s%s)", o.status,
                       line[0] ? ": " : "", line);
    } else if (mode == MODE_SANDBOX) {
        v->word = success ? "NOT BLOCKED" : "blocked";
        v->good = !success;
    } else {
        v->word = success ? "succeeded" : mode == MODE_ABLATED ? "still blocked" : "failed";
        v->good = success;
    }
    if (!v->detail[0]) {
        detail_line(&o, success ? "SUCCEEDED" : "blocked:", line, sizeof(line));
        if (a->succeeded == flood_succeeded)
            (void)snprintf(line, sizeof(line), "the caller got %zu bytes", o.out_len);
        else if (a->succeeded == leftover_succeeded)
            (void)snprintf(line, sizeof(line),
                           success ? "a process outlived the run (killed now)"
                                   : "no process outlived the run");
        (void)snprintf(v->detail, sizeof(v->detail), "%s%s%s", o.status, line[0] ? ": " : "", line);
    }
    free(o.out);
    free(o.errout);
    trial_cleanup(c, &t);
}

/* ---- the command ----------------------------------------------------------------------- */

struct level {
    int fd; /* -1 while closed to stay within the descriptor limit */
    dev_t dev;
    ino_t ino;
};

#define OPEN_LEVELS 128 /* descriptors held open at most; deeper ones are closed and reopened */

/* Remove one entry of dir: a file, or an empty directory. Returns 1 when the first non-empty
 * directory found must be entered (*ret_name), 0 when dir is empty, -errno on failure. */
static int clear_one(int dir, char *ret_name, size_t size)
{
    int copy = dup(dir);
    DIR *d = copy >= 0 ? fdopendir(copy) : NULL;
    struct dirent *de;
    int r = 0;

    if (!d) {
        if (copy >= 0)
            (void)close(copy);
        return -errno;
    }
    rewinddir(d); /* a dup shares the offset of an earlier walk */
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (unlinkat(dir, de->d_name, 0) == 0 || errno == ENOENT)
            continue;
        if (errno != EISDIR)
            continue; /* not ours to remove; the rmdir above it will say so */
        if (unlinkat(dir, de->d_name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            continue;
        (void)snprintf(ret_name, size, "%s", de->d_name);
        r = 1;
        break;
    }
    (void)closedir(d);
    return r;
}

/* Remove everything below the directory top, however deep, never following a symlink, never
 * leaving its file system, holding at most OPEN_LEVELS descriptors: past that, an upper level
 * is closed and reopened later through ".." of the level below, checked against the device
 * and inode it had. Whatever a writer changes meanwhile is at worst left behind, never
 * followed. Returns 0 when top is empty, else -errno (-ELOOP: the tree moved under the walk,
 * -E2BIG: too much to remove). */
static int remove_below(int top)
{
    _cleanup_free_ struct level *st = NULL;
    size_t n = 0, cap = 0;
    unsigned long budget = 1UL << 22;
    struct stat s0;
    int r = 0;

    if (fstat(top, &s0) < 0)
        return -errno;
    for (;;) {
        char name[NAME_MAX + 1];
        struct level *cur;
        int dir;

        if (budget-- == 0) {
            r = -E2BIG;
            break;
        }
        dir = n == 0 ? top : st[n - 1].fd;
        r = clear_one(dir, name, sizeof(name));
        if (r < 0)
            break;
        if (r == 1) {
            struct stat sub;
            int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 || fstat(fd, &sub) < 0 || sub.st_dev != s0.st_dev) {
                r = fd < 0 ? -errno : -EXDEV;
                if (fd >= 0)
                    (void)close(fd);
                break;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                st = realloc(st, cap * sizeof(*st));
                if (!st)
                    log_oom();
            }
            st[n++] = (struct level){.fd = fd, .dev = sub.st_dev, .ino = sub.st_ino};
            if (n > OPEN_LEVELS && st[n - 1 - OPEN_LEVELS].fd >= 0) {
                (void)close(st[n - 1 - OPEN_LEVELS].fd);
                st[n - 1 - OPEN_LEVELS].fd = -1;
            }
            continue;
        }
        if (n == 0)
            return 0; /* top is empty */
        /* This level is empty: back up (its parent removes it on its next pass). */
        cur = &st[n - 1];
        if (n >= 2 && st[n - 2].fd < 0) {
            struct stat up;
            int fd = openat(cur->fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 || fstat(fd, &up) < 0 || up.st_dev != st[n - 2].dev ||
                up.st_ino != st[n - 2].ino) {
                if (fd >= 0)
                    (void)close(fd);
                r = -ELOOP;
                break;
            }
            st[n - 2].fd = fd;
        }
        (void)close(cur->fd);
        n--;
    }
    for (size_t i = 0; i < n; i++)
        if (st[i].fd >= 0)
            (void)close(st[i].fd);
    return r < 0 ? r : -ENOTEMPTY;
}

/* Remove the directory name of /var/tmp (open as vartmp) and what is in it, and the System V
 * segments recorded in it ("shm-ID" entries) that the caller still owns. */
static void remove_selftest_dir(int vartmp, const char *name)
{
    _cleanup_close_ int fd = openat(vartmp, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_closedir_ DIR *d = NULL;
    struct dirent *de;
    struct stat st;

    if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid())
        return;
    {
        int copy = dup(fd);
        d = copy >= 0 ? fdopendir(copy) : NULL;
        if (!d && copy >= 0)
            (void)close(copy);
        if (d)
            rewinddir(d);
    }
    while (d && (de = readdir(d))) {
        struct shmid_ds ds;
        unsigned key;
        int id;
        /* Only the very segment: same id, key and creator. */
        if (sscanf(de->d_name, "shm-%d-%u", &id, &key) == 2 && shmctl(id, IPC_STAT, &ds) == 0 &&
            ds.shm_perm.cuid == geteuid() && (unsigned)ds.shm_perm.__key == key)
            (void)shmctl(id, IPC_RMID, NULL);
    }
    if (remove_below(fd) < 0 || unlinkat(vartmp, name, AT_REMOVEDIR) < 0) {
        /* An owner that runs no more: the next self-test takes it as stale at once. */
        (void)unlinkat(fd, "owner", 0);
        (void)write_text_at(fd, "owner", "0 0\n", 0644);
        log_error("selftest: could not remove all of /var/tmp/%s (something kept writing "
                  "there); the next self-test tries again",
                  name);
    }
}

#define SELFTEST_PREFIX "nsbox-selftest-"

/* Remove what self-tests of this user that were killed (SIGKILL) left in /var/tmp: their
 * "owner" entry names a process that no longer runs. */
static void remove_stale(void)
{
    _cleanup_closedir_ DIR *d = opendir("/var/tmp");
    struct dirent *de;

    if (!d)
        return;
    while ((de = readdir(d))) {
        char owner[64] = "";
        unsigned long long start = 0;
        int pid = 0;
        struct stat st;
        _cleanup_close_ int fd = -EBADF;

        if (strncmp(de->d_name, SELFTEST_PREFIX, strlen(SELFTEST_PREFIX)) != 0)
            continue;
        fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid())
            continue;
        if (read_file_at(fd, "owner", owner, sizeof(owner)) > 0 &&
            sscanf(owner, "%d %llu", &pid, &start) == 2 && pid > 0 &&
            process_start_time(pid) == start)
            continue; /* still running */
        if (!owner[0] && st.st_mtime > time(NULL) - 600)
            continue; /* a self-test that has just started */
        remove_selftest_dir(dirfd(d), de->d_name);
    }
}

static void usage(FILE *f)
{
    fputs("Usage: nsbox selftest [--ablate] [--control] [--json] [--only NAME,...] [--rootfs DIR]\n"
          "\n"
          "Run attack programs inside 'nsbox run' on this host and show that each is blocked.\n"
          "Exit status 0 only if every attack was blocked.\n"
          "\n"
          "  --ablate        also run each attack with only its protection removed (the opt-outs\n"
          "                  of 'nsbox run'), to show that the attack then succeeds\n"
          "  --control       also run each attack without nsbox (when run by root: as the\n"
          "                  sandboxes' host ids, but the /proc writes and hostname ones), to\n"
          "                  show that the attack program works; the attacks are bounded\n"
          "  --json          print one JSON object instead of the table\n"
          "  --only NAMES    run only these attacks (comma-separated; see the table for names)\n"
          "  --rootfs DIR    the rootfs for 'nsbox run' (default: nsbox's)\n"
          "  -h, --help      show this help\n",
          f);
}

static bool selected(const char *only, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = only; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p += len + (p[len] == ',');
    }
    return !only;
}

int selftest_main(int argc, char *argv[])
{
    static const struct option options[] = {
        {"ablate", no_argument, NULL, 'a'},
        {"control", no_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},
        {"only", required_argument, NULL, 'o'},
        {"rootfs", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct ctx c = {.dir_fd = -1};
    bool ablate = false, control = false, json = false, ok = true;
    const char *only = NULL;
    struct verdict v[ELEMENTSOF(attacks)][3];
    unsigned counts[3][6] = {{0}};
    size_t n_run = 0;
    ssize_t len;
    int opt;

    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (opt) {
        case 'a':
            ablate = true;
            break;
        case 'c':
            control = true;
            break;
        case 'j':
            json = true;
            break;
        case 'o':
            only = optarg;
            break;
        case 'r':
            c.rootfs = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            log_error("option '%s' needs a value (see 'nsbox selftest --help')", argv[optind - 1]);
            return 125;
        default:
            log_error("unknown option '%s' (see 'nsbox selftest --help')", argv[optind - 1]);
            return 125;
        }
    }
    if (optind < argc) {
        log_error("unexpected argument '%s' (see 'nsbox selftest --help')", argv[optind]);
        return 125;
    }
    for (const char *p = only; p && *p;) {
        size_t l = strcspn(p, ",");
        bool known = false;
        for (size_t i = 0; i < ELEMENTSOF(attacks); i++)
            known |= strlen(attacks[i].name) == l && strncmp(p, attacks[i].name, l) == 0;
        if (!known) {
            char names[512] = "";
            for (size_t i = 0; i < ELEMENTSOF(attacks); i++)
                (void)snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
                               i ? "," : "", attacks[i].name);
            log_error("--only: no attack named '%.*s' (the attacks: %s)", (int)l, p, names);
            return 125;
        }
        p += l + (p[l] == ',');
    }

    len = readlink("/proc/self/exe", c.exe, sizeof(c.exe) - 1);
    if (len <= 0) {
        log_error("selftest: cannot find nsbox's own binary (/proc/self/exe): %s", strerror(errno));
        return 125;
    }
    c.exe[len] = '\0';
    c.root = geteuid() == 0;
    c.host_uid = geteuid();
    c.host_gid = getegid();
    c.host_ids_lock = -EBADF;
    if (c.root) {
        char detail[256];
        uid_t id;
        int r = uidpool_acquire(&id, &c.host_ids_lock, detail, sizeof(detail));
        if (r < 0) {
            log_error("selftest: taking host ids for the sandboxes failed: %s", detail);
            return 125;
        }
        c.host_uid = id;
        c.host_gid = id;
        (void)snprintf(c.host_user, sizeof(c.host_user), "%u:%u", (unsigned)id, (unsigned)id);
        /* Its --pid host trials leave processes of the id by design: if the self-test is
         * killed, the next run that takes the id kills them first. */
        r = uidpool_mark(c.host_ids_lock, id, true);
        if (r < 0) {
            log_error("selftest: marking host uid %u in the pool failed: %s", (unsigned)id,
                      strerror(-r));
            return 125;
        }
    }
    if (control) {
        const char *candidates[] = {"/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"};
        for (size_t i = 0; i < ELEMENTSOF(candidates) && !c.python[0]; i++)
            if (access(candidates[i], X_OK) == 0)
                (void)snprintf(c.python, sizeof(c.python), "%s", candidates[i]);
        if (!c.python[0]) {
            log_error("selftest --control: no python3 on the host (/usr/bin/python3) to run the "
                      "attacks without nsbox; install python3");
            return 125;
        }
    }
    remove_stale();
    /* Not below /tmp, which every sandbox replaces with its own tmpfs. Traversable by the
     * sandbox's host uid, for the attacks whose files it may reach once a protection is off.
     * "owner" names this process, for remove_stale() of a later self-test. */
    (void)snprintf(c.dir, sizeof(c.dir), "/var/tmp/" SELFTEST_PREFIX "XXXXXX");
    if (!mkdtemp(c.dir) ||
        (c.dir_fd = open(c.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
        fchmod(c.dir_fd, 0755) < 0) {
        log_error("selftest: cannot make a temporary directory in /var/tmp: %s", strerror(errno));
        return 125;
    }
    {
        char owner[64];
        (void)snprintf(owner, sizeof(owner), "%d %llu\n", (int)getpid(),
                       process_start_time(getpid()));
        if (write_text_at(c.dir_fd, "owner", owner, 0644) < 0) {
            log_error("selftest: cannot write %s/owner: %s", c.dir, strerror(errno));
            return 125;
        }
    }
    (void)signal(SIGPIPE, SIG_IGN);
    {
        struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: poll() returns */
        (void)sigaction(SIGINT, &sa, NULL);
        (void)sigaction(SIGTERM, &sa, NULL);
        (void)sigaction(SIGHUP, &sa, NULL);
    }

    for (size_t i = 0; i < ELEMENTSOF(attacks); i++) {
        const struct attack *a = &attacks[i];
        if (!selected(only, a->name)) {
            v[i][0].word = NULL;
            continue;
        }
        if (interrupted)
            break;
        n_run++;
        v[i][0] = v[i][1] = v[i][2] = (struct verdict){0};
        if (!json) {
            (void)fprintf(stderr, "nsbox selftest: %s...\n", a->name);
        }
        run_trial(&c, a, MODE_SANDBOX, &v[i][0]);
        if (ablate) {
            if (a->opt_out)
                run_trial(&c, a, MODE_ABLATED, &v[i][1]);
            else {
                v[i][1].word = "skipped";
                v[i][1].good = true;
                (void)snprintf(v[i][1].detail, sizeof(v[i][1].detail), "%s", a->no_opt_out);
            }
        }
        if (control)
            run_trial(&c, a, MODE_CONTROL, &v[i][2]);
        for (int m = 0; m < 3; m++) {
            if (!v[i][m].word)
                continue;
            ok &= v[i][m].good;
            counts[m][strcmp(v[i][m].word, "skipped") == 0 ? 2 : v[i][m].good ? 0 : 1]++;
        }
    }
    {
        _cleanup_close_ int vartmp = open("/var/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        (void)close(c.dir_fd);
        if (vartmp >= 0)
            remove_selftest_dir(vartmp, c.dir + strlen("/var/tmp/"));
    }
    if (c.host_ids_lock >= 0 && uidpool_kill_all(c.host_uid) >= 0)
        (void)uidpool_mark(c.host_ids_lock, c.host_uid, false);
    if (interrupted) {
        log_error("selftest: interrupted by signal %d; its files and processes are removed",
                  (int)interrupted);
        return 128 + interrupted;
    }

    if (json) {
        json_t *root = json_object(), *list = json_array();
        static const char *const keys[] = {"sandbox", "ablated", "control"};
        for (size_t i = 0; i < ELEMENTSOF(attacks); i++) {
            json_t *item;
            if (!v[i][0].word)
                continue;
            item = json_pack("{s:s, s:s, s:s, s:s?}", "name", attacks[i].name, "tried",
                             attacks[i].tried, "protection", attacks[i].protection, "opt_out",
                             attacks[i].opt_out);
            for (int m = 0; m < 3; m++)
                if (v[i][m].word)
                    (void)json_object_set_new(item, keys[m],
                                              json_pack("{s:s, s:s, s:b}", "verdict", v[i][m].word,
                                                        "detail", v[i][m].detail, "as_expected",
                                                        v[i][m].good));
            (void)json_array_append_new(list, item);
        }
        (void)json_object_set_new(root, "attacks", list);
        (void)json_object_set_new(root, "ok", json_boolean(ok));
        (void)json_object_set_new(root, "uid", json_integer((json_int_t)geteuid()));
        (void)json_object_set_new(root, "host_uid", json_integer((json_int_t)c.host_uid));
        (void)json_object_set_new(root, "temp_dir", json_string(c.dir)); /* removed by now */
        (void)json_object_set_new(root, "limits_enforced_by",
                                  json_string(c.limits_by[0] ? c.limits_by : "unknown"));
        char *text = json_dumps(root, JSON_INDENT(2));
        if (!text)
            log_oom();
        (void)puts(text);
        free(text);
        json_decref(root);
        return ok ? 0 : 1;
    }

    (void)printf("%-17s %-12s", "ATTACK", "SANDBOX");
    if (ablate)
        (void)printf(" %-14s", "WITHOUT IT");
    if (control)
        (void)printf(" %-10s", "NO NSBOX");
    (void)printf(" STOPPED BY\n");
    for (size_t i = 0; i < ELEMENTSOF(attacks); i++) {
        if (!v[i][0].word)
            continue;
        (void)printf("%-17s %-12s", attacks[i].name, v[i][0].word);
        if (ablate)
            (void)printf(" %-14s", v[i][1].word);
        if (control)
            (void)printf(" %-10s", v[i][2].word);
        (void)printf(" %s\n", attacks[i].protection);
    }
    (void)printf("\n");
    for (size_t i = 0; i < ELEMENTSOF(attacks); i++) {
        if (!v[i][0].word)
            continue;
        (void)printf("%s: tried to %s.\n", attacks[i].name, attacks[i].tried);
        (void)printf("  sandbox: %s (%s)\n", v[i][0].word, v[i][0].detail);
        if (ablate)
            (void)printf("  without it (%s): %s (%s)\n",
                         attacks[i].opt_out ? attacks[i].opt_out : "no opt-out", v[i][1].word,
                         v[i][1].detail);
        if (control)
            (void)printf("  without nsbox: %s (%s)\n", v[i][2].word, v[i][2].detail);
    }
    (void)printf("\nLimits were enforced by: %s%s%s\n", c.limits_by[0] ? c.limits_by : "unknown",
                 c.limits_note[0] ? " - " : "", c.limits_note);
    (void)printf("%zu attacks: %u blocked, %u NOT BLOCKED or not judged, %u skipped\n", n_run,
                 counts[0][0], counts[0][1], counts[0][2]);
    if (ablate)
        (void)printf("without their protection: %u succeeded, %u still blocked or not judged, "
                     "%u skipped\n",
                     counts[1][0], counts[1][1], counts[1][2]);
    if (control)
        (void)printf("without nsbox: %u succeeded, %u failed or not judged, %u skipped\n",
                     counts[2][0], counts[2][1], counts[2][2]);
    (void)printf("%s\n", ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
