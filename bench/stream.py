"""Times streamed replies on one kept-alive connection, as SDK clients use
the gateway: for each request, the time to the first byte of the response
and to its last byte. Prints one line per request: "first last" in seconds.

Raw HTTP/1.1 over a socket, so the client adds microseconds, not the
milliseconds of a library; it reads a body framed by Content-Length (the
static upstream, and the gateway for a reply that arrived whole) or chunked,
and checks it ends with [DONE].

    python3 bench/stream.py HOST PORT PATH BODY COUNT [HEADER...]

Each HEADER ("name: value") is sent with every request.
"""

import socket
import sys
import time

host, port, path, body, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].encode(), int(sys.argv[5])
extra = "".join(f"{h}\r\n" for h in sys.argv[6:])
request = (
    f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\ncontent-type: application/json\r\n{extra}"
    f"content-length: {len(body)}\r\n\r\n"
).encode() + body


class Reader:
    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            sys.exit("bench: the connection closed mid-reply")
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exactly(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def reply(reader):
    """Reads one response; returns its body. The first byte has been buffered."""
    status = reader.line()
    if b" 200 " not in status:
        sys.exit(f"bench: streamed request failed: {status!r}")
    headers = {}
    while True:
        line = reader.line()
        if not line:
            break
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip().lower()
    if headers.get(b"transfer-encoding") == b"chunked":
        body = b""
        while True:
            size = int(reader.line().split(b";")[0], 16)
            if size == 0:
                reader.line()
                return body
            body += reader.exactly(size)
            reader.exactly(2)
    return reader.exactly(int(headers[b"content-length"]))


sock = socket.create_connection((host, port))
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
reader = Reader(sock)
for _ in range(count):
    started = time.perf_counter()
    sock.sendall(request)
    reader.fill()
    first = time.perf_counter() - started
    body = reply(reader)
    last = time.perf_counter() - started
    if not body.rstrip().endswith(b"data: [DONE]"):
        sys.exit("bench: a streamed reply did not end with [DONE]")
    print(f"{first:.6f} {last:.6f}")
