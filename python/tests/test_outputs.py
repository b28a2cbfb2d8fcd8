# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 26's output behaviours in the Python API: the start and the end of a long stream, with
a marker where it was cut; carriage-return updates collapsed in the model's text; files= in the
working directory and single files between a session's steps; a missing module's note; the
whole stream in a file; the most complete rootfs by default."""

import hashlib
import os
import tempfile
import textwrap
import unittest
from unittest import mock

from tests.support import MUST_WORK, NSBOX, SandboxTestCase, json_result  # noqa: E402
import nsbox  # noqa: E402

SCIENCE = os.environ.get("NSBOX_ROOTFS_SCIENCE") or os.path.join(
    os.path.dirname(os.path.abspath(NSBOX)), "..", "rootfs", "science", "tree")

LOGGING_THEN_ERROR = """
    import logging
    logging.basicConfig(level=logging.INFO)
    for i in range(460):
        logging.info('step %d of the long job done', i)
    raise ValueError('bad row 17')
    """


def minimal_tree():
    """The minimal tree the tests run on, or None."""
    tree = os.environ.get("NSBOX_ROOTFS") or os.environ.get("NSBOX_TEST_ROOTFS_DEFAULT") or \
        os.path.join(os.path.dirname(os.path.abspath(NSBOX)), "..", "rootfs", "tree")
    try:
        with open(os.path.join(tree, "usr", "share", "nsbox", "profile")) as f:
            return tree if "profile=minimal" in f.read().splitlines() else None
    except OSError:
        return None


class TestModelText(SandboxTestCase):
    def test_the_final_exception_line_after_long_logging(self):
        r = self.code(LOGGING_THEN_ERROR)
        self.assertEqual(r.exit_code, 1)
        cut = r.stderr_cut
        self.assertEqual(cut["at"], 2000)
        head, tail = r.stderr[:cut["at"]], r.stderr[cut["at"]:]
        self.assertTrue(head.startswith("INFO:root:step 0 of the long job done\n"))
        self.assertTrue(tail.endswith('  File "/work/main.py", line 6, in <module>\n'
                                      "    raise ValueError('bad row 17')\n"
                                      "ValueError: bad row 17\n"), tail)
        self.assertEqual(cut["bytes"], r.stderr_bytes - len(r.stderr))
        note = (f"stderr cut: kept its first 2000 and last {len(tail)} of {r.stderr_bytes} "
                f"bytes; {cut['bytes']} bytes ({cut['lines']} lines) between them were cut "
                "(--output-limit)")
        self.assertEqual(r.notes, [note])
        self.assertEqual(r.as_tool_output(),
                         "exited with status 1\n[stderr]\n" + head +
                         ("" if head.endswith("\n") else "\n") +
                         f"[... {cut['bytes']:,} bytes, {cut['lines']:,} lines cut ...]\n" +
                         tail.removesuffix("\n") + "\n[" +
                         note.replace("(--output-limit)", "(output_limit=)") + "]")

    def test_a_progress_bar_shows_its_last_state(self):
        r = self.code(r"""
            import sys, time
            for i in range(11):
                sys.stderr.write(f"\r{i * 10:3d}%|{'#' * i:<10}| {i}/10")
                sys.stderr.flush()
            sys.stderr.write("\n")
            print("done")
            """)
        self.assertEqual(r.stderr.count("\r"), 11, "the raw bytes stay raw")
        self.assertEqual(r.as_tool_output(),
                         "exited with status 0\n[stdout]\ndone\n[stderr]\n100%|##########| 10/10")

    def test_a_session_step_keeps_the_last_line(self):
        with nsbox.Session(nsbox=NSBOX, output_limit=1000) as s:
            r = s.run_code(textwrap.dedent(LOGGING_THEN_ERROR))
        text = r.as_tool_output()
        self.assertIsNotNone(r.stderr_cut)
        note = r.notes[0].replace("(--output-limit)", "(output_limit=)")
        self.assertTrue(text.endswith(f"ValueError: bad row 17\n[{note}]"), text[-400:])
        self.assertIn("\n[... ", text)
        self.assertLess(len(text), 1600)

    def test_the_whole_stream_in_a_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "out.txt")
            r = self.code("for i in range(10000): print(i)", output_limit=100, stdout_file=path)
            with open(path) as f:
                self.assertEqual(f.read(), "".join(f"{i}\n" for i in range(10000)))
            self.assertEqual(r.raw["stdout_file"], {"bytes": 48890, "complete": True,
                                                    "error": None})
            self.assertIsNotNone(r.stdout_cut)
            # A symlink is refused, before anything runs.
            os.symlink(path, os.path.join(tmp, "link"))
            with self.assertRaises(nsbox.NsboxError) as e:
                self.code("print(1)", stdout_file=os.path.join(tmp, "link"))
            self.assertIn("it is a symlink", str(e.exception))


class TestFiles(SandboxTestCase):
    def test_read_csv_finds_the_upload(self):
        if not os.path.isdir(SCIENCE):
            if MUST_WORK:
                self.fail(f"no science tree at {SCIENCE}")
            self.skipTest(f"no science tree at {SCIENCE} ('ninja -C build rootfs-science')")
        r = self.code("""
            import pandas as pd
            df = pd.read_csv("sales.csv")
            print(df.groupby("region")["amount"].sum().to_dict())
            print(open("data/notes.txt").read())
            """, rootfs=SCIENCE, timeout=60,
            files={"sales.csv": "region,amount\nnorth,3\nsouth,4\nnorth,5\n",
                   "data/notes.txt": "in a subdirectory"})
        self.assertEqual(r.as_tool_output(), "{'north': 8, 'south': 4}\nin a subdirectory\n")

    def test_a_session_takes_files_and_hands_them_back(self):
        with nsbox.Session(nsbox=NSBOX, files={"in.csv": "a,b\n1,2\n"}) as s:
            r = s.run_code("print(open('in.csv').read().split())")
            self.assertEqual(r.stdout, "['a,b', '1,2']\n")
            s.upload("sub/blob.bin", b"\x00\xffdata")
            r = s.run_code("b = open('sub/blob.bin', 'rb').read(); print(b)\n"
                           "open('result.txt', 'w').write(b.hex())")
            self.assertEqual(r.stdout, "b'\\x00\\xffdata'\n")
            self.assertEqual(s.download("result.txt"), b"00ff64617461")
            self.assertEqual(s.download("/work/sub/blob.bin"), b"\x00\xffdata")
            with self.assertRaises(FileNotFoundError):
                s.download("missing.txt")
            with self.assertRaises(ValueError):
                s.upload("../escape", b"x")
            # The session goes on.
            self.assertEqual(s.run_code("print(sorted(__import__('os').listdir('.')))").stdout,
                             "['in.csv', 'result.txt', 'sub']\n")


    def test_upload_does_not_run_what_the_session_planted(self):
        # A .pth in the user site (HOME=/tmp) runs in every python3 started without -I; the
        # upload's own step must not be one of them.
        planted = ("import os, sys\n"
                   "d = '/tmp/.local/lib/python3.%d/site-packages' % sys.version_info[1]\n"
                   "os.makedirs(d)\n"
                   "open(d + '/x.pth', 'w').write(\n"
                   "    \"import sys; sys.stdin = open('/dev/null')\\n\")\n")
        with nsbox.Session(nsbox=NSBOX) as s:
            self.assertTrue(s.run_code(planted).ok)
            # Control: an ordinary python3 meets the .pth (its stdin is swapped).
            r = s.run(["python3", "-c", "import sys; print(repr(sys.stdin.read()))"], stdin=b"in")
            self.assertEqual(r.stdout, "''\n")
            s.upload("u.bin", b"uploaded")
            self.assertEqual(s.download("u.bin"), b"uploaded")

class TestFilesWritten(SandboxTestCase):
    def test_a_run_lists_what_it_wrote(self):
        r = self.code("""
            import os
            open('in.csv', 'a').write('3,4\\n')
            os.makedirs('out', exist_ok=True)
            open('out/plot.txt', 'w').write('hello')
            open('/tmp/elsewhere', 'w').write('not in /work')
            """, files={"in.csv": "a,b\n1,2\n", "untouched.txt": "x"})
        self.assertTrue(r.ok, r.stderr)
        self.assertEqual(r.files_written, [
            {"path": "/work/in.csv", "size": 12,
             "sha256": hashlib.sha256(b"a,b\n1,2\n3,4\n").hexdigest()},
            {"path": "/work/out/plot.txt", "size": 5,
             "sha256": hashlib.sha256(b"hello").hexdigest()}])
        # Unknown after a timeout: the sandbox was killed before the walk.
        r = self.code("open('x', 'w'); import time; time.sleep(5)", timeout=0.5)
        self.assertEqual((r.status, r.files_written), ("timeout", None))

    def test_each_session_step_lists_its_own(self):
        with nsbox.Session(nsbox=NSBOX) as s:
            r = s.run_code("open('a.txt', 'w').write('1')")
            self.assertEqual([f["path"] for f in r.files_written], ["/work/a.txt"])
            self.assertEqual(s.run_code("print(1)").files_written, [])
            r = s.run(["sh", "-c", "echo 2 >> a.txt; echo b > b.txt"])
            self.assertEqual([(f["path"], f["size"]) for f in r.files_written],
                             [("/work/a.txt", 3), ("/work/b.txt", 2)])


class TestMissingModule(SandboxTestCase):
    def test_the_note_names_the_tree_and_the_way_to_the_module(self):
        tree = minimal_tree()
        if tree is None:
            if MUST_WORK:
                self.fail("no minimal tree")
            self.skipTest("no minimal tree (set NSBOX_ROOTFS)")
        r = self.code("import pandas", rootfs=tree)
        self.assertEqual(r.as_tool_output(),
                         "exited with status 1\n[stderr]\nTraceback (most recent call last):\n"
                         '  File "/work/main.py", line 1, in <module>\n    import pandas\n'
                         "ModuleNotFoundError: No module named 'pandas'\n"
                         "[the program's stderr mentions ModuleNotFoundError (pandas): the rootfs "
                         f"{tree} (profile minimal) does not have it. If it is a module of "
                         "your own, put its file beside the code in the working directory "
                         "(--copy-in, files= in Python). The science profile has "
                         "numpy, pandas, matplotlib, seaborn, scipy, scikit-learn, openpyxl and "
                         "requests: `nsbox rootfs build --profile science DIR`; any Debian "
                         "package: `nsbox rootfs build --packages python3-NAME DIR` (with "
                         "--profile to start from); then --rootfs DIR]\n"
                         "[hint: the Python API takes such a tree as rootfs=DIR "
                         "(run_python_code(), Session()); with none given it uses the science "
                         "tree where one is built]")


class TestWithoutSandbox(unittest.TestCase):
    def test_collapse_cr(self):
        for text, want in (("plain\n", "plain\n"),
                           ("10%\r50%\r100%", "100%"),
                           ("a\r\nb\r\n", "a\nb\n"),
                           ("loading....\rdone", "doneing...."),
                           ("x\r", "x"),
                           ("1\r2\n3\r4\n", "2\n4\n")):
            self.assertEqual(nsbox.collapse_cr(text), want, text)

    def test_cut_streams_from_json(self):
        raw = json_result(status="exited", exit_code=1, reason="exited with status 1",
                          stderr="start\nmid", stderr_tail="end\nValueError: x\n",
                          stderr_cut={"bytes": 14731, "lines": 212, "head_bytes": 9,
                                      "tail_bytes": 17},
                          stderr_truncated=True, stderr_bytes=14757, notes=["N"])
        r = nsbox.Result.from_json(raw)
        self.assertEqual(r.stderr, "start\nmidend\nValueError: x\n")
        self.assertEqual(r.stderr_cut, {"bytes": 14731, "lines": 212, "at": 9})
        self.assertEqual(r.as_tool_output(),
                         "exited with status 1\n[stderr]\nstart\nmid\n"
                         "[... 14,731 bytes, 212 lines cut ...]\nend\nValueError: x\n[N]")
        # Cut again for the model's budget: the last characters stay.
        self.assertEqual(r.as_tool_output(max_chars=8),
                         "exited with status 1\n[stderr]\nstar\n"
                         "[... 14,731 bytes, 212 lines cut ...]\n"
                         "[... 19 characters cut for this output ...]\n: x\n[N]\n"
                         "[stderr cut for this output: its first 4 and last 4 characters are "
                         "shown]")
        # An nsbox older than the fields: one text, no marker.
        old = nsbox.Result.from_json(json_result(stdout="a\rb\n"))
        self.assertEqual((old.stdout_cut, old.as_tool_output()), (None, "b\n"))

    def test_the_default_rootfs_is_the_most_complete_one_built(self):
        with tempfile.TemporaryDirectory() as top:
            binary = os.path.join(top, "src", "nsbox")
            os.makedirs(os.path.dirname(binary))
            open(binary, "w").close()
            with mock.patch.dict(os.environ):
                os.environ.pop("NSBOX_ROOTFS", None)
                self.assertIsNone(nsbox.default_rootfs(binary))
                profile = os.path.join(top, "rootfs", "science", "tree", "usr", "share", "nsbox")
                os.makedirs(profile)
                with open(os.path.join(profile, "profile"), "w") as f:
                    f.write("profile=minimal\n")
                self.assertIsNone(nsbox.default_rootfs(binary))  # not science: nsbox's own
                with open(os.path.join(profile, "profile"), "w") as f:
                    f.write("profile=science\nsuite=bookworm\n")
                self.assertEqual(nsbox.default_rootfs(binary),
                                 os.path.join(top, "rootfs", "science", "tree"))
                # $NSBOX_ROOTFS is the caller's choice: nsbox uses it.
                os.environ["NSBOX_ROOTFS"] = "/elsewhere"
                self.assertIsNone(nsbox.default_rootfs(binary))


if __name__ == "__main__":
    unittest.main()
