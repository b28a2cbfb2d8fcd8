# SPDX-License-Identifier: LGPL-2.1-or-later
"""Mount points the rootfs lacks: a tree without /proc, /dev, /tmp, /work or /mnt (a `docker
export`, a plain debootstrap) runs, and so does a -v or --tmpfs target missing from it; nsbox
makes them in a read-only tmpfs skeleton and never writes to the rootfs (mount.c)."""
import os
import shutil
import subprocess
import tempfile
import unittest

from nsboxtest import NsboxTestCase, nsbox, nsbox_json

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


class TestMountSyntax(NsboxTestCase):
    """-v with a trailing slash on the target, and Docker's --mount for what -v cannot say."""

    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="nsbox-mount-")
        self.addCleanup(shutil.rmtree, self.base, ignore_errors=True)
        os.chmod(self.base, 0o755)
        # A source whose name holds ':', which -v cannot name.
        self.tmp = os.path.join(self.base, "a:b")
        os.mkdir(self.tmp)
        os.chmod(self.tmp, 0o777)
        with open(os.path.join(self.tmp, "f.txt"), "w") as f:
            f.write("from a path with a colon\n")
        os.chmod(os.path.join(self.tmp, "f.txt"), 0o644)

    def test_volume_target_with_trailing_slash(self):
        p, r = nsbox_json("-v", f"{self.base}:/mnt/", "--", "cat", "/mnt/a:b/f.txt")
        self.assertEqual(r["exit_code"], 0, f"{r.get('error')} {r['stderr']}")
        self.assertEqual(r["stdout"], "from a path with a colon\n")

    def test_volume_cannot_name_a_source_with_a_colon(self):
        p = nsbox("run", "-v", f"{self.tmp}:/mnt", "--", "true")
        self.assertOneLineError(p, contains="needs --mount type=bind,source=")

    def test_mount_bind_source_with_a_colon(self):
        p, r = nsbox_json("--mount", f"type=bind,source={self.tmp},target=/data/",
                          "--", "sh", "-c", "cat /data/f.txt; touch /data/new")
        self.assertEqual(r["stdout"], "from a path with a colon\n", f"{r.get('error')}")
        self.assertIn("Read-only file system", r["stderr"], "read-only unless readonly=false")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "new")))

        p, r = nsbox_json("--mount", f"type=bind,src={self.tmp},dst=/data,readonly=false",
                          "--", "touch", "/data/new")
        self.assertEqual(r["exit_code"], 0, f"{r.get('error')} {r['stderr']}")
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "new")))

    def test_mount_quoted_field_holds_a_comma(self):
        d = os.path.join(self.tmp, "x,y")
        os.mkdir(d)
        os.chmod(d, 0o755)
        with open(os.path.join(d, "g"), "w") as f:
            f.write("comma\n")
        os.chmod(os.path.join(d, "g"), 0o644)
        p, r = nsbox_json("--mount", f'type=bind,"source={d}",target=/data', "--", "cat",
                          "/data/g")
        self.assertEqual(r["stdout"], "comma\n", f"{r.get('error')} {r['stderr']}")

    def test_mount_tmpfs(self):
        p, r = nsbox_json("--mount", "type=tmpfs,destination=/scratch,tmpfs-size=1m,tmpfs-mode=700",
                          "--", "sh", "-c", "stat -c %a /scratch; grep ' /scratch ' /proc/mounts")
        self.assertEqual(r["exit_code"], 0, f"{r.get('error')} {r['stderr']}")
        mode, mount = r["stdout"].splitlines()
        self.assertEqual(mode, "700")
        self.assertIn("size=1024k", mount)
        self.assertIn("noexec", mount)

    def test_mount_source_follows_the_rules_of_v(self):
        # A symlink the caller made is refused the same way for -v and --mount (fileio.c,
        # path_open_nofollow()): a sandbox could have planted it. (In a directory others can
        # write: root's own links are followed only where only root can write.)
        shared = os.path.join(self.base, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        link = os.path.join(shared, "link")
        os.symlink(self.base, link)
        for opts in (["-v", f"{link}:/data"], ["--mount", f"type=bind,source={link},target=/data"]):
            p = nsbox("run", *opts, "--", "true")
            self.assertOneLineError(p, contains="is a symlink, and nsbox follows only root's")
        # The path it points to is taken by both.
        for opts in (["-v", f"{self.base}:/data"],
                     ["--mount", f"type=bind,source={self.base},target=/data"]):
            p, r = nsbox_json(*opts, "--", "cat", "/data/a:b/f.txt")
            self.assertEqual(r["exit_code"], 0, f"{opts}: {r.get('error')}")


if __name__ == "__main__":
    unittest.main()
