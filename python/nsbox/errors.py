# SPDX-License-Identifier: LGPL-2.1-or-later
"""Exceptions raised by the nsbox Python API."""

from typing import Any, Dict, Optional

__all__ = ["NsboxError", "NsboxNotFound"]


class NsboxError(Exception):
    """nsbox itself failed: it could not set up the sandbox, could not start the program
    (exit 126/127), rejected its arguments, crashed, printed no valid JSON, or did not finish
    in time.

    The payload's own failures (an exception, a non-zero exit, a signal, a timeout) are not
    errors: they come back as a :class:`nsbox.Result`.

    Attributes:
        message: what went wrong (``result["error"]["message"]`` when nsbox said so).
        step: the step that failed (``"rootfs"``, ``"arguments"``, ``"execve"``, ...) or None.
        errno: the errno nsbox reported (0 when there is none) or None.
        exit_code: nsbox's exit status (125, 126, 127, ...) or None if it did not exit.
        stderr: nsbox's own stderr (its diagnostics; never the payload's output).
        raw: the parsed JSON result, or None when there was none.
    """

    def __init__(self, message: str, *, step: Optional[str] = None,
                 errno: Optional[int] = None, exit_code: Optional[int] = None,
                 stderr: str = "", raw: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.step = step
        self.errno = errno
        self.exit_code = exit_code
        self.stderr = stderr
        self.raw = raw

    def __str__(self) -> str:
        return self.message

    def as_tool_output(self) -> str:
        """The text for a model when nsbox could not run its code: ``"nsbox could not run
        the code: "`` and nsbox's message (e.g. a missing rootfs, a program not found). It is
        rarely the model's to fix, but it must not be told nothing."""
        from .result import tool_text  # the same escaping as the program's output
        return tool_text(f"nsbox could not run the code: {self.message}")


class NsboxNotFound(NsboxError):
    """The nsbox binary was not found: not at the given path, not in ``$NSBOX``, not on PATH."""
