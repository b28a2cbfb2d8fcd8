# SPDX-License-Identifier: LGPL-2.1-or-later
"""The command line: --version, --help, and the man page agree with what nsbox accepts."""
import os
import re
import unittest

from nsboxtest import HERE, NsboxTestCase, nsbox

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


if __name__ == "__main__":
    unittest.main()
