# SPDX-License-Identifier: LGPL-2.1-or-later
"""The command line: --version, --help, and the man page agree with what nsbox accepts."""
import os
import re
import signal
import subprocess
import unittest

from nsboxtest import HERE, NSBOX, NsboxTestCase, nsbox

MAN = os.path.join(HERE, "..", "..", "doc", "nsbox.1.scd")


class TestCli(NsboxTestCase):
    def test_version_and_help(self):
        p = nsbox("--version")
        self.assertEqual(p.returncode, 0)
        self.assertRegex(p.stdout, r"^nsbox \d+\.\d+\.\d+\n$")
        p = nsbox("--help")
        self.assertEqual(p.returncode, 0)
        for command in ("run", "doctor", "selftest", "policy check", "policy dump"):
            self.assertIn(command, p.stdout)

    def test_run_help_matches_the_man_page(self):
        p = nsbox("run", "--help")
        self.assertEqual(p.returncode, 0)
        helped = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", p.stdout)) - {"--"}
        with open(MAN) as f:
            man = f.read()
        section = man[man.index("# OPTIONS"):man.index("# EXIT STATUS")]
        helped -= {"--ablate"}  # named in the help as 'nsbox selftest --ablate'

        documented = set(re.findall(r"\*(--[a-z][a-z-]+)\*", section))
        self.assertEqual(helped, documented)
        # Every documented option is accepted (as opposed to "unknown option").
        for opt in sorted(documented - {"--help"}):
            p = nsbox("run", opt)
            self.assertNotIn("unknown option", p.stderr, opt)

    def test_help_names_the_commands_of_the_man_page(self):
        # The command table (src/cli/main.c) and the man page's SYNOPSIS name the same commands.
        p = nsbox("--help")
        listed = set(re.findall(r"^  ([a-z]+)\b", p.stdout, re.M))
        with open(MAN) as f:
            man = f.read()
        synopsis = man[man.index("# SYNOPSIS"):man.index("# DESCRIPTION")]
        documented = set(re.findall(r"^\*nsbox ([a-z]+)", synopsis, re.M))
        self.assertEqual(listed, documented)

    def test_usage_errors_are_one_line(self):
        # A subcommand used wrongly says so in one nsbox: line, exit status 125, naming its
        # --help: never a screenful of usage on stderr.
        for args in (["rootfs"], ["rootfs", "bogus"], ["rootfs", "verify"],
                     ["rootfs", "build", "--bogus", "d"], ["rootfs", "build", "--profile"],
                     ["rootfs", "build"], ["policy"], ["policy", "bogus"], ["workspace"],
                     ["workspace", "bogus"], ["session"], ["session", "bogus"],
                     ["session", "exec"], ["bogus"],
                     ["run", "--bogus"], ["run", "--code", "a.py", "--code", "b.py"]):
            with self.subTest(args=args):
                p = nsbox(*args)
                self.assertEqual(p.returncode, 125, p.stderr)
                self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
                self.assertRegex(p.stderr, r"^nsbox: ")
                self.assertEqual(p.stdout, "")


class TestInheritedSignals(NsboxTestCase):
    def test_a_caller_that_ignores_sigchld(self):
        # SIG_IGN for SIGCHLD survives execve(2): nsbox sets it back for itself, or the kernel
        # would reap the sandbox's init (before: the payload ran, then "supervising the sandbox
        # failed: No child processes", exit 125).
        p = subprocess.run([NSBOX, "run", "--cgroup", "off", "--", "echo", "hi"],
                           preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, "hi\n"), p.stderr)


if __name__ == "__main__":
    unittest.main()
