"""Creates a fictional account with two schools and one native session in a band-edge database
(as the store keeps it: only the token's SHA-256 digest) and prints the token for wrk. The
database is a SQLite file or a postgresql:// URI (psycopg)."""

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
token = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
now = int(time.time())
with db:
    db.execute("INSERT INTO accounts (id, email, display_name, password_hash, created_at) "
               "VALUES ('acc_bench', 'ada.bench@example.test', 'Ada Example', 'x', ?)", (now,))
    for slug, name, role in (("northfield", "Northfield Primary", "teacher"),
                             ("riverside", "Riverside Music Academy", "administrator")):
        db.execute("INSERT INTO schools (id, name, slug, created_at) VALUES (?, ?, ?, ?)", ("sch_" + slug, name, slug, now))
        db.execute("INSERT INTO memberships (account_id, school_id, role, created_at) VALUES ('acc_bench', ?, ?, ?)",
                   ("sch_" + slug, role, now))
    db.execute("INSERT INTO sessions (id, token_digest, account_id, kind, platform, app_version, created_at, "
               "last_seen_at, expires_at) VALUES ('ses_bench', ?, 'acc_bench', 'native', 'ios', '1.4.0', ?, ?, ?)",
               (hashlib.sha256(token.encode()).digest(), now, now, now + 86400))
print(token)
