# SPDX-License-Identifier: LGPL-2.1-or-later
"""Run a unittest suite verbosely and count its cases: the integration tests (by default), or
the Python API's (--start python/tests --top python).

    run.py [--counts FILE] [--start DIR --top DIR] [--module MODULE] [NAME...]

NAME is a module (test_run) or a test (test_run.TestRun.test_exit_code); without one, the
--module runs (as meson's integration/MODULE tests do), or without that every test_*.py below
--start. --counts FILE gets "PASSED FAILED" (test cases), which
scripts/test adds up; it is emptied first, so a run that dies leaves no stale counts.
Exit status 0 only if every test passed (a skip fails under NSBOX_TESTS_MUST_WORK=1).
Registered with meson (tests/integration/meson.build, one test per module, and
tests/meson.build): meson test -C build --suite integration.
"""
import argparse
import atexit
import os
import shutil
import sys
import tempfile
import unittest

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--counts")
ap.add_argument("--start", default=here)
ap.add_argument("--top")
ap.add_argument("--module")
ap.add_argument("names", nargs="*")
a = ap.parse_args()
if a.counts:
    open(a.counts, "w").close()
# A registry of this run's own (nsbox's is $XDG_RUNTIME_DIR/nsbox first): the tests' sandboxes
# never show up in the caller's `nsbox ps`, and no test can reach the caller's own sandboxes.
# (test_registry checks the other places the registry can be, by name and with its own runs.)
runtime_dir = tempfile.mkdtemp(prefix="nsbox-test-runtime-")
atexit.register(shutil.rmtree, runtime_dir, ignore_errors=True)
os.environ["XDG_RUNTIME_DIR"] = runtime_dir
start = os.path.abspath(a.start)
top = os.path.abspath(a.top or start)
sys.path.insert(0, top)
loader = unittest.defaultTestLoader
if a.names or a.module:
    suite = loader.loadTestsFromNames(a.names or [a.module])
else:
    suite = loader.discover(start, pattern="test_*.py", top_level_dir=top)
result = unittest.TextTestRunner(verbosity=2).run(suite)
must_work = os.environ.get("NSBOX_TESTS_MUST_WORK") == "1"
bad = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
if must_work:
    bad += len(result.skipped)
passed = result.testsRun - bad - (0 if must_work else len(result.skipped))
if a.counts:
    with open(a.counts, "w") as f:
        f.write(f"{passed} {bad}\n")
sys.exit(0 if bad == 0 and result.testsRun > 0 else 1)
