# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue #17: the writable working directory, -w, --copy-in, --copy-out and workspaces."""
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import unittest

from nsboxtest import NsboxTestCase, nsbox, nsbox_json, plant_symlinks


def py(code, *opts, **kw):
    return nsbox_json(*opts, "--", "python3", "-c", code, **kw)


class TestWorkdir(NsboxTestCase):
    def test_cwd_is_writable_and_main_py_read_only(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write("import os\nopen('out.csv','w').write('a')\nprint(os.getcwd())\n"
                    "for op in (lambda: open('main.py','w'), lambda: os.chmod('main.py', 0o644),"
                    " lambda: os.unlink('main.py'), lambda: os.rename('out.csv','main.py')):\n"
                    "  try: op(); print('CHANGED')\n  except OSError as e: print(e.errno)\n")
            f.flush()
            p, r = nsbox_json("--code", f.name)
        self.assertEqual(r["status"], "exited", p.stderr)
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        lines = r["stdout"].split()
        self.assertEqual(lines[0], "/work")
        self.assertNotIn("CHANGED", lines)

    def test_workdir_option_makes_and_enters_the_directory(self):
        p, r = py("import os; open('x','w'); print(os.getcwd())", "-w", "/tmp/a/b")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        self.assertEqual(r["stdout"].strip(), "/tmp/a/b")

    def test_workdir_size_cap_is_enforced_and_reported(self):
        p, r = py("import errno\ntry:\n open('big','wb').write(b'0'*(8<<20))\n"
                  "except OSError as e: print(errno.errorcode[e.errno])", "--workdir-size", "2m")
        self.assertEqual(r["stdout"].strip(), "ENOSPC", r["stderr"])
        self.assertTrue(r["workdir"]["full"])
        self.assertEqual(r["limits"]["workdir"], {"bytes": 2 << 20, "enforced_by": "tmpfs"})
        self.assertTrue(any("--workdir-size" in w for w in r["warnings"]))


class TestCopy(NsboxTestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        os.chmod(self.tmp.name, 0o755)
        self.addCleanup(self.tmp.cleanup)

    def test_copy_in_binary_is_byte_exact(self):
        data = os.urandom(300000)
        src = os.path.join(self.tmp.name, "blob.bin")
        with open(src, "wb") as f:
            f.write(data)
        p, r = py("import hashlib; print(hashlib.sha256(open('/work/in/blob.bin','rb').read())"
                  ".hexdigest())", "--copy-in", f"{src}:/work/in/blob.bin")
        self.assertEqual(r["stdout"].strip(), hashlib.sha256(data).hexdigest(), r["stderr"])

    def test_a_sandbox_path_ending_in_a_slash_is_a_directory(self):
        # As docker cp: SRC:/work/ puts SRC in /work under its own name, a directory too; and
        # /work/ to copy out is /work. A source with no name (/) is refused in one line.
        os.mkdir(os.path.join(self.tmp.name, "d"))
        for name in ("f.txt", "d/g.txt"):
            with open(os.path.join(self.tmp.name, name), "w") as f:
                f.write(name)
        out = os.path.join(self.tmp.name, "out")
        p, r = py("import os\nfor d, _, fs in sorted(os.walk('/work/in')):\n"
                  "    print(d, sorted(fs))",
                  "--copy-in", f"{self.tmp.name}/f.txt:/work/in/",
                  "--copy-in", f"{self.tmp.name}/d/:/work/in/",
                  "--copy-out", f"/work/in/:{out}")
        self.assertEqual(r["stdout"], "/work/in ['f.txt']\n/work/in/d ['g.txt']\n", r)
        self.assertEqual(sorted(os.listdir(os.path.join(out, "in"))), ["d", "f.txt"])
        # DIR/. is DIR's contents (a project: main.py and its modules, run from /work).
        proj = os.path.join(self.tmp.name, "proj")
        os.mkdir(proj)
        for name, text in (("main.py", "import helper\nprint(helper.X)\n"),
                           ("helper.py", "X = 42\n")):
            with open(os.path.join(proj, name), "w") as f:
                f.write(text)
        p, r = nsbox_json("--copy-in", f"{proj}/.:/work/", "--", "python3", "main.py")
        self.assertEqual(r["stdout"], "42\n", r)
        p = nsbox("run", "--copy-in", "/:/work/", "--", "true")
        self.assertEqual(p.returncode, 125)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertIn("ending in '/' is a directory", p.stderr)

    def test_copy_in_larger_than_the_sandbox_can_hold_is_refused(self):
        src = os.path.join(self.tmp.name, "big")
        with open(src, "wb") as f:
            f.truncate(40 << 20)
        p = nsbox("run", "--workdir-size", "1m", "--copy-in", f"{src}:/work/big", "--", "true")
        self.assertEqual(p.returncode, 125)
        self.assertIn("files to copy in are larger", p.stderr)
        self.assertIn("--workdir-size", p.stderr)

    def test_copy_in_refuses_a_symlink(self):
        # A link in a directory another uid can write: never followed (root's links in
        # root-only directories are, as for -v sources).
        if os.geteuid() == 0:
            os.chown(self.tmp.name, 65534, 65534)
        link = os.path.join(self.tmp.name, "link")
        os.symlink("/etc/shadow", link)
        p = nsbox("run", "--copy-in", f"{link}:/work/x", "--", "true")
        self.assertEqual(p.returncode, 125)
        self.assertIn("symlink", p.stderr)

    def test_copy_in_of_the_project_with_code_main_py(self):
        """`--copy-in .:/work --code main.py`: the project's own main.py is --code's file,
        there already (read-only), so it is left out of the copy; another main.py in the
        copied tree cannot take --code's place and is refused, saying why."""
        proj = os.path.join(self.tmp.name, "proj")
        os.mkdir(proj)
        main = os.path.join(proj, "main.py")
        with open(main, "w") as f:
            f.write("import helper\nprint(helper.X)\n")
        with open(os.path.join(proj, "helper.py"), "w") as f:
            f.write("X = 42\n")
        for spec in (f"{proj}/.:/work", f"{proj}/:/work/", f"{main}:/work/main.py"):
            p, r = nsbox_json("--copy-in", spec, "--copy-in", f"{proj}/helper.py:/work/",
                              "--code", main)
            self.assertEqual((p.returncode, r["stdout"]), (0, "42\n"), (spec, r))
            self.assertFalse([w for w in r["warnings"] if w.startswith("copy-in")], r)
        other = os.path.join(self.tmp.name, "other.py")
        with open(other, "w") as f:
            f.write("print('other')\n")
        p = nsbox("run", "--copy-in", f"{proj}/.:/work", "--code", other)
        self.assertEqual(p.returncode, 125, p.stderr)
        self.assertIn("--code's /work/main.py", p.stderr)

    def test_copy_in_names_what_it_left_out(self):
        """Entries of a copied directory that are not copied are named, the first three, and
        the rest counted: the caller sees which files the program will not find."""
        src = os.path.join(self.tmp.name, "src")
        os.mkdir(src)
        with open(os.path.join(src, "kept.txt"), "w") as f:
            f.write("x")
        os.symlink("/etc/passwd", os.path.join(src, "link"))
        for name in ("fifo1", "fifo2", "fifo3"):
            os.mkfifo(os.path.join(src, name))
        p, r = nsbox_json("--copy-in", f"{src}/.:/work/in/", "--", "ls", "/work/in")
        self.assertEqual((p.returncode, r["stdout"]), (0, "kept.txt\n"))
        [w] = [w for w in r["warnings"] if w.startswith("copy-in:")]
        self.assertIn("copy-in: 4 entries were not copied", w)
        named = re.findall(r"/work/in/(\w+): (FIFO|symlink \(never followed\))", w)
        self.assertEqual(len(named), 3, w)
        self.assertTrue(w.endswith(", and 1 more"), w)

    def test_copy_out_hostile_tree(self):
        """A symlink to /etc/shadow, a FIFO (made without the filter: the policy refuses
        mknod), a 0-byte file, a flood of 10k files and a file over the byte cap: each is
        reported, nothing outside HOSTDIR is touched."""
        out = os.path.join(self.tmp.name, "out")
        code = ("import os\nos.makedirs('o/flood')\nos.symlink('/etc/shadow','o/shadow')\n"
                "os.mkfifo('o/fifo')\nopen('o/empty','w').close()\n"
                "open('o/big','wb').write(b'1'*(2<<20))\n"
                "for i in range(10000): open(f'o/flood/{i}','w').close()\n")
        p, r = py(code, "--no-seccomp", "--copy-out", f"/work/o:{out}",
                  "--copy-out-max-bytes", "1m", "--copy-out-max-files", "100", "--timeout", "60")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        co = r["copy_out"]
        self.assertFalse(co["complete"])
        reasons = {s["path"]: s["reason"] for s in co["skipped"]}
        self.assertIn("symlink", reasons.get("/work/o/shadow", ""))
        self.assertEqual(reasons.get("/work/o/fifo"), "FIFO")
        self.assertIn("--copy-out-max-bytes", reasons.get("/work/o/big", ""))
        kinds = {s["path"]: s["kind"] for s in co["skipped"]}
        self.assertEqual([kinds.get(f"/work/o/{n}") for n in ("shadow", "fifo", "big")],
                         ["not_copied", "not_copied", "over_cap"], kinds)
        self.assertEqual(len(co["copied"]), 100)
        self.assertGreater(co["skipped_unlisted"], 0)
        # Nothing but regular files and directories below HOSTDIR, nothing else on the host.
        n = 0
        for root, dirs, files in os.walk(out):
            for name in files:
                st = os.lstat(os.path.join(root, name))
                self.assertTrue(stat.S_ISREG(st.st_mode), name)
                n += 1
        self.assertEqual(n, 100)
        self.assertEqual(sorted(os.listdir(self.tmp.name)), ["out"])


    def test_copy_out_never_writes_through_a_symlink_in_hostdir(self):
        """HOSTDIR/o is a symlink to a victim directory and HOSTDIR/f a symlink to a victim
        file (as a sandbox given HOSTDIR through a :rw bind could plant them): the copy fails
        rather than write there."""
        out, victim = plant_symlinks(self.tmp.name)
        for src, code in (("/work/o", "import os; os.mkdir('o'); open('o/x','w').write('evil')"),
                          ("/work/f", "open('f','w').write('evil')")):
            p, r = py(code, "--copy-out", f"{src}:{out}")
            self.assertEqual(r["exit_code"], 0, r["stderr"])
            self.assertFalse(r["copy_out"]["done"], src)
            self.assertTrue(any("copy-out failed" in w for w in r["warnings"]), r["warnings"])
        self.assertEqual(sorted(os.listdir(victim)), ["file"])
        with open(os.path.join(victim, "file")) as f:
            self.assertEqual(f.read(), "precious")


class TestCopyOutTarget(NsboxTestCase):
    """Issue #24, item 2: a --copy-out HOSTDIR the sandbox can write (inside a :rw bind of the
    same run or session) is refused, by device and inode: there the payload could rename the
    directory nsbox made and plant a symlink in its place, so that the result's host_path names
    a file of its choosing. A HOSTDIR outside the binds works beside the same bind."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        os.chmod(self.tmp.name, 0o755)
        self.addCleanup(self.tmp.cleanup)
        self.rw = os.path.join(self.tmp.name, "rw")
        os.mkdir(self.rw)
        os.mkdir(os.path.join(self.rw, "sub"))
        os.chmod(self.rw, 0o777)  # root's sandboxes write as host ids of their own
        self.bind = ["-v", f"{self.rw}:/rw:rw"]

    def inside(self):
        """HOSTDIRs in the bind: its source, one made below it, one below a subdirectory, and
        the source by another name (through "..")."""
        return [self.rw, os.path.join(self.rw, "new"), os.path.join(self.rw, "sub"),
                os.path.join(self.tmp.name, "rw", "sub", "..", "sub", "..")]

    def test_run_refuses_a_hostdir_in_a_rw_bind(self):
        for hostdir in self.inside():
            with self.subTest(hostdir=hostdir):
                p = nsbox("run", *self.bind, "--copy-out", f"/etc/hostname:{hostdir}", "--",
                          "true")
                self.assertOneLineError(p, contains="lies inside the writable bind")
                self.assertIn(f"-v {self.rw}:...:rw", p.stderr)
                # Nothing was copied, and the directory nsbox would have made is not left.
                self.assertEqual(sorted(os.listdir(self.rw)), ["sub"])
                self.assertEqual(os.listdir(os.path.join(self.rw, "sub")), [])
        # A read-only bind of the same directory is no place the sandbox can write: allowed.
        p, r = py("print(1)", "-v", f"{self.rw}:/ro", "--copy-out",
                  f"/etc/hostname:{self.rw}/sub")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        self.assertTrue(r["copy_out"]["complete"], r)
        os.unlink(os.path.join(self.rw, "sub", "hostname"))

    def test_run_copies_out_beside_a_rw_bind(self):
        out = os.path.join(self.tmp.name, "out")
        p, r = py("open('/rw/x', 'w').write('from the sandbox')", *self.bind,
                  "--copy-out", f"/rw/x:{out}")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        self.assertEqual([c["host_path"] for c in r["copy_out"]["copied"]],
                         [os.path.join(out, "x")])
        with open(os.path.join(out, "x")) as f:
            self.assertEqual(f.read(), "from the sandbox")

    def test_session_step_refuses_a_hostdir_in_a_rw_bind(self):
        p = nsbox("session", "start", "--cgroup", "off", *self.bind)
        self.assertEqual(p.returncode, 0, p.stderr)
        sid = p.stdout.strip()
        self.addCleanup(lambda: nsbox("session", "stop", sid))
        for hostdir in self.inside():
            with self.subTest(hostdir=hostdir):
                p = nsbox("session", "exec", sid, "--copy-out", f"/etc/hostname:{hostdir}",
                          "--", "true")
                self.assertOneLineError(p, contains="lies inside the writable bind")
                self.assertEqual(sorted(os.listdir(self.rw)), ["sub"])
                self.assertEqual(os.listdir(os.path.join(self.rw, "sub")), [])
        # The session goes on, and a HOSTDIR outside the bind works.
        out = os.path.join(self.tmp.name, "out")
        p = nsbox("session", "exec", sid, "--json", "--copy-out", f"/rw/y:{out}", "--", "sh",
                  "-c", "echo step > /rw/y")
        r = json.loads(p.stdout)
        self.assertEqual((p.returncode, r["copy_out"]["complete"]), (0, True), p.stderr)
        self.assertEqual([c["host_path"] for c in r["copy_out"]["copied"]],
                         [os.path.join(out, "y")])


class TestWorkspace(NsboxTestCase):
    def setUp(self):
        self.state = tempfile.TemporaryDirectory()
        self.addCleanup(self.state.cleanup)
        self.env = dict(os.environ, XDG_STATE_HOME=self.state.name)

    def test_workspace_survives_between_runs(self):
        p, r = py("open('step1.csv','w').write('x,y')", "--workspace", "w1", env=self.env)
        self.assertTrue(r["workspace"]["saved"], r["warnings"])
        p, r = py("print(open('step1.csv').read())", "--workspace", "w1", env=self.env)
        self.assertEqual(r["stdout"].strip(), "x,y", r["stderr"])

    def test_workspace_over_a_cap_is_not_saved(self):
        p, r = py("open('keep.txt','w').write('v1')", "--workspace", "w5", env=self.env)
        self.assertTrue(r["workspace"]["saved"], r["warnings"])
        p, r = py("import os\nos.remove('keep.txt')\n"
                  "for i in range(10): open(f'f{i}','w').close()",
                  "--workspace", "w5", "--copy-out-max-files", "5", env=self.env)
        self.assertFalse(r["workspace"]["saved"])
        # Refused for the cap (the skipped entries' kind), said as such, to the model too.
        self.assertIn("over_cap", [s["kind"] for s in r["copy_out"]["skipped"]], r["copy_out"])
        capped = [w for w in r["warnings"] if w.startswith("workspace 'w5' was not saved: /work "
                                                           "is over --copy-out-max-files")]
        self.assertEqual(len(capped), 1, r["warnings"])
        self.assertIn(capped[0], r["outcome_warnings"])
        p, r = py("import os; print(sorted(os.listdir('.')))", "--workspace", "w5",
                  env=self.env)
        self.assertEqual(r["stdout"].strip(), "['keep.txt']", r["stderr"])

    def test_a_mount_over_work_is_refused(self):
        # The bind would hide the workspace's files and have its own saved into it instead.
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        for opts in (["-v", f"{d}:/work"], ["--tmpfs", "/work"]):
            with self.subTest(opts=opts):
                p = nsbox("run", "--workspace", "w9", *opts, "--", "true", env=self.env)
                self.assertEqual(p.returncode, 125, p.stderr)
                self.assertIn("--workspace is /work", p.stderr)
        p = nsbox("run", "--workspace", "w9", "-v", f"{d}:/data", "--", "true", env=self.env)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_an_unreadable_directory_means_no_save(self):
        # A directory the program made unreadable cannot be copied: the workspace is not saved
        # without it (it used to be, silently).
        p, r = py("import os\nos.mkdir('d'); open('d/f', 'w').write('x')", "--workspace", "w10",
                  env=self.env)
        self.assertTrue(r["workspace"]["saved"], r["warnings"])
        p, r = py("import os\nos.chmod('d', 0)", "--workspace", "w10", env=self.env)
        self.assertFalse(r["workspace"]["saved"], r)
        self.assertTrue(any("could not be copied" in w for w in r["warnings"]), r["warnings"])
        p, r = py("print(open('d/f').read())", "--workspace", "w10", env=self.env)
        self.assertEqual(r["stdout"], "x\n", r)

    def test_workspace_after_a_timeout_is_as_before(self):
        p, r = py("open('keep.txt','w').write('v1')", "--workspace", "w8", env=self.env)
        self.assertTrue(r["workspace"]["saved"], r["warnings"])
        p, r = py("import time\nopen('keep.txt','w').write('v2')\ntime.sleep(30)",
                  "--workspace", "w8", "--timeout", "1", env=self.env)
        self.assertEqual(r["status"], "timeout")
        self.assertFalse(r["workspace"]["saved"])
        p, r = py("print(open('keep.txt').read())", "--workspace", "w8", env=self.env)
        self.assertEqual(r["stdout"].strip(), "v1", r["stderr"])

    def test_workspace_subcommands(self):
        p, r = py("import os; os.mkdir('d'); open('d/a.txt','w').write('abc')",
                  "--workspace", "w6", env=self.env)
        self.assertTrue(r["workspace"]["saved"], r["warnings"])
        p = nsbox("workspace", "ls", env=self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"(?m)^w6\s+3\s+1$")
        with tempfile.TemporaryDirectory() as d:
            p = nsbox("workspace", "export", "w6", os.path.join(d, "x"), env=self.env)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(d, "x", "d", "a.txt")) as f:
                self.assertEqual(f.read(), "abc")
        p = nsbox("workspace", "rm", "w6", env=self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("w6", nsbox("workspace", "ls", env=self.env).stdout)
        p = nsbox("workspace", "rm", "w6", env=self.env)
        self.assertEqual(p.returncode, 125)
        self.assertIn("no workspace 'w6'", p.stderr)
        self.assertEqual(os.listdir(os.path.join(self.state.name, "nsbox", "workspaces")), [])

    def test_main_py_of_a_run_without_code_does_not_hide_the_code(self):
        p, r = py("open('main.py','w').write('print(1)')", "--workspace", "w7", env=self.env)
        self.assertTrue(r["workspace"]["saved"], r["warnings"])
        with tempfile.NamedTemporaryFile("w", suffix=".py") as f:
            f.write("print(2)")
            f.flush()
            p, r = nsbox_json("--workspace", "w7", "--code", f.name, env=self.env)
        self.assertEqual(r["stdout"], "2\n", r)

    def test_setuid_bit_does_not_survive(self):
        p, r = py("import os; open('s','w').close(); os.chmod('s', 0o6755)",
                  "--no-seccomp", "--workspace", "w2", env=self.env)
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        path = os.path.join(self.state.name, "nsbox", "workspaces", "w2", "work", "s")
        self.assertEqual(stat.S_IMODE(os.lstat(path).st_mode) & 0o7000, 0)

    def test_concurrent_runs_are_refused(self):
        first = subprocess.Popen([os.environ["NSBOX"], "run", "--workspace", "w3", "--",
                                  "sleep", "3"], env=self.env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            import time
            time.sleep(1)
            p = nsbox("run", "--workspace", "w3", "--", "true", env=self.env)
            self.assertEqual(p.returncode, 125)
            self.assertIn("in use by another run", p.stderr)
        finally:
            first.wait()

    def test_workspace_of_another_uid_is_refused(self):
        base = os.path.join(self.state.name, "nsbox", "workspaces")
        os.makedirs(base, mode=0o700)
        if os.geteuid() == 0:
            # A workspaces directory of another uid (as root: the host's nobody).
            os.chown(base, 65534, 65534)
            p = nsbox("run", "--workspace", "w4", "--", "true", env=self.env)
            self.assertEqual(p.returncode, 125)
            self.assertIn("not to you", p.stderr)
            os.chown(base, 0, 0)
        # Either way: one that another uid may write into (where it could plant files).
        os.chmod(base, 0o777)
        p = nsbox("run", "--workspace", "w4", "--", "true", env=self.env)
        self.assertEqual(p.returncode, 125)
        self.assertIn("writable by group or others", p.stderr)
        self.assertEqual(os.listdir(base), [])

class TestFilesWritten(NsboxTestCase):
    def test_new_and_changed_files_in_work_are_listed(self):
        tmp = tempfile.mkdtemp(prefix="nsbox-written-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        src, bound = os.path.join(tmp, "in"), os.path.join(tmp, "bound")
        os.mkdir(src)
        os.mkdir(bound)
        os.chmod(bound, 0o777)
        for name in ("keep.txt", "change.txt"):
            with open(os.path.join(src, name), "w") as f:
                f.write("x")
        p, r = nsbox_json(
            "--cgroup", "off", "--copy-in", f"{src}/.:/work/", "-v", f"{bound}:/work/bound:rw",
            "--code", "-", input="import os\n"
            "open('change.txt', 'a').write('y')\n"
            "os.makedirs('a/b'); open('a/b/new.bin', 'wb').write(b'\\0' * 3)\n"
            "open('bound/not-listed', 'w').write('another mount')\n"
            "os.symlink('/etc/passwd', 'link'); os.mkfifo('fifo')\n")
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        self.assertEqual(r["files_written"], [
            {"path": "/work/a/b/new.bin", "size": 3,
             "sha256": hashlib.sha256(b"\0" * 3).hexdigest()},
            {"path": "/work/change.txt", "size": 2, "sha256": hashlib.sha256(b"xy").hexdigest()}])
        self.assertEqual((r["files_written_unlisted"], r["files_written_partial"]), (0, False))
        # Nothing written: an empty list; killed before the walk: unknown.
        p, r = nsbox_json("--cgroup", "off", "--", "true")
        self.assertEqual(r["files_written"], [])
        p, r = nsbox_json("--cgroup", "off", "--timeout", "0.3", "--", "sh", "-c",
                          "echo > /work/x; sleep 5")
        self.assertEqual((r["status"], r["files_written"]), ("timeout", None))

    def test_more_files_than_the_report_pipe_holds(self):
        # Each listed file is a report of about 700 bytes on the report pipe, sent by init
        # before it exits: 100 of them are more than a pipe holds (64 KiB, pipe(7)), so the
        # supervisor must read them as they come (a run that stopped watching the pipe hung
        # until its timeout here).
        p, r = nsbox_json("--cgroup", "off", "--timeout", "20", "--code", "-", input=
                          "for i in range(300): open(f'/work/f{i:03}', 'w').write('x' * i)\n")
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 0), r["stderr"])
        self.assertLess(r["wall_time_ms"], 10000)
        self.assertEqual(len(r["files_written"]), 100)
        self.assertEqual(r["files_written_unlisted"], 200)
        self.assertEqual(r["files_written"][0]["path"], "/work/f000")


if __name__ == "__main__":
    unittest.main()
