# SPDX-License-Identifier: LGPL-2.1-or-later
"""The text a model reads of a run (Result.as_tool_output()), against the real binary."""

import unittest

from tests.support import SandboxTestCase  # noqa: E402
import nsbox  # noqa: E402

# What the API says of a timeout of N seconds, after the streams.
TIMEOUT_NOTE = ("\n[the program ran until its time limit (timeout=%g s) and was killed: if it "
                "needs longer, raise timeout=; if it should have ended sooner, look for an "
                "endless loop or a read that waits for input (stdin is empty unless given) or "
                "for the network (none unless allowed)]")


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
                     'memory="256m" caps its writable mappings (RLIMIT_DATA), not its use, and a '
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
        if r.status == "timeout":
            want = "timed out after 5 s; the sandbox was killed\n[no output]" + TIMEOUT_NOTE % 5
        else:
            want += "\n[no output]"
        self.assertEqual(r.as_tool_output(), want)

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
        # The first 2000 bytes (ending mid-line: "52" of 527), the last 2000 from a line's start.
        head, tail = printed[:2000], printed[-2000:]
        tail = tail[tail.index("\n") + 1:]
        self.assertEqual((head[-4:], tail[:6]), ("6\n52", "99667\n"))
        cut = len(printed) - len(head) - len(tail)
        self.assertEqual(r.as_tool_output(),
                         "exited with status 0\n[stdout]\n" + head +
                         f"\n[... {cut:,} bytes, 99,140 lines cut ...]\n" + tail.removesuffix("\n") +
                         f"\n[stdout cut: kept its first 2000 and last 1998 of {len(printed)} "
                         f"bytes; {cut} bytes (99140 lines) between them were cut "
                         "(output_limit=)]")

    def test_output_before_a_timeout(self):
        r = self.code("print('line 1'); print('partial: 42')\nwhile True: pass", timeout=1)
        self.assertEqual(r.as_tool_output(),
                         "timed out after 1 s; the sandbox was killed\n"
                         "[stdout]\nline 1\npartial: 42" + TIMEOUT_NOTE % 1)

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
            want += "\n[the process limit (pids_limit=4) refused 1 forks]"
        else:  # under rlimits the program's own error is the witness
            want += ("\n[the program's stderr mentions a fork or thread start that failed with "
                     "EAGAIN (Resource temporarily unavailable): under rlimits, pids_limit=4 "
                     "is RLIMIT_NPROC, the processes and threads of the sandbox's user together; "
                     "raise pids_limit= if the program needs more]")
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
        self.assertIn("[stdout cut for this output: its first 2000 and last 2000 characters are "
                      "shown]", text)
        self.assertIn("\n[... 9,996,000 characters cut for this output ...]\n", text)

    def test_streamed_invalid_utf8_split_across_reads(self):
        chunks = []
        r = self.code("import sys, time\nsys.stdout.buffer.write(b'\\xe2\\x82')\n"
                      "sys.stdout.flush(); time.sleep(0.3)\n"
                      "sys.stdout.buffer.write(b'\\xac \\xff\\n')", on_stdout=chunks.append)
        self.assertEqual("".join(chunks), "\u20ac \ufffd\n")
        self.assertEqual(r.stdout, "\u20ac \ufffd\n")


if __name__ == "__main__":
    unittest.main()
