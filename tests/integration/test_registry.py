# SPDX-License-Identifier: LGPL-2.1-or-later
"""nsbox ps and nsbox kill: running sandboxes of this user, listed and killed whole; names and
labels.

Every test here works in a registry of its own: XDG_RUNTIME_DIR is a fresh directory while this
module runs, so `nsbox kill --all` never reaches the caller's own sandboxes (nor another test
run's)."""
import json
import os
import secrets
import stat
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

from nsboxtest import NSBOX, NsboxTestCase, nsbox, processes_with, wait_until

_saved_runtime_dir = None
PRIVATE_RUNTIME_DIR = None


def setUpModule():
    global _saved_runtime_dir, PRIVATE_RUNTIME_DIR
    _saved_runtime_dir = os.environ.get("XDG_RUNTIME_DIR")
    PRIVATE_RUNTIME_DIR = tempfile.mkdtemp(prefix="nsbox-registry-test-")  # 0700, ours
    os.environ["XDG_RUNTIME_DIR"] = PRIVATE_RUNTIME_DIR


def tearDownModule():
    if _saved_runtime_dir is None:
        os.environ.pop("XDG_RUNTIME_DIR", None)
    else:
        os.environ["XDG_RUNTIME_DIR"] = _saved_runtime_dir
    shutil.rmtree(PRIVATE_RUNTIME_DIR, ignore_errors=True)


class TestPsKill(NsboxTestCase):
    def setUp(self):
        # Never the caller's registry: `kill --all` below must reach this test's runs only.
        self.assertEqual(registry_dir(), os.path.join(PRIVATE_RUNTIME_DIR, "nsbox"))

    def start(self, token, *opts):
        proc = subprocess.Popen(
            [NSBOX, "run", "--json", "--timeout", "60", *opts, "--", "python3", "-c",
             "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n"
             "print('ready', flush=True); time.sleep(60)", token],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.stderr.close)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.assertTrue(wait_until(lambda: len(processes_with(token)) >= 3, timeout=10))
        return proc

    def entries(self):
        p = nsbox("ps", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(l) for l in p.stdout.splitlines()]

    def test_ps_and_kill_one(self):
        token = "ps-" + secrets.token_hex(6)
        proc = self.start(token)
        mine = [e for e in self.entries() if token in " ".join(e["argv"])]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0]["pid"], proc.pid)
        self.assertEqual(mine[0]["limits"]["pids"], 64)
        table = nsbox("ps").stdout
        self.assertIn(mine[0]["run_id"], table)

        self.assertIn("python3 -c", table)  # the program, not nsbox's options
        self.assertNotIn("--timeout 60", table)
        start = time.monotonic()
        p = nsbox("kill", mine[0]["run_id"][:8])  # a unique prefix will do
        self.assertEqual((p.returncode, p.stdout), (0, f"killed {mine[0]['run_id']}\n"), p.stderr)
        proc.wait(timeout=10)
        self.assertLess(time.monotonic() - start, 1.5)
        r = json.loads(proc.stdout.read())
        self.assertEqual((proc.returncode, r["status"], r["signal"]), (137, "killed", 9))
        # Without --json, nsbox says why on stderr.
        token = "msg-" + secrets.token_hex(6)
        proc = subprocess.Popen([NSBOX, "run", "--", "python3", "-c", "import time; time.sleep(60)",
                                 token], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.stderr.close)
        self.assertTrue(wait_until(lambda: len(processes_with(token)) >= 2, timeout=10))
        self.assertEqual(nsbox("kill", "--all").returncode, 0)
        self.assertEqual(proc.wait(timeout=10), 137)
        self.assertIn("nsbox: killed on request (nsbox kill)", proc.stderr.read())
        self.assertEqual(processes_with(token), [])
        self.assertFalse([e for e in self.entries() if token in " ".join(e["argv"])])

    def test_kill_all_and_unknown(self):
        tokens = ["all-" + secrets.token_hex(6) for _ in range(2)]
        procs = [self.start(t) for t in tokens]
        p = nsbox("kill", "--all")
        self.assertEqual(p.returncode, 0, p.stderr)
        for proc in procs:
            self.assertEqual(proc.wait(timeout=10), 137)
        for t in tokens:
            self.assertEqual(processes_with(t), [])
        p = nsbox("kill", "0123456789abcdef0123456789abcdef")
        self.assertOneLineError(p, code=1, contains="no running sandbox")
        self.assertEqual(nsbox("kill", "--all").returncode, 0)  # nothing left: fine
        self.assertOneLineError(nsbox("kill"), contains="usage: nsbox kill")

    def start_and_sigkill(self, token):
        proc = self.start(token)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        self.assertTrue(wait_until(lambda: not processes_with(token), timeout=5))
        self.assertEqual(len(record_files(token)), 1, "SIGKILL leaves the record behind")

    def test_records_of_killed_nsbox_are_dropped(self):
        token = "stale-" + secrets.token_hex(6)
        self.start_and_sigkill(token)
        self.assertFalse([e for e in self.entries() if token in " ".join(e["argv"])])

    def test_next_run_removes_a_killed_nsbox_record(self):
        # Without `nsbox ps`: the next `nsbox run` removes the record a SIGKILLed nsbox left.
        token = "stale-run-" + secrets.token_hex(6)
        self.start_and_sigkill(token)
        p = nsbox("run", "--", "true")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(record_files(token), [])


    def test_a_record_without_a_start_time_is_dropped(self):
        # A pid that is gone has no start time (0): a record claiming 0 must not stay "live".
        nsbox("ps")  # makes the directory
        token = "nostart-" + secrets.token_hex(6)
        run_id = secrets.token_hex(16)
        with open(os.path.join(registry_dir(), run_id + ".json"), "w") as f:
            json.dump({"run_id": run_id, "pid": 2 ** 22 + 1, "start": 0, "started": 0,
                       "argv": [token], "limits": {}}, f)
        self.assertFalse([e for e in self.entries() if token in " ".join(e["argv"])])
        self.assertEqual(record_files(token), [])


class TestNamesAndLabels(NsboxTestCase):
    def setUp(self):
        self.assertEqual(registry_dir(), os.path.join(PRIVATE_RUNTIME_DIR, "nsbox"))

    def popen(self, *opts, code="import time; time.sleep(60)", stdin=None):
        proc = subprocess.Popen([NSBOX, "run", "--json", "--timeout", "60", *opts],
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.close()
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.stderr.close)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def start(self, *opts, token):
        proc = self.popen(*opts, "--", "python3", "-c", "import time; time.sleep(60)", token)
        self.assertTrue(wait_until(lambda: len(processes_with(token)) >= 2, timeout=10))
        return proc

    def ps(self, *filters):
        args = [a for f in filters for a in ("--filter", f)]
        p = nsbox("ps", "--json", *args)
        self.assertEqual(p.returncode, 0, p.stderr)
        return [json.loads(l) for l in p.stdout.splitlines()]

    def test_a_name_is_unique_while_its_run_lasts(self):
        name = "web-" + secrets.token_hex(4)
        token = "named-" + secrets.token_hex(6)
        first = self.start("--name", name, token=token)
        (entry,) = self.ps("name=^" + name + "$")
        self.assertEqual((entry["name"], entry["pid"]), (name, first.pid))
        # Docker's "name already in use": refused, naming the holder, nothing run.
        p = nsbox("run", "--name", name, "--", "python3", "-c", "print('RAN')")
        self.assertOneLineError(p, contains=f"the name '{name}' is already in use")
        self.assertIn(entry["run_id"], p.stderr)
        self.assertNotIn("RAN", p.stdout)
        p = nsbox("run", "--json", "--name", name, "--", "true")
        r = json.loads(p.stdout)
        self.assertEqual((p.returncode, r["status"], r["error"]["step"]), (125, "error", "name"))
        # Killed by name; then the name is free again.
        p = nsbox("kill", name)
        self.assertEqual((p.returncode, p.stdout), (0, f"killed {entry['run_id']}\n"), p.stderr)
        r = json.loads(first.communicate(timeout=10)[0])
        self.assertEqual((first.returncode, r["status"], r["name"]), (137, "killed", name))
        p = nsbox("run", "--json", "--name", name, "--", "true")
        self.assertEqual((p.returncode, json.loads(p.stdout)["name"]), (0, name), p.stderr)

    def test_of_concurrent_runs_with_one_name_exactly_one_starts(self):
        name = "race-" + secrets.token_hex(4)

        def one(_):
            return nsbox("run", "--name", name, "--", "python3", "-c",
                         "import time; print('RAN', flush=True); time.sleep(4)")
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(one, range(8)))
        self.assertEqual(sorted(p.returncode for p in results), [0] + [125] * 7,
                         [p.stderr for p in results])
        for p in results:
            if p.returncode == 125:
                self.assertOneLineError(p, contains="is already in use")
        self.assertEqual(sum(p.stdout == "RAN\n" for p in results), 1)

    def test_the_name_of_a_sigkilled_nsbox_is_free_again(self):
        name = "stale-" + secrets.token_hex(4)
        token = "stalename-" + secrets.token_hex(6)
        proc = self.start("--name", name, token=token)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        self.assertTrue(wait_until(lambda: not processes_with(token), timeout=5))
        self.assertTrue(os.path.exists(os.path.join(registry_dir(), name + ".name")))
        p = nsbox("run", "--name", name, "--", "true")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_invalid_names_and_labels(self):
        for bad in ("-x", "a/b", "", ".hidden", "x" * 129, "a b", "\x1b[31m"):
            with self.subTest(name=bad):
                self.assertOneLineError(nsbox("run", "--name", bad, "--", "true"),
                                        contains="--name")
        for bad in ("=v", "k y=v", "k=\x1b]52;c;aGk=\x07", "k=a\nb", "k=\u009b31m"):
            with self.subTest(label=bad):
                p = nsbox("run", "--label", bad, "--", "true")
                self.assertOneLineError(p, contains="--label")
                self.assertNotIn("\x1b", p.stderr)
        self.assertOneLineError(nsbox("ps", "--filter", "colour=red"), contains="invalid filter")
        self.assertOneLineError(nsbox("ps", "--filter", "name=("), contains="regular expression")
        self.assertOneLineError(nsbox("kill", "--all", "x"), contains="usage: nsbox kill")

    def test_labels_select_for_ps_and_kill(self):
        tag = secrets.token_hex(4)
        a = self.start("--name", "a-" + tag, "--label", f"suite=s1-{tag}", "--label", "role=web",
                       token="la-" + tag)
        b = self.start("--label", f"suite=s1-{tag}", token="lb-" + tag)
        c = self.start("--label", f"suite=s2-{tag}", "--label", "empty", token="lc-" + tag)
        ids = {}
        for e in self.ps():
            for proc, key in ((a, "a"), (b, "b"), (c, "c")):
                if e["pid"] == proc.pid:
                    ids[key] = e
        self.assertEqual(ids["a"]["labels"], {"suite": f"s1-{tag}", "role": "web"})
        self.assertEqual((ids["b"]["name"], ids["c"]["labels"]), (None, {"suite": f"s2-{tag}",
                                                                         "empty": ""}))

        def selected(*filters):
            return sorted(k for k, e in ids.items()
                          if e["run_id"] in {x["run_id"] for x in self.ps(*filters)})
        self.assertEqual(selected(f"label=suite=s1-{tag}"), ["a", "b"])
        self.assertEqual(selected("label=suite"), ["a", "b", "c"])
        self.assertEqual(selected(f"label=suite=s1-{tag}", "label=role"), ["a"])  # all labels
        self.assertEqual(selected("label=empty="), ["c"])
        self.assertEqual(selected("name=^a-"), ["a"])
        self.assertEqual(selected("id=" + ids["b"]["run_id"][:10]), ["b"])
        self.assertEqual(selected("id=" + ids["b"]["run_id"][:10], "id=" + ids["c"]["run_id"]),
                         ["b", "c"])  # any of one kind
        table = nsbox("ps", "--filter", "name=^a-" + tag).stdout
        self.assertIn("a-" + tag, table)
        self.assertNotIn(ids["b"]["run_id"], table)

        p = nsbox("kill", "--label", f"suite=s1-{tag}")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(p.stdout.splitlines()),
                         sorted(f"killed {ids[k]['run_id']}" for k in ("a", "b")))
        for proc in (a, b):
            r = json.loads(proc.communicate(timeout=10)[0])
            self.assertEqual((proc.returncode, r["status"]), (137, "killed"))
        self.assertEqual((r["labels"], r["name"]), ({"suite": f"s1-{tag}"}, None))  # b's
        self.assertIsNone(c.poll())
        self.assertOneLineError(nsbox("kill", "--label", f"suite=s1-{tag}"), code=1,
                                contains="no running sandbox has the label")
        self.assertEqual(nsbox("kill", "--label", "empty").returncode, 0)
        self.assertEqual(c.wait(timeout=10), 137)

    def test_ps_shows_the_code_file(self):
        with tempfile.TemporaryDirectory() as d:
            step = os.path.join(d, "step.py")
            with open(step, "w") as f:
                f.write("import time; time.sleep(60)\n")
            os.chmod(d, 0o755)
            tag = secrets.token_hex(4)
            self.popen("--label", f"t={tag}", "--code", step, "--", "arg")
            self.popen("--label", f"t={tag}", "--code", "-",
                       stdin="import time; time.sleep(60)\n")
            self.assertTrue(wait_until(lambda: len(self.ps(f"label=t={tag}")) == 2, timeout=10))
            commands = sorted(e["command"] for e in self.ps(f"label=t={tag}"))
            self.assertEqual(commands, sorted([["python3", "<stdin>"], ["python3", step, "arg"]]))
            table = nsbox("ps", "--filter", f"label=t={tag}").stdout
            self.assertIn(f"python3 {step} arg", table)
            self.assertIn("python3 <stdin>", table)
            self.assertEqual(nsbox("kill", "--label", f"t={tag}").returncode, 0)

    def test_ps_escapes_the_command_for_the_terminal(self):
        # The COMMAND column is the caller's argv (code on the command line, perhaps a model's):
        # an OSC 52 clipboard write, a title, a C1 CSI, a right-to-left override and a newline
        # in it are shown escaped, and the run stays on one line of the table.
        tag = secrets.token_hex(4)
        code = ("import time\n#\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\u009b6n\u202e\n"
                "time.sleep(60)")
        self.popen("--label", f"t={tag}", "--", "python3", "-c", code)
        self.assertTrue(wait_until(lambda: len(self.ps(f"label=t={tag}")) == 1, timeout=10))
        table = nsbox("ps", "--filter", f"label=t={tag}").stdout
        self.assertNotIn("\x1b", table)
        self.assertNotIn("\u009b", table)
        self.assertNotIn("\u202e", table)
        self.assertIn("python3 -c import time\\x0a#\\x1b]52;c;cHduZWQ=\\x07\\x1b]0;pwned\\x07"
                      "\\xc2\\x9b6n\\xe2\\x80\\xae\\x0atime.sleep(60)", table)
        self.assertEqual(len(table.splitlines()), 2)  # the header and the run
        # ps --json: the value whole, the hidden characters as \u escapes.
        raw = nsbox("ps", "--json", "--filter", f"label=t={tag}").stdout
        self.assertNotIn("\u009b", raw)
        self.assertIn("\\u009b6n\\u202e", raw)
        self.assertEqual(json.loads(raw)["command"][2], code)
        self.assertEqual(nsbox("kill", "--label", f"t={tag}").returncode, 0)

    def test_a_plain_run_has_no_name(self):
        p = nsbox("run", "--json", "--", "true")
        r = json.loads(p.stdout)
        self.assertEqual((r["name"], r["labels"]), (None, {}))


def registry_dir():
    """registry.c's choice: $XDG_RUNTIME_DIR/nsbox if it is ours and closed to others, else
    /run/user/UID/nsbox if so, else root's /run/nsbox/registry, another's /tmp/nsbox-UID."""
    uid = os.getuid()
    for base in (os.environ.get("XDG_RUNTIME_DIR"), f"/run/user/{uid}"):
        if (base and base.startswith("/") and os.path.isdir(base) and not os.path.islink(base)
                and os.stat(base).st_uid == uid and not os.stat(base).st_mode & 0o022):
            return f"{base}/nsbox"
    return "/run/nsbox/registry" if uid == 0 else f"/tmp/nsbox-{uid}"


def record_files(token):
    """The registry records naming token, read from the directory itself."""
    d = registry_dir()
    found = []
    for name in os.listdir(d):
        with open(os.path.join(d, name)) as f:
            if token in f.read():
                found.append(name)
    return found


if __name__ == "__main__":
    unittest.main()


def _without_runtime_dir():
    """The environment of a caller without XDG_RUNTIME_DIR (cron, a service, su -)."""
    return {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}


class TestRegistryPlace(NsboxTestCase):
    """Where the registry is when XDG_RUNTIME_DIR and /run/user/UID are missing: never a
    directory another user could have made first."""

    # Each user runs the tests its id can: root acts as other users (setpriv); an ordinary user
    # checks its own fallback. A skip would count as a failure under NSBOX_TESTS_MUST_WORK.
    if os.getuid() != 0:
        def test_a_fallback_that_is_not_a_private_directory_is_refused_in_words(self):
            uid = os.getuid()
            fallback = f"/tmp/nsbox-{uid}"
            if os.path.exists(f"/run/user/{uid}"):
                self.skipTest(f"/run/user/{uid} exists: the registry is there")
            if os.path.lexists(fallback):
                # An earlier run of this user made it (the setup's demo, say): it must be the
                # private directory nsbox makes, and be used.
                st = os.lstat(fallback)
                self.assertTrue(stat.S_ISDIR(st.st_mode) and st.st_uid == uid and
                                stat.S_IMODE(st.st_mode) == 0o700, st)
                p = nsbox("ps", env=_without_runtime_dir())
                self.assertEqual(p.returncode, 0, p.stderr)
                return
            self._refused_when_a_symlink(uid, fallback)

    def _refused_when_a_symlink(self, uid, fallback):
        with tempfile.TemporaryDirectory() as target:
            os.symlink(target, fallback)  # as another user's squat would point somewhere
            try:
                p = nsbox("ps", env=_without_runtime_dir())
                run = nsbox("run", "--name", "squatted", "--", "true",
                            env=_without_runtime_dir())
            finally:
                os.unlink(fallback)
        for q in (p, run):
            self.assertEqual(q.returncode, 125, q.stderr)
            self.assertIn(f"{fallback}, is not a directory of yours with mode 0700 (it is a "
                          f"symlink of uid {uid}", q.stderr)
            self.assertIn("set XDG_RUNTIME_DIR", q.stderr)

    def _as_uid(self, uid, *args, env=None):
        return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                               *args], capture_output=True, text=True, env=env, cwd="/",
                              timeout=60)

    if os.getuid() == 0:
        def test_a_squat_by_another_user_is_refused_naming_the_squatter(self):
            self._squat_by_another_user()

        def test_no_writable_tmp_falls_back_to_dev_shm(self):
            # A container with a read-only root has no writable /tmp: the registry goes to
            # /dev/shm/nsbox-UID (made as private as the /tmp one). Here /tmp is covered with a
            # read-only tmpfs in a mount namespace of the test's, and a user of no registry yet
            # runs nsbox ps there (from a copy outside /tmp).
            if not shutil.which("unshare") or not shutil.which("setpriv"):
                self.skip_or_fail("needs unshare(1) and setpriv(1)")
            uid = 62000 + secrets.randbelow(1000)
            place = f"/dev/shm/nsbox-{uid}"
            bindir = tempfile.mkdtemp(prefix="nsbox-registry-test-", dir="/var/tmp")
            try:
                os.chmod(bindir, 0o755)
                shutil.copy(NSBOX, os.path.join(bindir, "nsbox"))
                script = ('mount -t tmpfs -o ro tmpfs /tmp && exec setpriv --reuid="$1" '
                          '--regid="$1" --clear-groups env -i PATH=/usr/bin:/bin "$2" ps')
                p = subprocess.run(["unshare", "--mount", "--propagation", "private", "--",
                                    "sh", "-c", script, "sh", str(uid),
                                    os.path.join(bindir, "nsbox")],
                                   capture_output=True, text=True, timeout=60, cwd="/")
                self.assertEqual(p.returncode, 0, p.stderr)
                st = os.lstat(place)
                self.assertTrue(stat.S_ISDIR(st.st_mode) and st.st_uid == uid and
                                stat.S_IMODE(st.st_mode) == 0o700, st)
            finally:
                shutil.rmtree(bindir)
                if os.path.isdir(place):
                    shutil.rmtree(place)

        def test_root_fallback_is_run_nsbox_not_tmp(self):
            self._root_fallback()

    def _parents_case(self, uid, base, as_user):
        """XDG_RUNTIME_DIR=base/run (uid's own, 0700): refused while base is another user's or
        writable by others without the sticky bit, used once base is safe. as_user runs nsbox
        as uid."""
        run_dir = os.path.join(base, "run")
        env = {"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": run_dir,
               "NSBOX_ROOTFS": os.environ.get("NSBOX_ROOTFS", "")}
        cases = []
        if os.getuid() == 0:
            cases.append((4242, 0o755, False))  # another user's: it can rename run away
        cases += [(uid, 0o777, False),  # anyone can rename run away
                  (uid, 0o1777, True),  # sticky, as /tmp: only its owner can
                  (uid, 0o755, True)]
        for owner, mode, ok in cases:
            with self.subTest(owner=owner, mode=oct(mode)):
                if os.getuid() == 0:
                    os.chown(base, owner, owner)
                os.chmod(base, mode)
                run = as_user(NSBOX, "run", "--cgroup", "off", "--", "true", env=env)
                ps = as_user(NSBOX, "ps", env=env)
                if ok:
                    self.assertEqual((run.returncode, ps.returncode), (0, 0),
                                     run.stderr + ps.stderr)
                    self.assertTrue(os.path.isdir(os.path.join(run_dir, "nsbox")))
                    continue
                self.assertOneLineError(run, contains=f"/nsbox, lies below {base} (uid {owner}, "
                                                      f"mode {mode:04o}), which another user can "
                                                      "change: set XDG_RUNTIME_DIR")
                self.assertEqual(ps.returncode, 125, ps.stderr)
                self.assertIn(f"lies below {base} ", ps.stderr)

    if os.getuid() == 0:
        def test_a_registry_below_a_directory_another_user_can_change_is_refused(self):
            # The whole path is checked, not only the registry's own directory: root makes
            # base for a victim uid, owned by another user (or open to all), and the victim's
            # own 0700 run/ in it as XDG_RUNTIME_DIR.
            if not shutil.which("setpriv"):
                self.skip_or_fail("needs setpriv to act as another user")
            victim = 63000 + secrets.randbelow(1000)
            base = tempfile.mkdtemp(prefix="nsbox-registry-parents-")
            self.addCleanup(shutil.rmtree, base, True)
            os.mkdir(os.path.join(base, "run"), 0o700)
            os.chown(os.path.join(base, "run"), victim, victim)
            self._parents_case(victim, base,
                               lambda *a, env: self._as_uid(victim, *a, env=env))
    else:
        def test_a_registry_below_a_directory_others_can_change_is_refused(self):
            # An ordinary user's own parent directory, opened to all without the sticky bit.
            base = tempfile.mkdtemp(prefix="nsbox-registry-parents-")
            self.addCleanup(shutil.rmtree, base, True)
            os.mkdir(os.path.join(base, "run"), 0o700)
            self._parents_case(os.getuid(), base,
                               lambda *a, env: subprocess.run(list(a), capture_output=True,
                                                              text=True, env=env, cwd="/",
                                                              timeout=60))

    def _squat_by_another_user(self):
        # 65534 makes /tmp/nsbox-VICTIM first; the victim's ps and named runs are refused with
        # the squatter's uid and the fix, not a bare "Operation not permitted".
        if not shutil.which("setpriv"):
            self.skip_or_fail("needs setpriv to act as two other users")
        victim = 61000 + secrets.randbelow(1000)
        fallback = f"/tmp/nsbox-{victim}"
        if os.path.lexists(fallback) or os.path.exists(f"/run/user/{victim}"):
            self.skipTest(f"{fallback} exists already")
        self.assertEqual(self._as_uid(65534, "mkdir", "-m", "0700", fallback).returncode, 0)
        env = {"PATH": "/usr/bin:/bin", "NSBOX_ROOTFS": os.environ.get("NSBOX_ROOTFS", "")}
        try:
            ps = self._as_uid(victim, NSBOX, "ps", env=env)
            run = self._as_uid(victim, NSBOX, "run", "--cgroup", "off", "--name", "n1", "--",
                               "true", env=env)
            # Without a name too: a run that ps and kill cannot see does not start (it used
            # to, with a warning).
            plain = self._as_uid(victim, NSBOX, "run", "--cgroup", "off", "--", "true", env=env)
        finally:
            os.rmdir(fallback)
        self.assertOneLineError(plain, contains=f"{fallback}, is not a directory of yours")
        for q in (ps, run, plain):
            self.assertEqual(q.returncode, 125, q.stderr)
            self.assertIn(f"{fallback}, is not a directory of yours with mode 0700 (it is a "
                          "directory of uid 65534", q.stderr)
            self.assertIn("set XDG_RUNTIME_DIR", q.stderr)

    def _root_fallback(self):
        # Root without XDG_RUNTIME_DIR keeps its registry in /run/nsbox/registry, where only
        # root can write: a squatted /tmp/nsbox-0 changes nothing.
        if not shutil.which("setpriv"):
            self.skip_or_fail("needs setpriv to squat as 65534")
        if os.path.exists("/run/user/0"):
            self.skip_or_fail("/run/user/0 exists: root's registry is there")
        saved = None
        if os.path.lexists("/tmp/nsbox-0"):  # root's old fallback: set aside meanwhile
            saved = tempfile.mkdtemp(prefix="nsbox-0-saved-")
            os.rename("/tmp/nsbox-0", os.path.join(saved, "d"))
        try:
            self._root_fallback_with_tmp_squatted()
        finally:
            if saved:
                os.rename(os.path.join(saved, "d"), "/tmp/nsbox-0")
                os.rmdir(saved)

    def _root_fallback_with_tmp_squatted(self):
        self.assertEqual(self._as_uid(65534, "mkdir", "-m", "0700", "/tmp/nsbox-0").returncode, 0)
        name = "rootfallback-" + secrets.token_hex(4)
        env = _without_runtime_dir()
        proc = subprocess.Popen([NSBOX, "run", "--name", name, "--", "sleep", "30"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            self.assertTrue(wait_until(lambda: name in nsbox("ps", env=env).stdout, timeout=15),
                            nsbox("ps", env=env).stderr)
            self.assertTrue(os.path.exists("/run/nsbox/registry"))
            self.assertEqual(nsbox("kill", name, env=env).returncode, 0)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()
            os.rmdir("/tmp/nsbox-0")
