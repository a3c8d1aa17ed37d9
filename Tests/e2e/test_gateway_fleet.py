"""The gateway on two instances sharing one PostgreSQL schema (the fleet, docs/fleet.md), live: a
session revoked on one is 401 on the very next forwarded request on the other, a lowered role is 403
and a removed membership 404 on both, and nothing of those reaches the core; the signing key rotated
by `band-edge admin keys rotate`, published by both after SIGHUP, old and new assertions verified with
PyJWT against the JWKS, the new key signing once its time comes and the old one retired.

The activation delay is fixed (10 minutes, `KeyPolicy.activationDelay`, not configurable): the test
does not sleep through it; it moves the rotation's times back in the store (`gateway_keys`), as ten
minutes passing would, and reloads."""

import json

import jwt
import pytest
from edge import Server, exchange
from fleet import BASE, fresh_schema
from fleet import admin as cli
from test_gateway import ORIGIN, PREFIX, development_config
from test_reload import reload_and_wait
from test_session_api import add_session
from upstream import RecordingUpstream

pytestmark = pytest.mark.skipif(not BASE, reason="BAND_EDGE_TEST_POSTGRES is not set (build/test sets it)")


@pytest.fixture
def pair(tmp_path):
    """A recording core and two instances on one fresh, migrated schema, forwarding to it with one
    key-encryption key; (a, b, core, uri, kek)."""
    core = RecordingUpstream()
    kek = tmp_path / "kek"
    with fresh_schema() as uri:
        migrated = cli(uri, "migrate")
        assert migrated.returncode == 0, migrated.stderr
        config = development_config(tmp_path, core.url)
        started = []
        try:
            for _ in range(2):  # one after the other: the first makes the KEK file (development)
                started.append(Server("--database", uri, "--config", str(config), "--key-encryption-key", str(kek),
                                      env={"BAND_LICENCE_ENV": "development"}))
            yield started[0], started[1], core, uri, kek
        finally:
            for server in started:
                server.stop()
            core.stop()


def call(server, path, token, method="GET", key=None, body=b"{}"):
    fields = [("Host", "127.0.0.1"), ("Authorization", f"Bearer {token}")]
    if method == "GET":
        return exchange(server, method, path, fields)
    fields += [("Content-Type", "application/json"), ("Idempotency-Key", f'"{key}"'),
               ("Content-Length", str(len(body)))]
    return exchange(server, method, path, fields, body)


def school_id(server, slug="northfield"):
    return server.store.query("SELECT id FROM schools WHERE slug = ?", (slug,))[0][0]


def keys(server):
    answer = exchange(server, "GET", "/.well-known/band-licence/jwks.json", [("Host", "127.0.0.1")])
    assert answer.status == 200
    return {k["kid"]: k for k in json.loads(answer.body)["keys"]}


def verified(server, token):
    """The claims, verified as an API core does with the JWKS `server` publishes now (the kid's key
    only, EdDSA only, iss and aud); the lifetime is not what these tests are about."""
    header = jwt.get_unverified_header(token)
    published = keys(server)
    if header["kid"] not in published:
        raise jwt.InvalidKeyError(f"kid {header['kid']} is not in the JWKS")
    return jwt.decode(token, jwt.PyJWK(published[header["kid"]]).key, algorithms=["EdDSA"], audience="core",
                      issuer=ORIGIN, options={"verify_exp": False, "verify_iat": False})


@pytest.mark.parametrize("how", ["sign-out", "admin"])
def test_a_session_revoked_on_one_instance_is_401_on_the_next_forwarded_request_on_the_other(pair, how):
    a, b, core, uri, _ = pair
    token = add_session(a, "ada@example.test", [("northfield", "teacher")])
    path = f"{PREFIX}/{school_id(a)}/students"
    # Both instances have the session cached and a read assertion made for it.
    for server in (a, b, a, b):
        assert call(server, path, token).status == 200
    assert len(core.requests) == 4
    if how == "sign-out":
        signed_out = exchange(a, "DELETE", "/api/client/v1/session",
                              [("Host", "127.0.0.1"), ("Authorization", f"Bearer {token}")])
        assert signed_out.status == 204
    else:
        revoked = cli(uri, "sessions", "revoke", "--account", "ada@example.test")
        assert revoked.returncode == 0 and revoked.stdout == "revoked 1 session\n", revoked
    for server in (b, a):
        answer = call(server, path, token)
        assert answer.status == 401, answer.body
        assert answer.header("www-authenticate").startswith('Bearer realm="band-licence"')
        write = call(server, path.replace("students", "attendance"), token, "POST", key=f"k-{server.port}")
        assert write.status == 401
    assert len(core.requests) == 4, "nothing reaches the core once the session is revoked"


@pytest.mark.parametrize("how", ["admin", "sql"])
def test_a_lowered_role_is_403_on_the_next_forwarded_post_on_both_instances(pair, how):
    a, b, core, uri, _ = pair
    token = add_session(a, "ada@example.test", [("northfield", "teacher")])
    sid = school_id(a)
    for n, server in enumerate((a, b)):
        assert call(server, f"{PREFIX}/{sid}/attendance", token, "POST", key=f"k-{n}").status == 200
        assert call(server, f"{PREFIX}/{sid}/students", token).status == 200
    seen = len(core.requests)
    assert verified(a, core.requests[-1].header("Band-Licence-Assertion"))["role"] == "teacher"
    if how == "admin":
        lowered = cli(uri, "member", "add", "--email", "ada@example.test", "--school", "northfield",
                      "--role", "read_only")
        assert lowered.returncode == 0, lowered.stderr
    else:  # an operator's own SQL: the store's triggers announce it to every instance
        a.store.query("UPDATE memberships SET role = 'read_only' WHERE school_id = ?", (sid,))
    for n, server in enumerate((b, a)):
        answer = call(server, f"{PREFIX}/{sid}/attendance", token, "POST", key=f"k-after-{n}")
        assert answer.status == 403, answer.body
        assert json.loads(answer.body) == {"error": "forbidden", "minimumRole": "teacher",
                                           "message": json.loads(answer.body)["message"]}
    assert len(core.requests) == seen, "a refused write reaches the core"
    # A read is still allowed, with the live role: no assertion cached for the old role is reused.
    for server in (b, a):
        assert call(server, f"{PREFIX}/{sid}/students", token).status == 200
        claims = verified(server, core.requests[-1].header("Band-Licence-Assertion"))
        assert claims["role"] == "read_only" and claims["scp"] == "read"


def test_a_removed_membership_is_404_on_both_instances(pair):
    a, b, core, uri, _ = pair
    token = add_session(a, "ada@example.test", [("northfield", "teacher")])
    sid = school_id(a)
    for server in (a, b):
        assert call(server, f"{PREFIX}/{sid}/students", token).status == 200
    seen = len(core.requests)
    removed = cli(uri, "member", "revoke", "--email", "ada@example.test", "--school", "northfield")
    assert removed.returncode == 0, removed.stderr
    for n, server in enumerate((b, a)):
        for answer in (call(server, f"{PREFIX}/{sid}/students", token),
                       call(server, f"{PREFIX}/{sid}/attendance", token, "POST", key=f"k-{n}")):
            assert answer.status == 404, answer.body
            assert json.loads(answer.body)["error"] == "not_found"
    assert len(core.requests) == seen


def test_key_rotation_publishes_at_once_signs_after_the_delay_and_retires_the_old_key(pair):
    a, b, core, uri, kek = pair
    token = add_session(a, "ada@example.test", [("northfield", "teacher")])
    sid = school_id(a)
    students, attendance = f"{PREFIX}/{sid}/students", f"{PREFIX}/{sid}/attendance"
    assert call(a, attendance, token, "POST", key="k-before").status == 200
    before = core.requests[-1].header("Band-Licence-Assertion")
    old = jwt.get_unverified_header(before)["kid"]
    assert list(keys(a)) == list(keys(b)) == [old]

    rotated = cli(uri, "keys", "rotate", "--key-encryption-key", str(kek))
    assert rotated.returncode == 0, rotated.stderr
    # The new key is the one not there before (the command's "gateway key K made" line takes the ring's
    # last entry, ordered by creation second and then kid, so within the first key's second it may name
    # the old one).
    new, = [row[0] for row in a.store.query("SELECT kid FROM gateway_keys") if row[0] != old]
    assert new in rotated.stdout and "published keys: " in rotated.stdout
    (created, signs_from), = a.store.query("SELECT created_at, signs_from FROM gateway_keys WHERE kid = ?", (new,))
    assert signs_from - created == 600, "a new key signs 10 minutes after it is made"
    for server in (a, b):
        reload_and_wait(server, 1)
        assert set(keys(server)) == {old, new}, "the new key is published at once, beside the old"
        # Before its time the new key does not sign: reads and writes stay on the old one.
        assert call(server, students, token).status == 200
        assert call(server, attendance, token, "POST", key=f"k-wait-{server.port}").status == 200
        for request in core.requests[-2:]:
            assert jwt.get_unverified_header(request.header("Band-Licence-Assertion"))["kid"] == old
    assert verified(b, before)["htp"] == attendance

    # Ten minutes on: every time in the store moves back 600 s (and the old key, made in this test's
    # first second, is moved back further, as a key made long before): the new key signs.
    a.store.query("UPDATE gateway_keys SET created_at = created_at - 600, signs_from = signs_from - 600, "
                  "replaced_at = replaced_at - 600")
    a.store.query("UPDATE gateway_keys SET created_at = created_at - 600, signs_from = signs_from - 600 "
                  "WHERE kid = ?", (old,))
    for server in (a, b):
        reload_and_wait(server, 2)
        assert set(keys(server)) == {old, new}, "the old key stays published while its assertions live"
        assert call(server, students, token).status == 200
        assert call(server, attendance, token, "POST", key=f"k-new-{server.port}").status == 200
        for request in core.requests[-2:]:
            token_now = request.header("Band-Licence-Assertion")
            assert jwt.get_unverified_header(token_now)["kid"] == new, (request.method, "a read cached under the old key is reused")
            assert verified(server, token_now)["sub"] == verified(server, before)["sub"]

    # 65 s after the switch (the longest lifetime and the skew) the old key leaves the JWKS, and an
    # assertion it signed no longer verifies.
    a.store.query("UPDATE gateway_keys SET replaced_at = replaced_at - 66 WHERE kid = ?", (old,))
    for server in (a, b):
        reload_and_wait(server, 3)
        assert list(keys(server)) == [new]
        with pytest.raises(jwt.InvalidKeyError):
            verified(server, before)
    # The next rotation deletes the retired key from the store.
    again = cli(uri, "keys", "rotate", "--key-encryption-key", str(kek))
    assert again.returncode == 0, again.stderr
    assert old not in [row[0] for row in a.store.query("SELECT kid FROM gateway_keys")]


def test_the_gateway_limits_are_shared_among_the_instances(tmp_path):
    """The per-account limit on forwarded routes (burst 4 here) is split between two live instances
    by their heartbeat, as the per-address limits are: one instance lets 2 through, not 4."""
    from test_fleet_limits import wait_for_fleet
    core = RecordingUpstream()
    kek = tmp_path / "kek"
    with fresh_schema() as uri:
        assert cli(uri, "migrate").returncode == 0
        config = development_config(tmp_path, core.url)
        flags = ("--gateway-account-burst", "4", "--gateway-account-per-minute", "1", "--rate-limited-hold", "0")
        started = []
        try:
            for _ in range(2):
                started.append(Server("--database", uri, "--config", str(config), "--key-encryption-key", str(kek),
                                      *flags, env={"BAND_LICENCE_ENV": "development"}))
            a, _ = started
            wait_for_fleet(started, 2)
            token = add_session(a, "ada@example.test", [("northfield", "teacher")])
            path = f"{PREFIX}/{school_id(a)}/students"
            statuses = [call(a, path, token).status for _ in range(5)]
            assert statuses == [200, 200, 429, 429, 429], statuses
        finally:
            for server in started:
                server.stop()
            core.stop()
