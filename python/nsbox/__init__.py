# SPDX-License-Identifier: LGPL-2.1-or-later
"""Run untrusted code in an nsbox sandbox from Python.

A thin wrapper around ``nsbox run --json`` (standard library only)::

    import nsbox
    result = nsbox.run_python_code("print(6 * 7)")
    result.stdout            # '42\\n'
    result.as_tool_output()  # 'SUCCESS OUTPUT:\\n42\\n'
"""

from ._runner import FILES_DIR, find_nsbox, run, run_python_code
from .errors import NsboxError, NsboxNotFound
from .result import TOOL_OUTPUT_LIMIT, Result

__all__ = ["run", "run_python_code", "find_nsbox", "Result", "NsboxError", "NsboxNotFound",
           "FILES_DIR", "TOOL_OUTPUT_LIMIT"]
__version__ = "0.1.0"
