# SPDX-License-Identifier: LGPL-2.1-or-later
"""Start ``nsbox`` and wait for it: its pipes, its exit and its JSON result.

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
import os
import selectors
import shutil
import signal
import subprocess
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ._options import _Chunk, _Timeout
from .errors import NsboxError, NsboxNotFound
from .result import Result

# Seconds the Python side waits beyond ``timeout`` before it kills nsbox and gives up.
_BACKSTOP_MARGIN = 10.0

# How long a cancelled arun() gives nsbox to tear the sandbox down after `nsbox kill`'s signal
# (SIGUSR1) before it is SIGKILLed.
_CANCEL_GRACE = 5.0


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
