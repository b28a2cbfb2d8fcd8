# Run by rootfs-build with the new tree's own python3, chrooted into the tree (as its root):
# the effects of the maintainer scripts mmdebstrap's extract variant skipped, where a read-only
# sandbox root needs them. Prints one line per step.
import compileall
import glob
import os
import re
import shlex
import sysconfig


def alternatives():
    """update-alternatives --install lines of every postinst, applied in auto mode: for each
    name the existing path of the highest priority gets LINK -> /etc/alternatives/NAME -> PATH,
    and so do its slaves whose paths exist (update-alternatives(1))."""
    best = {}
    skipped = []
    for script in sorted(glob.glob("/var/lib/dpkg/info/*.postinst")):
        with open(script, encoding="utf-8", errors="replace") as f:
            text = f.read().replace("\\\n", " ")
        for m in re.finditer(r"update-alternatives\s+(?:--quiet\s+)?--install\s+([^;&|\n]*)", text):
            try:
                args = shlex.split(m.group(1))
            except ValueError:
                skipped.append(os.path.basename(script))
                continue
            if len(args) < 4 or any("$" in a or "`" in a for a in args[:4]):
                skipped.append(os.path.basename(script))
                continue
            link, name, path, prio = args[:4]
            try:
                prio = int(prio)
            except ValueError:
                skipped.append(os.path.basename(script))
                continue
            slaves = []
            rest = args[4:]
            while len(rest) >= 4 and rest[0] == "--slave":
                slaves.append((rest[1], rest[2], rest[3]))
                rest = rest[4:]
            if not os.path.exists(path):
                continue
            if name not in best or prio > best[name][2]:
                best[name] = (link, path, prio, slaves)
    made = 0
    for name, (link, path, _prio, slaves) in sorted(best.items()):
        for lnk, nm, target in [(link, name, path)] + [(s[0], s[1], s[2]) for s in slaves]:
            if not os.path.exists(target):
                continue
            alt = "/etc/alternatives/" + nm
            os.makedirs("/etc/alternatives", exist_ok=True)
            os.makedirs(os.path.dirname(lnk), exist_ok=True)
            for p, t in ((alt, target), (lnk, alt)):
                if os.path.islink(p):
                    os.unlink(p)
                elif os.path.exists(p):
                    raise SystemExit(f"postinst.py: {p} exists and is not a link: not replaced")
                os.symlink(t, p)
            made += 1
    print(f"alternatives: {made} links for {len(best)} names"
          + (f" (skipped lines with variables in {', '.join(sorted(set(skipped)))})" if skipped else ""))


def ca_bundle():
    """What update-ca-certificates makes with every certificate enabled (its default): the
    bundle OpenSSL's default CA file (/usr/lib/ssl/cert.pem) points at."""
    certs = sorted(glob.glob("/usr/share/ca-certificates/**/*.crt", recursive=True))
    if not certs:
        return
    os.makedirs("/etc/ssl/certs", exist_ok=True)
    with open("/etc/ssl/certs/ca-certificates.crt", "w") as out:
        for c in certs:
            with open(c) as f:
                pem = f.read()
            out.write(pem if pem.endswith("\n") else pem + "\n")
    with open("/etc/ca-certificates.conf", "w") as conf:
        for c in certs:
            conf.write(os.path.relpath(c, "/usr/share/ca-certificates") + "\n")
    print(f"CA certificates: {len(certs)} in /etc/ssl/certs/ca-certificates.crt")


def matplotlib_backend():
    """No display in a sandbox: Agg, matplotlib's file-only backend, by default."""
    rc = "/etc/matplotlibrc"
    if not os.path.exists("/usr/lib/python3/dist-packages/matplotlib"):
        return
    lines = []
    if os.path.exists(rc):
        with open(rc) as f:
            lines = [l for l in f if not re.match(r"\s*#?\s*backend\s*:", l)]
    lines.append("backend: Agg\n")
    with open(rc, "w") as f:
        f.writelines(lines)
    print("matplotlib: backend Agg in /etc/matplotlibrc")


def bytecode():
    """The sandbox cannot write __pycache__: without compiled bytecode every run would compile
    every module it imports."""
    for d in (sysconfig.get_path("stdlib"), "/usr/lib/python3"):
        compileall.compile_dir(d, quiet=2, workers=0)
    print("bytecode: compiled")


alternatives()
ca_bundle()
matplotlib_backend()
bytecode()
