# SPDX-License-Identifier: LGPL-2.1-or-later
"""Host paths a sandbox could have written: a -v source reached through a symlink that an
earlier run planted in a writable bind is refused; the system's own symlinks still work."""
import os
import secrets
import shutil
import subprocess
import tempfile
import unittest

from nsboxtest import NsboxTestCase, nsbox, nsbox_json


def py(code, *opts, **kw):
    return nsbox_json(*opts, "--", "python3", "-c", code, **kw)


class TestBindSourceSymlinks(NsboxTestCase):
    """Run 1 has a writable bind and replaces a directory in it with a symlink to something the
    caller never bound: for root's sandboxes (the host's nobody) a directory inside a 0700 one
    of root's, for an ordinary user's (the user themself) their ~/.ssh. Run 2 names the planted
    path as a -v source."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="nsbox-paths-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        os.chmod(self.tmp, 0o755)
        private = os.path.join(self.tmp, "private")  # root's 0700 directory, or ~/.ssh's parent
        os.mkdir(private, 0o700)
        self.secret_dir = os.path.join(private, "keys")
        os.mkdir(self.secret_dir, 0o755)
        self.token = "secret-" + secrets.token_hex(8)
        with open(os.path.join(self.secret_dir, "id_rsa"), "w") as f:
            f.write(self.token)
        os.chmod(os.path.join(self.secret_dir, "id_rsa"), 0o644)
        self.shared = os.path.join(self.tmp, "shared")
        os.mkdir(self.shared)
        os.chmod(self.shared, 0o777)  # writable by root's sandboxes too
        p, r = py(f"import os; os.symlink({self.secret_dir!r}, '/mnt/sub')",
                  "-v", f"{self.shared}:/mnt:rw")
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 0), r)
        self.assertTrue(os.path.islink(os.path.join(self.shared, "sub")))

    def read(self, source, target="/mnt", path="/mnt/id_rsa", cwd=None):
        return subprocess.run(
            [os.environ.get("NSBOX") or "nsbox", "run", "-v", f"{source}:{target}", "--",
             "cat", path], capture_output=True, text=True, cwd=cwd, timeout=60)

    def test_the_caller_can_bind_the_target_itself(self):
        # What the caller names explicitly is bound: the refusal below is about the symlink.
        p = self.read(self.secret_dir)
        self.assertEqual((p.returncode, p.stdout), (0, self.token), p.stderr)

    def test_planted_symlink_is_refused(self):
        sub = os.path.join(self.shared, "sub")
        for source, cwd in ((sub, None), (sub + "/", None), ("sub", self.shared),
                            (self.shared + "/./sub", None)):
            with self.subTest(source=source):
                p = self.read(source, cwd=cwd)
                self.assertNotIn(self.token, p.stdout)
                self.assertOneLineError(p, contains="symlink")
                self.assertIn(sub, p.stderr)

    def test_planted_symlink_below_the_source_is_refused(self):
        # The link in the middle of the path, the file bound on its own.
        p = self.read(os.path.join(self.shared, "sub", "id_rsa"), target="/tmp/f", path="/tmp/f")
        self.assertNotIn(self.token, p.stdout)
        self.assertOneLineError(p, contains="symlink")

    def test_symlink_of_the_caller_is_refused(self):
        # A link the caller made is indistinguishable from one an ordinary user's sandbox made
        # (both are the caller's): the rule takes only root's links in root's directories.
        own = os.path.join(self.tmp, "mine")
        os.symlink(self.secret_dir, own)
        p = self.read(own)
        if os.geteuid() == 0:
            # ...unless the caller is root, the directory is root's and only root's to write.
            self.assertEqual((p.returncode, p.stdout), (0, self.token), p.stderr)
            os.chmod(self.tmp, 0o775)
            p = self.read(own)
        self.assertNotIn(self.token, p.stdout)
        self.assertOneLineError(p, contains="symlink")

    def test_system_symlinks_are_followed(self):
        # Merged /usr: /lib is root's link in root's /, as /home -> /var/home is on some hosts.
        st = os.lstat("/lib")
        if not os.path.islink("/lib") or st.st_uid != 0 or not os.path.exists("/lib/os-release"):
            self.skip_or_fail("/lib is not a symlink of root's to a directory with os-release")
        with open("/lib/os-release") as f:
            want = f.read()
        p = self.read("/lib/os-release", target="/tmp/os-release", path="/tmp/os-release")
        self.assertEqual((p.returncode, p.stdout), (0, want), p.stderr)


if __name__ == "__main__":
    unittest.main()
