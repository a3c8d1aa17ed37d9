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

import statistics
import sys
import time

from bench_h2load import HZ, h2load, half_cpu, summed, ticks

work, js_path, rounds, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
servers = [(name, int(port), int(pid)) for name, port, pid in (arg.split(":") for arg in sys.argv[5:])]
NAMES = {"edge": "band-edge", "nginx": "nginx"}
WARM_UP = 0.25


def keep_alive(port, pid, duration):
    before, started = ticks(pid), time.monotonic()
    run = h2load("--h1", "-c", "64", "-D", str(duration), "--warm-up-time", f"{int(WARM_UP * 1000)}ms",
                 "-H", "Accept-Encoding: br, gzip", f"https://127.0.0.1:{port}{js_path}")
    # h2load counts the requests after the warm-up; the server's CPU time covers the warm-up too.
    cpu = (ticks(pid) - before) / HZ * duration / (duration + WARM_UP)
    return {**run, "cpu": cpu, "wall": time.monotonic() - started}


def handshakes(port, pid):
    before, started = ticks(pid), time.monotonic()
    run = h2load("--h1", "-c", "400", "-n", "400", f"https://127.0.0.1:{port}/healthz")
    wall = time.monotonic() - started
    return {**run, "elapsed": wall, "cpu": (ticks(pid) - before) / HZ, "wall": wall}


def measure():
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
    return results


def report(results, title, key, metric, unit, row, target):
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


def report_all(results, setting):
    report(results, f"GET {js_path} over HTTPS/1.1 (TLS 1.3), h2load --h1 -c64, {setting}, {rounds} rounds x "
           f"{seconds:.0f} s in 2 s turns", "ka", "rate", "requests/s",
           lambda x: f"{x['rate']:>11.0f} req/s  {x['cpu_us']:>7.2f} us CPU/req  h2load busy {x['client']:>4.0%}  "
                     f"turns {x['turns']}  failed {x['failed']}",
           ">= 1.1 requests/s")
    report(results, f"New TLS 1.3 handshakes, one request each (h2load --h1 -c400 -n400 per turn), {setting}, "
           f"{rounds} rounds", "hs", "rate", "handshakes/s",
           lambda x: f"{x['rate']:>9.0f} handshakes/s  {x['cpu_us']:>8.1f} us CPU/handshake  "
                     f"h2load busy {x['client']:>4.0%}  turns {x['turns']}  failed {x['failed']}",
           ">= 1 handshakes/s")


report_all(measure(), "servers on CPU 0 (all of it), h2load on CPU 1")

# On two cores h2load needs about as much CPU per request as either server, so above it is busy
# 95-99% and the rates say more about the client than the servers. Here each server gets the same
# half of CPU 0 (a CPU quota of 5 ms per 10 ms), the client keeps all of CPU 1, and the rates compare
# the servers.
with half_cpu([pid for _, _, pid in servers]) as held:
    if held:
        report_all(measure(), "each server limited to half of CPU 0, h2load on CPU 1")
    else:
        print("\n(no writable cgroup with a CPU controller here: the half-CPU comparison is skipped)")
