/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <criterion/criterion.h>
#include <errno.h>

#include "idmap.h"

Test(idmap, format)
{
    char buf[64];
    cr_expect_eq(idmap_format(buf, sizeof(buf), 65534, 1000), 13);
    cr_expect_str_eq(buf, "65534 1000 1\n");
    cr_expect_eq(idmap_format(buf, sizeof(buf), 0, 4294967294U), 15);
    cr_expect_str_eq(buf, "0 4294967294 1\n");
}

Test(idmap, too_small)
{
    char buf[8];
    cr_expect_eq(idmap_format(buf, sizeof(buf), 65534, 65534), -ENOBUFS);
}
