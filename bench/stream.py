"""Times streamed replies on one kept-alive connection, as SDK clients use
the gateway: for each request, the time to the first byte of the response
and to its last byte. Prints one line per request: "first last" in seconds.

Raw HTTP/1.1 over a socket (wire.py), so the client adds microseconds, not
the milliseconds of a library; it reads a body framed by Content-Length (the
static upstream, and the gateway for a reply that arrived whole) or chunked,
and checks it ends with [DONE].

    python3 bench/stream.py HOST PORT PATH BODY COUNT [HEADER...]

Each HEADER ("name: value") is sent with every request.
"""

import sys
import time

from wire import Reader, connect

host, port, path, body, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].encode(), int(sys.argv[5])
extra = "".join(f"{h}\r\n" for h in sys.argv[6:])
request = (
    f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\ncontent-type: application/json\r\n{extra}"
    f"content-length: {len(body)}\r\n\r\n"
).encode() + body


sock = connect(host, port)
reader = Reader(sock)
for _ in range(count):
    started = time.perf_counter()
    sock.sendall(request)
    reader.fill()
    first = time.perf_counter() - started
    _, body = reader.reply("a streamed request")
    last = time.perf_counter() - started
    if not body.rstrip().endswith(b"data: [DONE]"):
        sys.exit("bench: a streamed reply did not end with [DONE]")
    print(f"{first:.6f} {last:.6f}")
