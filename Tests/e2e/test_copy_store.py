"""Moving up to another store: `band-edge admin copy-store --from LOCATION --to LOCATION` copies a
whole deployment into an empty store, and the copy serves the sessions the old store issued."""

import os
import re
import secrets
import sqlite3
import subprocess

import pytest

from edge import binary
from test_web_sign_in import PASSWORD, Browser

BASE = os.environ.get("BAND_EDGE_TEST_POSTGRES")
needs_postgres = pytest.mark.skipif(not BASE, reason="BAND_EDGE_TEST_POSTGRES is not set (build/test sets it)")
SECRET = "s3cret-copy-word"
LINE = re.compile(r"^([a-z_]+) (\d+) ([0-9a-f]{16})$")


@pytest.fixture
def postgres():
    """A libpq URI of a new, empty schema on the test server, with a password the server does not
    ask for (trust) but the command must never print; the schema is dropped afterwards."""
    import psycopg
    schema = "e2e_copy_" + secrets.token_hex(6)
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    yield BASE + f"&password={SECRET}&options=-csearch_path%3D{schema}"
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


def run(*args, stdin=""):
    return subprocess.run([str(binary()), "admin", *args], input=stdin, capture_output=True, text=True,
                          timeout=120, env={})


def sqlite_counts(directory):
    """Rows per table of the SQLite store in `directory`, read by Python's own sqlite3."""
    with sqlite3.connect(directory / "band-edge.sqlite") as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                          "AND name NOT LIKE 'sqlite_%'")]
        return {name: db.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in names}


def postgres_counts(uri):
    """Rows per table of the store in the schema `uri` names (its version table left out)."""
    import psycopg
    with psycopg.connect(uri, autocommit=True) as db:
        names = [r[0] for r in db.execute("SELECT table_name FROM information_schema.tables "
                                          "WHERE table_schema = current_schema() AND table_name <> 'band_edge_schema'")]
        return {name: db.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in names}


def sign_in(browser, email, password):
    page = browser.send("GET", "/sign-in")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page.body).group(1).decode()
    return browser.send("POST", "/sign-in", form={"csrf": csrf, "email": email, "password": password})


def signed_in_deployment(make_server):
    """A stopped SQLite deployment: accounts, a school, memberships, a failed and a good web sign-in;
    returns its data directory and the signed-in browser (its session cookie)."""
    server = make_server()
    for email, name in [("ada@example.test", "Ada Example"), ("tom@example.test", "Tom Example")]:
        assert run("--data", str(server.data), "account", "create", "--email", email, "--name", name,
                   stdin=PASSWORD + "\n").returncode == 0
    assert run("--data", str(server.data), "school", "create", "--name", "Northfield Primary",
               "--slug", "northfield").returncode == 0
    assert run("--data", str(server.data), "member", "add", "--email", "ada@example.test", "--school", "northfield",
               "--role", "teacher").returncode == 0
    browser = Browser(server)
    assert sign_in(browser, "ada@example.test", PASSWORD).status == 303
    assert browser.send("GET", "/api/client/v1/session").status == 200
    assert sign_in(Browser(server), "tom@example.test", "not-the-password").status != 303
    server.stop()
    return server.data, browser


def check_printed(copied, counts):
    """One `table rows checksum-prefix` line per table, the rows as the target holds them, then one
    summary line; no password, no row contents."""
    lines = copied.stdout.splitlines()
    assert copied.returncode == 0 and copied.stderr == "", copied.stderr
    tables = {m.group(1): int(m.group(2)) for m in map(LINE.match, lines[:-1]) if m}
    assert len(tables) == len(lines) - 1, lines
    assert tables == counts
    assert lines[-1].startswith(f"copied {sum(counts.values())} rows in {len(counts)} tables from sqlite:")
    assert lines[-1].endswith("row counts and SHA-256 checksums match")
    assert SECRET not in copied.stdout and "ada@example.test" not in copied.stdout
    return dict(m.groups()[::2] for m in map(LINE.match, lines[:-1]))


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgresql", marks=needs_postgres)])
def test_a_copy_serves_the_sessions_the_old_store_issued(make_server, request, tmp_path, engine):
    data, browser = signed_in_deployment(make_server)
    target = request.getfixturevalue("postgres") if engine == "postgresql" else f"sqlite:{tmp_path / 'copy'}"
    copied = run("copy-store", "--from", f"sqlite:{data}", "--to", target)
    counts = postgres_counts(target) if engine == "postgresql" else sqlite_counts(tmp_path / "copy")
    assert counts == sqlite_counts(data)
    assert all(counts[t] > 0 for t in ["accounts", "memberships", "sessions", "audit_events", "server_keys",
                                       "sign_in_failures"]), counts
    check_printed(copied, counts)
    if engine == "postgresql":
        assert "password=***" in copied.stdout

    flag = ["--database", target]
    server = make_server(*flag)
    moved = Browser(server)
    moved.cookies = dict(browser.cookies)
    session = moved.send("GET", "/api/client/v1/session")
    assert session.status == 200 and b'"ada@example.test"' in session.body, "the same cookie, the copied store"
    # A sign-in on the copy writes new audit rows after the copied ones (ids moved on, no collision).
    assert sign_in(Browser(server), "ada@example.test", PASSWORD).status == 303
    audit = run(*flag, "audit").stdout
    assert audit.count("sign_in.succeeded") == 2 and audit.count("sign_in.failed") >= 1, audit


@needs_postgres
def test_a_copy_back_from_postgresql_has_the_same_checksums(make_server, postgres, tmp_path):
    data, _ = signed_in_deployment(make_server)
    there = check_printed(run("copy-store", "--from", f"sqlite:{data}", "--to", postgres), sqlite_counts(data))
    back = run("copy-store", "--from", postgres, "--to", f"sqlite:{tmp_path / 'back'}")
    assert back.returncode == 0, back.stderr
    assert SECRET not in back.stdout
    printed = dict(m.groups()[::2] for m in map(LINE.match, back.stdout.splitlines()[:-1]))
    assert printed == there, "the same checksum for each table on both engines"
    assert sqlite_counts(tmp_path / "back") == sqlite_counts(data)


@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgresql", marks=needs_postgres)])
def test_a_target_with_any_row_is_refused_and_left_alone(make_server, request, tmp_path, engine):
    data, _ = signed_in_deployment(make_server)
    target = request.getfixturevalue("postgres") if engine == "postgresql" else f"sqlite:{tmp_path / 'copy'}"
    assert run("copy-store", "--from", f"sqlite:{data}", "--to", target).returncode == 0
    counts = postgres_counts(target) if engine == "postgresql" else sqlite_counts(tmp_path / "copy")
    again = run("copy-store", "--from", f"sqlite:{data}", "--to", target)
    assert again.returncode == 1 and again.stdout == ""
    assert len(again.stderr.splitlines()) == 1 and "is not empty" in again.stderr, again.stderr
    assert SECRET not in again.stderr
    assert counts == (postgres_counts(target) if engine == "postgresql" else sqlite_counts(tmp_path / "copy"))


def test_a_target_that_was_only_migrated_is_not_empty(make_server, tmp_path):
    """Opening a store makes its server keys: a copy over them would give two deployments' keys."""
    data, _ = signed_in_deployment(make_server)
    assert run("--data", str(tmp_path / "copy"), "migrate").returncode == 0
    refused = run("copy-store", "--from", f"sqlite:{data}", "--to", f"sqlite:{tmp_path / 'copy'}")
    assert refused.returncode == 1 and "(server_keys has 2 rows)" in refused.stderr, refused.stderr


def test_a_copy_the_target_changes_is_detected_and_rolled_back(make_server, tmp_path):
    data, _ = signed_in_deployment(make_server)
    target = tmp_path / "copy"
    assert run("--data", str(target), "migrate").returncode == 0
    with sqlite3.connect(target / "band-edge.sqlite") as db:
        db.execute("DELETE FROM server_keys")
        db.execute("CREATE TRIGGER tamper AFTER INSERT ON sessions BEGIN "
                   "UPDATE sessions SET last_seen_at = last_seen_at + 1 WHERE id = NEW.id; END")
    tampered = run("copy-store", "--from", f"sqlite:{data}", "--to", f"sqlite:{target}")
    assert tampered.returncode == 1 and tampered.stdout == ""
    assert len(tampered.stderr.splitlines()) == 1, tampered.stderr
    assert "does not match the source in sessions (source 1 rows" in tampered.stderr, tampered.stderr
    assert "nothing was written" in tampered.stderr
    assert all(n == 0 for n in sqlite_counts(target).values()), "rolled back"


def test_a_source_at_another_version_is_refused(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    with sqlite3.connect(old / "band-edge.sqlite") as db:
        db.execute("PRAGMA user_version = 5")
    refused = run("copy-store", "--from", f"sqlite:{old}", "--to", f"sqlite:{tmp_path / 'copy'}")
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1
    assert f"run band-edge admin --database sqlite:{old} migrate on it first" in refused.stderr, refused.stderr
    missing = run("copy-store", "--from", f"sqlite:{tmp_path / 'none'}", "--to", f"sqlite:{tmp_path / 'copy'}")
    assert missing.returncode == 1 and "there is no store at" in missing.stderr
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("args", [["--from", "sqlite:a"], ["--to", "sqlite:a"], ["--from", "a", "--to", "sqlite:b"],
                                  ["--from", "sqlite:a", "--to", "sqlite:a"]])
def test_usage_errors(args):
    wrong = run("copy-store", *args)
    assert wrong.returncode == 2 and wrong.stderr.startswith("band-edge: error: "), wrong.stderr


def test_the_admin_help_lists_copy_store():
    assert "copy-store --from LOCATION --to LOCATION" in run("--help").stdout


@pytest.mark.parametrize("change, refused", [
    ("UPDATE accounts SET deleted_at = 0.5 WHERE email = 'tom@example.test'",
     "accounts.deleted_at in the row with id '{tom}': it holds a real value where the schema declares integer"),
    ("UPDATE accounts SET display_name = CAST(x'546f6d80' AS TEXT) WHERE email = 'tom@example.test'",
     "accounts.display_name in the row with id '{tom}': it holds text that is not valid UTF-8"),
])
def test_a_value_the_schema_does_not_declare_is_refused_not_copied_lossily(make_server, tmp_path, change, refused):
    """A REAL in an INTEGER column, or text that is not UTF-8, would have been read as something else
    (null, or U+FFFD) and still verified: now it is refused by table, column and key, never shown."""
    data, _ = signed_in_deployment(make_server)
    with sqlite3.connect(data / "band-edge.sqlite") as db:
        db.execute(change)
        tom = db.execute("SELECT id FROM accounts WHERE email = 'tom@example.test'").fetchone()[0]
    copied = run("copy-store", "--from", f"sqlite:{data}", "--to", f"sqlite:{tmp_path / 'copy'}")
    assert copied.returncode == 1 and copied.stdout == "" and len(copied.stderr.splitlines()) == 1, copied
    assert refused.format(tom=tom) in copied.stderr and "nothing was written" in copied.stderr, copied.stderr
    assert "0.5" not in copied.stderr and "Tom" not in copied.stderr
    assert all(n == 0 for n in sqlite_counts(tmp_path / "copy").values())
