"""The whole server on PostgreSQL: --database URL, migrations at start, the
operator CLI and the web sign-in against one schema of the test server; the password never shows."""

import json
import os
import re
import secrets
import subprocess

import pytest

from edge import Server, binary
from test_web_sign_in import PASSWORD, Browser

BASE = os.environ.get("BAND_EDGE_TEST_POSTGRES")
pytestmark = pytest.mark.skipif(not BASE, reason="BAND_EDGE_TEST_POSTGRES is not set (build/test sets it)")


@pytest.fixture
def database():
    """A libpq URI of a new, empty schema on the test server; dropped afterwards."""
    import psycopg
    schema = "e2e_" + secrets.token_hex(6)
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    yield BASE + f"&options=-csearch_path%3D{schema}"
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


def admin(uri, *args, stdin=""):
    return subprocess.run([str(binary()), "admin", "--database", uri, *args], input=stdin, capture_output=True,
                          text=True, timeout=60, env={})


def test_serve_migrates_and_signs_in_on_postgresql(make_server, database):
    server = make_server("--database", database)
    created = admin(database, "account", "create", "--email", "ada@example.test", "--name", "Ada Example",
                    stdin=PASSWORD + "\n")
    assert created.returncode == 0, created.stderr
    browser = Browser(server)
    page = browser.send("GET", "/sign-in")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page.body).group(1).decode()
    signed = browser.send("POST", "/sign-in", form={"csrf": csrf, "email": "ada@example.test", "password": PASSWORD})
    assert signed.status == 303
    session = browser.send("GET", "/api/client/v1/session")
    assert session.status == 200 and json.loads(session.body)["account"]["email"] == "ada@example.test"
    actions = [json.loads(line)["action"] for line in admin(database, "audit", "--json").stdout.splitlines()]
    assert actions[:1] == ["account.created"] and "sign_in.succeeded" in actions
    # Five instances' worth of migrate on the same schema: each migration ran once.
    for _ in range(3):
        assert admin(database, "migrate").returncode == 0


def test_a_password_in_the_uri_is_never_printed(tmp_path):
    uri = "postgresql://band_edge:s3cret-word@127.0.0.1:1/none?connect_timeout=1"
    failed = subprocess.run([str(binary()), "serve", "--listen", "127.0.0.1:0", "--database", uri],
                            capture_output=True, text=True, timeout=30, env={})
    assert failed.returncode == 1
    assert "s3cret-word" not in failed.stderr and "***" in failed.stderr, failed.stderr
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"database": uri}))
    checked = subprocess.run([str(binary()), "config", "check", "--config", str(path)], capture_output=True,
                             text=True, timeout=30, env={})
    assert checked.returncode == 0 and "s3cret-word" not in checked.stdout and "***" in checked.stdout


def test_readyz_follows_the_database_and_healthz_stays_alive(make_server, database):
    import psycopg
    server = make_server("--database", database)
    from edge import fetch
    assert fetch(server, "/readyz").status == 200
    schema = database.rsplit("%3D", 1)[1]
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute(f"ALTER SCHEMA {schema} RENAME TO {schema}_away")
    try:
        gone = fetch(server, "/readyz")
        assert gone.status == 503 and gone.header("retry-after") == "1" and gone.header("cache-control") == "no-store"
        assert fetch(server, "/healthz").status == 200, "alive, though not ready"
    finally:
        with psycopg.connect(BASE, autocommit=True) as admin:
            admin.execute(f"ALTER SCHEMA {schema}_away RENAME TO {schema}")
    assert fetch(server, "/readyz").status == 200, "ready again once the database answers"


def test_a_connection_the_server_dropped_is_made_again(make_server, database):
    import psycopg
    server = make_server("--database", database, "--pool-threads", "1")
    from edge import fetch
    assert fetch(server, "/readyz").status == 200
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                      "AND datname = current_database() AND backend_type = 'client backend'")
    answers = [fetch(server, "/readyz").status for _ in range(3)]
    assert answers[-1] == 200 and answers.count(503) <= 1, answers
