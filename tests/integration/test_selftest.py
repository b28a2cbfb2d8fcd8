# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox selftest: every attack blocked in the sandbox, every ablation lets its attack through,
and every attack program works without nsbox (the negative control); and the opt-outs of
`nsbox run` that --ablate uses, each one named on stderr."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from nsboxtest import NSBOX, NsboxTestCase, nsbox, nsbox_json

ROOT = os.geteuid() == 0

# Attacks no opt-out can let through, and why the self-test says so.
NO_OPT_OUT = {"proc-writes", "setuid", "hostname"}
# Attacks that only root can set up, or whose control only root can pass.
ROOT_ONLY = {"setuid"}
ROOT_ONLY_CONTROL = {"setuid", "proc-writes", "hostname"}

ALL = ["read-host-file", "network-egress", "memory", "fork-bomb", "persistence",
       "env-credentials", "inherited-fd", "signal-outside", "proc-writes", "nested-userns",
       "setuid", "tiocsti", "abstract-socket", "sysv-ipc", "hostname", "fill-tmp",
       "output-flood", "runaway", "leftover-process", "tmpfs-persistence", "tty-ldisc",
       "inotify-outside", "landlock-host-dir", "landlock-tmpfs-exec", "landlock-tcp"]


def leftovers():
    """What a self-test could leave: its directories in /var/tmp, System V segments, processes."""
    dirs = sorted(e for e in os.listdir("/var/tmp") if e.startswith("nsbox-selftest-"))
    with open("/proc/sysvipc/shm") as f:
        segments = sorted(l.split()[1] for l in f.readlines()[1:])
    procs = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"nsbox-selftest-leftover" in f.read():
                    procs.append(pid)
        except OSError:
            pass
    return dirs, segments, procs


def owner_pid(name):
    try:
        with open(os.path.join("/var/tmp", name, "owner")) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def legacy_tiocsti():
    try:
        with open("/proc/sys/dev/tty/legacy_tiocsti") as f:
            return f.read().strip() != "0"
    except OSError:
        return True


class TestSelftest(NsboxTestCase):
    report = None

    @classmethod
    def setUpClass(cls):
        # One full run (about 30 s) judged by the tests below.
        cls.before = leftovers()
        cls.proc = subprocess.run([NSBOX, "selftest", "--ablate", "--control", "--json"],
                                  capture_output=True, text=True, timeout=600)
        cls.after = leftovers()
        cls.report = json.loads(cls.proc.stdout)

    def attacks(self):
        return {a["name"]: a for a in self.report["attacks"]}

    def test_every_attack_of_the_issue_is_there(self):
        self.assertEqual(sorted(self.attacks()), sorted(ALL))
        for a in self.report["attacks"]:
            self.assertTrue(a["tried"] and a["protection"], a)

    def test_every_attack_is_blocked(self):
        for name, a in self.attacks().items():
            with self.subTest(attack=name):
                want = "skipped" if name in ROOT_ONLY and not ROOT else "blocked"
                self.assertEqual(a["sandbox"]["verdict"], want, a["sandbox"]["detail"])

    def test_every_ablation_lets_its_attack_through(self):
        for name, a in self.attacks().items():
            with self.subTest(attack=name):
                if name in NO_OPT_OUT:
                    self.assertIsNone(a["opt_out"])
                    self.assertEqual(a["ablated"]["verdict"], "skipped")
                    self.assertIn("no opt-out", a["ablated"]["detail"])
                    continue
                if name == "tiocsti" and not legacy_tiocsti():
                    self.assertEqual(a["ablated"]["verdict"], "skipped")
                    continue
                self.assertEqual(a["ablated"]["verdict"], "succeeded", a["ablated"]["detail"])

    def test_every_attack_program_works_without_nsbox(self):
        for name, a in self.attacks().items():
            with self.subTest(attack=name):
                if (name in ROOT_ONLY_CONTROL and not ROOT) or (
                        name == "tiocsti" and not legacy_tiocsti()):
                    self.assertEqual(a["control"]["verdict"], "skipped")
                    continue
                self.assertEqual(a["control"]["verdict"], "succeeded", a["control"]["detail"])

    def test_overall_status(self):
        self.assertTrue(self.report["ok"])
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)

    def test_leaves_nothing_behind(self):
        # Only what this self-test could have made: other self-tests may run meanwhile.
        self.assertFalse(os.path.exists(self.report["temp_dir"]))
        for before, after in zip(self.before[1:], self.after[1:]):
            self.assertEqual(set(after) - set(before), set())

    def test_interrupted_selftest_cleans_up(self):
        before = leftovers()
        p = subprocess.Popen([NSBOX, "selftest", "--only", "runaway,sysv-ipc", "--ablate"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # inside the first trial (runaway takes 2 s)
        mine = [e for e in os.listdir("/var/tmp") if e.startswith("nsbox-selftest-")
                and owner_pid(e) == p.pid]
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        self.assertIn("interrupted by signal 2", err)
        self.assertEqual(len(mine), 1)
        self.assertFalse(os.path.exists(os.path.join("/var/tmp", mine[0])))
        # Only what a self-test could have made: others may run meanwhile.
        for was, now in zip(before[1:], leftovers()[1:]):
            self.assertEqual(set(now) - set(was), set())


class TestSelftestCommand(NsboxTestCase):
    def test_table_and_exit_status(self):
        p = subprocess.run([NSBOX, "selftest", "--only", "inherited-fd,env-credentials",
                            "--ablate"], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        lines = p.stdout.splitlines()
        self.assertRegex(lines[0], r"^ATTACK\s+SANDBOX\s+WITHOUT IT\s+STOPPED BY")
        self.assertRegex(p.stdout, r"(?m)^env-credentials\s+blocked\s+succeeded\s")
        self.assertRegex(p.stdout, r"(?m)^inherited-fd\s+blocked\s+succeeded\s")
        self.assertIn("without it (--keep-fds): succeeded", p.stdout)
        self.assertEqual(lines[-1], "OK")

    def test_an_attack_that_cannot_be_judged_fails_the_selftest(self):
        # A rootfs without python3: nothing is tested, so nothing may pass as blocked.
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            for sub in ("proc", "dev", "tmp", "work", "mnt"):
                os.mkdir(os.path.join(d, sub))
            p = subprocess.run([NSBOX, "selftest", "--json", "--rootfs", d, "--only", "memory"],
                               capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        a = json.loads(p.stdout)["attacks"][0]
        self.assertEqual(a["sandbox"]["verdict"], "error")
        self.assertIn("nsbox run failed", a["sandbox"]["detail"])

    def test_an_attack_that_never_starts_is_an_error(self):
        # A "python3" that is not Python (busybox, which knows no such applet): the attack never
        # says it started, so it is no "blocked".
        if not os.path.exists("/bin/busybox"):
            self.skipTest("no /bin/busybox (busybox-static) to stand in for python3")
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            for sub in ("proc", "dev", "tmp", "work", "mnt", "usr", "usr/bin"):
                os.mkdir(os.path.join(d, sub))
                os.chmod(os.path.join(d, sub), 0o755)
            shutil.copy("/bin/busybox", os.path.join(d, "usr", "bin", "python3"))
            p = subprocess.run([NSBOX, "selftest", "--json", "--rootfs", d, "--only",
                                "memory,env-credentials"], capture_output=True, text=True,
                               timeout=120)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        for a in json.loads(p.stdout)["attacks"]:
            self.assertEqual(a["sandbox"]["verdict"], "error", a)
            self.assertIn("the attack did not start", a["sandbox"]["detail"])

    def test_a_killed_selftest_is_cleaned_up_by_the_next(self):
        p = subprocess.Popen([NSBOX, "selftest", "--json", "--only", "runaway", "--ablate"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1.0)
        dirs = [e for e in os.listdir("/var/tmp") if e.startswith("nsbox-selftest-")]
        mine = [e for e in dirs if owner_pid(e) == p.pid]
        p.kill()
        p.communicate(timeout=60)
        self.assertEqual(len(mine), 1, dirs)
        self.assertTrue(os.path.exists(os.path.join("/var/tmp", mine[0])))
        q = subprocess.run([NSBOX, "selftest", "--only", "env-credentials"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(q.returncode, 0, q.stdout + q.stderr)
        self.assertFalse(os.path.exists(os.path.join("/var/tmp", mine[0])))

    def test_a_failed_fork_leaks_no_descriptors(self):
        # Every fork of the self-test fails (strace injects EAGAIN into clone): each trial is an
        # error, and the output pipes it made for the run are closed again, so that the second
        # trial gets the same descriptors as the first. Two attacks whose setups keep nothing open.
        strace = shutil.which("strace")
        if not strace:
            self.skip_or_fail("no strace to make fork fail (apt-get install strace)")
        # (LeakSanitizer cannot work under ptrace: in the sanitizer build it stays off here.)
        env = dict(os.environ)
        if env.get("ASAN_OPTIONS"):
            env["ASAN_OPTIONS"] += ":detect_leaks=0"
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "strace.log")
            p = subprocess.run([strace, "-qq", "-o", log, "-e", "trace=pipe2,clone,clone3",
                                "-e", "inject=clone,clone3:error=EAGAIN", NSBOX, "selftest",
                                "--json", "--only", "memory,env-credentials"],
                               capture_output=True, text=True, timeout=120, env=env)
            with open(log) as f:
                pipes = re.findall(r"^pipe2\(\[(\d+), (\d+)\]", f.read(), re.M)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        for a in json.loads(p.stdout)["attacks"]:
            self.assertEqual(a["sandbox"]["verdict"], "error", a)
            self.assertIn("cannot start the trial", a["sandbox"]["detail"])
        self.assertEqual(len(pipes), 4, pipes)
        self.assertEqual(pipes[2:], pipes[:2], "the first trial's pipes were left open")

    def test_bad_arguments(self):
        for args, what in [(["--only", "no-such-attack"], "no attack named 'no-such-attack'"),
                           (["--bogus"], "unknown option '--bogus'"),
                           (["--only"], "needs a value"), (["extra"], "unexpected argument")]:
            with self.subTest(args=args):
                p = nsbox("selftest", *args)
                self.assertEqual(p.returncode, 125)
                self.assertEqual(p.stdout, "")
                self.assertRegex(p.stderr, r"^nsbox: .*\n$")
                self.assertIn(what, p.stderr)


class TestOptOuts(NsboxTestCase):
    """The opt-outs --ablate uses: each does what it says and says so on stderr."""

    def test_each_opt_out_is_named_on_stderr_and_in_the_result(self):
        for args, warning in [(["--network", "host"], "--network host: the payload shares the host's network"),
                              (["--pid", "host"], "--pid host:"), (["--ipc", "host"], "--ipc host:"),
                              (["--env-inherit"], "--env-inherit:"), (["--keep-fds"], "--keep-fds:"),
                              (["--no-seccomp"], "--no-seccomp:"),
                              (["--landlock", "off"], "--landlock off:")]:
            with self.subTest(args=args):
                p, r = nsbox_json(*args, "--", "true")
                self.assertEqual(r["status"], "exited", p.stderr)
                self.assertIn("nsbox: warning: " + warning, p.stderr)
                self.assertTrue(any(warning in w for w in r["warnings"]), r["warnings"])

    def test_opt_outs_must_be_spelled_in_full(self):
        for args in (["--keep"], ["--no-sec"], ["--env-inh"], ["--ip=host"], ["--landl", "off"]):
            with self.subTest(args=args):
                p = nsbox("run", *args, "--", "true")
                self.assertOneLineError(p, contains="an opt-out must be spelled in full")
        # Every prefix of --network is also one of --network-max-bytes and
        # --network-max-connections: getopt refuses it as an unknown (ambiguous) option first.
        for args in (["--net", "host"], ["--net=host"]):
            with self.subTest(args=args):
                p = nsbox("run", *args, "--", "true")
                self.assertOneLineError(p, contains="unknown option '--net")
        p, r = nsbox_json("--network=host", "--", "true")
        self.assertEqual(r["status"], "exited", p.stderr)

    def test_pid_host_payload_dies_with_init(self):
        # Without a pid namespace the payload can kill its init; it must not live on unwatched.
        token = "nsbox-pid-host-" + os.urandom(6).hex()
        code = ("import os, sys, time\nos.kill(os.getppid(), 9)\ntime.sleep(3)\n"
                "print('still here')\n")
        p, r = nsbox_json("--pid", "host", "--", "python3", "-c", code, token)
        self.assertNotIn("still here", r["stdout"])
        time.sleep(0.5)
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    self.assertNotIn(token.encode(), f.read())
            except OSError:
                pass

    def test_pid_host_proc_is_nosuid_nodev_noexec(self):
        code = ("print([l.split()[5] for l in open('/proc/self/mountinfo') "
                "if l.split()[4] == '/proc'][0])")
        p, r = nsbox_json("--pid", "host", "--", "python3", "-c", code)
        for flag in ("nosuid", "nodev", "noexec"):
            self.assertIn(flag, r["stdout"], p.stderr)

    def test_network_policy_allows_tcp_and_udp_only(self):
        code = ("import socket\n"
                "for fam, typ, proto in [(2, 1, 0), (2, 1, 6), (10, 2, 17), (2, 1 | 0o4000, 0),"
                " (2, 1, 262), (2, 5, 132), (2, 6, 0), (2, 5, 0), (16, 3, 0), (17, 3, 0)]:\n"
                "    try:\n        socket.socket(fam, typ, proto).close(); print(fam, proto, 'ok')\n"
                "    except OSError as e:\n        print(fam, proto, e.errno)\n")
        p, r = nsbox_json("--network", "host", "--", "python3", "-c", code)
        lines = r["stdout"].splitlines()
        self.assertEqual(lines[:4], ["2 0 ok", "2 6 ok", "10 17 ok", "2 0 ok"], p.stderr)
        # MPTCP, SCTP, DCCP and SEQPACKET of protocol 0, packet: EPERM from the filter;
        # netlink's NETLINK_ROUTE (protocol 0) is allowed, for reading interfaces (issue 16)
        self.assertEqual(lines[4:], ["2 262 1", "2 132 1", "2 0 1", "2 0 1", "16 0 ok", "17 0 1"])

    def test_defaults_stay_private(self):
        # The same probe as the opt-outs, without them: nothing of the host is shared.
        code = ("import os, socket\n"
                "print('pid1', open('/proc/1/cmdline').read()[:20] != '')\n"
                "try:\n socket.socket(socket.AF_INET); print('inet yes')\n"
                "except OSError: print('inet no')\n"
                "print('ns', os.readlink('/proc/self/ns/net'), os.readlink('/proc/self/ns/ipc'),"
                " os.readlink('/proc/self/ns/pid'))\n")
        p, r = nsbox_json("--", "python3", "-c", code)
        self.assertIn("inet no", r["stdout"])
        host = [os.readlink(f"/proc/self/ns/{n}") for n in ("net", "ipc", "pid")]
        for ns in host:
            self.assertNotIn(ns, r["stdout"])
        p, r = nsbox_json("--network", "host", "--ipc", "host", "--pid", "host", "--",
                          "python3", "-c", code)
        self.assertIn("inet yes", r["stdout"])
        for ns in host:
            self.assertIn(ns, r["stdout"])

    def test_network_host_keeps_a_given_policy(self):
        # --network host switches only the built-in policy: a policy given is used as it is.
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "policy", "default.policy")) as src, \
                tempfile.NamedTemporaryFile("w", suffix=".policy") as f:
            f.write(src.read())  # its includes resolve to nsbox's built-in files
            f.flush()
            code = ("import socket\ntry:\n socket.socket(socket.AF_INET6); print('inet yes')\n"
                    "except OSError: print('inet no')\n")
            p, r = nsbox_json("--network", "host", "--seccomp", f.name, "--", "python3", "-c",
                              code)
            self.assertIn("inet no", r["stdout"], p.stderr)
            self.assertNotIn("network.policy", p.stderr)
            p, r = nsbox_json("--network", "host", "--", "python3", "-c", code)
            self.assertIn("inet yes", r["stdout"], p.stderr)
            self.assertIn("network.policy", p.stderr)

    def test_keep_fds_passes_exactly_the_inherited_descriptors(self):
        with tempfile.TemporaryFile() as f:
            fd = 40  # above anything the listing itself opens
            os.dup2(f.fileno(), fd)
            try:
                code = "import os; print(sorted(int(x) for x in os.listdir('/proc/self/fd')))"
                p, r = nsbox_json("--keep-fds", "--", "python3", "-c", code, pass_fds=(fd,))
                fds = json.loads(r["stdout"])
                # 0-2, the listing's own descriptor, and what was passed: nothing of nsbox's.
                self.assertIn(fd, fds)
                self.assertEqual(len(set(fds) - {0, 1, 2, fd}), 1, fds)
                p, r = nsbox_json("--", "python3", "-c", code, pass_fds=(fd,))
                self.assertNotIn(fd, json.loads(r["stdout"]))
            finally:
                os.close(fd)

if __name__ == "__main__":
    unittest.main()
