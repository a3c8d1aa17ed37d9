"""What counting costs band-edge in situ: the share of its CPU samples (perf record, during one more
turn of the workload) spent in the metrics code (MetricShard: the one call per request, and what
it inlines), times its CPU per request in that turn.
Usage: bench_metrics_share.py PERF_DATA WRK_OUTPUT CPU_TICKS CLK_TCK"""

import re
import subprocess
import sys

perf_data, wrk_output, ticks, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
report = subprocess.run(["perf", "report", "-i", perf_data, "--no-children", "--sort", "symbol", "--stdio",
                         "-g", "none", "--percent-limit", "0"], capture_output=True, text=True).stdout
share = 0.0
for line in report.splitlines():
    match = re.match(r"\s*([\d.]+)%\s+\[\.\]\s+(\S+)", line)
    # Swift's mangled names: MetricShard's methods, and MetricFamily's lookups they call.
    if match and ("11MetricShard" in match.group(2) or "12MetricFamily" in match.group(2)):
        share += float(match.group(1))
requests = int(re.search(r"(\d+) requests in", open(wrk_output).read()).group(1))
cpu = ticks / hz / requests * 1e6
print(f"metrics    in situ: {share:.2f}% of band-edge's CPU samples, x {cpu:.2f} us CPU/req = "
      f"{share / 100 * cpu:.3f} us per request (bound 0.1 us)")
