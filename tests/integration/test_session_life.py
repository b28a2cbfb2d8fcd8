# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sessions (test_session.py's suite, split by class): the audit log of a session's steps, and its
life: stop, kill, idle and lifetime limits, SIGKILL of its supervisor leaving nothing. The
module's private runtime directory is test_session's (its setUpModule and tearDownModule)."""
import json
import os
import secrets
import shutil
import signal
import socket
import stat
import tempfile
import time
import unittest

from nsboxtest import NSBOX, nsbox, plant_symlinks, processes_with, root_only, wait_until
from test_session import (SessionTestCase, alive, children, cpu_seconds, nsbox_api,  # noqa: F401
                          registry_dir, setUpModule, step, supervisor_pid, tearDownModule)


# Reads /proc/PID/fd of a sandbox's init, which is not dumpable: root's only.
load_tests = root_only(["test_init_keeps_only_its_own_descriptors"])


class TestSessionAudit(SessionTestCase):
    def test_steps_are_recorded(self):
        import hashlib
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        log = os.path.join(d, "audit.log")
        sid, _ = self.start("--log", log)
        self.code(sid, "print('audited')\n")
        self.run_step(sid, "echo", "hi")
        with open(log) as f:
            records = [json.loads(l) for l in f]
        self.assertEqual([r["event"] for r in records], ["start", "end", "start", "end"])
        self.assertEqual(records[0]["argv"], ["nsbox", "session", "exec", sid, "step", "1"])
        self.assertEqual(records[0]["code"], "print('audited')\n")
        self.assertEqual(records[0]["code_sha256"],
                         hashlib.sha256(b"print('audited')\n").hexdigest())
        self.assertEqual(records[1]["result"]["stdout"], "audited\n")
        self.assertEqual(records[2]["program"], ["echo", "hi"])
        self.assertEqual(records[1]["run_id"], records[0]["run_id"])
        self.assertNotEqual(records[2]["run_id"], records[0]["run_id"])

    def test_refused_log_refuses_the_session(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        os.symlink("/etc/passwd", os.path.join(d, "log"))
        p = nsbox("session", "start", "--cgroup", "off", "--log", os.path.join(d, "log"))
        self.assertOneLineError(p, contains="audit log")


class TestSessionLife(SessionTestCase):
    def test_ls_ps_and_kill(self):
        sid, sock = self.start("--name", "sess-" + secrets.token_hex(4))
        ls = nsbox("session", "ls", "--json")
        self.assertIn(sid, [json.loads(l)["run_id"] for l in ls.stdout.splitlines()])
        pid = supervisor_pid(sid)
        self.assertIsNotNone(pid)
        p = nsbox("kill", sid)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(wait_until(lambda: not alive(pid)))
        self.assertFalse(os.path.exists(sock))
        p = nsbox("session", "exec", sid, "--", "true")
        self.assertOneLineError(p, contains="is not running")

    def test_by_name(self):
        name = "sess-" + secrets.token_hex(4)
        self.start("--name", name)
        p = nsbox("session", "exec", name, "--", "echo", "hi")
        self.assertEqual((p.returncode, p.stdout), (0, "hi\n"))

    def test_idle_timeout(self):
        sid, sock = self.start("--idle-timeout", "2")
        t = time.monotonic()
        while time.monotonic() - t < 4:  # steps keep it alive past its idle limit
            self.assertEqual(self.run_step(sid, "true")[0].returncode, 0)
            time.sleep(0.2)
        self.assertTrue(wait_until(lambda: not os.path.exists(sock), timeout=5))
        self.assertOneLineError(nsbox("session", "exec", sid, "--", "true"),
                                contains="is not running")

    def test_lifetime(self):
        sid, sock = self.start("--lifetime", "1.5")
        t = time.monotonic()
        while nsbox("session", "exec", sid, "--", "true").returncode == 0:
            self.assertLess(time.monotonic() - t, 5, "the session outlived --lifetime")
            time.sleep(0.1)
        self.assertGreater(time.monotonic() - t, 1.2)
        self.assertFalse(os.path.exists(sock))

    def test_lifetime_cuts_a_running_step(self):
        sid, sock = self.start("--lifetime", "1", "--timeout", "60")
        t = time.monotonic()
        p, r = self.run_step(sid, "sleep", "30")
        self.assertLess(time.monotonic() - t, 5)
        self.assertEqual((p.returncode, r["status"]), (137, "killed"))
        self.assertTrue(wait_until(lambda: not os.path.exists(sock)))

    def test_start_interrupted_leaves_nothing(self):
        import subprocess
        # Killed before it printed the id: nobody could reach the session, so it must not live.
        # One that printed its id before the kill was told: that session may live (and is
        # stopped here); the others must end by themselves.
        told = set()
        for delay in (0.001, 0.002, 0.003, 0.005, 0.008, 0.012):
            p = subprocess.Popen([NSBOX, "session", "start", "--cgroup", "off"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            p.kill()
            told.add(p.communicate()[0].decode().strip())
        for sid in told - {""}:
            self.addCleanup(nsbox, "session", "stop", sid)

        def untold():
            out = nsbox("session", "ls", "--json").stdout
            return {json.loads(l)["run_id"] for l in out.splitlines()} - told

        self.assertTrue(wait_until(lambda: not untold(), timeout=10), untold())

    def test_kill_while_start_cannot_print_the_id(self):
        # `session start` stuck writing the id (its stdout a full pipe): the supervisor waits
        # for its word, but not deaf to `nsbox kill` (before: until the pipe was read).
        import fcntl
        import subprocess
        token = "t" + secrets.token_hex(6)
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETFL, os.O_NONBLOCK)
        try:
            while True:
                os.write(w, b"x" * 4096)
        except BlockingIOError:
            pass
        fcntl.fcntl(w, fcntl.F_SETFL, 0)
        p = subprocess.Popen([NSBOX, "session", "start", "--cgroup", "off", "--label", token],
                             stdout=w, stderr=subprocess.PIPE)
        os.close(w)
        try:
            def supervisor():
                return supervisor_pid(label=token)
            self.assertTrue(wait_until(lambda: supervisor() is not None, timeout=10))
            pid = supervisor()
            time.sleep(0.5)  # up, and waiting for the id to be printed
            k = nsbox("kill", "--label", token)  # (it waits 5 s for the end, else fails)
            self.assertEqual(k.returncode, 0, k.stderr)
            self.assertTrue(wait_until(lambda: not alive(pid), timeout=3))
        finally:
            while os.read(r, 65536):  # now `session start` can go on, and finds it gone
                pass
            os.close(r)
            _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 125, err)

    def test_supervisor_keeps_no_inherited_descriptor(self):
        import select
        import subprocess
        r, w = os.pipe()
        p = subprocess.run([NSBOX, "session", "start", "--cgroup", "off"], pass_fds=(w,),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.addCleanup(nsbox, "session", "stop", p.stdout.strip())
        os.close(w)
        try:
            # EOF at once: the detached supervisor does not hold the caller's pipe.
            self.assertEqual(select.select([r], [], [], 5)[0], [r])
            self.assertEqual(os.read(r, 1), b"")
        finally:
            os.close(r)

    def test_refused_options(self):
        for opts in (["--pid", "host"], ["-i"], ["--keep-fds"]):
            self.assertOneLineError(nsbox("session", "start", *opts), contains="does not take")
        self.assertOneLineError(nsbox("session", "start", "--", "true"), contains="no program")

    def test_init_keeps_only_its_own_descriptors(self):
        # The supervisor makes its signalfd, --watch-pid's pidfd and its registry records
        # before the sandbox (nsbox_sandbox_start()); the sandbox's init, a clone of it, must
        # keep none of them, nor a step's descriptors after the step: only its /proc, its own
        # signalfd, /work, the report pipe, /dev/shm and the control channel (sandbox.c,
        # session-init.c), and once a code step ran, its channel to the interpreter. Read from
        # the host: init is not dumpable (root only). (Not with --network allow=: init then
        # keeps the proxy's listening socket, as a run's init does.)
        sid, sock = self.start("--watch-pid", str(os.getpid()))
        self.run_step(sid, "sh", "-c", "cat > /work/f", opts=("-i",))
        init = children(supervisor_pid(sid))
        self.assertEqual(len(init), 1)

        def init_fds():
            fds = {int(n): os.readlink(f"/proc/{init[0]}/fd/{n}")
                   for n in os.listdir(f"/proc/{init[0]}/fd")}
            return fds, {n: t.split(":[")[0] for n, t in fds.items()}
        own = {0: "/proc", 1: "anon_inode", 2: "/work", 3: "pipe", 4: "/dev/shm", 5: "socket"}
        fds, kinds = init_fds()
        self.assertEqual(kinds, own, fds)
        self.assertEqual(fds[1], "anon_inode:[signalfd]", fds)
        self.code(sid, "x = 1")
        self.run_step(sid, "true")
        fds, kinds = init_fds()
        extra = {n: k for n, k in kinds.items() if n not in own}
        self.assertEqual(list(extra.values()), ["socket"], fds)  # the interpreter's channel

    def test_sigkill_of_supervisor_leaves_nothing(self):
        with open("/proc/self/mountinfo") as f:
            mounts_before = f.read()
        sid, sock = self.start()
        self.code(sid, "x = 1")  # the interpreter runs
        pid = supervisor_pid(sid)
        init = children(pid)
        self.assertEqual(len(init), 1)
        inside = children(init[0])
        self.assertEqual(len(inside), 1)  # the interpreter
        os.kill(pid, signal.SIGKILL)
        self.assertTrue(wait_until(lambda: not any(alive(p) for p in [pid, *init, *inside])))
        # The socket file goes with the record at the next look at the registry.
        self.assertOneLineError(nsbox("session", "exec", sid, "--", "true"),
                                contains="is not running")
        nsbox("ps")
        self.assertFalse(os.path.exists(sock))
        self.assertEqual([n for n in os.listdir(registry_dir()) if n.startswith(sid)], [])
        with open("/proc/self/mountinfo") as f:
            self.assertEqual(f.read(), mounts_before)

    def test_bad_ids_and_stopped_session(self):
        self.assertOneLineError(nsbox("session", "exec", "nope", "--", "true"),
                                contains="no session 'nope'")
        self.assertOneLineError(nsbox("session", "exec", "../x", "--", "true"),
                                contains="no session")
        self.assertOneLineError(nsbox("session", "exec", "0" * 32, "--", "true"),
                                contains="is not running")
        sid, sock = self.start()
        p = nsbox("session", "stop", sid)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(sock))  # stop returns once the session is gone
        self.assertOneLineError(nsbox("session", "exec", sid, "--", "true"),
                                contains="is not running")
        self.assertOneLineError(nsbox("session", "stop", sid), contains="is not running")

    def test_start_failure_is_one_line(self):
        # (Records of sessions that earlier tests stopped may still be going away, and the
        # detached supervisor of a start test_start_interrupted_leaves_nothing killed may
        # register only now: only what this start left counts, by its argv in the record.)
        def entries():
            try:
                return set(os.listdir(registry_dir()))
            except FileNotFoundError:  # (this test alone: no registry yet)
                return set()

        before = entries()
        p = nsbox("session", "start", "--rootfs", "/nonexistent-rootfs")
        self.assertOneLineError(p)

        def this_start(name):
            try:
                with open(os.path.join(registry_dir(), name.split(".")[0] + ".json")) as f:
                    return "/nonexistent-rootfs" in f.read()
            except OSError:  # no record: a file left without one is this test's to count
                return os.path.exists(os.path.join(registry_dir(), name))

        self.assertEqual([n for n in entries() - before
                          if not n.endswith(".lock") and this_start(n)], [])

    def test_thousand_steps_leak_nothing(self):
        sid, sock = self.start()

        def fds(pid):
            return len(os.listdir(f"/proc/{pid}/fd"))

        def rss(pid):
            with open(f"/proc/{pid}/status") as f:
                return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])

        def count_inside():
            # The shell counts with its own glob: a pipeline's ls and grep race each other.
            r = step(sock, {"op": "exec", "argv": [
                "sh", "-c", "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n"]})
            return int(r["stdout"])

        pid = supervisor_pid(sid)
        for i in range(50):  # warm up: the interpreter, malloc's arenas
            step(sock, {"op": "code", "code": "print(%d)" % i})
            step(sock, {"op": "exec", "argv": ["true"]})
        # The supervisor closes a connection just after its answer: let it settle first.
        time.sleep(0.2)
        before = (fds(pid), rss(pid), count_inside())
        t = time.monotonic()
        for i in range(500):
            r = step(sock, {"op": "code", "code": "import os\nprint(%d)\n" % i})
            self.assertEqual(r["stdout"], "%d\n" % i)
            r = step(sock, {"op": "exec", "argv": ["sh", "-c", "sleep 100 & echo %d" % i]})
            self.assertEqual(r["stdout"], "%d\n" % i)
        elapsed = time.monotonic() - t
        time.sleep(0.2)
        after = (fds(pid), rss(pid), count_inside())
        self.assertEqual(after[0], before[0], "supervisor descriptors")
        # (ASan keeps freed memory in a quarantine of up to 256 MiB before reusing it: under
        # the sanitizers the bound is that, not a leak's.)
        bound = (257 << 10) if os.environ.get("NSBOX_SANITIZERS") else 1024
        self.assertLess(after[1] - before[1], bound, "supervisor RSS grew by a MiB or more")
        self.assertEqual(after[2], before[2], "processes in the sandbox")
        self.assertLess(elapsed, 60)


if __name__ == "__main__":
    unittest.main()
