# SPDX-License-Identifier: LGPL-2.1-or-later
"""The root filesystems nsbox builds (rootfs/profiles): what ordinary programs expect of a system
(a locale, time zones, the linker cache, /etc/hosts, /etc/services, CA certificates, basic tools)
in every profile; the science profile's libraries under the default limits; threads that follow
--cpus; `nsbox rootfs verify` catching an ELF file whose library is missing.

Environment: NSBOX_ROOTFS (the minimal tree, or the binary's own), NSBOX_ROOTFS_SCIENCE (the
science tree; default build/rootfs/science/tree). Without a science tree its tests skip, except
under NSBOX_TESTS_MUST_WORK=1 (scripts/test builds it there: ninja -C build rootfs-science).
"""
import os
import shutil
import subprocess
import tempfile
import unittest

from nsboxtest import HERE, NSBOX, NsboxTestCase, nsbox, nsbox_json

SCIENCE = os.environ.get("NSBOX_ROOTFS_SCIENCE") or os.path.join(
    HERE, "..", "..", "build", "rootfs", "science", "tree")
WORKLOAD = os.path.join(HERE, "workloads", "science.py")


def default_rootfs():
    """The tree nsbox uses with no --rootfs: NSBOX_ROOTFS, else the build tree's."""
    return os.environ.get("NSBOX_ROOTFS") or os.path.join(HERE, "..", "..", "build", "rootfs", "tree")


class SystemFiles:
    """What every profile offers; ROOTFS_OPTS chooses the tree."""
    ROOTFS_OPTS = ()

    def py(self, code, *opts):
        p, r = nsbox_json(*self.ROOTFS_OPTS, *opts, "--", "python3", "-c", code)
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 0), r)
        return r["stdout"].strip()

    def test_locale_c_utf8(self):
        # LANG=C.UTF-8 is nsbox's default: the locale data must exist for it.
        self.assertEqual(self.py("import locale; print(locale.setlocale(locale.LC_ALL, ''), "
                                 "locale.getpreferredencoding())"), "C.UTF-8 UTF-8")

    def test_zoneinfo_and_tz(self):
        out = self.py("import datetime, time, zoneinfo; "
                      "z = zoneinfo.ZoneInfo('Europe/Paris'); "
                      "print(time.tzname, datetime.datetime(2024, 1, 1, tzinfo=z).utcoffset())",
                      "-e", "TZ=America/New_York")
        self.assertEqual(out, "('EST', 'EDT') 1:00:00")
        self.assertEqual(self.py("import time; print(time.tzname[0])"), "UTC")

    def test_find_library(self):
        self.assertEqual(self.py("import ctypes.util; print(ctypes.util.find_library('c'))"),
                         "libc.so.6")

    def test_localhost_under_loopback(self):
        code = ("import socket; a = socket.getaddrinfo('localhost', 80, type=socket.SOCK_STREAM); "
                "s = socket.socket(a[0][0]); s.bind((a[0][4][0], 0)); s.listen(); "
                "c = socket.create_connection(('localhost', s.getsockname()[1]), timeout=5); "
                "print(sorted({x[4][0] for x in a}), socket.gethostbyname('localhost'))")
        self.assertEqual(self.py(code, "--network", "loopback"), "['127.0.0.1', '::1'] 127.0.0.1")

    def test_services_and_protocols(self):
        self.assertEqual(self.py("import socket; print(socket.getservbyname('https', 'tcp'), "
                                 "socket.getprotobyname('udp'))"), "443 17")

    def test_os_release_and_ca_certificates(self):
        out = self.py("import platform, ssl; "
                      "print(platform.freedesktop_os_release()['ID'], "
                      "ssl.create_default_context().cert_store_stats()['x509_ca'] > 100)")
        self.assertEqual(out, "debian True")

    def test_basic_tools(self):
        script = ("set -e; cd /tmp; printf 'b 2\\na 1\\n' > f; "
                  "awk '{print $2}' f | sort | tr '\\n' ' '; grep -c a f; sed 's/a/x/' f | head -n 2 | tail -n 1; "
                  "find /tmp -name f; tar czf f.tgz f; gzip -t f.tgz; "
                  "[[ $(tar xzOf f.tgz) == $(cat f) ]] && echo bash")
        p, r = nsbox_json(*self.ROOTFS_OPTS, "--", "bash", "-c", script)
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 0), r)
        self.assertEqual(r["stdout"], "1 2 1\nx 1\n/tmp/f\nbash\n")

    def test_verify_passes(self):
        tree = dict(zip(self.ROOTFS_OPTS[::2], self.ROOTFS_OPTS[1::2])).get("--rootfs",
                                                                           default_rootfs())
        p = nsbox("rootfs", "verify", tree, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("ok    libraries: each of", p.stdout)
        self.assertIn("ok    in a sandbox: imports:", p.stdout)


class TestMinimal(SystemFiles, NsboxTestCase):
    pass


class TestScience(SystemFiles, NsboxTestCase):
    ROOTFS_OPTS = ("--rootfs", SCIENCE)

    def setUp(self):
        if not os.path.isfile(os.path.join(SCIENCE, "usr/share/nsbox/profile")):
            self.skip_or_fail(f"no science rootfs at {SCIENCE}: build it with "
                              "'ninja -C build rootfs-science' or set NSBOX_ROOTFS_SCIENCE")

    def workload(self, name, *opts):
        """Run one workload under the default limits; returns its detail."""
        p, r = nsbox_json("--rootfs", SCIENCE, *opts, "--code", WORKLOAD, "--", name)
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 0), r)
        self.assertTrue(r["stdout"].startswith(f"ok {name} "), r)
        return r["stdout"].split(" ", 2)[2].strip()

    def test_numpy_matmul(self):
        self.workload("numpy_matmul")

    def test_pandas_read_csv_groupby(self):
        self.workload("pandas_groupby")

    def test_matplotlib_savefig(self):
        self.assertIn("backend agg", self.workload("matplotlib_savefig").lower())

    def test_scipy_minimize(self):
        self.workload("scipy_minimize")

    def test_verify_catches_removed_libblas_link(self):
        # A copy of what numpy's core module needs (about 45 MB), not of the whole tree: the
        # module, the C, Fortran and BLAS libraries and the alternatives links to them.
        arch = "x86_64-linux-gnu"
        wanted = ("libc.so", "libm.so", "libgcc_s.so", "libgfortran.so", "libquadmath.so",
                  "libblas.so.3", "liblapack.so.3", "libopenblas", "ld-linux", "libpthread.so")
        with tempfile.TemporaryDirectory() as d:
            tree = os.path.join(d, "tree")

            def copy(rel):
                os.makedirs(os.path.dirname(os.path.join(tree, rel)), exist_ok=True)
                shutil.copy2(os.path.join(SCIENCE, rel), os.path.join(tree, rel),
                             follow_symlinks=False)
            for sub in ("proc", "dev", "tmp", "work", "usr/bin"):
                os.makedirs(os.path.join(tree, sub))
            core = "usr/lib/python3/dist-packages/numpy/core"
            for name in os.listdir(os.path.join(SCIENCE, core)):
                if name.startswith("_multiarray_umath") and name.endswith(".so"):
                    copy(f"{core}/{name}")
            for sub in ("lib64", f"lib/{arch}", f"usr/lib/{arch}", f"usr/lib/{arch}/openblas-pthread",
                        "etc/alternatives"):
                if not os.path.isdir(os.path.join(SCIENCE, sub)) or os.path.islink(os.path.join(SCIENCE, sub)):
                    continue
                for name in os.listdir(os.path.join(SCIENCE, sub)):
                    if name.startswith(wanted) and not os.path.isdir(os.path.join(SCIENCE, sub, name)):
                        copy(f"{sub}/{name}")
            link = os.path.join(tree, f"usr/lib/{arch}/libblas.so.3")
            self.assertTrue(os.path.islink(link), "the science tree has no libblas.so.3 link")
            p = nsbox("rootfs", "verify", tree, timeout=120)
            self.assertIn("ok    libraries: each of", p.stdout)
            os.unlink(link)
            p = nsbox("rootfs", "verify", tree, timeout=120)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertRegex(p.stdout, r"FAIL  libraries: /usr/lib/python3/dist-packages/numpy/core/"
                                       r"_multiarray_umath[^ ]*\.so needs libblas\.so\.3, which is "
                                       r"not in the tree")

    def test_blas_threads_follow_cpus(self):
        # os.cpu_count() is the host's (Python 3.11 reads sysconf, not the affinity): what
        # follows --cpus is the affinity and the BLAS pool.
        self.assertTrue(self.workload("threads").startswith("affinity 1 blas [1]"))
        if len(os.sched_getaffinity(0)) >= 2:
            self.assertTrue(self.workload("threads", "--cpus", "1.5").startswith(
                "affinity 2 blas [2]"))


class TestThreadsFollowCpus(NsboxTestCase):
    CODE = ("import os; print(len(os.sched_getaffinity(0)), os.environ.get('OPENBLAS_NUM_THREADS'), "
            "os.environ.get('OMP_NUM_THREADS'), os.environ.get('MKL_NUM_THREADS'))")

    def run_py(self, *opts):
        p, r = nsbox_json(*opts, "--", "python3", "-c", self.CODE)
        self.assertEqual((r["status"], r["exit_code"]), ("exited", 0), r)
        return r["stdout"].strip()

    def test_default_half_cpu_is_one(self):
        self.assertEqual(self.run_py(), "1 1 1 1")

    def test_rounded_up_and_capped(self):
        n = len(os.sched_getaffinity(0))
        want = min(2, n)
        self.assertEqual(self.run_py("--cpus", "1.2"), f"{want} {want} {want} {want}")

    def test_user_env_wins(self):
        self.assertEqual(self.run_py("-e", "OMP_NUM_THREADS=3"), "1 1 3 1")

    def test_unlimited_changes_nothing(self):
        n = len(os.sched_getaffinity(0))
        self.assertEqual(self.run_py("--cpus", "unlimited"), f"{n} None None None")


class TestVerifyCatchesMissingLibrary(NsboxTestCase):
    """A tiny tree: python3 and the libraries beside it, copied from the default rootfs."""

    def test_removed_link_is_named(self):
        src = default_rootfs()
        libdirs = [d for d in ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64")
                   if os.path.isdir(os.path.join(src, d)) and not os.path.islink(os.path.join(src, d))]
        if "lib64" not in libdirs:
            self.skip_or_fail(f"{src} is not an amd64 Debian tree (no /lib64)")
        with tempfile.TemporaryDirectory() as d:
            tree = os.path.join(d, "tree")
            for sub in ["proc", "dev", "tmp", "work", "usr/bin"] + libdirs:
                os.makedirs(os.path.join(tree, sub))
            shutil.copy2(os.path.realpath(os.path.join(src, "usr/bin/python3")),
                         os.path.join(tree, "usr/bin/python3"))
            for libdir in libdirs:
                for name in os.listdir(os.path.join(src, libdir)):
                    path = os.path.join(src, libdir, name)
                    if ".so" in name and (os.path.islink(path) or os.path.isfile(path)):
                        shutil.copy2(path, os.path.join(tree, libdir, name), follow_symlinks=False)
            zlib = [os.path.join(tree, l, "libz.so.1") for l in libdirs
                    if os.path.lexists(os.path.join(tree, l, "libz.so.1"))]
            self.assertEqual(len(zlib), 1, zlib)
            self.assertTrue(os.path.islink(zlib[0]))
            p = nsbox("rootfs", "verify", tree, timeout=120)
            self.assertIn("ok    libraries: each of", p.stdout)
            os.unlink(zlib[0])
            p = nsbox("rootfs", "verify", tree, timeout=120)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("FAIL  libraries: /usr/bin/python3 needs libz.so.1, which is not in "
                          "the tree", p.stdout)
            p = nsbox("doctor", "--rootfs", tree, timeout=120)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("FAIL  libraries: /usr/bin/python3 needs libz.so.1", p.stdout)


class TestVerifyMalformed(NsboxTestCase):
    def test_malformed_elf_is_named(self):
        # An ELF64 header whose program header table lies past the end of the file.
        import struct
        header = (b"\x7fELF\x02\x01\x01" + bytes(9) +
                  struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 4096, 0, 0, 64, 56, 1, 64, 0, 0))
        with tempfile.TemporaryDirectory() as d:
            for sub in ("proc", "dev", "tmp", "work", "usr/bin"):
                os.makedirs(os.path.join(d, sub))
            with open(os.path.join(d, "usr/bin/broken"), "wb") as f:
                f.write(header + bytes(64))
            p = nsbox("rootfs", "verify", d, timeout=120)
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertIn("FAIL  libraries: /usr/bin/broken is a malformed ELF file", p.stdout)


class TestBuildErrors(NsboxTestCase):
    """What `nsbox rootfs build` says when it cannot build; no mirror is reached."""

    def test_non_debian_host_names_release_and_override(self):
        # An Ubuntu /etc/os-release in a mount namespace, and a mirror that refuses connections.
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "os-release")
            with open(fake, "w") as f:
                f.write('PRETTY_NAME="Ubuntu 24.04 LTS"\nID=ubuntu\nVERSION_CODENAME=noble\n')
            script = 'mount --bind "$1" /etc/os-release && exec "$0" rootfs build --mirror "$2" "$3"'
            p = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script,
                                NSBOX, fake, "http://127.0.0.1:9/debian", os.path.join(d, "tree")],
                               capture_output=True, text=True, timeout=300)
            if "unshare failed" in p.stderr or "mount:" in p.stderr:
                self.skip_or_fail(f"cannot make a mount namespace here: {p.stderr.strip()}")
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("nsbox rootfs build: this host is Ubuntu 24.04 LTS (not Debian): building "
                          "Debian bookworm; choose another release with --suite", p.stderr)
            self.assertIn("nsbox rootfs build: mmdebstrap could not read Debian bookworm from "
                          "http://127.0.0.1:9/debian: check network access to the mirror (--mirror) "
                          "and that the release exists there (--suite)", p.stderr)
            self.assertIn(f"the whole log is {d}/tree.nsbox-build.log", p.stderr)
            self.assertEqual(sorted(os.listdir(d)), ["os-release", "tree.nsbox-build.log"])

    def test_refuses_a_directory_that_is_not_a_rootfs(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "precious"), "w") as f:
                f.write("keep me")
            p = nsbox("rootfs", "build", d)
            self.assertEqual(p.returncode, 1)
            self.assertIn("exists and is not an nsbox rootfs: give an empty or new directory", p.stderr)
            self.assertTrue(os.path.exists(os.path.join(d, "precious")))

    def test_unknown_package_or_no_subordinate_ids(self):
        # Root reaches the mirror (network, as the rootfs build itself needs) and learns which
        # package is missing; a user without /etc/subuid ranges learns what to do about that.
        with tempfile.TemporaryDirectory() as d:
            p = nsbox("rootfs", "build", "--packages", "nsbox-no-such-package", os.path.join(d, "t"),
                      timeout=300)
            self.assertEqual(p.returncode, 1, p.stderr)
            last = p.stderr.strip().splitlines()[-1]
            if os.geteuid() == 0:
                self.assertIn("nsbox rootfs build: Debian ", last)
                self.assertIn(" has no package nsbox-no-such-package: check the names (--packages)",
                              last)
            elif "cannot unpack packages as" not in last:
                self.skip_or_fail(f"this user may have subordinate ids: {last}")
            else:
                self.assertIn("usermod --add-subuids", last)
            self.assertFalse(os.path.exists(os.path.join(d, "t")))

    def test_unknown_profile(self):
        with tempfile.TemporaryDirectory() as d:
            p = nsbox("rootfs", "build", "--profile", "nosuch", os.path.join(d, "t"))
            self.assertEqual(p.returncode, 1)
            self.assertIn("no profile 'nosuch'", p.stderr)
            self.assertIn("minimal science", p.stderr)


if __name__ == "__main__":
    unittest.main()
