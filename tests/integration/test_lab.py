# SPDX-License-Identifier: LGPL-2.1-or-later
"""The lesson's lab: every attack is blocked by nsbox, and succeeds without it (negative
control), so none of these tests can pass by accident."""
import os
import secrets
import socket
import tempfile
import threading
import time
import unittest

from nsboxtest import (NsboxTestCase, attack_path, processes_with, run_bare, run_code,
                       wait_until)


class Listener:
    """A TCP listener on 127.0.0.1 that records whatever it receives."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    while chunk := conn.recv(4096):
                        self.received += chunk
                except OSError:
                    pass

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


class TestLab(NsboxTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="nsbox-lab-")
        os.chmod(self.tmp.name, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def test_read_host_file(self):
        canary = "CANARY-" + secrets.token_hex(8)
        secret = os.path.join(self.tmp.name, "secret.txt")
        with open(secret, "w") as f:
            f.write(canary)
        os.chmod(secret, 0o644)  # readable by anyone on the host: only isolation stops it

        bare = run_bare(attack_path("read_host_file"), secret)
        self.assertIn(canary, bare.stdout, "negative control: the attack must work bare")

        p, r = run_code(attack_path("read_host_file"), secret)
        self.assertEqual(r["status"], "exited", p.stderr)
        self.assertNotIn(canary, r["stdout"] + r["stderr"])
        self.assertIn("blocked", r["stdout"])

        # The lab's own line: /etc/passwd inside is the rootfs's, not the host's.
        with open("/etc/passwd") as f:
            host_users = {l.split(":")[0] for l in f if l.strip()}
        p, r = run_code(attack_path("read_host_file"), "/etc/passwd")
        inside_users = {l.split(":")[0] for l in r["stdout"].splitlines() if ":" in l}
        self.assertLessEqual(inside_users, {"root", "nobody"})
        self.assertTrue(host_users - inside_users, "host has more users than the rootfs")

    def test_phone_home(self):
        canary = "CANARY-" + secrets.token_hex(8)
        listener = Listener()
        try:
            bare = run_bare(attack_path("phone_home"), str(listener.port), canary)
            self.assertIn("sent", bare.stdout)
            self.assertTrue(wait_until(lambda: canary.encode() in listener.received),
                            "negative control: the listener must receive the canary")
            listener.received = b""
            connections = listener.connections

            p, r = run_code(attack_path("phone_home"), str(listener.port), canary)
            self.assertEqual(r["status"], "exited", p.stderr)
            self.assertIn("blocked", r["stdout"])
            time.sleep(0.3)
            self.assertEqual(listener.connections, connections)
            self.assertNotIn(canary.encode(), listener.received)
        finally:
            listener.close()

    def test_exhaust_memory(self):
        bare = run_bare(attack_path("exhaust_memory"))
        self.assertIn("ALLOCATED", bare.stdout, "negative control: 1 GB must fit bare")

        p, r = run_code(attack_path("exhaust_memory"), opts=("--memory", "256m"))
        self.assertNotIn("ALLOCATED", r["stdout"])
        self.assertNotEqual(r["exit_code"], 0)
        if r["limits"]["memory"]["enforced_by"] == "cgroup":
            self.assertEqual(r["status"], "oom", r)  # the cgroup's OOM killer
        else:
            self.assertIn("MemoryError", r["stderr"])  # RLIMIT_DATA refuses the allocation
        self.assertEqual(r["limits"]["memory"]["bytes"], 256 << 20)

    def test_fork_bomb(self):
        token = "bomb-" + secrets.token_hex(6)
        # Bare: all 200 children are made (the control), then they are cleaned up.
        bare = run_bare(attack_path("fork_bomb"), token, "200", "30")
        try:
            self.assertIn("FORKED 200", bare.stdout, "negative control: 200 forks bare")
        finally:
            for pid in processes_with(token):
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass

        token = "bomb-" + secrets.token_hex(6)
        start = time.monotonic()
        p, r = run_code(attack_path("fork_bomb"), token, "200", "30",
                        opts=("--pids-limit", "64", "--timeout", "10"))
        elapsed = time.monotonic() - start
        self.assertEqual(r["status"], "exited", p.stderr)
        made = int(r["stdout"].split()[1])
        self.assertLess(made, 64, "the pids limit must stop the bomb")
        self.assertLess(elapsed, 10, "the run ends within its timeout")
        # Children sleeping 30 s did not outlive the payload.
        self.assertTrue(wait_until(lambda: not processes_with(token), timeout=2),
                        f"left behind: {processes_with(token)}")

    def test_persist(self):
        work = os.path.join(self.tmp.name, "work")
        scratch = os.path.join(self.tmp.name, "scratch")
        os.mkdir(work)
        os.mkdir(scratch)
        bare1 = run_bare(attack_path("persist"), work, scratch)
        bare2 = run_bare(attack_path("persist"), work, scratch)
        self.assertIn("WROTE_WORK", bare1.stdout, "negative control")
        self.assertIn("FOUND", bare2.stdout, "negative control: bare, files survive")
        self.assertIn("FOUND_WORK", bare2.stdout, "negative control: bare, files survive")

        # /work and /tmp are writable (issue #17): what is written there dies with the run.
        p, r1 = run_code(attack_path("persist"), "/work", "/tmp")
        p, r2 = run_code(attack_path("persist"), "/work", "/tmp")
        for r in (r1, r2):
            self.assertEqual(r["status"], "exited", r)
            self.assertIn("WROTE_WORK", r["stdout"])
        self.assertIn("clean", r2["stdout"], "a file in /tmp must not survive the run")
        self.assertNotIn("FOUND_WORK", r2["stdout"], "a file in /work must not survive the run")

    def test_credentials(self):
        canaries = {
            "AWS_SECRET_ACCESS_KEY": "CANARY-aws-" + secrets.token_hex(8),
            "OPENAI_API_KEY": "CANARY-openai-" + secrets.token_hex(8),
            "GITHUB_TOKEN": "CANARY-gh-" + secrets.token_hex(8),
        }
        env = dict(os.environ, **canaries)
        bare = run_bare(attack_path("steal_env"), env=env)
        for v in canaries.values():
            self.assertIn(v, bare.stdout, "negative control")

        p, r = run_code(attack_path("steal_env"), env=env)
        self.assertEqual(r["status"], "exited", p.stderr)
        for v in canaries.values():
            self.assertNotIn(v, r["stdout"])
        names = {l.split("=")[0] for l in r["stdout"].splitlines()}
        self.assertEqual(names, {"PATH", "HOME", "LANG", "PYTHONUNBUFFERED", "OPENBLAS_NUM_THREADS",
                                 "OMP_NUM_THREADS", "MKL_NUM_THREADS"})


if __name__ == "__main__":
    unittest.main()
