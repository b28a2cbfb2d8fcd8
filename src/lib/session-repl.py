# SPDX-License-Identifier: LGPL-2.1-or-later
# A session's Python interpreter (session-init.c starts it as `python3 -c` inside the sandbox).
# Init sends each step on the socket at fd 4: the message "run" with three or four descriptors,
# the code (a memfd), the step's stdout and stderr pipes, and its stdin (a memfd) if it has
# one (else /dev/null is its stdin). The code runs in one globals dict
# kept for the session, with the pipes at fds 1 and 2 for the step only; the answer is the
# step's exit status in decimal ("1i": KeyboardInterrupt ended it, as a timeout does).
import os
import signal
import socket
import sys
import traceback

# SIGINT (init's word that the step's time is up) interrupts the step's code only: one that
# comes after the code has ended must not end the interpreter itself.
_running = False


def _on_sigint(signum, frame):
    if _running:
        raise KeyboardInterrupt


def _print_exception(e):
    # Without this file's own frame: the traceback starts in the step's code.
    tb = e.__traceback__.tb_next if e.__traceback__ else None
    traceback.print_exception(type(e), e, tb)


def _serve():
    global _running
    signal.signal(signal.SIGINT, _on_sigint)
    sock = socket.socket(fileno=4)
    os.set_inheritable(4, False)
    null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    scope = {"__name__": "__main__", "__builtins__": __builtins__}
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 16, 4)
        if not msg:
            return
        if len(fds) not in (3, 4):
            for fd in fds:
                os.close(fd)
            continue
        code_fd, out, err = fds[:3]
        answer = b"1"
        try:
            with os.fdopen(code_fd, "rb") as f:
                code = f.read()
            os.dup2(out, 1)
            os.dup2(err, 2)
            os.close(out)
            os.close(err)
            if len(fds) == 4:
                os.dup2(fds[3], 0)
                os.close(fds[3])
                sys.stdin = open(0, "r", closefd=False)
            status, interrupted = 0, False
            try:
                _running = True
                exec(compile(code, "<step>", "exec"), scope)
                _running = False
            except SystemExit as e:
                if e.code is None:
                    status = 0
                elif isinstance(e.code, int):
                    status = e.code & 0xFF
                else:
                    print(e.code, file=sys.stderr)
                    status = 1
            except KeyboardInterrupt as e:
                _print_exception(e)
                status, interrupted = 1, True
            except BaseException as e:
                _print_exception(e)
                status = 1
            answer = b"%d%s" % (status, b"i" if interrupted else b"")
        except KeyboardInterrupt:
            answer = b"1i"
        finally:
            _running = False
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


_serve()
