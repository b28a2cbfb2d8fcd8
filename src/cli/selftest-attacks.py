# The attack programs of `nsbox selftest` (src/cli/cmd-selftest.c), carried inside the nsbox binary.
#
#     python3 -I -B -c "$(cat selftest-attacks.py)" ATTACK ARGS...
#
# Each attack tries one thing a sandbox must stop and prints a line starting with SUCCEEDED only
# when it got it; what it could not do it prints as "blocked: ...". On stderr it says when it
# starts and when it is done ("nsbox-selftest: TRIED name", "... DONE name"), so that an attack
# that never ran, or crashed, is not taken for a blocked one. Where success can be seen from
# outside (a listener, a victim process, a file, the terminal, the caller's output, a process
# left running), `nsbox selftest` judges by that, not by this output. A nonce or tag the host
# checks comes in $NSBOX_SELFTEST_SECRET, not in the arguments, which every local user can read. Every attack is bounded, so that it is safe to run with
# a protection removed (`--ablate`) or without nsbox at all (`--control`): at most 512 MiB of
# memory, 200 processes, 64 MiB of files, 16 MiB of output, a few seconds, one process left
# behind that exits by itself after 20 s.
import os
import socket
import sys
import time

SUCCEEDED = "SUCCEEDED"


def got(what):
    print(SUCCEEDED, what, flush=True)


def blocked(what, err):
    print("blocked:", what, "->", err, flush=True)


def read_host_file(path):
    # The host path itself, then the same file name below every mount point.
    name = os.path.basename(path)
    places = [path]
    try:
        with open("/proc/self/mountinfo") as f:
            places += [os.path.join(line.split()[4], name) for line in f]
    except OSError as e:
        blocked("/proc/self/mountinfo", e)
    for p in places:
        try:
            with open(p) as f:
                got("read %s: %s" % (p, f.read().strip()))
                return
        except OSError as e:
            if p == path:
                blocked("open " + p, e)


def network_egress(port):
    nonce = os.environ.get("NSBOX_SELFTEST_SECRET", "")
    try:
        with socket.create_connection(("127.0.0.1", int(port)), timeout=3) as s:
            s.sendall(nonce.encode())
        got("sent the nonce to 127.0.0.1:%s" % port)
    except OSError as e:
        blocked("connect 127.0.0.1:%s" % port, e)


def exhaust_memory(mib):
    try:
        b = bytearray(int(mib) << 20)
        b[::4096] = b"\1" * len(range(0, len(b), 4096))  # a write to every page
        got("allocated and touched %s MiB" % mib)
    except MemoryError as e:
        blocked("allocate %s MiB" % mib, repr(e))


def fork_bomb(n):
    n, pids = int(n), []
    try:
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            pids.append(pid)
        got("forked %d processes" % n)
    except OSError as e:
        blocked("fork #%d" % (len(pids) + 1), e)
    finally:
        for pid in pids:
            os.kill(pid, 9)
        for pid in pids:
            os.waitpid(pid, 0)


def persist(directory):
    p = os.path.join(directory, "persisted.txt")
    try:
        with open(p, "w") as f:
            f.write("still here: %s\n" % os.environ.get("NSBOX_SELFTEST_SECRET", ""))
        got("wrote " + p)
    except OSError as e:
        blocked("write " + p, e)


def steal_env():
    found = [k + "=" + v for k, v in os.environ.items() if "NSBOX-CANARY" in v]
    for pid in ("self", "1"):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                found += [e.decode(errors="replace") for e in f.read().split(b"\0")
                          if b"NSBOX-CANARY" in e]
        except OSError as e:
            blocked("/proc/%s/environ" % pid, e)
    if found:
        got("environment: " + " ".join(sorted(set(found))))
    else:
        blocked("environment", "no secret in %d variables" % len(os.environ))


def inherited_fd():
    for fd in range(3, 1024):
        try:
            data = os.pread(fd, 4096, 0)
        except OSError:
            continue
        if b"NSBOX-CANARY" in data:
            got("fd %d: %s" % (fd, data.decode(errors="replace").strip()))
            return
    blocked("read descriptors 3-1023", "no secret")


def signal_outside(pid):
    try:
        os.kill(int(pid), 9)
        got("sent SIGKILL to pid " + pid)
    except OSError as e:
        blocked("kill " + pid, e)


def write_proc():
    for p in ("/proc/sysrq-trigger", "/proc/sys/kernel/core_pattern"):
        try:
            # Opened for writing, never written: that alone proves the write would go through.
            os.close(os.open(p, os.O_WRONLY))
            got("opened %s for writing" % p)
        except OSError as e:
            blocked("open %s for writing" % p, e)


def nested_userns():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        blocked("unshare(CLONE_NEWUSER)", os.strerror(ctypes.get_errno()))
        return
    with open("/proc/self/status") as f:
        caps = [line.split()[1] for line in f if line.startswith("CapEff:")][0]
    if int(caps, 16):
        got("a new user namespace with capabilities %s" % caps)
    else:
        blocked("capabilities in a new user namespace", caps)


def setuid(path):
    import subprocess
    try:
        out = subprocess.run([path], capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError as e:
        blocked("exec " + path, e)
        return
    if "euid=" in out:
        got("setuid program ran with other ids: " + out)
    else:
        blocked("setuid " + path, "ids unchanged: " + out)


def tiocsti(fd):
    import fcntl
    import termios
    fd, text = int(fd), b"echo nsbox-selftest-injected\n"
    for f in (0, 1, 2, fd):
        try:
            for ch in text:
                fcntl.ioctl(f, termios.TIOCSTI, bytes([ch]))
            got("pushed input into the terminal on fd %d" % f)
            return
        except OSError as e:
            blocked("TIOCSTI on fd %d" % f, e)
    # TIOCSTI needs the terminal to be the caller's controlling terminal: a new session can
    # take one that is nobody's.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            fcntl.ioctl(fd, termios.TIOCSCTTY, 0)
            for ch in text:
                fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
            os.write(w, b"ok")
        except OSError as e:
            os.write(w, str(e).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    msg = os.read(r, 200).decode()
    if msg == "ok":
        got("made fd %d its controlling terminal and pushed input into it" % fd)
    else:
        blocked("TIOCSCTTY and TIOCSTI on fd %d" % fd, msg)


def abstract_socket(name):
    nonce = os.environ.get("NSBOX_SELFTEST_SECRET", "")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(3)
            s.connect("\0" + name)
            s.sendall(nonce.encode())
        got("sent the nonce to the abstract socket @" + name)
    except OSError as e:
        blocked("connect @" + name, e)


def sysv_ipc(key):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    shmid = libc.shmget(ctypes.c_int(int(key)), ctypes.c_size_t(0), 0)
    if shmid < 0:
        blocked("shmget key %s" % key, os.strerror(ctypes.get_errno()))
        return
    addr = libc.shmat(shmid, None, 0o10000)  # SHM_RDONLY
    if addr in (None, ctypes.c_void_p(-1).value):
        blocked("shmat", os.strerror(ctypes.get_errno()))
        return
    got("System V shared memory: " + ctypes.string_at(addr, 64).split(b"\0")[0].decode())


def hostname():
    name = socket.gethostname()
    try:
        socket.sethostname(name)  # its own name again: proof enough, and no harm
        got("set the hostname (%s)" % name)
    except OSError as e:
        blocked("sethostname", e)


def fill_tmp(directory, mib):
    p = os.path.join(directory, "nsbox-selftest-fill")
    chunk, written = b"x" * (1 << 20), 0
    try:
        with open(p, "wb") as f:
            for _ in range(int(mib)):
                f.write(chunk)
                written += 1
        got("wrote %s MiB to %s" % (mib, directory))
    except OSError as e:
        blocked("write to %s after %d MiB" % (directory, written), e)
    finally:
        try:
            os.unlink(p)
        except OSError:
            pass


def flood_output(mib):
    chunk = b"A" * (1 << 20)
    for _ in range(int(mib)):
        sys.stdout.buffer.write(chunk)
    sys.stdout.flush()


def runaway(seconds):
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end:
        pass
    got("still running after %s s" % seconds)


def leave_process():
    # The tag is in the environment ($NSBOX_SELFTEST_SECRET), so the process left behind carries
    # it too.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            # A daemon lets go of the caller's output, as real ones do.
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.write(w, b"1")
            time.sleep(20)
        os._exit(0)
    os.waitpid(pid, 0)
    os.read(r, 1)
    print("left a process behind", flush=True)


def tmpfs_persistence(step, *directories):
    # "plant" (with the nonce): a file in each directory; "find" (a later run, without it):
    # read them back. Planting must work (no "blocked"): the run dies with it otherwise.
    nonce = os.environ.get("NSBOX_SELFTEST_SECRET", "")
    for i, d in enumerate(directories):
        p = os.path.join(d, "nsbox-selftest-kept-%d" % i)
        if step == "plant":
            with open(p, "w") as f:
                f.write("left by an earlier run: %s\n" % nonce)
            print("planted", p, flush=True)
            continue
        try:
            with open(p) as f:
                got("found %s: %s" % (p, f.read().strip()))
        except OSError as e:
            blocked("open " + p, e)


def tty_ldisc():
    # A discipline the kernel already has (/proc/tty/ldiscs), never one it would load a module
    # for: the ablated run and the control must not change the host. N_TTY itself when no
    # other is loaded: the request getting through is what the filter stops.
    import fcntl
    import pty
    import struct
    import termios
    want, name = 0, "n_tty"
    try:
        with open("/proc/tty/ldiscs") as f:
            for line in f:
                n, num = line.split()[:2]
                if int(num) != 0:
                    want, name = int(num), n
                    break
    except (OSError, ValueError):
        pass
    master, slave = pty.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSETD, struct.pack("i", want))
    except OSError as e:
        blocked("TIOCSETD %d (%s) on a new pty" % (want, name), e)
        return
    now = struct.unpack("i", fcntl.ioctl(slave, termios.TIOCGETD, b"\0" * 4))[0]
    got("TIOCSETD accepted: the pty's line discipline is %d (%s)" % (now, name))
    os.close(slave)
    os.close(master)


def inotify_outside(seconds):
    # The host writes /dev/null meanwhile (the self-test's writer): an event is something a
    # process outside the sandbox did; this program itself never touches /dev/null.
    import ctypes
    import select
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        blocked("inotify_init1", os.strerror(ctypes.get_errno()))
        return
    in_modify, in_open, in_close_write = 0x2, 0x20, 0x8
    if libc.inotify_add_watch(fd, b"/dev/null", in_modify | in_open | in_close_write) < 0:
        blocked("inotify_add_watch /dev/null", os.strerror(ctypes.get_errno()))
        return
    events = 0
    deadline = time.monotonic() + float(seconds)
    while not events and time.monotonic() < deadline:
        if select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            events += len(os.read(fd, 4096)) // 16  # each event: 16 bytes, no name
    if events:
        got("inotify events on /dev/null caused outside the sandbox: %d" % events)
    else:
        blocked("inotify events on /dev/null", "none in %s s" % seconds)


def landlock_host_dir(fd):
    # A directory of the host reached through a descriptor, not a path: the mount namespace
    # does not stand in the way, only Landlock (nothing outside the sandbox's tree opens).
    try:
        with open(os.open("secret", os.O_RDONLY, dir_fd=int(fd))) as f:
            got("read the host's %s/secret: %s" % (fd, f.read().strip()))
    except OSError as e:
        blocked("openat(%s, secret)" % fd, e)


PROGRAM = "#!/bin/sh\necho nsbox-selftest-ran\n"


def run_written(path):
    import subprocess
    try:
        out = subprocess.run([path], capture_output=True, text=True, timeout=10).stdout
    except OSError as e:
        return e
    return "ran" if "nsbox-selftest-ran" in out else "no output"


def write_program(dir_fd, name):
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755, dir_fd=dir_fd)
    os.write(fd, PROGRAM.encode())
    os.close(fd)


def landlock_tmpfs_exec(directory):
    # 1. A program written to the tmpfs (/tmp: noexec, and Landlock grants no execute there).
    path = os.path.join(directory, "nsbox-selftest-prog")
    try:
        write_program(None, path)
        res = run_written(path)
    except OSError as e:
        res = e
    if res == "ran":
        got("ran a program it wrote into %s" % directory)
        return
    blocked("exec " + path, res)
    # 2. A tmpfs of its own, without noexec: a user and mount namespace of its own (seccomp
    # refuses that; Landlock does not), then mount(2), else the new mount API's detached mount.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
        blocked("unshare", os.strerror(ctypes.get_errno()))
        return
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", "0 %d 1" % uid),
                           ("gid_map", "0 %d 1" % gid)):
            with open("/proc/self/" + name, "w") as f:
                f.write(text)
    except OSError as e:
        blocked("map ids in the new user namespace", e)
        return
    if libc.mount(b"none", directory.encode(), b"tmpfs", 0, None) == 0:
        try:
            write_program(None, path)
            res = run_written(path)
        except OSError as e:
            res = e
        if res == "ran":
            got("ran a program it wrote into a tmpfs it mounted on %s" % directory)
            return
        blocked("exec in its own tmpfs", res)
    else:
        blocked("mount a tmpfs", os.strerror(ctypes.get_errno()))
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    fs = syscall(430, b"tmpfs", 0)  # fsopen
    if fs < 0 or syscall(431, fs, 6, None, None, 0) < 0:  # fsconfig(FSCONFIG_CMD_CREATE)
        blocked("fsopen tmpfs", os.strerror(ctypes.get_errno()))
        return
    mnt = syscall(432, fs, 0, 0)  # fsmount
    if mnt < 0:
        blocked("fsmount", os.strerror(ctypes.get_errno()))
        return
    try:
        write_program(mnt, "prog")
        res = run_written("/proc/self/fd/%d/prog" % mnt)
    except OSError as e:
        res = e
    if res == "ran":
        got("ran a program it wrote into a detached tmpfs of its own")
    else:
        blocked("write and exec in a detached tmpfs", res)


def landlock_tcp(fd, port):
    # A TCP socket of the host's network namespace, unconnected, left open by the caller: the
    # sandbox's network namespace does not stand in its way, only Landlock's connect rule.
    nonce = os.environ.get("NSBOX_SELFTEST_SECRET", "")
    try:
        with socket.socket(fileno=int(fd)) as s:
            s.settimeout(3)
            s.connect(("127.0.0.1", int(port)))
            s.sendall(nonce.encode())
        got("sent the nonce to 127.0.0.1:%s through descriptor %s" % (port, fd))
    except OSError as e:
        blocked("connect descriptor %s to 127.0.0.1:%s" % (fd, port), e)


ATTACKS = {
    "read-host-file": read_host_file,
    "network-egress": network_egress,
    "memory": exhaust_memory,
    "fork-bomb": fork_bomb,
    "persistence": persist,
    "env-credentials": steal_env,
    "inherited-fd": inherited_fd,
    "signal-outside": signal_outside,
    "proc-writes": write_proc,
    "nested-userns": nested_userns,
    "setuid": setuid,
    "tiocsti": tiocsti,
    "abstract-socket": abstract_socket,
    "sysv-ipc": sysv_ipc,
    "hostname": hostname,
    "fill-tmp": fill_tmp,
    "output-flood": flood_output,
    "runaway": runaway,
    "leftover-process": leave_process,
    "tmpfs-persistence": tmpfs_persistence,
    "tty-ldisc": tty_ldisc,
    "inotify-outside": inotify_outside,
    "landlock-host-dir": landlock_host_dir,
    "landlock-tmpfs-exec": landlock_tmpfs_exec,
    "landlock-tcp": landlock_tcp,
}

if __name__ == "__main__":
    print("nsbox-selftest: TRIED", sys.argv[1], file=sys.stderr, flush=True)
    ATTACKS[sys.argv[1]](*sys.argv[2:])
    print("nsbox-selftest: DONE", sys.argv[1], file=sys.stderr, flush=True)
