# SPDX-License-Identifier: LGPL-2.1-or-later
"""A program step cannot get into the session's Python interpreter around its non-dumpable
flag (test_session_dumpable): neither through a process it leaves behind nor through a Python
file it writes where the interpreter imports from.

- A process whose thread-group leader ended with exit(2) while another thread runs on is a
  zombie to /proc's stat; init's sweep at a step's end took every zombie for dead, so such a
  process outlived its step. Left behind, it watched for the next fresh interpreter (the
  session's first code step, or any after the program step killed the interpreter: same uid),
  stopped it, and opened its /proc/PID/mem in the window between its execve() and its
  prctl(PR_SET_DUMPABLE, 0); the descriptor stays good after the prctl (the check is at the
  open), and it rewrote a secret the code step kept. Against the merge of `dumpable` the test
  below printed the forged secret; the sweep now kills a zombie leader whose threads run on.
- The interpreter ran as `python3 -c` with /work first on sys.path and the user site below
  HOME=/tmp, both written by program steps: a socket.py, signal.py or ctypes.py there ran in
  the interpreter before the prctl, a json.py when cell.py first wrote an output, a
  usercustomize.py as it started, an IPython package when cell.py showed a value (where the
  rootfs has no IPython). The bare control runs the same files in a plain `python3 -c`, the
  way the interpreter was started before.

Uses test_session's private registry and helpers."""
import os
import secrets
import time

import test_session
from test_session import SessionTestCase

HERE = os.path.dirname(os.path.abspath(__file__))

# A program step: fork a process that makes itself a session leader, starts a thread and ends
# its leader with exit(2) (SYS_exit, the thread only). The thread writes "watching" to the log,
# then waits for a new session interpreter (its command line holds session-repl.py), stops it,
# opens its mem and maps, lets it go on, and from then on replaces every copy of argv[1] in its
# writable memory by argv[2]. The step ends once the leader is a zombie and the thread has
# written its first line: it prints "planted" and the leader's num_threads (stat field 20).
SURVIVOR = r"""
import ctypes, os, signal, sys, threading, time
secret, forged = sys.argv[1].encode(), sys.argv[2].encode()
LOG = "/tmp/survivor.log"
def log(*a):
    with open(LOG, "a") as f:
        print(*a, file=f)
def watch():
    seen = set(os.listdir("/proc"))
    log("watching")
    mem = maps = None
    while mem is None:
        time.sleep(0.001)
        for d in os.listdir("/proc"):
            if not d.isdigit() or d in seen:
                continue
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if b"_nsbox_" + b"session" not in f.read():
                        continue
            except OSError:
                continue
            seen.add(d)
            os.kill(int(d), signal.SIGSTOP)
            try:
                mem = open(f"/proc/{d}/mem", "r+b", buffering=0)
                maps = open(f"/proc/{d}/maps", "rb", buffering=0)
                log("caught")
            except OSError as e:
                log("late", e.errno)
            os.kill(int(d), signal.SIGCONT)
            if mem is None:
                return
    while True:
        time.sleep(0.05)
        maps.seek(0)
        for line in maps.read().decode().splitlines():
            addr, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            lo, hi = (int(x, 16) for x in addr.split("-"))
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except OSError:
                continue
            i = data.find(secret)
            while i >= 0:
                mem.seek(lo + i)
                mem.write(forged)
                log("rewrote")
                i = data.find(secret, i + 1)
pid = os.fork()
if pid == 0:
    os.setsid()
    threading.Thread(target=watch).start()
    # SYS_exit: this thread only (exit_group(2) would end them all)
    ctypes.CDLL(None).syscall({"x86_64": 60, "aarch64": 93}[os.uname().machine], 0)
while True:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(") ", 1)[1].split()
    if fields[0] == "Z" and os.path.exists("/tmp/survivor.log"):
        print("planted", fields[17])
        break
    time.sleep(0.01)
"""

# A program step: write modules the interpreter imports (each, when imported, logs its name
# and pid, then becomes the real module so that nothing breaks) to /work, a usercustomize.py
# to the user site below HOME, then kill the interpreter, so that the next code step starts a
# fresh one.
SHIMMED = ("socket", "signal", "ctypes", "json", "traceback", "base64")
PLANT = r"""
import os, sys
SHIM = '''
import sys
_path = sys.path[:]
sys.path[:] = [p for p in sys.path if p not in ("", "/work")]
del sys.modules[__name__]
import importlib
_real = importlib.import_module(__name__)
sys.path[:] = _path
sys.modules[__name__] = _real
with open("/tmp/planted.log", "a") as f:
    f.write("%s %d\\n" % (__name__, __import__("os").getpid()))
'''
for name in sys.argv[1:]:
    with open("/work/%s.py" % name, "w") as f:
        f.write(SHIM)
user = "/tmp/.local/lib/python%d.%d/site-packages" % sys.version_info[:2]
os.makedirs(user, exist_ok=True)
with open(user + "/usercustomize.py", "w") as f:
    f.write('open("/tmp/planted.log", "a").write("usercustomize %d\\n" % __import__("os").getpid())\n')
for d in os.listdir("/proc"):
    if d.isdigit() and int(d) != os.getpid():
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if b"_nsbox_" + b"session" in f.read():
                    os.kill(int(d), 9)
                    print("killed")
        except OSError:
            pass
"""

DUMPABLE = "__import__('ctypes').CDLL(None).prctl(3, 0, 0, 0, 0)"  # PR_GET_DUMPABLE


def setUpModule():
    test_session.setUpModule()


def tearDownModule():
    test_session.tearDownModule()


class TestLeftBehind(SessionTestCase):
    def test_zombie_leader_with_a_thread_does_not_outlive_its_step(self):
        sid, _ = self.start()
        token = secrets.token_hex(8)
        secret, forged = "nsbox-" + token, "pwned-" + token
        p, r = self.run_step(sid, "python3", "-c", SURVIVOR, secret, forged)
        # The control: when its step ended, the process was a zombie leader with a thread that
        # ran (it wrote the log).
        self.assertEqual((r["exit_code"], r["stdout"]), (0, "planted 2\n"), r)
        # The session's first code step starts the interpreter; the next one reads the secret.
        p, r = self.code(sid, "secret = ''.join(reversed(%r))\n" % secret[::-1])
        self.assertEqual((r["exit_code"], r["interpreter"]), (0, "started"), r)
        time.sleep(0.5)  # what the survivor, were it alive, needs to find and rewrite it
        p, r = self.code(sid, f"print(secret, {DUMPABLE})")
        self.assertEqual(r["stdout"], secret + " 0\n", r)
        # Nothing of it is left: its log says it watched and never caught anything, and /proc
        # lists init, the interpreter and this step only.
        p, r = self.run_step(sid, "python3", "-c",
                             "import os\nprint(open('/tmp/survivor.log').read(), end='')\n"
                             "print(len([d for d in os.listdir('/proc') if d.isdigit()]))")
        self.assertEqual(r["stdout"], "watching\n3\n", r)


class TestPlantedModules(SessionTestCase):
    def test_planted_modules_do_not_run_in_the_interpreter(self):
        sid, _ = self.start()
        p, r = self.code(sid, "x = 1")
        self.assertEqual(r["exit_code"], 0, r)
        p, r = self.run_step(sid, "python3", "-c", PLANT, *SHIMMED)
        self.assertEqual((r["exit_code"], r["stdout"]), (0, "killed\n"), r)
        # The bare control: a plain python3 -c in /work, as the interpreter was started, runs
        # every planted file.
        p, r = self.run_step(sid, "python3", "-c",
                             "import " + ", ".join(SHIMMED) + "\n"
                             "print(sorted(set(line.split()[0] for line in "
                             "open('/tmp/planted.log'))))\n"
                             "import os\nos.unlink('/tmp/planted.log')\n")
        self.assertEqual(r["stdout"], repr(sorted(SHIMMED + ("usercustomize",))) + "\n", r)
        # A fresh interpreter runs none of them: not as it starts, not as it makes itself
        # non-dumpable, not when it writes an output (json) or shows an exception (traceback).
        p, r = self.code(sid, f"print({DUMPABLE})\n{{'a': 1}}\n")
        self.assertEqual((r["exit_code"], r["interpreter"], r["stdout"]), (0, "started", "0\n"),
                         r)
        p, r = self.code(sid, "1 / 0")
        self.assertIn("ZeroDivisionError", r["stderr"], r)
        p, r = self.run_step(sid, "ls", "/tmp/planted.log")
        self.assertNotEqual(r["exit_code"], 0, r)

    def test_own_modules_still_import(self):
        # /work and the user site stay on sys.path (after the rootfs's): a step imports what
        # an earlier one put there, and a subprocess has the usual sys.path.
        sid, _ = self.start()
        p, r = self.run_step(sid, "python3", "-c",
                             "import os, site\nos.makedirs(site.getusersitepackages())\n"
                             "open(site.getusersitepackages() + '/usermod.py', 'w')"
                             ".write('X = 42')\nopen('/work/workmod.py', 'w').write('Y = 7')\n")
        self.assertEqual(r["exit_code"], 0, r)
        p, r = self.code(sid, "import usermod, workmod, subprocess, sys\n"
                              "import site\nprint(usermod.X, workmod.Y, "
                              "sys.path[-2:] == ['', site.getusersitepackages()])\n"
                              "print(subprocess.run([sys.executable, '-c', "
                              "'import sys; print(sys.path[0] == \"\")'], capture_output=True, "
                              "text=True).stdout, end='')\n")
        self.assertEqual(r["exit_code"], 0, r)
        self.assertEqual(r["stdout"], "42 7 True\nTrue\n", r)

    def test_planted_ipython_is_not_the_display_machinery(self):
        # cell.py imports IPython itself to show a value that is not of a builtin type: one in
        # /work ran there, in a kept interpreter, without the cell importing it, where the
        # rootfs has none (the minimal one).
        sid, _ = self.start()
        p, r = self.code(sid, "x = 1")
        p, r = self.run_step(sid, "python3", "-c",
                             "import os\nos.makedirs('/work/IPython')\n"
                             "open('/work/IPython/__init__.py', 'w').write(\"open('/tmp/ipy.log', "
                             "'a').write('ran\\\\n')\\nraise ImportError\\n\")\n")
        self.assertEqual(r["exit_code"], 0, r)
        p, r = self.code(sid, "import datetime\ndatetime.date(2020, 1, 2)\n")
        self.assertEqual((r["exit_code"], r["interpreter"]), (0, "kept"), r)
        # The bare control: a plain python3 -c in /work imports it.
        p, r = self.run_step(sid, "sh", "-c",
                             "python3 -c 'import IPython' 2>/dev/null; cat /tmp/ipy.log")
        self.assertEqual(r["stdout"], "ran\n", r)
