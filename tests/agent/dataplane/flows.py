"""Programs for real-kernel flow tests, run with `ip netns exec NS python -c …`: an echo server on
port 5432, and a client that keeps one connection and answers each stdin line with `ok`, `bad` or
`cut` (the connection was cut: revocation ends live flows)."""

SERVER = """
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5432)); s.listen(16)
def serve(c):
    while (data := c.recv(100)):
        c.sendall(data)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], 5432), timeout=1.0)
for line in sys.stdin:
    try:
        c.sendall(b"x"); print("ok" if c.recv(10) == b"x" else "bad", flush=True)
    except OSError as e:
        print("cut", flush=True)
"""
