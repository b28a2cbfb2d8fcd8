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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "command.h"
#include "cmd-doctor.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "nsbox.h"
#include "cmd-rootfs.h"
#include "syscalls.h"

#include <nettle/sha2.h>

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

/* ---- inside a container ------------------------------------------------------------------ */

/* The settings that let nsbox work in a container, by what the outer container takes away.
 * Printed as "fix" lines under the check that found it (README, "Running on many machines"). */
static void fix_seccomp(struct doctor *d)
{
    line(d, "fix",
         "  Docker:     docker run --security-opt seccomp=seccomp-nsbox.json "
         "(examples/seccomp-nsbox.json: the allowlist nsbox needs)");
    line(d, "fix", "  Podman:     podman run --security-opt seccomp=seccomp-nsbox.json");
    line(d, "fix",
         "  Kubernetes: securityContext.seccompProfile: {type: Localhost, "
         "localhostProfile: seccomp-nsbox.json} (the file in the kubelet's "
         "seccomp directory on each node)");
}

static void fix_proc(struct doctor *d)
{
    line(d, "fix", "  Docker:     docker run --security-opt systempaths=unconfined");
    line(d, "fix", "  Podman:     podman run --security-opt unmask=/proc/*");
    line(d, "fix",
         "  Kubernetes: securityContext.procMount: Unmasked, with hostUsers: false "
         "on the pod (a user-namespaced pod)");
}

/* What a container runtime left in this process's view: a name for it, or NULL outside one.
 * Podman writes /run/.containerenv, Docker /.dockerenv; Kubernetes sets
 * KUBERNETES_SERVICE_HOST in every container; systemd-nspawn and LXC set $container. */
static const char *container_name(void)
{
    const char *v;

    if (access("/run/.containerenv", F_OK) == 0)
        return "Podman";
    if (getenv("KUBERNETES_SERVICE_HOST"))
        return "Kubernetes";
    if (access("/.dockerenv", F_OK) == 0)
        return "Docker";
    v = getenv("container");
    return v && v[0] ? v : NULL;
}

/* Mounts over files and directories of /proc, which make a fresh procfs "too revealing" for a
 * user namespace (mnt_already_visible() in fs/namespace.c: every mount on a procfs must sit on
 * an empty directory), and whether /proc/sys is read-only (such a mount too: isolation.h).
 * Runtimes do both by default (OCI maskedPaths, readonlyPaths). Read from
 * /proc/self/mountinfo (proc(5): field 5 is the mount point, field 6 its options). */
static void check_proc_masks(struct doctor *d)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char buf[4096], masked[512] = "";
    unsigned n_masked = 0;
    bool sys_ro = false;

    if (!f) {
        line(d, "warn", "/proc: /proc/self/mountinfo not readable: %s", strerror(errno));
        return;
    }
    while (fgets(buf, sizeof(buf), f)) {
        char point[1024], opts[256];

        if (sscanf(buf, "%*s %*s %*s %*s %1023s %255s", point, opts) != 2 ||
            strncmp(point, "/proc/", 6) != 0)
            continue;
        /* binfmt_misc sits on an empty directory: it does not hide anything. */
        if (strcmp(point, "/proc/sys/fs/binfmt_misc") == 0)
            continue;
        if (strcmp(point, "/proc/sys") == 0 &&
            (strncmp(opts, "ro,", 3) == 0 || strcmp(opts, "ro") == 0))
            sys_ro = true;
        if (n_masked++ < 4) {
            size_t len = strlen(masked);
            (void)snprintf(masked + len, sizeof(masked) - len, "%s%.100s", len ? ", " : "", point);
        }
    }
    (void)fclose(f);
    if (n_masked == 0) {
        line(d, "ok",
             "/proc: fully visible (nothing mounted over its files), so the sandbox can "
             "mount its own");
        return;
    }
    line(d, "FAIL",
         "/proc: %u mounts cover parts of it (%s%s)%s, as a container runtime "
         "does by default: the kernel then refuses the sandbox its own /proc (EPERM)",
         n_masked, masked, n_masked > 4 ? ", ..." : "",
         sys_ro ? " and /proc/sys is read-only" : "");
    fix_proc(d);
}

/* The outer container's security settings that stop nsbox, each with the setting that fixes
 * it. Only run inside a container, or under an outer seccomp filter. */
static void check_container(struct doctor *d)
{
    const char *name = container_name();
    int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
    char buf[256];
    const char *v;

    if (!name && mode != 2) {
        line(d, "ok", "container: not in one (no outer seccomp filter, no runtime's marker)");
        return;
    }
    line(d, "info", "container: %s%s", name ? name : "unknown runtime",
         mode == 2 ? ", with a seccomp filter on nsbox already (the runtime's profile)" : "");
    check_proc_masks(d);
    /* AppArmor's label of this process (attr/apparmor/current since Linux 5.8, else the LSM
     * shared attr/current). Docker's docker-default and Podman's containers-default profiles
     * deny mount(2), which the sandbox needs. */
    v = proc_value("/proc/self/attr/apparmor/current", buf, sizeof(buf));
    if (!v)
        v = proc_value("/proc/self/attr/current", buf, sizeof(buf));
    if (v && strcmp(v, "unconfined") != 0 && strstr(v, "(enforce)")) {
        line(d, "FAIL",
             "AppArmor: this container runs under profile %s, which may deny the "
             "mounts the sandbox makes",
             v);
        line(d, "fix",
             "  Docker/Podman: --security-opt apparmor=unconfined; Kubernetes: "
             "securityContext.appArmorProfile: {type: Unconfined} (or a profile "
             "that allows mount, umount and pivot_root)");
    }
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
        if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
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
    if (r == -EPERM && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2) {
        /* Docker's and containerd's default profiles refuse unshare(2) and clone(2) with
         * namespace flags to a container without CAP_SYS_ADMIN, with EPERM; clone3(2) with
         * ENOSYS. That the sysctls below allow namespaces is what points at the filter. */
        line(d, "fix",
             "  a seccomp filter (the container runtime's default profile) refuses "
             "it; run the container with a profile that allows nsbox's calls:");
        fix_seccomp(d);
        return;
    }
    v = proc_value("/proc/sys/kernel/unprivileged_userns_clone", buf, sizeof(buf));
    if (v && strcmp(v, "0") == 0)
        line(d, "fix", "  sysctl kernel.unprivileged_userns_clone=1 (Debian's switch is off)");
    v = proc_value("/proc/sys/user/max_user_namespaces", buf, sizeof(buf));
    if (v && strcmp(v, "0") == 0)
        line(d, "fix", "  sysctl user.max_user_namespaces=15000 (it is 0)");
    v = proc_value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", buf, sizeof(buf));
    if (v && strcmp(v, "1") == 0)
        line(d, "fix",
             "  Ubuntu's AppArmor restricts user namespaces: load the profile nsbox ships, which "
             "grants the userns permission to the nsbox binary alone: apparmor_parser -r "
             "/etc/apparmor.d/nsbox (meson install puts it there; dist/apparmor/nsbox.in in the "
             "source, its path line set to where nsbox is installed)");
}

/* Where a run would get its cgroup leaf, and why, from nsbox_cgroup_placement(): nothing is made,
 * moved or started (the real run at the end does that). */
static void check_cgroup(struct doctor *d, const struct nsbox_config *c)
{
    char what[1024] = "";
    int r = nsbox_cgroup_placement(c, what, sizeof(what));

    if (r > 0)
        line(d, "ok", "cgroup v2: a run here gets %s", what);
    else if (r == 0) {
        line(d, "warn", "cgroup v2: not usable, limits fall back to rlimits: %s", what);
        line(d, "fix",
             "  for cgroup limits, run nsbox where cgroup v2 is delegated to you, or "
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
    int abi = sys_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

    /* What landlock_plan() decides for a run: ABI 2 and later are used (landlock.h). */
    if (abi >= 2)
        line(d, "ok",
             "Landlock: ABI %d; nsbox applies it to every run as a second wall behind the mount "
             "and network namespaces (files%s%s)",
             abi, abi >= 4 ? ", TCP" : "", abi >= 6 ? ", signals and abstract sockets" : "");
    else if (abi == 1)
        line(d, "info",
             "Landlock: ABI 1 only, which nsbox does not use (its rules would refuse every "
             "rename across directories); runs go without it, with a note, and --landlock "
             "required refuses to run");
    else
        line(d, "info",
             "Landlock: not available (%s); runs go without it, with a note, and --landlock "
             "required refuses to run",
             strerror(errno));
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
            hex_encode(d, sizeof(d), got);
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
        line(d, "info",
             "isolation here: tier %d%s: user, pid, net, mount, ipc, uts and cgroup "
             "namespaces; read-only rootfs; no capabilities; no_new_privs; seccomp default "
             "policy; limits by %s",
             r.isolation_tier,
             r.isolation_tier == 1 ? " (the full sandbox)" : " (without user.max_* limits)",
             nsbox_enforcer_to_string(r.memory.enforced_by));
    } else
        line(d, "FAIL", "nsbox run: %s",
             r.status == NSBOX_STATUS_ERROR ? r.error
                                            : "the test "
                                              "program failed");
    /* No user namespace here: what --isolation landlock would give, tried for real. */
    if (r.status == NSBOX_STATUS_ERROR && strcmp(r.error_step, "clone3") == 0) {
        nsbox_result_free(&r);
        r = (struct nsbox_result){0};
        c.isolation = NSBOX_ISOLATION_LANDLOCK;
        c.rootfs = NULL; /* tier 3 runs the host's programs */
        c.warn = NULL;
        (void)nsbox_run(&c, &r);
        if (r.status == NSBOX_STATUS_EXITED && r.exit_code == 0 && r.isolation_tier == 3)
            line(d, "info",
                 "isolation here: none of the sandbox's tiers; tier 3 (--isolation landlock) "
                 "ran a Python program without namespaces, behind Landlock ABI %d and seccomp: "
                 "much weaker; fix the FAIL lines above for the full sandbox",
                 r.landlock_abi);
        else
            line(d, "info", "isolation here: none; --isolation landlock (tier 3) fails too: %s",
                 r.status == NSBOX_STATUS_ERROR ? r.error : "the test program failed");
    }
    nsbox_result_free(&r);
}

static int doctor(const char *rootfs)
{
    struct doctor d = {0};
    struct nsbox_config c;

    nsbox_config_init(&c);
    c.rootfs = rootfs;
    c.cgroup = NSBOX_CGROUP_AUTO;
    (void)printf("nsbox doctor: uid %u, kernel checks, then a real run\n", (unsigned)geteuid());
    check_container(&d);
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

int doctor_main(int argc, char *argv[])
{
    if (argc == 1)
        return doctor(NULL);
    if (argc == 3 && strcmp(argv[1], "--rootfs") == 0)
        return doctor(argv[2]);
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        (void)printf("Usage: nsbox doctor [--rootfs DIR]\n\nCheck that nsbox can work on "
                     "this host, explain what is missing, and run a real sandbox.\n");
        return EXIT_SUCCESS;
    }
    log_error("usage: nsbox doctor [--rootfs DIR]");
    return EXIT_NSBOX_FAILURE;
}
