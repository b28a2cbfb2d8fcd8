# SPDX-License-Identifier: LGPL-2.1-or-later
"""Mount points the rootfs lacks: a tree without /proc, /dev, /tmp, /work or /mnt (a `docker
export`, a plain debootstrap) runs, and so does a -v or --tmpfs target missing from it; nsbox
makes them in a read-only tmpfs skeleton and never writes to the rootfs (mount.c)."""
import os
import shutil
import subprocess
import tempfile
import unittest

from nsboxtest import NsboxTestCase, nsbox_json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOTFS = os.environ.get("NSBOX_ROOTFS") or os.path.join(HERE, "..", "..", "build", "rootfs", "tree")
BASE = ("proc", "dev", "tmp", "work", "mnt")


def snapshot(tree):
    """Every entry of tree with its type, mode, owner, size and mtime: what a write would
    change (the directories' mtimes show an entry made or removed)."""
    seen = {}
    for top, dirs, files in os.walk(tree):
        for name in [""] + dirs + files:
            path = os.path.join(top, name)
            st = os.lstat(path)
            seen[os.path.relpath(path, tree)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size,
                                                 st.st_mtime_ns)
    return seen


class TestMissingMountPoints(NsboxTestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isfile(os.path.join(ROOTFS, "usr", "bin", "python3")):
            raise unittest.SkipTest(f"no rootfs at {ROOTFS}")
        cls.tmp = tempfile.mkdtemp(prefix="nsbox-mountpoints-")
        os.chmod(cls.tmp, 0o755)
        # A copy without nsbox's mount points, as `docker export` gives. Cheap: the minimal
        # tree is small (and cp reflinks where it can). An ordinary user cannot copy root's
        # 0700 /root: what cp could not read is left out, which the test does not need.
        cls.tree = os.path.join(cls.tmp, "tree")
        subprocess.run(["cp", "-a", "--reflink=auto", ROOTFS, cls.tree],
                       stderr=subprocess.DEVNULL, check=False)
        if not os.path.isfile(os.path.join(cls.tree, "usr", "bin", "python3")):
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise AssertionError(f"could not copy {ROOTFS}")
        for name in BASE:
            shutil.rmtree(os.path.join(cls.tree, name), ignore_errors=True)
        cls.src = os.path.join(cls.tmp, "src")
        os.mkdir(cls.src)
        os.chmod(cls.src, 0o755)
        with open(os.path.join(cls.src, "hello.txt"), "w") as f:
            f.write("hello from the host\n")
        os.chmod(os.path.join(cls.src, "hello.txt"), 0o644)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.before = snapshot(self.tree)
        self.addCleanup(self.assert_unchanged)

    def assert_unchanged(self):
        self.assertEqual(snapshot(self.tree), self.before, "the rootfs was written to")

    def run_in(self, code, *opts):
        p, r = nsbox_json("--rootfs", self.tree, *opts, "--", "python3", "-c", code)
        self.assertEqual(r["status"], "exited", f"{r.get('error')} stderr={p.stderr!r}")
        return r

    def test_rootfs_without_mount_points_runs(self):
        for name in BASE:
            self.assertFalse(os.path.lexists(os.path.join(self.tree, name)))
        r = self.run_in(
            "import os\n"
            "print(sorted(os.listdir('/proc/self'))[:1] != [], os.listdir('/work'),\n"
            "      os.path.exists('/dev/null'), os.path.isdir('/tmp'), os.path.exists('/mnt'))\n"
            "open('/tmp/x', 'w').write('tmp is writable')\n"
            "try:\n"
            "    os.mkdir('/new')\n"
            "except OSError as e:\n"
            "    print('root', e.strerror)\n"
            "try:\n"
            "    open('/usr/x', 'w')\n"
            "except OSError as e:\n"
            "    print('usr', e.strerror)\n"
            "print(open('/etc/os-release').read().count('ID='))\n")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        lines = r["stdout"].splitlines()
        self.assertEqual(lines[0], "True [] True True False")
        self.assertEqual(lines[1], "root Read-only file system")
        self.assertEqual(lines[2], "usr Read-only file system")
        self.assertGreater(int(lines[3]), 0)

    def test_code_runs_in_work(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write("import os; print(os.getcwd(), sorted(os.listdir('.')))\n")
            f.flush()
            os.chmod(f.name, 0o644)
            p, r = nsbox_json("--rootfs", self.tree, "--code", f.name)
        self.assertEqual(r["exit_code"], 0, f"{r.get('error')} {r['stderr']}")
        self.assertEqual(r["stdout"], "/work ['main.py']\n")

    def test_bind_to_missing_targets(self):
        # /data: missing at the top; /home/user/project: below a directory the rootfs has;
        # /opt/cfg/hello.txt: a file, below directories neither has.
        hello = os.path.join(self.src, "hello.txt")
        r = self.run_in(
            "print(open('/data/hello.txt').read(), end='')\n"
            "print(open('/home/user/project/hello.txt').read(), end='')\n"
            "print(open('/opt/cfg/hello.txt').read(), end='')\n"
            "import os; print(sorted(os.listdir('/home')), os.path.isdir('/home/user'))\n",
            "-v", f"{self.src}:/data", "-v", f"{self.src}:/home/user/project",
            "-v", f"{hello}:/opt/cfg/hello.txt")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        self.assertEqual(r["stdout"], "hello from the host\n" * 3 + "['user'] True\n")

    def test_bind_to_missing_target_in_the_full_rootfs(self):
        # The ordinary case: the rootfs has its mount points, only the -v target is missing.
        root_before = snapshot(ROOTFS) if os.access(ROOTFS, os.W_OK) else None
        p, r = nsbox_json("-v", f"{self.src}:/data", "--", "cat", "/data/hello.txt")
        self.assertEqual(r["exit_code"], 0, f"{r.get('error')} {r['stderr']}")
        self.assertEqual(r["stdout"], "hello from the host\n")
        self.assertFalse(os.path.lexists(os.path.join(ROOTFS, "data")))
        if root_before is not None:
            self.assertEqual(snapshot(ROOTFS), root_before)

    def test_tmpfs_on_missing_target(self):
        r = self.run_in("open('/scratch/x', 'w').write('x'); print(open('/scratch/x').read())",
                        "--tmpfs", "/scratch:size=1m")
        self.assertEqual(r["stdout"], "x\n")

    def test_writable_bind_on_missing_target(self):
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o777)
            r = self.run_in("open('/out/result.txt', 'w').write('42')", "-v", f"{d}:/out:rw")
            self.assertEqual(r["exit_code"], 0, r["stderr"])
            with open(os.path.join(d, "result.txt")) as f:
                self.assertEqual(f.read(), "42")


if __name__ == "__main__":
    unittest.main()
