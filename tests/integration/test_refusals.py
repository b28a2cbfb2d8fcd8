# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every refusal is said (issue 30) and the refusals of issue 24 (TIOCSETD, inotify): each is
counted in the result's seccomp_refused with a note a model can act on, and each is shown to be
the filter's doing by the same program under --no-seccomp. Also what nsbox cannot see: setuid
to an id the sandbox does not map fails with EINVAL, and no note pretends to explain it."""
import errno
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import unittest

from nsboxtest import NSBOX, NsboxTestCase, nsbox_json, root_only, wait_until


def py(code, *opts, **kw):
    return nsbox_json(*opts, "--", "python3", "-c", code, **kw)


def refused(r):
    return {e["syscall"]: e["count"] for e in r["seccomp_refused"] or []}


def notes(r):
    return "\n".join(r["notes"])


SETID = ("import os\n"
         "open('/tmp/f', 'w').close()\n"
         "for what, f in (('chmod', lambda: os.chmod('/tmp/f', 0o4755)),\n"
         "                ('mkdir', lambda: os.mkdir('/tmp/d', 0o2775)),\n"
         "                ('open', lambda: os.close(os.open('/tmp/g', os.O_CREAT | os.O_WRONLY, 0o6755)))):\n"
         "    try: f(); print(what, 'set')\n"
         "    except OSError as e: print(what, e.errno)\n")

CORE = ("import resource\n"
        "try: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); print('set')\n"
        "except ValueError as e: print('ValueError')\n"
        "print(resource.getrlimit(resource.RLIMIT_CORE))\n")

TIOCSETD = ("import fcntl, os, struct, termios\n"
            "m, s = os.openpty()\n"
            "try: fcntl.ioctl(s, termios.TIOCSETD, struct.pack('i', 0)); print('set')\n"
            "except OSError as e: print(e.errno)\n"
            "print(struct.unpack('i', fcntl.ioctl(s, termios.TIOCGETD, bytes(4)))[0])\n")

INOTIFY = ("import ctypes, os\n"
           "libc = ctypes.CDLL(None, use_errno=True)\n"
           "fd = libc.inotify_init1(os.O_CLOEXEC)\n"
           "print(fd >= 0, 0 if fd >= 0 else ctypes.get_errno())\n")


class TestRefusalsAreSaid(NsboxTestCase):
    def test_setid_bits_are_counted_with_a_note(self):
        p, r = py(SETID)
        self.assertEqual(r["stdout"].split("\n")[:3],
                         [f"chmod {errno.EPERM}", f"mkdir {errno.EPERM}", f"open {errno.EPERM}"], r)
        got = refused(r)
        self.assertEqual((got.get("chmod"), got.get("mkdir"), got.get("openat")), (1, 1, 1), got)
        self.assertIn("set-user-ID or set-group-ID bit was refused", notes(r))
        self.assertIn("use a mode without them", notes(r))
        # The control: without the filter the bits are set, so the refusal is the filter's.
        p, r = py(SETID, "--no-seccomp")
        self.assertEqual(r["stdout"].split("\n")[:3], ["chmod set", "mkdir set", "open set"], r)
        self.assertNotIn("set-user-ID", notes(r))

    def test_core_limit_is_counted_with_a_note(self):
        p, r = py(CORE)
        self.assertEqual(r["stdout"].splitlines(), ["ValueError", "(1, 1)"], r)
        self.assertEqual(refused(r).get("prlimit64"), 1, r["seccomp_refused"])
        self.assertIn("setting RLIMIT_CORE was refused", notes(r))
        self.assertIn("leave RLIMIT_CORE as it is", notes(r))
        p, r = py(CORE, "--no-seccomp")
        self.assertEqual(r["stdout"].splitlines(), ["set", "(0, 0)"], r)

    def test_ordinary_modes_and_limits_bring_no_note(self):
        # What is allowed is not counted and not noted: the notes follow the refusals only.
        code = ("import os, resource\n"
                "open('/tmp/f', 'w').close(); os.chmod('/tmp/f', 0o1755); os.mkdir('/tmp/d', 0o755)\n"
                "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
                "print(resource.getrlimit(resource.RLIMIT_CORE))\n")
        p, r = py(code)
        self.assertEqual(r["stdout"], "(1, 1)\n", r)
        self.assertEqual(r["seccomp_refused"], [], r)
        self.assertEqual(r["notes"], [], r)

    def test_tiocsetd_is_refused_counted_and_noted(self):
        # Even N_TTY on a pty of its own: the discipline sits behind a pointer.
        p, r = py(TIOCSETD)
        self.assertEqual(r["stdout"].splitlines(), [str(errno.EPERM), "0"], r)
        self.assertEqual(refused(r).get("ioctl"), 1, r["seccomp_refused"])
        self.assertIn("line discipline (ioctl TIOCSETD) was refused", notes(r))
        p, r = py(TIOCSETD, "--no-seccomp")
        self.assertEqual(r["stdout"].splitlines(), ["set", "0"], r)

    def test_inotify_is_enosys_counted_and_noted(self):
        p, r = py(INOTIFY)
        self.assertEqual(r["stdout"], f"False {errno.ENOSYS}\n", r)
        self.assertEqual(refused(r).get("inotify_init1"), 1, r["seccomp_refused"])
        self.assertIn("inotify was refused (ENOSYS", notes(r))
        self.assertIn("poll for changes instead", notes(r))
        p, r = py(INOTIFY, "--no-seccomp")
        self.assertEqual(r["stdout"], "True 0\n", r)

    def test_unmapped_ids_fail_with_einval_and_no_note(self):
        # The kernel's answer, after seccomp: nsbox cannot see it and says nothing (README,
        # "Compatibility"). Only the sandbox's own id works.
        code = ("import os, subprocess\n"
                "for kw in ({'user': 0}, {'group': 0}, {'user': os.getuid()}):\n"
                "    try: subprocess.run(['true'], **kw); print('ok')\n"
                "    except OSError as e: print(e.errno)\n"
                "try: os.setuid(1000)\n"
                "except OSError as e: print(e.errno)\n")
        p, r = py(code)
        self.assertEqual(r["stdout"].splitlines(),
                         [str(errno.EINVAL), str(errno.EINVAL), "ok", str(errno.EINVAL)], r)
        self.assertEqual(r["seccomp_refused"], [], r)
        self.assertEqual(r["notes"], [], r)


# A watcher sandbox: an inotify watch on sys.argv[1] (symlinks resolved), a quiet second, then
# "ready" in the shared directory; it then counts events for up to 8 s while another sandbox
# reads the file, and writes what it saw ("quiet Q events N", or "refused ERRNO").
WATCHER = ("import ctypes, os, select, sys, time\n"
           "libc = ctypes.CDLL(None, use_errno=True)\n"
           "def say(text):\n"
           "    open('/mnt/out.tmp', 'w').write(text); os.rename('/mnt/out.tmp', '/mnt/out')\n"
           "fd = libc.inotify_init1(os.O_NONBLOCK)\n"
           "if fd < 0:\n"
           "    say('refused %d' % ctypes.get_errno()); sys.exit()\n"
           "target = os.path.realpath(sys.argv[1]).encode()\n"
           "libc.inotify_add_watch(fd, target, 0x20 | 0x1)  # IN_OPEN | IN_ACCESS\n"
           "time.sleep(1)\n"
           "quiet = 0\n"
           "try: quiet = len(os.read(fd, 4096)) // 16\n"
           "except BlockingIOError: pass\n"
           "open('/mnt/ready', 'w').close()\n"
           "n, end = 0, time.monotonic() + 8\n"
           "while not n and time.monotonic() < end:\n"
           "    if select.select([fd], [], [], 0.2)[0]: n = len(os.read(fd, 4096)) // 16\n"
           "say('quiet %d events %d' % (quiet, n))\n")


class TestInotifyAcrossSandboxes(NsboxTestCase):
    def watch(self, target, other, *opts):
        """Run the watcher on target with opts; meanwhile run `other` (python3 -c) in another
        sandbox until the watcher has said what it saw. Both get DIR/shared at /data, read-only."""
        with tempfile.TemporaryDirectory(prefix="nsbox-inotify-") as d:
            os.chmod(d, 0o777)
            os.mkdir(os.path.join(d, "shared"), 0o755)
            with open(os.path.join(d, "shared", "file"), "w") as f:
                f.write("shared\n")
            os.chmod(os.path.join(d, "shared", "file"), 0o644)
            data = f"{d}/shared:/data:ro"
            w = subprocess.Popen([NSBOX, "run", "--json", "--timeout", "30", "-v", f"{d}:/mnt:rw",
                                  "-v", data, *opts, "--", "python3", "-c", WATCHER, target],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out = os.path.join(d, "out")
            try:
                wait_until(lambda: os.path.exists(os.path.join(d, "ready")) or
                           os.path.exists(out), timeout=20)
                end = time.monotonic() + 10
                while not os.path.exists(out) and time.monotonic() < end:
                    p, r = nsbox_json("-v", data, "--", "python3", "-c", other)
                    self.assertEqual(r["status"], "exited", r)
                w.communicate(timeout=30)
            finally:
                if w.poll() is None:
                    w.kill()
                    w.communicate()
            with open(out) as f:
                return f.read().split()

    READ = "open('/data/file').read()"

    def test_a_sandbox_sees_nothing_another_does(self):
        self.assertEqual(self.watch("/data/file", self.READ), ["refused", str(errno.ENOSYS)])
        self.assertEqual(self.watch("/usr/bin/python3", "pass"), ["refused", str(errno.ENOSYS)])

    def test_without_the_filter_it_does(self):
        # The control. A file bound read-only into both sandboxes, which nothing else touches:
        # the watch itself is quiet, and the other sandbox's read shows (a read-only bind keeps
        # the inode).
        got = self.watch("/data/file", self.READ, "--no-seccomp")
        self.assertEqual(got[:3], ["quiet", "0", "events"], got)
        self.assertGreater(int(got[3]), 0, got)
        # The rootfs's python3, as another sandbox starts it (other runs on this host may show
        # too: the quiet second is not checked).
        got = self.watch("/usr/bin/python3", "pass", "--no-seccomp")
        self.assertGreater(int(got[3]), 0, got)



# Descriptors parked in unix socket messages nobody reads: each counts against the sending
# user's unix_inflight, and a sendmsg(2) of SCM_RIGHTS fails with ETOOMANYREFS once that is
# above the sender's RLIMIT_NOFILE (too_many_unix_fds() in net/unix/af_unix.c). A payload runs
# as its run's host uid, so it can fill its user's count up to its own limit, which is init's
# too. Prints "full" when the kernel refused it more, then sleeps.
INFLIGHT = ("import array, errno, os, socket, time\n"
            "keep = []; fd = os.open('/dev/null', os.O_RDONLY); why = 'not full'\n"
            "try:\n"
            "    while True:\n"
            "        a, b = socket.socketpair(); a.setblocking(False); keep.append((a, b))\n"
            "        try:\n"
            "            while True:\n"
            "                a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,\n"
            "                                    array.array('i', [fd] * 250))])\n"
            "        except BlockingIOError:\n"
            "            pass\n"
            "except OSError as e:\n"
            "    why = 'full' if e.errno == errno.ETOOMANYREFS else repr(e)\n"
            "print(why, flush=True)\n"
            "time.sleep(60)\n")



def stop(proc):
    """End a run started with Popen, killing it if it does not end within 30 s."""
    proc.terminate()
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()

class TestListenerHandOver(NsboxTestCase):
    # Root's only (root_only below): two runs of one host uid, root's with --host-user of an id
    # nothing else uses. Run as uid 65534, the filler would fill the count of the uid that the
    # other modules of the suite run as, in parallel (sessions hand descriptors over too).
    # Checked by hand as an ordinary user: same failure without the fix, same pass with it.
    def test_a_sandbox_with_descriptors_in_flight_stops_no_other_run(self):
        # The first run fills the uid's descriptors in flight; the second still starts and its
        # refusal is reported: its seccomp listener reaches the supervisor some way the first
        # cannot stop (sent over a unix socket, the run failed at "seccomp listener").
        if not shutil.which("setpriv"):
            self.skip_or_fail("needs setpriv(1) to drop CAP_SYS_PTRACE")
        uid = 64000 + secrets.randbelow(1000)
        opts = ["--cgroup", "off", "--host-user", f"{uid}:{uid}"]
        hog = subprocess.Popen([NSBOX, "run", *opts, "--timeout", "60", "--", "python3", "-c",
                                INFLIGHT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True)
        try:
            # The control: the uid's count is past the limit (the kernel refused the filler).
            self.assertEqual(hog.stdout.readline(), "full\n")
            mount = "import ctypes; print(ctypes.CDLL(None).syscall(165, 0, 0, 0, 0, 0))"
            p, r = py(mount, *opts)
            self.assertEqual((r["status"], r["stdout"]), ("exited", "-1\n"), r["error"])
            self.assertEqual(refused(r), {"mount": 1}, r)
            # Root without CAP_SYS_PTRACE, as a container's: the supervisor then takes the
            # listener from a dumpable init only.
            q = subprocess.run(["setpriv", "--bounding-set=-sys_ptrace", NSBOX, "run", "--json",
                                *opts, "--", "python3", "-c", mount],
                               capture_output=True, text=True, timeout=60)
            r = json.loads(q.stdout)
            self.assertEqual((r["status"], refused(r)), ("exited", {"mount": 1}), r["error"])
        finally:
            stop(hog)


    # Not fixed (found with the test above, older than it): a session's init hands a code step
    # to its interpreter with SCM_RIGHTS (session-init.c), and the supervisor hands each step to
    # init so (lifecycle.c). With the uid's count filled by another sandbox, init's send fails
    # and it kills the interpreter: the step ends "killed by SIGKILL", said as the interpreter's
    # crash, its state lost; where the caller's RLIMIT_NOFILE is at most 4096 (1024 is common)
    # the supervisor's send fails too and the session ends. Pools serve runs the same way, so
    # one pool run can fail the others. Expected to fail until those sends survive it.
    @unittest.expectedFailure
    def test_a_sandbox_with_descriptors_in_flight_stops_no_session_step(self):
        uid = 64000 + secrets.randbelow(1000)
        opts = ["--cgroup", "off", "--host-user", f"{uid}:{uid}"]
        start = subprocess.run([NSBOX, "session", "start", *opts, "--json"], capture_output=True,
                               text=True, timeout=60)
        self.assertEqual(start.returncode, 0, start.stderr)
        sid = json.loads(start.stdout)["id"]
        self.addCleanup(subprocess.run, [NSBOX, "session", "stop", sid], capture_output=True,
                        timeout=60)
        hog = subprocess.Popen([NSBOX, "run", *opts, "--timeout", "60", "--", "python3", "-c",
                                INFLIGHT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True)
        try:
            self.assertEqual(hog.stdout.readline(), "full\n")
            q = subprocess.run([NSBOX, "session", "exec", sid, "--json", "--code", "-"],
                               input="print('step ran')", capture_output=True, text=True,
                               timeout=60)
            r = json.loads(q.stdout)
            self.assertEqual((r["status"], r["stdout"]), ("exited", "step ran\n"), r)
        finally:
            stop(hog)

load_tests = root_only({"TestListenerHandOver"})


if __name__ == "__main__":
    unittest.main()
