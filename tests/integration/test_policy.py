# SPDX-License-Identifier: LGPL-2.1-or-later
"""The seccomp policy: the default allowlist refuses what it should with the errno it should,
runs real CPython workloads, and the policy commands report errors with their position."""
import ctypes
import ctypes.util
import errno
import os
import re
import shutil
import tempfile
import unittest

from nsboxtest import HERE, PROBE, NsboxTestCase, nsbox, nsbox_json

# What the default policy answers for each probe (tests/probe/probe.c).
REFUSED = {
    "unshare", "setns", "clone-newuser", "clone-newns", "clone-newnet", "clone-newpid", "mount",
    "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "ptrace",
    "process_vm_readv", "process_vm_writev", "keyctl", "add_key", "request_key", "bpf",
    "perf_event_open", "userfaultfd", "io_uring_setup", "kexec_load", "init_module",
    "finit_module", "delete_module", "reboot", "swapon", "acct", "settimeofday", "clock_settime",
    "open_by_handle_at", "name_to_handle_at", "socket-inet", "socket-inet6", "socket-netlink",
    "socket-vsock", "socket-inet-high-bits", "socketpair-inet", "setrlimit-core",
    "prlimit64-core", "ioctl-tiocsti", "ioctl-tiocsti-high", "ioctl-tioclinux",
    "ioctl-tiocsetd", "ioctl-tiocsetd-high", "personality-norandom",
    # setting set-user-ID or set-group-ID bits
    "chmod-setuid", "chmod-setgid", "chmod-setuid-high", "fchmod-setuid", "fchmod-setgid",
    "fchmodat-setuid", "fchmodat-setgid", "fchmodat2-setuid", "creat-setuid", "creat-setgid",
    "mkdir-setgid", "mkdirat-setuid", "open-creat-setuid", "open-creat-setgid",
    "open-tmpfile-setuid", "openat-creat-setuid", "openat-creat-setgid-high",
    "openat-tmpfile-setgid",
    # device nodes (by the file type in the mode), set-id FIFOs, real-time scheduling
    "mknod-chr", "mknod-chr-high", "mknodat-blk", "mknod-fifo-setuid", "mknodat-fifo-setgid",
    "sched_setscheduler-fifo", "sched_setscheduler-rr",
    # only under --network loopback and host (NETWORK_ALLOWED)
    "socket-udplite", "socket-netlink-route", "socket-netlink-audit",
}
ENOSYS_ANSWERS = {"clone3", "openat2", "nr-1000", "inotify_init", "inotify_init1"}
ALLOWED = {"read", "write", "openat", "socket-unix", "socketpair-unix", "prlimit64-core-query",
           "setrlimit-nofile", "ioctl-tiocgwinsz", "clone-thread-only", "personality-query",
           "prctl", "getpid", "chmod-0755", "fchmod-0644", "fchmodat-1777", "mkdir-0755",
           "creat-0644", "openat-creat-0755", "openat-setuid-without-creat",
           # FIFOs, sockets and regular files by mknod; harmless scheduling, NUMA, locking
           # within RLIMIT_MEMLOCK, sync, landlock (issue 16)
           "mknod-fifo", "mknod-fifo-high", "mknod-sock", "mknod-regular", "mknodat-fifo",
           "mknodat-reg", "sched_setscheduler-other", "sched_setscheduler-batch",
           "sched_setscheduler-idle-reset", "sched_setattr", "sched_setparam", "setpriority",
           "sync", "syncfs", "getcpu", "ioprio_get", "ioprio_set", "mlockall", "munlockall",
           "get_mempolicy", "set_mempolicy", "mbind", "landlock_create_ruleset",
           "landlock_add_rule", "landlock_restrict_self"}
# What network.policy (--network loopback, host) allows on top: UDP-Lite, netlink route.
NETWORK_ALLOWED = {"socket-inet", "socket-inet6", "socket-netlink", "socket-udplite", "socket-netlink-route"}
# Where the kernel itself answers EPERM to an unprivileged caller (a capability check comes
# before the argument checks), the probe cannot tell the filter from the kernel.
KERNEL_REFUSES_TOO = {"pivot_root", "move_mount", "fsopen", "reboot", "swapon", "acct",
                      "mknod-chr", "mknod-chr-high", "mknodat-blk"}


class TestDefaultPolicy(NsboxTestCase):
    @classmethod
    def setUpClass(cls):
        # The probe goes in through a read-only bind of a directory of its own.
        cls.dir = tempfile.mkdtemp(prefix="nsbox-probe-")
        os.chmod(cls.dir, 0o755)
        shutil.copy(PROBE, os.path.join(cls.dir, "nsbox-probe"))
        os.chmod(os.path.join(cls.dir, "nsbox-probe"), 0o755)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def probe(self, *opts):
        p, r = nsbox_json(*opts, "-v", f"{self.dir}:/mnt", "--", "/mnt/nsbox-probe")
        self.assertEqual(r["status"], "exited", r)
        return {name: int(e) for name, e in (l.split() for l in r["stdout"].splitlines())}, p

    def test_probe_knows_every_case(self):
        got, _ = self.probe()
        self.assertEqual(set(got), REFUSED | ENOSYS_ANSWERS | ALLOWED)

    def test_refused_with_the_policy_errno(self):
        got, _ = self.probe()
        for name in sorted(REFUSED):
            self.assertEqual(got[name], errno.EPERM, f"{name}: {os.strerror(got[name])}")
        for name in sorted(ENOSYS_ANSWERS):
            self.assertEqual(got[name], errno.ENOSYS, name)
        for name in sorted(ALLOWED):
            self.assertNotIn(got[name], (errno.EPERM, errno.ENOSYS), name)

    def test_without_the_filter_the_answers_differ(self):
        # The negative control: the same calls, --no-seccomp, must not give the policy's errno,
        # so the answers above come from the filter, not from the arguments.
        got, p = self.probe("--no-seccomp")
        self.assertIn("--no-seccomp", p.stderr)
        for name in sorted(REFUSED - KERNEL_REFUSES_TOO):
            self.assertNotEqual(got[name], errno.EPERM, f"{name} is EPERM even unfiltered")
        self.assertNotEqual(got["clone3"], errno.ENOSYS)
        self.assertNotEqual(got["openat2"], errno.ENOSYS)
        self.assertEqual(got["inotify_init"], 0)
        self.assertEqual(got["inotify_init1"], errno.EINVAL)

    def test_network_policy_answers(self):
        # --network loopback: UDP-Lite and netlink route sockets too; other netlink families,
        # vsock and the rest stay refused.
        got, _ = self.probe("--network", "loopback")
        for name in sorted(NETWORK_ALLOWED):
            self.assertNotIn(got[name], (errno.EPERM, errno.ENOSYS), name)
        for name in sorted(REFUSED - NETWORK_ALLOWED):
            self.assertEqual(got[name], errno.EPERM, f"{name}: {os.strerror(got[name])}")

    def test_refusals_are_named_in_the_result(self):
        p, r = nsbox_json("-v", f"{self.dir}:/mnt", "--", "/mnt/nsbox-probe")
        refused = {e["syscall"]: e["count"] for e in r["seccomp_refused"]}
        # Plain refusals are reported, with how often they were tried...
        for name in ("mount", "umount2", "unshare", "setns", "ptrace", "bpf", "keyctl",
                     "open_by_handle_at", "personality", "socketpair"):
            self.assertIn(name, refused, r["seccomp_refused"])
        # inet, inet6, netlink (raw, route, audit), vsock, inet with high bits, udplite
        self.assertEqual(refused["socket"], 8)
        # device nodes and real-time scheduling are refused by omission, and so reported; set-ID
        # FIFOs by an exception, reported too
        self.assertEqual(refused["mknod"], 3)
        self.assertEqual(refused["mknodat"], 2)
        self.assertEqual(refused["sched_setscheduler"], 2)
        # The "... if" exceptions too (issue 30): namespace flags, RLIMIT_CORE, terminal
        # ioctls, set-ID modes; inotify with its ENOSYS.
        self.assertEqual(refused["clone"], 4)
        self.assertEqual(refused["setrlimit"], 1)
        self.assertEqual(refused["prlimit64"], 1)
        self.assertEqual(refused["ioctl"], 5)  # TIOCSTI twice, TIOCLINUX, TIOCSETD twice
        for name, n in (("chmod", 3), ("fchmod", 2), ("fchmodat", 2), ("fchmodat2", 1),
                        ("creat", 2), ("mkdir", 1), ("mkdirat", 1), ("open", 3),
                        ("openat", 3), ("inotify_init", 1), ("inotify_init1", 1)):
            self.assertEqual(refused.get(name), n, name)
        # ...what was allowed is not, nor the ENOSYS of a newer call's fallback.
        for name in ("read", "write", "getpid", "prctl", "clone3", "openat2"):
            self.assertNotIn(name, refused)
        notes = "\n".join(r["notes"])
        for words in ("set-user-ID or set-group-ID bit was refused", "RLIMIT_CORE was refused",
                      "line discipline (ioctl TIOCSETD) was refused", "inotify was refused"):
            self.assertIn(words, notes)
        p, r = nsbox_json("--", "python3", "-c", "print('quiet')")
        self.assertEqual(r["seccomp_refused"], [])
        p, r = nsbox_json("--no-seccomp", "--", "true")
        self.assertIsNone(r["seccomp_refused"])

    def test_refusals_are_listed_on_stderr(self):
        p = nsbox("run", "--", "python3", "-c",
                  "import socket\ntry:\n socket.socket(socket.AF_INET)\nexcept OSError: pass")
        self.assertEqual(p.returncode, 0)
        self.assertIn("nsbox: warning: the seccomp policy refused: socket (1)", p.stderr)

    def test_posix_calls_python_tests_expect(self):
        # What CPython's own tests found refused (issue 16): FIFOs, posix_spawn with a
        # time-sharing scheduler, os.sync, niceness, lowering a limit, if_nameindex under
        # --network loopback. Device nodes and real-time scheduling stay refused.
        code = ("import os, resource, socket, stat, sys\n"
                "os.mkfifo('/tmp/f'); print(stat.S_ISFIFO(os.stat('/tmp/f').st_mode))\n"
                "pid = os.posix_spawn(sys.executable, [sys.executable, '-c', 'pass'], os.environ,"
                " scheduler=(os.SCHED_OTHER, os.sched_param(0)))\n"
                "print(os.waitpid(pid, 0)[1])\n"
                "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0)); os.sync(); os.nice(1)\n"
                "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)); print('ok')\n"
                "for f in (lambda: os.mknod('/tmp/d', stat.S_IFCHR | 0o600, os.makedev(1, 3)),\n"
                "          lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))):\n"
                "    try: f(); print('allowed')\n"
                "    except PermissionError: print('refused')\n"
                "try: print(len(socket.if_nameindex()))\n"
                "except OSError as e: print(e.errno)\n")
        p, r = nsbox_json("--", "python3", "-c", code)
        self.assertEqual(r["stdout"].split(), ["True", "0", "ok", "refused", "refused",
                                               str(errno.EPERM)], r)
        p, r = nsbox_json("--network", "loopback", "--", "python3", "-c", code)
        self.assertEqual(r["stdout"].split()[-1], "1", r)  # lo

    def test_cpython_workloads_run(self):
        p, r = nsbox_json("--code", os.path.join(HERE, "workloads", "cpython.py"),
                          "--timeout", "60", "--pids-limit", "64")
        lines = r["stdout"].splitlines()
        self.assertEqual([l for l in lines if not l.startswith("ok ")], [], r["stderr"])
        self.assertEqual(len(lines), 15, r)


class TestPolicyFiles(NsboxTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="nsbox-policy-")
        os.chmod(self.tmp.name, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        return path

    def test_check_default(self):
        # The programs as a run loads them: one where the kernel reports refusals
        # (seccomp_refused is a list), else two (policy/README.md, "One program").
        p = nsbox("policy", "check", os.path.join(HERE, "..", "..", "policy", "default.policy"))
        self.assertEqual(p.returncode, 0, p.stderr)
        # As a run loads it: one program where the kernel reports refusals (a run's
        # seccomp_refused is then a list), two where it does not; far fewer instructions than
        # the three filters had.
        _, r = nsbox_json("--", "true")
        count = "1 program" if r["seccomp_refused"] is not None else "2 programs"
        m = re.search(r": (\d+) rules, " + count + r", (\d+) BPF instructions$", p.stdout.strip())
        self.assertTrue(m, p.stdout)
        self.assertGreater(int(m.group(1)), 300, p.stdout)
        self.assertLess(int(m.group(2)), 400, p.stdout)

    def test_a_policy_file_too_large_to_join_still_runs(self):
        # nsbox's groups, and an exception on every other call they allow outright, in the
        # order of their numbers: ~460 runs of numbers, more than the dispatch program's 8-bit
        # jumps reach. The policy compiles with the unknown filter stacked on its own, and runs
        # (c12abb3 refused it: "building the filter for unknown system calls failed").
        libseccomp = ctypes.CDLL(ctypes.util.find_library("seccomp"))
        groups = ("basic-io", "filesystem", "ipc", "memory", "process", "signals", "sockets",
                  "time")
        names = {}
        for f in [f"groups/{g}.group" for g in groups] + ["refusals.rules"]:
            with open(os.path.join(HERE, "..", "..", "policy", f)) as fh:
                for line in fh:
                    rule = line.split("#")[0].strip()
                    if rule:
                        name = rule.split(":")[0].strip()
                        names[name] = names.get(name, []) + [rule]
        bare = sorted((libseccomp.seccomp_syscall_resolve_name(n.encode()), n)
                      for n, rules in names.items() if rules == [n] and n != "seccomp")
        text = "".join(f"@include {f}\n" for f in [f"groups/{g}.group" for g in groups]
                       + ["refusals.rules"])
        text += "socket: arg0 == AF_UNIX\nsocketpair: arg0 == AF_UNIX\n"
        text += "".join(f"{n}: return EPERM if arg5 == 0x5a5a5a5a\n" for _, n in bare[::2])
        path = self.write("runs.policy", text)
        p = nsbox("policy", "check", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"[23] programs")
        # The joined refusals still hold: the exception, and the memfd program after them.
        code = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "libc.syscall.restype = ctypes.c_long\n"
                f"r = libc.syscall({bare[0][0]}, 0, 0, 0, 0, 0, 0x5a5a5a5a)\n"
                "print(r, ctypes.get_errno())\n"
                "try:\n os.memfd_create('x', os.MFD_HUGETLB | 8)\nexcept OSError as e: print(e.errno)\n")
        p, r = nsbox_json("--seccomp", path, "--", "python3", "-c", code)
        self.assertEqual(p.returncode, 0, r)
        self.assertEqual(r["stdout"].split(), ["-1", str(errno.EPERM), str(errno.EACCES)], r)

    def test_dump_default(self):
        p = nsbox("policy", "dump")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("filter 1 of 3", p.stdout)
        self.assertIn('syscall "read"', p.stdout)

    def test_errors_carry_file_line_column(self):
        path = self.write("bad.policy", "read\nsocket: arg0 == AF_UNIX && arg0 == AF_INET\n")
        p = nsbox("policy", "check", path)
        self.assertOneLineError(p, contains=f"{path}:2:28: arg0 is compared twice")
        p = nsbox("run", "--seccomp", path, "--", "true")
        self.assertOneLineError(p, contains=f"{path}:2:28:")

    def test_conflicting_rules_are_refused(self):
        path = self.write("c.policy", "socket\nsocket: arg0 == AF_UNIX\n")
        p = nsbox("policy", "check", path)
        self.assertOneLineError(p, contains="conflicts with the rule at")

    def test_kill_with_errno_exceptions_is_refused(self):
        # Joined with the allow program, an exception would win over the kill: refused, with
        # both lines named. 'kill if' exceptions are fine.
        path = self.write("k.policy", "read\nopenat: kill\nopenat: return EPERM if arg2 == 1\n")
        p = nsbox("policy", "check", path)
        self.assertOneLineError(p, contains=f"{path}:3: 'openat' is killed by the rule at "
                                            f"{path}:2")
        p = nsbox("run", "--seccomp", path, "--", "true")
        self.assertOneLineError(p, contains=f"{path}:3:")
        path = self.write("k2.policy", "read\nopenat: kill\nopenat: kill if arg2 == 1\n")
        p = nsbox("policy", "check", path)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_user_policy_with_builtin_groups_and_unknown_names(self):
        # A user's policy may include nsbox's groups; an unknown name is a warning there.
        text = "".join(f"@include groups/{g}.group\n" for g in
                       ("basic-io", "filesystem", "memory", "process", "signals", "time"))
        path = self.write("mine.policy", text + "frobnicate   # not a system call\n")
        p = nsbox("policy", "check", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("unknown system call 'frobnicate'", p.stderr)
        # No socket rule: socket() fails with EPERM, and Python still runs.
        p, r = nsbox_json("--seccomp", path, "--", "python3", "-c",
                          "import socket\ntry:\n socket.socketpair()\nexcept OSError as e: print(e.errno)")
        self.assertEqual(r["stdout"], f"{errno.EPERM}\n", r)
        self.assertIn("frobnicate", p.stderr)

    def test_refusals_catch_high_bits_and_weak_rules_are_reported(self):
        # A refusal's "==" compares the low 32 bits: socket(AF_INET | 1 << 32) is refused too.
        text = "".join(f"@include groups/{g}.group\n" for g in
                       ("basic-io", "filesystem", "memory", "process", "signals", "time"))
        path = self.write("hb.policy", text + "socket\nsocket: return EPERM if arg0 == AF_INET\n")
        code = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "libc.syscall.restype = ctypes.c_long\n"
                "for fam in (2, 2 | 1 << 32, 1):\n"
                "    fd = libc.syscall(41, ctypes.c_ulong(fam), 1, 0)\n"
                "    print(fd >= 0, ctypes.get_errno() if fd < 0 else 0)\n")
        p, r = nsbox_json("--seccomp", path, "--", "python3", "-c", code)
        self.assertEqual(r["stdout"].split("\n")[:3], ["False 1", "False 1", "True 0"], r)
        # A user's exceptions are reported as nsbox's own are (the joined program, issue 30).
        self.assertEqual({e["syscall"]: e["count"] for e in r["seccomp_refused"]}.get("socket"),
                         2, r["seccomp_refused"])
        # Rules that high bits could get past are reported.
        path = self.write("weak.policy", "read\nwrite: arg0 != 1\n")
        p = nsbox("policy", "check", path)
        self.assertEqual(p.returncode, 0)
        self.assertIn(f"{path}:2: 'write': an allow rule with !=", p.stderr)

    def test_conflicts_and_foreign_names(self):
        path = self.write("c2.policy", "openat: return EPERM if arg2 == 1\n"
                                       "openat: kill if arg2 == 1 && arg3 == 2\n")
        self.assertOneLineError(nsbox("policy", "check", path), contains="refuses differently")
        path = self.write("c3.policy", "read\nsocketcall\n")
        p = nsbox("policy", "check", path)
        self.assertIn("not this architecture's system call 'socketcall'", p.stderr)

    def test_include_amplification_is_bounded(self):
        # The same 1 MB file included 8 times: the total is bounded (4 MiB), not each file.
        self.write("big.inc", ("#" + "x" * 99 + "\n") * 10000)
        path = self.write("amp.policy", "@include big.inc\n" * 8)
        p = nsbox("policy", "check", path, timeout=60)
        self.assertOneLineError(p, contains="cannot include 'big.inc': File too large")
        # And so is the number of rules.
        path = self.write("many.policy", "read\n" * 10001)
        self.assertOneLineError(nsbox("policy", "check", path), contains="more than 10000 rules")

    def test_a_policy_too_small_for_nsbox_says_so(self):
        path = self.write("tiny.policy", "read\nwrite\nexit_group\n")
        p = nsbox("run", "--seccomp", path, "--", "true")
        self.assertIn("the seccomp policy refused:", p.stderr)
        if os.environ.get("NSBOX_SANITIZERS") == "1":
            # nsbox's own pre-execve code, built with ASan, needs more (sigaltstack, ...) and
            # dies of the refusal before it can say why: it must still not run the program.
            self.assertNotEqual(p.returncode, 0)
            return
        self.assertEqual(p.returncode, 125)
        self.assertIn("the seccomp policy must allow what nsbox does before execve", p.stderr)

    def test_action_typo(self):
        path = self.write("typo.policy", "kexec_load: kil\n")
        self.assertOneLineError(nsbox("policy", "check", path), contains="unknown action 'kil'")

    def test_local_include_and_one_level_only(self):
        self.write("groups/mine.group", "# mine\nread\n")
        path = self.write("top.policy", "@include groups/mine.group\n")
        self.assertEqual(nsbox("policy", "check", path).returncode, 0)
        self.write("groups/nest.group", "@include groups/mine.group\n")
        path = self.write("nest.policy", "@include groups/nest.group\n")
        self.assertOneLineError(nsbox("policy", "check", path), contains="one level only")

    def test_unreadable_policy(self):
        p = nsbox("run", "--seccomp", "/nonexistent.policy", "--", "true")
        self.assertOneLineError(p, contains="cannot read the policy")
        p = nsbox("run", "--seccomp", "x", "--no-seccomp", "--", "true")
        self.assertOneLineError(p, contains="exclude each other")


if __name__ == "__main__":
    unittest.main()
