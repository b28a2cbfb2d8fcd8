# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Python API's notebook cells: what run_python_code() and a Session's run_code() give the
model (as_tool_output(), exactly, for representative cells) and the user (Result.outputs,
images, error), and the content parts of as_content() for the three APIs.

Environment: as test_api.py; NSBOX_ROOTFS_SCIENCE (default build/rootfs/science/tree) for the
cells that need pandas, matplotlib and IPython (skipped without it, except under
NSBOX_TESTS_MUST_WORK=1).
"""
import base64
import os
import re
import struct
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import nsbox  # noqa: E402
from nsbox import _outputs  # noqa: E402

REPO = HERE.parent.parent
NSBOX = os.environ.get("NSBOX") or str(REPO / "build" / "src" / "nsbox")
MUST_WORK = os.environ.get("NSBOX_TESTS_MUST_WORK") == "1"
SCIENCE = os.environ.get("NSBOX_ROOTFS_SCIENCE") or str(
    REPO / "build" / "rootfs" / "science" / "tree")
OPTS = dict(nsbox=NSBOX, extra_args=["--cgroup", "off"])


def png_dims(raw):
    return struct.unpack(">II", raw[16:24])


class CellTestCase(unittest.TestCase):
    def skip_or_fail(self, reason):
        if MUST_WORK:
            self.fail(reason)
        self.skipTest(reason)

    def science(self):
        if not os.path.isdir(os.path.join(SCIENCE, "usr/lib/python3/dist-packages/IPython")):
            self.skip_or_fail(f"no science rootfs with IPython at {SCIENCE}")
        return SCIENCE

    def cell(self, code, **kw):
        return nsbox.run_python_code(code, **{**OPTS, **kw})


class TestModelText(CellTestCase):
    """The exact text the model reads (as_tool_output()) for cells a model writes."""

    def test_print_then_a_value(self):
        r = self.cell("print('hi')\n6 * 7\n")
        self.assertEqual(r.as_tool_output(), "hi\n42")
        self.assertEqual(r.outputs, [{"type": "execute_result", "data": {"text/plain": "42"}}])

    def test_display_of_several_objects(self):
        r = self.cell("display({'a': 1}, [1, 2])\n")
        self.assertEqual(r.as_tool_output(), "{'a': 1}\n[1, 2]")

    def test_nothing_to_show(self):
        self.assertEqual(self.cell("x = 1\n").as_tool_output(), "(no output)")
        self.assertEqual(self.cell("x = 1\nx;\n").as_tool_output(), "(no output)")

    def test_a_plain_script_shows_no_value(self):
        r = self.cell("print(1)\n6 * 7\n", cell=False)
        self.assertEqual((r.as_tool_output(), r.outputs, r.error), ("1\n", [], None))
        with self.assertRaises(TypeError):
            self.cell("1", cell="yes")

    def test_an_exception(self):
        r = self.cell("def f(x):\n    return 1 / x\n\nf(0)\n")
        self.assertEqual(r.as_tool_output(),
                         "exited with status 1\n[stderr]\n"
                         "Traceback (most recent call last):\n"
                         '  File "/work/main.py", line 4, in <module>\n    f(0)\n'
                         '  File "/work/main.py", line 2, in f\n    return 1 / x\n'
                         "           ~~^~~\nZeroDivisionError: division by zero")
        self.assertEqual(r.error["name"], "ZeroDivisionError")
        self.assertEqual(r.error["traceback"][-1], "ZeroDivisionError: division by zero")

    def test_a_syntax_error(self):
        r = self.cell("x = (1,\n")
        self.assertEqual(r.as_tool_output(),
                         'exited with status 1\n[stderr]\n  File "/work/main.py", line 1\n'
                         "    x = (1,\n        ^\nSyntaxError: '(' was never closed")

    def test_a_long_traceback_keeps_its_last_line(self):
        code = ("import sys\nfor i in range(500):\n"
                "    print('step', i, 'of the loading', file=sys.stderr)\n"
                "raise ValueError('the final one')\n")
        text = self.cell(code).as_tool_output()
        self.assertTrue(text.startswith("exited with status 1\n[stderr]\nstep 0 of the loading\n"),
                        text[:200])
        # However much came before, the model reads the exception that ended the cell: in the
        # stderr it is shown, else in a note of its own.
        if "\nValueError: the final one\n" not in text + "\n":
            self.assertTrue(text.endswith("\n[the cell raised ValueError: the final one]"),
                            text[-300:])

    def test_a_progress_bar(self):
        r = self.cell("for i in range(0, 101, 25):\n    print(f'\\r{i}%', end='')\nprint()\n")
        # Carriage-return updates collapse to each line's last state for the model; the user's
        # stdout keeps them all.
        self.assertEqual(r.as_tool_output(), "100%\n")
        self.assertEqual(r.stdout, "\r0%\r25%\r50%\r75%\r100%\n")

    def test_an_output_over_the_budget(self):
        r = self.cell("display('x' * 3000)\n", extra_args=["--cgroup", "off",
                                                            "--outputs-limit", "1000"])
        self.assertEqual(r.as_tool_output(),
                         "exited with status 0\n[outputs]\n'" + "x" * 199 + "...\n"
                         "[text/plain of 3 KB left out: over the outputs' budget]\n"
                         "[1 part of the cell's outputs (text/plain first, 2802 bytes in all) "
                         "was left out: over the outputs' budget of 1000 bytes (--outputs-limit; "
                         "a figure is drawn smaller first): show fewer or smaller images, or "
                         "save them to files]")

    def test_a_dataframe_grouped(self):
        r = self.cell("import pandas as pd\n"
                      "df = pd.DataFrame({'city': ['a', 'b', 'a'], 'sales': [1, 2, 3]})\n"
                      "df.groupby('city', as_index=False).sales.sum()\n",
                      rootfs=self.science(), memory="1g")
        self.assertEqual(r.as_tool_output(), "  city  sales\n0    a      4\n1    b      2")
        self.assertIn("<table", r.outputs[0]["data"]["text/html"])

    def test_a_plot(self):
        r = self.cell("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n",
                      rootfs=self.science(), memory="1g")
        (png,) = r.images
        w, h = png_dims(png)
        self.assertEqual(r.as_tool_output(),
                         f"[image/png {w}x{h}, {round(len(png) / 1024)} KB]")
        self.assertEqual(r.outputs[0]["data"]["text/plain"], "<Figure size 640x480 with 1 Axes>")

    def test_a_pickled_function_in_a_session(self):
        with nsbox.Session(nsbox=NSBOX, extra_args=["--cgroup", "off"]) as s:
            s.run_code("import pickle\ndef f(x):\n    return x + 1\n")
            r = s.run_code("g = pickle.loads(pickle.dumps(f))\ng(1)\n")
            self.assertEqual(r.as_tool_output(), "2")
            r = s.run_code("def h():\n    raise KeyError('k')\nh()\n")
            self.assertEqual(r.as_tool_output(),
                             "exited with status 1\n[stderr]\n"
                             "Traceback (most recent call last):\n"
                             '  File "<cell 3>", line 3, in <module>\n    h()\n'
                             '  File "<cell 3>", line 2, in h\n'
                             "    raise KeyError('k')\nKeyError: 'k'")
            self.assertEqual(r.error, {"name": "KeyError", "value": "'k'",
                                       "traceback": r.as_tool_output().split("\n")[2:]})


class TestContent(CellTestCase):
    """as_content() for the model APIs that take images."""

    def setUp(self):
        self.r = self.cell("import matplotlib.pyplot as plt\n"
                           "for n in (1, 2):\n    plt.figure(figsize=(2, 2))\n"
                           "    plt.plot([1, n])\n    plt.show()\n'done'\n",
                           rootfs=self.science(), memory="1g")
        self.assertEqual(len(self.r.images), 2, self.r)
        self.b64 = [base64.b64encode(p).decode() for p in self.r.images]

    def test_openai(self):
        parts = self.r.as_content("openai")
        self.assertEqual(parts[0], {"type": "text", "text": self.r.as_tool_output()})
        self.assertRegex(parts[0]["text"],
                         r"^\[image/png \d+x\d+, \d+ KB\]\n\[image/png \d+x\d+, \d+ KB\]\n'done'$")
        self.assertEqual(parts[1:], [{"type": "image_url", "image_url": {
            "url": "data:image/png;base64," + b}} for b in self.b64])

    def test_anthropic(self):
        parts = self.r.as_content("anthropic")
        self.assertEqual(parts[1:], [{"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": b}} for b in self.b64])

    def test_mcp(self):
        parts = self.r.as_content("mcp")
        self.assertEqual(parts[1:], [{"type": "image", "data": b, "mimeType": "image/png"}
                                     for b in self.b64])

    def test_images_within_the_budget(self):
        parts = self.r.as_content("mcp", max_images=1)
        self.assertEqual([p["type"] for p in parts], ["text", "image", "text"])
        self.assertRegex(parts[2]["text"], r"^\[not attached \(over 1 images or 3\.8 MB of "
                                           r"images per result\): \[image/png \d+x\d+, \d+ KB\]\]$")
        parts = self.r.as_content("anthropic", image_budget=len(self.b64[0]))
        self.assertEqual([p["type"] for p in parts], ["text", "image", "text"])
        with self.assertRaises(ValueError):
            self.r.as_content("gemini")


class TestPlaceholders(unittest.TestCase):
    """The placeholders, without a sandbox."""

    def test_png_and_jpeg_sizes(self):
        png = b"\x89PNG\r\n\x1a\n" + b"\0\0\0\rIHDR" + struct.pack(">II", 640, 480) + b"\0" * 2000
        self.assertEqual(_outputs.placeholder("image/png", png), "[image/png 640x480, 2 KB]")
        jpeg = (b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 4) + b"\0\0" +
                b"\xff\xc0" + struct.pack(">HBHH", 11, 8, 200, 300) + b"\0" * 20)
        self.assertEqual(_outputs.placeholder("image/jpeg", jpeg), "[image/jpeg 300x200, 37 bytes]")
        self.assertEqual(_outputs.placeholder("image/png", b"junk"), "[image/png, 4 bytes]")

    def test_output_text(self):
        b64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0\0\0\rIHDR" +
                               struct.pack(">II", 3, 2)).decode()
        out = {"type": "display_data", "data": {"text/plain": "<Figure>", "image/png": b64},
               "dropped": {"text/html": 5000}}
        self.assertEqual(_outputs.output_text(out),
                         "[image/png 3x2, 24 bytes]\n"
                         "[text/html of 5 KB left out: over the outputs' budget]")
        self.assertTrue(re.match(r"^\S", _outputs.outputs_text([out])))


if __name__ == "__main__":
    unittest.main()
