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

from nsboxtest import NSBOX, NsboxTestCase, nsbox


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


if __name__ == "__main__":
    unittest.main()
