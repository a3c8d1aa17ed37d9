"""build/bench signin: password work must not be observable or disruptive.

1. Enumeration timing: 30 alternating sign-in attempts, a wrong password for an existing account
   and an unknown email, each timed end to end; prints both medians and their ratio (the issue's
   target: within 25%).
2. A sign-in flood: 50 connections POSTing wrong passwords (wrk with a Lua body), while wrk
   measures the static JS file and GET /session (Bearer) on 64 connections; prints each p99
   unloaded and during the flood, medians of 3 rounds (target: within 2x). Run twice: with the default per-address
   limits (the flood is mostly answered 429 on the loop) and with them lifted (every attempt costs
   an Argon2id verification, as a flood from many addresses would).

Usage: bench_signin.py BINARY SHELL_DIR JS_PATH WORK_DIR
"""

import json
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

binary, shell, js_path, work = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
PASSWORD = "bench-password-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(data, *flags):
    port = free_port()
    process = subprocess.Popen(["taskset", "-c", "0", binary, "serve", "--listen", f"127.0.0.1:{port}", "--shell",
                                shell, "--data", str(data), "--threads", "1", "--pool-threads", "2",
                                "--no-access-log", *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return process, port
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("band-edge did not start")


def admin(data, *args, stdin=""):
    subprocess.run([binary, "admin", "--data", str(data), *args], input=stdin, text=True, check=True,
                   capture_output=True)


def csrf_pair(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/sign-in") as r:
        cookie = r.headers["Set-Cookie"].split(";")[0]
        token = re.search(r'name="csrf" value="([^"]+)"', r.read().decode()).group(1)
    return cookie, token


def post_sign_in(port, cookie, token, email, password):
    body = f"csrf={token}&email={email.replace('@', '%40')}&password={password}".encode()
    s = socket.create_connection(("127.0.0.1", port))
    request = (f"POST /sign-in HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n"
               f"Cookie: {cookie}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    started = time.perf_counter()
    s.sendall(request)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    elapsed = time.perf_counter() - started
    s.close()
    return int(data.split(b" ", 2)[1]), elapsed


def wrk(port, path, header, seconds, connections=64, script=None):
    args = ["taskset", "-c", "1", "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    if header:
        args += ["-H", header]
    if script:
        args += ["-s", str(script)]
    return subprocess.Popen(args + [f"http://127.0.0.1:{port}{path}"], stdout=subprocess.PIPE, text=True)


def p99(process):
    out = process.communicate()[0]
    value, unit = re.search(r"^\s+99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M).groups()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1000.0}[unit], rps


def session_token(data):
    out = subprocess.run([sys.executable, str(Path(__file__).parent / "bench_session.py"),
                          str(data / "band-edge.sqlite")], capture_output=True, text=True, check=True)
    return out.stdout.strip()


# 1. Enumeration timing.
data = work / "signin-data"
admin(data, "account", "create", "--email", "ada.signin@example.test", "--name", "Ada Example",
      stdin=PASSWORD + "\n")
process, port = start(data, "--sign-in-burst", "1000000")
cookie, token = csrf_pair(port)
post_sign_in(port, cookie, token, "warm@example.test", "x")
known, unknown = [], []
for i in range(30):
    status_a, a = post_sign_in(port, cookie, token, "ada.signin@example.test", f"wrong-{i}")
    status_b, b = post_sign_in(port, cookie, token, f"nobody{i}@example.test", f"wrong-{i}")
    assert status_a == status_b == 400, (status_a, status_b)
    known.append(a * 1000)
    unknown.append(b * 1000)
process.terminate()
process.wait()
mk, mu = statistics.median(known), statistics.median(unknown)
print("\n== Sign-in failures: wrong password (existing account) vs unknown email, 30 alternating tries each")
print(f"median     wrong password {mk:.1f} ms, unknown email {mu:.1f} ms; ratio {mk / mu:.3f} (target within 0.75-1.25)")

# 2. The flood: 3 rounds, each measuring both p99s unloaded and then during a 20 s flood; medians.
rounds = 3
for label, flags in (("default per-address limits", []),
                     ("per-address limits lifted", ["--sign-in-burst", "1000000", "--sign-in-per-minute", "1000000"])):
    process, port = start(data, *flags)
    bearer = session_token(data) if label.startswith("default") else bearer
    cookie, token = csrf_pair(port)
    script = work / "flood.lua"
    script.write_text(
        'wrk.method = "POST"\n'
        f'wrk.body = "csrf={token}&email=nobody%40example.test&password=wrong-password"\n'
        'wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"\n'
        f'wrk.headers["Origin"] = "http://127.0.0.1:{port}"\n'
        f'wrk.headers["Cookie"] = "{cookie}"\n')
    auth = f"Authorization: Bearer {bearer}"
    wrk(port, js_path, "Accept-Encoding: br, gzip", 2).communicate()
    wrk(port, "/api/client/v1/session", auth, 2).communicate()
    results = {"quiet js": [], "quiet session": [], "loud js": [], "loud session": [], "flood": []}
    for _ in range(rounds):
        time.sleep(3)  # let the previous round's queued password checks finish
        results["quiet js"].append(p99(wrk(port, js_path, "Accept-Encoding: br, gzip", 5)))
        results["quiet session"].append(p99(wrk(port, "/api/client/v1/session", auth, 5)))
        flood = wrk(port, "/sign-in", None, 14, connections=50, script=script)
        time.sleep(2)
        results["loud js"].append(p99(wrk(port, js_path, "Accept-Encoding: br, gzip", 5)))
        results["loud session"].append(p99(wrk(port, "/api/client/v1/session", auth, 5)))
        flood_out = flood.communicate()[0]
        results["flood"].append(float(re.search(r"Requests/sec:\s+([\d.]+)", flood_out).group(1)))
    process.terminate()
    process.wait()

    def median(key, i=0):
        return statistics.median(r[i] for r in results[key])

    print(f"\n== Sign-in flood, {label}: 50 connections of wrong passwords, {rounds} rounds "
          f"(median {statistics.median(results['flood']):.0f} attempts/s answered)")
    for name, key in (("static JS", "js"), ("/session", "session")):
        quiet, loud = median(f"quiet {key}"), median(f"loud {key}")
        print(f"{name:<10} p99 unloaded {quiet:.3f} ms ({median(f'quiet {key}', 1):.0f} req/s), during the flood "
              f"{loud:.3f} ms ({median(f'loud {key}', 1):.0f} req/s): ratio {loud / quiet:.2f} (target <= 2); rounds "
              + ", ".join(f"{a[0]:.2f}/{b[0]:.2f}" for a, b in zip(results[f"quiet {key}"], results[f"loud {key}"])))
