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
import tempfile
import textwrap
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from unittest import mock

from tests.support import (CANARY, NSBOX, SandboxTestCase, bare_python,  # noqa: E402
                           processes_with)
import nsbox  # noqa: E402
from nsbox import _runner  # noqa: E402


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

    def test_landlock(self):
        # What Landlock restricted, as the JSON says; --landlock goes through extra_args.
        r = self.code("pass")
        self.assertEqual(r.landlock, r.raw["landlock"])
        if r.landlock is not None:
            self.assertIn("fs", r.landlock["restricts"])
        r = self.code("pass", extra_args=["--landlock", "off"])
        self.assertIsNone(r.landlock)
        self.assertTrue(any(w.startswith("--landlock off") for w in r.warnings), r.warnings)

    def test_isolation(self):
        # The tier the run got, as the JSON says; isolation= is --isolation.
        r = self.code("pass", isolation="full")
        self.assertEqual(r.isolation, r.raw["isolation"])
        self.assertEqual(r.isolation, {"tier": 1, "missing": []})
        # landlock takes tier 3 only where no user namespace can be made: here, tier 1.
        r = self.code("pass", isolation="landlock")
        self.assertEqual(r.isolation, {"tier": 1, "missing": []})
        with self.assertRaises(ValueError):
            self.code("pass", isolation="landlocked")
        # Sessions and pools take it too, checked before anything starts.
        with self.assertRaises(ValueError):
            nsbox.Session(isolation="landlocked")
        with self.assertRaises(ValueError):
            nsbox.Pool(isolation="landlocked")

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
                         "timed out after 1 s; the sandbox was killed\n[no output]\n"
                         "[the program ran until its time limit (timeout=1 s) and was killed: "
                         "if it needs longer, raise timeout=; if it should have ended sooner, "
                         "look for an endless loop or a read that waits for input (stdin is "
                         "empty unless given) or for the network (none unless allowed)]")

    def test_fractional_timeout(self):
        r = self.code("import time; time.sleep(5)", timeout=0.5)
        self.assertEqual(r.status, "timeout")
        self.assertLess(r.wall_time, 3)

    def test_output_truncated(self):
        r = self.code("print('x' * 100000)")
        self.assertTrue(r.ok)
        self.assertTrue(r.truncated)
        # The first and the last 2000 bytes, and where and how much was cut between them.
        self.assertEqual(r.stdout, "x" * 3999 + "\n")
        self.assertEqual(r.stdout_cut, {"bytes": 96001, "lines": 0, "at": 2000})
        self.assertEqual(r.stdout_bytes, 100001)
        self.assertEqual(r.as_tool_output(), "exited with status 0\n[stdout]\n" + "x" * 2000 +
                         "\n[... 96,001 bytes, 0 lines cut ...]\n" + "x" * 1999 +
                         "\n[stdout cut: kept its first 2000 and last 2000 of 100001 bytes; "
                         "96001 bytes (0 lines) between them were cut (output_limit=)]")

    def test_output_limit(self):
        r = self.code("import sys; print('y' * 50); sys.stderr.write('z' * 50)", output_limit=10)
        self.assertEqual(r.stdout, "y" * 9 + "\n")
        self.assertEqual(r.stderr, "z" * 10)
        self.assertEqual(r.stderr_cut, {"bytes": 40, "lines": 0, "at": 5})
        self.assertTrue(r.truncated)

    def test_files_are_copies_in_the_writable_workdir(self):
        """files= are copied in (--copy-in), never bound: the code may change its copies."""
        # In the working directory, under their names, where code looks for them.
        r = self.code("""
            import os
            print(open('data.txt').read())
            print(open('sub/blob.bin', 'rb').read())
            print(os.getcwd(), sorted(os.listdir('.')))
            open('data.txt', 'w').write('changed')
            open('new.txt', 'w')
            print('CHANGED', open('/proc/self/mountinfo').read().count('data.txt'))
            """, files={"data.txt": "hello files", "sub/blob.bin": b"\x00\x01\xff"})
        self.assertTrue(r.ok, r.stderr)
        self.assertEqual(r.stdout.splitlines()[:3],
                         ["hello files", "b'\\x00\\x01\\xff'",
                          "/work ['data.txt', 'main.py', 'sub']"])
        self.assertIn("CHANGED 0", r.stdout)  # no mount: a copy, not a bind

    def test_temporary_files_removed(self):
        made = []
        real_mkdtemp = tempfile.mkdtemp

        def mkdtemp(*a, **kw):
            made.append(real_mkdtemp(*a, **kw))
            return made[-1]

        with mock.patch.object(_runner.tempfile, "mkdtemp", side_effect=mkdtemp):
            r = self.code("import sys; print(sys.stdin.read(), open('f').read())",
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
                                 "print(sys.stdin.read(), open('sub/f').read())",
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
        r = self.code("import os; print(os.listdir('.'))", files={})
        self.assertEqual(r.stdout, "['main.py']\n")

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
        r = self.run_argv(["cat", "x"], files={"x": "bound"})
        self.assertEqual(r.stdout, "bound")
        r = self.run_argv(["sh", "-c", "exit 7"])
        self.assertEqual((r.status, r.exit_code), ("exited", 7))

    def test_extra_args(self):
        r = self.code("import os; print(os.getuid())", extra_args=["--user", "1000"])
        self.assertEqual(r.stdout, "1000\n")

    def test_warnings(self):
        r = self.code("pass", extra_args=["--env-inherit"])
        self.assertTrue(any(w.startswith("--env-inherit") for w in r.warnings), r.warnings)
        self.assertEqual(r.outcome_warnings, [])
        r = self.code("pass", extra_args=["--cgroup", "off"])
        self.assertEqual(r.warnings, [])

    def test_outcome_warnings_reach_the_model_host_ones_do_not(self):
        """nsbox marks the warnings that explain an outcome (a full /work): as_tool_output()
        passes those on; an opt-out (the caller's, not the program's) stays out."""
        r = self.code("open('big', 'wb').write(b'x' * (3 << 20))",
                      extra_args=["--env-inherit", "--workdir-size", "2m", "--cgroup", "off"])
        full = [w for w in r.warnings if "raise --workdir-size" in w]
        self.assertEqual(len(full), 1, r.warnings)
        self.assertEqual(r.outcome_warnings, full)
        text = r.as_tool_output()
        self.assertIn(full[0], text)
        self.assertNotIn("--env-inherit", text)

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


if __name__ == "__main__":
    unittest.main()
