# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sessions: one live sandbox for many steps, with a Python interpreter that keeps its state.

    with nsbox.Session(memory="512m") as s:
        s.run_code("x = 6")
        print(s.run_code("print(x * 7)").stdout)   # 42

``nsbox session start`` makes the sandbox and returns; each step then goes straight to the
session's socket (one JSON line each way, no process started on this side), which is what makes
a step cheaper than starting ``python3`` at all.
"""
import asyncio
import contextlib
import functools
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._files import (FILES_DIR, _Data, _as_bytes, _check_file_name, _collect_files,
                     _write_file, _write_files)
from ._options import (RUN_OPTIONS, Option, _CopyOut, _Limit, _Timeout, _default_rootfs_args,
                       _env_records, _file_args, _limit, _number, _option_args, keyword_options)
from ._process import _Streams, _env_fd, _nsbox_env, _result_from, _start_error, find_nsbox
from .errors import NsboxError
from .result import Result

# Session.upload()'s step: stdin into /work/NAME, its directories made.
_UPLOAD = ("import os, sys\n"
           "d = os.path.dirname(sys.argv[1])\n"
           "if d: os.makedirs(d, exist_ok=True)\n"
           "with open(sys.argv[1], 'wb') as f: f.write(sys.stdin.buffer.read())\n")

# Seconds this side waits for a step's answer beyond the step's own timeout.
_MARGIN = 10.0
# Seconds the session gives a client to take its answer (ANSWER_DEADLINE_USEC in session.c).
_ANSWER_SECONDS = 30


def _request(op: str, payload: Dict[str, Any], timeout: _Timeout,
             output_limit: Optional[int], stdin: Union[bytes, str, None] = None) -> bytes:
    req = {"op": op, **payload}
    if timeout is not None:
        req["timeout"] = float(_number(timeout, "timeout"))
    if output_limit is not None:
        req["output_limit"] = int(_number(output_limit, "output_limit"))
    data = b""
    if stdin is not None:
        # The step's stdin follows the line, as it is ("stdin_bytes" says how much).
        data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
        req["stdin_bytes"] = len(data)
    return json.dumps(req).encode() + b"\n" + data


def _answer(line: bytes) -> Result:
    if not line:
        raise NsboxError("the session ended without an answer (stopped, killed, or past its "
                         "idle or lifetime limit)", step="session")
    if not line.endswith(b"\n"):
        raise NsboxError(f"the step's answer was cut off after {len(line)} bytes: this client "
                         f"was too slow to read it (the session closes a connection whose "
                         f"answer is not taken within {_ANSWER_SECONDS} s); the step ran, and "
                         "its result is in the session's audit log if it has one (--log)",
                         step="session")
    try:
        raw = json.loads(line)
    except ValueError as e:
        raise NsboxError(f"the session sent no valid JSON ({e})", step="session") from e
    if isinstance(raw, dict) and isinstance(raw.get("error"), str):
        raise NsboxError(raw["error"], step="session", raw=raw)
    return _result_from(raw.get("exit_code", 125) if isinstance(raw, dict) else 125, line, "")


class Session:
    """A live sandbox (``nsbox session start``) for many steps.

    The options are those of :func:`nsbox.run`; ``timeout`` is each step's default, and a step
    may give its own. ``idle_timeout`` (default 600 s, so that a forgotten session ends; None:
    never) and ``lifetime`` (seconds) end the session by themselves.
    Files the steps write (in /work, /tmp, or a ``--tmpfs`` given in ``extra_args``) persist
    between steps; everything a step starts is killed when the step ends. ``workspace`` names a
    workspace (as for :func:`nsbox.run`): its files are in /work from the start, and /work is
    saved back into it when the session ends between steps (:meth:`close`, the idle or
    lifetime limit), not when it is killed or a step is cut off by its end;
    :attr:`stop_result` says whether it was saved. Use it as a context manager, or call
    :meth:`close`.
    """

    def __init__(self, timeout: _Timeout = 10, memory: _Limit = "256m", cpus: _Limit = None,
                 pids_limit: _Limit = None, env: Optional[Mapping[str, str]] = None,
                 rootfs: Optional[str] = None, output_limit: Optional[int] = None,
                 network: str = "none", idle_timeout: Optional[float] = 600,
                 lifetime: Optional[float] = None, name: Optional[str] = None,
                 workspace: Optional[str] = None,
                 nsbox: Optional[str] = None, extra_args: Sequence[str] = (),
                 files: Optional[Mapping[str, _Data]] = None, isolation: Optional[str] = None):
        self._binary = find_nsbox(nsbox)
        # isolation: as run_python_code's (--isolation).
        extra_args = _file_args(extra_args, None, None, isolation)
        args = _option_args(timeout, memory, cpus, pids_limit, env, rootfs, output_limit,
                            network, extra_args)
        args += _default_rootfs_args(self._binary, rootfs, extra_args)
        if idle_timeout is not None:
            args += ["--idle-timeout", _number(idle_timeout, "idle_timeout")]
        if lifetime is not None:
            args += ["--lifetime", _number(lifetime, "lifetime")]
        if name is not None:
            args += ["--name", name]
        if workspace is not None:
            args += ["--workspace", workspace]
        self._cmd: List[str] = [self._binary, "session", "start", "--json", *args]
        # nsbox's own environment is its few variables; the program's travel on --env-fd
        # (never in nsbox's environment, where LD_PRELOAD would run in nsbox itself).
        self._env = _nsbox_env()
        self._records = _env_records(env)
        self._timeout = timeout
        if files is not None and not isinstance(files, Mapping):
            raise TypeError("files must be a dict {relative_name: str | bytes}")
        for file_name, data in (files or {}).items():
            _check_file_name(file_name)
            _as_bytes(data, f"files[{file_name!r}]")
        self._files = files
        self.id: Optional[str] = None
        self.socket_path: Optional[str] = None
        #: The answer to close(): ``{"stopped": True, "reason": ..., "workspace": {"name",
        #: "saved"} or None, "warnings": [...]}``; None before, or when the session was gone
        #: (or had to be killed) without saying.
        self.stop_result: Optional[Dict[str, Any]] = None

    # -- life ---------------------------------------------------------------------------------

    def _started(self, returncode: int, out: bytes, err: bytes) -> "Session":
        if returncode != 0:
            message = err.decode(errors="replace").strip() or f"exit status {returncode}"
            if message.startswith("nsbox: "):
                message = message[len("nsbox: "):]
            raise NsboxError(message, step="session start", exit_code=returncode,
                             stderr=err.decode(errors="replace"))
        info = json.loads(out)
        self.id, self.socket_path = info["id"], info["socket"]
        return self

    @contextlib.contextmanager
    def _files_dir(self) -> Iterator[List[str]]:
        """The --copy-in of ``files``: a 0700 directory of ours while `session start` runs
        (it copies them into /work before the first step), removed afterwards."""
        if self._files is None:
            yield []
            return
        tmp = tempfile.mkdtemp(prefix="nsbox-")
        try:
            _write_files(os.path.join(tmp, "files"), self._files)
            yield ["--copy-in", f"{os.path.join(tmp, 'files')}/.:{FILES_DIR}/"]
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def start(self) -> "Session":
        """Start the session (done by ``with``). Returns self."""
        with _env_fd(self._records) as fd, self._files_dir() as copy_in:
            cmd = self._command(fd, copy_in)
            try:
                p = subprocess.run(cmd, capture_output=True, env=self._env,
                                   stdin=subprocess.DEVNULL, timeout=60,
                                   pass_fds=() if fd is None else (fd,))
            except OSError as e:
                raise _start_error(cmd, e) from e
        return self._started(p.returncode, p.stdout, p.stderr)

    def _command(self, env_fd: Optional[int], copy_in: Sequence[str] = ()) -> List[str]:
        """`nsbox session start` with --env-fd for the program's variables, if any, and the
        --copy-in of ``files``."""
        env = [] if env_fd is None else ["--env-fd", str(env_fd)]
        return self._cmd[:4] + env + list(copy_in) + self._cmd[4:]

    def close(self) -> None:
        """Stop the session and wait until its sandbox is gone. Safe to call twice."""
        if not self.socket_path:
            return
        data = b""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(30)
                s.connect(self.socket_path)
                try:
                    s.sendall(b'{"op":"stop"}\n')
                except (BrokenPipeError, ConnectionResetError):
                    pass  # not taken: the answer says why
                while True:  # EOF: the supervisor has exited
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
        except OSError:
            pass  # already gone (or reset after its answer)
        if not self._stopped(data):
            # A refusal (every connection taken, by steps waiting or slow clients): end it by
            # its supervisor's signal instead, as `nsbox kill` does.
            self._kill()
        self.socket_path = None

    @property
    def workspace_saved(self) -> Optional[bool]:
        """Whether close() saved the workspace (None: no workspace, or not yet closed)."""
        ws = (self.stop_result or {}).get("workspace")
        return ws.get("saved") if isinstance(ws, dict) else None

    def _stopped(self, data: bytes) -> bool:
        """The answer to stop: True when the session stopped (or was gone); it is kept in
        stop_result. False for a refusal."""
        if not data:
            return True
        try:
            answer = json.loads(data)
        except ValueError:
            return False
        if isinstance(answer, dict) and answer.get("stopped") is True:
            self.stop_result = answer
            return True
        return False

    def _kill(self) -> None:
        subprocess.run([self._binary, "kill", str(self.id)], env=self._env,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        self._wait_gone()

    def _wait_gone(self) -> None:
        """Until the socket is gone: the supervisor removes it when the sandbox is gone."""
        deadline = time.monotonic() + 30
        while self.socket_path and os.path.exists(self.socket_path) and \
                time.monotonic() < deadline:
            time.sleep(0.02)

    def __enter__(self) -> "Session":
        return self.start() if not self.socket_path else self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- steps --------------------------------------------------------------------------------

    def _wait(self, timeout: _Timeout) -> Optional[float]:
        t = self._timeout if timeout is None else timeout
        return None if t is None else float(t) + _MARGIN

    def _call(self, request: bytes, timeout: _Timeout) -> Result:
        if not self.socket_path:
            raise NsboxError("the session is not started (use it in a with block)",
                             step="session")
        wait = self._wait(timeout)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(wait)
            try:
                s.connect(self.socket_path)
            except OSError as e:
                raise NsboxError(f"session {self.id} is not running ({e.strerror or e}): it was "
                                 "stopped, killed, or reached its idle or lifetime limit",
                                 step="session", errno=e.errno) from e
            chunks = []
            try:
                try:
                    s.sendall(request)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the session did not take it: its answer says why
                while True:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    if chunk.endswith(b"\n"):
                        break
            except socket.timeout as e:
                raise NsboxError(f"no answer from session {self.id} within {wait:g} s (the "
                                 f"step's timeout and {_MARGIN:g} s more): the step may still "
                                 "run, or wait behind another client's step",
                                 step="session") from e
            except OSError as e:
                if not chunks:
                    raise NsboxError(f"session {self.id} closed the connection without an "
                                     f"answer ({e.strerror or e}): it was stopped, killed, or "
                                     "reached its idle or lifetime limit",
                                     step="session", errno=e.errno) from e
        return _answer(b"".join(chunks))

    def _copy_out_step(self, code: Optional[str], argv: Optional[List[str]], timeout: _Timeout,
                       output_limit: Optional[int], stdin: Union[bytes, str, None],
                       copy_out: _CopyOut, copy_out_dir: Optional[str],
                       memory: _Limit = None) -> Result:
        """A step with copy_out (or its own lower memory): through ``nsbox session exec --copy-out``, whose process (the
        caller's) opens the host directory and unpacks the files, never through a symlink, as
        for a run; Result.files then holds their bytes."""
        if not self.socket_path:
            raise NsboxError("the session is not started (use it in a with block)",
                             step="session")
        paths = [copy_out] if isinstance(copy_out, str) else list(copy_out or [])
        for path in paths:
            if not isinstance(path, str) or not path.startswith("/"):
                raise ValueError(f"copy_out path {path!r} must be an absolute path in the "
                                 "sandbox")
        tmp = tempfile.mkdtemp(prefix="nsbox-")  # 0700: ours alone
        try:
            out_dir = os.path.abspath(os.fspath(copy_out_dir)) if copy_out_dir is not None \
                else os.path.join(tmp, "out")
            cmd = [self._binary, "session", "exec", str(self.id), "--json"]
            if memory is not None:
                cmd += ["--memory", _limit(memory, "memory")]
            for path in paths:
                cmd += ["--copy-out", f"{path}:{out_dir}"]
            if timeout is not None:
                cmd += ["--timeout", _number(timeout, "timeout")]
            if output_limit is not None:
                cmd += ["--output-limit", str(int(_number(output_limit, "output_limit")))]
            data = b"" if stdin is None else \
                (stdin.encode() if isinstance(stdin, str) else bytes(stdin))
            if code is not None and stdin is None:
                cmd += ["--code", "-"]
                data = code.encode()
            elif code is not None:
                main = os.path.join(tmp, "main.py")
                _write_file(main, code.encode())
                cmd += ["--code", main, "--stdin"]
            else:
                cmd += ["--stdin"] if stdin is not None else []
                cmd += ["--", *(argv or [])]
            wait = self._wait(timeout)
            try:
                p = subprocess.run(cmd, input=data, capture_output=True, env=self._env,
                                   timeout=None if wait is None else wait + _ANSWER_SECONDS)
            except OSError as e:
                raise _start_error(cmd, e) from e
            except subprocess.TimeoutExpired as e:
                raise NsboxError(f"no answer from session {self.id} within {wait:g} s (the "
                                 f"step's timeout and {_MARGIN:g} s more)",
                                 step="session") from e
            if not p.stdout.strip():
                message = p.stderr.decode(errors="replace").strip() or \
                    f"nsbox session exec ended with exit status {p.returncode}"
                if message.startswith("nsbox: "):
                    message = message[len("nsbox: "):]
                raise NsboxError(message, step="session", exit_code=p.returncode,
                                 stderr=p.stderr.decode(errors="replace"))
            return _collect_files(_answer(p.stdout))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def run_code(self, code: str, timeout: _Timeout = None,
                 output_limit: Optional[int] = None,
                 stdin: Union[bytes, str, None] = None, copy_out: _CopyOut = None,
                 copy_out_dir: Optional[str] = None, *, memory: _Limit = None) -> Result:
        """Run Python code in the session's interpreter as a notebook cell in its ``__main__``:
        variables, imports and open files of earlier steps are there, and the value of a last
        expression, ``display()`` and figures are in Result.outputs (see
        :func:`nsbox.run_python_code`'s ``cell``). A timeout raises KeyboardInterrupt in the code; an interpreter
        that ignores it is restarted (the result's raw["interpreter"] says "restarted").
        stdin: what sys.stdin reads during the step (else nothing). copy_out: sandbox paths
        (one or a list) copied out when the step has ended by itself, as for
        :func:`nsbox.run`: Result.files maps each file's sandbox path to its bytes, and
        copy_out_dir keeps the copies in a directory of yours too. memory: a lower limit for
        this step only (``--memory``; one above the session's raises NsboxError); under
        rlimits the interpreter keeps it for good, so it is ended after the step and the next
        one starts fresh (a warning says so)."""
        if copy_out or copy_out_dir is not None or memory is not None:
            return self._copy_out_step(code, None, timeout, output_limit, stdin, copy_out,
                                       copy_out_dir, memory)
        return self._call(_request("code", {"code": code}, timeout, output_limit, stdin),
                          timeout)

    def run(self, argv: Sequence[str], timeout: _Timeout = None,
            output_limit: Optional[int] = None, stdin: Union[bytes, str, None] = None,
            copy_out: _CopyOut = None, copy_out_dir: Optional[str] = None, *,
            memory: _Limit = None) -> Result:
        """Run a program in the session's sandbox (as ``nsbox session exec ID -- ARGV``).
        stdin: what the program reads on its stdin (else /dev/null). copy_out, copy_out_dir:
        as for :meth:`run_code`."""
        if isinstance(argv, (str, bytes)) or not argv:
            raise TypeError("argv must be a non-empty sequence of strings")
        if copy_out or copy_out_dir is not None or memory is not None:
            return self._copy_out_step(None, [str(a) for a in argv], timeout, output_limit,
                                       stdin, copy_out, copy_out_dir, memory)
        return self._call(_request("exec", {"argv": [str(a) for a in argv]}, timeout,
                                   output_limit, stdin), timeout)

    # -- single files between steps -----------------------------------------------------------

    def upload(self, name: str, data: _Data, timeout: _Timeout = None) -> None:
        """Put a file into the session's working directory as ``/work/NAME`` (``name`` as for
        ``files``: relative, subdirectories made, no ``..``), between steps. It travels as a
        step's stdin to a short program in the sandbox, which writes it: never a bind, never
        a host path the sandbox sees; at most 16 MiB (a step's stdin). Raises NsboxError if
        that step fails (a full /work, a name taken by a directory)."""
        parts = _check_file_name(name)
        path = "/".join(parts)
        # -I: not the user site below HOME=/tmp, where the session's code may have left a .pth
        # file that would run in this step (and sys.path without the working directory).
        r = self.run(["python3", "-I", "-c", _UPLOAD, f"{FILES_DIR}/{path}"], timeout=timeout,
                     stdin=_as_bytes(data, "data"))
        if not r.ok:
            raise NsboxError(f"cannot write {FILES_DIR}/{path} in the session: "
                             f"{r.stderr.strip() or r.reason}", step="session", raw=r.raw)

    def download(self, name: str, timeout: _Timeout = None) -> bytes:
        """The bytes of ``/work/NAME`` (or of an absolute sandbox path), between steps: copied
        out as ``copy_out`` does (a regular file only, never through a symlink, within
        copy-out's caps: 64 MiB). Raises FileNotFoundError when it is not there as a regular
        file."""
        path = name if name.startswith("/") else f"{FILES_DIR}/" + "/".join(
            _check_file_name(name))
        r = self.run(["true"], timeout=timeout, copy_out=path)
        if path not in r.files:
            why = "; ".join(f"{s['path']}: {s['reason']}"
                            for s in (r.copy_out or {}).get("skipped") or []) or \
                "no such file in the session"
            raise FileNotFoundError(f"{path}: {why}")
        return r.files[path]

    # -- asyncio ------------------------------------------------------------------------------

    async def astart(self) -> "Session":
        with _env_fd(self._records) as fd, self._files_dir() as copy_in:
            cmd = self._command(fd, copy_in)
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
        if not self.socket_path:
            return
        loop = asyncio.get_running_loop()
        data = b""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.setblocking(False)
            try:
                await loop.sock_connect(s, self.socket_path)
                try:
                    await loop.sock_sendall(s, b'{"op":"stop"}\n')
                except (BrokenPipeError, ConnectionResetError):
                    pass  # not taken: the answer says why
                while True:  # EOF: the supervisor has exited
                    chunk = await loop.sock_recv(s, 4096)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass  # already gone (or reset after its answer)
        if not self._stopped(data):
            # Refused (see close()): by its supervisor's signal instead.
            proc = await asyncio.create_subprocess_exec(
                self._binary, "kill", str(self.id), env=self._env,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await proc.wait()
            deadline = time.monotonic() + 30
            while os.path.exists(self.socket_path) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        self.socket_path = None

    async def __aenter__(self) -> "Session":
        return await self.astart() if not self.socket_path else self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _acall(self, request: bytes, timeout: _Timeout) -> Result:
        if not self.socket_path:
            raise NsboxError("the session is not started (use it in an async with block)",
                             step="session")
        # The event loop's socket calls, not asyncio's streams: a stream whose write failed
        # (the session refused the connection) raises that error before the answer it holds.
        loop = asyncio.get_running_loop()
        wait = self._wait(timeout)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.setblocking(False)
            try:
                await loop.sock_connect(s, self.socket_path)
            except OSError as e:
                raise NsboxError(f"session {self.id} is not running ({e.strerror or e}): it was "
                                 "stopped, killed, or reached its idle or lifetime limit",
                                 step="session", errno=e.errno) from e

            async def exchange() -> List[bytes]:
                chunks: List[bytes] = []
                try:
                    await loop.sock_sendall(s, request)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the session did not take it: its answer says why
                try:
                    while True:
                        chunk = await loop.sock_recv(s, 1 << 20)
                        if not chunk:
                            break
                        chunks.append(chunk)
                        if chunk.endswith(b"\n"):
                            break
                except OSError as e:
                    if not chunks:
                        raise NsboxError(f"session {self.id} closed the connection without an "
                                         f"answer ({e.strerror or e}): it was stopped, killed, "
                                         "or reached its idle or lifetime limit",
                                         step="session", errno=e.errno) from e
                return chunks

            try:
                chunks = await asyncio.wait_for(exchange(), wait)
            except asyncio.TimeoutError as e:
                raise NsboxError(f"no answer from session {self.id} within {wait:g} s (the "
                                 f"step's timeout and {_MARGIN:g} s more): the step may still "
                                 "run, or wait behind another client's step",
                                 step="session") from e
        return _answer(b"".join(chunks))

    async def arun_code(self, code: str, timeout: _Timeout = None,
                        output_limit: Optional[int] = None,
                        stdin: Union[bytes, str, None] = None, copy_out: _CopyOut = None,
                        copy_out_dir: Optional[str] = None, *, memory: _Limit = None) -> Result:
        """As :meth:`run_code`, for asyncio."""
        if copy_out or copy_out_dir is not None or memory is not None:
            return await asyncio.get_running_loop().run_in_executor(None, functools.partial(
                self._copy_out_step, code, None, timeout, output_limit, stdin, copy_out,
                copy_out_dir, memory))
        return await self._acall(_request("code", {"code": code}, timeout, output_limit,
                                          stdin), timeout)

    async def arun(self, argv: Sequence[str], timeout: _Timeout = None,
                   output_limit: Optional[int] = None,
                   stdin: Union[bytes, str, None] = None, copy_out: _CopyOut = None,
                   copy_out_dir: Optional[str] = None, *, memory: _Limit = None) -> Result:
        """As :meth:`run`, for asyncio."""
        if isinstance(argv, (str, bytes)) or not argv:
            raise TypeError("argv must be a non-empty sequence of strings")
        if copy_out or copy_out_dir is not None or memory is not None:
            return await asyncio.get_running_loop().run_in_executor(None, functools.partial(
                self._copy_out_step, None, [str(a) for a in argv], timeout, output_limit,
                stdin, copy_out, copy_out_dir, memory))
        return await self._acall(_request("exec", {"argv": [str(a) for a in argv]}, timeout,
                                          output_limit, stdin), timeout)
