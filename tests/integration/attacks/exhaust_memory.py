# Attack: allocate and touch 1 GB (the lab's bytearray(10**9)).
x = bytearray(10**9)
print("ALLOCATED", len(x))
