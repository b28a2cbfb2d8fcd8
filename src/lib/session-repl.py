# SPDX-License-Identifier: LGPL-2.1-or-later
# A session's Python interpreter (session-init.c starts it as `python3 -c` inside the sandbox,
# this file after cell.py). Init sends each step on the socket at fd 4: the message "run" with
# the letters of what follows the code, stdout and stderr pipes ("i": the step's stdin, a memfd,
# else /dev/null is its stdin; "o": the outputs channel, a memfd), then a space and the outputs'
# limit in bytes; and those three to five descriptors. Each step is a notebook cell (cell.py) run
# in the real __main__, kept for the session, with the pipes at fds 1 and 2 for the step only;
# the answer is the step's exit status in decimal ("1i": KeyboardInterrupt ended it, as a
# timeout does). "E" and an errno, instead of the first answer: the interpreter could not make
# itself non-dumpable, and serves no step.


def _nsbox_nondumpable():
    """0 once this process is not dumpable, else an errno.

    A program step of the session is a process of the same uid in the same sandbox: while the
    interpreter is dumpable, it may open /proc/PID/mem (or ptrace it, where the policy allows)
    and read or rewrite the variables and code of every later step. Not dumpable, both are
    refused to a process without CAP_SYS_PTRACE over it (ptrace(2), "Ptrace access mode
    checking"; proc(5), /proc/pid/mem). init cannot set it for the interpreter: execve() makes a
    process dumpable again (prctl(2), PR_SET_DUMPABLE), so it is set here, before any step's
    code. Children fork()ed by a step keep it; what they execve() is dumpable, as the
    interpreter's own program steps are."""
    import errno
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, SUID_DUMP_DISABLE
            return ctypes.get_errno() or errno.EPERM
        if libc.prctl(3, 0, 0, 0, 0) != 0:  # PR_GET_DUMPABLE: it holds
            return errno.EPERM
    except (ImportError, OSError, AttributeError):
        return errno.ELIBACC  # no ctypes (libffi) in the rootfs's Python
    return 0


def _nsbox_session(cells):
    import os
    import signal
    import socket
    import sys

    err = _nsbox_nondumpable()
    if err:
        # Said, then kept until init has taken the word and closed its end (an exit now could
        # be seen before the word).
        sock = socket.socket(fileno=4)
        sock.send(b"E%d" % err)
        while sock.recv(64):
            pass
        return
    main = sys.modules["__main__"]
    for name in ("_nsbox_cells", "_nsbox_session", "_nsbox_nondumpable"):
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
