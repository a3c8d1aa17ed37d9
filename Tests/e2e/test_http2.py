"""HTTP/2 through the real binary (issue 15, first part): h2c with prior knowledge on a plain listener
with --h2c, driven by curl and nghttp. The same routes, the same dispatcher, the same answers as
HTTP/1.1; the pool answers streams out of order. (TLS with ALPN h2 and the flood defences come next.)"""

import json
import shutil
import signal
import subprocess

import pytest
from edge import Server, fetch
from test_session_api import add_session

pytestmark = pytest.mark.skipif(shutil.which("nghttp") is None, reason="nghttp (nghttp2-client) is not installed")


def curl2(server, path, *args):
    """curl over h2c prior knowledge: (HTTP version, status, headers dict, body)."""
    out = subprocess.run(
        ["curl", "-s", "--http2-prior-knowledge", "-D", "-", "-o", "-", *args, server.url(path)],
        capture_output=True, timeout=20)
    head, _, body = out.stdout.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    version, status = lines[0].split(" ")[:2]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return version, int(status), headers, body


@pytest.fixture(scope="module")
def server():
    s = Server("--h2c")
    yield s
    s.stop()


@pytest.mark.parametrize("path,accept", [("/index.html", "br, gzip"), ("/.well-known/assetlinks.json", None),
                                         ("/healthz", None), ("/api/client/v1/config", None)])
def test_the_same_answers_as_http1(server, path, accept):
    extra = ["-H", f"Accept-Encoding: {accept}"] if accept else []
    version, status, headers, body = curl2(server, path, *extra)
    one = fetch(server, path, {"Accept-Encoding": accept} if accept else {})
    assert version == "HTTP/2" and status == one.status
    assert body == one.body
    for name in ("cache-control", "content-type", "etag", "content-encoding", "vary", "x-content-type-options",
                 "content-security-policy", "content-length"):
        assert headers.get(name) == one.header(name), name


def test_api_errors_and_pooled_reads(server):
    _, status, headers, body = curl2(server, "/api/client/v1/session")
    assert status == 401 and headers["cache-control"] == "no-store"
    assert headers["www-authenticate"] == 'Bearer realm="band-licence"'
    token = add_session(server, "ada@example.test", [("northfield", "teacher")])
    _, status, headers, body = curl2(server, "/api/client/v1/session", "-H", f"Authorization: Bearer {token}")
    assert status == 200 and json.loads(body)["account"]["email"] == "ada@example.test"
    _, status, _, body = curl2(server, "/api/client/v1/nowhere")
    assert status == 404 and json.loads(body)["error"] == "not_found"


def test_many_streams_on_one_connection(server):
    """nghttp opens 40 streams at once on one connection (the pool answers them in any order)."""
    token = add_session(server, "bo@example.test")
    urls = [server.url(f"/api/client/v1/session?n={n}") for n in range(20)]
    urls += [server.url(f"/index.html?n={n}") for n in range(20)]
    out = subprocess.run(["nghttp", "-nv", "-H", f"Authorization: Bearer {token}", *urls],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(":status: 200") == 40
    assert out.stdout.count("send HEADERS frame") == 40 and "Connected" in out.stdout
    assert out.stdout.count("] Connected") == 1, "one connection"


def test_http1_still_served_on_the_same_port(server):
    assert fetch(server, "/healthz").status == 200


def test_without_the_flag_prior_knowledge_is_refused():
    s = Server()
    try:
        out = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}",
                              s.url("/healthz")], capture_output=True, text=True, timeout=20)
        assert out.stdout != "200"
        assert fetch(s, "/healthz").status == 200
    finally:
        s.stop()


def test_drain_sends_goaway_and_exits():
    s = Server("--h2c")
    try:
        nghttp = subprocess.Popen(["nghttp", "-nv", "--timeout=10", s.url("/api/client/v1/config")],
                                  stdout=subprocess.PIPE, text=True)
        out, _ = nghttp.communicate(timeout=20)
        assert ":status: 200" in out
        s.signal(signal.SIGTERM)
        assert s.wait(timeout=15) == 0
    finally:
        s.stop()


@pytest.fixture(scope="module")
def tls_pki(tmp_path_factory):
    import sys
    from edge import ROOT
    sys.path.insert(0, str(ROOT / "build" / "lib"))
    import test_pki
    return test_pki.make(tmp_path_factory.mktemp("pki"), {"server": "IP:127.0.0.1,DNS:localhost"})


def test_over_tls_alpn_chooses_h2_by_default_and_http11_with_no_http2(make_server, tls_pki):
    """ALPN `h2` by default and with --http2 (curl --http2 and nghttp over TLS), HSTS on every
    answer in staging-like TLS; with --no-http2, the same client gets HTTP/1.1."""
    for flags, version in (([], "2"), (["--http2"], "2"), (["--no-http2"], "1.1")):
        server = make_server("--tls-listen", "127.0.0.1:0", "--cert", str(tls_pki / "server.pem"), "--key",
                             str(tls_pki / "server.key"), *flags)
        port = [int(e["address"].rsplit(":", 1)[1]) for e in server.events() if e.get("event") == "listening"][1]
        out = subprocess.run(["curl", "-s", "--http2", "--cacert", str(tls_pki / "ca.pem"), "-D", "-",
                              "-w", "\n%{http_version}", f"https://127.0.0.1:{port}/index.html"],
                             capture_output=True, text=True, timeout=30)
        assert out.stdout.rsplit("\n", 1)[1] == version, out.stdout[-200:]
        assert "strict-transport-security: max-age=63072000; includesubdomains" in out.stdout.lower()
        if version == "2":
            streams = subprocess.run(["nghttp", "-nv", f"https://127.0.0.1:{port}/healthz",
                                      f"https://127.0.0.1:{port}/api/client/v1/config"],
                                     capture_output=True, text=True, timeout=30)
            assert streams.stdout.count(":status: 200") == 2 and "h2" in streams.stdout
