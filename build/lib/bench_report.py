"""Summarises build/bench's wrk outputs: medians per server and band-edge/nginx ratios."""

import re
import statistics
import sys
from pathlib import Path

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def parse(path: Path) -> dict:
    text = path.read_text()
    out = {}
    out["rps"] = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    for pct in ("50", "99"):
        value, unit = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M).groups()
        out[f"p{pct}"] = float(value) * UNITS[unit]
    errors = re.search(r"Socket errors: (.*)", text)
    out["errors"] = errors.group(1).strip() if errors else "none"
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["non2xx"] = int(non2xx.group(1)) if non2xx else 0
    ticks, hz = map(int, re.search(r"cpu_ticks (\d+) (\d+)", text).groups())
    out["cpu_us_per_req"] = ticks / hz / requests * 1e6
    return out


def main() -> None:
    work, rounds = Path(sys.argv[1]), int(sys.argv[2])
    results = {t: [parse(work / f"{t}-{r}.txt") for r in range(1, rounds + 1)] for t in ("edge", "nginx")}
    rss = dict(zip(*[iter((work / "rss.txt").read_text().split()[1:])] * 2))
    print(f"{'round':<7}{'server':<11}{'req/s':>11}{'p50 ms':>9}{'p99 ms':>9}{'CPU us/req':>12}  errors")
    for r in range(rounds):
        for t in ("edge", "nginx"):
            x = results[t][r]
            print(
                f"{r + 1:<7}{'band-edge' if t == 'edge' else 'nginx':<11}{x['rps']:>11.0f}{x['p50']:>9.3f}"
                f"{x['p99']:>9.3f}{x['cpu_us_per_req']:>12.2f}  {x['errors']}, non-2xx {x['non2xx']}"
            )
    med = {t: {k: statistics.median(x[k] for x in results[t]) for k in ("rps", "p50", "p99", "cpu_us_per_req")}
           for t in results}
    print()
    print(f"median     band-edge {med['edge']['rps']:.0f} req/s, p50 {med['edge']['p50']:.3f} ms, "
          f"p99 {med['edge']['p99']:.3f} ms, {med['edge']['cpu_us_per_req']:.2f} us CPU/req, "
          f"peak RSS {int(rss['edge']) / 1024:.1f} MiB")
    print(f"median     nginx     {med['nginx']['rps']:.0f} req/s, p50 {med['nginx']['p50']:.3f} ms, "
          f"p99 {med['nginx']['p99']:.3f} ms, {med['nginx']['cpu_us_per_req']:.2f} us CPU/req, "
          f"peak RSS {int(rss['nginx']) / 1024:.1f} MiB (worker)")
    paired = [results["edge"][r]["rps"] / results["nginx"][r]["rps"] for r in range(rounds)]
    paired_p99 = [results["edge"][r]["p99"] / results["nginx"][r]["p99"] for r in range(rounds)]
    print("paired     requests/s band-edge/nginx per round (adjacent runs share conditions): "
          + ", ".join(f"{x:.3f}" for x in paired)
          + f"; median {statistics.median(paired):.3f}; p99 median {statistics.median(paired_p99):.3f}")
    print(f"ratio      requests/s band-edge/nginx = {med['edge']['rps'] / med['nginx']['rps']:.3f}; "
          f"p99 band-edge/nginx = {med['edge']['p99'] / med['nginx']['p99']:.3f}; "
          f"CPU per request band-edge/nginx = {med['edge']['cpu_us_per_req'] / med['nginx']['cpu_us_per_req']:.3f}")


if __name__ == "__main__":
    main()
