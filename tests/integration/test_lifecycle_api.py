# SPDX-License-Identifier: LGPL-2.1-or-later
"""The started-sandbox API of libnsbox (nsbox.h: nsbox_sandbox_start(), step, stop) misused by a
C caller (tests/integration/lifecycle-api.c, built against the static library): a step while one
runs, a stop with a step running, stop(NULL), steps after the sandbox's init died, bad step
arguments, and many steps; each mode checks the caller keeps no descriptor it did not have. In
a sanitizer build (-Db_sanitize=address,undefined) the same runs check memory and leaks."""
import os
import subprocess
import unittest

from nsboxtest import NsboxTestCase

API = os.environ.get("NSBOX_LIFECYCLE_API") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "tests", "integration",
    "nsbox-lifecycle-api")


class TestLifecycleApi(NsboxTestCase):
    def api(self, mode, stdin=subprocess.DEVNULL):
        if not os.access(API, os.X_OK):
            self.skip_or_fail(f"{API} was not built (meson builds it with the tests)")
        p = subprocess.run([API, mode], stdin=stdin, capture_output=True, text=True, timeout=120)
        self.assertEqual((p.returncode, p.stdout), (0, f"ok {mode}\n"), p.stderr)

    def test_step_while_a_step_runs_and_stop_with_it_running(self):
        self.api("busy")

    def test_steps_after_init_died(self):
        self.api("ended")

    def test_bad_step_arguments_are_refused(self):
        # copy_in_fd left 0 (a zeroed struct nsbox_step): before, the caller's stdin went to
        # the sandbox's init as the step's copy-in stream; a memory below 6 MiB (a cgroup
        # leaf's memory.max that low is init's too) and an 8 GiB output limit (kept in the
        # caller's process) ran.
        r, w = os.pipe()
        try:
            with open(os.devnull, "rb") as null:
                self.api("bad", stdin=null)
            self.api("bad", stdin=r)  # a pipe nobody writes: init must never read it
        finally:
            os.close(r)
            os.close(w)

    def test_a_cancelled_start_leaves_nothing(self):
        self.api("cancel")

    def test_many_steps_keep_no_descriptor(self):
        self.api("many")

    def test_a_caller_that_ignores_sigchld_is_told(self):
        # The kernel would reap init itself: before, the payload ran and the run ended with
        # "supervising the sandbox failed: No child processes".
        self.api("sigchld")

if __name__ == "__main__":
    unittest.main()
