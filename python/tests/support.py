# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the Python API's tests share: the binary, the sandbox's test case, and helpers."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # python/, so that `import nsbox` is this package

import nsbox  # noqa: E402

REPO = HERE.parent.parent
NSBOX = os.environ.get("NSBOX") or str(REPO / "build" / "src" / "nsbox")
MUST_WORK = os.environ.get("NSBOX_TESTS_MUST_WORK") == "1"
CANARY = "nsbox-canary-4f1c0e9a"


def bare_python(code, env=None, timeout=30):
    """Run code with the host's Python, no sandbox: the negative control of an attack."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=timeout)


def processes_with(token):
    """PIDs of processes whose command line contains token."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if entry.isdigit() and token.encode() in f.read():
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


def fake_nsbox(directory, script):
    """Write an executable shell script standing in for nsbox; return its path."""
    path = os.path.join(directory, "fake-nsbox")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + script)
    os.chmod(path, 0o755)
    return path


def runtime_dir_enter(cls, prefix):
    """A private XDG_RUNTIME_DIR for a test class's sessions and pools (cls._dir; the
    caller's is kept in cls._saved): its sockets and registry never touch the user's."""
    cls._saved = os.environ.get("XDG_RUNTIME_DIR")
    cls._dir = tempfile.mkdtemp(prefix=prefix)
    os.environ["XDG_RUNTIME_DIR"] = cls._dir


def runtime_dir_leave(cls):
    """Kill what the class left in its runtime directory, put the caller's back, remove it."""
    subprocess.run([NSBOX, "kill", "--all"], capture_output=True)
    if cls._saved is None:
        os.environ.pop("XDG_RUNTIME_DIR", None)
    else:
        os.environ["XDG_RUNTIME_DIR"] = cls._saved
    shutil.rmtree(cls._dir, ignore_errors=True)


class SandboxTestCase(unittest.TestCase):
    """Tests that need the real binary and its rootfs."""

    @classmethod
    def setUpClass(cls):
        reason = None
        if not (os.path.isfile(NSBOX) and os.access(NSBOX, os.X_OK)):
            reason = f"no nsbox binary at {NSBOX} (set NSBOX)"
        else:
            try:
                nsbox.run_python_code("pass", nsbox=NSBOX)
            except nsbox.NsboxError as e:
                if e.step == "rootfs":
                    reason = f"no rootfs (set NSBOX_ROOTFS): {e}"
        if reason:
            if MUST_WORK:
                raise AssertionError(f"would skip, but NSBOX_TESTS_MUST_WORK=1: {reason}")
            raise unittest.SkipTest(reason)

    def code(self, source, **kw):
        return nsbox.run_python_code(textwrap.dedent(source), nsbox=NSBOX, **kw)

    def run_argv(self, argv, **kw):
        return nsbox.run(argv, nsbox=NSBOX, **kw)

    def output(self, result):
        return result.stdout + result.stderr




def json_result(**fields):
    """A JSON result as nsbox prints it, with fields overridden."""
    raw = {"status": "exited", "exit_code": 0, "signal": None, "wall_time_ms": 10.0,
           "stdout": "", "stderr": "", "stdout_bytes": 0, "stderr_bytes": 0,
           "stdout_truncated": False, "stderr_truncated": False, "error": None,
           "limits": {}, "limits_enforced_by": "rlimit", "reason": "exited with status 0",
           "limit": None, "notes": [], "warnings": [], "outcome_warnings": [], "note_kinds": [],
           "seccomp_refused": [], "cgroup": None}
    raw.update(fields)
    raw["stdout_bytes"] = raw["stdout_bytes"] or len(raw["stdout"].encode())
    raw["stderr_bytes"] = raw["stderr_bytes"] or len(raw["stderr"].encode())
    return raw

