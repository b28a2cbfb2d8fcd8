# The VM suite's fork bomb (tests/vm/test_cgroup.py, which checks the cgroup's pids counters);
# the integration tests use nsbox selftest's attacks (src/cli/selftest-attacks.py). Bounded, so
# that it is safe to run bare: at most argv[2] children, each sleeping argv[3] seconds. argv[1]
# is a token that marks the processes for the test to find.
import os, sys, time
limit, sleep = int(sys.argv[2]), float(sys.argv[3])
made = 0
for _ in range(limit):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(sleep)
        os._exit(0)
    made += 1
print("FORKED", made, flush=True)
