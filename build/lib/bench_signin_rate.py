"""Sign-in throughput of band-edge on each store, in the same run: THREADS browsers sign in
(GET /sign-in for the form, POST /sign-in with the right password, 303) for SECONDS against each
server in turn, ROUNDS rounds alternating. Prints sign-ins per second and their p50/p99.

usage: bench_signin_rate.py EMAIL PASSWORD SECONDS ROUNDS NAME:PORT...
"""

import http.client
import re
import statistics
import sys
import threading
import time
from urllib.parse import urlencode

THREADS = 8


def sign_in(port, email, password):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/sign-in")
    page = connection.getresponse()
    body = page.read()
    cookies = "; ".join(v.split(";")[0] for k, v in page.getheaders() if k.lower() == "set-cookie")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', body).group(1).decode()
    form = urlencode({"csrf": csrf, "email": email, "password": password})
    connection.request("POST", "/sign-in", body=form, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Cookie": cookies,
        "Origin": f"http://127.0.0.1:{port}"})
    answer = connection.getresponse()
    answer.read()
    connection.close()
    return answer.status


def turn(port, email, password, seconds):
    times, failures = [], []
    end = time.monotonic() + seconds

    def browser():
        while time.monotonic() < end:
            started = time.monotonic()
            status = sign_in(port, email, password)
            (times if status == 303 else failures).append(time.monotonic() - started)

    threads = [threading.Thread(target=browser) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times.sort()
    return len(times) / seconds, times, len(failures)


def main():
    email, password, seconds, rounds = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    servers = [(n, int(p)) for n, p in (a.split(":") for a in sys.argv[5:])]
    results = {name: [] for name, _ in servers}
    print(f"\n== sign-in throughput: {THREADS} browsers, full web sign-in (form + POST, Argon2id), {seconds:.0f} s turns")
    for name, port in servers:
        sign_in(port, email, password)  # warm-up
    for r in range(rounds):
        for name, port in servers:
            rate, times, failed = turn(port, email, password, seconds)
            results[name].append(rate)
            p50 = times[len(times) // 2] * 1000 if times else 0
            p99 = times[max(0, int(len(times) * 0.99) - 1)] * 1000 if times else 0
            print(f"{r + 1:<7}{name:<14}{rate:>9.1f} sign-ins/s  p50 {p50:.1f} ms  p99 {p99:.1f} ms  failed {failed}")
    medians = {name: statistics.median(v) for name, v in results.items()}
    for name, value in medians.items():
        print(f"median     {name:<12} {value:.1f} sign-ins/s")
    names = [n for n, _ in servers]
    if len(names) == 2:
        print(f"ratio      {names[1]}/{names[0]}: {medians[names[1]] / medians[names[0]]:.3f}")


main()
