# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tests of nsbox.Pool against the real binary and rootfs: fresh sandboxes for every run, safe
from many threads and tasks at once, and nothing left once the pool is closed.

Environment as test_api.py (NSBOX, NSBOX_ROOTFS, NSBOX_TESTS_MUST_WORK=1); works as root and as
an ordinary user. The pool's registry is a private one (XDG_RUNTIME_DIR) while these run."""
import asyncio
import json
import os
import subprocess
import sys
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import nsbox  # noqa: E402
from tests.support import runtime_dir_enter, runtime_dir_leave  # noqa: E402

REPO = HERE.parent.parent
NSBOX = os.environ.get("NSBOX") or str(REPO / "build" / "src" / "nsbox")
MUST_WORK = os.environ.get("NSBOX_TESTS_MUST_WORK") == "1"


def skip_or_fail(reason):
    if MUST_WORK:
        raise AssertionError(f"would skip, but NSBOX_TESTS_MUST_WORK=1: {reason}")
    raise unittest.SkipTest(reason)


def descendants(pid):
    kids = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat") as f:
                    kids.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(e))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class TestPool(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not (os.path.isfile(NSBOX) and os.access(NSBOX, os.X_OK)):
            skip_or_fail(f"no nsbox binary at {NSBOX} (set NSBOX)")
        runtime_dir_enter(cls, "nsbox-pool-api-")

    @classmethod
    def tearDownClass(cls):
        runtime_dir_leave(cls)

    def pool(self, **kw):
        kw.setdefault("size", 2)
        kw.setdefault("preload", ["json"])
        try:
            return nsbox.Pool(nsbox=NSBOX, **kw).start()
        except nsbox.NsboxError as e:
            if "rootfs" in str(e) and "preload" not in str(e):
                skip_or_fail(f"no rootfs (set NSBOX_ROOTFS): {e}")
            raise

    def pool_pid(self, pool):
        ps = subprocess.run([NSBOX, "ps", "--json"], capture_output=True, text=True).stdout
        return next(json.loads(l)["pid"] for l in ps.splitlines()
                    if json.loads(l).get("name") == pool.name)

    def test_each_run_is_fresh(self):
        with self.pool() as pool:
            seen = set()
            for _ in range(4):
                r = pool.run_python_code(
                    "import os\nprint(os.readlink('/proc/self/ns/pid'), 'x' in globals(), "
                    "os.path.exists('/tmp/m'))\nx = 1\nopen('/tmp/m', 'w').close()\n")
                self.assertEqual(r.exit_code, 0, r.raw)
                ns, had_x, had_file = r.stdout.split()
                self.assertEqual((had_x, had_file), ("False", "False"))
                seen.add(r.raw["session_id"])
            # Four sandboxes. (Their pid namespaces' inode numbers may repeat: the kernel
            # reuses the number of one that has gone; test_many_threads_at_once compares
            # namespaces that live at the same time.)
            self.assertEqual(len(seen), 4)

    def test_run_stdin_timeout_output_limit(self):
        with self.pool() as pool:
            r = pool.run(["cat"], stdin="abc")
            self.assertEqual(r.stdout, "abc")
            r = pool.run_python_code("import sys; print(sys.stdin.read()[::-1])", stdin=b"xyz")
            self.assertEqual(r.stdout, "zyx\n")
            r = pool.run_python_code("while True: pass", timeout=1)
            self.assertEqual(r.raw["status"], "timeout")
            r = pool.run_python_code("print('a' * 1000)", output_limit=10)
            self.assertTrue(r.raw["stdout_truncated"])
            self.assertEqual(pool.run_python_code("print(2)").stdout, "2\n")

    def test_many_threads_at_once(self):
        with self.pool(size=3) as pool:
            def one(i):
                r = pool.run_python_code(f"import os; print({i}, os.readlink('/proc/self/ns/pid'))",
                                         timeout=60)
                self.assertEqual(r.exit_code, 0, r.raw)
                return r.stdout.split() + [r.raw["session_id"]]
            with ThreadPoolExecutor(8) as ex:
                out = list(ex.map(one, range(8)))
            self.assertEqual(sorted(int(o[0]) for o in out), list(range(8)))
            self.assertEqual(len({o[2] for o in out}), 8)  # eight sandboxes
            self.assertEqual(pool.status()["served"], 8)
            # Three at once, alive together: three pid namespaces.
            deadline = time.monotonic() + 60
            while pool.status()["ready"] < 3 and time.monotonic() < deadline:
                time.sleep(0.02)
            with ThreadPoolExecutor(3) as ex:
                out = list(ex.map(lambda _: pool.run_python_code(
                    "import os, time; time.sleep(2); print(os.readlink('/proc/self/ns/pid'))",
                    timeout=60).stdout, range(3)))
            self.assertEqual(len(set(out)), 3, out)

    def test_run_memory_and_files(self):
        alloc = ("try:\n    b = bytearray(100 << 20)\n    print('allocated')\n"
                 "except MemoryError:\n    print('MemoryError')\n    raise\n")
        with self.pool(size=1, memory="256m") as pool:
            r = pool.run_python_code(alloc, memory="64m")
            self.assertNotIn("allocated", r.stdout, r.raw)
            self.assertFalse(r.ok, r.raw)
            self.assertEqual(r.raw["limits"]["memory"]["bytes"], 64 << 20, r.raw)
            self.assertTrue(any("64m" in n for n in r.notes), r.raw)
            # The next run from the same pool has the pool's whole limit.
            r = pool.run_python_code(alloc)
            self.assertEqual(r.stdout, "allocated\n", r.raw)
            with self.assertRaises(nsbox.NsboxError) as cm:
                pool.run_python_code("print(1)", memory="1g")
            self.assertIn("above the pool's --memory 256m", str(cm.exception))
            r = pool.run_python_code(
                "import os\nprint(sorted(os.listdir('/work')), open('/work/d/b.txt').read())",
                files={"a.txt": "A", "d/b.txt": b"B"})
            self.assertEqual(r.stdout, "['a.txt', 'd'] B\n", r.raw)
            r = pool.run_python_code("import os\nprint(os.listdir('/work'))")
            self.assertEqual(r.stdout, "[]\n", r.raw)
            r = pool.run(["cat", "/work/a.txt"], files={"a.txt": "hello"}, memory="64m",
                         stdin="unused")
            self.assertEqual((r.stdout, r.raw["limits"]["memory"]["bytes"]),
                             ("hello", 64 << 20), r.raw)
            with self.assertRaises(ValueError):
                pool.run_python_code("print(1)", files={"../x": "no"})

            async def main():
                return await asyncio.gather(
                    pool.arun_python_code("print(open('/work/f').read())", files={"f": "x"}),
                    pool.arun(["true"], memory="64m"))
            rs = asyncio.run(main())
            self.assertEqual(rs[0].stdout, "x\n", rs[0].raw)
            self.assertEqual(rs[1].raw["limits"]["memory"]["bytes"], 64 << 20, rs[1].raw)

    def test_session_step_memory(self):
        # The same per-step memory, in a Session (it goes through the same session exec).
        alloc = "b = bytearray(100 << 20)\nprint('allocated')\n"
        with nsbox.Session(nsbox=NSBOX, memory="256m", extra_args=["--cgroup", "off"]) as s:
            r = s.run_code(alloc, memory="64m")
            self.assertNotIn("allocated", r.stdout, r.raw)
            self.assertEqual(r.raw["limits"]["memory"]["bytes"], 64 << 20, r.raw)
            self.assertTrue(any("fresh one" in w for w in r.raw["warnings"]), r.raw)
            r = s.run(["python3", "-c", alloc], memory="64m")
            self.assertNotIn("allocated", r.stdout, r.raw)
            self.assertEqual(s.run_code(alloc).stdout, "allocated\n")
            with self.assertRaises(nsbox.NsboxError) as cm:
                s.run_code("1", memory="1g")
            self.assertIn("above the session's --memory 256m", str(cm.exception))

    def test_async(self):
        async def main():
            async with nsbox.Pool(nsbox=NSBOX, size=2, preload=["json"]) as pool:
                rs = await asyncio.gather(*[pool.arun_python_code(f"print({i})")
                                            for i in range(4)],
                                          pool.arun(["echo", "hi"]))
                return [r.stdout for r in rs]
        self.assertEqual(asyncio.run(main()), ["0\n", "1\n", "2\n", "3\n", "hi\n"])

    def test_close_leaves_nothing(self):
        pool = self.pool()
        pid = self.pool_pid(pool)
        pids = [pid] + descendants(pid)
        self.assertGreaterEqual(len(pids), 1 + 2 * 3)  # pool; supervisor, init, interpreter
        pool.run_python_code("import subprocess; subprocess.Popen(['sleep', '1000'], "
                             "start_new_session=True)")
        pool.close()
        self.assertFalse([p for p in pids[1:] if alive(p)])  # every sandbox, at once
        deadline = time.monotonic() + 2  # the pool: its exit ended the connection
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertFalse(alive(pid))
        self.assertFalse(os.path.exists(pool.socket_path or "/nonexistent"))
        ps = subprocess.run([NSBOX, "ps", "--json"], capture_output=True, text=True).stdout
        self.assertNotIn(pool.name, ps)
        pool.close()  # twice is fine
        with self.assertRaises(nsbox.NsboxError):
            pool.run_python_code("print(1)")

    def test_a_sandbox_gone_before_its_run_is_replaced(self):
        # As if the sandbox handed out had died (killed from outside) before the run connected:
        # its socket is gone. The run takes another; nothing ran twice.
        with self.pool(size=1) as pool:
            real, calls = nsbox.Pool._taken, []

            def taken(line):
                member_id, path = real(line)
                calls.append(member_id)
                return member_id, path + ".gone" if len(calls) == 1 else path
            pool._taken = taken
            r = pool.run_python_code("print(5)")
            self.assertEqual(r.stdout, "5\n")
            self.assertEqual(len(calls), 2)
            self.assertEqual(r.raw["session_id"], calls[1])

    def test_failing_preload_raises_at_start(self):
        with self.assertRaises(nsbox.NsboxError) as cm:
            self.pool(preload=["no_such_module_zq"])
        self.assertIn("no_such_module_zq", str(cm.exception))
        self.assertEqual(cm.exception.step, "pool start")
        ps = subprocess.run([NSBOX, "ps", "--json"], capture_output=True, text=True).stdout
        self.assertEqual(ps, "")

    def test_killed_pool_is_said(self):
        pool = self.pool(size=1)
        self.addCleanup(pool.close)
        subprocess.run([NSBOX, "kill", pool.name], capture_output=True, check=True)
        deadline = time.monotonic() + 10
        while os.path.exists(pool.socket_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        with self.assertRaises(nsbox.NsboxError) as cm:
            pool.run_python_code("print(1)")
        self.assertIn("not running", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
