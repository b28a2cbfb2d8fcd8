/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One step of a session (session-internal.h), the command's side: its request to the sandbox
 * (nsbox_sandbox_step_begin()), its audit record, its answer to its client with the session's
 * words for how it ended. The step itself is the library's (step.c). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "log.h"
#include "macro.h"
#include "registry.h"
#include "result.h"
#include "session-internal.h"
#include "session.h"

static void add_warning(struct nsbox_result *ret, const char *text)
{
    size_t len = strlen(ret->warnings);
    (void)snprintf(ret->warnings + len, sizeof(ret->warnings) - len, "%s%s", len ? "\n" : "", text);
}

/* With an audit log: its start record for the step, as for a run (audit.h), its own run id,
 * nsbox's argv given as `nsbox session exec SESSION-ID step N`. Returns 0 or -errno. */
static int audit_step_start(struct session_state *s, const struct step_request *q,
                            struct audit *ret)
{
    struct nsbox_config c = *s->c;
    char step[24], id[33], why[300];
    char *argv[64 + 1] = {0};
    char *const nsbox_argv[] = {"nsbox", "session", "exec", s->id, "step", step, NULL};
    size_t n = 0;
    int r;

    if (!s->log_path)
        return 0;
    r = run_id_new(id);
    if (r < 0)
        return r;
    (void)snprintf(step, sizeof(step), "%" PRIu64, s->steps);
    if (q->code) {
        c.code = q->payload;
        c.code_size = q->size;
    } else {
        /* The argv, NUL-separated; the first 64 arguments are recorded. */
        for (size_t i = 0; i < q->size && n < 64; i += strlen(q->payload + i) + 1)
            argv[n++] = q->payload + i;
        c.code = NULL;
        c.argv = argv;
    }
    c.timeout = q->timeout;
    if (q->memory)
        c.memory = q->memory; /* the step's own, lower limit */
    r = audit_open(s->log_path, id, &c, ret, why, sizeof(why));
    if (r >= 0)
        r = audit_start(ret, 6, nsbox_argv, &c, s->o->log_code_limit);
    return r;
}

/* ---- one step ---------------------------------------------------------------------------- */

void step_clear(struct session_state *s)
{
    struct step *st = &s->step;

    audit_close(&st->audit);
    free(st->q.payload);
    free(st->q.stdin_data);
    free(st->q.copy_paths);
    if (st->in_fd >= 0)
        (void)close(st->in_fd);
    *st = (struct step){.audit = {.fd = -1}, .in_fd = -1};
}

/* Send the step's result (ret, taken from the sandbox) to its client. */
static void step_answer(struct session_state *s, struct nsbox_result *ret, uint64_t now)
{
    struct step *st = &s->step;
    const struct step_request *q = &st->q;
    enum nsbox_interpreter in = ret->interpreter;
    json_t *res;

    /* Its status says timeout (the same interruption); the audit log must not take it for one. */
    if (st->hung_up)
        add_warning(ret, "the step was interrupted because its client hung up (a cancelled "
                         "call), not by its timeout");
    if (st->audit.fd >= 0) {
        int ar = audit_end(&st->audit, ret);
        if (ar < 0 && ret->status != NSBOX_STATUS_ERROR) {
            ret->status = NSBOX_STATUS_ERROR;
            ret->exit_code = 125;
            (void)snprintf(ret->error_step, sizeof(ret->error_step), "audit log");
            (void)snprintf(ret->error, sizeof(ret->error),
                           "cannot write the step's result to the audit log '%s': %s", s->log_path,
                           strerror(-ar));
        }
    }
    res = result_to_json_object(ret);
    if (res) {
        const char *what = !q->code ? "the step's processes were killed"
                           : in == NSBOX_INTERPRETER_RESTARTED
                               ? "the Python interpreter ignored KeyboardInterrupt and was "
                                 "killed (its variables are lost)"
                               : "KeyboardInterrupt stopped the code";
        char reason[300];

        (void)json_object_set_new(res, "session_id", json_string(s->id));
        (void)json_object_set_new(res, "step", json_integer((json_int_t)s->steps));
        reason[0] = '\0';
        if (st->hung_up)
            (void)snprintf(reason, sizeof(reason),
                           "was interrupted: its client hung up before the step ended (a "
                           "cancelled call): %s; the session goes on",
                           what);
        else if (ret->status == NSBOX_STATUS_TIMEOUT)
            (void)snprintf(reason, sizeof(reason),
                           "timed out after %.3g s: %s; the session%s go on",
                           (double)q->timeout / 1e6, what,
                           q->code && in != NSBOX_INTERPRETER_RESTARTED
                               ? ", its files and the interpreter's variables"
                               : " and its files");
        else if (ret->status == NSBOX_STATUS_KILLED)
            (void)snprintf(reason, sizeof(reason),
                           "was killed: the session ended during the step (%s); its sandbox is "
                           "gone, start a new session for further steps",
                           end_words(s));
        if (reason[0])
            (void)json_object_set_new(res, "reason", json_string(reason));
    }
    if (ret->copy_out_done) {
        int fd = nsbox_sandbox_step_copy_out(s->sandbox);
        st->client->pass_fd = fd >= 0 ? fd : -1;
    }
    client_answer(st->client, res, now);
    nsbox_result_free(ret);
    step_clear(s);
}

/* The step could not start, or could not be recorded: an error answer, the session goes on. */
static void step_refuse(struct session_state *s, uint64_t now, const char *fmt, ...) _printf_(3, 4);
static void step_refuse(struct session_state *s, uint64_t now, const char *fmt, ...)
{
    char text[1024];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    client_answer(s->step.client, json_pack("{s:s}", "error", text), now);
    step_clear(s);
}

/* A running step's output, to its client when it asked to stream (nsbox_step.on_output). */
static void step_output(int fd, const char *data, size_t size, void *userdata)
{
    struct session_state *s = userdata;

    if (s->step.client && s->step.q.stream)
        client_stream(s->step.client, fd == 2 ? "stderr" : "stdout", data, size);
}

int step_start(struct session_state *s, struct client *cl, uint64_t now)
{
    struct step *st = &s->step;
    struct nsbox_result ret;
    _cleanup_free_ char **argv = NULL;
    struct nsbox_step step;
    int r;

    step_clear(s);
    st->client = cl;
    st->q = cl->q;
    cl->q = (struct step_request){0};
    st->in_fd = cl->in_fd;
    cl->in_fd = -1;
    cl->state = CLIENT_RUNNING;
    s->steps++;
    r = audit_step_start(s, &st->q, &st->audit);
    if (r < 0) {
        /* A step that cannot be recorded does not run, as a run would not. */
        step_refuse(s, now, "cannot write the audit log '%s': %s; the step does not run",
                    s->log_path, strerror(-r));
        return 0;
    }
    step = (struct nsbox_step){.timeout = st->q.timeout,
                               .output_limit = st->q.output_limit,
                               .has_stdin = st->q.has_stdin,
                               .stdin_data = st->q.stdin_data,
                               .stdin_size = st->q.stdin_size,
                               .memory = st->q.memory,
                               .copy_in_fd = st->in_fd,
                               .copy_out = st->q.n_copy ? st->q.copy_paths : NULL,
                               .copy_out_size = st->q.n_copy ? st->q.copy_size : 0,
                               .copy_out_max_bytes = st->q.copy_max_bytes,
                               .copy_out_max_files = st->q.copy_max_files,
                               /* A pool's member ends after this step. */
                               .last = s->o->max_steps && s->steps >= s->o->max_steps,
                               .on_output = step_output,
                               .userdata = s};
    if (st->q.code) {
        step.code = st->q.payload;
        step.code_size = st->q.size;
    } else {
        /* The argv, NUL-separated in the request (session-client.c counted it). */
        size_t n = 0;
        argv = calloc(NSBOX_STEP_MAX_ARGS + 1, sizeof(char *));
        for (size_t i = 0; argv && i < st->q.size && n < NSBOX_STEP_MAX_ARGS;
             i += strlen(st->q.payload + i) + 1)
            argv[n++] = st->q.payload + i;
        step.argv = argv;
        if (!argv) {
            step_refuse(s, now, "the supervisor cannot start the step: %s; the session goes on",
                        strerror(ENOMEM));
            return 0;
        }
    }
    r = nsbox_sandbox_step_begin(s->sandbox, &step, &ret);
    if (r == -EIO) {
        step_refuse(s, now, "%s", ret.error);
        nsbox_result_free(&ret);
        return 0;
    }
    if (r == -ESHUTDOWN) {
        s->ended = true;
        if (!s->end)
            s->end = SESSION_REASON_SANDBOX_ENDED; /* init cannot be reached: the step is cut off */
        return r;
    }
    if (r < 0) {
        step_refuse(s, now, "the supervisor cannot start the step: %s; the session goes on",
                    strerror(-r));
        return 0;
    }
    return 0;
}

void step_finish(struct session_state *s, uint64_t now)
{
    struct nsbox_result ret;

    if (nsbox_sandbox_step_end(s->sandbox, &ret) < 0)
        return;
    step_answer(s, &ret, now);
}

bool step_cut(struct session_state *s, uint64_t now)
{
    struct nsbox_result ret;
    bool killed;

    if (nsbox_sandbox_step_cut(s->sandbox, &ret) < 0) {
        client_error(s->step.client, now,
                     "the session ended before this step ran: %s; start a new session for "
                     "further steps",
                     end_words(s));
        step_clear(s);
        return false;
    }
    killed = ret.status == NSBOX_STATUS_KILLED;
    step_answer(s, &ret, now);
    return killed;
}
