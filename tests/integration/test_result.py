# SPDX-License-Identifier: LGPL-2.1-or-later
"""The result explains itself: reason, limit and notes in the JSON result, the same sentences on
stderr, output printed before a timeout kept, the CPU rlimit that never races the timeout, and
--result-fd (output streamed, the result on a descriptor of its own)."""
import json
import os
import signal
import subprocess
import tempfile

from nsboxtest import NSBOX, NsboxTestCase, nsbox, nsbox_json, without_fallback_warning

BUSY = ["--", "python3", "-c", "while True: pass"]
PARTIAL = ["--", "python3", "-c", "print('line 1'); print('partial: 42')\nwhile True: pass"]


class TestReason(NsboxTestCase):
    def test_each_end_has_its_sentence_and_limit(self):
        cases = [
            (["--", "python3", "-c", "import sys; print('out'); sys.exit(3)"],
             "exited with status 3", None),
            (["--", "python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
             "killed by SIGSEGV (signal 11)", None),
            (["--timeout", "0.5", "--", "python3", "-c", "import time; time.sleep(5)"],
             "timed out after 0.5 s; the sandbox was killed",
             {"name": "timeout", "value": 0.5, "unit": "seconds", "enforced_by": "supervisor",
              "stopped": True}),
            (["--output-limit", "5", "--", "python3", "-c", "print('abcdefghij')"],
             "exited with status 0",
             {"name": "output", "value": 5, "unit": "bytes", "enforced_by": "supervisor",
              "stopped": False}),
        ]
        for args, reason, limit in cases:
            with self.subTest(reason=reason):
                p, r = nsbox_json(*args)
                self.assertEqual(r["reason"], reason, r)
                self.assertEqual(r["limit"], limit)

    def test_cpu_time_under_rlimits_is_the_cpu_limit(self):
        # cpus 0.25 x timeout 8 = 2 s of CPU time: well before the timeout (a quarter of a core
        # gets there, also on a loaded host), so it legitimately ends a busy loop first; the
        # result calls it the cpu limit, not just a signal.
        p, r = nsbox_json("--cgroup", "off", "--cpus", "0.25", "--timeout", "8", *BUSY)
        self.assertEqual((r["status"], r["signal"], r["exit_code"]),
                         ("signaled", signal.SIGXCPU, 152))
        self.assertEqual(r["limit"], {"name": "cpu", "value": 2, "unit": "cpu_seconds",
                                      "enforced_by": "rlimit", "stopped": True})
        self.assertEqual(r["reason"], "stopped: CPU time limit: the payload used up its 2 s of "
                         "CPU time (--cpus 0.25 x --timeout 8 s, RLIMIT_CPU under rlimits) and was "
                         "killed by SIGXCPU")

    def test_cpu_rlimit_never_races_the_timeout(self):
        # RLIMIT_CPU counts whole seconds: cpus 0.5 x timeout 1 rounds up to 1 s, the moment of
        # the timeout, and a busy loop ended as 124 or 152 by chance; cpus 0.5 x timeout 1.9 is
        # 1 s, less than a second before it. A CPU limit within a second of the timeout now
        # sits a second past it, so the timeout ends a busy loop every time.
        for timeout in ("1", "1.9", "1", "1.9"):
            with self.subTest(timeout=timeout):
                p, r = nsbox_json("--cgroup", "off", "--cpus", "0.5", "--timeout", timeout,
                                  *BUSY)
                self.assertEqual((p.returncode, r["status"], r["limit"]["name"]),
                                 (124, "timeout", "timeout"), r)

    def test_rlimit_memory_hint_is_a_note(self):
        crash = ["--", "python3", "-c", "import ctypes; ctypes.string_at(0)"]
        p, r = nsbox_json("--cgroup", "off", "--memory", "64m", *crash)
        self.assertEqual(r["reason"], "killed by SIGSEGV (signal 11)")
        self.assertIsNone(r["limit"])  # a crash under rlimits is not a limit kill
        self.assertEqual(r["notes"], [
            "the payload died of SIGSEGV; if it ran out of memory: under rlimits, --memory 64m "
            "caps its writable mappings (RLIMIT_DATA), not its use, and a program denied a "
            "mapping may crash instead of failing cleanly"])

    def test_what_stderr_says_of_a_limit_is_a_note(self):
        # Under rlimits the kernel refuses an allocation or a fork without a counter to read:
        # the program's own error is the witness, and the note names the option to raise. A
        # full /tmp that the program emptied again leaves only its ENOSPC.
        forks = ("import os, time\nfor i in range(10):\n    if os.fork() == 0:\n"
                 "        time.sleep(2)\n        os._exit(0)\n")
        cases = [
            (["--cgroup", "off", "--memory", "64m", "--", "python3", "-c",
              "x = bytearray(200 << 20)"], "--memory 64m (under rlimits, RLIMIT_DATA"),
            (["--cgroup", "off", "--pids-limit", "4", "--code", "-"],
             "a fork or thread start that failed with EAGAIN"),
            (["--tmpfs", "/tmp:size=1m", "--", "python3", "-c",
              "import os\ntry: open('/tmp/x', 'wb').write(b'x' * (2 << 20))\n"
              "finally: os.unlink('/tmp/x')"], "/tmp (--tmpfs /tmp:size=...)"),
        ]
        for args, words in cases:
            with self.subTest(words=words):
                p, r = nsbox_json(*args, input=forks if "--code" in args else None)
                self.assertEqual(r["status"], "exited", r)
                self.assertNotEqual(r["exit_code"], 0, r)
                self.assertEqual(len(r["notes"]), 1, r)
                self.assertIn(words, r["notes"][0])
        # Control: the same programs within their limits get no note.
        p, r = nsbox_json("--cgroup", "off", "--memory", "64m", "--", "python3", "-c",
                          "x = bytearray(1 << 20)")
        self.assertEqual((r["exit_code"], r["notes"]), (0, []))

    def test_notes_name_refusals_and_truncation(self):
        p, r = nsbox_json("--output-limit", "3", "--", "python3", "-c",
                          "import socket\ntry: socket.socket()\nexcept OSError: pass\n"
                          "print('12345')")
        notes = ["stdout cut: kept its first 2 and last 1 of 6 bytes; 3 bytes (0 lines) "
                 "between them were cut (--output-limit)"]
        if r["seccomp_refused"] is not None:
            notes[:0] = ["the seccomp policy refused: socket (1)",
                         "an internet socket (AF_INET/AF_INET6) was refused: the sandbox has no "
                         "network (--network none, the default); --network allow=HOST[:PORT],... "
                         "reaches the hosts named through nsbox's HTTP(S) proxy (the proxy "
                         "variables are set for it), and --network loopback gives it a loopback "
                         "interface (127.0.0.1, ::1) for servers and clients of its own, and "
                         "nothing beyond"]
        self.assertEqual(r["notes"], notes)

    def test_stderr_says_the_same_sentences(self):
        # One source: what nsbox prints without --json is the JSON's reason and notes.
        args = ["--cgroup", "off", "--memory", "64m", "--output-limit", "2", "--", "python3",
                "-c", "print('abc', flush=True); import ctypes; ctypes.string_at(0)"]
        _, r = nsbox_json(*args)
        p = nsbox("run", *args)
        want = [f"nsbox: {r['reason']}"] + [f"nsbox: warning: {n}" for n in r["notes"]]
        self.assertEqual(without_fallback_warning(p.stderr).splitlines(), want)
        self.assertEqual(len(r["notes"]), 2)

    def test_permission_denied_in_a_writable_bind_names_the_host_ids(self):
        # A :rw bind of a directory the run's host ids cannot write: the note says which ids
        # write there (root's runs have ids of their own), and how to choose others.
        d = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, d)
        os.chmod(d, 0o555)
        p, r = nsbox_json("--cgroup", "off", "-v", f"{d}:/data:rw", "--", "sh", "-c",
                          "echo hi > /data/new.txt")
        self.assertEqual(r["exit_code"], 2, r)
        self.assertEqual(len(r["notes"]), 1, r)
        self.assertIn(f"writes there as host uid {r['host_uid']}", r["notes"][0])
        # Control: the same without a writable bind gets no such note.
        p, r = nsbox_json("--cgroup", "off", "--", "sh", "-c", "echo hi > /etc/new.txt")
        self.assertNotEqual(r["exit_code"], 0)
        self.assertEqual(r["notes"], [], r)

    def test_own_lines_start_a_line(self):
        # Output cut mid-line: nsbox's note starts on a line of its own, not glued to it; a
        # program's last line without a newline is left as it is when nsbox has nothing to say.
        p = nsbox("run", "--cgroup", "off", "--output-limit", "10", "--", "python3", "-c",
                  "import sys; sys.stderr.write('x' * 50)")
        self.assertEqual(p.stderr.splitlines(),
                         ["x" * 10, "nsbox: warning: stderr cut: kept its first 5 and last 5 of "
                          "50 bytes; 40 bytes (0 lines) between them were cut (--output-limit)"])
        p = nsbox("run", "--cgroup", "off", "--", "python3", "-c",
                  "import sys; sys.stderr.write('x')")
        self.assertEqual(p.stderr, "x")

    def test_exit_status_alone_is_not_repeated_on_stderr(self):
        p = nsbox("run", "--cgroup", "off", "--", "python3", "-c", "import sys; sys.exit(3)")
        self.assertEqual((p.returncode, p.stderr), (3, ""))

    def test_argument_error_has_a_reason(self):
        p, r = nsbox_json("--memory", "12Q", "--", "true")
        self.assertEqual(r["status"], "error")
        self.assertEqual(r["reason"], r["error"]["message"])
        self.assertIn("12Q", r["reason"])


class TestOutputBeforeATimeout(NsboxTestCase):
    def test_printed_lines_reach_the_result(self):
        # PYTHONUNBUFFERED=1 in the sandbox's environment: without it, Python keeps both lines
        # in its buffer (stdout is a pipe) and the kill loses them.
        p, r = nsbox_json("--timeout", "1", *PARTIAL)
        self.assertEqual(r["status"], "timeout")
        self.assertEqual(r["stdout"], "line 1\npartial: 42\n")

    def test_buffering_can_be_turned_back_on(self):
        # The control: -e PYTHONUNBUFFERED= (empty) is Python's default buffering again, and the
        # lines die with the process.
        p, r = nsbox_json("--timeout", "1", "-e", "PYTHONUNBUFFERED=", *PARTIAL)
        self.assertEqual((r["status"], r["stdout"]), ("timeout", ""))

    def test_code_runs_unbuffered(self):
        with open(os.path.join(self.tmp(), "main.py"), "w") as f:
            f.write("print('before')\nwhile True: pass\n")
        p, r = nsbox_json("--timeout", "1", "--code", f.name)
        self.assertEqual((r["status"], r["stdout"]), ("timeout", "before\n"))

    def tmp(self):
        import tempfile
        d = tempfile.mkdtemp()
        os.chmod(d, 0o755)
        self.addCleanup(__import__("shutil").rmtree, d)
        return d


class TestResultFd(NsboxTestCase):
    def run_fd(self, *args):
        """nsbox run --result-fd W ARGS, W the write end of a pipe; returns (process, the
        text read from the pipe). A {fd} in args becomes W."""
        r, w = os.pipe()
        try:
            p = subprocess.run([NSBOX, "run", "--result-fd", str(w),
                                *(a.replace("{fd}", str(w)) for a in args)],
                               capture_output=True, text=True, timeout=60, pass_fds=(w,))
        finally:
            os.close(w)
        with os.fdopen(r) as f:
            text = f.read()
        return p, text

    def test_output_streams_and_the_result_goes_to_the_fd(self):
        p, text = self.run_fd("--", "python3", "-c",
                              "import sys; print('out'); sys.stderr.write('err\\n'); sys.exit(4)")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (4, "out\n", "err\n"))
        self.assertTrue(text.endswith("\n") and text.count("\n") == 1, text)
        r = json.loads(text)
        self.assertEqual((r["stdout"], r["stderr"], r["reason"]),
                         ("out\n", "err\n", "exited with status 4"))
        # nsbox's own warnings are in the result, not mixed into the payload's stderr.
        if r["limits_enforced_by"] == "rlimit":
            self.assertTrue(r["warnings"])

    def test_timeout_reason_is_in_the_result_only(self):
        p, text = self.run_fd("--timeout", "0.5", *BUSY)
        self.assertEqual((p.returncode, p.stderr), (124, ""))
        self.assertEqual(json.loads(text)["reason"], "timed out after 0.5 s; the sandbox was killed")

    def test_argument_error_goes_to_the_fd(self):
        p, text = self.run_fd("--memory", "12Q", "--", "true")
        self.assertEqual((p.returncode, p.stderr), (125, ""))
        r = json.loads(text)
        self.assertEqual((r["status"], r["error"]["step"]), ("error", "arguments"))

    def test_the_payload_never_gets_the_fd(self):
        # Not even with --keep-fds: a payload that could write there could forge its result.
        p, text = self.run_fd("--keep-fds", "--", "python3", "-c",
                              "import os\ntry: os.write({fd}, b'forged'); print('wrote')\n"
                              "except OSError as e: print('no fd', e.errno)")
        r = json.loads(text)
        self.assertEqual(r["stdout"], "no fd 9\n")  # EBADF
        # Control: a descriptor passed without --result-fd does reach it under --keep-fds.
        rd, w = os.pipe()
        try:
            q = subprocess.run([NSBOX, "run", "--keep-fds", "--", "python3", "-c",
                                f"import os; os.write({w}, b'x'); print('wrote')"],
                               capture_output=True, text=True, timeout=60, pass_fds=(w,))
        finally:
            os.close(w)
            os.close(rd)
        self.assertEqual(q.stdout, "wrote\n")

    def test_bad_values(self):
        for args in (["--result-fd", "1"], ["--result-fd", "x"], ["--result-fd", "99"],
                     ["--json", "--result-fd", "2"]):
            with self.subTest(args=args):
                p = nsbox("run", *args, "--", "true")
                self.assertOneLineError(p, contains="--result-fd")
        r, w = os.pipe()
        try:
            p = subprocess.run([NSBOX, "run", "--json", "--result-fd", str(w), "--", "true"],
                               capture_output=True, text=True, timeout=60, pass_fds=(w,))
        finally:
            os.close(w)
            os.close(r)
        self.assertOneLineError(p, contains="exclude each other")
