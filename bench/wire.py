"""HTTP/1.1 replies read off a raw socket, for the benchmark's own clients
(stream.py, cache.py): microseconds a request, not a library's milliseconds.
A body framed by Content-Length or chunked."""

import socket
import sys


def connect(host, port):
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


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

    def reply(self, what):
        """Reads one 200 response (`what` names the request in an error): its headers, lowercase, and body."""
        status = self.line()
        if b" 200 " not in status:
            sys.exit(f"bench: {what} failed: {status!r}")
        headers = {}
        while line := self.line():
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip().lower()
        if headers.get(b"transfer-encoding") != b"chunked":
            return headers, self.exactly(int(headers[b"content-length"]))
        body = b""
        while size := int(self.line().split(b";")[0], 16):
            body += self.exactly(size)
            self.exactly(2)
        self.line()
        return headers, body
