# SPDX-License-Identifier: LGPL-2.1-or-later
"""The whole VM suite in one boot: every tests/vm/test_*.py (cgroup v2 placement and limits,
nsbox in Podman containers). Prints "vm: N passed, N failed" last; a skip counts as a failure
(the VM has everything the suite needs). Run as: tests/vm/run /usr/bin/python3 tests/vm/suite.py
"""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py", top_level_dir=here)
result = unittest.TextTestRunner(verbosity=2).run(suite)
bad = len(result.failures) + len(result.errors) + len(result.skipped)
print(f"vm: {result.testsRun - bad} passed, {bad} failed", flush=True)
sys.exit(0 if bad == 0 and result.testsRun > 0 else 1)
