"""What build/bench's Python workloads share (bench_tls.py, bench_h2.py, bench_gateway.py): server CPU ticks
and memory from /proc, h2load on CPU 1 with its own CPU time counted, a sum of short turns, and a cgroup that holds
servers to half of CPU 0."""

import contextlib
import os
import re
import resource
import subprocess

HZ = os.sysconf("SC_CLK_TCK")
# What the last h2load that had to be killed had printed (for the error that names it).
HUNG_OUTPUT = ""


def ticks(pid):
    """User + system CPU ticks of one process (all its threads)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def processes(root):
    """ROOT and all its descendants."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def memory(root):
    """VmRSS and VmHWM (KiB) summed over ROOT's processes."""
    total = {"VmRSS": 0, "VmHWM": 0}
    for pid in processes(root):
        for line in open(f"/proc/{pid}/status"):
            key = line.split(":")[0]
            if key in total:
                total[key] += int(line.split()[1])
    return total


def h2load(*args, timeout=None):
    """Runs `h2load -t 1 ARGS` on CPU 1: {ok, failed, non2xx, elapsed (h2load's measuring time, s),
    rps, client (the CPU seconds h2load used), protocol (as negotiated), out}; None when it has not
    finished within `timeout` seconds (it is killed: h2load 1.52 sometimes waits forever for
    streams after "Stopped all clients")."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        out = subprocess.run(["taskset", "-c", "1", "h2load", "-t", "1", *args], capture_output=True, text=True,
                             timeout=timeout).stdout
    except subprocess.TimeoutExpired as hung:
        global HUNG_OUTPUT
        partial = hung.stdout or b""
        HUNG_OUTPUT = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        return None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
    finished = re.search(r"finished in ([\d.]+)(ms|s), ([\d.]+) req/s", out)
    if done is None or finished is None:
        raise SystemExit(f"bench: error: h2load {' '.join(args)} gave no result:\n{out}")
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    protocol = re.search(r"Application protocol: (\S+)", out)
    return {"ok": int(done.group(4)), "failed": int(done.group(5)),
            "non2xx": sum(map(int, codes.groups()[1:])) if codes else 0,
            "elapsed": float(finished.group(1)) / (1000 if finished.group(2) == "ms" else 1),
            "rps": float(finished.group(3)),
            "client": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "protocol": protocol.group(1) if protocol else None, "out": out}


def summed(turns):
    """One round of turns: requests per second of h2load's time, server CPU per request (us), the
    share of the turns' wall time h2load was busy."""
    ok, elapsed, cpu = sum(t["ok"] for t in turns), sum(t["elapsed"] for t in turns), sum(t["cpu"] for t in turns)
    client = sum(t["client"] for t in turns) / sum(t["wall"] for t in turns)
    return {"rate": ok / elapsed, "failed": sum(t["failed"] for t in turns), "cpu_us": cpu / max(ok, 1) * 1e6,
            "turns": len(turns), "client": client, "non2xx": sum(t.get("non2xx", 0) for t in turns)}


def cpu_group():
    """A fresh cgroup (v2, else v1) in which a process gets half of one CPU, or None if this machine
    allows none."""
    for root, limit, marker in (("/sys/fs/cgroup", "cpu.max", "cgroup.subtree_control"),
                                ("/sys/fs/cgroup/cpu", "cpu.cfs_quota_us", "cpu.cfs_quota_us")):
        if not os.path.exists(f"{root}/{marker}") or (limit == "cpu.max" and
                                                      "cpu" not in open(f"{root}/{marker}").read().split()):
            continue
        group = f"{root}/band-edge-bench-{os.getpid()}"
        try:
            os.mkdir(group)
        except OSError:
            continue
        try:
            if limit == "cpu.max":
                open(f"{group}/cpu.max", "w").write("5000 10000")
            else:
                open(f"{group}/cpu.cfs_period_us", "w").write("10000")
                open(f"{group}/cpu.cfs_quota_us", "w").write("5000")
            return root, group
        except OSError:
            os.rmdir(group)
    return None


@contextlib.contextmanager
def half_cpu(pids):
    """Puts PIDS into one group held to half of CPU 0 while the block runs (the servers take turns, so
    each gets that half when it is measured); yields False, holding nothing, where no cgroup CPU
    controller is writable."""
    found = cpu_group()
    if found is None:
        yield False
        return
    root, group = found
    try:
        for pid in pids:
            open(f"{group}/cgroup.procs", "w").write(str(pid))
        yield True
    finally:
        for pid in pids:
            with contextlib.suppress(OSError):  # a process that has exited
                open(f"{root}/cgroup.procs", "w").write(str(pid))
        os.rmdir(group)
