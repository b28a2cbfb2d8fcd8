# SPDX-License-Identifier: LGPL-2.1-or-later
"""One option set (issue 25): run(), run_python_code(), their async forms, Session and Pool take
the same options, keyword-only, with the same defaults; a Session takes every run option and
streams each step's output as it comes."""

import asyncio
import inspect
import json
import os
import tempfile
import time
import unittest
from unittest import mock

from tests.support import NSBOX, SandboxTestCase  # noqa: E402
import nsbox  # noqa: E402
from nsbox._options import CODE_OPTIONS, RUN_OPTIONS  # noqa: E402

RUN_NAMES = [o.name for o in RUN_OPTIONS]
# The options a step takes for itself (None: the Session's).
STEP_NAMES = {"timeout", "output_limit", "stdin", "on_stdout", "on_stderr", "copy_out",
              "copy_out_dir", "memory", "files"}
ENTRY_POINTS = [nsbox.run, nsbox.run_python_code, nsbox.arun, nsbox.arun_python_code]
# The run's options that the sandbox (not a step) holds: cgroup off so that the tests run the
# same on a host with or without a delegated cgroup.
SESSION = {"nsbox": NSBOX, "extra_args": ["--cgroup", "off"]}


def options_of(fn, skip=("self",)):
    """{name: default} of fn's keyword-only parameters; and the names of the others."""
    params = inspect.signature(fn).parameters.values()
    return ({p.name: p.default for p in params if p.kind == p.KEYWORD_ONLY},
            [p.name for p in params if p.kind != p.KEYWORD_ONLY and p.name not in skip])


class TestOneOptionSet(unittest.TestCase):
    """No sandbox needed: the signatures, and what is refused before anything runs."""

    def test_every_entry_point_takes_the_same_options(self):
        want = {o.name: o.default for o in RUN_OPTIONS}
        code = {o.name: o.default for o in CODE_OPTIONS}
        for fn in ENTRY_POINTS:
            opts, positional = options_of(fn)
            is_code = fn.__name__.endswith("python_code")
            self.assertEqual(opts, {**want, **code} if is_code else want, fn.__name__)
            self.assertEqual(positional, ["code" if is_code else "argv"], fn.__name__)
        self.assertTrue(inspect.iscoroutinefunction(nsbox.arun))
        self.assertTrue(inspect.iscoroutinefunction(nsbox.arun_python_code))
        # The defaults the documentation names.
        self.assertEqual((want["timeout"], want["memory"], want["cpus"], want["pids_limit"],
                          want["network"]), (10, "256m", 0.5, 64, "none"))

    def test_the_typed_dicts_are_the_table(self):
        """What type checkers and editors see (RunOptions, CodeOptions, StepOptions for
        ``**options: Unpack[...]``) names the table's options with the table's types."""
        import typing
        from nsbox import _options
        run = typing.get_type_hints(_options.RunOptions)
        self.assertEqual(run, {o.name: o.annotation for o in RUN_OPTIONS})
        code = typing.get_type_hints(_options.CodeOptions)
        self.assertEqual(code, {o.name: o.annotation for o in RUN_OPTIONS + CODE_OPTIONS})
        step = typing.get_type_hints(_options.StepOptions)
        self.assertEqual(set(step), set(_options.STEP_OPTIONS))
        self.assertEqual(step, {name: run[name] for name in step})

    def test_session_takes_every_run_option(self):
        opts, positional = options_of(nsbox.Session)
        self.assertEqual(positional, [])
        own = {"idle_timeout": 600, "lifetime": None, "name": None}
        self.assertEqual(opts, {**{o.name: o.default for o in RUN_OPTIONS}, **own})
        self.assertEqual(list(opts)[:len(RUN_NAMES)], RUN_NAMES)

    def test_session_steps_take_the_step_options(self):
        for method in (nsbox.Session.run_code, nsbox.Session.run, nsbox.Session.arun_code,
                       nsbox.Session.arun):
            opts, positional = options_of(method)
            self.assertEqual(set(opts), STEP_NAMES, method.__name__)
            self.assertTrue(all(v is None for v in opts.values()), method.__name__)
            self.assertEqual(len(positional), 1, method.__name__)
        self.assertTrue(inspect.iscoroutinefunction(nsbox.Session.arun_code))

    def test_pool_start_options_are_the_run_options(self):
        opts, positional = options_of(nsbox.Pool)
        self.assertEqual(positional, ["size", "preload"])
        defaults = {o.name: o.default for o in RUN_OPTIONS}
        for name, default in opts.items():
            if name != "name":
                self.assertEqual(default, defaults[name], name)

    def test_options_are_keyword_only(self):
        # An option given by position is Python's own TypeError, before nsbox is looked for.
        with mock.patch.dict(os.environ, {"NSBOX": "/nonexistent/nsbox"}):
            with self.assertRaises(TypeError):
                nsbox.run(["true"], 5)
            with self.assertRaises(TypeError):
                nsbox.run_python_code("pass", 5)
            with self.assertRaises(TypeError):
                asyncio.run(nsbox.arun(["true"], 5))
            with self.assertRaises(TypeError):
                asyncio.run(nsbox.arun_python_code("pass", 5))
            with self.assertRaises(TypeError):
                nsbox.Session(5)
            with self.assertRaises(TypeError):
                nsbox.Pool(2, (), 5)
            # An unknown name too.
            with self.assertRaises(TypeError):
                nsbox.run_python_code("pass", timeout_s=5)
            with self.assertRaises(TypeError):
                nsbox.Session(cell=False)
        s = nsbox.Session(nsbox=NSBOX) if os.access(NSBOX, os.X_OK) else None
        if s is not None:
            with self.assertRaises(TypeError):
                s.run_code("pass", 5)
            with self.assertRaises(TypeError):
                s.run(["true"], 5)
            # A run option a step cannot take: refused by name, saying why.
            for name in set(RUN_NAMES) - STEP_NAMES:
                with self.assertRaises(TypeError, msg=name) as cm:
                    s.run_code("pass", **{name: None})
                self.assertIn(f"does not take {name}=", str(cm.exception))
            with self.assertRaises(TypeError) as cm:
                s.run(["true"], network="loopback")
            self.assertIn("give it to Session(...)", str(cm.exception))

    def test_session_refuses_what_a_session_cannot_do(self):
        if not os.access(NSBOX, os.X_OK):
            self.skipTest(f"no nsbox binary at {NSBOX}")
        for option in ("stdout_file", "stderr_file"):
            with self.assertRaises(ValueError) as cm:
                nsbox.Session(nsbox=NSBOX, **{option: "/tmp/x"})
            self.assertIn("session start", str(cm.exception))
        with self.assertRaises(ValueError):
            nsbox.Session(nsbox=NSBOX, copy_out="work/x")
        with self.assertRaises(TypeError):
            nsbox.Session(nsbox=NSBOX, files=["a"])
        with self.assertRaises(ValueError):
            nsbox.Session(nsbox=NSBOX, network="host")
        with self.assertRaises(ValueError):
            nsbox.Session(nsbox=NSBOX, files={"../x": "y"})


class TestSessionOptions(SandboxTestCase):
    """Each run option given to a Session takes effect in its steps."""

    def test_files_env_and_defaults(self):
        with nsbox.Session(files={"in/a.txt": "hello"}, env={"NSBOX_TEST_VAR": "a\nb"},
                           output_limit=3000, **SESSION) as s:
            r = s.run_code("import os\nprint(open('in/a.txt').read(), "
                           "repr(os.environ['NSBOX_TEST_VAR']))")
            self.assertEqual(r.stdout, "hello 'a\\nb'\n", r.stderr)
            self.assertEqual(r.raw["limits"]["output"]["bytes"], 3000)
            # The defaults are a run's: half a CPU, 64 processes.
            self.assertEqual((r.raw["limits"]["pids"]["max"], r.raw["limits"]["cpus"]["cpus"]),
                             (64, 0.5), r.raw["limits"])
            # A step's own files, through nsbox session exec --copy-in.
            r = s.run(["cat", "/work/b.txt"], files={"b.txt": b"bee"})
            self.assertEqual(r.stdout, "bee", r.stderr)

    def test_session_copy_out_and_stdin_are_each_steps(self):
        with nsbox.Session(copy_out="/work/out.txt", stdin="from the session", **SESSION) as s:
            r = s.run_code("import sys\nopen('out.txt', 'w').write(sys.stdin.read())")
            self.assertEqual(r.files, {"/work/out.txt": b"from the session"}, r.stderr)
            r = s.run_code("import sys\nopen('out.txt', 'w').write(sys.stdin.read())",
                           stdin="own", copy_out=())
            self.assertEqual(r.files, {})
            self.assertEqual(s.run(["cat", "/work/out.txt"], copy_out=()).stdout, "own")

    def test_network(self):
        source = ("import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
                  "c = socket.create_connection(s.getsockname()); a, _ = s.accept()\n"
                  "c.sendall(b'ping'); print(a.recv(4).decode())\n")
        with nsbox.Session(**SESSION) as s:
            self.assertIn("PermissionError", s.run_code(source).stderr)
        with nsbox.Session(network="loopback", **SESSION) as s:
            r = s.run_code(source)
            self.assertEqual(r.stdout, "ping\n", r.stderr)

    def test_workspace(self):
        with tempfile.TemporaryDirectory() as state, \
                mock.patch.dict(os.environ, {"XDG_STATE_HOME": state}):
            os.chmod(state, 0o755)  # for uid 65534 too (its own state dir is below)
            with nsbox.Session(workspace="opts1", **SESSION) as s:
                self.assertTrue(s.run_code("open('kept.txt', 'w').write('one')").ok)
            self.assertTrue(s.workspace_saved, s.stop_result)
            r = nsbox.run_python_code("print(open('kept.txt').read())", workspace="opts1",
                                      nsbox=NSBOX)
            self.assertEqual(r.stdout, "one\n", r.stderr)

    def test_log(self):
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o755)
            log = os.path.join(d, "audit.log")
            with nsbox.Session(log=log, **SESSION) as s:
                s.run_code("print('logged step')")
            with open(log) as f:
                records = [json.loads(line) for line in f]
            self.assertTrue(records)
            self.assertIn("logged step", json.dumps(records))
            # $NSBOX_LOG by default, as for a run; "" for none.
            env_log = os.path.join(d, "env.log")
            with mock.patch.dict(os.environ, {"NSBOX_LOG": env_log}):
                with nsbox.Session(log="", **SESSION) as s:
                    s.run_code("pass")
                self.assertFalse(os.path.exists(env_log))
                with nsbox.Session(**SESSION) as s:
                    s.run_code("pass")
                self.assertGreater(os.path.getsize(env_log), 0)


class TestSessionStreams(SandboxTestCase):
    """on_stdout/on_stderr of a step: called as the output comes, before the step ends."""

    SLOW = "import sys, time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')\n" \
           "sys.stderr.write('err')\n"

    def check(self, got, result, done):
        # print() may write "first" and its newline apart: the first piece starts it.
        first_at, first = got["stdout"][0]
        self.assertTrue(first.startswith("first"), got)
        # The first piece came a second before the result (the step sleeps in between).
        self.assertLess(first_at, done - 0.5, got)
        self.assertEqual("".join(t for _, t in got["stdout"]), "first\nsecond\n")
        self.assertEqual("".join(t for _, t in got["stderr"]), "err")
        self.assertEqual(result.stdout, "first\nsecond\n")
        self.assertEqual(result.stderr, "err")

    def callbacks(self):
        """The pieces each callback got, with the time each came; and the callbacks."""
        got = {"stdout": [], "stderr": []}
        return got, {"on_stdout": lambda t: got["stdout"].append((time.monotonic(), t)),
                     "on_stderr": lambda t: got["stderr"].append((time.monotonic(), t))}

    def test_run_code_streams(self):
        with nsbox.Session(**SESSION) as s:
            got, cbs = self.callbacks()
            r = s.run_code(self.SLOW, **cbs)
            self.check(got, r, time.monotonic())
            # The session's callbacks are each step's default.
            got, cbs = self.callbacks()
        with nsbox.Session(**SESSION, **cbs) as s:
            r = s.run(["python3", "-c", self.SLOW])
            self.check(got, r, time.monotonic())

    def test_async_steps_stream(self):
        async def main():
            async with nsbox.Session(**SESSION) as s:
                got, cbs = self.callbacks()
                r = await s.arun_code(self.SLOW, **cbs)
                self.check(got, r, time.monotonic())
                got, cbs = self.callbacks()
                r = await s.arun(["python3", "-c", self.SLOW], **cbs)
                self.check(got, r, time.monotonic())
        asyncio.run(main())

    def test_without_callbacks_nothing_streams(self):
        # No "stream" asked: the answer is one line, as before.
        with nsbox.Session(**SESSION) as s:
            r = s.run_code("print('x' * 100)")
            self.assertEqual(r.stdout, "x" * 100 + "\n")

    def test_a_copy_out_step_calls_back_at_its_end(self):
        with nsbox.Session(**SESSION) as s:
            got, cbs = self.callbacks()
            r = s.run_code("open('o.txt', 'w').write('o')\nprint('done')", copy_out="/work/o.txt",
                           **cbs)
            self.assertEqual(r.files, {"/work/o.txt": b"o"})
            self.assertEqual([t for _, t in got["stdout"]], ["done\n"])

    def test_a_callback_error_propagates(self):
        def boom(text):
            raise RuntimeError("callback failed")
        with nsbox.Session(**SESSION) as s:
            with self.assertRaises(RuntimeError):
                s.run_code("print('x', flush=True)\nimport time; time.sleep(0.3)", on_stdout=boom)
            # The session is still usable.
            self.assertEqual(s.run_code("print(2)").stdout, "2\n")


if __name__ == "__main__":
    unittest.main()
