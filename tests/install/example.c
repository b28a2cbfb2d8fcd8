/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A program built against the installed libnsbox (pkg-config nsbox): run Python, print the
 * JSON result. tests/install/run builds it against the static and the shared library. */
#include <nsbox.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    static char *const argv[] = {"python3", "-c", "print(6 * 7)", NULL};
    struct nsbox_config c;
    struct nsbox_result r;
    char *json;

    nsbox_config_init(&c);
    c.argv = argv;
    c.cgroup = NSBOX_CGROUP_OFF;
    if (nsbox_run(&c, &r) < 0)
        return 2;
    json = nsbox_result_to_json(&r);
    if (!json)
        return 2;
    printf("%s\n", json);
    free(json);
    nsbox_result_free(&r);
    return nsbox_exit_status(&r);
}
