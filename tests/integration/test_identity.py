# SPDX-License-Identifier: LGPL-2.1-or-later
"""The --user of a run has a name: when the rootfs's /etc/passwd or /etc/group lacks its ids,
the run gets copies with a "sandbox" line added, bound read-only over them for that run only
(idfiles.c, mount_identity_files()); the rootfs is never written, and the default user
(nobody, in every rootfs) costs nothing."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from nsboxtest import NSBOX, NsboxTestCase, nsbox_json

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


class TestManyGroups(NsboxTestCase):
    """An ordinary user keeps their supplementary groups in the sandbox (setgroups is denied
    there), and /proc/self/status lists each one on its Groups line, before the capability
    masks that init reads back after dropping them all (caps_drop_all()): with 800 groups the
    file is over 5 KiB. Read into a fixed 4 KiB buffer, the masks were cut off and every run of
    such a user failed at "drop capabilities"; a mask cut in the middle would have parsed as a
    shorter value."""

    if os.getuid() == 0:
        def test_a_user_in_800_groups_runs_without_capabilities(self):
            if not shutil.which("setpriv"):
                self.skip_or_fail("needs setpriv(1) to act as a user with many groups")
            groups = ",".join(str(g) for g in range(20000, 20800))
            with tempfile.TemporaryDirectory() as stage:
                os.chmod(stage, 0o755)
                binary = os.path.join(stage, "nsbox")
                shutil.copy(NSBOX, binary)
                os.chmod(binary, 0o755)
                rootfs = os.path.realpath(ROOTFS)
                as_user = ["setpriv", "--reuid=65534", "--regid=65534", f"--groups={groups}"]
                if subprocess.run([*as_user, "test", "-r", os.path.join(rootfs, "etc", "passwd")],
                                  capture_output=True).returncode != 0:
                    # The checkout may sit where uid 65534 cannot reach (below /root).
                    subprocess.run(["cp", "-a", rootfs, os.path.join(stage, "rootfs")],
                                   check=True)
                    rootfs = os.path.join(stage, "rootfs")
                p = subprocess.run(
                    [*as_user, binary, "run", "--json", "--cgroup", "off", "--rootfs", rootfs,
                     "--", "python3", "-c",
                     "import os\n"
                     "s = open('/proc/self/status').read()\n"
                     "print(len(s) > 4096, len(os.getgroups()) >= 800)\n"
                     "print(*[l.split()[1] for l in s.splitlines() if l.startswith('Cap')])"],
                    capture_output=True, text=True, cwd="/", timeout=60)
            r = json.loads(p.stdout)
            self.assertEqual((p.returncode, r["status"]), (0, "exited"), p.stderr)
            self.assertEqual(r["stdout"].splitlines(), ["True True", " ".join(["0" * 16] * 5)])


if __name__ == "__main__":
    unittest.main()
