# SPDX-License-Identifier: LGPL-2.1-or-later
"""Pools (nsbox.Pool) against bare python3, side by side; prints Markdown bullets for bench/run.

    python3 bench/pool.py NSBOX SCIENCE_ROOTFS [--quick]

Full: the science rootfs, a pool with pandas and numpy preloaded (--cgroup off, as bench/run).
- latency, interleaved rounds (RUNS each): the issue's pandas groupby from the API, print(1)
  from the API, and the same pandas code under the rootfs's python3 bare (subprocess.run). Each
  pool run is taken from a full pool (the round waits for the refill first), so it measures a
  run served by a pool sized for its load, not one waiting for a sandbox to start;
- 8 callers at once (threads) on a pool of 8: the burst (all served, the slowest's time) and,
  each caller running on, the sustained rate, bounded by the refill (a fresh interpreter and
  its imports per run);
- the memory of a waiting sandbox (PSS and RSS of its supervisor, init and interpreter);
- the refill: the pool's mean time from a sandbox's start to its preload done.
--quick: the minimal rootfs of bench/run (NSBOX_ROOTFS), no preload, a few print(1) runs.
"""
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import nsbox  # noqa: E402

PANDAS = ('import pandas as pd; print(pd.DataFrame({"a": [1, 2, 1], "b": [3, 4, 5]})'
          '.groupby("a").sum())')
RUNS = 50


def ms(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def ok(r):
    if r.exit_code != 0:
        raise SystemExit(f"bench/pool.py: a pool run failed: {r.raw}")


def wait_full(pool):
    while True:
        st = pool.status()
        if st["ready"] >= st["size"]:
            return
        time.sleep(0.01)


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]


def descendants(pid):
    kids = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat") as f:
                    kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(e))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def member_memory(binary, name):
    """(PSS, RSS) in MiB of each waiting sandbox: its supervisor and everything below it."""
    import json
    ps = subprocess.run([binary, "ps", "--json"], capture_output=True, text=True).stdout
    sizes = []
    for line in ps.splitlines():
        e = json.loads(line)
        if e.get("labels", {}).get("nsbox.pool.member") != name:
            continue
        pss = rss = 0
        for pid in [e["pid"]] + descendants(e["pid"]):
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for ln in f:
                        if ln.startswith("Pss:"):
                            pss += int(ln.split()[1])
                        elif ln.startswith("Rss:"):
                            rss += int(ln.split()[1])
            except OSError:
                pass
        sizes.append((pss / 1024, rss / 1024))
    return sizes


def quick(binary):
    rootfs = os.environ.get("NSBOX_ROOTFS")
    with nsbox.Pool(size=2, nsbox=binary, rootfs=rootfs, extra_args=["--cgroup", "off"]) as pool:
        times = []
        for _ in range(5):
            wait_full(pool)
            r = None

            def one():
                nonlocal r
                r = pool.run_python_code("print(1)")
            times.append(ms(one))
            ok(r)
        refill = pool.status()["refill_ms"]
    print(f"- pool run, print(1) from the API (minimal rootfs, no preload): "
          f"{statistics.median(times):.2f} ms median of 5; refill {refill:.0f} ms per sandbox")


def full(binary, science):
    py = os.path.join(science, "usr", "bin", "python3")
    opts = dict(nsbox=binary, rootfs=science, memory="1g", extra_args=["--cgroup", "off"])
    pandas_t, print_t, bare_t = [], [], []
    with nsbox.Pool(size=2, preload=["pandas", "numpy"], **opts) as pool:
        for _ in range(RUNS):
            for code, into in ((PANDAS, pandas_t), ("print(1)", print_t)):
                wait_full(pool)
                r = None

                def one():
                    nonlocal r
                    r = pool.run_python_code(code)
                into.append(ms(one))
                ok(r)
            bare_t.append(ms(lambda: subprocess.run([py, "-B", "-c", PANDAS], check=True,
                                                    capture_output=True)))
        refill = pool.status()["refill_ms"]

    callers, burst, served, sustained_s = 8, [], 0, 0.0
    lock = threading.Lock()
    with nsbox.Pool(size=callers, preload=["pandas", "numpy"], **opts) as pool:
        wait_full(pool)
        mem = member_memory(binary, pool.name)

        def caller(rounds, times):
            nonlocal served
            for _ in range(rounds):
                t = ms(lambda: ok(pool.run_python_code(PANDAS, timeout=60)))
                with lock:
                    times.append(t)
                    served += 1
        threads = [threading.Thread(target=caller, args=(1, burst)) for _ in range(callers)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        burst_s = time.perf_counter() - t0
        wait_full(pool)
        served, rounds, sus = 0, 4, []
        threads = [threading.Thread(target=caller, args=(rounds, sus)) for _ in range(callers)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sustained_s = time.perf_counter() - t0

    pm, bm = statistics.median(pandas_t), statistics.median(bare_t)
    print(f"- pool run of the pandas groupby from the API (pandas, numpy preloaded; science "
          f"rootfs; from a full pool of 2): {pm:.2f} ms median, p99 {p99(pandas_t):.2f} ms, "
          f"against bare python3 -B {bm:.1f} ms: {bm / pm:.0f}x faster "
          f"(targets: at most 10 ms median, 25 ms p99, 20x); {RUNS} interleaved rounds")
    print(f"- pool run, print(1) from the API (same pool): {statistics.median(print_t):.2f} ms "
          f"median, p99 {p99(print_t):.2f} ms (target: at most 2 ms)")
    print(f"- {callers} callers at once (threads) on 2 cores, pool of {callers}: all "
          f"{len(burst)} served, the slowest in {max(burst):.1f} ms (median "
          f"{statistics.median(burst):.1f} ms), {len(burst) / burst_s:.0f} runs/s in the burst; "
          f"running on ({served} runs), {served / sustained_s:.1f} runs/s sustained, bounded "
          f"by the refill")
    if mem:
        print(f"- a waiting sandbox (supervisor, init, interpreter with pandas and numpy): "
              f"{statistics.median(m[0] for m in mem):.0f} MiB PSS, "
              f"{statistics.median(m[1] for m in mem):.0f} MiB RSS")
    print(f"- refill: {refill:.0f} ms per sandbox (start to preload done, mean; the pandas "
          f"import is most of it)")


def main():
    binary, science = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3 and sys.argv[3] == "--quick":
        quick(binary)
    elif not os.path.isfile(os.path.join(science, "usr", "bin", "python3")):
        print(f"- pools: skipped, no science rootfs at {science} (NSBOX_ROOTFS_SCIENCE)")
    else:
        full(binary, science)


if __name__ == "__main__":
    main()
