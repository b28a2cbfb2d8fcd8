/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <criterion/criterion.h>
#include <sched.h>

#include "cpus.h"

static cpu_set_t set_of(const int *cpus, size_t n)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    for (size_t i = 0; i < n; i++)
        CPU_SET(cpus[i], &s);
    return s;
}

Test(cpus, choose_starts_where_the_caller_runs)
{
    const int four[] = {0, 1, 2, 3};
    cpu_set_t allowed = set_of(four, 4), got, want;

    cr_expect_eq(cpus_choose(&allowed, 2, 1, &got), 1);
    want = set_of((const int[]){2}, 1);
    cr_expect(CPU_EQUAL(&got, &want));
    /* Upwards, wrapping around past the last allowed CPU. */
    cr_expect_eq(cpus_choose(&allowed, 3, 2, &got), 2);
    want = set_of((const int[]){3, 0}, 2);
    cr_expect(CPU_EQUAL(&got, &want));
    /* No more than allowed holds. */
    cr_expect_eq(cpus_choose(&allowed, 1, 8, &got), 4);
    cr_expect(CPU_EQUAL(&got, &allowed));
}

Test(cpus, choose_skips_cpus_not_allowed)
{
    const int some[] = {1, 5, 9};
    cpu_set_t allowed = set_of(some, 3), got, want;

    /* here not allowed (or unknown): from the first allowed CPU. */
    cr_expect_eq(cpus_choose(&allowed, 4, 1, &got), 1);
    want = set_of((const int[]){1}, 1);
    cr_expect(CPU_EQUAL(&got, &want));
    cr_expect_eq(cpus_choose(&allowed, -1, 2, &got), 2);
    want = set_of((const int[]){1, 5}, 2);
    cr_expect(CPU_EQUAL(&got, &want));
    cr_expect_eq(cpus_choose(&allowed, 9, 2, &got), 2);
    want = set_of((const int[]){9, 1}, 2);
    cr_expect(CPU_EQUAL(&got, &want));
    CPU_ZERO(&allowed);
    cr_expect_eq(cpus_choose(&allowed, 0, 1, &got), 0);
    cr_expect_eq(CPU_COUNT(&got), 0);
}
