# SPDX-License-Identifier: LGPL-2.1-or-later
"""Landlock as a second wall (README, "Landlock"): what the result says, --landlock, and the wall
holding where the mount and network namespaces are bypassed: a host directory or TCP socket
reached through a descriptor the caller left open (--keep-fds), a bind's :ro mode through the
host's writable mount of the same directory, TCP without seccomp. Each is also run with
--landlock off, where it goes through, so that Landlock is shown to be what stops it. The
attacks of the self-test that Landlock alone stops run in test_lab.py-style here too."""
import ctypes
import errno
import json
import os
import shutil
import socket
import subprocess
import tempfile
import unittest

from nsboxtest import NSBOX, NsboxTestCase, nsbox, nsbox_json


def kernel_abi():
    """The kernel's Landlock ABI (landlock_create_ruleset(NULL, 0, VERSION)), or 0."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint(1))
    return abi if abi >= 2 else 0


ABI = kernel_abi()


def py(code, *opts, **kw):
    """Run python3 -c CODE in the sandbox with --json."""
    return nsbox_json(*opts, "--", "python3", "-c", code, **kw)


def shared_dir():
    """A directory the sandbox's host uid can write (root's sandboxes run as ids of their own)."""
    d = tempfile.TemporaryDirectory(prefix="nsbox-landlock-")
    os.chmod(d.name, 0o777)
    return d


class LandlockTestCase(NsboxTestCase):
    def setUp(self):
        if not ABI:
            self.skip_or_fail("this kernel has no Landlock that nsbox uses (ABI 2 or later)")


class TestResult(NsboxTestCase):
    def test_the_result_says_what_was_applied(self):
        for opts, net in (((), True), (("--network", "loopback"), False),
                          (("--network", "host"), False)):
            with self.subTest(opts=opts):
                p, r = nsbox_json(*opts, "--", "true")
                self.assertEqual(r["status"], "exited", p.stderr)
                if not ABI:
                    self.assertIsNone(r["landlock"], r)
                    self.assertTrue(any("Landlock was not applied" in n for n in r["notes"]), r)
                    continue
                want = ["fs"] + (["net"] if net and ABI >= 4 else []) + (
                    ["scope"] if ABI >= 6 else [])
                self.assertEqual(r["landlock"], {"abi": min(ABI, 7), "restricts": want}, r)
                self.assertFalse(any("Landlock" in n for n in r["notes"]), r)

    def test_required(self):
        p, r = nsbox_json("--landlock", "required", "--", "true")
        if ABI:
            self.assertEqual(r["status"], "exited", p.stderr)
            self.assertEqual(r["landlock"]["abi"], min(ABI, 7), r)
        else:
            self.assertOneLineError(nsbox("run", "--landlock", "required", "--", "true"),
                                    contains="--landlock required")

    def test_off_is_an_opt_out(self):
        p, r = nsbox_json("--landlock", "off", "--", "true")
        self.assertEqual(r["status"], "exited", p.stderr)
        self.assertIsNone(r["landlock"], r)
        self.assertIn("nsbox: warning: --landlock off:", p.stderr)
        self.assertTrue(any(w.startswith("--landlock off:") for w in r["warnings"]), r)
        self.assertOneLineError(nsbox("run", "--landlock", "of", "--", "true"),
                                contains="expected auto, required or off")
        self.assertOneLineError(nsbox("run", "--landl", "off", "--", "true"),
                                contains="an opt-out must be spelled in full")


# Through descriptor argv[1] (a directory of the host, passed with --keep-fds): read "secret", then
# create "planted"; prints each outcome as "read OK"/"read 13", "write OK"/"write 13".
THROUGH_FD = r"""
import os, sys
for what, flags in (("read", os.O_RDONLY), ("write", os.O_WRONLY | os.O_CREAT)):
    try:
        os.close(os.open("secret" if what == "read" else "planted", flags, 0o644,
                         dir_fd=int(sys.argv[1])))
        print(what, "OK")
    except OSError as e:
        print(what, e.errno)
"""


class TestFiles(LandlockTestCase):
    def through_fd(self, d, *opts):
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            p, r = nsbox_json("--keep-fds", *opts, "--", "python3", "-c", THROUGH_FD, str(fd),
                              pass_fds=(fd,))
        finally:
            os.close(fd)
        self.assertEqual(r["status"], "exited", (p.stderr, r))
        return r["stdout"].split("\n")[:2]

    def test_a_host_directory_through_a_descriptor(self):
        # The mount namespace has no say over a descriptor: only Landlock keeps it shut.
        with shared_dir() as d:
            with open(os.path.join(d, "secret"), "w") as f:
                f.write("x")
            os.chmod(os.path.join(d, "secret"), 0o644)
            self.assertEqual(self.through_fd(d), ["read 13", "write 13"])
            self.assertFalse(os.path.exists(os.path.join(d, "planted")))
            self.assertEqual(self.through_fd(d, "--landlock", "off"), ["read OK", "write OK"])
            self.assertTrue(os.path.exists(os.path.join(d, "planted")))

    def test_a_binds_mode_holds_through_the_hosts_writable_mount(self):
        # The same directory bound :ro at /mnt and reached through the host's (writable) mount:
        # the rule is the inode's, so it reads and does not write; bound :rw it writes.
        with shared_dir() as d:
            with open(os.path.join(d, "secret"), "w") as f:
                f.write("x")
            os.chmod(os.path.join(d, "secret"), 0o644)
            self.assertEqual(self.through_fd(d, "-v", f"{d}:/mnt:ro"), ["read OK", "write 13"])
            self.assertFalse(os.path.exists(os.path.join(d, "planted")))
            self.assertEqual(self.through_fd(d, "-v", f"{d}:/mnt:ro", "--landlock", "off"),
                             ["read OK", "write OK"])
            os.unlink(os.path.join(d, "planted"))
            self.assertEqual(self.through_fd(d, "-v", f"{d}:/mnt:rw"), ["read OK", "write OK"])

    def test_ordinary_work_goes_on(self):
        # What programs do: renames across directories, /dev/null, a pty, /proc/self.
        code = ("import os, pty, subprocess\n"
                "os.makedirs('/tmp/a/b'); open('/tmp/a/x', 'w').write('1')\n"
                "os.rename('/tmp/a/x', '/tmp/a/b/x'); os.link('/tmp/a/b/x', '/tmp/a/y')\n"
                "open('/dev/null', 'w').write('x'); open('/work/f', 'w').write('x')\n"
                "m, s = pty.openpty(); assert os.isatty(s)\n"
                "open('/proc/self/comm', 'w').write('renamed')\n"
                "print(subprocess.run(['sh', '-c', 'echo ok > /dev/null && echo sh'],\n"
                "                     capture_output=True, text=True).stdout.strip())\n")
        with shared_dir() as d:
            p, r = py(code, "-v", f"{d}:/data:rw")
        self.assertEqual((r["status"], r["exit_code"], r["stdout"].strip()), ("exited", 0, "sh"),
                         (p.stderr, r))

    def test_exec_follows_the_mounts(self):
        # Written into /tmp: refused (noexec and Landlock); in a --tmpfs DST:exec and in a :rw
        # bind: runs (Landlock grants execute where the mount does).
        code = ("import os, subprocess, sys\n"
                "for d in sys.argv[1:]:\n"
                "    p = os.path.join(d, 'prog'); open(p, 'w').write('#!/bin/sh\\necho ran\\n')\n"
                "    os.chmod(p, 0o755)\n"
                "    try: print(d, subprocess.run([p], capture_output=True, text=True).stdout.strip())\n"
                "    except OSError as e: print(d, e.errno)\n")
        with shared_dir() as d:
            p, r = nsbox_json("--tmpfs", "/x:exec", "-v", f"{d}:/data:rw", "--", "python3", "-c",
                              code, "/tmp", "/work", "/x", "/data")
        self.assertEqual(r["stdout"].splitlines(), ["/tmp 13", "/work 13", "/x ran", "/data ran"],
                         (p.stderr, r))


    def test_a_tmpfs_inside_a_bind_splits_its_execute_right(self):
        # --tmpfs /data/scratch inside a :rw bind: the bind's entries keep execute, each by a
        # rule of its own read at the start (README, "Landlock"), the tmpfs gets none, and an
        # entry made later in the bind's top directory gets none either.
        code = ("import os, subprocess, sys\n"
                "for p in sys.argv[1:]:\n"
                "    if not os.path.exists(p):\n"
                "        open(p, 'w').write('#!/bin/sh\\necho ran\\n'); os.chmod(p, 0o755)\n"
                "    try: print(p, subprocess.run([p], capture_output=True, text=True).stdout.strip())\n"
                "    except OSError as e: print(p, e.errno)\n")
        with shared_dir() as d:
            os.mkdir(os.path.join(d, "sub"))
            os.chmod(os.path.join(d, "sub"), 0o777)
            for name in ("top", "sub/old"):
                with open(os.path.join(d, name), "w") as f:
                    f.write("#!/bin/sh\necho ran\n")
                os.chmod(os.path.join(d, name), 0o755)
            p, r = nsbox_json("-v", f"{d}:/data:rw", "--tmpfs", "/data/scratch", "--", "python3",
                              "-c", code, "/data/top", "/data/sub/old", "/data/sub/new",
                              "/data/scratch/new", "/data/new")
        self.assertEqual(r["stdout"].splitlines(),
                         ["/data/top ran", "/data/sub/old ran", "/data/sub/new ran",
                          "/data/scratch/new 13", "/data/new 13"], (p.stderr, r))


class TestNetwork(LandlockTestCase):
    def setUp(self):
        super().setUp()
        if ABI < 4:
            self.skip_or_fail(f"this kernel's Landlock (ABI {ABI}) does not restrict TCP")

    BIND = ("import socket\n"
            "try:\n"
            "    s = socket.socket(); s.bind(('0.0.0.0', 0)); print('bound')\n"
            "except OSError as e: print(e.errno)\n")

    def test_tcp_bind_refused_without_a_network_even_without_seccomp(self):
        p, r = py(self.BIND, "--no-seccomp")
        self.assertEqual(r["stdout"].strip(), str(errno.EACCES), (p.stderr, r))
        p, r = py(self.BIND, "--no-seccomp", "--landlock", "off")
        self.assertEqual(r["stdout"].strip(), "bound", (p.stderr, r))
        # Under --network loopback serving on lo is the point: Landlock leaves TCP alone.
        p, r = py(self.BIND, "--network", "loopback")
        self.assertEqual(r["stdout"].strip(), "bound", (p.stderr, r))

    def test_only_the_proxys_port_under_allow(self):
        # On the sandbox's own lo: the proxy's port connects; another port is refused by
        # Landlock (EACCES) before the kernel finds nobody listening (ECONNREFUSED).
        code = ("import socket\n"
                "for port in (3128, 3129):\n"
                "    try:\n"
                "        socket.create_connection(('127.0.0.1', port), timeout=5).close(); print(port, 'ok')\n"
                "    except OSError as e: print(port, e.errno)\n")
        p, r = py(code, "--network", "allow=example.invalid")
        self.assertEqual(r["stdout"].splitlines(), ["3128 ok", f"3129 {errno.EACCES}"],
                         (p.stderr, r))
        p, r = py(code, "--network", "allow=example.invalid", "--landlock", "off")
        self.assertEqual(r["stdout"].splitlines(), ["3128 ok", f"3129 {errno.ECONNREFUSED}"],
                         (p.stderr, r))


class TestSelftestAttacks(LandlockTestCase):
    """The self-test's Landlock attacks: blocked with only Landlock in the way, through with
    --landlock off, and through without nsbox."""

    def test_landlock_attacks(self):
        names = ["landlock-host-dir", "landlock-tmpfs-exec", "landlock-tcp"]
        p = subprocess.run([NSBOX, "selftest", "--only", ",".join(names), "--ablate", "--control",
                            "--json"], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        report = json.loads(p.stdout)
        for a in report["attacks"]:
            if a["name"] == "landlock-tcp" and ABI < 4:
                continue
            for mode, want in (("sandbox", "blocked"), ("ablated", "succeeded"),
                               ("control", "succeeded")):
                self.assertEqual(a[mode]["verdict"], want, (mode, a))


class TestSession(LandlockTestCase):
    def test_a_session_has_the_same_wall(self):
        if ABI < 4:
            self.skip_or_fail(f"this kernel's Landlock (ABI {ABI}) does not restrict TCP")
        runtime = tempfile.mkdtemp(prefix="nsbox-landlock-session-")
        self.addCleanup(shutil.rmtree, runtime, ignore_errors=True)
        env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
        p = nsbox("session", "start", "--json", "--cgroup", "off", "--no-seccomp", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        sid = json.loads(p.stdout)["id"]
        self.addCleanup(nsbox, "session", "stop", sid, env=env)
        p = nsbox("session", "exec", sid, "--json", "--code", "-", input=TestNetwork.BIND, env=env)
        self.assertEqual(json.loads(p.stdout)["stdout"].strip(), str(errno.EACCES), p.stderr)


if __name__ == "__main__":
    unittest.main()
