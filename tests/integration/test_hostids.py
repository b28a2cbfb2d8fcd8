# SPDX-License-Identifier: LGPL-2.1-or-later
"""The host ids a sandbox runs as: root's runs each get ids of their own from nsbox's range
(src/lib/uidpool.c), an ordinary user's map to the user themself."""
import fcntl
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import unittest

from nsboxtest import NSBOX, NsboxTestCase, nsbox, nsbox_json, processes_with, wait_until

ROOT = os.geteuid() == 0
# These tests fill the pool, hold its slots and kill every process of an id: they use the test
# suite's own pool (NSBOX_UID_POOL=test: the 4096 ids after the real pool's, a lock file of
# their own), so that root's real runs on this host meanwhile neither find the pool full nor
# share an id with a test (src/lib/uidpool.h).
BASE, SIZE = 0x7E000000 + 4096, 4096
LOCK = "/run/nsbox/uid-pool-test"
_saved_pool = None


def setUpModule():
    global _saved_pool
    _saved_pool = os.environ.get("NSBOX_UID_POOL")
    os.environ["NSBOX_UID_POOL"] = "test"
    if ROOT:  # the first run makes the pool's lock file
        subprocess.run([NSBOX, "run", "--cgroup", "off", "--", "true"], capture_output=True,
                       timeout=60, check=True)


def tearDownModule():
    if _saved_pool is None:
        os.environ.pop("NSBOX_UID_POOL", None)
    else:
        os.environ["NSBOX_UID_POOL"] = _saved_pool
F_OFD_GETLK, F_OFD_SETLK = 36, 37  # fcntl(2), Linux 3.15
FLOCK = "hhqqi4x"  # struct flock on 64-bit Linux: l_type, l_whence, l_start, l_len, l_pid


def in_pool(uid):
    return BASE <= uid < BASE + SIZE


def slot_held(fd, slot):
    """Whether another open file description holds slot's lock."""
    got = fcntl.fcntl(fd, F_OFD_GETLK, struct.pack(FLOCK, fcntl.F_WRLCK, 0, slot, 1, 0))
    return struct.unpack(FLOCK, got)[0] != fcntl.F_UNLCK


class PoolHolder:
    """Holds every slot of the pool that is free now but those in keep, the way running
    sandboxes would; released on exit. Keep the window short: runs of root elsewhere on the
    host find the pool full meanwhile."""

    def __init__(self, keep=()):
        self.keep = set(keep)

    def __enter__(self):
        self.fd = os.open(LOCK, os.O_RDWR | os.O_CLOEXEC)
        for slot in range(SIZE):
            if slot in self.keep:
                continue
            try:
                fcntl.fcntl(self.fd, F_OFD_SETLK, struct.pack(FLOCK, fcntl.F_WRLCK, 0, slot, 1, 0))
            except OSError:
                pass  # held by a running sandbox: not free either
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


def free_slots(n):
    """n slots no run holds now (their ids named by no passwd or group entry is for the caller
    to check where it matters)."""
    fd = os.open(LOCK, os.O_RDWR | os.O_CLOEXEC)
    try:
        found = []
        for slot in range(SIZE):
            if not slot_held(fd, slot):
                found.append(slot)
                if len(found) == n:
                    return found
    finally:
        os.close(fd)
    raise AssertionError("the pool has no free slots")


def run_as(uid, fn):
    """Run fn() in a child with real, effective and saved uid and gid uid; returns its exit
    status (fn's return value, 0…255)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os._exit(fn())
        except BaseException:
            os._exit(255)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def start_sleeper(*opts, seconds=30):
    """Start `nsbox run OPTS -- python3 -c <sleep> TOKEN`; returns (Popen, token, host pid of
    the payload)."""
    token = "nsbox-hostids-" + os.urandom(6).hex()
    p = subprocess.Popen([NSBOX, "run", "--json", *opts, "--", "python3", "-c",
                          f"import time; time.sleep({seconds})", token],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The payload is the process whose command line holds the token and is python3's.
    def payload():
        for q in processes_with(token):
            try:
                with open(f"/proc/{q}/comm") as f:
                    if f.read().startswith("python3"):
                        return q
            except OSError:
                pass
        return None
    assert wait_until(payload, timeout=10), "the payload never started"
    return p, token, payload()


def host_uid_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


# EPERM for openat(2) of "uid_map" (idmap.c writes /proc/PID/uid_map through a directory fd).
UID_MAP_SHIM = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
int openat(int dirfd, const char *path, int flags, ...)
{
    static int (*real)(int, const char *, int, ...);
    mode_t mode = 0;
    va_list ap;
    va_start(ap, flags);
    if (flags & O_CREAT)
        mode = va_arg(ap, mode_t);
    va_end(ap);
    if (!real)
        real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
    if (path && strcmp(path, "uid_map") == 0) {
        errno = EPERM;
        return -1;
    }
    return real(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));
'''


class TestRootHostIds(NsboxTestCase):
    def test_own_ids_from_the_range_not_nobody(self):
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o1777)  # writable by whatever id the run gets
            p, r = nsbox_json("-v", f"{d}:/mnt:rw", "--", "sh", "-c",
                              "cat /proc/self/uid_map /proc/self/gid_map; : > /mnt/made")
            self.assertEqual(r["status"], "exited", p.stderr)
            uid, gid = r["host_uid"], r["host_gid"]
            self.assertTrue(in_pool(uid), uid)
            self.assertNotEqual(uid, 65534)
            self.assertEqual(gid, uid)
            maps = [l.split() for l in r["stdout"].splitlines()]
            self.assertEqual(maps, [["65534", str(uid), "1"], ["65534", str(gid), "1"]])
            # What the payload creates through a writable bind belongs to the run's ids.
            st = os.stat(os.path.join(d, "made"))
            self.assertEqual((st.st_uid, st.st_gid), (uid, gid))
        st = os.stat(LOCK)
        self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o600))
        st = os.stat(os.path.dirname(LOCK))
        self.assertEqual((st.st_uid, st.st_mode & 0o7777), (0, 0o700))

    def test_a_failed_uid_map_write_is_named(self):
        # The supervisor's write of uid_map failing (here by an LD_PRELOAD shim: EPERM from
        # openat(2) of "uid_map") is the run's error, with its step and hint; since the
        # lifecycle split, "supervising the sandbox failed" replaced it.
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skip_or_fail("no C compiler for the LD_PRELOAD shim")
        with tempfile.TemporaryDirectory() as d:
            src, so = os.path.join(d, "shim.c"), os.path.join(d, "shim.so")
            with open(src, "w") as f:
                f.write(UID_MAP_SHIM)
            subprocess.run([cc, "-shared", "-fPIC", "-o", so, src, "-ldl"], check=True)
            env = dict(os.environ, LD_PRELOAD=so,
                       ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=0")
            p = nsbox("run", "--cgroup", "off", "--", "true", env=env)
            self.assertOneLineError(p, contains="writing the sandbox's uid_map/gid_map failed")
            p = nsbox("run", "--json", "--cgroup", "off", "--", "true", env=env)
            self.assertEqual(json.loads(p.stdout)["error"]["step"], "uid_map", p.stdout)

    def test_concurrent_runs_never_share_ids(self):
        procs = [subprocess.Popen([NSBOX, "run", "--json", "--", "sleep", "1"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(4)]
        results = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            results.append(json.loads(out))
            self.assertEqual(results[-1]["status"], "exited", err)
        uids = [r["host_uid"] for r in results]
        self.assertEqual(len(set(uids)), 4, uids)
        for uid in uids:
            self.assertTrue(in_pool(uid), uid)

    def test_host_nobody_cannot_signal_the_payload(self):
        # (Tracing is refused either way: a tracer outside the sandbox's user namespace needs
        # CAP_SYS_PTRACE in it, cap_ptrace_access_check(), whatever its uid.)
        def kill_it(pid):
            try:
                os.kill(pid, signal.SIGKILL)
                return 0
            except PermissionError:
                return 1

        p, token, pid = start_sleeper()
        self.assertTrue(in_pool(host_uid_of(pid)), host_uid_of(pid))
        self.assertEqual(run_as(65534, lambda: kill_it(pid)), 1,
                         "host nobody could signal root's payload")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        self.assertEqual(json.loads(out)["signal"], signal.SIGTERM, err)  # nsbox's, passed on
        # The control: mapped to the host's nobody, as root's sandboxes used to be, the same
        # kill gets through.
        p, token, pid = start_sleeper("--host-user", "65534")
        self.assertEqual(host_uid_of(pid), 65534)
        self.assertEqual(run_as(65534, lambda: kill_it(pid)), 0)
        out, err = p.communicate(timeout=30)
        self.assertEqual(json.loads(out)["signal"], signal.SIGKILL, err)

    def test_ids_go_back_to_the_pool_after_a_run(self):
        p, r = nsbox_json("--", "true")
        slot = r["host_uid"] - BASE
        fd = os.open(LOCK, os.O_RDWR | os.O_CLOEXEC)
        try:
            self.assertFalse(slot_held(fd, slot))
        finally:
            os.close(fd)
        # A later run can take them: with every other slot held, it gets the same ids.
        with PoolHolder(keep={slot}):
            p, r2 = nsbox_json("--", "true")
        self.assertEqual(r2["status"], "exited", p.stderr)
        self.assertEqual(r2["host_uid"], r["host_uid"])

    def test_ids_go_back_when_nsbox_is_killed(self):
        p, token, pid = start_sleeper()
        slot = host_uid_of(pid) - BASE
        fd = os.open(LOCK, os.O_RDWR | os.O_CLOEXEC)
        try:
            self.assertTrue(slot_held(fd, slot), "the run does not hold its slot")
            p.kill()
            p.communicate(timeout=30)
            self.assertTrue(wait_until(lambda: not processes_with(token)))
            self.assertTrue(wait_until(lambda: not slot_held(fd, slot)), "the slot leaked")
        finally:
            os.close(fd)

    def test_full_pool_fails_closed(self):
        with PoolHolder():
            p = nsbox("run", "--", "true")
        self.assertOneLineError(p, contains="--host-user")
        self.assertIn("no free id", p.stderr)

    def _run_with_user_db(self, passwd_extra, group_extra, keep, subuid=None, subgid=None,
                          nsswitch=None, setup=()):
        """nsbox run in a mount namespace whose /etc/passwd and /etc/group have extra lines
        (and /etc/subuid, /etc/subgid, /etc/nsswitch.conf the given text; setup: more shell
        commands run there first), with only the slots in keep free."""
        if not shutil.which("unshare") or os.path.exists("/var/run/nscd/socket"):
            self.skip_or_fail("needs unshare(1) and no nscd (which would answer from its cache)")
        files = {"passwd": passwd_extra, "group": group_extra}
        for name, text in (("subuid", subuid), ("subgid", subgid), ("nsswitch.conf", nsswitch)):
            if text is not None:
                if not os.path.exists(f"/etc/{name}"):
                    self.skipTest(f"no /etc/{name} to bind over")
                files[name] = text
        with tempfile.TemporaryDirectory() as d:
            binds = []
            for name, extra in files.items():
                with open(f"{d}/{name}", "w") as dst:
                    if name in ("passwd", "group"):
                        with open(f"/etc/{name}") as src:
                            dst.write(src.read())
                    dst.write(extra)
                os.chmod(f"{d}/{name}", 0o644)
                binds.append(f'mount --bind "$1/{name}" /etc/{name}')
            binds += list(setup)
            with PoolHolder(keep=keep):
                return subprocess.run(
                    ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                     " && ".join(binds) + ' && shift && exec "$@"', "sh", d, NSBOX, "run",
                     "--json", "--", "true"], capture_output=True, text=True, timeout=60)

    def test_ids_in_subordinate_ranges_are_skipped(self):
        # An id /etc/subuid or /etc/subgid hands to a user for their containers (newuidmap)
        # is not a run's: the run would share it with them.
        slot, = free_slots(1)
        uid = BASE + slot
        for subuid, subgid in ((f"alice:{uid - 5}:10\n", ""), ("", f"1000:{uid}:1\n")):
            with self.subTest(subuid=subuid, subgid=subgid):
                p = self._run_with_user_db("", "", keep={slot}, subuid=subuid, subgid=subgid)
                self.assertOneLineError(p, contains="1 named by passwd or group entries or "
                                                    "/etc/subuid, /etc/subgid ranges")
        # The control: the same slot, in no range, is taken.
        p = self._run_with_user_db("", "", keep={slot}, subuid="alice:100000:65536\n",
                                   subgid="")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["host_uid"], uid)

    def test_ids_named_by_passwd_or_group_are_skipped(self):
        slot, = free_slots(1)
        uid = BASE + slot
        for passwd, group in ((f"nsboxtest:x:{uid}:{uid}::/:/bin/false\n", ""),
                              ("", f"nsboxtest:x:{uid}:\n")):
            with self.subTest(passwd=passwd, group=group):
                p = self._run_with_user_db(passwd, group, keep={slot})
                self.assertOneLineError(p, contains="1 named by passwd or group entries")
        # The control: the same slot, named by nobody, is taken.
        p = self._run_with_user_db("", "", keep={slot})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["host_uid"], uid)

    def test_ids_named_by_userdb_records_are_skipped(self):
        # nsswitch.conf names "systemd" (Debian's default): nsbox reads passwd and group itself,
        # and looks for userdb's drop-in records (nss-systemd(8)), named by uid or gid.
        slot, = free_slots(1)
        uid = BASE + slot
        if not os.path.isdir("/usr/local/lib") or os.path.exists("/usr/local/lib/userdb"):
            self.skip_or_fail("needs /usr/local/lib without a userdb directory")
        for record in (f"{uid}.user", f"{uid}.group"):
            with self.subTest(record=record):
                p = self._run_with_user_db(
                    "", "", keep={slot}, nsswitch="passwd: files systemd\ngroup: files systemd\n",
                    setup=["mount -t tmpfs nsboxtest /usr/local/lib",
                           "mkdir /usr/local/lib/userdb",
                           f"ln -s nsboxtest.user /usr/local/lib/userdb/{record}"])
                self.assertOneLineError(p, contains="1 named by passwd or group entries")
        # The control: a record of another id names nothing here.
        p = self._run_with_user_db(
            "", "", keep={slot}, nsswitch="passwd: files systemd\ngroup: files systemd\n",
            setup=["mount -t tmpfs nsboxtest /usr/local/lib", "mkdir /usr/local/lib/userdb",
                   f"ln -s nsboxtest.user /usr/local/lib/userdb/{uid + 1}.user"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["host_uid"], uid)

    def test_other_name_services_are_asked_through_nss(self):
        # A source nsbox does not read itself (here "compat", which NSS serves from the same
        # /etc/passwd): the lookup goes through getpwuid_r(3), and a named id is still skipped.
        slot, = free_slots(1)
        uid = BASE + slot
        p = self._run_with_user_db(f"nsboxtest:x:{uid}:{uid}::/:/bin/false\n", "", keep={slot},
                                   nsswitch="passwd: compat\ngroup: compat\n")
        self.assertOneLineError(p, contains="1 named by passwd or group entries")
        p = self._run_with_user_db("", "", keep={slot}, nsswitch="passwd: compat\ngroup: compat\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["host_uid"], uid)

    def test_pid_host_leftovers_die_before_the_ids_are_reused(self):
        # A daemon: a grandchild in a session of its own, away from the run's output.
        code = ("import os, time\n"
                "r, w = os.pipe()\n"
                "if os.fork() == 0:\n"
                "    os.setsid()\n"
                "    if os.fork() == 0:\n"
                "        null = os.open('/dev/null', os.O_RDWR)\n"
                "        for fd in (0, 1, 2): os.dup2(null, fd)\n"
                "        os.write(w, b'1'); time.sleep(30)\n"
                "    os._exit(0)\n"
                "os.read(r, 1)\n")
        token = "nsbox-hostids-" + os.urandom(6).hex()
        p, r = nsbox_json("--pid", "host", "--cgroup", "off", "--", "python3", "-c", code, token)
        self.assertEqual(r["status"], "exited", p.stderr)
        self.assertTrue(in_pool(r["host_uid"]))
        # Killed (SIGKILL) before nsbox returns; gone from /proc a moment later.
        self.assertTrue(wait_until(lambda: not processes_with(token), timeout=2),
                        "a process of the run's ids outlived it")
        # The control: with ids the run does not own, nsbox leaves them alone (documented for
        # --pid host), and the background process survives.
        p, r = nsbox_json("--pid", "host", "--cgroup", "off", "--host-user", str(BASE - 1),
                          "--", "python3", "-c", code, token)
        try:
            self.assertEqual(r["status"], "exited", p.stderr)
            self.assertTrue(wait_until(lambda: processes_with(token)))
        finally:
            for pid in processes_with(token):
                os.kill(pid, signal.SIGKILL)

    def test_pid_host_leftovers_of_a_killed_nsbox_die_before_the_ids_are_reused(self):
        # nsbox is SIGKILLed before it can kill what the payload left: the next run that takes
        # the ids kills it first.
        token = "nsbox-hostids-" + os.urandom(6).hex()
        code = ("import os, time\n"
                "if os.fork() == 0:\n"
                "    os.setsid()\n"
                "    null = os.open('/dev/null', os.O_RDWR)\n"
                "    for fd in (0, 1, 2): os.dup2(null, fd)\n"
                "    time.sleep(30)\n"
                "time.sleep(30)\n")
        p = subprocess.Popen([NSBOX, "run", "--pid", "host", "--cgroup", "off", "--", "python3",
                              "-c", code, token], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        try:
            # The daemon: the process of the token that leads a session of its own.
            def leader():
                for q in processes_with(token):
                    try:
                        with open(f"/proc/{q}/stat") as f:
                            if int(f.read().rsplit(")", 1)[1].split()[3]) == q:
                                return q
                    except (OSError, ValueError, IndexError):
                        pass
                return None
            self.assertTrue(wait_until(leader), "no daemon")
            daemon = leader()
            uid = host_uid_of(daemon)
            self.assertTrue(in_pool(uid), uid)
            p.kill()
            p.wait()
            # The payload dies with the sandbox's init; the daemon is left, as with any
            # --pid host run whose nsbox is killed.
            self.assertTrue(wait_until(lambda: processes_with(token) == [daemon]),
                            processes_with(token))
            with PoolHolder(keep={uid - BASE}):
                q, r = nsbox_json("--", "true")
            self.assertEqual(r["host_uid"], uid, q.stderr)
            self.assertTrue(wait_until(lambda: not processes_with(token)),
                            "a process of the ids survived into the next run that took them")
        finally:
            for pid in processes_with(token):
                os.kill(pid, signal.SIGKILL)

    def test_in_a_container_without_the_range_nobody_with_a_warning(self):
        # Root of a user namespace that maps host ids 0…65535 only, as a container's does:
        # nsbox's range cannot be mapped there, so the sandbox runs as that namespace's nobody,
        # and nsbox says so and what chooses other ids.
        helper = (
            "import ctypes, os, sys\n"
            "r, w = os.pipe()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os.close(w)\n"
            "    if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0: os._exit(99)\n"
            "    os.read(r, 1)\n"
            "    os.setresgid(0, 0, 0); os.setresuid(0, 0, 0)\n"
            "    os.execv(sys.argv[1], sys.argv[1:])\n"
            "os.close(r)\n"
            "import time\n"
            "for _ in range(100):\n"
            "    if os.readlink(f'/proc/{pid}/ns/user') != os.readlink('/proc/self/ns/user'): break\n"
            "    time.sleep(0.01)\n"
            "for f in ('uid_map', 'gid_map'):\n"
            "    with open(f'/proc/{pid}/{f}', 'w') as fh: fh.write('0 0 65536\\n')\n"
            "os.write(w, b'x')\n"
            "sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
        def in_container(*args):
            p = subprocess.run([sys.executable, "-c", helper, NSBOX, "run", "--json",
                                "--cgroup", "off", *args, "--", "true"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            return json.loads(p.stdout)
        r = in_container()
        self.assertEqual((r["host_uid"], r["host_gid"]), (65534, 65534), r)
        self.assertTrue(any("does not map its id range" in w and "--host-user" in w
                            for w in r["warnings"]), r["warnings"])
        r = in_container("--host-user", "1000")
        self.assertEqual((r["host_uid"], r["host_gid"]), (1000, 1000), r)
        self.assertFalse(any("does not map its id range" in w for w in r["warnings"]), r)

    def test_host_user_chooses_the_ids(self):
        p, r = nsbox_json("--host-user", "4242:4343", "--", "cat", "/proc/self/uid_map",
                          "/proc/self/gid_map")
        self.assertEqual(r["status"], "exited", p.stderr)
        self.assertEqual((r["host_uid"], r["host_gid"]), (4242, 4343))
        self.assertEqual([l.split() for l in r["stdout"].splitlines()],
                         [["65534", "4242", "1"], ["65534", "4343", "1"]])
        self.assertIn("--host-user 4242:4343", p.stderr)
        self.assertTrue(any("--host-user" in w for w in r["warnings"]))
        for bad in ("0", "0:5", "5:0", "x", "-1"):
            with self.subTest(bad=bad):
                self.assertOneLineError(nsbox("run", "--host-user", bad, "--", "true"),
                                        contains="--host-user")


class TestUserHostIds(NsboxTestCase):
    def test_maps_to_the_user_themself(self):
        p, r = nsbox_json("--", "cat", "/proc/self/uid_map")
        self.assertEqual(r["status"], "exited", p.stderr)
        self.assertEqual((r["host_uid"], r["host_gid"]), (os.geteuid(), os.getegid()))
        self.assertEqual(r["stdout"].split(), ["65534", str(os.geteuid()), "1"])

    def test_host_user_of_another_id_is_refused(self):
        p = nsbox("run", "--host-user", str(os.geteuid() + 1), "--", "true")
        self.assertOneLineError(p, contains="--host-user is for root")
        p, r = nsbox_json("--host-user", str(os.geteuid()), "--", "true")
        self.assertEqual(r["status"], "exited", p.stderr)


# Root's sandboxes take ids from the pool, an ordinary user's map to the user themself: each
# caller runs the class of its own case (a skip would be a failure under
# NSBOX_TESTS_MUST_WORK=1).
if ROOT:
    del TestUserHostIds
else:
    del TestRootHostIds

if __name__ == "__main__":
    unittest.main()
