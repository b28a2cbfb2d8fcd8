# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox pool: sandboxes started ahead, each used for one run.

No run sees anything of an earlier run (globals, /tmp, /work, environment, processes, CPU time
counted, pid namespace); a run that exhausts memory, forks a daemon or kills its interpreter
harms neither the pool nor later runs; a preload that fails is an error at the pool's start; a
sandbox that died while it waited is never handed out; a SIGKILL of the pool leaves no process;
a per-run option that would need another sandbox is refused.

Every test works in a registry of its own (XDG_RUNTIME_DIR is a fresh directory while this module
runs), as test_session does."""
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from nsboxtest import NSBOX, NsboxTestCase, nsbox, wait_until

_saved_runtime_dir = None
PRIVATE_RUNTIME_DIR = None
SCIENCE = os.environ.get("NSBOX_ROOTFS_SCIENCE") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "rootfs", "science", "tree")


def setUpModule():
    global _saved_runtime_dir, PRIVATE_RUNTIME_DIR
    _saved_runtime_dir = os.environ.get("XDG_RUNTIME_DIR")
    PRIVATE_RUNTIME_DIR = tempfile.mkdtemp(prefix="nsbox-pool-test-")  # 0700, ours
    os.environ["XDG_RUNTIME_DIR"] = PRIVATE_RUNTIME_DIR


def tearDownModule():
    nsbox("kill", "--all")  # this module's own registry only
    if _saved_runtime_dir is None:
        os.environ.pop("XDG_RUNTIME_DIR", None)
    else:
        os.environ["XDG_RUNTIME_DIR"] = _saved_runtime_dir
    shutil.rmtree(PRIVATE_RUNTIME_DIR, ignore_errors=True)


def descendants(pid):
    """Every process below pid (by their parent's pid, read from /proc)."""
    kids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def alive(pid):
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def registry():
    return [json.loads(line) for line in nsbox("ps", "--json").stdout.splitlines()]


class PoolTestCase(NsboxTestCase):
    preload = "json"
    size = 2
    extra = ()

    def start_pool(self, *args, size=None, preload=None):
        name = "p" + secrets.token_hex(4)
        p = nsbox("pool", "start", name, "--size", str(size or self.size),
                  "--preload", preload if preload is not None else self.preload,
                  *self.extra, *args, timeout=300)
        if p.returncode != 0 and "rootfs" in p.stderr:
            self.skip_or_fail(f"no rootfs: {p.stderr.strip()}")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.addCleanup(nsbox, "pool", "stop", name)
        return name

    def pool_run(self, name, code, *args, input=None):
        p = nsbox("run", "--pool", name, "--json", *args, "--code", "-", input=code,
                  timeout=120)
        try:
            return json.loads(p.stdout)
        except ValueError:
            raise AssertionError(f"no JSON: stdout={p.stdout!r} stderr={p.stderr!r}")

    def pool_pid(self, name):
        return next(e["pid"] for e in registry() if e.get("name") == name)

    def wait_full(self, name):
        def full():
            st = json.loads(nsbox("pool", "status", name).stdout)
            return st["ready"] == st["size"]
        self.assertTrue(wait_until(full, timeout=120), f"pool {name} did not refill")


class TestPool(PoolTestCase):
    def test_runs_see_nothing_of_earlier_runs(self):
        name = self.start_pool()
        first = self.pool_run(name, (
            "import os, subprocess, resource, time\n"
            "secret = 42\n"
            "open('/tmp/mark', 'w').write('x'); open('/work/mark', 'w').write('x')\n"
            "os.environ['POOL_MARK'] = '1'\n"
            "t = time.process_time()\n"
            "while time.process_time() - t < 0.3: pass\n"
            "print(os.readlink('/proc/self/ns/pid'))\n"))
        self.assertEqual(first["exit_code"], 0, first)
        for _ in range(3):  # the sandbox that waited, and ones started since
            second = self.pool_run(name, (
                "import os, resource\n"
                "print(os.readlink('/proc/self/ns/pid'))\n"
                "print('secret' in globals(), sorted(k for k in globals() if not "
                "k.startswith('__')))\n"
                "print(os.path.exists('/tmp/mark'), os.path.exists('/work/mark'))\n"
                "print('POOL_MARK' in os.environ)\n"
                "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime < 0.25)\n"))
            self.assertEqual(second["exit_code"], 0, second)
            lines = second["stdout"].splitlines()
            # Another sandbox. (Not compared: the pid namespaces' inode numbers, which the
            # kernel reuses once a namespace is gone; test_concurrent_runs_have_their_own_pid_
            # namespace compares namespaces alive at the same time.)
            self.assertNotEqual(second["session_id"], first["session_id"])
            self.assertTrue(lines[0].startswith("pid:["), lines[0])
            self.assertEqual(lines[1], "False ['os', 'resource']")  # no preload name either
            self.assertEqual(lines[2:5], ["False False", "False", "True"])
            # In a cgroup leaf (not on rlimit hosts, where the interpreter's own CPU time above
            # says the same), the run's counters are its own sandbox's, not the 0.3 s before.
            if second["cgroup"] is not None:
                self.assertLess(second["cgroup"]["cpu_user_usec"], 250000, second["cgroup"])
            first = second

    def test_concurrent_runs_have_their_own_pid_namespace(self):
        name = self.start_pool(size=3)
        code = ("import os, time\ntime.sleep(1)\nprint(os.readlink('/proc/self/ns/pid'), "
                "sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:1])\n")
        procs = [subprocess.Popen([NSBOX, "run", "--pool", name, "--code", "-"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for _ in range(3)]
        outs = [p.communicate(code, timeout=120)[0] for p in procs]
        self.assertEqual([p.returncode for p in procs], [0, 0, 0], outs)
        self.assertEqual(len({o.split()[0] for o in outs}), 3, outs)
        # Each sees its own init as pid 1, not another run's processes.
        self.assertEqual({o.split(" ", 1)[1].strip() for o in outs}, {"[1]"})

    def test_no_process_of_an_earlier_run(self):
        name = self.start_pool()
        r = self.pool_run(name, (
            "import subprocess\n"
            "subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
            "print('forked')\n"))
        self.assertEqual(r["stdout"], "forked\n", r)
        listing = ("import os\n"
                   "print(sorted(open(f'/proc/{p}/comm').read().strip() for p in os.listdir("
                   "'/proc') if p.isdigit() and int(p) != os.getpid()))\n")
        for _ in range(2):
            r = self.pool_run(name, listing)
            self.assertEqual(r["exit_code"], 0, r)
            self.assertNotIn("sleep", r["stdout"])
        self.assertFalse([p for p in descendants(self.pool_pid(name))
                          if alive(p) and open(f"/proc/{p}/comm").read().strip() == "sleep"])

    def test_bad_runs_harm_neither_pool_nor_later_runs(self):
        name = self.start_pool("--memory", "256m")
        bad = {
            "memory": "x = []\nwhile True: x.append(bytearray(16 << 20))\n",
            "kill": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "daemon": ("import os\nif os.fork() == 0:\n    os.setsid()\n"
                       "    if os.fork() == 0:\n        import time; time.sleep(1000)\n"
                       "print('parent')\n"),
            "exit": "import os\nos._exit(3)\n",
        }
        for what, code in bad.items():
            r = self.pool_run(name, code)
            self.assertNotEqual(r.get("status"), None, (what, r))
            after = self.pool_run(name, "print(6 * 7)")
            self.assertEqual((what, after["exit_code"], after["stdout"]), (what, 0, "42\n"), after)
        st = json.loads(nsbox("pool", "status", name).stdout)
        self.assertEqual(st["failures"], 0, st)
        self.wait_full(name)

    def test_per_run_options(self):
        name = self.start_pool()
        r = self.pool_run(name, "while True: pass\n", "--timeout", "1")
        self.assertEqual(r["status"], "timeout", r)
        self.assertEqual(r["exit_code"], 124, r)
        r = self.pool_run(name, "print('y' * 100)\n", "--output-limit", "10")
        self.assertTrue(r["stdout_truncated"], r)
        p = nsbox("run", "--pool", name, "-i", "--", "cat", input="from stdin")
        self.assertEqual((p.returncode, p.stdout), (0, "from stdin"), p.stderr)
        p = nsbox("run", "--pool", name, "--", "sh", "-c", "exit 7")
        self.assertEqual(p.returncode, 7, p.stderr)
        out = tempfile.mkdtemp(prefix="nsbox-pool-copy-")
        self.addCleanup(shutil.rmtree, out, ignore_errors=True)
        p = nsbox("run", "--pool", name, "--copy-out", f"/work/o:{out}", "--code", "-",
                  input="import os\nos.makedirs('/work/o')\nopen('/work/o/a', 'w').write('hi')\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "o", "a")) as f:
            self.assertEqual(f.read(), "hi")

    def test_result_has_the_fields_of_a_run(self):
        name = self.start_pool()
        r = self.pool_run(name, "print(1)\n")
        p = nsbox("run", "--json", *self.extra, "--", "python3", "-c", "print(1)")
        run = json.loads(p.stdout)
        self.assertEqual(set(run) - set(r), set())
        # A pool run's own: the sandbox's id, its step (the preload was the first); its code is
        # a session's code step, so a notebook cell with outputs (test_cells.py).
        self.assertEqual(set(r) - set(run), {"session_id", "step", "interpreter", "outputs"})
        self.assertEqual(r["outputs"], [])
        self.assertEqual(r["step"], 2)
        self.assertEqual(r["limits"].keys(), run["limits"].keys())
        self.assertEqual(r["limits"]["workdir"], run["limits"]["workdir"])

    def test_options_needing_another_sandbox_are_refused(self):
        name = self.start_pool()
        # (--memory is a run's own, at most the pool's: test_pool_run.py)
        for opt in (["--rootfs", "/"], ["-v", "/tmp:/x"], ["--network", "loopback"],
                    ["--tmpfs", "/x"], ["--cgroup", "off"]):
            p = nsbox("run", "--pool", name, *opt, "--", "true")
            self.assertOneLineError(p, contains="does not take " + opt[0])
        p = nsbox("run", "--pool", name, "--json", "--rootfs", "/", "--", "true")
        self.assertOneLineError(p, contains="does not take --rootfs")
        r = json.loads(p.stdout)  # said in the result too, as a run's own failures are
        self.assertEqual((r["status"], r["exit_code"], r["error"]["step"]),
                         ("error", 125, "arguments"))
        self.assertIn("does not take --rootfs", r["reason"])
        p = nsbox("run", "--pool", "no-such-pool", "--", "true")
        self.assertOneLineError(p, contains="no pool 'no-such-pool'")
        p = nsbox("run", "--pool", "no-such-pool", "--json", "--", "true")
        self.assertOneLineError(p, contains="no pool 'no-such-pool'")
        self.assertEqual(json.loads(p.stdout)["error"]["step"], "pool")
        p = nsbox("run", "--pool", "--", "true")
        self.assertEqual(p.returncode, 125, p.stderr)

    def test_bad_pool_start_arguments(self):
        for args, words in ((["--size", "0"], "invalid --size"),
                            (["--size", "2", "--preload", "os;print(1)"], "invalid --preload"),
                            (["--size", "2", "--preload", "a..b"], "invalid --preload"),
                            (["--preload", "json"], "needs --size"),
                            (["--size", "1", "--workspace", "w"], "--workspace"),
                            (["--size", "1", "--pid", "host"], "--pid host"),
                            # A writable bind would carry what one run wrote (a json.py the
                            # next run's imports find) into every later run of the pool.
                            (["--size", "1", "-v", "/tmp:/work/shared:rw"],
                             "does not take the writable bind -v /tmp:/work/shared:rw")):
            p = nsbox("pool", "start", "p" + secrets.token_hex(4), *args, *self.extra)
            self.assertOneLineError(p, contains=words)

    def test_usage_errors_are_one_line(self):
        for args in (["pool"], ["pool", "bogus"], ["pool", "start"], ["pool", "status"],
                     ["pool", "stop"], ["pool", "ls", "x"], ["pool", "stop", "no-such"],
                     ["pool", "status", "no-such"]):
            with self.subTest(args=args):
                p = nsbox(*args)
                self.assertOneLineError(p)
                self.assertEqual(p.stdout, "")

    def test_failing_preload_is_an_error_at_start_and_leaves_nothing(self):
        before = {e["run_id"] for e in registry()}
        p = nsbox("pool", "start", "pbad", "--size", "2", "--preload", "json,no_such_mod_x1",
                  *self.extra, timeout=300)
        self.assertOneLineError(p, contains="no_such_mod_x1")
        self.assertIn("preload", p.stderr)
        self.assertEqual({e["run_id"] for e in registry()}, before)
        self.assertFalse(os.path.exists(os.path.join(PRIVATE_RUNTIME_DIR, "nsbox", "pbad.name")))

    def test_ps_kill_ls(self):
        name = self.start_pool()
        pool = [e for e in registry() if e.get("name") == name]
        self.assertEqual(len(pool), 1)
        self.assertEqual(pool[0]["labels"].get("nsbox.pool"), name)
        members = [e for e in registry() if e["labels"].get("nsbox.pool.member") == name]
        self.assertEqual(len(members), self.size)
        self.assertIn(name, nsbox("pool", "ls").stdout)
        pids = descendants(pool[0]["pid"]) + [pool[0]["pid"]]
        p = nsbox("kill", name)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(wait_until(lambda: not any(alive(x) for x in pids), timeout=10))
        self.assertFalse([e for e in registry()
                          if e.get("name") == name or
                          e["labels"].get("nsbox.pool.member") == name])

    def test_stop_waits_until_all_is_gone(self):
        name = self.start_pool()
        pool_pid = self.pool_pid(name)
        pids = descendants(pool_pid)
        self.assertGreater(len(pids), self.size * 2)
        p = nsbox("pool", "stop", name)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse([x for x in pids if alive(x)])  # every sandbox, at once
        # The pool itself: its exit is what ended the connection (it may not be reaped yet).
        self.assertTrue(wait_until(lambda: not alive(pool_pid), timeout=2))
        self.assertOneLineError(nsbox("pool", "stop", name), contains="no pool")

    def test_sigkill_of_the_pool_leaves_no_process(self):
        name = self.start_pool()
        pool_pid = self.pool_pid(name)
        pids = descendants(pool_pid)
        # Its sandboxes' supervisors, inits and interpreters: all below the pool.
        self.assertGreaterEqual(len(pids), self.size * 3)
        os.kill(pool_pid, signal.SIGKILL)
        self.assertTrue(wait_until(lambda: not any(alive(x) for x in pids), timeout=10),
                        [x for x in pids if alive(x)])
        # The next nsbox sweeps the dead records (and their sockets).
        self.assertFalse([e for e in registry() if e.get("name") == name or
                          e["labels"].get("nsbox.pool.member") == name])

    def test_a_sandbox_that_died_waiting_is_never_handed_out(self):
        name = self.start_pool(size=2)
        members = [e for e in registry() if e["labels"].get("nsbox.pool.member") == name]
        for e in members:  # both waiting sandboxes' supervisors: gone at once
            os.kill(e["pid"], signal.SIGKILL)
        for _ in range(3):
            r = self.pool_run(name, "print('fine')\n")
            self.assertEqual(r["stdout"], "fine\n", r)
            self.assertNotIn(r["session_id"], {e["run_id"] for e in members})

    def test_a_sandbox_that_sees_the_pool_socket_cannot_use_it(self):
        """A sandbox that sees the pool's socket (a bind of the runtime directory; connect(2)
        works through a read-only one) can neither stop the pool nor take its sandboxes. An
        ordinary user's sandbox has the caller's uid on the host: only the user namespace
        check keeps it out (as for a session's socket, test_session)."""
        name = self.start_pool(size=1)
        pool_id = next(e["run_id"] for e in registry() if e.get("name") == name)
        probe = ("import socket, sys\n"
                 "for op in ('take', 'stop'):\n"
                 "    s = socket.socket(socket.AF_UNIX)\n"
                 "    try:\n"
                 "        s.connect(sys.argv[1])\n"
                 "        s.sendall(b'{\"op\":\"' + op.encode() + b'\"}\\n')\n"
                 "        print(op, s.recv(4096)[:40])\n"
                 "    except OSError as e:\n"
                 "        print(op, 'refused', e.errno)\n")
        p = nsbox("run", "--cgroup", "off", "-v", f"{PRIVATE_RUNTIME_DIR}:/runtime:ro", "--",
                  "python3", "-c", probe, f"/runtime/nsbox/{pool_id}.sock")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("\"id\"", p.stdout, "a sandbox took a sandbox of the pool")
        self.assertNotIn("stopped", p.stdout, "a sandbox stopped the pool")
        st = json.loads(nsbox("pool", "status", name).stdout)
        self.assertEqual((st["served"], st["leased"]), (0, 0), st)
        self.assertEqual(self.pool_run(name, "print('fine')\n")["stdout"], "fine\n")


class TestPoolLease(PoolTestCase):
    def test_a_taken_sandbox_ends_with_its_lease(self):
        """A client that takes a sandbox and goes away without a step leaves nothing: the
        connection was the lease."""
        import socket
        name = self.start_pool(size=1)
        sock = os.path.join(PRIVATE_RUNTIME_DIR, "nsbox",
                            next(e["run_id"] for e in registry() if e.get("name") == name) +
                            ".sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(sock)
            s.sendall(b'{"op":"take"}\n')
            taken = json.loads(s.makefile().readline())
            member = next(e for e in registry() if e["run_id"] == taken["id"])
            pids = [member["pid"]] + descendants(member["pid"])
            self.assertGreaterEqual(len(pids), 3)
            time.sleep(0.2)
            self.assertTrue(all(alive(x) for x in pids))  # held while the lease is
        self.assertTrue(wait_until(lambda: not any(alive(x) for x in pids), timeout=10))
        self.wait_full(name)  # and replaced
        r = self.pool_run(name, "print(1)\n")
        self.assertNotEqual(r["session_id"], taken["id"])


    def test_a_step_queued_behind_the_run_does_not_run(self):
        """Single use holds against a second request on the member's socket, queued while the
        run runs: the run may have left a thread in the interpreter (a session's steps are
        spared it) that would see the next code."""
        import socket
        name = self.start_pool(size=1)
        sock = os.path.join(PRIVATE_RUNTIME_DIR, "nsbox",
                            next(e["run_id"] for e in registry() if e.get("name") == name) +
                            ".sock")
        spy = ("import os, threading, time\n"
               "def spy():\n"
               "    while not os.path.exists('/tmp/secret'):\n"
               "        time.sleep(0.01)\n"
               "    open('/tmp/stolen', 'w').write(open('/tmp/secret').read())\n"
               "threading.Thread(target=spy, daemon=True).start()\n"
               "time.sleep(1)\n")
        victim = ("import os, time\nopen('/tmp/secret', 'w').write('s3cret')\ntime.sleep(0.3)\n"
                  "print(os.path.exists('/tmp/stolen'))\n")
        with socket.socket(socket.AF_UNIX) as lease, socket.socket(socket.AF_UNIX) as a, \
                socket.socket(socket.AF_UNIX) as b:
            lease.settimeout(30)
            lease.connect(sock)
            lease.sendall(b'{"op":"take"}\n')
            taken = json.loads(lease.makefile().readline())
            for s, code in ((a, spy), (b, victim)):
                s.settimeout(30)
                s.connect(taken["socket"])
                s.sendall(json.dumps({"op": "code", "code": code}).encode() + b"\n")
                time.sleep(0.1)  # the spy's step runs; the second waits behind it
            ra = json.loads(a.makefile().readline())
            rb = json.loads(b.makefile().readline() or "{}")
        self.assertEqual((ra.get("status"), ra.get("step")), ("exited", 2), ra)
        self.assertNotIn("step", rb, "a second step ran in a single-use sandbox (step "
                         f"{rb.get('step')}, the spy saw its file: {rb.get('stdout')!r})")
        self.assertIn("single-use", rb.get("error", ""), rb)


class TestPoolScience(PoolTestCase):
    """The issue's workload: pandas preloaded in the science rootfs."""
    preload = "pandas,numpy"
    size = 1

    def setUp(self):
        if not os.path.isdir(SCIENCE):
            self.skip_or_fail(f"no science rootfs at {SCIENCE} (NSBOX_ROOTFS_SCIENCE)")
        self.extra = ("--rootfs", SCIENCE, "--memory", "1g")

    def test_pandas_preloaded(self):
        name = self.start_pool()
        r = self.pool_run(name, (
            "import sys\nprint('pandas' in sys.modules, 'pandas' in globals())\n"
            "import pandas as pd\n"
            "print(pd.DataFrame({'a': [1, 2, 1], 'b': [3, 4, 5]}).groupby('a').sum())\n"))
        self.assertEqual(r["exit_code"], 0, r)
        self.assertEqual(r["stdout"].splitlines()[0], "True False")
        self.assertIn("8", r["stdout"])


if __name__ == "__main__":
    unittest.main()
