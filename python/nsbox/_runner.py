# SPDX-License-Identifier: LGPL-2.1-or-later
"""Build an ``nsbox run --json`` command line, run it, parse its result."""

import json
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping as _MappingABC
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import NsboxError, NsboxNotFound
from .result import Result

__all__ = ["run", "run_python_code", "find_nsbox", "FILES_DIR"]

#: Where the ``files`` dict appears inside the sandbox.
FILES_DIR = "/work/files"

# Seconds the Python side waits beyond ``timeout`` before it kills nsbox and gives up.
_BACKSTOP_MARGIN = 10.0

_Data = Union[str, bytes]
_Limit = Union[str, int, float, None]


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
    the caller's that nobody else can enter.

    An ordinary user's sandbox runs as that user: 0700 and 0600. Root's runs as another host
    uid (the host's nobody), which reaches the bound directory through the bind, never through
    the 0700 directory above it: it needs the bits for others, 0755 and 0644, and the 0700
    directory keeps every other host user out all the same.
    """
    return (0o755, 0o644) if os.geteuid() == 0 else (0o700, 0o600)


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


def _nsbox_env(passed: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment nsbox itself runs with: PATH, NSBOX_ROOTFS if set, XDG_RUNTIME_DIR and
    DBUS_SESSION_BUS_ADDRESS if set (where nsbox finds the systemd user manager that gives it
    a delegated cgroup for the limits, and keeps its `nsbox ps` record), and the variables
    meant for the program (passed on with `-e KEY`, so their values never appear on nsbox's
    command line). Nothing else: no credentials of the caller."""
    env = {"PATH": os.environ.get("PATH") or os.defpath}
    for key in ("NSBOX_ROOTFS", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    env.update(passed or {})
    return env


def _option_args(timeout: Union[int, float], memory: _Limit, cpus: _Limit,
                 pids_limit: _Limit, env: Optional[Mapping[str, str]],
                 rootfs: Optional[str], output_limit: Optional[int], network: str,
                 extra_args: Sequence[str]) -> List[str]:
    if network not in ("none", "loopback"):
        raise ValueError(f"network must be 'none' or 'loopback', not {network!r} (the opt-out "
                         "--network host goes in extra_args, spelled out)")
    args = ["--timeout", _number(timeout, "timeout"),
            "--memory", _limit(memory, "memory"),
            "--cpus", _limit(cpus, "cpus"),
            "--pids-limit", _limit(pids_limit, "pids_limit")]
    if network != "none":
        args += ["--network", network]
    if rootfs is not None:
        args += ["--rootfs", os.fspath(rootfs)]
    if output_limit is not None:
        args += ["--output-limit", _number(output_limit, "output_limit")]
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise ValueError(f"invalid environment variable name {key!r}")
        if key.startswith("NSBOX_"):
            raise ValueError(f"{key!r}: NSBOX_* variables configure nsbox itself")
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(f"environment variable {key!r} needs a str value without NUL")
        args += ["-e", key]  # the value travels in nsbox's environment, not its argv
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


def _execute(cmd: List[str], stdin_data: Optional[bytes], timeout: float,
             passed_env: Optional[Mapping[str, str]] = None) -> Result:
    backstop = timeout + _BACKSTOP_MARGIN
    try:
        proc = subprocess.run(
            cmd,
            input=stdin_data,
            stdin=subprocess.DEVNULL if stdin_data is None else None,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=_nsbox_env(passed_env), close_fds=True, timeout=backstop)
    except subprocess.TimeoutExpired as e:
        # subprocess.run has SIGKILLed nsbox already.
        raise NsboxError(f"nsbox did not finish within {backstop:g} s "
                         f"(timeout {timeout:g} s + {_BACKSTOP_MARGIN:g} s); killed it",
                         step="backstop") from e
    except FileNotFoundError as e:
        raise NsboxNotFound(f"cannot run nsbox {cmd[0]!r}: {e.strerror}",
                            errno=e.errno) from e
    except OSError as e:
        raise NsboxError(f"cannot run nsbox {cmd[0]!r}: {e.strerror or e}",
                         errno=e.errno) from e

    stderr = proc.stderr.decode("utf-8", "replace")
    try:
        raw = json.loads(proc.stdout.decode("utf-8"))
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited with status {proc.returncode}")
        detail = stderr.strip()
        raise NsboxError(f"nsbox {how} without a valid JSON result ({e})"
                         + (f": {detail}" if detail else ""),
                         exit_code=proc.returncode, stderr=stderr) from e

    if raw.get("status") == "error":
        raise _error_from_json(raw, proc.returncode, stderr)
    try:
        return Result.from_json(raw, nsbox_stderr=stderr)
    except (KeyError, TypeError, ValueError) as e:
        raise NsboxError(f"nsbox printed an incomplete JSON result ({e!r})",
                         exit_code=proc.returncode, stderr=stderr, raw=raw) from e


def _run(program: List[str], code: Optional[bytes], timeout: Union[int, float],
         memory: _Limit, cpus: _Limit, pids_limit: _Limit,
         files: Optional[Mapping[str, _Data]], stdin: Optional[_Data],
         env: Optional[Mapping[str, str]], nsbox: Optional[str], rootfs: Optional[str],
         output_limit: Optional[int], network: str, extra_args: Sequence[str]) -> Result:
    options = _option_args(timeout, memory, cpus, pids_limit, env, rootfs, output_limit,
                           network, extra_args)
    stdin_data = None if stdin is None else _as_bytes(stdin, "stdin")
    if files is not None and not isinstance(files, _MappingABC):
        raise TypeError("files must be a dict {relative_name: str | bytes}")
    binary = find_nsbox(nsbox)
    # A private directory (0700, mkdtemp's mode) for the code and the files: nobody else on
    # the host may read them while the run lasts. The code file is read by nsbox itself, as the
    # caller (0600); the files are bound into the sandbox (modes: _modes()).
    tmp: Optional[str] = None
    try:
        if files is not None or (code is not None and stdin_data is not None):
            tmp = tempfile.mkdtemp(prefix="nsbox-")
        if files is not None:
            files_dir = os.path.join(tmp, "files")
            _write_files(files_dir, files)
            options += ["-v", f"{files_dir}:{FILES_DIR}:ro"]
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
        cmd = [binary, "run", "--json", *options, "--", *program]
        return _execute(cmd, payload_stdin, float(timeout), env)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def run(argv: Sequence[str], timeout: Union[int, float] = 10, memory: _Limit = "256m",
        cpus: _Limit = 0.5, pids_limit: _Limit = 64,
        files: Optional[Mapping[str, _Data]] = None, *,
        stdin: Optional[_Data] = None, env: Optional[Mapping[str, str]] = None,
        nsbox: Optional[str] = None, rootfs: Optional[str] = None,
        output_limit: Optional[int] = None, network: str = "none",
        extra_args: Sequence[str] = ()) -> Result:
    """Run a program in a fresh nsbox sandbox and return its :class:`Result`.

    ``argv[0]`` is looked up in the sandbox's PATH inside the rootfs (``/usr/bin/python3``
    and ``python3`` both work). The options are those of :func:`run_python_code`.

    Raises :class:`NsboxError` if nsbox fails or the program cannot be started (not found:
    exit 127; not executable: 126), :class:`NsboxNotFound` if there is no nsbox binary,
    ValueError/TypeError for invalid arguments.
    """
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv must be a list of strings, e.g. ['python3', '-c', 'print(1)']")
    program = [os.fspath(a) for a in argv]
    if not program:
        raise ValueError("argv is empty")
    return _run(program, None, timeout, memory, cpus, pids_limit, files, stdin, env, nsbox,
                rootfs, output_limit, network, extra_args)


def run_python_code(code: _Data, timeout: Union[int, float] = 10, memory: _Limit = "256m",
                    cpus: _Limit = 0.5, pids_limit: _Limit = 64,
                    files: Optional[Mapping[str, _Data]] = None, *,
                    stdin: Optional[_Data] = None, env: Optional[Mapping[str, str]] = None,
                    nsbox: Optional[str] = None, rootfs: Optional[str] = None,
                    output_limit: Optional[int] = None, network: str = "none",
                    extra_args: Sequence[str] = ()) -> Result:
    """Run Python source in a fresh nsbox sandbox and return its :class:`Result`.

    The code runs as ``python3 /work/main.py`` with ``/work`` as its working directory, as an
    unprivileged user, with no network, no host files, and an environment of ``PATH``,
    ``HOME=/tmp``, ``LANG=C.UTF-8`` and ``env`` only.

    Args:
        code: the Python source (str, or bytes).
        timeout: wall-clock limit in seconds (fractions allowed); the run ends with status
            ``"timeout"``. The Python side kills nsbox if it has not finished 10 s later.
        memory: memory limit in Docker's syntax (``"256m"``, ``"1g"``) or bytes as an int;
            None for no limit.
        cpus: CPU limit (``0.5`` is half a CPU); None for no limit.
        pids_limit: process limit; None for no limit.
        files: ``{relative_name: str | bytes}``; the code sees them read-only as
            ``/work/files/NAME`` (names may contain ``/`` for subdirectories, never ``..``
            or a leading ``/``).
        stdin: data for the program's stdin (str or bytes); by default stdin is empty.
        env: extra environment variables for the program. They reach nsbox through its
            environment (``-e KEY``), never its command line, which other users can read.
        nsbox: path of the nsbox binary; default ``$NSBOX``, else ``nsbox`` on PATH.
        rootfs: root filesystem (``--rootfs``); default ``$NSBOX_ROOTFS``, else nsbox's own.
        output_limit: bytes of output kept per stream (nsbox's default: 4000).
        network: ``"none"`` (no network at all) or ``"loopback"`` (``--network loopback``:
            only ``lo``, so the code can serve and connect to itself on 127.0.0.1 and ::1,
            and reach nothing else).
        extra_args: further ``nsbox run`` options, e.g. ``["--cgroup", "required"]``.

    Returns:
        a :class:`Result`; the payload's own failures (exception, exit status, signal,
        timeout, out of memory) are reported there, not raised.

    Raises:
        NsboxError: nsbox rejected an option (e.g. ``memory="12Q"``), could not set up the
            sandbox (e.g. a missing rootfs), crashed, or hung.
        NsboxNotFound: no nsbox binary.
        ValueError, TypeError: invalid arguments detected before running nsbox (a file name
            with ``..``, a non-finite timeout, ...).
    """
    source = _as_bytes(code, "code")
    return _run([], source, timeout, memory, cpus, pids_limit, files, stdin, env, nsbox,
                rootfs, output_limit, network, extra_args)
