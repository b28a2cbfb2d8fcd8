# SPDX-License-Identifier: LGPL-2.1-or-later
"""Landlock on the VM's kernel (Debian 12's Linux 6.1: ABI 2, older than the development
host's), run by the cgroup boot (test_cgroup.py imports it): the rights of an older ABI only, no
network or scope rules, and the memfd fallback of a kernel before 6.3. As root and as uid 65534.

    tests/vm/suite TestLandlockOlderAbi
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
NSBOX = os.environ.get("NSBOX") or os.path.join(TOP, "build", "src", "nsbox")
ROOTFS = os.environ.get("NSBOX_ROOTFS") or os.path.join(TOP, "build", "rootfs", "tree")
SETPRIV = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def kernel_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint(1))


# Ordinary work under the older ABI's rules, and what they must still refuse: a rename across
# directories (REFER, ABI 2), O_TRUNC on /dev/null (TRUNCATE is not handled before ABI 3), a
# pty, a program in /tmp, a host directory through descriptor argv[1], TCP (not restricted before
# ABI 4; seccomp is off here), and a plain memfd (no vm.memfd_noexec before 6.3).
WORK = r"""
import os, pty, socket, subprocess, sys
os.makedirs('/tmp/a/b'); open('/tmp/a/x', 'w').write('1'); os.rename('/tmp/a/x', '/tmp/a/b/x')
with open('/dev/null', 'w') as f: f.write('x')
m, s = pty.openpty(); assert os.isatty(s)
open('/tmp/p', 'w').write('#!/bin/sh\necho ran\n'); os.chmod('/tmp/p', 0o755)
def outcome(f):
    try:
        return f()
    except OSError as e:
        return e.errno
print('exec', outcome(lambda: subprocess.run(['/tmp/p'], capture_output=True, text=True).stdout.strip()))
print('hostdir', outcome(lambda: os.open('secret', os.O_RDONLY, dir_fd=int(sys.argv[1])) and 'read'))
print('bind', outcome(lambda: socket.socket().bind(('0.0.0.0', 0)) or 'bound'))
print('memfd', outcome(lambda: os.memfd_create('x') and 'made'))
print('noexec_sysctl', os.path.exists('/proc/sys/vm/memfd_noexec'))
"""


class TestLandlockOlderAbi(unittest.TestCase):
    def run_work(self, prefix=()):
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            with open(os.path.join(d, "secret"), "w") as f:
                f.write("x")
            os.chmod(os.path.join(d, "secret"), 0o644)
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            try:
                p = subprocess.run([*prefix, NSBOX, "run", "--json", "--cgroup", "off",
                                    "--timeout", "120", "--cpus", "unlimited", "--no-seccomp",
                                    "--keep-fds", "--landlock", "required", "--", "python3",
                                    "-c", WORK, str(fd)],
                                   capture_output=True, text=True, timeout=300, pass_fds=(fd,),
                                   env={"PATH": "/usr/bin:/bin", "NSBOX_ROOTFS": ROOTFS})
            finally:
                os.close(fd)
        try:
            r = json.loads(p.stdout)
        except ValueError:
            self.fail(f"no JSON: rc={p.returncode} stdout={p.stdout!r} stderr={p.stderr!r}")
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 0), (p.stderr, r))
        return r, dict(line.split(" ", 1) for line in r["stdout"].splitlines())

    def check(self, prefix=()):
        abi = kernel_abi()
        print(f"Landlock ABI {abi} on Linux {os.uname().release}", file=sys.stderr, flush=True)
        self.assertGreaterEqual(abi, 2, "the VM's kernel has no Landlock ABI 2")
        r, got = self.run_work(prefix)
        want = ["fs"] + (["net"] if abi >= 4 else []) + (["scope"] if abi >= 6 else [])
        self.assertEqual(r["landlock"], {"abi": min(abi, 7), "restricts": want}, r)
        self.assertEqual((got["exec"], got["hostdir"]), ("13", "13"), got)  # EACCES
        if abi < 4:
            self.assertEqual(got["bind"], "bound", got)  # the older path: TCP left to seccomp
        if got["noexec_sysctl"] == "False":
            # Before Linux 6.3: no memfd that cannot be executed, and nsbox does not refuse them.
            self.assertEqual(got["memfd"], "made", got)

    def test_older_abi_as_root(self):
        self.check()

    def test_older_abi_as_nobody(self):
        self.check(SETPRIV)


if __name__ == "__main__":
    unittest.main()
