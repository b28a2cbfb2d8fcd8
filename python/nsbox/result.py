# SPDX-License-Identifier: LGPL-2.1-or-later
"""The result of one sandboxed run."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["Result", "TOOL_OUTPUT_LIMIT"]

#: How many characters of stdout/stderr :meth:`Result.as_tool_output` keeps.
TOOL_OUTPUT_LIMIT = 4000


@dataclass
class Result:
    """What happened to the payload, parsed from ``nsbox run --json``.

    Attributes:
        status: ``"exited"``, ``"signaled"``, ``"timeout"``, ``"oom"`` or ``"error"``.
        exit_code: nsbox's exit status: the program's, 128+N for signal N, 124 on timeout.
        signal: the signal that killed the program, or None.
        stdout, stderr: the captured output (at most ``output_limit`` bytes each; bytes that
            are not UTF-8 become U+FFFD).
        truncated: True if either stream was cut at the output limit.
        stdout_bytes, stderr_bytes: how many bytes the program wrote in all.
        wall_time: wall-clock time of the run in seconds.
        peak_memory: the cgroup's ``memory.peak`` in bytes, or None when the limits were
            not enforced by a cgroup (rlimit fallback).
        limits_enforced_by: ``"cgroup"``, ``"rlimit"`` or ``"none"``.
        refused_syscalls: ``{name: count}`` of the system calls the seccomp policy refused
            (what the program would need), or None where the kernel cannot report them.
        warnings: nsbox's warnings for this run, one line each: opt-outs of a protection,
            limits that fell back to rlimits, unknown names in a given policy.
        raw: the whole parsed JSON object.
        nsbox_stderr: nsbox's own stderr (e.g. its warning that limits fell back to rlimits).
    """

    status: str
    exit_code: int
    signal: Optional[int]
    stdout: str
    stderr: str
    truncated: bool
    stdout_bytes: int
    stderr_bytes: int
    wall_time: float
    peak_memory: Optional[int]
    limits_enforced_by: Optional[str]
    raw: Dict[str, Any] = field(repr=False)
    nsbox_stderr: str = field(default="", repr=False)
    refused_syscalls: Optional[Dict[str, int]] = None
    warnings: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, raw: Dict[str, Any], nsbox_stderr: str = "") -> "Result":
        """Build a Result from nsbox's parsed JSON object (raises KeyError/TypeError/ValueError
        if a field is missing or of the wrong type)."""
        cgroup = raw.get("cgroup") or {}
        peak = cgroup.get("memory_peak")
        refused = raw.get("seccomp_refused")
        return cls(
            status=str(raw["status"]),
            exit_code=int(raw["exit_code"]),
            signal=None if raw.get("signal") is None else int(raw["signal"]),
            stdout=str(raw["stdout"]),
            stderr=str(raw["stderr"]),
            truncated=bool(raw["stdout_truncated"]) or bool(raw["stderr_truncated"]),
            stdout_bytes=int(raw["stdout_bytes"]),
            stderr_bytes=int(raw["stderr_bytes"]),
            wall_time=float(raw["wall_time_ms"]) / 1000.0,
            peak_memory=None if peak is None else int(peak),
            limits_enforced_by=raw.get("limits_enforced_by"),
            refused_syscalls=None if refused is None else {
                str(e["syscall"]): int(e["count"]) for e in refused},
            warnings=[str(w) for w in raw.get("warnings") or []],
            raw=raw,
            nsbox_stderr=nsbox_stderr,
        )

    @property
    def ok(self) -> bool:
        """True if the program exited normally with status 0."""
        return self.status == "exited" and self.exit_code == 0

    def as_tool_output(self) -> str:
        """The string an agent's code-execution tool returns to the model.

        ``"EXECUTION ERROR:\\nTimed out"`` on timeout; ``"EXECUTION ERROR:\\n"`` and the first
        4000 characters of stderr for a non-zero exit status (signals and OOM kills included);
        otherwise ``"SUCCESS OUTPUT:\\n"`` and the first 4000 characters of stdout.
        """
        if self.status == "timeout":
            return "EXECUTION ERROR:\nTimed out"
        if self.exit_code != 0:
            return "EXECUTION ERROR:\n" + self.stderr[:TOOL_OUTPUT_LIMIT]
        return "SUCCESS OUTPUT:\n" + self.stdout[:TOOL_OUTPUT_LIMIT]
