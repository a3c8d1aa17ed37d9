"""build/bench tls: HTTPS/1.1 against band-edge and nginx with h2load (TLS 1.3, the same test
certificate, servers on CPU 0 and h2load on CPU 1), in alternating rounds:
  keep-alive: the ~60 KB script on 64 connections for SECONDS (Accept-Encoding: br, gzip);
  handshakes: new connections with one request each (h2load -c 100 -n 100, run again and again for
              SECONDS), counted per second of wall time and per CPU second of the server.
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
    ok, failed, elapsed, rps, out = h2load("-c", "64", "-D", str(int(duration)), "--warm-up-time", "1",
                                           "-H", "Accept-Encoding: br, gzip", f"https://127.0.0.1:{port}{js_path}")
    mean = re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", out).group(1)
    cpu = (ticks(pid) - before) / HZ
    return {"rps": rps, "failed": failed, "mean": mean, "cpu_us": cpu / max(ok, 1) * 1e6}


def handshakes(port, pid, duration):
    before, started, total, failures = ticks(pid), time.monotonic(), 0, 0
    while time.monotonic() - started < duration:
        ok, failed, *_ = h2load("-c", "100", "-n", "100", f"https://127.0.0.1:{port}/healthz")
        total += ok
        failures += failed
    wall = time.monotonic() - started
    cpu = (ticks(pid) - before) / HZ
    return {"rate": total / wall, "failed": failures, "cpu_us": cpu / max(total, 1) * 1e6}


results = {name: {"ka": [], "hs": []} for name, _, _ in servers}
for name, port, pid in servers:  # warm-up
    keep_alive(port, pid, 2)
for r in range(rounds):
    for name, port, pid in servers:
        results[name]["ka"].append(keep_alive(port, pid, seconds))
    for name, port, pid in servers:
        results[name]["hs"].append(handshakes(port, pid, seconds / 2))

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


report(f"GET {js_path} over HTTPS/1.1 (TLS 1.3), h2load --h1 -c64, {rounds} rounds x {seconds:.0f} s",
       "ka", "rps", "requests/s",
       lambda x: f"{x['rps']:>11.0f} req/s  mean {x['mean']:>8}  {x['cpu_us']:>7.2f} us CPU/req  failed {x['failed']}",
       ">= 1.1 requests/s")
report(f"New TLS 1.3 handshakes, one request each (h2load --h1 -c100 -n100, repeated), {rounds} rounds",
       "hs", "rate", "handshakes/s",
       lambda x: f"{x['rate']:>9.0f} handshakes/s  {x['cpu_us']:>8.1f} us CPU/handshake  failed {x['failed']}",
       ">= 1 handshakes/s")
