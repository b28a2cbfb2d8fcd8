# SPDX-License-Identifier: LGPL-2.1-or-later
"""The lesson's lab, run as `nsbox selftest --only NAME --ablate --control --json`: the attacks
are the self-test's (src/cli/selftest-attacks.py), so there is one copy of each. Every one is
blocked in the sandbox, succeeds with only its protection removed (--ablate) and succeeds
without nsbox (--control, the negative control), so none of these tests can pass by accident.
What the lab checks beyond the verdicts (how memory was refused, how far the fork bomb got) it
checks on the self-test's details."""
import json
import re
import subprocess
import unittest

from nsboxtest import NSBOX, NsboxTestCase, nsbox_json


def selftest(*names):
    """nsbox selftest --only NAMES --ablate --control --json: (CompletedProcess, report)."""
    p = subprocess.run([NSBOX, "selftest", "--only", ",".join(names), "--ablate", "--control",
                        "--json"], capture_output=True, text=True, timeout=300)
    try:
        return p, json.loads(p.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"nsbox selftest printed no JSON: {p.stdout!r} {p.stderr!r}")


class TestLab(NsboxTestCase):
    def attacks(self, *names):
        """Run the named attacks; each must be blocked, and succeed ablated and bare."""
        p, report = selftest(*names)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual([a["name"] for a in report["attacks"]], list(names))
        for a in report["attacks"]:
            for mode, want in (("sandbox", "blocked"), ("ablated", "succeeded"),
                               ("control", "succeeded")):
                self.assertEqual(a[mode]["verdict"], want, (mode, a))
        return report, report["attacks"]

    def test_read_host_file(self):
        # A canary file of the host, readable by every uid: only the sandbox's own root
        # filesystem keeps it out (-v DIR:/mnt:ro lets it in).
        _, (a,) = self.attacks("read-host-file")
        self.assertIn("blocked: open /var/tmp/", a["sandbox"]["detail"])
        self.assertIn("SUCCEEDED read /mnt/secret: NSBOX-CANARY-", a["ablated"]["detail"])

        # The lab's own line: /etc/passwd inside is the rootfs's, not the host's.
        with open("/etc/passwd") as f:
            host_users = {l.split(":")[0] for l in f if l.strip()}
        p, r = nsbox_json("--", "python3", "-c", "print(open('/etc/passwd').read())")
        self.assertEqual(r["status"], "exited", p.stderr)
        inside_users = {l.split(":")[0] for l in r["stdout"].splitlines() if ":" in l}
        # root, nobody, and the line nsbox adds for a sandbox uid the rootfs does not name
        self.assertLessEqual(inside_users, {"root", "nobody", "sandbox"})
        self.assertTrue(host_users - inside_users, "host has more users than the rootfs")

    def test_phone_home(self):
        # A nonce to a TCP listener on the host's 127.0.0.1, judged by the listener.
        _, (a,) = self.attacks("network-egress")
        self.assertRegex(a["sandbox"]["detail"], r"blocked: connect 127\.0\.0\.1:\d+ -> ")
        self.assertIn("--network host", a["opt_out"])

    def test_exhaust_memory(self):
        # 512 MiB against --memory 256m: the cgroup's OOM killer, or RLIMIT_DATA refusing the
        # allocation where limits fall back to rlimits.
        report, (a,) = self.attacks("memory")
        if report["limits_enforced_by"] == "cgroup":
            self.assertTrue(a["sandbox"]["detail"].startswith("oom (signal 9, SIGKILL)"), a)
        else:
            self.assertIn("blocked: allocate 512 MiB -> MemoryError", a["sandbox"]["detail"])
        self.assertIn("SUCCEEDED allocated and touched 512 MiB", a["ablated"]["detail"])

    def test_fork_bomb(self):
        # 200 processes against --pids-limit 64: the fork that fails is within the limit. And
        # what a payload starts does not outlive it (leftover-process: a process that leaves
        # the session and the caller's output, found afterwards by a tag in its environment).
        _, (bomb, left) = self.attacks("fork-bomb", "leftover-process")
        m = re.search(r"blocked: fork #(\d+) -> ", bomb["sandbox"]["detail"])
        self.assertTrue(m, bomb)
        self.assertLessEqual(int(m.group(1)), 64, "the pids limit must stop the bomb")
        self.assertIn("SUCCEEDED forked 200 processes", bomb["ablated"]["detail"])
        self.assertIn("no process outlived the run", left["sandbox"]["detail"])
        self.assertIn("a process outlived the run", left["ablated"]["detail"])

    def test_persist(self):
        # /tmp and /work are tmpfs mounts that die with the run: a later run finds nothing an
        # earlier one left there; bound to a host directory, it finds both. And the code
        # directory (-v DIR:/work) is read-only: nothing written there reaches the host.
        _, (code, tmpfs) = self.attacks("persistence", "tmpfs-persistence")
        self.assertIn("blocked: open /tmp/nsbox-selftest-kept-0", tmpfs["sandbox"]["detail"])
        self.assertIn("SUCCEEDED found /tmp/nsbox-selftest-kept-0: left by an earlier run: "
                      "NSBOX-CANARY-", tmpfs["ablated"]["detail"])
        self.assertIn("Read-only file system", code["sandbox"]["detail"])

    def test_credentials(self):
        # A secret exported in nsbox's environment: not in the payload's environment, nor in
        # /proc/self or /proc/1's (the exact variables a run gets: test_run.py).
        _, (a,) = self.attacks("env-credentials")
        self.assertIn("SUCCEEDED environment: NSBOX_SELFTEST_TOKEN=NSBOX-CANARY-",
                      a["ablated"]["detail"])
        self.assertNotIn("NSBOX-CANARY", a["sandbox"]["detail"])

    def test_tty_ldisc_and_inotify(self):
        # Issue 24: a pty's line discipline (a discipline the kernel has, never one it would
        # load a module for) and inotify events caused by a host process writing /dev/null.
        _, (ldisc, watch) = self.attacks("tty-ldisc", "inotify-outside")
        self.assertIn("blocked: TIOCSETD", ldisc["sandbox"]["detail"])
        self.assertIn("Operation not permitted", ldisc["sandbox"]["detail"])
        self.assertIn("SUCCEEDED TIOCSETD accepted", ldisc["ablated"]["detail"])
        self.assertIn("blocked: inotify_init1 -> Function not implemented",
                      watch["sandbox"]["detail"])
        self.assertIn("SUCCEEDED inotify events on /dev/null", watch["ablated"]["detail"])
        self.assertEqual(watch["opt_out"], "--no-seccomp")


if __name__ == "__main__":
    unittest.main()
