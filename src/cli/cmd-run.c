/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox run: argv -> config (cmd-run-options.c), run, map the result to an exit status. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "cmd-run-options.h"
#include "cmd-pool.h"
#include "cmd-run.h"
#include "command.h"
#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "nsbox.h"
#include "registry.h"
#include "result.h"
#include "termsafe.h"

/* Write all of text and a newline to fd. Returns 0 or -errno. */
static int write_result(int fd, const char *text)
{
    const char *parts[] = {text, "\n"};

    for (size_t i = 0; i < 2; i++)
        for (size_t off = 0, n = strlen(parts[i]); off < n;) {
            ssize_t w = write(fd, parts[i] + off, n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return w < 0 ? negative_errno() : -EIO;
            off += (size_t)w;
        }
    return 0;
}

static void print_note(const char *sentence, void *userdata)
{
    (void)userdata;
    log_warning("%s", sentence);
}

/* Without --json, say on stderr how the run ended and what else to know: the same sentences
 * as the JSON result's "reason" and "notes" (nsbox_result_reason(), nsbox_result_notes()). An
 * exit status speaks for itself (nsbox exits with it), and nsbox's own error is printed
 * already. */
/* nsbox's own lines after a run start a line of their own: when the program's output on the
 * terminal ended mid-line (cut at --output-limit, or a last line without a newline), a newline
 * first, so that "nsbox: ..." is not glued to it. */
static void start_own_line(const struct nsbox_result *r)
{
    const struct nsbox_stream *last = &r->err;

    /* Where stdout is the same terminal, either stream may have written last: a newline if
     * either ended mid-line. */
    if (isatty(STDOUT_FILENO) && isatty(STDERR_FILENO) && r->out.captured > 0 &&
        r->out.data[r->out.captured - 1] != '\n')
        last = &r->out;
    if (last->captured > 0 && last->data && last->data[last->captured - 1] != '\n')
        (void)fputc('\n', stderr);
}

/* --cell without --json or --result-fd: each output's text/plain after the program's output, as a
 * notebook shows it (the images are in the JSON result only), escaped as the output was. */
static void print_cell_outputs(const struct nsbox_result *r, bool escape)
{
    json_t *root, *outputs, *o;
    size_t i;

    /* The outputs as the JSON result lists them (its "outputs"). */
    if (!r->cell || !r->outputs_size || !(root = result_to_json_object(r)))
        return;
    outputs = json_object_get(root, "outputs");
    (void)fflush(stdout);
    json_array_foreach(outputs, i, o) {
        json_t *text = json_object_get(json_object_get(o, "data"), "text/plain");
        const char *p = json_string_value(text);
        size_t n = json_string_length(text);
        _cleanup_free_ char *escaped = NULL;

        if (escape) {
            struct termsafe t = {0};
            escaped = malloc(TERMSAFE_MAX_OUT(n) + TERMSAFE_MAX_OUT(0));
            if (!escaped)
                log_oom();
            n = termsafe_escape(&t, p, n, escaped);
            n += termsafe_finish(&t, escaped + n);
            p = escaped;
        }
        (void)fwrite(p, 1, n, stdout);
        (void)putchar('\n');
    }
    json_decref(root);
}

static void explain_on_stderr(const struct nsbox_result *r)
{
    char reason[sizeof(r->error) + 64];

    if ((r->status != NSBOX_STATUS_EXITED && r->status != NSBOX_STATUS_ERROR) ||
        nsbox_result_notes(r, NULL, NULL) > 0 || r->out.incomplete || r->err.incomplete)
        start_own_line(r);
    if (r->status != NSBOX_STATUS_EXITED && r->status != NSBOX_STATUS_ERROR) {
        nsbox_result_reason(r, reason, sizeof(reason));
        log_error("%s", reason);
    }
    (void)nsbox_result_notes(r, print_note, NULL);
}

static void print_json_error(int fd, const char *step, const char *message, const char *name)
{
    /* A JSON result for nsbox's own failures too, so that callers parse one format. */
    struct nsbox_result r = {.status = NSBOX_STATUS_ERROR, .exit_code = EXIT_NSBOX_FAILURE};
    char *text;

    (void)snprintf(r.error_step, sizeof(r.error_step), "%s", step);
    if (name)
        (void)snprintf(r.name, sizeof(r.name), "%s", name);
    (void)snprintf(r.error, sizeof(r.error), "%s", message);
    text = nsbox_result_to_json(&r);
    if (text && fd == STDOUT_FILENO)
        (void)printf("%s\n", text);
    else if (text)
        (void)write_result(fd, text);
    free(text);
}

static void print_warning(const char *message, void *userdata)
{
    (void)userdata;
    log_warning("%s", message);
}

/* The signals `nsbox run` acts on, blocked from its first instruction to its exit (but while
 * it waits for --code - on stdin): one that comes before the sandbox exists waits, and
 * nsbox_run() acts on it through its signalfd (kills or forwards), so every run that wrote an
 * audit "start" record or a registry record also writes its result and removes the record.
 * (The sandbox's init starts with no pending signals, fork(2), and sets its own mask.) */
static void block_run_signals(void)
{
    sigset_t set;

    run_signals(&set);
    (void)sigprocmask(SIG_BLOCK, &set, NULL); /* fails only for an invalid how */
}

int run_main(int argc, char *argv[])
{
    struct run_args a = {.result_fd = -1};
    struct audit audit = {.fd = -1};
    struct registry_run reg = {0};
    char run_id[33] = "", why[300] = "";
    struct nsbox_result result = {0};
    int json_fd = -1; /* where a JSON result goes: stdout (--json), --result-fd's, or none */
    bool json = false;
    int r, status;

    /* A fresh sandbox of a pool (cmd-pool.c): no sandbox is made here. */
    if (run_pool_name(argc, argv))
        return run_pool_main(argc, argv);
    block_run_signals();
    /* Before parsing, so that an invalid argument gets a JSON result too. */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--result-fd") == 0 && i + 1 < argc)
            json_fd = result_fd_check(argv[i + 1]) >= 0 ? result_fd_check(argv[i + 1]) : json_fd;
    }
    if (json) /* --json with --result-fd is an error, said on stdout and stderr */
        json_fd = STDOUT_FILENO;

    /* With --result-fd, stderr carries the payload's stderr alone: everything nsbox would say
     * there (warnings, how the run ended, notes, its own errors) is in the result. */
    if (json_fd > STDOUT_FILENO)
        log_set_quiet(true);

    nsbox_config_init(&a.config);
    a.log_code_limit = 64 * 1024;
    r = parse_run_args(argc, argv, &a);
    if (r < 0) {
        if (json_fd >= 0)
            print_json_error(json_fd, "arguments",
                             log_last_error()[0] ? log_last_error() : "invalid arguments", NULL);
        run_args_free(&a);
        return EXIT_NSBOX_FAILURE;
    }
    json_fd = a.json ? STDOUT_FILENO : a.result_fd;

    a.config.forward_signals = true;
    if (a.result_fd >= 0)
        log_set_quiet(true);
    else
        a.config.warn = print_warning;
    if (!a.json) {
        a.config.stdout_fd = STDOUT_FILENO;
        a.config.stderr_fd = STDERR_FILENO;
        /* A terminal acts on control sequences (title, clipboard, queries answered into its
         * input): the payload's are shown escaped there. Pipes and files get the bytes. */
        a.config.stdout_escape = !a.raw_output && isatty(STDOUT_FILENO);
        a.config.stderr_escape = !a.raw_output && isatty(STDERR_FILENO);
    }
    /* A closed stdout must not kill nsbox (and with it the sandbox's result). */
    (void)signal(SIGPIPE, SIG_IGN);

    if (run_id_new(run_id) < 0) {
        log_error_errno(negative_errno(), "cannot make a run id: %m");
        run_args_free(&a);
        return EXIT_NSBOX_FAILURE;
    }
    /* For `nsbox ps` and `nsbox kill`: a run they cannot see or stop does not start (issue
     * 24: a registry another user made, or can change, hid runs from both), and a name is kept
     * unique here. First, so that a refused run leaves no audit record. */
    r = registry_add(run_id, argc + 1, argv - 1, &a.config, a.code_path, &reg, why, sizeof(why));
    if (r < 0) {
        if (why[0])
            log_error("%s", why);
        else if (a.config.name)
            log_error_errno(r,
                            "cannot hold the name '%s' in the registry of running sandboxes: "
                            "%m; the run does not start",
                            a.config.name);
        else
            log_error_errno(r, "cannot add the run to the registry of running sandboxes, where "
                               "'nsbox ps' and 'nsbox kill' look: %m; the run does not start");
        if (json_fd >= 0)
            print_json_error(json_fd, a.config.name && r == -EEXIST ? "name" : "registry",
                             log_last_error(), a.config.name);
        run_args_free(&a);
        return EXIT_NSBOX_FAILURE;
    }

    /* The audit record is written before the payload starts; a run that cannot be recorded
     * does not start. */
    if (!a.log_path && getenv("NSBOX_LOG") && getenv("NSBOX_LOG")[0])
        a.log_path = getenv("NSBOX_LOG");
    if (a.log_path) {
        r = audit_open(a.log_path, run_id, &a.config, &audit, why, sizeof(why));
        if (r >= 0)
            r = audit_start(&audit, argc + 1, argv - 1, &a.config, a.log_code_limit);
        if (r < 0) {
            if (why[0])
                log_error("refusing the audit log '%s': %s; the run does not start", a.log_path,
                          why);
            else
                log_error_errno(r, "cannot write the audit log '%s': %m; the run does not start",
                                a.log_path);
            if (json_fd >= 0)
                print_json_error(json_fd, "audit log", log_last_error(), a.config.name);
            audit_close(&audit);
            registry_remove(&reg);
            run_args_free(&a);
            return EXIT_NSBOX_FAILURE;
        }
    }

    /* --stdout-file, --stderr-file: opened here, as the caller, by the audit log's rules; a
     * file that cannot be had refuses the run (fail closed: the caller asked for all of it). */
    for (int i = 0; i < 2; i++) {
        const char *path = i == 0 ? a.stdout_file : a.stderr_file;
        int *fd = i == 0 ? &a.config.stdout_file_fd : &a.config.stderr_file_fd;

        if (!path)
            continue;
        r = output_file_open(path, &a.config, fd, why, sizeof(why));
        if (r < 0) {
            if (why[0])
                log_error("refusing the %s file '%s': %s; the run does not start",
                          i == 0 ? "stdout" : "stderr", path, why);
            else
                log_error_errno(r, "cannot write the %s file '%s': %m; the run does not start",
                                i == 0 ? "stdout" : "stderr", path);
            if (json_fd >= 0)
                print_json_error(json_fd, "output file", log_last_error(), a.config.name);
            if (a.config.stdout_file_fd >= 0)
                (void)close(a.config.stdout_file_fd);
            audit_close(&audit);
            registry_remove(&reg);
            run_args_free(&a);
            return EXIT_NSBOX_FAILURE;
        }
    }

    r = nsbox_run(&a.config, &result);
    (void)r; /* every failure is described in result */
    if (a.config.stdout_file_fd >= 0)
        (void)close(a.config.stdout_file_fd);
    if (a.config.stderr_file_fd >= 0)
        (void)close(a.config.stderr_file_fd);
    status = nsbox_exit_status(&result);
    registry_remove(&reg);

    if (audit.fd >= 0) {
        r = audit_end(&audit, &result);
        if (r < 0) {
            log_error_errno(r, "cannot write the result to the audit log '%s': %m", a.log_path);
            status = EXIT_NSBOX_FAILURE;
        }
        audit_close(&audit);
    }

    if (result.status == NSBOX_STATUS_ERROR)
        log_error("%s", result.error);
    if (json_fd >= 0) {
        /* Streamed through stdio or to the descriptor: no second copy of the (up to tens of
         * MiB) text. */
        json_t *root = result_to_json_object(&result);
        if (!root)
            log_oom();
        if (a.json) {
            (void)fflush(stdout);
            if (result_json_dump_fd(root, JSON_COMPACT | JSON_REAL_PRECISION(6), STDOUT_FILENO) < 0)
                status = EXIT_NSBOX_FAILURE;
            (void)putchar('\n');
        } else if (result_json_dump_fd(root, JSON_COMPACT | JSON_REAL_PRECISION(6), json_fd) < 0 ||
                   write_result(json_fd, "") < 0)
            status = EXIT_NSBOX_FAILURE;
        json_decref(root);
    }
    if (!a.json) {
        /* With --result-fd the outputs are in the result, and stdout stays the program's. */
        if (json_fd < 0)
            print_cell_outputs(&result, a.config.stdout_escape);
        explain_on_stderr(&result);
        if (result.out.incomplete || result.err.incomplete)
            log_warning("%s%s%s %s still held open after the sandbox ended (by a process outside "
                        "it, or a descriptor parked in a unix socket message): nsbox stopped "
                        "reading, so output written after that is missing",
                        result.out.incomplete ? "stdout" : "",
                        result.out.incomplete && result.err.incomplete ? " and " : "",
                        result.err.incomplete ? "stderr" : "",
                        result.out.incomplete && result.err.incomplete ? "were" : "was");
    }
    if (fflush(stdout) != 0 && a.json)
        status = EXIT_NSBOX_FAILURE;

    nsbox_result_free(&result);
    run_args_free(&a);
    return status;
}
