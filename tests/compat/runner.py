# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs inside the compat tree (bare or under nsbox): one module of CPython's test package,
optionally only the tests whose ids match some patterns, and writes one JSON line per test
outcome to OUT as it goes (so that a run cut short keeps what finished).

    python3 runner.py OUT MODULE [PATTERN...]

PATTERN is an fnmatch pattern matched against the test id's tail ("Class.test_name") and the
full id. An outcome is ok, skip (with the reason), fail, error, xfail or xpass; a subtest that
fails makes its test fail. Resources (network, cpu, ...) are off, as under regrtest's default.
"""
import fnmatch
import importlib
import json
import os
import sys
import tempfile
import unittest


def main():
    out_path, module = sys.argv[1], sys.argv[2]
    patterns = sys.argv[3:]
    from test import support
    support.use_resources = []    # as regrtest without -u: no network, no cpu-heavy tests
    support.verbose = 0
    out = open(out_path, "a", buffering=1)
    # As regrtest: tests write their files (TESTFN) into a fresh working directory.
    os.chdir(tempfile.mkdtemp(prefix="test_python_"))

    def record(test, outcome, detail=""):
        out.write(json.dumps({"id": test.id(), "outcome": outcome, "detail": detail[:300]}) + "\n")

    class Result(unittest.TestResult):
        def startTest(self, test):
            super().startTest(test)
            self._failed = None

        def addSuccess(self, test):
            super().addSuccess(test)
            record(test, "ok" if self._failed is None else "fail", self._failed or "")

        def addFailure(self, test, err):
            super().addFailure(test, err)
            record(test, "fail", self._exc_info_to_string(err, test).splitlines()[-1])

        def addError(self, test, err):
            super().addError(test, err)
            record(test, "error", self._exc_info_to_string(err, test).splitlines()[-1])

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            record(test, "skip", reason)

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            record(test, "xfail")

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            record(test, "xpass")

        def addSubTest(self, test, subtest, err):
            super().addSubTest(test, subtest, err)
            if err is not None and self._failed is None:
                self._failed = f"subtest {subtest._subDescription()}: " + \
                    self._exc_info_to_string(err, test).splitlines()[-1]

    try:
        suite = unittest.defaultTestLoader.loadTestsFromModule(importlib.import_module(module))
    except unittest.SkipTest as e:
        out.write(json.dumps({"id": module, "outcome": "skip", "detail": str(e)}) + "\n")
        return
    except Exception as e:
        out.write(json.dumps({"id": module, "outcome": "error",
                              "detail": f"import: {type(e).__name__}: {e}"}) + "\n")
        return

    def flatten(s):
        for t in s:
            if isinstance(t, unittest.TestSuite):
                yield from flatten(t)
            else:
                yield t

    tests = list(flatten(suite))
    if patterns:
        def wanted(t):
            tail = ".".join(t.id().split(".")[-2:])
            return any(fnmatch.fnmatchcase(tail, p) or fnmatch.fnmatchcase(t.id(), p)
                       for p in patterns)
        tests = [t for t in tests if wanted(t)]
    # Module-level fixtures (setUpModule) run once, as under regrtest.
    unittest.TestSuite(tests).run(Result())
    out.write(json.dumps({"id": module, "outcome": "done", "detail": str(len(tests))}) + "\n")


if __name__ == "__main__":
    main()
