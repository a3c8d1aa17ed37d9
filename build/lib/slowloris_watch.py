"""Runs slowhttptest -H against a port while probing availability and connection ages.
Each wave's statistics (slowhttptest -g) are read back: the attack must have connected and been held.

Usage: slowloris_watch.py PORT HEAD_TIMEOUT SECONDS WORK [CA_FILE]
With CA_FILE the port speaks TLS: the attack and the probes use https (the probes trust CA_FILE).
"""

import csv
import re
import subprocess
import sys
import threading
import time
import urllib.request

port, head_timeout, seconds, work = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ca_file = sys.argv[5] if len(sys.argv) > 5 else None
scheme = "https" if ca_file else "http"
host = "localhost" if ca_file else "127.0.0.1"
tls_context = None
if ca_file:
    import ssl
    tls_context = ssl.create_default_context(cafile=ca_file)
first_seen: dict[str, float] = {}
max_age = 0.0
most_alive = 0
probes = failures = 0
stop = threading.Event()


def watch_ages() -> None:
    global max_age, most_alive
    while not stop.is_set():
        now = time.monotonic()
        # -e adds the socket's cookie (sk:...), unique per socket: a later wave's connection that
        # happens to reuse an earlier one's client port is not taken for the same connection.
        out = subprocess.run(["ss", "-tnHe", "state", "established", f"( sport = :{port} )"],
                             capture_output=True, text=True).stdout
        alive = set()
        for line in out.splitlines():
            fields = line.split()
            peer = fields[3] + " " + next((f for f in fields if f.startswith("sk:")), "")
            alive.add(peer)
            first_seen.setdefault(peer, now)
            max_age = max(max_age, now - first_seen[peer])
        most_alive = max(most_alive, len(alive))
        for peer in list(first_seen):
            if peer not in alive:
                del first_seen[peer]
        time.sleep(0.25)


def probe() -> None:
    global probes, failures
    while not stop.is_set():
        probes += 1
        try:
            with urllib.request.urlopen(f"{scheme}://{host}:{port}/healthz", timeout=2, context=tls_context) as r:
                if r.status != 200:
                    failures += 1
        except Exception:
            failures += 1
        time.sleep(0.5)


threads = [threading.Thread(target=watch_ages), threading.Thread(target=probe)]
for t in threads:
    t.start()
# slowhttptest does not reconnect: once the server has cut all of a wave's connections at their
# deadline it stops. Waves of 1000 follow each other until the attack has lasted `seconds`.
attack_started = time.monotonic()
waves = []
while (left := seconds - (time.monotonic() - attack_started)) > 1:
    waves.append(subprocess.run(
        ["slowhttptest", "-H", "-c", "1000", "-r", "200", "-i", "1", "-l", str(int(left)), "-s", "8192",
         "-u", f"{scheme}://127.0.0.1:{port}/healthz", "-t", "GET", "-x", "24", "-p", "3",
         "-g", "-o", f"{work}/wave-{len(waves)}"],
        capture_output=True, text=True))
attack_seconds = time.monotonic() - attack_started
attack = waves[-1]
stop.set()
for t in threads:
    t.join()
plain = re.sub(r"\x1b\[[0-9;]*m", "", attack.stdout)
lines = [line.strip() for line in plain.splitlines()]
summary = "\n".join(dict.fromkeys(line for line in lines if re.search(r"^(test type|number of connections|service available|exit status)", line, re.I)))
print(summary)
print(f"slowloris ({scheme}): attack ran {attack_seconds:.0f} s in {len(waves)} waves of 1000 connections")

# Each wave's per-second counts (slowhttptest -g): Seconds, Closed, Pending, Connected, Service Available.
peaks = []
for n, wave in enumerate(waves):
    try:
        with open(f"{work}/wave-{n}.csv", newline="") as f:
            peaks.append(max((int(row["Connected"]) for row in csv.DictReader(f)), default=0))
    except (OSError, KeyError, ValueError) as error:
        if None not in peaks:
            print(f"slowloris: wave {n}: no statistics ({error}); slowhttptest exited {wave.returncode}")
        peaks.append(None)
shown = ", ".join(map(str, peaks[:10])) + (f" and {len(peaks) - 10} more" if len(peaks) > 10 else "")
print(f"slowloris: connections each wave held at once (slowhttptest): {shown}; "
      f"most established at once (ss): {most_alive}")
print(f"slowloris: {probes} probes of /healthz during the attack, {failures} failed; "
      f"longest-lived connection {max_age:.1f} s (head timeout {head_timeout:g} s)")
# The attack happened: every wave ran and reported, the first held at least half its 1000
# connections at once (seen by slowhttptest and by ss on the server's port), and they were held until
# the head timeout cut them (ss samples every 0.25 s), never longer.
attacked = (all(w.returncode == 0 for w in waves) and None not in peaks and peaks[0] >= 500
            and most_alive >= 500 and max_age >= head_timeout - 2)
ok = attacked and failures == 0 and max_age <= head_timeout + 1.5 and probes > 0
print(f"slowloris: {'1 passed, 0 failed' if ok else '0 passed, 1 failed'}")
sys.exit(0 if ok else 1)
