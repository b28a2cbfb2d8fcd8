# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Kubernetes example (examples/kubernetes/executor.yaml) played by `podman kube play`, a
real reader of Kubernetes YAML (issue 29), as root inside the qemu VM (tests/vm/run):

    tests/vm/suite --file test_kube.py

The image the YAML names, nsbox-executor:latest, is built here with `podman build` from a
local base, without a registry: the base is the minimal rootfs under test imported as an image
(Debian 12 with python3, standing in for examples/Containerfile's debian:12); the build adds
nsbox, the same tree again as the sandbox's rootfs (NSBOX_ROOTFS), the Python API and the
executor, as examples/Containerfile lays them out. Podman names a locally built image
localhost/..., which kube play takes from the local store even with the :latest tag.

The YAML is played as it is with one change: replicas 2 -> 1. Podman 4.3 makes one pod per
replica and publishes each pod's containerPort on the host (it has no Service or cluster IP;
it ignores the Service object), so a second replica would ask for port 8080 again. The
executor is then reached at 127.0.0.1:8080 in the VM, through the pod's bridge network
(kube play's podman-default-kube-network, CNI) and its port mapping.

What Podman 4.3.1 (Debian 12's) does with the pod's settings, as seen with
`kube play --start=false` and `podman inspect` (on the development host):
  - hostUsers: false -> a user namespace of its own (--userns=auto, ids from /etc/subuid's
    "containers" range; storage.conf here sizes it at 65536 ids, as the kubelet does);
  - seccompProfile (the securityContext field) is ignored: Podman 4.3 reads only the older
    annotation container.seccomp.security.alpha.kubernetes.io/<container>, which the YAML
    therefore also carries (a file directly under --seccomp-profile-root: Podman 4.3 joins only
    the first component of "localhost/<path>" to it, "nsbox/x.json" fails as a directory);
  - readOnlyRootFilesystem, allowPrivilegeEscalation (no-new-privileges), runAsUser, the
    resources' limits (memory 2 GiB, 2 cpus) and the emptyDir (a volume) are applied;
  - the probes become a Podman healthcheck ("curl -f http://localhost:0/healthz": the named
    port is not resolved, and the image has no curl) that nothing runs here (no systemd);
  - procMount: Unmasked is ignored (seen in the VM: the executor's OCI spec keeps Podman's
    masked and read-only /proc paths, and nsbox refuses every run at "mount /proc");
  - /sys/fs/cgroup is mounted read-only in the executor (Podman's default for a container
    that is not privileged; procMount does not touch it), so nsbox cannot make its sandboxes'
    cgroups below the container's own (EXECUTOR_CGROUP_PARENT=/) and enforces the limits with
    rlimits, saying why in limits_note: the test reads the mount from the executor's OCI spec
    and checks nsbox's account against it (cgroup limits where it is writable);
  - appArmorProfile: no effect here (the VM has no AppArmor: no securityfs, no profiles).

Where Podman 4.3 falls short of a kubelet, the test supplies two things, each only in the
engine, never in the YAML:

procMount: Unmasked. A kubelet's runtime (CRI-O, containerd) applies it by leaving the OCI
spec's maskedPaths and readonlyPaths empty; Podman 4.3's kube play has no such field. The
test installs a precreate hook (oci-hooks(5): Podman hands the hook the container's
config.json and runs the container with the one it gives back) that empties those two lists,
for the executor's command alone and only when the YAML played has the line; it checks the
started executor's spec (OCIConfigPath) both ways. The masked-/proc control plays the YAML
without the line, so without the hook.

The pod's device filter, undone between `kube play --start=false` and `podman pod start`: with
the cgroupfs manager on cgroup v2 (this VM has no systemd), Podman 4.3 makes a pod's cgroup
(/libpod_parent/<pod id>) when it makes the pod and applies the infra container's resources to
it through runc's cgroup v2 code (libpod NewPod, then containers/common's
CgroupControl.Update), with an empty device rule list, which runc turns into a
BPF_CGROUP_DEVICE program that denies every device. A device access below a cgroup must be
allowed by the programs of the cgroup and of all its ancestors, so no container of any pod gets
/dev/null: crun's mknod("/dev/null") fails with EPERM without a user namespace, its
open("/dev/null") (a bind of the host's) after pivot_root with one. Seen in the VM with crun
under strace and a 3-line pod: every pod with an infra container fails so, with hostUsers true
or false, `podman pod create` as well as kube play, storage on a nodev tmpfs or not; `podman
run` outside a pod starts, also with --userns=auto. So the test detaches that program from the
pod's cgroup (bpf(2): BPF_PROG_QUERY, BPF_PROG_DETACH) and then starts the pod. The YAML is not
changed for it, and each container keeps crun's own device filter (its default devices and the
spec's), the one a kubelet's runtime would give it. Podman under systemd's cgroup manager (a
Debian 12 host) was not tried.

Time under TCG (the passing run): the image 180 s (tar 30 s, import 55 s, build 90 s; 400 s
in an earlier run on a busier host), built once for the file's two tests; three pods played,
about 45 s each; the whole VM about 350 s.

Not exercised: a kubelet (its seccomp directory, its user namespace sizes and id ranges, its
probes, its runtime's cgroupfs mount: whether containerd or CRI-O mount it writable for this
pod was not checked; read-only gives the same rlimit fallback as here), a Service's load
balancing over replicas, AppArmor.

The controls show the test can fail: the same YAML without procMount: Unmasked must get
nsbox's refusal (one line naming the fix) as the executor's error instead of a run, and
without the seccomp annotation Podman's default profile refuses sethostname (a warning in the
result).

Podman's storage is on the VM's tmpfs (vfs driver, cgroupfs manager); the VM's read-only
root gets small tmpfs mounts where Podman and CNI write (/etc/cni/net.d, /var/lib,
/var/cache) and a /etc/subuid and /etc/subgid of the test's own. The last line of the output is
"vm: N passed, M failed", as test_cgroup.py's.
"""
import ctypes
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
NSBOX = os.environ.get("NSBOX") or os.path.join(TOP, "build", "src", "nsbox")
ROOTFS = os.environ.get("NSBOX_ROOTFS") or os.path.join(TOP, "build", "rootfs", "tree")
YAML = os.path.join(TOP, "examples", "kubernetes", "executor.yaml")
PROFILE = os.path.join(TOP, "examples", "seccomp-nsbox.json")
WORK = "/tmp/nsbox-kube"
STORAGE_CONF = os.path.join(WORK, "storage.conf")
SECCOMP_ROOT = os.path.join(WORK, "seccomp")
HOOKS = os.path.join(WORK, "hooks")
NO_HOOKS = os.path.join(WORK, "no-hooks")  # empty: not Podman's default directories either
GRAPHROOT = os.path.join(WORK, "storage")
RUNROOT = "/run/nsbox-kube"
PODMAN = ["podman", "--root", GRAPHROOT, "--runroot", RUNROOT,
          "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "none",
          "--log-level", "error"]
URL = "http://127.0.0.1:8080"
CONTAINERFILE = """\
FROM localhost/nsbox-base:latest
COPY rootfs /usr/lib/nsbox/rootfs
COPY nsbox /usr/bin/nsbox
COPY nsbox-py /usr/lib/python3/dist-packages/nsbox
COPY server.py /usr/local/bin/nsbox-executor
ENV NSBOX_ROOTFS=/usr/lib/nsbox/rootfs
EXPOSE 8080
ENTRYPOINT ["/usr/bin/python3", "/usr/local/bin/nsbox-executor"]
"""

# procMount: Unmasked as a CRI runtime applies it (no masked nor read-only paths in the OCI
# spec), which Podman 4.3 does not: a precreate hook (oci-hooks(5), Podman's stage that gets
# the container's config.json on stdin and gives back the one to use), for the executor alone
# (the command its image starts), installed only when the YAML played says so.
UNMASK_HOOK = """\
#!/usr/bin/python3
import json, sys
config = json.load(sys.stdin)
config["linux"]["maskedPaths"] = []
config["linux"]["readonlyPaths"] = []
json.dump(config, sys.stdout)
"""
UNMASK_HOOK_JSON = {"version": "1.0.0", "hook": {"path": os.path.join(HOOKS, "unmask-proc")},
                    "when": {"commands": ["^/usr/bin/python3$"]}, "stages": ["precreate"]}


START = time.monotonic()


def step(what):
    """Where the time goes under TCG, on stderr."""
    print(f"[{time.monotonic() - START:6.0f} s] {what}", file=sys.stderr, flush=True)


def podman(*args, timeout=300, check=True, stdin=None):
    p = subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout,
                       input=stdin, env={**os.environ, "CONTAINERS_STORAGE_CONF": STORAGE_CONF})
    if check and p.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {p.returncode}: "
                             f"{p.stderr.strip()} {p.stdout.strip()}")
    return p


def request(method, path, body=None, timeout=240):
    """(HTTP status, decoded JSON answer) of the executor."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


# The same request from inside the pod (its network namespace), where the published port does
# not answer: argv is method, path, JSON body; prints the status, then the answer.
INSIDE = r"""
import sys, urllib.error, urllib.request
method, path, body = sys.argv[1:4]
req = urllib.request.Request("http://127.0.0.1:8080" + path, method=method,
                             data=body.encode() if body else None,
                             headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=240) as r:
        print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.read().decode())
"""
EXECUTOR = "nsbox-executor-pod-0-executor"


def request_inside(method, path, body=None):
    p = podman("exec", EXECUTOR, "/usr/bin/python3", "-c", INSIDE, method, path,
               "" if body is None else json.dumps(body), check=False)
    status, _, answer = p.stdout.partition("\n")
    if p.returncode != 0 or not status.isdigit():
        raise AssertionError(f"no answer inside the pod: exit {p.returncode}: {p.stdout} "
                             f"{p.stderr}")
    return int(status), json.loads(answer)


# bpf(2) for detach_device_filters(): x86_64's syscall number (the VM is qemu-system-x86_64),
# commands and attach type from include/uapi/linux/bpf.h.
SYS_BPF = 321
BPF_PROG_DETACH, BPF_PROG_GET_FD_BY_ID, BPF_PROG_QUERY = 9, 13, 16
BPF_CGROUP_DEVICE = 6
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long


def bpf(cmd, attr):
    """bpf(cmd, attr): (the return value, attr as the kernel left it). union bpf_attr is
    passed as 128 bytes, the fields used at their offsets, the rest zero (bpf(2))."""
    buf = ctypes.create_string_buffer(attr.ljust(128, b"\0"), 128)
    r = LIBC.syscall(ctypes.c_long(SYS_BPF), ctypes.c_long(cmd), buf, ctypes.c_uint(128))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"bpf({cmd}): {os.strerror(e)}")
    return r, buf.raw


def detach_device_filters(cgroup):
    """Detach the BPF_CGROUP_DEVICE programs attached to the cgroup directory cgroup; the
    number detached. Podman 4.3 (cgroupfs manager, cgroup v2) attaches to a pod's cgroup,
    when it makes the pod, a device filter built from an empty rule list, which denies every
    device to every container below it (see the module docstring)."""
    fd = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        ids = (ctypes.c_uint32 * 64)()
        # query: target_fd, attach_type, query_flags, attach_flags, prog_ids, prog_cnt
        _, out = bpf(BPF_PROG_QUERY, struct.pack("=IIIIQI", fd, BPF_CGROUP_DEVICE, 0, 0,
                                                 ctypes.addressof(ids), len(ids)))
        count = struct.unpack_from("=I", out, 24)[0]
        for prog_id in ids[:count]:
            prog, _ = bpf(BPF_PROG_GET_FD_BY_ID, struct.pack("=I", prog_id))
            try:
                # attach: target_fd, attach_bpf_fd, attach_type
                bpf(BPF_PROG_DETACH, struct.pack("=III", fd, prog, BPF_CGROUP_DEVICE))
            finally:
                os.close(prog)
        return count
    finally:
        os.close(fd)


def example_yaml(drop=()):
    """The example's text with replicas 1 and without the lines that are one of drop."""
    with open(YAML) as f:
        text = f.read()
    if text.count("replicas: 2\n") != 1:
        raise AssertionError("the example no longer has one 'replicas: 2'")
    text = text.replace("replicas: 2\n", "replicas: 1\n")
    for d in drop:
        lines = [l for l in text.splitlines(keepends=True) if l.strip() != d]
        if len(lines) != len(text.splitlines()) - 1:
            raise AssertionError(f"the example has not exactly one line with {d!r}")
        text = "".join(lines)
    path = os.path.join(WORK, "executor.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


class TestKubePlay(unittest.TestCase):
    broken = None  # why the image could not be built

    @classmethod
    def setUpClass(cls):
        try:
            cls.prepare()
        except (AssertionError, OSError, subprocess.SubprocessError) as e:
            cls.broken = str(e)

    @classmethod
    def prepare(cls):
        # It mounts over /var/lib, /var/cache and /etc/subuid: only in the throw-away VM,
        # whose share tests/vm/run mounts at /run/nsbox-vm.
        if not os.path.ismount("/run/nsbox-vm"):
            raise AssertionError("this file runs only in tests/vm/run's VM "
                                 "(tests/vm/suite --file test_kube.py)")
        os.makedirs(SECCOMP_ROOT, exist_ok=True)
        shutil.copy(PROFILE, SECCOMP_ROOT)
        os.makedirs(HOOKS, exist_ok=True)
        os.makedirs(NO_HOOKS, exist_ok=True)
        with open(UNMASK_HOOK_JSON["hook"]["path"], "w") as f:
            f.write(UNMASK_HOOK)
        os.chmod(UNMASK_HOOK_JSON["hook"]["path"], 0o755)
        with open(os.path.join(HOOKS, "unmask-proc.json"), "w") as f:
            json.dump(UNMASK_HOOK_JSON, f)
        # The VM's root is the host's, read-only: CNI writes its network list and its IPAM
        # state, and user namespaces need subordinate ids for Podman's "containers" user.
        # (and /var/cache: Podman's short-name alias cache).
        for d in ("/etc/cni/net.d", "/var/lib", "/var/cache"):
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", d], check=True)
        subid = os.path.join(WORK, "subid")
        with open(subid, "w") as f:
            f.write("containers:1000000:1000000\n")
        for f in ("/etc/subuid", "/etc/subgid"):
            subprocess.run(["mount", "--bind", subid, f], check=True)
        # A pod's user namespace of 65536 ids, as the kubelet gives (Podman's auto size is the
        # image's highest id + 1, at least 1024: too few for the sandbox's nobody, 65534).
        with open(STORAGE_CONF, "w") as f:
            f.write(f'[storage]\ndriver = "vfs"\nrunroot = "{RUNROOT}"\n'
                    f'graphroot = "{GRAPHROOT}"\n[storage.options]\n'
                    'auto-userns-min-size = 65536\nauto-userns-max-size = 65536\n')
        # The tree is read over 9p once (slow under TCG): a tar on the tmpfs serves both.
        step("tar of the rootfs")
        tar = os.path.join(WORK, "rootfs.tar")
        subprocess.run(["tar", "-C", ROOTFS, "-cf", tar, "."], check=True)
        step("podman import")
        podman("import", tar, "localhost/nsbox-base:latest", timeout=900)
        step("the build context")
        ctx = os.path.join(WORK, "context")
        os.makedirs(os.path.join(ctx, "rootfs"))
        subprocess.run(["tar", "-C", os.path.join(ctx, "rootfs"), "-xf", tar], check=True)
        os.unlink(tar)
        shutil.copy(NSBOX, os.path.join(ctx, "nsbox"))
        shutil.copytree(os.path.join(TOP, "python", "nsbox"), os.path.join(ctx, "nsbox-py"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(os.path.join(TOP, "examples", "executor", "server.py"), ctx)
        with open(os.path.join(ctx, "Containerfile"), "w") as f:
            f.write(CONTAINERFILE)
        # --layers=false: one layer for the whole build (vfs copies the image per layer).
        step("podman build")
        podman("build", "--layers=false", "-t", "nsbox-executor:latest", ctx, timeout=900)
        shutil.rmtree(ctx)
        step("image built")

    def setUp(self):
        self.unpublished = None
        if self.broken:
            self.fail(f"no image: {self.broken}")

    def play(self, yaml):
        """kube play yaml; wait for the executor to answer /healthz. Whatever happens, the pod
        is taken down at the test's end, and nothing of it may be left."""
        self.addCleanup(self.nothing_left, yaml)
        step(f"kube play {yaml}")
        p = podman("kube", "play", "--start=false", "--seccomp-profile-root", SECCOMP_ROOT,
                   yaml, check=False, timeout=900)
        if p.returncode != 0:
            self.fail(f"kube play: exit {p.returncode}: {p.stderr} {p.stdout}")
        # Podman 4.3's deny-all device filter on the pod's cgroup goes before the pod starts
        # (see the docstring); each container keeps crun's own.
        pods = podman("pod", "ps", "-q", "--no-trunc").stdout.split()
        self.assertEqual(len(pods), 1, pods)
        cgroup = podman("pod", "inspect", "--format", "{{.CgroupPath}}", pods[0]).stdout.strip()
        n = detach_device_filters(os.path.join("/sys/fs/cgroup", cgroup.lstrip("/")))
        step(f"pod cgroup {cgroup}: {n} device filter(s) detached")
        # procMount: Unmasked, as a kubelet's runtime applies it (see UNMASK_HOOK).
        with open(yaml) as f:
            unmasked = "procMount: Unmasked" in [line.strip() for line in f]
        p = podman("--hooks-dir", HOOKS if unmasked else NO_HOOKS, "pod", "start", pods[0],
                   check=False, timeout=900)
        if p.returncode != 0:
            self.fail(f"pod start: exit {p.returncode}: {p.stderr} {p.stdout}")
        path = podman("inspect", "--format", "{{.OCIConfigPath}}", EXECUTOR).stdout.strip()
        with open(path) as f:
            self.spec = json.load(f)
        masked = self.spec["linux"].get("maskedPaths")
        self.assertEqual(not masked, unmasked, f"the executor's maskedPaths: {masked}")
        step(f"pod started ({'/proc unmasked by the hook' if unmasked else 'no hook'})")
        self.unpublished = None
        deadline = time.monotonic() + 180
        while True:
            try:
                status, answer = request("GET", "/healthz", timeout=10)
                if status == 200 and answer == "ok":
                    step("the executor answers")
                    return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                break
            time.sleep(2)
        # Is the executor up, and only the published port not? Then the test goes on from
        # inside the pod, to see the rest, and fails at its end.
        try:
            status, answer = request_inside("GET", "/healthz")
        except AssertionError as e:
            status, answer = None, str(e)
        logs = podman("logs", EXECUTOR, check=False)
        ps = podman("ps", "-a", "--pod", check=False)
        self.unpublished = (f"the executor did not answer on {URL} in 180 s: {ps.stdout} "
                            f"logs: {logs.stdout} {logs.stderr} inside the pod: {status} "
                            f"{answer}")
        if status != 200:
            self.fail(self.unpublished)

    def call(self, method, path, body=None):
        if self.unpublished:
            return request_inside(method, path, body)
        return request(method, path, body)

    def down(self, yaml):
        p = podman("kube", "down", yaml, check=False)
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        self.nothing_left(None)
        self.assertIsNone(self.unpublished)

    def nothing_left(self, yaml):
        if yaml:  # a test that stopped early: its pod, if any, goes now
            podman("kube", "down", yaml, check=False)
        self.assertEqual(podman("pod", "ps", "-q").stdout, "", "a pod is left")
        self.assertEqual(podman("ps", "-aq").stdout, "", "a container is left")

    def test_example_runs_code_and_answers_a_limit_with_nsboxs_result(self):
        yaml = example_yaml()
        self.play(yaml)
        # The container's cgroupfs as its runtime mounted it: read-only (Podman's default for a
        # container that is not privileged), nsbox cannot make its leaves there and falls back to
        # rlimits, saying why; writable, the pod's own cgroup holds the limits.
        cgroupfs = [m for m in self.spec["mounts"] if m["destination"] == "/sys/fs/cgroup"]
        ro = "ro" in cgroupfs[0].get("options", []) if cgroupfs else True
        step(f"the executor's /sys/fs/cgroup: {cgroupfs}")
        with self.subTest("within limits"):
            status, r = self.call("POST", "/run", {"code": "print(6 * 7)", "timeout": 60})
            self.assertEqual(status, 200, r)
            self.assertEqual((r["status"], r["exit_code"], r["stdout"]), ("exited", 0, "42\n"),
                             r)
            self.assertEqual(r["isolation"], {"tier": 1, "missing": []}, r)
            self.assertFalse([w for w in r["warnings"] if "skipped" in w], r["warnings"])
            self.assertEqual(r["limits_enforced_by"], "rlimit" if ro else "cgroup", r)
            if ro:
                self.assertTrue(r["limits_note"].startswith("cgroup / is not delegated"), r)
        # Limits hit: each answer is nsbox's result naming the limit.
        with self.subTest("timeout"):
            status, r = self.call("POST", "/run", {"code": "import time; time.sleep(60)",
                                                   "timeout": 3})
            self.assertEqual(status, 200, r)
            self.assertEqual(r["status"], "timeout", r)
            self.assertTrue(r["reason"].startswith("timed out after 3 s"), r)
        with self.subTest("cpu"):
            # The executor's default 0.5 cpus: as RLIMIT_CPU, 2 s of CPU for a 3 s run; as the
            # cgroup's cpu.max, the wall clock ends it first.
            status, r = self.call("POST", "/run", {"code": "while True: pass", "timeout": 3})
            self.assertEqual(status, 200, r)
            if ro:
                self.assertEqual((r["status"], r["signal"]), ("signaled", 24), r)  # SIGXCPU
                self.assertTrue(r["reason"].startswith("stopped: CPU time limit"), r)
            else:
                self.assertEqual(r["status"], "timeout", r)
        with self.subTest("memory"):
            status, r = self.call("POST", "/run", {"code": "b = bytearray(512 << 20)",
                                                   "memory": "64m", "timeout": 60})
            self.assertEqual(status, 200, r)
            self.assertEqual(r["limits"]["memory"], {"bytes": 64 << 20, "enforced_by":
                                                     "rlimit" if ro else "cgroup"}, r)
            if ro:  # RLIMIT_DATA: the allocation fails in the program
                self.assertEqual((r["status"], r["error"]["name"]), ("exited", "MemoryError"), r)
            else:
                self.assertEqual(r["status"], "oom", r)
                self.assertIn("out of memory (limit 64", r["reason"])
        step("requests answered")
        self.down(yaml)

    def test_control_masked_proc_is_refused_and_default_seccomp_warns(self):
        # Without procMount: Unmasked, Podman masks parts of /proc and nsbox refuses in one
        # line with the fix; the executor answers 500 with it.
        with self.subTest("masked /proc"):
            self.play(example_yaml(drop=("procMount: Unmasked",)))
            status, r = self.call("POST", "/run", {"code": "print(1)", "timeout": 60})
            self.assertEqual(status, 500, r)
            self.assertEqual((r["result"]["status"], r["result"]["exit_code"]), ("error", 125), r)
            self.assertEqual(r["result"]["error"]["step"], "mount /proc", r)
            self.assertEqual(len(r["error"].strip().splitlines()), 1, r)
            self.assertIn("'nsbox doctor' names the container setting", r["error"])
        self.down(os.path.join(WORK, "executor.yaml"))
        # Without the seccomp annotation, Podman's default profile refuses sethostname: an
        # optional step, skipped with a warning.
        annotation = ("container.seccomp.security.alpha.kubernetes.io/executor: "
                      "localhost/seccomp-nsbox.json")
        self.play(example_yaml(drop=(annotation,)))
        status, r = self.call("POST", "/run", {"code": "print(1)", "timeout": 60})
        self.assertEqual(status, 200, r)
        self.assertEqual(r["status"], "exited", r)
        self.assertTrue([w for w in r["warnings"] if "sethostname skipped" in w], r)
        self.down(os.path.join(WORK, "executor.yaml"))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    bad = len(result.failures) + len(result.errors) + len(result.skipped)
    print(f"vm: {result.testsRun - bad} passed, {bad} failed", flush=True)
    sys.exit(0 if bad == 0 and result.testsRun > 0 else 1)
