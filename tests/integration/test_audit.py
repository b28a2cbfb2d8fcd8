# SPDX-License-Identifier: LGPL-2.1-or-later
"""The audit log (--log, NSBOX_LOG): a record before the payload starts and one when it ends,
whole lines even from concurrent runs; a run that cannot be logged does not start."""
import hashlib
import json
import os
import subprocess
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

from nsboxtest import NSBOX, NsboxTestCase, nsbox, nsbox_json


class TestAuditLog(NsboxTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="nsbox-audit-")
        self.log = os.path.join(self.tmp.name, "audit.jsonl")

    def tearDown(self):
        self.tmp.cleanup()

    def records(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def pairs(self):
        recs = self.records()
        starts = {r["run_id"]: r for r in recs if r["event"] == "start"}
        ends = {r["run_id"]: r for r in recs if r["event"] == "end"}
        self.assertEqual(set(starts), set(ends), "every start has its end")
        self.assertEqual(len(starts) * 2, len(recs))
        return starts, ends

    def test_success_failure_timeout(self):
        code = "import sys\nprint('hi')\nsys.exit(int(sys.argv[1]))\n"
        with open(os.path.join(self.tmp.name, "main.py"), "w") as f:
            f.write(code)
        main = f.name
        os.chmod(self.tmp.name, 0o755)
        os.chmod(main, 0o644)
        self.assertEqual(nsbox("run", "--log", self.log, "--code", main, "--", "0").returncode, 0)
        self.assertEqual(nsbox("run", "--log", self.log, "--code", main, "--", "3").returncode, 3)
        p = nsbox("run", "--log", self.log, "--timeout", "0.5", "--", "python3", "-c",
                  "while True: pass")
        self.assertEqual(p.returncode, 124)
        starts, ends = self.pairs()
        self.assertEqual(len(starts), 3)
        by_order = [r for r in self.records() if r["event"] == "start"]
        first = by_order[0]
        self.assertEqual(first["code"], code)
        self.assertEqual(first["code_sha256"], hashlib.sha256(code.encode()).hexdigest())
        self.assertEqual(first["uid"], os.getuid())
        self.assertEqual(first["argv"][:2], [NSBOX, "run"])
        self.assertEqual(first["limits"]["memory"], 256 << 20)
        self.assertIsNone(by_order[2]["code"])
        self.assertEqual(by_order[2]["program"], ["python3", "-c", "while True: pass"])
        statuses = [ends[r["run_id"]]["result"]["status"] for r in by_order]
        codes = [ends[r["run_id"]]["result"]["exit_code"] for r in by_order]
        self.assertEqual(statuses, ["exited", "exited", "timeout"])
        self.assertEqual(codes, [0, 3, 124])
        self.assertEqual(ends[first["run_id"]]["result"]["stdout"], "hi\n")
        self.assertEqual(oct(os.stat(self.log).st_mode & 0o777), "0o600")

    def test_code_limit_and_env(self):
        code = "x = 1  # " + "y" * 5000 + "\n"
        p = nsbox("run", "--log-code-limit", "100", "--code", "-", input=code,
                  env=dict(os.environ, NSBOX_LOG=self.log))
        self.assertEqual(p.returncode, 0, p.stderr)
        start = self.records()[0]
        self.assertEqual(len(start["code"]), 100)
        self.assertTrue(start["code_truncated"])
        self.assertEqual(start["code_bytes"], len(code))
        self.assertEqual(start["code_sha256"], hashlib.sha256(code.encode()).hexdigest())

    def test_nsbox_errors_are_logged(self):
        nsbox("run", "--log", self.log, "--rootfs", "/nonexistent", "--", "true")
        starts, ends = self.pairs()
        (end,) = ends.values()
        self.assertEqual((end["result"]["status"], end["result"]["error"]["step"]),
                         ("error", "rootfs"))

    def test_concurrent_runs_never_interleave(self):
        def one(i):
            return nsbox("run", "--log", self.log, "--", "python3", "-c",
                         f"print('run {i}' * 500)").returncode
        with ThreadPoolExecutor(max_workers=8) as pool:
            self.assertEqual(list(pool.map(one, range(20))), [0] * 20)
        starts, ends = self.pairs()  # every line parsed as JSON
        self.assertEqual(len(starts), 20)
        outputs = sorted(e["result"]["stdout"][:6] for e in ends.values())
        self.assertEqual(len(outputs), 20)

    def test_unwritable_log_means_no_run(self):
        os.mkdir(os.path.join(self.tmp.name, "dir"))
        p = nsbox("run", "--log", os.path.join(self.tmp.name, "dir"), "--", "python3", "-c",
                  "print('RAN')")
        self.assertOneLineError(p, contains="the run does not start")
        self.assertNotIn("RAN", p.stdout)
        p = nsbox("run", "--json", "--log", "/nonexistent/dir/log", "--", "python3", "-c",
                  "print('RAN')")
        self.assertEqual(p.returncode, 125)
        r = json.loads(p.stdout)
        self.assertEqual(r["status"], "error")
        self.assertIn("audit log", r["error"]["message"])
        self.assertEqual(r["stdout"], "")


class TestAuditLogPlace(NsboxTestCase):
    """The log is the caller's own regular file, outside every writable bind of the run: an
    audit log the audited code can edit, or redirect, is none."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="nsbox-audit-")
        self.addCleanup(self.tmp.cleanup)
        os.chmod(self.tmp.name, 0o755)
        self.shared = os.path.join(self.tmp.name, "shared")
        os.mkdir(self.shared)
        os.chmod(self.shared, 0o777)  # writable by root's sandboxes too
        # A file of the caller's that nobody else may read or write (~/.bashrc, say).
        self.victim = os.path.join(self.tmp.name, "victim")
        with open(self.victim, "w") as f:
            f.write("untouched\n")
        os.chmod(self.victim, 0o600)

    def run_logged(self, log, *opts):
        return nsbox("run", "--log", log, *opts, "--", "python3", "-c", "print('RAN')", timeout=20)

    def assertRefused(self, p, contains):
        self.assertOneLineError(p, contains=contains)
        self.assertIn("the run does not start", p.stderr)
        self.assertNotIn("RAN", p.stdout)

    def test_symlink_planted_by_an_earlier_run_is_refused(self):
        # Run 1 has the log's directory writable and leaves the log as a link to the victim.
        log = os.path.join(self.shared, "audit.jsonl")
        p, r = nsbox_json("-v", f"{self.shared}:/mnt:rw", "--", "python3", "-c",
                          f"import os; os.symlink({self.victim!r}, '/mnt/audit.jsonl')")
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 0), r)
        self.assertTrue(os.path.islink(log))
        # Run 2 logs there: nothing may be appended to the victim.
        self.assertRefused(self.run_logged(log), "is a symlink")
        with open(self.victim) as f:
            self.assertEqual(f.read(), "untouched\n")

    def test_fifo_is_refused_without_blocking(self):
        log = os.path.join(self.tmp.name, "fifo")
        os.mkfifo(log, 0o600)
        self.assertRefused(self.run_logged(log), "not a regular file")

    def test_log_of_someone_else_is_refused(self):
        log = os.path.join(self.tmp.name, "theirs.jsonl")
        with open(log, "w"):
            pass
        if os.geteuid() == 0:
            os.chown(log, 65534, 65534)
            self.assertRefused(self.run_logged(log), "belongs to uid 65534")
        # A second name is a second place to edit it from.
        os.unlink(log)
        with open(log, "w"):
            pass
        os.link(log, log + ".2")
        self.assertRefused(self.run_logged(log), "2 names")

    def test_log_inside_a_writable_bind_is_refused(self):
        log = os.path.join(self.shared, "audit.jsonl")
        parent = self.tmp.name
        detour = os.path.join(self.shared, "sub")
        os.mkdir(detour)
        for bind in (f"{self.shared}:/mnt:rw", f"{parent}:/mnt:rw", f"{detour}/..:/mnt:rw",
                     f"{log}:/tmp/log:rw"):
            with self.subTest(bind=bind):
                if bind.startswith(log):
                    with open(log, "a"):
                        pass
                self.assertRefused(self.run_logged(log, "-v", bind), "inside the writable bind")
        # Read-only binds, and a writable one beside the log, are fine.
        for opts in (("-v", f"{self.shared}:/mnt"), ("-v", f"{detour}:/mnt:rw")):
            with self.subTest(opts=opts):
                p = self.run_logged(log, *opts)
                self.assertEqual((p.returncode, p.stdout), (0, "RAN\n"), p.stderr)


if __name__ == "__main__":
    unittest.main()
