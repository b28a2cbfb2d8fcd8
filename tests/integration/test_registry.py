# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox ps and nsbox kill: running sandboxes of this user, listed and killed whole."""
import json
import os
import secrets
import signal
import subprocess
import time
import unittest

from nsboxtest import NSBOX, NsboxTestCase, nsbox, processes_with, wait_until


class TestPsKill(NsboxTestCase):
    def start(self, token):
        proc = subprocess.Popen(
            [NSBOX, "run", "--json", "--timeout", "60", "--", "python3", "-c",
             "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n"
             "print('ready', flush=True); time.sleep(60)", token],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.stderr.close)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.assertTrue(wait_until(lambda: len(processes_with(token)) >= 3, timeout=10))
        return proc

    def entries(self):
        p = nsbox("ps", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(l) for l in p.stdout.splitlines()]

    def test_ps_and_kill_one(self):
        token = "ps-" + secrets.token_hex(6)
        proc = self.start(token)
        mine = [e for e in self.entries() if token in " ".join(e["argv"])]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0]["pid"], proc.pid)
        self.assertEqual(mine[0]["limits"]["pids"], 64)
        table = nsbox("ps").stdout
        self.assertIn(mine[0]["run_id"], table)

        self.assertIn("python3 -c", table)  # the program, not nsbox's options
        self.assertNotIn("--timeout 60", table)
        start = time.monotonic()
        p = nsbox("kill", mine[0]["run_id"][:8])  # a unique prefix will do
        self.assertEqual((p.returncode, p.stdout), (0, f"killed {mine[0]['run_id']}\n"), p.stderr)
        proc.wait(timeout=10)
        self.assertLess(time.monotonic() - start, 1.5)
        r = json.loads(proc.stdout.read())
        self.assertEqual((proc.returncode, r["status"], r["signal"]), (137, "killed", 9))
        # Without --json, nsbox says why on stderr.
        token = "msg-" + secrets.token_hex(6)
        proc = subprocess.Popen([NSBOX, "run", "--", "python3", "-c", "import time; time.sleep(60)",
                                 token], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.stderr.close)
        self.assertTrue(wait_until(lambda: len(processes_with(token)) >= 2, timeout=10))
        self.assertEqual(nsbox("kill", "--all").returncode, 0)
        self.assertEqual(proc.wait(timeout=10), 137)
        self.assertIn("nsbox: killed on request (nsbox kill)", proc.stderr.read())
        self.assertEqual(processes_with(token), [])
        self.assertFalse([e for e in self.entries() if token in " ".join(e["argv"])])

    def test_kill_all_and_unknown(self):
        tokens = ["all-" + secrets.token_hex(6) for _ in range(2)]
        procs = [self.start(t) for t in tokens]
        p = nsbox("kill", "--all")
        self.assertEqual(p.returncode, 0, p.stderr)
        for proc in procs:
            self.assertEqual(proc.wait(timeout=10), 137)
        for t in tokens:
            self.assertEqual(processes_with(t), [])
        p = nsbox("kill", "0123456789abcdef0123456789abcdef")
        self.assertOneLineError(p, code=1, contains="no running sandbox")
        self.assertEqual(nsbox("kill", "--all").returncode, 0)  # nothing left: fine
        self.assertOneLineError(nsbox("kill"), contains="usage: nsbox kill")

    def start_and_sigkill(self, token):
        proc = self.start(token)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        self.assertTrue(wait_until(lambda: not processes_with(token), timeout=5))
        self.assertEqual(len(record_files(token)), 1, "SIGKILL leaves the record behind")

    def test_records_of_killed_nsbox_are_dropped(self):
        token = "stale-" + secrets.token_hex(6)
        self.start_and_sigkill(token)
        self.assertFalse([e for e in self.entries() if token in " ".join(e["argv"])])

    def test_next_run_removes_a_killed_nsbox_record(self):
        # Without `nsbox ps`: the next `nsbox run` removes the record a SIGKILLed nsbox left.
        token = "stale-run-" + secrets.token_hex(6)
        self.start_and_sigkill(token)
        p = nsbox("run", "--", "true")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(record_files(token), [])


    def test_a_record_without_a_start_time_is_dropped(self):
        # A pid that is gone has no start time (0): a record claiming 0 must not stay "live".
        nsbox("ps")  # makes the directory
        token = "nostart-" + secrets.token_hex(6)
        run_id = secrets.token_hex(16)
        with open(os.path.join(registry_dir(), run_id + ".json"), "w") as f:
            json.dump({"run_id": run_id, "pid": 2 ** 22 + 1, "start": 0, "started": 0,
                       "argv": [token], "limits": {}}, f)
        self.assertFalse([e for e in self.entries() if token in " ".join(e["argv"])])
        self.assertEqual(record_files(token), [])


def registry_dir():
    """registry.c's choice: $XDG_RUNTIME_DIR/nsbox if it is ours, else /run/user/UID/nsbox if
    ours, else /tmp/nsbox-UID."""
    uid = os.getuid()
    for base in (os.environ.get("XDG_RUNTIME_DIR"), f"/run/user/{uid}"):
        if base and base.startswith("/") and os.path.isdir(base) and os.stat(base).st_uid == uid:
            return f"{base}/nsbox"
    return f"/tmp/nsbox-{uid}"


def record_files(token):
    """The registry records naming token, read from the directory itself."""
    d = registry_dir()
    found = []
    for name in os.listdir(d):
        with open(os.path.join(d, name)) as f:
            if token in f.read():
                found.append(name)
    return found


if __name__ == "__main__":
    unittest.main()
