/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A program built against the installed libnsbox that starts a sandbox, runs two Python steps
 * that share the interpreter's state and a program step, and stops it: tests/install/run
 * builds it against the static and the shared library. It prints the second step's JSON
 * result and exits 0 only when every step did what it should. */
#include <errno.h>
#include <nsbox.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int step(struct nsbox_sandbox *sb, const char *code, char *const *argv,
                struct nsbox_result *r)
{
    struct nsbox_step s = {.copy_in_fd = -1, .timeout = 30 * 1000000ULL};
    int e;

    if (code) {
        s.code = code;
        s.code_size = strlen(code);
    } else
        s.argv = argv;
    e = nsbox_sandbox_step(sb, &s, r);
    if (e < 0) {
        fprintf(stderr, "lifecycle: a step failed: %s: %s\n", strerror(-e), r->error);
        return -1;
    }
    return 0;
}

int main(void)
{
    static char *const argv[] = {"sh", "-c", "test -f /work/shared && echo seen", NULL};
    struct nsbox_config c;
    struct nsbox_result start, first, second, third, end;
    struct nsbox_sandbox *sb;
    char *json;
    int ok, e;

    nsbox_config_init(&c);
    c.cgroup = NSBOX_CGROUP_OFF;
    e = nsbox_sandbox_start(&c, -1, &sb, &start);
    if (e < 0) {
        fprintf(stderr, "lifecycle: start failed: %s: %s\n", strerror(-e), start.error);
        return 2;
    }
    nsbox_result_free(&start);
    if (step(sb, "x = 6 * 7\nopen('/work/shared', 'w').write('1')\n", NULL, &first) < 0 ||
        step(sb, "print(x)\n", NULL, &second) < 0 || step(sb, NULL, argv, &third) < 0)
        return 2;
    json = nsbox_result_to_json(&second);
    if (json)
        printf("%s\n", json);
    free(json);
    ok = first.status == NSBOX_STATUS_EXITED && first.exit_code == 0 &&
         first.interpreter == NSBOX_INTERPRETER_STARTED && second.status == NSBOX_STATUS_EXITED &&
         second.interpreter == NSBOX_INTERPRETER_KEPT && second.out.data &&
         strcmp(second.out.data, "42\n") == 0 && third.status == NSBOX_STATUS_EXITED &&
         third.out.data && strcmp(third.out.data, "seen\n") == 0 &&
         third.interpreter == NSBOX_INTERPRETER_NONE;
    if (!ok)
        fprintf(stderr, "lifecycle: unexpected results: %d/%d/%d %d/%d/%d %d/%d '%s'\n",
                first.status, first.exit_code, first.interpreter, second.status, second.exit_code,
                second.interpreter, third.status, third.exit_code,
                third.out.data ? third.out.data : "");
    nsbox_result_free(&first);
    nsbox_result_free(&second);
    nsbox_result_free(&third);
    e = nsbox_sandbox_stop(sb, NULL, -1, &end);
    if (e < 0 || end.status != NSBOX_STATUS_KILLED) {
        fprintf(stderr, "lifecycle: stop failed: %d, status %d\n", e, end.status);
        ok = 0;
    }
    nsbox_result_free(&end);
    return ok ? 0 : 1;
}
