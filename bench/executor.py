# The lesson's executor, with the sandbox as a parameter: "bare" (subprocess, the tutorial's
# version), "nsbox" or "bwrap". Runs agent_step.py N times and prints nothing; hyperfine times it.
import os
import subprocess
import sys

mode, python, rootfs, nsbox, code_file = sys.argv[1:6]
code = open(code_file).read()

if mode == "bare":
    cmd = [python, "-B", "-c", code]  # -B: never write bytecode into the rootfs
elif mode == "nsbox":
    cmd = [nsbox, "run", "--cgroup", "off", "--json", "--code", "-"]
elif mode == "bwrap":
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", rootfs, "/", "--proc",
           "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--clearenv", "--setenv", "PATH",
           "/usr/bin:/bin", "/usr/bin/python3", "-B", "-c", code]
else:
    sys.exit(f"unknown mode {mode}")

r = subprocess.run(cmd, input=code if mode == "nsbox" else None, capture_output=True, text=True,
                   timeout=15, env={"PATH": os.environ["PATH"], "NSBOX_ROOTFS": rootfs})
if r.returncode != 0 or "totals" not in r.stdout:
    sys.exit(f"{mode} failed: {r.returncode} {r.stdout[:200]} {r.stderr[:200]}")
