"""The gateway's configuration ("upstreams", "forward") against the real binary: the exact lines
`config check` and `serve` refuse it with, and the capabilities /api/client/v1/config and the
capability gauge report while forward routes come and go on reload."""

import json
import signal
import subprocess
import time

from edge import binary, fetch
from test_links import config as environment_config

PREFIX = "/api/client/v1/schools/:schoolId"
CORE = {"url": "http://127.0.0.1:8081"}
ATTENDANCE = {"path": f"{PREFIX}/attendance", "methods": {"GET": "read_only", "POST": "teacher"}, "upstream": "core",
              "audit": "attendance.recorded", "capability": "attendance"}


def run(*args, env):
    return subprocess.run([str(binary()), *args], capture_output=True, text=True, timeout=30, env=env)


def test_config_check_and_serve_refuse_an_overlapping_route_and_a_bad_upstream_with_exact_lines(tmp_path):
    path = environment_config("staging", tmp_path, upstreams={"core": {"url": "http://10.1.2.3:8081"}},
                              forward=[{"path": f"{PREFIX}/members/*", "methods": {"GET": "read_only"},
                                        "upstream": "core"}])
    env = {"BAND_LICENCE_ENV": "staging"}
    problems = [
        "upstreams.core.url 'http://10.1.2.3:8081' must be https:// or unix: outside development: "
        "plain http:// only to 127.0.0.0/8 or [::1]",
        f"forward route '{PREFIX}/members/*' overlaps band-edge's own route '{PREFIX}/members/:accountId': "
        "both match /api/client/v1/schools/1/members/1; band-edge answers that path itself",
    ]
    checked = run("config", "check", "--config", str(path), env=env)
    assert checked.returncode == 1 and checked.stdout == ""
    assert checked.stderr.splitlines() == [f"band-edge: error: {line}" for line in problems] + [
        "band-edge: error: the configuration has 2 problems"]
    served = run("serve", "--listen", "127.0.0.1:0", "--config", str(path), env=env)
    assert served.returncode == 1
    assert served.stderr.splitlines() == [f"band-edge: error: {line}" for line in problems] + [
        "band-edge: error: refusing to start: the configuration has 2 problems"]


def test_config_check_lists_the_upstreams_and_routes(tmp_path):
    path = environment_config("staging", tmp_path, upstreams={"core": CORE, "spare": {"url": "unix:/run/spare.sock",
                                                                                       "enabled": False}},
                              forward=[ATTENDANCE])
    checked = run("config", "check", "--config", str(path), env={"BAND_LICENCE_ENV": "staging"})
    assert checked.returncode == 0, checked.stderr
    assert ("upstreams:          core http://127.0.0.1:8081 (enabled)\n"
            "                    spare unix:/run/spare.sock (disabled)\n"
            f"forward routes:     {PREFIX}/attendance GET:read_only POST:teacher -> core (enabled)\n") in checked.stdout
    assert "capabilities on:    nativeSignIn, verifiedLinks, codeScanning, attendance\n" in checked.stdout


def gauge(exposition, series):
    """The value of one series of an exposition (the line `series value`), None when absent."""
    for line in exposition.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def capability(server, name):
    """What /api/client/v1/config and the gauge say of capability `name`, which must agree."""
    response = fetch(server, "/api/client/v1/config")
    assert response.status == 200
    reported = json.loads(response.body)["capabilities"][name]
    shown = gauge(server.metrics(), f'band_edge_capability_enabled{{capability="{name}"}}')
    assert shown == (1 if reported else 0), f"/config says {reported}, the gauge {shown}"
    return reported


def reload(server, path, settings, count):
    """Writes `settings` as the development configuration at `path`, sends SIGHUP and waits for the
    `count`th reload in all."""
    path.write_text(json.dumps({"environment": "development", **settings}))
    server.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while sum(1 for e in server.events() if e["event"] == "reloaded") < count:
        assert time.monotonic() < deadline, "the reload was not logged"
        time.sleep(0.02)


def test_attendance_is_on_only_while_a_configured_enabled_route_forwards_it(make_server, tmp_path):
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({"environment": "development", "upstreams": {"core": CORE}}))
    server = make_server("--config", str(path))
    assert capability(server, "attendance") is False, "an upstream without a route"
    steps = [
        ("a route naming it", {"upstreams": {"core": CORE}, "forward": [ATTENDANCE]}, True),
        ("the route disabled", {"upstreams": {"core": CORE}, "forward": [{**ATTENDANCE, "enabled": False}]}, False),
        ("its upstream disabled", {"upstreams": {"core": {**CORE, "enabled": False}}, "forward": [ATTENDANCE]}, False),
        ("a kill switch", {"upstreams": {"core": CORE}, "forward": [ATTENDANCE], "killSwitches": ["attendance"]}, False),
        ("the kill switch lifted", {"upstreams": {"core": CORE}, "forward": [ATTENDANCE]}, True),
        ("the route removed", {"upstreams": {"core": CORE}, "forward": []}, False),
    ]
    for count, (name, settings, on) in enumerate(steps, start=1):
        reload(server, path, settings, count)
        assert capability(server, "attendance") is on, name
        assert capability(server, "studentManagement") is False, name
    gateway = [e for e in server.events() if e["event"] == "gateway"]
    assert gateway[0] == {"level": "info", "event": "gateway", "upstreams": "core http://127.0.0.1:8081 (enabled)",
                          "forward": ""}
    assert gateway[1]["forward"] == f"{PREFIX}/attendance GET:read_only POST:teacher -> core (enabled)"
