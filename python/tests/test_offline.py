# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Python API without a sandbox: argument checks, fake nsbox binaries, parsing."""

import asyncio
import os
import sys
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

from tests.support import CANARY, HERE, fake_nsbox, json_result  # noqa: E402
import nsbox  # noqa: E402
from nsbox import _process, _runner  # noqa: E402


class TestWithoutSandbox(unittest.TestCase):
    """Argument checks and nsbox failures; no real sandbox needed."""

    def test_missing_binary(self):
        with self.assertRaises(nsbox.NsboxNotFound) as cm:
            nsbox.run_python_code("print(1)", nsbox="/nonexistent/nsbox")
        self.assertIsInstance(cm.exception, nsbox.NsboxError)

    def test_missing_binary_on_path(self):
        with tempfile.TemporaryDirectory() as empty:
            env = {k: v for k, v in os.environ.items() if k != "NSBOX"}
            env["PATH"] = empty
            with mock.patch.dict(os.environ, env, clear=True):
                with self.assertRaises(nsbox.NsboxNotFound):
                    nsbox.run_python_code("print(1)")
                with self.assertRaises(nsbox.NsboxError):
                    nsbox.run(["true"])

    def test_bad_file_names(self):
        for name in ["/etc/passwd", "../escape", "a/../../b", "..", "", ".", "a/./..",
                     "x\0y"]:
            with self.subTest(name=name), self.assertRaises(ValueError):
                # Checked before nsbox runs: no binary needed.
                nsbox.run_python_code("pass", files={name: "x"}, nsbox=sys.executable)

    def test_bad_arguments(self):
        with self.assertRaises(TypeError):
            nsbox.run("python3 -c 1", nsbox=sys.executable)
        with self.assertRaises(ValueError):
            nsbox.run([], nsbox=sys.executable)
        with self.assertRaises(ValueError):
            nsbox.run_python_code("pass", env={"A=B": "c"}, nsbox=sys.executable)
        with self.assertRaises(TypeError):
            nsbox.run_python_code("pass", files={"a": 1}, nsbox=sys.executable)
        with self.assertRaises(TypeError):
            nsbox.run_python_code("pass", extra_args="--no-seccomp", nsbox=sys.executable)

    def test_program_env_is_not_nsboxs_environment(self):
        # env= is for the program: in nsbox's own environment on the host, LD_PRELOAD would
        # load a library into nsbox (as the caller, before any sandbox exists), GLIBC_TUNABLES
        # would tune its libc, XDG_RUNTIME_DIR would move its registry. It travels on the
        # --env-fd descriptor instead; nsbox's environment keeps the caller's own values.
        passed = {"LD_PRELOAD": "/nonexistent/evil.so", "LD_LIBRARY_PATH": "/nonexistent",
                  "GLIBC_TUNABLES": "glibc.malloc.check=3", "XDG_RUNTIME_DIR": "/nonexistent",
                  "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent", "MULTI": "a\nb"}
        with tempfile.TemporaryDirectory() as d, \
                mock.patch.dict(os.environ, {"XDG_RUNTIME_DIR": d}):
            fake = fake_nsbox(d, f"""env > {d}/env
while [ $# -gt 0 ]; do
    [ "$1" = --env-fd ] && eval "cat <&$2" > {d}/records
    shift
done
echo 'not json'
""")
            with self.assertRaises(nsbox.NsboxError):
                nsbox.run_python_code("pass", env=passed, nsbox=fake)
            with open(os.path.join(d, "env")) as f:
                own = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
            records = Path(d, "records").read_bytes() if Path(d, "records").exists() else b""
        for key in ("LD_PRELOAD", "LD_LIBRARY_PATH", "GLIBC_TUNABLES",
                    "DBUS_SESSION_BUS_ADDRESS"):
            self.assertNotIn(key, own)
        self.assertEqual(own.get("XDG_RUNTIME_DIR"), d)  # the caller's, not the program's
        self.assertEqual(records, b"".join(f"{k}={v}".encode() + b"\0"
                                           for k, v in passed.items()))

    def test_number_format(self):
        self.assertEqual(_runner._number(10, "t"), "10")
        self.assertEqual(_runner._number(0.5, "t"), "0.5")
        self.assertEqual(_runner._number(1e-5, "t"), "0.00001")
        self.assertEqual(_runner._number(1e20, "t"), "100000000000000000000")
        for bad in (float("nan"), float("inf")):
            with self.assertRaises(ValueError):
                _runner._number(bad, "t")
        with self.assertRaises(TypeError):
            _runner._number(True, "t")

    def test_invalid_json(self):
        with tempfile.TemporaryDirectory() as d:
            fake = fake_nsbox(d, "echo 'not json'; echo 'nsbox: it broke' >&2; exit 3\n")
            with self.assertRaises(nsbox.NsboxError) as cm:
                nsbox.run_python_code("pass", nsbox=fake)
        self.assertEqual(cm.exception.exit_code, 3)
        self.assertIn("it broke", str(cm.exception))

    def test_crash(self):
        with tempfile.TemporaryDirectory() as d:
            fake = fake_nsbox(d, "kill -SEGV $$\n")
            with self.assertRaises(nsbox.NsboxError) as cm:
                nsbox.run(["true"], nsbox=fake)
        self.assertEqual(cm.exception.exit_code, -11)
        self.assertIn("signal 11", str(cm.exception))

    def test_backstop_timeout(self):
        with tempfile.TemporaryDirectory() as d:
            fake = fake_nsbox(d, "exec sleep 30\n")
            start = time.monotonic()
            with mock.patch.object(_process, "_BACKSTOP_MARGIN", 0.5), \
                    self.assertRaises(nsbox.NsboxError) as cm:
                nsbox.run_python_code("pass", timeout=0.5, nsbox=fake)
            self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(cm.exception.step, "backstop")

    def test_backstop_after_the_pipes_close(self):
        # nsbox closed its output but does not exit: the wait for its exit has a deadline too.
        with tempfile.TemporaryDirectory() as d:
            fake = fake_nsbox(d, "exec >&- 2>&- <&-; exec sleep 30\n")
            for stream in (None, print):
                start = time.monotonic()
                with mock.patch.object(_process, "_BACKSTOP_MARGIN", 0.5), \
                        self.assertRaises(nsbox.NsboxError) as cm:
                    nsbox.run_python_code("pass", timeout=0.5, nsbox=fake, on_stdout=stream)
                self.assertEqual(cm.exception.step, "backstop")
                self.assertLess(time.monotonic() - start, 5)
                with mock.patch.object(_process, "_BACKSTOP_MARGIN", 0.5), \
                        self.assertRaises(nsbox.NsboxError) as cm:
                    asyncio.run(nsbox.arun_python_code("pass", timeout=0.5, nsbox=fake,
                                                       on_stdout=stream))
                self.assertEqual(cm.exception.step, "backstop")

    def test_async_backstop_timeout(self):
        with tempfile.TemporaryDirectory() as d:
            fake = fake_nsbox(d, "exec sleep 30\n")
            start = time.monotonic()
            for stream in (None, print):
                with mock.patch.object(_process, "_BACKSTOP_MARGIN", 0.5), \
                        self.assertRaises(nsbox.NsboxError) as cm:
                    asyncio.run(nsbox.arun_python_code("pass", timeout=0.5, nsbox=fake,
                                                       on_stdout=stream))
                self.assertEqual(cm.exception.step, "backstop")
            self.assertLess(time.monotonic() - start, 8)

    def test_clean_environment_for_nsbox(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "env.txt")
            fake = fake_nsbox(d, f"/usr/bin/env > '{out}'\n")
            # The user bus's address and runtime directory pass (nsbox asks the systemd user
            # manager there for a delegated cgroup); nothing else of the caller's does.
            bus = {"XDG_RUNTIME_DIR": "/run/user/4242",
                   "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/4242/bus"}
            with mock.patch.dict(os.environ, {"AWS_SECRET_ACCESS_KEY": CANARY,
                                              "HOME": "/root-or-not", "XDG_STATE_HOME": "",
                                              **bus}):
                with self.assertRaises(nsbox.NsboxError):
                    nsbox.run_python_code("pass", nsbox=fake)
            with open(out) as f:
                seen = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
        self.assertIn("PATH", seen)
        self.assertEqual({k: seen.get(k) for k in bus}, bus)
        # XDG_STATE_HOME: where nsbox finds workspaces (the caller's, else ~/.local/state).
        self.assertEqual(seen.get("XDG_STATE_HOME"), "/root-or-not/.local/state")
        self.assertLessEqual(set(seen), {"PATH", "NSBOX_ROOTFS", "XDG_RUNTIME_DIR",
                                         "DBUS_SESSION_BUS_ADDRESS", "XDG_STATE_HOME", "PWD",
                                         "SHLVL", "_", "OLDPWD"})

    def test_tool_output_strings(self):
        def result(status, code, out="", err="", **kw):
            return nsbox.Result(status=status, exit_code=code, signal=None, stdout=out,
                                stderr=err, truncated=False, stdout_bytes=len(out),
                                stderr_bytes=len(err), wall_time=0.0, peak_memory=None,
                                limits_enforced_by="rlimit", raw={}, **kw)
        self.assertEqual(result("exited", 0, out="o\n").as_tool_output(), "o\n")
        self.assertEqual(result("exited", 0).as_tool_output(), "(no output)")
        self.assertEqual(result("exited", 1, err="e" * 5000,
                                reason="exited with status 1").as_tool_output(),
                         "exited with status 1\n[stderr]\n" + "e" * 2000 +
                         "\n[... 1,000 characters cut for this output ...]\n" + "e" * 2000 +
                         "\n[stderr cut for this output: its first 2000 and last 2000 characters "
                         "are shown]")
        self.assertEqual(result("exited", 1, err="e" * 50, reason="exited with status 1")
                         .as_tool_output(max_chars=10),
                         "exited with status 1\n[stderr]\n" + "e" * 5 +
                         "\n[... 40 characters cut for this output ...]\n" + "e" * 5 +
                         "\n[stderr cut for this output: its first 5 and last 5 characters are "
                         "shown]")
        # Without a reason (an nsbox older than the field), the status words stand in.
        self.assertEqual(result("oom", 137).as_tool_output(),
                         "status oom, exit status 137\n[no output]")

    def test_tool_output_passes_on_the_warnings_that_explain_the_outcome(self):
        # A full /work (or /dev/shm, or a workspace not saved) is in nsbox's warnings: the
        # model must see the option to change; the rlimit fallback is the host's, not its.
        full = ("the working directory /work was full when the payload ended (8 MiB used): "
                "writes there failed with ENOSPC (No space left on device); raise "
                "--workdir-size (now 8 MiB)")
        fallback = "limits are enforced with rlimits, not a cgroup: no cgroup v2 here"
        r = nsbox.Result.from_json(json_result(status="exited", exit_code=1, stderr="OSError\n",
                                               reason="exited with status 1",
                                               warnings=[fallback, full],
                                               outcome_warnings=[full]))
        text = r.as_tool_output()
        self.assertIn(f"[{full}]", text)
        self.assertNotIn("rlimits", text)
        # nsbox's "outcome_warnings" decides, not the words: a host warning that names an
        # option (a policy file's line) is not passed on, an outcome warning in any words is.
        policy = "p.policy:3: unknown system call 'copy-out' (--workdir-size)"
        odd = "the interpreter went away"
        r = nsbox.Result.from_json(json_result(status="exited", exit_code=1,
                                               reason="exited with status 1",
                                               warnings=[policy, odd], outcome_warnings=[odd]))
        self.assertEqual(r.outcome_warnings, [odd])
        text = r.as_tool_output()
        self.assertNotIn("p.policy", text)
        self.assertIn(odd, text)

    def test_hints_follow_the_note_kinds_not_their_words(self):
        # nsbox's "note_kinds" says which note is the refused internet socket (replaced by the
        # API's hint) and which the missing module (a hint beside it), whatever their words.
        refused = [{"syscall": "socket", "count": 1}]
        for kind, kept in ((None, True), ("inet_socket_refused", False)):
            r = nsbox.Result.from_json(json_result(seccomp_refused=refused,
                                                   notes=["an internet socket, in other words"],
                                                   note_kinds=[kind]))
            text = r.as_tool_output()
            self.assertIn("hint: the sandbox has no network", text)
            self.assertEqual("in other words" in text, kept, text)
        r = nsbox.Result.from_json(json_result(status="exited", exit_code=1,
                                               notes=["a note", "no such module here"],
                                               note_kinds=[None, "module_not_found"]))
        self.assertIn("hint: the Python API takes such a tree as rootfs=DIR", r.as_tool_output())
        r = nsbox.Result.from_json(json_result(
            status="exited", exit_code=1, notes=["the program's stderr mentions "
                                                 "ModuleNotFoundError"], note_kinds=[None]))
        self.assertNotIn("hint:", r.as_tool_output())

    def test_peak_memory_only_from_a_memory_cgroup(self):
        # A leaf without the memory controller says memory_peak 0: that is no measurement.
        cg = {"path": "/x", "memory_peak": 0, "oom_kills": 0}
        r = nsbox.Result.from_json(json_result(cgroup=cg, limits={
            "memory": {"bytes": None, "enforced_by": "none"}}))
        self.assertIsNone(r.peak_memory)
        r = nsbox.Result.from_json(json_result(cgroup=dict(cg, memory_peak=4096), limits={
            "memory": {"bytes": 1 << 28, "enforced_by": "cgroup"}}))
        self.assertEqual(r.peak_memory, 4096)

    def test_tool_output_format(self):
        r = nsbox.Result.from_json(json_result(status="exited", exit_code=2, stdout="a\x1b[0m\n",
                                               stderr="b", reason="exited with status 2",
                                               notes=["n1", "n2"]))
        self.assertEqual(r.as_tool_output(format="{status}/{exit_code}: {reason}|{stdout}|"
                                                 "{stderr}|{notes}"),
                         "exited/2: exited with status 2|a\\x1b[0m\n|b|n1\nn2")
        self.assertEqual(r.as_tool_output(format=lambda res: f"code {res.exit_code}"), "code 2")

        class Short(nsbox.Result):
            def as_tool_output(self, format=None, max_chars=nsbox.TOOL_OUTPUT_LIMIT):
                return "ok" if self.ok else super().as_tool_output(format, max_chars)
        self.assertEqual(Short.from_json(json_result()).as_tool_output(), "ok")

    def test_oom_in_a_cgroup_from_json(self):
        # The cgroup OOM killer needs a cgroup (the VM suite); the text is built from the JSON
        # nsbox prints there.
        r = nsbox.Result.from_json(json_result(
            status="oom", exit_code=137, signal=9, wall_time_ms=412.0,
            reason="stopped: out of memory (limit 256 MiB, after 0.412 s); the cgroup's OOM "
                   "killer killed the payload",
            limit={"name": "memory", "value": 268435456, "unit": "bytes",
                   "enforced_by": "cgroup", "stopped": True},
            limits_enforced_by="cgroup",
            cgroup={"path": "/x", "memory_peak": 268435456, "oom_kills": 1,
                    "pids_limit_hits": 0, "cpu_user_usec": 1, "cpu_system_usec": 1}))
        self.assertEqual(r.as_tool_output(),
                         "stopped: out of memory (limit 256 MiB, after 0.412 s); the cgroup's OOM "
                         "killer killed the payload\n[no output]")
        self.assertEqual((r.limit["name"], r.limit["value"], r.peak_memory),
                         ("memory", 256 << 20, 256 << 20))

    def test_pids_limit_in_a_cgroup_from_json(self):
        r = nsbox.Result.from_json(json_result(
            status="exited", exit_code=1, stderr="BlockingIOError: [Errno 11]\n",
            reason="exited with status 1",
            limit={"name": "pids", "value": 4, "unit": "processes", "enforced_by": "cgroup",
                   "stopped": False},
            notes=["the process limit (--pids-limit 4) refused 1 forks"]))
        self.assertEqual(r.as_tool_output(),
                         "exited with status 1\n[stderr]\nBlockingIOError: [Errno 11]\n"
                         "[the process limit (pids_limit=4) refused 1 forks]")

    def test_bad_output_never_breaks_the_tool_text(self):
        # Whatever the JSON holds (nsbox already made it valid UTF-8): controls are visible,
        # the text bounded.
        nasty = "\x00\x1b]0;title\x07\x1b[2J\r\x9b\ufffd" * 100_000
        r = nsbox.Result.from_json(json_result(status="exited", exit_code=0, stdout=nasty,
                                               stderr=nasty, reason="exited with status 0"))
        text = r.as_tool_output()
        self.assertLess(len(text), 2 * 4 * nsbox.TOOL_OUTPUT_LIMIT + 500)
        self.assertNotRegex(text, "[\x00-\x08\x0b-\x1f\x7f-\x9f]")
        self.assertIn("\\x1b]0;title\\x07", text)
        text.encode("utf-8")  # valid

    def test_result_fields(self):
        r = nsbox.Result.from_json(json_result(
            reason="timed out after 1 s; the sandbox was killed", status="timeout",
            limit={"name": "timeout", "value": 1.0, "unit": "seconds",
                   "enforced_by": "supervisor", "stopped": True}, notes=["n"]))
        self.assertEqual((r.reason, r.limit["name"], r.notes),
                         ("timed out after 1 s; the sandbox was killed", "timeout", ["n"]))
        with self.assertRaises(TypeError):
            nsbox.Result.from_json(json_result(limit="timeout"))

    def test_nsbox_error_as_tool_output(self):
        e = nsbox.NsboxError("rootfs '/x': No such file or directory\x1b", step="rootfs")
        self.assertEqual(e.as_tool_output(), "nsbox could not run the code: rootfs '/x': No such "
                                             "file or directory\\x1b")

    def test_version_matches_pyproject(self):
        with open(HERE.parent / "pyproject.toml") as f:
            self.assertIn(f'\nversion = "{nsbox.__version__}"\n', f.read())


if __name__ == "__main__":
    unittest.main()
