"""SIGHUP builds a new snapshot of what the configuration determines, and nothing else: store
connections, rate-limit buckets and the session cache live as long as the process."""

import os
import signal
import time

from edge import Workers, request
from test_sign_in_limits import attempt
from test_web_sign_in import PASSWORD, Browser, add_account


def descriptors(server) -> int:
    """Open files (database, WAL, shared memory, ...): what a leaked store connection holds. Sockets
    and pipes come and go with the traffic and the retention child, so they are not counted."""
    fds = f"/proc/{server.process.pid}/fd"
    links = []
    for fd in os.listdir(fds):
        try:
            links.append(os.readlink(f"{fds}/{fd}"))
        except FileNotFoundError:
            pass
    return sum(1 for link in links if link.startswith("/"))


def resident_kib(server) -> int:
    for line in open(f"/proc/{server.process.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def reload_and_wait(server, count):
    """Sends SIGHUP and waits until the server has logged `count` reloads in all."""
    server.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while sum(1 for e in server.events() if e["event"] == "reloaded") < count:
        assert time.monotonic() < deadline, "the reload was not logged"
        time.sleep(0.01)


def test_fifty_reloads_under_traffic_keep_descriptors_buckets_and_sessions(make_server):
    server = make_server("--pool-threads", "2", "--background-threads", "1", "--sign-in-burst", "3",
                         "--sign-in-per-minute", "1", "--rate-limited-hold", "0")
    add_account(server, "ada@example.test", "Ada Example")
    browser, signed = attempt(server, "ada@example.test", PASSWORD)
    assert signed.status == 303
    for _ in range(2):
        assert attempt(server, "nobody@example.test", "wrong")[1].status == 400
    assert attempt(server, "nobody@example.test", "wrong")[1].status == 429, "the bucket is empty"

    def traffic(_):
        assert browser.send("GET", "/api/client/v1/session").status == 200
        client = server.connect()
        client.send(request("GET", "/", headers={"Connection": "close"}))
        assert client.read_response().status == 200
        client.close()

    # Warm every worker's connection before counting.
    for _ in range(20):
        assert browser.send("GET", "/api/client/v1/session").status == 200
    before = descriptors(server)
    rss_before = resident_kib(server)
    workers = Workers(traffic, 2)
    try:
        reload_and_wait(server, 1)
        after_first = list(workers.done)
        for n in range(2, 51):
            reload_and_wait(server, n)
            workers.check()
        during = [now - then for now, then in zip(workers.done, after_first)]
    finally:
        done = workers.stop()
    # Every client kept being answered between the first reload and the last.
    assert all(during), f"rounds of traffic during reloads 2 to 50, per thread: {during} (in all {done})"
    for _ in range(20):
        assert browser.send("GET", "/api/client/v1/session").status == 200
    assert descriptors(server) == before, "a reload opened descriptors it never closed"
    assert resident_kib(server) < rss_before + 8 * 1024, "50 reloads grew the process by more than 8 MiB"
    refused = attempt(server, "nobody@example.test", "wrong")[1]
    assert refused.status == 429, "a reload refilled the rate-limit bucket"


def test_a_reload_says_which_changed_settings_wait_for_a_restart(tmp_path):
    import json
    from edge import Server
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"limits": {"max-body-bytes": 1000}}))
    server = Server("--config", str(path))
    try:
        path.write_text(json.dumps({"limits": {"max-body-bytes": 5000, "idle-timeout": 30}}))
        reload_and_wait(server, 1)
        warnings = [e for e in server.events() if e["event"] == "restart_needed"]
        assert [w["settings"] for w in warnings] == ["idle-timeout max-body-bytes"]
        client = server.connect()
        client.send(request("POST", "/_test/echo", body=b"x" * 1001))
        assert client.read_response().status == 413, "limits stay as they were at start"
    finally:
        server.stop()
