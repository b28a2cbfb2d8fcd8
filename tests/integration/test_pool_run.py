# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox run --pool with a run's own --memory and --copy-in (and the same for a session step).

A run's --memory lowers the pool's limit for that run only: the run is held to it (as a run
with that --memory is: the same status and note), the next run from the same pool has the
pool's whole limit again, and a value above the pool's is refused with one line. --copy-in
files are in /work for that run and not for the next; a bad source is refused with one line.
A session step's --memory holds for that step only, in a program step and in the session's
interpreter, which cannot raise it back.

Uses test_pool's private registry and pool helpers."""
import json
import os
import shutil
import tempfile

import test_pool
from nsboxtest import nsbox
from test_pool import PoolTestCase

# Allocates 100 MiB: above a run's --memory 64m, within the pool's 256m.
ALLOC = ("try:\n"
         "    b = bytearray(100 << 20)\n"
         "    print('allocated')\n"
         "except MemoryError:\n"
         "    print('MemoryError')\n"
         "    raise\n")


def setUpModule():
    test_pool.setUpModule()


def tearDownModule():
    test_pool.tearDownModule()


class TestPoolRunMemory(PoolTestCase):
    size = 1

    def test_a_lower_memory_holds_for_its_run_only(self):
        name = self.start_pool("--memory", "256m")
        r = self.pool_run(name, ALLOC, "--memory", "64m")
        # As a run with --memory 64m ends (its own JSON beside it).
        p = nsbox("run", "--json", *self.extra, "--memory", "64m", "--code", "-", input=ALLOC)
        run = json.loads(p.stdout)
        self.assertEqual(r["limits"]["memory"]["bytes"], 64 << 20, r)
        self.assertEqual((r["status"], r["exit_code"], r["limit"]),
                         (run["status"], run["exit_code"], run["limit"]), (r, run))
        self.assertNotIn("allocated", r["stdout"], r)
        if r["limits"]["memory"]["enforced_by"] == "cgroup":
            self.assertEqual((r["status"], r["limit"]), ("oom", "memory"), r)
        else:
            self.assertEqual(r["status"], "exited", r)
            self.assertIn("MemoryError", r["stdout"], r)
        self.assertEqual([n for n in r["notes"] if "--memory 64m" in n],
                         [n for n in run["notes"] if "--memory 64m" in n], (r, run))
        self.assertTrue(any("--memory 64m" in n for n in r["notes"]), r)
        # The next run from the same pool has the pool's whole limit.
        r = self.pool_run(name, ALLOC)
        self.assertEqual((r["status"], r["stdout"]), ("exited", "allocated\n"), r)
        self.assertEqual(r["limits"]["memory"]["bytes"], 256 << 20, r)
        # A program run too.
        p = nsbox("run", "--pool", name, "--json", "--memory", "64m", "--", "python3", "-c",
                  ALLOC)
        r = json.loads(p.stdout)
        self.assertEqual(r["limits"]["memory"]["bytes"], 64 << 20, r)
        self.assertNotIn("allocated", r["stdout"], r)

    def test_a_run_cannot_raise_its_own_limit_back(self):
        name = self.start_pool("--memory", "256m")
        code = ("import resource\n"
                "try:\n"
                "    resource.setrlimit(resource.RLIMIT_DATA, (256 << 20, 256 << 20))\n"
                "    print('raised')\n"
                "except (ValueError, OSError):\n"
                "    print('refused')\n" + ALLOC)
        r = self.pool_run(name, code, "--memory", "64m")
        if r["limits"]["memory"]["enforced_by"] == "rlimit":
            self.assertIn("refused", r["stdout"], r)
        self.assertNotIn("allocated", r["stdout"], r)

    def test_a_higher_memory_is_refused(self):
        name = self.start_pool("--memory", "128m")
        p = nsbox("run", "--pool", name, "--memory", "512m", "--", "true")
        self.assertOneLineError(p, contains="--memory 512m is above the pool's --memory 128m")
        self.assertIn("nsbox pool start", p.stderr)
        p = nsbox("run", "--pool", name, "--json", "--memory", "unlimited", "--", "true")
        self.assertOneLineError(p, contains="--memory unlimited is above the pool's")
        r = json.loads(p.stdout)
        self.assertEqual((r["status"], r["exit_code"]), ("error", 125), r)
        self.assertIn("above the pool's --memory 128m", r["reason"])
        # The floor and the format of nsbox run's --memory.
        p = nsbox("run", "--pool", name, "--memory", "12Q", "--", "true")
        self.assertOneLineError(p, contains="invalid value '12Q' for --memory")
        p = nsbox("run", "--pool", name, "--memory", "3m", "--", "true")
        self.assertOneLineError(p, contains="--memory must be at least 6m (6 MiB)")
        # The pool is not harmed: the next run has the pool's limit.
        p = nsbox("run", "--pool", name, "--json", "--", "true")
        self.assertEqual(json.loads(p.stdout)["limits"]["memory"]["bytes"], 128 << 20)


class TestPoolRunFiles(PoolTestCase):
    size = 1

    def setUp(self):
        super().setUp()
        self.src = tempfile.mkdtemp(prefix="nsbox-pool-in-")
        self.addCleanup(shutil.rmtree, self.src, ignore_errors=True)
        os.makedirs(os.path.join(self.src, "d"))
        with open(os.path.join(self.src, "a.txt"), "w") as f:
            f.write("file a")
        with open(os.path.join(self.src, "d", "b.txt"), "w") as f:
            f.write("file b")
        os.chmod(self.src, 0o755)  # read by nsbox as the caller (uid 65534 too)
        for root, dirs, files in os.walk(self.src):
            for n in dirs:
                os.chmod(os.path.join(root, n), 0o755)
            for n in files:
                os.chmod(os.path.join(root, n), 0o644)

    def test_files_are_in_work_for_their_run_only(self):
        name = self.start_pool()
        code = ("import os\n"
                "print(sorted(os.listdir('/work')))\n"
                "print(open('/work/a.txt').read(), open('/work/in/d/b.txt').read())\n")
        r = self.pool_run(name, code, "--copy-in", f"{self.src}/a.txt:/work/a.txt",
                          "--copy-in", f"{self.src}/.:/work/in/")
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 0), r)
        self.assertEqual(r["stdout"], "['a.txt', 'in']\nfile a file b\n", r)
        # Not written by the run: not in its files_written.
        self.assertEqual(r["files_written"] or [], [], r)
        r = self.pool_run(name, "import os\nprint(sorted(os.listdir('/work')))\n")
        self.assertEqual(r["stdout"], "[]\n", r)
        p = nsbox("run", "--pool", name, "--copy-in", f"{self.src}/d:/work/d", "--", "cat",
                  "/work/d/b.txt")
        self.assertEqual((p.returncode, p.stdout), (0, "file b"), p.stderr)

    def test_bad_copy_in_is_one_line(self):
        name = self.start_pool()
        p = nsbox("run", "--pool", name, "--copy-in", f"{self.src}/missing:/work/x", "--",
                  "true")
        self.assertOneLineError(p, contains=f"--copy-in source '{self.src}/missing'")
        os.symlink("a.txt", os.path.join(self.src, "link"))
        if os.geteuid() == 0:
            os.chown(self.src, 65534, 65534)  # not only root's: its symlinks are not followed
        q = nsbox("run", *self.extra, "--copy-in", f"{self.src}/link:/work/x", "--", "true")
        self.assertOneLineError(q, contains="is a symlink")  # as a run refuses it
        p = nsbox("run", "--pool", name, "--json", "--copy-in", f"{self.src}/link:/work/x",
                  "--", "true")
        self.assertOneLineError(p, contains="is a symlink")
        self.assertEqual(json.loads(p.stdout)["status"], "error")
        p = nsbox("run", "--pool", name, "--copy-in", f"{self.src}/a.txt:/proc/x", "--", "true")
        self.assertOneLineError(p, contains="invalid --copy-in target '/proc/x'")
        p = nsbox("run", "--pool", name, "--copy-in", "nocolon", "--", "true")
        self.assertOneLineError(p, contains="invalid value 'nocolon' for --copy-in")
        # Unpacking fails inside (a read-only place): the run's error, said in its result.
        p = nsbox("run", "--pool", name, "--json", "--copy-in", f"{self.src}/a.txt:/usr/x",
                  "--", "true")
        r = json.loads(p.stdout)
        self.assertEqual((p.returncode, r["status"], r["error"]["step"]),
                         (125, "error", "copy-in"), r)

    def test_cell(self):
        name = self.start_pool()
        r = self.pool_run(name, "1 + 1\n", "--cell")
        self.assertEqual(r["outputs"][0]["data"]["text/plain"], "2", r)
        p = nsbox("run", "--pool", name, "--cell", "--", "true")
        self.assertOneLineError(p, contains="--cell runs Python code as a notebook cell")


class TestSessionStepMemory(PoolTestCase):
    def test_a_step_memory_holds_for_that_step_only(self):
        p = nsbox("session", "start", *self.extra, "--memory", "256m")
        if p.returncode != 0 and "rootfs" in p.stderr:
            self.skip_or_fail(f"no rootfs: {p.stderr.strip()}")
        self.assertEqual(p.returncode, 0, p.stderr)
        sid = p.stdout.strip()
        self.addCleanup(nsbox, "session", "stop", sid)

        def step(*args, code=None):
            if code is not None:
                args += ("--code", "-")
            q = nsbox("session", "exec", sid, "--json", *args, input=code)
            return json.loads(q.stdout)
        r = step(code="x = 1\n")
        self.assertEqual(r["interpreter"], "started", r)
        r = step("--memory", "64m", code=ALLOC)
        self.assertNotIn("allocated", r["stdout"], r)
        self.assertEqual(r["limits"]["memory"]["bytes"], 64 << 20, r)
        lowered = r["limits"]["memory"]["enforced_by"] == "rlimit"
        if lowered:
            self.assertTrue(any("fresh one" in w for w in r["warnings"]), r)
        r = step(code=ALLOC + "print(globals().get('x'))\n")
        self.assertEqual(r["stdout"], "allocated\n" + ("None" if lowered else "1") + "\n", r)
        self.assertEqual(r["limits"]["memory"]["bytes"], 256 << 20, r)
        r = step("--memory", "64m", "--", "python3", "-c", ALLOC)
        self.assertNotIn("allocated", r["stdout"], r)
        r = step("--", "python3", "-c", ALLOC)
        self.assertEqual(r["stdout"], "allocated\n", r)
        q = nsbox("session", "exec", sid, "--memory", "1g", "--", "true")
        self.assertOneLineError(q, contains="above the session's --memory 256m")
