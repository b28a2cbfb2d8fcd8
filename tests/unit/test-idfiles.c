/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "idfiles.h"

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char group[] = "root:x:0:\nnogroup:x:65534:\n";

Test(idfiles, passwd_adds_a_line_for_an_unknown_uid)
{
    char *out = NULL;

    cr_assert_eq(idfiles_passwd(passwd, strlen(passwd), 1000, 1000, &out), 1);
    cr_expect_str_eq(out, "root:x:0:0:root:/root:/bin/bash\n"
                          "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
                          "sandbox:x:1000:1000:nsbox sandbox:/tmp:/bin/sh\n");
    free(out);
}

Test(idfiles, passwd_known_uid_needs_nothing)
{
    char *out = NULL;

    cr_expect_eq(idfiles_passwd(passwd, strlen(passwd), 65534, 65534, &out), 0);
    cr_expect_eq(idfiles_passwd(passwd, strlen(passwd), 0, 5, &out), 0);
    cr_expect_null(out);
}

Test(idfiles, the_uid_field_is_matched_whole)
{
    char *out = NULL;

    /* 100 is not 1000, a gid of 1000 is not a uid, and a name is not an id. */
    static const char text[] = "a:x:100:1000:::\n1000:x:5:5:::\nb:x:10000:1:::";
    cr_assert_eq(idfiles_passwd(text, strlen(text), 1000, 7, &out), 1);
    cr_expect_str_eq(out,
                     "a:x:100:1000:::\n1000:x:5:5:::\nb:x:10000:1:::\n"
                     "sandbox:x:1000:7:nsbox sandbox:/tmp:/bin/sh\n",
                     "a missing final newline is added");
    free(out);
}

Test(idfiles, a_taken_name_gets_the_id)
{
    char *out = NULL;
    static const char text[] = "sandbox:x:5:5:::\n";
    static const char both[] = "sandbox:x:5:5:::\nsandbox-1000:x:6:6:::\n";

    cr_assert_eq(idfiles_passwd(text, strlen(text), 1000, 1000, &out), 1);
    cr_expect_str_eq(out, "sandbox:x:5:5:::\n"
                          "sandbox-1000:x:1000:1000:nsbox sandbox:/tmp:/bin/sh\n");
    free(out);
    cr_expect_eq(idfiles_passwd(both, strlen(both), 1000, 1000, &out), -EEXIST);
}

Test(idfiles, group)
{
    char *out = NULL;

    cr_expect_eq(idfiles_group(group, strlen(group), 65534, &out), 0);
    cr_assert_eq(idfiles_group(group, strlen(group), 1234, &out), 1);
    cr_expect_str_eq(out, "root:x:0:\nnogroup:x:65534:\nsandbox:x:1234:\n");
    free(out);
    cr_assert_eq(idfiles_group("", 0, 1234, &out), 1);
    cr_expect_str_eq(out, "sandbox:x:1234:\n", "an empty file gets the one line");
    free(out);
}
