# SPDX-License-Identifier: LGPL-2.1-or-later
"""A sandbox that sees a session's socket (a bind of the caller's runtime directory) cannot make
the session's supervisor work as fast as it connects (issue 24, item 8): each connection it
refuses costs the supervisor, outside every limit of the sandbox, an accept(2), its checks and
an answer, so refused connections are paced as refused system calls are (src/cli/
session-internal.h, REFUSED_BURST: 100 at once, then 100 a second; the rest wait in the listen
queue). An ordinary user's sandbox has the caller's uid, so only the user namespace check
refuses it; root's sandboxes have host ids of their own and do not get through the runtime
directory's 0700 at all. A pool's socket is paced the same way (src/cli/pool.c)."""
import json
import os
import unittest

from nsboxtest import NsboxTestCase, nsbox

BURST, RATE = 100, 100

# Inside: connect (non-blocking) to argv[1] for argv[2] seconds, as fast as it can; count the
# attempts, those the listen queue took, and the answers (the supervisor's refusal lines).
FLOOD = r'''
import errno, json, os, select, socket, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
attempts = queued = answers = 0
open_socks = []
def harvest(wait):
    global answers
    keep = []
    r, _, _ = select.select(open_socks, [], [], wait) if open_socks else ([], [], [])
    ready = set(r)
    for s in open_socks:
        if s in ready:
            try:
                answers += s.recv(4096).count(b"\n")
            except OSError:
                pass
            s.close()
        else:
            keep.append(s)
    open_socks[:] = keep
start = time.monotonic()
while time.monotonic() - start < seconds:
    s = socket.socket(socket.AF_UNIX)
    s.setblocking(False)
    attempts += 1
    try:
        s.connect(path)
        queued += 1
        open_socks.append(s)
    except BlockingIOError:
        s.close()
    except OSError as e:
        print(json.dumps({"errno": e.errno}))
        raise SystemExit
    if len(open_socks) >= 1000 or attempts % 200 == 0:
        harvest(0)
        while len(open_socks) >= 1000:
            harvest(0.05)
elapsed = time.monotonic() - start
harvest(0.3)
print(json.dumps({"attempts": attempts, "queued": queued, "answers": answers,
                  "elapsed": elapsed}))
'''


class TestSessionSocketFlood(NsboxTestCase):
    def test_refused_connections_are_paced(self):
        runtime = os.environ["XDG_RUNTIME_DIR"]  # run.py's own: the registry is runtime/nsbox
        p = nsbox("session", "start", "--json", "--cgroup", "off")
        self.assertEqual(p.returncode, 0, p.stderr)
        info = json.loads(p.stdout)
        self.addCleanup(lambda: nsbox("session", "stop", info["id"]))
        inside = "/runtime/" + os.path.relpath(info["socket"], runtime)
        p = nsbox("run", "--json", "--cgroup", "off", "--timeout", "30",
                  "-v", f"{runtime}:/runtime:ro", "--", "python3", "-c", FLOOD, inside, "3",
                  timeout=90)
        r = json.loads(p.stdout)
        self.assertEqual(r["status"], "exited", r["stderr"])
        out = json.loads(r["stdout"])
        if os.geteuid() == 0:
            # Root's sandbox has a host uid of its own: the 0700 runtime directory keeps it
            # from the socket, so it cannot connect at all.
            self.assertEqual(out, {"errno": 13}, r)
        else:
            # The caller's own uid: connect(2) goes through a read-only bind (test_session's
            # test_sandbox_with_a_read_only_bind_of_the_registry_cannot_drive_a_session); the
            # supervisor refuses each, at its pace: the burst, then about 100 a second, while
            # the sandbox tried far more.
            self.assertGreater(out["answers"], 0, out)
            self.assertLessEqual(out["answers"], BURST + RATE * (out["elapsed"] + 0.5) + 20, out)
            self.assertGreater(out["attempts"], 5 * (BURST + RATE * out["elapsed"]), out)
        # The session goes on: the caller's own client still gets its step run.
        p = nsbox("session", "exec", info["id"], "--json", "--", "echo", "still")
        self.assertEqual((p.returncode, json.loads(p.stdout)["stdout"]), (0, "still\n"), p.stderr)


class TestPoolSocketFlood(NsboxTestCase):
    def test_refused_connections_are_paced(self):
        """A pool's socket as a session's: refused at the same pace, and the pool serves on."""
        runtime = os.environ["XDG_RUNTIME_DIR"]
        p = nsbox("pool", "start", "flood", "--size", "1", "--cgroup", "off", timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.addCleanup(lambda: nsbox("pool", "stop", "flood"))
        pool_id = p.stdout.strip()
        p = nsbox("run", "--json", "--cgroup", "off", "--timeout", "30",
                  "-v", f"{runtime}:/runtime:ro", "--", "python3", "-c", FLOOD,
                  f"/runtime/nsbox/{pool_id}.sock", "3", timeout=90)
        r = json.loads(p.stdout)
        self.assertEqual(r["status"], "exited", r["stderr"])
        out = json.loads(r["stdout"])
        if os.geteuid() == 0:
            self.assertEqual(out, {"errno": 13}, r)
        else:
            self.assertGreater(out["answers"], 0, out)
            self.assertLessEqual(out["answers"], BURST + RATE * (out["elapsed"] + 0.5) + 20, out)
            self.assertGreater(out["attempts"], 5 * (BURST + RATE * out["elapsed"]), out)
        p = nsbox("run", "--pool", "flood", "--json", "--", "echo", "still")
        self.assertEqual((p.returncode, json.loads(p.stdout)["stdout"]), (0, "still\n"), p.stderr)


if __name__ == "__main__":
    unittest.main()
