# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox under a container runtime's conditions (issue 20), reproduced without one: an outer
seccomp filter like the runtimes' default profiles (outer_seccomp.py). The VM suite
tests/vm/test_container.py runs the same under Podman itself."""
import json
import os
import subprocess
import sys
import unittest

from nsboxtest import HERE, NSBOX, NsboxTestCase, nsbox_json

OUTER = os.path.join(HERE, "outer_seccomp.py")
PROFILE = os.path.join(HERE, "..", "..", "examples", "seccomp-nsbox.json")


def under(profile, *args, timeout=60):
    env = None
    if os.environ.get("NSBOX_SANITIZERS"):
        # LeakSanitizer stops the world with ptrace(2), which a container's profile refuses:
        # leaks are checked by the other runs of the sanitizer pass.
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") +
                   ":detect_leaks=0")
    return subprocess.run([sys.executable, OUTER, profile, "--", NSBOX, *args],
                          capture_output=True, text=True, timeout=timeout, input="", env=env)


class TestOuterProfile(NsboxTestCase):
    def test_the_control_refuses_sethostname(self):
        # The launcher's filter does refuse what it says (else the tests below prove nothing).
        p = subprocess.run([sys.executable, OUTER, "podman-default", "--", sys.executable, "-c",
                            "import socket, sys\n"
                            "try: socket.sethostname('x')\n"
                            "except PermissionError: sys.exit(3)\n"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 3, p.stderr)

    def test_refused_sethostname_is_a_warning_not_a_failure(self):
        p = under("podman-default", "run", "--json", "--", "/bin/sh", "-c",
                  "echo INSIDE-OK; cat /proc/sys/kernel/hostname")
        result = json.loads(p.stdout)
        self.assertEqual(result["status"], "exited", p.stdout + p.stderr)
        self.assertEqual(result["exit_code"], 0)
        self.assertTrue(result["stdout"].startswith("INSIDE-OK\n"))
        # The sandbox keeps the outer name, and the warnings say so, in words.
        self.assertNotEqual(result["stdout"], "INSIDE-OK\nnsbox\n")
        w = [x for x in result["warnings"] if "sethostname" in x]
        self.assertEqual(len(w), 1, result["warnings"])
        self.assertIn("optional setup step sethostname skipped: Operation not permitted", w[0])
        self.assertIn("nsbox: warning: optional setup step sethostname skipped", p.stderr)

    def test_without_the_outer_filter_the_hostname_is_set(self):
        _, result = nsbox_json("--", "/bin/cat", "/proc/sys/kernel/hostname")
        self.assertEqual(result["stdout"], "nsbox\n", result)
        self.assertFalse([x for x in result["warnings"] if "sethostname" in x])

    def test_refused_namespaces_fail_with_one_line_naming_the_fix(self):
        p = under("docker-default", "run", "--", "/bin/true")
        self.assertOneLineError(p, contains="creating the sandbox's namespaces failed: "
                                            "Operation not permitted (refused by the seccomp "
                                            "filter nsbox runs under")
        self.assertIn("examples/seccomp-nsbox.json", p.stderr)
        self.assertIn("nsbox doctor", p.stderr)

    def test_doctor_names_the_seccomp_setting(self):
        p = under("docker-default", "doctor")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("FAIL  user namespaces: unshare(CLONE_NEWUSER) failed: Operation not "
                      "permitted", p.stdout)
        self.assertIn("a seccomp filter (the container runtime's default profile) refuses it",
                      p.stdout)
        for fix in ("docker run --security-opt seccomp=seccomp-nsbox.json",
                    "podman run --security-opt seccomp=seccomp-nsbox.json",
                    "seccompProfile: {type: Localhost"):
            self.assertIn(fix, p.stdout)

    def test_doctor_without_the_outer_filter_names_no_container_fix(self):
        p = subprocess.run([NSBOX, "doctor"], capture_output=True, text=True, timeout=60)
        self.assertNotIn("seccomp-nsbox.json", p.stdout)
        self.assertIn("ok    /proc: fully visible", p.stdout)


class TestShippedProfile(NsboxTestCase):
    """examples/seccomp-nsbox.json, applied as a runtime applies it: nsbox works under it."""

    def test_python_runs_under_it_without_warnings_of_skipped_steps(self):
        p = under(PROFILE, "run", "--json", "--", "python3", "-c",
                  "import socket, subprocess; print(socket.gethostname()); "
                  "print(subprocess.run(['true']).returncode)")
        result = json.loads(p.stdout)
        self.assertEqual(result["status"], "exited", p.stdout + p.stderr)
        self.assertEqual(result["stdout"], "nsbox\n0\n")
        self.assertFalse([w for w in result["warnings"] if "skipped" in w], result["warnings"])

    def test_landlock_under_it(self):
        # The profile allows Landlock; without its calls the run goes on, and a note says so.
        p = under(PROFILE, "run", "--json", "--", "/bin/true")
        result = json.loads(p.stdout)
        landlock = result["landlock"]
        if landlock is None:
            self.skip_or_fail("this kernel has no Landlock nsbox uses: " + str(result["notes"]))
        self.assertIn("fs", landlock["restricts"])
        p = under(PROFILE + ":-landlock_create_ruleset", "run", "--json", "--", "/bin/true")
        result = json.loads(p.stdout)
        self.assertEqual((result["status"], result["landlock"]), ("exited", None), p.stderr)
        self.assertTrue([n for n in result["notes"] if "Landlock was not applied: its system "
                         "calls were refused" in n], result["notes"])
        # A profile without the new mount API: POSIX message queues are refused, and said so.
        p = under(PROFILE + ":-fsopen", "run", "--json", "--", "/bin/true")
        result = json.loads(p.stdout)
        self.assertEqual(result["status"], "exited", p.stdout + p.stderr)
        self.assertTrue([w for w in result["warnings"] if "POSIX message queues" in w],
                        result["warnings"])

    def test_doctor_passes_under_it(self):
        p = under(PROFILE, "doctor")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("FAIL", p.stdout)

    def test_the_control_without_mount_fails(self):
        # The profile is applied: without mount(2) in it, the sandbox cannot be built.
        p = under(PROFILE + ":-mount", "run", "--", "/bin/true")
        self.assertOneLineError(p, contains="Operation not permitted")

    def test_the_control_without_sethostname_warns(self):
        p = under(PROFILE + ":-sethostname", "run", "--json", "--", "/bin/true")
        result = json.loads(p.stdout)
        self.assertEqual(result["status"], "exited", p.stdout + p.stderr)
        self.assertTrue([w for w in result["warnings"] if "sethostname skipped" in w])


class TestMaskedProc(NsboxTestCase):
    """A container's masked /proc: a file of it mounted over, as runtimes do to /proc/kcore,
    made in a mount namespace of our own (unshare(1); when not root, in a user namespace that
    maps our own id, keeping the capabilities to mount across exec as ambient ones)."""

    # The first of the files runtimes mask that this kernel has.
    PATH = next((p for p in ("/proc/kcore", "/proc/keys", "/proc/timer_list") if
                 os.path.exists(p)), "/proc/version")

    def masked(self, *args):
        unshare = ["unshare", "--mount"] + (["--user", "--map-current-user", "--keep-caps"]
                                          if os.geteuid() else [])
        return subprocess.run(unshare + ["sh", "-c", 'mount --bind /dev/null "$0" && exec "$@"',
                                         self.PATH, NSBOX, *args],
                              capture_output=True, text=True, timeout=60, input="")

    def test_run_fails_with_one_line_naming_doctor(self):
        p = self.masked("run", "--", "/bin/true")
        if "unshare:" in p.stderr or "mount:" in p.stderr:
            self.skip_or_fail(f"cannot make the masked /proc here: {p.stderr.strip()}")
        self.assertOneLineError(p, contains="sandbox setup failed at mount /proc: Operation not "
                                            "permitted (a fully visible /proc is needed; a "
                                            "container's masks parts of it")
        self.assertIn("'nsbox doctor' names the container setting", p.stderr)

    def test_doctor_names_the_masked_paths_and_the_setting(self):
        p = self.masked("doctor")
        if "unshare:" in p.stderr or "mount:" in p.stderr:
            self.skip_or_fail(f"cannot make the masked /proc here: {p.stderr.strip()}")
        self.assertIn(f"FAIL  /proc: 1 mounts cover parts of it ({self.PATH})", p.stdout)
        for fix in ("docker run --security-opt systempaths=unconfined",
                    "podman run --security-opt unmask=/proc/*",
                    "procMount: Unmasked, with hostUsers: false"):
            self.assertIn(fix, p.stdout)

    def test_the_control_runs_without_the_mask(self):
        p = subprocess.run([NSBOX, "run", "--", "/bin/true"], capture_output=True, text=True,
                           timeout=60, input="")
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    unittest.main()
