# SPDX-License-Identifier: LGPL-2.1-or-later
"""Isolation tier 3, --isolation landlock (issue 29): where no user namespace can be made, the
default refuses naming the opt-in, and the opt-in runs the program without namespaces behind
Landlock and seccomp. "No user namespace" is made two ways: a user namespace whose
user.max_user_namespaces is 0 (no_userns.py, as a host that turned them off) and Docker's
default seccomp profile (outer_seccomp.py). Every attack runs bare first, where it succeeds."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import unittest

from nsboxtest import HERE, HOST_PYTHON, NSBOX, NsboxTestCase, new_nsbox_tmp_entries, \
    tmp_snapshot, wait_until

NO_USERNS = os.path.join(HERE, "no_userns.py")
OUTER = os.path.join(HERE, "outer_seccomp.py")
PROFILE = os.path.join(HERE, "..", "..", "examples", "seccomp-nsbox.json")


def no_userns(*argv, timeout=60, env=None):
    """argv where no user namespace can be made."""
    return subprocess.run([HOST_PYTHON, NO_USERNS, "--", *argv], capture_output=True, text=True,
                          timeout=timeout, input="", env=env)


def tier3(*args, timeout=60):
    """`nsbox run --json --isolation landlock ARGS` where no user namespace can be made:
    (CompletedProcess, result)."""
    p = no_userns(NSBOX, "run", "--json", "--isolation", "landlock", *args, timeout=timeout)
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        raise AssertionError(f"no JSON: stdout={p.stdout!r} stderr={p.stderr!r}")


def bare(code, timeout=60):
    """The host's Python running code where no user namespace can be made: the control."""
    return no_userns(HOST_PYTHON, "-c", code, timeout=timeout)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class Tier3TestCase(NsboxTestCase):
    """Where no user namespace can be made (no_userns()), with a 0755 directory of the test's
    own in self.tmp."""
    tmp_prefix = "tier3-test-"

    @classmethod
    def setUpClass(cls):
        p = no_userns("true")
        if p.returncode != 0:
            raise unittest.SkipTest(f"cannot lower user.max_user_namespaces here: {p.stderr}")

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix=self.tmp_prefix)
        os.chmod(self.tmp, 0o755)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


class TestTier3(Tier3TestCase):

    def test_the_simulation_refuses_user_namespaces(self):
        p = bare("import ctypes, os\n"
                 "libc = ctypes.CDLL(None, use_errno=True)\n"
                 "print(libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))")
        self.assertEqual(p.stdout, "-1 No space left on device\n", p.stderr)

    def test_default_refuses_naming_the_opt_in(self):
        p = no_userns(NSBOX, "run", "--", "/bin/true")
        self.assertOneLineError(p, contains="creating the sandbox's namespaces failed")
        self.assertIn("user.max_user_namespaces", p.stderr)
        self.assertIn("--isolation landlock", p.stderr)
        # --isolation full too: it never takes tier 3.
        p = no_userns(NSBOX, "run", "--isolation", "full", "--", "/bin/true")
        self.assertOneLineError(p, contains="--isolation landlock")

    def test_runs_python_and_says_tier_3(self):
        p, r = tier3("--", "python3", "-c", "print(1)")
        self.assertEqual((r["status"], r["exit_code"], r["stdout"]), ("exited", 0, "1\n"),
                         p.stderr)
        self.assertEqual(r["isolation"]["tier"], 3)
        for missing in ("user namespace", "pid namespace", "network namespace",
                        "mount namespace", "rootfs", "cgroup"):
            self.assertIn(missing, r["isolation"]["missing"])
        self.assertIn("fs", r["landlock"]["restricts"])
        w = [x for x in r["warnings"] if x.startswith("isolation tier 3")]
        self.assertEqual(len(w), 1, r["warnings"])
        self.assertIn("much weaker than the full sandbox", w[0])
        self.assertIn("nsbox: warning: isolation tier 3", p.stderr)
        # And a note, for a model reading the result: why a file is refused.
        self.assertTrue([n for n in r["notes"] if n.startswith("this ran at isolation tier 3")],
                        r["notes"])
        self.assertEqual(r["limits"]["memory"]["enforced_by"], "rlimit")
        self.assertEqual(r["limits"]["workdir"], {"bytes": None, "enforced_by": "none"})
        if os.geteuid() == 0:
            # Root's program is not root: a host id of the pool.
            self.assertNotEqual(r["host_uid"], 0)

    def test_doctor_names_what_tier_3_would_give(self):
        p = no_userns(NSBOX, "doctor")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("FAIL  nsbox run: creating the sandbox's namespaces failed", p.stdout)
        self.assertIn("info  isolation here: none of the sandbox's tiers; tier 3 (--isolation "
                      "landlock) ran a Python program without namespaces", p.stdout)

    def test_where_namespaces_work_the_opt_in_is_tier_1(self):
        p = subprocess.run([NSBOX, "run", "--json", "--isolation", "landlock", "--", "true"],
                           capture_output=True, text=True, timeout=60)
        r = json.loads(p.stdout)
        self.assertEqual((r["status"], r["isolation"]["tier"]), ("exited", 1), p.stderr)

    def test_code_and_cell(self):
        with open(os.path.join(self.tmp, "c.py"), "w") as f:
            f.write("import os\nprint(os.path.basename(__file__))\n6 * 7\n")
        p, r = tier3("--cell", "--code", os.path.join(self.tmp, "c.py"))
        self.assertEqual((r["status"], r["stdout"]), ("exited", "main.py\n"), p.stderr)
        self.assertEqual(r["outputs"], [{"type": "execute_result",
                                         "data": {"text/plain": "42"}}])

    def test_cannot_read_a_host_file_outside_what_it_was_given(self):
        secret = os.path.join(self.tmp, "secret")
        with open(secret, "w") as f:
            f.write("TOP-SECRET")
        os.chmod(secret, 0o644)
        code = f"print(open({secret!r}).read())"
        p = bare(code)
        self.assertEqual(p.stdout, "TOP-SECRET\n", p.stderr)  # the control
        p, r = tier3("--", "python3", "-c", code)
        self.assertEqual(r["exit_code"], 1, r)
        self.assertIn("PermissionError", r["stderr"])
        self.assertNotIn("TOP-SECRET", r["stdout"])
        # Nor list the directory, nor /proc (the caller's processes' environment).
        p, r = tier3("--", "python3", "-c",
                     f"import os\nfor d in ({self.tmp!r}, '/proc/self', '/home', '/root'):\n"
                     "    try: os.listdir(d); print('LISTED', d)\n"
                     "    except OSError as e: print(type(e).__name__)")
        self.assertNotIn("LISTED", r["stdout"], r)

    def test_cannot_write_outside_the_scratch_directory(self):
        os.chmod(self.tmp, 0o777)  # anyone may write here: only Landlock stops it
        target = os.path.join(self.tmp, "planted")
        code = f"open({target!r}, 'w').write('x'); print('WROTE')"
        p = bare(code)
        self.assertEqual(p.stdout, "WROTE\n", p.stderr)  # the control
        os.unlink(target)
        p, r = tier3("--", "python3", "-c", code)
        self.assertIn("PermissionError", r["stderr"], r)
        self.assertFalse(os.path.exists(target))
        # Its own directory is writable: cwd, HOME and TMPDIR, 0700.
        p, r = tier3("--", "python3", "-c",
                     "import os, stat, tempfile\n"
                     "open('here', 'w').write('x')\n"
                     "tempfile.mkstemp()\n"
                     "print(os.getcwd() == os.environ['HOME'] == os.environ['TMPDIR'],"
                     " oct(stat.S_IMODE(os.stat('.').st_mode)))")
        self.assertEqual(r["stdout"], "True 0o700\n", r)

    def test_cannot_open_a_tcp_socket(self):
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        done = threading.Event()

        def accept():
            server.settimeout(0.2)
            while not done.is_set():
                try:
                    server.accept()[0].close()
                except OSError:
                    pass
        t = threading.Thread(target=accept, daemon=True)
        t.start()
        try:
            code = ("import socket\n"
                    f"s = socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
                    "print('CONNECTED')")
            p = bare(code)
            self.assertEqual(p.stdout, "CONNECTED\n", p.stderr)  # the control
            p, r = tier3("--", "python3", "-c", code)
            self.assertNotIn("CONNECTED", r["stdout"], r)
            self.assertIn("PermissionError", r["stderr"], r)
            # UDP and raw are refused alike (socket(2) of AF_INET at all).
            p, r = tier3("--", "python3", "-c",
                         "import socket\n"
                         "try: socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print('UDP')\n"
                         "except PermissionError: print('refused')")
            self.assertEqual(r["stdout"], "refused\n", r)
        finally:
            done.set()
            t.join()
            server.close()

    def test_scratch_directory_is_gone_after_the_run(self):
        before = tmp_snapshot()
        p, r = tier3("--", "python3", "-c",
                     "import os\nprint(os.getcwd())\n"
                     "os.makedirs('a/b'); open('a/b/f', 'w').write('x')\n"
                     "os.chmod('a/b', 0); os.chmod('a', 0o500)")
        self.assertEqual(r["status"], "exited", r)
        scratch = r["stdout"].strip()
        self.assertIn("/nsbox-tier3-", scratch)
        self.assertFalse(os.path.exists(scratch))
        self.assertEqual(new_nsbox_tmp_entries(before), set())

    def test_timeout_kills_everything_it_started(self):
        code = ("import subprocess, time\n"
                "p = subprocess.Popen(['sleep', '60'], stdout=subprocess.DEVNULL,\n"
                "                     stderr=subprocess.DEVNULL)\n"
                "print(p.pid, flush=True)\n"
                "time.sleep(60)")
        # The control: killed bare, the child it started lives on.
        p = no_userns("timeout", "--foreground", "-s", "KILL", "2", HOST_PYTHON, "-c", code)
        pid = int(p.stdout)
        try:
            self.assertTrue(alive(pid), "the control's child died with its parent")
        finally:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        p, r = tier3("--timeout", "2", "--", "python3", "-c", code)
        self.assertEqual(r["status"], "timeout", r)
        pid = int(r["stdout"])
        self.assertTrue(wait_until(lambda: not alive(pid)), f"{pid} outlived the run")

    def test_what_it_leaves_running_is_killed_at_its_end(self):
        p, r = tier3("--", "sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!")
        self.assertEqual(r["status"], "exited", r)
        pid = int(r["stdout"])
        self.assertTrue(wait_until(lambda: not alive(pid)), f"{pid} outlived the run")

    def test_nsbox_killed_leaves_nothing_behind(self):
        # SIGKILL to nsbox itself: init gets its parent-death signal, kills the program's group
        # and removes the scratch directory (the control of
        # test_timeout_kills_everything_it_started shows an orphan lives on bare).
        p = subprocess.Popen([HOST_PYTHON, NO_USERNS, "--", NSBOX, "run", "--isolation",
                              "landlock", "--", "sh", "-c",
                              "pwd; sleep 60 >/dev/null 2>&1 & echo $!; sleep 60"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        scratch = None
        try:
            scratch = p.stdout.readline().strip()
            self.assertIn("/nsbox-tier3-", scratch)
            pid = int(p.stdout.readline())
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                nsbox_pid = int(f.read().split()[0])  # no_userns.py's child, nsbox
            with open(f"/proc/{nsbox_pid}/comm") as f:
                self.assertEqual(f.read().strip(), "nsbox")
            os.kill(nsbox_pid, signal.SIGKILL)
            p.wait(timeout=30)
            self.assertTrue(wait_until(lambda: not alive(pid)), f"{pid} outlived nsbox")
            # Init removes the scratch directory, as nsbox would have.
            self.assertTrue(wait_until(lambda: not os.path.exists(scratch)), scratch)
        finally:
            p.kill()
            p.wait()
            p.stdout.close()
            if scratch and "/nsbox-tier3-" in scratch:
                shutil.rmtree(scratch, ignore_errors=True)

    def test_cannot_leave_the_process_group(self):
        code = ("import os\ntry: os.setsid(); print('LEFT')\n"
                "except PermissionError: print('refused')")
        p = bare(code)
        self.assertEqual(p.stdout, "LEFT\n", p.stderr)  # the control
        p, r = tier3("--", "python3", "-c", code)
        self.assertEqual(r["stdout"], "refused\n", r)

    def test_output_cap(self):
        p, r = tier3("--output-limit", "100", "--", "python3", "-c", "print('x' * 10000)")
        self.assertEqual(r["status"], "exited", r)
        self.assertTrue(r["stdout_truncated"], r)
        self.assertEqual(r["stdout_bytes"], 10001)
        self.assertLessEqual(len(r["stdout"]), 200)

    def test_options_that_need_namespaces_are_refused(self):
        for args, word in ((["-v", f"{self.tmp}:/x"], "-v"),
                           (["--network", "loopback"], "--network"),
                           (["--copy-in", f"{self.tmp}:/work/x"], "--copy-in"),
                           (["--landlock", "off"], "--landlock off")):
            p = no_userns(NSBOX, "run", "--isolation", "landlock", *args, "--", "true")
            self.assertOneLineError(p, contains=word)
            self.assertIn("tier 3", p.stderr)

    def test_python_api(self):
        # isolation="landlock" through the Python API (a cell, with its default --rootfs).
        env = dict(os.environ, NSBOX=NSBOX,
                   PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
        p = no_userns(HOST_PYTHON, "-c",
                      "import nsbox\n"
                      "r = nsbox.run_python_code('print(1)\\n6 * 7', isolation='landlock')\n"
                      "print(r.status, r.isolation['tier'], repr(r.stdout), r.outputs)",
                      env=env)
        self.assertEqual(p.stdout, "exited 3 '1\\n' [{'type': 'execute_result', 'data': "
                                   "{'text/plain': '42'}}]\n", p.stderr)

    def test_a_rootfs_is_left_out_with_a_warning(self):
        # The Python API names its science tree by default: tier 3 runs the host's programs.
        p, r = tier3("--rootfs", self.tmp, "--", "python3", "-c", "import sys; print(sys.prefix)")
        self.assertEqual((r["status"], r["stdout"]), ("exited", "/usr\n"), p.stderr)
        self.assertTrue([w for w in r["warnings"] if w.startswith(f"--rootfs {self.tmp} is not "
                                                                  "used at isolation tier 3")],
                        r["warnings"])

    def test_without_landlock_it_fails_closed(self):
        # The shipped container profile without Landlock's calls, where no user namespace can
        # be made: nothing to run behind, so nothing runs.
        # (The profile is an allowlist without ptrace, which LeakSanitizer's exit check needs:
        # in the sanitizer build it stays off here; the other runs check leaks.)
        env = dict(os.environ)
        if env.get("ASAN_OPTIONS"):
            env["ASAN_OPTIONS"] += ":detect_leaks=0"
        p = no_userns(HOST_PYTHON, OUTER, PROFILE + ":-landlock_create_ruleset", "--", NSBOX,
                      "run", "--isolation", "landlock", "--", "/bin/echo", "RAN", env=env)
        self.assertOneLineError(p, contains="Landlock's system calls are refused")
        self.assertNotIn("RAN", p.stdout)


class TestDockerProfile(NsboxTestCase):
    """Docker's default seccomp profile (outer_seccomp.py's docker-default): clone and unshare
    with CLONE_NEWUSER refused, clone3 ENOSYS."""

    def under(self, *args):
        return subprocess.run([HOST_PYTHON, OUTER, "docker-default", "--", NSBOX, *args],
                              capture_output=True, text=True, timeout=60, input="")

    def test_default_refuses_and_the_opt_in_runs_tier_3(self):
        p = self.under("run", "--", "/bin/true")
        self.assertOneLineError(p, contains="--isolation landlock")
        p = self.under("run", "--json", "--isolation", "landlock", "--", "python3", "-c",
                       "print(open('/etc/hostname').read())")
        r = json.loads(p.stdout)
        self.assertEqual(r["isolation"]["tier"], 3, p.stderr)
        self.assertIn("PermissionError", r["stderr"])


if __name__ == "__main__":
    unittest.main()
