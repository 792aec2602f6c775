"""Team mode's cost in Redis calls: two gateways on one private Redis,
requests through both, and Redis's own count of the commands it ran
(`INFO commandstats`) before and after, less what the instances send while
idle over as long (heartbeats, resyncs). Prints one JSON line.

Usage: team.py BIN WORK UPSTREAM_PORT REQUESTS

Then the latency a team adds: the capped provider at c=1 through the two
instances against one gateway with the same providers and no `[team]`
(p50 and p99 of each, in the same run).

Last, throughput behind a simple balancer: nginx round-robin over the two
instances, against nginx in front of the one gateway without `[team]`
(oha at c=32 for THROUGHPUT_SECONDS, default 5, in turns, twice each),
on the plain provider, so the figure is what a second instance adds.

Two providers on the same upstream: `plain`, with no cap and no rate limit
(a request to it makes no Redis call on its way), and `capped`, with a
concurrency cap and a rate limit (one admission script, then the lease's
release). Requests alternate between the two instances, one at a time
(c=1), each on a kept-alive connection. Loopback only; bounded.
"""

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time

BIN, WORK, UPSTREAM, REQUESTS = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


# The commands the request path itself sends, each its own round trip: the
# scripts (admission; release, with its settling pipelined). Redis counts the
# commands a script runs among its commands too (the release's ZREM, the
# admission's ZADD…), but those cross no network: they are not counted here.
ON_PATH = ("evalsha", "eval")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, check=True)
    return out.stdout


def commands(port):
    """Calls per command since Redis started."""
    stats = {}
    for line in redis(port, "INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[len("cmdstat_"):].split(":", 1)
            fields = dict(kv.split("=") for kv in rest.split(","))
            stats[name] = int(fields["calls"])
    return stats


def delta(after, before):
    return {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0) > 0}


def wait_for(port, path="/healthz"):
    said = "nothing answered"
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", path)
            status = c.getresponse().status
            if status == 200:
                return
            said = f"{path} answered {status}"
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"team bench: {said} on {port}")


def run(conns, model, n, times=None):
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hello"}]})
    start = time.monotonic()
    for i in range(n):
        c = conns[i % len(conns)]
        sent = time.monotonic()
        c.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
        r = c.getresponse()
        r.read()
        if times is not None:
            times.append((time.monotonic() - sent) * 1000)
        if r.status != 200:
            raise SystemExit(f"team bench: a request failed with {r.status}")
    return time.monotonic() - start


def percentiles(times):
    times = sorted(times)
    at = lambda q: times[min(len(times) - 1, int(q * len(times)))]
    return {"p50_ms": round(at(0.50), 3), "p99_ms": round(at(0.99), 3)}


def connect(ports):
    conns = [http.client.HTTPConnection("127.0.0.1", p, timeout=10) for p in ports]
    for c in conns:
        # http.client writes the head and the body apart: without this,
        # Nagle and delayed ACKs add tens of ms to every request.
        c.connect()
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conns


def balancer(name, backends):
    """nginx round-robin over `backends` (ports), kept-alive both sides;
    returns its port and process."""
    port = free_port()
    home = os.path.join(WORK, f"balancer-{name}")
    os.makedirs(home, exist_ok=True)
    servers = "\n".join(f"        server 127.0.0.1:{b};" for b in backends)
    with open(os.path.join(home, "nginx.conf"), "w") as f:
        f.write(f"""daemon off;
worker_processes 1;
pid {home}/nginx.pid;
error_log {home}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {home};
    proxy_temp_path {home};
    upstream gateways {{
{servers}
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://gateways;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            # The gateways refuse a Host that is not theirs (DNS rebinding):
            # pass on the loopback name the client used, as docs/team.md does.
            proxy_set_header Host $host;
            proxy_buffering off;
        }}
    }}
}}
""")
    nginx = os.environ.get("NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
    proc = subprocess.Popen([nginx, "-c", os.path.join(home, "nginx.conf"), "-p", home],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return port, proc


def throughput(port, seconds):
    """Requests per second oha gets through `port` at c=32 (all answered 200)."""
    body = json.dumps({"model": "p", "messages": [{"role": "user", "content": "Say hello"}]})
    out = subprocess.run(["oha", "--no-tui", "--output-format", "json", "-z", f"{seconds}s", "-c", "32",
                          "-m", "POST", "-H", "content-type: application/json", "-d", body,
                          f"http://127.0.0.1:{port}/v1/chat/completions"],
                         capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    codes = result.get("statusCodeDistribution", {})
    if set(codes) - {"200"}:
        raise SystemExit(f"team bench: the balancer answered {codes}")
    return result["summary"]["requestsPerSec"]


def balanced(ports, seconds):
    """Throughput of the two instances behind one balancer against the
    gateway without `[team]` behind another, in turns."""
    if not shutil.which("oha"):
        return None
    pair, pair_proc = balancer("pair", ports[:2])
    solo, solo_proc = balancer("solo", ports[2:])
    try:
        wait_for(pair)
        wait_for(solo)
        rates = {"two_instances": [], "one_without_team": []}
        for _ in range(2):
            rates["two_instances"].append(round(throughput(pair, seconds)))
            rates["one_without_team"].append(round(throughput(solo, seconds)))
        return {"seconds": seconds, "concurrency": 32, **rates}
    finally:
        for p in (pair_proc, solo_proc):
            p.terminate()
            p.wait()


def main():
    rport = free_port()
    procs = [subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for _ in range(200):
            try:
                redis(rport, "PING")
                break
            except subprocess.CalledProcessError:
                time.sleep(0.05)
        ports = []
        for name in ("a", "b", "solo"):
            port = free_port()
            ports.append(port)
            conf = os.path.join(WORK, f"team-{name}.toml")
            team = "" if name == "solo" else f"""[team]
redis = "redis://127.0.0.1:{rport}/0"
instance = "bench-{name}"
"""
            with open(conf, "w") as f:
                f.write(f"""[server]
listen = "127.0.0.1:{port}"
rate_limit_per_minute = 100000000

{team}
[policy]
max_retries = 0

[[providers]]
name = "plain"
kind = "openai"
base_url = "http://127.0.0.1:{UPSTREAM}/v1"
auth = "none"
probe = false
models = {{ "p" = "m" }}

[[providers]]
name = "capped"
kind = "openai"
base_url = "http://127.0.0.1:{UPSTREAM}/v1"
auth = "none"
probe = false
models = {{ "c" = "m" }}
policy = {{ max_concurrency = 64, requests_per_minute = 100000000 }}
""")
            procs.append(subprocess.Popen([BIN, "serve", "--config", conf, "--data-dir",
                                           os.path.join(WORK, f"team-{name}-data")],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for port in ports:
            wait_for(port)
        time.sleep(1.5)  # both on the roll call, their first resync done
        conns, solo = connect(ports[:2]), connect(ports[2:])
        run(conns, "p", 50)
        run(conns, "c", 50)  # warm
        figures = {}
        for model, label in (("p", "plain"), ("c", "capped")):
            before = commands(rport)
            took = run(conns, model, REQUESTS)
            during = delta(commands(rport), before)
            # What the instances send meanwhile without any request.
            before = commands(rport)
            time.sleep(took)
            idle = delta(commands(rport), before)
            extra = {k: during.get(k, 0) - idle.get(k, 0) for k in during}
            per = {k: round(v / REQUESTS, 3) for k, v in sorted(extra.items()) if v > 0}
            # Redis counts the commands a script runs as commands too; what
            # a request waits on is what the gateway sends on its path: the
            # admission script and the lease's release. Events go to and
            # come from the team's stream in batches, off the path.
            on_path = sum(v for k, v in per.items() if k in ON_PATH)
            figures[label] = {"requests": REQUESTS, "seconds": round(took, 3), "on_path_commands": list(ON_PATH),
                              "ms_per_request": round(took * 1000 / REQUESTS, 3),
                              "commands_per_request": per, "on_request_path": round(on_path, 3)}
        # The latency the team adds to a capped provider at c=1: the two
        # instances against the same gateway without `[team]`, in turns.
        run(solo, "c", 50)
        team_times, solo_times = [], []
        for _ in range(4):
            run(conns, "c", REQUESTS // 4, team_times)
            run(solo, "c", REQUESTS // 4, solo_times)
        figures["latency"] = {"requests": len(team_times), "team": percentiles(team_times),
                              "team_off": percentiles(solo_times)}
        figures["balanced"] = balanced(ports, int(os.environ.get("THROUGHPUT_SECONDS", "5")))
        print(json.dumps(figures))
    finally:
        for p in procs[1:]:
            p.terminate()
        for p in procs[1:]:
            p.wait()
        procs[0].terminate()
        procs[0].wait()


main()
