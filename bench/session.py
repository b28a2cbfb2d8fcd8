# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sessions against fresh processes, side by side, in interleaved rounds (the host's drift hits
all alike); medians in milliseconds, end to end as the caller sees them.

    python3 bench/session.py NSBOX ROOTFS RUNS

- python: bare `python3 -B -c 'print(1)'` (the rootfs's python, subprocess.run) against a
  `print(1)` step in a live session from the Python API (Session.run_code);
- true: bare /bin/true (subprocess.run) against a /bin/true step in a live session, from the API
  (straight to the socket) and from the CLI (`nsbox session exec ID -- /bin/true`, which adds
  nsbox's own process start);
- start: `nsbox run -- /bin/true` against `nsbox session start` (until it has printed the id;
  the stop is not timed).

Prints one line of numbers: bare_py session_py bare_true api_true cli_true run start.
"""
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import nsbox  # noqa: E402

binary, rootfs, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
py = os.path.join(rootfs, "usr", "bin", "python3")
true = os.path.join(rootfs, "bin", "true")
os.environ["NSBOX_ROOTFS"] = rootfs  # for the API too
env = dict(os.environ)


def timed(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def check(p):
    if p.returncode != 0:
        raise SystemExit(f"bench/session.py: {p.args!r} failed: {p.stderr!r}")
    return p


times = {k: [] for k in ("bare_py", "session_py", "bare_true", "api_true", "cli_true", "run",
                         "start")}
with nsbox.Session(nsbox=binary, extra_args=["--cgroup", "off"]) as s:
    assert s.run_code("print(1)").stdout == "1\n"
    for _ in range(max(3, runs // 10)):  # warm up
        s.run_code("print(1)")
        s.run(["/bin/true"])
    for _ in range(runs):
        times["bare_py"].append(timed(lambda: check(subprocess.run(
            [py, "-B", "-c", "print(1)"], capture_output=True))))
        times["session_py"].append(timed(lambda: s.run_code("print(1)")))
        times["bare_true"].append(timed(lambda: check(subprocess.run([true], capture_output=True))))
        times["api_true"].append(timed(lambda: s.run(["/bin/true"])))
        times["cli_true"].append(timed(lambda: check(subprocess.run(
            [binary, "session", "exec", s.id, "--", "/bin/true"], capture_output=True,
            env=env))))

for _ in range(max(3, runs // 10)):
    times["run"].append(timed(lambda: check(subprocess.run(
        [binary, "run", "--cgroup", "off", "--", "/bin/true"], capture_output=True, env=env))))
    ids = []
    times["start"].append(timed(lambda: ids.append(check(subprocess.run(
        [binary, "session", "start", "--cgroup", "off"], capture_output=True, text=True,
        env=env)).stdout.strip())))
    subprocess.run([binary, "session", "stop", ids[0]], capture_output=True, env=env)

print(" ".join(f"{statistics.median(times[k]):.3f}" for k in
               ("bare_py", "session_py", "bare_true", "api_true", "cli_true", "run", "start")))
