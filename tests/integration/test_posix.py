# SPDX-License-Identifier: LGPL-2.1-or-later
"""What ordinary POSIX programs (and CPython's own tests, issue 16) expect of the sandbox:
pseudo-terminals of its own, threads under the rlimit fallback, a closed reader passed on."""
import errno
import os
import subprocess
import time

from nsboxtest import NSBOX, NsboxTestCase, nsbox_json

PTY_CODE = """
import errno, fcntl, os, pty, termios
print(sorted(os.listdir('/dev/pts')), os.readlink('/dev/ptmx'))
m, s = os.openpty()
print(os.ttyname(s))
os.write(m, b'ping\\n')
print(os.read(s, 10))
try:
    fcntl.ioctl(s, termios.TIOCSTI, b'x')
    print('TIOCSTI allowed')
except OSError as e:
    print('TIOCSTI', errno.errorcode[e.errno])
pid, fd = pty.fork()
if pid == 0:
    print('child', os.isatty(0), os.ttyname(0), flush=True)
    os._exit(3)
out = b''
while True:
    try:
        b = os.read(fd, 100)
    except OSError:
        break
    if not b:
        break
    out += b
print(out.decode().strip(), os.waitpid(pid, 0)[1] >> 8)
"""


class TestPty(NsboxTestCase):
    def test_openpty_and_pty_fork(self):
        # The caller holds a pty of the host's devpts while the sandbox runs: the sandbox's
        # devpts is an instance of its own, where only its own ptys appear.
        m, s = os.openpty()
        try:
            p, r = nsbox_json("--", "python3", "-c", PTY_CODE)
        finally:
            os.close(m)
            os.close(s)
        self.assertEqual(r["stdout"].splitlines(), [
            "['ptmx'] pts/ptmx",       # a new instance: none of the host's ptys
            "/dev/pts/0",
            "b'ping\\n'",
            "TIOCSTI EPERM",           # still refused by seccomp on the sandbox's own pty
            "child True /dev/pts/1 3",
        ], r)
        self.assertEqual(r["exit_code"], 0, r)

    def test_devpts_is_nosuid_noexec_and_bounded(self):
        p, r = nsbox_json("--", "python3", "-c",
                          "print([l for l in open('/proc/self/mountinfo') if ' /dev/pts ' in l][0])")
        line = r["stdout"]
        for opt in ("nosuid", "noexec", "ptmxmode=666", "mode=620", "max=64"):
            self.assertIn(opt, line, r)


THREADS_CODE = """
import resource, threading
ev = threading.Event()
ts = []
try:
    for i in range(200):
        t = threading.Thread(target=ev.wait)
        t.start()
        ts.append(t)
except RuntimeError as e:
    pass
print(len(ts))
ev.set()
for t in ts:
    t.join()
try:
    b = bytearray(1 << 30)
    print('1 GiB allocated')
except MemoryError:
    print('MemoryError')
print(resource.getrlimit(resource.RLIMIT_STACK)[0])
"""


class TestRlimitThreads(NsboxTestCase):
    def test_thread_stacks_do_not_eat_memory(self):
        # Under rlimits, RLIMIT_DATA counts each thread's whole stack; the soft RLIMIT_STACK of
        # 1 MiB makes glibc's thread stacks 1 MiB: 200 idle threads fit in 256m (31 did with
        # 8 MiB stacks), and a 1 GiB allocation still fails.
        p, r = nsbox_json("--cgroup", "off", "--memory", "256m", "--pids-limit", "256",
                          "--", "python3", "-c", THREADS_CODE)
        self.assertEqual(r["limits_enforced_by"], "rlimit", r)
        self.assertEqual(r["stdout"].split("\n")[:3], ["200", "MemoryError", str(1 << 20)], r)


class TestClosedReader(NsboxTestCase):
    def test_epipe_reaches_the_program(self):
        # `nsbox run ... | head -1`: once nsbox's stdout has no reader, the program's next
        # write fails with EPIPE (BrokenPipeError), as it would bare; before, nsbox drained the
        # pipe on until the CPU limit.
        r, w = os.pipe()
        start = time.monotonic()
        proc = subprocess.Popen(
            [NSBOX, "run", "--output-limit", "1000000000", "--timeout", "30", "--", "python3",
             "-c", "import sys\nfor i in range(10**8): print(i)\n"],
            stdout=w, stderr=subprocess.PIPE, text=True)
        os.close(w)
        with os.fdopen(r, "rb") as reader:
            self.assertEqual(reader.readline(), b"0\n")
        _, err = proc.communicate(timeout=30)
        self.assertLess(time.monotonic() - start, 10, err)
        self.assertIn("BrokenPipeError", err)
        self.assertEqual(proc.returncode, 1, err)  # the program's own status, not a limit's

    def test_a_closed_stdout_under_json_still_gives_a_result(self):
        # Under --json the output goes into the result, not to stdout: nothing to pass on.
        p, r = nsbox_json("--", "python3", "-c", "print('x' * 100000)")
        self.assertEqual(r["exit_code"], 0, r)
        self.assertEqual(r["stdout_bytes"], 100001)


class TestNoNetworkHint(NsboxTestCase):
    def test_refused_inet_socket_says_network_loopback(self):
        code = "import socket\ntry:\n socket.socket()\nexcept PermissionError: print('refused')\n"
        p, r = nsbox_json("--", "python3", "-c", code)
        self.assertEqual(r["stdout"], "refused\n", r)
        hint = [n for n in r["notes"] if "--network loopback" in n]
        self.assertEqual(len(hint), 1, r["notes"])
        self.assertIn("AF_INET", hint[0])
        # The human summary says the same, word for word.
        p = subprocess.run([NSBOX, "run", "--", "python3", "-c", code], capture_output=True,
                           text=True, timeout=60)
        self.assertIn("nsbox: warning: " + hint[0], p.stderr)
        # A unix socket refused by another policy, or an inet one with a network: no hint.
        p, r = nsbox_json("--network", "loopback", "--", "python3", "-c",
                          "import socket\ntry:\n socket.socket(socket.AF_INET, socket.SOCK_RAW)\n"
                          "except PermissionError: print('refused')\n")
        self.assertEqual(r["stdout"], "refused\n", r)
        self.assertEqual([n for n in r["notes"] if "--network loopback" in n], [], r["notes"])
