"""The admin listener and its metrics through the real binary: where /metrics is served and to
whom, what the counters say after known traffic (exactly), bounded series under random paths and
tokens, and a real Prometheus scraping it with PromQL assertions."""

import json
import random
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from edge import Client, KeepAlive, Server, fetch, request, temporary_directory
from test_links import config
from test_tls import pki  # noqa: F401 (the fixture)
from test_sign_in_limits import attempt
from test_web_sign_in import PASSWORD, Browser, add_account

PROMTOOL = shutil.which("promtool")


def samples(text: str) -> dict[str, float]:
    """Series (name with its labels, as the exposition orders them) to value, read by
    prometheus-client's parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sample.labels.items())
            out[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return out


def value(text: str, series: str) -> float:
    return samples(text).get(series, 0.0)


def check_metrics(text: str) -> None:
    assert PROMTOOL, "promtool (Debian's prometheus) is needed"
    result = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), (
        result.stdout + result.stderr)


def test_metrics_only_on_the_admin_listener(make_server):
    server = make_server()
    assert fetch(server, "/metrics").status == 404, "the public listener never serves /metrics"
    assert server.admin("/healthz").status == 200
    assert server.admin("/readyz").status == 200
    assert server.admin("/metrics").header("cache-control") == "no-store"
    assert server.admin("/nothing").status == 404
    check_metrics(server.metrics())


def test_the_admin_listener_refuses_a_public_address_without_networks_and_clients_outside_them(tmp_path):
    for args, message in (
            (["--admin-listen", "0.0.0.0:0"], "is not on loopback: name the networks"),
            (["--admin-listen", "127.0.0.1:0", "--admin-allow", "10.0.0.0/33"], "takes networks such as"),
            (["--admin-listen", "localhost:9"], "takes a numeric host:port or a port")):
        result = subprocess.run(
            [str(__import__("edge").binary()), "serve", "--listen", "127.0.0.1:0", "--data", str(tmp_path / "d"),
             *args], capture_output=True, text=True, timeout=30)
        assert result.returncode != 0 and message in result.stderr, result.stderr
    # Networks named: only clients in them are served (loopback too only when named).
    server = Server("--admin-allow", "192.0.2.0/24")
    try:
        client = Client(("127.0.0.1", server.admin_port))
        client.send(request("GET", "/metrics"))
        assert client.closed_by_peer(), "a client outside the named networks gets nothing"
        assert client.buffer == b""
        client.close()
    finally:
        server.stop()
    server = Server("--admin-allow", "192.0.2.0/24,127.0.0.0/8")
    try:
        assert server.admin("/healthz").status == 200
    finally:
        server.stop()


def test_counters_say_exactly_what_happened(make_server):
    server = make_server("--sign-in-burst", "4", "--sign-in-per-minute", "6")
    add_account(server, "ada@example.test", "Ada Example")
    before = server.metrics()
    connection = KeepAlive(server)
    answers = connection.send(*[("GET", "/definitely/not/here", {})] * 3, ("GET", "/index.html", {}))
    connection.close()
    assert [a.status for a in answers] == [404, 404, 404, 200]
    _, ok = attempt(server, "ada@example.test", PASSWORD)
    assert ok.status == 303
    statuses = [attempt(server, "ada@example.test", "wrong password")[1].status for _ in range(5)]
    assert statuses == [400, 400, 400, 429, 429]
    text = server.metrics()
    check_metrics(text)

    def moved(series):
        return value(text, series) - value(before, series)

    protocol = "h2" if __import__("edge").protocol() == "h2" else "http1"
    assert moved(f'band_edge_http_requests_total{{route="none",method="GET",protocol="{protocol}",code="404"}}') == 3
    assert moved(f'band_edge_http_requests_total{{route="shell",method="GET",protocol="{protocol}",code="200"}}') >= 1
    assert moved('band_edge_signin_attempts_total{channel="web",outcome="ok"}') == 1
    assert moved('band_edge_signin_attempts_total{channel="web",outcome="bad_credentials"}') == 3
    assert moved('band_edge_signin_attempts_total{channel="web",outcome="rate_limited"}') == 2
    assert moved('band_edge_sessions_created_total{channel="web"}') == 1
    assert moved(f'band_edge_http_requests_total{{route="/sign-in",method="POST",protocol="{protocol}",code="429"}}') == 2
    assert value(text, "band_edge_ready") == 1
    assert value(text, 'band_edge_deployment_info{environment="development"}') == 1
    assert value(text, 'band_edge_capability_enabled{capability="nativeSignIn"}') == 1
    assert value(text, 'band_edge_connections_accepted_total{listener="plain"}') >= 4
    assert value(text, 'band_edge_reloads_total{result="ok"}') == 0
    for hidden in ("ada@example.test", "definitely", "127.0.0.1", "wrong password"):
        assert hidden not in text


def test_the_native_handoff_is_counted(make_server):
    from test_native_handoff import App, fetch_session, sign_in_through_the_browser
    server = make_server()
    add_account(server, "ada@example.test", "Ada Example")
    app = App(server)
    _, response = sign_in_through_the_browser(server, app)
    assert response.status == 303
    code = urllib.parse.parse_qs(urllib.parse.urlparse(response.header("location")).query)["code"][0]
    first = app.exchange(code, key="key-1")
    again = app.exchange(code, key="key-1")
    replay = app.exchange(code, key="key-2")
    assert (first.status, again.status, replay.status) == (200, 200, 400)
    assert fetch_session(server, json.loads(first.body)["sessionToken"]).status == 401, "the replay revoked it"
    text = server.metrics()
    assert value(text, 'band_edge_signin_attempts_total{channel="native",outcome="ok"}') == 1
    assert value(text, "band_edge_handoffs_created_total") == 1
    assert value(text, 'band_edge_native_exchanges_total{outcome="issued"}') == 1
    assert value(text, 'band_edge_native_exchanges_total{outcome="idempotent_retry"}') == 1
    assert value(text, 'band_edge_native_exchanges_total{outcome="replay_revoked"}') == 1
    assert value(text, 'band_edge_sessions_created_total{channel="native"}') == 1
    assert value(text, 'band_edge_sessions_revoked_total{reason="handoff_replayed"}') == 1


def test_series_stay_the_same_under_random_paths_and_tokens(make_server):
    server = make_server()
    rng = random.Random(16)

    def burst(n):
        connection = KeepAlive(server)
        for start in range(0, n, 50):
            asked = []
            for i in range(start, min(n, start + 50)):
                if i % 2:
                    path = "/" + "/".join("%x" % rng.getrandbits(40) for _ in range(rng.randint(1, 4)))
                    asked.append(("GET", path, {}))
                else:
                    token = "%064x" % rng.getrandbits(256)
                    asked.append(("GET", "/api/client/v1/session", {"Authorization": f"Bearer {token}"}))
            statuses = [a.status for a in connection.send(*asked)]
            assert statuses == [401 if i % 2 == 0 else 404 for i in range(start, start + len(asked))]
        connection.close()

    burst(20)
    before = server.metrics()
    burst(10_000)
    after = server.metrics()
    assert sorted(samples(after)) == sorted(samples(before)), "new series appeared"
    assert value(after, 'band_edge_http_requests_total{route="/api/client/v1/session",method="GET",protocol="%s",code="401"}'
                 % ("h2" if __import__("edge").protocol() == "h2" else "http1")) == 5010
    check_metrics(after)


@pytest.mark.http1_only("speaks TLS and h2 itself, with curl")
def test_tls_and_http2_are_counted(make_server, pki):
    from test_tls import tls_server
    server, secure = tls_server(make_server, pki)
    for extra in ([], ["--http1.1"]):
        result = subprocess.run(["curl", "-sk", "--http2", *extra, "-o", "/dev/null", "-w", "%{http_version}",
                                 f"https://127.0.0.1:{secure}/index.html"], capture_output=True, text=True, timeout=30)
        assert result.stdout in ("2", "1.1"), result
    text = server.metrics()
    check_metrics(text)
    assert value(text, 'band_edge_tls_handshakes_total{version="TLSv1.3",result="ok"}') == 2
    assert value(text, "band_edge_h2_streams_total") == 1
    assert value(text, 'band_edge_http_requests_total{route="shell",method="GET",protocol="h2",code="200"}') == 1
    assert value(text, 'band_edge_connections_accepted_total{listener="tls"}') == 2
    assert value(text, "band_edge_tls_certificate_expiry_timestamp_seconds") > time.time()
    # A handshake record that is not a ClientHello: a failed handshake, without a version.
    sock = socket.create_connection(("127.0.0.1", secure))
    sock.sendall(b"\x16\x03\x01\x00\x05hello")  # a handshake record that is not a ClientHello
    sock.recv(100)
    sock.close()
    deadline = time.monotonic() + 5
    while value(server.metrics(), 'band_edge_tls_handshakes_total{version="none",result="failed"}') != 1:
        assert time.monotonic() < deadline, server.metrics()
        time.sleep(0.05)


def test_metrics_off_counts_nothing(make_server):
    server = make_server("--no-metrics")
    fetch(server, "/index.html")
    text = server.metrics()
    check_metrics(text)
    assert "band_edge_http_requests_total" not in text
    assert value(text, "band_edge_build_info{version=\"0.16.0\",commit=\"unknown\"}") == 1


class Prometheus:
    """Debian's prometheus on a random loopback port, scraping `targets` every second."""

    def __init__(self, targets: list[str]):
        assert shutil.which("prometheus"), "prometheus (Debian's package) is needed"
        self.dir = temporary_directory("band-edge-prometheus-")
        (self.dir / "prometheus.yml").write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": "band-edge", "static_configs": [{"targets": targets}]}],
        }))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = (self.dir / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            ["prometheus", f"--config.file={self.dir / 'prometheus.yml'}", f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)

    def query(self, promql: str) -> list:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())["data"]["result"]
        except OSError:
            return []

    def until(self, promql: str, expected: float, timeout: float = 30) -> None:
        """Waits until `promql` evaluates to one sample equal to `expected` (scrapes come every second)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(promql)
            if len(result) == 1 and float(result[0]["value"][1]) == expected:
                return
            assert time.monotonic() < deadline, f"{promql} = {result}, not {expected}"
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def production_attempt(server, origin, email, password):
    """A web sign-in attempt from a page on the production origin."""
    browser = Browser(server, origin=origin)
    form = browser.send("GET", "/sign-in")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', form.body).group(1).decode()
    return browser.send("POST", "/sign-in", form={"csrf": csrf, "email": email, "password": password})


def test_a_real_prometheus_scrapes_the_fleet(tmp_path):
    path = config("production", tmp_path)
    origin = json.loads(path.read_text())["origin"]

    def attempt(server, email, password):
        return None, production_attempt(server, origin, email, password)

    servers = [Server("--config", str(path), "--sign-in-burst", "2", "--sign-in-per-minute", "6",
                      test_routes=False, env={"BAND_LICENCE_ENV": "production"}) for _ in range(2)]
    prometheus = Prometheus([f"127.0.0.1:{s.admin_port}" for s in servers])
    try:
        prometheus.until("sum(up)", 2)
        add_account(servers[0], "ada@example.test", "Ada Example")
        prometheus.until('sum(band_edge_signin_attempts_total{outcome="bad_credentials"})', 0)
        # Two failures on one instance, one on the other: the fleet's sum is exactly three.
        for server in (servers[0], servers[0], servers[1]):
            assert attempt(server, "ada@example.test", "wrong password")[1].status == 400
        prometheus.until('sum(band_edge_signin_attempts_total{outcome="bad_credentials"})', 3)
        # A flood past the limit: the 429 counter moves.
        statuses = [attempt(servers[1], "ada@example.test", "wrong password")[1].status for _ in range(6)]
        assert statuses.count(429) >= 5
        prometheus.until('sum(band_edge_http_requests_total{code="429"}) >= bool 5', 1)
        # A kill switch on reload shows on the graph.
        prometheus.until('band_edge_capability_enabled{capability="verifiedLinks",instance="127.0.0.1:%d"}'
                         % servers[0].admin_port, 1)
        data = json.loads(path.read_text())
        data["killSwitches"] = ["verifiedLinks"]
        path.write_text(json.dumps(data))
        servers[0].signal(signal.SIGHUP)
        prometheus.until('band_edge_capability_enabled{capability="verifiedLinks",instance="127.0.0.1:%d"}'
                         % servers[0].admin_port, 0)
        prometheus.until('sum(band_edge_reloads_total{result="ok"})', 1)
        prometheus.until("min(band_edge_ready)", 1)
    finally:
        prometheus.stop()
        for server in servers:
            server.stop()
