# SPDX-License-Identifier: LGPL-2.1-or-later
"""Run untrusted code in an nsbox sandbox from Python.

A thin wrapper around ``nsbox run`` (standard library only)::

    import nsbox
    result = nsbox.run_python_code("print(6 * 7)")
    result.stdout            # '42\\n'
    result.as_tool_output()  # '42\\n'
    result = await nsbox.arun_python_code("print(1)", on_stdout=print)   # asyncio, streaming
    with nsbox.Session(memory="512m") as s:   # one live sandbox, state kept between steps
        s.run_code("x = 6")
        s.run_code("print(x * 7)").stdout    # '42\n'
    with nsbox.Pool(size=4, preload=["pandas"]) as pool:   # fresh sandboxes, imports done
        pool.run_python_code("import pandas as pd; print(pd.__version__)")
"""

from ._runner import (FILES_DIR, arun, arun_python_code, default_rootfs, find_nsbox, run,
                      run_python_code)
from .errors import NsboxError, NsboxNotFound
from .result import TOOL_OUTPUT_LIMIT, Result, collapse_cr, cut_marker, tool_text
from .pool import Pool
from .session import Session

__all__ = ["run", "run_python_code", "arun", "arun_python_code", "find_nsbox", "Result",
           "NsboxError", "NsboxNotFound", "FILES_DIR", "TOOL_OUTPUT_LIMIT", "tool_text", "Session",
           "Pool", "default_rootfs", "collapse_cr", "cut_marker"]
__version__ = "0.1.0"
