#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A small HTTP code executor: each request's Python code runs in a fresh nsbox sandbox.

    POST /run   {"code": "print(1)", "timeout": 10, "memory": "256m", "stdin": "",
                 "files": {"data.csv": "a,b\\n"}}     (files appear in /work, the working directory)
            ->  200 with nsbox's JSON result (status, exit_code, stdout, stderr, limits,
                reason, warnings, ...), the same object `nsbox run --json` prints
    GET /healthz  -> 200 "ok" (a liveness/readiness probe; runs nothing)

The shape an agent platform scales horizontally: the server keeps no state between requests,
so any number of replicas can stand behind one Service. Standard library only (http.server)
and nsbox's Python API; no shell anywhere. Bounds: the request body (MAX_BODY), the code's
timeout and memory (capped at MAX_TIMEOUT and MAX_MEMORY whatever the request asks), and the
number of sandboxes at once (MAX_CONCURRENT; a request beyond that gets 503 at once rather
than a queue). Listen address and bounds come from the environment (see below).

This example has no authentication: put it behind something that has (a Kubernetes
NetworkPolicy that admits only the agent platform, a mesh, an authenticating proxy).
"""
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import nsbox

LISTEN = os.environ.get("EXECUTOR_LISTEN", "0.0.0.0")
PORT = int(os.environ.get("EXECUTOR_PORT", "8080"))
MAX_BODY = int(os.environ.get("EXECUTOR_MAX_BODY", str(1 << 20)))  # bytes of request JSON
MAX_TIMEOUT = float(os.environ.get("EXECUTOR_MAX_TIMEOUT", "60"))  # seconds
MAX_MEMORY = int(os.environ.get("EXECUTOR_MAX_MEMORY", str(512 << 20)))  # bytes
MAX_CONCURRENT = int(os.environ.get("EXECUTOR_MAX_CONCURRENT", "4"))
# nsbox's --cgroup-parent for every run: "/" in a pod or container whose own cgroup nsbox may
# use (a private cgroup namespace with a writable cgroupfs; README, "Running on many machines").
CGROUP_PARENT = os.environ.get("EXECUTOR_CGROUP_PARENT")
EXTRA_ARGS = ["--cgroup-parent", CGROUP_PARENT] if CGROUP_PARENT else []

_slots = threading.BoundedSemaphore(MAX_CONCURRENT)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


class BadRequest(Exception):
    pass


def _memory(value):
    """A memory size in bytes from 123, "256m" or "1g", at most MAX_MEMORY."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadRequest("memory: a number of bytes or a size such as \"256m\"")
    if isinstance(value, str):
        text = value.strip().lower()
        unit = text[-1:] if text[-1:] in _UNITS else ""
        number = text[:-1] if unit else text
        if not number.isdigit():
            raise BadRequest("memory: a number of bytes or a size such as \"256m\"")
        value = int(number) * _UNITS[unit]
    if value <= 0 or value > MAX_MEMORY:
        raise BadRequest(f"memory: more than 0 and at most {MAX_MEMORY} bytes")
    return value


def _request_args(body):
    """The keyword arguments of nsbox.run_python_code from a request object."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    unknown = set(body) - {"code", "timeout", "memory", "stdin", "files"}
    if unknown:
        raise BadRequest(f"unknown fields: {', '.join(sorted(unknown))}")
    code = body.get("code")
    if not isinstance(code, str) or not code:
        raise BadRequest("code: the Python source, a non-empty string")
    timeout = body.get("timeout", 10)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
            not 0 < timeout <= MAX_TIMEOUT:
        raise BadRequest(f"timeout: seconds, more than 0 and at most {MAX_TIMEOUT:g}")
    args = {"code": code, "timeout": timeout, "memory": _memory(body.get("memory", "256m"))}
    stdin = body.get("stdin")
    if stdin is not None:
        if not isinstance(stdin, str):
            raise BadRequest("stdin: a string")
        args["stdin"] = stdin
    files = body.get("files")
    if files is not None:
        if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in files.items()):
            raise BadRequest("files: an object of file names to text")
        args["files"] = files
    return args


class Handler(BaseHTTPRequestHandler):
    server_version = "nsbox-executor"

    def _send(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/healthz":
            self._send(200, "ok")
        else:
            self._send(404, {"error": "not found: POST /run or GET /healthz"})

    def do_POST(self):
        if self.path != "/run":
            self._send(404, {"error": "not found: POST /run"})
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._send(411, {"error": "a Content-Length header is needed"})
            return
        if not 0 < length <= MAX_BODY:
            self._send(413, {"error": f"the body must be 1 to {MAX_BODY} bytes"})
            return
        try:
            args = _request_args(json.loads(self.rfile.read(length)))
        except (ValueError, BadRequest) as e:
            self._send(400, {"error": str(e)})
            return
        if not _slots.acquire(blocking=False):
            self._send(503, {"error": f"busy: {MAX_CONCURRENT} sandboxes are running; retry"})
            return
        try:
            code = args.pop("code")
            result = nsbox.run_python_code(code, extra_args=EXTRA_ARGS, **args)
            self._send(200, result.raw)
        except nsbox.NsboxError as e:
            # nsbox could not make the sandbox: this replica is unhealthy, not the request.
            self._send(500, {"error": str(e), "result": e.raw})
        finally:
            _slots.release()


def main():
    server = ThreadingHTTPServer((LISTEN, PORT), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
