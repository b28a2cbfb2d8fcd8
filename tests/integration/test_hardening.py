# SPDX-License-Identifier: LGPL-2.1-or-later
"""Hardening against what a payload can leave on the host or take from it: set-user-ID files
through a writable bind, native code from writable places, kernel information under /proc,
per-user kernel budgets of the caller and shared memory beyond --memory. Each attack is also
run with the protection removed (an opt-out, or on the host), to show that the attack works and
that the protection is what stops it."""
import os
import platform
import ctypes
import errno
import json
import secrets
import signal
import stat
import subprocess
import tempfile
import unittest

from nsboxtest import HOST_PYTHON, NSBOX, NsboxTestCase, nsbox, nsbox_json


def py(code, *opts, **kw):
    """Run python3 -c CODE in the sandbox with --json."""
    return nsbox_json(*opts, "--", "python3", "-c", code, **kw)


def shared_dir():
    """A directory the sandbox's host uid can write (root's sandboxes run as host nobody)."""
    d = tempfile.TemporaryDirectory(prefix="nsbox-hardening-")
    os.chmod(d.name, 0o777)
    return d


class TestSetuidFiles(NsboxTestCase):
    # Inside a writable bind: make a file, try to give it each bit, report what happened.
    PLANT = ("import os\n"
             "for name, mode in (('suid', 0o4755), ('sgid', 0o2755), ('both', 0o6755)):\n"
             "    open('/mnt/' + name, 'w').write('#!/bin/sh\\n')\n"
             "    try:\n"
             "        os.chmod('/mnt/' + name, mode); print(name, 'set')\n"
             "    except OSError as e: print(name, e.errno)\n"
             "try:\n"
             "    os.close(os.open('/mnt/created', os.O_CREAT | os.O_WRONLY, 0o4755)); print('created set')\n"
             "except OSError as e: print('created', e.errno)\n"
             "try:\n"
             "    os.mkdir('/mnt/dir', 0o2755); print('dir set')\n"
             "except OSError as e: print('dir', e.errno)\n")

    def host_modes(self, d):
        return {n: stat.S_IMODE(os.lstat(os.path.join(d, n)).st_mode)
                for n in ("suid", "sgid", "both", "created", "dir") if os.path.lexists(os.path.join(d, n))}

    def test_setuid_and_setgid_bits_are_refused(self):
        with shared_dir() as d:
            p, r = py(self.PLANT, "-v", f"{d}:/mnt:rw")
            self.assertEqual(r["status"], "exited", r)
            self.assertEqual(r["stdout"].splitlines(),
                             ["suid 1", "sgid 1", "both 1", "created 1", "dir 1"], r)
            for name, mode in self.host_modes(d).items():
                self.assertEqual(mode & (stat.S_ISUID | stat.S_ISGID), 0, f"{name}: {oct(mode)}")

    def test_without_the_filter_the_bits_land_on_the_host(self):
        # The control: the attack itself works, so the refusal above is what stops it.
        with shared_dir() as d:
            p, r = py(self.PLANT, "-v", f"{d}:/mnt:rw", "--no-seccomp")
            self.assertEqual(r["stdout"].splitlines(),
                             ["suid set", "sgid set", "both set", "created set", "dir set"], r)
            modes = self.host_modes(d)
            self.assertEqual(modes["both"], 0o6755)
            self.assertEqual(modes["suid"], 0o4755)
            self.assertTrue(modes["sgid"] & stat.S_ISGID)

    def test_ordinary_modes_still_work(self):
        code = ("import os\n"
                "open('/mnt/a', 'w').write('x'); os.chmod('/mnt/a', 0o755)\n"
                "fd = os.open('/mnt/b', os.O_CREAT | os.O_WRONLY, 0o644); os.fchmod(fd, 0o600); os.close(fd)\n"
                "os.mkdir('/mnt/c', 0o755); os.chmod('/mnt/c', 0o1777)\n"
                "print('ok')\n")
        with shared_dir() as d:
            p, r = py(code, "-v", f"{d}:/mnt:rw")
            self.assertEqual(r["stdout"], "ok\n", r)
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, "a")).st_mode), 0o755)
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, "b")).st_mode), 0o600)
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, "c")).st_mode), 0o1777)



# A whole static x86-64 program in 132 bytes: an ELF header, one PT_LOAD program header and
# exit(42) (mov edi, 42; mov eax, 60; syscall). Run from a file, from a memfd by its
# /proc/self/fd path, and by execveat(fd, "", AT_EMPTY_PATH) (os.execve with a descriptor);
# each prints how it went: "exit 42", or the errno.
NATIVE = r"""
import os, struct, sys
code = bytes.fromhex('bf2a000000b83c0000000f05')
base, size = 0x400000, 64 + 56 + 12
elf = (b'\x7fELF' + bytes([2, 1, 1, 0]) + bytes(8)
       + struct.pack('<HHIQQQIHHHHHH', 2, 0x3e, 1, base + 120, 64, 0, 0, 64, 56, 1, 0, 0, 0)
       + struct.pack('<IIQQQQQQ', 1, 5, 0, base, base, size, size, 0x1000) + code)

def run(how, target):
    pid = os.fork()
    if pid == 0:
        try:
            os.execve(target, ['elf'], {})
        except OSError as e:
            os._exit(100 + e.errno)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    print(how, 'exit 42' if status == 42 else status - 100 if status > 100 else status)

for d in sys.argv[1:]:
    path = os.path.join(d, 'elf')
    with open(path, 'wb') as f:
        f.write(elf)
    os.chmod(path, 0o755)
    run(d, path)
try:
    fd = os.memfd_create('elf', 0)
except OSError as e:
    # Refused where nsbox could not set vm.memfd_noexec (memfd.h): a sealed one is allowed.
    print('memfd plain', e.errno)
    fd = os.memfd_create('elf', 8)  # MFD_NOEXEC_SEAL
os.write(fd, elf)
try:
    os.fchmod(fd, 0o755)
except OSError as e:
    print('memfd fchmod', e.errno)
run('memfd path', f'/proc/self/fd/{fd}')
run('memfd execveat', fd)
print('memfd_noexec', open('/proc/sys/vm/memfd_noexec').read().strip())
"""


@unittest.skipUnless(platform.machine() == "x86_64", "the test program is x86-64 machine code")
class TestNativeCode(NsboxTestCase):
    def native(self, *opts, dirs=("/tmp", "/dev/shm")):
        p, r = nsbox_json(*opts, "--", "python3", "-c", NATIVE, *dirs)
        self.assertEqual(r["status"], "exited", r)
        return dict(l.rsplit(" ", 1) if not l.endswith("exit 42") else (l[:-8], "42")
                    for l in r["stdout"].splitlines())

    def test_writable_places_are_noexec(self):
        got = self.native("--tmpfs", "/mnt:size=1m", dirs=("/tmp", "/dev/shm", "/mnt"))
        for d in ("/tmp", "/dev/shm", "/mnt"):
            self.assertEqual(got[d], str(13), f"{d}: {got}")  # EACCES

    def test_exec_tmpfs_runs_the_program(self):
        # The control: the same program runs where a tmpfs asks for exec (so the test program
        # works, and noexec is what stopped it above).
        got = self.native("--tmpfs", "/tmp:exec", "--tmpfs", "/mnt:size=1m,exec",
                          dirs=("/tmp", "/mnt"))
        self.assertEqual((got["/tmp"], got["/mnt"]), ("42", "42"), got)

    def test_memfds_are_not_executable(self):
        got = self.native(dirs=())
        with open("/proc/sys/vm/memfd_noexec") as f:
            host = f.read().strip()
        if os.geteuid() != 0:
            # Only the host's root may set it (README): an ordinary user's sandbox has the
            # host's value, neither more nor less, and nsbox's memfd filter refuses what it
            # would let through: plain memfds where it is 0 (a sealed one is used instead).
            self.assertEqual(got["memfd_noexec"], host, got)
            if host == "0":
                self.assertEqual(got["memfd plain"], str(13), got)  # EACCES
        else:
            self.assertEqual(got["memfd_noexec"], "2", got)
            self.assertNotIn("memfd plain", got)
        self.assertEqual(got["memfd fchmod"], str(1), got)  # EPERM: sealed against exec
        self.assertEqual(got["memfd path"], str(13), got)
        self.assertEqual(got["memfd execveat"], str(13), got)
        # The host itself is untouched.
        self.assertEqual(host, self.host_memfd_noexec)

    @classmethod
    def setUpClass(cls):
        with open("/proc/sys/vm/memfd_noexec") as f:
            cls.host_memfd_noexec = f.read().strip()

    def test_memfd_control_under_pid_host(self):
        # The control: in the host's pid namespace (--pid host, an opt-out) the scope is the
        # host's; where that allows executable memfds, the program runs from one.
        if self.host_memfd_noexec != "0":
            self.skip_or_fail("the host's vm.memfd_noexec is not 0")
        got = self.native("--pid", "host", dirs=())
        self.assertEqual((got["memfd path"], got["memfd execveat"]), ("13", "13"), got)
        # ... but nsbox's memfd filter stands in (memfd.h): without seccomp the program runs.
        got = self.native("--pid", "host", "--no-seccomp", dirs=())
        self.assertEqual((got["memfd path"], got["memfd execveat"]), ("42", "42"), got)

    def test_memfd_control_without_seccomp(self):
        # An ordinary user's sandbox: the filter is the protection (Landlock does not cover
        # memfds), so without seccomp the program runs from a memfd. Root's keeps the sysctl.
        if self.host_memfd_noexec != "0":
            self.skip_or_fail("the host's vm.memfd_noexec is not 0")
        got = self.native("--no-seccomp", dirs=())
        want = ("13", "13") if os.geteuid() == 0 else ("42", "42")
        self.assertEqual((got["memfd path"], got["memfd execveat"]), want, got)

    HUGETLB = """
import os
try:
    fd = os.memfd_create('h', 0x4 | 0x8)  # MFD_HUGETLB | MFD_NOEXEC_SEAL
except OSError as e:
    print('create', e.errno)
else:
    try:
        os.fchmod(fd, 0o755)
        print('fchmod', oct(os.fstat(fd).st_mode & 0o777))
    except OSError as e:
        print('fchmod', e.errno)
"""

    def test_hugetlb_memfds_are_refused(self):
        # A hugetlb memfd's F_SEAL_EXEC does not stop chmod +x (hugetlbfs_setattr(), Linux
        # 6.18): where the host has huge pages, a program written into one runs, through
        # MFD_NOEXEC_SEAL and vm.memfd_noexec=2 alike. The control, bare: the seal does not hold.
        bare = subprocess.run([HOST_PYTHON, "-c", self.HUGETLB], capture_output=True,
                              text=True, timeout=30).stdout.strip()
        if not bare.startswith("fchmod"):
            self.skip_or_fail(f"this kernel makes no hugetlb memfd ({bare})")
        if bare != "fchmod 0o755":
            self.skip_or_fail(f"this kernel's hugetlb memfds keep their seal ({bare})")
        p, r = nsbox_json("--", "python3", "-c", self.HUGETLB)
        self.assertEqual(r["stdout"].strip(), "create 13", r)  # EACCES
        # ... and without seccomp (the memfd filter is seccomp's) the sandbox meets the bare
        # kernel's answer.
        p, r = nsbox_json("--no-seccomp", "--", "python3", "-c", self.HUGETLB)
        self.assertEqual(r["stdout"].strip(), "fchmod 0o755", r)



# Docker's default maskedPaths under /proc (nsbox has no /sys).
MASKED = ("keys", "timer_list", "timer_stats", "latency_stats", "sched_debug", "kcore", "acpi",
          "asound", "scsi")

# On the host, as the sandbox's host uid: add a key to that uid's user keyring, or invalidate it.
KEYRING = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
if sys.argv[1] == 'add':   # add_key("user", DESC, "x", 1, KEY_SPEC_USER_KEYRING)
    k = libc.syscall(ctypes.c_long(248), b'user', sys.argv[2].encode(), b'x', ctypes.c_size_t(1),
                     ctypes.c_long(-4))
    if k < 0:
        sys.exit('add_key: ' + os.strerror(ctypes.get_errno()))
    print(k)
else:                      # keyctl(KEYCTL_INVALIDATE, ID)
    libc.syscall(ctypes.c_long(250), ctypes.c_long(21), ctypes.c_long(int(sys.argv[2])))
"""


class TestProcMasks(NsboxTestCase):
    READ = ("import os\n"
            "for p in %r:\n"
            "    path = '/proc/' + p\n"
            "    try:\n"
            "        if os.path.isdir(path): print(p, 'dir', len(os.listdir(path)))\n"
            "        elif os.path.exists(path): print(p, 'file', len(open(path, 'rb').read()))\n"
            "    except OSError as e: print(p, 'errno', e.errno)\n"
            "print('mounts', *sorted(l.split()[4] for l in open('/proc/self/mountinfo')))\n"
            % (MASKED,))

    def test_kernel_information_is_masked(self):
        present = [p for p in MASKED if os.path.exists("/proc/" + p)]
        self.assertIn("keys", present, "this kernel has no /proc/keys (CONFIG_KEYS)")
        for opts in ((), ("--pid", "host")):
            p, r = nsbox_json(*opts, "--", "python3", "-c", self.READ)
            lines = r["stdout"].splitlines()
            mounts = lines[-1].split()[1:]
            got = {l.split()[0]: l.split()[1:] for l in lines[:-1]}
            for name in present:
                # Each entry the host's /proc has is covered, and reads as nothing.
                self.assertIn("/proc/" + name, mounts, (opts, r))
                self.assertEqual(got[name][1], "0", (opts, name, got))

    def host_uid_of_sandbox(self):
        return 65534 if os.geteuid() == 0 else os.geteuid()

    def keyring(self, *args):
        uid = self.host_uid_of_sandbox()
        ids = {} if os.geteuid() != 0 else {"user": uid, "group": uid, "extra_groups": []}
        # The Python of the tests may sit below a directory nobody cannot reach.
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else HOST_PYTHON
        return subprocess.run([python, "-c", KEYRING, *args], capture_output=True,
                              text=True, check=True, **ids).stdout.strip()

    def test_keys_of_the_sandbox_uid_stay_hidden(self):
        # The keyring is not namespaced: a key of the sandbox's host uid, added by a host
        # process (for root's runs, any process running as nobody) ...
        desc = "nsbox-test-" + secrets.token_hex(6)
        key = self.keyring("add", desc)
        try:
            # ... shows in /proc/keys for that uid on the host: the control ...
            ids = {} if os.geteuid() != 0 else {"user": self.host_uid_of_sandbox(),
                                                "group": self.host_uid_of_sandbox(),
                                                "extra_groups": []}
            host = subprocess.run(["cat", "/proc/keys"], capture_output=True, text=True,
                                  check=True, **ids).stdout
            self.assertIn(desc, host)
            # ... and not inside.
            p, r = nsbox_json("--", "python3", "-c",
                              "print(len(open('/proc/keys').read()))")
            self.assertEqual(r["stdout"], "0\n", r)
        finally:
            self.keyring("drop", key)



# Take inotify instances, POSIX timers and POSIX message queues (of the default size) until
# the kernel says no, say how many and why, then hold them until a line arrives on stdin.
HOLD = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while libc.inotify_init1(0) >= 0:
    n += 1
inotify = (n, ctypes.get_errno())
timer, n = ctypes.c_void_p(), 0
while n < 300000 and libc.timer_create(1, None, ctypes.byref(timer)) == 0:
    n += 1
timers = (n, ctypes.get_errno())
n = 0
while n < 1000 and libc.mq_open(b'/q%d' % n, os.O_CREAT | os.O_RDWR, 0o600, None) >= 0:
    n += 1
print(*inotify, *timers, n, ctypes.get_errno(),
      open('/proc/sys/user/max_inotify_instances').read().strip(), flush=True)
sys.stdin.readline()
"""


class TestCallerBudgets(NsboxTestCase):
    def caller_can(self):
        """What the caller itself can still do on the host while the run holds its share."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(0)
        inotify = 0 if fd >= 0 else ctypes.get_errno()
        if fd >= 0:
            os.close(fd)
        timer = ctypes.c_void_p()
        timers = 0 if libc.timer_create(1, None, ctypes.byref(timer)) == 0 else ctypes.get_errno()
        if timers == 0:
            libc.timer_delete(timer)
        name = b"/nsbox-test-%d" % os.getpid()
        q = libc.mq_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600, None)
        mq = 0 if q >= 0 else ctypes.get_errno()
        if q >= 0:
            libc.mq_close(q)
            libc.mq_unlink(name)
        return inotify, timers, mq

    def test_a_run_takes_only_its_share(self):
        # The budgets are the caller's (root's, for root's runs): while the run holds all it
        # can, the caller still gets an inotify instance and a timer. --no-seccomp: the policy
        # refuses inotify altogether (test_refusals); the budgets must hold without it too.
        p = subprocess.Popen([NSBOX, "run", "-i", "--timeout", "60", "--no-seccomp", "--",
                              "python3", "-c", HOLD],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline().split()
            caller = self.caller_can()
        finally:
            p.stdin.write("\n")
            p.stdin.close()
            p.wait(timeout=60)
            p.stdout.close()
            p.stderr.close()
        self.assertEqual(len(line), 7, (line, p.returncode))
        inotify, inotify_errno, timers, timer_errno, queues, mq_errno, cap = map(int, line)
        self.assertEqual(caller, (0, 0, 0), "the caller lost its inotify, timer or message "
                         f"queue budget: {[os.strerror(e) if e else 'ok' for e in caller]} {line}")
        # The sandbox's own caps are what stopped it: 32 instances (EMFILE), 256 pending
        # signals' worth of timers (EAGAIN), 256 KiB of queues (EMFILE: three of ~80 KiB).
        self.assertEqual((cap, inotify, inotify_errno), (32, 32, errno.EMFILE), line)
        self.assertEqual(timer_errno, errno.EAGAIN, line)
        self.assertLessEqual(timers, 256, line)
        self.assertGreater(timers, 200, line)
        self.assertEqual((queues, mq_errno), (3, errno.EMFILE), line)

    def test_file_size_is_bounded(self):
        # RLIMIT_FSIZE is the largest of --memory, --workdir-size and the tmpfs sizes (here
        # --memory's 16 MiB): a file in a :rw bind can grow to it and not past it (EFBIG).
        code = ("import os\n"
                "f = open('/mnt/big', 'wb', buffering=0)\n"
                "for i in range(16): f.write(bytes(1 << 20))\n"
                "print(os.fstat(f.fileno()).st_size >> 20)\n"
                "try:\n    f.write(b'x'); print('grew')\n"
                "except OSError as e: print(e.errno)\n")
        with shared_dir() as d:
            p, r = py(code, "-v", f"{d}:/mnt:rw", "--memory", "16m", "--shm-size", "1m",
                      "--tmpfs", "/tmp:size=1m", "--workdir-size", "1m")
            self.assertEqual(r["stdout"].split(), ["16", str(errno.EFBIG)], r)
            # The file belongs to that run's host uid (each root run has its own): start anew.
            os.unlink(os.path.join(d, "big"))
            # The control: with --memory unlimited there is no bound.
            p, r = py(code, "-v", f"{d}:/mnt:rw", "--memory", "unlimited", "--shm-size", "1m",
                      "--tmpfs", "/tmp:size=1m")
            self.assertEqual(r["stdout"].split(), ["16", "grew"], r)



# System V segments of 32 MiB until the kernel says no (created, never touched: the bound
# must hold before the memory is used), then one larger than --memory.
SYSV = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
IPC_PRIVATE, IPC_CREAT = 0, 0o1000
ids = []
while len(ids) < 64:
    i = libc.shmget(IPC_PRIVATE, ctypes.c_size_t(32 << 20), IPC_CREAT | 0o600)
    if i < 0:
        break
    ids.append(i)
print(len(ids), ctypes.get_errno() if len(ids) < 64 else 0)
i = libc.shmget(IPC_PRIVATE, ctypes.c_size_t((64 << 20) + 4096), IPC_CREAT | 0o600)
print(0 if i >= 0 else ctypes.get_errno())
for i in ids + [i]:  # IPC_RMID: none is left behind, under --ipc host either
    libc.shmctl(i, 0, None)
"""


class TestSharedMemory(NsboxTestCase):
    def test_system_v_shared_memory_is_bounded_by_memory(self):
        p, r = py(SYSV, "--memory", "64m")
        got = r["stdout"].split()
        if os.geteuid() != 0:
            # Only root can set kernel.shm* in the sandbox's IPC namespace: without a cgroup,
            # nothing would bound an ordinary user's segments, so shmget is refused (issue 24:
            # 640 MiB resident under --memory 256m), counted and explained.
            if r["limits_enforced_by"] != "rlimit":
                self.assertEqual(got, ["64", "0", "0"], r)  # the cgroup counts them
                return
            self.assertIn("System V is refused, shmget", r["limits_note"])
            self.assertEqual(got, ["0", str(errno.EPERM), str(errno.EPERM)], r)
            self.assertEqual([x["count"] for x in r["seccomp_refused"]
                              if x["syscall"] == "shmget"], [2], r["seccomp_refused"])
            self.assertTrue(any(n.startswith("System V shared memory (shmget) is refused") and
                                "multiprocessing.shared_memory" in n for n in r["notes"]),
                            r["notes"])
            # The control: without the refusal (--no-seccomp, an opt-out) the segments are not
            # bounded: 64 of 32 MiB under --memory 64m.
            p, r = py(SYSV, "--memory", "64m", "--no-seccomp")
            self.assertEqual(r["stdout"].split(), ["64", "0", "0"], r)
            self.assertIn("shared memory is not bounded", r["limits_note"])
            # POSIX shared memory, what multiprocessing.shared_memory uses, works (/dev/shm).
            p, r = py("from multiprocessing import shared_memory as s\n"
                      "m = s.SharedMemory(create=True, size=1 << 20); m.buf[0] = 7\n"
                      "n = s.SharedMemory(m.name); print(n.buf[0])\n"
                      "n.close(); m.close(); m.unlink()", "--memory", "64m")
            self.assertEqual(r["stdout"], "7\n", r)
            return
        # 64 MiB in all (kernel.shmall): two segments of 32 MiB, then ENOSPC; one segment
        # larger than --memory is EINVAL (kernel.shmmax).
        self.assertEqual(got, ["2", str(errno.ENOSPC), str(errno.EINVAL)], r)
        if r["limits_enforced_by"] == "rlimit":
            self.assertIn("System V at most --memory in all", r["limits_note"])
        # The control: with --ipc host (an opt-out) the kernel's defaults apply.
        p, r = py(SYSV, "--memory", "64m", "--ipc", "host")
        self.assertEqual(r["stdout"].split(), ["64", "0", "0"], r)

    def test_memfds_are_bounded_by_fsize(self):
        # MFD_NOEXEC_SEAL: where nsbox could not set vm.memfd_noexec, plain memfds are refused
        # (memfd.h); a kernel before 6.3 knows neither the flag nor the refusal.
        code = ("import os\n"
                "try:\n    fd = os.memfd_create('m', 8)\n"
                "except OSError:\n    fd = os.memfd_create('m')\n"
                "os.ftruncate(fd, 16 << 20); print('16m')\n"
                "try:\n    os.ftruncate(fd, (16 << 20) + 1); print('grew')\n"
                "except OSError as e: print(e.errno)\n")
        p, r = py(code, "--memory", "16m", "--workdir-size", "1m")
        self.assertEqual(r["stdout"].split(), ["16m", str(errno.EFBIG)], r)
        if r["limits_enforced_by"] == "rlimit":
            self.assertIn("each memfd at most RLIMIT_FSIZE", r["limits_note"])
        p, r = py(code, "--memory", "unlimited")
        self.assertEqual(r["stdout"].split(), ["16m", "grew"], r)



# POSIX shared memory as multiprocessing uses it: a file in /dev/shm, mapped and written.
FILL_SHM = ("import mmap, os\n"
            "fd = os.open('/dev/shm/x', os.O_CREAT | os.O_RDWR, 0o600)\n"
            "os.ftruncate(fd, 64 << 20)\n"
            "m = mmap.mmap(fd, 64 << 20)\n"
            "for i in range(0, 64 << 20, 4096): m[i] = 1\n"
            "print('filled')\n")


class TestShmDiagnosis(NsboxTestCase):
    def test_a_full_dev_shm_names_shm_size(self):
        # 64 MiB into the default 16 MiB /dev/shm: SIGBUS at the first page past it.
        p = nsbox("run", "--", "python3", "-c", FILL_SHM)
        self.assertEqual(p.returncode, 128 + signal.SIGBUS, p.stderr)
        self.assertIn("/dev/shm full", p.stderr)
        self.assertIn("raise --shm-size", p.stderr)
        self.assertNotIn("--memory 256m caps", p.stderr)  # not blamed on --memory
        p, r = nsbox_json("--", "python3", "-c", FILL_SHM)
        self.assertEqual((r["status"], r["signal"]), ("signaled", signal.SIGBUS), r)
        self.assertTrue(any("raise --shm-size" in w for w in r["warnings"]), r["warnings"])

    def test_controls(self):
        # With room, the same program ends normally: /dev/shm's size was the cause.
        p, r = nsbox_json("--shm-size", "128m", "--", "python3", "-c", FILL_SHM)
        self.assertEqual((r["status"], r["stdout"]), ("exited", "filled\n"), r)
        # A SIGBUS with /dev/shm not full is not blamed on it.
        p = nsbox("run", "--", "python3", "-c",
                  "import os, signal; os.kill(os.getpid(), signal.SIGBUS)")
        self.assertEqual(p.returncode, 128 + signal.SIGBUS, p.stderr)
        self.assertNotIn("--shm-size", p.stderr)



# As the host's root: run ARGV as root of a new user namespace that maps uids and gids
# 0-65535 to the host's 100000-165535, as a container's root.
CONTAINER_ROOT = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
go, ready = os.pipe(), os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        os._exit(99)
    os.write(ready[1], b'x')
    os.read(go[0], 1)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    os.execv(sys.argv[1], sys.argv[1:])
os.read(ready[0], 1)
for f in ('uid_map', 'gid_map'):
    with open(f'/proc/{pid}/{f}', 'w') as m:
        m.write('0 100000 65536')
os.write(go[1], b'x')
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


class TestContainerRoot(NsboxTestCase):
    def test_root_of_a_container_runs_as_an_ordinary_user_would(self):
        # vm.memfd_noexec and kernel.shm* of the sandbox open only to the host's root: root of
        # another user namespace gets the host's memfd_noexec and System V shared memory
        # refused (nothing would bound it), said in limits_note, as an ordinary user does; it
        # must not fail.
        code = "print(open('/proc/sys/vm/memfd_noexec').read().strip())"
        args = [NSBOX, "run", "--json", "--cgroup", "off", "--", "python3", "-c", code]
        with tempfile.TemporaryDirectory() as runtime:
            env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
            if os.geteuid() == 0:
                os.chown(runtime, 100000, 100000)
                args = [HOST_PYTHON, "-c", CONTAINER_ROOT, *args]
            p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        with open("/proc/sys/vm/memfd_noexec") as f:
            self.assertEqual(r["stdout"].strip(), f.read().strip(), r)
        self.assertIn("System V is refused, shmget", r["limits_note"])



class TestRootInside(NsboxTestCase):
    def test_user_0_runs(self):
        # --user 0: the sandbox's root is mapped, so its IPC namespace's kernel.shm* belong to
        # it, not to the host's root that writes them for other runs (ipc_permissions() in
        # ipc/ipc_sysctl.c): the run goes on without them, and limits_note says so (it failed
        # with "sysctl: Permission denied" before).
        p, r = nsbox_json("--cgroup", "off", "-u", "0", "--", "id", "-u")
        self.assertEqual((r["status"], r["stdout"]), ("exited", "0\n"), p.stderr)
        if os.geteuid() == 0:
            self.assertIn("with --user 0", r["limits_note"])
        # Nothing bounds System V shared memory then: shmget is refused, as for an ordinary
        # user without a cgroup.
        p, r = py(SYSV, "--cgroup", "off", "-u", "0", "--memory", "64m")
        self.assertEqual(r["stdout"].split(), ["0", str(errno.EPERM), str(errno.EPERM)], r)
        self.assertIn("System V is refused, shmget", r["limits_note"])

# Make user namespaces until the kernel says no; print how many, the errno, and the limits.
USERNS = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while n < 64:
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc.unshare(0x10000000) == 0 else ctypes.get_errno())
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        break
    n += 1
print(n, os.waitstatus_to_exitcode(status) if n < 64 else 0,
      *(open('/proc/sys/user/max_%s_namespaces' % k).read().strip() for k in ('user', 'mnt')))
"""


class TestNamespaceBudget(NsboxTestCase):
    def test_builtin_policy_allows_no_user_namespace(self):
        # The built-in policy refuses unshare (EPERM); behind it, the sandbox's own
        # user.max_user_namespaces is 0, which alone stops every kind (init.c).
        p, r = nsbox_json("--", "python3", "-c", USERNS)
        self.assertEqual(p.returncode, 0, r)
        self.assertEqual(r["stdout"].split()[:3], ["0", str(errno.EPERM), "0"], r)

    def test_without_the_policy_sixteen_of_each(self):
        # --no-seccomp: nothing refuses unshare, and the limits are what bound it: 16 user
        # namespaces (each child's is charged to the sandbox's), then ENOSPC.
        p, r = nsbox_json("--no-seccomp", "--", "python3", "-c", USERNS)
        self.assertEqual(p.returncode, 0, r)
        self.assertEqual(r["stdout"].split(), ["16", str(errno.ENOSPC), "16", "16"], r)


if __name__ == "__main__":
    unittest.main()
