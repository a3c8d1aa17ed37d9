"""A store that cannot serve is a failed start: exit 1 with one line, never a server that answers
/healthz and then fails every sign-in."""

import os
import pwd
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from edge import binary, built_shell


@pytest.fixture
def data_dir():
    """A data directory holding a migrated, checkpointed database; removed afterwards."""
    top = Path(tempfile.mkdtemp(prefix="band-edge-e2e-"))
    data = top / "data"
    migrated = subprocess.run([str(binary()), "admin", "--data", str(data), "migrate"], capture_output=True,
                              text=True, timeout=30, env={})
    assert migrated.returncode == 0, migrated.stderr
    yield data
    shutil.rmtree(top, ignore_errors=True)


def serve(data, user=None):
    """Starts serve against `data`, as `user` if given; it must stop by itself within 20 s."""
    command = [str(binary()), "serve", "--listen", "127.0.0.1:0", "--shell", str(built_shell()),
               "--data", str(data)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={},
                               user=user)
    try:
        _, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise AssertionError("serve started against a store it cannot use")
    return process.returncode, err


@pytest.mark.sqlite_only("a read-only SQLite file")
def test_a_read_only_database_is_a_failed_start(data_dir):
    database = data_dir / "band-edge.sqlite"
    user = None
    if os.geteuid() == 0:
        # Root writes any file whatever its mode: run the server as an unprivileged user who may
        # read the store but not write it (the files stay root's).
        user = pwd.getpwnam("nobody").pw_uid
        os.chmod(data_dir.parent, 0o755)
        os.chmod(data_dir, 0o755)
        os.chmod(database, 0o644)
    else:
        os.chmod(database, 0o444)
        os.chmod(data_dir, 0o555)
    try:
        status, err = serve(data_dir, user=user)
    finally:
        os.chmod(data_dir, 0o700)
    assert status == 1
    assert err.count("\n") == 1, err
    assert err.startswith("band-edge: error: ")
    assert "cannot be written" in err or "readonly" in err, err


@pytest.mark.sqlite_only("corrupts the SQLite file")
def test_a_damaged_database_is_a_failed_start(data_dir):
    database = data_dir / "band-edge.sqlite"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE filler (v TEXT)")
        db.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,) for _ in range(200)])
    with sqlite3.connect(database) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'accounts'").fetchone()[0]
    # Scribble over the accounts table's root page: the header stays, the b-tree is broken.
    with open(database, "r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xa5" * page_size)
    status, err = serve(data_dir)
    assert status == 1
    assert err.count("\n") == 1, err
    assert err.startswith("band-edge: error: ") and ("damaged" in err or "malformed" in err), err


@pytest.mark.sqlite_only("writes garbage where the SQLite file goes")
def test_a_file_that_is_not_a_database_is_a_failed_start(data_dir):
    (data_dir / "band-edge.sqlite").write_bytes(b"not a database, just some bytes " * 200)
    for suffix in ("-wal", "-shm"):
        (data_dir / f"band-edge.sqlite{suffix}").unlink(missing_ok=True)
    status, err = serve(data_dir)
    assert status == 1
    assert err.count("\n") == 1, err
    assert "not a database" in err, err


def test_readyz_answers_when_the_store_does(make_server):
    from edge import fetch
    server = make_server()
    ready = fetch(server, "/readyz")
    assert ready.status == 200 and ready.body == b"ready\n" and ready.header("cache-control") == "no-store"
