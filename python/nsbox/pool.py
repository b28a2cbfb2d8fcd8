# SPDX-License-Identifier: LGPL-2.1-or-later
"""Pools: fresh sandboxes started ahead, each for one run, with the imports already done.

    with nsbox.Pool(size=4, preload=["pandas", "numpy"], memory="1g") as pool:
        print(pool.run_python_code("import pandas as pd; print(pd.__version__)").stdout)

``nsbox pool start`` starts the sandboxes; a run takes one on the pool's socket and sends its
step to that sandbox's socket (one JSON line each way, no process started on this side); the
sandbox is destroyed after that one run, and the pool starts another in the background. No run
sees anything of an earlier one: each has its own sandbox (namespaces, /tmp, /work, processes).
"""
from __future__ import annotations  # Unpack[...] below: for type checkers (Python >= 3.11)

import asyncio
import functools
import json
import os
import secrets
import socket
import subprocess
import threading
from typing import (TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence,
                    Tuple)

from ._options import (CODE_OPTIONS, RUN_OPTIONS, STEP_OPTIONS, Option, _Timeout, _env_records,
                       _file_args, _option_args, keyword_options)
from ._process import _env_fd, _nsbox_env, _start_error, _Streams, find_nsbox
from .errors import NsboxError
from .result import Result
from .session import (_MARGIN, Session, _answer, _argv, _check_files, _copy_out_paths,
                      _exec_step, _Lines, _replay, _request)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import StepCodeOptions, StepOptions
# Takes per run: a sandbox that died (killed from outside) between its hand-out and the run's
# connection has run nothing, and another is taken.
_TAKES = 3

#: The run options a pool's sandboxes are started with (RUN_OPTIONS' names and defaults);
#: timeout and output_limit are each run's defaults.
_START = tuple(o for o in RUN_OPTIONS if o.name in (
    "timeout", "memory", "cpus", "pids_limit", "env", "nsbox", "rootfs", "output_limit",
    "network", "extra_args", "isolation"))

#: What a run takes for itself (None: the pool's), as a Session's step: the per-step run
#: options, memory (a lower limit for this run) and files (copied into /work before it); and
#: run_python_code()'s cell.
_STEP = tuple(o for o in RUN_OPTIONS if o.name in STEP_OPTIONS)
_CODE_STEP = _STEP + CODE_OPTIONS

#: Why a run refuses each other run option (a TypeError that says so): the sandbox was made
#: before the run was asked for.
_REFUSED: Dict[str, str] = {
    o.name: {
        "nsbox": "the pool's nsbox binary made its sandboxes and serves its runs: give it to "
                 "Pool(...)",
        "log": "the audit log is set when the pool starts ('nsbox pool start --log FILE'); "
               "Pool() takes none yet",
        "workspace": "a pool's sandboxes are single-use and start empty: no workspace is put "
                     "in /work or saved from it (use Session(workspace=...), or files= and "
                     "copy_out= on the run)",
        "stdout_file": "a pool's run answers on a socket: its output is in the Result and "
                       "streams to on_stdout/on_stderr",
        "stderr_file": "a pool's run answers on a socket: its output is in the Result and "
                       "streams to on_stdout/on_stderr",
    }.get(o.name, f"a pool's sandboxes are made before the run, each with the pool's "
                  f"{o.name}: give it to Pool(...), or use nsbox.run() for a sandbox of its "
                  f"own")
    for o in RUN_OPTIONS if o.name not in STEP_OPTIONS}

_TAKE = b'{"op":"take"}\n'


def _recv_line(s: socket.socket) -> bytes:
    chunks = []
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            break
    return b"".join(chunks)


class Pool:
    """Sandboxes started ahead (``nsbox pool start``), each used for one run and destroyed.

    ``size``: how many wait ready; ``preload``: modules each sandbox imports before any
    untrusted code (a preload that fails raises here, at the start). The other options are
    those of :func:`nsbox.run` and make every sandbox of the pool; ``timeout`` and
    ``output_limit`` are each run's defaults, and a run may give its own (see
    :meth:`run_python_code`: a run takes the options of a Session's step). Safe to use from
    many threads and tasks at once (each run has its own connections). Use it as a context
    manager, or call :meth:`close`: that ends the pool and every sandbox of it.
    """

    @keyword_options(_START + (Option("name", None, Optional[str], "sandbox"),))
    def __init__(self, size: int = 2, preload: Sequence[str] = (), **o: Any):
        # isolation: as run_python_code's (--isolation).
        extra_args = _file_args(o["extra_args"], None, None, o["isolation"])
        if isinstance(preload, str):
            preload = [m for m in preload.split(",") if m]
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive number of sandboxes, not {size!r}")
        self._binary = find_nsbox(o["nsbox"])
        self.name = o["name"] or "pool-" + secrets.token_hex(6)
        args = _option_args(o["timeout"], o["memory"], o["cpus"], o["pids_limit"], o["env"],
                            o["rootfs"], o["output_limit"], o["network"], extra_args)
        self._cmd: List[str] = [self._binary, "pool", "start", self.name, "--json",
                                "--size", str(size)]
        if preload:
            self._cmd += ["--preload", ",".join(preload)]
        self._cmd += args
        self._env = _nsbox_env()
        self._records = _env_records(o["env"])
        self._timeout = o["timeout"]
        self._lock = threading.Lock()
        self.id: Optional[str] = None
        self.socket_path: Optional[str] = None

    # -- life ---------------------------------------------------------------------------------

    def _command(self, env_fd: Optional[int]) -> List[str]:
        if env_fd is None:
            return self._cmd
        return self._cmd[:4] + ["--env-fd", str(env_fd)] + self._cmd[4:]

    def _started(self, returncode: int, out: bytes, err: bytes) -> "Pool":
        if returncode != 0:
            message = err.decode(errors="replace").strip() or f"exit status {returncode}"
            if message.startswith("nsbox: "):
                message = message[len("nsbox: "):]
            raise NsboxError(message, step="pool start", exit_code=returncode,
                             stderr=err.decode(errors="replace"))
        info = json.loads(out)
        self.id, self.socket_path = info["id"], info["socket"]
        return self

    def start(self) -> "Pool":
        """Start the pool (done by ``with``); returns once every sandbox is up. Returns self."""
        with _env_fd(self._records) as fd:
            cmd = self._command(fd)
            try:
                p = subprocess.run(cmd, capture_output=True, env=self._env,
                                   stdin=subprocess.DEVNULL, timeout=300,
                                   pass_fds=() if fd is None else (fd,))
            except OSError as e:
                raise _start_error(cmd, e) from e
        return self._started(p.returncode, p.stdout, p.stderr)

    def close(self) -> None:
        """End the pool and wait until it and all its sandboxes are gone. Safe to call twice."""
        with self._lock:
            path, self.socket_path = self.socket_path, None
        if not path:
            return
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(60)
                s.connect(path)
                s.sendall(b'{"op":"stop"}\n')
                while s.recv(4096):  # EOF: the pool has exited, its sandboxes gone
                    pass
        except OSError:
            pass  # already gone

    def status(self) -> Dict[str, Any]:
        """The pool's counts: size, ready, starting, leased, served, failures, last_error,
        refill_ms (the mean time to start a sandbox and do its preload)."""
        with self._connect() as s:
            s.sendall(b'{"op":"status"}\n')
            return json.loads(_recv_line(s))

    def __enter__(self) -> "Pool":
        return self.start() if not self.socket_path else self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- runs ---------------------------------------------------------------------------------

    def _connect(self) -> socket.socket:
        path = self.socket_path
        if not path:
            raise NsboxError("the pool is not started (use it in a with block)", step="pool")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
        except OSError as e:
            s.close()
            raise NsboxError(f"pool {self.name} is not running ({e.strerror or e}): it was "
                             "stopped or killed", step="pool", errno=e.errno) from e
        return s

    def _wait(self, timeout: _Timeout) -> Optional[float]:
        t = self._timeout if timeout is None else timeout
        return None if t is None else float(t) + _MARGIN

    @staticmethod
    def _taken(line: bytes) -> Tuple[str, str]:
        try:
            answer = json.loads(line) if line else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not isinstance(answer.get("socket"), str):
            why = answer.get("error") if isinstance(answer, dict) else None
            raise NsboxError(f"the pool gave no sandbox: {why or 'it ended (stopped or killed)'}",
                             step="pool")
        return answer["id"], answer["socket"]

    # The errors of a run on the sockets (_call(), and _acall() the ones it shares).

    def _none_in_time(self, wait: Optional[float]) -> NsboxError:
        return NsboxError(f"no sandbox from pool {self.name} within {wait:g} s", step="pool")

    @staticmethod
    def _all_gone(member_id: str, e: OSError) -> NsboxError:
        return NsboxError(f"the pool's sandboxes {member_id} and the ones before it ended "
                          f"before they could be used ({e.strerror or e})", step="pool",
                          errno=e.errno)

    @staticmethod
    def _no_answer(member_id: str, wait: Optional[float]) -> NsboxError:
        return NsboxError(f"no answer from the pool's sandbox {member_id} within {wait:g} s "
                          f"(the run's timeout and {_MARGIN:g} s more)", step="pool")

    @staticmethod
    def _cut(member_id: str, e: OSError) -> NsboxError:
        return NsboxError(f"the pool's sandbox {member_id} closed the connection without an "
                          f"answer ({e.strerror or e})", step="pool", errno=e.errno)

    def _call(self, request: bytes, timeout: _Timeout, streams: Optional[_Streams]) -> Result:
        """Take a sandbox, send it request and read its answer: the stream lines (with
        streams) to the callbacks as they come, then the result."""
        wait = self._wait(timeout)
        for attempt in range(_TAKES):
            # The lease: this connection stays open until the answer is in; its end ends the
            # sandbox (already ended by itself after its one step, unless this side gave up).
            with self._connect() as lease:
                lease.settimeout(wait)
                try:
                    lease.sendall(_TAKE)
                    member_id, path = self._taken(_recv_line(lease))
                except socket.timeout as e:
                    raise self._none_in_time(wait) from e
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(wait)
                    try:
                        s.connect(path)
                    except OSError as e:
                        if attempt + 1 < _TAKES:
                            continue  # it died after it was handed out: nothing ran; another
                        raise self._all_gone(member_id, e) from e
                    lines, answer = _Lines(streams), None
                    try:
                        try:
                            s.sendall(request)
                        except (BrokenPipeError, ConnectionResetError):
                            pass  # not taken: the answer says why
                        while answer is None:
                            chunk = s.recv(1 << 20)
                            if not chunk:
                                break
                            answer = lines.feed(chunk)
                    except socket.timeout as e:
                        raise self._no_answer(member_id, wait) from e
                    except OSError as e:
                        raise self._cut(member_id, e) from e
                    return _answer(lines.rest() if answer is None else answer)
        raise AssertionError("unreachable")

    def _cli_step(self, code: Optional[str], argv: Optional[List[str]],
                  o: Mapping[str, Any]) -> Result:
        """A run with memory, files or copy_out: through ``nsbox run --pool NAME --json``,
        which takes a sandbox, holds its lease and sends the step with ``nsbox session exec
        MEMBER`` (cmd-pool.c). That process (the caller's) reads --memory with nsbox run's
        parser and floor, packs the files as a run's --copy-in does and writes what is copied
        out as a run's --copy-out does (never through a symlink); the sandbox lowers its limit
        for this run only (never above the pool's: refused) and unpacks the files in /work
        before the code runs."""
        if not self.socket_path:
            raise NsboxError("the pool is not started (use it in a with block)", step="pool")
        return _exec_step([self._binary, "run", "--pool", self.name, "--json"], code, argv, o,
                          self._env, self._wait(o["timeout"]), f"pool {self.name}", "pool")

    @staticmethod
    def _options(o: Mapping[str, Any]) -> Dict[str, Any]:
        """A run's options, checked; cell (run_python_code()'s) taken out."""
        opts = dict(o)
        cell = opts.pop("cell", None)
        if cell is False:
            raise ValueError("cell=False (a plain script) is not how a pool runs code: its "
                             "sandboxes run it in their interpreter, the preload imported, as a "
                             "notebook cell (cell=True, the default); for a plain script, "
                             "pool.run(['python3', '-c', code])")
        if cell is not None and cell is not True:
            raise TypeError("cell must be True (a notebook cell) or False (a plain script)")
        _check_files(opts["files"])
        _copy_out_paths(opts["copy_out"])
        return opts

    def _run(self, code: Optional[str], argv: Optional[List[str]],
             o: Mapping[str, Any]) -> Result:
        opts = self._options(o)
        streams = Session._streams(opts)
        if Session._by_cli(opts):
            return _replay(self._cli_step(code, argv, opts), streams)
        return self._call(self._request(code, argv, opts, streams), opts["timeout"], streams)

    @staticmethod
    def _request(code: Optional[str], argv: Optional[List[str]], o: Mapping[str, Any],
                 streams: Optional[_Streams]) -> bytes:
        payload: Dict[str, Any] = {"code": code} if code is not None else {"argv": argv}
        op = "code" if code is not None else "exec"
        return _request(op, payload, o["timeout"], o["output_limit"], o["stdin"],
                        streams is not None)

    @keyword_options(_CODE_STEP, step=True, refused=_REFUSED)
    def run_python_code(self, code: str, **o: Unpack[StepCodeOptions]) -> Result:
        """Run Python code in a fresh sandbox of the pool, in its interpreter (the preload's
        modules imported, no name of them bound), as a notebook cell: the value of a last
        expression, ``display()`` and figures are in Result.outputs. The sandbox is destroyed
        afterwards.

        The options are a Session step's (:meth:`nsbox.Session.run_code`), keyword-only;
        each left None is the pool's. timeout, output_limit: this run's. stdin: what
        sys.stdin reads (else nothing). on_stdout, on_stderr: called with the output as it
        comes (str). memory: a lower limit for this run (``"128m"``; one above the pool's
        raises NsboxError); files: ``{relative_name: str | bytes}`` copied into /work before
        the code runs; copy_out (and copy_out_dir): sandbox paths copied out when the code
        has ended, into Result.files, as for :func:`nsbox.run`. A run with memory, files or
        copy_out goes through ``nsbox run --pool`` (a process, a few milliseconds more), and
        its callbacks get the output when it has ended. cell: True (the default); False is
        refused (ValueError): the pool's interpreter runs cells. The run options that make a
        sandbox (network, rootfs, cpus, env, ...) are the pool's: each is a TypeError here."""
        return self._run(code, None, o)

    @keyword_options(_STEP, step=True, refused=_REFUSED)
    def run(self, argv: Sequence[str], **o: Unpack[StepOptions]) -> Result:
        """Run a program in a fresh sandbox of the pool (stdin: else /dev/null); the options
        as for :meth:`run_python_code`."""
        return self._run(None, _argv(argv), o)

    # -- asyncio ------------------------------------------------------------------------------

    async def astart(self) -> "Pool":
        with _env_fd(self._records) as fd:
            cmd = self._command(fd)
            try:
                proc = await asyncio.create_subprocess_exec(
                    *cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, env=self._env,
                    pass_fds=() if fd is None else (fd,))
            except OSError as e:
                raise _start_error(cmd, e) from e
            out, err = await proc.communicate()
        return self._started(proc.returncode or 0, out, err)

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    async def __aenter__(self) -> "Pool":
        return await self.astart() if not self.socket_path else self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _acall(self, request: bytes, timeout: _Timeout,
                     streams: Optional[_Streams]) -> Result:
        """As _call(), for asyncio; the callbacks are called from the event loop."""
        loop = asyncio.get_running_loop()
        wait = self._wait(timeout)

        async def line_of(s: socket.socket, lines: _Lines) -> bytes:
            while True:
                chunk = await loop.sock_recv(s, 1 << 20)
                if not chunk:
                    return lines.rest()
                answer = lines.feed(chunk)
                if answer is not None:
                    return answer

        async def exchange() -> bytes:
            for attempt in range(_TAKES):
                with self._connect() as lease:
                    lease.setblocking(False)
                    await loop.sock_sendall(lease, _TAKE)
                    member_id, path = self._taken(await line_of(lease, _Lines(None)))
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                        s.setblocking(False)
                        try:
                            await loop.sock_connect(s, path)
                        except OSError as e:
                            if attempt + 1 < _TAKES:
                                continue  # died after it was handed out: take another
                            raise self._all_gone(member_id, e) from e
                        try:
                            try:
                                await loop.sock_sendall(s, request)
                            except (BrokenPipeError, ConnectionResetError):
                                pass  # not taken: the answer says why
                            return await line_of(s, _Lines(streams))
                        except OSError as e:
                            raise self._cut(member_id, e) from e
            raise AssertionError("unreachable")

        try:
            line = await asyncio.wait_for(exchange(), wait)
        except asyncio.TimeoutError as e:
            raise NsboxError(f"no answer from pool {self.name} within {wait:g} s (the run's "
                             f"timeout and {_MARGIN:g} s more)", step="pool") from e
        return _answer(line)

    async def _arun(self, code: Optional[str], argv: Optional[List[str]],
                    o: Mapping[str, Any]) -> Result:
        opts = self._options(o)
        streams = Session._streams(opts)
        if Session._by_cli(opts):
            step: Callable[[], Result] = functools.partial(self._cli_step, code, argv, opts)
            return _replay(await asyncio.get_running_loop().run_in_executor(None, step),
                           streams)
        return await self._acall(self._request(code, argv, opts, streams), opts["timeout"],
                                 streams)

    @keyword_options(_CODE_STEP, step=True, refused=_REFUSED)
    async def arun_python_code(self, code: str, **o: Unpack[StepCodeOptions]) -> Result:
        """As :meth:`run_python_code`, for asyncio; the callbacks are called from the event
        loop."""
        return await self._arun(code, None, o)

    @keyword_options(_STEP, step=True, refused=_REFUSED)
    async def arun(self, argv: Sequence[str], **o: Unpack[StepOptions]) -> Result:
        """As :meth:`run`, for asyncio."""
        return await self._arun(None, _argv(argv), o)
