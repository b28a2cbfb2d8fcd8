# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tiers of isolation (README, "Isolation tiers"): the result's "isolation" field, tier 2 where
/proc/sys is read-only (a container's default) and --isolation full refusing it, and a
read-only /proc/sys refusing a fresh /proc (a wall, not a tier).

A container's read-only /proc/sys is made here as the runtimes make it, a read-only bind of
/proc/sys over itself, in a mount namespace of the test's own (unshare -m, root only). nsbox then
runs there as root and as uid 65534 (setpriv), each subtest saying which."""
import json
import os
import subprocess

from nsboxtest import NSBOX, NsboxTestCase, nsbox_json, root_only, without_fallback_warning

# Runs as CALLER (root, or uid 65534 through setpriv) inside a mount namespace whose /proc/sys
# is read-only; the registry goes to a private runtime directory (the caller's own).
READ_ONLY_PROC_SYS = """set -e
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
d=$(mktemp -d)
chown "$1" "$d"; chmod 700 "$d"
shift
export XDG_RUNTIME_DIR="$d"
set +e
"$@"
rc=$?
rm -rf "$d"
exit $rc
"""
CALLERS = (("root", "0", []),
           ("uid 65534", "65534",
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]))


def run_read_only_proc_sys(as_user, *args):
    """nsbox ARGS (the caller's as_user prefix) where /proc/sys is read-only: CompletedProcess."""
    uid, prefix = as_user
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           READ_ONLY_PROC_SYS, "sh", uid, *prefix, NSBOX, *args],
                          capture_output=True, text=True, timeout=60)


class TestTier1(NsboxTestCase):
    def test_full_sandbox_says_tier_1_and_nothing_missing(self):
        p, r = nsbox_json("--", "cat", "/proc/sys/user/max_inotify_instances")
        self.assertEqual(r["status"], "exited", p.stderr)
        self.assertEqual(r["isolation"], {"tier": 1, "missing": []})
        # The sandbox's own user namespace got its budget (init_sysctls()).
        self.assertEqual(r["stdout"], "32\n")
        self.assertFalse([w for w in r["warnings"] if "tier" in w], r["warnings"])

    def test_isolation_full_runs_tier_1(self):
        p, r = nsbox_json("--isolation", "full", "--", "true")
        self.assertEqual(r["status"], "exited", p.stderr)
        self.assertEqual(r["isolation"]["tier"], 1)

    def test_bad_isolation_value(self):
        p, r = nsbox_json("--isolation", "landlocked", "--", "true")
        self.assertOneLineError(p, contains="--isolation")
        self.assertIn("expected auto, full or landlock", p.stderr)


class TestReadOnlyProcSys(NsboxTestCase):
    def test_wall_without_pid_host(self):
        # Docker's, Podman's and a Kubernetes pod's default: the fresh /proc the sandbox needs
        # is refused under a read-only /proc/sys bind, before anything is made.
        for name, uid, prefix in CALLERS:
            with self.subTest(caller=name):
                p = run_read_only_proc_sys((uid, prefix), "run", "--cgroup", "off", "--",
                                           "/bin/true")
                self.assertOneLineError(p, contains="/proc/sys is read-only here")
                self.assertIn("'nsbox doctor' names the container setting", p.stderr)
                self.assertNotIn("tier 2", p.stderr)

    def test_control_the_wall_is_the_kernels(self):
        # The same mount namespace refuses a fresh /proc to unshare(1) as well: nsbox's line
        # says what the kernel would do, it does not invent a refusal.
        p = run_read_only_proc_sys(("0", []), "--version")
        self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            READ_ONLY_PROC_SYS, "sh", "0", "unshare", "-Urmpf", "--mount-proc",
                            "true"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertIn("mount /proc failed: Operation not permitted", p.stderr)
        p = subprocess.run(["unshare", "-Urmpf", "--mount-proc", "true"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_tier_2_under_pid_host(self):
        # --pid host binds the host's /proc: the run goes on without the user.max_* limits,
        # and says so; the sandbox's user namespace keeps the kernel's (INT_MAX) instead of 32.
        for name, uid, prefix in CALLERS:
            with self.subTest(caller=name):
                p = run_read_only_proc_sys((uid, prefix), "run", "--json", "--cgroup", "off",
                                           "--pid", "host", "--", "cat",
                                           "/proc/sys/user/max_inotify_instances")
                r = json.loads(p.stdout)
                self.assertEqual(r["status"], "exited", p.stderr)
                self.assertEqual(r["stdout"], "2147483647\n", r)
                self.assertEqual(r["isolation"]["tier"], 2, r)
                self.assertIn("user.max_* limits", r["isolation"]["missing"])
                # Root of the host would have set kernel.shm*; an ordinary user never does.
                self.assertEqual("kernel.shm* limits" in r["isolation"]["missing"], uid == "0",
                                 r["isolation"])
                tier = [w for w in r["warnings"] if w.startswith("isolation tier 2:")]
                self.assertEqual(len(tier), 1, r["warnings"])
                self.assertIn("inotify and new namespaces are refused by seccomp", tier[0])
                lines = [l for l in without_fallback_warning(p.stderr).splitlines()
                         if "isolation tier 2" in l]
                self.assertEqual(len(lines), 1, p.stderr)

    def test_tier_2_inotify_still_refused(self):
        # What the missing user.max_inotify_instances would bound is refused by seccomp anyway.
        code = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "print(libc.inotify_init1(0), ctypes.get_errno())\n")
        p = run_read_only_proc_sys(("0", []), "run", "--json", "--cgroup", "off", "--pid",
                                   "host", "--", "python3", "-c", code)
        r = json.loads(p.stdout)
        self.assertEqual(r["status"], "exited", p.stderr)
        self.assertEqual(r["isolation"]["tier"], 2)
        self.assertEqual(r["stdout"], "-1 38\n", r)  # ENOSYS

    def test_isolation_full_refuses_tier_2(self):
        for name, uid, prefix in CALLERS:
            with self.subTest(caller=name):
                p = run_read_only_proc_sys((uid, prefix), "run", "--cgroup", "off", "--pid",
                                           "host", "--isolation", "full", "--", "/bin/true")
                # (--pid host's own warning aside.)
                p.stderr = "".join(l for l in p.stderr.splitlines(True)
                                   if not l.startswith("nsbox: warning: --pid host:"))
                self.assertOneLineError(p, contains="--isolation full: /proc/sys is read-only")


# Making a read-only /proc/sys takes root (a mount namespace of the test's own): as uid 65534
# these are not collected; the root suite runs them (as uid 65534 too, where that matters).
load_tests = root_only(("TestReadOnlyProcSys",))
