# SPDX-License-Identifier: LGPL-2.1-or-later
"""Pools: fresh sandboxes started ahead, each for one run, with the imports already done.

    with nsbox.Pool(size=4, preload=["pandas", "numpy"], memory="1g") as pool:
        print(pool.run_python_code("import pandas as pd; print(pd.__version__)").stdout)

``nsbox pool start`` starts the sandboxes; a run takes one on the pool's socket and sends its
step to that sandbox's socket (one JSON line each way, no process started on this side); the
sandbox is destroyed after that one run, and the pool starts another in the background. No run
sees anything of an earlier one: each has its own sandbox (namespaces, /tmp, /work, processes).
"""
import asyncio
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._files import FILES_DIR, _Data, _write_file, _write_files
from ._options import (RUN_OPTIONS, Option, _Limit, _Timeout, _env_records, _file_args, _limit,
                       _number, _option_args, keyword_options)
from ._process import _env_fd, _nsbox_env, _start_error, find_nsbox
from .errors import NsboxError
from .result import Result
from .session import _ANSWER_SECONDS, _MARGIN, _answer, _request

_Stdin = Union[bytes, str, None]
_Files = Optional[Mapping[str, _Data]]
# Takes per run: a sandbox that died (killed from outside) between its hand-out and the run's
# connection has run nothing, and another is taken.
_TAKES = 3

#: The run options a pool's sandboxes are started with (RUN_OPTIONS' names and defaults);
#: timeout and output_limit are each run's defaults.
_START = tuple(o for o in RUN_OPTIONS if o.name in (
    "timeout", "memory", "cpus", "pids_limit", "env", "nsbox", "rootfs", "output_limit",
    "network", "extra_args", "isolation"))


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
    ``output_limit`` are each run's defaults, and a run may give its own. Safe to use from
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

    def _call(self, request: bytes, timeout: _Timeout) -> Result:
        wait = self._wait(timeout)
        for attempt in range(_TAKES):
            # The lease: this connection stays open until the answer is in; its end ends the
            # sandbox (already ended by itself after its one step, unless this side gave up).
            with self._connect() as lease:
                lease.settimeout(wait)
                lease.sendall(b'{"op":"take"}\n')
                try:
                    member_id, path = self._taken(_recv_line(lease))
                except socket.timeout as e:
                    raise NsboxError(f"no sandbox from pool {self.name} within {wait:g} s",
                                     step="pool") from e
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(wait)
                    try:
                        s.connect(path)
                    except OSError as e:
                        if attempt + 1 < _TAKES:
                            continue  # it died after it was handed out: nothing ran; another
                        raise NsboxError(f"the pool's sandboxes {member_id} and the ones before "
                                         f"it ended before they could be used ({e.strerror or e})",
                                         step="pool", errno=e.errno) from e
                    try:
                        try:
                            s.sendall(request)
                        except (BrokenPipeError, ConnectionResetError):
                            pass  # not taken: the answer says why
                        line = _recv_line(s)
                    except socket.timeout as e:
                        raise NsboxError(f"no answer from the pool's sandbox {member_id} within "
                                         f"{wait:g} s (the run's timeout and {_MARGIN:g} s "
                                         "more)", step="pool") from e
                    except OSError as e:
                        raise NsboxError(f"the pool's sandbox {member_id} closed the connection "
                                         f"without an answer ({e.strerror or e})", step="pool",
                                         errno=e.errno) from e
                    return _answer(line)
        raise AssertionError("unreachable")

    def _cli_step(self, code: Optional[str], argv: Optional[List[str]], timeout: _Timeout,
                  output_limit: Optional[int], stdin: _Stdin, memory: _Limit,
                  files: _Files) -> Result:
        """A run with memory= or files=: through ``nsbox session exec MEMBER --memory
        --copy-in`` while this side holds the lease, as ``nsbox run --pool`` does. That process
        (the caller's) reads --memory with nsbox run's parser and floor, and opens and packs the
        files as a run's --copy-in does (never through a symlink); the sandbox lowers its
        limit for this run only (never above the pool's: refused) and unpacks the files in
        /work before the code runs."""
        if files is not None and not isinstance(files, Mapping):
            raise TypeError("files must be a dict {relative_name: str | bytes}")
        tmp = tempfile.mkdtemp(prefix="nsbox-")  # 0700: ours alone
        try:
            opts: List[str] = []
            if memory is not None:
                opts += ["--memory", _limit(memory, "memory")]
            if files is not None:
                _write_files(os.path.join(tmp, "files"), files)
                opts += ["--copy-in", f"{os.path.join(tmp, 'files')}/.:{FILES_DIR}/"]
            if timeout is not None:
                opts += ["--timeout", _number(timeout, "timeout")]
            if output_limit is not None:
                opts += ["--output-limit", str(int(_number(output_limit, "output_limit")))]
            data = b"" if stdin is None else \
                (stdin.encode() if isinstance(stdin, str) else bytes(stdin))
            if code is not None:
                main = os.path.join(tmp, "main.py")
                _write_file(main, code.encode())
                opts += ["--code", main] + (["--stdin"] if stdin is not None else [])
            else:
                opts += (["--stdin"] if stdin is not None else []) + ["--", *(argv or [])]
            wait = self._wait(timeout)
            for attempt in range(_TAKES):
                with self._connect() as lease:
                    lease.settimeout(wait)
                    lease.sendall(b'{"op":"take"}\n')
                    try:
                        member_id, path = self._taken(_recv_line(lease))
                    except socket.timeout as e:
                        raise NsboxError(f"no sandbox from pool {self.name} within {wait:g} s",
                                         step="pool") from e
                    if not os.path.exists(path) and attempt + 1 < _TAKES:
                        continue  # it died after it was handed out: nothing ran; another
                    cmd = [self._binary, "session", "exec", member_id, "--json", *opts]
                    try:
                        p = subprocess.run(cmd, input=data, capture_output=True, env=self._env,
                                           timeout=None if wait is None
                                           else wait + _ANSWER_SECONDS)
                    except OSError as e:
                        raise _start_error(cmd, e) from e
                    except subprocess.TimeoutExpired as e:
                        raise NsboxError(f"no answer from the pool's sandbox {member_id} within "
                                         f"{wait:g} s (the run's timeout and {_MARGIN:g} s "
                                         "more)", step="pool") from e
                    if not p.stdout.strip():
                        message = p.stderr.decode(errors="replace").strip() or \
                            f"nsbox session exec ended with exit status {p.returncode}"
                        raise NsboxError(message.removeprefix("nsbox: "), step="pool",
                                         exit_code=p.returncode,
                                         stderr=p.stderr.decode(errors="replace"))
                    return _answer(p.stdout)
            raise AssertionError("unreachable")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def run_python_code(self, code: str, timeout: _Timeout = None,
                        output_limit: Optional[int] = None, stdin: _Stdin = None, *,
                        memory: _Limit = None, files: _Files = None) -> Result:
        """Run Python code in a fresh sandbox of the pool, in its interpreter (the preload's
        modules imported, no name of them bound). stdin: what sys.stdin reads (else nothing).
        memory: a lower limit for this run (``"128m"``; default the pool's; one above the
        pool's raises NsboxError); files: ``{relative_name: str | bytes}`` copied into /work
        before the code runs, as for :func:`nsbox.run_python_code` (these two go through
        ``nsbox session exec``, a few milliseconds more). The sandbox is destroyed
        afterwards."""
        if memory is not None or files is not None:
            return self._cli_step(code, None, timeout, output_limit, stdin, memory, files)
        return self._call(_request("code", {"code": code}, timeout, output_limit, stdin),
                          timeout)

    def run(self, argv: Sequence[str], timeout: _Timeout = None,
            output_limit: Optional[int] = None, stdin: _Stdin = None, *,
            memory: _Limit = None, files: _Files = None) -> Result:
        """Run a program in a fresh sandbox of the pool (stdin: else /dev/null); memory and
        files as for :meth:`run_python_code`."""
        if isinstance(argv, (str, bytes)) or not argv:
            raise TypeError("argv must be a non-empty sequence of strings")
        if memory is not None or files is not None:
            return self._cli_step(None, [str(a) for a in argv], timeout, output_limit, stdin,
                                  memory, files)
        return self._call(_request("exec", {"argv": [str(a) for a in argv]}, timeout,
                                   output_limit, stdin), timeout)

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

    async def _acall(self, request: bytes, timeout: _Timeout) -> Result:
        loop = asyncio.get_running_loop()
        wait = self._wait(timeout)

        async def line_of(s: socket.socket) -> bytes:
            chunks: List[bytes] = []
            while True:
                chunk = await loop.sock_recv(s, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                if chunk.endswith(b"\n"):
                    break
            return b"".join(chunks)

        async def exchange() -> bytes:
            for attempt in range(_TAKES):
                with self._connect() as lease:
                    lease.setblocking(False)
                    await loop.sock_sendall(lease, b'{"op":"take"}\n')
                    member_id, path = self._taken(await line_of(lease))
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                        s.setblocking(False)
                        try:
                            await loop.sock_connect(s, path)
                        except OSError as e:
                            if attempt + 1 < _TAKES:
                                continue  # died after it was handed out: take another
                            raise NsboxError(f"the pool's sandboxes {member_id} and the ones "
                                             f"before it ended before they could be used "
                                             f"({e.strerror or e})", step="pool",
                                             errno=e.errno) from e
                        try:
                            try:
                                await loop.sock_sendall(s, request)
                            except (BrokenPipeError, ConnectionResetError):
                                pass  # not taken: the answer says why
                            return await line_of(s)
                        except OSError as e:
                            raise NsboxError(f"the pool's sandbox {member_id} closed the "
                                             f"connection without an answer ({e.strerror or e})",
                                             step="pool", errno=e.errno) from e
            raise AssertionError("unreachable")

        try:
            line = await asyncio.wait_for(exchange(), wait)
        except asyncio.TimeoutError as e:
            raise NsboxError(f"no answer from pool {self.name} within {wait:g} s (the run's "
                             f"timeout and {_MARGIN:g} s more)", step="pool") from e
        return _answer(line)

    async def arun_python_code(self, code: str, timeout: _Timeout = None,
                               output_limit: Optional[int] = None,
                               stdin: _Stdin = None, *, memory: _Limit = None,
                               files: _Files = None) -> Result:
        """As :meth:`run_python_code`, for asyncio."""
        if memory is not None or files is not None:
            return await asyncio.get_running_loop().run_in_executor(
                None, lambda: self._cli_step(code, None, timeout, output_limit, stdin, memory,
                                             files))
        return await self._acall(_request("code", {"code": code}, timeout, output_limit,
                                              stdin), timeout)

    async def arun(self, argv: Sequence[str], timeout: _Timeout = None,
                   output_limit: Optional[int] = None, stdin: _Stdin = None, *,
                   memory: _Limit = None, files: _Files = None) -> Result:
        """As :meth:`run`, for asyncio."""
        if isinstance(argv, (str, bytes)) or not argv:
            raise TypeError("argv must be a non-empty sequence of strings")
        if memory is not None or files is not None:
            return await asyncio.get_running_loop().run_in_executor(
                None, lambda: self._cli_step(None, [str(a) for a in argv], timeout,
                                             output_limit, stdin, memory, files))
        return await self._acall(_request("exec", {"argv": [str(a) for a in argv]}, timeout,
                                          output_limit, stdin), timeout)
