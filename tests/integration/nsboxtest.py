# SPDX-License-Identifier: LGPL-2.1-or-later
"""Shared helpers for the integration tests: run the built nsbox.

Environment: NSBOX (the binary), NSBOX_ROOTFS (the rootfs; optional when the binary finds its
own), NSBOX_TESTS_MUST_WORK=1 turns skips into failures (set in CI).
"""
import json
import os
import re
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
NSBOX = os.environ.get("NSBOX") or os.path.join(HERE, "..", "..", "build", "src", "nsbox")
PROBE = os.environ.get("NSBOX_PROBE") or os.path.join(HERE, "..", "..", "build", "tests", "probe",
                                                      "nsbox-probe")
MUST_WORK = os.environ.get("NSBOX_TESTS_MUST_WORK") == "1"
# The host's Python, for programs the tests run outside nsbox.
HOST_PYTHON = sys.executable


def nsbox(*args, env=None, timeout=60, input=None, pass_fds=()):
    """Run nsbox with args; returns CompletedProcess with text stdout/stderr."""
    return subprocess.run(
        [NSBOX, *args], capture_output=True, text=True, env=env, timeout=timeout,
        input=input if input is not None else "", pass_fds=pass_fds)


def nsbox_json(*args, **kw):
    """Run `nsbox run --json ARGS`; returns (CompletedProcess, parsed result)."""
    p = nsbox("run", "--json", *args, **kw)
    try:
        result = json.loads(p.stdout)
    except ValueError as e:
        raise AssertionError(f"nsbox printed no JSON ({e}): stdout={p.stdout!r} stderr={p.stderr!r}")
    return p, result


FALLBACK_WARNING = "nsbox: warning: limits are enforced with rlimits, not a cgroup"


def without_fallback_warning(stderr):
    """stderr without the line that says limits fell back to rlimits (hosts without cgroup v2
    delegation print it on every run; tests/integration/test_cgroup.py checks it)."""
    return "".join(l for l in stderr.splitlines(True) if not l.startswith(FALLBACK_WARNING))


# Names that tools around nsbox give their temporary directories: Python's tempfile (the Python
# API's "nsbox-XXXXXXXX", other test suites' "nsbox-lab-XXXXXXXX") and mktemp(1)
# ("nsbox-vm.XXXXXX"). nsbox itself makes none but tier 3's scratch directories
# (nsbox-tier3-XXXXXX, removed after each run: tier3.h), which therefore count.
_TOOL_TEMP_NAME = re.compile(r"(_[a-z0-9_]{8}|-[a-z0-9_]{8}|\.[A-Za-z0-9]{6})$")


def tmp_snapshot():
    """The names in /tmp now, for new_nsbox_tmp_entries()."""
    return set(os.listdir("/tmp"))


def new_nsbox_tmp_entries(before):
    """Names in /tmp that are new since `before`, hold "nsbox", belong to this process's uid and
    are not one of the random temporary names other tools make: what nsbox would have left.
    Entries of other users, and of other test suites or Python API calls running meanwhile, do
    not count, so the check holds while other nsbox work goes on (the suite's rule)."""
    new = set()
    for name in tmp_snapshot() - before:
        if "nsbox" not in name or _TOOL_TEMP_NAME.search(name):
            continue
        try:
            if os.lstat(os.path.join("/tmp", name)).st_uid == os.geteuid():
                new.add(name)
        except FileNotFoundError:
            pass
    return new


def processes_with(token):
    """PIDs of processes whose command line contains token (read from /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


def wait_until(predicate, timeout=5.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


class NsboxTestCase(unittest.TestCase):
    def skip_or_fail(self, reason):
        if MUST_WORK:
            self.fail(f"would skip, but NSBOX_TESTS_MUST_WORK=1: {reason}")
        self.skipTest(reason)

    def assertOneLineError(self, p, code=125, contains=None):
        self.assertEqual(p.returncode, code, f"stdout={p.stdout!r} stderr={p.stderr!r}")
        lines = [l for l in without_fallback_warning(p.stderr).splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"want one line on stderr, got {p.stderr!r}")
        self.assertTrue(lines[0].startswith("nsbox: "), lines[0])
        if contains:
            self.assertIn(contains, lines[0])


# A payload looping on a refused system call (mount(2)): argv[1] calls at most, for argv[2]
# seconds at most; prints how many it made and in how long (the pace tests of runs and sessions).
REFUSED_CALL_FLOOD = ("import ctypes, os, sys, time\n"
                      "libc = ctypes.CDLL(None, use_errno=True)\n"
                      "t = time.monotonic(); n = 0\n"
                      "while n < int(sys.argv[1]) and time.monotonic() - t < float(sys.argv[2]):\n"
                      "    libc.syscall(165, 0, 0, 0, 0, 0)  # mount(2): refused\n"
                      "    n += 1\n"
                      "print(n, time.monotonic() - t)\n")


def plant_symlinks(top):
    """top/out (a copy-out's HOSTDIR) with links a sandbox given it through a :rw bind could
    plant: out/o to the directory top/victim, out/f to its file (which holds "precious").
    Returns (out, victim)."""
    out = os.path.join(top, "out")
    victim = os.path.join(top, "victim")
    os.makedirs(out)
    os.makedirs(victim)
    with open(os.path.join(victim, "file"), "w") as f:
        f.write("precious")
    os.symlink(victim, os.path.join(out, "o"))
    os.symlink(os.path.join(victim, "file"), os.path.join(out, "f"))
    return out, victim


def root_only(names):
    """A module's load_tests() that leaves out, when not run as root, the tests (class or
    method names in names) whose setup takes root; the root suite runs them, as uid 65534 too
    where that matters. Not collected rather than skipped: under NSBOX_TESTS_MUST_WORK=1 a
    skip is a failure."""
    def load_tests(loader, tests, pattern):
        if os.geteuid() == 0:
            return tests
        kept = unittest.TestSuite()

        def walk(suite):
            for t in suite:
                if isinstance(t, unittest.TestSuite):
                    walk(t)
                elif type(t).__name__ not in names and t.id().rsplit(".", 1)[-1] not in names:
                    kept.addTest(t)
        walk(tests)
        return kept
    return load_tests
