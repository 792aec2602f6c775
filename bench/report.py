"""Turns one benchmark run's raw files into the table, bench/results.json
and docs/benchmarks.md. Targets are ratios and overheads on this machine,
measured in the same run: against direct, against the floor (nginx as a
plain reverse proxy) and, for translated requests, against passthrough.
The c=1 and c=32 phases ran several times: each figure is the median run's,
and the JSON keeps every run's."""

import datetime
import json
import os
import platform
import re
import sqlite3
import statistics
import subprocess
import sys

work, warm_served, streams, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def oha(name):
    with open(os.path.join(work, name)) as f:
        return json.load(f)


def served(run):
    return sum(int(n) for code, n in run.get("statusCodeDistribution", {}).items() if code.startswith("2"))


def total(run):
    return sum(int(n) for n in run.get("statusCodeDistribution", {}).values())


def pct(run, p):
    return run["latencyPercentiles"][p] * 1000.0  # seconds → ms


def stream_times(name):
    rows = [tuple(map(float, line.split())) for line in open(os.path.join(work, name)) if line.strip()]
    return statistics.median(r[0] for r in rows) * 1000.0, statistics.median(r[1] for r in rows) * 1000.0


runs = range(1, repeat + 1)
# The timed runs through the gateway besides c32-gateway, each tagged by
# user agent (bench/run): translated requests, and streams with and without
# translation.
TIMED = ("translated", "streamed", "translated-streamed")
phases = [f"{phase}-{side}-{i}.json" for phase in ("c1", "c32") for side in ("direct", "gateway", "floor") for i in runs]
phases += [f"{name}-{i}.json" for name in TIMED for i in runs]
for name in phases + ["fallback-gateway.json"]:
    run = oha(name)
    if served(run) != total(run) or total(run) == 0:
        sys.exit(f"bench: {name} had failures: {run.get('statusCodeDistribution')} {run.get('errorDistribution')}")


def median_run(runs_, key):
    """The run whose `key` is the median (the lower one for an even count)."""
    ordered = sorted(runs_, key=key)
    return ordered[(len(ordered) - 1) // 2]


def cpu_us(name, run):
    """CPU per request from a "before after ticks-per-second" file and the oha run it spans."""
    before_, after_, tck_ = map(int, open(os.path.join(work, name)).read().split())
    return (after_ - before_) / tck_ * 1e6 / max(total(run), 1)


def cpu_of(name):
    """CPU per request of the process a timed run (bench/run's `timed`) measured."""
    return cpu_us(f"{name}-cpu.txt", oha(f"{name}.json"))


def rps(run):
    return run["summary"]["requestsPerSec"]


# c=1: each run's overhead is gateway minus direct of the same run; the
# median run by p50 overhead gives the row.
c1_pairs = [(oha(f"c1-direct-{i}.json"), oha(f"c1-gateway-{i}.json")) for i in runs]
c1d, c1g = median_run(c1_pairs, lambda pair: pct(pair[1], "p50") - pct(pair[0], "p50"))
c32_runs = [(oha(f"c32-direct-{i}.json"), oha(f"c32-gateway-{i}.json"), cpu_of(f"c32-gateway-{i}")) for i in runs]
c32d, c32g, cpu_us_per_request = median_run(
    c32_runs, lambda run: run[1]["summary"]["requestsPerSec"] / run[0]["summary"]["requestsPerSec"]
)
fb = oha("fallback-gateway.json")
ttfb_d, ttlb_d = stream_times("stream-direct.txt")
ttfb_g, ttlb_g = stream_times("stream-gateway.txt")
cold_ttfb_d, cold_ttlb_d = stream_times("stream-cold-direct.txt")
cold_ttfb_g, cold_ttlb_g = stream_times("stream-cold-gateway.txt")
peak_rss_mib = int(open(os.path.join(work, "peak-rss-kib.txt")).read().strip()) / 1024.0

# The floor, from the same runs: each run's added latency is the proxy's
# minus direct of that run, as for the gateway; the median run gives each row.
floor_c1 = [(oha(f"c1-direct-{i}.json"), oha(f"c1-floor-{i}.json")) for i in runs]
f1d, f1g = median_run(floor_c1, lambda pair: pct(pair[1], "p50") - pct(pair[0], "p50"))
floor_c32 = [(oha(f"c32-direct-{i}.json"), oha(f"c32-floor-{i}.json"), cpu_of(f"c32-floor-{i}")) for i in runs]
f32d, f32g, floor_cpu = median_run(floor_c32, lambda run: rps(run[1]) / rps(run[0]))
floor_ttfb, floor_ttlb = stream_times("stream-floor.txt")
floor_rss_mib = int(open(os.path.join(work, "floor-rss-kib.txt")).read().strip()) / 1024.0

# Translated against passthrough, run by run (each translated run came right
# after its passthrough run): the median run by the CPU ratio gives each row.
def translation_run(i, passthrough, translated):
    p, t = oha(f"{passthrough}.json"), oha(f"{translated}.json")
    pc, tc = cpu_of(passthrough), cpu_of(translated)
    return {"passthrough_rps": rps(p), "translated_rps": rps(t), "passthrough_cpu_us": pc, "translated_cpu_us": tc,
            "cpu_ratio": tc / pc}


translation = {}
for kind, passthrough, translated in (("whole", "c32-gateway", "translated"),
                                      ("streamed", "streamed", "translated-streamed")):
    each = [translation_run(i, f"{passthrough}-{i}", f"{translated}-{i}") for i in runs]
    translation[kind] = dict(median_run(each, lambda run: run["cpu_ratio"]), runs=each)

db = sqlite3.connect(os.path.join(work, "data", "switchyard.db"))
# Every phase but the timed one must match exactly. The timed c=32 run ends by
# abandoning up to 32 in-flight requests, which the gateway may already have
# answered (and recorded) or records as canceled.
tags = {"c32": [g for _, g, _ in c32_runs]} | {name: [oha(f"{name}-{i}.json") for i in runs] for name in TIMED}
# The cache phase is checked on its own, below: its hits have no attempts.
untimed = "user_agent IS NULL OR user_agent NOT IN (" + ", ".join(
    f"'switchyard-bench-{t}'" for t in [*tags, "cache"]
) + ")"
request_rows = db.execute(f"select count(*) from requests where {untimed}").fetchone()[0]
attempt_rows = db.execute(
    f"select count(*) from attempts where request_id in (select id from requests where {untimed})"
).fetchone()[0]
# Per tag: (rows recorded, responses the client saw).
tagged = {
    t: (db.execute("select count(*) from requests where user_agent = ?", (f"switchyard-bench-{t}",)).fetchone()[0],
        sum(total(run) for run in tagged_runs))
    for t, tagged_runs in tags.items()
}
timed_rows = tagged["c32"][0]
canceled_rows = db.execute("select count(*) from requests where outcome = 'canceled'").fetchone()[0]
fallback_rows = db.execute("select count(*) from requests where fallback = 1").fetchone()[0]
c1_served = sum(total(g) for _, g in c1_pairs)
c32_responses = sum(total(g) for _, g, _ in c32_runs)
gateway_requests = warm_served + c1_served + total(fb) + 2 * streams  # kept-alive and cold streams
expected_attempts = gateway_requests + total(fb)  # each fallback request is two attempts

r = {
    "c1": {
        "direct_ms": {p: pct(c1d, p) for p in ("p50", "p95", "p99")},
        "gateway_ms": {p: pct(c1g, p) for p in ("p50", "p95", "p99")},
    },
    "c32": {"direct_rps": c32d["summary"]["requestsPerSec"], "gateway_rps": c32g["summary"]["requestsPerSec"]},
    "stream": {"direct_ttfb_ms": ttfb_d, "gateway_ttfb_ms": ttfb_g, "direct_ttlb_ms": ttlb_d, "gateway_ttlb_ms": ttlb_g},
    "stream_new_connection": {"direct_ttfb_ms": cold_ttfb_d, "gateway_ttfb_ms": cold_ttfb_g,
                              "direct_ttlb_ms": cold_ttlb_d, "gateway_ttlb_ms": cold_ttlb_g},
    "fallback_ms": {p: pct(fb, p) for p in ("p50", "p95", "p99")},
    "fallback_served": served(fb),
    "peak_rss_mib": peak_rss_mib,
    "cpu_us_per_request": cpu_us_per_request,
    "floor": {
        "c1_ms": {p: pct(f1g, p) for p in ("p50", "p95", "p99")},
        "c1_direct_ms": {p: pct(f1d, p) for p in ("p50", "p95", "p99")},
        "c32_rps": rps(f32g),
        "c32_direct_rps": rps(f32d),
        "cpu_us_per_request": floor_cpu,
        "stream_ttfb_ms": floor_ttfb,
        "stream_ttlb_ms": floor_ttlb,
        "peak_rss_mib": floor_rss_mib,
        "runs": {
            "c1_p50_overhead_ms": [pct(g, "p50") - pct(d, "p50") for d, g in floor_c1],
            "c1_p99_overhead_ms": [pct(g, "p99") - pct(d, "p99") for d, g in floor_c1],
            "c32_ratio": [rps(g) / rps(d) for d, g, _ in floor_c32],
            "cpu_us_per_request": [c for _, _, c in floor_c32],
        },
    },
    "translated": translation,
    "runs": {
        "c1_p50_overhead_ms": [pct(g, "p50") - pct(d, "p50") for d, g in c1_pairs],
        "c1_p99_overhead_ms": [pct(g, "p99") - pct(d, "p99") for d, g in c1_pairs],
        "c32_ratio": [g["summary"]["requestsPerSec"] / d["summary"]["requestsPerSec"] for d, g, _ in c32_runs],
        "c32_gateway_rps": [g["summary"]["requestsPerSec"] for _, g, _ in c32_runs],
        "cpu_us_per_request": [c for _, _, c in c32_runs],
    },
    "records": {"gateway_requests": gateway_requests, "request_rows": request_rows, "attempt_rows": attempt_rows,
                "expected_attempt_rows": expected_attempts, "fallback_rows": fallback_rows,
                "canceled_rows": canceled_rows, "timed_run_rows": timed_rows, "timed_run_responses": c32_responses,
                "timed_runs": {t: {"rows": rows, "responses": seen} for t, (rows, seen) in tagged.items()}},
}
over = {p: r["c1"]["gateway_ms"][p] - r["c1"]["direct_ms"][p] for p in ("p50", "p95", "p99")}
ratio = r["c32"]["gateway_rps"] / r["c32"]["direct_rps"]
stream_over = ttfb_g - ttfb_d
r["overhead_ms"] = over
r["throughput_ratio"] = ratio
r["stream_ttfb_overhead_ms"] = stream_over
r["stream_ttlb_overhead_ms"] = ttlb_g - ttlb_d
floor_over = {p: r["floor"]["c1_ms"][p] - r["floor"]["c1_direct_ms"][p] for p in ("p50", "p95", "p99")}
floor_stream_over = floor_ttfb - ttfb_d
# Switchyard against the floor: its rate over nginx's, its added latency and
# CPU over nginx's.
def over_floor(ours, theirs):
    """Our added time over the floor's; none when either is within noise of zero (negative)."""
    return ours / theirs if ours >= 0 and theirs > 0 else None


vs_floor = {
    "c32_rps": r["c32"]["gateway_rps"] / r["floor"]["c32_rps"],
    "c1_p50_overhead": over_floor(over["p50"], floor_over["p50"]),
    "c1_p99_overhead": over_floor(over["p99"], floor_over["p99"]),
    "cpu_us_per_request": cpu_us_per_request / floor_cpu,
    "stream_ttfb_overhead": over_floor(stream_over, floor_stream_over),
}
r["floor"]["overhead_ms"] = floor_over
r["floor"]["stream_ttfb_overhead_ms"] = floor_stream_over
r["vs_floor"] = vs_floor
r["runs"]["c32_vs_floor"] = [rps(g) / rps(f) for (_, g, _), (_, f, _) in zip(c32_runs, floor_c32)]
r["runs"]["c1_p50_overhead_vs_floor"] = [
    over_floor(pct(g, "p50") - pct(d, "p50"), pct(f, "p50") - pct(d, "p50")) for (d, g), (_, f) in zip(c1_pairs, floor_c1)
]


def times(x):
    return "—" if x is None else f"{x:.2f}×"

p50_vs_floor = vs_floor["c1_p50_overhead"]
checks = [
    ("throughput ≥ 0.8× nginx-as-proxy's (c=32)", f"{vs_floor['c32_rps']:.2f}×", vs_floor["c32_rps"] >= 0.8),
    ("added latency at c=1, p50 ≤ 1.5× nginx-as-proxy's",
     f"{over['p50']:.3f} ms against {floor_over['p50']:.3f} ms: {times(p50_vs_floor)}",
     p50_vs_floor is not None and p50_vs_floor <= 1.5),
    ("added latency at c=1, p99 ≤ 1 ms", f"{over['p99']:.3f} ms", over["p99"] <= 1.0),
    ("streaming first-byte overhead ≤ 0.3 ms", f"{stream_over:.3f} ms", stream_over <= 0.3),
    ("peak RSS ≤ 40 MiB under c=32", f"{peak_rss_mib:.1f} MiB", peak_rss_mib <= 40),
    ("CPU ≤ 60 µs per request", f"{cpu_us_per_request:.1f} µs", cpu_us_per_request <= 60),
    ("translated CPU per request ≤ 2× passthrough's", f"{translation['whole']['cpu_ratio']:.2f}×",
     translation["whole"]["cpu_ratio"] <= 2),
    ("same, streamed", f"{translation['streamed']['cpu_ratio']:.2f}×", translation["streamed"]["cpu_ratio"] <= 2),
    ("every request recorded",
     f"{request_rows}/{gateway_requests} requests, {attempt_rows}/{expected_attempts} attempts; timed runs "
     + ", ".join(f"{rows} rows for {seen} responses" for rows, seen in tagged.values()),
     request_rows == gateway_requests and attempt_rows == expected_attempts
     and all(seen <= rows <= seen + 32 * repeat for rows, seen in tagged.values())),
]
# The response cache (bench/cache.py): hit latency, the CPU a miss adds, and
# every one of its requests on record with the status its header said.
cache = json.load(open(os.path.join(work, "cache.json")))
cache_rows = dict(db.execute(
    "select coalesce(cache, 'none'), count(*) from requests where user_agent = 'switchyard-bench-cache' group by 1"
).fetchall())
cache_attempts = db.execute(
    "select count(*) from attempts where request_id in "
    "(select id from requests where user_agent = 'switchyard-bench-cache')"
).fetchone()[0]
cache_expected_attempts = cache["requests"] - cache["statuses"].get("hit", 0)
r["cache"] = cache | {"rows": cache_rows, "attempt_rows": cache_attempts}
hit_json, hit_stream = cache["hit_ms"]["json"], cache["hit_ms"]["stream"]
miss = cache["miss"]
checks += [
    ("a cache hit answers in < 1 ms at p50, JSON / streamed",
     f"{hit_json['p50_ms']:.3f} / {hit_stream['p50_ms']:.3f} ms", hit_json["p50_ms"] < 1 and hit_stream["p50_ms"] < 1),
    ("a cache miss adds < 20 µs of CPU to a request",
     f"{miss['added_cpu_us']:.1f} µs ({miss['cpu_us_per_request_on']:.1f} against {miss['cpu_us_per_request_off']:.1f}, "
     f"{miss['requests_each_way']} requests each way in {miss['turns']} turns, the turns' middle half "
     f"{miss['added_cpu_us_turn_quartiles'][0]:+.1f} to {miss['added_cpu_us_turn_quartiles'][2]:+.1f})",
     miss["added_cpu_us"] < 20),
    ("every cache request recorded with its status",
     ", ".join(f"{n} {s}" for s, n in sorted(cache_rows.items())) + f"; {cache_attempts}/{cache_expected_attempts} attempts",
     cache_rows == cache["statuses"] and cache_attempts == cache_expected_attempts),
]

# One line per backend (tests/tests/history_scale.rs): SQLite, then PostgreSQL.
histories = {}
history_file = os.path.join(work, "history.json")
if os.path.exists(history_file):
    for line in open(history_file):
        if line.strip():
            h = json.loads(line)
            histories[h.get("backend", "sqlite")] = h
history = histories.get("sqlite") or next(iter(histories.values()), None)
if histories:
    r["history"] = history
    r["history_backends"] = histories
for backend, h in histories.items():
    spend_worst = max(h["spend_ms"].values())
    list_worst = max(h["requests_first_page_ms"].values())
    ret = h["retention"]
    wait_worst = max(ret["read_max_ms_during"], ret["commit_max_ms_during"])
    rows_label = f"{h['rows']:,} requests on {backend}"
    checks += [
        (f"every /admin/spend bucket < 20 ms at {rows_label}", f"{spend_worst:.2f} ms (slowest)", spend_worst < 20),
        (f"every /admin/requests filter's first page < 10 ms at {rows_label}", f"{list_worst:.2f} ms (slowest)", list_worst < 10),
        (f"/admin/requests/{{id}} < 2 ms at {rows_label}", f"{h['request_detail_ms']:.2f} ms", h["request_detail_ms"] < 2),
        # Sustained: a day's traffic. The year's fill also makes a new day
        # (partitions, on PostgreSQL) every few hundred records.
        (f"history writer on {backend} ≥ 30,000 records/s within a day",
         f"{h.get('writer_today_records_per_s', h['writer_records_per_s']):,.0f}/s "
         f"({h['writer_records_per_s']:,.0f}/s filling a year)",
         h.get("writer_today_records_per_s", h["writer_records_per_s"]) >= 30000),
        (f"no read or commit waits > 10 ms on retention ({backend})", f"{wait_worst:.2f} ms (longest)", wait_worst <= 10),
    ]
    if h.get("first_paint_ms"):
        paints = h["first_paint_ms"]
        slowest = max(paints, key=paints.get)
        checks.append((f"the dashboard's first paint of each view < 300 ms at {rows_label}",
                       f"{paints[slowest]:.0f} ms (slowest: {slowest})", paints[slowest] < 300))
# Team mode: Redis commands per request (bench/team.py).
team = None
team_file = os.path.join(work, "team.json")
if os.path.exists(team_file) and os.path.getsize(team_file) > 0:
    team = json.load(open(team_file))
    r["team"] = team
    capped, plain = team["capped"], team["plain"]
    checks.append((
        "team mode: at most 3 Redis round trips on the request path",
        f"{capped['on_request_path']:.2f} round trips a request with a cap and a rate limit; Redis ran "
        f"({', '.join(f'{k} {v}' for k, v in capped['commands_per_request'].items())}) a request, scripts' own and "
        f"the events' stream included; "
        f"{plain['on_request_path']:.2f} without; c=1 {capped['ms_per_request']:.3f} vs {plain['ms_per_request']:.3f} ms a request",
        capped["on_request_path"] <= 3 and plain["on_request_path"] <= 0.05,
    ))
    if "latency" in team:
        lat = team["latency"]
        added = lat["team"]["p99_ms"] - lat["team_off"]["p99_ms"]
        checks.append((
            "team mode: added p99 at c=1 (a capped provider) against team-off <= 1 ms",
            f"{added:+.3f} ms (p99 {lat['team']['p99_ms']:.3f} vs {lat['team_off']['p99_ms']:.3f} ms; "
            f"p50 {lat['team']['p50_ms']:.3f} vs {lat['team_off']['p50_ms']:.3f} ms; {lat['requests']:,} requests each)",
            added <= 1.0,
        ))
    if team.get("balanced"):
        bal = team["balanced"]
        two, one = sorted(bal["two_instances"])[-1], sorted(bal["one_without_team"])[-1]
        # Both instances share this machine's cores with nginx, oha and the
        # upstream: a second instance adds no CPU here, so the check is that
        # a team behind a balancer costs no throughput, not that it doubles.
        checks.append((
            "team mode: two instances behind nginx against one without [team], throughput not lower (-10%)",
            f"{two:,} vs {one:,} req/s ({two / one:.2f}x; best of {len(bal['two_instances'])}, c={bal['concurrency']}, "
            f"{bal['seconds']} s each)",
            two >= 0.9 * one,
        ))

open_streams = None
open_file = os.path.join(work, "open-streams.json")
if os.path.exists(open_file) and os.path.getsize(open_file) > 0:
    open_streams = json.load(open(open_file))
    r["open_streams"] = open_streams
    held, left, floor_held = open_streams["held"], open_streams["left"], open_streams["floor"]
    before, during, after = held["plain_before"], held["plain_during"], held["plain_after"]
    # The run-to-run spread of c=1 p50: the two quiet measures, before and after.
    spread = abs(before["p50_ms"] - after["p50_ms"])
    quiet = max(before["p50_ms"], after["p50_ms"])
    label = f"{held['streams']:,} streams held {held['seconds']:.0f} s"
    checks += [
        (f"{label}: every stream intact", f"{held['intact']:,} of {held['streams']:,}", held["intact"] == held["streams"]),
        (f"{label}: peak RSS per open stream < 16 KiB above idle",
         f"{held['kib_per_stream']:.1f} KiB ({held['idle_rss_kib'] / 1024:.1f} → {held['peak_rss_kib'] / 1024:.1f} MiB); "
         f"nginx-as-proxy {floor_held['kib_per_stream']:.1f} KiB, "
         f"{held['kib_per_stream'] / floor_held['kib_per_stream']:.2f}× it",
         held["kib_per_stream"] < 16),
        (f"{label}: CPU per event < 5 µs",
         f"{held['us_per_event']:.2f} µs ({held['events_in_window']:,} events); nginx-as-proxy "
         f"{floor_held['us_per_event']:.2f} µs, {held['us_per_event'] / floor_held['us_per_event']:.2f}× it",
         held["us_per_event"] < 5),
        (f"{label}: c=1 p50 of plain requests meanwhile within the run-to-run spread",
         f"{during['p50_ms']:.3f} ms during, {before['p50_ms']:.3f} before, {after['p50_ms']:.3f} after",
         during["p50_ms"] <= quiet + spread),
        (f"{left['streams']:,} clients leave mid-stream: every upstream closed within 100 ms",
         f"{left['close_max_ms']:.1f} ms (slowest; p50 {left['close_p50_ms']:.1f}, p99 {left['close_p99_ms']:.1f})",
         left["close_max_ms"] <= 100),
        (f"{left['streams']:,} clients leave mid-stream: every attempt recorded as canceled",
         f"{left['canceled_on_record']:,} of {left['streams']:,}", left["canceled_on_record"] == left["streams"]),
    ]
# Instructions per request with the inspector's capture off and on
# (bench/instructions, "off N" and "on N" lines), when that phase ran.
instructions = None
instructions_file = os.path.join(work, "instructions.txt")
if os.path.exists(instructions_file) and os.path.getsize(instructions_file) > 0:
    counted = dict(line.split() for line in open(instructions_file) if line.strip())
    instructions = {"capture_off": int(counted["off"]), "capture_on": int(counted["on"])}
    instructions["ratio"] = instructions["capture_on"] / instructions["capture_off"]
    if "traced" in counted:
        instructions["traced"] = int(counted["traced"])
        instructions["traced_ratio"] = instructions["traced"] / instructions["capture_off"]
    r["instructions_per_request"] = instructions
r["targets"] = [{"target": t, "measured": m, "met": ok} for t, m, ok in checks]

cpu = "unknown"
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
r["machine"] = {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release()}
r["date"] = datetime.date.today().isoformat()
r["oha"] = subprocess.run(["oha", "--version"], capture_output=True, text=True).stdout.strip()

rows = [
    ("c=1 latency p50 / p95 / p99 (ms)",
     "{p50:.3f} / {p95:.3f} / {p99:.3f}".format(**r["c1"]["direct_ms"]),
     "{p50:.3f} / {p95:.3f} / {p99:.3f}".format(**r["c1"]["gateway_ms"]),
     "{p50:+.3f} / {p95:+.3f} / {p99:+.3f}".format(**over)),
    ("c=32 throughput (requests/s)", f"{r['c32']['direct_rps']:.0f}", f"{r['c32']['gateway_rps']:.0f}", f"{ratio:.2f}×"),
    ("stream time to first byte (ms, median)", f"{ttfb_d:.3f}", f"{ttfb_g:.3f}", f"{stream_over:+.3f}"),
    ("stream time to last byte (ms, median)", f"{ttlb_d:.3f}", f"{ttlb_g:.3f}", f"{ttlb_g - ttlb_d:+.3f}"),
    ("same, new connection per stream: first byte", f"{cold_ttfb_d:.3f}", f"{cold_ttfb_g:.3f}",
     f"{cold_ttfb_g - cold_ttfb_d:+.3f}"),
    ("same, new connection per stream: last byte", f"{cold_ttlb_d:.3f}", f"{cold_ttlb_g:.3f}",
     f"{cold_ttlb_g - cold_ttlb_d:+.3f}"),
    ("fallback path p50 / p99 (ms)", "—", "{p50:.3f} / {p99:.3f}".format(**r["fallback_ms"]), "503, then served"),
    ("gateway peak RSS", "—", f"{peak_rss_mib:.1f} MiB", ""),
    ("gateway CPU per request (c=32)", "—", f"{cpu_us_per_request:.1f} µs", ""),
    ("cache hit p50 / p99 (ms): JSON", "—", f"{hit_json['p50_ms']:.3f} / {hit_json['p99_ms']:.3f}", "no upstream call"),
    ("cache hit p50 / p99 (ms): streamed", "—", f"{hit_stream['p50_ms']:.3f} / {hit_stream['p99_ms']:.3f}",
     "replayed as events"),
    ("CPU per request at c=1, cache off → a miss (µs)", "—",
     f"{miss['cpu_us_per_request_off']:.1f} → {miss['cpu_us_per_request_on']:.1f}",
     f"{miss['added_cpu_us']:+.1f}: " + ", ".join(
         f"{name} {us:+.1f}" for name, us in sorted(miss["added_cpu_us_by_thread"].items(), key=lambda t: -abs(t[1])))),
]
if instructions:
    rows.append(("instructions per request, inspector capture off → on", "—",
                 f"{instructions['capture_off']:,} → {instructions['capture_on']:,}",
                 f"{instructions['ratio']:.2f}× (every request captured)"))
    if "traced" in instructions:
        rows.append(("instructions per request, tracing off → every request traced and exported", "—",
                     f"{instructions['capture_off']:,} → {instructions['traced']:,}",
                     f"{instructions['traced_ratio']:.2f}× (OTLP/HTTP, sampler always_on)"))

floor_rows = [
    ("added latency at c=1, p50 / p99 (ms)", "{p50:+.3f} / {p99:+.3f}".format(**floor_over),
     "{p50:+.3f} / {p99:+.3f}".format(**over),
     f"{times(vs_floor['c1_p50_overhead'])} / {times(vs_floor['c1_p99_overhead'])}"),
    ("c=32 throughput (requests/s, × direct)", f"{r['floor']['c32_rps']:.0f} ({rps(f32g) / rps(f32d):.2f}×)",
     f"{r['c32']['gateway_rps']:.0f} ({ratio:.2f}×)", times(vs_floor["c32_rps"])),
    ("CPU per request at c=32 (µs)", f"{floor_cpu:.1f}", f"{cpu_us_per_request:.1f}", times(vs_floor["cpu_us_per_request"])),
    ("stream first-byte overhead (ms)", f"{floor_stream_over:+.3f}", f"{stream_over:+.3f}",
     times(vs_floor["stream_ttfb_overhead"])),
    ("peak RSS (MiB)", f"{floor_rss_mib:.1f}", f"{peak_rss_mib:.1f}", ""),
]
floor_line = (
    "The floor: nginx as a plain reverse proxy (one process, kept-alive upstream connections, nothing buffered) "
    "in front of the same upstream, in the same runs and measured the same way; the last column is Switchyard's "
    "figure over nginx's."
)
tw, ts = translation["whole"], translation["streamed"]
translated_rows = [
    ("c=32 requests/s, not streamed", f"{tw['passthrough_rps']:.0f}", f"{tw['translated_rps']:.0f}",
     f"{tw['translated_rps'] / tw['passthrough_rps']:.2f}×"),
    ("CPU per request, not streamed (µs)", f"{tw['passthrough_cpu_us']:.1f}", f"{tw['translated_cpu_us']:.1f}",
     f"{tw['cpu_ratio']:.2f}×"),
    ("c=32 streams/s (20-chunk reply)", f"{ts['passthrough_rps']:.0f}", f"{ts['translated_rps']:.0f}",
     f"{ts['translated_rps'] / ts['passthrough_rps']:.2f}×"),
    ("CPU per stream (µs)", f"{ts['passthrough_cpu_us']:.1f}", f"{ts['translated_cpu_us']:.1f}", f"{ts['cpu_ratio']:.2f}×"),
]
translated_line = (
    "Translated: an Anthropic Messages client (`/v1/messages`) served by an OpenAI-kind provider that speaks "
    "Chat only, on the same upstream, against passthrough (an OpenAI Chat client and provider) in the same runs; "
    "the gateway's CPU per request at c=32."
)


def other_gateways():
    """The optional runs through other gateways (see bench/run), by name."""
    out = {}
    for entry in sorted(os.listdir(work)):
        m = re.fullmatch(r"other-([a-z]+)\.txt", entry)
        if not m:
            continue
        name = m.group(1)
        version = (open(os.path.join(work, entry)).read().split() + ["?", "?"])[1]
        c1d_, c1g_ = oha(f"other-{name}-c1-direct.json"), oha(f"other-{name}-c1.json")
        c32d_, c32g_ = oha(f"other-{name}-c32-direct.json"), oha(f"other-{name}-c32.json")
        figures = {
            "version": version,
            "c1_requests": total(c1g_),
            "c1_overhead_ms": {p: pct(c1g_, p) - pct(c1d_, p) for p in ("p50", "p99")},
            "c32_rps": c32g_["summary"]["requestsPerSec"],
            "c32_ratio": c32g_["summary"]["requestsPerSec"] / c32d_["summary"]["requestsPerSec"],
            "cpu_us_per_request": cpu_us(f"other-{name}-cpu.txt", c32g_),
            "peak_rss_mib": int(open(os.path.join(work, f"other-{name}-rss-kib.txt")).read().strip()) / 1024.0,
            "failed": (total(c1g_) - served(c1g_)) + (total(c32g_) - served(c32g_)),
        }
        if os.path.exists(os.path.join(work, f"other-{name}-stream.txt")):
            figures["stream_ttfb_overhead_ms"] = (
                stream_times(f"other-{name}-stream.txt")[0] - stream_times(f"other-{name}-stream-direct.txt")[0]
            )
        out[name] = figures
    return out


others = other_gateways()
titles = {"litellm": "LiteLLM", "portkey": "Portkey"}
other_rows = []
if others:
    r["other_gateways"] = others
    def column(f):
        stream = f.get("stream_ttfb_overhead_ms")
        return [
            "{p50:+.3f} / {p99:+.3f}".format(**f["c1_overhead_ms"]),
            f"{f['c32_rps']:.0f} ({f['c32_ratio']:.2f}×)" if f["c32_ratio"] >= 0.1 else f"{f['c32_rps']:.0f} ({f['c32_ratio']:.2g}×)",
            "failed" if stream is None else f"{stream:+.3f}",
            f"{f['peak_rss_mib']:.1f}",
            f"{f['cpu_us_per_request']:.0f}",
            f"{f['failed']}",
        ]
    ours = column({"c1_overhead_ms": {"p50": over["p50"], "p99": over["p99"]}, "c32_rps": r["c32"]["gateway_rps"],
                   "c32_ratio": ratio, "stream_ttfb_overhead_ms": stream_over, "peak_rss_mib": peak_rss_mib,
                   "cpu_us_per_request": cpu_us_per_request, "failed": 0})
    theirs = [column(f) for f in others.values()]
    measures = ["added latency at c=1, p50 / p99 (ms)", "c=32 requests/s (× direct)", "stream first-byte overhead (ms)",
                "peak RSS (MiB)", "CPU per request at c=32 (µs)", "failed requests"]
    other_rows = [[m, ours[i]] + [t[i] for t in theirs] for i, m in enumerate(measures)]
    other_heads = ["Switchyard"] + [f"{titles.get(n, n)} {f['version']}" for n, f in others.items()]
    other_line = (
        f"Other gateways, installed here, on the same upstream and load after Switchyard stopped (one run each, "
        f"{next(iter(others.values()))['c1_requests']} requests at c=1); Switchyard's column is the table above."
    )


def spread(values, fmt):
    return f"{fmt.format(min(values))} to {fmt.format(max(values))}"


runs_line = "One run of each phase." if repeat == 1 else (
    f"The c=1 and c=32 rows are the median of {repeat} runs. Across the runs: c=1 overhead "
    f"p50 {spread(r['runs']['c1_p50_overhead_ms'], '{:+.3f}')} ms, "
    f"p99 {spread(r['runs']['c1_p99_overhead_ms'], '{:+.3f}')} ms; "
    f"c=32 {spread(r['runs']['c32_ratio'], '{:.2f}×')}, "
    f"CPU {spread(r['runs']['cpu_us_per_request'], '{:.0f}')} µs per request; "
    f"against the floor, c=32 {spread(r['runs']['c32_vs_floor'], '{:.2f}×')}; translated against passthrough, CPU "
    f"{spread([run['cpu_ratio'] for run in tw['runs']], '{:.2f}×')} (not streamed), "
    f"{spread([run['cpu_ratio'] for run in ts['runs']], '{:.2f}×')} (streamed)."
)


def text_table(heads, body):
    w = max(len(x[0]) for x in body)
    out = [f"{'':<{w}}" + "".join(f"  {h:>26}" for h in heads)]
    return out + [f"{row[0]:<{w}}" + "".join(f"  {c:>26}" for c in row[1:]) for row in body]


def md_table(heads, body):
    return ["| " + " | ".join(heads) + " |", "|" + " --- |" * len(heads)] + ["| " + " | ".join(row) + " |" for row in body]


floor_heads = ["nginx as a proxy", "Switchyard", "Switchyard ÷ nginx"]
translated_heads = ["passthrough", "translated", "translated ÷ passthrough"]
lines = text_table(["direct", "through Switchyard", "difference"], rows)
lines += ["", floor_line] + text_table(floor_heads, floor_rows)
lines += ["", translated_line] + text_table(translated_heads, translated_rows)
lines += ["", runs_line, ""]
lines += [f"[{'met' if ok else 'MISSED'}] {t}: {m}" for t, m, ok in checks]
if other_rows:
    w = max(len(row[0]) for row in other_rows)
    lines += ["", other_line, f"{'':<{w}}" + "".join(f"  {h:>22}" for h in other_heads)]
    lines += [f"{row[0]:<{w}}" + "".join(f"  {c:>22}" for c in row[1:]) for row in other_rows]
table = "\n".join(lines)
print(table)

with open(os.path.join(root, "bench", "results.json"), "w") as f:
    json.dump(r, f, indent=2)
    f.write("\n")

md = [
    "# Benchmarks",
    "",
    f"Latest run: {r['date']}, {cpu}, {os.cpu_count()} cores, Linux {platform.release()}, {r['oha']}.",
    "Reproduce with `bench/run` (see [bench-harness.md](bench-harness.md)). Upstream: nginx answering from memory; the gateway",
    "records every request and attempt to SQLite during the run. Latency and streams are measured on",
    "kept-alive connections, as SDK clients use the gateway; the new-connection rows (a curl process and",
    "connection per stream) show what a cold client adds, mostly the wake-ups of idle processes.",
    "",
]
md += md_table(["measure", "direct", "through Switchyard", "difference"], rows)
md += ["", floor_line, ""] + md_table(["measure"] + floor_heads, floor_rows)
md += ["", translated_line, ""] + md_table(["measure"] + translated_heads, translated_rows)
md += ["", runs_line]
md += ["", "| target | measured | |", "| --- | --- | --- |"]
md += [f"| {t} | {m} | {'met' if ok else '**missed**'} |" for t, m, ok in checks]
if other_rows:
    md += ["", other_line, "", "| measure | " + " | ".join(other_heads) + " |",
           "| --- |" + " --- |" * len(other_heads)]
    md += ["| " + " | ".join(row) + " |" for row in other_rows]
if histories:
    names = list(histories)
    hs = [histories[n] for n in names]
    cell = lambda f: " | ".join(f(h) for h in hs)
    md += ["", f"## History at {history['rows']:,} requests", "",
           "A year of synthetic requests recorded through the gateway's own recorder (spool, writer, rollups and",
           "facet entries), then the admin API on loopback, each figure the median of 20 calls (ms), each backend",
           "in the same run (PostgreSQL on loopback):", "",
           "| call | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    md += [f"| `/admin/spend?bucket={k}` | " + cell(lambda h: f"{h['spend_ms'][k]:.2f}") + " |" for k in history["spend_ms"]]
    md += [(f"| `/admin/requests?{k}` first page | " if k != "unfiltered" else "| `/admin/requests` first page | ")
           + cell(lambda h: f"{h['requests_first_page_ms'][k]:.2f}") + " |" for k in history["requests_first_page_ms"]]
    md += ["| `/admin/requests/{id}` | " + cell(lambda h: f"{h['request_detail_ms']:.2f}") + " |"]
    md += ["| writer, records/s over the fill | " + cell(lambda h: f"{h['writer_records_per_s']:,.0f}") + " |"]
    md += ["| writer, records/s within a day | " + cell(lambda h: f"{h.get('writer_today_records_per_s', 0):,.0f}") + " |"]
    for view in (history.get("first_paint_ms") or {}):
        md += [f"| dashboard first paint: {view} (one fresh load, after a warm-up) | "
               + cell(lambda h: f"{(h.get('first_paint_ms') or {}).get(view, float('nan')):.1f}") + " |"]
    for n, h in histories.items():
        ret = h["retention"]
        md += ["", f"{n}: retention removed {ret['removed']:,} requests in {ret['seconds']:.1f} s; meanwhile the longest read took "
               f"{ret['read_max_ms_during']:.2f} ms (idle: {ret['read_max_ms_idle']:.2f}) and the longest one-record commit "
               f"{ret['commit_max_ms_during']:.2f} ms (idle: {ret['commit_max_ms_idle']:.2f})."]
if open_streams:
    held, left, floor_held = open_streams["held"], open_streams["left"], open_streams["floor"]
    md += ["", f"## {held['streams']:,} open streams", "",
           f"A fresh gateway (the release binary) in front of a scripted upstream that holds each stream open, one event every "
           f"{held['interval_ms']} ms, {held['events_per_stream']} events a stream; every stream compared byte for byte with what the "
           f"upstream sent, then the same through nginx as a plain reverse proxy (the floor). Memory is the proxy's peak RSS against "
           f"its RSS before the streams; CPU is its own over the run's second quarter, with nothing but the streams, per event "
           f"sent. Plain requests ran one at a time on a kept-alive connection before, in the third quarter, and after:", "",
           "| | Switchyard | nginx-as-proxy (the floor) | ratio |", "| --- | --- | --- | --- |",
           f"| RSS per open stream above idle (KiB) | {held['kib_per_stream']:.1f} | {floor_held['kib_per_stream']:.1f} "
           f"| {held['kib_per_stream'] / floor_held['kib_per_stream']:.2f}× |",
           f"| CPU per event (µs) | {held['us_per_event']:.2f} | {floor_held['us_per_event']:.2f} "
           f"| {held['us_per_event'] / floor_held['us_per_event']:.2f}× |",
           f"| idle → peak RSS (MiB) | {held['idle_rss_kib'] / 1024:.1f} → {held['peak_rss_kib'] / 1024:.1f} "
           f"| {floor_held['idle_rss_kib'] / 1024:.1f} → {floor_held['peak_rss_kib'] / 1024:.1f} | |"]
    md += [f"| plain requests {name}, c=1 p50 / p99 (ms) | {held[key]['p50_ms']:.3f} / {held[key]['p99_ms']:.3f} "
           f"| {floor_held[key]['p50_ms']:.3f} / {floor_held[key]['p99_ms']:.3f} | |"
           for name, key in (("before", "plain_before"), ("during", "plain_during"), ("after", "plain_after"))]
    md += ["", f"Then {left['streams']:,} clients read {left['read_before_leaving']} events each and left together: the upstream saw its connection closed "
           f"{left['close_p50_ms']:.1f} ms after its client left at the median, {left['close_p99_ms']:.1f} ms at p99 and "
           f"{left['close_max_ms']:.1f} ms at the slowest; {left['canceled_on_record']:,} attempts are on record as canceled."]
notes = os.path.join(root, "docs", "benchmarks-notes.md")
if os.path.exists(notes):
    md += ["", open(notes).read().strip()]
with open(os.path.join(root, "docs", "benchmarks.md"), "w") as f:
    f.write("\n".join(md) + "\n")
