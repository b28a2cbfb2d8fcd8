/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox selftest: the attacks of src/cli/selftest-attacks.py, run inside `nsbox run` on this host,
 * judged by what reached the host where the host can see it (a listener reached, a victim
 * killed, a file written), else by the attack's own report, and only once it ran to its end.
 * This file is the command: its options, its temporary directory in /var/tmp (and what killed
 * self-tests left there), the trials in order, the table or JSON of verdicts. The attacks are
 * in selftest-table.c, one trial's run and judgement in selftest-trial.c. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "nsbox.h"
#include "rmtree.h"
#include "selftest-internal.h"
#include "cmd-selftest.h"

volatile sig_atomic_t selftest_interrupted;

static void on_signal(int sig)
{
    selftest_interrupted = sig;
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
    if (rmtree_below(fd) < 0 || unlinkat(vartmp, name, AT_REMOVEDIR) < 0) {
        /* An owner that runs no more: the next self-test takes it as stale at once. */
        (void)unlinkat(fd, "owner", 0);
        (void)selftest_write_new_file(fd, "owner", "0 0\n", 0644);
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
    const struct attack *const attacks = selftest_attacks_table;
    const size_t n_attacks = selftest_n_attacks;
    _cleanup_free_ struct verdict(*v)[3] = calloc(n_attacks, sizeof(*v));
    unsigned counts[3][6] = {{0}};
    size_t n_run = 0;
    ssize_t len;
    int opt;

    if (!v)
        log_oom();
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
        for (size_t i = 0; i < n_attacks; i++)
            known |= strlen(attacks[i].name) == l && strncmp(p, attacks[i].name, l) == 0;
        if (!known) {
            char names[512] = "";
            for (size_t i = 0; i < n_attacks; i++)
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
        /* Its --pid host trials leave processes of the id by design: if the self-test is
         * killed, the next run that takes the id kills them first (the lease is marked so). */
        c.host_ids_lock = nsbox_host_ids_lease(&id, detail, sizeof(detail));
        if (c.host_ids_lock < 0) {
            log_error("selftest: taking host ids for the sandboxes failed: %s", detail);
            return 125;
        }
        c.host_uid = id;
        c.host_gid = id;
        (void)snprintf(c.host_user, sizeof(c.host_user), "%u:%u", (unsigned)id, (unsigned)id);
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
        if (selftest_write_new_file(c.dir_fd, "owner", owner, 0644) < 0) {
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

    for (size_t i = 0; i < n_attacks; i++) {
        const struct attack *a = &attacks[i];
        if (!selected(only, a->name)) {
            v[i][0].word = NULL;
            continue;
        }
        if (selftest_interrupted)
            break;
        n_run++;
        v[i][0] = v[i][1] = v[i][2] = (struct verdict){0};
        if (!json) {
            (void)fprintf(stderr, "nsbox selftest: %s...\n", a->name);
        }
        selftest_run_trial(&c, a, MODE_SANDBOX, &v[i][0]);
        if (ablate) {
            if (a->opt_out)
                selftest_run_trial(&c, a, MODE_ABLATED, &v[i][1]);
            else {
                v[i][1].word = "skipped";
                v[i][1].good = true;
                (void)snprintf(v[i][1].detail, sizeof(v[i][1].detail), "%s", a->no_opt_out);
            }
        }
        if (control)
            selftest_run_trial(&c, a, MODE_CONTROL, &v[i][2]);
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
    if (c.host_ids_lock >= 0)
        (void)nsbox_host_ids_release(TAKE_FD(c.host_ids_lock), c.host_uid);
    if (selftest_interrupted) {
        log_error("selftest: interrupted by signal %d; its files and processes are removed",
                  (int)selftest_interrupted);
        return 128 + selftest_interrupted;
    }

    if (json) {
        json_t *root = json_object(), *list = json_array();
        static const char *const keys[] = {"sandbox", "ablated", "control"};
        for (size_t i = 0; i < n_attacks; i++) {
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
    for (size_t i = 0; i < n_attacks; i++) {
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
    for (size_t i = 0; i < n_attacks; i++) {
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
