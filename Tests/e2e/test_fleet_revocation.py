"""Revocation is immediate everywhere: three instances on one PostgreSQL, each
with its loop-side session cache on; a sign-out on one makes the others answer 401 on their next
request, also while the change listener's connection is being killed over and over, and under a
steady read load (the figures docs/fleet.md quotes are printed by these tests)."""

import hashlib
import http.client
import json
import os
import re
import secrets
import statistics
import threading
import time

import pytest

from edge import Server
from test_web_sign_in import PASSWORD, Browser

BASE = os.environ.get("BAND_EDGE_TEST_POSTGRES")
pytestmark = pytest.mark.skipif(not BASE, reason="BAND_EDGE_TEST_POSTGRES is not set (build/test sets it)")

LIFTED = ("--sign-in-burst", "1000000", "--sign-in-per-minute", "1000000")


@pytest.fixture
def fleet(make_server):
    """Three instances on a fresh schema, and one account that may sign in."""
    import psycopg
    schema = "rev_" + secrets.token_hex(6)
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    uri = BASE + f"&options=-csearch_path%3D{schema}"
    servers = [make_server("--database", uri, *LIFTED) for _ in range(3)]
    from test_postgres_store import admin as cli
    created = cli(uri, "account", "create", "--email", "ada@example.test", "--name", "Ada Example",
                  stdin=PASSWORD + "\n")
    assert created.returncode == 0, created.stderr
    yield servers, uri, schema
    for server in servers:
        server.stop()
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


def signed_in(server):
    """A browser signed in through `server`."""
    browser = Browser(server)
    page = browser.send("GET", "/sign-in")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page.body).group(1).decode()
    signed = browser.send("POST", "/sign-in", form={"csrf": csrf, "email": "ada@example.test", "password": PASSWORD})
    assert signed.status == 303, signed.status
    return browser


class Reader:
    """A keep-alive connection reading GET /session with one browser's cookie."""

    def __init__(self, server, browser):
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        self.cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())

    def status(self):
        self.connection.request("GET", "/api/client/v1/session", headers={"Cookie": self.cookie})
        response = self.connection.getresponse()
        response.read()
        return response.status

    def close(self):
        self.connection.close()


def sign_out(server, browser):
    response = browser.send("DELETE", "/api/client/v1/session")
    assert response.status == 204, response.status


def trial(servers, i):
    """Signs in on one instance, reads on the other two (twice: the second read is the cache's),
    signs out on the first; returns the seconds until each other instance said 401, whether any
    said 200 more than a second after the 204, and how many said 200 to the very next request
    (none should: the sign-out answers once every other instance's listener has heard it)."""
    a = servers[i % 3]
    others = [servers[(i + 1) % 3], servers[(i + 2) % 3]]
    browser = signed_in(a)
    readers = [Reader(server, browser) for server in others]
    try:
        for reader in readers:
            assert reader.status() == 200 and reader.status() == 200
        sign_out(a, browser)
        acknowledged = time.monotonic()
        delays, late, stale = [], False, 0
        for reader in readers:
            first = True
            while True:
                status = reader.status()
                elapsed = time.monotonic() - acknowledged
                if status == 401:
                    delays.append(elapsed)
                    break
                assert status == 200, status
                stale += first
                first = False
                if elapsed > 1.0:
                    late = True
                if elapsed > 5.0:
                    raise AssertionError("still 200 five seconds after the sign-out")
        return delays, late, stale
    finally:
        for reader in readers:
            reader.close()


def test_a_sign_out_on_one_instance_is_a_401_on_the_others(fleet):
    servers, _, _ = fleet
    delays, late, stale = [], 0, 0
    for i in range(200):
        got, was_late, was_stale = trial(servers, i)
        delays += got
        late += was_late
        stale += was_stale
    delays.sort()
    p50 = statistics.median(delays) * 1000
    p99 = delays[int(len(delays) * 0.99) - 1] * 1000
    print(f"\nrevocation across instances: {len(delays)} reads after 200 sign-outs, "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {delays[-1] * 1000:.1f} ms (target p99 <= 50 ms)")
    assert late == 0, "a 200 more than a second after the sign-out"
    assert stale == 0, f"{stale} of 400 first reads after a sign-out's 204 on another instance were 200"


# The documented staleness bound: the notification, else the listener's re-read of change_counter
# every second (docs/fleet.md). The only timing this file asserts.
STALE_BOUND = 1.0
LOAD_TRIALS = 20


def steady_reads(ports, cookie, stop, answered, refused):
    """In a process of its own (so its threads do not hold the watchers' interpreter lock): one
    keep-alive reader per instance, GET /session with a session never revoked, each as fast as its
    instance answers, until `stop`; counts the answers and anything but a 200."""
    def read(port):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        done = wrong = 0
        while not stop.is_set():
            connection.request("GET", "/api/client/v1/session", headers={"Cookie": cookie})
            response = connection.getresponse()
            response.read()
            done += 1
            wrong += response.status != 200
        connection.close()
        with answered.get_lock():
            answered.value += done
        with refused.get_lock():
            refused.value += wrong

    threads = [threading.Thread(target=read, args=(port,)) for port in ports]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def revoked_under_load(servers, revoker, browser):
    """Reads `browser`'s session twice on each instance (so every cache holds it), starts one
    watcher per instance polling it, revokes it by SQL (the way any writer does) and returns, per
    instance, the seconds from the moment the COMMIT was sent to the first 401, and whether any
    answered 200 to a request sent more than STALE_BOUND after the commit was acknowledged."""
    readers = [Reader(server, browser) for server in servers]
    first = [None] * 3
    late = [False] * 3
    problems = []
    times = {}
    ready = threading.Barrier(len(servers) + 1)

    def watch(k):
        reader = readers[k]
        ready.wait()
        began = time.monotonic()
        while True:
            sent = time.monotonic()
            status = reader.status()
            if status == 401:
                first[k] = time.monotonic()
                break
            if status != 200:
                problems.append(f"instance {k}: {status}")
                return
            if "acknowledged" in times and sent - times["acknowledged"] > STALE_BOUND:
                late[k] = True
            if sent - began > 10:
                problems.append(f"instance {k}: still 200 ten seconds on")
                return
        if reader.status() != 401 or reader.status() != 401:
            problems.append(f"instance {k}: a 200 again after its 401")

    try:
        for reader in readers:
            assert reader.status() == 200 and reader.status() == 200
        watchers = [threading.Thread(target=watch, args=(k,)) for k in range(len(servers))]
        for thread in watchers:
            thread.start()
        ready.wait()
        time.sleep(0.02)
        revoker.execute("UPDATE sessions SET revoked_at = %s, revoked_reason = 'signed_out' "
                        "WHERE token_digest = %s AND revoked_at IS NULL",
                        (int(time.time()), hashlib.sha256(browser.cookies["__Host-bl_session"].encode()).digest()))
        times["sent"] = time.monotonic()
        revoker.commit()
        times["acknowledged"] = time.monotonic()
        for thread in watchers:
            thread.join()
    finally:
        for reader in readers:
            reader.close()
    assert not problems, problems
    return [t - times["sent"] for t in first], late


def test_a_revocation_under_a_steady_read_load_is_a_401_everywhere_within_the_stale_bound(fleet):
    """Bounded: three instances, three steady readers in another process and one watcher per
    instance on loopback, LOAD_TRIALS revocations. Asserts only what the fleet promises (every
    instance says 401, and none says 200 to a request sent more than STALE_BOUND after the commit);
    prints the delays, which depend on the machine."""
    import multiprocessing
    import psycopg
    servers, uri, _ = fleet
    steady = signed_in(servers[0])
    cookie = "; ".join(f"{k}={v}" for k, v in steady.cookies.items())
    context = multiprocessing.get_context("fork")
    stop, answered, refused = context.Event(), context.Value("q", 0), context.Value("q", 0)
    load = context.Process(target=steady_reads, args=([s.port for s in servers], cookie, stop, answered, refused))
    # Signed in before the load starts: Argon2 is not what this measures.
    browsers = [signed_in(servers[i % 3]) for i in range(LOAD_TRIALS)]
    delays, late = [], 0
    started = time.monotonic()
    load.start()
    try:
        with psycopg.connect(uri) as revoker:
            for browser in browsers:
                got, was_late = revoked_under_load(servers, revoker, browser)
                delays += got
                late += sum(was_late)
    finally:
        stop.set()
        load.join(10)
    seconds = time.monotonic() - started
    assert load.exitcode == 0 and answered.value > 0 and refused.value == 0, (load.exitcode, refused.value)
    delays.sort()
    p50 = statistics.median(delays) * 1000
    p99 = delays[max(0, int(len(delays) * 0.99) - 1)] * 1000
    print(f"\nrevocation under load: {LOAD_TRIALS} revocations by SQL, {len(delays)} first 401s over 3 instances; "
          f"steady load {answered.value / seconds:.0f} reads/s from 3 readers for {seconds:.1f} s, plus the "
          f"watchers; from COMMIT sent to first 401: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
          f"max {delays[-1] * 1000:.1f} ms; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} cores")
    assert late == 0, f"a 200 more than {STALE_BOUND} s after the commit"


def test_revocation_holds_while_the_listening_connection_is_killed(fleet):
    import psycopg
    servers, uri, _ = fleet
    stop = threading.Event()
    kills = [0]

    def killer():
        with psycopg.connect(BASE, autocommit=True) as admin:
            while not stop.is_set():
                rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                     "WHERE application_name = 'band-edge-listener'").fetchall()
                kills[0] += len(rows)
                stop.wait(0.05)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        late = sum(trial(servers, i)[1] for i in range(40))
    finally:
        stop.set()
        thread.join()
    print(f"\nlistener connections killed: {kills[0]} during 40 trials")
    assert kills[0] >= 20, "the killer found the listeners by their application_name"
    assert late == 0, "a 200 more than a second after the sign-out"
    lost = [e for server in servers for e in server.events() if e.get("event") == "change_listener_lost"]
    assert lost, "the listeners said they lost their connection"
    text = "".join(server.stderr_path.read_text() for server in servers)
    assert PASSWORD not in text


def test_the_session_cache_answers_on_postgresql_and_a_membership_revoke_shortens_the_list(fleet):
    servers, uri, _ = fleet
    from test_postgres_store import admin as cli
    assert cli(uri, "school", "create", "--name", "North Example School", "--slug", "north").returncode == 0
    assert cli(uri, "member", "add", "--email", "ada@example.test", "--school", "north",
               "--role", "teacher").returncode == 0
    browser = signed_in(servers[0])
    reader = http.client.HTTPConnection("127.0.0.1", servers[1].port, timeout=5)
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())

    def schools():
        reader.request("GET", "/api/client/v1/session", headers={"Cookie": cookie})
        response = reader.getresponse()
        return [m["slug"] for m in json.loads(response.read())["schools"]]

    assert schools() == ["north"] and schools() == ["north"]
    assert cli(uri, "member", "revoke", "--email", "ada@example.test", "--school", "north").returncode == 0
    deadline = time.monotonic() + 1.0
    while schools() == ["north"]:
        assert time.monotonic() < deadline, "the revoked school still listed a second later"
    reader.close()
