# SPDX-License-Identifier: LGPL-2.1-or-later
"""--network allow=: the payload reaches the allowed hosts through nsbox's proxy, and nothing
else, whether or not it honours the proxy variables.

The upstreams are servers of this test on the host's 127.0.0.1: a small HTTP server and a
TCP echo (uppercase) server that CONNECT tunnels reach. Test names resolve to 127.0.0.1 through
--add-host (the caller's word, so a loopback address is allowed for them)."""
import http.server
import json
import os
import resource
import socket
import subprocess
import tempfile
import threading
import unittest

from nsboxtest import HERE, NSBOX, NsboxTestCase, nsbox, nsbox_json


def py(code, *opts, **kw):
    return nsbox_json(*opts, "--", "python3", "-c", code, **kw)


class Upstreams:
    """An HTTP server and an echo server on 127.0.0.1, each on a port of its own."""

    def __init__(self):
        self.requests = []  # (request line, headers as a list of (name, value))
        upstreams = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                upstreams.requests.append((self.requestline, list(self.headers.items())))
                size = int(self.path.split("size=")[1]) if "size=" in self.path else 0
                body = b"hello from upstream\n" + b"x" * size
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.http_port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.echo = socket.socket()
        self.echo.bind(("127.0.0.1", 0))
        self.echo.listen(16)
        self.echo_port = self.echo.getsockname()[1]
        threading.Thread(target=self._echo, daemon=True).start()

    def _echo(self):
        while True:
            try:
                c, _ = self.echo.accept()
            except OSError:
                return

            def serve(c=c):
                with c:
                    while True:
                        data = c.recv(4096)
                        if not data:
                            return
                        c.sendall(data.upper())
            threading.Thread(target=serve, daemon=True).start()

    def close(self):
        self.http.shutdown()
        self.http.server_close()
        self.echo.close()


# Inside: talk to the proxy named by the environment, as a client that writes its own requests.
CLIENT = r'''
import os, socket, sys
proxy = os.environ["HTTPS_PROXY"]
assert proxy == os.environ["https_proxy"] == os.environ["HTTP_PROXY"], proxy
host, port = proxy.split("//")[1].rsplit(":", 1)
def ask(raw, then=b""):
    s = socket.create_connection((host, int(port)), timeout=20)
    s.sendall(raw)
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    status = head.split(b"\r\n")[0].decode()
    body = b""
    if then:
        s.sendall(then)
        while len(body) < len(then):
            d = s.recv(4096)
            if not d:
                break
            body += d
    else:
        while True:
            d = s.recv(65536)
            if not d:
                break
            body += d
    s.close()
    return status, body.decode(errors="replace")
'''


class TestNetworkAllow(NsboxTestCase):
    @classmethod
    def setUpClass(cls):
        cls.up = Upstreams()

    @classmethod
    def tearDownClass(cls):
        cls.up.close()

    def allow(self, *patterns):
        return ["--network", "allow=" + ",".join(patterns), "--add-host", "up.test:127.0.0.1",
                "--add-host", "other.test:127.0.0.1"]

    def test_connect_through_https_proxy(self):
        # An allowed name through CONNECT, the tunnel relayed both ways.
        code = CLIENT + (f"print(*ask(b'CONNECT up.test:{self.up.echo_port} HTTP/1.1\\r\\n"
                         f"Host: up.test:{self.up.echo_port}\\r\\n\\r\\n', b'hello tunnel'))")
        p, r = py(code, *self.allow(f"up.test:{self.up.echo_port}"))
        self.assertEqual(r["stdout"], "HTTP/1.1 200 Connection established HELLO TUNNEL\n",
                         r["stderr"])
        n = r["network"]
        self.assertEqual(n["connections_total"], 1)
        self.assertEqual(n["connections_refused"], 0)
        c = n["connections"][0]
        self.assertEqual((c["host"], c["port"], c["allowed"]),
                         ("up.test", self.up.echo_port, True))
        self.assertEqual(c["bytes_sent"], len("hello tunnel"))
        self.assertEqual(c["bytes_received"], len("HELLO TUNNEL"))

    def test_https_through_https_proxy(self):
        # A real HTTPS client (urllib, which honours HTTPS_PROXY with CONNECT) reaches an
        # allowed TLS server: the certificate for up.test is checked end to end, so nsbox
        # relayed TLS untouched (it could not forge it).
        import ssl
        import subprocess
        d = tempfile.mkdtemp(dir="/tmp")
        os.chmod(d, 0o755)
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=up.test", "-addext", "subjectAltName=DNS:up.test",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        os.chmod(cert, 0o644)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"over tls\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        port = server.server_address[1]
        code = ("import ssl, urllib.request\n"
                "ctx = ssl.create_default_context(cafile='/tmp/cert.pem')\n"
                f"r = urllib.request.urlopen('https://up.test:{port}/', context=ctx, timeout=20)\n"
                "print(r.status, r.read().decode(), end='')\n")
        p, r = py(code, *self.allow(f"up.test:{port}"), "-v", f"{cert}:/tmp/cert.pem")
        self.assertEqual(r["stdout"], "200 over tls\n", (r["stderr"], r["error"], r["network"]))
        c = r["network"]["connections"][0]
        self.assertEqual((c["host"], c["allowed"]), ("up.test", True))
        self.assertGreater(c["bytes_received"], 500)  # the server's certificate, at least

    def test_plain_http_through_http_proxy(self):
        # urllib honours HTTP_PROXY: the request goes out in origin form, with Connection: close
        # and no proxy headers.
        before = len(self.up.requests)
        code = ("import urllib.request\n"
                f"r = urllib.request.urlopen('http://up.test:{self.up.http_port}/x?y=1', timeout=20)\n"
                "print(r.status, r.read().decode(), end='')\n")
        p, r = py(code, *self.allow(f"up.test:{self.up.http_port}"))
        self.assertEqual(r["stdout"], "200 hello from upstream\n", r["stderr"])
        self.assertEqual(len(self.up.requests), before + 1)
        line, headers = self.up.requests[-1]
        self.assertEqual(line, "GET /x?y=1 HTTP/1.1")
        names = {k.lower(): v for k, v in headers}
        self.assertEqual(names["host"], f"up.test:{self.up.http_port}")
        self.assertEqual(names["connection"], "close")
        self.assertNotIn("proxy-connection", names)

    def test_denied_name_gets_403_and_is_reported(self):
        code = CLIENT + (f"print(*ask(b'CONNECT other.test:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n'))")
        p, r = py(code, *self.allow(f"up.test:{self.up.echo_port}", "*.example.org"))
        self.assertTrue(r["stdout"].startswith("HTTP/1.1 403 Forbidden nsbox: other.test port "
                                               f"{self.up.echo_port} is not in --network allow "
                                               f"(allowed: up.test:{self.up.echo_port}, "
                                               "*.example.org)"), r["stdout"])
        c = r["network"]["connections"][0]
        self.assertEqual((c["host"], c["allowed"], c["reason"]),
                         ("other.test", False, "not in --network allow"))
        self.assertEqual(r["network"]["connections_refused"], 1)
        self.assertTrue(any("refused 1 connection: other.test" in n for n in r["notes"]), r["notes"])
        # Without --json: the refusal on nsbox's stderr too.
        p = nsbox("run", *self.allow(f"up.test:{self.up.echo_port}"), "--", "python3", "-c", code)
        self.assertIn(f"nsbox: warning: the network proxy (--network allow) refused 1 connection: "
                      f"other.test:{self.up.echo_port} (not in --network allow)", p.stderr)

    def test_connections_list_is_capped(self):
        # 70 refused connections: the first 32 listed (half the list: the rest is kept for
        # allowed ones), the rest counted.
        code = CLIENT + "for i in range(70):\n    ask(b'CONNECT n%d.test:443 HTTP/1.1\\r\\n\\r\\n' % i)\n"
        p, r = py(code, *self.allow("up.test"))
        n = r["network"]
        self.assertEqual((len(n["connections"]), n["connections_omitted"], n["connections_total"],
                          n["connections_refused"]), (32, 38, 70, 70), r["stderr"])
        self.assertEqual(n["connections"][31]["host"], "n31.test")
        self.assertEqual(n["hosts"], [])
        self.assertTrue(any("refused 70 connections" in x and x.endswith(", and more")
                            for x in r["notes"]), r["notes"])

    def test_refused_requests_cannot_hide_an_allowed_one(self):
        # 70 refused requests, then the one that carries data out: it stays in the list, and
        # in the totals by host.
        code = CLIENT + ("for i in range(70):\n"
                         "    ask(b'CONNECT n%d.test:443 HTTP/1.1\\r\\n\\r\\n' % i)\n"
                         f"ask(b'CONNECT up.test:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n', b'secret')\n")
        p, r = py(code, *self.allow(f"up.test:{self.up.echo_port}"))
        n = r["network"]
        self.assertEqual([(c["host"], c["bytes_sent"]) for c in n["connections"] if c["allowed"]],
                         [("up.test", 6)], r["stderr"])
        self.assertEqual(n["hosts"], [{"host": "up.test", "port": self.up.echo_port,
                                       "connections": 1, "bytes_sent": 6,
                                       "bytes_received": 6}])

    def test_hosts_totals_keep_every_allowed_byte(self):
        # 70 allowed connections to 50 names below *.up.test: the connection list holds 64,
        # the totals all. The first 48 names have an entry each; with 16 entries left, the
        # other names count under their pattern.
        names = [f"a{i}.up.test" for i in range(50)] + ["a0.up.test"] * 20
        hosts = [x for i in range(50) for x in ("--add-host", f"a{i}.up.test:127.0.0.1")]
        code = CLIENT + (f"for name in {names!r}:\n"
                         f"    ask(b'CONNECT %s:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n' % name.encode(), b'xy')\n")
        p, r = py(code, "--network", f"allow=*.up.test:{self.up.echo_port}", *hosts)
        n = r["network"]
        self.assertEqual((len(n["connections"]), n["connections_omitted"]), (64, 6), r["stderr"])
        h = n["hosts"]
        self.assertEqual([e["host"] for e in h],
                         [f"a{i}.up.test" for i in range(48)] + ["*.up.test"], r["stderr"])
        self.assertEqual((h[0]["connections"], h[0]["bytes_sent"]), (21, 42))
        self.assertEqual((h[-1]["connections"], h[-1]["bytes_sent"]), (2, 4))
        self.assertEqual(sum(e["bytes_sent"] for e in h), n["bytes_sent"])
        self.assertEqual(n["bytes_sent"], 140)

    def test_hosts_are_in_order_of_arrival_not_of_end(self):
        # Two tunnels open at once, the first to arrive ending last: the hosts list them in
        # the order they reached their hosts (it used to be the order they ended in, which made
        # a list of sequential connections depend on how fast each end was seen).
        code = CLIENT + (
            "def tunnel(name):\n"
            "    s = socket.create_connection((host, int(port)), timeout=20)\n"
            f"    s.sendall(b'CONNECT %s:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n' % name)\n"
            "    head = b''\n"
            "    while b'\\r\\n\\r\\n' not in head:\n"
            "        head += s.recv(1)\n"
            "    s.sendall(b'ab'); assert s.recv(2) == b'AB'\n"
            "    return s\n"
            "first = tunnel(b'one.up.test')\n"
            "second = tunnel(b'two.up.test')\n"
            "second.close()\n"
            "import time; time.sleep(0.5)\n"
            "first.close()\n")
        p, r = py(code, "--network", f"allow=*.up.test:{self.up.echo_port}",
                  "--add-host", "one.up.test:127.0.0.1", "--add-host", "two.up.test:127.0.0.1")
        self.assertEqual([e["host"] for e in r["network"]["hosts"]],
                         ["one.up.test", "two.up.test"], r)

    def test_wildcard_and_default_ports(self):
        # *.domain is below domain only; without :PORT only 80 and 443.
        code = CLIENT + ("for t in (b'a.up.test:443', b'up.test:443', b'a.up.test:8443'):\n"
                         "    print(ask(b'CONNECT ' + t + b' HTTP/1.1\\r\\n\\r\\n')[0])\n")
        p, r = py(code, "--network", "allow=*.up.test", "--add-host", "a.up.test:127.0.0.1")
        # a.up.test:443 is allowed: nothing listens on the host's 443 (502), the others 403.
        self.assertEqual(r["stdout"].splitlines()[1:], ["HTTP/1.1 403 Forbidden"] * 2, r["stdout"])
        self.assertIn(r["stdout"].splitlines()[0], ("HTTP/1.1 502 Bad Gateway",
                                                    "HTTP/1.1 200 Connection established"))

    def test_direct_connect_fails(self):
        # A payload that ignores the proxy variables reaches nothing: the sandbox's network has
        # only lo, and nothing of the host's 127.0.0.1 is there.
        code = ("import socket\n"
                f"for addr in (('127.0.0.1', {self.up.http_port}), ('10.0.0.1', 80), ('1.1.1.1', 443)):\n"
                "    try:\n"
                "        socket.create_connection(addr, timeout=5); print('reached')\n"
                "    except OSError as e:\n"
                "        print(type(e).__name__, e.errno)\n")
        p, r = py(code, *self.allow(f"up.test:{self.up.http_port}"))
        if "net" in ((r.get("landlock") or {}).get("restricts") or []):
            # Landlock (ABI 4) refuses a connect to any port but the proxy's first (EACCES).
            self.assertEqual(r["stdout"].splitlines(), ["PermissionError 13"] * 3, r["stderr"])
            p, r = py(code, *self.allow(f"up.test:{self.up.http_port}"), "--landlock", "off")
        # The network namespace alone: nothing listens there, no route beyond lo.
        self.assertEqual(r["stdout"].splitlines(),
                         ["ConnectionRefusedError 111", "OSError 101", "OSError 101"], r["stderr"])
        # The control: the host's network (an opt-out) reaches the server.
        p, r = py(code, "--network", "host")
        self.assertEqual(r["stdout"].splitlines()[0], "reached", r["stderr"])

    def test_name_resolving_to_loopback_refused(self):
        # "localhost" resolves (outside, by getaddrinfo) to a loopback address, an address of
        # this host's lo: refused for a name, though the pattern allows it (the check of the
        # host's own addresses comes first; tests/unit/test-netallow.c tests it with others) ...
        code = CLIENT + (f"print(*ask(b'CONNECT localhost:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n', b'x'))")
        p, r = py(code, "--network", f"allow=localhost:{self.up.echo_port}")
        self.assertTrue(r["stdout"].startswith("HTTP/1.1 403 Forbidden"), r["stdout"])
        self.assertIn("resolves to", r["stdout"])
        c = r["network"]["connections"][0]
        self.assertFalse(c["allowed"])
        self.assertTrue(c["reason"].startswith("resolves to this host's address "), c)
        # Early data sent with a refused CONNECT never left: not reported as sent.
        early = CLIENT + (f"print(ask(b'CONNECT localhost:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n"
                          f"early data')[0])")
        p, r = py(early, "--network", f"allow=localhost:{self.up.echo_port}")
        self.assertEqual(r["stdout"], "HTTP/1.1 403 Forbidden\n", r["stderr"])
        self.assertEqual((r["network"]["bytes_sent"], r["network"]["connections"][0]["bytes_sent"]),
                         (0, 0))
        # ... and the same name given an address by the caller goes through (the control).
        p, r = py(code, "--network", f"allow=localhost:{self.up.echo_port}",
                  "--add-host", "localhost:127.0.0.1")
        self.assertEqual(r["stdout"], "HTTP/1.1 200 Connection established X\n", r["stdout"])

    def with_fake_dns(self, args):
        """Run `nsbox run --json ARGS` as root and as uid 65534, each in a private mount and
        network namespace (nothing leaves it) whose /etc/resolv.conf has the search list
        corp.test, ndots:5 and tests/integration/netns/fakedns.py as its server, /etc/hosts
        only localhost. Yields (uid, result, the names asked of the server in order). A
        private /etc/resolv.conf takes the host's root: as another user, yields nothing (this
        run covers uid 65534)."""
        if os.geteuid() != 0:
            return
        d = tempfile.mkdtemp(dir="/tmp")
        os.chmod(d, 0o755)
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        with open(os.path.join(d, "resolv.conf"), "w") as f:
            f.write("search corp.test\nnameserver 127.0.0.1\noptions attempts:1 timeout:1 ndots:5\n")
        with open(os.path.join(d, "hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n")
        script = ('ip link set lo up && mount --bind "$D/resolv.conf" /etc/resolv.conf && '
                  'mount --bind "$D/hosts" /etc/hosts || exit 99\n'
                  'python3 "$DNS" "$D/log" "$D/ready" & dns=$!\n'
                  'while [ ! -e "$D/ready" ]; do sleep 0.05; done\n'
                  '"$@"; rc=$?; kill $dns; exit $rc\n')
        for uid in (0, 65534):
            open(os.path.join(d, "log"), "w").close()
            if os.path.exists(os.path.join(d, "ready")):
                os.unlink(os.path.join(d, "ready"))
            xdg = tempfile.mkdtemp()
            os.chown(xdg, uid, uid)
            cmd = [NSBOX, "run", "--json", *args]
            if uid:
                cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "env",
                       "-i", "PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=" + xdg,
                       "NSBOX_ROOTFS=" + os.environ.get("NSBOX_ROOTFS", "")] + cmd
            env = dict(os.environ, D=d, DNS=os.path.join(HERE, "netns", "fakedns.py"),
                       XDG_RUNTIME_DIR=xdg)
            p = subprocess.run(["unshare", "-m", "-n", "sh", "-c", script, "sh", *cmd],
                               env=env, capture_output=True, text=True, timeout=60)
            subprocess.run(["rm", "-rf", xdg])
            try:
                r = json.loads(p.stdout)
            except ValueError:
                self.fail(f"nsbox printed no JSON: {p.stdout!r} {p.stderr!r}")
            with open(os.path.join(d, "log")) as f:
                names = [line.split()[0] for line in f]
            yield uid, r, names

    def test_no_search_list_lookups(self):
        # The host's resolv.conf has a search list and ndots:5: getaddrinfo("pypi.example")
        # would also look up pypi.example.corp.test, a name not on the list, and use its
        # address. nsbox looks up the name as given only; /etc/hosts still counts.
        code = CLIENT + ("for t in (b'pypi.example:443', b'localhost:443'):\n"
                         "    print(ask(b'CONNECT ' + t + b' HTTP/1.1\\r\\n\\r\\n')[1].strip())\n")
        for uid, r, names in self.with_fake_dns(["--network", "allow=pypi.example,localhost",
                                                 "--", "python3", "-c", code]):
            with self.subTest(uid=uid):
                self.assertEqual(r["stdout"].splitlines(),
                                 ["nsbox: pypi.example did not resolve to an address",
                                  "nsbox: localhost resolves to 127.0.0.1, an address of the host "
                                  "nsbox runs on, which --network allow refuses for a name (an "
                                  "address pattern or --add-host allows it)"], r["stderr"])
                self.assertIn("pypi.example", names)  # the fake server answered the lookups
                self.assertEqual([n for n in names if n.endswith("corp.test")], [], names)

    def test_lookups_are_cached(self):
        # A name is looked up once a run, not once a request: each lookup is a process outside
        # the sandbox, beyond --cpus. Ten requests for a.corp.test (127.0.0.2: refused, but
        # looked up), then one for b.corp.test.
        code = CLIENT + ("for t in [b'a.corp.test:443'] * 10 + [b'b.corp.test:443']:\n"
                         "    print(ask(b'CONNECT ' + t + b' HTTP/1.1\\r\\n\\r\\n')[0])\n")
        for uid, r, names in self.with_fake_dns(["--network", "allow=*.corp.test", "--",
                                                 "python3", "-c", code]):
            with self.subTest(uid=uid):
                self.assertEqual(r["stdout"].splitlines(), ["HTTP/1.1 403 Forbidden"] * 11,
                                 r["stderr"])
                # One A and one AAAA question per name.
                self.assertEqual(sorted(names), ["a.corp.test"] * 2 + ["b.corp.test"] * 2, names)

    def test_ip_literal_not_listed_refused(self):
        code = CLIENT + (f"print(*ask(b'CONNECT 127.0.0.1:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n', b'ip'))")
        p, r = py(code, *self.allow(f"up.test:{self.up.echo_port}"))
        self.assertTrue(r["stdout"].startswith("HTTP/1.1 403 Forbidden"), r["stdout"])
        # An address the caller listed is reached, loopback or not (the control).
        p, r = py(code, "--network", f"allow=127.0.0.1:{self.up.echo_port}")
        self.assertEqual(r["stdout"], "HTTP/1.1 200 Connection established IP\n", r["stdout"])

    def test_header_tricks_refused(self):
        port = self.up.http_port
        before = len(self.up.requests)
        code = CLIENT + (
            f"print(ask(b'GET http://up.test:{port}/ HTTP/1.1\\r\\nHost: up.test:{port}\\r\\n"
            f"Host: other.test\\r\\n\\r\\n')[0])\n"
            f"print(ask(b'GET http://up.test:{port}/ HTTP/1.1\\r\\nHost: other.test:{port}\\r\\n\\r\\n')[0])\n"
            f"print(ask(b'GET /x HTTP/1.1\\r\\nHost: up.test:{port}\\r\\n\\r\\n')[0])\n"
            f"print(ask(b'GET http://up.test:{port}/' + b'a' * 9000 + b' HTTP/1.1\\r\\n\\r\\n')[0])\n"
            f"print(ask(b'GET http://up.test:{port}/ HTTP/1.1\\r\\nHost: up.test:{port}\\r\\n"
            f" folded\\r\\n\\r\\n')[0])\n"
            f"print(ask(b'GET http://up.test:{port}/ HTTP/1.1\\r\\nHost: up.test:{port}\\r\\n\\r\\n')[0])\n")
        p, r = py(code, *self.allow(f"up.test:{port}", f"other.test:{port}"))
        self.assertEqual(r["stdout"].splitlines(),
                         ["HTTP/1.1 400 Bad Request"] * 3 +
                         ["HTTP/1.1 431 Request Header Fields Too Large",
                          "HTTP/1.1 400 Bad Request", "HTTP/1.0 200 OK"], r["stderr"])  # http.server: 1.0
        # Only the last, well-formed one reached the server.
        self.assertEqual(len(self.up.requests), before + 1)
        reasons = [c["reason"] for c in r["network"]["connections"]]
        self.assertEqual(reasons[:2], ["more than one Host header",
                                       "the Host header names another host or port than the "
                                       "request target"])

    def test_incomplete_and_bare_lf_requests(self):
        # A client that leaves before its head is complete is counted (refused); a head with
        # bare LF line ends gets its 400 at once, not after the 10 s head timeout.
        code = CLIENT + ("import time\n"
                         "s = socket.create_connection((host, int(port)))\n"
                         "s.sendall(b'GET http://up'); time.sleep(0.3); s.close()\n"
                         "start = time.monotonic()\n"
                         "print(ask(b'GET http://up.test/ HTTP/1.1\\nHost: up.test\\n\\n')[0])\n"
                         "print(time.monotonic() - start < 5)\n")
        p, r = py(code, *self.allow("up.test"))
        self.assertEqual(r["stdout"].splitlines(), ["HTTP/1.1 400 Bad Request", "True"],
                         r["stderr"])
        self.assertEqual([(c["allowed"], c["reason"]) for c in r["network"]["connections"]],
                         [(False, "incomplete request"),
                          (False, "a line ended by a bare LF, not CRLF")])
        self.assertEqual(r["network"]["connections_refused"], 2)

    def test_past_every_slot_a_503(self):
        # --network-max-connections 1: one tunnel held, 8 answered with 503 and kept open by
        # the client (all the proxy's slots), and one more: a 503 too, not a reset.
        target = f"up.test:{self.up.echo_port}"
        code = CLIENT + ("held = []\n"
                         "for i in range(10):\n"
                         "    s = socket.create_connection((host, int(port)), timeout=10)\n"
                         f"    s.sendall(b'CONNECT {target} HTTP/1.1\\r\\n\\r\\n')\n"
                         "    try:\n"
                         "        print(s.recv(200).split(b'\\r\\n')[0].decode() or 'EOF')\n"
                         "    except OSError as e:\n"
                         "        print(type(e).__name__)\n"
                         "    held.append(s)\n")
        p, r = py(code, *self.allow(target), "--network-max-connections", "1")
        self.assertEqual(r["stdout"].splitlines(),
                         ["HTTP/1.1 200 Connection established"] +
                         ["HTTP/1.1 503 Service Unavailable"] * 9, r["stderr"])
        self.assertEqual(r["network"]["connections_total"], 10)

    def test_stalled_client_does_not_block_others(self):
        # A client that connects and sends nothing (slowloris) holds one slot; others go on.
        code = CLIENT + ("idle = socket.create_connection((host, int(port)))\n"
                         "idle.sendall(b'GET http://up')\n"
                         f"print(*ask(b'CONNECT up.test:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n', b'ok'))\n")
        p, r = py(code, *self.allow(f"up.test:{self.up.echo_port}"))
        self.assertEqual(r["stdout"], "HTTP/1.1 200 Connection established OK\n", r["stderr"])

    def test_slowloris_is_cut(self):
        # A head trickled a byte at a time is cut at the head timeout (10 s), whatever it sends.
        code = CLIENT + ("import time\n"
                         "s = socket.create_connection((host, int(port)))\n"
                         "start = time.monotonic()\n"
                         "try:\n"
                         "    for b in b'GET http://up.test/' + b'a' * 40:\n"
                         "        s.sendall(bytes([b])); time.sleep(0.5)\n"
                         "    print('not cut')\n"
                         "except OSError:\n"
                         "    print('cut after', round(time.monotonic() - start))\n")
        p, r = py(code, *self.allow("up.test"), "--timeout", "60")
        self.assertIn(r["stdout"], ("cut after 10\n", "cut after 11\n"), r["stderr"])
        self.assertEqual(r["network"]["connections"][0]["reason"],
                         "no complete request head in time")

    def test_connection_limit(self):
        code = CLIENT + ("held = socket.create_connection((host, int(port)))\n"
                         f"held.sendall(b'CONNECT up.test:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n')\n"
                         "print(held.recv(100).split(b'\\r\\n')[0].decode())\n"
                         f"print(ask(b'CONNECT up.test:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n')[0])\n")
        p, r = py(code, *self.allow(f"up.test:{self.up.echo_port}"),
                  "--network-max-connections", "1")
        self.assertEqual(r["stdout"].splitlines(),
                         ["HTTP/1.1 200 Connection established",
                          "HTTP/1.1 503 Service Unavailable"], r["stderr"])
        self.assertTrue(r["network"]["connections_limit_hit"])
        self.assertEqual(r["network"]["connections"][1]["reason"],
                         "--network-max-connections reached")

    def run_with_nofile(self, soft, hard, args, pass_fds=()):
        """nsbox run --json args under RLIMIT_NOFILE soft:hard; (CompletedProcess, result or
        None, CPU seconds nsbox and its children used)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([NSBOX, "run", "--json", *args], capture_output=True, text=True,
                           timeout=60, pass_fds=pass_fds,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                                 (soft, hard)))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        try:
            return p, json.loads(p.stdout), cpu
        except ValueError:
            return p, None, cpu

    # Inside: open n CONNECT tunnels at once, keep them, then say how many got their 200.
    HOLD = CLIENT + r'''
import sys, time
n, target, hold = int(sys.argv[1]), sys.argv[2].encode(), float(sys.argv[3])
socks, ok = [], 0
for i in range(n):
    s = socket.create_connection((host, int(port)), timeout=15)
    s.sendall(b"CONNECT " + target + b" HTTP/1.1\r\n\r\n")
    socks.append(s)
for s in socks:
    try:
        ok += s.recv(100).startswith(b"HTTP/1.1 200")
    except OSError:
        pass
    s.settimeout(3)
time.sleep(hold)
print(ok)
'''

    def test_connections_fit_the_descriptor_limit(self):
        # --network-max-connections is promised: the soft RLIMIT_NOFILE is raised to fit it
        # (here 100 would leave room for some 40 connections), ...
        target = f"up.test:{self.up.echo_port}"
        args = [*self.allow(target), "--network-max-connections", "100", "--", "python3", "-c",
                self.HOLD, "100", target, "0"]
        p, r, _ = self.run_with_nofile(100, 4096, args)
        self.assertIsNotNone(r, p.stderr)
        self.assertEqual(r["stdout"], "100\n", (r["stderr"], r["network"]["connections_total"]))
        # ... and one that cannot fit under the hard limit is refused before the run.
        p, r, _ = self.run_with_nofile(200, 200, args)
        self.assertOneLineError(p, contains="--network-max-connections 100 needs 280 file "
                                            "descriptors, but RLIMIT_NOFILE allows 200")

    def test_out_of_descriptors_does_not_spin(self):
        # The caller's own descriptors (170 inherited ones here) can still use up the limit:
        # 30 clients that send nothing hold one each, accept4() fails with EMFILE, and the
        # listener stays readable. The proxy stops polling it until a connection closes
        # instead of waking at once, again and again, for the 4 s the clients wait.
        null = [os.open("/dev/null", os.O_RDONLY) for _ in range(170)]
        self.addCleanup(lambda: [os.close(fd) for fd in null])
        code = CLIENT + ("import time\n"
                         "held = [socket.create_connection((host, int(port))) for i in range(30)]\n"
                         "time.sleep(4)\n")
        p, r, cpu = self.run_with_nofile(200, 200, [*self.allow("up.test"), "--", "python3", "-c",
                                                    code], pass_fds=null)
        self.assertIsNotNone(r, p.stderr)
        self.assertEqual(r["exit_code"], 0, r["stderr"])
        self.assertLess(cpu, 1.5, r["network"])

    def test_byte_limit(self):
        code = ("import urllib.request\n"
                "try:\n"
                f"    r = urllib.request.urlopen('http://up.test:{self.up.http_port}/?size=1000000', timeout=20)\n"
                "    print(len(r.read()))\n"
                "except Exception as e:\n"
                "    print(type(e).__name__)\n")
        p, r = py(code, *self.allow(f"up.test:{self.up.http_port}"),
                  "--network-max-bytes", "64k")
        self.assertNotEqual(r["stdout"], "1000020\n", r["stderr"])
        self.assertTrue(r["network"]["bytes_limit_hit"])
        self.assertLessEqual(r["network"]["bytes_received"], 64 * 1024 + 16 * 1024)
        self.assertTrue(any("--network-max-bytes" in n for n in r["notes"]), r["notes"])
        # The control: without the limit the whole body comes through.
        p, r = py(code, *self.allow(f"up.test:{self.up.http_port}"))
        self.assertEqual(r["stdout"], "1000020\n", r["stderr"])
        self.assertFalse(r["network"]["bytes_limit_hit"])

    def test_byte_limit_counts_request_heads(self):
        # What comes with the head counts too: CONNECT's early data (read with the head, up to
        # 8 KiB) and a plain request's head. 3000 bytes of early data twice and a 3000-byte
        # header: under --network-max-bytes 4096 only the first goes upstream.
        port = self.up.http_port
        before = len(self.up.requests)
        # The tunnels go to a sink that never answers: an echo's answer would spend the
        # budget on the way down too, and cut the others at a moment of its own.
        sink = socket.socket()
        sink.bind(("127.0.0.1", 0))
        sink.listen(8)
        self.addCleanup(sink.close)
        held = []
        self.addCleanup(lambda: [c.close() for c in held])

        def accept():
            while True:
                try:
                    held.append(sink.accept()[0])
                except OSError:
                    return
        threading.Thread(target=accept, daemon=True).start()
        sink_port = sink.getsockname()[1]
        code = CLIENT + (
            "def early(raw):\n"
            "    s = socket.create_connection((host, int(port)), timeout=20)\n"
            "    s.sendall(raw)\n"
            "    line = s.recv(100).split(b'\\r\\n')[0].decode()\n"
            "    s.close()\n"
            "    return line\n"
            f"print(early(b'CONNECT up.test:{sink_port} HTTP/1.1\\r\\n\\r\\n' + b'a' * 3000))\n"
            f"print(early(b'CONNECT up.test:{sink_port} HTTP/1.1\\r\\n\\r\\n' + b'b' * 3000))\n"
            f"print(ask(b'GET http://up.test:{port}/ HTTP/1.1\\r\\nHost: up.test:{port}\\r\\n"
            f"X-Data: ' + b'c' * 3000 + b'\\r\\n\\r\\n')[0])\n")
        p, r = py(code, *self.allow(f"up.test:{sink_port}", f"up.test:{port}"),
                  "--network-max-bytes", "4096")
        self.assertEqual(r["stdout"].splitlines(),
                         ["HTTP/1.1 200 Connection established"] +
                         ["HTTP/1.1 503 Service Unavailable"] * 2, r["stderr"])
        n = r["network"]
        self.assertTrue(n["bytes_limit_hit"])
        self.assertEqual(n["bytes_sent"], 3000)
        self.assertEqual([c["bytes_sent"] for c in n["connections"]], [3000, 0, 0])
        self.assertEqual(len(self.up.requests), before)  # the long head never reached the server
        # The control: without the limit all three go through, each counted.
        p, r = py(code, *self.allow(f"up.test:{sink_port}", f"up.test:{port}"))
        self.assertEqual(r["stdout"].splitlines(),
                         ["HTTP/1.1 200 Connection established"] * 2 + ["HTTP/1.0 200 OK"],
                         r["stderr"])
        self.assertGreater(r["network"]["bytes_sent"], 9000)

    def test_audit_records_connections(self):
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "audit.log")
            code = CLIENT + (f"ask(b'CONNECT up.test:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n', b'ab')\n"
                             f"ask(b'CONNECT nope.test:443 HTTP/1.1\\r\\n\\r\\n')\n")
            p = nsbox("run", "--log", log, *self.allow(f"up.test:{self.up.echo_port}"), "--",
                      "python3", "-c", code)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(log) as f:
                start, end = [json.loads(l) for l in f]
            self.assertEqual((start["network"], start["network_allow"]),
                             ("allow", [f"up.test:{self.up.echo_port}"]))
            # The caller's name-to-address word and the bounds that applied, defaults too.
            self.assertEqual((start["network_hosts"], start["network_max_connections"],
                              start["network_max_bytes"]),
                             (["up.test:127.0.0.1", "other.test:127.0.0.1"], 32, 1 << 30))
            conns = end["result"]["network"]["connections"]
            self.assertEqual([(c["host"], c["allowed"], c["bytes_sent"], c["bytes_received"])
                              for c in conns],
                             [("up.test", True, 2, 2), ("nope.test", False, 0, 0)])

    def test_bad_patterns(self):
        for value in ("allow=", "allow=bad_host!", "allow=*.1.2.3.4", "allow=a.com:0",
                      "allow=a.com:70000", "allow=12345"):
            with self.subTest(value=value):
                self.assertOneLineError(nsbox("run", "--network", value, "--", "true"),
                                        contains="--network")
        with tempfile.NamedTemporaryFile("w", suffix=".allow") as f:
            f.write("# the index\npypi.org files.pythonhosted.org\n\nnot/valid\n")
            f.flush()
            self.assertOneLineError(nsbox("run", "--network", "allow-file=" + f.name, "--",
                                          "true"), contains=f"{f.name}:4:")
        with tempfile.NamedTemporaryFile("w", suffix=".allow") as f:
            f.write("# only a comment\n\n  \n")
            f.flush()
            self.assertOneLineError(nsbox("run", "--network", "allow-file=" + f.name, "--",
                                          "true"), contains="no pattern in it")
        self.assertOneLineError(nsbox("run", "--network", "allow-file=/tmp", "--", "true"),
                                contains="allow-file=/tmp: not a regular file")
        self.assertOneLineError(nsbox("run", "--add-host", "a.test:127.0.0.1", "--", "true"),
                                contains="--add-host")
        for host in ("a.test:not-an-address", "1.2.3.4:1.2.3.4", "a.test"):
            with self.subTest(host=host):
                self.assertOneLineError(nsbox("run", "--network", "allow=a.test", "--add-host",
                                              host, "--", "true"), contains="--add-host")
        for opt, value in (("--network-max-connections", "0"),
                           ("--network-max-connections", "1025"),
                           ("--network-max-bytes", "0")):
            with self.subTest(opt=opt, value=value):
                self.assertOneLineError(nsbox("run", "--network", "allow=a.test", opt, value,
                                              "--", "true"), contains=opt)

    def test_allow_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".allow", dir="/tmp") as f:
            os.chmod(f.name, 0o644)
            f.write(f"# upstreams\nup.test:{self.up.echo_port}  # the echo\n")
            f.flush()
            code = CLIENT + (f"print(*ask(b'CONNECT up.test:{self.up.echo_port} HTTP/1.1\\r\\n\\r\\n', b'f'))")
            p, r = py(code, "--network", "allow-file=" + f.name,
                      "--add-host", "up.test:127.0.0.1")
            self.assertEqual(r["stdout"], "HTTP/1.1 200 Connection established F\n", r["stderr"])


if __name__ == "__main__":
    unittest.main()
