/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The choice of a slot of root's id pool, with the "taken or in use" test injected. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>

#include "uidpool.h"

struct world {
    bool unusable[16]; /* held by another run, or named by a passwd/group entry */
    unsigned tried[32];
    unsigned n_tried;
    int fail_at; /* slot whose test fails with -EIO, or -1 */
};

static int take(unsigned slot, void *userdata)
{
    struct world *w = userdata;
    cr_assert_lt(w->n_tried, 32);
    w->tried[w->n_tried++] = slot;
    if ((int)slot == w->fail_at)
        return -EIO;
    return w->unusable[slot] ? 0 : 1;
}

Test(uidpool, first_free_from_start)
{
    struct world w = {.fail_at = -1};
    cr_expect_eq(uidpool_choose(5, 8, take, &w), 5);
    cr_expect_eq(w.n_tried, 1);
}

Test(uidpool, skips_unusable_and_wraps)
{
    struct world w = {.fail_at = -1};
    w.unusable[6] = w.unusable[7] = w.unusable[0] = true;
    cr_expect_eq(uidpool_choose(6, 8, take, &w), 1);
    cr_expect_eq(w.n_tried, 4);
    cr_expect_eq(w.tried[0], 6);
    cr_expect_eq(w.tried[1], 7);
    cr_expect_eq(w.tried[2], 0);
    cr_expect_eq(w.tried[3], 1);
}

Test(uidpool, start_beyond_size_is_reduced)
{
    struct world w = {.fail_at = -1};
    cr_expect_eq(uidpool_choose(8 * 1000 + 3, 8, take, &w), 3);
}

Test(uidpool, all_unusable_is_ebusy_after_each_slot_once)
{
    struct world w = {.fail_at = -1};
    for (unsigned i = 0; i < 8; i++)
        w.unusable[i] = true;
    cr_expect_eq(uidpool_choose(3, 8, take, &w), -EBUSY);
    cr_expect_eq(w.n_tried, 8);
    for (unsigned i = 0; i < 8; i++)
        cr_expect_eq(w.tried[i], (3 + i) % 8);
}

Test(uidpool, error_stops_the_search)
{
    struct world w = {.fail_at = 4};
    w.unusable[3] = true;
    cr_expect_eq(uidpool_choose(3, 8, take, &w), -EIO);
    cr_expect_eq(w.n_tried, 2);
}

Test(uidpool, empty_pool)
{
    struct world w = {.fail_at = -1};
    cr_expect_eq(uidpool_choose(0, 0, take, &w), -EBUSY);
    cr_expect_eq(w.n_tried, 0);
}

Test(uidpool, range_avoids_nobody_and_systemd_ranges)
{
    unsigned last = UIDPOOL_BASE + UIDPOOL_SIZE - 1;
    cr_expect_gt(UIDPOOL_BASE, 1879048191U); /* above systemd's container ranges */
    cr_expect_gt(UIDPOOL_BASE, 2000200000U); /* above SSSD's default id mapping */
    cr_expect_lt(last, 0x7FFE0000U);         /* below systemd's foreign range */
    cr_expect_lt(last, 0x80000000U);         /* fits a signed 32-bit int */
}

Test(uidpool, map_covers)
{
    /* The initial user namespace maps everything; a container's maps a block. */
    cr_expect_eq(uidpool_map_covers("         0          0 4294967295\n", 0x7E000000U), 1);
    cr_expect_eq(uidpool_map_covers("         0     100000      65536\n", 0x7E000000U), 0);
    cr_expect_eq(uidpool_map_covers("         0     100000      65536\n", 65534), 1);
    cr_expect_eq(uidpool_map_covers("         0     100000      65536\n", 65536), 0);
    cr_expect_eq(uidpool_map_covers("0 1000 1\n1 100000 65536\n2113929216 2113929216 4096\n",
                                    2113929216U + 4095),
                 1);
    cr_expect_eq(uidpool_map_covers("0 1000 1\n1 100000 65536\n", 65537), 0);
    cr_expect_eq(uidpool_map_covers("", 0), 0); /* an unmapped namespace */
    cr_expect_eq(uidpool_map_covers("0 0\n", 0), -EINVAL);
    cr_expect_eq(uidpool_map_covers("0 0 1 junk\n", 5), -EINVAL);
}

Test(uidpool, subid_covers)
{
    const char *text = "alice:100000:65536\n# a comment\n\n1001:2113929216:16\nbob:x:5\n"
                       "carol:2113933000:1000";

    cr_expect_eq(uidpool_subid_covers(text, 100000), 1);
    cr_expect_eq(uidpool_subid_covers(text, 165535), 1);
    cr_expect_eq(uidpool_subid_covers(text, 165536), 0);
    cr_expect_eq(uidpool_subid_covers(text, UIDPOOL_BASE), 1);
    cr_expect_eq(uidpool_subid_covers(text, UIDPOOL_BASE + 15), 1);
    cr_expect_eq(uidpool_subid_covers(text, UIDPOOL_BASE + 16), 0);
    cr_expect_eq(uidpool_subid_covers(text, 2113933999), 1); /* last line, no newline */
    cr_expect_eq(uidpool_subid_covers(text, 5), 0);          /* bob's line does not parse */
    cr_expect_eq(uidpool_subid_covers("", 100000), 0);
}

Test(uidpool, nss_sources)
{
    const char *debian = "# /etc/nsswitch.conf\n\npasswd:         files systemd\n"
                         "group:          files systemd\nshadow:         files\n"
                         "hosts:          files dns\nnetgroup:       nis\n";

    cr_expect_eq(uidpool_nss_sources(debian, "passwd"), UIDPOOL_NSS_FILES | UIDPOOL_NSS_SYSTEMD);
    cr_expect_eq(uidpool_nss_sources(debian, "group"), UIDPOOL_NSS_FILES | UIDPOOL_NSS_SYSTEMD);
    cr_expect_eq(uidpool_nss_sources("passwd: files\n", "passwd"), UIDPOOL_NSS_FILES);
    /* An action between sources, a comment after them, no spaces, no final newline. */
    cr_expect_eq(uidpool_nss_sources("passwd:files [NOTFOUND=return] systemd # x ldap", "passwd"),
                 UIDPOOL_NSS_FILES | UIDPOOL_NSS_SYSTEMD);
    cr_expect_eq(uidpool_nss_sources("group: files [SUCCESS=merge]systemd\n", "group"),
                 UIDPOOL_NSS_FILES | UIDPOOL_NSS_SYSTEMD);
    /* Any other source means NSS must be asked. */
    cr_expect_eq(uidpool_nss_sources("passwd: files sss\n", "passwd"),
                 UIDPOOL_NSS_FILES | UIDPOOL_NSS_OTHER);
    cr_expect_eq(uidpool_nss_sources("passwd: compat\n", "passwd"), UIDPOOL_NSS_OTHER);
    cr_expect_eq(uidpool_nss_sources("passwd: files\npasswd: ldap\n", "passwd"),
                 UIDPOOL_NSS_FILES | UIDPOOL_NSS_OTHER);
    /* No line for the database, an empty one, a commented one: glibc's default, asked. */
    cr_expect_eq(uidpool_nss_sources("hosts: files\n", "passwd"), UIDPOOL_NSS_OTHER);
    cr_expect_eq(uidpool_nss_sources("passwd:\n", "passwd"), UIDPOOL_NSS_OTHER);
    cr_expect_eq(uidpool_nss_sources("#passwd: files\n", "passwd"), UIDPOOL_NSS_OTHER);
    cr_expect_eq(uidpool_nss_sources("", "passwd"), UIDPOOL_NSS_OTHER);
    /* A database whose name starts with another's is not it. */
    cr_expect_eq(uidpool_nss_sources("passwdx: ldap\npasswd: files\n", "passwd"),
                 UIDPOOL_NSS_FILES);
    cr_expect_eq(uidpool_nss_sources("  group  : files\n", "group"), UIDPOOL_NSS_FILES);
}

Test(uidpool, db_names)
{
    const char *passwd = "root:x:0:0:root:/root:/bin/bash\n"
                         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
                         "# not an entry: 5\n\n+@netgroup::::::\nbroken:x:12a:1::/:\n"
                         "pool:x:2113929216:7::/:/bin/false";

    cr_expect_eq(uidpool_db_names(passwd, 0), 1);
    cr_expect_eq(uidpool_db_names(passwd, 65534), 1);
    cr_expect_eq(uidpool_db_names(passwd, UIDPOOL_BASE), 1); /* last line, no newline */
    cr_expect_eq(uidpool_db_names(passwd, UIDPOOL_BASE + 1), 0);
    cr_expect_eq(uidpool_db_names(passwd, 7), 0);  /* a gid field, not the id */
    cr_expect_eq(uidpool_db_names(passwd, 12), 0); /* "12a" is not a number */
    cr_expect_eq(uidpool_db_names(passwd, 5), 0);
    cr_expect_eq(uidpool_db_names("users:x:100:alice,bob\n", 100), 1); /* group(5) */
    cr_expect_eq(uidpool_db_names("a:x\n:100:\n", 100), 0); /* the field is not on its line */
    cr_expect_eq(uidpool_db_names("", 0), 0);
}
