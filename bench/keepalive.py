"""Keep-alive load for bench/instructions: C threads, each on its own
connection, N chat requests in all; prints how many answered 200."""
import http.client
import sys
import threading

port, n, c = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
body = b'{"model":"m","messages":[{"role":"user","content":"Say hello"}]}'
ok = [0] * c


def run(i, count):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(count):
        conn.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
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
