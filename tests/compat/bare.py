# SPDX-License-Identifier: LGPL-2.1-or-later
"""The control of the compatibility suite: run a command in TREE without nsbox, but with the
same uid, the same view of ids and the same kind of root, so that what differs under nsbox is
nsbox's doing (its seccomp policy, its /dev, its limits), not the tree's or the ids'.

    python3 bare.py TREE RUNNER_DIR OUT_DIR -- COMMAND...

New user, mount, pid, network, IPC and UTS namespaces; inside uid and gid 65534, mapped to the
caller's ids (to 65534 for root, an unprivileged id, as nsbox maps root's runs to ids of their
own); TREE as root with a fresh /proc, the host's /dev, tmpfs /tmp, RUNNER_DIR read-only at
/mnt and OUT_DIR writable at /work/out (a directory of the tree); lo up; nsbox's environment. PID 1 waits for the command
(which is PID 2, as under nsbox's init) and exits with its status. Trusted code only: this is
the control, not a sandbox (no seccomp, the host's rlimits, the host's device nodes).
"""
import ctypes
import fcntl
import os
import signal
import socket
import struct
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 1
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
       "PYTHONUNBUFFERED": "1"}

libc = ctypes.CDLL(None, use_errno=True)


def check(r, what):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def mount(src, dst, fstype, flags, data=None):
    check(libc.mount(src and src.encode(), dst.encode(), fstype and fstype.encode(),
                     ctypes.c_ulong(flags), data and data.encode()), f"mount {dst}")


def lo_up():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sh", b"lo", 0))
        flags = struct.unpack("16sh", ifr[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def sandbox_pid1(tree, runner_dir, out_dir, argv):
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("proc", f"{tree}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount("/dev", f"{tree}/dev", None, MS_BIND | MS_REC)
    mount("tmpfs", f"{tree}/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=512m,mode=1777")
    mount(runner_dir, f"{tree}/mnt", None, MS_BIND)
    mount(None, f"{tree}/mnt", None, MS_BIND | MS_REMOUNT | MS_RDONLY)
    mount(out_dir, f"{tree}/work/out", None, MS_BIND)
    lo_up()
    socket.sethostname("nsbox")
    os.chroot(tree)
    os.chdir("/")
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)  # drops every capability (capabilities(7))
    os.umask(0o022)
    pid = os.fork()
    if pid == 0:
        # As nsbox's init: dispositions the caller ignored (SIGINT in a background job) and the
        # signal mask do not reach the command.
        for sig in range(1, signal.NSIG):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        fd = os.open("/dev/null", os.O_RDONLY)
        os.dup2(fd, 0)
        os.setpgid(0, 0)
        os.execve(argv[0] if "/" in argv[0] else "/usr/bin/" + argv[0], argv, ENV)
    while True:
        try:
            p, status = os.wait()
        except ChildProcessError:
            os._exit(125)
        if p == pid:
            os._exit(os.waitstatus_to_exitcode(status) & 0xff if os.WIFEXITED(status)
                     else 128 + os.WTERMSIG(status))


def main():
    tree, runner_dir, out_dir = (os.path.abspath(a) for a in sys.argv[1:4])
    assert sys.argv[4] == "--"
    argv = sys.argv[5:]
    outside_uid = os.getuid() or 65534
    outside_gid = os.getgid() or 65534
    r, w = os.pipe()
    r2, w2 = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        os.close(w2)
        check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                           CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        os.write(w, b"u")
        if os.read(r2, 1) != b"m":
            os._exit(125)
        pid1 = os.fork()
        if pid1 == 0:
            try:
                sandbox_pid1(tree, runner_dir, out_dir, argv)
            except BaseException as e:
                print(f"bare.py: {e}", file=sys.stderr)
                os._exit(125)
        _, status = os.waitpid(pid1, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xff)
    os.close(w)
    os.close(r2)
    if os.read(r, 1) != b"u":
        sys.exit(125)
    with open(f"/proc/{child}/setgroups", "w") as f:
        f.write("deny")
    with open(f"/proc/{child}/uid_map", "w") as f:
        f.write(f"65534 {outside_uid} 1\n")
    with open(f"/proc/{child}/gid_map", "w") as f:
        f.write(f"65534 {outside_gid} 1\n")
    os.write(w2, b"m")
    _, status = os.waitpid(child, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
