"""The response cache's costs: how fast a hit answers, and the CPU a miss
adds to a request. On one kept-alive connection, raw HTTP/1.1
(wire.py), so the client adds microseconds, not a library's
milliseconds. Every request asks for the cache with `x-switchyard-cache:
on`, so the gateway needs no cache settings; the same requests without the
header are the cache off.

- Hits: one deterministic request, stored by its first answer, then asked
  COUNT times as JSON and COUNT times as a stream (replayed from the JSON
  answer as events); the time to the last byte of each, and every one must
  say `x-switchyard-cache: hit`.
- Misses: COUNT requests, each a question never asked before (so each is
  looked up, missed, sent upstream and stored), against the same requests
  without the header, in TURNS alternating turns; the gateway's CPU time
  per request each way, summed over its threads from their schedstat
  (nanoseconds, where /proc/PID/stat counts 10 ms ticks: at a few hundred
  requests a turn a tick is tens of µs a request), with each thread's
  share of the difference.

    python3 bench/cache.py HOST PORT PID COUNT TURNS OUT.json

Requests carry the user agent `switchyard-bench-cache`, for the record check.
"""

import json
import os
import statistics
import sys
import time

from wire import Reader, connect

host, port, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
count, turns, out = int(sys.argv[4]), max(1, int(sys.argv[5])), sys.argv[6]
PATH = "/v1/chat/completions"


def request(body, cache):
    body = json.dumps(body).encode()
    header = "x-switchyard-cache: on\r\n" if cache else ""
    return (
        f"POST {PATH} HTTP/1.1\r\nHost: {host}:{port}\r\ncontent-type: application/json\r\n"
        f"user-agent: switchyard-bench-cache\r\n{header}content-length: {len(body)}\r\n\r\n"
    ).encode() + body


class Connection:
    def __init__(self):
        self.sock = connect(host, port)
        self.reader = Reader(self.sock)

    def ask(self, raw):
        """Sends one request; its cache header and body, once read whole."""
        self.sock.sendall(raw)
        headers, body = self.reader.reply("a cache request")
        return headers.get(b"x-switchyard-cache", b"none").decode(), body


def cpu_ns_by_thread():
    """Nanoseconds on a CPU so far, per thread name (the threads' own
    schedstat: exact, where utime and stime count 10 ms ticks)."""
    by_name = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            ns = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended meanwhile
        by_name[name] = by_name.get(name, 0) + ns
    return by_name


conn = Connection()
statuses = {}


def ask(raw):
    status, body = conn.ask(raw)
    statuses[status] = statuses.get(status, 0) + 1
    return status, body


# Hits: store the answer, wait for the store's writer, then time them.
question = {"model": "m", "messages": [{"role": "user", "content": "What does the cache answer?"}]}
ask(request(question, True))
for _ in range(200):
    if ask(request(question, True))[0] == "hit":
        break
    time.sleep(0.01)
else:
    sys.exit("bench: the stored answer never came back as a hit")
hits = {}
for form, body in (("json", question), ("stream", dict(question, stream=True))):
    raw, took = request(body, True), []
    ask(raw)  # once untimed: the first stream replay warms its path
    for _ in range(count):
        started = time.perf_counter()
        status, reply = ask(raw)
        took.append((time.perf_counter() - started) * 1000.0)
        if status != "hit":
            sys.exit(f"bench: a repeated {form} request was a {status}, not a hit")
        if form == "stream" and not reply.rstrip().endswith(b"data: [DONE]"):
            sys.exit("bench: a streamed hit did not end with [DONE]")
    took.sort()
    hits[form] = {"p50_ms": statistics.median(took), "p99_ms": took[min(len(took) - 1, len(took) * 99 // 100)]}

# Misses against the cache off, in many short turns, each side first in
# every other one, so that the machine's drift (on this VM a side's CPU per
# request moves by tens of µs from one stretch to the next) falls on both
# sides alike. After each side the gateway is left to settle past both
# writers' linger, so a side's batches are committed, and counted, within
# its own window.
SETTLE = 0.1
cpu = {"on": 0, "off": 0}
sent = {"on": 0, "off": 0}
threads = {"on": {}, "off": {}}
per_turn = max(1, count // turns)
added_per_turn = []
for turn in range(turns):
    bodies = [{"model": "m", "messages": [{"role": "user", "content": f"Question {turn}-{i}, never asked before"}]}
              for i in range(per_turn)]
    spent = {}
    for side in ("off", "on") if turn % 2 == 0 else ("on", "off"):
        raws = [request(b, side == "on") for b in bodies]
        time.sleep(SETTLE)
        before = cpu_ns_by_thread()
        for raw in raws:
            status, _ = ask(raw)
            if side == "on" and status != "miss":
                sys.exit(f"bench: a new question was a {status}, not a miss")
        time.sleep(SETTLE)
        after = cpu_ns_by_thread()
        spent[side] = 0
        for name, ns in after.items():
            d = ns - before.get(name, 0)
            threads[side][name] = threads[side].get(name, 0) + d
            spent[side] += d
        cpu[side] += spent[side]
        sent[side] += len(raws)
    added_per_turn.append((spent["on"] - spent["off"]) / 1e3 / per_turn)

us = {side: cpu[side] / 1e3 / sent[side] for side in cpu}
by_thread = {name: round((threads["on"].get(name, 0) - threads["off"].get(name, 0)) / 1e3 / sent["on"], 2)
             for name in set(threads["on"]) | set(threads["off"])}
quartiles = statistics.quantiles(added_per_turn, n=4) if len(added_per_turn) > 1 else added_per_turn * 3
result = {
    "hit_ms": hits,
    "miss": {
        "cpu_us_per_request_on": us["on"],
        "cpu_us_per_request_off": us["off"],
        "added_cpu_us": us["on"] - us["off"],
        "requests_each_way": sent["on"],
        "turns": turns,
        # The spread of the turns' own figures, against the total's.
        "added_cpu_us_turn_quartiles": quartiles,
        "added_cpu_us_by_thread": {k: v for k, v in by_thread.items() if v},
    },
    "requests": sum(statuses.values()),
    "statuses": statuses,
}
with open(out, "w") as f:
    json.dump(result, f, indent=2)
