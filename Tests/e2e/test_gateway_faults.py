"""The gateway's timeouts, circuit breaker, reload and drain against the recording core (upstream.py):
each timeout decides at the value configured (the same slow core is a 504 under a short one and a 200
under a long one: no clock in the assertions), consecutive failures open the circuit (503 at once,
nothing sent) until one probe goes through, and a request in flight at a SIGHUP or a SIGTERM is still
answered."""

import json
import signal
import threading
import time

from edge import Server, engine
import pytest
from test_gateway import PREFIX, bearer, call, development_config, school, start
from test_reload import reload_and_wait
from test_session_api import add_session
from upstream import RecordingUpstream


@pytest.fixture
def core():
    c = RecordingUpstream()
    yield c
    c.stop()


def start_one_loop(tmp_path, core, **settings):
    """As test_gateway.start, on one event loop: each loop keeps its own view of the core (its pool
    and its circuit), so with one loop every request counts towards the same circuit."""
    kek = ["--key-encryption-key", str(tmp_path / "kek")] if engine() == "postgres" else []
    return Server("--config", str(development_config(tmp_path, core.url, **settings)), *kek, "--threads", "1",
                  env={"BAND_LICENCE_ENV": "development"})


def students(server, token, query=""):
    return call(server, f"{PREFIX}/{school(server, 'northfield')}/students{query}", bearer(token))


@pytest.mark.parametrize("first_byte,status", [(0.3, 504), (4, 200)])
def test_the_first_byte_timeout_is_the_configured_one(tmp_path, core, first_byte, status):
    core.behaviour = "stall:1.2"  # answers 1.2 s after the request
    server = start(tmp_path, core, firstByteTimeout=first_byte, totalTimeout=10)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answer = students(server, token)
        assert answer.status == status, answer.body
        if status == 504:
            assert "error=connection_read_timeout" in answer.header("proxy-status")
            assert json.loads(answer.body)["error"] == "upstream_timeout"
            assert answer.header("x-request-id") and answer.header("cache-control") == "no-store"
        assert len(core.requests) == 1, "a timed-out request is never sent again"
    finally:
        server.stop()


@pytest.mark.parametrize("total,status", [(0.5, 504), (5, 200)])
def test_the_total_timeout_is_the_configured_one(tmp_path, core, total, status):
    core.behaviour = "slow-body:1.5"  # the head and half the body at once, the rest 1.5 s later
    server = start(tmp_path, core, connectTimeout=0.2, firstByteTimeout=total, totalTimeout=total)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answer = students(server, token)
        assert answer.status == status, answer.body
        if status == 504:
            assert answer.header("proxy-status") == "band-edge; error=http_response_timeout"
            assert json.loads(answer.body)["error"] == "upstream_timeout"
        else:
            assert json.loads(answer.body)["status"] == 200
        assert len(core.requests) == 1
    finally:
        server.stop()


def test_failures_open_the_circuit_then_one_probe_goes_through(tmp_path, core):
    core.behaviour = "status:503"
    server = start_one_loop(tmp_path, core, failuresToOpen=3, openSeconds=1)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        for n in range(3):
            answer = students(server, token, f"?n={n}")
            assert answer.status == 503 and answer.header("proxy-status") is None, "the core's own 503"
        assert len(core.requests) == 3
        refused = students(server, token, "?n=open")
        assert refused.status == 503, refused.body
        assert 'details="circuit open"' in refused.header("proxy-status")
        assert refused.header("proxy-status").startswith("band-edge; error=destination_unavailable")
        assert refused.header("retry-after") and json.loads(refused.body)["error"] == "upstream_unavailable"
        assert len(core.requests) == 3, "an open circuit sends nothing"

        # After openSeconds exactly one request (the probe) reaches the core; while it is in flight
        # (the core takes 1.5 s) the others are still refused without touching the core.
        core.behaviour = "stall:1.5"
        probe: dict = {}
        deadline = time.monotonic() + 10
        while True:
            assert time.monotonic() < deadline, "no probe went through"
            thread = threading.Thread(target=lambda: probe.setdefault("answer", students(server, token, "?n=probe")))
            thread.start()
            thread.join(0.2)
            if thread.is_alive():  # the core holds it: this is the probe
                break
            refused = probe.pop("answer")
            assert refused.status == 503 and 'details="circuit open"' in refused.header("proxy-status")
            assert len(core.requests) == 3, "refused while open, nothing sent"
            time.sleep(0.05)  # a poll, not a measurement: the per-account limit allows 300 a minute
        core.wait_for(4)
        during = [students(server, token, f"?n=during-{n}") for n in range(3)]
        assert all(a.status == 503 and 'details="circuit open"' in a.header("proxy-status") for a in during)
        thread.join(10)
        assert probe["answer"].status == 200, probe["answer"].body
        assert [r.target.rsplit("=", 1)[1] for r in core.requests[3:]] == ["probe"]
        core.behaviour = "json"
        assert students(server, token, "?n=closed").status == 200, "the probe's success closed the circuit"
        assert len(core.requests) == 5
    finally:
        server.stop()


def test_an_open_circuit_is_in_the_log_and_the_metrics(tmp_path, core):
    core.behaviour = "status:503"
    server = start_one_loop(tmp_path, core, failuresToOpen=2, openSeconds=60)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answers = [students(server, token, f"?n={n}") for n in range(3)]
        assert 'details="circuit open"' in answers[-1].header("proxy-status")
        # The loops publish their counters and log lines within about a second: poll, with a deadline.
        deadline = time.monotonic() + 5
        while True:
            lines = server.metrics().splitlines()
            events = [e for e in server.events() if e.get("event") == "upstream_circuit_open"]
            if 'band_edge_upstream_circuit_opened_total{upstream="core"} 1' in lines and events:
                break
            assert time.monotonic() < deadline, ([line for line in lines if "circuit" in line], events)
            time.sleep(0.05)
        assert [e.get("upstream") for e in events] == ["core"]
        assert 'band_edge_upstream_requests_total{upstream="core",outcome="5xx"} 2' in lines
    finally:
        server.stop()


@pytest.mark.http1_only("python h2 (4.4.1) closes its connection state on GOAWAY, which band-edge sends at a reload "
                        "and a drain, and then refuses the in-flight stream's HEADERS (ProtocolError): the answer "
                        "cannot be read over h2 by this client")
def test_a_request_in_flight_at_a_reload_is_answered_on_its_snapshot(tmp_path, core):
    core.behaviour = "stall:1.5"
    server = start(tmp_path, core)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answers = []
        thread = threading.Thread(target=lambda: answers.append(students(server, token)))
        thread.start()
        assert len(core.wait_for(1)) == 1, "the request reached the core"
        # The reload switches the core off (the same file rewritten): the request in flight keeps the
        # snapshot it started on, the next one gets the new one.
        development_config(tmp_path, core.url, enabled=False)
        reload_and_wait(server, 1)
        thread.join(10)
        assert [a.status for a in answers] == [200], answers
        assert json.loads(answers[0].body)["status"] == 200
        after = students(server, token)
        assert after.status == 503 and 'details="disabled"' in after.header("proxy-status")
        assert len(core.requests) == 1
    finally:
        server.stop()


@pytest.mark.http1_only("python h2 (4.4.1) closes its connection state on GOAWAY, which band-edge sends at a reload "
                        "and a drain, and then refuses the in-flight stream's HEADERS (ProtocolError): the answer "
                        "cannot be read over h2 by this client")
def test_a_request_in_flight_at_sigterm_is_answered_before_the_process_exits(tmp_path, core):
    core.behaviour = "stall:1.5"
    server = start(tmp_path, core)
    token = add_session(server, "ada@example.test", [("northfield", "teacher")])
    body = b'{"student":"stu_1","present":true}'
    answers = []

    def write():
        answers.append(call(server, f"{PREFIX}/{school(server, 'northfield')}/attendance", bearer(
            token, **{"Idempotency-Key": '"k-drain"', "Content-Type": "application/json"}), method="POST", body=body))

    thread = threading.Thread(target=write)
    thread.start()
    assert len(core.wait_for(1)) == 1, "the write reached the core"
    server.signal(signal.SIGTERM)
    thread.join(15)
    assert [a.status for a in answers] == [200], answers
    assert json.loads(answers[0].body) == {"method": "POST", "target": core.requests[0].target, "status": 200}
    assert server.wait() == 0
    assert len(core.requests) == 1 and core.requests[0].body == body
