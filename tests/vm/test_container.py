# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox inside Podman containers (issue 20), run as root inside the qemu VM (tests/vm/run):

    tests/vm/run /usr/bin/python3 tests/vm/test_container.py

No image registry is needed: each container's root is the VM's own root (the host's /, shared
read-only over 9p), bound at ROOT and passed with --rootfs, and started with --read-only, so
the container has the very nsbox build and rootfs under test, at their host paths. Podman's
storage is on the VM's tmpfs (vfs driver, cgroupfs manager, no network).

The last line of the output is "vm: N passed, M failed", as test_cgroup.py's.
"""
import json
import os
import shlex
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
NSBOX = os.environ.get("NSBOX") or os.path.join(TOP, "build", "src", "nsbox")
ROOTFS = os.environ.get("NSBOX_ROOTFS") or os.path.join(TOP, "build", "rootfs", "tree")
PROFILE = os.path.join(TOP, "examples", "seccomp-nsbox.json")
ROOT = "/run/nsbox-container-root"
PODMAN = ["podman", "--root", "/tmp/podman", "--runroot", "/run/podman", "--storage-driver",
          "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "none",
          "--log-level", "error"]
SHIPPED = ["--security-opt", f"seccomp={PROFILE}"]
UNMASK = ["--security-opt", "unmask=ALL"]
# Docker's default profile (containerd's too) as it treats a container without CAP_SYS_ADMIN:
# clone(2) only without namespace flags, unshare(2) and setns(2) refused (EPERM, the default
# action), clone3(2) ENOSYS so that callers fall back to clone. Made from the shipped
# allowlist by taking those calls out of it.
DOCKERLIKE = "/run/nsbox-seccomp-dockerlike.json"
CLONE_NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS | CLONE_NEWCGROUP ... CLONE_NEWNET


def write_dockerlike_profile():
    with open(PROFILE) as f:
        profile = json.load(f)
    for rule in profile["syscalls"]:
        rule["names"] = [n for n in rule["names"]
                         if n not in ("clone", "clone3", "unshare", "setns")]
    profile["syscalls"] = [r for r in profile["syscalls"] if r["names"]]
    profile["syscalls"] += [
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": CLONE_NAMESPACE_FLAGS, "valueTwo": 0,
                   "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
    ]
    with open(DOCKERLIKE, "w") as f:
        json.dump(profile, f)


# Emulated CPUs are slow.
FAST = ["--cpus", "unlimited", "--timeout", "120"]
# The container's first line of output, which podman_run() takes off again: without it the
# container did not start, and the test fails at once with podman's (crun's) error.
STARTED = "nsbox-vm: container started"


def text(out):
    """What a subprocess.TimeoutExpired carries (bytes, or None) as text."""
    return out.decode(errors="replace") if isinstance(out, bytes) else out or ""


def podman_run(*opts, cmd, user="1000:1000", timeout=240):
    """Run cmd (a shell script) in a container with opts; CompletedProcess with text, stdout
    without the STARTED line. Podman kills the container after timeout seconds; podman itself
    gets 60 more. The checkout (nsbox, its rootfs) is a read-only volume at its own path:
    Podman's --read-only mounts a tmpfs of its own on /tmp and /run, which would hide a
    checkout below them (CI clones below /tmp).

    Raises AssertionError, with what podman said, when the container did not start or podman
    did not return."""
    argv = [*PODMAN, "run", "--rm", "--network", "none", "--read-only", "--user", user,
            "--timeout", str(timeout), "-e", f"NSBOX_ROOTFS={ROOTFS}", "-e", "PATH=/usr/bin:/bin",
            *opts, "-v", f"{TOP}:{TOP}:ro", "--rootfs", ROOT,
            "/bin/sh", "-c", f"echo '{STARTED}'; {cmd}"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 60)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"podman run did not return in {timeout + 60} s: "
                             f"stdout={text(e.stdout)!r} stderr={text(e.stderr)!r}") from None
    first, _, p.stdout = p.stdout.partition("\n")
    if first != STARTED:
        raise AssertionError(f"the container did not start (podman exit {p.returncode}): "
                             f"{p.stderr.strip()}" + (f" (stdout: {first!r})" if first else ""))
    return p


def nsbox_in(*opts, args, user="1000:1000"):
    """nsbox run --json ARGS in a container: (CompletedProcess, result)."""
    p = podman_run(*opts, user=user,
                   cmd=" ".join([NSBOX, "run", "--json", *FAST, *args]))
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        raise AssertionError(f"no JSON: rc={p.returncode} stdout={p.stdout!r} "
                             f"stderr={p.stderr!r}")


class TestPodman(unittest.TestCase):
    broken = None  # why no container starts, if none does

    @classmethod
    def setUpClass(cls):
        # The VM's / is the initramfs' rootfs with the 9p share on top, which pivot_root(2)
        # refuses (EBUSY): a bind of it in a mount of its own is a root crun can pivot into.
        os.makedirs(ROOT, exist_ok=True)
        subprocess.run(["mount", "--rbind", "/", ROOT], check=True)
        subprocess.run(["mount", "--make-rprivate", ROOT], check=True)
        # Empty /tmp, /var/tmp and /run, as in an image. The VM's are not empty: /tmp has
        # Podman's storage and, when the checkout is a clone below /tmp, the whole checkout
        # with its build trees (its own 9p share, which the rbind brings along), and /run has
        # Podman's run root and the VM's share. Podman's --read-only (and --tmpfs) mounts a
        # tmpfs there with the "tmpcopyup" option, for which crun copies what the root has
        # there into each container's new tmpfs (copy_recursive_fd_to_fd() in crun's
        # utils.c): from a clone below /tmp, every container start copied the checkout over
        # 9p, a minute or more under TCG, and a checkout larger than the tmpfs (half the
        # VM's memory) failed with "crun: write: No space left on device".
        for d, mode in (("tmp", "1777"), ("var/tmp", "1777"), ("run", "0755")):
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"ro,nosuid,nodev,noexec,mode={mode}",
                            "tmpfs", f"{ROOT}/{d}"], check=True)
        # One container first: if none can start, each test fails at once with this error
        # instead of waiting for its own.
        try:
            p = podman_run(cmd="true", timeout=60)
            if p.returncode != 0:
                cls.broken = f"a container running true: exit {p.returncode}: {p.stderr.strip()}"
        except (AssertionError, OSError) as e:
            cls.broken = str(e)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["umount", "-R", ROOT])

    def setUp(self):
        if self.broken:
            self.fail(f"no container starts: {self.broken}")

    def test_default_profile_fails_with_one_line_pointing_at_doctor(self):
        # Podman's defaults: a masked /proc with /proc/sys read-only, and a seccomp profile
        # that allows user namespaces but refuses sethostname.
        p = podman_run(cmd=f"{NSBOX} run --cgroup off -- /bin/true")
        self.assertEqual(p.returncode, 125, p.stdout + p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        # A read-only /proc/sys bind refuses the sandbox a fresh /proc (a wall, not tier 2):
        # said before the sandbox is made (isolation.c).
        self.assertIn("nsbox: /proc/sys is read-only here", lines[0])
        self.assertIn("'nsbox doctor' names the container setting", lines[0])

    def test_default_profile_pid_host_runs_tier_2(self):
        # --pid host binds the container's /proc: the run goes on without user.max_* (tier 2).
        p, r = nsbox_in(args=["--cgroup", "off", "--pid", "host", "--", "/bin/sh", "-c",
                              "'echo INSIDE-OK'"])
        self.assertEqual(r["status"], "exited", r)
        self.assertEqual(r["stdout"], "INSIDE-OK\n", r)
        self.assertEqual(r["isolation"]["tier"], 2, r)
        self.assertIn("user.max_* limits", r["isolation"]["missing"])
        self.assertTrue([w for w in r["warnings"] if w.startswith("isolation tier 2:")],
                        r["warnings"])
        p, r = nsbox_in(args=["--cgroup", "off", "--pid", "host", "--isolation", "full", "--",
                              "/bin/true"])
        self.assertEqual(r["status"], "error", r)
        self.assertEqual(r["error"]["step"], "isolation", r)

    def test_masked_proc_with_writable_proc_sys_is_a_wall(self):
        # Only /proc/sys unmasked: the other masks still cover parts of /proc, and the kernel
        # refuses the sandbox its own (the mount step), with the fix.
        p = podman_run("--security-opt", "unmask=/proc/sys",
                       cmd=f"{NSBOX} run --cgroup off -- /bin/true")
        self.assertEqual(p.returncode, 125, p.stdout + p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("sandbox setup failed at mount /proc", lines[0])
        self.assertIn("'nsbox doctor' names the container setting", lines[0])

    def test_dockerlike_profile_refuses_with_the_fix(self):
        # No user namespace at all: nsbox refuses in one line naming the filter; doctor names
        # the flags. The control: the shipped profile runs in the same container otherwise.
        write_dockerlike_profile()
        dockerlike = ["--security-opt", f"seccomp={DOCKERLIKE}"]
        p = podman_run(*dockerlike, *UNMASK, cmd=f"{NSBOX} run --cgroup off -- /bin/true")
        self.assertEqual(p.returncode, 125, p.stdout + p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("creating the sandbox's namespaces failed: Operation not permitted",
                      lines[0])
        self.assertIn("seccomp", lines[0])
        self.assertIn("--isolation landlock", lines[0])  # the weaker opt-in, named
        p = podman_run(*dockerlike, *UNMASK, cmd=f"{NSBOX} doctor")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("FAIL  user namespaces: unshare(CLONE_NEWUSER) failed: Operation not "
                      "permitted", p.stdout)
        self.assertIn("--security-opt seccomp=seccomp-nsbox.json", p.stdout)
        p, r = nsbox_in(*SHIPPED, *UNMASK, args=["--cgroup", "off", "--", "/bin/true"])
        self.assertEqual(r["status"], "exited", r)
        self.assertEqual(r["isolation"], {"tier": 1, "missing": []}, r)

    def test_dockerlike_profile_opt_in_runs_tier_3(self):
        # The same container, with --isolation landlock: tier 3 runs Python, and there the
        # program can neither read a file of the container it was not given (the checkout's
        # README, readable by everyone) nor open a TCP socket to a listener in the container;
        # both succeed bare in the same container (the controls). Debian 12's 6.1 has no
        # Landlock network rules (ABI < 4): TCP is refused by the seccomp policy's socket rule.
        write_dockerlike_profile()
        probe = ("import socket\n"
                 f"try: print(open({os.path.join(TOP, 'README.md')!r}).read(6))\n"
                 "except OSError as e: print('read', type(e).__name__)\n"
                 "try: socket.create_connection(('127.0.0.1', PORT), timeout=30); "
                 "print('CONNECTED')\n"
                 "except OSError as e: print('connect', type(e).__name__)\n")
        driver = ("import json, os, socket, subprocess, sys\n"
                  "s = socket.socket()\n"
                  "s.bind(('127.0.0.1', 0))\n"
                  "s.listen(8)\n"
                  f"probe = {probe!r}.replace('PORT', str(s.getsockname()[1]))\n"
                  "bare = subprocess.run([sys.executable, '-c', probe], capture_output=True,\n"
                  "                      text=True)\n"
                  f"run = subprocess.run([{NSBOX!r}, 'run', '--json', '--isolation', 'landlock',\n"
                  f"                      *{FAST!r}, '--', 'python3', '-c', probe],\n"
                  "                     capture_output=True, text=True)\n"
                  "left = [x for x in os.listdir('/tmp') if x.startswith('nsbox-tier3-')]\n"
                  "print(json.dumps({'bare': bare.stdout, 'rc': run.returncode, 'left': left,\n"
                  "                  'stdout': run.stdout, 'stderr': run.stderr}))\n")
        p = podman_run("--security-opt", f"seccomp={DOCKERLIKE}", *UNMASK,
                       cmd=f"python3 -c {shlex.quote(driver)}")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        out = json.loads(p.stdout)
        self.assertEqual(out["bare"], "# nsbo\nCONNECTED\n", out)  # the controls
        self.assertEqual(out["rc"], 0, out)
        r = json.loads(out["stdout"])
        self.assertEqual(r["isolation"]["tier"], 3, out)
        for missing in ("user namespace", "pid namespace", "network namespace",
                        "mount namespace", "rootfs", "cgroup"):
            self.assertIn(missing, r["isolation"]["missing"])
        self.assertEqual(r["stdout"], "read PermissionError\nconnect PermissionError\n", r)
        self.assertIn("nsbox: warning: isolation tier 3, much weaker", out["stderr"])
        self.assertEqual(out["left"], [], out)  # the scratch directory is gone

    def test_doctor_explains_the_default_profile(self):
        p = podman_run(cmd=f"{NSBOX} doctor")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        # (The runtime's name is not checked: this container's root, the host's, may carry
        # another runtime's marker.)
        self.assertRegex(p.stdout, r"info  container: .*, with a seccomp filter on nsbox")
        self.assertIn("FAIL  /proc:", p.stdout)
        self.assertIn("and /proc/sys is read-only", p.stdout)
        self.assertIn("podman run --security-opt unmask=/proc/*", p.stdout)

    def test_default_seccomp_with_unmasked_proc_runs_and_warns_of_the_hostname(self):
        p, r = nsbox_in(*UNMASK, args=["--", "/bin/sh", "-c", "'echo INSIDE-OK; cat "
                                       "/proc/sys/kernel/hostname'"])
        self.assertEqual(r["status"], "exited", r)
        self.assertEqual(r["exit_code"], 0, r)
        self.assertTrue(r["stdout"].startswith("INSIDE-OK\n"), r)
        self.assertNotEqual(r["stdout"], "INSIDE-OK\nnsbox\n")
        self.assertTrue([w for w in r["warnings"] if "optional setup step sethostname skipped"
                         in w], r["warnings"])

    def test_shipped_profile_runs_python(self):
        p, r = nsbox_in(*SHIPPED, *UNMASK, args=["--", "python3", "-c",
                                                 "'import socket; print(socket.gethostname())'"])
        self.assertEqual(r["status"], "exited", r)
        self.assertEqual(r["stdout"], "nsbox\n", r)
        self.assertFalse([w for w in r["warnings"] if "skipped" in w], r["warnings"])

    def test_shipped_profile_doctor_passes(self):
        p = podman_run(*SHIPPED, *UNMASK, cmd=f"{NSBOX} doctor")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("ok    /proc: fully visible", p.stdout)

    def test_cgroup_limits_below_the_containers_own_cgroup(self):
        # Root of the container (a private cgroup namespace, cgroupfs writable with unmask):
        # nsbox moves the container's processes (this shell too) into nsbox-supervisor and
        # makes its leaf beside it; the memory limit is the cgroup's.
        script = (f"{NSBOX} run --json {' '.join(FAST)} --cgroup required --cgroup-parent / "
                  "--memory 64m -- python3 -c 'b = bytearray(256 << 20)'; "
                  "echo; cat /sys/fs/cgroup/nsbox-supervisor/cgroup.procs | wc -l; "
                  "cat /sys/fs/cgroup/cgroup.subtree_control")
        p = podman_run(*SHIPPED, *UNMASK, "--cgroupns", "private", user="0:0", cmd=script)
        out = p.stdout.splitlines()
        self.assertGreaterEqual(len(out), 3, p.stdout + p.stderr)
        r = json.loads(out[0])
        self.assertEqual(r["limits_enforced_by"], "cgroup", r)
        self.assertEqual(r["status"], "oom", r)
        self.assertEqual(r["cgroup"]["oom_kills"], 1, r)
        self.assertRegex(r["cgroup"]["path"], r"^/nsbox-run-", r)
        self.assertGreaterEqual(int(out[-2]), 2, p.stdout)  # the shell and nsbox's parent
        self.assertIn("memory", out[-1])

    def test_ps_and_kill_with_a_read_only_root(self):
        # Docker's --read-only and Kubernetes' readOnlyRootFilesystem leave no writable /tmp
        # or /run: the registry goes to /dev/shm, the tmpfs every container has, so ps and
        # kill work with no setting at all. The control: with /dev/shm read-only too, the run
        # does not start (issue 24: a run 'nsbox ps' and 'nsbox kill' cannot see must not), one
        # nsbox: line and status 125.
        script = (f"{NSBOX} run --name long {' '.join(FAST)} --cgroup off -- sleep 100 & "
                  "sleep 5; "
                  f"echo ps=$({NSBOX} ps | grep -c long); {NSBOX} kill long; echo kill=$?; wait $!; "
                  "echo run=$?")
        # (This container's root is the VM's, whose writable /tmp comes with it: a read-only
        # tmpfs covers it.)
        p = podman_run(*SHIPPED, *UNMASK, "--tmpfs", "/tmp:ro", cmd=script)
        self.assertNotIn("will not see this run", p.stderr, p.stdout + p.stderr)
        self.assertIn("ps=1\n", p.stdout, p.stdout + p.stderr)
        self.assertIn("kill=0", p.stdout, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"run=1[0-9][0-9]")
        control = f"{NSBOX} run {' '.join(FAST)} --cgroup off -- true; echo run=$?"
        p = podman_run(*SHIPPED, *UNMASK, "--tmpfs", "/tmp:ro", "--tmpfs", "/dev/shm:ro",
                       cmd=control)
        self.assertEqual(p.stderr.count("cannot add the run to the registry"), 1,
                         p.stdout + p.stderr)
        self.assertIn("the run does not start", p.stderr)
        self.assertIn("run=125", p.stdout)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    bad = len(result.failures) + len(result.errors) + len(result.skipped)
    print(f"vm: {result.testsRun - bad} passed, {bad} failed", flush=True)
    sys.exit(0 if bad == 0 and result.testsRun > 0 else 1)
