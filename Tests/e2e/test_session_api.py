"""GET/DELETE /api/client/v1/session through the real binary and its worker pool.

Sign-in and the native exchange are not built yet, so sessions are created the way the store keeps
them: only the SHA-256 digest of a random token is written."""

import base64
import hashlib
import json
import os
import time

import pytest

from edge import KeepAlive, Server, Workers, engine, fetch


def add_session(server, email, schools=()):
    token = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    db = server.store
    account = "acc_" + base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
    now = int(time.time())
    db.query("INSERT INTO accounts (id, email, display_name, password_hash, created_at) VALUES (?, ?, ?, 'x', ?)",
             (account, email, email.split("@")[0].title(), now))
    for slug, role in schools:
        school = (db.query("SELECT id FROM schools WHERE slug = ?", (slug,)) or [None])[0]
        if school is None:
            school = ("sch_" + slug,)
            db.query("INSERT INTO schools (id, name, slug, created_at) VALUES (?, ?, ?, ?)",
                     (school[0], slug.title(), slug, now))
        db.query("INSERT INTO memberships (account_id, school_id, role, created_at) VALUES (?, ?, ?, ?)",
                 (account, school[0], role, now))
    db.query("INSERT INTO sessions (id, token_digest, account_id, kind, platform, app_version, created_at, "
             "last_seen_at, expires_at) VALUES (?, ?, ?, 'native', 'ios', '1.4.0', ?, ?, ?)",
             ("ses_" + token[:8], hashlib.sha256(token.encode()).digest(), account, now, now, now + 86400))
    return token


def test_session_read_revoke_and_challenges():
    server = Server()
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        other = add_session(server, "bo@example.test", [("southgate", "administrator")])
        anonymous = fetch(server, "/api/client/v1/session")
        assert anonymous.status == 401
        assert anonymous.header("www-authenticate") == 'Bearer realm="band-licence"'
        assert anonymous.header("cache-control") == "no-store"
        assert anonymous.header("content-type") == "application/json; charset=utf-8"
        bad = fetch(server, "/api/client/v1/session", {"Authorization": "Bearer " + "A" * 43})
        assert bad.header("www-authenticate") == 'Bearer realm="band-licence", error="invalid_token"'
        mine = fetch(server, "/api/client/v1/session", {"Authorization": f"Bearer {token}"})
        assert mine.status == 200 and mine.header("cache-control") == "no-store"
        body = json.loads(mine.body)
        assert body["account"]["email"] == "ada@example.test"
        assert [s["slug"] for s in body["schools"]] == ["northfield"]
        assert body["deployment"] == {"environment": "development", "label": "Development"}
        theirs = json.loads(fetch(server, "/api/client/v1/session", {"Authorization": f"Bearer {other}"}).body)
        assert [s["slug"] for s in theirs["schools"]] == ["southgate"]
        deleted = fetch(server, "/api/client/v1/session", {"Authorization": f"Bearer {token}"}, method="DELETE")
        assert deleted.status == 204 and deleted.body == b""
        assert fetch(server, "/api/client/v1/session", {"Authorization": f"Bearer {token}"}).status == 401
        logs = server.logs()
        assert token not in logs and other not in logs
        assert hashlib.sha256(token.encode()).hexdigest() not in logs
    finally:
        server.stop()


def test_concurrent_reads_on_the_pool():
    server = Server("--pool-threads", "4")
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        failures = []
        answered = []

        def reader(_):
            client = KeepAlive(server)
            for _ in range(100):
                (response,) = client.send(("GET", "/api/client/v1/session", {"Authorization": f"Bearer {token}"}))
                answered.append(response.status)
                if response.status != 200:
                    failures.append(response.status)
            client.close()

        assert Workers(reader, 8, rounds=1).join() == [1] * 8
        assert failures == [] and len(answered) == 800
    finally:
        server.stop()


def test_many_people_at_once_each_read_their_own_session():
    """With the cache off and one pool thread, reads wait together and the pool answers them in
    batches with one statement: every answer must still be its own person's, and a token that
    names nothing must still get 401 while others in the same batch get 200."""
    server = Server("--pool-threads", "1", "--session-cache-entries", "0")
    try:
        people = {}
        for i in range(12):
            email = f"teacher{i:02d}@example.test"
            people[add_session(server, email, [(f"school{i:02d}", "teacher")])] = (email, f"school{i:02d}")
        unknown = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
        people[unknown] = None
        wrong = []
        answered = []
        tokens = list(people)

        def reader(i):
            token = tokens[i]
            client = KeepAlive(server)
            request = ("GET", "/api/client/v1/session", {"Authorization": f"Bearer {token}"})
            for _ in range(40):
                # Pipelined (or three streams at once over h2): the queue fills while the worker reads.
                for response in client.send(request, request, request):
                    if people[token] is None:
                        ok = response.status == 401
                    else:
                        body = json.loads(response.body) if response.status == 200 else {}
                        email, school = people[token]
                        ok = body.get("account", {}).get("email") == email and [
                            s["slug"] for s in body["schools"]] == [school]
                    answered.append(ok)
                    if not ok:
                        wrong.append((token[:6], response.status))
            client.close()

        assert Workers(reader, len(tokens), rounds=1).join() == [1] * len(tokens)
        assert wrong == [] and len(answered) == len(tokens) * 40 * 3
    finally:
        server.stop()


def test_answers_served_from_the_loop_see_every_write_at_once():
    """After a few reads the answer comes from the loop's cache; a write by another process (here
    Python's sqlite3 or psycopg, not band-edge code) must still show in the very next answer."""
    server = Server()
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher"), ("riverside", "administrator")])
        auth = {"Authorization": f"Bearer {token}"}
        for _ in range(3):
            assert len(json.loads(fetch(server, "/api/client/v1/session", auth).body)["schools"]) == 2
        def next_answers(expected, read):
            # SQLite: the very next answer (the loop reads the WAL index). PostgreSQL: the write's
            # trigger notifies the instance's listener at commit, which takes a moment; never a
            # second (the change counter is re-read every second besides).
            deadline = time.monotonic() + (1.0 if engine() == "postgres" else 0)
            while read() != expected:
                assert time.monotonic() < deadline, "a stale answer after the write"

        server.store.query("UPDATE memberships SET revoked_at = 1 WHERE school_id = 'sch_riverside'")
        next_answers(["northfield"], lambda: [
            s["slug"] for s in json.loads(fetch(server, "/api/client/v1/session", auth).body)["schools"]])
        for _ in range(3):
            assert fetch(server, "/api/client/v1/session", auth).status == 200
        server.store.query("UPDATE accounts SET disabled = 1")
        next_answers(401, lambda: fetch(server, "/api/client/v1/session", auth).status)
    finally:
        server.stop()


def test_the_cache_watch_keeps_sqlite_s_lock_on_the_wal_index():
    """SQLite marks a WAL index in use with a shared POSIX lock on byte 128 of the `-shm` file; a
    process's first connection that finds no such lock truncates and rebuilds the index. POSIX locks
    belong to the process, so a descriptor of the `-shm` file opened and closed beside SQLite drops
    them all: the session cache's watch once did, and another process's connection then rebuilt the
    index under band-edge's readers (SIGBUS). The lock must still be held once the cache is in use."""
    if engine() != "sqlite":
        pytest.skip("the WAL index is SQLite's")
    import fcntl
    import struct
    server = Server()
    try:
        token = add_session(server, "ada@example.test", [("northfield", "teacher")])
        for _ in range(3):
            assert fetch(server, "/api/client/v1/session", {"Authorization": f"Bearer {token}"}).status == 200
        shm = str(server.store.sqlite_path) + "-shm"
        with open(shm, "rb") as f:
            # F_GETLK for a write lock on the DMS byte: who would block it (struct flock on Linux).
            wanted = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 128, 1, 0)
            kind, _, _, _, pid = struct.unpack("@hhqqi4x", fcntl.fcntl(f.fileno(), fcntl.F_GETLK, wanted))
        assert kind == fcntl.F_RDLCK and pid == server.process.pid, "band-edge holds no lock on its WAL index"
    finally:
        server.stop()
