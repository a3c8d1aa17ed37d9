"""The same request over HTTP/1.1 and over HTTP/2 (h2c, one server) gets the same answer, byte
for byte: status, every header field but Date and the connection-specific
ones RFC 9113 §8.2.2 forbids in HTTP/2, and the body. Runs in either pass: it speaks both itself."""

import json
import re

import pytest
from edge import Server, built_shell, request
from h2client import H2Connection

# RFC 9113 §8.2.2: not sent in HTTP/2; Date differs by the clock.
NOT_COMPARED = {"connection", "keep-alive", "transfer-encoding", "date"}


def cases():
    manifest = json.loads((built_shell() / "shell-manifest.json").read_text())
    js = next(e["path"] for e in manifest["entries"] if re.fullmatch(r"/app\.[0-9a-f]{8}\.js", e["path"]))
    out = []
    for entry in manifest["entries"]:
        out += [("GET", entry["path"], {}), ("GET", entry["path"], {"Accept-Encoding": "br, gzip"}),
                ("HEAD", entry["path"], {"Accept-Encoding": "gzip"})]
    html = {"Accept": "text/html"}
    out += [("GET", js, {"Range": "bytes=0-9"}), ("GET", js, {"Range": "bytes=-7"}),
            ("GET", js, {"Range": "bytes=999999-"}), ("GET", "/", {"If-None-Match": "*"}),
            ("GET", "/", {"Accept-Encoding": "*;q=0"}),
            ("GET", "/nope", {}), ("GET", "/nope", html), ("DELETE", "/", html), ("POST", "/account/deleted", {}),
            ("GET", "/qr/ABC123", html), ("GET", "/native/callback", html), ("GET", "/healthz", {}),
            ("GET", "/.well-known/assetlinks.json", {}), ("GET", "/.well-known/apple-app-site-association", {}),
            ("GET", "/api/client/v1/config", {}), ("GET", "/api/client/v1/session", {}),
            ("GET", "/api/client/v1/session", {"Authorization": "Bearer " + "A" * 43}),
            ("GET", "/api/client/v1/nowhere", {}), ("GET", "/api/client/v1/native/exchange", {}),
            ("GET", "/account", html), ("GET", "/native/sign-in?platform=x", html)]
    out = [(m, p, h, b"") for m, p, h in out]
    exchange = json.dumps({"code": "x" * 43, "codeVerifier": "v" * 64, "state": "s" * 32, "platform": "ios",
                           "appVersion": "1.4.0"}).encode()
    out += [("POST", "/api/client/v1/native/exchange", {"Content-Type": "application/json", "Idempotency-Key": "k"},
             exchange),
            ("POST", "/api/client/v1/native/exchange", {"Content-Type": "text/plain"}, b"code=x"),
            ("POST", "/api/client/v1/native/exchange", {"Content-Type": "application/json"}, b"{" * 5000),
            ("POST", "/sign-in", {"Content-Type": "application/x-www-form-urlencoded",
                                  "Origin": "https://attacker.example"}, b"email=ada%40example.test&password=x")]
    return out


def comparable(response):
    """Status, fields by name (lower case; same-name fields keep their order), values as sent."""
    fields = [(k.lower(), v) for k, v in response.headers if k.lower() not in NOT_COMPARED]
    return response.status, sorted(fields, key=lambda field: field[0]), response.body


@pytest.fixture(scope="module")
def server():
    s = Server("--h2c")
    yield s
    s.stop()


def test_every_answer_is_the_same_over_http11_and_h2(server):
    differences = []
    h2 = H2Connection(server.address)
    try:
        for method, path, headers, body in cases():
            client = server.connect()
            client.send(request(method, path, headers, body))
            one = client.read_response(head_request=method == "HEAD")
            client.close()
            two = h2.request(method, path, [("Host", "127.0.0.1"), *headers.items()], body)
            if comparable(one) != comparable(two):
                a, b = comparable(one), comparable(two)
                differences.append({"request": f"{method} {path} {headers}", "status": (a[0], b[0]),
                                    "h1 only": sorted(set(a[1]) - set(b[1])), "h2 only": sorted(set(b[1]) - set(a[1])),
                                    "same body": a[2] == b[2]})
    finally:
        h2.close()
    assert len(cases()) > 40
    assert differences == [], json.dumps(differences, indent=1)[:4000]


def test_a_difference_would_be_seen(server):
    """The comparison itself can fail: another Accept-Encoding gives another answer."""
    client = server.connect()
    client.send(request("GET", "/", {"Accept-Encoding": "br"}))
    one = client.read_response()
    client.close()
    h2 = H2Connection(server.address)
    try:
        two = h2.request("GET", "/", [("Host", "127.0.0.1")])
    finally:
        h2.close()
    assert comparable(one) != comparable(two)
