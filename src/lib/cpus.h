/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* --cpus as a number of CPUs: the sandbox's affinity and its thread-count variables. */
#pragma once

#include <sched.h>
#include <stdint.h>

/* The CPUs a sandbox limited to cpus_milli thousandths of a CPU may use: cpus_milli / 1000
 * rounded up, at most the number of CPUs this process may run on (sched_getaffinity(2)).
 * 0 when cpus_milli is 0 (no limit: nothing is pinned). Cannot fail (1 if the affinity cannot
 * be read). */
unsigned cpus_count(uint64_t cpus_milli);

/* The number of CPUs this process may run on (sched_getaffinity(2); the CPUs online when it
 * cannot be read), at least 1: the most CPUs a limit can give. */
unsigned cpus_usable(void);

/* Pure: the n CPUs of allowed to pin to, from here (the CPU the caller runs on) upwards,
 * wrapping around; from the first allowed CPU when here is not in allowed (or negative). Fewer
 * when allowed has fewer. Returns how many were put into *ret. */
unsigned cpus_choose(const cpu_set_t *allowed, int here, unsigned n, cpu_set_t *ret);

/* Pin the calling process (and so its future children) to n CPUs of its allowed set
 * (cpus_choose(), from the CPU it runs on: no migration, and concurrent sandboxes spread over
 * the CPUs the scheduler put them on instead of all taking the first). n == 0 changes nothing.
 * Returns 0, -EINVAL for an empty allowed set, or sched_setaffinity(2)'s -errno. */
int cpus_pin(unsigned n);
