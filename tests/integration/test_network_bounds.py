# SPDX-License-Identifier: LGPL-2.1-or-later
"""--network allow=: the proxy's own work is bounded (src/lib/proxy.h, PROXY_CONN_BURST and
PROXY_LOOKUP_BURST). It runs in the supervisor, outside --cpus and --pids-limit, so a payload
that opens connections as fast as it can, each naming a new host below a wildcard pattern,
must not make it accept, fork and look up names as fast as the payload asks: connections are
paced (200 at once, then 100 a second, refused ones too), lookups are paced (32 at once, then
20 a second) and a run makes at most 256. Names resolve through the fake DNS server of
test_network_allow (with_fake_dns), which logs every question: a count that does not come
from nsbox."""
import json

import test_network_allow as na
from nsboxtest import NsboxTestCase

CONN_BURST, CONN_RATE = 200, 100
LOOKUP_BURST, LOOKUP_RATE, LOOKUP_BUDGET = 32, 20, 256

# Inside: THREADS threads open connections for SECONDS seconds, each a CONNECT to a host not
# asked before (NAME % n); prints JSON: attempts, the statuses by kind, how many answers came
# and when (since the start): the burst-th, after 1 s, before 10 s, the last, the first
# refusal for the lookup budget.
HAMMER = na.CLIENT + r'''
import json, threading, time
THREADS, SECONDS, NAME = {threads}, {seconds}, {name!r}
lock = threading.Lock()
n = [0]
done, kinds, budget_at = [], {{}}, []
start = time.monotonic()
def worker():
    while time.monotonic() - start < SECONDS:
        with lock:
            i = n[0]
            n[0] += 1
        try:
            status, body = ask(b'CONNECT ' + (NAME % i).encode() + b':443 HTTP/1.1\r\n\r\n')
        except OSError as e:
            status, body = type(e).__name__, ""
        t = time.monotonic() - start
        with lock:
            done.append(t)
            k = status.split(" ")[1] if status.startswith("HTTP/") else status
            kinds[k] = kinds.get(k, 0) + 1
            if "as many names as it may" in body:
                budget_at.append(t)
ts = [threading.Thread(target=worker) for _ in range(THREADS)]
for t in ts:
    t.start()
for t in ts:
    t.join()
done.sort()
print(json.dumps({{"attempts": n[0], "kinds": kinds, "n_done": len(done),
                  "first_{burst}": done[{burst} - 1] if len(done) >= {burst} else None,
                  "after_1s": sum(1 for t in done if t > 1), "before_10s": sum(1 for t in done if t < 10),
                  "last": done[-1] if done else None,
                  "budget_at": min(budget_at) if budget_at else None}}))
'''


class TestNetworkBounds(NsboxTestCase):
    def test_connections_are_paced(self):
        # Refused requests (a name the list does not allow: a 403 with no lookup) still cost
        # the supervisor an accept, a parse and an answer: they are paced too. Eight threads
        # for 4 s: the first 200 answers come at once, then about 100 a second.
        code = HAMMER.format(threads=8, seconds=4, name="n%d.refused.test", burst=CONN_BURST)
        p, r = na.py(code, "--network", "allow=*.example.test", timeout=120)
        self.assertEqual(r["status"], "exited", (r.get("error"), r["reason"], r["stderr"]))
        out = json.loads(r["stdout"])
        n = r["network"]
        done = out["n_done"]
        self.assertEqual(out["kinds"], {"403": done}, r["stderr"])
        self.assertEqual(n["connections_total"], done)
        self.assertEqual(n["lookups"], 0)  # refused by name: nothing was looked up
        # The payload asks faster than the pace: the burst went at its own speed (well over
        # 100 a second), so without the pace it would have kept that speed ...
        burst_rate = CONN_BURST / max(out[f"first_{CONN_BURST}"], 1e-3)
        self.assertGreater(burst_rate, 3 * CONN_RATE, out)
        # ... with it, past the burst, about 100 a second (a connection in the listen queue
        # at the end may be answered after the payload's clock stopped: the slack).
        span = out["last"] - 1.0
        self.assertLessEqual(out["after_1s"], CONN_RATE * span + 20, out)
        self.assertLessEqual(done, CONN_BURST + CONN_RATE * out["last"] + 20, out)
        self.assertGreater(n["connections_throttled"], out["after_1s"] / 2, (n, out))
        self.assertLessEqual(n["connections_throttled"], done - CONN_BURST, n)
        self.assertTrue(any(x.startswith("the network proxy paced the program") and
                            f"{n['connections_throttled']} connections waited" in x
                            for x in r["notes"]), r["notes"])

    def test_lookups_are_paced_and_budgeted(self):
        # Every attempt names a new host below the allowed pattern, so an unbounded proxy would
        # fork a lookup for each: 48 threads for 14 s. The fake server counts the lookups (an
        # A and an AAAA question per name); the budget is reached no sooner than the pace
        # allows, (256 - 32) / 20 = 11.2 s, and no name is looked up past it.
        code = HAMMER.format(threads=48, seconds=14, name="n%d.corp.test", burst=CONN_BURST)
        args = ["--network", "allow=*.corp.test", "--timeout", "60", "--", "python3", "-c", code]
        for uid, r, names in na.TestNetworkAllow.with_fake_dns(self, args):
            with self.subTest(uid=uid):
                self.assertEqual(r["status"], "exited", (r.get("error"), r["reason"], r["stderr"]))
                out = json.loads(r["stdout"])
                n = r["network"]
                asked = set(names)
                self.assertEqual(n["lookups"], LOOKUP_BUDGET, n)
                self.assertEqual(len(asked), LOOKUP_BUDGET, sorted(asked)[:5])
                self.assertEqual(len(names), 2 * LOOKUP_BUDGET)
                self.assertGreater(n["lookups_refused_budget"], 0, n)
                self.assertGreater(n["lookups_throttled"], (LOOKUP_BUDGET - LOOKUP_BURST) / 2, n)
                self.assertLessEqual(n["lookups_throttled"], LOOKUP_BUDGET - LOOKUP_BURST, n)
                # The payload asked for far more new names than were looked up: each attempt
                # that got an answer named one (refused 403: 127.0.0.2 is not public; 503: the
                # budget or --network-max-connections; 504: no turn in time).
                self.assertGreater(out["attempts"], 3 * LOOKUP_BUDGET, out["kinds"])
                self.assertEqual(out["kinds"].get("403"), LOOKUP_BUDGET, out["kinds"])
                # The pace held: in the first 10 s the payload asked for well over the 232
                # names the pace allows by then, yet the budget was spent only after 11 s.
                self.assertGreater(out["before_10s"], LOOKUP_BURST + LOOKUP_RATE * 10 + 100, out)
                self.assertIsNotNone(out["budget_at"], out["kinds"])
                self.assertGreater(out["budget_at"], 10.5)
                self.assertTrue(any(x.startswith("the network proxy refused") and
                                    "a run may look up 256 names" in x for x in r["notes"]),
                                r["notes"])
                self.assertTrue(any(x.startswith("the network proxy paced the program")
                                    for x in r["notes"]), r["notes"])


if __name__ == "__main__":
    import unittest
    unittest.main()
