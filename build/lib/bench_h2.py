"""build/bench h2: HTTP/2 over TLS (ALPN h2, the same test certificate) against band-edge, h2o and
nginx, each with one worker on CPU 0, h2load on CPU 1.
  check: each server must answer the script with content-encoding: br and the small file as it is,
         over h2 (curl --http2), else the bench stops;
  idle:  1,000 idle h2 connections to each fresh server in turn (bench_h2_idle.py): VmRSS and
         VmHWM of its processes (nginx master + worker, h2o all of its processes) before and with
         them;
  load:  the script (accept-encoding: br, gzip) and the small file, each at h2load -c16 -m16 and
         -c64 -m100, SECONDS per round in turns of about 2 s (each asks for as many requests as
         that server's previous turn served in 2 s; a first turn of each warms up) that alternate
         between the servers; first with the servers held to half of CPU 0 by a cgroup CPU quota (so that
         they, not h2load, are the limit: the targets are read here), then on all of CPU 0.
Targets (issue #26): CPU per request <= h2o's and req/s >= 1.0x h2o's and >= 2.5x nginx's on the
small file at -c16 -m16 and the script at -c64 -m100; resident growth per idle connection <= nginx's
and h2o's.
Usage: bench_h2.py WORK JS_PATH SMALL_PATH ROUNDS SECONDS name:port:pid... (edge first; pid the
root of the server's processes). BENCH_H2_FULL_CPU=0 skips the run on all of CPU 0;
BENCH_H2_IDLE sets the number of idle connections (1000).
"""

import os
import re
import statistics
import subprocess
import sys
import time

from bench_h2_idle import hold, still_open
import bench_h2load
from bench_h2load import HZ, h2load, half_cpu, memory, processes, summed, ticks

work, js_path, small_path, rounds, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
servers = [(name, int(port), int(pid)) for name, port, pid in (arg.split(":") for arg in sys.argv[6:])]
NAMES = {"edge": "band-edge", "h2o": "h2o", "nginx": "nginx"}
IDLE = int(os.environ.get("BENCH_H2_IDLE", "1000"))
TARGETS = []  # (what, met) for the summary


def check():
    """Each server serves the script br and the small file as it is, over h2; else stop."""
    size = os.path.getsize(f"{work}/shell{small_path}")
    for name, port, _ in servers:
        for path, header, want in ((js_path, "accept-encoding: br", "br"), (small_path, None, None)):
            command = ["curl", "--http2", "-sk", "-D", "-", "-o", "/dev/null", "-w", "%{size_download}\n"]
            out = subprocess.run(command + (["-H", header] if header else []) + [f"https://127.0.0.1:{port}{path}"],
                                 capture_output=True, text=True).stdout
            head = out.strip().splitlines()
            encoding = re.search(r"^content-encoding:\s*(\S+)", out, re.I | re.M)
            got = encoding.group(1) if encoding else None
            if not head or not head[0].startswith("HTTP/2 200") or got != want or (
                    want is None and head[-1] != str(size)):
                raise SystemExit(f"bench: error: {NAMES[name]} on 127.0.0.1:{port} did not serve {path} "
                                 f"{'as ' + want if want else f'as it is ({size} bytes)'} over HTTP/2:\n{out}")


def idle():
    """Memory of each server before and with IDLE idle h2 connections."""
    print(f"\n== {IDLE} idle h2 connections (TLS, SETTINGS exchanged), each fresh server in turn; KiB summed over "
          "its processes (band-edge: one; h2o: all; nginx: master + worker)")
    print(f"{'server':<11}{'VmRSS before':>13}{'VmRSS with':>12}{'per conn':>10}{'VmHWM with':>12}  still open")
    rows = {}
    for name, port, pid in servers:
        before = memory(pid)
        with hold(port, IDLE) as held:
            time.sleep(1)  # let the server settle (and any lazy allocation show)
            rows[name] = {"before": before, "with": memory(pid), "open": still_open(held)}
        x = rows[name]
        print(f"{NAMES[name]:<11}{x['before']['VmRSS']:>13}{x['with']['VmRSS']:>12}"
              f"{(x['with']['VmRSS'] - x['before']['VmRSS']) / IDLE:>10.1f}{x['with']['VmHWM']:>12}  "
              f"{x['open']} of {IDLE}")
    # The target (#26): band-edge's resident growth per idle connection at most nginx's and h2o's.
    growth = {name: (x["with"]["VmRSS"] - x["before"]["VmRSS"]) / IDLE for name, x in rows.items()}
    for name in ("nginx", "h2o"):
        if name in rows:
            met = growth["edge"] <= growth[name]
            print(f"ratio      band-edge/{NAMES[name]} resident growth per idle connection "
                  f"{growth['edge']:.1f} / {growth[name]:.1f} KiB (target <= 1.0) {'met' if met else 'NOT met'}")
            TARGETS.append((f"resident growth per idle h2 connection, band-edge {growth['edge']:.1f} KiB vs "
                            f"{NAMES[name]} {growth[name]:.1f} KiB (<= {NAMES[name]}'s)", met))


# h2load 1.52 in its timed mode (-D) often waits forever after "Stopped all clients" against nginx
# 1.22 at -c64 -m100 (turn after turn on a quiet machine), so each turn asks for a number of
# requests (-n) that the server's previous turn of the same workload served in about `duration`:
# every run ends when its last answer arrives. A run that still hangs is killed and run again, up
# to this many times.
ATTEMPTS = 5
HUNG = {}
SERVER_OF = {port: name for name, port, _ in servers}
# (port, path, connections, streams) -> requests per second in that server's last turn of it.
RATE = {}


def turn(port, root, path, header, connections, streams, duration=2):
    pids = processes(root)
    key = (port, path, connections, streams)
    count = max(2 * connections * streams, int(RATE.get(key, 0) * duration))
    for attempt in range(ATTEMPTS):
        before, started = sum(map(ticks, pids)), time.monotonic()
        run = h2load("-c", str(connections), "-m", str(streams), "-n", str(count),
                     *(["-H", header] if header else []), f"https://127.0.0.1:{port}{path}",
                     timeout=10 * duration + 20)
        if run is not None:
            break
        HUNG[port] = HUNG.get(port, 0) + 1
        print(f"note: h2load -c{connections} -m{streams} -n{count} against {NAMES.get(SERVER_OF[port], port)} "
              f"(127.0.0.1:{port}) did not finish; the turn is run again", flush=True)
    else:
        raise SystemExit(f"bench: error: h2load against {NAMES.get(SERVER_OF[port], port)} (127.0.0.1:{port}) hung "
                         f"{ATTEMPTS} times; the last run had printed:\n{bench_h2load.HUNG_OUTPUT}")
    if run["protocol"] != "h2":
        raise SystemExit(f"bench: error: h2load spoke {run['protocol']} to 127.0.0.1:{port}, not h2:\n{run['out']}")
    RATE[key] = run["rps"]
    # The run and the server's CPU time both cover its connections' handshakes, for every server alike.
    cpu = (sum(map(ticks, pids)) - before) / HZ
    return {**run, "cpu": cpu, "wall": time.monotonic() - started}


WORKLOADS = [(f"GET {js_path} (served br) with accept-encoding: br, gzip", js_path, "accept-encoding: br, gzip"),
             (f"GET {small_path} ({os.path.getsize(f'{work}/shell{small_path}')} bytes, as it is)", small_path, None)]
SHAPES = [(16, 16), (64, 100)]


def measure():
    """results[(workload, shape)][server] = one summed() per round."""
    keys = [(w, s) for w in range(len(WORKLOADS)) for s in SHAPES]
    results = {key: {name: [] for name, _, _ in servers} for key in keys}
    for w, (c, m) in keys:  # warm-up
        for _, port, pid in servers:
            turn(port, pid, WORKLOADS[w][1], WORKLOADS[w][2], c, m, 1)
    for _ in range(rounds):
        for w, (c, m) in keys:
            turns = {name: [] for name, _, _ in servers}
            for _ in range(max(1, int(seconds / 2))):
                for name, port, pid in servers:
                    turns[name].append(turn(port, pid, WORKLOADS[w][1], WORKLOADS[w][2], c, m))
            for name, _, _ in servers:
                results[(w, (c, m))][name].append(summed(turns[name]))
    return results


def ratio(rows, other, metric, what, target, higher, setting):
    """The median of the rounds' band-edge/OTHER ratios (each round's turns alternate), each round's."""
    if other not in rows:
        return
    paired = [a[metric] / b[metric] for a, b in zip(rows["edge"], rows[other])]
    med = statistics.median(paired)
    met = med >= target if higher else med <= target
    print(f"ratio      band-edge/{NAMES[other]} {what}: median {med:.3f} (target {'>=' if higher else '<='} {target}) "
          f"{'met' if met else 'NOT met'}; rounds {', '.join(f'{x:.3f}' for x in paired)}")
    if setting == "quota":
        TARGETS.append((f"{what} band-edge/{NAMES[other]} {med:.3f}", met))


def report(results, setting, label):
    for (w, (c, m)), rows in results.items():
        print(f"\n== {WORKLOADS[w][0]}, h2 over TLS, h2load -c{c} -m{m}, {label}, {rounds} rounds x {seconds:g} s "
              "in turns of about 2 s")
        for r in range(rounds):
            for name, _, _ in servers:
                x = rows[name][r]
                print(f"{r + 1:<7}{NAMES[name]:<11}{x['rate']:>11.0f} req/s  {x['cpu_us']:>7.2f} us CPU/req  "
                      f"h2load busy {x['client']:>4.0%}  turns {x['turns']}  failed {x['failed']}  non-2xx {x['non2xx']}")
        for name, _, _ in servers:
            print(f"median     {NAMES[name]:<11}{statistics.median(x['rate'] for x in rows[name]):>7.0f} req/s  "
                  f"{statistics.median(x['cpu_us'] for x in rows[name]):>7.2f} us CPU/req  "
                  f"h2load busy {statistics.median(x['client'] for x in rows[name]):>4.0%}")
        # #26's targets are read on two of the four: the small file at -c16 -m16, the script at -c64
        # -m100 (the other two are printed against the same bounds, as information).
        named = (w, c, m) in ((1, 16, 16), (0, 64, 100))
        label_load = f"req/s (-c{c} -m{m}, {'script' if w == 0 else 'small file'})"
        ratio(rows, "h2o", "rate", label_load, 1.0, True, setting if named else "info")
        ratio(rows, "nginx", "rate", label_load, 2.5, True, setting if named else "info")
        ratio(rows, "h2o", "cpu_us", f"CPU per request (-c{c} -m{m}, {'script' if w == 0 else 'small file'})",
              1.0, False, setting if named else "info")


# Step 6 of #26: where band-edge's CPU goes, so that every change sees it. perf samples band-edge (the
# software clock: no hardware counters here) while h2load asks for the small file at -c16 -m16, on
# all of CPU 0; the samples are grouped by library, and band-edge's own by what they are.
GROUPS = [
    ("Swift runtime: retain/release", re.compile(r"^swift_(unknownObject|bridgeObject|nonatomic_)?(retain|release)")),
    ("allocation (malloc, free, Swift objects)", re.compile(
        r"^(malloc|free|cfree|_int_malloc|_int_free|malloc_consolidate|tcache_|unlink_chunk|__libc_malloc|"
        r"__libc_free|swift_(allocObject|deallocObject|deallocClassInstance|slowAlloc|slowDealloc)|realloc)")),
]


def profile(seconds=4):
    name, port, pid = servers[0]
    if name != "edge" or subprocess.run(["perf", "--version"], capture_output=True).returncode != 0:
        return
    executable = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    data = f"{work}/perf-h2.data"
    record = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2999", "-p", str(pid), "-o", data,
                               "--", "sleep", str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    deadline = time.monotonic() + seconds - 0.5
    while time.monotonic() < deadline:
        turn(port, pid, small_path, None, 16, 16, 1)
    record.wait()
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso,sym"],
                         capture_output=True, text=True).stdout
    shares = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(\S+)", line)
        if not m:
            continue
        share, dso, _, symbol = float(m.group(1)), m.group(2), m.group(3), m.group(4)
        group = next((g for g, pattern in GROUPS if pattern.match(symbol)), None)
        if group is None:
            group = ("kernel" if dso.startswith("[kernel") else "libnghttp2" if "nghttp2" in dso
                     else "OpenSSL (libssl, libcrypto)" if "libssl" in dso or "libcrypto" in dso
                     else "libc (other)" if dso.startswith("libc") else "Swift runtime (other)" if "swift" in dso
                     else "band-edge's own code (and the Swift runtime linked into it)" if dso == executable
                     else f"other ({dso})")
        shares[group] = shares.get(group, 0.0) + share
    print(f"\n== where band-edge's CPU goes: perf (cpu-clock, {seconds} s) during h2load -c16 -m16 on the small file, "
          "all of CPU 0; share of its samples")
    for group, share in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"{share:>6.1f}%  {group}")


# Step 5 of #26: how many writes and reads each server makes per request. strace counts the syscalls
# of every process and thread of each server in turn while h2load asks for the small file at -c16 -m16
# (strace slows the server: only the counts are read, never the time).
WRITES = ("sendmsg", "sendto", "write", "writev")
READS = ("recvfrom", "recvmsg", "read", "readv")


def syscalls(requests=20000):
    if subprocess.run(["strace", "-V"], capture_output=True).returncode != 0:
        print("\n(strace is not installed: the syscall counts are skipped)")
        return
    print(f"\n== syscalls per request (strace -c over each server's threads, h2load -c16 -m16 -n {requests}, small "
          "file; counts only)")
    print(f"{'server':<11}{'writes':>8}{'reads':>8}{'epoll':>8}{'all':>8}  writes by call")
    for name, port, root in servers:
        pids = [str(t) for p in processes(root) for t in os.listdir(f"/proc/{p}/task")]
        trace = subprocess.Popen(["strace", "-c", "-U", "name,calls", "-o", f"{work}/strace-{name}.txt",
                                  *[x for t in pids for x in ("-p", t)]],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        run = h2load("-c", "16", "-m", "16", "-n", str(requests), f"https://127.0.0.1:{port}{small_path}",
                     timeout=120)
        trace.send_signal(2)
        trace.wait()
        calls = {}
        for line in open(f"{work}/strace-{name}.txt"):
            fields = line.split()
            if len(fields) == 2 and fields[1].isdigit() and fields[0] != "total":
                calls[fields[0]] = int(fields[1])
        done = run["ok"] if run else requests
        per = lambda names: sum(calls.get(n, 0) for n in names) / done
        epoll = sum(v for k, v in calls.items() if k.startswith("epoll")) / done
        print(f"{NAMES[name]:<11}{per(WRITES):>8.3f}{per(READS):>8.3f}{epoll:>8.3f}{sum(calls.values()) / done:>8.3f}  "
              + ", ".join(f"{n} {calls[n] / done:.3f}" for n in WRITES if n in calls))


check()
idle()
pids = [p for _, _, root in servers for p in processes(root)]
with half_cpu(pids) as held:
    if held:
        report(measure(), "quota", "each server limited to half of CPU 0, h2load on CPU 1")
    else:
        print("\n(no writable cgroup with a CPU controller here: the half-CPU comparison, where the targets are "
              "read, is skipped)")
if os.environ.get("BENCH_H2_FULL_CPU", "1") != "0":
    report(measure(), "full", "servers on all of CPU 0, h2load on CPU 1 (the client may be the limit)")
profile()
syscalls()
print(f"\npeak RSS after all of the above (VmHWM, KiB summed over each server's processes): " +
      ", ".join(f"{NAMES[name]} {memory(pid)['VmHWM']}" for name, _, pid in servers))
print("\n== targets (servers held to half of CPU 0; idle connections)")
for what, met in TARGETS:
    print(f"{'met    ' if met else 'NOT met'}  {what}")
