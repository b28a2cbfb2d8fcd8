# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the Python API adds to each call over using the CLI directly.

The baseline is the least a caller of the CLI does: subprocess.run(["nsbox", "run", "--json",
...]) and json.loads() of what it prints. The API does the same plus checking its arguments,
building the command line and the environment, and turning the JSON into a Result. Both run
/bin/true in a sandbox, in interleaved pairs so that the host's drift hits both alike; the
overhead is the median of the pairwise differences.

    python3 bench/api_overhead.py NSBOX ROOTFS RUNS

The end-to-end difference is small against the noise of starting processes, so the API's own
Python work is also timed alone: the same calls with nsbox's process replaced by the JSON it
printed (what is left is argument checks, command line, environment, parsing, Result; not the
cost of its pipes and selector against subprocess.run's).

Prints one line: "<median overhead ms> <median CLI ms> <median API ms> <API's own work ms>".
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import nsbox  # noqa: E402

binary, rootfs, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.environ["NSBOX_ROOTFS"] = rootfs
env = {"PATH": os.environ.get("PATH", os.defpath), "NSBOX_ROOTFS": rootfs}
# The API's defaults, spelled out for the CLI, so that both ask nsbox for the same run.
cli = [binary, "run", "--json", "--timeout", "10", "--memory", "256m", "--cpus", "0.5",
       "--pids-limit", "64", "--cgroup", "off", "--", "/bin/true"]


def via_cli():
    p = subprocess.run(cli, stdin=subprocess.DEVNULL, capture_output=True, env=env)
    r = json.loads(p.stdout)
    assert r["status"] == "exited" and r["exit_code"] == 0, r


def via_api():
    r = nsbox.run(["/bin/true"], nsbox=binary, extra_args=["--cgroup", "off"])
    assert r.ok, r


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


for _ in range(max(2, runs // 10)):  # warm up: page cache, Python's imports
    via_cli()
    via_api()
pairs = []
for i in range(runs):
    # Alternate the order within a pair too.
    if i % 2:
        a = timed(via_api)
        c = timed(via_cli)
    else:
        c = timed(via_cli)
        a = timed(via_api)
    pairs.append((c, a))
diff = statistics.median(a - c for c, a in pairs) * 1000

# The API's own work: nsbox's process replaced by one that has printed its JSON and exited.
printed = subprocess.run(cli, stdin=subprocess.DEVNULL, capture_output=True, env=env).stdout
runner = nsbox._process  # where nsbox is started and waited for
real = runner._popen, runner._communicate


def fake_communicate(proc, stdin_data, timeout, readers, on_data):
    on_data("stdout", printed)
    return 0


runner._popen = lambda *a, **kw: subprocess.CompletedProcess(cli, 0, None, None)
runner._communicate = fake_communicate
try:
    n = runs * 10
    start = time.perf_counter()
    for _ in range(n):
        via_api()
    own = (time.perf_counter() - start) / n * 1000
    start = time.perf_counter()
    for _ in range(n):
        json.loads(printed)
    own -= (time.perf_counter() - start) / n * 1000  # the CLI's caller parses it too
finally:
    runner._popen, runner._communicate = real
print(f"{diff:.3f} {statistics.median(c for c, _ in pairs) * 1000:.2f} "
      f"{statistics.median(a for _, a in pairs) * 1000:.2f} {own:.3f}")
