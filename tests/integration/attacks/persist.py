# Attack: leave files behind. argv[1] is the code directory (/work inside), argv[2] a scratch
# directory (/tmp inside). Prints what survived from an earlier run, then plants files.
import os, sys
work, scratch = sys.argv[1], sys.argv[2]
mark = os.path.join(scratch, "persisted.txt")
print("FOUND" if os.path.exists(mark) else "clean")
if os.path.exists(os.path.join(work, "persisted.txt")):
    print("FOUND_WORK")
try:
    open(os.path.join(work, "persisted.txt"), "w").write("still here")
    print("WROTE_WORK")
except OSError as e:
    print("work blocked:", e)
open(mark, "w").write("still here")
