# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox doctor on this host, and with user namespaces taken away."""
import hashlib
import os
import subprocess
import tempfile
import unittest

from nsboxtest import NSBOX, NsboxTestCase, nsbox, root_only


class TestDoctor(NsboxTestCase):
    def test_this_host(self):
        p = nsbox("doctor")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        lines = p.stdout.splitlines()
        for check in ("user namespaces:", "seccomp:", "rootfs ", "nsbox run:"):
            self.assertTrue(any(l.startswith("ok") and check in l for l in lines),
                            f"no ok line for {check!r}: {p.stdout}")
        self.assertTrue(any(l.startswith(("ok", "warn")) and "cgroup v2:" in l for l in lines))
        self.assertEqual(lines[-1], "nsbox run works here")
        self.assertIn("info  isolation here: tier 1 (the full sandbox):", p.stdout)

    def test_read_only_proc_sys_is_a_wall(self):
        # A container's read-only /proc/sys (a bind over itself, as runtimes make it): the
        # run fails at once, with the mount /proc step and the fix (test_isolation.py).
        script = ("mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && "
                  "exec \"$0\" doctor")
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                            NSBOX], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("and /proc/sys is read-only", p.stdout)
        self.assertIn("FAIL  nsbox run: /proc/sys is read-only here", p.stdout)

    def test_missing_rootfs(self):
        p = nsbox("doctor", "--rootfs", "/nonexistent")
        self.assertEqual(p.returncode, 1)
        self.assertIn("FAIL  rootfs /nonexistent", p.stdout)
        self.assertIn("fix", p.stdout)

    def test_rootfs_checked_against_its_manifest(self):
        with tempfile.TemporaryDirectory() as d:
            tree = os.path.join(d, "tree")
            # No mount points: nsbox makes them in a skeleton (test_mountpoints.py).
            os.makedirs(os.path.join(tree, "usr/bin"))
            with open(os.path.join(tree, "usr/bin/python3"), "w") as f:
                f.write("not really python")
            digest = hashlib.sha256(b"not really python").hexdigest()
            with open(os.path.join(d, "manifest"), "w") as f:
                f.write(f"{digest}  ./usr/bin/python3\n")
            p = nsbox("doctor", "--rootfs", tree)
            self.assertIn(f"ok    rootfs {tree}: complete, matching its manifest (1 files)", p.stdout)
            with open(os.path.join(tree, "usr/bin/python3"), "a") as f:
                f.write("!")
            p = nsbox("doctor", "--rootfs", tree)
            self.assertEqual(p.returncode, 1)
            self.assertIn("differs from its manifest at /usr/bin/python3 (changed)", p.stdout)

    def test_without_user_namespaces(self):
        # user.max_user_namespaces is per user namespace: inside one whose limit is 0, nothing
        # more can be created, as on a host that turned them off.
        script = ("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" doctor")
        p = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c", script, NSBOX],
                           capture_output=True, text=True, timeout=60)
        if "Permission denied" in p.stderr or "Operation not permitted" in p.stderr:
            self.skip_or_fail(f"cannot lower user.max_user_namespaces here: {p.stderr.strip()}")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("FAIL  user namespaces:", p.stdout)
        self.assertIn("user.max_user_namespaces", p.stdout)
        self.assertEqual(p.stdout.splitlines()[-1],
                         "nsbox run cannot work here: fix the FAIL lines above")


# Making a read-only /proc/sys takes root (a mount namespace of the test's own): as uid 65534
# these are not collected; the root suite runs them (as uid 65534 too, where that matters).
load_tests = root_only(("test_read_only_proc_sys_is_a_wall",))


if __name__ == "__main__":
    unittest.main()
