# SPDX-License-Identifier: LGPL-2.1-or-later
# A session's Python interpreter (session-init.c starts it as `python3 -c` inside the sandbox,
# this file after cell.py). Init sends each step on the socket at fd 4: the message "run" with
# the letters of what follows the code, stdout and stderr pipes ("i": the step's stdin, a memfd,
# else /dev/null is its stdin; "o": the outputs channel, a memfd), then a space and the outputs'
# limit in bytes; and those three to five descriptors. Each step is a notebook cell (cell.py) run
# in the real __main__, kept for the session, with the pipes at fds 1 and 2 for the step only;
# the answer is the step's exit status in decimal ("1i": KeyboardInterrupt ended it, as a
# timeout does).


def _nsbox_session(cells):
    import os
    import signal
    import socket
    import sys

    main = sys.modules["__main__"]
    for name in ("_nsbox_cells", "_nsbox_session"):
        vars(main).pop(name, None)
    run, own = cells
    # SIGINT (init's word that the step's time is up) interrupts the step's code only: one that
    # comes after the code has ended must not end the interpreter itself.
    running = [False]

    def on_sigint(signum, frame):
        if running[0]:
            raise KeyboardInterrupt

    own(on_sigint.__code__)
    own(sys._getframe().f_code)
    signal.signal(signal.SIGINT, on_sigint)
    sock = socket.socket(fileno=4)
    os.set_inheritable(4, False)
    null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    step = 0
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 64, 5)
        if not msg:
            return
        kinds, _, limit = msg[3:].decode("ascii", "replace").partition(" ")
        if not msg.startswith(b"run") or len(fds) != 3 + len(kinds):
            for fd in fds:
                os.close(fd)
            continue
        code_fd, out, err = fds[:3]
        extra = dict(zip(kinds, fds[3:]))
        outputs = extra.get("o", -1)
        step += 1
        answer = b"1"
        try:
            with os.fdopen(code_fd, "rb") as f:
                code = f.read()
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.close(out)
            os.close(err)
            if "i" in extra:
                os.dup2(extra["i"], 0)
                os.close(extra["i"])
                sys.stdin = open(0, "r", closefd=False)

            def start():
                running[0] = True
            status, interrupted = run(code, "<cell %d>" % step, outputs,
                                      int(limit) if limit.isdigit() else 0, vars(main), start)
            running[0] = False
            answer = b"%d%s" % (status, b"i" if interrupted else b"")
        except KeyboardInterrupt:
            answer = b"1i"
        finally:
            running[0] = False
            if outputs >= 0:
                os.close(outputs)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            # The step's pipes end here: the supervisor reads them to their end. Its stdin too
            # (what it left unread is not the next step's).
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.dup2(null, 0)
            sys.stdin = open(0, "r", closefd=False)  # nothing the last one buffered
        sock.send(answer)


_nsbox_session(_nsbox_cells())
