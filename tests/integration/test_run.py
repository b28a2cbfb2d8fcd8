# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox run: identity, filesystem, environment, descriptors, limits, results, teardown and bad
input, against the real binary and rootfs."""
import json
import os
import re
import secrets
import signal
import subprocess
import tempfile
import time
import unittest

from nsboxtest import (NSBOX, NsboxTestCase, new_nsbox_tmp_entries, nsbox, nsbox_json,
                       processes_with, tmp_snapshot, wait_until,
                       without_fallback_warning)


def py(code, *opts, **kw):
    """Run python3 -c CODE in the sandbox with --json."""
    return nsbox_json(*opts, "--", "python3", "-c", code, **kw)


class TestIdentityAndPrivileges(NsboxTestCase):
    def test_runs_as_nobody_with_no_capabilities(self):
        p, r = py("print(open('/proc/self/status').read()); print(open('/proc/self/uid_map').read())")
        self.assertEqual(r["status"], "exited", p.stderr)
        status = dict(l.split(":\t", 1) for l in r["stdout"].splitlines() if ":\t" in l)
        self.assertEqual(status["Uid"].split()[0], "65534")
        self.assertEqual(status["Gid"].split()[0], "65534")
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(int(status[cap], 16), 0, f"{cap} = {status[cap]}")
        self.assertEqual(status["NoNewPrivs"].strip(), "1")
        self.assertEqual(status["Seccomp"].strip(), "2")
        # One id mapped; root's sandbox lands on ids of its own from nsbox's range (never the
        # host's nobody, test_hostids.py), a user's on themself.
        uid_map = [l.split() for l in r["stdout"].splitlines() if re.match(r"^\s*\d+\s+\d+\s+\d+\s*$", l)]
        self.assertEqual(len(uid_map), 1)
        inside, outside, count = map(int, uid_map[0])
        self.assertEqual((inside, count), (65534, 1))
        self.assertEqual(outside, r["host_uid"])
        if os.geteuid() == 0:
            self.assertTrue(0x7E000000 <= outside < 0x7E000000 + 4096, outside)
        else:
            self.assertEqual(outside, os.geteuid())

    def test_user_option_changes_inside_ids(self):
        p, r = py("import os; print(os.getuid(), os.getgid())", "--user", "1000:2000")
        self.assertEqual(r["stdout"].strip(), "1000 2000", p.stderr)

    def test_pid_namespace_and_hostname(self):
        p, r = py("import os; print(os.getpid(), sorted(int(x) for x in os.listdir('/proc') if x.isdigit()), os.uname().nodename)")
        pid, rest = r["stdout"].split(" ", 1)
        self.assertEqual(pid, "2", "the payload is PID 2 under nsbox's init")
        self.assertIn("[1, 2]", rest)
        self.assertTrue(rest.strip().endswith("nsbox"))

    def test_no_network_interfaces_but_loopback(self):
        p, r = py("print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))")
        self.assertEqual(r["stdout"].strip(), "['lo']", p.stderr)

    def test_network_loopback(self):
        # The payload serves and connects to itself on 127.0.0.1 and ::1 ...
        code = ("import socket, threading\n"
                "def echo(fam, addr):\n"
                "    s = socket.socket(fam); s.bind((addr, 0)); s.listen()\n"
                "    def serve():\n"
                "        c, _ = s.accept(); c.sendall(c.recv(64).upper()); c.close()\n"
                "    t = threading.Thread(target=serve); t.start()\n"
                "    c = socket.create_connection((addr, s.getsockname()[1]), timeout=5)\n"
                "    c.sendall(b'hello ' + addr.encode()); print(c.recv(64).decode()); t.join()\n"
                "echo(socket.AF_INET, '127.0.0.1')\necho(socket.AF_INET6, '::1')\n")
        p, r = py(code, "--network", "loopback")
        self.assertEqual(r["stdout"], "HELLO 127.0.0.1\nHELLO ::1\n", r["stderr"])
        # Not an opt-out: its one warning is about socket buffers when no cgroup holds them.
        expected = ([] if r["limits_enforced_by"] == "cgroup" else
                    ["--network loopback without a cgroup: socket buffers are outside --memory, "
                     "so the payload can use up the host's TCP memory (tcp_mem) while it runs; a "
                     "cgroup leaf counts them"])
        self.assertEqual([w for w in r["warnings"] if "network" in w], expected)
        # ... which the default refuses (no AF_INET sockets, lo down) ...
        p, r = py(code)
        self.assertIn("PermissionError", r["stderr"])
        # ... and reaches nothing of the host: a listener on the host's own 127.0.0.1 is
        # refused, as it is not under --network host (the probe's control).
        import socket
        with socket.socket() as host:
            host.bind(("127.0.0.1", 0))
            host.listen()
            probe = ("import socket\ntry:\n"
                     f"    socket.create_connection(('127.0.0.1', {host.getsockname()[1]}), timeout=5)"
                     "; print('reached')\n"
                     "except OSError as e:\n    print(type(e).__name__)\n")
            p, r = py(probe, "--network", "loopback")
            self.assertEqual(r["stdout"], "ConnectionRefusedError\n", r["stderr"])
            p, r = py(probe, "--network", "host")
            self.assertEqual(r["stdout"], "reached\n", r["stderr"])
        p, r = py("print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))",
                  "--network", "loopback")
        self.assertEqual(r["stdout"].strip(), "['lo']", p.stderr)

    def test_nested_namespaces_and_mount_refused(self):
        code = ("import ctypes, os\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n"
                "print('mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())\n"
                "print('ptrace', libc.ptrace(16, 1, 0, 0), ctypes.get_errno())\n")
        p, r = py(code)
        self.assertEqual(r["status"], "exited", r["stderr"])
        self.assertIn("unshare -1 1\n", r["stdout"])  # EPERM
        self.assertIn("mount -1 1\n", r["stdout"])
        self.assertIn("ptrace -1 1\n", r["stdout"])

    def test_filter_arguments_and_abis(self):
        # Each call below fails differently without the filter (ENOTTY on /dev/null, EINVAL
        # for a zero-sized clone3, a new child for clone): the errno proves the filter refused.
        code = ("import ctypes\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p]\n"
                "libc.syscall.restype = ctypes.c_long\n"
                "TIOCSTI = 0x5412\n"
                "print('tiocsti', libc.ioctl(0, TIOCSTI, b'x'), ctypes.get_errno())\n"
                "print('tiocsti-high', libc.ioctl(0, TIOCSTI | (1 << 32), b'x'), ctypes.get_errno())\n"
                "print('tiocgwinsz', libc.ioctl(0, 0x5413, b'x' * 8), ctypes.get_errno())\n"
                "print('clone3', libc.syscall(435, None, 0), ctypes.get_errno())\n"
                "print('clone-newuser', libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0), ctypes.get_errno())\n"
                "print('clone-newnet', libc.syscall(56, 0x40000000 | 17, 0, 0, 0, 0), ctypes.get_errno())\n"
                "print('vsock', libc.socket(40, 1, 0), ctypes.get_errno(), flush=True)\n"
                "libc.syscall(0x40000000 + 39)  # getpid through the x32 ABI\n"
                "print('x32 allowed')\n")
        p, r = py(code)
        lines = r["stdout"].splitlines()
        self.assertEqual(lines, ["tiocsti -1 1", "tiocsti-high -1 1", "tiocgwinsz -1 25",
                                 "clone3 -1 38", "clone-newuser -1 1", "clone-newnet -1 1",
                                 "vsock -1 1"],
                         r["stderr"])
        # A foreign ABI kills the process (SIGSYS), it does not just fail.
        self.assertEqual((r["status"], r["signal"]), ("signaled", signal.SIGSYS))


class TestFilesystem(NsboxTestCase):
    def test_layout(self):
        code = ("import os\n"
                "print(sorted(os.listdir('/dev')))\n"
                "print(os.path.exists('/sys'), os.getcwd())\n"
                "for p in ('/', '/usr', '/etc', '/dev', '/work'):\n"
                "    try:\n"
                "        open(os.path.join(p, 'x'), 'w'); print(p, 'writable')\n"
                "    except OSError as e: print(p, e.errno)\n"
                "open('/tmp/x', 'w').write('ok'); open('/dev/shm/x', 'w').write('ok'); print('tmp ok')\n"
                "print(open('/dev/null').read() == '', len(open('/dev/urandom','rb').read(8)))\n")
        p, r = py(code)
        lines = r["stdout"].splitlines()
        self.assertEqual(lines[0], str(sorted(["fd", "full", "null", "ptmx", "pts", "random", "shm",
                                              "stderr", "stdin", "stdout", "urandom", "zero"])))
        self.assertEqual(lines[1], "False /work")
        for l in lines[2:6]:
            self.assertTrue(l.endswith(" 30"), f"expected EROFS: {l}")
        self.assertEqual(lines[6], "/work writable")  # the working directory (issue #17)
        self.assertIn("tmp ok", lines)
        self.assertIn("True 8", lines)

    def test_tmp_is_size_capped(self):
        code = ("try:\n"
                "    open('/tmp/big', 'wb').write(b'x' * (20 << 20)); print('wrote')\n"
                "except OSError as e: print('full', e.errno)\n")
        p, r = py(code)
        self.assertEqual(r["stdout"].strip(), "full 28", p.stderr)  # ENOSPC at 16m
        p, r = py(code, "--tmpfs", "/tmp:size=32m")
        self.assertEqual(r["stdout"].strip(), "wrote", p.stderr)

    def test_tmpfs_inodes_are_capped(self):
        # Empty files cost kernel memory but no bytes: nr_inodes bounds them (1 per KiB).
        code = ("import os\n"
                "try:\n"
                "    for i in range(100000): os.close(os.open(f'/tmp/f{i}', os.O_CREAT | os.O_WRONLY))\n"
                "except OSError as e: print(e.errno, len(os.listdir('/tmp')))\n")
        p, r = py(code, "--tmpfs", "/tmp:size=4m")
        self.assertEqual(r["stdout"].split(), ["28", str(4096 - 1)], r["stderr"])

    def test_mount_targets_through_symlinks_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o777)
            # An earlier run plants a link in a writable bind...
            p, r = py("import os; os.symlink('/proc/sys/kernel', '/mnt/cfg')", "-v", f"{d}:/mnt:rw")
            self.assertEqual(r["status"], "exited", r)
            # ...a later run must not follow it to place a mount.
            p = nsbox("run", "-v", f"{d}:/tmp/ws:rw", "-v", "/etc/hostname:/tmp/ws/cfg/hostname",
                      "--", "true")
            self.assertOneLineError(p, contains="goes through a symlink")

    def test_writable_bind_on_work(self):
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o777)
            p, r = py("open('/work/out', 'w').write('x'); print('ok')", "-v", f"{d}:/work:rw")
            self.assertEqual(r["stdout"], "ok\n", r)
            self.assertTrue(os.path.exists(os.path.join(d, "out")))

    def test_code_is_read_only_main_py(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write("import os, sys\nprint(os.listdir('/work'), sys.argv[1:])\n"
                    "print(oct(os.stat('/work/main.py').st_mode & 0o777))\n")
            f.flush()
            os.chmod(f.name, 0o644)
            p, r = nsbox_json("--code", f.name, "--", "a", "b")
        self.assertEqual(r["stdout"].splitlines(), ["['main.py'] ['a', 'b']", "0o444"], p.stderr)

    def test_code_from_stdin(self):
        p, r = nsbox_json("--code", "-", input="print(6 * 7)\n")
        self.assertEqual(r["stdout"], "42\n", p.stderr)

    def test_volumes(self):
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o777)
            with open(os.path.join(d, "in.txt"), "w") as f:
                f.write("from host")
            os.chmod(os.path.join(d, "in.txt"), 0o666)
            code = ("print(open('/data/in.txt').read())\n"
                    "try:\n    open('/data/out.txt', 'w').write('x'); print('written')\n"
                    "except OSError as e: print('ro', e.errno)\n")
            p, r = py(code.replace("/data", "/mnt"), "-v", f"{d}:/mnt")
            self.assertEqual(r["stdout"].splitlines(), ["from host", "ro 30"], p.stderr)
            p, r = py(code.replace("/data", "/tmp/deep/data"), "-v", f"{d}:/tmp/deep/data:ro")
            self.assertEqual(r["stdout"].splitlines(), ["from host", "ro 30"], p.stderr)
            p, r = py(code.replace("/data", "/tmp/rw"), "-v", f"{d}:/tmp/rw:rw")
            self.assertEqual(r["stdout"].splitlines(), ["from host", "written"], p.stderr)
            self.assertTrue(os.path.exists(os.path.join(d, "out.txt")))


class TestEnvironmentAndDescriptors(NsboxTestCase):
    def test_signals_the_caller_ignored_are_default_in_the_payload(self):
        # Ignored signals survive fork and execve (signal(7)): init resets those it finds in its
        # SigIgn and SigCgt (/proc/self/status), for itself and the payload.
        ignored = (signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGTERM, signal.SIGRTMIN + 5)

        def ignore():
            for sig in ignored:
                signal.signal(sig, signal.SIG_IGN)

        def sig_ign(argv):
            p = subprocess.run(argv, capture_output=True, text=True, preexec_fn=ignore, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            line = next(l for l in p.stdout.splitlines() if l.startswith("SigIgn:"))
            return int(line.split()[1], 16)

        mask = sum(1 << (sig - 1) for sig in ignored)
        # Control: without nsbox the payload inherits them.
        self.assertEqual(sig_ign(["cat", "/proc/self/status"]) & mask, mask)
        self.assertEqual(sig_ign([NSBOX, "run", "--cgroup", "off", "--", "cat",
                                  "/proc/self/status"]), 0)

    def test_env_is_cleared_and_extended(self):
        env = dict(os.environ, PASSED_THROUGH="yes", NOT_PASSED="no")
        p, r = py("import os; print(sorted(os.environ.items()))",
                  "-e", "FOO=bar", "-e", "PASSED_THROUGH", "-e", "HOME=/work", env=env)
        items = dict(eval(r["stdout"]))
        # The thread counts follow --cpus (default 0.5: one CPU); see test_rootfs.py.
        self.assertEqual(items, {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/work",
                                 "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "FOO": "bar",
                                 "PASSED_THROUGH": "yes", "OPENBLAS_NUM_THREADS": "1",
                                 "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})

    def test_env_file_and_env_fd(self):
        # --env-file: Docker's KEY=VALUE lines; --env-fd: NUL-ended records on a descriptor,
        # whose values may hold newlines, read once and closed (the payload never gets it,
        # even with --keep-fds). A later entry wins, as with -e.
        code = ("import os; print(sorted((k, v) for k, v in os.environ.items() "
                "if k in ('A', 'B', 'C', 'MULTI', 'PASSED')))")
        env = dict(os.environ, PASSED="from nsbox")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "env")
            with open(path, "w") as f:
                f.write("# a comment\n\nA=1\n  B=two words = ok\nPASSED\nC=from file\n")
            os.chmod(d, 0o755)
            os.chmod(path, 0o644)
            r_fd, w_fd = os.pipe()
            os.write(w_fd, b"MULTI=line 1\nline 2\0C=from fd\0")
            os.close(w_fd)
            try:
                p, r = py(code, "--env-file", path, f"--env-fd={r_fd}", "--keep-fds",
                          env=env, pass_fds=(r_fd,))
            finally:
                os.close(r_fd)
            self.assertEqual(eval(r["stdout"]), [("A", "1"), ("B", "two words = ok"),
                                                 ("C", "from fd"),
                                                 ("MULTI", "line 1\nline 2"),
                                                 ("PASSED", "from nsbox")], p.stderr)
            with open(path, "w") as f:
                f.write("A=1\nBAD KEY=x\n")
            p = nsbox("run", "--env-file", path, "--", "true")
            self.assertEqual(p.returncode, 125)
            self.assertIn(f"--env-file {path}:2: expected KEY=VALUE or KEY", p.stderr)
        r_fd, w_fd = os.pipe()
        os.write(w_fd, b"A=1\0NOT-ENDED=x")
        os.close(w_fd)
        try:
            p = nsbox("run", "--env-fd", str(r_fd), "--", "true", pass_fds=(r_fd,))
        finally:
            os.close(r_fd)
        self.assertEqual(p.returncode, 125)
        self.assertIn("record 2 is not ended by a NUL byte", p.stderr)

    def test_only_stdio_descriptors(self):
        r_fd, w_fd = os.pipe()  # inheritable in nsbox: must not reach the payload
        os.set_inheritable(r_fd, True)
        try:
            p, r = py("import os; print(sorted(int(x) for x in os.listdir('/proc/self/fd')))",
                      pass_fds=(r_fd,))
        finally:
            os.close(r_fd)
            os.close(w_fd)
        # 0, 1, 2 and the descriptor listdir itself uses.
        self.assertEqual(r["stdout"].strip(), "[0, 1, 2, 3]", p.stderr)

    def test_closed_stdio_of_nsbox(self):
        # nsbox started with stdin and stdout closed: the payload still gets its own 0, 1, 2.
        p = subprocess.run(
            f"exec 0<&- 1>&-; {NSBOX} run -- python3 -c 'import os,sys; "
            f"sys.stderr.write(str(sorted(int(x) for x in os.listdir(\"/proc/self/fd\"))))'",
            shell=True, capture_output=True, text=True, timeout=30)
        self.assertEqual((p.returncode, without_fallback_warning(p.stderr)), (0, "[0, 1, 2, 3]"))

    def test_stdin_is_relayed_not_shared(self):
        # The payload gets a copy of nsbox's stdin through a socket, never the descriptor
        # itself (which could be the caller's terminal): here a file it cannot seek or write.
        with tempfile.TemporaryFile() as f:
            f.write(os.urandom(3_000_000))
            f.seek(0)
            data = f.read()
            f.seek(0)
            code = ("import hashlib, os, stat, sys\n"
                    "print(stat.S_ISSOCK(os.fstat(0).st_mode))\n"
                    "try:\n    os.write(0, b'x'); print('wrote')\nexcept OSError as e: print('write', e.errno)\n"
                    "print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())\n")
            p = subprocess.run([NSBOX, "run", "--json", "--stdin", "--", "python3", "-c", code],
                               stdin=f, capture_output=True, text=True, timeout=60)
        import hashlib, json
        r = json.loads(p.stdout)
        self.assertEqual(r["stdout"].split(), ["True", "write", "32", hashlib.sha256(data).hexdigest()], r)

    def test_init_shows_no_nsbox_arguments(self):
        canary = "CANARY-" + secrets.token_hex(6)
        p, r = py("print(repr(open('/proc/1/cmdline', 'rb').read().strip(b'\\0')))",
                  "-e", f"TOKEN={canary}", "--rootfs", os.environ.get("NSBOX_ROOTFS") or
                  os.path.realpath(os.path.join(os.path.dirname(NSBOX), "..", "rootfs", "tree")))
        self.assertEqual(r["stdout"], "b''\n", r)

    def test_stdin_is_dev_null_unless_asked(self):
        p, r = py("import sys; print(repr(sys.stdin.read()))", input="secret input")
        self.assertEqual(r["stdout"].strip(), "''")
        p, r = py("import sys; print(repr(sys.stdin.read()))", "--stdin", input="hello")
        self.assertEqual(r["stdout"].strip(), "'hello'")


class TestLimitsAndResults(NsboxTestCase):
    def test_exit_status_is_the_payload_s(self):
        p = nsbox("run", "--", "python3", "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)")
        self.assertEqual((p.returncode, p.stdout, without_fallback_warning(p.stderr)),
                         (3, "out\n", "err\n"))
        p, r = py("import os; os.kill(os.getpid(), 9)")
        self.assertEqual((p.returncode, r["status"], r["signal"], r["exit_code"]),
                         (137, "signaled", 9, 137))

    def test_timeout(self):
        start = time.monotonic()
        p, r = py("while True: pass", "--timeout", "1")
        elapsed = time.monotonic() - start
        self.assertEqual((p.returncode, r["status"], r["exit_code"]), (124, "timeout", 124))
        self.assertGreaterEqual(elapsed, 0.9)
        self.assertLess(elapsed, 3.0)
        p = nsbox("run", "--timeout", "0.5", "--", "python3", "-c", "import time; time.sleep(5)")
        self.assertEqual(p.returncode, 124)
        self.assertIn("timed out", p.stderr)

    def test_durations_take_docker_units(self):
        # As the README writes them: 300ms, 10m (the session example's --idle-timeout).
        p, r = py("while True: pass", "--timeout", "300ms")
        self.assertEqual((r["status"], r["reason"]),
                         ("timeout", "timed out after 0.3 s; the sandbox was killed"))
        p, r = py("print(1)", "--timeout", "10m")
        self.assertEqual((r["status"], r["limits"]["timeout"]["seconds"]), ("exited", 600), r)

    def test_cpu_time_under_rlimits(self):
        # Without a cgroup, --cpus is CPU time: cpus x timeout seconds, then SIGXCPU. 2 s of CPU
        # in 8 s of wall time: a busy loop gets there well before the timeout even on a loaded
        # host (a quarter of a core), and ends there.
        # (The exit status says which came first; no wall-clock bound of its own, which a
        # loaded host's scheduler can stretch.)
        p = nsbox("run", "--cgroup", "off", "--cpus", "0.25", "--timeout", "8", "--", "python3",
                  "-c", "while True: pass")
        self.assertEqual(p.returncode, 128 + signal.SIGXCPU)
        self.assertIn("nsbox: stopped: CPU time limit: the payload used up its 2 s of CPU time",
                      p.stderr)
        p = nsbox("run", "--cpus", "unlimited", "--timeout", "1", "--", "python3", "-c", "while True: pass")
        self.assertEqual(p.returncode, 124)

    def test_crash_under_rlimits_names_the_memory_rlimit(self):
        # RLIMIT_DATA can crash a program instead of giving MemoryError: a SIGSEGV says so when
        # --memory is an rlimit, and not when there is no memory limit.
        crash = ["--", "python3", "-c", "import ctypes; ctypes.string_at(0)"]
        p = nsbox("run", "--cgroup", "off", "--memory", "64m", *crash)
        self.assertEqual(p.returncode, 128 + signal.SIGSEGV, p.stderr)
        self.assertIn("died of SIGSEGV; if it ran out of memory: under rlimits, --memory 64m caps "
                      "its writable mappings (RLIMIT_DATA)", p.stderr)
        p = nsbox("run", "--cgroup", "off", "--memory", "unlimited", *crash)
        self.assertEqual(p.returncode, 128 + signal.SIGSEGV, p.stderr)
        self.assertNotIn("RLIMIT_DATA", p.stderr)

    def test_output_flood_is_capped_and_counted(self):
        start = time.monotonic()
        p, r = py("import sys\nfor _ in range(100): sys.stdout.write('x' * 1_000_000)\n"
                  "sys.stderr.write('e' * 10)")
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(r["status"], "exited", r["stderr"])
        self.assertEqual(r["stdout_bytes"], 100_000_000)
        # Half the limit from the start, half from the end (the last line ends with 'x').
        self.assertEqual((len(r["stdout"]), len(r["stdout_tail"])), (2000, 2000))
        self.assertEqual(r["stdout_cut"]["bytes"], 100_000_000 - 4000)
        self.assertTrue(r["stdout_truncated"])
        self.assertEqual((r["stderr"], r["stderr_bytes"], r["stderr_truncated"]), ("e" * 10, 10, False))
        p, r = py("print('y' * 100)", "--output-limit", "10")
        self.assertEqual((r["stdout"], r["stdout_tail"], r["stdout_bytes"]), ("y" * 5, "yyyy\n", 101))

    def test_a_stalled_reader_does_not_stop_the_clock(self):
        # Nobody reads nsbox's stdout: copying blocks, but the timeout still fires.
        proc = subprocess.Popen(
            [NSBOX, "run", "--output-limit", "1m", "--timeout", "1", "--", "python3", "-c",
             "import sys, time; sys.stdout.write('x' * 1000000); sys.stdout.flush(); time.sleep(30)"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.stderr.close)
        start = time.monotonic()
        proc.wait(timeout=10)
        self.assertLess(time.monotonic() - start, 3)
        self.assertEqual(proc.returncode, 124)

    def test_streams_without_json(self):
        p = nsbox("run", "--output-limit", "5", "--", "python3", "-c", "print('abcdefghij')")
        # The start, then the end once the stream has ended (no marker line off a terminal:
        # the note on stderr says what was cut).
        self.assertEqual(p.stdout, "abcj\n")
        self.assertIn("stdout cut: kept its first 3 and last 2 of 11 bytes; 6 bytes (0 lines) "
                      "between them were cut (--output-limit)", p.stderr)

    def test_json_reports_limits_and_their_mechanism(self):
        p, r = py("pass", "--cgroup", "off", "--memory", "128m", "--pids-limit", "10", "--cpus", "1.5",
                  "--timeout", "2")
        self.assertEqual(r["limits"]["memory"], {"bytes": 128 << 20, "enforced_by": "rlimit"})
        self.assertEqual(r["limits"]["pids"], {"max": 10, "enforced_by": "rlimit"})
        self.assertEqual(r["limits"]["cpus"], {"cpus": 1.5, "enforced_by": "rlimit"})
        self.assertEqual(r["limits"]["timeout"], {"seconds": 2.0, "enforced_by": "supervisor"})
        self.assertEqual(r["limits_enforced_by"], "rlimit")
        self.assertTrue(r["limits_note"])
        p, r = py("pass", "--memory", "unlimited")
        self.assertEqual(r["limits"]["memory"], {"bytes": None, "enforced_by": "none"})

    def test_invalid_utf8_output_is_valid_json(self):
        p, r = py("import sys; sys.stdout.buffer.write(b'ok\\xff')")
        self.assertEqual(r["stdout"], "ok\ufffd")


class TestTeardown(NsboxTestCase):
    def start(self, token, *extra):
        # Short sleeps, not one long one: CPython runs its SIGINT handler between bytecodes, so
        # a SIGINT that lands after "ready" is written but before the sleep's clock_nanosleep()
        # begins would otherwise wait out the whole sleep (seen in about 2% of runs).
        proc = subprocess.Popen(
            [NSBOX, "run", *extra, "--", "python3", "-c",
             "import os, sys, time\n"
             "def nap():\n    for _ in range(600): time.sleep(0.1)\n"
             "if os.fork() == 0:\n    nap()\n"
             "print('ready', flush=True); nap()", token],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.stderr.close)
        self.addCleanup(proc.stdout.close)
        return proc

    def assert_signal_forwarded(self, sig):
        token = f"sig{int(sig)}-" + secrets.token_hex(6)
        proc = self.start(token)
        self.assertEqual(proc.stdout.readline(), "ready\n")
        proc.send_signal(sig)
        proc.wait(timeout=10)
        self.assertEqual(proc.returncode, 128 + sig, proc.stderr.read())
        self.assertTrue(wait_until(lambda: not processes_with(token), timeout=2),
                        f"left behind: {processes_with(token)}")

    def test_sigterm_is_forwarded_and_nothing_is_left(self):
        self.assert_signal_forwarded(signal.SIGTERM)

    def test_sigint_like_ctrl_c(self):
        # Python's KeyboardInterrupt ends the payload through SIGINT.
        self.assert_signal_forwarded(signal.SIGINT)

    def test_killing_nsbox_kills_the_sandbox(self):
        token = "kill-" + secrets.token_hex(6)
        proc = self.start(token)
        self.assertEqual(proc.stdout.readline(), "ready\n")
        self.assertGreaterEqual(len(processes_with(token)), 2)
        proc.kill()
        proc.wait(timeout=10)
        self.assertTrue(wait_until(lambda: not processes_with(token), timeout=5),
                        f"left behind: {processes_with(token)}")

    def test_background_children_die_with_the_payload(self):
        token = "bg-" + secrets.token_hex(6)
        p, r = nsbox_json("--", "python3", "-c", "import os, time\nif os.fork() == 0:\n"
                          "    os.setsid(); time.sleep(60)\nprint('parent done')", token)
        self.assertEqual(r["stdout"], "parent done\n", r)
        self.assertTrue(wait_until(lambda: not processes_with(token), timeout=2))


class TestNothingLeftBehind(NsboxTestCase):
    def test_many_sequential_runs(self):
        # A few hundred runs (bench/run does 1,000): no process, mount or temporary file stays.
        token = "seq-" + secrets.token_hex(6)
        with open("/proc/self/mountinfo") as f:
            mounts_before = len(f.readlines())
        tmp_before = tmp_snapshot()
        p = subprocess.run(["sh", "-c", f'i=0; while [ $i -lt 300 ]; do "$0" run --cgroup off -- '
                            f'/bin/sh -c "sleep 30 & exit 0" {token} || exit 1; i=$((i+1)); done',
                            NSBOX], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr[-500:])
        self.assertEqual(processes_with(token), [])
        with open("/proc/self/mountinfo") as f:
            self.assertEqual(len(f.readlines()), mounts_before)
        self.assertEqual(new_nsbox_tmp_entries(tmp_before), set())


class TestBadInput(NsboxTestCase):
    def setUp(self):
        self.tmp_before = tmp_snapshot()

    def tearDown(self):
        # nsbox makes no temporary files on the host, whatever happens.
        self.assertEqual(new_nsbox_tmp_entries(self.tmp_before), set())

    def test_missing_rootfs(self):
        p = nsbox("run", "--rootfs", "/nonexistent/rootfs", "--", "true")
        self.assertOneLineError(p, contains="rootfs '/nonexistent/rootfs'")

    def test_empty_rootfs(self):
        # Neither /usr nor /bin: no root filesystem, refused before anything runs; nothing is
        # written to the directory.
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            p = nsbox("run", "--rootfs", d, "--", "true")
            self.assertEqual(os.listdir(d), [])
        self.assertOneLineError(p, contains="has neither /usr nor /bin: not a root filesystem")

    def test_rootfs_one_level_too_high(self):
        # The directory above a tree (a copy of build/rootfs): nsbox names the tree.
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            os.makedirs(os.path.join(d, "tree", "usr"))
            p = nsbox("run", "--rootfs", d, "--", "true")
        self.assertOneLineError(p, contains=f"did you mean '{d}/tree'?")

    def test_rootfs_with_only_bin(self):
        # /bin alone is enough to count (a small tree without /usr): the program is looked up
        # there, and its absence is the program's error (127), not the rootfs's.
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            os.mkdir(os.path.join(d, "bin"))
            p = nsbox("run", "--rootfs", d, "--", "true")
        self.assertOneLineError(p, code=127, contains="true: not found in the sandbox's PATH")

    def test_rootfs_with_a_file_for_a_mount_point(self):
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            os.mkdir(os.path.join(d, "bin"))
            open(os.path.join(d, "proc"), "w").close()
            p = nsbox("run", "--rootfs", d, "--", "true")
        self.assertOneLineError(p, contains="/proc is not a directory")

    def test_host_root_as_rootfs(self):
        p = nsbox("run", "--rootfs", "/", "--", "true")
        self.assertOneLineError(p, contains="the host's own root")

    def test_script_options_need_a_separator(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            p = nsbox("run", "--code", f.name, "--verbose")
        self.assertOneLineError(p, contains="put the script's arguments after --")

    def test_unknown_program(self):
        p = nsbox("run", "--", "no-such-program")
        self.assertOneLineError(p, code=127, contains="no-such-program: not found")
        p, r = nsbox_json("--", "no-such-program")
        self.assertEqual((r["status"], r["exit_code"], r["error"]["step"]), ("error", 127, "execve"))

    def test_not_executable(self):
        p = nsbox("run", "--", "/etc/passwd")
        self.assertOneLineError(p, code=126, contains="Permission denied")

    def test_unreadable_code_file(self):
        p = nsbox("run", "--code", "/nonexistent/main.py")
        self.assertOneLineError(p, contains="cannot read code file")
        with tempfile.TemporaryDirectory() as d:
            p = nsbox("run", "--code", d)
        self.assertOneLineError(p, contains="not a regular file")

    def test_bad_values(self):
        for args, what in [(["--memory", "12Q"], "--memory"), (["--timeout", "-1"], "--timeout"),
                           (["--timeout", "0"], "--timeout"), (["--cpus", "zero"], "--cpus"),
                           (["--pids-limit", "0"], "--pids-limit"), (["-v", "/tmp"], "--volume"),
                           (["-v", "/tmp:relative"], "--volume"), (["--user", "bob"], "--user"),
                           (["--tmpfs", "/tmp:size=0"], "--tmpfs"),
                           (["--network", "bridge"], "expected none, loopback or host"),
                           (["--pid", "container:x"], "--pid"), (["--ipc", "shareable"], "--ipc"),
                           (["-e", "=x"], "--env"), (["--no-such-flag"], "unknown option")]:
            with self.subTest(args=args):
                p = nsbox("run", *args, "--", "true")
                self.assertOneLineError(p, contains=what)

    def test_limits_out_of_range(self):
        # Docker's floor for --memory, and no more CPUs than nsbox may run on.
        for size in ("1m", "5m"):
            self.assertOneLineError(nsbox("run", "--memory", size, "--", "true"),
                                    contains="at least 6m")
        self.assertEqual(nsbox("run", "--memory", "6m", "--", "true").returncode, 0)
        n = len(os.sched_getaffinity(0))
        self.assertOneLineError(nsbox("run", "--cpus", str(n + 0.5), "--", "true"),
                                contains=f"at most {n}")
        self.assertEqual(nsbox("run", "--cpus", str(n), "--", "true").returncode, 0)
        p = nsbox("run", "--tmpfs", "/tmp:size=banana", "--", "true")
        self.assertOneLineError(p, contains="a SIZE above 0 such as 16m")

    def test_missing_value(self):
        self.assertOneLineError(nsbox("run", "--memory"), contains="'--memory' needs a value")

    def test_bad_mount_targets(self):
        for spec in ("/tmp:/proc/x", "/tmp:/dev/sda"):
            p = nsbox("run", "-v", spec, "--", "true")
            self.assertOneLineError(p, contains="managed by nsbox")
        # A target missing from the rootfs is made (test_mountpoints.py); one missing from a
        # read-only bind is not: that would write to the host.
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            p = nsbox("run", "-v", f"{d}:/mnt", "-v", "/tmp:/mnt/nonexistent-dir", "--", "true")
            self.assertEqual(os.listdir(d), [])
        self.assertOneLineError(p, contains="does not exist in the read-only bind")
        p = nsbox("run", "-v", "/nonexistent-source:/tmp/x", "--", "true")
        self.assertOneLineError(p, contains="/nonexistent-source")

    def test_json_error_is_json(self):
        p, r = nsbox_json("--rootfs", "/nonexistent", "--", "true")
        self.assertEqual((p.returncode, r["status"], r["exit_code"], r["error"]["step"]),
                         (125, "error", 125, "rootfs"))

    def test_no_program(self):
        p = nsbox("run")
        self.assertOneLineError(p, contains="no program given")
        p = nsbox("frobnicate")
        self.assertOneLineError(p, contains="unknown command")


if __name__ == "__main__":
    unittest.main()
