# SPDX-License-Identifier: LGPL-2.1-or-later
"""The --user of a run has a name: when the rootfs's /etc/passwd or /etc/group lacks its ids,
the run gets copies with a "sandbox" line added, bound read-only over them for that run only
(idfiles.c, mount_identity_files()); the rootfs is never written, and the default user
(nobody, in every rootfs) costs nothing."""
import os
import tempfile
import unittest

from nsboxtest import NsboxTestCase, nsbox_json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOTFS = os.environ.get("NSBOX_ROOTFS") or os.path.join(HERE, "..", "..", "build", "rootfs", "tree")

WHO = """
import getpass, grp, os, pwd
p = pwd.getpwuid(os.getuid())
print(getpass.getuser(), p.pw_uid, p.pw_gid, p.pw_dir, grp.getgrgid(os.getgid()).gr_name)
print(pwd.getpwnam('root').pw_uid, grp.getgrnam('root').gr_gid)
targets = [l.split()[4] for l in open('/proc/self/mountinfo')]
print('/etc/passwd' in targets, '/etc/group' in targets)
try:
    open('/etc/passwd', 'a')
    print('writable')
except OSError as e:
    print('refused')  # EROFS for the copy (the user owns it), EACCES for the rootfs's
"""


def rootfs_file(name):
    with open(os.path.join(ROOTFS, "etc", name), "rb") as f:
        return f.read()


class TestUserEntry(NsboxTestCase):
    def setUp(self):
        self.before = (rootfs_file("passwd"), rootfs_file("group"))
        self.addCleanup(lambda: self.assertEqual((rootfs_file("passwd"), rootfs_file("group")),
                                                 self.before, "the rootfs was written to"))

    def who(self, *opts):
        p, r = nsbox_json(*opts, "--", "python3", "-c", WHO)
        self.assertEqual(r["exit_code"], 0, f"{r.get('error')} {r['stderr']}")
        return r["stdout"].splitlines()

    def test_unknown_user_gets_an_entry(self):
        self.assertNotIn(b":1000:", self.before[0])
        self.assertEqual(self.who("-u", "1000"), [
            "sandbox 1000 1000 /tmp sandbox",
            "0 0",  # the rootfs's own lines are kept
            "True True",
            "refused",
        ])

    def test_only_the_missing_file_is_replaced(self):
        # nogroup (65534) is in the rootfs's /etc/group: only /etc/passwd gets a copy.
        self.assertEqual(self.who("-u", "4321:65534"), [
            "sandbox 4321 65534 /tmp nogroup", "0 0", "True False", "refused"])

    def test_default_user_needs_nothing(self):
        self.assertEqual(self.who(), [
            "nobody 65534 65534 /nonexistent nogroup", "0 0", "False False",
            "refused"])

    def test_a_bind_over_etc_is_left_alone(self):
        # What the caller bound at /etc/passwd is what the sandbox sees there.
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            mine = os.path.join(d, "passwd")
            with open(mine, "w") as f:
                f.write("me:x:1000:1000::/home/me:/bin/sh\n")
            os.chmod(mine, 0o644)
            p, r = nsbox_json("-u", "1000", "-v", f"{mine}:/etc/passwd", "--", "python3", "-c",
                              "import getpass; print(getpass.getuser())")
        self.assertEqual((r["exit_code"], r["stdout"]), (0, "me\n"), r.get("error"))


if __name__ == "__main__":
    unittest.main()
