# SPDX-License-Identifier: LGPL-2.1-or-later
"""Hardening against what a payload can leave on the host or take from it: set-user-ID files
through a writable bind, native code from writable places, kernel information under /proc,
per-user kernel budgets of the caller and shared memory beyond --memory. Each attack is also
run with the protection removed (an opt-out, or on the host), to show that the attack works and
that the protection is what stops it."""
import os
import stat
import tempfile
import unittest

from nsboxtest import NsboxTestCase, nsbox_json


def py(code, *opts, **kw):
    """Run python3 -c CODE in the sandbox with --json."""
    return nsbox_json(*opts, "--", "python3", "-c", code, **kw)


def shared_dir():
    """A directory the sandbox's host uid can write (root's sandboxes run as host nobody)."""
    d = tempfile.TemporaryDirectory(prefix="nsbox-hardening-")
    os.chmod(d.name, 0o777)
    return d


class TestSetuidFiles(NsboxTestCase):
    # Inside a writable bind: make a file, try to give it each bit, report what happened.
    PLANT = ("import os\n"
             "for name, mode in (('suid', 0o4755), ('sgid', 0o2755), ('both', 0o6755)):\n"
             "    open('/mnt/' + name, 'w').write('#!/bin/sh\\n')\n"
             "    try:\n"
             "        os.chmod('/mnt/' + name, mode); print(name, 'set')\n"
             "    except OSError as e: print(name, e.errno)\n"
             "try:\n"
             "    os.close(os.open('/mnt/created', os.O_CREAT | os.O_WRONLY, 0o4755)); print('created set')\n"
             "except OSError as e: print('created', e.errno)\n"
             "try:\n"
             "    os.mkdir('/mnt/dir', 0o2755); print('dir set')\n"
             "except OSError as e: print('dir', e.errno)\n")

    def host_modes(self, d):
        return {n: stat.S_IMODE(os.lstat(os.path.join(d, n)).st_mode)
                for n in ("suid", "sgid", "both", "created", "dir") if os.path.lexists(os.path.join(d, n))}

    def test_setuid_and_setgid_bits_are_refused(self):
        with shared_dir() as d:
            p, r = py(self.PLANT, "-v", f"{d}:/mnt:rw")
            self.assertEqual(r["status"], "exited", r)
            self.assertEqual(r["stdout"].splitlines(),
                             ["suid 1", "sgid 1", "both 1", "created 1", "dir 1"], r)
            for name, mode in self.host_modes(d).items():
                self.assertEqual(mode & (stat.S_ISUID | stat.S_ISGID), 0, f"{name}: {oct(mode)}")

    def test_without_the_filter_the_bits_land_on_the_host(self):
        # The control: the attack itself works, so the refusal above is what stops it.
        with shared_dir() as d:
            p, r = py(self.PLANT, "-v", f"{d}:/mnt:rw", "--no-seccomp")
            self.assertEqual(r["stdout"].splitlines(),
                             ["suid set", "sgid set", "both set", "created set", "dir set"], r)
            modes = self.host_modes(d)
            self.assertEqual(modes["both"], 0o6755)
            self.assertEqual(modes["suid"], 0o4755)
            self.assertTrue(modes["sgid"] & stat.S_ISGID)

    def test_ordinary_modes_still_work(self):
        code = ("import os\n"
                "open('/mnt/a', 'w').write('x'); os.chmod('/mnt/a', 0o755)\n"
                "fd = os.open('/mnt/b', os.O_CREAT | os.O_WRONLY, 0o644); os.fchmod(fd, 0o600); os.close(fd)\n"
                "os.mkdir('/mnt/c', 0o755); os.chmod('/mnt/c', 0o1777)\n"
                "print('ok')\n")
        with shared_dir() as d:
            p, r = py(code, "-v", f"{d}:/mnt:rw")
            self.assertEqual(r["stdout"], "ok\n", r)
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, "a")).st_mode), 0o755)
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, "b")).st_mode), 0o600)
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, "c")).st_mode), 0o1777)


if __name__ == "__main__":
    unittest.main()
