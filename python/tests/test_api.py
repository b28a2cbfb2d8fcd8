# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests of the nsbox Python API against the real binary and rootfs.

Run from the repository root:

    python3 -m unittest discover -s python/tests -t python

Environment: NSBOX (the binary; default build/src/nsbox of this tree), NSBOX_ROOTFS (optional:
the binary finds the rootfs of its build tree), NSBOX_TESTS_MUST_WORK=1 turns skips into
failures. Works as root and as an ordinary user.

As in tests/integration, each attack also runs without nsbox where that is harmless (reading
the canary, connecting, reading the environment), and must succeed there: the test cannot
pass because the attack code itself is broken.
"""
import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # python/, so that `import nsbox` is this package

import nsbox  # noqa: E402
from nsbox import _runner  # noqa: E402

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


class TestRun(SandboxTestCase):
    def test_refused_syscalls(self):
        r = self.code("import socket\ntry:\n    socket.socket(socket.AF_INET)\nexcept OSError:\n"
                      "    print('refused')")
        self.assertEqual(r.stdout, "refused\n")
        if r.refused_syscalls is None:
            self.skipTest("this kernel cannot report refused system calls")
        self.assertEqual(r.refused_syscalls, {"socket": 1})

    def test_hello_world(self):
        r = self.code("print('hello world')")
        self.assertEqual(r.status, "exited")
        self.assertEqual(r.exit_code, 0)
        self.assertIsNone(r.signal)
        self.assertTrue(r.ok)
        self.assertEqual(r.stdout, "hello world\n")
        self.assertEqual(r.stderr, "")  # nsbox's rlimit warning is not the payload's stderr
        self.assertFalse(r.truncated)
        self.assertEqual(r.stdout_bytes, 12)
        self.assertEqual(r.as_tool_output(), "hello world\n")
        self.assertIsInstance(r.wall_time, float)
        self.assertGreater(r.wall_time, 0)
        self.assertLess(r.wall_time, 10)
        self.assertIn(r.limits_enforced_by, ("cgroup", "rlimit"))
        if r.limits_enforced_by == "cgroup":
            self.assertGreater(r.peak_memory, 0)
        else:
            self.assertIsNone(r.peak_memory)
        self.assertEqual(r.raw["stdout"], r.stdout)

    def test_exit_code_and_stderr(self):
        r = self.code("import sys\nprint('out')\nsys.stderr.write('boom')\nsys.exit(3)")
        self.assertEqual(r.status, "exited")
        self.assertEqual(r.exit_code, 3)
        self.assertFalse(r.ok)
        self.assertEqual(r.stdout, "out\n")
        self.assertEqual(r.stderr, "boom")
        self.assertEqual(r.as_tool_output(), "exited with status 3\n[stdout]\nout\n[stderr]\nboom")

    def test_exception(self):
        r = self.code("raise ValueError('bad value')")
        self.assertEqual(r.exit_code, 1)
        self.assertIn("ValueError: bad value", r.stderr)
        self.assertTrue(r.as_tool_output().startswith("exited with status 1\n[stderr]\nTraceback"))

    def test_payload_exit_127_is_a_result(self):
        # Only status "error" is nsbox's failure; a payload may exit 125..127 itself.
        r = self.code("import sys; sys.exit(127)")
        self.assertEqual((r.status, r.exit_code), ("exited", 127))

    def test_signal(self):
        r = self.code("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
        self.assertEqual(r.status, "signaled")
        self.assertEqual(r.signal, 9)
        self.assertEqual(r.exit_code, 137)
        self.assertFalse(r.ok)

    def test_timeout(self):
        start = time.monotonic()
        r = self.code("while True: pass", timeout=1)
        self.assertLess(time.monotonic() - start, 8)
        self.assertEqual(r.status, "timeout")
        self.assertFalse(r.ok)
        self.assertEqual(r.as_tool_output(),
                         "timed out after 1 s; the sandbox was killed\n[no output]")

    def test_fractional_timeout(self):
        r = self.code("import time; time.sleep(5)", timeout=0.5)
        self.assertEqual(r.status, "timeout")
        self.assertLess(r.wall_time, 3)

    def test_output_truncated(self):
        r = self.code("print('x' * 100000)")
        self.assertTrue(r.ok)
        self.assertTrue(r.truncated)
        self.assertEqual(len(r.stdout), 4000)
        self.assertEqual(r.stdout_bytes, 100001)
        self.assertEqual(r.as_tool_output(), "exited with status 0\n[stdout]\n" + "x" * 4000 +
                         "\n[stdout truncated: kept 4000 of 100001 bytes (--output-limit)]")

    def test_output_limit(self):
        r = self.code("import sys; print('y' * 50); sys.stderr.write('z' * 50)", output_limit=10)
        self.assertEqual(r.stdout, "y" * 10)
        self.assertEqual(r.stderr, "z" * 10)
        self.assertTrue(r.truncated)

    def test_files_are_copies_in_the_writable_workdir(self):
        """files= are copied in (--copy-in), never bound: the code may change its copies."""
        r = self.code("""
            import os
            print(open('/work/files/data.txt').read())
            print(open('/work/files/sub/blob.bin', 'rb').read())
            print(sorted(os.listdir('/work/files')))
            open('/work/files/data.txt', 'w').write('changed')
            open('/work/files/new.txt', 'w')
            print('CHANGED', open('/proc/self/mountinfo').read().count('/work/files'))
            """, files={"data.txt": "hello files", "sub/blob.bin": b"\x00\x01\xff"})
        self.assertTrue(r.ok, r.stderr)
        self.assertEqual(r.stdout.splitlines()[:3],
                         ["hello files", "b'\\x00\\x01\\xff'", "['data.txt', 'sub']"])
        self.assertIn("CHANGED 0", r.stdout)  # no mount: a copy, not a bind

    def test_temporary_files_removed(self):
        made = []
        real_mkdtemp = tempfile.mkdtemp

        def mkdtemp(*a, **kw):
            made.append(real_mkdtemp(*a, **kw))
            return made[-1]

        with mock.patch.object(_runner.tempfile, "mkdtemp", side_effect=mkdtemp):
            r = self.code("import sys; print(sys.stdin.read(), open('/work/files/f').read())",
                          files={"f": "F"}, stdin="S")
        self.assertEqual(r.stdout, "S F\n")
        self.assertEqual(len(made), 1)
        self.assertFalse(os.path.exists(made[0]))

    def test_inputs_are_private_while_the_run_lasts(self):
        # files= and the code written for --code (with stdin=) sit in a directory nobody else
        # on the host may enter while the run lasts; the sandbox still reads them.
        made = []
        real_mkdtemp = tempfile.mkdtemp

        def mkdtemp(*a, **kw):
            made.append(real_mkdtemp(*a, **kw))
            return made[-1]

        seen = {}
        with mock.patch.object(_runner.tempfile, "mkdtemp", side_effect=mkdtemp), \
                ThreadPoolExecutor(max_workers=1) as pool:
            future = pool.submit(self.code, "import sys, time\ntime.sleep(2)\n"
                                 "print(sys.stdin.read(), open('/work/files/sub/f').read())",
                                 files={"sub/f": "F"}, stdin="S")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not (
                    made and os.path.exists(os.path.join(made[0], "main.py"))):
                time.sleep(0.01)
            self.assertTrue(made, "the API made no temporary directory")
            for rel in ("", "main.py", "files", "files/sub", "files/sub/f"):
                seen[rel] = stat.S_IMODE(os.stat(os.path.join(made[0], rel)).st_mode)
            if os.geteuid() == 0:
                # Root's sandboxes are another host uid: what another user sees on the host.
                for rel in ("main.py", "files/sub/f"):
                    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                                        "--clear-groups", "cat", os.path.join(made[0], rel)],
                                       capture_output=True, text=True)
                    self.assertNotEqual(p.returncode, 0, rel)
                    self.assertIn("Permission denied", p.stderr, rel)
            r = future.result()
        self.assertEqual(r.stdout, "S F\n", r.stderr)
        self.assertEqual((seen[""], seen["main.py"]), (0o700, 0o600))
        # Copied in by nsbox as the caller (--copy-in): private even in root's runs.
        self.assertEqual((seen["files"], seen["files/sub"], seen["files/sub/f"]),
                         (0o700, 0o700, 0o600))

    def test_copy_out_returns_files(self):
        r = self.code("""
            import os
            os.makedirs('out/sub')
            open('out/plot.png', 'wb').write(bytes(range(256)))
            open('out/sub/data.csv', 'w').write('a,b')
            os.symlink('/etc/shadow', 'out/link')
            """, copy_out="/work/out")
        self.assertTrue(r.ok, r.stderr)
        self.assertEqual(r.files, {"/work/out/plot.png": bytes(range(256)),
                                   "/work/out/sub/data.csv": b"a,b"})
        self.assertEqual([(s["path"], s["reason"]) for s in r.copy_out["skipped"]],
                         [("/work/out/link", "symlink (never followed)")])
        self.assertIn("not copied out: /work/out/link (symlink (never followed))",
                      r.as_tool_output())

    def test_copy_out_dir_keeps_the_files(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.code("open('r.txt', 'w').write('kept')", copy_out="/work/r.txt",
                          copy_out_dir=d)
            self.assertTrue(r.ok, r.stderr)
            with open(os.path.join(d, "r.txt")) as f:
                self.assertEqual(f.read(), "kept")
            self.assertEqual(r.files, {"/work/r.txt": b"kept"})

    def test_workspace_keeps_files_between_runs(self):
        with tempfile.TemporaryDirectory() as state, \
                mock.patch.dict(os.environ, {"XDG_STATE_HOME": state}):
            r = self.code("open('step.txt', 'w').write('one')", workspace="t1")
            self.assertTrue(r.ok, r.stderr)
            r = self.code("print(open('step.txt').read())", workspace="t1")
            self.assertEqual(r.stdout, "one\n", r.stderr)

    def test_copy_out_bad_path(self):
        with self.assertRaises(ValueError):
            self.code("pass", copy_out="work/x")

    def test_empty_files_dict(self):
        r = self.code("import os; print(os.listdir('/work/files'))", files={})
        self.assertEqual(r.stdout, "[]\n")

    def test_stdin(self):
        r = self.code("import sys; print(sys.stdin.read().upper())", stdin="abc\ndef")
        self.assertTrue(r.ok, r.stderr)
        self.assertEqual(r.stdout, "ABC\nDEF\n")
        r = self.code("import sys; print(sys.stdin.buffer.read())", stdin=b"\x00\xff")
        self.assertEqual(r.stdout, "b'\\x00\\xff'\n")

    def test_no_stdin_is_empty(self):
        r = self.code("import sys; print(repr(sys.stdin.read()))")
        self.assertEqual(r.stdout, "''\n")

    def test_env(self):
        r = self.code("import os; print(os.environ['GREETING'], os.environ['HOME'])",
                      env={"GREETING": "hello sandbox"})
        self.assertTrue(r.ok, r.stderr)
        self.assertEqual(r.stdout, "hello sandbox /tmp\n")

    def test_env_values_with_any_text(self):
        # Through --env-fd's NUL-ended records: newlines, '=' and non-ASCII arrive as given.
        value = "line one\nline=two\n\u00e9\u6f22"
        r = self.code("import os; print(repr(os.environ['MULTI']))", env={"MULTI": value})
        self.assertTrue(r.ok, r.stderr)
        self.assertEqual(r.stdout, repr(value) + "\n")

    def test_unlimited(self):
        r = self.code("print(1)", memory=None, cpus=None, pids_limit=None)
        self.assertTrue(r.ok, r.stderr)
        limits = r.raw["limits"]
        self.assertIsNone(limits["memory"]["bytes"])
        self.assertIsNone(limits["pids"]["max"])
        self.assertIsNone(limits["cpus"]["cpus"])

    def test_limits_passed(self):
        r = self.code("print(1)", timeout=2.5, memory="128m", cpus=1.25, pids_limit=10)
        limits = r.raw["limits"]
        self.assertEqual(limits["memory"]["bytes"], 128 << 20)
        self.assertEqual(limits["pids"]["max"], 10)
        self.assertEqual(limits["cpus"]["cpus"], 1.25)
        self.assertEqual(limits["timeout"]["seconds"], 2.5)

    def test_run_program(self):
        r = self.run_argv(["python3", "-c", "import sys; print(sys.argv[1:])", "a b", "c"])
        self.assertEqual(r.stdout, "['a b', 'c']\n")
        r = self.run_argv(["cat"], stdin=b"piped")
        self.assertEqual(r.stdout, "piped")
        r = self.run_argv(["cat", "/work/files/x"], files={"x": "bound"})
        self.assertEqual(r.stdout, "bound")
        r = self.run_argv(["sh", "-c", "exit 7"])
        self.assertEqual((r.status, r.exit_code), ("exited", 7))

    def test_extra_args(self):
        r = self.code("import os; print(os.getuid())", extra_args=["--user", "1000"])
        self.assertEqual(r.stdout, "1000\n")

    def test_warnings(self):
        r = self.code("pass", extra_args=["--env-inherit"])
        self.assertTrue(any(w.startswith("--env-inherit") for w in r.warnings), r.warnings)
        r = self.code("pass", extra_args=["--cgroup", "off"])
        self.assertEqual(r.warnings, [])

    def test_network_loopback(self):
        # A local server the code talks to: refused by default, served with "loopback".
        source = ("import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
                  "c = socket.create_connection(s.getsockname()); a, _ = s.accept()\n"
                  "c.sendall(b'ping'); print(a.recv(4).decode())\n")
        r = self.code(source)
        self.assertIn("PermissionError", r.stderr)
        r = self.code(source, network="loopback")
        self.assertEqual((r.status, r.stdout), ("exited", "ping\n"), r.stderr)
        with self.assertRaises(ValueError):
            self.code(source, network="host")

    def test_network_allow_list(self):
        # network=[hosts]: --network allow=. A server of this test on the host's 127.0.0.1,
        # allowed by address (names resolving to loopback are refused): reached through the
        # proxy, and the connection is in the Result; a name not listed gets a 403.
        import http.server
        server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
        server.RequestHandlerClass.log_message = lambda *a: None
        port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        source = ("import urllib.request, urllib.error\n"
                  f"print(urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=20).status)\n"
                  "try:\n    urllib.request.urlopen('http://example.org/', timeout=20)\n"
                  "except urllib.error.HTTPError as e:\n    print(e.code)\n")
        r = self.code(source, network=[f"127.0.0.1:{port}"])
        self.assertEqual((r.status, r.stdout), ("exited", "200\n403\n"), r.stderr)
        self.assertEqual([(c["host"], c["allowed"]) for c in r.network["connections"]],
                         [("127.0.0.1", True), ("example.org", False)])
        for bad in ([], ["a,b"], [""], "pypi.org"):
            with self.assertRaises(ValueError):
                self.code(source, network=bad)


class TestToolOutput(SandboxTestCase):
    """The text a model gets, exactly, for each row of issue 14's table and a few more."""

    def rlimits(self, r):
        return r.limits_enforced_by == "rlimit"

    def test_exit_status(self):
        r = self.code("import sys; print('out'); sys.exit(3)")
        self.assertEqual(r.as_tool_output(), "exited with status 3\n[stdout]\nout")

    def test_signal(self):
        r = self.code("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
        want = "killed by SIGSEGV (signal 11)\n[no output]"
        if self.rlimits(r):
            want += ("\n[the payload died of SIGSEGV; if it ran out of memory: under rlimits, "
                     "--memory 256m caps its writable mappings (RLIMIT_DATA), not its use, and a "
                     "program denied a mapping may crash instead of failing cleanly]")
        self.assertEqual(r.as_tool_output(), want)

    def test_busy_loop(self):
        # Under rlimits cpus 0.5 x timeout 5 is 3 s of CPU time (rounded up), which ends the
        # loop first; in a cgroup, cpu.max slows it and the timeout ends it. Either way nsbox
        # says which limit, with its value.
        # (CPU time is not wall time: on a host too busy to give the loop 3 s of CPU in 5 s,
        # the timeout comes first under rlimits too, and says so.)
        r = self.code("while True: pass", timeout=5)
        if self.rlimits(r) and r.status != "timeout":
            want = ("stopped: CPU time limit: the payload used up its 3 s of CPU time (--cpus "
                    "0.5 x --timeout 5 s, RLIMIT_CPU under rlimits) and was killed by SIGXCPU")
            self.assertEqual(r.limit["name"], "cpu")
        else:
            want = "timed out after 5 s; the sandbox was killed"
        self.assertEqual(r.as_tool_output(), want + "\n[no output]")

    def test_both_streams(self):
        r = self.code("print('partial 42')\nraise ValueError('x')")
        self.assertEqual(r.as_tool_output(),
                         "exited with status 1\n[stdout]\npartial 42\n[stderr]\n"
                         "Traceback (most recent call last):\n"
                         "  File \"/work/main.py\", line 2, in <module>\n"
                         "    raise ValueError('x')\n"
                         "ValueError: x")

    def test_success_with_a_warning(self):
        r = self.code("import warnings\nprint('ok')\nwarnings.warn('careful')")
        self.assertEqual(r.as_tool_output(),
                         "exited with status 0\n[stdout]\nok\n[stderr]\n"
                         "/work/main.py:3: UserWarning: careful\n"
                         "  warnings.warn('careful')")

    def test_many_lines(self):
        r = self.code("for i in range(100000): print(i)")
        printed = "".join(f"{i}\n" for i in range(100000))
        self.assertEqual(r.as_tool_output(),
                         "exited with status 0\n[stdout]\n" + printed[:4000].removesuffix("\n") +
                         f"\n[stdout truncated: kept 4000 of {len(printed)} bytes "
                         "(--output-limit)]")

    def test_output_before_a_timeout(self):
        r = self.code("print('line 1'); print('partial: 42')\nwhile True: pass", timeout=1)
        self.assertEqual(r.as_tool_output(),
                         "timed out after 1 s; the sandbox was killed\n"
                         "[stdout]\nline 1\npartial: 42")

    def test_pids_limit(self):
        r = self.code("import os, time\nfor i in range(10):\n    pid = os.fork()\n"
                      "    if pid == 0:\n        time.sleep(10)\n        os._exit(0)\n",
                      pids_limit=4)
        want = ("exited with status 1\n[stderr]\nTraceback (most recent call last):\n"
                "  File \"/work/main.py\", line 3, in <module>\n"
                "    pid = os.fork()\n"
                "          ^^^^^^^^^\n"
                "BlockingIOError: [Errno 11] Resource temporarily unavailable")
        if not self.rlimits(r):  # a cgroup counts the forks pids.max refused
            want += "\n[the process limit (--pids-limit 4) refused 1 forks]"
        else:  # under rlimits the program's own error is the witness
            want += ("\n[the program's stderr mentions a fork or thread start that failed with "
                     "EAGAIN (Resource temporarily unavailable): under rlimits, --pids-limit 4 "
                     "is RLIMIT_NPROC, the processes and threads of the sandbox's user together; "
                     "raise --pids-limit if the program needs more]")
        self.assertEqual(r.as_tool_output(), want)

    def test_network(self):
        r = self.code("import socket\ntry:\n    socket.create_connection(('192.0.2.1', 80))\n"
                      "except OSError as e:\n    print(e)")
        want = "exited with status 0\n[stdout]\n[Errno 1] Operation not permitted"
        if r.refused_syscalls is not None:
            want += ("\n[the seccomp policy refused: socket (1)]\n[hint: the sandbox has no "
                     "network: sockets are refused (network=[\"pypi.org\", ...] reaches the "
                     "hosts named through nsbox's proxy; network=\"loopback\" allows sockets "
                     "on 127.0.0.1 and ::1 only)]")
        self.assertEqual(r.as_tool_output(), want)

    def test_not_utf8(self):
        # (";": the value of write() at a cell's end is not displayed.)
        r = self.code("import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe end\\n');")
        self.assertEqual(r.as_tool_output(), "ok \ufffd\ufffd end\n")

    def test_setup_error(self):
        with self.assertRaises(nsbox.NsboxError) as cm:
            self.code("print(1)", rootfs="/nonexistent")
        self.assertEqual(cm.exception.as_tool_output(),
                         "nsbox could not run the code: rootfs '/nonexistent': No such file or "
                         "directory (build it with 'ninja -C build' or 'nsbox rootfs build DIR', "
                         "install it with 'meson install', or point $NSBOX_ROOTFS or --rootfs at "
                         "one)")


class TestBadOutput(SandboxTestCase):
    """A model's code can print anything: the result and the tool text stay valid and bounded."""

    def check(self, r, output_limit=4000):
        for stream in (r.stdout, r.stderr):
            stream.encode("utf-8")  # valid text
            self.assertLessEqual(len(stream), output_limit)
        text = r.as_tool_output()
        text.encode("utf-8")
        self.assertNotRegex(text, "[\x00-\x08\x0b-\x1f\x7f-\x9f]")
        self.assertLess(len(text), 2 * 4 * nsbox.TOOL_OUTPUT_LIMIT + 1000)
        return text

    def test_nul(self):
        r = self.code("import sys; print('a\\0b'); sys.stderr.write('\\0' * 10);")
        self.assertEqual(r.stdout, "a\0b\n")
        self.assertEqual(self.check(r), "exited with status 0\n[stdout]\na\\x00b\n[stderr]\n" +
                         "\\x00" * 10)

    def test_ansi_escapes(self):
        r = self.code("print('\\x1b[31mred\\x1b[0m\\x1b]0;pwned\\x07')")
        self.assertEqual(self.check(r), "\\x1b[31mred\\x1b[0m\\x1b]0;pwned\\x07\n")

    def test_invalid_utf8(self):
        r = self.code("import sys, os; sys.stdout.buffer.write(os.urandom(100000))")
        self.check(r)
        self.assertTrue(r.truncated)

    def test_ten_megabyte_line(self):
        line = "import sys; sys.stdout.write('x' * 10_000_000); sys.stderr.write('\\xff' * 10_000_000)"
        r = self.code(line)
        self.check(r)
        self.assertEqual(r.stdout_bytes, 10_000_000)
        # With the largest output limit nsbox keeps all of it; the tool text still shows 4000
        # characters of each stream and says so.
        r = self.code(line, output_limit=1 << 30)
        self.assertEqual(len(r.stdout), 10_000_000)
        text = self.check(r, output_limit=1 << 30)
        self.assertIn("[stdout cut for this output: the first 4000 characters are shown]", text)

    def test_streamed_invalid_utf8_split_across_reads(self):
        chunks = []
        r = self.code("import sys, time\nsys.stdout.buffer.write(b'\\xe2\\x82')\n"
                      "sys.stdout.flush(); time.sleep(0.3)\n"
                      "sys.stdout.buffer.write(b'\\xac \\xff\\n')", on_stdout=chunks.append)
        self.assertEqual("".join(chunks), "\u20ac \ufffd\n")
        self.assertEqual(r.stdout, "\u20ac \ufffd\n")


class TestStreamingAndAsync(SandboxTestCase):
    SLOW = "import time\nprint('first')\ntime.sleep(1.5)\nprint('second')"

    def test_callbacks_get_output_as_it_arrives(self):
        seen = []
        start = time.monotonic()
        r = self.code(self.SLOW, on_stdout=lambda t: seen.append((time.monotonic(), t)),
                      on_stderr=lambda t: seen.append((time.monotonic(), "ERR" + t)))
        end = time.monotonic()
        # Unbuffered Python writes "first" and its newline apart: chunks are what arrived.
        self.assertEqual("".join(t for _, t in seen), "first\nsecond\n")
        first = next(when for when, t in seen if "first" in t)
        self.assertLess(first - start, end - start - 1.0)  # long before the end
        self.assertEqual((r.stdout, r.reason), ("first\nsecond\n", "exited with status 0"))
        self.assertEqual(r.nsbox_stderr, "")  # nsbox's own messages are in the result

    def test_stderr_callback_and_stdin(self):
        err = []
        r = self.code("import sys; sys.stderr.write(sys.stdin.read().upper())",
                      stdin="x" * 200_000, on_stderr=err.append, output_limit=1 << 20)
        self.assertEqual("".join(err), "X" * 200_000)
        self.assertEqual(r.stderr, "X" * 200_000)

    def test_callback_error_kills_the_run(self):
        def boom(text):
            raise RuntimeError("callback failed")
        start = time.monotonic()
        with self.assertRaises(RuntimeError):
            self.code("print('x', flush=True)\nimport time; time.sleep(30)", on_stdout=boom)
        self.assertLess(time.monotonic() - start, 10)

    def test_setup_error_while_streaming(self):
        with self.assertRaises(nsbox.NsboxError) as cm:
            self.code("print(1)", rootfs="/nonexistent", on_stdout=print)
        self.assertEqual(cm.exception.step, "rootfs")
        with self.assertRaises(nsbox.NsboxError) as cm:
            self.code("print(1)", memory="12Q", on_stdout=print)
        self.assertIn("12Q", str(cm.exception))

    def test_arun(self):
        threads = []

        async def main():
            both = asyncio.gather(
                nsbox.arun_python_code("import time; time.sleep(1); print('a')", nsbox=NSBOX),
                nsbox.arun(["python3", "-c", "import time; time.sleep(1); print('b')"],
                           nsbox=NSBOX))
            await asyncio.sleep(0.5)
            threads.append(threading.active_count())
            return await both
        start = time.monotonic()
        a, b = asyncio.run(main())
        self.assertEqual(threads, [1])  # the event loop waits on the pipes and pidfds itself
        self.assertEqual((a.stdout, b.stdout), ("a\n", "b\n"))
        self.assertLess(time.monotonic() - start, 1.9)  # side by side

    def test_arun_streaming(self):
        seen = []

        async def main():
            return await nsbox.arun_python_code(self.SLOW, nsbox=NSBOX, on_stdout=seen.append,
                                                stdin="ignored")
        r = asyncio.run(main())
        self.assertEqual(("".join(seen), r.stdout), ("first\nsecond\n", "first\nsecond\n"))
        with self.assertRaises(nsbox.NsboxError):
            asyncio.run(nsbox.arun_python_code("1", nsbox=NSBOX, rootfs="/nonexistent"))

    def test_arun_cancel_tears_down(self):
        token = f"nsbox-cancel-{os.getpid()}-{time.monotonic_ns()}"

        async def main():
            task = asyncio.ensure_future(nsbox.arun(
                ["python3", "-c", f"import time; time.sleep(30)  # {token}"], nsbox=NSBOX))
            await asyncio.sleep(1)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
        start = time.monotonic()
        asyncio.run(main())
        self.assertLess(time.monotonic() - start, 8)
        self.assertEqual(processes_with(token), [])

    def test_arun_callback_error_kills_the_run(self):
        def boom(text):
            raise RuntimeError("callback failed")
        start = time.monotonic()
        with self.assertRaises(RuntimeError):
            asyncio.run(nsbox.arun_python_code("print('x')\nimport time; time.sleep(30)",
                                               nsbox=NSBOX, on_stdout=boom))
        self.assertLess(time.monotonic() - start, 10)

    def test_timeout_none(self):
        r = self.code("import time; time.sleep(0.2); print('done')", timeout=None)
        self.assertEqual(r.stdout, "done\n")
        self.assertIsNone(r.raw["limits"]["timeout"]["seconds"])

    def test_audit_log_from_environment(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "audit.log")
            with mock.patch.dict(os.environ, {"NSBOX_LOG": log}):
                self.code("print(1)")
                self.code("print(2)", log="")  # "" turns it off
            with open(log) as f:
                records = [json.loads(line) for line in f]
            self.assertEqual(len(records), 2)  # before and after the first run only
            other = os.path.join(d, "other.log")
            self.code("print(3)", log=other)
            self.assertTrue(os.path.getsize(other) > 0)


class TestAttacks(SandboxTestCase):
    """The lesson's attacks, through the API."""

    def test_read_host_file(self):
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            path = os.path.join(d, "secret.txt")
            with open(path, "w") as f:
                f.write(CANARY)
            os.chmod(path, 0o644)
            attack = textwrap.dedent(f"""
                import os
                try:
                    print(open({path!r}).read())
                except OSError as e:
                    print('blocked', type(e).__name__)
                try:
                    print(os.listdir({d!r}))
                except OSError as e:
                    print('blocked', type(e).__name__)
                """)
            bare = bare_python(attack)
            self.assertIn(CANARY, bare.stdout, "control: the attack reads the file bare")
            r = self.code(attack)
            self.assertTrue(r.ok, r.stderr)
            self.assertNotIn(CANARY, self.output(r))
            self.assertNotIn("secret.txt", self.output(r))
            self.assertEqual(r.stdout.count("blocked FileNotFoundError"), 2, r.stdout)

    def test_network(self):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(5)
            listener.settimeout(0.5)
            port = listener.getsockname()[1]
            attack = textwrap.dedent(f"""
                import socket
                try:
                    s = socket.create_connection(('127.0.0.1', {port}), timeout=3)
                    s.sendall(b'{CANARY}')
                    print('CONNECTED')
                except OSError as e:
                    print('blocked', type(e).__name__, e)
                """)
            r = self.code(attack)
            self.assertTrue(r.ok, r.stderr)
            self.assertNotIn("CONNECTED", r.stdout)
            self.assertIn("blocked", r.stdout)
            with self.assertRaises(socket.timeout, msg="the listener got a connection"):
                listener.accept()[0].close()
            # Control: bare, the same code reaches the listener.
            bare = bare_python(attack)
            self.assertIn("CONNECTED", bare.stdout, bare.stderr)
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(5)
                self.assertEqual(conn.recv(100), CANARY.encode())

    def test_memory(self):
        r = self.code("x = bytearray(10**9)\nprint('ALLOCATED', len(x))", memory="256m")
        self.assertFalse(r.ok)
        self.assertNotIn("ALLOCATED", r.stdout)
        self.assertIn(r.status, ("exited", "oom", "signaled"))
        self.assertTrue(r.as_tool_output().startswith(r.reason + "\n"))

    def test_fork_bomb(self):
        # Bounded: at most 200 children, each asleep for 30 s; the payload prints how many
        # forks succeeded and exits, and the kernel kills the sleepers with the pid namespace.
        r = self.code("""
            import os, time
            n = 0
            for _ in range(200):
                try:
                    pid = os.fork()
                except OSError:
                    break
                if pid == 0:
                    time.sleep(30)
                    os._exit(0)
                n += 1
            print(n)
            """, pids_limit=64)
        self.assertNotEqual(r.status, "timeout")
        self.assertEqual(r.status, "exited", r.stderr)
        forks = int(r.stdout.strip())
        self.assertLess(forks, 64)
        self.assertLess(r.wall_time, 10)

    def test_persist(self):
        # /work and /tmp are writable (issue #17), but die with the run: nothing a run
        # writes is there for the next one (workspace= is the opt-in for that).
        r = self.code("""
            with open('/work/persisted.txt', 'w') as f:
                f.write('x')
            with open('/tmp/scratch.txt', 'w') as f:
                f.write('x')
            """)
        self.assertTrue(r.ok, r.stderr)
        r = self.code("import os; print(os.path.exists('/tmp/scratch.txt'), "
                      "os.path.exists('/work/persisted.txt'))")
        self.assertEqual(r.stdout, "False False\n")

    def test_credentials(self):
        attack = "import os; print(dict(os.environ))"
        with mock.patch.dict(os.environ, {"AWS_SECRET_ACCESS_KEY": CANARY}):
            bare = bare_python(attack)
            self.assertIn(CANARY, bare.stdout, "control: the variable is readable bare")
            r = self.code(attack)
            self.assertTrue(r.ok, r.stderr)
            self.assertNotIn(CANARY, self.output(r))
            self.assertIn("PATH", r.stdout)
            # Even `-e KEY` (copy from nsbox's environment) finds nothing: nsbox runs with
            # PATH (and NSBOX_ROOTFS, XDG_RUNTIME_DIR, DBUS_SESSION_BUS_ADDRESS) only.
            r = self.code(attack, extra_args=["-e", "AWS_SECRET_ACCESS_KEY"])
            self.assertTrue(r.ok, r.stderr)
            self.assertNotIn(CANARY, self.output(r))


class TestErrors(SandboxTestCase):
    def test_missing_rootfs(self):
        with self.assertRaises(nsbox.NsboxError) as cm:
            self.code("print(1)", rootfs="/nonexistent")
        e = cm.exception
        self.assertEqual(e.step, "rootfs")
        self.assertEqual(e.errno, 2)
        self.assertEqual(e.exit_code, 125)
        self.assertIn("/nonexistent", str(e))
        self.assertEqual(e.raw["status"], "error")

    def test_bad_memory_value(self):
        with self.assertRaises(nsbox.NsboxError) as cm:
            self.code("print(1)", memory="12Q")
        e = cm.exception
        self.assertEqual(e.step, "arguments")
        self.assertEqual(e.exit_code, 125)
        self.assertIn("12Q", str(e))  # the reason, from nsbox's stderr
        self.assertIn("--memory", str(e))

    def test_bad_timeout_value(self):
        with self.assertRaises(nsbox.NsboxError):
            self.code("print(1)", timeout=0)
        with self.assertRaises(ValueError):
            self.code("print(1)", timeout=float("inf"))

    def test_program_not_found(self):
        with self.assertRaises(nsbox.NsboxError) as cm:
            self.run_argv(["no-such-program-xyz"])
        self.assertEqual(cm.exception.exit_code, 127)
        self.assertEqual(cm.exception.step, "execve")
        self.assertIn("no-such-program-xyz", str(cm.exception))

    def test_program_not_executable(self):
        with self.assertRaises(nsbox.NsboxError) as cm:
            self.run_argv(["/etc"])
        self.assertEqual(cm.exception.exit_code, 126)

    def test_nsbox_from_environment(self):
        with mock.patch.dict(os.environ, {"NSBOX": NSBOX}):
            r = nsbox.run_python_code("print('via NSBOX')")
        self.assertEqual(r.stdout, "via NSBOX\n")


class TestWithoutSandbox(unittest.TestCase):
    """Argument checks and nsbox failures; no real sandbox needed."""

    def test_missing_binary(self):
        with self.assertRaises(nsbox.NsboxNotFound) as cm:
            nsbox.run_python_code("print(1)", nsbox="/nonexistent/nsbox")
        self.assertIsInstance(cm.exception, nsbox.NsboxError)

    def test_missing_binary_on_path(self):
        with tempfile.TemporaryDirectory() as empty:
            env = {k: v for k, v in os.environ.items() if k != "NSBOX"}
            env["PATH"] = empty
            with mock.patch.dict(os.environ, env, clear=True):
                with self.assertRaises(nsbox.NsboxNotFound):
                    nsbox.run_python_code("print(1)")
                with self.assertRaises(nsbox.NsboxError):
                    nsbox.run(["true"])

    def test_bad_file_names(self):
        for name in ["/etc/passwd", "../escape", "a/../../b", "..", "", ".", "a/./..",
                     "x\0y"]:
            with self.subTest(name=name), self.assertRaises(ValueError):
                # Checked before nsbox runs: no binary needed.
                nsbox.run_python_code("pass", files={name: "x"}, nsbox=sys.executable)

    def test_bad_arguments(self):
        with self.assertRaises(TypeError):
            nsbox.run("python3 -c 1", nsbox=sys.executable)
        with self.assertRaises(ValueError):
            nsbox.run([], nsbox=sys.executable)
        with self.assertRaises(ValueError):
            nsbox.run_python_code("pass", env={"A=B": "c"}, nsbox=sys.executable)
        with self.assertRaises(TypeError):
            nsbox.run_python_code("pass", files={"a": 1}, nsbox=sys.executable)
        with self.assertRaises(TypeError):
            nsbox.run_python_code("pass", extra_args="--no-seccomp", nsbox=sys.executable)

    def test_program_env_is_not_nsboxs_environment(self):
        # env= is for the program: in nsbox's own environment on the host, LD_PRELOAD would
        # load a library into nsbox (as the caller, before any sandbox exists), GLIBC_TUNABLES
        # would tune its libc, XDG_RUNTIME_DIR would move its registry. It travels on the
        # --env-fd descriptor instead; nsbox's environment keeps the caller's own values.
        passed = {"LD_PRELOAD": "/nonexistent/evil.so", "LD_LIBRARY_PATH": "/nonexistent",
                  "GLIBC_TUNABLES": "glibc.malloc.check=3", "XDG_RUNTIME_DIR": "/nonexistent",
                  "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent", "MULTI": "a\nb"}
        with tempfile.TemporaryDirectory() as d, \
                mock.patch.dict(os.environ, {"XDG_RUNTIME_DIR": d}):
            fake = fake_nsbox(d, f"""env > {d}/env
while [ $# -gt 0 ]; do
    [ "$1" = --env-fd ] && eval "cat <&$2" > {d}/records
    shift
done
echo 'not json'
""")
            with self.assertRaises(nsbox.NsboxError):
                nsbox.run_python_code("pass", env=passed, nsbox=fake)
            with open(os.path.join(d, "env")) as f:
                own = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
            records = Path(d, "records").read_bytes() if Path(d, "records").exists() else b""
        for key in ("LD_PRELOAD", "LD_LIBRARY_PATH", "GLIBC_TUNABLES",
                    "DBUS_SESSION_BUS_ADDRESS"):
            self.assertNotIn(key, own)
        self.assertEqual(own.get("XDG_RUNTIME_DIR"), d)  # the caller's, not the program's
        self.assertEqual(records, b"".join(f"{k}={v}".encode() + b"\0"
                                           for k, v in passed.items()))

    def test_number_format(self):
        self.assertEqual(_runner._number(10, "t"), "10")
        self.assertEqual(_runner._number(0.5, "t"), "0.5")
        self.assertEqual(_runner._number(1e-5, "t"), "0.00001")
        self.assertEqual(_runner._number(1e20, "t"), "100000000000000000000")
        for bad in (float("nan"), float("inf")):
            with self.assertRaises(ValueError):
                _runner._number(bad, "t")
        with self.assertRaises(TypeError):
            _runner._number(True, "t")

    def test_invalid_json(self):
        with tempfile.TemporaryDirectory() as d:
            fake = fake_nsbox(d, "echo 'not json'; echo 'nsbox: it broke' >&2; exit 3\n")
            with self.assertRaises(nsbox.NsboxError) as cm:
                nsbox.run_python_code("pass", nsbox=fake)
        self.assertEqual(cm.exception.exit_code, 3)
        self.assertIn("it broke", str(cm.exception))

    def test_crash(self):
        with tempfile.TemporaryDirectory() as d:
            fake = fake_nsbox(d, "kill -SEGV $$\n")
            with self.assertRaises(nsbox.NsboxError) as cm:
                nsbox.run(["true"], nsbox=fake)
        self.assertEqual(cm.exception.exit_code, -11)
        self.assertIn("signal 11", str(cm.exception))

    def test_backstop_timeout(self):
        with tempfile.TemporaryDirectory() as d:
            fake = fake_nsbox(d, "exec sleep 30\n")
            start = time.monotonic()
            with mock.patch.object(_runner, "_BACKSTOP_MARGIN", 0.5), \
                    self.assertRaises(nsbox.NsboxError) as cm:
                nsbox.run_python_code("pass", timeout=0.5, nsbox=fake)
            self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(cm.exception.step, "backstop")

    def test_backstop_after_the_pipes_close(self):
        # nsbox closed its output but does not exit: the wait for its exit has a deadline too.
        with tempfile.TemporaryDirectory() as d:
            fake = fake_nsbox(d, "exec >&- 2>&- <&-; exec sleep 30\n")
            for stream in (None, print):
                start = time.monotonic()
                with mock.patch.object(_runner, "_BACKSTOP_MARGIN", 0.5), \
                        self.assertRaises(nsbox.NsboxError) as cm:
                    nsbox.run_python_code("pass", timeout=0.5, nsbox=fake, on_stdout=stream)
                self.assertEqual(cm.exception.step, "backstop")
                self.assertLess(time.monotonic() - start, 5)
                with mock.patch.object(_runner, "_BACKSTOP_MARGIN", 0.5), \
                        self.assertRaises(nsbox.NsboxError) as cm:
                    asyncio.run(nsbox.arun_python_code("pass", timeout=0.5, nsbox=fake,
                                                       on_stdout=stream))
                self.assertEqual(cm.exception.step, "backstop")

    def test_async_backstop_timeout(self):
        with tempfile.TemporaryDirectory() as d:
            fake = fake_nsbox(d, "exec sleep 30\n")
            start = time.monotonic()
            for stream in (None, print):
                with mock.patch.object(_runner, "_BACKSTOP_MARGIN", 0.5), \
                        self.assertRaises(nsbox.NsboxError) as cm:
                    asyncio.run(nsbox.arun_python_code("pass", timeout=0.5, nsbox=fake,
                                                       on_stdout=stream))
                self.assertEqual(cm.exception.step, "backstop")
            self.assertLess(time.monotonic() - start, 8)

    def test_clean_environment_for_nsbox(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "env.txt")
            fake = fake_nsbox(d, f"/usr/bin/env > '{out}'\n")
            # The user bus's address and runtime directory pass (nsbox asks the systemd user
            # manager there for a delegated cgroup); nothing else of the caller's does.
            bus = {"XDG_RUNTIME_DIR": "/run/user/4242",
                   "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/4242/bus"}
            with mock.patch.dict(os.environ, {"AWS_SECRET_ACCESS_KEY": CANARY,
                                              "HOME": "/root-or-not", "XDG_STATE_HOME": "",
                                              **bus}):
                with self.assertRaises(nsbox.NsboxError):
                    nsbox.run_python_code("pass", nsbox=fake)
            with open(out) as f:
                seen = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
        self.assertIn("PATH", seen)
        self.assertEqual({k: seen.get(k) for k in bus}, bus)
        # XDG_STATE_HOME: where nsbox finds workspaces (the caller's, else ~/.local/state).
        self.assertEqual(seen.get("XDG_STATE_HOME"), "/root-or-not/.local/state")
        self.assertLessEqual(set(seen), {"PATH", "NSBOX_ROOTFS", "XDG_RUNTIME_DIR",
                                         "DBUS_SESSION_BUS_ADDRESS", "XDG_STATE_HOME", "PWD",
                                         "SHLVL", "_", "OLDPWD"})

    def test_tool_output_strings(self):
        def result(status, code, out="", err="", **kw):
            return nsbox.Result(status=status, exit_code=code, signal=None, stdout=out,
                                stderr=err, truncated=False, stdout_bytes=len(out),
                                stderr_bytes=len(err), wall_time=0.0, peak_memory=None,
                                limits_enforced_by="rlimit", raw={}, **kw)
        self.assertEqual(result("exited", 0, out="o\n").as_tool_output(), "o\n")
        self.assertEqual(result("exited", 0).as_tool_output(), "(no output)")
        self.assertEqual(result("exited", 1, err="e" * 5000,
                                reason="exited with status 1").as_tool_output(),
                         "exited with status 1\n[stderr]\n" + "e" * 4000 + "\n[stderr cut for "
                         "this output: the first 4000 characters are shown]")
        self.assertEqual(result("exited", 1, err="e" * 50, reason="exited with status 1")
                         .as_tool_output(max_chars=10),
                         "exited with status 1\n[stderr]\n" + "e" * 10 + "\n[stderr cut for "
                         "this output: the first 10 characters are shown]")
        # Without a reason (an nsbox older than the field), the status words stand in.
        self.assertEqual(result("oom", 137).as_tool_output(),
                         "status oom, exit status 137\n[no output]")

    def test_tool_output_passes_on_the_warnings_that_explain_the_outcome(self):
        # A full /work (or /dev/shm, or a workspace not saved) is in nsbox's warnings: the
        # model must see the option to change; the rlimit fallback is the host's, not its.
        full = ("the working directory /work was full when the payload ended (8 MiB used): "
                "writes there failed with ENOSPC (No space left on device); raise "
                "--workdir-size (now 8 MiB)")
        fallback = "limits are enforced with rlimits, not a cgroup: no cgroup v2 here"
        r = nsbox.Result.from_json(json_result(status="exited", exit_code=1, stderr="OSError\n",
                                               reason="exited with status 1",
                                               warnings=[fallback, full]))
        text = r.as_tool_output()
        self.assertIn(f"[{full}]", text)
        self.assertNotIn("rlimits", text)

    def test_peak_memory_only_from_a_memory_cgroup(self):
        # A leaf without the memory controller says memory_peak 0: that is no measurement.
        cg = {"path": "/x", "memory_peak": 0, "oom_kills": 0}
        r = nsbox.Result.from_json(json_result(cgroup=cg, limits={
            "memory": {"bytes": None, "enforced_by": "none"}}))
        self.assertIsNone(r.peak_memory)
        r = nsbox.Result.from_json(json_result(cgroup=dict(cg, memory_peak=4096), limits={
            "memory": {"bytes": 1 << 28, "enforced_by": "cgroup"}}))
        self.assertEqual(r.peak_memory, 4096)

    def test_tool_output_format(self):
        r = nsbox.Result.from_json(json_result(status="exited", exit_code=2, stdout="a\x1b[0m\n",
                                               stderr="b", reason="exited with status 2",
                                               notes=["n1", "n2"]))
        self.assertEqual(r.as_tool_output(format="{status}/{exit_code}: {reason}|{stdout}|"
                                                 "{stderr}|{notes}"),
                         "exited/2: exited with status 2|a\\x1b[0m\n|b|n1\nn2")
        self.assertEqual(r.as_tool_output(format=lambda res: f"code {res.exit_code}"), "code 2")

        class Short(nsbox.Result):
            def as_tool_output(self, format=None, max_chars=nsbox.TOOL_OUTPUT_LIMIT):
                return "ok" if self.ok else super().as_tool_output(format, max_chars)
        self.assertEqual(Short.from_json(json_result()).as_tool_output(), "ok")

    def test_oom_in_a_cgroup_from_json(self):
        # The cgroup OOM killer needs a cgroup (the VM suite); the text is built from the JSON
        # nsbox prints there.
        r = nsbox.Result.from_json(json_result(
            status="oom", exit_code=137, signal=9, wall_time_ms=412.0,
            reason="stopped: out of memory (limit 256 MiB, after 0.412 s); the cgroup's OOM "
                   "killer killed the payload",
            limit={"name": "memory", "value": 268435456, "unit": "bytes",
                   "enforced_by": "cgroup", "stopped": True},
            limits_enforced_by="cgroup",
            cgroup={"path": "/x", "memory_peak": 268435456, "oom_kills": 1,
                    "pids_limit_hits": 0, "cpu_user_usec": 1, "cpu_system_usec": 1}))
        self.assertEqual(r.as_tool_output(),
                         "stopped: out of memory (limit 256 MiB, after 0.412 s); the cgroup's OOM "
                         "killer killed the payload\n[no output]")
        self.assertEqual((r.limit["name"], r.limit["value"], r.peak_memory),
                         ("memory", 256 << 20, 256 << 20))

    def test_pids_limit_in_a_cgroup_from_json(self):
        r = nsbox.Result.from_json(json_result(
            status="exited", exit_code=1, stderr="BlockingIOError: [Errno 11]\n",
            reason="exited with status 1",
            limit={"name": "pids", "value": 4, "unit": "processes", "enforced_by": "cgroup",
                   "stopped": False},
            notes=["the process limit (--pids-limit 4) refused 1 forks"]))
        self.assertEqual(r.as_tool_output(),
                         "exited with status 1\n[stderr]\nBlockingIOError: [Errno 11]\n"
                         "[the process limit (--pids-limit 4) refused 1 forks]")

    def test_bad_output_never_breaks_the_tool_text(self):
        # Whatever the JSON holds (nsbox already made it valid UTF-8): controls are visible,
        # the text bounded.
        nasty = "\x00\x1b]0;title\x07\x1b[2J\r\x9b\ufffd" * 100_000
        r = nsbox.Result.from_json(json_result(status="exited", exit_code=0, stdout=nasty,
                                               stderr=nasty, reason="exited with status 0"))
        text = r.as_tool_output()
        self.assertLess(len(text), 2 * 4 * nsbox.TOOL_OUTPUT_LIMIT + 500)
        self.assertNotRegex(text, "[\x00-\x08\x0b-\x1f\x7f-\x9f]")
        self.assertIn("\\x1b]0;title\\x07", text)
        text.encode("utf-8")  # valid

    def test_result_fields(self):
        r = nsbox.Result.from_json(json_result(
            reason="timed out after 1 s; the sandbox was killed", status="timeout",
            limit={"name": "timeout", "value": 1.0, "unit": "seconds",
                   "enforced_by": "supervisor", "stopped": True}, notes=["n"]))
        self.assertEqual((r.reason, r.limit["name"], r.notes),
                         ("timed out after 1 s; the sandbox was killed", "timeout", ["n"]))
        with self.assertRaises(TypeError):
            nsbox.Result.from_json(json_result(limit="timeout"))

    def test_nsbox_error_as_tool_output(self):
        e = nsbox.NsboxError("rootfs '/x': No such file or directory\x1b", step="rootfs")
        self.assertEqual(e.as_tool_output(), "nsbox could not run the code: rootfs '/x': No such "
                                             "file or directory\\x1b")

    def test_version_matches_pyproject(self):
        with open(HERE.parent / "pyproject.toml") as f:
            self.assertIn(f'\nversion = "{nsbox.__version__}"\n', f.read())


def json_result(**fields):
    """A JSON result as nsbox prints it, with fields overridden."""
    raw = {"status": "exited", "exit_code": 0, "signal": None, "wall_time_ms": 10.0,
           "stdout": "", "stderr": "", "stdout_bytes": 0, "stderr_bytes": 0,
           "stdout_truncated": False, "stderr_truncated": False, "error": None,
           "limits": {}, "limits_enforced_by": "rlimit", "reason": "exited with status 0",
           "limit": None, "notes": [], "warnings": [], "seccomp_refused": [], "cgroup": None}
    raw.update(fields)
    raw["stdout_bytes"] = raw["stdout_bytes"] or len(raw["stdout"].encode())
    raw["stderr_bytes"] = raw["stderr_bytes"] or len(raw["stderr"].encode())
    return raw


if __name__ == "__main__":
    unittest.main()
