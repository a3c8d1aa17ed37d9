"""build/bench gateway: an authenticated GET forwarded to a fixed upstream (an nginx answering every
request with the same ~1 KB JSON, keep-alive, on CPU 1 with wrk) by band-edge, nginx proxy_pass
with keepalive, nginx auth_request + proxy_pass, and h2o proxy.reverse.url, each with one worker
on CPU 0, wrk on CPU 1.
  rss:   band-edge and nginx-proxy in turn: VmRSS and VmHWM (KiB, summed over the server's
         processes) after a warm-up (1 s at -c1, 3 s at -c4: every caller more than twice, so that
         band-edge's bounded caches are filled once, reported apart), VmRSS sampled every 0.1 s
         during a wrk -c256 turn of min(SECONDS, 5) s, VmHWM after it.
  load:  wrk -t1 -cCONNECTIONS --latency with build/lib/bench_gateway.lua, a 2 s warm-up of each,
         then ROUNDS rounds of SECONDS s per server, alternating (even rounds in reverse order):
         first with the servers held to half of CPU 0 by a cgroup CPU quota (so that they, not wrk
         and the upstream on CPU 1, are the limit: the targets are read here), then on all of CPU 0
         with each round ending in a turn of forwarded POSTs to band-edge (each signs a fresh
         assertion). Per turn: req/s, p50, p99, the server's CPU per request (utime + stime of its
         processes) and its share of its CPU (CPU0), the upstream's connections accepted and requests (its
         stub_status) and so the connection reuse (1 - connections/requests), the upstream's CPU per
         request, and how busy CPU 1 (wrk and the upstream) was.
  sign:  openssl speed -seconds 3 ed25519 on CPU 0, beside band-edge's forwarded POSTs per CPU second.
Usage: bench_gateway.py WORK ROUNDS SECONDS CONNECTIONS UPSTREAM_PORT UPSTREAM_PID TOKENS GET_PATH POST_PATH
name:port:pid... (edge first; pid the root of the server's processes; the upstream's pid its worker).
"""

import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

from bench_h2load import HZ, half_cpu, memory, processes, ticks
from bench_report import parse_wrk as parse

work, rounds, seconds, connections = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
upstream_port, upstream_pid, tokens, get_path, post_path = (int(sys.argv[5]), int(sys.argv[6]), sys.argv[7],
                                                           sys.argv[8], sys.argv[9])
servers = [(name, int(port), int(pid)) for name, port, pid in (arg.split(":") for arg in sys.argv[10:])]
NAMES = {"edge": "band-edge", "nginx": "nginx-proxy", "nginx-auth": "nginx-auth", "h2o": "h2o", "edge-post": "be-POST"}
LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_gateway.lua")
TARGETS = []  # (what, met)


def stub():
    """The upstream's (connections accepted, requests) from its stub_status, less this query's own."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{upstream_port}/_stub", timeout=5).read().decode()
    accepts, _, requests = map(int, re.search(r"^\s*(\d+) (\d+) (\d+)\s*$", text, re.M).groups())
    return accepts - 1, requests - 1


def cpu1():
    """CPU 1's (busy, total) jiffies."""
    for line in open("/proc/stat"):
        if line.startswith("cpu1 "):
            fields = list(map(int, line.split()[1:]))
            idle = fields[3] + fields[4]
            return sum(fields) - idle, sum(fields)
    return 0, 1


def wrk(port, path, conns, duration, method="GET"):
    """wrk -t1 on CPU 1 with the gateway script: its output (bounded: a run that hangs is an error)."""
    env = {**os.environ, "BENCH_TOKENS": tokens, "BENCH_METHOD": method}
    command = ["taskset", "-c", "1", "wrk", "-t1", f"-c{conns}", f"-d{duration:g}s", "--latency", "-s", LUA,
               f"http://127.0.0.1:{port}{path}"]
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, check=True,
                              timeout=duration + 30).stdout
    except subprocess.TimeoutExpired:
        raise SystemExit(f"bench: error: wrk against 127.0.0.1:{port}{path} did not finish within {duration + 30:g} s")




def turn(name, port, root, path, duration, method="GET"):
    pids = processes(root)
    cpu_before, (acc_before, req_before), busy_before = sum(map(ticks, pids)), stub(), cpu1()
    up_before = ticks(upstream_pid)
    out = wrk(port, path, connections, duration, method)
    cpu_after, (acc_after, req_after), busy_after = sum(map(ticks, pids)), stub(), cpu1()
    x = parse(out)
    x["cpu_us"] = (cpu_after - cpu_before) / HZ / max(x["requests"], 1) * 1e6
    x["up_conns"] = acc_after - acc_before - 1  # the stub query between them opened one more
    x["up_requests"] = req_after - req_before - 1
    x["reuse"] = 1 - x["up_conns"] / max(x["up_requests"], 1)
    x["cpu1"] = (busy_after[0] - busy_before[0]) / max(busy_after[1] - busy_before[1], 1)
    x["up_cpu_us"] = (ticks(upstream_pid) - up_before) / HZ / max(x["up_requests"], 1) * 1e6
    (open(f"{work}/gateway-{name}-{time.monotonic_ns()}.txt", "w")).write(out)
    return x


def rss():
    """Memory before and during a -c256 turn, for each server."""
    short = min(seconds, 5)
    print(f"\n== peak RSS growth under wrk -c256 ({short:g} s, the GET), each server after a warm-up of 1 s at -c1 and "
          "3 s at -c4, which takes every caller through more than twice: band-edge reads a caller from the store on "
          "the pool first, then keeps it for the loop, and signs and keeps its read assertion once per thread, all in "
          "caches of at most 4,096 entries (a one-time cost, shown as 'warm-up'); the target is the growth under "
          "-c256 from there. KiB summed over its processes (band-edge: one; nginx: master + worker)")
    print(f"{'server':<12}{'warm-up':>9}{'VmRSS before':>13}{'VmRSS peak':>12}{'growth':>8}{'VmHWM before':>14}"
          f"{'VmHWM after':>13}{'req/s':>9}  errors")
    rows = {}
    for name, port, root in servers:
        if name not in ("edge", "nginx"):
            continue
        cold = memory(root)
        wrk(port, get_path, 1, 1)
        wrk(port, get_path, 4, 3)
        before = memory(root)
        samples, done = [], threading.Event()

        def sample():
            while not done.is_set():
                samples.append(memory(root)["VmRSS"])
                time.sleep(0.1)

        sampler = threading.Thread(target=sample)
        sampler.start()
        env = {**os.environ, "BENCH_TOKENS": tokens, "BENCH_METHOD": "GET"}
        out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c256", f"-d{short:g}s", "--latency", "-s", LUA,
                              f"http://127.0.0.1:{port}{get_path}"], env=env, capture_output=True, text=True,
                             timeout=short + 30).stdout
        done.set()
        sampler.join()
        after = memory(root)
        x = parse(out)
        peak = max(samples + [after["VmRSS"]])
        rows[name] = {"growth": peak - before["VmRSS"], "hwm_growth": after["VmHWM"] - before["VmHWM"]}
        print(f"{NAMES[name]:<12}{before['VmRSS'] - cold['VmRSS']:>9}{before['VmRSS']:>13}{peak:>12}"
              f"{peak - before['VmRSS']:>8}{before['VmHWM']:>14}"
              f"{after['VmHWM']:>13}{x['rps']:>9.0f}  {x['errors']}, non-2xx {x['non2xx']}")
    if "edge" in rows and "nginx" in rows:
        edge, nginx = rows["edge"]["growth"], rows["nginx"]["growth"]
        met = edge <= nginx
        print(f"band-edge VmRSS growth {edge} KiB vs nginx-proxy's {nginx} KiB (target: <= nginx's) "
              f"{'met' if met else 'NOT met'}; VmHWM rose {rows['edge']['hwm_growth']} vs {rows['nginx']['hwm_growth']} KiB")
        TARGETS.append((f"peak RSS growth under -c256, band-edge {edge} KiB vs nginx-proxy {nginx} KiB (<= nginx's)", met))


def measure(posts):
    """results[name] = one turn per round; with POSTS, POSTs to band-edge as 'edge-post' ending each round."""
    edge_port, edge_root = servers[0][1], servers[0][2]
    for name, port, root in servers:  # warm-up
        wrk(port, get_path, connections, 2)
    if posts:
        wrk(edge_port, post_path, connections, 2, "POST")
    results = {name: [] for name, _, _ in servers + ([("edge-post", 0, 0)] if posts else [])}
    for r in range(rounds):
        order = servers if r % 2 == 0 else list(reversed(servers))
        for name, port, root in order:
            results[name].append(turn(name, port, root, get_path, seconds))
        if posts:
            results["edge-post"].append(turn("edge-post", edge_port, edge_root, post_path, seconds, "POST"))
    return results


def report(results, label, targets):
    """The turns, medians and band-edge's ratios; TARGETS are read here when `targets`."""
    posts = f", each round ending with POST {post_path} to band-edge" if "edge-post" in results else ""
    print(f"\n== GET {get_path} (Bearer, forwarded; the others ignore the token), wrk -t1 -c{connections} "
          f"-d{seconds:g}s, {label}, {rounds} rounds alternating (even ones reversed){posts}")
    print(f"{'round':<7}{'server':<12}{'req/s':>9}{'p50 ms':>8}{'p99 ms':>8}{'CPU us/req':>11}{'CPU0':>6}{'up conns':>9}"
          f"{'reuse':>10}{'up us/req':>10}{'CPU1':>6}  errors")
    for r in range(rounds):
        for name in results:
            x = results[name][r]
            print(f"{r + 1:<7}{NAMES[name]:<12}{x['rps']:>9.0f}{x['p50']:>8.3f}{x['p99']:>8.3f}{x['cpu_us']:>11.2f}"
                  f"{x['rps'] * x['cpu_us'] / 1e6:>6.0%}{x['up_conns']:>9}{x['reuse']:>10.4%}{x['up_cpu_us']:>10.2f}"
                  f"{x['cpu1']:>6.0%}"
                  f"  {x['errors']}, non-2xx {x['non2xx']}")
    med = {name: {k: statistics.median(x[k] for x in rows) for k in ("rps", "p50", "p99", "cpu_us", "reuse", "cpu1")}
           for name, rows in results.items()}
    for name in results:
        m = med[name]
        print(f"median     {NAMES[name]:<11} {m['rps']:.0f} req/s, p50 {m['p50']:.3f} ms, p99 {m['p99']:.3f} ms, "
              f"{m['cpu_us']:.2f} us CPU/req, upstream reuse {m['reuse']:.4%}, CPU 1 busy {m['cpu1']:.0%}")

    def ratio(other, metric, what, target, higher):
        paired = [a[metric] / b[metric] for a, b in zip(results["edge"], results[other])]
        median = statistics.median(paired)
        line = f"ratio      band-edge/{NAMES[other]} {what}: median {median:.3f}"
        if target is not None and targets:
            met = median >= target if higher else median <= target
            line += f" (target {'>=' if higher else '<='} {target}) {'met' if met else 'NOT met'}"
            TARGETS.append((f"{what} band-edge/{NAMES[other]} {median:.3f} ({'>=' if higher else '<='} {target})", met))
        print(f"{line}; rounds {', '.join(f'{x:.3f}' for x in paired)}")

    ratio("nginx", "rps", "req/s", 1.0, True)
    ratio("nginx-auth", "rps", "req/s", 1.2, True)
    ratio("h2o", "rps", "req/s", None, True)
    ratio("nginx", "cpu_us", "CPU per request", 1.0, False)
    ratio("nginx-auth", "cpu_us", "CPU per request", None, False)
    ratio("h2o", "cpu_us", "CPU per request", None, False)
    reuse = med["edge"]["reuse"]
    verdict = f" (target >= 99%) {'met' if reuse >= 0.99 else 'NOT met'}" if targets else ""
    print(f"band-edge upstream connection reuse: median {reuse:.4%}{verdict}; "
          f"rounds {', '.join(format(x['reuse'], '.4%') for x in results['edge'])}")
    if targets:
        TARGETS.append((f"upstream connection reuse, band-edge GETs {reuse:.4%} (>= 99%)", reuse >= 0.99))
    busy = [f"{NAMES[n]} round {r + 1} ({x['cpu1']:.0%})" for n, rows in results.items() for r, x in enumerate(rows)
            if x["cpu1"] >= 0.9]
    if busy:
        print(f"note: CPU 1 (wrk and the upstream) was 90% busy or more in {len(busy)} turns: {', '.join(busy)}; "
              "there the client side, not the server, limited req/s (CPU0 is the server's share of its CPU in "
              "the turn; CPU per request is the server's own either way)")
    failed = {NAMES[n]: sum(x["non2xx"] for x in rows) for n, rows in results.items() if any(x["non2xx"] for x in rows)}
    if failed:
        print(f"note: non-2xx answers: {failed} (band-edge's are kept in its access log: {work}/gateway-edge-access.log)")
    return med


def sign(med):
    out = subprocess.run(["taskset", "-c", "0", "openssl", "speed", "-seconds", "3", "ed25519"], capture_output=True,
                         text=True, timeout=60).stdout
    found = re.search(r"^\s*253 bits EdDSA \(Ed25519\)\s+\S+s\s+\S+s\s+([\d.]+)\s+([\d.]+)", out, re.M)
    post = med["edge-post"]
    per_cpu_second = 1e6 / post["cpu_us"]
    print(f"\n== forwarded POSTs (each signs a fresh write assertion; every accepted one is audited in the store)")
    print(f"band-edge: {post['rps']:.0f} POST/s on CPU 0 (median), {post['cpu_us']:.2f} us CPU each: "
          f"{per_cpu_second:.0f} POSTs per CPU second; GETs (cached read assertion): "
          f"{1e6 / med['edge']['cpu_us']:.0f} per CPU second")
    if found:
        signs = float(found.group(1))
        print(f"openssl speed -seconds 3 ed25519 (OpenSSL {subprocess.run(['openssl', 'version'], capture_output=True, text=True).stdout.split()[1]}, "
              f"CPU 0): {signs:.0f} sign/s, {float(found.group(2)):.0f} verify/s: one signature is "
              f"{1e6 / signs:.1f} us, {1e6 / signs / post['cpu_us']:.0%} of a POST's CPU")
    else:
        print(f"openssl speed ed25519 gave no sign/s line:\n{out}")


print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min) at the start")
rss()
pids = [p for _, _, root in servers for p in processes(root)]
with half_cpu(pids) as held:
    if held:
        report(measure(False), "servers held to half of CPU 0 by a cgroup CPU quota, wrk and the upstream on CPU 1",
               True)
    else:
        print("\n(no writable cgroup with a CPU controller here: the half-CPU comparison is skipped, and the targets "
              "are read on all of CPU 0)")
med = report(measure(True), "servers on all of CPU 0, wrk and the upstream on CPU 1 (the client side may be the limit)",
             not held)
sign(med)
print("\n== targets (band-edge does the session, membership, role and rate checks and signs; nginx checks nothing, "
      "or asks a trivial 204 location)")
for what, met in TARGETS:
    print(f"{'met    ' if met else 'NOT met'}  {what}")
print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min) at the end")
