/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* --cpus as a number of CPUs: the sandbox's affinity and its thread-count variables. */
#pragma once

#include <stdint.h>

/* The CPUs a sandbox limited to cpus_milli thousandths of a CPU may use: cpus_milli / 1000
 * rounded up, at most the number of CPUs this process may run on (sched_getaffinity(2)).
 * 0 when cpus_milli is 0 (no limit: nothing is pinned). Cannot fail (1 if the affinity cannot
 * be read). */
unsigned cpus_count(uint64_t cpus_milli);

/* Pin the calling process (and so its future children) to the first n CPUs of its allowed
 * set. n == 0 changes nothing. Returns 0 or sched_setaffinity(2)'s -errno. */
int cpus_pin(unsigned n);
