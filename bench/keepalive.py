"""Keep-alive load for bench/instructions: C threads, each on its own
connection, N chat requests in all; prints how many answered 200.

With CACHE=on or CACHE=off in the environment, every request is a question
never asked before, with `x-switchyard-cache: on` or without it: the two
sides of what a cache miss costs (a lookup, a store) against no cache."""
import http.client
import os
import sys
import threading

port, n, c = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cache = os.environ.get("CACHE", "")
body = b'{"model":"m","messages":[{"role":"user","content":"Say hello"}]}'
headers = {"content-type": "application/json"}
if cache == "on":
    headers["x-switchyard-cache"] = "on"
ok = [0] * c


def run(i, count):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    for j in range(count):
        sent = body
        if cache:
            sent = b'{"model":"m","messages":[{"role":"user","content":"Question %d-%d-%d, never asked before"}]}' % (
                os.getpid(), i, j)
        conn.request("POST", "/v1/chat/completions", sent, headers)
        r = conn.getresponse()
        r.read()
        if r.status == 200:
            ok[i] += 1


threads = [threading.Thread(target=run, args=(i, n // c + (i < n % c))) for i in range(c)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sum(ok))
