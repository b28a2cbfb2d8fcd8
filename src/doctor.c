/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nsbox doctor: check what nsbox needs on this host, explain each failure with its fix, and
 * end with a real sandbox run. Exit status 0 only if `nsbox run` works here.
 */
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "doctor.h"
#include "fileio.h"
#include "macro.h"
#include "nsbox.h"
#include "rootfs-cmd.h"

#include <nettle/sha2.h>

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif

struct doctor {
    unsigned failures;
};

static void line(struct doctor *d, const char *verdict, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void line(struct doctor *d, const char *verdict, const char *fmt, ...)
{
    va_list ap;

    if (strcmp(verdict, "FAIL") == 0)
        d->failures++;
    (void)printf("%-5s ", verdict);
    va_start(ap, fmt);
    (void)vprintf(fmt, ap);
    va_end(ap);
    (void)putchar('\n');
}

/* The first line of a small /proc file, or NULL. */
static const char *proc_value(const char *path, char *buf, size_t size)
{
    if (read_file_at(AT_FDCWD, path, buf, size) <= 0)
        return NULL;
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

/* Can an unprivileged process create a user namespace? Tried in a child (as nobody when
 * nsbox runs as root, since root may create them where users may not), which then exits. */
static int try_userns(void)
{
    pid_t pid = fork();
    int status;

    if (pid < 0)
        return negative_errno();
    if (pid == 0) {
        if (geteuid() == 0 &&
            (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
             setresuid(65534, 65534, 65534) < 0))
            _exit(errno);
        _exit(unshare(CLONE_NEWUSER) < 0 ? errno : 0);
    }
    if (RETRY_EINTR(waitpid(pid, &status, 0)) < 0)
        return negative_errno();
    return WIFEXITED(status) ? -WEXITSTATUS(status) : -EIO;
}

static void check_userns(struct doctor *d)
{
    char buf[64];
    const char *v;
    int r = try_userns();

    if (r == 0) {
        line(d, "ok", "user namespaces: an unprivileged process can create them");
        return;
    }
    line(d, "FAIL", "user namespaces: unshare(CLONE_NEWUSER) failed: %s", strerror(-r));
    v = proc_value("/proc/sys/kernel/unprivileged_userns_clone", buf, sizeof(buf));
    if (v && strcmp(v, "0") == 0)
        line(d, "fix", "  sysctl kernel.unprivileged_userns_clone=1 (Debian's switch is off)");
    v = proc_value("/proc/sys/user/max_user_namespaces", buf, sizeof(buf));
    if (v && strcmp(v, "0") == 0)
        line(d, "fix", "  sysctl user.max_user_namespaces=15000 (it is 0)");
    v = proc_value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", buf, sizeof(buf));
    if (v && strcmp(v, "1") == 0)
        line(d, "fix", "  Ubuntu's AppArmor restricts user namespaces: allow nsbox with an AppArmor "
                       "profile granting 'userns,', or sysctl "
                       "kernel.apparmor_restrict_unprivileged_userns=0");
}

/* Where a run would get its cgroup leaf, and why, from cgroup_placement(): nothing is made,
 * moved or started (the real run at the end does that). */
static void check_cgroup(struct doctor *d, const struct nsbox_config *c)
{
    char what[1024] = "";
    int r = cgroup_placement(c, what, sizeof(what));

    if (r > 0)
        line(d, "ok", "cgroup v2: a run here gets %s", what);
    else if (r == 0) {
        line(d, "warn", "cgroup v2: not usable, limits fall back to rlimits: %s", what);
        line(d, "fix", "  for cgroup limits, run nsbox where cgroup v2 is delegated to you, or "
                       "where your systemd user manager answers on the user bus (see README, "
                       "\"Limits\"); --cgroup off silences the warning");
    } else
        line(d, "FAIL", "cgroup v2: %s", what);
}

static void check_seccomp(struct doctor *d)
{
    char buf[256];
    const char *avail = proc_value("/proc/sys/kernel/seccomp/actions_avail", buf, sizeof(buf));

    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL) {
        line(d, "FAIL", "seccomp: this kernel has no seccomp (CONFIG_SECCOMP_FILTER)");
        return;
    }
    if (avail && (!strstr(avail, "kill_process") || !strstr(avail, "errno")))
        line(d, "FAIL", "seccomp: the actions nsbox uses are missing (available: %s)", avail);
    else
        line(d, "ok", "seccomp: filters with the actions nsbox uses (%s)",
             avail ? avail : "actions_avail not readable");
}

static void check_landlock(struct doctor *d)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

    if (abi > 0)
        line(d, "info", "Landlock: ABI %ld available (nsbox does not use it yet)", abi);
    else
        line(d, "info", "Landlock: not available (%s); nsbox does not need it", strerror(errno));
}

/* Check every file the manifest beside the rootfs (or, for a tree `nsbox rootfs build` made, in
 * it: /usr/share/nsbox/manifest) lists ("SHA256  ./PATH", as rootfs-build writes it) against its
 * SHA-256. Returns 0 (what holds the count), 1 on a mismatch (what holds
 * the path), -ENOENT without a manifest. */
static int manifest_mismatch(const char *rootfs, char *what, size_t size)
{
    _cleanup_free_ char *manifest = NULL;
    _cleanup_close_ int root_fd = -EBADF;
    size_t manifest_len = 0;
    unsigned files = 0;
    char path[4200];

    (void)snprintf(path, sizeof(path), "%s/../manifest", rootfs);
    if (read_regular_file(path, 64 << 20, &manifest, &manifest_len) < 0) {
        (void)snprintf(path, sizeof(path), "%s/usr/share/nsbox/manifest", rootfs);
        if (read_regular_file(path, 64 << 20, &manifest, &manifest_len) < 0)
            return -ENOENT;
    }
    root_fd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return -ENOENT;
    for (char *l = manifest; *l;) {
        size_t n = strcspn(l, "\n");
        char want[65], *name = l + 66;
        if (n > 68 && l[64] == ' ' && l[65] == ' ' && name[0] == '.' && name[1] == '/') {
            uint8_t d[SHA256_DIGEST_SIZE];
            char got[65];
            struct sha256_ctx ctx;
            char buf[65536];
            ssize_t k;
            int fd;

            memcpy(want, l, 64);
            want[64] = '\0';
            l[n] = '\0';
            fd = openat(root_fd, name + 2, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            if (fd < 0) {
                (void)snprintf(what, size, "%s (%s)", name + 1, strerror(errno));
                return 1;
            }
            sha256_init(&ctx);
            while ((k = RETRY_EINTR(read(fd, buf, sizeof(buf)))) > 0)
                sha256_update(&ctx, (size_t)k, (const uint8_t *)buf);
            (void)close(fd);
            sha256_digest(&ctx, sizeof(d), d);
            for (size_t i = 0; i < sizeof(d); i++)
                (void)sprintf(got + 2 * i, "%02x", d[i]);
            if (k < 0 || strcmp(got, want) != 0) {
                (void)snprintf(what, size, "%s (changed)", name + 1);
                return 1;
            }
            files++;
        }
        l += n + 1;
        if (l > manifest + manifest_len)
            break;
    }
    (void)snprintf(what, size, "%u files", files);
    return 0;
}

/* rootfs_check_tree()'s lines, printed as doctor's (it counts its own failures). */
static void rootfs_line(void *userdata, const char *verdict, const char *text)
{
    (void)userdata;
    (void)printf("%-5s %s\n", verdict, text);
}

static void check_rootfs(struct doctor *d, const char *rootfs)
{
    /* Mount points it lacks are made in a skeleton (mount.c): only Python is needed. */
    static const char *const needed[] = {"usr/bin/python3"};
    char what[600];
    struct stat st;
    int r;

    for (size_t i = 0; i < ELEMENTSOF(needed); i++) {
        char path[4200];
        (void)snprintf(path, sizeof(path), "%s/%s", rootfs, needed[i]);
        if (stat(path, &st) < 0) {
            line(d, "FAIL", "rootfs %s: /%s: %s", rootfs, needed[i], strerror(errno));
            line(d, "fix", "  build it (ninja -C build) or pass --rootfs / set NSBOX_ROOTFS");
            return;
        }
    }
    r = manifest_mismatch(rootfs, what, sizeof(what));
    if (r == 0)
        line(d, "ok", "rootfs %s: complete, matching its manifest (%s)", rootfs, what);
    else if (r > 0)
        line(d, "FAIL", "rootfs %s: differs from its manifest at %s: rebuild it", rootfs, what);
    else
        line(d, "ok", "rootfs %s: complete (no manifest beside it to compare)", rootfs);
    d->failures += rootfs_check_tree(rootfs, rootfs_line, d);
}

static void check_run(struct doctor *d, const struct nsbox_config *base)
{
    static char *const argv[] = {(char *)"python3", (char *)"-c",
                                 (char *)"import os; print(os.getuid())", NULL};
    struct nsbox_config c = *base;
    struct nsbox_result r = {0};

    c.argv = argv;
    c.timeout = 20ULL * 1000000;
    (void)nsbox_run(&c, &r);
    if (r.status == NSBOX_STATUS_EXITED && r.exit_code == 0 && r.out.data &&
        strcmp(r.out.data, "65534\n") == 0) {
        line(d, "ok", "nsbox run: a Python program ran in a sandbox in %.1f ms",
             (double)r.wall_time / 1000.0);
        line(d, "info", "isolation here: user, pid, net, mount, ipc, uts and cgroup namespaces; "
                        "read-only rootfs; no capabilities; no_new_privs; seccomp default "
                        "policy; limits by %s",
             nsbox_enforcer_to_string(r.memory.enforced_by));
    } else
        line(d, "FAIL", "nsbox run: %s", r.status == NSBOX_STATUS_ERROR ? r.error : "the test "
                                                                               "program failed");
    nsbox_result_free(&r);
}

int doctor_main(const char *rootfs)
{
    struct doctor d = {0};
    struct nsbox_config c;

    nsbox_config_init(&c);
    c.rootfs = rootfs;
    c.cgroup = NSBOX_CGROUP_AUTO;
    (void)printf("nsbox doctor: uid %u, kernel checks, then a real run\n", (unsigned)geteuid());
    check_userns(&d);
    check_seccomp(&d);
    check_cgroup(&d, &c);
    check_landlock(&d);
    check_rootfs(&d, rootfs ? rootfs : nsbox_default_rootfs());
    check_run(&d, &c);
    (void)printf("%s\n", d.failures ? "nsbox run cannot work here: fix the FAIL lines above"
                                    : "nsbox run works here");
    return d.failures ? 1 : 0;
}
