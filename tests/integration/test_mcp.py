# SPDX-License-Identifier: LGPL-2.1-or-later
"""`nsbox mcp` driven over its stdio as a client would, with bad input where a client could send
it: malformed JSON, unknown methods, invalid params, a 100 MB line, a client that stops reading;
cancellation, progress, limits a call may only lower, the audit log, and that the server's end
(EOF on stdin, SIGKILL) leaves no sandbox behind. tests/mcp/ drives it with the official MCP
TypeScript SDK."""
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from nsboxtest import NSBOX, NsboxTestCase, nsbox, processes_with, wait_until

# The server's resident memory stays below this while it skips a huge line or holds answers
# a client does not read. Checked in the plain build only: AddressSanitizer (the sanitizer
# stage, NSBOX_SANITIZERS=1) keeps freed memory in its quarantine (256 MiB by default), so a
# server that frees as it should looks as big as one that keeps everything; the behaviour is
# checked there all the same.
RSS_BOUND_KB = None if os.environ.get("NSBOX_SANITIZERS") == "1" else 80 * 1024

INIT = {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test_mcp", "version": "1"}}


class Server:
    """`nsbox mcp ARGS` with a thread reading its stdout into a queue of parsed messages."""

    def __init__(self, *args):
        self.p = subprocess.Popen([NSBOX, "mcp", "--cgroup", "off", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.messages = queue.Queue()
        self.notifications = []
        self.next_id = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            self.messages.put(json.loads(line))
        self.messages.put(None)

    def send(self, message):
        self.p.stdin.write((json.dumps(message) + "\n").encode())
        self.p.stdin.flush()

    def start(self, method, params=None, id=None):
        if id is None:
            self.next_id += 1
            id = self.next_id
        m = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            m["params"] = params
        self.send(m)
        return id

    def wait(self, id, timeout=30):
        """The response to id; notifications met on the way are kept in self.notifications."""
        end = time.monotonic() + timeout
        while True:
            m = self.messages.get(timeout=max(0.01, end - time.monotonic()))
            if m is None:
                raise AssertionError("the server closed stdout")
            if "id" in m and "method" not in m and m["id"] == id:
                return m
            self.notifications.append(m)

    def request(self, method, params=None, timeout=30):
        return self.wait(self.start(method, params), timeout)

    def call(self, name, arguments, timeout=60, meta=None):
        params = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        m = self.request("tools/call", params, timeout)
        return m["result"]

    def close(self, timeout=20):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        rc = self.p.wait(timeout)
        return rc, self.p.stderr.read().decode()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                f.close()
            except (BrokenPipeError, OSError):
                pass


class McpTestCase(NsboxTestCase):
    def server(self, *args, init=True):
        s = Server(*args)
        self.addCleanup(s.kill)
        if init:
            r = s.request("initialize", INIT)
            self.assertEqual(r["result"]["protocolVersion"], "2025-06-18")
            s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return s


class TestProtocol(McpTestCase):
    def test_revisions(self):
        """The client's revision when the server speaks it, else the newest."""
        for asked, answered in (("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"),
                                ("2024-11-05", "2025-11-25"), ("1999-01-01", "2025-11-25")):
            s = self.server(init=False)
            r = s.request("initialize", dict(INIT, protocolVersion=asked))
            self.assertEqual(r["result"]["protocolVersion"], answered)
            self.assertEqual(r["result"]["capabilities"], {"tools": {"listChanged": False}})
            self.assertEqual(r["result"]["serverInfo"]["name"], "nsbox")
            self.assertEqual(s.close()[0], 0)

    def test_tools_listed_with_schemas(self):
        s = self.server()
        tools = s.request("tools/list")["result"]["tools"]
        names = [t["name"] for t in tools]
        self.assertEqual(names, ["run_python", "python_session", "run_command",
                                 "session_list_files", "session_read_file", "session_write_file"])
        for t in tools:
            self.assertEqual(t["inputSchema"]["type"], "object")
            self.assertEqual(t["outputSchema"]["type"], "object", t["name"])
            self.assertNotIn("$ref", json.dumps(t["outputSchema"]))
        # The description says what the sandbox is: the operator's network and limits.
        self.assertIn("Network: none", tools[0]["description"])
        self.assertIn("timeout 10 s", tools[0]["description"])
        self.assertFalse(tools[0]["annotations"]["openWorldHint"])
        self.assertFalse(tools[0]["annotations"]["destructiveHint"])
        s2 = self.server("--network", "loopback", "--timeout", "3")
        d = s2.request("tools/list")["result"]["tools"][0]["description"]
        self.assertIn("only loopback", d)
        self.assertIn("timeout 3 s", d)
        s3 = self.server("--network", "allow=pypi.org")
        t = s3.request("tools/list")["result"]["tools"][0]
        self.assertIn("to these hosts: pypi.org", t["description"])
        self.assertTrue(t["annotations"]["openWorldHint"])

    def test_malformed_json(self):
        s = self.server()
        s.p.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        s.p.stdin.flush()
        m = s.messages.get(timeout=10)
        self.assertEqual(m["error"]["code"], -32700, m)
        self.assertIsNone(m["id"])
        # The server goes on.
        self.assertEqual(s.request("ping")["result"], {})

    def test_invalid_requests(self):
        s = self.server()
        for bad in ([1, 2], "x", {"jsonrpc": "1.0", "id": 9, "method": "ping"},
                    {"jsonrpc": "2.0", "id": 9, "method": 5}):
            s.send(bad)
            m = s.messages.get(timeout=10)
            self.assertEqual(m["error"]["code"], -32600, (bad, m))
        self.assertEqual(s.request("ping")["result"], {})

    def test_unknown_method(self):
        s = self.server()
        m = s.request("resources/list")
        self.assertEqual(m["error"]["code"], -32601)
        # A long name, quoted cut in the answer, cut inside a character: still an answer.
        m = s.request("x" + "\u00e9" * 150)
        self.assertEqual(m["error"]["code"], -32601)
        m = s.request("tools/call", {"name": "x" + "\u00e9" * 80})
        self.assertEqual(m["error"]["code"], -32602)
        # An unknown notification gets no answer at all.
        s.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
        self.assertEqual(s.request("ping")["result"], {})
        self.assertEqual(s.notifications, [])

    def test_invalid_params(self):
        s = self.server()
        for params in ({}, {"name": 5}, {"name": "no_such_tool"},
                       {"name": "run_python", "arguments": [1]}):
            m = s.request("tools/call", params)
            self.assertEqual(m["error"]["code"], -32602, (params, m))
        m = s.request("initialize", {"capabilities": {}})
        self.assertEqual(m["error"]["code"], -32602)
        # Arguments that do not fit the schema: a tool error the model can act on (MCP's rule).
        for args in ({}, {"code": 5}, {"code": "1", "timeout": -1},
                     {"code": "1", "files": {"../x": "y"}}):
            r = s.call("run_python", args)
            self.assertTrue(r["isError"], (args, r))
            self.assertIn("invalid arguments", r["content"][0]["text"])
        r = s.call("run_command", {"argv": []})
        self.assertTrue(r["isError"])

    def test_huge_line(self):
        """A 100 MB line gets one error answer and is skipped without being kept whole."""
        s = self.server()
        chunk = b"x" * (1 << 20)

        def write():
            s.p.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"p": "')
            for _ in range(100):
                s.p.stdin.write(chunk)
            s.p.stdin.write(b'"}}\n')
            s.p.stdin.flush()
        w = threading.Thread(target=write)
        w.start()
        m = s.messages.get(timeout=60)
        w.join(60)
        self.assertEqual(m["error"]["code"], -32600, m)
        self.assertIn("longer than", m["error"]["message"])
        self.assertEqual(s.request("ping")["result"], {})
        with open(f"/proc/{s.p.pid}/status") as f:
            peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
        if RSS_BOUND_KB:
            self.assertLess(peak, RSS_BOUND_KB, "kB: the server kept the line")

    def test_client_stops_reading(self):
        """Answers the client does not read wait in a bounded queue; the server stops reading
        requests meanwhile, and still ends at EOF."""
        n = 4000  # each tools/list answer is ~10 kB: ~40 MB, more than the queue holds
        # A server whose stdout nobody reads (for now).
        p = subprocess.Popen([NSBOX, "mcp", "--cgroup", "off"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (p.poll() is None and (p.kill(), p.wait()), p.stdout.close()))
        done = threading.Event()

        def write_unread():
            try:
                for i in range(n):
                    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i,
                                               "method": "tools/list"}) + "\n").encode())
                p.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass
            done.set()
        t = threading.Thread(target=write_unread, daemon=True)
        t.start()
        time.sleep(5)
        # The client is blocked writing (the server stopped reading), not finished.
        self.assertFalse(done.is_set(), "the server read every request with nobody reading "
                                        "its answers")
        with open(f"/proc/{p.pid}/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        if RSS_BOUND_KB:
            self.assertLess(rss, RSS_BOUND_KB, "kB: the queue of answers is not bounded")
        # Reading again: the answers come, in order, and the rest of the requests are taken.
        got = 0
        for line in p.stdout:
            m = json.loads(line)
            self.assertEqual(m["id"], got)
            got += 1
            if got == n:
                break
        self.assertEqual(got, n)
        p.stdin.close()
        self.assertEqual(p.wait(20), 0)

    def test_eof_with_unread_answers(self):
        """A client that never reads and closes stdin: the server still ends, soon."""
        p = subprocess.Popen([NSBOX, "mcp", "--cgroup", "off"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (p.poll() is None and (p.kill(), p.wait()), p.stdout.close()))
        for i in range(300):  # ~3 MB of answers: more than the pipe takes
            p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/list"}) +
                           "\n").encode())
        p.stdin.close()
        t = time.monotonic()
        p.wait(20)
        self.assertLess(time.monotonic() - t, 10)


class TestTools(McpTestCase):
    def test_run_python(self):
        s = self.server()
        r = s.call("run_python", {"code": "print(open('d/x.txt').read() * 2)",
                                  "files": {"d/x.txt": "ab"}})
        self.assertFalse(r["isError"], r)
        self.assertEqual(r["content"], [{"type": "text", "text": "abab\n"}])
        sc = r["structuredContent"]
        self.assertEqual((sc["status"], sc["exit_code"], sc["stdout"]), ("exited", 0, "abab\n"))
        self.assertEqual(sc["notes"], [])

    def test_exception(self):
        s = self.server()
        r = s.call("run_python", {"code": "def f():\n    raise ValueError('bad value')\nf()"})
        self.assertTrue(r["isError"])
        text = r["content"][0]["text"]
        self.assertTrue(text.startswith("exited with status 1\n[stderr]\nTraceback"), text)
        self.assertIn("ValueError: bad value", text)

    def test_timeout_only_lowered(self):
        s = self.server("--timeout", "3")
        t = time.monotonic()
        r = s.call("run_python", {"code": "while True: pass", "timeout": 1})
        self.assertLess(time.monotonic() - t, 2.9)
        self.assertTrue(r["isError"])
        self.assertEqual(r["structuredContent"]["status"], "timeout")
        self.assertEqual(r["structuredContent"]["timeout"], 1)
        self.assertIn("timed out", r["content"][0]["text"])
        # More than the operator allows: clamped, and said.
        r = s.call("run_python", {"code": "print(1)", "timeout": 100})
        self.assertEqual(r["structuredContent"]["timeout"], 3)
        self.assertIn("allows at most 3 s", r["structuredContent"]["notes"][0])
        self.assertIn("allows at most 3 s", r["content"][0]["text"])

    def test_memory_only_lowered(self):
        s = self.server("--memory", "128m")
        hog = "x = bytearray(90 << 20)\nprint('allocated')"
        r = s.call("run_python", {"code": hog})
        self.assertFalse(r["isError"], r)
        # Less than the operator's: the call's limit holds.
        r = s.call("run_python", {"code": hog, "memory": "48m"})
        self.assertTrue(r["isError"], r)
        self.assertIn("MemoryError", r["structuredContent"]["stderr"])
        # More: the operator's, and said.
        r = s.call("run_python", {"code": "print(1)", "memory": "4g"})
        self.assertIn("allows at most 128 MiB", r["structuredContent"]["notes"][0])
        r = s.call("run_command", {"argv": ["true"], "memory": "lots"})
        self.assertTrue(r["isError"])
        self.assertIn("\"memory\"", r["content"][0]["text"])
        # Below the floor of 6 MiB (config_check()): refused, and said.
        r = s.call("run_command", {"argv": ["true"], "memory": "1m"})
        self.assertTrue(r["isError"], r)
        self.assertIn("at least 6m", r["content"][0]["text"])

    def test_outcome_warnings_reach_the_model_host_ones_do_not(self):
        # A full /work is the program's to act on (nsbox marks it an outcome warning); an
        # opt-out of the operator's is not: the text and the notes say the one, not the other.
        s = self.server("--workdir-size", "2m", "--env-inherit")
        r = s.call("run_python", {"code": "open('big', 'wb').write(b'x' * (3 << 20))"})
        self.assertTrue(r["isError"], r)
        text, notes = r["content"][0]["text"], r["structuredContent"]["notes"]
        full = [n for n in notes if "raise --workdir-size" in n]
        self.assertEqual(len(full), 1, notes)
        self.assertIn(f"[{full[0]}]", text)
        self.assertFalse(any("--env-inherit" in n for n in notes), notes)
        self.assertNotIn("--env-inherit", text)

    def test_run_command(self):
        s = self.server()
        r = s.call("run_command", {"argv": ["sh", "-c", "tr a-z A-Z; exit 3"], "stdin": "hey\n"})
        self.assertTrue(r["isError"])
        self.assertEqual(r["structuredContent"]["exit_code"], 3)
        self.assertEqual(r["structuredContent"]["stdout"], "HEY\n")
        r = s.call("run_command", {"argv": ["no-such-program"]})
        self.assertEqual(r["structuredContent"]["exit_code"], 127)

    def test_file_tools_do_not_run_the_sessions_modules(self):
        # The file tools are python3 -c steps in the session's /work: a json.py or a user
        # site .pth that the session's code left there must not answer for them.
        s = self.server()
        forge = ("import sys\nsys.stdout.write('{\"path\": \"/work/real.txt\", \"size\": 1, "
                 "\"encoding\": \"utf-8\", \"content\": \"FORGED\", \"entries\": [], "
                 "\"truncated\": false, \"error\": null}\\n')\nimport os\nos._exit(0)\n")
        site = "/tmp/.local/lib/python3.%d/site-packages"
        r = s.call("python_session", {"code": (
            "import os, sys\nopen('real.txt', 'w').write('real')\n"
            f"open('json.py', 'w').write({forge!r})\n"
            f"d = {site!r} % sys.version_info[1]\nos.makedirs(d)\n"
            "open(d + '/x.pth', 'w').write('import os; os.write(1, b\"PTH RAN\\\\n\")\\n')\n"
            "print('planted')")})
        self.assertEqual(r["content"][0]["text"], "planted\n", r)
        r = s.call("session_read_file", {"path": "real.txt"})
        self.assertEqual(r.get("structuredContent", {}).get("content"), "real", r)
        r = s.call("session_list_files", {})
        self.assertIn({"path": "real.txt", "type": "file", "size": 4},
                      r.get("structuredContent", {}).get("entries", []), r)
        r = s.call("session_write_file", {"path": "w.txt", "content": "abc"})
        self.assertEqual(r.get("structuredContent", {}).get("size"), 3, r)
        # Control: an ordinary step is not isolated, and meets both.
        r = s.call("python_session", {"code": (
            "import subprocess\nprint(subprocess.run(['python3', '-c', 'import json'], "
            "capture_output=True, text=True).stdout)")})
        self.assertIn("PTH RAN", r["content"][0]["text"], r)
        self.assertIn("FORGED", r["content"][0]["text"], r)

    def test_session_state_and_files(self):
        s = self.server()
        r = s.call("python_session", {"code": "x = 20"})
        self.assertFalse(r["isError"], r)
        self.assertEqual(r["structuredContent"]["interpreter"], "started")
        r = s.call("python_session", {"code": "import os\nos.makedirs('out')\n"
                                      "open('out/a.txt', 'w').write('hi')\nprint(x + 22)"})
        self.assertEqual(r["content"][0]["text"], "42\n")
        self.assertEqual(r["structuredContent"]["interpreter"], "kept")
        # A second, named session has its own state.
        r = s.call("python_session", {"code": "print('x' in dir())", "session": "other"})
        self.assertEqual(r["content"][0]["text"], "False\n")
        r = s.call("session_list_files", {})
        self.assertFalse(r["isError"], r)
        self.assertIn({"path": "out/a.txt", "type": "file", "size": 2},
                      r["structuredContent"]["entries"])
        r = s.call("session_read_file", {"path": "/work/out/a.txt"})
        self.assertEqual(r["structuredContent"]["content"], "hi")
        r = s.call("session_write_file", {"path": "in/b.bin", "content": "/wAB",
                                          "encoding": "base64"})
        self.assertEqual(r["structuredContent"]["size"], 3, r)
        r = s.call("python_session", {"code": "print(list(open('in/b.bin', 'rb').read()))"})
        self.assertEqual(r["content"][0]["text"], "[255, 0, 1]\n")
        r = s.call("session_read_file", {"path": "in/b.bin"})
        self.assertEqual(r["structuredContent"]["encoding"], "base64")
        self.assertEqual(r["structuredContent"]["content"], "/wAB")
        r = s.call("session_read_file", {"path": "../etc/passwd"})
        self.assertTrue(r["isError"])
        r = s.call("session_read_file", {"path": "missing"})
        self.assertTrue(r["isError"])
        # reset: a fresh interpreter; close: gone.
        r = s.call("python_session", {"code": "print('x' in dir())", "reset": True})
        self.assertEqual(r["content"][0]["text"], "False\n")
        r = s.call("python_session", {"close": True})
        self.assertFalse(r["isError"])
        self.assertEqual(r["structuredContent"]["status"], "closed")
        r = s.call("session_list_files", {})
        self.assertTrue(r["isError"])
        self.assertIn("no session", r["content"][0]["text"])

    def test_progress(self):
        s = self.server()
        r = s.call("run_command", {"argv": ["sh", "-c", "echo one; sleep 1.5; echo two"]},
                   meta={"progressToken": "tok"})
        self.assertFalse(r["isError"], r)
        progress = [n["params"] for n in s.notifications
                    if n.get("method") == "notifications/progress"]
        self.assertTrue(progress, s.notifications)
        self.assertTrue(all(p["progressToken"] == "tok" for p in progress))
        values = [p["progress"] for p in progress]
        self.assertEqual(values, sorted(set(values)), "progress must increase")
        self.assertIn("one", progress[0]["message"])
        # A session's step streams too ("stream" in the session's request).
        s.notifications.clear()
        r = s.call("python_session", {"code": "import time\nprint('first', flush=True)\n"
                                              "time.sleep(1.5)\nprint('second')"},
                   meta={"progressToken": 7})
        self.assertEqual(r["content"][0]["text"], "first\nsecond\n")
        progress = [n["params"] for n in s.notifications
                    if n.get("method") == "notifications/progress"]
        self.assertTrue(progress and all(p["progressToken"] == 7 for p in progress))
        self.assertIn("first", progress[0]["message"])
        self.assertFalse(any("second" in p["message"] for p in progress[:1]))
        # Output, answer and end of a quick step come in one read: the answer still counts.
        for i in range(5):
            r = s.call("python_session", {"code": f"print({i})"}, meta={"progressToken": i})
            self.assertEqual(r["content"][0]["text"], f"{i}\n", r)
        # Without a token: no notification.
        s.notifications.clear()
        s.call("run_command", {"argv": ["echo", "x"]})
        self.assertEqual(s.notifications, [])

    def test_cancel_run(self):
        s = self.server("--timeout", "300")  # only the cancellation may end the run
        token = "mcp-cancel-%d" % os.getpid()
        id = s.start("tools/call", {"name": "run_command",
                                    "arguments": {"argv": ["sh", "-c", f"sleep 600; : {token}"]}})
        self.assertTrue(wait_until(lambda: processes_with(token), 10), "the run did not start")
        s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "test"}})
        self.assertTrue(wait_until(lambda: not processes_with(token), 8),
                        "the sandbox outlived the cancellation")
        self.assertEqual(s.request("ping")["result"], {})
        time.sleep(0.5)
        self.assertEqual(s.request("ping")["result"], {})
        self.assertFalse([m for m in s.notifications if m.get("id") == id],
                         "a cancelled request was answered")

    def test_cancel_session_step_keeps_session(self):
        d = tempfile.mkdtemp(prefix="nsbox-mcp-test-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        log = os.path.join(d, "audit.jsonl")
        s = self.server("--timeout", "300", "--log", log)  # only the cancellation may end it
        s.call("python_session", {"code": "x = 7"})
        id = s.start("tools/call", {"name": "python_session",
                                    "arguments": {"code": "import time\ntime.sleep(600)"}})
        time.sleep(1)
        t = time.monotonic()
        s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id}})
        r = s.call("python_session", {"code": "print(x)"}, timeout=15)
        self.assertLess(time.monotonic() - t, 10, "the cancelled step ran on")
        self.assertEqual(r["content"][0]["text"], "7\n", r)
        # The audit log says why the step ended: not its timeout.
        with open(log) as f:
            ends = [json.loads(l)["result"] for l in f if '"event":"end"' in l]
        self.assertTrue(any("client hung up" in w for e in ends for w in e["warnings"]), ends)

    def test_copy_out_dir(self):
        """--copy-out-dir: what a call wrote in /work/out is copied out and linked."""
        d = tempfile.mkdtemp(prefix="nsbox-mcp-test-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        s = self.server("--copy-out-dir", d)
        self.assertIn("/work/out", s.request("tools/list")["result"]["tools"][0]["description"])
        r = s.call("run_python", {"code": "import os\nos.makedirs('out/plots')\n"
                                          "open('out/plots/a b.csv', 'w').write('x,y\\n')\n"
                                          "print('made')"})
        self.assertFalse(r["isError"], r)
        links = [c for c in r["content"] if c["type"] == "resource_link"]
        self.assertEqual(len(links), 1, r["content"])
        link = links[0]
        self.assertEqual((link["name"], link["mimeType"], link["size"]),
                         ("out/plots/a b.csv", "text/csv", 4))
        self.assertTrue(link["uri"].startswith("file://" + os.path.realpath(d) + "/call-"))
        self.assertTrue(link["uri"].endswith("/out/plots/a%20b.csv"), link["uri"])
        path = link["uri"][len("file://"):].replace("%20", " ")
        with open(path) as f:
            self.assertEqual(f.read(), "x,y\n")
        self.assertEqual(r["structuredContent"]["files_copied_out"][0]["path"],
                         "/work/out/plots/a b.csv")
        self.assertEqual(r["content"][0]["text"],
                         "made\n\n[copied out for the user: out/plots/a b.csv]")
        # A call that writes nothing there leaves nothing there, and says nothing of it.
        before = set(os.listdir(d))
        r = s.call("run_python", {"code": "print(1)"})
        self.assertEqual(r["content"], [{"type": "text", "text": "1\n"}])
        self.assertEqual(set(os.listdir(d)), before)
        p = nsbox("mcp", "--copy-out-dir", os.path.join(d, "missing"))
        self.assertOneLineError(p, contains="not a directory")

    def test_audit_log(self):
        d = tempfile.mkdtemp(prefix="nsbox-mcp-test-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        log = os.path.join(d, "audit.jsonl")
        s = self.server("--log", log)
        s.call("run_python", {"code": "print('audited')"})
        s.call("python_session", {"code": "print('step')"})
        # Refused for its arguments: it ran nothing, and is recorded as such.
        r = s.call("run_python", {"code": "print('refused')", "timeout": "soon"})
        self.assertTrue(r["isError"])
        self.assertEqual(s.close()[0], 0)
        with open(log) as f:
            records = [json.loads(l) for l in f]
        text = json.dumps(records)
        self.assertIn("mcp.tool", text)
        self.assertIn("print('audited')", text)
        self.assertIn("print('step')", text)
        refused = [r for r in records if r.get("code") == "print('refused')"]
        self.assertEqual(len(refused), 1, records)
        self.assertEqual(refused[0]["argv"], ["nsbox", "mcp", "tools/call", "run_python"])
        end = [r for r in records if r["run_id"] == refused[0]["run_id"] and r["event"] == "end"]
        self.assertEqual(end[0]["result"]["status"], "error")
        self.assertIn("did not run: invalid arguments", end[0]["result"]["error"]["message"])
        # A log the server cannot keep: it does not start.
        p = nsbox("mcp", "--log", d)
        self.assertOneLineError(p, contains="the server does not start")


class TestSessionStream(NsboxTestCase):
    """The session request's "stream": the step's output as {"stream", "data"} lines before the
    answer (what nsbox mcp's progress notifications are made of)."""

    def test_stream_lines_then_answer(self):
        import socket
        p = nsbox("session", "start", "--json", "--cgroup", "off")
        self.assertEqual(p.returncode, 0, p.stderr)
        info = json.loads(p.stdout)
        self.addCleanup(nsbox, "session", "stop", info["id"])

        def step(request):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.connect(info["socket"])
                c.sendall((json.dumps(request) + "\n").encode())
                with c.makefile("rb") as f:
                    return [json.loads(line) for line in f]
        lines = step({"op": "code", "stream": True, "code": "import sys, time\n"
                      "print('a', flush=True)\ntime.sleep(0.5)\n"
                      "print('b', file=sys.stderr, flush=True)"})
        streamed, answer = lines[:-1], lines[-1]
        # What each read brought: print() may write its text and its newline apart.
        joined = {}
        for x in streamed:
            joined[x["stream"]] = joined.get(x["stream"], "") + x["data"]
        self.assertEqual(joined, {"stdout": "a\n", "stderr": "b\n"})
        self.assertEqual(streamed[0]["stream"], "stdout")
        self.assertEqual((answer["stdout"], answer["stderr"]), ("a\n", "b\n"))
        # Without it, the answer alone; with copy_out, refused.
        self.assertEqual(len(step({"op": "code", "code": "print(1)"})), 1)
        err = step({"op": "code", "code": "1", "stream": True, "copy_out": ["/work"]})
        self.assertIn("exclude each other", err[0]["error"])


class TestEnd(McpTestCase):
    def _busy_server(self):
        # A timeout far beyond the checks' 8 s: only the server's end may end these runs.
        s = self.server("--timeout", "300")
        token = "mcp-end-%d-%d" % (os.getpid(), time.monotonic_ns())
        s.call("python_session", {"code": "x = 1"})
        s.start("tools/call", {"name": "run_command",
                               "arguments": {"argv": ["sh", "-c", f"sleep 600; : {token}"]}})
        s.start("tools/call", {"name": "python_session",
                               "arguments": {"code": "import time\ntime.sleep(600)"}})
        self.assertTrue(wait_until(lambda: processes_with(token), 10))
        sessions = self.sessions_of(s.p.pid)
        self.assertTrue(sessions, "no session of this server")
        return s, token, sessions

    def sessions_of(self, pid):
        """The pids of the session supervisors of server pid (its label mcp.server)."""
        ls = [json.loads(l) for l in nsbox("session", "ls", "--json").stdout.splitlines()]
        mine = [x for x in ls if x["labels"].get("mcp.server") == str(pid)]
        for x in mine:  # should the test fail: not left behind
            self.addCleanup(nsbox, "kill", x["run_id"])
        return [x["pid"] for x in mine]

    def assertNothingLeft(self, token, sessions):
        self.assertTrue(wait_until(lambda: not processes_with(token), 8),
                        "a run outlived the server")
        self.assertTrue(wait_until(lambda: not any(os.path.exists(f"/proc/{p}")
                                                   for p in sessions), 8),
                        "a session outlived the server")

    def test_eof_ends_everything(self):
        s, token, sessions = self._busy_server()
        t = time.monotonic()
        rc, err = s.close()
        self.assertEqual(rc, 0, err)
        self.assertLess(time.monotonic() - t, 10)
        self.assertNothingLeft(token, sessions)

    def test_sigterm_ends_everything(self):
        s, token, sessions = self._busy_server()
        s.p.send_signal(signal.SIGTERM)
        self.assertEqual(s.p.wait(15), 0)
        self.assertNothingLeft(token, sessions)

    def test_sigkill_leaves_nothing(self):
        s, token, sessions = self._busy_server()
        s.p.kill()
        s.p.wait()
        self.assertNothingLeft(token, sessions)


class TestCommandLine(NsboxTestCase):
    def test_print_tools(self):
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "python", "nsbox",
                               "tools.json")) as f:
            names = [t["name"] for t in json.load(f)["tools"]]
        p = nsbox("mcp", "--print-tools", "openai")
        self.assertEqual(p.returncode, 0, p.stderr)
        tools = json.loads(p.stdout)
        self.assertEqual([t["name"] for t in tools], names)
        self.assertTrue(all(t["type"] == "function" and t["parameters"]["type"] == "object"
                            for t in tools))
        tools = json.loads(nsbox("mcp", "--print-tools", "anthropic").stdout)
        self.assertEqual(sorted(tools[0]), ["description", "input_schema", "name"])
        p = nsbox("mcp", "--print-tools", "gemini")
        self.assertOneLineError(p, contains="unknown format")

    def test_refused_options(self):
        for args in (["--code", "x.py"], ["--json"], ["--", "true"], ["-i"],
                     ["--memory", "lots"]):
            p = nsbox("mcp", *args)
            self.assertOneLineError(p)
            self.assertEqual(p.stdout, "")


if __name__ == "__main__":
    unittest.main()
