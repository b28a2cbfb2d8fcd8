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
import os
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
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
        self.assertEqual(r.as_tool_output(), "SUCCESS OUTPUT:\nhello world\n")
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
        self.assertEqual(r.as_tool_output(), "EXECUTION ERROR:\nboom")

    def test_exception(self):
        r = self.code("raise ValueError('bad value')")
        self.assertEqual(r.exit_code, 1)
        self.assertIn("ValueError: bad value", r.stderr)
        self.assertTrue(r.as_tool_output().startswith("EXECUTION ERROR:\nTraceback"))

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
        self.assertEqual(r.as_tool_output(), "EXECUTION ERROR:\nTimed out")

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
        self.assertEqual(r.as_tool_output(), "SUCCESS OUTPUT:\n" + "x" * 4000)

    def test_output_limit(self):
        r = self.code("import sys; print('y' * 50); sys.stderr.write('z' * 50)", output_limit=10)
        self.assertEqual(r.stdout, "y" * 10)
        self.assertEqual(r.stderr, "z" * 10)
        self.assertTrue(r.truncated)

    def test_files_visible_read_only(self):
        r = self.code("""
            import os
            print(open('/work/files/data.txt').read())
            print(open('/work/files/sub/blob.bin', 'rb').read())
            print(sorted(os.listdir('/work/files')))
            try:
                open('/work/files/data.txt', 'w')
                print('WRITABLE')
            except OSError as e:
                print('read-only', e.errno)
            try:
                open('/work/files/new.txt', 'w')
                print('CREATED')
            except OSError as e:
                print('no create', e.errno)
            """, files={"data.txt": "hello files", "sub/blob.bin": b"\x00\x01\xff"})
        self.assertTrue(r.ok, r.stderr)
        self.assertEqual(r.stdout.splitlines()[:3],
                         ["hello files", "b'\\x00\\x01\\xff'", "['data.txt', 'sub']"])
        self.assertNotIn("WRITABLE", r.stdout)
        self.assertNotIn("CREATED", r.stdout)
        self.assertIn("read-only 30", r.stdout)  # EROFS

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
        if os.geteuid() == 0:
            self.assertEqual((seen["files"], seen["files/sub"], seen["files/sub/f"]),
                             (0o755, 0o755, 0o644))
        else:
            self.assertEqual((seen["files"], seen["files/sub"], seen["files/sub/f"]),
                             (0o700, 0o700, 0o600))

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
        self.assertTrue(r.as_tool_output().startswith("EXECUTION ERROR:\n"))

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
        r = self.code("""
            try:
                with open('/work/persisted.txt', 'w') as f:
                    f.write('x')
                print('PERSISTED')
            except OSError as e:
                print('blocked', e.errno)
            with open('/tmp/scratch.txt', 'w') as f:
                f.write('x')
            """)
        self.assertTrue(r.ok, r.stderr)
        self.assertNotIn("PERSISTED", r.stdout)
        self.assertIn("blocked", r.stdout)
        # /tmp is writable, but dies with the run.
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

    def test_clean_environment_for_nsbox(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "env.txt")
            fake = fake_nsbox(d, f"/usr/bin/env > '{out}'\n")
            # The user bus's address and runtime directory pass (nsbox asks the systemd user
            # manager there for a delegated cgroup); nothing else of the caller's does.
            bus = {"XDG_RUNTIME_DIR": "/run/user/4242",
                   "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/4242/bus"}
            with mock.patch.dict(os.environ, {"AWS_SECRET_ACCESS_KEY": CANARY,
                                              "HOME": "/root-or-not", **bus}):
                with self.assertRaises(nsbox.NsboxError):
                    nsbox.run_python_code("pass", nsbox=fake)
            with open(out) as f:
                seen = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
        self.assertIn("PATH", seen)
        self.assertEqual({k: seen.get(k) for k in bus}, bus)
        self.assertLessEqual(set(seen), {"PATH", "NSBOX_ROOTFS", "XDG_RUNTIME_DIR",
                                         "DBUS_SESSION_BUS_ADDRESS", "PWD", "SHLVL", "_",
                                         "OLDPWD"})

    def test_tool_output_strings(self):
        def result(status, code, out="", err=""):
            return nsbox.Result(status=status, exit_code=code, signal=None, stdout=out,
                                stderr=err, truncated=False, stdout_bytes=len(out),
                                stderr_bytes=len(err), wall_time=0.0, peak_memory=None,
                                limits_enforced_by="rlimit", raw={})
        self.assertEqual(result("timeout", 124, err="x").as_tool_output(),
                         "EXECUTION ERROR:\nTimed out")
        self.assertEqual(result("exited", 1, err="e" * 5000).as_tool_output(),
                         "EXECUTION ERROR:\n" + "e" * 4000)
        self.assertEqual(result("oom", 137, err="").as_tool_output(), "EXECUTION ERROR:\n")
        self.assertEqual(result("exited", 0, out="o" * 5000).as_tool_output(),
                         "SUCCESS OUTPUT:\n" + "o" * 4000)


if __name__ == "__main__":
    unittest.main()
