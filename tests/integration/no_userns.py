# SPDX-License-Identifier: LGPL-2.1-or-later
"""Run a command where no user namespace can be made, as on a host that turned them off:

    python3 no_userns.py -- COMMAND [ARGS...]

The command runs in a user namespace of its own whose user.max_user_namespaces is 0: the ucount
sysctls are per user namespace, and its owner may lower them (kernel/ucount.c,
set_permissions()), so nothing more can be created below it (ENOSPC). Its ids are the caller's
own: root's (0, and the ids of nsbox's uid pool, so that a run of root can switch to one of
them, which the parent maps) or an ordinary user's (mapped to itself). Exits with the command's
status; 126 if the namespace could not be set up.
"""
import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000
POOL = (2113929216, 8192)  # uidpool.h: the pool and, after it, the test suite's


def main():
    if len(sys.argv) < 3 or sys.argv[1] != "--":
        sys.exit(__doc__)
    argv = sys.argv[2:]
    uid, gid = os.geteuid(), os.getegid()
    libc = ctypes.CDLL(None, use_errno=True)
    ready_r, ready_w = os.pipe()
    mapped_r, mapped_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(mapped_w)
        if libc.unshare(CLONE_NEWUSER) != 0:
            os.write(2, f"no_userns: unshare: {os.strerror(ctypes.get_errno())}\n".encode())
            os._exit(126)
        if uid != 0:
            # An ordinary user maps only its own ids, itself, after denying setgroups.
            for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                               ("gid_map", f"{gid} {gid} 1")):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        os.write(ready_w, b"x")
        if os.read(mapped_r, 1) != b"x":
            os._exit(126)
        try:
            with open("/proc/sys/user/max_user_namespaces", "w") as f:
                f.write("0")
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(2, f"no_userns: {e}\n".encode())
        os._exit(126)
    os.close(ready_w)
    os.close(mapped_r)
    ok = os.read(ready_r, 1) == b"x"
    if ok and uid == 0:
        try:
            maps = f"0 0 1\n{POOL[0]} {POOL[0]} {POOL[1]}\n"
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{pid}/{name}", "w") as f:
                    f.write(maps)
        except OSError as e:
            os.write(2, f"no_userns: {e}\n".encode())
            ok = False
    if ok:
        os.write(mapped_w, b"x")
    os.close(mapped_w)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status) if ok else 126)


if __name__ == "__main__":
    main()
