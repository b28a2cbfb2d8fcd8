# SPDX-License-Identifier: LGPL-2.1-or-later
"""Notebook cells: `nsbox run --cell` and a session's code steps (src/lib/cell.py). The value of a
last expression, display() and matplotlib's figures become the result's outputs (read from the
cell's outputs channel, never stdout); an uncaught exception its error object, with a traceback
of the cell's lines and no frame of nsbox's driver; the cell's globals are the real __main__.

The text behaviours run on the default (minimal) rootfs, which has no IPython; the MIME bundles
(text/html of a DataFrame, PNG figures) on the science rootfs (NSBOX_ROOTFS_SCIENCE, default
build/rootfs/science/tree), which has IPython and matplotlib-inline.
"""
import base64
import json
import os
import struct
import tempfile
import unittest

from nsboxtest import HERE, NsboxTestCase, nsbox, nsbox_json
from test_session import SessionTestCase, setUpModule, tearDownModule  # noqa: F401

SCIENCE = os.environ.get("NSBOX_ROOTFS_SCIENCE") or os.path.join(
    HERE, "..", "..", "build", "rootfs", "science", "tree")


def png_size(b64):
    raw = base64.b64decode(b64)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", raw[:8]
    return struct.unpack(">II", raw[16:24])


class CellRun:
    """`nsbox run --cell` of code; ROOTFS_OPTS chooses the tree."""
    ROOTFS_OPTS = ()

    def cell(self, code, *opts):
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write(code)
            f.flush()
            return nsbox_json(*self.ROOTFS_OPTS, "--cgroup", "off", *opts, "--cell",
                              "--code", f.name)


class TestCellText(CellRun, NsboxTestCase):
    def test_last_expression_and_display_are_outputs_not_stdout(self):
        p, r = self.cell("print('printed')\ndisplay(1, 'two')\nx = [1, 2]\nx\n")
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 0), r)
        self.assertEqual(r["stdout"], "printed\n")
        self.assertEqual(r["outputs"], [
            {"type": "display_data", "data": {"text/plain": "1"}},
            {"type": "display_data", "data": {"text/plain": "'two'"}},
            {"type": "execute_result", "data": {"text/plain": "[1, 2]"}}])
        self.assertIsNone(r["error"])

    def test_none_a_statement_or_a_semicolon_at_the_end_show_nothing(self):
        p, r = self.cell("x = 1\nNone\n")
        self.assertEqual(r["outputs"], [])
        p, r = self.cell("x = 1\nx;  \n")
        self.assertEqual(r["outputs"], [])
        p, r = self.cell("y = 2\n")
        self.assertEqual(r["outputs"], [])

    def test_a_plain_script_stays_the_default(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write("[1, 2]\n")
            f.flush()
            p, r = nsbox_json("--cgroup", "off", "--code", f.name)
        self.assertEqual((r["exit_code"], r["stdout"]), (0, ""))
        self.assertNotIn("outputs", r)
        self.assertIsNone(r["error"])

    def test_an_exception_is_the_error_object_with_the_cells_lines(self):
        code = "def f(x):\n    return 1 / x\n\nprint('before')\nf(0)\n"
        p, r = self.cell(code)
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 1))
        err = r["error"]
        self.assertEqual((err["name"], err["value"]), ("ZeroDivisionError", "division by zero"))
        self.assertEqual(err["traceback"][0], "Traceback (most recent call last):")
        self.assertEqual(err["traceback"][-1], "ZeroDivisionError: division by zero")
        self.assertIn('  File "/work/main.py", line 5, in <module>', err["traceback"])
        self.assertIn("    f(0)", err["traceback"])
        self.assertIn("    return 1 / x", err["traceback"])
        # stderr shows the same traceback, without a frame of the driver (python3 -c's
        # "<string>").
        self.assertIn("    return 1 / x\n", r["stderr"])
        self.assertNotIn("<string>", r["stderr"])
        self.assertEqual(len([l for l in err["traceback"] if l.startswith("  File")]), 2)

    def test_a_syntax_error_is_the_error_object(self):
        p, r = self.cell("x = (1,\n")
        self.assertEqual(r["exit_code"], 1)
        self.assertEqual(r["error"]["name"], "SyntaxError")
        self.assertNotIn("<string>", r["stderr"])
        self.assertIn("SyntaxError", r["stderr"].splitlines()[-1])

    def test_system_exit_is_the_exit_status_not_an_error(self):
        p, r = self.cell("import sys\nprint('bye')\nsys.exit(3)\n")
        self.assertEqual((r["exit_code"], r["stdout"], r["error"]), (3, "bye\n", None))

    def test_top_level_await(self):
        p, r = self.cell("import asyncio\nasync def two():\n    await asyncio.sleep(0.01)\n"
                         "    return 2\nv = await two()\nv * 21\n")
        self.assertEqual(r["outputs"], [{"type": "execute_result", "data": {"text/plain": "42"}}],
                         r["stderr"])

    def test_globals_are_the_real_main(self):
        code = ("import dataclasses, inspect, pickle, sys\n"
                "from multiprocessing import Pool\n"
                "def sq(x):\n    return x * x\n"
                "@dataclasses.dataclass\nclass P:\n    x: int\n"
                "assert sys.modules['__main__'].sq is sq\n"
                "assert [k for k in vars(sys.modules['__main__']) if 'nsbox' in k] == []\n"
                "print(pickle.loads(pickle.dumps(sq))(3), P(1))\n"
                "print(inspect.getsource(sq), end='')\n"
                "with Pool(2) as pool:\n    print(pool.map(sq, [1, 2, 3]))\n")
        p, r = self.cell(code)
        self.assertEqual((r["exit_code"], r["stderr"]), (0, ""), r)
        self.assertEqual(r["stdout"], "9 P(x=1)\ndef sq(x):\n    return x * x\n[1, 4, 9]\n")

    def test_script_arguments_and_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write("import sys\nprint(sys.argv, __file__, sys.path[0])\n")
            f.flush()
            p, r = nsbox_json("--cgroup", "off", "--cell", "-w", "/tmp", "--code", f.name, "--",
                              "a", "b")
        self.assertEqual(r["stdout"], "['/work/main.py', 'a', 'b'] /work/main.py /work\n")

    def test_an_output_over_the_budget_is_cut_and_said(self):
        p, r = self.cell("display('x' * 5000)\n'small'\n", "--outputs-limit", "1000")
        self.assertEqual(r["exit_code"], 0)
        first = r["outputs"][0]
        self.assertEqual(len(first["data"]["text/plain"]), 203)
        self.assertEqual(first["dropped"], {"text/plain": 5002 - 200})
        self.assertEqual(r["outputs"][1]["data"]["text/plain"], "'small'")
        self.assertTrue(any("1 part of the cell's outputs (text/plain first" in n
                            for n in r["notes"]), r["notes"])

    def test_lines_written_to_the_channel_by_the_cell_are_not_outputs(self):
        p, r = self.cell("import os\nos.write(4, b'junk\\n{\"type\": \"display_data\"}\\n')\n1\n")
        self.assertEqual(r["outputs"], [{"type": "execute_result", "data": {"text/plain": "1"}}])
        self.assertTrue(any("2 lines on the cell's outputs channel (fd 4) were not an output"
                            in n for n in r["notes"]), r["notes"])

    def test_a_cell_that_closes_the_channel_still_runs(self):
        p, r = self.cell("import os\nos.close(4)\nprint('ran')\n7\n")
        self.assertEqual((r["exit_code"], r["stdout"], r["outputs"]), (0, "ran\n", []))

    def test_without_json_the_outputs_text_follows_the_output(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write("print('p')\ndisplay('d\\x1b[2J')\n[1, 2]\n")
            f.flush()
            p = nsbox("run", "--cgroup", "off", "--cell", "--code", f.name)
        self.assertEqual((p.returncode, p.stdout), (0, "p\n'd\\x1b[2J'\n[1, 2]\n"))

    def test_with_result_fd_stdout_stays_the_programs(self):
        r_fd, w_fd = os.pipe()
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write("print('p')\n[1, 2]\n")
            f.flush()
            p = nsbox("run", "--cgroup", "off", "--cell", "--result-fd", str(w_fd), "--code",
                      f.name, pass_fds=(w_fd,))
        os.close(w_fd)
        with os.fdopen(r_fd) as res:
            r = json.loads(res.read())
        self.assertEqual((p.returncode, p.stdout), (0, "p\n"))
        self.assertEqual(r["outputs"], [{"type": "execute_result",
                                         "data": {"text/plain": "[1, 2]"}}])

    def test_bad_options(self):
        self.assertOneLineError(nsbox("run", "--cell", "--", "true"),
                                contains="--cell runs Python code as a notebook cell: give it "
                                         "with --code")
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            self.assertOneLineError(nsbox("run", "--cell", "--keep-fds", "--code", f.name),
                                    contains="--cell and --keep-fds exclude each other")
        for bad in ("0", "2g", "lots"):
            with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
                self.assertOneLineError(
                    nsbox("run", "--cell", "--outputs-limit", bad, "--code", f.name),
                    contains="--outputs-limit")


class ScienceTree:
    ROOTFS_OPTS = ("--rootfs", SCIENCE)

    def setUp(self):
        if not os.path.isdir(os.path.join(SCIENCE, "usr/lib/python3/dist-packages/IPython")):
            self.skip_or_fail(f"no science rootfs with IPython at {SCIENCE}: build it with "
                              "'ninja -C build rootfs-science' or set NSBOX_ROOTFS_SCIENCE")


class TestCellScience(ScienceTree, CellRun, NsboxTestCase):
    def test_a_dataframe_has_text_and_html(self):
        p, r = self.cell("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})\n",
                         "--memory", "1g")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        (out,) = r["outputs"]
        self.assertEqual(out["type"], "execute_result")
        self.assertEqual(out["data"]["text/plain"], "   a  b\n0  1  3\n1  2  4")
        self.assertIn("<table", out["data"]["text/html"])

    def test_figures_on_show_and_at_the_end(self):
        code = ("import matplotlib.pyplot as plt\n"
                "plt.plot([1, 2, 3])\nplt.show()\n"
                "fig, ax = plt.subplots(figsize=(4, 3))\nax.bar([1, 2], [3, 4])\n"
                "print(plt.get_backend())\n")
        p, r = self.cell(code, "--memory", "1g")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        self.assertEqual(r["stdout"], "module://matplotlib_inline.backend_inline\n")
        figs = [o for o in r["outputs"] if "image/png" in o["data"]]
        self.assertEqual(len(figs), 2, r["outputs"])
        self.assertEqual(figs[0]["data"]["text/plain"], "<Figure size 640x480 with 1 Axes>")
        w, h = png_size(figs[1]["data"]["image/png"])
        self.assertLess(w, 640)  # 4x3 inches, not the default size
        self.assertTrue(all(o["type"] == "display_data" for o in figs))

    def test_a_figure_over_the_budget_is_drawn_smaller(self):
        code = ("import matplotlib.pyplot as plt, numpy as np\n"
                "fig = plt.figure(figsize=(12, 9), dpi=150)\n"
                "plt.imshow(np.random.default_rng(0).random((300, 300)));\n")
        p, r = self.cell(code, "--memory", "1g")
        (big,) = [o for o in r["outputs"] if "image/png" in o["data"]]
        p, r = self.cell(code, "--memory", "1g", "--outputs-limit",
                         str(len(big["data"]["image/png"]) // 2))
        (small,) = r["outputs"]
        self.assertIn("image/png", small["data"])
        self.assertLess(png_size(small["data"]["image/png"])[0],
                        png_size(big["data"]["image/png"])[0])
        p, r = self.cell(code, "--memory", "1g", "--outputs-limit", "2000")
        self.assertEqual(list(r["outputs"][0]["dropped"]), ["image/png"])
        self.assertTrue(any("image/png first" in n for n in r["notes"]), r["notes"])

    def test_the_audit_log_keeps_the_text_of_outputs(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "audit.log")
            p, r = self.cell("import pandas as pd\npd.DataFrame({'a': [1]})\n", "--memory",
                             "1g", "--log", log)
            self.assertIn("text/html", r["outputs"][0]["data"])
            with open(log) as f:
                end = json.loads(f.read().splitlines()[-1])
        self.assertEqual(end["result"]["outputs"], [{
            "type": "execute_result", "data": {"text/plain": "   a\n0  1"},
            "omitted": ["text/html"]}])

    def test_ipython_display_objects(self):
        code = ("from IPython.display import HTML, Markdown, display\n"
                "display(HTML('<b>bold</b>'), Markdown('*it*'))\n")
        p, r = self.cell(code, "--memory", "1g")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        self.assertEqual([o["data"].get("text/html") or o["data"].get("text/markdown")
                          for o in r["outputs"]], ["<b>bold</b>", "*it*"])
        self.assertEqual(r["stdout"], "")


class TestCellSession(SessionTestCase):
    def test_steps_are_cells_of_one_main(self):
        sid, _ = self.start()
        p, r = self.code(sid, "import pickle\ndef f(x):\n    return x + 1\n"
                              "print(pickle.loads(pickle.dumps(f))(1))\nf\n")
        self.assertEqual(r["stdout"], "2\n", r)
        (out,) = r["outputs"]
        self.assertEqual(out["type"], "execute_result")
        # IPython's pretty() is not on the minimal rootfs: repr().
        self.assertTrue(out["data"]["text/plain"].startswith("<function f at 0x"), out)
        code = ("import dataclasses, inspect\nfrom multiprocessing import Pool\n"
                "@dataclasses.dataclass\nclass P:\n    x: int\n"
                "print(inspect.getsource(f), end='')\n"
                "with Pool(2) as pool:\n    print(pool.map(f, [1, 2]))\nP(3)\n")
        p, r = self.code(sid, code)
        self.assertEqual((r["exit_code"], r["stderr"]), (0, ""), r)
        self.assertEqual(r["stdout"], "def f(x):\n    return x + 1\n[2, 3]\n")
        self.assertEqual(r["outputs"][0]["data"]["text/plain"], "P(x=3)")

    def test_tracebacks_show_the_cells_lines(self):
        sid, _ = self.start()
        self.code(sid, "def g():\n    raise ValueError('bad')\n")
        p, r = self.code(sid, "x = 1\ng()\n")
        self.assertEqual(r["exit_code"], 1)
        self.assertEqual(r["error"]["traceback"], [
            "Traceback (most recent call last):",
            '  File "<cell 2>", line 2, in <module>', "    g()",
            '  File "<cell 1>", line 2, in g', "    raise ValueError('bad')",
            "ValueError: bad"])
        self.assertEqual(r["stderr"], "\n".join(r["error"]["traceback"]) + "\n")

    def test_a_timeouts_traceback_has_no_frame_of_nsbox(self):
        sid, _ = self.start()
        p, r = self.code(sid, "import time\nx = 5\ntime.sleep(30)\n", "--timeout", "1")
        self.assertEqual(r["status"], "timeout")
        self.assertEqual(r["error"]["name"], "KeyboardInterrupt")
        self.assertEqual(r["error"]["traceback"][1:], [
            '  File "<cell 1>", line 3, in <module>', "    time.sleep(30)", "KeyboardInterrupt"])
        self.assertNotIn("sigint", r["stderr"])
        p, r = self.code(sid, "x\n")
        self.assertEqual(r["outputs"], [{"type": "execute_result", "data": {"text/plain": "5"}}])

    def test_session_exec_prints_the_outputs_text(self):
        sid, _ = self.start()
        p = nsbox("session", "exec", sid, "--code", "-", input="x = 3\nprint('p')\nx * 2\n")
        self.assertEqual((p.returncode, p.stdout), (0, "p\n6\n"))

    def test_a_step_without_outputs_has_an_empty_list(self):
        sid, _ = self.start()
        p, r = self.code(sid, "print(1)\n")
        self.assertEqual((r["stdout"], r["outputs"], r["error"]), ("1\n", [], None))
        # A program step is no cell.
        p, r = self.run_step(sid, "true")
        self.assertNotIn("outputs", r)

    def test_a_plot_in_a_session(self):
        if not os.path.isdir(os.path.join(SCIENCE, "usr/lib/python3/dist-packages/IPython")):
            self.skip_or_fail(f"no science rootfs with IPython at {SCIENCE}")
        sid, _ = self.start("--rootfs", SCIENCE, "--memory", "1g")
        p, r = self.code(sid, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"
                              "plt.title('t');\n")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        (fig,) = r["outputs"]
        self.assertEqual(fig["type"], "display_data")
        self.assertGreater(png_size(fig["data"]["image/png"])[0], 100)
        p, r = self.code(sid, "import pandas as pd\ndisplay(pd.DataFrame({'a': [1]}))\n")
        self.assertIn("text/html", r["outputs"][0]["data"])



if __name__ == "__main__":
    unittest.main()
