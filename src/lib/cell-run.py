# SPDX-License-Identifier: LGPL-2.1-or-later
# `nsbox run --cell`: the payload is `python3 -c CELL LIMIT FILE ARGS...` (cell.py, then this),
# which runs FILE as one cell with sys.argv [FILE, ARGS...]; its outputs go to fd 4 (a memfd the
# supervisor reads when the run has ended), at most LIMIT bytes.


def _nsbox_run(cells):
    import os
    import sys

    main = vars(sys.modules["__main__"])
    for name in ("_nsbox_cells", "_nsbox_run"):
        main.pop(name, None)
    run, own = cells
    limit, path = int(sys.argv[1]), sys.argv[2]
    sys.argv = sys.argv[2:]
    main["__file__"] = path
    # As for `python3 FILE`: the script's directory first on the path (-c put "" there).
    if sys.path and sys.path[0] == "":
        sys.path[0] = os.path.dirname(path)
    with open(path, "rb") as f:
        source = f.read()
    try:
        os.set_inheritable(4, False)
    except OSError:
        pass
    # A timeout's SIGINT (init forwards nsbox's signals) stops the cell with KeyboardInterrupt,
    # as Python's own handler does, but from this file (whose frames tracebacks leave out).
    status, _ = run(source, path, 4, limit, main)
    sys.stdout.flush()
    sys.exit(status)


_nsbox_run(_nsbox_cells())
