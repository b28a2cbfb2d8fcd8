# SPDX-License-Identifier: LGPL-2.1-or-later
"""cgroup placement on the test host. This host's cgroup v2 has no controllers (they are bound
to cgroup v1), so nsbox must take the rlimit fallback visibly, and refuse it when asked to.
The cgroup v2 behaviour itself is tested in a VM (tests/vm)."""
import os
import unittest

from nsboxtest import FALLBACK_WARNING, NsboxTestCase, nsbox, nsbox_json


def cgroup2_controllers():
    """The controllers the caller's cgroup v2 offers, or None without a cgroup2 mount."""
    mount = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if " - cgroup2 " in line and fields[3] == "/":
                mount = fields[4]
                break
    if not mount:
        return None
    with open("/proc/self/cgroup") as f:
        own = next(l[3:].strip() for l in f if l.startswith("0::"))
    try:
        with open(os.path.join(mount, own.lstrip("/"), "cgroup.controllers")) as f:
            return set(f.read().split())
    except OSError:
        return set()


class TestFallback(NsboxTestCase):
    def setUp(self):
        controllers = cgroup2_controllers()
        if controllers is not None and {"memory", "pids", "cpu"} <= controllers and os.geteuid() == 0:
            self.skip_or_fail("this host delegates cgroup v2 controllers: the fallback is not taken")

    def test_fallback_is_visible(self):
        p, r = nsbox_json("--", "true")
        self.assertEqual(r["status"], "exited", r)
        self.assertEqual(r["limits_enforced_by"], "rlimit")
        self.assertIn("RLIMIT_DATA", r["limits_note"])
        self.assertIsNone(r["cgroup"])
        warnings = [l for l in p.stderr.splitlines() if l.startswith(FALLBACK_WARNING)]
        self.assertEqual(len(warnings), 1, p.stderr)

    def test_required_refuses_the_fallback(self):
        p = nsbox("run", "--cgroup", "required", "--", "true")
        self.assertOneLineError(p, contains="--cgroup required:")
        p, r = nsbox_json("--cgroup=required", "--", "true")
        self.assertEqual((p.returncode, r["status"], r["error"]["step"]), (125, "error", "cgroup"))

    def test_off_is_quiet(self):
        p = nsbox("run", "--cgroup", "off", "--", "true")
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    def test_no_limits_no_warning(self):
        p = nsbox("run", "--memory", "unlimited", "--pids-limit", "unlimited", "--cpus",
                  "unlimited", "--", "true")
        self.assertEqual((p.returncode, p.stderr), (0, ""))

    def test_bad_values(self):
        self.assertOneLineError(nsbox("run", "--cgroup", "maybe", "--", "true"), contains="--cgroup")
        self.assertOneLineError(nsbox("run", "--cgroup-parent", "../x", "--", "true"),
                                contains="--cgroup-parent")


if __name__ == "__main__":
    unittest.main()
