# SPDX-License-Identifier: LGPL-2.1-or-later
"""A session's program steps cannot read or rewrite its Python interpreter's memory.

A program step (`session exec -- PROGRAM`) runs as the interpreter's uid in the same sandbox.
While the interpreter was dumpable, the step could open /proc/PID/mem of it, find a secret a
code step left in a variable, and rewrite it: the next code step printed what the program
wrote. session-repl.py now makes the interpreter non-dumpable (prctl(PR_SET_DUMPABLE, 0))
before it takes a step, so the open is refused (EACCES; ptrace(2), "Ptrace access mode
checking"), and ptrace attach too where no seccomp policy refuses ptrace first.

- The attack fails; the ablation (the code step itself sets the interpreter dumpable again,
  exactly the protection undone) lets the same program read and rewrite the secret.
- The same with --no-seccomp and PTRACE_ATTACH (there the policy's ptrace refusal is gone).
- The interpreter's children: a subprocess (execve) runs and is dumpable as any program is; a
  fork() keeps the interpreter's non-dumpable; a pool's interpreter is non-dumpable too.
- Fail closed: under a policy that refuses prctl(PR_SET_DUMPABLE) no code step runs (status
  125, an error naming the step and the fix), program steps still do, and a pool does not
  start.

Uses test_session's private registry and helpers."""
import json
import os
import secrets
import tempfile

import test_session
from nsboxtest import nsbox
from test_session import SessionTestCase

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_POLICY = os.path.join(HERE, "..", "..", "policy", "default.policy")

# A program step: find the session's interpreter by its command line, open its memory, and
# replace every copy of argv[1] in its writable mappings by argv[2]. Prints "open mem ERRNO"
# when the open is refused, else "read N" (the copies found and rewritten); then, with
# argv[3] == "ptrace", PTRACE_ATTACH's result ("ptrace 0" or "ptrace ERRNO").
ATTACK = r"""
import ctypes, os, sys
secret, replacement = sys.argv[1].encode(), sys.argv[2].encode()
needle = b"def _nsbox_" + b"session"
pid = None
for d in os.listdir("/proc"):
    if not d.isdigit() or int(d) in (1, os.getpid()):
        continue
    try:
        with open(f"/proc/{d}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        continue
    if argv[:2] == [b"python3", b"-c"] and needle in argv[2]:
        pid = int(d)
if pid is None:
    sys.exit("no interpreter")
try:
    mem = open(f"/proc/{pid}/mem", "r+b", buffering=0)
except OSError as e:
    print("open mem", e.errno)
else:
    with open(f"/proc/{pid}/maps") as maps:
        regions = [line.split()[:2] for line in maps]
    found = 0
    for addr, perms in regions:
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
            mem.write(replacement)
            found += 1
            i = data.find(secret, i + 1)
    print("read", found)
if sys.argv[3:] == ["ptrace"]:
    libc = ctypes.CDLL(None, use_errno=True)
    # PTRACE_ATTACH (16); detached again at once if it was let in (PTRACE_DETACH, 17).
    if libc.ptrace(16, pid, None, None) == 0:
        os.waitpid(pid, 0)
        libc.ptrace(17, pid, None, None)
        print("ptrace 0")
    else:
        print("ptrace", ctypes.get_errno())
"""

DUMPABLE = "__import__('ctypes').CDLL(None).prctl(3, 0, 0, 0, 0)"  # PR_GET_DUMPABLE
SET_DUMPABLE = "__import__('ctypes').CDLL(None).prctl(4, 1, 0, 0, 0)\n"  # the ablation


def setUpModule():
    test_session.setUpModule()


def tearDownModule():
    test_session.tearDownModule()


class TestInterpreterMemory(SessionTestCase):
    def secret_then_attack(self, sid, ablate, ptrace=False):
        """A code step keeps a secret (made at run time: its text is in no source), a program
        step attacks the interpreter, a later code step prints the secret. Returns the program
        step's stdout lines and what the last code step printed, with the secret and what the
        attack writes for it."""
        token = secrets.token_hex(8)
        secret, forged = "nsbox-" + token, "pwned-" + token
        src = "secret = ''.join(reversed(%r))\n" % secret[::-1]
        if ablate:
            src += SET_DUMPABLE
        src += "print(%s)\n" % DUMPABLE
        p, r = self.code(sid, src)
        self.assertEqual(r["exit_code"], 0, r)
        self.assertEqual(r["stdout"], "1\n" if ablate else "0\n", r)
        p, r = self.run_step(sid, "python3", "-c", ATTACK, secret, forged,
                             *(["ptrace"] if ptrace else []))
        self.assertEqual(r["exit_code"], 0, r)
        attack = r["stdout"].splitlines()
        p, r = self.code(sid, "print(secret)")
        self.assertEqual(r["exit_code"], 0, r)
        return attack, r["stdout"], secret, forged

    def test_program_step_cannot_read_or_rewrite_the_interpreter(self):
        sid, _ = self.start()
        attack, printed, secret, _ = self.secret_then_attack(sid, ablate=False)
        self.assertEqual(attack, ["open mem 13"])  # EACCES: not dumpable
        self.assertEqual(printed, secret + "\n")

    def test_ablation_dumpable_interpreter_is_read_and_rewritten(self):
        # The same attack once the step's own code undid the protection: it works, so the
        # refusal above is the protection's doing, not the attack's failing.
        sid, _ = self.start()
        attack, printed, _, forged = self.secret_then_attack(sid, ablate=True)
        self.assertEqual(len(attack), 1, attack)
        self.assertRegex(attack[0], r"^read [1-9]")
        self.assertEqual(printed, forged + "\n")

    def test_no_seccomp_ptrace_attach_is_refused(self):
        # Under the default policy ptrace is refused by seccomp whatever the interpreter is;
        # without a policy, only non-dumpable stands in the way.
        sid, _ = self.start("--no-seccomp")
        attack, printed, secret, _ = self.secret_then_attack(sid, ablate=False, ptrace=True)
        self.assertEqual(attack, ["open mem 13", "ptrace 1"])  # EACCES, EPERM
        self.assertEqual(printed, secret + "\n")
        # The ablation: the attach and the rewrite both go through.
        sid, _ = self.start("--no-seccomp")
        attack, printed, _, forged = self.secret_then_attack(sid, ablate=True, ptrace=True)
        self.assertEqual(len(attack), 2, attack)
        self.assertRegex(attack[0], r"^read [1-9]")
        self.assertEqual(attack[1], "ptrace 0")
        self.assertEqual(printed, forged + "\n")

    def test_interpreter_children(self):
        sid, _ = self.start()
        p, r = self.code(sid,
                         "import os, subprocess, sys\n"
                         f"print({DUMPABLE})\n"
                         # A program it starts is dumpable, as every program step is...
                         "print(subprocess.run([sys.executable, '-c', "
                         f"{'print(%s)' % DUMPABLE!r}], capture_output=True, text=True).stdout, "
                         "end='')\n"
                         # ... a fork() of it shares its memory and is not.
                         "pid = os.fork()\n"
                         "if pid == 0:\n"
                         f"    os._exit(10 + {DUMPABLE})\n"
                         "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) - 10)\n")
        self.assertEqual(r["exit_code"], 0, r)
        self.assertEqual(r["stdout"], "0\n1\n0\n")
        # What README says it costs: its own /proc/self/environ is root's (EACCES), its fds
        # are still listed (proc(5) lets a process see its own).
        p, r = self.code(sid,
                         "import os\nprint(len(os.listdir('/proc/self/fd')) > 2)\n"
                         "try:\n    open('/proc/self/environ', 'rb')\n"
                         "except OSError as e:\n    print(e.errno)\n")
        self.assertEqual(r["stdout"], "True\n13\n", r)
        # A fresh interpreter (after os._exit) is not dumpable either.
        p, r = self.code(sid, "import os\nos._exit(0)")
        p, r = self.code(sid, f"print({DUMPABLE})")
        self.assertEqual((r["stdout"], r["interpreter"]), ("0\n", "started"), r)

    def test_forged_refusal_ends_only_its_step(self):
        # The interpreter's "E" word, written by a step's own code to fd 4: from an interpreter
        # started before the step it means nothing (an answer that is not one: status 1) and
        # the interpreter goes on.
        sid, _ = self.start()
        p, r = self.code(sid, "x = 5")
        p, r = self.code(sid, "import os\nos.write(4, b'E1')\n")
        self.assertEqual((r["exit_code"], r["interpreter"], r.get("error")), (1, "kept", None), r)
        p, r = self.code(sid, "print(x)")
        self.assertEqual((r["stdout"], r["interpreter"]), ("5\n", "kept"), r)

    def test_pool_interpreter_is_not_dumpable(self):
        name = "p" + secrets.token_hex(4)
        p = nsbox("pool", "start", name, "--size", "1", "--preload", "json", "--cgroup", "off",
                  timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.addCleanup(nsbox, "pool", "stop", name)
        p = nsbox("run", "--pool", name, "--json", "--code", "-", input=f"print({DUMPABLE})",
                  timeout=120)
        self.assertEqual(json.loads(p.stdout)["stdout"], "0\n", p.stdout)


class TestFailClosed(SessionTestCase):
    def setUp(self):
        super().setUp()
        # The default policy, plus a refusal of prctl(PR_SET_DUMPABLE).
        fd, self.policy = tempfile.mkstemp(prefix="nsbox-nodump-", suffix=".policy")
        self.addCleanup(os.unlink, self.policy)
        with open(DEFAULT_POLICY) as f, os.fdopen(fd, "w") as out:
            out.write(f.read() + "\nprctl: return EPERM if arg0 == PR_SET_DUMPABLE\n")
        os.chmod(self.policy, 0o644)

    def test_session_serves_no_code_step(self):
        sid, _ = self.start("--seccomp", self.policy)
        for _ in range(2):  # each code step tries a fresh interpreter, and fails the same
            p, r = self.code(sid, "print('ran')")
            self.assertEqual(p.returncode, 125, p.stderr)
            self.assertEqual((r["status"], r["exit_code"], r["stdout"]), ("error", 125, ""), r)
            self.assertEqual(r["error"]["step"], "prctl PR_SET_DUMPABLE", r)
            self.assertEqual(r["error"]["errno"], 1, r)  # EPERM, the policy's
            self.assertIn("cannot make itself non-dumpable", r["reason"])
            self.assertIn("prctl allowed by the seccomp policy", r["reason"])
        # Program steps do not need it, and run.
        p, r = self.run_step(sid, "echo", "program")
        self.assertEqual((r["exit_code"], r["stdout"]), (0, "program\n"), r)
        # The control: the same session's options without the refusal serve code.
        sid, _ = self.start()
        p, r = self.code(sid, "print('ran')")
        self.assertEqual((r["exit_code"], r["stdout"]), (0, "ran\n"), r)

    def test_pool_does_not_start(self):
        name = "p" + secrets.token_hex(4)
        p = nsbox("pool", "start", name, "--size", "1", "--preload", "json", "--cgroup", "off",
                  "--seccomp", self.policy, timeout=300)
        self.addCleanup(nsbox, "pool", "stop", name)
        self.assertOneLineError(p, contains="cannot make itself non-dumpable")
        self.assertNotIn("check the module names", p.stderr)
        self.assertNotIn(name, nsbox("ps").stdout)
