"""Several band-edge instances on one PostgreSQL (the fleet, three instances, docs/fleet.md):
concurrent start, exact lockout, retries that land elsewhere, kill -9 under write load, PostgreSQL
restarted under load, and the rolling restart behind nginx."""

import json
import subprocess
import threading
import time
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

import fleet
from fleet import BASE, PASSWORD, Instance, Nginx, PrivatePostgres, Visitor, add_account, sql

pytestmark = pytest.mark.skipif(not BASE, reason="BAND_EDGE_TEST_POSTGRES is not set (build/test sets it)")

# No limit of the fleet's own may decide these tests: per-address limits off (every client here is 127.0.0.1).
UNLIMITED = ("--sign-in-burst", "100000", "--sign-in-per-minute", "100000", "--exchange-burst", "100000",
             "--exchange-per-minute", "100000", "--rate-limited-hold", "0", "--busy-hold", "0")


@pytest.fixture
def instances():
    """Starts instances; stops them all afterwards, pass or fail."""
    started = []

    def start(database, *args, count=1, **kwargs):
        made = [Instance(database, *args, wait=False, **kwargs) for _ in range(count)]
        started.extend(made)
        for instance in made:
            instance.wait_until_listening()
        return made

    yield start
    for instance in started:
        instance.stop()


@pytest.fixture
def started():
    """Instances a test starts itself; stopped afterwards, pass or fail."""
    made: list[Instance] = []
    yield made
    for instance in made:
        instance.stop()


@pytest.fixture
def schema():
    """A new schema, migrated once up front (instances started together on an empty one are the first
    test's subject)."""
    with fleet.fresh_schema() as uri:
        migrated = fleet.admin(uri, "migrate")
        assert migrated.returncode == 0, migrated.stderr
        yield uri


# 1. Migrations run once.

MIGRATION_LOCK = 0x62616E6465646765  # PostgresDatabase.migrationLock ("bandedge")

MIGRATION_LOG = """
CREATE SCHEMA watch;
CREATE TABLE watch.ddl (tx BIGINT NOT NULL, tag TEXT NOT NULL, object TEXT);
CREATE FUNCTION watch.record() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE c record;
BEGIN
  FOR c IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE schema_name IS DISTINCT FROM 'watch' LOOP
    INSERT INTO watch.ddl VALUES (txid_current(), c.command_tag, c.object_identity);
  END LOOP;
END $$;
CREATE EVENT TRIGGER watch_ddl ON ddl_command_end EXECUTE FUNCTION watch.record();
"""


def test_five_instances_started_together_migrate_once_and_all_come_up(started):
    with fleet.fresh_database() as database:
        # An event trigger records every committed DDL command with its transaction: the migrations'
        # own record, which a failed or rolled-back attempt leaves no trace in.
        sql(database, MIGRATION_LOG)
        # All five start at one moment: held back at the migration lock until every one waits there.
        import psycopg
        with psycopg.connect(database, autocommit=True) as gate:
            gate.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
            five = [Instance(database, wait=False) for _ in range(5)]
            started.extend(five)
            deadline = time.monotonic() + 30
            while sql(database, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")[0][0] < 5:
                assert time.monotonic() < deadline, "the five did not all reach the migration lock"
                assert all(i.process.poll() is None for i in five), [i.stderr_path.read_text() for i in five]
                time.sleep(0.02)
            gate.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
        for instance in five:
            instance.wait_until_listening()
        for instance in five:
            assert fleet.send(instance.address, "GET", "/readyz").status == 200
            errors = [e for e in instance.events() if e.get("level") == "error"]
            assert not errors, errors
        assert sql(database, "SELECT version FROM band_edge_schema") == [(latest_schema_version(),)]
        created = sql(database, "SELECT tx, object FROM watch.ddl WHERE tag = 'CREATE TABLE' ORDER BY object")
        tables = [object for _, object in created]
        assert tables == sorted(set(tables)), "each table created once"
        # Migration 10 makes action_tokens again as action_tokens_v10, then renames it.
        assert {t.split(".")[-1] for t in tables} == schema_tables() | {"band_edge_schema", "action_tokens_v10"}
        # Each migration is one transaction: as many committed DDL transactions as migrations mean
        # each ran exactly once; one more would be one that ran twice.
        migrations = sql(database, "SELECT tx FROM watch.ddl WHERE object <> 'public.band_edge_schema' GROUP BY tx")
        assert len(migrations) == latest_schema_version(), migrations
        # The five instances share one key of each kind (the first start made them).
        assert sql(database, "SELECT name FROM server_keys ORDER BY name") == [("device",), ("identifier",)]
        add_account(database, "ada@example.test", "Ada Example")
        for instance in five:
            assert Visitor().sign_in(instance, instance, "ada@example.test").status == 303


def migrated_sqlite():
    """A new SQLite store `admin migrate` made: what this binary's migrations write."""
    import sqlite3
    directory = fleet.temporary_directory("band-edge-version-")
    assert subprocess.run([str(fleet.binary()), "admin", "--data", str(directory), "migrate"],
                          capture_output=True, timeout=60, env={}).returncode == 0
    return sqlite3.connect(directory / "band-edge.sqlite")


def latest_schema_version() -> int:
    """The schema version this binary writes."""
    with migrated_sqlite() as db:
        return db.execute("PRAGMA user_version").fetchone()[0]


def schema_tables() -> set[str]:
    """The tables this binary's migrations make."""
    with migrated_sqlite() as db:
        return {name for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}


def test_a_schema_newer_than_this_build_is_refused_with_one_line(schema, instances):
    sql(schema, "UPDATE band_edge_schema SET version = 99")
    refused = subprocess.run([str(fleet.binary()), "serve", "--listen", "127.0.0.1:0", "--shell",
                              str(fleet.built_shell()), "--database", schema], capture_output=True, text=True,
                             timeout=60, env={})
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "schema version 99" in lines[0] and f"only up to {latest_schema_version()}" in lines[0], lines[0]
    assert sql(schema, "SELECT version FROM band_edge_schema") == [(99,)], "nothing was changed"


# 2. Lockout is exact.

def test_150_wrong_passwords_at_once_across_three_instances_lock_exactly(schema, instances):
    three = instances(schema, *UNLIMITED, count=3)
    add_account(schema, "tom@example.test", "Tom Example")
    # Every visitor fetches its form first, so that the 150 posts go out together.
    visitors = [Visitor() for _ in range(150)]
    forms = [(v, v.csrf(v.send(three[i % 3], "GET", "/sign-in"))) for i, v in enumerate(visitors)]
    answers: list = [None] * len(forms)
    barrier = threading.Barrier(len(forms))

    def post(i):
        visitor, csrf = forms[i]
        barrier.wait()
        try:
            answers[i] = visitor.send(three[(i + 1) % 3], "POST", "/sign-in", timeout=60,
                                      form={"csrf": csrf, "email": "tom@example.test", "password": "wrong guess"})
        except Exception as error:  # a connection failure is recorded, not raised in a thread
            answers[i] = error

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(forms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = [a.status if hasattr(a, "status") else repr(a) for a in answers]
    assert all(s == 400 for s in statuses), sorted(set(map(str, statuses)))
    locked = Visitor().sign_in(three[0], three[2], "tom@example.test")
    assert locked.status == 400 and b"Too many attempts" in locked.body
    # Every attempt is in the audit; exactly the threshold counted (each later one found the lock).
    details = dict(sql(schema, "SELECT coalesce(detail, 'counted'), count(*) FROM audit_events "
                               "WHERE action = 'sign_in.failed' GROUP BY 1"))
    assert sum(details.values()) == 151, details
    assert details.get("counted", 0) + details.get("locked", 0) == 5, details
    assert sql(schema, "SELECT failures FROM sign_in_failures") == [(5,)]


# 3. A retry may land elsewhere.

def native_code(visitor, form_from, post_to, app_params):
    page = visitor.send(form_from, "GET", "/native/sign-in?" + urlencode(app_params))
    assert page.status == 200, page.body[:200]
    import re
    fields = {k.decode(): v.decode() for k, v in
              re.findall(rb'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.body) if k != b"action"}
    fields.update(email="ada@example.test", password=PASSWORD)
    redirect = visitor.send(post_to, "POST", "/native/sign-in", form=fields)
    assert redirect.status == 303, redirect.body[:300]
    return parse_qs(urlsplit(redirect.header("location")).query)["code"][0]


def bearer(target, token):
    return fleet.send(target.address, "GET", "/api/client/v1/session", {"Authorization": f"Bearer {token}"})


def test_the_exchange_retry_replay_and_csrf_hold_across_instances(schema, instances):
    a, b, c = instances(schema, *UNLIMITED, count=3)
    add_account(schema, "ada@example.test", "Ada Example")
    from authlib.common.security import generate_token
    from authlib.oauth2.rfc7636 import create_s256_code_challenge
    state, verifier = generate_token(32), generate_token(64)
    params = {"state": state, "code_challenge": create_s256_code_challenge(verifier),
              "code_challenge_method": "S256", "platform": "ios", "app_version": "1.4.0"}
    code = native_code(Visitor(), a, b, params)  # the link opened on A, the form posted to B

    def exchange(target, key):
        body = json.dumps({"code": code, "codeVerifier": verifier, "state": state, "platform": "ios",
                           "appVersion": "1.4.0"}).encode()
        return fleet.send(target.address, "POST", "/api/client/v1/native/exchange",
                          {"Content-Type": "application/json", "Idempotency-Key": key}, body)

    first = exchange(c, "key-1")
    assert first.status == 200, first.body
    token = json.loads(first.body)["sessionToken"]
    retried = exchange(a, "key-1")  # the app's retry, after a lost answer, reaches another instance
    assert retried.status == 200 and json.loads(retried.body)["sessionToken"] == token
    assert bearer(b, token).status == 200
    replay = exchange(b, "key-2")  # a different key is a replay, wherever it arrives
    assert replay.status == 400 and json.loads(replay.body)["error"] == "invalid_grant"
    assert [bearer(x, token).status for x in (a, b, c)] == [401, 401, 401], "the replayed code's session ended"

    # The web form's CSRF binding is a cookie, not instance state: form on A, post on B, sign out on C.
    visitor = Visitor()
    assert visitor.sign_in(a, b, "ada@example.test").status == 303
    signed_out = visitor.token
    account = visitor.send(c, "GET", "/account")
    assert account.status == 200
    forged = visitor.send(a, "POST", "/sign-out", form={"csrf": "A" * 43})
    assert forged.status == 403
    assert visitor.send(b, "GET", "/api/client/v1/session").status == 200
    out = visitor.send(a, "POST", "/sign-out", form={"csrf": visitor.csrf(account)})
    assert out.status == 303
    for target in (a, b, c):
        assert bearer(target, signed_out).status == 401, "signed out everywhere"


# 4. kill -9 under write load.

loads: list["Load"] = []


@pytest.fixture(autouse=True)
def stop_loads():
    """Every load a test started stops with the test, pass or fail."""
    yield
    while loads:
        loads.pop().stop()


class Load:
    """Client threads that repeat `work(i)` until told to stop; every answer and failure is kept."""

    def __init__(self, work, threads):
        self.work, self.stopping, self.lock = work, threading.Event(), threading.Lock()
        self.answers: list = []
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]
        loads.append(self)
        for t in self.threads:
            t.start()

    def _run(self, i):
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                result = self.work(i)
            except Exception as error:
                result = error
            with self.lock:
                self.answers.append((i, result, time.monotonic() - started))

    def wait_for(self, count, timeout=60, since=0, acknowledged=0):
        """Until `count` answers are in (from answer `since` on), `acknowledged` of them writes that
        got their 303 or 204; at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                recent = self.answers[since:]
            acks = sum(1 for kind, _, r in writes_of(recent) if (kind, r.status) in (("sign_in", 303), ("revoke", 204)))
            if len(recent) >= count and acks >= acknowledged:
                return
            time.sleep(0.02)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join()
        return self.answers


def sign_in_and_revoke(target, email="ada@example.test"):
    """One web sign-in (303 acknowledges a new session) and, with that session, DELETE /session (204
    acknowledges its end). Returns (kind, token, response) for each write that was answered."""
    visitor = Visitor()
    signed = visitor.sign_in(target, target, email)
    done = [("sign_in", visitor.token, signed)]  # a refused form counts as the sign-in's answer
    if signed.status == 303:
        token = visitor.token
        done.append(("revoke", token, visitor.send(target, "DELETE", "/api/client/v1/session")))
    return done


def writes_of(answers):
    return [w for _, result, _ in answers if isinstance(result, list) for w in result]


def assert_acknowledged_writes_stored(schema, written):
    """Every 303 sign-in left its session in the database, every 204 revoke its revoked_at."""
    signed = [fleet.digest(token) for kind, token, r in written if kind == "sign_in" and r.status == 303]
    revoked = [fleet.digest(token) for kind, token, r in written if kind == "revoke" and r.status == 204]
    assert signed and revoked, [(kind, r.status) for kind, _, r in written]
    stored = sql(schema, "SELECT count(*) FROM sessions WHERE token_digest = ANY(%s)", (signed,))[0][0]
    assert stored == len(signed), f"{len(signed) - stored} acknowledged sign-ins lost"
    ended = sql(schema, "SELECT count(*) FROM sessions WHERE token_digest = ANY(%s) AND revoked_at IS NOT NULL",
                (revoked,))[0][0]
    assert ended == len(revoked), f"{len(revoked) - ended} acknowledged revokes lost"


def test_kill_9_under_write_load_loses_no_acknowledged_write(schema, instances):
    a, b = instances(schema, *UNLIMITED, count=2)
    add_account(schema, "ada@example.test", "Ada Example")
    load = Load(lambda i: sign_in_and_revoke((a, b)[i % 2]), threads=4)
    load.wait_for(8, acknowledged=8)
    a.kill()
    load.wait_for(8, since=len(load.answers), acknowledged=8)
    answers = load.stop()
    written = writes_of(answers)
    assert_acknowledged_writes_stored(schema, written)
    # B went on serving: nothing it answered was a failure.
    from_b = [r.status for i, result, _ in answers if i % 2 == 1 and isinstance(result, list) for _, _, r in result]
    assert from_b and set(from_b) <= {303, 204}, from_b
    print(f"\n{len(written)} writes answered, {sum(1 for _, r, _ in answers if not isinstance(r, list))} "
          "attempts failed with A gone")


# 5. PostgreSQL restarted under load.

@pytest.fixture
def private_postgres():
    server = PrivatePostgres()
    yield server
    server.stop()


class InstanceCrashed(AssertionError):
    """An instance ended while it should have been serving."""


def alive(*servers):
    """`servers`, having checked that each is still running (else its log, crash report included)."""
    for server in servers:
        if server.process.poll() is not None:
            raise InstanceCrashed(f"exited {server.process.returncode}: " + server.stderr_path.read_text())
    return servers


def ready(server) -> bool:
    try:
        return fleet.send(server.address, "GET", "/readyz").status == 200
    except OSError:
        alive(server)
        raise


def fake_postgres_that_hangs_up_after_start_up():
    """A listener speaking just enough of the PostgreSQL protocol (3.0) to let libpq connect, which
    then closes the connection at the first query: what a server being stopped does to a connection
    it had just accepted. Returns (port, thread)."""
    import socket
    import struct
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(30)

    def serve():
        with listener:
            connection, _ = listener.accept()
            with connection:
                while True:
                    length, code = struct.unpack("!ii", connection.recv(8))
                    connection.recv(length - 8)
                    if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: not here
                        connection.sendall(b"N")
                        continue
                    break
                connection.sendall(b"R" + struct.pack("!ii", 8, 0) + b"Z" + struct.pack("!i", 5) + b"I")
                connection.recv(65536)  # the first query (libpq's SET client_encoding): hang up

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


def test_a_connection_dropped_at_set_up_is_not_freed_twice():
    port, thread = fake_postgres_that_hangs_up_after_start_up()
    uri = f"postgresql://band_edge@127.0.0.1:{port}/band_edge?sslmode=disable&gssencmode=disable&connect_timeout=5"
    result = subprocess.run([str(fleet.binary()), "admin", "--database", uri, "migrate"], capture_output=True,
                            text=True, timeout=60, env={})
    thread.join(timeout=10)
    assert result.returncode == 1, (result.returncode, result.stderr[-300:])
    assert len(result.stderr.strip().splitlines()) == 1 and "UTF8" in result.stderr, result.stderr


def test_postgresql_restarted_under_load(private_postgres, instances):
    with fleet.fresh_schema(private_postgres.uri) as schema:
        assert fleet.admin(schema, "migrate").returncode == 0
        a, b = instances(schema, *UNLIMITED, count=2)
        add_account(schema, "ada@example.test", "Ada Example")
        reader = Visitor()
        assert reader.sign_in(a, a, "ada@example.test").status == 303
        token = reader.token

        def work(i):
            target = (a, b)[i % 2]
            kind = ("session", "shell", "write")[i % 3]
            if kind == "session":
                return [(kind, None, bearer(target, token))]
            if kind == "shell":
                return [(kind, None, fleet.send(target.address, "GET", "/"))]
            return sign_in_and_revoke(target)

        load = Load(work, threads=6)
        load.wait_for(12, acknowledged=4)
        private_postgres.stop()
        down_from = len(load.answers)
        load.wait_for(24, since=down_from)
        private_postgres.start()
        up_from = len(load.answers)
        deadline = time.monotonic() + 30
        while not all(ready(x) for x in alive(a, b)):
            assert time.monotonic() < deadline, "not ready again within 30 s of the restart"
            time.sleep(0.1)
        ready_from = len(load.answers)
        load.wait_for(12, since=ready_from, acknowledged=4)
        answers = load.stop()

        # No hang (each request has a 15 s bound) and no dropped connection.
        errors = [r for _, r, _ in answers if not isinstance(r, list)]
        assert not errors, errors[:3]
        written = writes_of(answers)
        shell = [r.status for kind, _, r in written if kind == "shell"]
        assert shell and set(shell) == {200}, "the shell is served from memory throughout"
        assert_acknowledged_writes_stored(schema, written)
        alive(a, b)
        # Recovered: reads and writes succeed again on both (within a few tries; see below).
        for target in (a, b):
            assert any(bearer(target, token).status == 200 for _ in range(10)), "reads recovered"
            assert any(Visitor().sign_in(target, target, "ada@example.test").status == 303 for _ in range(10))
        after = [r.status for _, result, _ in answers[ready_from:] for kind, _, r in result if kind != "shell"]
    down = [r for _, result, _ in answers[down_from:up_from] for kind, _, r in result if kind != "shell"]
    print(f"\n{len(answers)} rounds, {len(down)} pooled answers while PostgreSQL was down: "
          f"{sorted(set(r.status for r in down))}")
    # While the database is down a pooled request gets 503 with Retry-After (JSON under /api/), or it
    # succeeded before the database went.
    pooled = [(kind, r) for _, result, _ in answers for kind, _, r in result if kind != "shell"]
    wrong = sorted({(kind, r.status) for kind, r in pooled if r.status not in (200, 204, 303, 503)
                    or (r.status == 503 and not r.header("retry-after"))})
    api_503 = [r for kind, r in pooled if kind in ("session", "revoke") and r.status == 503]
    wrong += [("api 503 not JSON", r.header("content-type")) for r in api_503
              if not (r.header("content-type") or "").startswith("application/json")]
    # Once /readyz answers 200 again, every pooled request succeeds: a connection PostgreSQL ended
    # is noticed (its socket is readable while idle) and made again before its next statement.
    if set(after) - {200, 204, 303}:
        wrong.append(("after /readyz was 200 again", sorted(set(after))))
    assert not wrong, f"database down answered {wrong}: 503 with Retry-After expected"


# 6. Rolling restart behind nginx.

@pytest.fixture
def nginx_in_front():
    """Starts nginx in front of ports; stops it afterwards."""
    started = []

    def start(ports, **kwargs):
        started.append(Nginx(ports, **kwargs))
        return started[-1]

    yield start
    for proxy in started:
        proxy.stop()


def client_round(proxy, token):
    """What the clients do through nginx: sign in with the web form, read /session, fetch the shell."""
    visitor = Visitor()
    signed = visitor.sign_in(proxy, proxy, "ada@example.test")
    return [("sign_in", visitor.token, signed), ("session", None, bearer_at(proxy, token)),
            ("shell", None, fleet.send(proxy.address, "GET", "/"))]


def bearer_at(proxy, token):
    return fleet.send(proxy.address, "GET", "/api/client/v1/session", {"Authorization": f"Bearer {token}"})


def rolling_restart(schema, instances, nginx_in_front, **nginx):
    ports = [fleet.free_port(), fleet.free_port()]
    pair = [instances(schema, *UNLIMITED, "--trusted-proxy", "127.0.0.1", port=port)[0] for port in ports]
    proxy = nginx_in_front(ports, **nginx)
    add_account(schema, "ada@example.test", "Ada Example")
    reader = Visitor()
    assert reader.sign_in(proxy, proxy, "ada@example.test").status == 303
    load = Load(lambda i: client_round(proxy, reader.token), threads=4)
    load.wait_for(8)
    for instance in pair:
        instance.restart()  # SIGTERM, drained, exit 0, started again on its port
        load.wait_for(8, since=len(load.answers))
    answers = load.stop()
    errors = [r for _, r, _ in answers if not isinstance(r, list)]
    failed = [(kind, r.status) for kind, _, r in writes_of(answers)
              if (kind, r.status) not in (("sign_in", 303), ("session", 200), ("shell", 200))]
    print(f"\n{len(answers)} rounds through nginx during the rolling restart; failed: {failed[:5]}")
    return errors, failed, proxy


@pytest.mark.parametrize("nginx", [
    # docs/fleet.md's recipe: upstream keep-alive, and POSTs passed on when an instance failed them
    # before any answer (band-edge answers everything it read while draining, so such a POST was
    # never processed).
    {"next_upstream": "error timeout non_idempotent"},
    # The alternative: a new upstream connection per request, so no idle connection is closed under
    # a request by the drain (POSTs then stay on `error timeout`).
    {"keepalive": False},
], ids=["keepalive+non_idempotent", "no-upstream-keepalive"])
def test_rolling_restart_behind_nginx_fails_no_request(schema, instances, nginx_in_front, nginx):
    errors, failed, proxy = rolling_restart(schema, instances, nginx_in_front, **nginx)
    assert not errors, errors[:3]
    assert not failed, (failed[:5], proxy.error_log()[-2000:])


def test_the_documented_nginx_recipe_is_the_tested_one():
    """docs/fleet.md's upstream and location settings are the ones the rolling restart runs."""
    import re
    doc = (fleet.edge.ROOT / "docs" / "fleet.md").read_text()
    recipe = re.search(r"```nginx\n(.*?)```", doc, re.S).group(1)

    def settings(text):
        lines = {line.split("#")[0].strip() for line in text.splitlines()}
        return {line for line in lines if line.startswith(("proxy_", "keepalive")) and "temp_path" not in line
                or " max_fails=" in line}

    tested = fleet.NGINX_CONFIG.format(dir="D", port=1, servers="", next_upstream="error timeout non_idempotent",
                                       keepalive="keepalive 16;", connection='proxy_set_header Connection "";')
    documented = settings(recipe)
    assert {s for s in documented if "max_fails" not in s} == settings(tested)
    assert all(s.endswith(" max_fails=0;") for s in documented if s.startswith("server "))
