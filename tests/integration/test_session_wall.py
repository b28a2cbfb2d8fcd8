# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sessions (test_session.py's suite, split by class): what crosses a session's wall — copy-out
of a step, --network allow=, workspaces — and the Python API's Session. The module's private
runtime directory is test_session's (its setUpModule and tearDownModule)."""
import json
import os
import secrets
import signal
import socket
import stat
import tempfile
import time
import unittest

from nsboxtest import NSBOX, nsbox, plant_symlinks, processes_with, wait_until
from test_session import (SessionTestCase, alive, answer_of, children, connect,  # noqa: F401
                          cpu_seconds, nsbox_api, registry_dir, setUpModule, step,
                          supervisor_pid, tearDownModule)


class TestSessionCopyOut(SessionTestCase):
    """session exec --copy-out: files out of the live sandbox after a step, as a run's: packed
    by init once the step's processes are gone, unpacked by the nsbox process of the caller
    below directories it opened itself, never through a symlink; not after a timeout."""

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def exec_copy(self, sid, *args, input=None):
        p = nsbox("session", "exec", sid, "--json", *args, input=input)
        try:
            return p, json.loads(p.stdout)
        except ValueError:
            self.fail(f"no JSON: stdout={p.stdout!r} stderr={p.stderr!r}")

    def test_program_and_code_steps_copy_out(self):
        sid, sock = self.start()
        out = os.path.join(self.tmp.name, "out")
        p, r = self.exec_copy(sid, "--copy-out", f"/work/r:{out}", "--", "sh", "-c",
                              "mkdir /work/r; echo a > /work/r/a; ln -s /etc/passwd /work/r/l; "
                              "mkfifo /work/r/p")
        self.assertEqual(p.returncode, 0, p.stderr)
        co = r["copy_out"]
        self.assertTrue(co["done"], r["warnings"])
        self.assertFalse(co["complete"])
        self.assertEqual([(c["path"], c["size"]) for c in co["copied"]], [("/work/r/a", 2)])
        self.assertEqual(co["copied"][0]["host_path"], os.path.join(out, "r", "a"))
        self.assertEqual(sorted((s["path"], s["reason"]) for s in co["skipped"]),
                         [("/work/r/l", "symlink (never followed)"), ("/work/r/p", "FIFO")])
        st = os.lstat(os.path.join(out, "r", "a"))
        # Written by the caller's own nsbox process: its uid, mode 0644.
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (os.getuid(), 0o644))
        self.assertEqual(sorted(os.listdir(os.path.join(out, "r"))), ["a"])
        # A code step: its copy-out, and the interpreter (and /work) go on.
        p, r = self.code(sid, "x = 5; open('/work/p.txt', 'w').write('py')",
                         "--copy-out", f"/work/p.txt:{out}")
        self.assertTrue(r["copy_out"]["complete"], r["warnings"])
        with open(os.path.join(out, "p.txt")) as f:
            self.assertEqual(f.read(), "py")
        p, r = self.code(sid, "print(x, open('/work/p.txt').read())")
        self.assertEqual(r["stdout"], "5 py\n")
        self.assertIsNone(r["copy_out"])  # not asked: null, as for a run

    def test_not_after_a_timeout(self):
        sid, sock = self.start()
        out = os.path.join(self.tmp.name, "out")
        p, r = self.exec_copy(sid, "--timeout", "0.5", "--copy-out", f"/work/t:{out}", "--",
                              "sh", "-c", "echo t > /work/t; sleep 10")
        self.assertEqual(r["status"], "timeout")
        self.assertFalse(r["copy_out"]["done"])
        self.assertTrue(any("did not end by itself" in w for w in r["warnings"]), r)
        self.assertEqual(os.listdir(out), [])

    def test_never_writes_through_a_symlink_in_hostdir(self):
        sid, sock = self.start()
        out, victim = plant_symlinks(self.tmp.name)
        for src, shell in (("/work/o", "mkdir /work/o; echo evil > /work/o/x"),
                           ("/work/f", "echo evil > /work/f")):
            p, r = self.exec_copy(sid, "--copy-out", f"{src}:{out}", "--", "sh", "-c", shell)
            self.assertEqual(r["exit_code"], 0, r["stderr"])
            self.assertFalse(r["copy_out"]["done"], src)
            self.assertTrue(any("copy-out failed on the host" in w for w in r["warnings"]),
                            r["warnings"])
            self.assertTrue(any("copy-out failed on the host" in w
                                for w in r["outcome_warnings"]), r["outcome_warnings"])
        self.assertEqual(sorted(os.listdir(victim)), ["file"])
        with open(os.path.join(victim, "file")) as f:
            self.assertEqual(f.read(), "precious")

    def test_caps(self):
        sid, sock = self.start()
        out = os.path.join(self.tmp.name, "out")
        p, r = self.exec_copy(sid, "--copy-out", f"/work/m:{out}", "--copy-out-max-files", "2",
                              "--", "sh", "-c", "mkdir /work/m; for i in 1 2 3 4; do "
                              "echo $i > /work/m/$i; done")
        co = r["copy_out"]
        self.assertEqual(len(co["copied"]), 2, co)
        self.assertEqual(len([s for s in co["skipped"] if "--copy-out-max-files" in s["reason"]]),
                         2, co)
        self.assertEqual([s["kind"] for s in co["skipped"]], ["over_cap", "over_cap"], co)
        self.assertFalse(co["complete"])
        # The warning the command adds explains the outcome: the model is shown it.
        incomplete = [w for w in r["warnings"] if w.startswith("copy-out is not complete")]
        self.assertEqual(len(incomplete), 1, r["warnings"])
        self.assertEqual(r["outcome_warnings"], incomplete)

    def test_api(self):
        import asyncio
        keep = os.path.join(self.tmp.name, "keep")
        with nsbox_api.Session(nsbox=NSBOX, extra_args=["--cgroup", "off"]) as s:
            r = s.run_code("x = 2; open('/work/a.bin', 'wb').write(bytes(range(256)))",
                           copy_out="/work/a.bin")
            self.assertEqual(r.files, {"/work/a.bin": bytes(range(256))}, r.raw)
            # The copy-out step went through the CLI: the interpreter is the same one.
            r = s.run_code("print(x)", stdin="ignored", copy_out=["/work/a.bin"],
                           copy_out_dir=keep)
            self.assertEqual(r.stdout, "2\n")
            self.assertTrue(os.path.isfile(os.path.join(keep, "a.bin")))
            r = s.run(["sh", "-c", "mkdir -p /work/d; echo hi > /work/d/f"], copy_out="/work/d")
            self.assertEqual(r.files, {"/work/d/f": b"hi\n"})
            r = s.run(["sleep", "5"], timeout=0.3, copy_out="/work/d")
            self.assertEqual((r.status, r.files), ("timeout", {}))

            async def main():
                return await s.arun_code("print(x + 1)", copy_out="/work/a.bin")
            r = asyncio.run(main())
            self.assertEqual((r.stdout, list(r.files)), ("3\n", ["/work/a.bin"]))

    def test_a_name_the_host_refuses_fails_only_itself(self):
        # A name init packs but the unpacking side refuses (not UTF-8, a bidi control, a path
        # of PATH_MAX bytes: copy_name_is_valid() in parse.c; init checks only C0 and DEL)
        # failed the whole copy: "the copy stream has an invalid name", naming nothing, and no
        # other file came out. A step writes such names by accident (an unzipped Latin-1 name).
        # Expected: skipped, as a name with a control character is, and the rest copied.
        sid, sock = self.start()
        for name, make in (("latin-1", "open(b'/work/r/caf\\xe9.txt', 'w').write('x')"),
                           ("bidi", "open('/work/r/\\u202etxt.exe', 'w').write('x')"),
                           ("control", "open('/work/r/a\\nb', 'w').write('x')")):
            with self.subTest(name=name):
                out = os.path.join(self.tmp.name, name)
                src = ("import os, shutil\nshutil.rmtree('/work/r', ignore_errors=True)\n"
                       "os.mkdir('/work/r')\nopen('/work/r/good.txt', 'w').write('good')\n"
                       + make + "\n")
                p, r = self.exec_copy(sid, "--copy-out", f"/work/r:{out}", "--code", "-",
                                      input=src)
                self.assertEqual(r["exit_code"], 0, r["stderr"])
                self.assertTrue(r["copy_out"]["done"], (name, r["warnings"]))
                with open(os.path.join(out, "r", "good.txt")) as f:
                    self.assertEqual(f.read(), "good")

    def test_bad_copy_out_is_one_line(self):
        sid, sock = self.start()
        for arg in ("work/x:out", "/work/x", "/proc/self:out", "/work/../etc:out"):
            self.assertOneLineError(nsbox("session", "exec", sid, "--copy-out", arg, "--",
                                          "true"), contains="--copy-out")


class TestSessionNetworkAllow(SessionTestCase):
    """--network allow= in a session: the proxy serves in the session's supervisor loop, for
    every step; each step's result has the session's proxy report so far."""

    def test_allowed_and_refused_across_steps(self):
        from test_network_allow import CLIENT, Upstreams
        up = Upstreams()
        self.addCleanup(up.close)
        sid, sock = self.start("--network", f"allow=up.test:{up.echo_port}", "--add-host",
                               "up.test:127.0.0.1", "--add-host", "other.test:127.0.0.1")
        # The client's code is defined once: the interpreter keeps it for the next steps.
        p, r = self.code(sid, CLIENT)
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        p, r = self.code(sid, f"print(*ask(b'CONNECT up.test:{up.echo_port} HTTP/1.1\\r\\n"
                              f"\\r\\n', b'hello session'))")
        self.assertEqual(r["stdout"], "HTTP/1.1 200 Connection established HELLO SESSION\n",
                         r["stderr"])
        n = r["network"]
        self.assertEqual((n["connections_total"], n["connections_refused"]), (1, 0), n)
        p, r = self.run_step(sid, "python3", "-c", CLIENT + (
            f"print(*ask(b'CONNECT other.test:{up.echo_port} HTTP/1.1\\r\\n\\r\\n'))"))
        self.assertTrue(r["stdout"].startswith("HTTP/1.1 403 Forbidden"), r)
        n = r["network"]
        self.assertEqual((n["connections_total"], n["connections_refused"]), (2, 1), n)
        self.assertEqual([(c["host"], c["allowed"]) for c in n["connections"]],
                         [("up.test", True), ("other.test", False)])
        # Only through the proxy: the host's 127.0.0.1 is not the sandbox's.
        p, r = self.run_step(sid, "python3", "-c",
                             "import socket\n"
                             f"try: socket.create_connection(('127.0.0.1', {up.echo_port}), "
                             "timeout=5); print('reached')\n"
                             "except OSError as e: print('refused')")
        self.assertEqual(r["stdout"], "refused\n", r)


class TestSessionWorkspace(SessionTestCase):
    """--workspace for a session: in /work from the start, saved when the session ends between
    steps (stop, idle), whole or not at all, not after a kill or a step cut off by the end; the
    workspace's lock is held as long as the session lives."""

    def setUp(self):
        super().setUp()
        self.state = tempfile.TemporaryDirectory()
        self.addCleanup(self.state.cleanup)
        self.env = dict(os.environ, XDG_STATE_HOME=self.state.name)

    def ws_run(self, name, shell):
        """`nsbox run --workspace NAME -- sh -c SHELL`: its process and result."""
        p = nsbox("run", "--json", "--cgroup", "off", "--workspace", name, "--", "sh", "-c",
                  shell, env=self.env)
        try:
            return p, json.loads(p.stdout)
        except ValueError:
            self.fail(f"no JSON: stdout={p.stdout!r} stderr={p.stderr!r}")

    def ws_start(self, name, *opts):
        p = nsbox("session", "start", "--json", "--cgroup", "off", "--workspace", name, *opts,
                  env=self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        info = json.loads(p.stdout)
        self.addCleanup(lambda: nsbox("kill", info["id"]))
        return info["id"], info["socket"]

    def stop(self, sid):
        p = nsbox("session", "stop", "--json", sid)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def seed(self, name, text):
        p, r = self.ws_run(name, f"echo {text} > /work/keep.txt")
        self.assertTrue(r["workspace"]["saved"], r["warnings"])

    def test_files_in_at_start_saved_on_stop(self):
        self.seed("s1", "v1")
        sid, sock = self.ws_start("s1")
        p, r = self.run_step(sid, "cat", "/work/keep.txt")
        self.assertEqual(r["stdout"], "v1\n", r)
        p, r = self.run_step(sid, "sh", "-c", "echo v2 > /work/keep.txt; mkdir /work/d; "
                             "echo new > /work/d/f")
        self.assertEqual(p.returncode, 0, p.stderr)
        # Files persist between steps, and the interpreter sees them too.
        p, r = self.code(sid, "print(open('d/f').read().strip())")
        self.assertEqual(r["stdout"], "new\n", r)
        # The session holds the workspace: a run or another session on it is refused.
        p, r = self.ws_run("s1", "true")
        self.assertEqual(p.returncode, 125)
        self.assertIn("in use by another run or session", r["error"]["message"])
        p = nsbox("session", "start", "--cgroup", "off", "--workspace", "s1", env=self.env)
        self.assertOneLineError(p, contains="in use by another run or session")
        ans = self.stop(sid)
        self.assertEqual(ans["workspace"], {"name": "s1", "saved": True}, ans)
        self.assertEqual(ans["warnings"], [])
        p, r = self.ws_run("s1", "cat /work/keep.txt /work/d/f")
        self.assertEqual(r["stdout"], "v2\nnew\n", r)

    def big_workspace(self):
        """A workspace "big" of 600 MB (about 0.7 s to copy in or out here); the options a
        session on it takes."""
        opts = ("--cgroup", "off", "--workdir-size", "1g", "--memory", "1g",
                "--copy-out-max-bytes", "1g")
        p = nsbox("run", "--json", *opts, "--workspace", "big", "--", "sh", "-c",
                  "head -c 600000000 /dev/zero > /work/big", env=self.env)
        self.assertTrue(json.loads(p.stdout)["workspace"]["saved"], p.stdout)
        self.addCleanup(nsbox, "workspace", "rm", "big", env=self.env)
        return opts

    def big_dir(self):
        return os.path.join(self.state.name, "nsbox", "workspaces", "big", "work")

    def test_kill_while_the_workspace_is_saved(self):
        # `nsbox kill` while `session stop` saves /work: the save is given up, the workspace
        # is as before, and the answer says the session was killed, as before the lifecycle
        # moved into the library (its reason stayed "stopped").
        import subprocess
        opts = self.big_workspace()
        sid, sock = self.ws_start("big", *opts[2:])
        self.run_step(sid, "sh", "-c", "echo changed > /work/small")
        pid = supervisor_pid(sid)
        stop = subprocess.Popen([NSBOX, "session", "stop", "--json", sid],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.2)  # the save runs (about 0.7 s)
        self.assertEqual(nsbox("kill", sid).returncode, 0)
        out, err = stop.communicate(timeout=60)
        self.assertTrue(wait_until(lambda: not alive(pid)))
        ans = json.loads(out)
        self.assertEqual((ans["reason"], ans["workspace"]["saved"]), ("killed", False), ans)
        self.assertIn("while the workspace was being saved", " ".join(ans["warnings"]), ans)
        self.assertEqual(os.listdir(self.big_dir()), ["big"])  # as before the session

    def test_kill_while_the_workspace_is_set_up(self):
        # `nsbox kill` (SIGUSR1) while init copies a large workspace into /work: the start ends
        # then, not once the sandbox is up (before: the library's start did not watch the
        # supervisor's signals, and `nsbox kill` waited, up to its 5 s, for the setup to end).
        import subprocess
        opts = self.big_workspace()
        token = "t" + secrets.token_hex(6)
        start = subprocess.Popen([NSBOX, "session", "start", "--workspace", "big", *opts,
                                  "--label", token], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=self.env)

        def supervisor():
            return supervisor_pid(label=token)
        self.assertTrue(wait_until(lambda: supervisor() is not None, timeout=10, step=0.01))
        pid = supervisor()
        k = nsbox("kill", "--label", token)
        out, err = start.communicate(timeout=60)
        self.assertEqual(k.returncode, 0, k.stderr)
        self.assertEqual((start.returncode, out), (125, ""), err)
        self.assertIn("the session was ended (nsbox kill) while its sandbox was set up", err)
        self.assertTrue(wait_until(lambda: not alive(pid)))
        self.assertIsNone(supervisor())
        # The workspace as it was (its lock went with the supervisor).
        self.assertEqual(os.listdir(self.big_dir()), ["big"])

    def test_not_saved_after_kill(self):
        self.seed("s2", "v1")
        sid, sock = self.ws_start("s2")
        pid = supervisor_pid(sid)
        self.run_step(sid, "sh", "-c", "echo v2 > /work/keep.txt")
        self.assertEqual(nsbox("kill", sid).returncode, 0)
        self.assertTrue(wait_until(lambda: not alive(pid)))
        p, r = self.ws_run("s2", "cat /work/keep.txt")
        self.assertEqual(r["stdout"], "v1\n", r)

    def test_not_saved_when_the_end_cuts_a_step(self):
        # As a run after its timeout: the step was killed mid-write, /work may be half-written.
        self.seed("s3", "v1")
        sid, sock = self.ws_start("s3", "--timeout", "60")
        with connect(sock, b'{"op": "exec", "argv": ["sh", "-c", '
                           b'"echo v2 > /work/keep.txt; sleep 30"]}\n') as c:
            time.sleep(0.5)
            ans = self.stop(sid)
            self.assertEqual(json.loads(answer_of(c))["status"], "killed")
        self.assertEqual(ans["workspace"], {"name": "s3", "saved": False}, ans)
        self.assertIn("while a step ran", ans["warnings"][0])
        self.assertIn("its files are as before this session", ans["warnings"][0])
        p, r = self.ws_run("s3", "cat /work/keep.txt")
        self.assertEqual(r["stdout"], "v1\n", r)

    def test_saved_at_idle_timeout(self):
        sid, sock = self.ws_start("s4", "--idle-timeout", "1")
        pid = supervisor_pid(sid)
        p, r = self.run_step(sid, "sh", "-c", "echo idle > /work/keep.txt")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(wait_until(lambda: not alive(pid), timeout=10))
        p, r = self.ws_run("s4", "cat /work/keep.txt")
        self.assertEqual(r["stdout"], "idle\n", r)

    def test_over_a_cap_is_not_saved(self):
        # Whole or not at all: past --copy-out-max-files nothing of the session is kept.
        self.seed("s5", "v1")
        sid, sock = self.ws_start("s5", "--copy-out-max-files", "3")
        p, r = self.run_step(sid, "sh", "-c", "for i in 1 2 3 4 5; do echo $i > /work/f$i; done")
        self.assertEqual(p.returncode, 0, p.stderr)
        ans = self.stop(sid)
        self.assertFalse(ans["workspace"]["saved"], ans)
        self.assertTrue(any("--copy-out-max-files" in w for w in ans["warnings"]), ans)
        p, r = self.ws_run("s5", "ls /work")
        self.assertEqual(r["stdout"], "keep.txt\n", r)

    def test_a_full_skipped_list_does_not_hide_a_cap(self):
        # Whole or not at all: a cap hit past the first NSBOX_SKIPPED_MAX (100) listed skips
        # (symlinks: a venv or node_modules/.bin has many) is still a refusal. The bug: only
        # the listed skips were searched for a cap, so the save went ahead without a file, and
        # the workspace lost data.bin (or more.bin, by readdir order) while "saved" said true.
        self.seed("s7", "v1")
        p, r = self.ws_run("s7", "head -c 600000 /dev/zero > /work/data.bin")
        self.assertTrue(r["workspace"]["saved"], r["warnings"])
        for links, name in ((10, "control"), (100, "attack")):
            with self.subTest(links=links):
                sid, sock = self.ws_start("s7", "--copy-out-max-bytes", "1m")
                # 100 symlinks before and after the new file, whatever order readdir gives.
                p, r = self.run_step(sid, "sh", "-c",
                                     f"echo v2 > /work/keep.txt; "
                                     f"for i in $(seq {links}); do ln -s /x /work/a$i; done; "
                                     f"head -c 600000 /dev/zero > /work/more.bin; "
                                     f"for i in $(seq {links}); do ln -s /x /work/b$i; done")
                self.assertEqual(p.returncode, 0, p.stderr)
                ans = self.stop(sid)
                self.assertFalse(ans["workspace"]["saved"], (name, ans))
                p, r = self.ws_run("s7", "cat /work/keep.txt; wc -c < /work/data.bin; "
                                   "ls /work | grep -c -v '^[ab][0-9]'")
                self.assertEqual(r["stdout"], "v1\n600000\n2\n", (name, r))

    def test_an_unreadable_directory_is_not_dropped(self):
        # A directory is never left out of a saved workspace (sandbox.c: only what is not a
        # regular file or directory may be); one the step made unreadable (chmod 000) was
        # skipped, and the workspace saved without it and everything below it.
        self.seed("s8", "v1")
        p, r = self.ws_run("s8", "mkdir /work/d && echo kept > /work/d/f")
        self.assertTrue(r["workspace"]["saved"], r["warnings"])
        sid, sock = self.ws_start("s8")
        p, r = self.run_step(sid, "sh", "-c", "echo v2 > /work/keep.txt; chmod 000 /work/d")
        self.assertEqual(p.returncode, 0, p.stderr)
        ans = self.stop(sid)
        p, r = self.ws_run("s8", "cat /work/d/f")
        self.assertEqual(r["stdout"], "kept\n", (ans, r))

    def test_api(self):
        old = os.environ.get("XDG_STATE_HOME")
        os.environ["XDG_STATE_HOME"] = self.state.name
        self.addCleanup(lambda: os.environ.pop("XDG_STATE_HOME") if old is None
                        else os.environ.__setitem__("XDG_STATE_HOME", old))
        with nsbox_api.Session(workspace="s6", nsbox=NSBOX, extra_args=["--cgroup", "off"]) as s:
            s.run_code("open('keep.txt', 'w').write('api')")
        self.assertTrue(s.workspace_saved, s.stop_result)
        p, r = self.ws_run("s6", "cat /work/keep.txt")
        self.assertEqual(r["stdout"], "api", r)
        with nsbox_api.Session(nsbox=NSBOX, extra_args=["--cgroup", "off"]) as s:
            pass
        self.assertIsNone(s.workspace_saved)
        self.assertEqual(s.stop_result["reason"], "stopped")


class TestSessionApi(SessionTestCase):
    def test_env_reaches_the_steps_not_nsbox(self):
        # env= travels on --env-fd, as for runs: the steps see it; nsbox's own environment
        # (where LD_PRELOAD would run code in nsbox on the host) never holds it.
        with nsbox_api.Session(nsbox=NSBOX, env={"NSBOX_TEST_VAR": "a\nb"},
                               extra_args=["--cgroup", "off"]) as s:
            r = s.run_code("import os; print(repr(os.environ['NSBOX_TEST_VAR']))")
            self.assertEqual(r.stdout, "'a\\nb'\n", r.stderr)
            self.assertNotIn("NSBOX_TEST_VAR", s._env)

    def test_session_keeps_state(self):
        with nsbox_api.Session(memory="256m", nsbox=NSBOX, extra_args=["--cgroup", "off"]) as s:
            self.assertIsNone(s.run_code("x = 6").stdout or None)
            r = s.run_code("print(x * 7)")
            self.assertEqual((r.stdout, r.exit_code), ("42\n", 0))
            r = s.run(["sh", "-c", "echo $((1+2))"])
            self.assertEqual(r.stdout, "3\n")
            r = s.run_code("while True: pass", timeout=0.3)
            self.assertEqual(r.status, "timeout")
            self.assertEqual(s.run_code("print(x)").stdout, "6\n")
            sock = s.socket_path
        self.assertFalse(os.path.exists(sock))
        with self.assertRaises(nsbox_api.NsboxError):
            s.run_code("print(1)")

    def test_async_session(self):
        import asyncio

        async def main():
            async with nsbox_api.Session(nsbox=NSBOX, extra_args=["--cgroup", "off"]) as s:
                await s.arun_code("y = 2")
                r = await s.arun_code("print(y + 1)")
                r2 = await s.arun(["echo", "a"])
                return r.stdout, r2.stdout

        self.assertEqual(asyncio.run(main()), ("3\n", "a\n"))

    def test_api_with_slow_clients_and_a_full_session(self):
        with nsbox_api.Session(nsbox=NSBOX, extra_args=["--cgroup", "off"]) as s:
            half = connect(s.socket_path, b'{"op": "code", "co')
            self.addCleanup(half.close)
            time.sleep(0.3)
            t = time.monotonic()
            self.assertEqual(s.run_code("print(6 * 7)").stdout, "42\n")
            self.assertLess(time.monotonic() - t, 5)
            # Every connection taken: the API says so, in words to act on.
            held = [connect(s.socket_path) for _ in range(15)]
            for c in held:
                self.addCleanup(c.close)
            time.sleep(0.3)
            with self.assertRaises(nsbox_api.NsboxError) as cm:
                s.run(["true"])
            self.assertIn("connections open already", str(cm.exception))

            async def arun():
                return await s.arun(["true"])
            import asyncio
            with self.assertRaises(nsbox_api.NsboxError) as cm:
                asyncio.run(arun())
            self.assertIn("connections open already", str(cm.exception))
            sock = s.socket_path
        # Its stop was refused too (every connection still taken): the API ended it with
        # `nsbox kill` instead, and returned once it was gone.
        self.assertFalse(os.path.exists(sock))
        self.assertEqual(nsbox("session", "ls", "--json").stdout.count(s.id), 0)

    def test_async_close_of_a_full_session(self):
        import asyncio

        async def main():
            s = await nsbox_api.Session(nsbox=NSBOX, extra_args=["--cgroup", "off"]).astart()
            held = [connect(s.socket_path) for _ in range(16)]
            for c in held:
                self.addCleanup(c.close)
            await asyncio.sleep(0.3)
            sock = s.socket_path
            await s.aclose()
            return s.id, sock

        sid, sock = asyncio.run(main())
        self.assertFalse(os.path.exists(sock))
        self.assertEqual(nsbox("session", "ls", "--json").stdout.count(sid), 0)

    def test_api_says_when_an_answer_was_cut_off(self):
        # What a client too slow to read its answer (30 s) is left with: a line without its end.
        from nsbox.session import _answer
        with self.assertRaises(nsbox_api.NsboxError) as cm:
            _answer(b'{"status": "exited", "stdout": "xx')
        self.assertIn("cut off after 34 bytes: this client was too slow to read it",
                      str(cm.exception))

    def test_start_error_raises(self):
        with self.assertRaises(nsbox_api.NsboxError) as cm:
            nsbox_api.Session(nsbox=NSBOX, rootfs="/nonexistent-rootfs").start()
        self.assertIn("rootfs", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
