# SPDX-License-Identifier: LGPL-2.1-or-later
"""The result of one sandboxed run, and the text a model is told about it."""

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Union

from . import _outputs

__all__ = ["Result", "TOOL_OUTPUT_LIMIT", "tool_text", "collapse_cr", "cut_marker"]

#: How many characters of each stream :meth:`Result.as_tool_output` shows at most (nsbox itself
#: keeps ``output_limit`` bytes per stream, 4000 by default).
TOOL_OUTPUT_LIMIT = 4000

# Hints for the model, by the name of a system call the seccomp policy refused: what it means
# and what would allow it.
_REFUSAL_HINTS = {
    "socket": "the sandbox has no network: sockets are refused (network=[\"pypi.org\", ...] "
              "reaches the hosts named through nsbox's proxy; network=\"loopback\" allows "
              "sockets on 127.0.0.1 and ::1 only)",
}

# nsbox's notes name the command's options; shown through this API they name its keywords
# (``--memory 256m`` -> ``memory="256m"``), the ones a caller of run() or Session() can pass.
_CLI_OPTIONS = re.compile(r"--(memory|timeout|cpus|pids-limit|output-limit)(?![\w-])"
                          r"(?: (\d+(?:\.\d+)?)([kmgKMG]?)\b)?")


def _api_option(m: "re.Match[str]") -> str:
    name = m.group(1).replace("-", "_")
    if not m.group(2):
        return f"{name}="
    return f'{name}="{m.group(2)}{m.group(3)}"' if m.group(3) else f"{name}={m.group(2)}"


# C0 controls but tab and newline, DEL and C1 controls: terminal escapes (ESC [ ...), NUL and
# the like, which a model would only be confused by and some model APIs refuse.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def collapse_cr(text: str) -> str:
    """``text`` with each line's carriage-return updates collapsed to what a terminal would
    show at the end: ``"10%\\r50%\\r100%"`` becomes ``"100%"`` (a progress bar's last state),
    a shorter update overwrites the start of a longer one, and CR LF is a newline."""
    if "\r" not in text:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if "\r" in line:
            parts = line.rstrip("\r").split("\r")
            shown = parts[0]
            for part in parts[1:]:
                shown = part + shown[len(part):]
            lines[i] = shown
    return "\n".join(lines)


def cut_marker(cut_bytes: int, cut_lines: int) -> str:
    """The line that stands where output was cut: ``[... 14,731 bytes, 212 lines cut ...]``."""
    return f"[... {cut_bytes:,} bytes, {cut_lines:,} lines cut ...]"


def tool_text(text: str) -> str:
    """``text`` with every control character but tab and newline written as ``\\xNN`` (ESC
    becomes ``\\x1b``, NUL ``\\x00``), so that terminal escapes, NUL bytes and carriage
    returns reach a model as visible text. U+FFFD (bytes that were not UTF-8) stays."""
    return _CONTROL.sub(lambda m: "\\x%02x" % ord(m.group()), text)



def _cut(raw: Dict[str, Any], name: str) -> Optional[Dict[str, int]]:
    """What nsbox cut between a stream's start and its end (``NAME_cut``), with ``at``: the
    index in the joined text where the end begins."""
    cut = raw.get(f"{name}_cut")
    if not isinstance(cut, dict):
        return None
    return {"bytes": int(cut["bytes"]), "lines": int(cut["lines"]), "at": len(str(raw[name]))}


@dataclass
class Result:
    """What happened to the payload, parsed from nsbox's JSON result.

    Attributes:
        status: ``"exited"``, ``"signaled"``, ``"timeout"``, ``"oom"`` (the cgroup's OOM
            killer) or ``"killed"`` (``nsbox kill``).
        exit_code: nsbox's exit status: the program's, 128+N for signal N, 124 on timeout.
        signal: the signal that killed the program, or None.
        stdout, stderr: the captured output (at most ``output_limit`` bytes each; bytes that
            are not UTF-8 become U+FFFD). Over the limit, its start and its end, half the
            limit each, one after the other: ``stdout_cut`` says where and how much lay
            between.
        stdout_cut, stderr_cut: None when nothing was cut; else ``{"bytes", "lines", "at"}``:
            the bytes and the newlines cut between the start and the end, and ``at`` the index
            in ``stdout`` where the end begins (``stdout[:at]`` is the start).
        truncated: True if either stream was cut at the output limit.
        files_written: the regular files the program created or changed in /work, copied out
            or not: ``[{"path": "/work/out.csv", "size": 120, "sha256": "..." or None}]`` (at
            most 100; ``raw["files_written_unlisted"]`` counts the rest), or None when nsbox
            could not tell (a timeout, a kill, an older nsbox).
        stdout_bytes, stderr_bytes: how many bytes the program wrote in all.
        wall_time: wall-clock time of the run in seconds.
        peak_memory: the cgroup's ``memory.peak`` in bytes, or None when the limits were
            not enforced by a cgroup (rlimit fallback).
        limits_enforced_by: ``"cgroup"``, ``"rlimit"`` or ``"none"``.
        refused_syscalls: ``{name: count}`` of the system calls the seccomp policy refused
            (what the program would need), or None where the kernel cannot report them.
        warnings: nsbox's warnings for this run, one line each: opt-outs of a protection,
            limits that fell back to rlimits, unknown names in a given policy.
        outcome_warnings: those of the warnings that explain the run's outcome and name what
            to change (a full /work or /dev/shm, a workspace not saved, copy-out incomplete,
            output that may be missing), as nsbox marked them: what :meth:`as_tool_output`
            passes on to the model.
        reason: nsbox's one sentence on how the run ended (``"exited with status 3"``,
            ``"timed out after 5 s; the sandbox was killed"``, ...).
        limit: the limit that ended the run or that it ran into, or None:
            ``{"name": "timeout"|"memory"|"pids"|"cpu"|"output", "value": number,
            "unit": "seconds"|"bytes"|"processes"|"cpu_seconds", "enforced_by": str,
            "stopped": bool}`` (``stopped``: it ended the payload, rather than the payload
            running on past it).
        notes: nsbox's further sentences about the run (a memory hint for a crash under
            rlimits, forks refused, system calls refused, truncated streams).
        note_kinds: one entry per note: None, or what the note is where code acts on it
            (``"inet_socket_refused"``, ``"module_not_found"``).
        network: with ``network=[hosts]``, what nsbox's proxy did: ``{"connections": [{"host",
            "port", "allowed", "reason", "bytes_sent", "bytes_received"}, ...],
            "connections_total", "connections_refused", "bytes_sent", "bytes_received",
            "bytes_limit_hit", "connections_limit_hit", ...}``; None otherwise.
        landlock: what Landlock restricted, ``{"abi": N, "restricts": ["fs", "net",
            "scope"]}``, or None where it was not applied (the notes say why).
        isolation: the tier of isolation the run got, ``{"tier": 1, 2 or 3, "missing":
            [...]}`` (tier 2: the full sandbox without what ``missing`` names, e.g.
            ``"user.max_* limits"`` where /proc/sys is read-only; a warning says what bounds it
            instead; tier 3, only with ``isolation="landlock"``: no namespaces, no rootfs, no
            cgroup, Landlock and seccomp only, much weaker).
        files: ``{sandbox path: bytes}`` of the files copied out (``copy_out=``), else empty.
        copy_out: nsbox's ``copy_out`` object (``copied`` with path, size and sha256 of
            each file, ``skipped`` with path and reason, ``complete``), or None.
        outputs: a notebook cell's outputs (``run_python_code()``, a session's code steps), in
            order: ``{"type": "execute_result"|"display_data", "data": {MIME: value}}``, with
            ``text/plain`` always and ``text/html``, ``text/markdown``, ``image/png`` and
            ``image/jpeg`` (base64), ``image/svg+xml``, ``application/json`` when the object
            offers them; ``"dropped": {MIME: bytes}`` for what the outputs' budget left out.
            Empty for a plain script.
        error: a cell's uncaught exception, ``{"name": "ValueError", "value": "bad",
            "traceback": [lines]}`` (the traceback without nsbox's frames), or None.
        raw: the whole parsed JSON object.
        nsbox_stderr: nsbox's own stderr (e.g. its warning that limits fell back to rlimits);
            empty for runs with ``on_stdout``/``on_stderr``, where everything nsbox says is in
            the result.
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
    reason: str = ""
    limit: Optional[Dict[str, Any]] = None
    notes: List[str] = field(default_factory=list)
    network: Optional[Dict[str, Any]] = None
    landlock: Optional[Dict[str, Any]] = None
    isolation: Optional[Dict[str, Any]] = None
    files: Dict[str, bytes] = field(default_factory=dict, repr=False)
    copy_out: Optional[Dict[str, Any]] = field(default=None, repr=False)
    stdout_cut: Optional[Dict[str, int]] = None
    stderr_cut: Optional[Dict[str, int]] = None
    files_written: Optional[List[Dict[str, Any]]] = None
    outputs: List[Dict[str, Any]] = field(default_factory=list, repr=False)
    error: Optional[Dict[str, Any]] = None
    outcome_warnings: List[str] = field(default_factory=list)
    note_kinds: List[Optional[str]] = field(default_factory=list)

    @classmethod
    def from_json(cls, raw: Dict[str, Any], nsbox_stderr: str = "") -> "Result":
        """Build a Result from nsbox's parsed JSON object (raises KeyError/TypeError/ValueError
        if a field is missing or of the wrong type)."""
        cgroup = raw.get("cgroup") or {}
        peak = cgroup.get("memory_peak")
        refused = raw.get("seccomp_refused")
        limit = raw.get("limit")
        if limit is not None and not isinstance(limit, dict):
            raise TypeError("limit is not an object")
        outputs = raw.get("outputs") or []
        if not isinstance(outputs, list):
            raise TypeError("outputs is not a list")
        # "error" is nsbox's own failure when the status is "error", else a cell's exception.
        error = raw.get("error") if raw.get("status") != "error" else None
        if error is not None and not isinstance(error, dict):
            raise TypeError("error is not an object")
        return cls(
            status=str(raw["status"]),
            exit_code=int(raw["exit_code"]),
            signal=None if raw.get("signal") is None else int(raw["signal"]),
            stdout=str(raw["stdout"]) + str(raw.get("stdout_tail") or ""),
            stderr=str(raw["stderr"]) + str(raw.get("stderr_tail") or ""),
            truncated=bool(raw["stdout_truncated"]) or bool(raw["stderr_truncated"]),
            stdout_bytes=int(raw["stdout_bytes"]),
            stderr_bytes=int(raw["stderr_bytes"]),
            wall_time=float(raw["wall_time_ms"]) / 1000.0,
            # memory.peak means something only where a cgroup held the memory limit (a leaf
            # without the memory controller reports 0).
            peak_memory=None if peak is None or (
                ((raw.get("limits") or {}).get("memory") or {}).get(
                    "enforced_by", raw.get("limits_enforced_by")) != "cgroup")
            else int(peak),
            limits_enforced_by=raw.get("limits_enforced_by"),
            refused_syscalls=None if refused is None else {
                str(e["syscall"]): int(e["count"]) for e in refused},
            warnings=[str(w) for w in raw.get("warnings") or []],
            outcome_warnings=[str(w) for w in raw.get("outcome_warnings") or []],
            reason=str(raw.get("reason") or ""),
            limit=limit,
            notes=[str(n) for n in raw.get("notes") or []],
            note_kinds=[None if k is None else str(k) for k in raw.get("note_kinds") or []],
            network=raw.get("network"),
            outputs=outputs,
            error=error,
            landlock=raw.get("landlock"),
            isolation=raw.get("isolation"),
            raw=raw,
            nsbox_stderr=nsbox_stderr,
            stdout_cut=_cut(raw, "stdout"),
            stderr_cut=_cut(raw, "stderr"),
            files_written=raw.get("files_written"),
        )

    @property
    def images(self) -> List[bytes]:
        """The PNG images among the outputs (plots, ``display(Image(...))``), decoded, in
        order."""
        return _outputs.images(self.outputs)

    def as_content(self, api: str, image_budget: int = _outputs.IMAGE_BUDGET,
                   max_images: int = _outputs.MAX_IMAGES) -> List[Dict[str, Any]]:
        """The result as content parts of a model API that takes images: the text of
        :meth:`as_tool_output` (images as placeholders), then the PNG and JPEG images of the
        outputs, in order, while they fit ``image_budget`` bytes of base64 and ``max_images``;
        the rest are named in a last text part.

        Args:
            api: ``"openai"``: ``{"type": "text"}`` and ``{"type": "image_url", "image_url":
                {"url": "data:image/png;base64,..."}}`` parts, for the user message that
                follows the tool message (Chat Completions takes images only there);
                ``"anthropic"``: ``text`` and ``image`` blocks (``source`` base64), the
                ``content`` of a ``tool_result`` block; ``"mcp"``: ``text`` and ``image``
                items (``data``, ``mimeType``) of a tool call's result.

        Raises:
            ValueError: an unknown api.
        """
        return _outputs.content(api, self.as_tool_output(), self.outputs, image_budget,
                                max_images)

    @property
    def ok(self) -> bool:
        """True if the program exited normally with status 0."""
        return self.status == "exited" and self.exit_code == 0

    def as_tool_output(self, format: Union[None, str, Callable[["Result"], str]] = None,
                       max_chars: int = TOOL_OUTPUT_LIMIT) -> str:
        """The text an agent's code-execution tool returns to the model.

        The common case, exit status 0 with nothing on stderr and nothing to note, is the
        program's stdout alone (``"(no output)"`` when there is none). Anything else says
        what happened first, in nsbox's words, then both streams, labelled, then nsbox's
        notes and hints in brackets::

            timed out after 1 s; the sandbox was killed
            [stdout]
            line 1
            ...
            [... 580,890 bytes, 9,211 lines cut ...]
            ...
            line 9300
            [stderr]
            ...
            [stdout cut: kept its first 2000 and last 2000 of 584890 bytes; ...]
            [the seccomp policy refused: socket (1)]
            [hint: the sandbox has no network: ...]

        A notebook cell's outputs (:attr:`outputs`) follow stdout, each as its ``text/plain``
        or, for an image, a placeholder such as ``[image/png 640x480, 23 KB]`` (the images
        themselves: :meth:`as_content`); in the labelled form under ``[outputs]``. When the
        cell raised and the stderr shown lacks the exception's last line (``ValueError:
        bad``), a note gives it.

        The reason names the exit status or signal, and a limit that stopped the program with
        its value (``"stopped: out of memory (limit 256 MiB, after 0.41 s); ..."``). Empty
        streams are left out. Where nsbox kept a stream's start and end (over
        ``output_limit``), a marker line stands between them; each line's carriage-return
        updates collapse to their last state (:func:`collapse_cr`: a progress bar's final
        state). Control characters other than tab and newline appear as ``\\xNN`` (see
        :func:`tool_text`); each stream shows at most ``max_chars`` characters, its first and
        last half, and says so when it was cut there. So the text is at most about
        ``2 * max_chars`` characters plus the notes, whatever the program printed.

        Args:
            format: None for the text above; a ``str.format`` template with the fields
                ``{reason}``, ``{stdout}``, ``{stderr}`` (escaped and cut as above),
                ``{outputs}`` (the cell's outputs as text), ``{notes}`` (one line per
                note), ``{status}``, ``{exit_code}``, ``{signal}``
                and ``{wall_time}`` (seconds); or a function of the Result that returns the
                text, for anything else (a subclass may also override this method).
            max_chars: characters shown of each stream (default :data:`TOOL_OUTPUT_LIMIT`).

        Returns:
            the text (str), never raising for anything the program printed.
        """
        if callable(format):
            return format(self)
        stdout = self._stream("stdout", self.stdout, self.stdout_cut, max_chars)
        stderr = self._stream("stderr", self.stderr, self.stderr_cut, max_chars)
        hints = self._hints()
        # nsbox's own note for a refused internet socket names the CLI's option; the hint
        # names the API's (network="loopback"): one of them.
        kinds = self.note_kinds + [None] * (len(self.notes) - len(self.note_kinds))
        notes = ([_CLI_OPTIONS.sub(_api_option, n) for n, kind in zip(self.notes, kinds)
                  if not (hints and kind == "inet_socket_refused")] +
                 hints + [n for n in (stdout[1], stderr[1]) if n] + self._copy_notes() +
                 self._outcome_warnings())
        shown = self._stream("outputs", _outputs.outputs_text(self.outputs), None, max_chars)
        notes += self._error_notes(stderr[0]) + ([shown[1]] if shown[1] else [])
        if format is not None:
            return format.format(reason=self.reason, stdout=stdout[0], stderr=stderr[0],
                                 outputs=shown[0],
                                 notes="\n".join(notes), status=self.status,
                                 exit_code=self.exit_code, signal=self.signal,
                                 wall_time=self.wall_time)
        if self.ok and not stderr[0] and not notes:
            if shown[0]:
                return "\n".join(t[:-1] if t.endswith("\n") else t
                                 for t in (stdout[0], shown[0]) if t)
            return stdout[0] or "(no output)"
        parts = [self.reason or f"status {self.status}, exit status {self.exit_code}"]
        for label, (text, _) in (("stdout", stdout), ("outputs", shown), ("stderr", stderr)):
            if text:
                parts.append(f"[{label}]")
                parts.append(text[:-1] if text.endswith("\n") else text)
        if not stdout[0] and not stderr[0] and not shown[0]:
            parts.append("[no output]")
        parts += [f"[{n}]" for n in notes]
        return "\n".join(parts)

    def _stream(self, name: str, text: str, cut: Optional[Dict[str, int]], max_chars: int):
        """(the stream's text for a model, a note if it was cut to max_chars). Each line's
        carriage-return updates collapse to their last state (:func:`collapse_cr`); where nsbox
        cut the stream, a marker line (:func:`cut_marker`) stands between its start and its
        end. Over max_chars, the first and the last half of max_chars are shown, with a marker
        between them: the last lines (a traceback's final exception line) always stay."""
        if cut is None:
            joined, at = collapse_cr(text), None
        else:
            head = collapse_cr(text[:cut["at"]])
            joined, at = head + collapse_cr(text[cut["at"]:]), len(head)
        if len(joined) <= max_chars:
            spans = [(0, len(joined))]
        else:
            spans = [(0, max_chars - max_chars // 2), (len(joined) - max_chars // 2, len(joined))]
        out: List[str] = []

        def marker(line: str) -> None:
            if out and out[-1] and not out[-1].endswith("\n"):
                out.append("\n")
            out.append(line + "\n")

        marked = False
        for i, (a, b) in enumerate(spans):
            if i > 0:
                gap = a - spans[i - 1][1]
                if at is not None and spans[i - 1][1] <= at <= a:
                    marker(cut_marker(cut["bytes"], cut["lines"]))
                    marked = True
                marker(f"[... {gap:,} characters cut for this output ...]")
            if at is not None and not marked and a <= at <= b and \
                    (a < at < b or at == len(joined) or i == len(spans) - 1):
                out += [tool_text(joined[a:at])]
                marker(cut_marker(cut["bytes"], cut["lines"]))
                out.append(tool_text(joined[at:b]))
                marked = True
            else:
                out.append(tool_text(joined[a:b]))
        note = None
        if len(spans) > 1:
            note = (f"{name} cut for this output: its first {spans[0][1]} and last "
                    f"{spans[1][1] - spans[1][0]} characters are shown")
        return "".join(out), note

    def _error_notes(self, stderr_shown: str) -> List[str]:
        """A cell's exception in one line when the stderr shown lacks it (cut, or lost): what
        the model reads always ends with the exception that ended the cell."""
        line = tool_text(_outputs.error_line(self.error))
        name = str((self.error or {}).get("name", ""))
        # Python's last line of a traceback is "Name: value" (a SyntaxError's without the
        # position that str() of it adds).
        if not line or any(l == name or l.startswith(name + ":")
                           for l in stderr_shown.splitlines()):
            return []
        return [f"the cell raised {line}"]

    def _outcome_warnings(self) -> List[str]:
        """nsbox's warnings that explain this run's outcome and name what to change (a full
        /work or /dev/shm, a workspace not saved, copy-out incomplete, output that may be
        missing); not the ones about the host or the caller's options (the rlimit fallback,
        opt-outs), which the model cannot act on. nsbox says which they are
        (``outcome_warnings``)."""
        return [tool_text(w) for w in self.outcome_warnings]

    def _copy_notes(self) -> List[str]:
        """What was not copied out, and why (the first 10), for the model."""
        skipped = (self.copy_out or {}).get("skipped") or []
        more = (self.copy_out or {}).get("skipped_unlisted") or 0
        if self.copy_out is not None and not self.copy_out.get("done"):
            return ["nothing was copied out (the program did not end by itself, or the copy "
                    "failed: see warnings)"]
        if not skipped and not more:
            return []
        listed = ", ".join(tool_text(f"{s['path']} ({s['reason']})") for s in skipped[:10])
        rest = len(skipped) - 10 + more if len(skipped) > 10 or more else 0
        return [f"not copied out: {listed}" + (f" and {rest} more" if rest > 0 else "")]

    def _hints(self) -> List[str]:
        hints = [f"hint: {_REFUSAL_HINTS[name]}" for name in (self.refused_syscalls or {})
                 if name in _REFUSAL_HINTS]
        if "module_not_found" in self.note_kinds:
            hints.append("hint: the Python API takes such a tree as rootfs=DIR (run_python_code(), "
                         "Session()); with none given it uses the science tree where one is built")
        return hints
