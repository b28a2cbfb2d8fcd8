# SPDX-License-Identifier: LGPL-2.1-or-later
"""Build an ``nsbox run`` command line, run it, parse its result.

Without streaming, nsbox runs with ``--json`` and its stdout is the result. With ``on_stdout``
or ``on_stderr``, it runs with ``--result-fd N``: the program's output streams on nsbox's stdout
and stderr as it comes, and the result arrives on a pipe of its own. The synchronous form waits
on a selector, the asyncio form on the running loop's readers and writers; both wait for nsbox's
exit on a pidfd. No threads either way.
"""

import asyncio
import codecs
import contextlib
import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping as _MappingABC
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from .errors import NsboxError, NsboxNotFound
from .result import Result

__all__ = ["run", "run_python_code", "arun", "arun_python_code", "find_nsbox", "FILES_DIR",
           "default_rootfs"]

#: Where the ``files`` dict appears inside the sandbox: the working directory, where code looks
#: (``pd.read_csv("sales.csv")``).
FILES_DIR = "/work"

# Seconds the Python side waits beyond ``timeout`` before it kills nsbox and gives up.
_BACKSTOP_MARGIN = 10.0

# How long a cancelled arun() gives nsbox to tear the sandbox down after `nsbox kill`'s signal
# (SIGUSR1) before it is SIGKILLed.
_CANCEL_GRACE = 5.0

_Data = Union[str, bytes]
_Limit = Union[str, int, float, None]
_Timeout = Union[int, float, None]
# "none", "loopback", or the hosts of --network allow= ("pypi.org", "*.example.com:8443").
_Network = Union[str, Sequence[str]]
_Chunk = Callable[[str], Any]
_CopyOut = Union[None, str, Sequence[str]]


def find_nsbox(nsbox: Optional[str] = None) -> str:
    """Return the path of the nsbox binary to run.

    ``nsbox`` if given, else ``$NSBOX``, else ``nsbox`` on PATH. A name without a slash is
    looked up on PATH. Raises :class:`NsboxNotFound` if there is no such executable.
    """
    name = nsbox if nsbox is not None else os.environ.get("NSBOX") or "nsbox"
    if not name:
        raise NsboxNotFound("empty path given for the nsbox binary")
    if os.sep in name:
        if os.path.isfile(name) and os.access(name, os.X_OK):
            return name
        raise NsboxNotFound(f"nsbox binary {name!r} does not exist or is not executable")
    found = shutil.which(name)
    if found is None:
        raise NsboxNotFound(
            f"{name!r} not found on PATH (install nsbox, set $NSBOX, or pass nsbox=PATH)")
    return found


def _number(value: Union[int, float], what: str) -> str:
    """Format a number the way nsbox parses it: no exponent, no 'inf' or 'nan'."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number, not {type(value).__name__}")
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, not {value!r}")
    text = repr(value)
    if "e" in text or "E" in text:
        text = format(value, ".9f").rstrip("0").rstrip(".") or "0"
    return text


def _limit(value: _Limit, what: str) -> str:
    """A limit option's value: None is 'unlimited', a string is passed on as it is."""
    if value is None:
        return "unlimited"
    if isinstance(value, str):
        return value
    return _number(value, what)


def _as_bytes(data: _Data, what: str) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    raise TypeError(f"{what} must be str or bytes, not {type(data).__name__}")


def _check_file_name(name: str) -> List[str]:
    """Split a ``files`` key into path components; refuse anything that could leave the
    files directory."""
    if not isinstance(name, str):
        raise TypeError(f"file name must be str, not {type(name).__name__}")
    if not name or "\0" in name:
        raise ValueError(f"invalid file name {name!r}")
    if name.startswith("/"):
        raise ValueError(f"file name {name!r} must be relative (it appears under {FILES_DIR})")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"invalid file name {name!r} (empty, or contains '..')")
    return parts


def _modes() -> Tuple[int, int]:
    """The modes of the directories and files that ``files`` makes, below a 0700 directory of
    the caller's: 0700 and 0600. nsbox reads them as the caller and copies them into the
    sandbox (``--copy-in``), so not even root's sandboxes, which run as another host uid, need
    to reach them."""
    return (0o700, 0o600)

def _write_file(path: str, data: bytes, mode: int = 0o600) -> None:
    """Create path (which must not exist) with exactly mode, whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), mode)
        f.write(data)


def _write_files(root: str, files: Mapping[str, _Data]) -> None:
    dir_mode, file_mode = _modes()
    os.mkdir(root, 0o700)
    os.chmod(root, dir_mode)
    for name, data in files.items():
        parts = _check_file_name(name)
        content = _as_bytes(data, f"files[{name!r}]")
        parent = root
        for part in parts[:-1]:
            parent = os.path.join(parent, part)
            if not os.path.isdir(parent):
                try:
                    os.mkdir(parent, 0o700)
                except OSError as e:
                    raise ValueError(f"cannot create directory for file {name!r}: {e}") from e
                os.chmod(parent, dir_mode)
        try:
            _write_file(os.path.join(parent, parts[-1]), content, file_mode)
        except OSError as e:
            raise ValueError(f"cannot create file {name!r}: {e}") from e


def _nsbox_env() -> Dict[str, str]:
    """The environment nsbox itself runs with: PATH, NSBOX_ROOTFS if set, XDG_RUNTIME_DIR and
    DBUS_SESSION_BUS_ADDRESS if set (where nsbox finds the systemd user manager that gives it
    a delegated cgroup for the limits, and keeps its `nsbox ps` record), and XDG_STATE_HOME
    (else ~/.local/state: where workspaces live). Nothing else: no credentials of the caller,
    and never the variables meant for the program (those travel on a descriptor, see _env_fd:
    LD_PRELOAD meant for the program would run in nsbox itself)."""
    env = {"PATH": os.environ.get("PATH") or os.defpath}
    for key in ("NSBOX_ROOTFS", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    state = os.environ.get("XDG_STATE_HOME", "")
    if not state.startswith("/"):
        state = os.path.join(os.path.expanduser("~"), ".local", "state")
    env["XDG_STATE_HOME"] = state
    return env


def _env_records(env: Optional[Mapping[str, str]]) -> bytes:
    """The program's variables as ``nsbox run --env-fd`` reads them: KEY=VALUE records, each
    ended by a NUL byte."""
    records = bytearray()
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise ValueError(f"invalid environment variable name {key!r}")
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(f"environment variable {key!r} needs a str value without NUL")
        records += f"{key}={value}".encode("utf-8", "surrogateescape") + b"\0"
    return bytes(records)


@contextlib.contextmanager
def _env_fd(records: bytes) -> Iterator[Optional[int]]:
    """A descriptor to read records from, for ``--env-fd``: a memfd (memory only, so the
    values touch neither a disk nor a command line), rewound; None if there are none. Closed
    on leaving (nsbox has read it by then)."""
    if not records:
        yield None
        return
    fd = os.memfd_create("nsbox-env", os.MFD_CLOEXEC)
    try:
        view = memoryview(records)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


def default_rootfs(binary: str) -> Optional[str]:
    """The rootfs the API gives nsbox when the caller names none: the most complete one built.
    None when ``$NSBOX_ROOTFS`` is set (nsbox uses it: the caller's choice); else the science
    profile's tree where one is built beside the nsbox binary (``build/rootfs/science/tree`` of
    a build tree, ``PREFIX/share/nsbox/rootfs-science`` of an installation: ``nsbox rootfs build
    --profile science`` makes one), recognised by its ``usr/share/nsbox/profile``; else None
    (nsbox's own default, the minimal tree)."""
    if os.environ.get("NSBOX_ROOTFS"):
        return None
    top = os.path.dirname(os.path.dirname(os.path.realpath(binary)))
    for tree in (os.path.join(top, "rootfs", "science", "tree"),
                 os.path.join(top, "share", "nsbox", "rootfs-science")):
        try:
            with open(os.path.join(tree, "usr", "share", "nsbox", "profile"),
                      encoding="utf-8", errors="replace") as f:
                if "profile=science" in f.read(4096).splitlines():
                    return tree
        except OSError:
            pass
    return None


def _default_rootfs_args(binary: str, rootfs: Optional[str],
                         extra_args: Sequence[str]) -> List[str]:
    """--rootfs for default_rootfs(), unless the caller named one."""
    if rootfs is not None or any(str(a) == "--rootfs" or str(a).startswith("--rootfs=")
                                 for a in extra_args):
        return []
    tree = default_rootfs(binary)
    return [] if tree is None else ["--rootfs", tree]


def _option_args(timeout: _Timeout, memory: _Limit, cpus: _Limit,
                 pids_limit: _Limit, env: Optional[Mapping[str, str]],
                 rootfs: Optional[str], output_limit: Optional[int], network: _Network,
                 extra_args: Sequence[str]) -> List[str]:
    if isinstance(network, str) and network not in ("none", "loopback"):
        raise ValueError(f"network must be 'none', 'loopback' or a list of hosts to allow, not "
                         f"{network!r} (the opt-out --network host goes in extra_args, "
                         "spelled out)")
    if not isinstance(network, str):
        hosts = list(network)
        if not hosts or any(not isinstance(h, str) or not h or "," in h or "\0" in h
                            for h in hosts):
            raise ValueError(f"network must list one or more host patterns without commas, "
                             f"not {network!r}")
    args = ["--timeout", "unlimited" if timeout is None else _number(timeout, "timeout"),
            "--memory", _limit(memory, "memory"),
            "--cpus", _limit(cpus, "cpus"),
            "--pids-limit", _limit(pids_limit, "pids_limit")]
    if not isinstance(network, str):
        args += ["--network", "allow=" + ",".join(hosts)]
    elif network != "none":
        args += ["--network", network]
    if rootfs is not None:
        args += ["--rootfs", os.fspath(rootfs)]
    if output_limit is not None:
        args += ["--output-limit", _number(output_limit, "output_limit")]
    # Checked here, before anything runs; _prepared sends them on --env-fd's descriptor.
    _env_records(env)
    if isinstance(extra_args, (str, bytes)):
        raise TypeError("extra_args must be a sequence of strings, not a string")
    args += [str(a) for a in extra_args]
    return args


def _error_from_json(raw: Dict[str, Any], exit_code: int, stderr: str) -> NsboxError:
    err = raw.get("error") or {}
    message = err.get("message") or f"nsbox failed with exit status {exit_code}"
    step = err.get("step")
    if step == "arguments":
        # The JSON only says "invalid arguments (see stderr)"; the reason is on stderr.
        lines = [l[len("nsbox: "):] if l.startswith("nsbox: ") else l
                 for l in stderr.splitlines()
                 if l.strip() and not l.startswith("nsbox: warning:")]
        if lines:
            message = "invalid arguments: " + "; ".join(lines)
    return NsboxError(message, step=step, errno=err.get("errno"), exit_code=exit_code,
                      stderr=stderr, raw=raw)


def _backstop(timeout: _Timeout) -> Optional[float]:
    """Seconds the Python side waits for nsbox in all, or None (no timeout: wait)."""
    return None if timeout is None else float(timeout) + _BACKSTOP_MARGIN


def _backstop_error(timeout: _Timeout) -> NsboxError:
    return NsboxError(f"nsbox did not finish within {_backstop(timeout):g} s "
                      f"(timeout {timeout:g} s + {_BACKSTOP_MARGIN:g} s); killed it",
                      step="backstop")


def _start_error(cmd: List[str], e: OSError) -> NsboxError:
    if isinstance(e, FileNotFoundError):
        return NsboxNotFound(f"cannot run nsbox {cmd[0]!r}: {e.strerror}", errno=e.errno)
    return NsboxError(f"cannot run nsbox {cmd[0]!r}: {e.strerror or e}", errno=e.errno)


def _result_from(returncode: int, result_text: bytes, stderr: str) -> Result:
    """Parse nsbox's JSON result; raise NsboxError for nsbox's own failures."""
    try:
        raw = json.loads(result_text.decode("utf-8"))
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        how = (f"was killed by signal {-returncode}" if returncode < 0
               else f"exited with status {returncode}")
        detail = stderr.strip()
        raise NsboxError(f"nsbox {how} without a valid JSON result ({e})"
                         + (f": {detail}" if detail else ""),
                         exit_code=returncode, stderr=stderr) from e

    if raw.get("status") == "error":
        raise _error_from_json(raw, returncode, stderr)
    try:
        return Result.from_json(raw, nsbox_stderr=stderr)
    except (KeyError, TypeError, ValueError) as e:
        raise NsboxError(f"nsbox printed an incomplete JSON result ({e!r})",
                         exit_code=returncode, stderr=stderr, raw=raw) from e


def _communicate(proc: "subprocess.Popen[bytes]", stdin_data: Optional[bytes],
                 timeout: _Timeout, readers: Dict[Any, str],
                 on_data: Callable[[str, bytes], None]) -> int:
    """Write stdin_data to proc's stdin, hand each read of the readers ({file or fd: name})
    to on_data(name, data) (b"" at EOF), and wait for proc to exit, all before the backstop;
    one thread, one selector. Returns the exit status. Kills proc on any exception (the
    backstop's NsboxError, or one raised by on_data) and lets it propagate.

    Unlike subprocess.run(timeout=...), whose wait polls with sleeps of growing length (about
    a millisecond lost per call), the exit is awaited on a pidfd (pidfd_open(2), Linux 5.3,
    which nsbox needs anyway)."""
    backstop = _backstop(timeout)
    deadline = None if backstop is None else time.monotonic() + backstop
    pending = memoryview(stdin_data or b"")
    sel = selectors.DefaultSelector()
    pidfd = -1
    try:
        for f, name in readers.items():
            sel.register(f, selectors.EVENT_READ, name)
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
        while True:
            if not sel.get_map():  # every pipe at EOF, and nsbox's exit seen once awaited
                if pidfd >= 0 or proc.poll() is not None:
                    break
                try:
                    pidfd = os.pidfd_open(proc.pid)
                except (AttributeError, OSError):  # no pidfd: subprocess's own wait
                    try:
                        proc.wait(None if deadline is None
                                  else max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired as e:
                        raise _backstop_error(timeout) from e
                    break
                sel.register(pidfd, selectors.EVENT_READ, "exit")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise _backstop_error(timeout)
            for key, _ in sel.select(left):
                if key.data == "exit":
                    sel.unregister(pidfd)
                    continue
                if key.data == "stdin":
                    try:
                        pending = pending[os.write(key.fd, pending[:65536]):]
                    except BlockingIOError:
                        continue
                    except (BrokenPipeError, ConnectionResetError):
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(key.fileobj)
                        proc.stdin.close()
                    continue
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                on_data(key.data, data)
        return proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        sel.close()
        if pidfd >= 0:
            os.close(pidfd)
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f is not None:
                f.close()


def _popen(cmd: List[str], stdin_data: Optional[bytes], env_fd: Optional[int],
           pass_fds: Tuple[int, ...] = ()) -> "subprocess.Popen[bytes]":
    try:
        return subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_nsbox_env(),
            close_fds=True, pass_fds=pass_fds + ((env_fd,) if env_fd is not None else ()))
    except OSError as e:
        raise _start_error(cmd, e) from e


class _Streams:
    """Hands the program's output to the callbacks as text, decoded incrementally (a UTF-8
    sequence split between two reads is kept for the next; invalid bytes become U+FFFD)."""

    def __init__(self, on_stdout: Optional[_Chunk], on_stderr: Optional[_Chunk]) -> None:
        self.callbacks = {"stdout": on_stdout, "stderr": on_stderr}
        self.decoders = {name: codecs.getincrementaldecoder("utf-8")("replace")
                         for name in self.callbacks}

    def feed(self, name: str, data: bytes) -> None:
        text = self.decoders[name].decode(data, final=not data)
        callback = self.callbacks[name]
        if text and callback is not None:
            callback(text)


class _Invocation:
    """One ``nsbox run``, started: all of it that does not depend on how its pipes are waited
    for (_communicate(), or _acommunicate() for asyncio). Without streams: ``--json``, and the
    output kept whole; with streams: ``--result-fd N``, the program's output handed to the
    callbacks as it arrives, the result read from its own pipe."""

    def __init__(self, binary: str, options: List[str], program: List[str],
                 stdin_data: Optional[bytes], env_fd: Optional[int],
                 streams: "Optional[_Streams]") -> None:
        self.streams = streams
        self.got: Dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray(),
                                          "result": bytearray()}
        self.result_r: Optional[int] = None
        if streams is None:
            self.proc = _popen([binary, "run", "--json", *options, "--", *program],
                               stdin_data, env_fd)
        else:
            self.result_r, result_w = os.pipe()
            try:
                self.proc = _popen([binary, "run", "--result-fd", str(result_w), *options,
                                    "--", *program], stdin_data, env_fd, (result_w,))
            except BaseException:
                self.close()
                raise
            finally:
                os.close(result_w)
        self.readers: Dict[Any, str] = {self.proc.stdout: "stdout", self.proc.stderr: "stderr"}
        if self.result_r is not None:
            self.readers[self.result_r] = "result"

    def on_data(self, name: str, data: bytes) -> None:
        if self.streams is not None and name != "result":
            self.streams.feed(name, data)
        else:
            self.got[name].extend(data)

    def close(self) -> None:
        if self.result_r is not None:
            os.close(self.result_r)
            self.result_r = None

    def result(self, returncode: int) -> Result:
        if self.streams is None:
            return _result_from(returncode, bytes(self.got["stdout"]),
                                self.got["stderr"].decode("utf-8", "replace"))
        return _result_from(returncode, bytes(self.got["result"]), "")


def _execute(binary: str, options: List[str], program: List[str],
             stdin_data: Optional[bytes], timeout: _Timeout, env_fd: Optional[int],
             streams: "Optional[_Streams]") -> Result:
    """Run nsbox (see _Invocation) and parse its result."""
    run = _Invocation(binary, options, program, stdin_data, env_fd, streams)
    try:
        returncode = _communicate(run.proc, stdin_data, timeout, run.readers, run.on_data)
    finally:
        run.close()
    return run.result(returncode)


async def _acommunicate(proc: "subprocess.Popen[bytes]", stdin_data: Optional[bytes],
                        timeout: _Timeout, readers: Dict[Any, str],
                        on_data: Callable[[str, bytes], None]) -> int:
    """_communicate for asyncio: the same work through the running loop's add_reader() and
    add_writer() on the pipes and on a pidfd for the exit, so no thread is involved (asyncio's
    own subprocesses wait in a watcher thread before Python 3.12). Cancelled, or when on_data
    raises, it ends the run as `nsbox kill` does (SIGUSR1: nsbox tears the sandbox down) and
    SIGKILLs nsbox if it has not exited _CANCEL_GRACE seconds later."""
    loop = asyncio.get_running_loop()
    done: "asyncio.Future[None]" = loop.create_future()
    exited: "asyncio.Future[None]" = loop.create_future()
    pending = memoryview(stdin_data or b"")
    fds = {(f if isinstance(f, int) else f.fileno()): name for f, name in readers.items()}
    open_fds = set(fds)
    watched: List[Tuple[str, int]] = []

    def fail(e: BaseException) -> None:
        if not done.done():
            done.set_exception(e)

    def check() -> None:
        if not open_fds and exited.done() and not done.done():
            done.set_result(None)

    def readable(fd: int) -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError as e:
            fail(e)
            return
        if not data:
            loop.remove_reader(fd)
            open_fds.discard(fd)
        try:
            on_data(fds[fd], data)
        except BaseException as e:  # a callback's exception ends the run
            fail(e)
        check()

    def writable(fd: int) -> None:
        nonlocal pending
        try:
            pending = pending[os.write(fd, pending[:65536]):]
        except BlockingIOError:
            return
        except (BrokenPipeError, ConnectionResetError):
            pending = pending[:0]
        if not pending:
            loop.remove_writer(fd)
            proc.stdin.close()

    def exit_seen() -> None:
        loop.remove_reader(pidfd)
        if not exited.done():
            exited.set_result(None)
        check()

    pidfd = os.pidfd_open(proc.pid)
    try:
        loop.add_reader(pidfd, exit_seen)
        watched.append(("r", pidfd))
        for fd in fds:
            os.set_blocking(fd, False)
            loop.add_reader(fd, readable, fd)
            watched.append(("r", fd))
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            loop.add_writer(proc.stdin.fileno(), writable, proc.stdin.fileno())
            watched.append(("w", proc.stdin.fileno()))
        try:
            await asyncio.wait_for(asyncio.shield(done), _backstop(timeout))
        except asyncio.TimeoutError as e:
            proc.kill()
            raise _backstop_error(timeout) from e
        except BaseException:
            # Cancelled, or a callback raised: tear the sandbox down as `nsbox kill` does.
            if proc.poll() is None:
                proc.send_signal(signal.SIGUSR1)
                try:
                    await asyncio.wait_for(asyncio.shield(exited), _CANCEL_GRACE)
                except BaseException:
                    proc.kill()
                    raise
            raise
        return proc.wait()
    finally:
        for kind, fd in watched:
            (loop.remove_reader if kind == "r" else loop.remove_writer)(fd)
        if proc.returncode is None:
            proc.kill()
            proc.wait()
        os.close(pidfd)
        for f in (proc.stdin, proc.stdout, proc.stderr):
            if f is not None and not f.closed:
                f.close()


async def _aexecute(binary: str, options: List[str], program: List[str],
                    stdin_data: Optional[bytes], timeout: _Timeout,
                    env_fd: Optional[int],
                    streams: "Optional[_Streams]") -> Result:
    """The asyncio form of _execute."""
    run = _Invocation(binary, options, program, stdin_data, env_fd, streams)
    try:
        returncode = await _acommunicate(run.proc, stdin_data, timeout, run.readers,
                                         run.on_data)
    finally:
        run.close()
    return run.result(returncode)


@contextlib.contextmanager
def _prepared(program: List[str], code: Optional[bytes], timeout: _Timeout,
              memory: _Limit, cpus: _Limit, pids_limit: _Limit,
              files: Optional[Mapping[str, _Data]], stdin: Optional[_Data],
              env: Optional[Mapping[str, str]], nsbox: Optional[str], rootfs: Optional[str],
              output_limit: Optional[int], network: _Network, extra_args: Sequence[str],
              log: Optional[str], copy_out: _CopyOut = None, copy_out_dir: Optional[str] = None,
              workspace: Optional[str] = None
              ) -> Iterator[Tuple[str, List[str], Optional[bytes], Optional[int]]]:
    """Check the arguments, write the files, and yield (nsbox binary, options, stdin for
    nsbox, the descriptor to pass for --env-fd or None); the files are removed afterwards (and
    so is what was copied out, unless into copy_out_dir)."""
    options = _option_args(timeout, memory, cpus, pids_limit, env, rootfs, output_limit,
                           network, extra_args)
    # The audit log (nsbox's --log, by default $NSBOX_LOG): nsbox itself runs with a cleared
    # environment, so it is passed on the command line.
    log = os.environ.get("NSBOX_LOG") if log is None else log
    if log:
        options += ["--log", os.fspath(log)]
    stdin_data = None if stdin is None else _as_bytes(stdin, "stdin")
    if files is not None and not isinstance(files, _MappingABC):
        raise TypeError("files must be a dict {relative_name: str | bytes}")
    if isinstance(copy_out, str):
        copy_out = [copy_out]
    copy_out = list(copy_out or [])
    for path in copy_out:
        if not isinstance(path, str) or not path.startswith("/") or ":" in path:
            raise ValueError(f"copy_out path {path!r} must be an absolute path in the sandbox "
                             "(e.g. '/work/plot.png' or '/work'), without ':'")
    if copy_out_dir is not None and not copy_out:
        raise ValueError("copy_out_dir needs copy_out: the sandbox paths to copy out")
    if workspace is not None:
        if not isinstance(workspace, str) or not workspace:
            raise TypeError("workspace must be a non-empty str (the workspace's name)")
        options += ["--workspace", workspace]
    binary = find_nsbox(nsbox)
    options += _default_rootfs_args(binary, rootfs, extra_args)
    # A private directory (0700, mkdtemp's mode) for the code and the files: nobody else on
    # the host may read them while the run lasts. The code file is read by nsbox itself, as the
    # caller (0600); so are the files, which nsbox copies into the sandbox's /work (--copy-in:
    # never a bind, so the sandbox cannot reach this directory).
    tmp: Optional[str] = None
    try:
        if files is not None or copy_out or (code is not None and stdin_data is not None):
            tmp = tempfile.mkdtemp(prefix="nsbox-")
        if copy_out:
            # Into copy_out_dir, else a directory of ours that is gone when the run is over
            # (Result.files holds the bytes by then). nsbox writes there through descriptors
            # only, never through a symlink.
            out_dir = os.path.abspath(os.fspath(copy_out_dir)) if copy_out_dir is not None \
                else os.path.join(tmp, "out")
            for path in copy_out:
                options += ["--copy-out", f"{path}:{out_dir}"]
        if files is not None:
            files_dir = os.path.join(tmp, "files")
            _write_files(files_dir, files)
            # DIR/. : the directory's contents, each file under its own name (README, --copy-in).
            options += ["--copy-in", f"{files_dir}/.:{FILES_DIR}/"]
        payload_stdin = stdin_data
        if code is not None:
            if stdin_data is None:
                options += ["--code", "-"]
                payload_stdin = code  # nsbox reads the code from its stdin
            else:
                # `--code -` and `--stdin` exclude each other: the code goes in a file.
                main = os.path.join(tmp, "main.py")
                _write_file(main, code)
                options += ["--code", main, "--stdin"]
        elif stdin_data is not None:
            options += ["--stdin"]
        with _env_fd(_env_records(env)) as env_fd:
            if env_fd is not None:
                options += ["--env-fd", str(env_fd)]
            yield binary, options, payload_stdin, env_fd
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _run(program: List[str], code: Optional[bytes], timeout: _Timeout, memory: _Limit,
         cpus: _Limit, pids_limit: _Limit, files: Optional[Mapping[str, _Data]],
         stdin: Optional[_Data], env: Optional[Mapping[str, str]], nsbox: Optional[str],
         rootfs: Optional[str], output_limit: Optional[int], network: _Network,
         extra_args: Sequence[str], log: Optional[str], on_stdout: Optional[_Chunk],
         on_stderr: Optional[_Chunk], copy_out: _CopyOut = None,
         copy_out_dir: Optional[str] = None, workspace: Optional[str] = None) -> Result:
    with _prepared(program, code, timeout, memory, cpus, pids_limit, files, stdin, env, nsbox,
                   rootfs, output_limit, network, extra_args, log, copy_out, copy_out_dir,
                   workspace) as (binary, options, data, env_fd):
        streams = None if on_stdout is None and on_stderr is None else _Streams(on_stdout,
                                                                                 on_stderr)
        return _collect_files(_execute(binary, options, program, data, timeout, env_fd,
                                       streams))


async def _arun(program: List[str], code: Optional[bytes], timeout: _Timeout, memory: _Limit,
                cpus: _Limit, pids_limit: _Limit, files: Optional[Mapping[str, _Data]],
                stdin: Optional[_Data], env: Optional[Mapping[str, str]],
                nsbox: Optional[str], rootfs: Optional[str], output_limit: Optional[int],
                network: _Network, extra_args: Sequence[str], log: Optional[str],
                on_stdout: Optional[_Chunk], on_stderr: Optional[_Chunk],
                copy_out: _CopyOut = None, copy_out_dir: Optional[str] = None,
                workspace: Optional[str] = None) -> Result:
    with _prepared(program, code, timeout, memory, cpus, pids_limit, files, stdin, env, nsbox,
                   rootfs, output_limit, network, extra_args, log, copy_out, copy_out_dir,
                   workspace) as (binary, options, data, env_fd):
        streams = None if on_stdout is None and on_stderr is None else _Streams(on_stdout,
                                                                                 on_stderr)
        return _collect_files(await _aexecute(binary, options, program, data, timeout, env_fd,
                                              streams))


def _collect_files(result: Result) -> Result:
    """Fill result.files from what nsbox copied out: {sandbox path: bytes}. Each file is read
    from where nsbox wrote it (a directory of ours or the caller's copy_out_dir), refusing a
    symlink."""
    copy_out = result.raw.get("copy_out") or {}
    result.copy_out = copy_out or None
    for entry in copy_out.get("copied") or []:
        host_path = entry.get("host_path")
        if not host_path:
            continue
        fd = os.open(host_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            result.files[str(entry["path"])] = f.read()
    return result


def _file_args(extra_args: Sequence[str], stdout_file: Optional[str],
               stderr_file: Optional[str], isolation: Optional[str] = None) -> List[str]:
    """extra_args with --stdout-file and --stderr-file (absolute: nsbox opens them as given),
    and --isolation."""
    if isinstance(extra_args, (str, bytes)):
        raise TypeError("extra_args must be a sequence of strings, not a string")
    args = [str(a) for a in extra_args]
    if isolation is not None:
        if isolation not in ("auto", "full", "landlock"):
            raise ValueError(f"isolation must be 'auto', 'full' or 'landlock', not {isolation!r}")
        args += ["--isolation", isolation]
    for option, path in (("--stdout-file", stdout_file), ("--stderr-file", stderr_file)):
        if path is not None:
            if not os.fspath(path):
                raise ValueError(f"{option[2:].replace('-', '_')} must be a file path")
            args += [option, os.path.abspath(os.fspath(path))]
    return args


def _program(argv: Sequence[str]) -> List[str]:
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv must be a list of strings, e.g. ['python3', '-c', 'print(1)']")
    program = [os.fspath(a) for a in argv]
    if not program:
        raise ValueError("argv is empty")
    return program


def _cell_args(cell: bool, extra_args: Sequence[str]) -> List[str]:
    """nsbox's options for run_python_code(cell=...): --cell runs the code as a notebook cell."""
    if not isinstance(cell, bool):
        raise TypeError("cell must be True (a notebook cell) or False (a plain script)")
    if isinstance(extra_args, (str, bytes)):
        raise TypeError("extra_args must be a sequence of strings, not a string")
    return (["--cell"] if cell else []) + list(extra_args)


def run(argv: Sequence[str], timeout: _Timeout = 10, memory: _Limit = "256m",
        cpus: _Limit = 0.5, pids_limit: _Limit = 64,
        files: Optional[Mapping[str, _Data]] = None, *,
        stdin: Optional[_Data] = None, env: Optional[Mapping[str, str]] = None,
        nsbox: Optional[str] = None, rootfs: Optional[str] = None,
        output_limit: Optional[int] = None, network: _Network = "none",
        extra_args: Sequence[str] = (), log: Optional[str] = None,
        on_stdout: Optional[_Chunk] = None, on_stderr: Optional[_Chunk] = None,
        copy_out: _CopyOut = None, copy_out_dir: Optional[str] = None,
        workspace: Optional[str] = None,
        stdout_file: Optional[str] = None, stderr_file: Optional[str] = None,
        isolation: Optional[str] = None) -> Result:
    """Run a program in a fresh nsbox sandbox and return its :class:`Result`.

    ``argv[0]`` is looked up in the sandbox's PATH inside the rootfs (``/usr/bin/python3``
    and ``python3`` both work). The options are those of :func:`run_python_code`.

    Raises :class:`NsboxError` if nsbox fails or the program cannot be started (not found:
    exit 127; not executable: 126), :class:`NsboxNotFound` if there is no nsbox binary,
    ValueError/TypeError for invalid arguments.
    """
    return _run(_program(argv), None, timeout, memory, cpus, pids_limit, files, stdin, env,
                nsbox, rootfs, output_limit, network,
                _file_args(extra_args, stdout_file, stderr_file, isolation), log, on_stdout,
                on_stderr, copy_out, copy_out_dir, workspace)


def run_python_code(code: _Data, timeout: _Timeout = 10, memory: _Limit = "256m",
                    cpus: _Limit = 0.5, pids_limit: _Limit = 64,
                    files: Optional[Mapping[str, _Data]] = None, *,
                    stdin: Optional[_Data] = None, env: Optional[Mapping[str, str]] = None,
                    nsbox: Optional[str] = None, rootfs: Optional[str] = None,
                    output_limit: Optional[int] = None, network: _Network = "none",
                    extra_args: Sequence[str] = (), log: Optional[str] = None,
                    on_stdout: Optional[_Chunk] = None,
                    on_stderr: Optional[_Chunk] = None, copy_out: _CopyOut = None,
                    copy_out_dir: Optional[str] = None,
                    workspace: Optional[str] = None,
        stdout_file: Optional[str] = None, stderr_file: Optional[str] = None,
        isolation: Optional[str] = None, cell: bool = True) -> Result:
    """Run Python source in a fresh nsbox sandbox and return its :class:`Result`.

    The code runs as a notebook cell (``cell=True``, nsbox's ``--cell``) or as the script
    ``python3 /work/main.py`` (``cell=False``), with ``/work`` as its working directory (the
    code is ``/work/main.py`` either way), as an unprivileged user, with no network, no host files, and an environment of ``PATH``,
    ``HOME=/tmp``, ``LANG=C.UTF-8``, ``PYTHONUNBUFFERED=1`` (so that what it printed before a
    timeout is kept) and ``env`` only.

    Args:
        code: the Python source (str, or bytes).
        timeout: wall-clock limit in seconds (int or float, fractions allowed); the run ends
            with status ``"timeout"``. The Python side kills nsbox if it has not finished 10 s
            later. None: no time limit (and the Python side waits as long as it takes).
        memory: memory limit in Docker's syntax (``"256m"``, ``"1g"``) or bytes as an int;
            None for no limit.
        cpus: CPU limit (``0.5`` is half a CPU); None for no limit.
        pids_limit: process limit; None for no limit.
        files: ``{relative_name: str | bytes}``; copied into the sandbox (never bound) as
            ``/work/NAME``, in the working directory (names may contain ``/`` for
            subdirectories, never ``..``
            or a leading ``/``).
        stdin: data for the program's stdin (str or bytes); by default stdin is empty.
        env: extra environment variables for the program. They reach nsbox on a descriptor
            (``--env-fd``, a memfd), never its command line, which other users can read, nor
            nsbox's own environment (LD_PRELOAD, say, is for the program only).
        nsbox: path of the nsbox binary; default ``$NSBOX``, else ``nsbox`` on PATH.
        rootfs: root filesystem (``--rootfs``); default ``$NSBOX_ROOTFS``, else the most
            complete one built (:func:`default_rootfs`: the science tree where one is built
            beside nsbox), else nsbox's own.
        output_limit: bytes of output kept per stream (nsbox's default: 4000).
        network: ``"none"`` (no network at all), ``"loopback"`` (``--network loopback``:
            only ``lo``, so the code can serve and connect to itself on 127.0.0.1 and ::1,
            and reach nothing else), or a list of hosts, e.g. ``["pypi.org",
            "files.pythonhosted.org"]`` (``--network allow=``: only an HTTP proxy that nsbox
            runs outside, named by ``HTTP_PROXY`` and ``HTTPS_PROXY``, which reaches these
            hosts on ports 80 and 443 and nothing else; ``"*.example.com"`` for the names
            below a domain, ``":PORT"`` for another port). The Result's ``network`` lists
            the connections.
        extra_args: further ``nsbox run`` options, e.g. ``["--cgroup", "required"]``.
        isolation: ``"auto"`` (nsbox's default: the full sandbox, or tier 2 with a warning),
            ``"full"`` (``--isolation full``: refuse tier 2, NsboxError) or ``"landlock"``
            (``--isolation landlock``: as auto, and where no user namespace can be made, tier 3:
            no namespaces, the host's programs behind Landlock and seccomp, much weaker); the
            Result's ``isolation`` says the tier the run got.
        log: the audit log nsbox appends a record to before and after the run (``--log``);
            default ``$NSBOX_LOG``; ``""`` for none. A run that cannot be logged does not
            start (NsboxError).
        on_stdout, on_stderr: called with each piece of the program's stdout or stderr (str;
            UTF-8 decoded, invalid bytes as U+FFFD) as it arrives, up to ``output_limit``
            bytes per stream, in the calling thread. The Result holds the same text. nsbox's
            own messages are then only in the Result (``nsbox_stderr`` is empty). An
            exception raised by a callback kills the run and propagates.
        copy_out: a sandbox path, or a list of them (``"/work/plot.png"``, ``"/work/out"``),
            copied out when the program has ended by itself (``--copy-out``; a directory
            recursively, regular files and directories only, within 64 MiB and 1000 files:
            ``extra_args=["--copy-out-max-bytes", "256m"]`` raises the caps). The files are in
            ``Result.files`` as ``{sandbox path: bytes}``; what was skipped, and why, in
            ``Result.copy_out["skipped"]``.
        copy_out_dir: where on the host the copies go (made if missing), to keep them; by
            default a private temporary directory, removed after the run.
        stdout_file, stderr_file: host paths that get the whole stream, whatever
            ``output_limit`` keeps (``--stdout-file``: made 0600 or emptied, never through a
            symlink, never inside a writable bind); ``Result.raw["stdout_file"]`` says how
            many bytes reached it and any write error.
        workspace: the name of a workspace (``--workspace``): ``/work`` starts with the files
            the last run on it left there and is saved back when the program ends by itself,
            so the steps of an agent share files without any host directory given to the
            sandbox. One run at a time per workspace (NsboxError otherwise).
        cell: True (the default): a notebook cell, as Jupyter runs one: the value of a last
            expression is displayed, ``display()`` works, matplotlib's figures are shown
            (on ``plt.show()`` and when the cell ends), top-level ``await`` works; they are
            in ``Result.outputs`` (``Result.images`` the PNGs) and an uncaught exception in
            ``Result.error``. False: a plain script (no outputs; ``Result.error`` is None).

    Returns:
        a :class:`Result`; the payload's own failures (exception, exit status, signal,
        timeout, out of memory) are reported there, not raised.

    Raises:
        NsboxError: nsbox rejected an option (e.g. ``memory="12Q"``), could not set up the
            sandbox (e.g. a missing rootfs), crashed, or hung (``step="backstop"``).
        NsboxNotFound: no nsbox binary.
        ValueError, TypeError: invalid arguments detected before running nsbox (a file name
            with ``..``, a non-finite timeout, ...).
    """
    return _run([], _as_bytes(code, "code"), timeout, memory, cpus, pids_limit, files, stdin,
                env, nsbox, rootfs, output_limit, network,
                _cell_args(cell, _file_args(extra_args, stdout_file, stderr_file, isolation)),
                log, on_stdout, on_stderr, copy_out, copy_out_dir, workspace)


async def arun(argv: Sequence[str], timeout: _Timeout = 10, memory: _Limit = "256m",
               cpus: _Limit = 0.5, pids_limit: _Limit = 64,
               files: Optional[Mapping[str, _Data]] = None, *,
               stdin: Optional[_Data] = None, env: Optional[Mapping[str, str]] = None,
               nsbox: Optional[str] = None, rootfs: Optional[str] = None,
               output_limit: Optional[int] = None, network: _Network = "none",
               extra_args: Sequence[str] = (), log: Optional[str] = None,
               on_stdout: Optional[_Chunk] = None,
               on_stderr: Optional[_Chunk] = None, copy_out: _CopyOut = None,
               copy_out_dir: Optional[str] = None, workspace: Optional[str] = None,
        stdout_file: Optional[str] = None, stderr_file: Optional[str] = None,
        isolation: Optional[str] = None) -> Result:
    """:func:`run` for asyncio: ``result = await nsbox.arun([...])``.

    nsbox's pipes and its exit (a pidfd) are watched by the running event loop (no threads);
    the callbacks are called from the event loop. Cancelling the task ends the run as ``nsbox kill`` does (the sandbox is torn down;
    SIGKILL to nsbox if it has not ended 5 s later) and raises CancelledError. Arguments,
    result and errors are those of :func:`run_python_code`.
    """
    return await _arun(_program(argv), None, timeout, memory, cpus, pids_limit, files, stdin,
                       env, nsbox, rootfs, output_limit, network,
                       _file_args(extra_args, stdout_file, stderr_file, isolation), log, on_stdout,
                       on_stderr, copy_out, copy_out_dir, workspace)


async def arun_python_code(code: _Data, timeout: _Timeout = 10, memory: _Limit = "256m",
                           cpus: _Limit = 0.5, pids_limit: _Limit = 64,
                           files: Optional[Mapping[str, _Data]] = None, *,
                           stdin: Optional[_Data] = None,
                           env: Optional[Mapping[str, str]] = None,
                           nsbox: Optional[str] = None, rootfs: Optional[str] = None,
                           output_limit: Optional[int] = None, network: _Network = "none",
                           extra_args: Sequence[str] = (), log: Optional[str] = None,
                           on_stdout: Optional[_Chunk] = None,
                           on_stderr: Optional[_Chunk] = None, copy_out: _CopyOut = None,
                           copy_out_dir: Optional[str] = None,
                           workspace: Optional[str] = None,
        stdout_file: Optional[str] = None, stderr_file: Optional[str] = None,
        isolation: Optional[str] = None, cell: bool = True) -> Result:
    """:func:`run_python_code` for asyncio: ``result = await nsbox.arun_python_code(code)``.

    As :func:`arun`; arguments, result and errors are those of :func:`run_python_code`.
    """
    return await _arun([], _as_bytes(code, "code"), timeout, memory, cpus, pids_limit, files,
                       stdin, env, nsbox, rootfs, output_limit, network,
                       _cell_args(cell, _file_args(extra_args, stdout_file, stderr_file,
                                                   isolation)), log,
                       on_stdout, on_stderr, copy_out, copy_out_dir, workspace)
