"""Creates fictional accounts (one, or the count given after the database), each in two schools
with one native session, in a band-edge database (as the store keeps it: only the token's
SHA-256 digest), and prints the tokens for wrk, one per line. The database is a SQLite file or a
postgresql:// URI (psycopg)."""

import base64
import hashlib
import os
import sqlite3
import sys
import time

if sys.argv[1].startswith("postgresql://"):
    import psycopg

    class PostgresDB:
        """sqlite3's `with db: db.execute(sql, params)` over psycopg, `?` placeholders included."""

        def __init__(self, uri):
            self.connection = psycopg.connect(uri)

        def __enter__(self):
            return self

        def __exit__(self, kind, *_):
            (self.connection.rollback if kind else self.connection.commit)()

        def execute(self, sql, params=()):
            return self.connection.execute(sql.replace("?", "%s"), params)

    db = PostgresDB(sys.argv[1])
else:
    db = sqlite3.connect(sys.argv[1])
count = int(sys.argv[2]) if len(sys.argv) > 2 else 1
now = int(time.time())
tokens = []
with db:
    for slug, name in (("northfield", "Northfield Primary"), ("riverside", "Riverside Music Academy")):
        db.execute("INSERT INTO schools (id, name, slug, created_at) VALUES (?, ?, ?, ?)", ("sch_" + slug, name, slug, now))
    for n in range(count):
        suffix = "" if n == 0 else f"{n:02d}"
        account = f"acc_bench{suffix}"
        db.execute("INSERT INTO accounts (id, email, display_name, password_hash, created_at) VALUES (?, ?, ?, 'x', ?)",
                   (account, f"ada.bench{suffix}@example.test", "Ada Example", now))
        for slug, role in (("northfield", "teacher"), ("riverside", "administrator")):
            db.execute("INSERT INTO memberships (account_id, school_id, role, created_at) VALUES (?, ?, ?, ?)",
                       (account, "sch_" + slug, role, now))
        token = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
        db.execute("INSERT INTO sessions (id, token_digest, account_id, kind, platform, app_version, created_at, "
                   "last_seen_at, expires_at) VALUES (?, ?, ?, 'native', 'ios', '1.4.0', ?, ?, ?)",
                   (f"ses_bench{suffix}", hashlib.sha256(token.encode()).digest(), account, now, now, now + 86400))
        tokens.append(token)
print("\n".join(tokens))
