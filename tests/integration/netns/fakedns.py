# SPDX-License-Identifier: LGPL-2.1-or-later
"""A DNS responder for tests, on 127.0.0.1:53 over UDP (run it in a network namespace of its
own: unshare -n). Every question goes to the log file as "NAME TYPE" on a line. Names ending
in .corp.test (the test's search domain) answer A 127.0.0.2; every other name is NXDOMAIN.

usage: fakedns.py LOGFILE READYFILE"""
import socket
import struct
import sys

log, ready = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
open(ready, "w").close()
while True:
    query, peer = s.recvfrom(4096)
    labels, i = [], 12
    while i < len(query) and query[i]:
        labels.append(query[i + 1:i + 1 + query[i]].decode(errors="replace"))
        i += 1 + query[i]
    qtype = struct.unpack(">H", query[i + 1:i + 3])[0]
    name = ".".join(labels).lower()
    with open(log, "a") as f:
        f.write(f"{name} {qtype}\n")
    answers = b""
    if name.endswith(".corp.test") and qtype == 1:
        answers = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 5, 4) + bytes([127, 0, 0, 2])
    flags = 0x8180 if answers else 0x8183  # a response, recursion available; NXDOMAIN if none
    header = query[:2] + struct.pack(">HHHHH", flags, 1, 1 if answers else 0, 0, 0)
    s.sendto(header + query[12:i + 5] + answers, peer)
