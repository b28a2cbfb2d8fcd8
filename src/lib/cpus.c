/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * --cpus as a number of CPUs. A cgroup's cpu.max (or RLIMIT_CPU) limits CPU time, not the
 * CPUs a program sees: OpenBLAS and OpenMP start a thread per CPU they see, which under a
 * quota of half a CPU spins (threads waiting on each other in turn) or, under rlimits, burns
 * the CPU seconds of all of them. The sandbox's init therefore pins itself to ceil(cpus) CPUs
 * (inherited by the payload over fork(2) and execve(2), sched_setaffinity(2)), and the payload
 * gets OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS of the same number.
 */
#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include "cpus.h"
#include "macro.h"

unsigned cpus_count(uint64_t cpus_milli)
{
    cpu_set_t set;
    uint64_t want = (cpus_milli + 999) / 1000;
    int have;

    if (cpus_milli == 0)
        return 0;
    CPU_ZERO(&set);
    have = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    if (have < 1)
        have = 1;
    return want < (uint64_t)have ? (unsigned)want : (unsigned)have;
}

unsigned cpus_usable(void)
{
    cpu_set_t set;
    long n;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

unsigned cpus_choose(const cpu_set_t *allowed, int here, unsigned n, cpu_set_t *ret)
{
    unsigned taken = 0;

    CPU_ZERO(ret);
    if (here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, allowed))
        here = 0;
    for (int i = 0; i < CPU_SETSIZE && taken < n; i++) {
        int cpu = (here + i) % CPU_SETSIZE;
        if (CPU_ISSET(cpu, allowed)) {
            CPU_SET(cpu, ret);
            taken++;
        }
    }
    return taken;
}

int cpus_pin(unsigned n)
{
    cpu_set_t allowed, pinned;

    if (n == 0)
        return 0;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0)
        return negative_errno();
    /* From the CPU this process runs on: it stays there, where a set from the first CPU up
     * would move every sandbox of the host onto CPU 0 (and a process on another CPU through
     * the migration thread, which sched_setaffinity(2) waits for). */
    if (cpus_choose(&allowed, sched_getcpu(), n, &pinned) == 0)
        return -EINVAL;
    return sched_setaffinity(0, sizeof(pinned), &pinned) < 0 ? negative_errno() : 0;
}
