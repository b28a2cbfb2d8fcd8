/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Host ids of root's sandboxes, one pair per run (as isolate's per-box uids and systemd's
 * DynamicUser= do).
 *
 * Why: with one shared id (it used to be the host's nobody, 65534) every sandbox of root and
 * every host process running as nobody were one kernel identity: they shared the per-user
 * budgets the kernel keeps per uid (processes, inotify instances and watches, epoll watches,
 * pipe buffers, POSIX message queues, pending signals), the user keyrings ("_uid.65534",
 * keyrings(7)), and could signal each other (kill(2): a matching real or saved uid). Tracing
 * was refused already: a tracer outside the sandbox's user namespace needs CAP_SYS_PTRACE in it
 * (cap_ptrace_access_check(), security/commoncap.c), whatever its uid.
 *
 * The range: UIDPOOL_BASE + 0…UIDPOOL_SIZE-1, uid and gid alike. systemd's map of the id space
 * (https://systemd.io/UIDS-GIDS/) gives 0…999 to system users, 1000…60000 to regular ones,
 * 61184…65519 to DynamicUser=, 65534 to nobody, 524288…1879048191 (0x80000…0x6FFFFFFF) to
 * container ranges of 64K that systemd-nspawn and others pick at random, and 0x7FFE0000…
 * 0x7FFEFFFF to its "foreign" range; ids from 2^31 up break programs that keep a uid in an
 * int. 0x7E000000 lies in the unused stretch between the container ranges and the foreign
 * range, and above SSSD's default automatic id mapping (200000…2000200000). 4096 slots is
 * more sandboxes of root than one host runs at once; a run that finds none free fails
 * (-EBUSY) instead of sharing.
 *
 * Coordination: one lock file, UIDPOOL_DIR/UIDPOOL_LOCK, in a directory of root's alone on
 * the /run tmpfs; slot N is a write lock on byte N of it, taken with F_OFD_SETLK (an "open file
 * description" lock, fcntl(2), Linux 3.15): it belongs to the descriptor, not to the process,
 * is never lost to a close() of another descriptor of the same file (as classic POSIX locks
 * are), and the kernel releases it when the last copy of the descriptor is closed, also when
 * nsbox is SIGKILLed, so a slot cannot leak. One file instead of one per slot: one open() per
 * run and nothing that grows in /run. Slots are tried from a random one, so that concurrent
 * runs rarely meet on the same byte.
 *
 * "Never an id in use on the host": a slot whose id a passwd or group entry names (any source
 * nsswitch.conf(5) lists for passwd and group) is skipped. Not through getpwuid_r(3) where the
 * sources are only "files" and "systemd", as on a Debian host: there glibc would load
 * libnss_systemd (and libcap, libm) with dlopen() and try nscd's socket, 0.55-0.68 ms of a
 * run's 4 ms (most of root's start-up overhead over an ordinary user's); nsbox reads
 * /etc/passwd and /etc/group itself, and for "systemd" looks where nss-systemd(8) finds
 * records that may hold any id: the drop-in records of userdb (/etc/userdb, /run/userdb,
 * /run/host/userdb, /usr/local/lib/userdb, /usr/lib/userdb: a record of uid N is named
 * "N.user", of gid N "N.group") and the services in /run/systemd/userdb/ (systemd's own,
 * io.systemd.Home, .Machine and .DynamicUser, hand out only ids of their ranges on systemd's
 * map, none in the pool; a socket of any other service there makes nsbox ask NSS). Any other
 * source (ldap, sss, nis, compat, winbind, a missing line) is asked through NSS as before.
 * Processes are not looked for in /proc: a scan of /proc/PID/status took 1.5 ms for the 118
 * processes of the development VM (more than all of nsbox's start-up overhead, and it grows with
 * the host), and the only processes that run as a pool id are nsbox's own, which do not outlive
 * their slot. In the sandbox's pid namespace the kernel kills all of them before the sandbox's init
 * has fully exited (zap_pid_ns_processes(), kernel/pid_namespace.c), which is before the
 * supervisor's waitid() returns and the slot is released. If nsbox is SIGKILLed, the kernel closes
 * its descriptors (dropping the lock) before it sends the sandbox's init its death signal
 * (PR_SET_PDEATHSIG; exit_files() comes before exit_notify() in do_exit()): for that moment, until
 * init's exit has killed the rest, a next run may have the id too, but each sits in a pid namespace
 * of its own where it cannot see the other's processes. Without a pid namespace (--pid host), the
 * supervisor kills every process of the id (uidpool_kill_all()) before releasing it; such a run
 * marks its slot (byte N of the lock file, written only by the holder of its lock) before its first
 * process and clears the mark after the kill, so that if nsbox is killed in between, the next run
 * to take the slot kills what runs as the id before using it (one pread(2) per run checks the
 * mark). A host that runs other software in this range must say so to nsbox by a passwd or group
 * entry.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "uidpool.h"

int uidpool_choose(unsigned start, unsigned size, int (*take)(unsigned slot, void *userdata),
                   void *userdata)
{
    if (size == 0)
        return -EBUSY;
    start %= size;
    for (unsigned i = 0; i < size; i++) {
        unsigned slot = (unsigned)(((unsigned long)start + i) % size);
        int r = take(slot, userdata);
        if (r < 0)
            return r;
        if (r > 0)
            return (int)slot;
    }
    return -EBUSY;
}

/* Whether a passwd or group entry names id, asked through NSS: 1 yes, 0 no, -errno when the
 * user database could not say (then the slot is not used: fail closed). getpwuid_r(3): "not
 * found" is a return of 0 (or, from some NSS modules, ENOENT, ESRCH, EBADF or EPERM) with a
 * NULL result; ERANGE means an entry exists that does not fit the buffer. */
static int id_in_nss(unsigned id)
{
    char buf[4096];
    struct passwd pw, *pwp = NULL;
    struct group gr, *grp = NULL;
    int r;

    r = getpwuid_r((uid_t)id, &pw, buf, sizeof(buf), &pwp);
    if (pwp || r == ERANGE)
        return 1;
    if (r != 0 && r != ENOENT && r != ESRCH && r != EBADF && r != EPERM)
        return -r;
    r = getgrgid_r((gid_t)id, &gr, buf, sizeof(buf), &grp);
    if (grp || r == ERANGE)
        return 1;
    if (r != 0 && r != ENOENT && r != ESRCH && r != EBADF && r != EPERM)
        return -r;
    return 0;
}

int uidpool_nss_sources(const char *text, const char *database)
{
    size_t dlen = strlen(database);
    int all = 0;

    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        size_t len = strcspn(p, "\n#");
        const char *end = p + len, *q = p + strspn(p, " \t");
        int mask = 0;

        if ((size_t)(end - q) <= dlen || strncmp(q, database, dlen) != 0)
            continue;
        q += dlen;
        q += strspn(q, " \t");
        if (q >= end || *q != ':')
            continue;
        for (q++; q < end;) {
            size_t n;

            q += strspn(q, " \t");
            if (q >= end)
                break;
            if (*q == '[') { /* an action, "[NOTFOUND=return]" */
                const char *close = memchr(q, ']', (size_t)(end - q));
                q = close ? close + 1 : end;
                continue;
            }
            n = strcspn(q, " \t[\n#");
            if (q + n > end)
                n = (size_t)(end - q);
            if (n == 5 && strncmp(q, "files", 5) == 0)
                mask |= UIDPOOL_NSS_FILES;
            else if (n == 7 && strncmp(q, "systemd", 7) == 0)
                mask |= UIDPOOL_NSS_SYSTEMD;
            else
                mask |= UIDPOOL_NSS_OTHER;
            q += n;
        }
        /* Every line for database counts (glibc takes one of them): any source beyond files
         * and systemd in any of them, and NSS is asked. */
        all |= mask ? mask : UIDPOOL_NSS_OTHER;
    }
    return all ? all : UIDPOOL_NSS_OTHER;
}

int uidpool_db_names(const char *text, unsigned id)
{
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        const char *nl = strchr(p, '\n'), *f = p;
        unsigned long v;
        char *end = NULL;

        for (int field = 0; field < 2 && f; field++) {
            f = strchr(f, ':');
            if (f && nl && f > nl)
                f = NULL;
            if (f)
                f++;
        }
        if (!f || *f < '0' || *f > '9')
            continue;
        errno = 0;
        v = strtoul(f, &end, 10);
        if (errno || *end != ':' || v != id)
            continue;
        return 1;
    }
    return 0;
}

int uidpool_subid_covers(const char *text, unsigned id)
{
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        const char *colon = strchr(p, ':'), *nl = strchr(p, '\n');
        unsigned long start, count;
        char *end = NULL;

        if (!colon || (nl && colon > nl))
            continue;
        errno = 0;
        start = strtoul(colon + 1, &end, 10);
        if (errno || end == colon + 1 || *end != ':')
            continue;
        count = strtoul(end + 1, &end, 10);
        if (errno || (*end && *end != '\n' && *end != ' ' && *end != '\t'))
            continue;
        if (id >= start && id - start < count)
            return 1;
    }
    return 0;
}

/* Whether /etc/subuid or /etc/subgid hands id out (uidpool_subid_covers()); a file that does
 * not exist hands out nothing. Read per slot tried, which is once in an ordinary run (the
 * files are a line per user). Returns 1, 0, or -errno when a file exists but cannot be read. */
static int id_in_subid_files(unsigned id)
{
    static const char *const files[] = {"/etc/subuid", "/etc/subgid"};

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_regular_file(files[i], 1 << 20, &text, &len);

        if (r == -ENOENT)
            continue;
        if (r < 0)
            return r;
        if (uidpool_subid_covers(text, id))
            return 1;
    }
    return 0;
}

/* What the pool reads of the user database once per uidpool_acquire(), for every slot it
 * tries (see the header). */
struct user_db {
    bool ask_nss; /* a source other than files and systemd: getpwuid_r(3), getgrgid_r(3) */
    char *passwd; /* /etc/passwd, /etc/group (NULL: missing, names nothing) */
    char *group;
    int dropin_dirs[5]; /* userdb's drop-in directories that exist, else -EBADF */
};

static const char *const userdb_dropin_dirs[5] = {"/etc/userdb", "/run/userdb", "/run/host/userdb",
                                                  "/usr/local/lib/userdb", "/usr/lib/userdb"};

/* Whether /run/systemd/userdb/ holds a service that is not systemd's own (whose ids lie outside
 * the pool): 1 yes, 0 no, -errno. A missing directory holds none. */
static int userdb_foreign_service(void)
{
    static const char *const own[] = {".",
                                      "..",
                                      "io.systemd.Multiplexer",
                                      "io.systemd.NameServiceSwitch",
                                      "io.systemd.DropIn",
                                      "io.systemd.Home",
                                      "io.systemd.Machine",
                                      "io.systemd.DynamicUser"};
    _cleanup_closedir_ DIR *d = opendir("/run/systemd/userdb");
    struct dirent *de;

    if (!d)
        return errno == ENOENT ? 0 : negative_errno();
    while ((errno = 0, de = readdir(d))) {
        bool known = false;
        for (size_t i = 0; i < sizeof(own) / sizeof(own[0]) && !known; i++)
            known = strcmp(de->d_name, own[i]) == 0;
        if (!known)
            return 1;
    }
    return errno ? negative_errno() : 0;
}

static void user_db_done(struct user_db *db)
{
    free(db->passwd);
    free(db->group);
    db->passwd = db->group = NULL;
    for (size_t i = 0; i < 5; i++)
        if (db->dropin_dirs[i] >= 0)
            (void)close(db->dropin_dirs[i]);
}

/* Reads nsswitch.conf and what its sources for passwd and group need. Returns 0 or -errno. */
static int user_db_load(struct user_db *db)
{
    static const char *const files[2] = {"/etc/passwd", "/etc/group"};
    _cleanup_free_ char *conf = NULL;
    size_t len = 0;
    int sources, r;

    for (size_t i = 0; i < 5; i++)
        db->dropin_dirs[i] = -EBADF;
    r = read_regular_file("/etc/nsswitch.conf", 1 << 20, &conf, &len);
    if (r == -ENOENT) { /* glibc's built-in defaults: let glibc apply them */
        db->ask_nss = true;
        return 0;
    }
    if (r < 0)
        return r;
    sources = uidpool_nss_sources(conf, "passwd") | uidpool_nss_sources(conf, "group");
    if (sources & UIDPOOL_NSS_OTHER) {
        db->ask_nss = true;
        return 0;
    }
    for (size_t i = 0; i < 2 && (sources & UIDPOOL_NSS_FILES); i++) {
        r = read_regular_file(files[i], 64 << 20, i == 0 ? &db->passwd : &db->group, &len);
        if (r < 0 && r != -ENOENT)
            return r;
    }
    if (sources & UIDPOOL_NSS_SYSTEMD) {
        r = userdb_foreign_service();
        if (r < 0)
            return r;
        if (r > 0) {
            db->ask_nss = true;
            return 0;
        }
        for (size_t i = 0; i < 5; i++) {
            db->dropin_dirs[i] = open(userdb_dropin_dirs[i],
                                      O_RDONLY | O_DIRECTORY | O_PATH | O_CLOEXEC);
            if (db->dropin_dirs[i] < 0 && errno != ENOENT && errno != ENOTDIR)
                return negative_errno();
        }
    }
    return 0;
}

/* Whether a passwd or group entry names id: 1 yes, 0 no, -errno when the user database could
 * not say (then the slot is not used: fail closed). */
static int id_in_user_db(const struct user_db *db, unsigned id)
{
    if (db->ask_nss)
        return id_in_nss(id);
    if ((db->passwd && uidpool_db_names(db->passwd, id)) ||
        (db->group && uidpool_db_names(db->group, id)))
        return 1;
    for (size_t i = 0; i < 5; i++) {
        char name[32];
        if (db->dropin_dirs[i] < 0)
            continue;
        for (int kind = 0; kind < 2; kind++) {
            (void)snprintf(name, sizeof(name), "%u.%s", id, kind == 0 ? "user" : "group");
            if (faccessat(db->dropin_dirs[i], name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return 1;
            if (errno != ENOENT)
                return negative_errno();
        }
    }
    return 0;
}

struct take {
    struct user_db db;
    int fd;
    unsigned busy;  /* slots locked by other runs */
    unsigned named; /* slots whose id a passwd or group entry, or a subordinate range, names */
};

/* NSBOX_UID_POOL=test: the pool of nsbox's own test suite, the next 4096 ids with a lock file
 * of their own, so that a test that fills the pool or kills every process of an id never
 * touches the ids of the caller's real runs. Anything else but unset or empty is refused by
 * uidpool_acquire(). */
static bool pool_is_test(void)
{
    const char *e = getenv("NSBOX_UID_POOL");
    return e && strcmp(e, "test") == 0;
}

unsigned uidpool_base(void)
{
    return pool_is_test() ? UIDPOOL_BASE + UIDPOOL_SIZE : UIDPOOL_BASE;
}

const char *uidpool_lock_name(void)
{
    return pool_is_test() ? UIDPOOL_LOCK "-test" : UIDPOOL_LOCK;
}

const char *uidpool_lock_path(void)
{
    return pool_is_test() ? UIDPOOL_DIR "/" UIDPOOL_LOCK "-test" : UIDPOOL_DIR "/" UIDPOOL_LOCK;
}

static int slot_lock(int fd, unsigned slot, short type)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)slot, .l_len = 1};
    return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? negative_errno() : 0;
}

int uidpool_mark(int lock_fd, uid_t id, bool may_have_processes)
{
    char b = may_have_processes ? 1 : 0;
    if (id < uidpool_base() || id - uidpool_base() >= UIDPOOL_SIZE)
        return -EINVAL;
    if (pwrite(lock_fd, &b, 1, (off_t)(id - uidpool_base())) != 1)
        return errno ? negative_errno() : -EIO;
    return 0;
}

/* A slot left marked (uidpool_mark()) by a run whose nsbox was killed: kill what may still run
 * as its id, then clear the mark. Returns 0 or -errno. */
static int sweep_if_marked(int fd, unsigned slot)
{
    char b = 0;
    ssize_t n = pread(fd, &b, 1, (off_t)slot);
    int r;

    if (n < 0)
        return negative_errno();
    if (n == 0 || b == 0) /* past the end of the file: never marked */
        return 0;
    r = uidpool_kill_all(uidpool_base() + slot);
    if (r < 0)
        return r;
    return uidpool_mark(fd, uidpool_base() + slot, false);
}

static int take_slot(unsigned slot, void *userdata)
{
    struct take *t = userdata;
    int r = slot_lock(t->fd, slot, F_WRLCK);

    if (r == -EAGAIN || r == -EACCES) {
        t->busy++;
        return 0;
    }
    if (r < 0)
        return r;
    /* Locked first, then looked up: the lookup is the slower step, and it is only done for a
     * slot this run can have. */
    r = id_in_user_db(&t->db, uidpool_base() + slot);
    if (r == 0)
        r = id_in_subid_files(uidpool_base() + slot);
    if (r == 0)
        r = sweep_if_marked(t->fd, slot);
    if (r == 0)
        return 1;
    (void)slot_lock(t->fd, slot, F_UNLCK);
    if (r < 0)
        return r;
    t->named++;
    return 0;
}

/* Open name below dirfd, creating it, and check that it is root's alone: a directory or a
 * lock file others could write would let them hold or free slots. Never follows a symlink. */
static int open_root_only(int dirfd, const char *name, bool dir, const char *path, char *detail,
                          size_t detail_size)
{
    _cleanup_close_ int fd = -EBADF;
    struct stat st;

    if (dir) {
        if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
            goto fail;
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    } else
        fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0 || fstat(fd, &st) < 0)
        goto fail;
    if ((dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) || st.st_uid != 0 ||
        (st.st_mode & 077)) {
        (void)snprintf(detail, detail_size,
                       "%s is not a %s of root's alone (mode %s, owner 0): remove it", path,
                       dir ? "directory" : "regular file", dir ? "0700" : "0600");
        return -EPERM;
    }
    return TAKE_FD(fd);
fail:
    (void)snprintf(detail, detail_size, "%s: %s", path, strerror(errno));
    return negative_errno();
}

int uidpool_acquire(uid_t *ret_id, int *ret_lock_fd, char *detail, size_t detail_size)
{
    _cleanup_close_ int run_fd = -EBADF, dir_fd = -EBADF, fd = -EBADF;
    struct take t = {0};
    unsigned start;
    int r;

    detail[0] = '\0';
    if (getenv("NSBOX_UID_POOL") && *getenv("NSBOX_UID_POOL") && !pool_is_test()) {
        (void)snprintf(detail, detail_size,
                       "NSBOX_UID_POOL='%s': only 'test' (nsbox's test suite) or unset",
                       getenv("NSBOX_UID_POOL"));
        return -EINVAL;
    }
    run_fd = open("/run", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (run_fd < 0) {
        (void)snprintf(detail, detail_size, "/run: %s", strerror(errno));
        return negative_errno();
    }
    dir_fd = open_root_only(run_fd, "nsbox", true, UIDPOOL_DIR, detail, detail_size);
    if (dir_fd < 0)
        return dir_fd;
    fd = open_root_only(dir_fd, uidpool_lock_name(), false, uidpool_lock_path(), detail,
                        detail_size);
    if (fd < 0)
        return fd;

    if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != (ssize_t)sizeof(start))
        start = (unsigned)getpid() ^ (unsigned)time(NULL);
    r = user_db_load(&t.db);
    if (r < 0) {
        user_db_done(&t.db);
        (void)snprintf(detail, detail_size, "reading the user database: %s", strerror(-r));
        return r;
    }
    t.fd = fd;
    r = uidpool_choose(start, UIDPOOL_SIZE, take_slot, &t);
    user_db_done(&t.db);
    if (r == -EBUSY)
        (void)snprintf(detail, detail_size,
                       "no free id in %u…%u: %u held by running sandboxes, %u named by passwd "
                       "or group entries or /etc/subuid, /etc/subgid ranges",
                       uidpool_base(), uidpool_base() + UIDPOOL_SIZE - 1, t.busy, t.named);
    else if (r < 0)
        (void)snprintf(detail, detail_size,
                       "%s: %s (looking the id up in the user database, killing what a killed "
                       "run left, or locking)",
                       uidpool_lock_path(), strerror(-r));
    if (r < 0)
        return r;
    *ret_id = uidpool_base() + (unsigned)r;
    *ret_lock_fd = TAKE_FD(fd);
    return 0;
}

int uidpool_map_covers(const char *map, unsigned id)
{
    for (const char *p = map; *p;) {
        unsigned long inside, outside, count;
        int n = 0;
        if (sscanf(p, " %lu %lu %lu%n", &inside, &outside, &count, &n) != 3)
            return *p == '\n' || strspn(p, " \t\n") == strlen(p) ? 0 : -EINVAL;
        if (id >= inside && id - inside < count)
            return 1;
        p += n;
        p += strspn(p, " \t");
        if (*p == '\n')
            p++;
        else if (*p)
            return -EINVAL;
    }
    return 0;
}

int uidpool_mapped_here(const char *map_path, unsigned id)
{
    char buf[4096];
    ssize_t n = read_file_at(AT_FDCWD, map_path, buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    return uidpool_map_covers(buf, id);
}

int uidpool_kill_all(uid_t id)
{
    int status;
    pid_t pid = fork();

    if (pid < 0)
        return negative_errno();
    if (pid == 0) {
        /* Groups and gid first: setresuid(2) to a non-zero uid drops CAP_SETGID. */
        if (setgroups(0, NULL) < 0 || setresgid(id, id, id) < 0 || setresuid(id, id, id) < 0)
            _exit(errno ? errno : EPERM);
        /* kill(2) with pid -1: every process this one may signal, but itself and init, i.e.
         * those whose real or saved uid is id (it holds no capability after setresuid(2)).
         * A process forking in a loop cannot slip a child past it: copy_process() refuses a
         * fork once a fatal signal is pending for the parent (kernel/fork.c). Repeated for a
         * child that was already past that check. */
        for (int i = 0; i < 3; i++)
            (void)kill(-1, SIGKILL);
        _exit(0);
    }
    if (RETRY_EINTR(waitpid(pid, &status, 0)) < 0)
        return negative_errno();
    if (!WIFEXITED(status))
        return -EIO;
    return -WEXITSTATUS(status);
}
