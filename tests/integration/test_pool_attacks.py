# SPDX-License-Identifier: LGPL-2.1-or-later
"""Attacks on a session step's (and a pool run's) own --copy-in and --memory.

- Code of an earlier step plants a symlink where a later step copies a file in: the copy-in
  does not write through it, and its refusal is that step's error only (the session, its files
  and the interpreter's variables go on; it used to end the whole session).
- A client sends the supervisor something else than a sealed memfd as the copy-in stream (a
  pipe, a host file holding a valid stream, a directory, an O_PATH descriptor, a memfd that is
  not sealed or only against writes), none, or many descriptors: refused at once in words, and
  no descriptor is kept. Controls: the same stream in a sealed memfd is unpacked.
- A huge stream (1 TiB sparse, or one file said to be 1 TiB long) is bounded by the sandbox's
  /work, unpacked by its init under its limits; the session goes on.
- A step whose time runs out while its files are unpacked ends before it starts; the
  interpreter keeps its variables.
- A pool member whose run's copy-in failed serves no second run.
- A step's lowered RLIMIT_DATA is hard: the step cannot raise it (control: lowered soft only,
  the same code raises it).
- Bad --memory values and --copy-in targets: one line, status 125, and the session goes on; a
  client's own request below nsbox run's 6m floor is refused by the supervisor too.

Uses test_pool's private registry and pool helpers."""
import array
import fcntl
import io
import json
import os
import shutil
import socket
import tarfile
import tempfile
import time

import test_pool
from nsboxtest import nsbox, wait_until
from test_pool import PoolTestCase

SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
REFUSED = "the request's first bytes must bring the copy-in stream, a memfd sealed"


def setUpModule():
    test_pool.setUpModule()


def tearDownModule():
    test_pool.tearDownModule()


def tar_of(entries):
    """A copy-in stream (a tar archive, copy.h) of (sandbox path without its '/', bytes)."""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in entries:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), 0o644
            t.addfile(ti, io.BytesIO(data))
    return b.getvalue()


def memfd_of(data, seals=SEALS, size=None):
    fd = os.memfd_create("attack", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    os.write(fd, data)
    if size is not None:
        os.ftruncate(fd, size)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def request(sock_path, req, fds=(), timeout=60):
    """req on the session's socket, fds riding on its first byte (SCM_RIGHTS): the answer."""
    data = json.dumps(req).encode() + b"\n"
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        if fds:
            s.sendmsg([data[:1]],
                      [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            s.sendall(data[1:])
        else:
            s.sendall(data)
        return json.loads(s.makefile().readline())


class StepAttackCase(PoolTestCase):
    def setUp(self):
        super().setUp()
        self.src = tempfile.mkdtemp(prefix="nsbox-step-in-")
        self.addCleanup(shutil.rmtree, self.src, ignore_errors=True)
        os.chmod(self.src, 0o755)
        self.file = os.path.join(self.src, "data.txt")
        with open(self.file, "w") as f:
            f.write("given")
        os.chmod(self.file, 0o644)

    def session(self, *opts):
        p = nsbox("session", "start", "--json", "--cgroup", "off", *self.extra, *opts)
        if p.returncode != 0 and "rootfs" in p.stderr:
            self.skip_or_fail(f"no rootfs: {p.stderr.strip()}")
        self.assertEqual(p.returncode, 0, p.stderr)
        info = json.loads(p.stdout)
        self.addCleanup(nsbox, "session", "stop", info["id"])
        return info["id"], info["socket"]

    def step(self, sid, *args, code=None):
        if code is not None:
            args += ("--code", "-")
        p = nsbox("session", "exec", sid, "--json", *args, input=code)
        try:
            return p, json.loads(p.stdout)
        except ValueError:
            raise AssertionError(f"no JSON: stdout={p.stdout!r} stderr={p.stderr!r}")

    def assertSessionGoesOn(self, sid):
        """The session's sandbox and interpreter are still there (x = 7 from its first step)."""
        p, r = self.step(sid, code="print(x)\n")
        self.assertEqual((r["status"], r["stdout"]), ("exited", "7\n"), r)


class TestEarlierStepAgainstCopyIn(StepAttackCase):
    def test_a_planted_symlink_is_not_written_through_and_ends_only_the_step(self):
        sid, _ = self.session()
        self.step(sid, code="import os\nx = 7\nos.symlink('/tmp/planted', '/work/data.txt')\n")
        p, r = self.step(sid, "--copy-in", f"{self.file}:/work/data.txt", "--", "cat",
                         "/work/data.txt")
        self.assertEqual((p.returncode, r["status"], r["error"]["step"]),
                         (125, "error", "copy-in"), r)
        self.assertIn("symbolic links", r["error"]["message"])
        self.assertEqual(r["stdout"], "", r)  # the step did not run
        p, r = self.step(sid, "--", "sh", "-c", "ls /tmp; readlink /work/data.txt")
        self.assertEqual(r["stdout"], "/tmp/planted\n", r)  # nothing written through it
        self.assertSessionGoesOn(sid)
        # Control: a write that follows the link (what an unpack without O_NOFOLLOW would do)
        # lands at the link's target.
        p, r = self.step(sid, "--", "sh", "-c", "echo given > /work/data.txt; cat /tmp/planted")
        self.assertEqual(r["stdout"], "given\n", r)

    def test_a_failed_copy_in_is_its_steps_error_only(self):
        sid, _ = self.session()
        self.step(sid, code="x = 7\n")
        # Read-only place, a name too long to unpack, a directory where the file goes.
        long_target = "/work/" + "d/" * 2100 + "x"
        for target in ("/usr/x", long_target, "/work"):
            p, r = self.step(sid, "--copy-in", f"{self.file}:{target}", "--", "true")
            self.assertEqual((p.returncode, r["status"], r["exit_code"], r["error"]["step"]),
                             (125, "error", 125, "copy-in"), (target[:40], r))
            self.assertSessionGoesOn(sid)
        # Code steps too: the interpreter keeps its variables.
        p, r = self.step(sid, "--copy-in", f"{self.file}:/usr/x", code="x = 8\n")
        self.assertEqual((p.returncode, r["error"]["step"]), (125, "copy-in"), r)
        self.assertSessionGoesOn(sid)
        p, r = self.step(sid, "--copy-in", f"{self.file}:/work/ok", code="print(x)\n")
        self.assertEqual((r["status"], r["stdout"]), ("exited", "7\n"), r)

    def test_time_up_during_the_copy_in_costs_no_variables(self):
        """The step's clock runs while init unpacks its files: an interrupt that came then
        ends the step before it starts. It used to reach the interpreter just before the code,
        which ignored it (between steps), ran on past its time, and was killed with its
        variables 2 s later ("ignored KeyboardInterrupt")."""
        sid, _ = self.session("--workdir-size", "512m", "--memory", "1g")
        big = os.path.join(self.src, "big.bin")
        with open(big, "wb") as f:
            f.write(os.urandom(1 << 20) * 200)  # unpacked in well over 10 ms
        os.chmod(big, 0o644)
        self.step(sid, code="x = 7\n")
        for i, args in enumerate((("--code", "-"), ("--", "sh", "-c", "echo ran"))):
            p = nsbox("session", "exec", sid, "--json", "--timeout", "0.01", "--copy-in",
                      f"{big}:/work/big{i}", *args,
                      input="import time\ntime.sleep(5)\nprint('ran')\n")
            r = json.loads(p.stdout)
            self.assertEqual((r["status"], r["exit_code"], r["stdout"]), ("timeout", 124, ""), r)
            self.assertLess(r["wall_time_ms"], 2000, r)
            self.assertEqual(r["warnings"], [], r)
            self.assertSessionGoesOn(sid)

    def test_a_pool_member_whose_copy_in_failed_serves_no_second_run(self):
        name = self.start_pool(size=1)
        r = self.pool_run(name, "open('/tmp/mark', 'w')\n", "--copy-in", f"{self.file}:/usr/x")
        self.assertEqual((r["status"], r["error"]["step"]), ("error", "copy-in"), r)
        first = r["session_id"]
        self.wait_full(name)
        r = self.pool_run(name, "import os\nprint(os.listdir('/tmp'))\n")
        self.assertEqual((r["status"], r["stdout"]), ("exited", "[]\n"), r)
        self.assertNotEqual(r["session_id"], first, r)


class TestCopyInStream(StepAttackCase):
    def fds_of(self, sid):
        pid = next(e["pid"] for e in test_pool.registry() if e["run_id"] == sid)
        return sorted(os.listdir(f"/proc/{pid}/fd"))

    def test_the_stream_must_be_a_sealed_memfd(self):
        sid, sock = self.session()
        stream = tar_of([("work/x", b"packed")])
        req = {"op": "exec", "argv": ["cat", "/work/x"], "copy_in": True}
        # Control: the stream in a sealed memfd is unpacked, and the step sees it.
        r = request(sock, req, [memfd_of(stream)])
        self.assertEqual((r["status"], r["stdout"]), ("exited", "packed"), r)
        # The supervisor's descriptors between steps, once what its start and that step held
        # is closed.
        before = [None]

        def settled():
            now, before[0] = before[0], self.fds_of(sid)
            return now == before[0]
        self.assertTrue(wait_until(settled, step=0.2))
        before = before[0]
        self.assertIn("0", before)  # its /dev/null: the first step used to close it
        host = os.path.join(self.src, "stream.tar")  # the same valid stream, in a host file
        with open(host, "wb") as f:
            f.write(stream)
        rd, wr = os.pipe()
        os.write(wr, stream)  # the writer stays open: a read to EOF would wait for ever
        candidates = {
            "a pipe": rd,
            "a host file": os.open(host, os.O_RDONLY | os.O_CLOEXEC),
            "a directory": os.open(self.src, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC),
            "an O_PATH descriptor": os.open(host, os.O_PATH | os.O_CLOEXEC),
            "an unsealed memfd": memfd_of(stream, seals=0),
            "a memfd sealed against writes only": memfd_of(stream, seals=fcntl.F_SEAL_WRITE),
            "a memfd that may grow": memfd_of(stream, seals=fcntl.F_SEAL_WRITE |
                                              fcntl.F_SEAL_SHRINK),
        }
        for what, fd in candidates.items():
            t = time.monotonic()
            r = request(sock, dict(req, argv=["sh", "-c", "cat /work/y 2>/dev/null; echo ran"]),
                        [fd])
            self.assertIn(REFUSED, r.get("error", ""), (what, r))
            self.assertLess(time.monotonic() - t, 5, what)  # never waited on
        r = request(sock, req)  # "copy_in" and no descriptor
        self.assertIn(REFUSED, r.get("error", ""), r)
        r = request(sock, dict(req, copy_in="yes"), [memfd_of(stream)])
        self.assertIn('"copy_in" must be true or false', r.get("error", ""), r)
        # A descriptor not asked for is dropped; many ride along: the first is the stream.
        r = request(sock, {"op": "exec", "argv": ["true"]}, [candidates["a host file"]])
        self.assertEqual(r["status"], "exited", r)
        more = [memfd_of(tar_of([("work/z", b"z")]))] + [rd, wr] * 20
        r = request(sock, dict(req, argv=["cat", "/work/z"]), more)
        self.assertEqual((r["status"], r["stdout"]), ("exited", "z"), r)
        for fd in candidates.values():
            os.close(fd)
        os.close(wr)
        # Nothing kept (the supervisor closes the last client's socket after its answer).
        wait_until(lambda: self.fds_of(sid) == before)
        self.assertEqual(self.fds_of(sid), before)

    def test_a_huge_stream_is_bounded_by_the_sandbox(self):
        sid, sock = self.session()
        request(sock, {"op": "code", "code": "x = 7\n"})
        req = {"op": "exec", "argv": ["sh", "-c", "ls /work; echo ran"], "copy_in": True,
               "timeout": 30}
        # 1 TiB of zeros, sparse: an empty archive, read to its end marker only.
        r = request(sock, req, [memfd_of(b"", size=1 << 40)])
        self.assertEqual((r["status"], r["stdout"]), ("exited", "ran\n"), r)
        # One file said to be 1 TiB long: /work (64 MiB) is full long before.
        head = tarfile.TarInfo("work/big")
        head.size = 1 << 40
        head = head.tobuf(format=tarfile.PAX_FORMAT)
        t = time.monotonic()
        r = request(sock, req, [memfd_of(head, size=len(head) + (1 << 40) + 1024)])
        self.assertEqual((r["status"], r["error"]["step"], r["error"]["errno"]),
                         ("error", "copy-in", 28), r)
        self.assertLess(time.monotonic() - t, 30)
        self.assertSessionGoesOn(sid)


class TestStepMemory(StepAttackCase):
    RAISE = ("import resource\n"
             "try:\n"
             "    resource.setrlimit(resource.RLIMIT_DATA, (256 << 20, 256 << 20))\n"
             "    print('raised')\n"
             "except (ValueError, OSError):\n"
             "    print('refused')\n")

    def test_a_lowered_limit_is_hard(self):
        sid, _ = self.session("--memory", "256m")
        p, r = self.step(sid, "--memory", "64m", "--", "python3", "-c", self.RAISE)
        if r["limits"]["memory"]["enforced_by"] != "rlimit":
            self.skipTest("a cgroup's memory.max: no rlimit to raise")
        self.assertEqual(r["stdout"], "refused\n", r)
        p, r = self.step(sid, "--memory", "64m", code=self.RAISE)
        self.assertEqual(r["stdout"], "refused\n", r)
        # Control: lowered soft only, the same code raises it again.
        soft_only = ("import resource\n"
                     "resource.setrlimit(resource.RLIMIT_DATA, (64 << 20, 256 << 20))\n" +
                     self.RAISE)
        p, r = self.step(sid, "--", "python3", "-c", soft_only)
        self.assertEqual(r["stdout"], "raised\n", r)

    def test_bad_memory_and_targets_are_one_line(self):
        sid, sock = self.session("--memory", "256m")
        self.step(sid, code="x = 7\n")
        for bad, says in (("0", "--memory unlimited is above the session's --memory 256m"),
                          ("3m", "--memory must be at least 6m"),
                          ("-5m", "invalid value '-5m' for --memory"),
                          ("99999999999999999999", "invalid value"),
                          ("18446744073709551615", "invalid value"),
                          ("9223372036854775807", "above the session's --memory 256m"),
                          ("257m", "above the session's --memory 256m"),
                          ("unlimited", "above the session's --memory 256m"),
                          ("1e3", "invalid value '1e3' for --memory")):
            p = nsbox("session", "exec", sid, "--memory", bad, "--", "true")
            self.assertOneLineError(p, contains=says)
        # The supervisor's own floor, for a client that skips nsbox's parser.
        for raw in (1, 4096, (6 << 20) - 1):
            for req in ({"op": "exec", "argv": ["true"]}, {"op": "code", "code": "x = 8\n"}):
                r = request(sock, dict(req, memory=raw))
                self.assertIn('"memory" must be at least 6m', r.get("error", ""), (raw, r))
        r = request(sock, {"op": "exec", "argv": ["true"], "memory": 6 << 20})
        self.assertEqual(r["status"], "exited", r)
        for target in ("//proc/x", "/proc", "/work/../etc/x", "/work/./x", "/work//x",
                       "/dev/shm/x", "/"):
            p = nsbox("session", "exec", sid, "--copy-in", f"{self.file}:{target}", "--",
                      "true")
            self.assertOneLineError(p, contains=f"invalid --copy-in target '{target}'")
        for target in ("/usr/x", "/work/" + "d/" * 2100 + "x"):
            p = nsbox("session", "exec", sid, "--copy-in", f"{self.file}:{target}", "--",
                      "true")
            self.assertOneLineError(p, contains="copy-in")
        self.assertSessionGoesOn(sid)
