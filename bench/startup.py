# SPDX-License-Identifier: LGPL-2.1-or-later
"""Start-up side by side: commands run in interleaved rounds (each round runs every command once,
in a fresh random order, so the shared host's drift hits all alike); per command the median wall
time and the median CPU time (user + system) of the whole process tree, in milliseconds.

    python3 bench/startup.py [--json] RUNS WARMUP NAME ARG... [:: NAME ARG...]...

(each command is its name, then its argv; "::" separates them)

Each command is started with posix_spawnp(3) (PATH is searched); its wall time ends when it exits. Its CPU time is
that of every process of its tree: this script is a child subreaper (PR_SET_CHILD_SUBREAPER,
prctl(2)), so the processes a command leaves to finish on their own are handed to it and reaped
too, and the CPU time is the growth of getrusage(2)'s RUSAGE_CHILDREN once all are reaped. That
matters: bubblewrap exits as soon as it has its payload's status, before its sandbox's pid 1 has
exited, and wait4(2)'s rusage of bwrap alone (hyperfine's, time(1)'s) misses that process and
the payload (about half of its CPU time). stdout and stderr go to /dev/null; a command that fails
ends the benchmark.

Prints a line per command: NAME wall_ms user_ms sys_ms cpu_ms (medians; cpu is the median of
user + system per run), or with --json one object.
"""
import ctypes
import json
import os
import random
import resource
import statistics
import sys
import time


PR_SET_CHILD_SUBREAPER = 36


def reap_all():
    while True:
        try:
            os.wait4(-1, 0)
        except ChildProcessError:
            return


def run_once(argv, devnull):
    fa = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
          (os.POSIX_SPAWN_DUP2, devnull, 2)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=fa)
    _, status = os.waitpid(pid, 0)
    wall = time.perf_counter() - t
    reap_all()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench/startup.py: {argv!r} exited with {status:#x}")
    return (wall * 1000, (after.ru_utime - before.ru_utime) * 1000,
            (after.ru_stime - before.ru_stime) * 1000)


def main(argv):
    as_json = argv[:1] == ["--json"]
    if as_json:
        argv = argv[1:]
    runs, warmup = int(argv[0]), int(argv[1])
    cmds = {}
    group = []
    for arg in argv[2:] + ["::"]:
        if arg != "::":
            group.append(arg)
        elif not group:
            continue
        elif len(group) < 2:
            raise SystemExit("bench/startup.py: a command needs a name and an argv")
        else:
            cmds[group[0]] = group[1:]
            group = []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit(f"bench/startup.py: PR_SET_CHILD_SUBREAPER: {os.strerror(ctypes.get_errno())}")
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    samples = {name: [] for name in cmds}
    order = list(cmds)
    for i in range(warmup + runs):
        random.shuffle(order)
        for name in order:
            s = run_once(cmds[name], devnull)
            if i >= warmup:
                samples[name].append(s)
    out = {}
    for name, s in samples.items():
        out[name] = {
            "wall": statistics.median(x[0] for x in s),
            "user": statistics.median(x[1] for x in s),
            "sys": statistics.median(x[2] for x in s),
            "cpu": statistics.median(x[1] + x[2] for x in s),
        }
    if as_json:
        print(json.dumps(out))
    else:
        for name, m in out.items():
            print(f"{name} {m['wall']:.3f} {m['user']:.3f} {m['sys']:.3f} {m['cpu']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
