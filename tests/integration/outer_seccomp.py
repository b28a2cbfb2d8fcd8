# SPDX-License-Identifier: LGPL-2.1-or-later
"""Run a command under an extra seccomp filter, as a container runtime's default profile puts
every process of a container under one: the container conditions of issue 20, reproduced
without a container runtime.

    python3 outer_seccomp.py PROFILE -- COMMAND [ARGS...]

PROFILE is one of:
  podman-default   sethostname(2) and setdomainname(2) fail with EPERM (Podman's default
                   profile, where nsbox got to that step)
  docker-default   clone3(2) fails with ENOSYS, unshare(2) and clone(2) with CLONE_NEWUSER
                   with EPERM (Docker's and containerd's default profiles without
                   CAP_SYS_ADMIN)
  PATH.json[:-NAME...]
                   an OCI seccomp profile such as examples/seccomp-nsbox.json, as a runtime
                   applies it (defaultAction with defaultErrnoRet, and each entry's names
                   with its action; args conditions are not read), less the calls named
                   after it (":-mount:-umount2"), for negative controls; names this
                   libseccomp does not know are skipped, as runc and crun skip them

With a named profile, everything else is allowed. libseccomp (libseccomp.so.2, a build dependency of nsbox) builds
the filter; seccomp_load() sets no_new_privs first, as the runtimes do.
"""
import ctypes
import ctypes.util
import errno
import json
import os
import sys

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7
CLONE_NEWUSER = 0x10000000


def SCMP_ACT_ERRNO(e):
    return 0x00050000 | (e & 0xFFFF)


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


PROFILES = {
    "podman-default": [("sethostname", errno.EPERM, None),
                       ("setdomainname", errno.EPERM, None)],
    "docker-default": [("clone3", errno.ENOSYS, None),
                       ("unshare", errno.EPERM, None),
                       ("clone", errno.EPERM, ArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER,
                                                     CLONE_NEWUSER))],
}


def action(name, errno_ret):
    if name == "SCMP_ACT_ALLOW":
        return SCMP_ACT_ALLOW
    if name == "SCMP_ACT_ERRNO":
        return SCMP_ACT_ERRNO(errno_ret)
    sys.exit(f"outer_seccomp: action {name} is not supported here")


def oci_profile(spec):
    """(default action, [(name, action, None)]) of an OCI profile file, less some names."""
    path, *without = spec.split(":")
    with open(path) as f:
        doc = json.load(f)
    errno_ret = doc.get("defaultErrnoRet", errno.EPERM)
    rules = []
    for entry in doc["syscalls"]:
        act = action(entry["action"], entry.get("errnoRet", errno_ret))
        rules += [(n, act, None) for n in entry["names"] if "-" + n not in without]
    return action(doc["defaultAction"], errno_ret), rules


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--" or (sys.argv[1] not in PROFILES and
                                                     ".json" not in sys.argv[1]):
        sys.exit(__doc__)
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    if sys.argv[1] in PROFILES:
        default = SCMP_ACT_ALLOW
        rules = [(n, SCMP_ACT_ERRNO(e), cmp) for n, e, cmp in PROFILES[sys.argv[1]]]
    else:
        default, rules = oci_profile(sys.argv[1])
    ctx = lib.seccomp_init(default)
    if not ctx:
        sys.exit("outer_seccomp: seccomp_init failed")
    for name, act, cmp in rules:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            continue
        args = (ArgCmp * 1)(cmp) if cmp else None
        r = lib.seccomp_rule_add_array(ctx, act, nr, 1 if cmp else 0, args)
        if r < 0:
            sys.exit(f"outer_seccomp: rule for {name}: {os.strerror(-r)}")
    r = lib.seccomp_load(ctx)
    if r < 0:
        sys.exit(f"outer_seccomp: seccomp_load: {os.strerror(-r)}")
    os.execvp(sys.argv[3], sys.argv[3:])


if __name__ == "__main__":
    main()
