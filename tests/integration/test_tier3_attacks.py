# SPDX-License-Identifier: LGPL-2.1-or-later
"""Attacks on isolation tier 3 (--isolation landlock) beyond test_tier3's: the host's unix
sockets, datagram socketpairs, truncate(2) by path, the host's System V IPC, io_uring; ptrace,
process_vm_readv, prlimit and setpriority of a process of the program's uid; the x32 system
call ABI, what the program inherits, and the gaps the README states (the dynamic loader, the
caller's files' metadata). Each runs bare first where that shows it working; "no user
namespace" is made as test_tier3 makes it."""
import ctypes
import json
import os
import socket
import subprocess
import threading
import unittest

from nsboxtest import HOST_PYTHON, NSBOX
from test_tier3 import NO_USERNS, Tier3TestCase, bare, no_userns, tier3

LANDLOCK_CREATE_RULESET_VERSION = 1


def landlock_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(444, None, 0, LANDLOCK_CREATE_RULESET_VERSION)


class Server:
    """A unix socket server of the caller's, writable by anyone (so that only nsbox's walls
    stand between it and a root run's pool id): it answers each connection or datagram by
    recording what it got."""

    def __init__(self, address, kind=socket.SOCK_STREAM):
        self.got = []
        self.sock = socket.socket(socket.AF_UNIX, kind)
        self.sock.bind(address)
        if not address.startswith("\0"):
            os.chmod(address, 0o777)
        if kind == socket.SOCK_STREAM:
            self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.kind = kind
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.done.is_set():
            try:
                if self.kind == socket.SOCK_STREAM:
                    c = self.sock.accept()[0]
                    c.sendall(b"SECRET")
                    c.close()
                    self.got.append(b"connection")
                else:
                    self.got.append(self.sock.recv(100))
            except OSError:
                pass

    def close(self):
        self.done.set()
        self.thread.join()
        self.sock.close()


class TestTier3Attacks(Tier3TestCase):
    tmp_prefix = "tier3-attack-"

    def test_cannot_connect_to_a_named_unix_socket_of_the_host(self):
        # Landlock does not check connect(2) to a named socket, and there is no mount namespace:
        # the caller's D-Bus session bus (its systemd runs any command), an ssh agent, ...
        path = os.path.join(self.tmp, "bus")
        server = Server(path)
        code = ("import socket\n"
                "s = socket.socket(socket.AF_UNIX)\n"
                f"s.connect({path!r}); print(s.recv(6).decode())")
        try:
            p = bare(code)
            self.assertEqual(p.stdout, "SECRET\n", p.stderr)  # the control
            p, r = tier3("--", "python3", "-c", code)
            self.assertNotIn("SECRET", r["stdout"], r)
            self.assertIn("PermissionError", r["stderr"], r)
        finally:
            server.close()

    def test_cannot_connect_to_an_abstract_socket_on_any_abi(self):
        name = f"\0nsbox-tier3-attack-{os.getpid()}"
        server = Server(name)
        code = ("import socket\n"
                "s = socket.socket(socket.AF_UNIX)\n"
                f"s.connect({name!r}); print(s.recv(6).decode())")
        try:
            p = bare(code)
            self.assertEqual(p.stdout, "SECRET\n", p.stderr)  # the control
            p, r = tier3("--", "python3", "-c", code)
            self.assertNotIn("SECRET", r["stdout"], r)
            # socket(2) refused (EPERM) before Landlock's scope (ABI 6) would be asked.
            self.assertIn("PermissionError: [Errno 1]", r["stderr"], r)
        finally:
            server.close()

    def test_a_datagram_socketpair_cannot_send_to_a_named_socket(self):
        path = os.path.join(self.tmp, "journal")
        server = Server(path, socket.SOCK_DGRAM)
        send = ("import socket\n"
                "for t in (socket.SOCK_DGRAM, socket.SOCK_RAW, "
                "socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK):\n"
                "    try:\n"
                "        a, b = socket.socketpair(socket.AF_UNIX, t)\n"
                f"        a.sendto(b'PLANTED', {path!r}); print('SENT')\n"
                "    except PermissionError: print('refused')\n")
        try:
            p = bare(send)
            self.assertEqual(p.stdout, "SENT\n" * 3, p.stderr)  # the control
            self.assertEqual(server.got, [b"PLANTED"] * 3)
            server.got.clear()
            p, r = tier3("--", "python3", "-c", send)
            self.assertEqual(r["stdout"], "refused\n" * 3, r)
            self.assertEqual(server.got, [])
            # A stream pair (asyncio's, multiprocessing.Pipe's) and a seqpacket one still work.
            p, r = tier3("--", "python3", "-c",
                         "import asyncio, socket\n"
                         "for t in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):\n"
                         "    a, b = socket.socketpair(socket.AF_UNIX, t)\n"
                         "    a.send(b'x'); print(b.recv(1))\n"
                         "print(asyncio.run(asyncio.sleep(0, 'loop')))")
            self.assertEqual(r["stdout"], "b'x'\nb'x'\nloop\n", r)
        finally:
            server.close()

    def test_cannot_truncate_a_file_by_path(self):
        # Landlock checks truncate(2) only from ABI 3; on ABI 2 (Debian 12's 6.1) the program,
        # as the caller, could empty their files. seccomp refuses it on every ABI.
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "w") as f:
            f.write("precious")
        os.chmod(victim, 0o666)
        code = (f"import os\ntry: os.truncate({victim!r}, 0); print('TRUNCATED')\n"
                "except OSError as e: print(e.errno)")
        p = bare(code)
        self.assertEqual(p.stdout, "TRUNCATED\n", p.stderr)  # the control
        with open(victim, "w") as f:
            f.write("precious")
        p, r = tier3("--", "python3", "-c", code)
        self.assertEqual(r["stdout"], "1\n", r)  # EPERM: seccomp's, not Landlock's EACCES
        with open(victim) as f:
            self.assertEqual(f.read(), "precious")
        # A file of its own is truncated through a descriptor (file.truncate(): ftruncate).
        p, r = tier3("--", "python3", "-c",
                     "f = open('own', 'w+'); f.write('abc'); f.truncate(1); f.close()\n"
                     "print(open('own').read())")
        self.assertEqual(r["stdout"], "a\n", r)

    def test_cannot_reach_the_hosts_system_v_ipc(self):
        # No IPC namespace: the caller's segments (an X server's MIT-SHM images) and queues
        # are the host's. 0666, so that for root's pool id only nsbox's walls stand between.
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        shm = libc.shmget(0, 4096, 0o1000 | 0o666)  # IPC_PRIVATE, IPC_CREAT
        if shm < 0:
            self.skip_or_fail(f"shmget: {os.strerror(ctypes.get_errno())}")
        addr = libc.shmat(shm, None, 0)
        ctypes.memmove(addr, b"SHM-SECRET", 10)
        code = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "libc.shmat.restype = ctypes.c_void_p\n"
                f"a = libc.shmat({shm}, None, 0)\n"
                "ok = a not in (None, ctypes.c_void_p(-1).value)\n"
                "print(ctypes.string_at(a, 10).decode() if ok else ctypes.get_errno())\n"
                "q = libc.msgget(0, 0o1600)\n"
                "print('QUEUE' if q >= 0 else ctypes.get_errno())\n"
                "if q >= 0: libc.msgctl(q, 0, None)")  # IPC_RMID: the control leaves none
        try:
            p = bare(code)
            self.assertEqual(p.stdout, "SHM-SECRET\nQUEUE\n", p.stderr)  # the control
            p, r = tier3("--", "python3", "-c", code)
            self.assertEqual(r["stdout"], "1\n1\n", r)
        finally:
            libc.shmdt(ctypes.c_void_p(addr))
            libc.shmctl(shm, 0, None)  # IPC_RMID

    def test_io_uring_is_refused(self):
        # io_uring's IORING_OP_SOCKET/CONNECT/OPENAT would pass beside the seccomp rules.
        code = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "params = ctypes.create_string_buffer(120)\n"
                "fd = libc.syscall(425, 4, params)\n"
                "print('RING' if fd >= 0 else os.strerror(ctypes.get_errno()))")
        p = bare(code)
        if p.stdout != "RING\n":
            self.skip_or_fail(f"io_uring is not available here at all: {p.stdout}{p.stderr}")
        p, r = tier3("--", "python3", "-c", code)
        self.assertNotIn("RING", r["stdout"], r)
        self.assertEqual(r["exit_code"], 0, r)

    def test_cannot_ptrace_or_read_the_memory_of_a_process_of_its_uid(self):
        # An ordinary user's program runs as them: their other processes share its uid. The
        # victim is started in the same user namespace as the attacker (no_userns.py's): from
        # a child user namespace the kernel refuses ptrace of the parent's processes anyway
        # (cap_ptrace_access_check()), which would hide what tier 3 does.
        code = ("import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "pid = int(sys.argv[1])\n"
                "class iovec(ctypes.Structure):\n"
                "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
                "buf = ctypes.create_string_buffer(8)\n"
                "local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)\n"
                "remote = iovec(0x400000, 8)\n"
                "n = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, "
                "0)\n"
                "print('vm_readv', n, ctypes.get_errno())\n"
                "a = libc.ptrace(16, pid, 0, 0)\n"
                "print('ATTACHED' if a == 0 else 'ptrace refused', ctypes.get_errno())")
        wrapper = ("import subprocess, sys\n"
                   "victim = subprocess.Popen(['sleep', '30'])\n"
                   "argv = [a.replace('{pid}', str(victim.pid)) for a in sys.argv[1:]]\n"
                   "p = subprocess.run(argv, capture_output=True, text=True,"
                   " stdin=subprocess.DEVNULL)\n"
                   "victim.kill(); victim.wait()\n"
                   "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr)")
        if os.geteuid() != 0:
            # The control: bare, an ordinary user attaches to their own process (root in
            # no_userns's namespace holds no capability over its root processes' namespace).
            p = no_userns(HOST_PYTHON, "-c", wrapper, HOST_PYTHON, "-c", code, "{pid}")
            self.assertIn("ATTACHED", p.stdout, p.stderr)
        p = no_userns(HOST_PYTHON, "-c", wrapper, NSBOX, "run", "--json", "--isolation",
                      "landlock", "--", "python3", "-c", code, "{pid}")
        r = json.loads(p.stdout)
        self.assertEqual(r["isolation"]["tier"], 3, r)
        self.assertNotIn("ATTACHED", r["stdout"], r)
        self.assertIn("vm_readv -1 1\n", r["stdout"], r)
        self.assertIn("ptrace refused 1\n", r["stdout"], r)

    def test_cannot_set_the_limits_or_priority_of_a_process_of_its_uid(self):
        # prlimit(2), setpriority(2) and sched_set* check the uid only, and no Landlock scope
        # covers them: RLIMIT_NOFILE 3 breaks the caller's process, and a nice value raised
        # (PRIO_USER: all of them at once; here PRIO_PGRP, the victim's group alone) cannot be
        # lowered again without CAP_SYS_NICE.
        code = ("import os, resource, sys\npid = int(sys.argv[1])\n"
                "for f in (lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, 3)),\n"
                "          lambda: os.setpriority(os.PRIO_PGRP, pid, 18),\n"
                "          lambda: os.setpriority(os.PRIO_PROCESS, pid, 19),\n"
                "          lambda: os.sched_setaffinity(pid, {0}),\n"
                "          lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, "
                "os.sched_param(0))):\n"
                "    try: f(); print('CHANGED')\n"
                "    except OSError as e: print(e.errno)\n"
                "resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32)); os.nice(1)\n"
                "os.sched_setaffinity(0, os.sched_getaffinity(0)); print('own ok')")

        def state(pid):
            with open(f"/proc/{pid}/limits") as f:
                nofile = [x for x in f if x.startswith("Max open files")][0].split()[3]
            with open(f"/proc/{pid}/stat") as f:
                nice = f.read().rsplit(")", 1)[1].split()[16]
            return nofile, nice, os.sched_getscheduler(pid), os.sched_getaffinity(pid)

        for control in (True, False):
            victim = subprocess.Popen(["sleep", "30"], start_new_session=True)
            try:
                before = state(victim.pid)
                if control:
                    p = no_userns(HOST_PYTHON, "-c", code, str(victim.pid))
                    self.assertEqual(p.stdout, "CHANGED\n" * 5 + "own ok\n", p.stderr)
                    self.assertNotEqual(state(victim.pid), before)
                else:
                    p, r = tier3("--", "python3", "-c", code, str(victim.pid))
                    self.assertEqual(r["stdout"], "1\n" * 5 + "own ok\n", r)
                    self.assertEqual(state(victim.pid), before)
            finally:
                victim.kill()
                victim.wait()

    def test_signal_to_a_process_of_its_uid_follows_the_abi(self):
        # README: without ABI 6 the program may signal the caller's processes of its uid.
        victim = subprocess.Popen(["sleep", "30"])
        code = (f"import os\ntry: os.kill({victim.pid}, 0); print('REACHED')\n"
                "except OSError as e: print(e.errno)")
        try:
            if os.geteuid() != 0:
                p = bare(code)
                self.assertEqual(p.stdout, "REACHED\n", p.stderr)  # the control
            p, r = tier3("--", "python3", "-c", code)
            if landlock_abi() >= 6 or os.geteuid() == 0:
                self.assertEqual(r["stdout"], "1\n", r)
            else:
                self.assertEqual(r["stdout"], "REACHED\n", r)  # as the README says
        finally:
            victim.kill()
            victim.wait()

    def test_the_x32_abi_does_not_pass_the_filters(self):
        # setsid and socket by their x32 numbers (__X32_SYSCALL_BIT): the program must not get a
        # session of its own (it would leave the group nsbox kills) nor a socket.
        code = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "x32 = 0x40000000\n"
                "s = libc.syscall(x32 + 41, 2, 1, 0)\n"
                "print('SOCKET' if s >= 0 else 'no socket')\n"
                "libc.syscall(x32 + 112)\n"
                "print('NEW SESSION' if os.getsid(0) == os.getpid() else 'same session')")
        if os.uname().machine != "x86_64":
            self.skip_or_fail("the x32 ABI is x86_64's")
        p, r = tier3("--", "python3", "-c", code)
        self.assertNotIn("SOCKET", r["stdout"], r)
        self.assertNotIn("NEW SESSION", r["stdout"], r)
        # libseccomp's filter kills a call of an architecture it was not built for.
        self.assertIn(r["status"], ("signaled", "exited"), r)

    def test_inherits_no_descriptor_and_no_environment(self):
        secret_fd = os.open(os.path.join(self.tmp), os.O_RDONLY)
        env = dict(os.environ, NSBOX_TIER3_SECRET="TOP-SECRET")
        try:
            p = subprocess.run([HOST_PYTHON, NO_USERNS, "--",
                                NSBOX,
                                "run", "--json", "--isolation", "landlock", "--",
                                "python3", "-c",
                                "import os\n"
                                "fds = []\n"
                                "for fd in range(1024):\n"
                                "    try: os.fstat(fd); fds.append(fd)\n"
                                "    except OSError: pass\n"
                                "print(fds, sorted(os.environ))"],
                               capture_output=True, text=True, timeout=60, input="", env=env,
                               pass_fds=(secret_fd,))
            r = json.loads(p.stdout)
            self.assertEqual(r["stdout"], "[0, 1, 2] ['HOME', 'LANG', 'PATH', "
                             "'PYTHONUNBUFFERED', 'TMPDIR']\n", r)
        finally:
            os.close(secret_fd)

    def test_proc_of_nsbox_and_its_init_is_out_of_reach(self):
        code = ("import os\n"
                "for p in ('/proc/self/environ', f'/proc/{os.getppid()}/environ',\n"
                "          f'/proc/{os.getppid()}/fd', f'/proc/{os.getppid()}/root/etc/passwd',\n"
                "          f'/proc/{os.getppid()}/cwd', '/proc/1/cmdline', '/dev/fd'):\n"
                "    try: os.listdir(p) if not p.endswith(('environ', 'passwd', 'cmdline')) "
                "else open(p).read(); print('READ', p)\n"
                "    except OSError as e: print(e.errno)")
        p, r = tier3("--", "python3", "-c", code)
        self.assertNotIn("READ", r["stdout"], r)
        self.assertEqual(r["stdout"].split(), ["13"] * 7, r)

    def test_documented_gap_ld_so_runs_a_file_of_the_scratch_directory(self):
        # README: "never execute" is execve's; the dynamic loader still runs such a file.
        loader = "/lib64/ld-linux-x86-64.so.2"
        if not os.path.exists(loader):
            self.skip_or_fail(f"no {loader} here")
        code = ("import os, shutil, subprocess\n"
                "shutil.copyfile('/usr/bin/true', 'mine'); os.chmod('mine', 0o755)\n"
                "try: subprocess.run(['./mine']); print('EXECUTED')\n"
                "except PermissionError: print('execve refused')\n"
                f"print('loader', subprocess.run([{loader!r}, './mine']).returncode)")
        p, r = tier3("--", "python3", "-c", code)
        self.assertEqual(r["stdout"], "execve refused\nloader 0\n", r)

    def test_cannot_run_a_program_it_wrote_into_a_memfd(self):
        # Landlock lets every access to a memfd through (an internal mount): a program written
        # into one and run through /proc/self/fd ran in tier 3 until it got the memfd program
        # the other tiers load (memfd.h). Bare, it runs; in tier 3, memfd_create refuses the
        # memfds that could be executed (EACCES), as the host's vm.memfd_noexec says.
        code = ("import os, subprocess\n"
                "for flags in (0, 0x10):  # plain, MFD_EXEC\n"
                "    try: fd = os.memfd_create('x', flags)\n"
                "    except OSError as e: print('refused', e.errno); continue\n"
                "    os.write(fd, open('/usr/bin/true', 'rb').read())\n"
                "    try: print('ran', subprocess.run([f'/proc/self/fd/{fd}'], pass_fds=[fd]).returncode)\n"
                "    except OSError as e: print('exec refused', e.errno)\n")
        with open("/proc/sys/vm/memfd_noexec") as f:
            level = f.read().strip()
        # Level 0: every memfd may be executed; 1: only with MFD_EXEC; 2: none.
        want_bare, want = {"0": ("ran 0\nran 0\n", "refused 13\nrefused 13\n"),
                           "1": ("exec refused 13\nran 0\n", "exec refused 13\nrefused 13\n")
                           }.get(level, (None, None))
        if want_bare is None:
            self.skip_or_fail(f"vm.memfd_noexec is {level} here: no memfd runs bare either")
        p = bare(code)
        self.assertEqual(p.stdout, want_bare, p.stderr)  # the control
        p, r = tier3("--", "python3", "-c", code)
        self.assertEqual(r["stdout"], want, r)

    def test_cannot_make_a_file_of_the_caller_writable_to_others(self):
        # Landlock checks no metadata: an ordinary user's program, as the caller, could make
        # their ~/.bashrc writable to every local user, who would then run code as them.
        victim = os.path.join(self.tmp, "bashrc")
        with open(victim, "w") as f:
            f.write("x")
        os.chmod(victim, 0o644)
        code = ("import os\n"
                "for mode in (0o666, 0o646, 0o664, 0o4755):\n"
                f"    try: os.chmod({victim!r}, mode); print('CHANGED')\n"
                "    except OSError as e: print(e.errno)\n"
                f"    os.chmod({victim!r}, 0o644) if os.getuid() == {os.getuid()} else None\n")
        if os.geteuid() != 0:
            p = bare(code)
            self.assertEqual(p.stdout, "CHANGED\n" * 4, p.stderr)  # the control
        p, r = tier3("--", "python3", "-c", code)
        self.assertEqual(r["stdout"], "1\n" * 4, r)
        self.assertEqual(os.stat(victim).st_mode & 0o7777, 0o644)
        # Its own files: 0644, 0755 and shutil.copy() work; writable to others and set-id not.
        p, r = tier3("--", "python3", "-c",
                     "import os, shutil\nopen('a', 'w').close()\n"
                     "os.chmod('a', 0o755); shutil.copy('a', 'b')\n"
                     "print(oct(os.stat('b').st_mode))\n"
                     "fd = os.open('a', os.O_RDONLY)\n"
                     "for f in (lambda: os.chmod('a', 0o777), lambda: os.fchmod(fd, 0o666),\n"
                     "          lambda: os.chmod('a', 0o4755)):\n"
                     "    try: f(); print('CHANGED')\n"
                     "    except OSError as e: print(e.errno)")
        self.assertEqual(r["stdout"], "0o100755\n1\n1\n1\n", r)

    def test_documented_gap_metadata_of_the_callers_files(self):
        # README: an ordinary user's program may still make the caller's files readable to
        # others and set their times (Landlock checks no metadata); root's pool id owns none.
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "w") as f:
            f.write("x")
        os.chmod(victim, 0o600)
        code = ("import os\n"
                f"try: os.chmod({victim!r}, 0o644); print('CHMOD')\n"
                "except OSError as e: print(e.errno)\n"
                f"try: os.utime({victim!r}, (0, 0)); print('UTIME')\n"
                "except OSError as e: print(e.errno)\n"
                f"try: open({victim!r}).read(); print('READ')\n"
                "except OSError as e: print(e.errno)")
        p, r = tier3("--", "python3", "-c", code)
        if os.geteuid() == 0:
            self.assertEqual(r["stdout"], "1\n1\n13\n", r)
            self.assertEqual(os.stat(victim).st_mode & 0o777, 0o600)
        else:
            self.assertEqual(r["stdout"], "CHMOD\nUTIME\n13\n", r)
            self.assertEqual(os.stat(victim).st_mode & 0o777, 0o644)


if __name__ == "__main__":
    unittest.main()
