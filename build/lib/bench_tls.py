"""build/bench tls: HTTPS/1.1 against band-edge and nginx with h2load (TLS 1.3, the same test
certificate, servers on CPU 0 and h2load on CPU 1). Each round gives each server SECONDS of each
workload in short turns that alternate between the servers, so that a drift in the machine's speed
(it has two shared cores) falls on both alike:
  keep-alive: the ~60 KB script (served br) on 64 connections, turns of 2 s (h2load -D 2 after a
              0.25 s warm-up), Accept-Encoding: br, gzip;
  handshakes: new connections with one request each, one h2load -c 400 -n 400 per turn, counted
              per second of the turns' wall time and per CPU second of the server.
Usage: bench_tls.py WORK JS_PATH ROUNDS SECONDS name:port:pid...
"""

import os
import re
import statistics
import subprocess
import sys
import time

work, js_path, rounds, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
servers = [(name, int(port), int(pid)) for name, port, pid in (arg.split(":") for arg in sys.argv[5:])]
NAMES = {"edge": "band-edge", "nginx": "nginx"}
HZ = os.sysconf("SC_CLK_TCK")
WARM_UP = 0.25


def ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def h2load(*args):
    out = subprocess.run(["taskset", "-c", "1", "h2load", "--h1", "-t", "1", *args], capture_output=True,
                         text=True).stdout
    done = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
    finished = re.search(r"finished in ([\d.]+)(ms|s), ([\d.]+) req/s", out)
    elapsed = float(finished.group(1)) / (1000 if finished.group(2) == "ms" else 1)
    return int(done.group(4)), int(done.group(5)), elapsed, float(finished.group(3)), out


def keep_alive(port, pid, duration):
    before = ticks(pid)
    ok, failed, elapsed, rps, out = h2load("-c", "64", "-D", str(duration), "--warm-up-time", f"{int(WARM_UP * 1000)}ms",
                                           "-H", "Accept-Encoding: br, gzip", f"https://127.0.0.1:{port}{js_path}")
    # h2load counts the requests after the warm-up; the server's CPU time covers the warm-up too.
    cpu = (ticks(pid) - before) / HZ * duration / (duration + WARM_UP)
    return {"ok": ok, "failed": failed, "elapsed": elapsed, "cpu": cpu}


def handshakes(port, pid):
    before, started = ticks(pid), time.monotonic()
    ok, failed, *_ = h2load("-c", "400", "-n", "400", f"https://127.0.0.1:{port}/healthz")
    return {"ok": ok, "failed": failed, "elapsed": time.monotonic() - started, "cpu": (ticks(pid) - before) / HZ}


def summed(turns):
    ok, elapsed, cpu = sum(t["ok"] for t in turns), sum(t["elapsed"] for t in turns), sum(t["cpu"] for t in turns)
    return {"rate": ok / elapsed, "failed": sum(t["failed"] for t in turns), "cpu_us": cpu / max(ok, 1) * 1e6,
            "turns": len(turns)}


results = {name: {"ka": [], "hs": []} for name, _, _ in servers}
for name, port, pid in servers:  # warm-up
    keep_alive(port, pid, 2)
for r in range(rounds):
    turns = {name: [] for name, _, _ in servers}
    for _ in range(max(1, int(seconds / 2))):
        for name, port, pid in servers:
            turns[name].append(keep_alive(port, pid, 2))
    for name, _, _ in servers:
        results[name]["ka"].append(summed(turns[name]))
    turns = {name: [] for name, _, _ in servers}
    started = time.monotonic()
    while time.monotonic() - started < seconds * len(servers):
        for name, port, pid in servers:
            turns[name].append(handshakes(port, pid))
    for name, _, _ in servers:
        results[name]["hs"].append(summed(turns[name]))


def report(title, key, metric, unit, row, target):
    """Per-round rows, then band-edge/nginx ratios of the medians (and of each round's pair)."""
    print(f"\n== {title}")
    for r in range(rounds):
        for name, _, _ in servers:
            print(f"{r + 1:<7}{NAMES[name]:<11}" + row(results[name][key][r]))
    med = {name: statistics.median(x[metric] for x in results[name][key]) for name, _, _ in servers}
    cpu = {name: statistics.median(x["cpu_us"] for x in results[name][key]) for name, _, _ in servers}
    pairs = ", ".join(f"{a[metric] / b[metric]:.3f}" for a, b in zip(results["edge"][key], results["nginx"][key]))
    print(f"ratio      band-edge/nginx: {unit} {med['edge'] / med['nginx']:.3f} (paired rounds {pairs}), "
          f"CPU per {unit.split('/')[0].rstrip('s')} {cpu['edge'] / cpu['nginx']:.3f} (target {target})")


report(f"GET {js_path} over HTTPS/1.1 (TLS 1.3), h2load --h1 -c64, {rounds} rounds x {seconds:.0f} s in 2 s turns",
       "ka", "rate", "requests/s",
       lambda x: f"{x['rate']:>11.0f} req/s  {x['cpu_us']:>7.2f} us CPU/req  turns {x['turns']}  failed {x['failed']}",
       ">= 1.1 requests/s")
report(f"New TLS 1.3 handshakes, one request each (h2load --h1 -c400 -n400 per turn), {rounds} rounds",
       "hs", "rate", "handshakes/s",
       lambda x: f"{x['rate']:>9.0f} handshakes/s  {x['cpu_us']:>8.1f} us CPU/handshake  turns {x['turns']}  "
                 f"failed {x['failed']}",
       ">= 1 handshakes/s")
