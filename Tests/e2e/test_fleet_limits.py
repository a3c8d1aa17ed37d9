"""Per-address limits hold for the fleet: three instances on one PostgreSQL
count each other by heartbeat and each applies its share, so one address spread over all three
gets about the configured rate in all; the 429 is still decided on each event loop."""

import http.client
import os
import secrets
import time

import pytest

BASE = os.environ.get("BAND_EDGE_TEST_POSTGRES")
pytestmark = pytest.mark.skipif(not BASE, reason="BAND_EDGE_TEST_POSTGRES is not set (build/test sets it)")

BURST, PER_MINUTE, SECONDS = 6, 120, 7.8


@pytest.fixture
def schema_uri():
    import psycopg
    schema = "lim_" + secrets.token_hex(6)
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    yield BASE + f"&options=-csearch_path%3D{schema}"
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


def wait_for_fleet(servers, size):
    deadline = time.monotonic() + 15
    while True:
        sizes = []
        for server in servers:
            seen = [e["instances"] for e in server.events() if e.get("event") == "fleet"]
            sizes.append(int(seen[-1]) if seen else 1)
        if all(s == size for s in sizes):
            return
        assert time.monotonic() < deadline, f"instances saw {sizes}, not {size} each"
        time.sleep(0.05)


def attempts_allowed(servers, seconds):
    """POSTs /sign-in round-robin over the servers from one address for `seconds`; how many got
    past the limit (any answer but 429)."""
    connections = [http.client.HTTPConnection("127.0.0.1", s.port, timeout=5) for s in servers]
    allowed = sent = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        connection = connections[sent % len(connections)]
        connection.request("POST", "/sign-in", body="csrf=x&email=a%40example.test&password=p",
                           headers={"Content-Type": "application/x-www-form-urlencoded",
                                    "Origin": f"http://127.0.0.1:{servers[sent % len(servers)].port}"})
        response = connection.getresponse()
        response.read()
        if response.getheader("Connection", "").lower() == "close":
            connection.close()
        allowed += response.status != 429
        sent += 1
        time.sleep(0.01)
    for connection in connections:
        connection.close()
    return allowed, sent


def test_one_address_gets_about_the_configured_rate_across_three_instances(make_server, schema_uri):
    flags = ("--database", schema_uri, "--sign-in-burst", str(BURST), "--sign-in-per-minute", str(PER_MINUTE),
             "--rate-limited-hold", "0")
    servers = [make_server(*flags) for _ in range(3)]
    wait_for_fleet(servers, 3)
    allowed, sent = attempts_allowed(servers, SECONDS)
    expected = BURST + PER_MINUTE / 60 * SECONDS
    print(f"\nfleet-wide sign-in limit: {allowed} of {sent} attempts allowed over {SECONDS} s by 3 instances; "
          f"configured {expected:.0f} (each instance alone would allow {3 * expected:.0f})")
    assert 0.75 * expected <= allowed <= 1.25 * expected


def test_an_instance_that_stops_gives_its_share_back(make_server, schema_uri):
    flags = ("--database", schema_uri, "--sign-in-burst", str(BURST), "--sign-in-per-minute", str(PER_MINUTE))
    first, second = make_server(*flags), make_server(*flags)
    wait_for_fleet([first, second], 2)
    second.stop()
    wait_for_fleet([first], 1)
