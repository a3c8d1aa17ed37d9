"""Summarises one build/bench workload: per-round rows, medians, and band-edge's ratios to the others."""

import re
import statistics
import sys
from pathlib import Path

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}
NAMES = {"edge": "band-edge", "edge-nocache": "be-uncached", "edge-pg": "be-pg", "edge-pg-nocache": "be-pg-unc", "edge-nometrics": "be-nometr",
         "nginx": "nginx", "h2o": "h2o"}


def name(server: str) -> str:
    """The column label: a server's short name, or a run_set label as it is."""
    return NAMES.get(server, server)


def parse_wrk(text: str) -> dict:
    """What one wrk --latency run printed: req/s, requests, p50 and p99 (ms), socket errors, non-2xx."""
    out = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)),
           "requests": int(re.search(r"(\d+) requests in", text).group(1))}
    for pct in ("50", "99"):
        value, unit = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M).groups()
        out[f"p{pct}"] = float(value) * UNITS[unit]
    errors = re.search(r"Socket errors: (.*)", text)
    out["errors"] = errors.group(1).strip() if errors else "none"
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["non2xx"] = int(non2xx.group(1)) if non2xx else 0
    return out


def parse(path: Path) -> dict:
    text = path.read_text()
    out = parse_wrk(text)
    requests = out.pop("requests")
    ticks, hz = map(int, re.search(r"cpu_ticks (\d+) (\d+)", text).groups())
    out["cpu"] = ticks / hz / requests * 1e6
    return out


def main() -> None:
    work, workload, rounds, title, servers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
    results = {s: [parse(work / f"{workload}-{s}-{r}.txt") for r in range(1, rounds + 1)] for s in servers}
    rss = {}
    for line in (work / f"{workload}-rss.txt").read_text().splitlines():
        _, server, kib = line.split()
        rss[server] = int(kib) / 1024
    print(f"\n== {title}")
    print(f"{'round':<7}{'server':<11}{'req/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'CPU us/req':>12}  errors")
    for r in range(rounds):
        for s in servers:
            x = results[s][r]
            print(f"{r + 1:<7}{name(s):<11}{x['rps']:>11.0f}{x['p50']:>9.3f}{x['p99']:>9.3f}{x['cpu']:>12.2f}"
                  f"  {x['errors']}, non-2xx {x['non2xx']}")
    med = {s: {k: statistics.median(x[k] for x in results[s]) for k in ("rps", "p50", "p99", "cpu")} for s in servers}
    for s in servers:
        print(f"median     {name(s):<9} {med[s]['rps']:.0f} req/s, p50 {med[s]['p50']:.3f} ms, p99 {med[s]['p99']:.3f} ms, "
              f"{med[s]['cpu']:.2f} us CPU/req, peak RSS {rss[s]:.1f} MiB{' (worker)' if s == 'nginx' else ''}")
    first = servers[0]
    for other in servers[1:]:
        paired = [results[first][r]["rps"] / results[other][r]["rps"] for r in range(rounds)]
        print(f"ratio      {name(first)}/{name(other)}: requests/s {med[first]['rps'] / med[other]['rps']:.3f} "
              f"(paired rounds {', '.join(f'{x:.3f}' for x in paired)}; median {statistics.median(paired):.3f}), "
              f"p99 {med[first]['p99'] / med[other]['p99']:.3f}, CPU per request {med[first]['cpu'] / med[other]['cpu']:.3f}")
        if other == "edge-nometrics":
            # What counting costs: the same server with --no-metrics, turn by turn (the bounds metrics
            # must stay within: at most 2% fewer requests per second, at most 0.1 us more CPU per request).
            cpu = [results[first][r]["cpu"] - results[other][r]["cpu"] for r in range(rounds)]
            print(f"metrics    on vs off: requests/s on/off {statistics.median(paired):.3f} (bound: at least 0.98), "
                  f"CPU per request {statistics.median(cpu):+.3f} us (turns {', '.join(f'{x:+.3f}' for x in cpu)}; "
                  f"bound +0.1 us)")


if __name__ == "__main__":
    main()
