# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sessions: one live sandbox for many steps, with a Python interpreter that keeps its state.

    with nsbox.Session(memory="512m") as s:
        s.run_code("x = 6")
        print(s.run_code("print(x * 7)").stdout)   # 42

``nsbox session start`` makes the sandbox and returns; each step then goes straight to the
session's socket (one JSON line each way, no process started on this side), which is what makes
a step cheaper than starting ``python3`` at all.
"""
from __future__ import annotations  # Unpack[...] below: for type checkers (Python >= 3.11)

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
from typing import (TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence,
                    Union)

from ._files import (FILES_DIR, _Data, _as_bytes, _check_file_name, _collect_files,
                     _write_file, _write_files)
from ._options import (RUN_OPTIONS, STEP_OPTIONS, Option, _CopyOut, _Timeout,
                       _default_rootfs_args, _env_records, _file_args, _limit, _number,
                       _option_args, keyword_options)
from ._process import _Streams, _env_fd, _nsbox_env, _result_from, _start_error, find_nsbox
from .errors import NsboxError
from .result import Result

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import RunOptions, StepOptions

    class SessionOptions(RunOptions, total=False):
        """RunOptions and SESSION_OPTIONS (Session())."""
        idle_timeout: Optional[float]
        lifetime: Optional[float]
        name: Optional[str]

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
             output_limit: Optional[int], stdin: Union[bytes, str, None] = None,
             stream: bool = False) -> bytes:
    req = {"op": op, **payload}
    if stream:
        req["stream"] = True  # the output as it comes, before the answer (_Lines)
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


def _argv(argv: Sequence[str]) -> List[str]:
    if isinstance(argv, (str, bytes)) or not argv:
        raise TypeError("argv must be a non-empty sequence of strings")
    return [str(a) for a in argv]


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


#: A Session's own options, after the run options.
SESSION_OPTIONS = (Option("idle_timeout", 600, Optional[float], "sandbox"),
                   Option("lifetime", None, Optional[float], "sandbox"),
                   Option("name", None, Optional[str], "sandbox"))

#: The options a step takes for itself (None: the Session's): each per-step run option, and
#: memory (a lower limit for the step) and files (copied into /work before it).
_STEP = tuple(o for o in RUN_OPTIONS if o.name in STEP_OPTIONS)

#: Why a step refuses each other run option (a TypeError that says so).
_STEP_REFUSED = {
    o.name: "a step's output is in its Result and streams to on_stdout/on_stderr ('nsbox "
            "session' takes no --stdout-file)" if o.name in ("stdout_file", "stderr_file") else
    f"the session's sandbox was made when it started, with the session's {o.name}: give it "
    f"to Session(...)"
    for o in RUN_OPTIONS if o.name not in STEP_OPTIONS}


def _check_files(files: Optional[Mapping[str, _Data]]) -> None:
    if files is not None and not isinstance(files, Mapping):
        raise TypeError("files must be a dict {relative_name: str | bytes}")
    for file_name, data in (files or {}).items():
        _check_file_name(file_name)
        _as_bytes(data, f"files[{file_name!r}]")


def _copy_out_paths(copy_out: _CopyOut) -> List[str]:
    paths = [copy_out] if isinstance(copy_out, str) else list(copy_out or [])
    for path in paths:
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"copy_out path {path!r} must be an absolute path in the "
                             "sandbox")
    return paths


def _exec_step(command: List[str], code: Optional[str], argv: Optional[List[str]],
               o: Mapping[str, Any], env: Dict[str, str], wait: Optional[float], who: str,
               step: str) -> Result:
    """A step with copy_out, files or its own lower memory, through command (``nsbox session
    exec ID --json``, or ``nsbox run --pool NAME --json``, which takes the same options): its
    process (the caller's) opens the host directory and unpacks the files, never through a
    symlink, as for a run (Result.files then holds their bytes), and packs the files as a
    run's --copy-in does. who and step: for the errors ("session ID", "session")."""
    timeout, output_limit, stdin = o["timeout"], o["output_limit"], o["stdin"]
    paths = _copy_out_paths(o["copy_out"])
    tmp = tempfile.mkdtemp(prefix="nsbox-")  # 0700: ours alone
    try:
        out_dir = os.path.abspath(os.fspath(o["copy_out_dir"])) \
            if o["copy_out_dir"] is not None else os.path.join(tmp, "out")
        cmd = list(command)
        if o["memory"] is not None:
            cmd += ["--memory", _limit(o["memory"], "memory")]
        if o["files"] is not None:
            _write_files(os.path.join(tmp, "files"), o["files"])
            cmd += ["--copy-in", f"{os.path.join(tmp, 'files')}/.:{FILES_DIR}/"]
        for path in paths:
            cmd += ["--copy-out", f"{path}:{out_dir}"]
        if timeout is not None:
            cmd += ["--timeout", _number(timeout, "timeout")]
        if output_limit is not None:
            cmd += ["--output-limit", str(int(_number(output_limit, "output_limit")))]
        data = b"" if stdin is None else _as_bytes(stdin, "stdin")
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
        try:
            p = subprocess.run(cmd, input=data, capture_output=True, env=env,
                               timeout=None if wait is None else wait + _ANSWER_SECONDS)
        except OSError as e:
            raise _start_error(cmd, e) from e
        except subprocess.TimeoutExpired as e:
            raise NsboxError(f"no answer from {who} within {wait:g} s (the step's timeout and "
                             f"{_MARGIN:g} s more)", step=step) from e
        if not p.stdout.strip():
            message = p.stderr.decode(errors="replace").strip() or \
                f"nsbox {' '.join(command[1:3])} ended with exit status {p.returncode}"
            if message.startswith("nsbox: "):
                message = message[len("nsbox: "):]
            raise NsboxError(message, step=step, exit_code=p.returncode,
                             stderr=p.stderr.decode(errors="replace"))
        return _collect_files(_answer(p.stdout))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _replay(result: Result, streams: Optional[_Streams]) -> Result:
    """A step run through `nsbox session exec --json` streams nothing: its callbacks get the
    output when the step has ended, whole."""
    if streams is not None:
        for name in ("stdout", "stderr"):
            text = getattr(result, name)
            if text and streams.callbacks[name] is not None:
                streams.callbacks[name](text)
    return result


class _Lines:
    """A step's answer, read line by line: with "stream", lines {"stream": NAME, "data": TEXT}
    come as the step writes (session-client.c's client_stream(); the session drops one when this
    side is slow to read: the answer holds everything), then the answer. feed() hands the
    stream lines to the callbacks and returns the answer once it is in."""

    def __init__(self, streams: Optional[_Streams]) -> None:
        self.streams = streams
        self.buf = b""

    def feed(self, chunk: bytes) -> Optional[bytes]:
        self.buf += chunk
        while True:
            end = self.buf.find(b"\n")
            if end < 0:
                return None
            line, rest = self.buf[:end + 1], self.buf[end + 1:]
            if self.streams is None or not line.startswith(b'{"stream":'):
                return line
            self.buf = rest
            try:
                piece = json.loads(line)
            except ValueError:
                return line  # not a stream line after all: the answer says what it is
            callback = self.streams.callbacks.get(piece.get("stream"))
            if callback is not None and isinstance(piece.get("data"), str) and piece["data"]:
                callback(piece["data"])

    def rest(self) -> bytes:
        """What came before EOF without its newline (a cut-off answer)."""
        return self.buf


class Session:
    """A live sandbox (``nsbox session start``) for many steps.

    The options are those of :func:`nsbox.run`, keyword-only, with its defaults: those of the
    sandbox (memory, cpus, files, env, network, workspace, log, ...) hold for the session;
    timeout, output_limit, stdin, on_stdout, on_stderr, copy_out and copy_out_dir are each
    step's defaults, and a step may give its own (see :meth:`run_code`); stdout_file and
    stderr_file are refused (ValueError: ``nsbox session start`` takes no --stdout-file).
    ``idle_timeout`` (default 600 s, so that a forgotten session ends; None:
    never) and ``lifetime`` (seconds) end the session by themselves.
    Files the steps write (in /work, /tmp, or a ``--tmpfs`` given in ``extra_args``) persist
    between steps; everything a step starts is killed when the step ends. ``workspace`` names a
    workspace (as for :func:`nsbox.run`): its files are in /work from the start, and /work is
    saved back into it when the session ends between steps (:meth:`close`, the idle or
    lifetime limit), not when it is killed or a step is cut off by its end;
    :attr:`stop_result` says whether it was saved. Use it as a context manager, or call
    :meth:`close`.
    """

    @keyword_options(RUN_OPTIONS + SESSION_OPTIONS)
    def __init__(self, **o: Unpack[SessionOptions]):
        self._binary = find_nsbox(o["nsbox"])
        for option in ("stdout_file", "stderr_file"):
            if o[option] is not None:
                raise ValueError(f"a Session takes no {option}: 'nsbox session start' refuses "
                                 "--stdout-file and --stderr-file (each step's output is in its "
                                 "Result, and streams to on_stdout/on_stderr)")
        # isolation: as run_python_code's (--isolation).
        extra_args = _file_args(o["extra_args"], None, None, o["isolation"])
        args = _option_args(o["timeout"], o["memory"], o["cpus"], o["pids_limit"], o["env"],
                            o["rootfs"], o["output_limit"], o["network"], extra_args)
        args += _default_rootfs_args(self._binary, o["rootfs"], extra_args)
        if o["idle_timeout"] is not None:
            args += ["--idle-timeout", _number(o["idle_timeout"], "idle_timeout")]
        if o["lifetime"] is not None:
            args += ["--lifetime", _number(o["lifetime"], "lifetime")]
        if o["name"] is not None:
            args += ["--name", o["name"]]
        if o["workspace"] is not None:
            if not isinstance(o["workspace"], str) or not o["workspace"]:
                raise TypeError("workspace must be a non-empty str (the workspace's name)")
            args += ["--workspace", o["workspace"]]
        # The audit log, as for a run (nsbox runs with a cleared environment: on its command
        # line). Every step is a record of its own.
        log = os.environ.get("NSBOX_LOG") if o["log"] is None else o["log"]
        if log:
            args += ["--log", os.fspath(log)]
        self._cmd: List[str] = [self._binary, "session", "start", "--json", *args]
        # nsbox's own environment is its few variables; the program's travel on --env-fd
        # (never in nsbox's environment, where LD_PRELOAD would run in nsbox itself).
        self._env = _nsbox_env()
        self._records = _env_records(o["env"])
        self._timeout = o["timeout"]
        files = o["files"]
        _check_files(files)
        self._files = files
        # Each step's defaults (a step's own None takes them); memory and files are the
        # session's, a step may give its own.
        self._steps: Dict[str, Any] = {x.name: o[x.name] for x in _STEP if x.name not in
                                       ("memory", "files")}
        self._steps.update(memory=None, files=None)
        _copy_out_paths(self._steps["copy_out"])
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

    def _step_options(self, o: Dict[str, Any]) -> Dict[str, Any]:
        """A step's options: its own, else the session's."""
        o = {name: (self._steps[name] if o[name] is None else o[name]) for name in self._steps}
        _copy_out_paths(o["copy_out"])
        _check_files(o["files"])
        return o

    @staticmethod
    def _by_cli(o: Mapping[str, Any]) -> bool:
        """Whether a step goes through `nsbox session exec` (copy-out, a lower memory limit,
        files) rather than straight to the socket."""
        return bool(o["copy_out"]) or o["copy_out_dir"] is not None or \
            o["memory"] is not None or o["files"] is not None

    @staticmethod
    def _streams(o: Mapping[str, Any]) -> Optional[_Streams]:
        if o["on_stdout"] is None and o["on_stderr"] is None:
            return None
        return _Streams(o["on_stdout"], o["on_stderr"])

    def _call(self, request: bytes, timeout: _Timeout,
              streams: Optional[_Streams] = None) -> Result:
        if not self.socket_path:
            raise NsboxError("the session is not started (use it in a with block)",
                             step="session")
        wait = self._wait(timeout)
        lines = _Lines(streams)
        answer = None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(wait)
            try:
                s.connect(self.socket_path)
            except OSError as e:
                raise NsboxError(f"session {self.id} is not running ({e.strerror or e}): it was "
                                 "stopped, killed, or reached its idle or lifetime limit",
                                 step="session", errno=e.errno) from e
            got = False
            try:
                try:
                    s.sendall(request)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the session did not take it: its answer says why
                while answer is None:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        break
                    got = True
                    answer = lines.feed(chunk)
            except socket.timeout as e:
                raise NsboxError(f"no answer from session {self.id} within {wait:g} s (the "
                                 f"step's timeout and {_MARGIN:g} s more): the step may still "
                                 "run, or wait behind another client's step",
                                 step="session") from e
            except OSError as e:
                if not got:
                    raise NsboxError(f"session {self.id} closed the connection without an "
                                     f"answer ({e.strerror or e}): it was stopped, killed, or "
                                     "reached its idle or lifetime limit",
                                     step="session", errno=e.errno) from e
        return _answer(answer if answer is not None else lines.rest())

    def _cli_step(self, code: Optional[str], argv: Optional[List[str]],
                  o: Mapping[str, Any]) -> Result:
        """A step with copy_out, files or its own lower memory: through ``nsbox session exec
        ID`` (_exec_step())."""
        if not self.socket_path:
            raise NsboxError("the session is not started (use it in a with block)",
                             step="session")
        return _exec_step([self._binary, "session", "exec", str(self.id), "--json"], code,
                          argv, o, self._env, self._wait(o["timeout"]), f"session {self.id}",
                          "session")

    @keyword_options(_STEP, step=True, refused=_STEP_REFUSED)
    def run_code(self, code: str, **o: Unpack[StepOptions]) -> Result:
        """Run Python code in the session's interpreter as a notebook cell in its ``__main__``:
        variables, imports and open files of earlier steps are there, and the value of a last
        expression, ``display()`` and figures are in Result.outputs (see
        :func:`nsbox.run_python_code`'s ``cell``). A timeout raises KeyboardInterrupt in the
        code; an interpreter that ignores it is restarted (the result's raw["interpreter"] says
        "restarted").

        Each option left None is the Session's. timeout, output_limit: this step's. stdin:
        what sys.stdin reads during the step (else nothing). on_stdout, on_stderr: called with
        the step's output as it comes (str), in the calling thread; the Result holds all of it
        (a piece the session could not send at once, this side being slow, is only there).
        copy_out: sandbox paths (one or a list) copied out when the step has ended by itself,
        as for :func:`nsbox.run`: Result.files maps each file's sandbox path to its bytes, and
        copy_out_dir keeps the copies in a directory of yours too. files: ``{relative_name:
        str | bytes}`` copied into /work before the step. memory: a lower limit for this step
        only (``--memory``; one above the session's raises NsboxError); under rlimits the
        interpreter keeps it for good, so it is ended after the step and the next one starts
        fresh (a warning says so). A step with copy_out, files or memory goes through ``nsbox
        session exec``: its callbacks get the output when it has ended."""
        o = self._step_options(o)
        streams = self._streams(o)
        if self._by_cli(o):
            return _replay(self._cli_step(code, None, o), streams)
        return self._call(_request("code", {"code": code}, o["timeout"], o["output_limit"],
                                   o["stdin"], streams is not None), o["timeout"], streams)

    @keyword_options(_STEP, step=True, refused=_STEP_REFUSED)
    def run(self, argv: Sequence[str], **o: Unpack[StepOptions]) -> Result:
        """Run a program in the session's sandbox (as ``nsbox session exec ID -- ARGV``).
        stdin: what the program reads on its stdin (else /dev/null). The other options as for
        :meth:`run_code`."""
        argv = _argv(argv)
        o = self._step_options(o)
        streams = self._streams(o)
        if self._by_cli(o):
            return _replay(self._cli_step(None, argv, o), streams)
        return self._call(_request("exec", {"argv": argv}, o["timeout"], o["output_limit"],
                                   o["stdin"], streams is not None), o["timeout"], streams)

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
                     stdin=_as_bytes(data, "data"), copy_out=())
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

    async def _acall(self, request: bytes, timeout: _Timeout,
                     streams: Optional[_Streams] = None) -> Result:
        if not self.socket_path:
            raise NsboxError("the session is not started (use it in an async with block)",
                             step="session")
        # The event loop's socket calls, not asyncio's streams: a stream whose write failed
        # (the session refused the connection) raises that error before the answer it holds.
        loop = asyncio.get_running_loop()
        wait = self._wait(timeout)
        lines = _Lines(streams)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.setblocking(False)
            try:
                await loop.sock_connect(s, self.socket_path)
            except OSError as e:
                raise NsboxError(f"session {self.id} is not running ({e.strerror or e}): it was "
                                 "stopped, killed, or reached its idle or lifetime limit",
                                 step="session", errno=e.errno) from e

            async def exchange() -> bytes:
                got = False
                try:
                    await loop.sock_sendall(s, request)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the session did not take it: its answer says why
                try:
                    while True:
                        chunk = await loop.sock_recv(s, 1 << 20)
                        if not chunk:
                            break
                        got = True
                        answer = lines.feed(chunk)
                        if answer is not None:
                            return answer
                except OSError as e:
                    if not got:
                        raise NsboxError(f"session {self.id} closed the connection without an "
                                         f"answer ({e.strerror or e}): it was stopped, killed, "
                                         "or reached its idle or lifetime limit",
                                         step="session", errno=e.errno) from e
                return lines.rest()

            try:
                line = await asyncio.wait_for(exchange(), wait)
            except asyncio.TimeoutError as e:
                raise NsboxError(f"no answer from session {self.id} within {wait:g} s (the "
                                 f"step's timeout and {_MARGIN:g} s more): the step may still "
                                 "run, or wait behind another client's step",
                                 step="session") from e
        return _answer(line)

    @keyword_options(_STEP, step=True, refused=_STEP_REFUSED)
    async def arun_code(self, code: str, **o: Unpack[StepOptions]) -> Result:
        """As :meth:`run_code`, for asyncio; the callbacks are called from the event loop."""
        o = self._step_options(o)
        streams = self._streams(o)
        if self._by_cli(o):
            return _replay(await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(self._cli_step, code, None, o)), streams)
        return await self._acall(_request("code", {"code": code}, o["timeout"],
                                          o["output_limit"], o["stdin"], streams is not None),
                                 o["timeout"], streams)

    @keyword_options(_STEP, step=True, refused=_STEP_REFUSED)
    async def arun(self, argv: Sequence[str], **o: Unpack[StepOptions]) -> Result:
        """As :meth:`run`, for asyncio."""
        argv = _argv(argv)
        o = self._step_options(o)
        streams = self._streams(o)
        if self._by_cli(o):
            return _replay(await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(self._cli_step, None, argv, o)), streams)
        return await self._acall(_request("exec", {"argv": argv}, o["timeout"],
                                          o["output_limit"], o["stdin"], streams is not None),
                                 o["timeout"], streams)
