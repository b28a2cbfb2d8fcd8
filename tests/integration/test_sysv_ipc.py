# SPDX-License-Identifier: LGPL-2.1-or-later
"""System V semaphore sets and message queues are kernel memory that no rlimit counts: without
a cgroup nothing held them within --memory (a run under --memory 64m held 2 GiB of semaphores,
32000 per set, and 488 MiB of queued messages; kernel.sem's defaults allow a thousand times
more). So where limits fall back to rlimits, semget(2) and msgget(2) are refused, counted and
explained, in root's runs and ordinary users' alike (src/lib/sandbox.c,
filter_refuse_sysv_ipc()); under a cgroup the kernel charges them to the leaf. The control:
--no-seccomp (an opt-out) lets them through, past --memory."""
import errno
import unittest

from nsboxtest import NsboxTestCase, nsbox_json

# Inside: SETS sets of 32000 semaphores (about 2 MiB of kernel memory each), then message queues
# filled to kernel.msgmnb (16 KiB each by default) until QUEUED bytes; prints how many sets,
# the errno that stopped them, the bytes queued and the errno that stopped those.
CODE = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
IPC_PRIVATE, IPC_CREAT, IPC_NOWAIT, IPC_RMID = 0, 0o1000, 0o4000, 0
sets, sem_err = [], 0
while len(sets) < SETS:
    i = libc.semget(IPC_PRIVATE, 32000, IPC_CREAT | 0o600)
    if i < 0:
        sem_err = ctypes.get_errno()
        break
    sets.append(i)
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 8192)]
m = Msg(1, b"x" * 8192)
queues, queued, msg_err = [], 0, 0
while queued < QUEUED and not msg_err:
    q = libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)
    if q < 0:
        msg_err = ctypes.get_errno()
        break
    queues.append(q)
    while queued < QUEUED and libc.msgsnd(q, ctypes.byref(m), 8192, IPC_NOWAIT) == 0:
        queued += 8192
print(len(sets), sem_err, queued, msg_err)
for i in sets:
    libc.semctl(i, 0, IPC_RMID)
for q in queues:
    libc.msgctl(q, IPC_RMID, None)
"""


def code(sets, queued):
    return CODE.replace("SETS", str(sets)).replace("QUEUED", str(queued))


class TestSysvIpc(NsboxTestCase):
    def test_semaphores_and_message_queues_are_refused_without_a_cgroup(self):
        sets, queued = 64, 128 << 20  # 128 MiB of each, twice --memory
        p, r = nsbox_json("--cgroup", "off", "--memory", "64m", "--timeout", "60", "--",
                          "python3", "-c", code(sets, queued))
        self.assertEqual(r["status"], "exited", r)
        self.assertEqual(r["stdout"].split(), ["0", str(errno.EPERM), "0", str(errno.EPERM)], r)
        refused = {x["syscall"]: x["count"] for x in r["seccomp_refused"]}
        self.assertEqual((refused.get("semget"), refused.get("msgget")), (1, 1), refused)
        for what in ("System V semaphores (semget) are refused",
                     "System V message queues (msgget) are refused"):
            self.assertTrue(any(n.startswith(what) for n in r["notes"]), r["notes"])
        # The control: without the filter, both go far past --memory.
        p, r = nsbox_json("--cgroup", "off", "--memory", "64m", "--timeout", "60",
                          "--no-seccomp", "--", "python3", "-c", code(sets, queued))
        self.assertEqual(r["stdout"].split(), [str(sets), "0", str(queued), "0"], r)

    def test_posix_semaphores_still_work(self):
        p, r = nsbox_json("--cgroup", "off", "--memory", "64m", "--", "python3", "-c",
                          "import multiprocessing as m\nl = m.Lock()\nwith l: print('locked')\n")
        self.assertEqual(r["stdout"], "locked\n", r)
        self.assertEqual(r["seccomp_refused"], [], r)


if __name__ == "__main__":
    unittest.main()
