# Attack: read a file of the host. argv[1] is a host path holding a canary only the host has.
import sys
try:
    print(open(sys.argv[1]).read())
except OSError as e:
    print("blocked:", e)
