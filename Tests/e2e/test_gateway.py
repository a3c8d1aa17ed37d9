"""The gateway through the real binary: school-scoped calls forwarded to a recording API core
(upstream.py) over TCP and a Unix socket — what the core receives, what the client gets back, every
refusal before anything goes upstream, and the faults of a core that misbehaves. The assertion is
verified with PyJWT against the JWKS band-edge publishes, as an API core in Python would."""

import base64
import hashlib
import json
import subprocess
import time
from pathlib import Path

import jwt
import pytest
from edge import Server, binary, engine, exchange, fetch
from test_session_api import add_session
from upstream import RecordingUpstream

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "/api/client/v1/schools"
ORIGIN = "http://127.0.0.1:8080"


def development_config(tmp_path, core_url, **core):
    data = json.loads((ROOT / "config" / "development.json").read_text())
    data["upstreams"] = {"core": {"url": core_url, **core}}
    path = tmp_path / "development.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def core():
    c = RecordingUpstream()
    yield c
    c.stop()


def start(tmp_path, core, **settings):
    """A development server forwarding to `core`. On SQLite its key-encryption key is made beside the
    store; PostgreSQL has no data directory, so it is named (and made there, in development)."""
    kek = ["--key-encryption-key", str(tmp_path / "kek")] if engine() == "postgres" else []
    return Server("--config", str(development_config(tmp_path, core.url, **settings)), *kek,
                  env={"BAND_LICENCE_ENV": "development"})


def school(server, slug):
    return server.store.query("SELECT id FROM schools WHERE slug = ?", (slug,))[0][0]


def call(server, path, headers=None, method="GET", body=None):
    body = body or b""
    fields = [("Host", "127.0.0.1"), *(headers or {}).items()]
    if body and method != "GET":
        fields.append(("Content-Length", str(len(body))))
    return exchange(server, method, path, fields, body)


def bearer(token, **extra):
    return {"Authorization": f"Bearer {token}", **extra}


def jwks(server):
    response = fetch(server, "/.well-known/band-licence/jwks.json")
    assert response.status == 200
    assert response.header("cache-control") == "public, max-age=300"
    return json.loads(response.body)


def verify(server, token, audience="core"):
    """What an API core does: the kid from the JWKS, EdDSA only, iss and aud checked."""
    header = jwt.get_unverified_header(token)
    assert header == {"alg": "EdDSA", "kid": header["kid"], "typ": "band-assertion+jwt"}
    keys = {k["kid"]: k for k in jwks(server)["keys"]}
    key = jwt.PyJWK(keys[header["kid"]])
    return jwt.decode(token, key.key, algorithms=["EdDSA"], audience=audience, issuer=ORIGIN,
                      options={"require": ["iat", "exp", "sub", "sid", "school", "role", "scp"]})


def test_a_read_reaches_the_core_with_exactly_its_fields_and_a_verifiable_assertion(tmp_path, core):
    server = start(tmp_path, core)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        sid = school(server, "northfield")
        spoofs = {"Band-Licence-Assertion": "forged", "X-Forwarded-For": "203.0.113.9", "Forwarded": "for=1.2.3.4",
                  "Connection": "band-licence-assertion, x-request-id", "X-Request-Id": "mine",
                  "Cookie": "band_session=x", "Accept": "application/json", "X-Custom": "dropped"}
        answer = call(server, f"{PREFIX}/{sid}/students?page=2", bearer(token, **spoofs))
        assert answer.status == 200, answer.body
        assert json.loads(answer.body)["target"] == f"{PREFIX}/{sid}/students?page=2"
        assert answer.header("cache-control") == "no-store"
        got = core.wait_for(1)[0]
        names = {n.lower() for n, _ in got.fields}
        assert not names & {"authorization", "cookie", "x-custom", "connection", "keep-alive", "upgrade"}
        assert len(got.all("Band-Licence-Assertion")) == 1 and got.header("Band-Licence-Assertion") != "forged"
        assert got.header("X-Request-Id") == answer.header("x-request-id") != "mine"
        assert "203.0.113.9" not in (got.header("X-Forwarded-For") or "")
        assert got.header("Accept") == "application/json"
        claims = verify(server, got.header("Band-Licence-Assertion"))
        assert claims["scp"] == "read" and claims["school"] == sid and claims["role"] == "teacher"
        assert claims["chn"] == "native" and claims["exp"] - claims["iat"] <= 60
        assert claims["sid"].startswith("ses_") and token not in json.dumps(claims)
    finally:
        server.stop()


def test_a_write_is_bound_to_its_one_request(tmp_path, core):
    server = start(tmp_path, core)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        sid = school(server, "northfield")
        body = b'{"student":"stu_1","present":true}'
        answer = call(server, f"{PREFIX}/{sid}/attendance", bearer(
            token, **{"Idempotency-Key": '"k-0001"', "Content-Type": "application/json"}), method="POST", body=body)
        assert answer.status == 200, answer.body
        got = core.wait_for(1)[0]
        assert got.body == body and got.header("Content-Length") == str(len(body))
        claims = verify(server, got.header("Band-Licence-Assertion"))
        digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
        assert claims["scp"] == "write" and claims["htm"] == "POST" and claims["bh"] == digest
        assert claims["htp"] == f"{PREFIX}/{sid}/attendance" and claims["idk"] == '"k-0001"'
        assert got.header("Idempotency-Key") == '"k-0001"'
    finally:
        server.stop()


def test_refusals_before_anything_goes_upstream(tmp_path, core):
    server = start(tmp_path, core)
    try:
        teacher = add_session(server, "ada@example.test", [("northfield", "teacher")])
        reader = add_session(server, "bo@example.test", [("northfield", "read_only")])
        other = add_session(server, "cy@example.test", [("southgate", "administrator")])
        sid = school(server, "northfield")
        json_post = {"Content-Type": "application/json", "Idempotency-Key": '"k-1"'}
        cases = [
            ("GET", {}, None, 401),
            ("GET", bearer(other), None, 404),
            ("POST", bearer(reader, **json_post), b"{}", 403),
            ("POST", bearer(teacher, **{"Content-Type": "application/json"}), b"{}", 400),
            ("POST", bearer(teacher, **{"Content-Type": "application/json", "Idempotency-Key": "k" * 256}),
             b"{}", 400),
            ("POST", bearer(teacher, **{"Content-Type": "text/plain", "Idempotency-Key": '"k-2"'}), b"x", 415),
            ("DELETE", bearer(teacher), None, 405),
        ]
        for method, headers, body, status in cases:
            answer = call(server, f"{PREFIX}/{sid}/attendance", headers, method=method, body=body)
            assert answer.status == status, (method, headers, answer.body)
            assert answer.header("cache-control") == "no-store"
            assert {"error", "message"} <= set(json.loads(answer.body)) <= {"error", "message", "minimumRole"}
        assert core.requests == []
    finally:
        server.stop()


@pytest.mark.parametrize("behaviour,status,error", [
    ("bad-framing", 502, "http_protocol_error"),
    ("huge-head", 502, "http_response_header_section_size"),
    ("reset-mid-body", 502, None),
])
def test_a_misbehaving_core_is_a_502_with_proxy_status(tmp_path, core, behaviour, status, error):
    core.behaviour = behaviour
    server = start(tmp_path, core)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answer = call(server, f"{PREFIX}/{school(server, 'northfield')}/students", bearer(token))
        assert answer.status == status, answer.body
        assert answer.header("cache-control") == "no-store"
        proxy_status = answer.header("proxy-status") or ""
        if error:
            assert f"error={error}" in proxy_status
        assert json.loads(answer.body)["error"]
    finally:
        server.stop()


def test_a_stalled_core_is_a_504_at_the_configured_first_byte_timeout(tmp_path, core):
    core.behaviour = "stall"
    server = start(tmp_path, core, firstByteTimeout=0.3)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answer = call(server, f"{PREFIX}/{school(server, 'northfield')}/students", bearer(token))
        assert answer.status == 504
        assert "error=connection_read_timeout" in answer.header("proxy-status")
    finally:
        server.stop()


def test_no_core_listening_is_a_502_and_a_switched_off_core_a_503(tmp_path):
    gone = RecordingUpstream()
    gone.stop()
    server = start(tmp_path, gone)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answer = call(server, f"{PREFIX}/{school(server, 'northfield')}/students", bearer(token))
        assert answer.status == 502 and "error=connection_refused" in answer.header("proxy-status")
    finally:
        server.stop()
    server = start(tmp_path, gone, enabled=False)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answer = call(server, f"{PREFIX}/{school(server, 'northfield')}/students", bearer(token))
        assert answer.status == 503 and answer.header("retry-after")
    finally:
        server.stop()


def test_the_core_answer_loses_what_the_client_must_not_see(tmp_path, core):
    core.behaviour = "set-cookie"
    server = start(tmp_path, core)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answer = call(server, f"{PREFIX}/{school(server, 'northfield')}/students", bearer(token))
        assert answer.status == 200
        for name in ("set-cookie", "x-powered-by", "x-core-hop"):
            assert answer.header(name) is None, name
        assert answer.header("server") != "core/1.0"
        assert answer.header("cache-control") == "no-store" and answer.header("etag") == '"v1"'
    finally:
        server.stop()


def test_a_core_that_drops_idle_connections_costs_no_request_and_no_duplicate(tmp_path, core):
    core.behaviour = "close-after"
    server = start(tmp_path, core)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        sid = school(server, "northfield")
        for n in range(5):
            answer = call(server, f"{PREFIX}/{sid}/students?n={n}", bearer(token))
            assert answer.status == 200, answer.body
        assert [r.target for r in core.requests] == [f"{PREFIX}/{sid}/students?n={n}" for n in range(5)]
    finally:
        server.stop()


def test_a_unix_socket_core(tmp_path):
    core = RecordingUpstream(unix=True)
    server = start(tmp_path, core)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answer = call(server, f"{PREFIX}/{school(server, 'northfield')}/students", bearer(token))
        assert answer.status == 200, answer.body
        assert len(core.requests) == 1
    finally:
        server.stop()
        core.stop()


def certificate(directory, name):
    """A self-signed certificate for core.example.test and 127.0.0.1: (certificate, key) paths."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=core.example.test",
                    "-addext", "subjectAltName=DNS:core.example.test,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return str(cert), str(key)


@pytest.mark.parametrize("trust,server_name,status", [
    ("own", None, 200),                    # verified as 127.0.0.1 (an IP SAN)
    ("own", "core.example.test", 200),     # verified by name, sent as SNI
    ("own", "other.example.test", 502),    # a name the certificate does not hold
    ("other", None, 502),                  # signed by an authority not trusted
])
def test_an_https_core_is_verified(tmp_path, trust, server_name, status):
    pair = certificate(tmp_path, "core")
    other = certificate(tmp_path, "other")
    core = RecordingUpstream(tls=pair)
    settings = {"caFile": pair[0] if trust == "own" else other[0]}
    if server_name:
        settings["serverName"] = server_name
    server = start(tmp_path, core, **settings)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        answer = call(server, f"{PREFIX}/{school(server, 'northfield')}/students", bearer(token))
        assert answer.status == status, answer.body
        if status == 502:
            assert "error=tls_protocol_error" in answer.header("proxy-status")
            assert core.requests == []
        else:
            assert len(core.requests) == 1
    finally:
        server.stop()
        core.stop()


def series(exposition, name, **labels):
    """The value of the series `name{labels}` (labels in any order), 0 when absent."""
    for line in exposition.splitlines():
        if not line.startswith(name + "{"):
            continue
        body, value = line.rsplit(" ", 1)
        found = dict(part.split("=", 1) for part in body[len(name) + 1:-1].split(","))
        if all(found.get(k) == f'"{v}"' for k, v in labels.items()):
            return float(value)
    return 0.0


def test_forwarded_exchanges_are_counted_and_logged(tmp_path, core):
    server = start(tmp_path, core)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        sid = school(server, "northfield")
        for _ in range(3):
            assert call(server, f"{PREFIX}/{sid}/students", bearer(token)).status == 200
        assert call(server, f"{PREFIX}/{sid}/students").status == 401
        core.behaviour = "bad-framing"
        assert call(server, f"{PREFIX}/{sid}/students", bearer(token)).status == 502
        exposition = server.metrics()
        assert series(exposition, "band_edge_upstream_requests_total", upstream="core", outcome="2xx") == 3
        assert series(exposition, "band_edge_upstream_requests_total", upstream="core", outcome="fault") == 1
        assert series(exposition, "band_edge_upstream_errors_total", upstream="core", error="http_protocol_error") == 1
        assert series(exposition, "band_edge_gateway_refusals_total", status="401") == 1
        opened = series(exposition, "band_edge_upstream_connections_total", upstream="core", event="opened")
        reused = series(exposition, "band_edge_upstream_connections_total", upstream="core", event="reused")
        assert opened + reused == 4 and reused >= 2, (opened, reused)
        assert series(exposition, "band_edge_upstream_duration_seconds_count", upstream="core", phase="total") == 4
        lines = [line for line in server.access_log(minimum=5) if line.get("path", "").endswith("/students")]
        # Each loop writes its own lines: their order across loops is not the requests'.
        forwarded = [line for line in lines if "upstream" in line]
        assert sorted(line.get("upstream_status", 0) for line in forwarded) == [0, 200, 200, 200]
        failed = [line for line in forwarded if "upstream_status" not in line]
        assert failed[0]["upstream_error"] == "http_protocol_error" and failed[0]["status"] == 502
        assert all(line["upstream"] == "core" and line["upstream_us"] >= 0 for line in forwarded)
        assert len(lines) - len(forwarded) == 1, "the refusal never went upstream"
    finally:
        server.stop()


def test_a_rotation_is_published_without_a_reload(tmp_path, core):
    """`admin keys rotate` in another process: the serving instance reads its keys again every
    `gateway-keys-refresh` and publishes the new key, which does not sign yet; the old one still does."""
    server = Server("--config", str(development_config(tmp_path, core.url)), "--gateway-keys-refresh", "0.1",
                    *(["--key-encryption-key", str(tmp_path / "kek")] if engine() == "postgres" else []),
                    env={"BAND_LICENCE_ENV": "development"})
    try:
        before = [k["kid"] for k in jwks(server)["keys"]]
        assert len(before) == 1
        kek = ["--key-encryption-key", str(tmp_path / "kek")] if engine() == "postgres" else []
        rotated = subprocess.run([str(binary()), "admin", *server.store.args, "keys", "rotate", *kek],
                                 capture_output=True, text=True, timeout=30, env={"BAND_LICENCE_ENV": "development"})
        assert rotated.returncode == 0, rotated.stderr
        deadline = time.monotonic() + 10
        while len(jwks(server)["keys"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(jwks(server)["keys"]) == 2, "published within a refresh, no SIGHUP"
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        assert call(server, f"{PREFIX}/{school(server, 'northfield')}/students", bearer(token)).status == 200
        assert jwt.get_unverified_header(core.wait_for(1)[0].header("Band-Licence-Assertion"))["kid"] == before[0]
    finally:
        server.stop()


def test_an_accepted_write_is_audited_with_no_request_after_it(tmp_path, core):
    """The core accepted the write (2xx): its audit event reaches the store within the writer's second,
    though nothing else is asked; a refused write (4xx from the core) is not audited."""
    server = start(tmp_path, core)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        sid = school(server, "northfield")
        headers = bearer(token, **{"Idempotency-Key": '"k-refused"', "Content-Type": "application/json"})
        core.behaviour = "status:422"
        assert call(server, f"{PREFIX}/{sid}/attendance", headers, method="POST", body=b"{}").status == 422
        core.behaviour = "json"
        headers["Idempotency-Key"] = '"k-audit"'
        assert call(server, f"{PREFIX}/{sid}/attendance", headers, method="POST", body=b"{}").status == 200
        query = "SELECT detail FROM audit_events WHERE action = 'attendance.recorded'"
        deadline = time.monotonic() + 10
        while not server.store.query(query) and time.monotonic() < deadline:
            time.sleep(0.05)
        details = [row[0] for row in server.store.query(query)]
        assert len(details) == 1 and 'k-audit' in details[0] and "{}" not in details[0], details
    finally:
        server.stop()


def docs_verifier():
    """The Python verifier docs/gateway.md gives API core developers, as written there."""
    text = (ROOT / "docs" / "gateway.md").read_text()
    code = text.split("### A verifier in Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "docs/gateway.md", "exec"), namespace)
    return namespace


def test_the_documented_python_verifier_accepts_what_band_edge_sends_and_refuses_the_rest(tmp_path, core):
    server = start(tmp_path, core)
    try:
        doc = docs_verifier()
        verify_assertion, Refused = doc["verify_assertion"], doc["Refused"]
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        sid = school(server, "northfield")
        keys = {k["kid"]: k for k in jwks(server)["keys"]}
        body = b'{"student":"stu_1"}'
        headers = bearer(token, **{"Idempotency-Key": '"k-doc"', "Content-Type": "application/json"})
        assert call(server, f"{PREFIX}/{sid}/students", bearer(token)).status == 200
        assert call(server, f"{PREFIX}/{sid}/attendance", headers, method="POST", body=body).status == 200
        read, write = core.wait_for(2)[:2]
        teacher_may = lambda role, method: method in ("GET", "HEAD") or role in ("teacher", "administrator")
        common = dict(keys=keys, issuer=ORIGIN, audience="core", role_allows=teacher_may)
        seen = {}
        ok = verify_assertion(read.all("Band-Licence-Assertion"), "GET", read.target, b"", sid, seen=seen, **common)
        assert ok["scp"] == "read"
        args = (write.all("Band-Licence-Assertion"), "POST", write.target, write.body, sid)
        assert verify_assertion(*args, seen=seen, **common)["htm"] == "POST"
        refusals = [
            ((write.all("Band-Licence-Assertion"), "POST", write.target, write.body, sid), "replay"),
            ((write.all("Band-Licence-Assertion"), "POST", write.target, b"{}", sid), "binding"),
            ((read.all("Band-Licence-Assertion"), "POST", read.target, b"", sid), "scope"),
            ((read.all("Band-Licence-Assertion"), "GET", read.target, b"", "sch_other"), "school"),
            ((read.all("Band-Licence-Assertion") * 2, "GET", read.target, b"", sid), "header"),
        ]
        for arguments, reason in refusals:
            with pytest.raises(Refused, match=reason):
                verify_assertion(*arguments, seen=seen if reason == "replay" else {}, **common)
        with pytest.raises(Refused, match="InvalidAudience"):
            verify_assertion(read.all("Band-Licence-Assertion"), "GET", read.target, b"", sid, seen={},
                             **{**common, "audience": "another-core"})
    finally:
        server.stop()


def test_a_process_ending_while_its_keys_are_read_exits_cleanly(tmp_path, core):
    """SIGTERM while the key refresh (every 10 ms: in libpq and OpenSSL most of the time) runs: the
    background threads stop and are waited for before exit's clean-up handlers run, so every stop
    exits 0 (a thread left in OpenSSL under them crashed about one stop in fifteen)."""
    kek = ["--key-encryption-key", str(tmp_path / "kek")] if engine() == "postgres" else []
    for _ in range(10):
        server = Server("--config", str(development_config(tmp_path, core.url)), "--gateway-keys-refresh", "0.01",
                        *kek, env={"BAND_LICENCE_ENV": "development"})
        assert jwks(server)["keys"]
        server.stop()


def test_reads_checked_on_the_loop_follow_every_change_on_the_next_request(tmp_path, core):
    """A caller read once is checked on the loop after that (its session, account and live
    memberships cached, as `GET /session`'s answer is), and any change in the store ends that at
    once: a lowered role is signed with the new role, a removed membership is 404, a revoked session
    401 — each on the very next request, by another process's SQL too (on PostgreSQL once
    `admin sync` has returned, as operators are told to run after changing access by SQL)."""
    server = start(tmp_path, core)
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher"), ("riverside", "teacher")])
        north, river = school(server, "northfield"), school(server, "riverside")
        students = f"{PREFIX}/{north}/students"
        before = series(server.metrics(), "band_edge_session_cache_lookups_total", result="hit")
        for _ in range(4):
            assert call(server, students, bearer(token)).status == 200
        hits = series(server.metrics(), "band_edge_session_cache_lookups_total", result="hit") - before
        assert hits >= 3, "after the first read the loop answers from its cache"
        assert verify(server, core.requests[-1].header("Band-Licence-Assertion"))["role"] == "teacher"

        server.store.query("UPDATE memberships SET role = 'read_only' WHERE school_id = ?", (north,))
        server.store.sync()
        assert call(server, students, bearer(token)).status == 200
        assert verify(server, core.requests[-1].header("Band-Licence-Assertion"))["role"] == "read_only"

        server.store.query("UPDATE memberships SET revoked_at = 1 WHERE school_id = ?", (north,))
        server.store.sync()
        seen = len(core.requests)
        for _ in range(2):
            assert call(server, students, bearer(token)).status == 404
        assert call(server, f"{PREFIX}/{river}/students", bearer(token)).status == 200
        assert call(server, f"{PREFIX}/{river}/students", bearer(token)).status == 200

        server.store.query("UPDATE sessions SET revoked_at = 1")
        server.store.sync()
        for _ in range(2):
            answer = call(server, f"{PREFIX}/{river}/students", bearer(token))
            assert answer.status == 401, answer.body
        assert len(core.requests) == seen + 2, "nothing refused reached the core"
    finally:
        server.stop()
