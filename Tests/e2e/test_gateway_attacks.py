"""The gateway against clients that try to make the API core believe what they wrote: a table of
spoofing and hop-by-hop cases over HTTP/1.1 (raw bytes) and a table of HTTP/2-to-HTTP/1.1
downgrade cases (raw frames, the `h2` package with its own checks off), each proving what the core
receives and what the client gets.

The shapes come from proxies that shipped them (docs/gateway.md, ../shared/reference/gateway.md):
- Caddy GHSA-7r4p-vjf4-gxv4: `forward_auth` left a client-supplied identity header in place when
  the auth service did not return one; here a client's own `Band-Licence-Assertion`, in any case,
  repeated, or as the only one.
- oauth2-proxy GHSA-vjrc-mh2v-45x6 (CVE-2025-64484) and Traefik's underscore headers: `X_Forwarded_For`
  or `Band_Licence_Assertion` pass a filter that only knows the dashed name, and a WSGI/CGI core
  reads both as `HTTP_X_FORWARDED_FOR`. oauth2-proxy #3506: a client's `X-Forwarded-Uri` trusted.
- Traefik CVE-2021-32813 and CVE-2024-45410: a client names the proxy's own fields (an auth header,
  `X-Forwarded-*`) in `Connection`, and the proxy drops them after adding them.
- Envoy CVE-2023-27487: a client-supplied `x-envoy-original-path`, a field the proxy's own filters
  trusted; here any field outside the allow-list (`X-Original-URL`, `X-Real-IP`, ...).
- h2c smuggling (`Upgrade: h2c`), `Transfer-Encoding` tricks, trailers, an absolute-form target,
  dot segments, and HTTP/2 requests that an HTTP/1.1 head cannot carry as they are (HAProxy
  CVE-2021-39241/39242, CVE-2023-25725, Netty CVE-2021-21295).

Where band-edge gets one wrong, the case is `xfail(strict=True)` with what it does instead; the
Swift code is not changed here."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import pytest
from edge import Server, engine
from test_gateway import PREFIX, ROOT, verify
from test_session_api import add_session
from upstream import RecordingUpstream

FORGED = ("eyJhbGciOiJub25lIiwidHlwIjoiYmFuZC1hc3NlcnRpb24rand0In0."
          "eyJzdWIiOiJhY2NfYWRtaW4iLCJyb2xlIjoiYWRtaW5pc3RyYXRvciJ9.")
# Fields the gateway alone writes: each must arrive exactly once, with the gateway's value.
GATEWAY_FIELDS = ("host", "via", "forwarded", "x-forwarded-for", "x-forwarded-proto", "x-request-id",
                  "band-licence-assertion")
# Fields no client may get through, whatever the spelling: credentials, hop-by-hop, and forwarding
# or routing fields some proxy or framework trusts.
NEVER = {"authorization", "cookie", "connection", "keep-alive", "proxy-connection", "te", "trailer",
         "transfer-encoding", "upgrade", "http2-settings", "expect", "x-real-ip", "x-forwarded-host",
         "x-forwarded-port", "x-forwarded-uri", "x-forwarded-prefix", "x-original-url", "x-rewrite-url",
         "x-envoy-original-path", "x-envoy-internal", "x-custom", "proxy-authorization", "x-http-method-override"}


def normalized(name: str) -> str:
    """A field name as a CGI/WSGI core reads it: case and `_` versus `-` do not matter."""
    return name.lower().replace("_", "-")


def forwarding_config(tmp_path, core_url, **core):
    """config/development.json with the recording core and one more route ending in `*`."""
    data = json.loads((ROOT / "config" / "development.json").read_text())
    data["upstreams"] = {"core": {"url": core_url, **core}}
    data["forward"].append({"path": "/api/client/v1/schools/:schoolId/files/*", "methods": {"GET": "read_only"},
                            "upstream": "core"})
    path = tmp_path / "development.json"
    path.write_text(json.dumps(data))
    return path


@dataclass
class Site:
    server: Server
    core: RecordingUpstream
    teacher: str
    reader: str
    web: str
    school: str
    accounts: dict = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return f"{PREFIX}/{self.school}"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """One server (with h2c prior knowledge too) forwarding to one recording core, shared by the
    cases of this module: a teacher and a read-only member of northfield on native sessions, and a
    web (cookie) session of the read-only member."""
    tmp = tmp_path_factory.mktemp("attacks")
    core = RecordingUpstream()
    kek = ["--key-encryption-key", str(tmp / "kek")] if engine() == "postgres" else []
    args = ["--config", str(forwarding_config(tmp, core.url)), *kek]
    server = Server(*args, *([] if "--h2c" in args else ["--h2c"]), env={"BAND_LICENCE_ENV": "development"})
    try:
        teacher = add_session(server, "ada@example.test", [("northfield", "teacher")])
        reader = add_session(server, "bo@example.test", [("northfield", "read_only")])
        web = add_session(server, "cy@example.test", [("northfield", "read_only")])
        server.store.query("UPDATE sessions SET kind = 'web', platform = NULL, app_version = NULL "
                           "WHERE account_id = (SELECT id FROM accounts WHERE email = 'cy@example.test')")
        school = server.store.query("SELECT id FROM schools WHERE slug = 'northfield'")[0][0]
        accounts = dict(server.store.query("SELECT email, id FROM accounts"))
        yield Site(server, core, teacher, reader, web, school, accounts)
    finally:
        server.stop()
        core.stop()


def raw_exchange(server, head: str, body: bytes = b""):
    """`head` (lines joined by CRLF, without the empty line) and `body`, exactly as given, on a fresh
    HTTP/1.1 connection; the answer."""
    client = server.connect()
    try:
        client.send(head.replace("\n", "\r\n").encode("latin-1") + b"\r\n\r\n" + body)
        return client.read_response()
    finally:
        client.close()


def arrived(core, before: int, timeout: float = 1.0):
    """The requests the core received after the first `before`, waiting up to `timeout` for one."""
    core.wait_for(before + 1, timeout=timeout)
    return core.requests[before:]


def assert_forwarded_cleanly(site: Site, got, answer, scope: str, target: str):
    """What every forwarded request must look like at the core, whatever the client sent."""
    names = [normalized(n) for n, _ in got.fields]
    for name in GATEWAY_FIELDS:
        assert names.count(name) == 1, (name, got.fields)
    assert not set(names) & NEVER, got.fields
    assert not [n for n, _ in got.fields if "_" in n], got.fields
    assert got.target == target, "the core gets the origin-form target band-edge routed"
    assert got.header("Host") == site.core.url.removeprefix("http://")
    assert got.header("X-Forwarded-For") == "127.0.0.1"
    assert got.header("Forwarded") == 'for=127.0.0.1;proto=http;host="127.0.0.1:8080"'
    assert got.header("X-Forwarded-Proto") == "http"
    assert got.header("Via") == "1.1 band-edge"
    assert got.header("X-Request-Id") == answer.header("x-request-id")
    assert got.header("X-Request-Id").startswith("req_")
    claims = verify(site.server, got.header("Band-Licence-Assertion"))
    assert claims["school"] == site.school and claims["scp"] == scope
    return claims


@dataclass
class Spoof:
    """One corpus case: a request (`{P}` is the school's prefix, `{T}` the teacher's token) and what
    must follow: `status` (or one of several) for the client; with 2xx, the request at the core passes
    `assert_forwarded_cleanly` and `check` (claims, request at the core); otherwise nothing reaches
    the core."""
    id: str
    head: str
    body: bytes = b""
    status: int | tuple = 200
    check: object = None
    target: str = "{P}/students"
    xfail: str | None = None


def write(head_fields: str, body: bytes = b"{}", key: str = '"k-{n}"', framing: str | None = None) -> tuple[str, bytes]:
    framing = framing if framing is not None else f"Content-Length: {len(body)}"
    return (f"POST {{P}}/attendance HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {{T}}\n"
            f"Content-Type: application/json\nIdempotency-Key: {key}\n{head_fields}{framing}"), body


def read(head_fields: str = "", target: str = "{P}/students", auth: str = "Authorization: Bearer {T}\n") -> str:
    return f"GET {target} HTTP/1.1\nHost: 127.0.0.1\n{auth}{head_fields}".rstrip("\n")


def assertion_is_the_gateways(claims, got):
    assert got.header("Band-Licence-Assertion") != FORGED
    assert claims["role"] == "teacher"


CHUNKED_WITH_TRAILER = b"2\r\n{}\r\n0\r\nBand-Licence-Assertion: " + FORGED.encode() + b"\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n"

SPOOFS = [
    # Caddy GHSA-7r4p-vjf4-gxv4: the client's own identity header, as sent, in another case, twice.
    Spoof("caddy-client-assertion", read(f"Band-Licence-Assertion: {FORGED}\n"), check=assertion_is_the_gateways),
    Spoof("caddy-client-assertion-mixed-case", read(f"bAND-lICENCE-aSSERTION: {FORGED}\n"),
          check=assertion_is_the_gateways),
    Spoof("caddy-client-assertion-twice", read(f"band-licence-assertion: {FORGED}\nBAND-LICENCE-ASSERTION: x.y.z\n"),
          check=assertion_is_the_gateways),
    # oauth2-proxy GHSA-vjrc-mh2v-45x6 / Traefik underscoreHeadersStrategy: underscores for dashes.
    Spoof("underscore-assertion-and-forwarding",
          read(f"Band_Licence_Assertion: {FORGED}\nX_Forwarded_For: 203.0.113.9\nX_Request_Id: mine\n"
               "X_Real_IP: 203.0.113.9\nX_Forwarded_Host: evil.example.test\n"), check=assertion_is_the_gateways),
    # Forwarding fields a client writes: rebuilt from the connection, never extended.
    Spoof("client-forwarding-fields",
          read("X-Forwarded-For: 203.0.113.9\nForwarded: for=203.0.113.9;host=evil.example.test;proto=https\n"
               "X-Real-IP: 203.0.113.9\nX-Forwarded-Host: evil.example.test\nX-Forwarded-Proto: https\n"
               "X-Forwarded-Port: 443\nVia: 1.1 evil.example.test\nX-Request-Id: req_AAAAAAAAAAAAAAAA\n")),
    # oauth2-proxy #3506 and Envoy CVE-2023-27487: routing fields some hop trusts.
    Spoof("trusted-routing-fields",
          read("X-Forwarded-Uri: /public\nX-Envoy-Original-Path: /admin\nX-Envoy-Internal: true\n"
               "X-Original-URL: /admin\nX-Rewrite-URL: /admin\nX-Forwarded-Prefix: /admin\n"
               "X-HTTP-Method-Override: DELETE\nProxy-Authorization: Basic YWRtaW46YWRtaW4=\n")),
    # Traefik CVE-2021-32813 / CVE-2024-45410: the gateway's own fields named in Connection.
    Spoof("traefik-connection-names-gateway-fields",
          read("Connection: band-licence-assertion, x-request-id, via, forwarded\n"
               "Connection: x-forwarded-for, x-forwarded-proto, host, content-length\n")),
    Spoof("connection-names-them-in-odd-case-and-spacing",
          read("Connection: ,Band-Licence-Assertion ,  X-FORWARDED-FOR,,Via\t,keep-alive\n")),
    # Connection naming fields the client sends too: the named ones go, the gateway's stay.
    Spoof("connection-names-client-fields", read("Connection: accept, x-custom\nAccept: application/json\n"
                                                 "X-Custom: 1\n"),
          check=lambda claims, got: got.header("Accept") is None),
    # h2c smuggling over HTTP/1.1 (assetnote/h2csmuggler): no 101, no tunnel, no Upgrade upstream.
    Spoof("h2c-upgrade", read("Connection: keep-alive, Upgrade, HTTP2-Settings\nUpgrade: h2c\n"
                              "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\n")),
    Spoof("websocket-upgrade", read("Connection: Upgrade\nUpgrade: websocket\nSec-WebSocket-Version: 13\n"
                                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\n")),
    # Hop-by-hop fields of every kind (RFC 9110 §7.6.1): TE, Keep-Alive, Proxy-Connection, Expect.
    Spoof("hop-by-hop-fields", read("TE: trailers, deflate\nKeep-Alive: timeout=5, max=1000\n"
                                    "Proxy-Connection: keep-alive\nConnection: TE, Keep-Alive\n")),
    # Credentials: never to the core; a Bearer wins over a cookie (docs/gateway.md), and the cookie
    # of another account's web session changes nothing.
    Spoof("bearer-and-another-accounts-cookie", read("Cookie: __Host-bl_session={W}; other=1\nCookie: third=3\n"),
          check=lambda claims, got: claims["chn"] == "native" and claims["role"] == "teacher"),
    Spoof("cookie-web-session-alone", read("Cookie: __Host-bl_session={W}\n", auth=""),
          check=lambda claims, got: claims["chn"] == "web" and claims["role"] == "read_only"),
    # RFC 9110 §5.3 / RFC 6750 §3.1: Authorization is a singleton; two credentials are one request
    # too many, refused as a malformed credential (the client API's 401 invalid_request), never one
    # of them picked.
    Spoof("two-authorization-fields", read("Authorization: Bearer {R}\n"), status=401),
    # Transfer-Encoding tricks: a chunked body arrives with its true Content-Length, trailers never.
    Spoof("chunked-body-with-forged-trailers", *write("Trailer: Band-Licence-Assertion, X-Forwarded-For\n",
                                                      CHUNKED_WITH_TRAILER, framing="Transfer-Encoding: chunked"),
          target="{P}/attendance", check=lambda claims, got: got.body == b"{}" and got.header("Content-Length") == "2"),
    Spoof("te-and-content-length", *write("", b"2\r\n{}\r\n0\r\n\r\n",
                                          framing="Content-Length: 12\nTransfer-Encoding: chunked"), status=400),
    Spoof("te-chunked-twice", *write("", b"2\r\n{}\r\n0\r\n\r\n",
                                     framing="Transfer-Encoding: chunked\nTransfer-Encoding: chunked"), status=400),
    Spoof("te-not-chunked-last", *write("", b"{}", framing="Transfer-Encoding: chunked, identity"), status=400),
    Spoof("te-unknown-coding", *write("", b"2\r\n{}\r\n0\r\n\r\n", framing="Transfer-Encoding: gzip, chunked"),
          status=501),
    Spoof("te-obs-fold", *write("", b"2\r\n{}\r\n0\r\n\r\n", framing="Transfer-Encoding: identity,\n chunked"),
          status=400),
    Spoof("te-space-before-colon", *write("", b"2\r\n{}\r\n0\r\n\r\n", framing="Transfer-Encoding : chunked"),
          status=400),
    Spoof("content-length-twice", *write("", b"{}", framing="Content-Length: 2\nContent-Length: 3"), status=400),
    Spoof("content-length-plus-sign", *write("", b"{}", framing="Content-Length: +2"), status=400),
    Spoof("idempotency-key-only-in-trailer", (
        "POST {P}/attendance HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {T}\nContent-Type: application/json\n"
        "Transfer-Encoding: chunked"), b"2\r\n{}\r\n0\r\nIdempotency-Key: \"k-t\"\r\n\r\n", status=400),
    Spoof("idempotency-key-twice", *write('Idempotency-Key: "k-other"\n'), status=400),
    # What the gateway judged must be what it forwards: a key or media type the client names in
    # Connection is removed as hop-by-hop, after the checks that needed it.
    Spoof("connection-names-idempotency-key", *write("Connection: idempotency-key\n"), status=400),
    Spoof("connection-names-content-type", *write("Connection: content-type\n"), status=400),
    # The target: the core gets origin-form, whatever form the client used (RFC 9112 §3.2.2: with an
    # absolute-form target a server ignores Host and takes the target's authority).
    Spoof("absolute-form-target", read(target=f"http://evil.example.test{{P}}/students"),
          check=lambda claims, got: got.target.startswith("/") and "evil" not in got.raw.decode("latin-1")),
    Spoof("host-spoofed", "GET {P}/students HTTP/1.1\nHost: evil.example.test\nAuthorization: Bearer {T}"),
    # Dot segments: band-edge routes `files/*` on the raw path with school = northfield, and the core
    # (or any framework that removes dot segments, RFC 3986 §5.2.4) reads another school's path.
    Spoof("dot-segments-leave-the-school", read(target="{P}/files/../../sch_other/students"), status=400),
    Spoof("encoded-dot-segments-leave-the-school", read(target="{P}/files/%2e%2e/%2E%2E/sch_other/students"),
          status=400),
    Spoof("encoded-slash", read(target="{P}/files/a%2F..%2f..%2Fsch_other"), status=400),
    Spoof("empty-segment", read(target="{P}/files//students"), status=400),
    Spoof("dot-segments-into-the-school", read(target=f"{PREFIX}/sch_other/../{{S}}/students"), status=404),
    Spoof("control-in-target", read(target="{P}/files/a%0d%0aX-Forwarded-For:%20203.0.113.9"),
          target="{P}/files/a%0d%0aX-Forwarded-For:%20203.0.113.9"),
    Spoof("http-1.0", "GET {P}/students HTTP/1.0\nHost: 127.0.0.1\nAuthorization: Bearer {T}\n"
          "Connection: keep-alive, band-licence-assertion"),
]


@pytest.mark.http1_only("raw HTTP/1.1 requests; the HTTP/2 cases are below")
@pytest.mark.parametrize("case", [
    pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else [])
    for c in SPOOFS])
def test_spoofing_corpus(site, case):
    values = {"P": site.prefix, "T": site.teacher, "R": site.reader, "W": site.web, "S": site.school}
    head = case.head
    for key, value in values.items():
        head = head.replace("{" + key + "}", value)
    body = case.body.replace(b'"k-{n}"', f'"k-{case.id}"'.encode())
    head = head.replace('"k-{n}"', f'"k-{case.id}"')
    before = len(site.core.requests)
    answer = raw_exchange(site.server, head, body)
    allowed = case.status if isinstance(case.status, tuple) else (case.status,)
    assert answer.status in allowed, (answer.status, answer.body)
    assert answer.header("cache-control") == "no-store"
    if answer.status >= 300:
        assert set(json.loads(answer.body)) >= {"error", "message"}, answer.body
        time.sleep(0.05)  # not a timing assertion: the core must have nothing, now or later
        assert site.core.requests[before:] == [], "a refused request reached the core"
        return
    got = arrived(site.core, before)
    assert len(got) == 1, [g.raw[:200] for g in got]
    target = case.target.replace("{P}", site.prefix)
    scope = "write" if got[0].method == "POST" else "read"
    claims = assert_forwarded_cleanly(site, got[0], answer, scope, target)
    if case.check:
        assert case.check(claims, got[0]) is not False, got[0].fields


# HTTP/2 to HTTP/1.1: requests an HTTP/1.1 head cannot carry as they are. Each is refused (a stream
# reset or a 4xx) and never reaches the core.

class RawH2:
    """One prior-knowledge h2c connection that sends header blocks exactly as given."""

    def __init__(self, address):
        self.sock = socket.create_connection(address, timeout=5)
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(
            client_side=True, header_encoding=None, validate_outbound_headers=False,
            normalize_outbound_headers=False, validate_inbound_headers=False, normalize_inbound_headers=False))
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())

    def send(self, block: list[tuple[bytes, bytes]], data: bytes | None = None) -> tuple[str, object]:
        """Sends one stream; ("status", (code, headers, body)), ("reset", code) or ("goaway", code)."""
        stream = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream, block, end_stream=data is None)
        if data is not None:
            self.conn.send_data(stream, data, end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        headers, body = None, b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return "goaway", "reset"
            if not chunk:
                return "goaway", "closed"
            for event in self.conn.receive_data(chunk):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream:
                    headers = dict(event.headers)
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream:
                    body += event.data
                    self.conn.acknowledge_received_data(event.flow_controlled_length, stream)
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                    return "status", (int(headers[b":status"]), headers, body)
                elif isinstance(event, h2.events.StreamReset) and event.stream_id == stream:
                    return "reset", event.error_code
                elif isinstance(event, h2.events.ConnectionTerminated):
                    return "goaway", event.error_code
            out = self.conn.data_to_send()
            if out:
                self.sock.sendall(out)

    def close(self):
        self.sock.close()


def h2_block(site, path="{P}/students", method="GET", extra=(), authority=b"127.0.0.1", token=None):
    block = [(b":method", method.encode()), (b":scheme", b"http"), (b":authority", authority),
             (b":path", path.replace("{P}", site.prefix).encode()),
             (b"authorization", f"Bearer {token or site.teacher}".encode())]
    return block + [(k if isinstance(k, bytes) else k.encode(), v if isinstance(v, bytes) else v.encode())
                    for k, v in extra]


def h2_send(site, block, data=None):
    connection = RawH2(site.server.address)
    try:
        return connection.send(block, data)
    finally:
        connection.close()


POST_FIELDS = [("content-type", "application/json"), ("idempotency-key", '"k-h2"')]

DOWNGRADES = [
    ("cr-lf-in-value", {"extra": [("x-custom", b"a\r\nband-licence-assertion: forged")]}),
    ("lf-in-value", {"extra": [("accept", b"text/plain\nx-forwarded-for: 203.0.113.9")]}),
    ("nul-in-value", {"extra": [("accept", b"application/json\x00x")]}),
    ("cr-lf-in-allowed-value", {"extra": [("user-agent", b"app\r\n\r\nGET /admin HTTP/1.1")]}),
    ("upper-case-name", {"extra": [("Band-Licence-Assertion", FORGED)]}),
    ("upper-case-allowed-name", {"extra": [("Accept", "application/json")]}),
    ("space-in-name", {"extra": [("x forwarded for", "203.0.113.9")]}),
    ("colon-in-name", {"extra": [("band-licence-assertion:x", "y")]}),
    ("empty-name", {"extra": [("", "x")]}),
    ("authority-differs-from-host", {"extra": [("host", "evil.example.test")]}),
    ("connection", {"extra": [("connection", "keep-alive")]}),
    ("connection-naming-assertion", {"extra": [("connection", "band-licence-assertion")]}),
    ("transfer-encoding", {"extra": [("transfer-encoding", "chunked")]}),
    ("keep-alive", {"extra": [("keep-alive", "timeout=5")]}),
    ("proxy-connection", {"extra": [("proxy-connection", "keep-alive")]}),
    ("upgrade", {"extra": [("upgrade", "h2c")]}),
    ("te-not-trailers", {"extra": [("te", "gzip")]}),
    ("space-in-method", {"method": "GET /admin? HTTP/1.1\r\nX:", "path": "{P}/students"}),
    ("space-in-path", {"path": "{P}/students HTTP/1.1\r\nX-Forwarded-For: 203.0.113.9\r\nX: y"}),
    ("content-length-above-data", {"method": "POST", "path": "{P}/attendance",
                                   "extra": [*POST_FIELDS, ("content-length", "10")], "data": b"{}"}),
    ("content-length-below-data", {"method": "POST", "path": "{P}/attendance",
                                   "extra": [*POST_FIELDS, ("content-length", "1")], "data": b"{}"}),
    ("content-length-twice-disagreeing", {"method": "POST", "path": "{P}/attendance",
                                          "extra": [*POST_FIELDS, ("content-length", "2"), ("content-length", "3")],
                                          "data": b"{}"}),
]


# Cases band-edge gets wrong, with what it does instead (none now).
DOWNGRADE_DEFECTS: dict[str, str] = {}


@pytest.mark.parametrize("case", [
    pytest.param(c, id=i, marks=[pytest.mark.xfail(strict=True, reason=DOWNGRADE_DEFECTS[i])]
                 if i in DOWNGRADE_DEFECTS else []) for i, c in DOWNGRADES])
def test_an_h2_request_that_h1_cannot_carry_is_refused_never_forwarded(site, case):
    before = len(site.core.requests)
    block = h2_block(site, path=case.get("path", "{P}/students"), method=case.get("method", "GET"),
                     extra=case.get("extra", ()))
    kind, detail = h2_send(site, block, case.get("data"))
    refused = kind in ("reset", "goaway") or (kind == "status" and 400 <= detail[0] < 500)
    assert refused, (kind, detail)
    time.sleep(0.05)  # not a timing assertion: the core must have nothing, now or later
    assert site.core.requests[before:] == [], [r.raw[:300] for r in site.core.requests[before:]]
    # The server is still up and the connection-level state is sound: a clean request passes.
    kind, detail = h2_send(site, h2_block(site))
    assert kind == "status" and detail[0] == 200, (kind, detail)


H2_SPOOFS = [
    ("client-assertion", [("band-licence-assertion", FORGED)]),
    ("client-assertion-twice", [("band-licence-assertion", FORGED), ("band-licence-assertion", "x.y.z")]),
    ("underscores", [("band_licence_assertion", FORGED), ("x_forwarded_for", "203.0.113.9"),
                     ("x_request_id", "mine")]),
    ("forwarding-fields", [("x-forwarded-for", "203.0.113.9"), ("forwarded", "for=203.0.113.9"),
                           ("x-real-ip", "203.0.113.9"), ("via", "2 evil"), ("x-request-id", "req_AAAAAAAAAAAAAAAA"),
                           ("x-forwarded-host", "evil.example.test"), ("x-envoy-original-path", "/admin")]),
    ("te-trailers", [("te", "trailers")]),
    ("split-cookies", [("cookie", "__Host-bl_session=x"), ("cookie", "other=1")]),
    ("host-equal-to-authority", [("host", "127.0.0.1")]),
]


@pytest.mark.parametrize("extra", [e for _, e in H2_SPOOFS], ids=[i for i, _ in H2_SPOOFS])
def test_h2_spoofed_fields_never_reach_the_core(site, extra):
    before = len(site.core.requests)
    kind, detail = h2_send(site, h2_block(site, extra=extra))
    assert kind == "status" and detail[0] == 200, (kind, detail)
    status, headers, body = detail

    class Answer:
        @staticmethod
        def header(name):
            value = headers.get(name.encode())
            return value.decode() if value is not None else None

    got = arrived(site.core, before)
    assert len(got) == 1
    claims = assert_forwarded_cleanly(site, got[0], Answer, "read", f"{site.prefix}/students")
    assert claims["role"] == "teacher" and got[0].header("Band-Licence-Assertion") != FORGED


def test_an_h2_post_becomes_exactly_one_h1_request_with_its_true_length(site):
    before = len(site.core.requests)
    body = b'{"student":"stu_1","present":true}'
    kind, detail = h2_send(site, h2_block(site, method="POST", path="{P}/attendance", extra=[
        ("content-type", "application/json"), ("idempotency-key", '"k-h2-one"')]), body)
    assert kind == "status" and detail[0] == 200, (kind, detail)
    got = arrived(site.core, before)
    assert len(got) == 1 and got[0].body == body and got[0].all("Content-Length") == [str(len(body))]
    assert got[0].version == "HTTP/1.1" and not got[0].all("Transfer-Encoding")
    assert verify(site.server, got[0].header("Band-Licence-Assertion"))["scp"] == "write"
