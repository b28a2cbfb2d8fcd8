/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A C caller of the started-sandbox API (nsbox.h: nsbox_sandbox_start() and after) that misuses
 * it on purpose, for test_lifecycle_api.py: a step while one runs, a stop with a step running,
 * stop(NULL), steps after the sandbox's init died, steps with bad arguments (a copy_in_fd left
 * 0, a memory below the floor, an output limit above the config's cap), and many steps, each
 * checked for the descriptors this process holds before and after; and a process that ignores
 * SIGCHLD. One mode per run (argv[1]);
 * it prints "ok MODE" and exits 0 when every check held, else one line per failed check and
 * exits 1. Built against the static library (meson: nsbox-lifecycle-api), also in a sanitizer
 * build, where AddressSanitizer's leak check covers what the sandbox's result held.
 */
#include <dirent.h>
#include <errno.h>
#include <nsbox.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            fflush(stdout);                                                                        \
        }                                                                                          \
    } while (0)

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own */
}

/* A step refused at once (-EINVAL, -EBUSY, -ESHUTDOWN): its result says it did not run, never
 * the zeroed result's "exited 0" that a caller reading only *ret would take for success. */
static void refused(const struct nsbox_result *r, const char *what)
{
    CHECK(r->status == NSBOX_STATUS_ERROR && r->exit_code == 125 && r->error[0],
          "%s: the result says status %d, exit code %d, error '%s'", what, r->status, r->exit_code,
          r->error);
}

static struct nsbox_sandbox *start(void)
{
    struct nsbox_config c;
    struct nsbox_result r;
    struct nsbox_sandbox *sb = NULL;
    int e;

    nsbox_config_init(&c);
    c.cgroup = NSBOX_CGROUP_OFF;
    c.memory = 256ULL << 20;
    e = nsbox_sandbox_start(&c, -1, &sb, &r);
    if (e < 0) {
        printf("FAIL start: %s: %s\n", strerror(-e), r.error);
        exit(2);
    }
    nsbox_result_free(&r);
    return sb;
}

static struct nsbox_step program(char *const *argv)
{
    return (struct nsbox_step){.argv = argv, .copy_in_fd = -1, .timeout = 20 * 1000000ULL};
}

/* The sandbox's init: this process's one child. */
static pid_t init_pid(void)
{
    char path[64], buf[64];
    FILE *f;
    long pid = -1;

    (void)snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
    f = fopen(path, "re");
    if (f && fgets(buf, sizeof(buf), f))
        pid = strtol(buf, NULL, 10);
    if (f)
        fclose(f);
    return (pid_t)pid;
}

static void mode_busy(void)
{
    static char *const sleep_argv[] = {"sleep", "30", NULL};
    static char *const true_argv[] = {"true", NULL};
    struct nsbox_step s = program(sleep_argv), t = program(true_argv);
    struct nsbox_result r, end;
    int before = count_fds(), e;
    struct nsbox_sandbox *sb = start();

    e = nsbox_sandbox_step_begin(sb, &s, &r);
    CHECK(e == 0, "step_begin: %d", e);
    e = nsbox_sandbox_step_begin(sb, &t, &r);
    CHECK(e == -EBUSY, "a second step_begin while a step runs: %d, not -EBUSY", e);
    refused(&r, "a second step_begin");
    e = nsbox_sandbox_step(sb, &t, &r);
    CHECK(e == -EBUSY, "nsbox_sandbox_step while a step runs: %d, not -EBUSY", e);
    refused(&r, "nsbox_sandbox_step while a step runs");
    e = nsbox_sandbox_step_end(sb, &r);
    CHECK(e == -ESRCH, "step_end of a running step: %d, not -ESRCH", e);
    /* Stopped with the step running: killed with the sandbox, its result freed. */
    e = nsbox_sandbox_stop(sb, NULL, -1, &end);
    CHECK(e == 0 && end.status == NSBOX_STATUS_KILLED, "stop with a step running: %d, status %d", e,
          end.status);
    nsbox_result_free(&end);
    CHECK(nsbox_sandbox_stop(NULL, NULL, -1, &end) == 0, "stop(NULL)");
    CHECK(count_fds() == before, "descriptors: %d before, %d after", before, count_fds());
}

static void mode_ended(void)
{
    static char *const true_argv[] = {"true", NULL};
    struct nsbox_step t = program(true_argv);
    struct nsbox_result r, end;
    int before = count_fds(), e;
    struct nsbox_sandbox *sb = start();
    pid_t init = init_pid();

    CHECK(init > 0, "no init found");
    if (init > 0)
        (void)kill(init, SIGKILL);
    for (int i = 0; i < 3; i++) {
        e = nsbox_sandbox_step(sb, &t, &r);
        CHECK(e == -ESHUTDOWN || e == 0, "step %d after init died: %d", i, e);
        if (e == 0) {
            /* The step may have been sent before the end was seen: it says so. */
            CHECK(r.status == NSBOX_STATUS_ERROR, "step %d after init died: status %d", i,
                  r.status);
            nsbox_result_free(&r);
        } else
            nsbox_result_free(&r);
    }
    e = nsbox_sandbox_step(sb, &t, &r);
    CHECK(e == -ESHUTDOWN, "a step once the end is known: %d, not -ESHUTDOWN", e);
    refused(&r, "a step once the end is known");
    nsbox_result_free(&r);
    e = nsbox_sandbox_stop(sb, NULL, -1, &end);
    CHECK(e == 0, "stop after the end: %d", e);
    nsbox_result_free(&end);
    CHECK(count_fds() == before, "descriptors: %d before, %d after", before, count_fds());
}

/* Bad arguments are refused (-EINVAL) before anything reaches the sandbox, and the sandbox goes
 * on. copy_in_fd 0 (a step zeroed and not set -1) must not hand this process's stdin to init. */
static void mode_bad(void)
{
    static char *const echo_argv[] = {"echo", "fine", NULL};
    struct nsbox_step s;
    struct nsbox_result r, end;
    int before = count_fds(), e;
    struct nsbox_sandbox *sb = start();

    s = (struct nsbox_step){.argv = echo_argv, .timeout = 5 * 1000000ULL}; /* copy_in_fd 0 */
    e = nsbox_sandbox_step(sb, &s, &r);
    CHECK(e == -EINVAL, "copy_in_fd 0 (this process's stdin): %d, not -EINVAL (status %d: %s)", e,
          r.status, r.error);
    refused(&r, "copy_in_fd 0");
    nsbox_result_free(&r);
    s = program(echo_argv);
    s.memory = 4096;
    e = nsbox_sandbox_step(sb, &s, &r);
    CHECK(e == -EINVAL, "memory 4096 bytes: %d, not -EINVAL", e);
    refused(&r, "memory 4096 bytes");
    nsbox_result_free(&r);
    s = program(echo_argv);
    s.output_limit = 8ULL << 30;
    e = nsbox_sandbox_step(sb, &s, &r);
    CHECK(e == -EINVAL, "output_limit 8 GiB: %d, not -EINVAL", e);
    refused(&r, "output_limit 8 GiB");
    nsbox_result_free(&r);
    s = program(echo_argv);
    e = nsbox_sandbox_step(sb, &s, &r);
    CHECK(e == 0 && r.status == NSBOX_STATUS_EXITED && r.out.data &&
              strcmp(r.out.data, "fine\n") == 0,
          "the sandbox after the refusals: %d, status %d", e, r.status);
    nsbox_result_free(&r);
    e = nsbox_sandbox_stop(sb, NULL, -1, &end);
    CHECK(e == 0, "stop: %d", e);
    nsbox_result_free(&end);
    CHECK(count_fds() == before, "descriptors: %d before, %d after", before, count_fds());
}

/* Many steps of every kind: no descriptor stays behind in this process, and each step's
 * copy-out stream is the caller's to close. */
static void mode_many(void)
{
    static char *const write_argv[] = {"sh", "-c", "echo x > /work/f; cat", NULL};
    static const char paths[] = "/work/f";
    struct nsbox_result r, end;
    int before = count_fds(), e, after_first = -1;
    struct nsbox_sandbox *sb = start();

    for (int i = 0; i < 20; i++) {
        struct nsbox_step s = program(write_argv);
        s.has_stdin = true;
        s.stdin_data = "in\n";
        s.stdin_size = 3;
        s.copy_out = paths;
        s.copy_out_size = sizeof(paths);
        if (i % 2) {
            s = (struct nsbox_step){.code = "print(1)\n", .code_size = 9, .copy_in_fd = -1};
        }
        e = nsbox_sandbox_step(sb, &s, &r);
        CHECK(e == 0 && r.status == NSBOX_STATUS_EXITED, "step %d: %d, status %d: %s", i, e,
              r.status, r.error);
        if (i % 2 == 0 && r.copy_out_done) {
            int fd = nsbox_sandbox_step_copy_out(sb);
            CHECK(fd >= 0, "step %d: no copy-out stream", i);
            if (fd >= 0)
                (void)close(fd);
        }
        nsbox_result_free(&r);
        if (i == 1)
            after_first = count_fds(); /* the interpreter's channel is the sandbox's, not ours */
    }
    CHECK(count_fds() == after_first, "descriptors: %d after two steps, %d after twenty",
          after_first, count_fds());
    e = nsbox_sandbox_stop(sb, NULL, -1, &end);
    CHECK(e == 0, "stop: %d", e);
    nsbox_result_free(&end);
    CHECK(count_fds() == before, "descriptors: %d before, %d after", before, count_fds());
}

/* A start whose cancel_fd is readable (the caller's signalfd, say) is given up: -ECANCELED,
 * its result says so, and nothing of it is left (no child, no descriptor). */
static void mode_cancel(void)
{
    struct nsbox_config c;
    struct nsbox_result r;
    struct nsbox_sandbox *sb = (struct nsbox_sandbox *)&c;
    int before = count_fds(), p[2], e;

    nsbox_config_init(&c);
    c.cgroup = NSBOX_CGROUP_OFF;
    if (pipe(p) < 0 || write(p[1], "x", 1) != 1) {
        printf("FAIL pipe\n");
        exit(2);
    }
    e = nsbox_sandbox_start(&c, p[0], &sb, &r);
    CHECK(e == -ECANCELED && sb == NULL, "start with a readable cancel_fd: %d", e);
    CHECK(r.status == NSBOX_STATUS_ERROR && strstr(r.error, "cancelled"),
          "its result: status %d, error '%s'", r.status, r.error);
    nsbox_result_free(&r);
    CHECK(init_pid() <= 0, "a child is left: %d", (int)init_pid());
    close(p[0]);
    close(p[1]);
    CHECK(count_fds() == before, "descriptors: %d before, %d after", before, count_fds());
}

/* A process that ignores SIGCHLD would have the kernel reap the sandbox's init before nsbox
 * learns how it ended: nsbox_run() says so at once, runs nothing and leaves nothing. */
static void mode_sigchld(void)
{
    char *argv[] = {"/bin/true", NULL};
    struct nsbox_config c;
    struct nsbox_result r;
    int before = count_fds();

    nsbox_config_init(&c);
    c.cgroup = NSBOX_CGROUP_OFF;
    c.argv = argv;
    (void)signal(SIGCHLD, SIG_IGN);
    (void)nsbox_run(&c, &r);
    CHECK(r.status == NSBOX_STATUS_ERROR && strcmp(r.error_step, "signals") == 0 &&
              r.error_errno == ECHILD && strstr(r.error, "SIG_DFL"),
          "with SIGCHLD ignored: status %d, step '%s', errno %d, '%s'", r.status, r.error_step,
          r.error_errno, r.error);
    nsbox_result_free(&r);
    CHECK(init_pid() <= 0, "a child is left: %d", (int)init_pid());
    CHECK(count_fds() == before, "descriptors: %d before, %d after", before, count_fds());
    (void)signal(SIGCHLD, SIG_DFL);
    (void)nsbox_run(&c, &r);
    CHECK(r.status == NSBOX_STATUS_EXITED && r.exit_code == 0, "with SIGCHLD back: %d '%s'",
          r.status, r.error);
    nsbox_result_free(&r);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    if (strcmp(mode, "busy") == 0)
        mode_busy();
    else if (strcmp(mode, "ended") == 0)
        mode_ended();
    else if (strcmp(mode, "bad") == 0)
        mode_bad();
    else if (strcmp(mode, "many") == 0)
        mode_many();
    else if (strcmp(mode, "cancel") == 0)
        mode_cancel();
    else if (strcmp(mode, "sigchld") == 0)
        mode_sigchld();
    else {
        fprintf(stderr, "usage: nsbox-lifecycle-api busy|ended|bad|many|cancel|sigchld\n");
        return 2;
    }
    if (failures == 0)
        printf("ok %s\n", mode);
    return failures ? 1 : 0;
}
