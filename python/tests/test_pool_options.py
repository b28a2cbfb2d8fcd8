# SPDX-License-Identifier: LGPL-2.1-or-later
"""A Pool's runs take the option set (issue 25): a Session step's options from RUN_OPTIONS,
keyword-only, each None being the pool's, and run_python_code()'s cell; the run options that
make a sandbox are refused with a TypeError that says why; on_stdout/on_stderr stream.

Environment as test_api.py (NSBOX, NSBOX_ROOTFS, NSBOX_TESTS_MUST_WORK=1); works as root and as
an ordinary user. The pools' registry is a private one (XDG_RUNTIME_DIR) while these run."""
import asyncio
import inspect
import os
import tempfile
import time
import unittest

from tests.support import MUST_WORK, NSBOX, runtime_dir_enter, runtime_dir_leave  # noqa: E402
import nsbox  # noqa: E402
from nsbox._options import CODE_OPTIONS, RUN_OPTIONS, STEP_OPTIONS  # noqa: E402

RUNS = (nsbox.Pool.run, nsbox.Pool.run_python_code, nsbox.Pool.arun,
        nsbox.Pool.arun_python_code)
# The options a Session's step takes (test_options.STEP_NAMES), and so a pool's run.
STEP_NAMES = {"timeout", "output_limit", "stdin", "on_stdout", "on_stderr", "copy_out",
              "copy_out_dir", "memory", "files"}
SLOW = "import sys, time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')\n" \
       "sys.stderr.write('err')\n"


def call(pool, method, *args, **kw):
    """pool.METHOD(*args, **kw), awaited for the async forms."""
    fn = getattr(pool, method)
    if inspect.iscoroutinefunction(fn):
        return asyncio.run(fn(*args, **kw))
    return fn(*args, **kw)


def first_arg(method):
    return "print(1)" if method.endswith("python_code") else ["true"]


class TestPoolRunSignatures(unittest.TestCase):
    """No sandbox needed: the signatures, and what is refused before anything runs (the pool is
    not started: a run that got past its options would raise NsboxError, not TypeError)."""

    def setUp(self):
        self.pool = nsbox.Pool(nsbox=NSBOX) if os.access(NSBOX, os.X_OK) else None
        if self.pool is None:
            self.skipTest(f"no nsbox binary at {NSBOX}")

    def test_runs_take_the_step_options(self):
        self.assertEqual(set(STEP_OPTIONS), STEP_NAMES)
        table = [o.name for o in RUN_OPTIONS + CODE_OPTIONS]
        for fn in RUNS:
            params = inspect.signature(fn).parameters.values()
            opts = {p.name: p.default for p in params if p.kind == p.KEYWORD_ONLY}
            positional = [p.name for p in params if p.kind != p.KEYWORD_ONLY]
            is_code = fn.__name__.endswith("python_code")
            self.assertEqual(set(opts), STEP_NAMES | ({"cell"} if is_code else set()),
                             fn.__name__)
            self.assertTrue(all(v is None for v in opts.values()), fn.__name__)  # the pool's
            self.assertEqual(list(opts), [n for n in table if n in opts])  # the table's order
            self.assertEqual(positional, ["self", "code" if is_code else "argv"], fn.__name__)
        self.assertTrue(inspect.iscoroutinefunction(nsbox.Pool.arun))
        self.assertTrue(inspect.iscoroutinefunction(nsbox.Pool.arun_python_code))

    def test_an_option_by_position_is_a_type_error(self):
        # Until now: run(argv, timeout, output_limit, stdin).
        for fn in RUNS:
            method = fn.__name__
            with self.assertRaises(TypeError, msg=method) as cm:
                call(self.pool, method, first_arg(method), 5)
            self.assertIn("keyword-only", str(cm.exception))
            with self.assertRaises(TypeError, msg=method) as cm:
                call(self.pool, method, first_arg(method), timeout_s=5)
            self.assertIn("unexpected keyword argument 'timeout_s'", str(cm.exception))
        # Past its options, the pool not started: NsboxError, not TypeError.
        with self.assertRaises(nsbox.NsboxError):
            self.pool.run(["true"], timeout=5)

    def test_the_other_run_options_are_refused_saying_why(self):
        # Every option of the table is either taken or refused by name: a new one is one or
        # the other without an edit here.
        refused = [o.name for o in RUN_OPTIONS if o.name not in STEP_NAMES]
        self.assertIn("network", refused)
        for fn in RUNS:
            method = fn.__name__
            for name in refused:
                with self.assertRaises(TypeError, msg=(method, name)) as cm:
                    call(self.pool, method, first_arg(method), **{name: None})
                text = str(cm.exception)
                self.assertIn(f"does not take {name}=", text)
                self.assertIn("pool", text)
        with self.assertRaises(TypeError) as cm:
            self.pool.run_python_code("1", network="loopback")
        self.assertIn("made before the run", str(cm.exception))
        self.assertIn("Pool(...)", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            self.pool.run(["true"], workspace="w")
        self.assertIn("single-use", str(cm.exception))
        with self.assertRaises(TypeError):
            self.pool.run(["true"], cell=True)  # a program has no cell

    def test_cell_false_is_refused(self):
        for method in ("run_python_code", "arun_python_code"):
            with self.assertRaises(ValueError) as cm:
                call(self.pool, method, "1", cell=False)
            self.assertIn("notebook cell", str(cm.exception))
            with self.assertRaises(TypeError):
                call(self.pool, method, "1", cell="yes")

    def test_bad_values_are_refused_before_anything_runs(self):
        with self.assertRaises(ValueError):
            self.pool.run_python_code("1", files={"../x": "no"})
        with self.assertRaises(TypeError):
            self.pool.run_python_code("1", files=["a"])
        with self.assertRaises(ValueError):
            self.pool.run(["true"], copy_out="work/x")
        with self.assertRaises(TypeError):
            self.pool.run("true")


class TestPoolRunOptions(unittest.TestCase):
    """Each option of a run takes effect; the callbacks get the output as it comes."""

    @classmethod
    def setUpClass(cls):
        if not (os.path.isfile(NSBOX) and os.access(NSBOX, os.X_OK)):
            reason = f"no nsbox binary at {NSBOX} (set NSBOX)"
            if MUST_WORK:
                raise AssertionError(f"would skip, but NSBOX_TESTS_MUST_WORK=1: {reason}")
            raise unittest.SkipTest(reason)
        runtime_dir_enter(cls, "nsbox-pool-options-")
        try:
            cls.pool = nsbox.Pool(nsbox=NSBOX, size=2, preload=["json"], memory="256m",
                                  timeout=30, extra_args=["--cgroup", "off"]).start()
        except nsbox.NsboxError as e:
            cls.tearDownClass()
            if "rootfs" in str(e) and not MUST_WORK:
                raise unittest.SkipTest(f"no rootfs (set NSBOX_ROOTFS): {e}")
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "pool", None) is not None:
            cls.pool.close()
        runtime_dir_leave(cls)

    def test_timeout_output_limit_stdin(self):
        pool = self.pool
        r = pool.run_python_code("while True: pass", timeout=1)
        self.assertEqual(r.raw["status"], "timeout", r.raw)
        self.assertEqual(r.raw["limits"]["timeout"]["seconds"], 1, r.raw)
        # None: the pool's (30 s).
        r = pool.run(["true"])
        self.assertEqual(r.raw["limits"]["timeout"]["seconds"], 30, r.raw)
        r = pool.run_python_code("print('a' * 1000)", output_limit=10)
        self.assertTrue(r.raw["stdout_truncated"], r.raw)
        self.assertEqual(len(r.stdout), 10)
        r = pool.run(["cat"], stdin="abc")
        self.assertEqual(r.stdout, "abc")
        r = pool.run_python_code("import sys; print(sys.stdin.read()[::-1])", stdin=b"xyz")
        self.assertEqual(r.stdout, "zyx\n")

    def test_memory_files_copy_out(self):
        pool = self.pool
        r = pool.run(["true"], memory="64m")
        self.assertEqual(r.raw["limits"]["memory"]["bytes"], 64 << 20, r.raw)
        r = pool.run_python_code("print(open('/work/d/a.txt').read())", files={"d/a.txt": "A"})
        self.assertEqual(r.stdout, "A\n", r.raw)
        with tempfile.TemporaryDirectory() as out:
            r = pool.run_python_code("open('/work/o.txt', 'w').write('o')",
                                     copy_out="/work/o.txt", copy_out_dir=out)
            self.assertEqual(r.files, {"/work/o.txt": b"o"}, r.raw)
            with open(os.path.join(out, "o.txt"), "rb") as f:
                self.assertEqual(f.read(), b"o")
        # Through `nsbox run --pool`, stdin, timeout and the copy together.
        r = pool.run(["sh", "-c", "cat > /work/x; exit 3"], stdin=b"in", timeout=20,
                     copy_out=["/work/x"])
        self.assertEqual((r.exit_code, r.files), (3, {"/work/x": b"in"}), r.raw)
        self.assertEqual(r.raw["limits"]["timeout"]["seconds"], 20, r.raw)

    def test_cell(self):
        r = self.pool.run_python_code("1 + 1", cell=True)
        self.assertEqual(r.outputs, [{"type": "execute_result", "data": {"text/plain": "2"}}])
        self.assertEqual(self.pool.run_python_code("1 + 1").outputs, r.outputs)

    def callbacks(self):
        got = {"stdout": [], "stderr": []}
        return got, {"on_stdout": lambda t: got["stdout"].append((time.monotonic(), t)),
                     "on_stderr": lambda t: got["stderr"].append((time.monotonic(), t))}

    def check_streamed(self, got, result, done):
        first_at, first = got["stdout"][0]
        self.assertTrue(first.startswith("first"), got)
        # The first piece came before the run ended (it sleeps a second in between).
        self.assertLess(first_at, done - 0.5, got)
        self.assertEqual("".join(t for _, t in got["stdout"]), "first\nsecond\n")
        self.assertEqual("".join(t for _, t in got["stderr"]), "err")
        self.assertEqual((result.stdout, result.stderr), ("first\nsecond\n", "err"))

    def test_runs_stream(self):
        got, cbs = self.callbacks()
        r = self.pool.run_python_code(SLOW, **cbs)
        self.check_streamed(got, r, time.monotonic())
        got, cbs = self.callbacks()
        r = self.pool.run(["python3", "-c", SLOW], **cbs)
        self.check_streamed(got, r, time.monotonic())

    def test_async_runs_stream(self):
        async def main():
            got, cbs = self.callbacks()
            r = await self.pool.arun_python_code(SLOW, **cbs)
            self.check_streamed(got, r, time.monotonic())
            got, cbs = self.callbacks()
            r = await self.pool.arun(["python3", "-c", SLOW], **cbs)
            self.check_streamed(got, r, time.monotonic())
        asyncio.run(main())

    def test_a_run_through_nsbox_run_calls_back_at_its_end(self):
        got, cbs = self.callbacks()
        r = self.pool.run_python_code("print('done')", memory="64m", **cbs)
        self.assertEqual(r.stdout, "done\n", r.raw)
        self.assertEqual([t for _, t in got["stdout"]], ["done\n"])

    def test_a_callback_error_propagates(self):
        def boom(text):
            raise RuntimeError("callback failed")
        with self.assertRaises(RuntimeError):
            self.pool.run_python_code("print('x', flush=True)\nimport time; time.sleep(5)",
                                      on_stdout=boom)
        # The pool is still usable (that sandbox ended with its lease).
        self.assertEqual(self.pool.run_python_code("print(2)").stdout, "2\n")


if __name__ == "__main__":
    unittest.main()
