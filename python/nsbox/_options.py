# SPDX-License-Identifier: LGPL-2.1-or-later
"""The run options: one table of them (RUN_OPTIONS), shared by run(), run_python_code(), their
async forms, Session and Pool, and how each becomes ``nsbox`` arguments."""

import inspect
import math
import os
from typing import (Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple,
                    TypedDict, TypeVar, Union, cast)

from ._files import _Data

_Limit = Union[str, int, float, None]
_Timeout = Union[int, float, None]
# "none", "loopback", or the hosts of --network allow= ("pypi.org", "*.example.com:8443").
_Network = Union[str, Sequence[str]]
_Chunk = Callable[[str], Any]
_CopyOut = Union[None, str, Sequence[str]]


class Option(NamedTuple):
    """One run option: its keyword, its default, its type, and where it applies:
    ``"sandbox"``: set when the sandbox starts (a Session's or a Pool's for all its steps);
    ``"step"``: each step's own, a Session's or a Pool's value being the steps' default;
    ``"client"``: this side's (which nsbox binary)."""
    name: str
    default: Any
    annotation: Any
    applies: str


#: The options of run(), run_python_code(), arun(), arun_python_code() and Session(), in this
#: order, keyword-only, with these defaults. Adding an option here adds it to all of them; the
#: functions read it from the mapping of options they are given (_prepared(), Session).
RUN_OPTIONS: Tuple[Option, ...] = (
    Option("timeout", 10, _Timeout, "step"),
    Option("memory", "256m", _Limit, "sandbox"),  # a step may lower it
    Option("cpus", 0.5, _Limit, "sandbox"),
    Option("pids_limit", 64, _Limit, "sandbox"),
    Option("files", None, Optional[Mapping[str, _Data]], "sandbox"),
    Option("stdin", None, Optional[_Data], "step"),
    Option("env", None, Optional[Mapping[str, str]], "sandbox"),
    Option("nsbox", None, Optional[str], "client"),
    Option("rootfs", None, Optional[str], "sandbox"),
    Option("output_limit", None, Optional[int], "step"),
    Option("network", "none", _Network, "sandbox"),
    Option("extra_args", (), Sequence[str], "sandbox"),
    Option("log", None, Optional[str], "sandbox"),
    Option("on_stdout", None, Optional[_Chunk], "step"),
    Option("on_stderr", None, Optional[_Chunk], "step"),
    Option("copy_out", None, _CopyOut, "step"),
    Option("copy_out_dir", None, Optional[str], "step"),
    Option("workspace", None, Optional[str], "sandbox"),
    Option("stdout_file", None, Optional[str], "sandbox"),
    Option("stderr_file", None, Optional[str], "sandbox"),
    Option("isolation", None, Optional[str], "sandbox"),
)

class RunOptions(TypedDict, total=False):
    """RUN_OPTIONS for type checkers and editors (``**options: Unpack[RunOptions]``): the same
    names and types, kept equal to the table by test_options."""
    timeout: _Timeout
    memory: _Limit
    cpus: _Limit
    pids_limit: _Limit
    files: Optional[Mapping[str, _Data]]
    stdin: Optional[_Data]
    env: Optional[Mapping[str, str]]
    nsbox: Optional[str]
    rootfs: Optional[str]
    output_limit: Optional[int]
    network: _Network
    extra_args: Sequence[str]
    log: Optional[str]
    on_stdout: Optional[_Chunk]
    on_stderr: Optional[_Chunk]
    copy_out: _CopyOut
    copy_out_dir: Optional[str]
    workspace: Optional[str]
    stdout_file: Optional[str]
    stderr_file: Optional[str]
    isolation: Optional[str]


class CodeOptions(RunOptions, total=False):
    """RunOptions and CODE_OPTIONS (run_python_code(), arun_python_code())."""
    cell: bool


class StepOptions(TypedDict, total=False):
    """The options of a Session's step (STEP_OPTIONS); None is the Session's value."""
    timeout: _Timeout
    memory: _Limit
    files: Optional[Mapping[str, _Data]]
    stdin: Optional[_Data]
    output_limit: Optional[int]
    on_stdout: Optional[_Chunk]
    on_stderr: Optional[_Chunk]
    copy_out: _CopyOut
    copy_out_dir: Optional[str]


class StepCodeOptions(StepOptions, total=False):
    """StepOptions and CODE_OPTIONS (a Pool's run_python_code(), arun_python_code())."""
    cell: bool


#: Python code's own option (run_python_code(), arun_python_code()).
CODE_OPTIONS: Tuple[Option, ...] = (Option("cell", True, bool, "step"),)

#: What ``isolation=`` takes: --isolation's values.
ISOLATION_VALUES: Tuple[str, ...] = ("auto", "full", "landlock")

#: The options a Session's step (run_code(), run()) and a Pool's run take for themselves; None
#: (their default) is the Session's or the Pool's value.
STEP_OPTIONS: Tuple[str, ...] = tuple(o.name for o in RUN_OPTIONS if o.applies == "step") + (
    "memory", "files")

RUN_DEFAULTS: Dict[str, Any] = {o.name: o.default for o in RUN_OPTIONS + CODE_OPTIONS}


_F = TypeVar("_F", bound=Callable[..., Any])


def keyword_options(options: Sequence[Option], step: bool = False,
                    refused: Optional[Mapping[str, str]] = None) -> Callable[[_F], _F]:
    """Give a function ``def f(self_or_code, **options)`` the keyword-only parameters of
    options (each defaulting to None with step=True: the Session's value), as its signature
    says (help(), inspect). An option passed by position, or a name that is not one, is a
    TypeError, as in Python; a name in refused (a run option this function cannot honour) is
    one that says why (refused[name]). The function gets every option, its default filled
    in."""
    def wrap(fn: _F) -> _F:
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD]
        params = own + [inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY,
                                          default=None if step else o.default,
                                          annotation=Optional[o.annotation] if step
                                          else o.annotation)
                        for o in options]
        full = sig.replace(parameters=params)
        # Checked by hand, not with full.bind() (100 us a call): at most the function's own
        # arguments by position, no keyword that is neither its own nor an option.
        npos = len(own)
        allowed = frozenset(full.parameters)
        defaults = {o.name: None if step else o.default for o in options}

        def bind(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Dict[str, Any]:
            if len(args) > npos:
                raise TypeError(f"{fn.__qualname__}() takes {npos} positional argument"
                                f"{'s' if npos != 1 else ''} but {len(args)} were given (the "
                                "options are keyword-only)")
            if not allowed.issuperset(kwargs):
                name = next(k for k in kwargs if k not in allowed)
                if refused is not None and name in refused:
                    raise TypeError(f"{fn.__qualname__}() does not take {name}=: "
                                    f"{refused[name]}")
                raise TypeError(f"{fn.__qualname__}() got an unexpected keyword argument "
                                f"{name!r}")
            o = dict(defaults)
            o.update(kwargs)
            return o

        if inspect.iscoroutinefunction(fn):
            async def afn(*args: Any, **kwargs: Any) -> Any:
                return await fn(*args, **bind(args, kwargs))
            wrapper: Callable[..., Any] = afn
        else:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return fn(*args, **bind(args, kwargs))
        for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(wrapper, attr, getattr(fn, attr))
        wrapper.__signature__ = full  # type: ignore[attr-defined]
        return cast(_F, wrapper)  # the same signature, as type checkers see fn's
    return wrap


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


def _file_args(extra_args: Sequence[str], stdout_file: Optional[str],
               stderr_file: Optional[str], isolation: Optional[str] = None) -> List[str]:
    """extra_args with --stdout-file and --stderr-file (absolute: nsbox opens them as given),
    and --isolation."""
    if isinstance(extra_args, (str, bytes)):
        raise TypeError("extra_args must be a sequence of strings, not a string")
    args = [str(a) for a in extra_args]
    if isolation is not None:
        if isolation not in ISOLATION_VALUES:
            raise ValueError(f"isolation must be one of {', '.join(map(repr, ISOLATION_VALUES))}"
                             f", not {isolation!r}")
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
