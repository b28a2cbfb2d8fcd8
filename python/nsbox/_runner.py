# SPDX-License-Identifier: LGPL-2.1-or-later
"""run(), run_python_code() and their asyncio forms: one ``nsbox run`` each."""

from __future__ import annotations  # Unpack[...] below: for type checkers (Python >= 3.11)

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping as _MappingABC
from typing import TYPE_CHECKING, Any, Iterator, List, Mapping, Optional, Sequence, Tuple

from ._files import FILES_DIR, _Data, _as_bytes, _collect_files, _write_file, _write_files
from ._options import (CODE_OPTIONS, RUN_OPTIONS, _cell_args, _default_rootfs_args,
                       _env_records, _file_args, _option_args, _program, default_rootfs,
                       keyword_options)
from ._options import _number  # noqa: F401 (its old place: tests use _runner._number)
from ._process import _Streams, _aexecute, _env_fd, _execute, find_nsbox
from .result import Result

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import CodeOptions, RunOptions

__all__ = ["run", "run_python_code", "arun", "arun_python_code", "find_nsbox", "FILES_DIR",
           "default_rootfs"]


@contextlib.contextmanager
def _prepared(program: List[str], code: Optional[bytes], o: Mapping[str, Any]
              ) -> Iterator[Tuple[str, List[str], Optional[bytes], Optional[int]]]:
    """Check the arguments, write the files, and yield (nsbox binary, options, stdin for
    nsbox, the descriptor to pass for --env-fd or None); the files are removed afterwards (and
    so is what was copied out, unless into copy_out_dir). o: the run's options (RUN_OPTIONS),
    every one given."""
    timeout, env, extra_args, stdin, files = (o["timeout"], o["env"], o["extra_args"],
                                              o["stdin"], o["files"])
    copy_out, copy_out_dir, workspace, log = (o["copy_out"], o["copy_out_dir"], o["workspace"],
                                              o["log"])
    extra_args = _file_args(extra_args, o["stdout_file"], o["stderr_file"], o["isolation"])
    if code is not None:
        extra_args = _cell_args(o["cell"], extra_args)
    options = _option_args(timeout, o["memory"], o["cpus"], o["pids_limit"], env, o["rootfs"],
                           o["output_limit"], o["network"], extra_args)
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
    binary = find_nsbox(o["nsbox"])
    options += _default_rootfs_args(binary, o["rootfs"], extra_args)
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


def _streams(o: Mapping[str, Any]) -> Optional[_Streams]:
    if o["on_stdout"] is None and o["on_stderr"] is None:
        return None
    return _Streams(o["on_stdout"], o["on_stderr"])


def _run(program: List[str], code: Optional[bytes], o: Mapping[str, Any]) -> Result:
    with _prepared(program, code, o) as (binary, options, data, env_fd):
        return _collect_files(_execute(binary, options, program, data, o["timeout"], env_fd,
                                       _streams(o)))


async def _arun(program: List[str], code: Optional[bytes], o: Mapping[str, Any]) -> Result:
    with _prepared(program, code, o) as (binary, options, data, env_fd):
        return _collect_files(await _aexecute(binary, options, program, data, o["timeout"],
                                              env_fd, _streams(o)))


@keyword_options(RUN_OPTIONS)
def run(argv: Sequence[str], **o: Unpack[RunOptions]) -> Result:
    """Run a program in a fresh nsbox sandbox and return its :class:`Result`.

    ``argv[0]`` is looked up in the sandbox's PATH inside the rootfs (``/usr/bin/python3``
    and ``python3`` both work). The options are those of :func:`run_python_code`.

    Raises :class:`NsboxError` if nsbox fails or the program cannot be started (not found:
    exit 127; not executable: 126), :class:`NsboxNotFound` if there is no nsbox binary,
    ValueError/TypeError for invalid arguments.
    """
    return _run(_program(argv), None, o)


@keyword_options(RUN_OPTIONS + CODE_OPTIONS)
def run_python_code(code: _Data, **o: Unpack[CodeOptions]) -> Result:
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
    return _run([], _as_bytes(code, "code"), o)


@keyword_options(RUN_OPTIONS)
async def arun(argv: Sequence[str], **o: Unpack[RunOptions]) -> Result:
    """:func:`run` for asyncio: ``result = await nsbox.arun([...])``.

    nsbox's pipes and its exit (a pidfd) are watched by the running event loop (no threads);
    the callbacks are called from the event loop. Cancelling the task ends the run as ``nsbox kill`` does (the sandbox is torn down;
    SIGKILL to nsbox if it has not ended 5 s later) and raises CancelledError. Arguments,
    result and errors are those of :func:`run_python_code`.
    """
    return await _arun(_program(argv), None, o)


@keyword_options(RUN_OPTIONS + CODE_OPTIONS)
async def arun_python_code(code: _Data, **o: Unpack[CodeOptions]) -> Result:
    """:func:`run_python_code` for asyncio: ``result = await nsbox.arun_python_code(code)``.

    As :func:`arun`; arguments, result and errors are those of :func:`run_python_code`.
    """
    return await _arun([], _as_bytes(code, "code"), o)
