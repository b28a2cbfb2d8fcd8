# Attack: send data to a listener on the host's loopback. argv: PORT CANARY.
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as s:
        s.sendall(sys.argv[2].encode())
    print("sent")
except OSError as e:
    print("blocked:", e)
