"""band-edge admin against a real database: what each command changes, and that no secret leaks."""

import json
import subprocess

import pytest

from edge import binary, engine, new_store

PASSWORD = "correct-horse-battery-staple"


def admin(store, *args, stdin="", env=None):
    return subprocess.run([str(binary()), "admin", *store.args, *args], input=stdin, capture_output=True,
                          text=True, timeout=60, env=env or {})


def test_accounts_schools_members_and_the_audit_trail(tmp_path):
    store = new_store(tmp_path)
    created = admin(store, "account", "create", "--email", " Ada@Example.test ", "--name", "Ada Example",
                    stdin=PASSWORD + "\n")
    assert created.returncode == 0 and created.stdout.startswith("created account acc_")
    assert created.stdout.strip().endswith("ada@example.test")
    again = admin(store, "account", "create", "--email", "ada@example.test", "--name", "Ada", stdin=PASSWORD + "\n")
    assert again.returncode == 1 and again.stderr == "band-edge: error: an account with that email already exists\n"
    short = admin(store, "account", "create", "--email", "b@example.test", "--name", "B", stdin="short\n")
    assert short.returncode == 1 and "at least 12 characters" in short.stderr
    assert admin(store, "school", "create", "--name", "Northfield Primary", "--slug", "northfield").returncode == 0
    granted = admin(store, "member", "add", "--email", "ada@example.test", "--school", "northfield", "--role", "teacher")
    assert granted.stdout == "granted teacher in northfield to ada@example.test\n"
    assert admin(store, "member", "add", "--email", "ada@example.test", "--school", "northfield",
                 "--role", "owner").returncode == 2
    assert admin(store, "member", "revoke", "--email", "ada@example.test", "--school", "northfield").returncode == 0
    assert admin(store, "account", "disable", "--email", "ada@example.test").stdout.startswith("disabled account")
    assert admin(store, "sessions", "revoke", "--all").stdout == "revoked 0 sessions\n"
    assert admin(store, "sessions", "list").returncode == 2
    events = [json.loads(line) for line in admin(store, "audit", "--json").stdout.splitlines()]
    assert [e["action"] for e in events] == ["account.created", "school.created", "membership.granted",
                                             "membership.revoked", "account.disabled"]
    everything = store.dump() + json.dumps(events).encode()
    assert PASSWORD.encode() not in everything


def test_demo_data_only_in_development_and_password_shown_once(tmp_path):
    store = new_store(tmp_path)
    refused = admin(store, "seed-demo", env={"BAND_LICENCE_ENV": "production"})
    assert refused.returncode == 1 and "development only" in refused.stderr
    seeded = admin(store, "seed-demo", env={"BAND_LICENCE_ENV": "development"})
    assert seeded.returncode == 0
    assert "ada.administrator@example.test" in seeded.stdout and "demo password" in seeded.stdout
    password = seeded.stdout.strip().rsplit(" ", 1)[1]
    again = admin(store, "seed-demo", env={"BAND_LICENCE_ENV": "development"})
    assert again.stdout == "demo data is already there\n" and password not in again.stdout
    emails = {e["subject"] for e in map(json.loads, admin(store, "audit", "--json").stdout.splitlines())}
    assert all(not s or s.startswith(("acc_", "sch_")) for s in emails)


def test_two_processes_migrating_a_new_database_at_once_both_succeed(tmp_path):
    """Several instances may start together on one database: each step is re-checked under the lock."""
    for attempt in range(5):
        store = new_store(tmp_path / f"d{attempt}")
        processes = [subprocess.Popen([str(binary()), "admin", *store.args, "migrate"], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env={}) for _ in range(3)]
        results = [(p.wait(timeout=60), p.stderr.read()) for p in processes]
        assert all(code == 0 for code, _ in results), results


def test_accounts_from_before_one_email_normalisation_are_reported_by_id_and_addressable(tmp_path):
    store = new_store(tmp_path)
    assert admin(store, "migrate").returncode == 0
    for id_, email in (("acc_legacy1", "admin@localhost"), ("acc_legacy2", "josé@example.test")):
        store.query("INSERT INTO accounts (id, email, display_name, password_hash, created_at) VALUES (?, ?, 'L', 'x', 0)",
                    (id_, email))
    migrated = admin(store, "migrate", "--quiet")
    assert migrated.returncode == 0
    events = [json.loads(line) for line in migrated.stderr.splitlines()]
    assert [e["event"] for e in events] == ["emails_not_addresses"]
    assert events[0]["count"] == "2" and events[0]["accounts"] == "acc_legacy1 acc_legacy2"
    assert "localhost" not in migrated.stderr and "jos" not in migrated.stderr, "never an address in the log"
    assert admin(store, "account", "disable", "--email", "admin@localhost").returncode == 2
    disabled = admin(store, "account", "disable", "--id", "acc_legacy1")
    assert disabled.returncode == 0 and disabled.stdout.startswith("disabled account acc_legacy1")
    listed = admin(store, "sessions", "list", "--account-id", "acc_legacy2")
    assert listed.returncode == 0
