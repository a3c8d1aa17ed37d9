"""Helpers for the end-to-end suites: start the real band-edge binary, speak raw HTTP/1.1 (or, with
BAND_EDGE_E2E_PROTOCOL=h2, send the same requests over HTTP/2: h2client.py)."""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def binary() -> Path:
    """The binary under test: $BAND_EDGE_BINARY, else the release build, else the debug build."""
    if os.environ.get("BAND_EDGE_BINARY"):
        return Path(os.environ["BAND_EDGE_BINARY"])
    for kind in ("release", "debug"):
        path = ROOT / ".build" / kind / "band-edge"
        if path.exists():
            return path
    raise RuntimeError("build band-edge first (swift build -c release)")


_built_shell: Path | None = None
_directories: list[Path] = []
_servers: list["Server"] = []
_schemas: list[str] = []
# Each server's last exposition, taken as it stops; conftest checks them all with promtool at the end.
_scrapes: list[tuple[str, str]] = []


def engine() -> str:
    """The engine the servers and stores of this run use: `BAND_EDGE_E2E_ENGINE`, `sqlite` (the
    default) or `postgres` (on the test server build/test starts, `BAND_EDGE_TEST_POSTGRES`)."""
    chosen = os.environ.get("BAND_EDGE_E2E_ENGINE", "sqlite")
    if chosen not in ("sqlite", "postgres"):
        raise RuntimeError(f"BAND_EDGE_E2E_ENGINE must be sqlite or postgres, not {chosen!r}")
    if chosen == "postgres" and not os.environ.get("BAND_EDGE_TEST_POSTGRES"):
        raise RuntimeError("BAND_EDGE_E2E_ENGINE=postgres needs BAND_EDGE_TEST_POSTGRES (build/test sets both)")
    return chosen


def protocol() -> str:
    """The protocol the shared request helpers speak in this run: `BAND_EDGE_E2E_PROTOCOL`, `http1`
    (the default) or `h2` (every server also takes prior-knowledge h2c, `--h2c`; `fetch`,
    `exchange` and `KeepAlive` send over HTTP/2). Tests about HTTP/1 itself are marked
    `http1_only` and skipped in the h2 pass."""
    chosen = os.environ.get("BAND_EDGE_E2E_PROTOCOL", "http1")
    if chosen not in ("http1", "h2"):
        raise RuntimeError(f"BAND_EDGE_E2E_PROTOCOL must be http1 or h2, not {chosen!r}")
    return chosen


class Store:
    """One store as the CLI names it (`args`: `--data DIR` or `--database URI`) and as a test reads
    it directly (`query`, `dump`), whichever the engine."""

    def __init__(self, args: list[str]):
        self.args = args

    @property
    def uri(self) -> str | None:
        """The libpq URI, for a store on PostgreSQL."""
        return self.args[1] if self.args[0] == "--database" and not self.args[1].startswith("sqlite:") else None

    @property
    def sqlite_path(self) -> Path | None:
        """The database file, for a store on SQLite."""
        if self.uri is not None:
            return None
        directory = self.args[1].removeprefix("sqlite:")
        return Path(directory) / "band-edge.sqlite"

    def sync(self) -> None:
        """After changing access by SQL: on PostgreSQL, `band-edge admin sync` returns once every
        running instance has heard every change committed before it (docs/fleet.md); SQLite's
        instances see a commit at once."""
        if self.uri is not None:
            subprocess.run([str(binary()), "admin", *self.args, "sync"], check=True, capture_output=True, timeout=30)

    def query(self, sql: str, parameters: tuple | list = ()) -> list[tuple]:
        """Runs one statement (`?` placeholders) in a transaction of its own; the rows it returns."""
        if self.uri is None:
            import sqlite3
            db = sqlite3.connect(self.sqlite_path)
            try:
                with db:
                    return db.execute(sql, parameters).fetchall()
            finally:
                db.close()
        import psycopg
        with psycopg.connect(self.uri) as db:
            if parameters:
                cursor = db.execute(sql.replace("%", "%%").replace("?", "%s"), parameters)
            else:
                cursor = db.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def dump(self) -> bytes:
        """Everything the store holds: SQLite's files, or every row of every table as text."""
        if self.uri is None:
            path = self.sqlite_path
            return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
        tables = [row[0] for row in self.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")]
        return "\n".join(str(row) for table in tables for row in self.query(f"SELECT t::text FROM {table} t")).encode()


def new_store(directory: Path) -> Store:
    """A new, empty store of the engine under test: `--data directory`, or on PostgreSQL a schema of
    its own on the test server (created now, dropped by `cleanup`)."""
    if engine() == "sqlite":
        return Store(["--data", str(directory)])
    import secrets
    import psycopg
    base = os.environ["BAND_EDGE_TEST_POSTGRES"]
    schema = "e2e_" + secrets.token_hex(6)
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    _schemas.append(schema)
    return Store(["--database", base + ("&" if "?" in base else "?") + f"options=-csearch_path%3D{schema}"])


def temporary_directory(prefix: str = "band-edge-e2e-") -> Path:
    """A new directory under /tmp, removed with every other one at the end of the test session
    (`cleanup`), pass or fail."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _directories.append(path)
    return path


def cleanup() -> None:
    """Stops every server a test started and did not stop, and removes every temporary directory.
    Run by conftest at the end of the session, and at exit should the session be cut short."""
    for server in _servers:
        server.stop(check=False)
    _servers.clear()
    for path in _directories:
        shutil.rmtree(path, ignore_errors=True)
    _directories.clear()
    if _schemas:
        import psycopg
        with psycopg.connect(os.environ["BAND_EDGE_TEST_POSTGRES"], autocommit=True) as admin:
            for schema in _schemas:
                admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        _schemas.clear()


atexit.register(cleanup)


def built_shell() -> Path:
    """The repository's Public/ built once per test session (band-edge shell build)."""
    global _built_shell
    if _built_shell is None:
        target = temporary_directory("band-edge-shell-") / "shell"
        subprocess.run([str(binary()), "shell", "build", "--from", str(ROOT / "Public"), "--to", str(target)],
                       check=True, capture_output=True)
        _built_shell = target
    return _built_shell


class Server:
    """A band-edge process listening on a random loopback port, with its logs in files. Its store
    is `self.store` (`self.database_args` names it for `band-edge admin`): the one `--data` or
    `--database` in `args` names, else a new one of the engine under test (`new_store`)."""

    # Subclasses that launch their own process (fleet.Instance) have no admin listener of this one's.
    scraped_at_stop = False
    _admin_port: int | None = None

    def __init__(self, *args: str, test_routes: bool = True, shell: Path | None = None,
                 env: dict[str, str] | None = None, file_limit: int | None = None, admin: bool = True):
        """`file_limit` sets the process's descriptor limit, soft and hard alike (so it cannot raise it).
        `admin`: the server also gets an admin listener on a random loopback port (unless `args` names
        one, or `file_limit` is set), whose exposition is scraped when the server stops."""
        self.dir = temporary_directory()
        self.stdout_path = self.dir / "stdout.log"
        self.stderr_path = self.dir / "stderr.log"
        self.shell = shell or built_shell()
        self.data = self.dir / "data"
        named = [i for i, arg in enumerate(args) if arg in ("--data", "--database") and i + 1 < len(args)]
        self.store = Store(list(args[named[-1]:named[-1] + 2])) if named else new_store(self.data)
        self.database_args = self.store.args
        command = [str(binary()), "serve", "--listen", "127.0.0.1:0", "--shell", str(self.shell),
                   *([] if named else self.database_args), *args]
        if test_routes:
            command.append("--test-routes")
        self.scraped_at_stop = admin and file_limit is None and "--admin-listen" not in command
        if self.scraped_at_stop:
            command += ["--admin-listen", "127.0.0.1:0"]
        self._admin_port: int | None = None
        if protocol() == "h2" and "--h2c" not in command:
            command.append("--h2c")
        environment = {k: v for k, v in os.environ.items() if not k.startswith("BAND_LICENCE_")}
        environment.update(env or {})
        def limit_files():
            import resource
            resource.setrlimit(resource.RLIMIT_NOFILE, (file_limit, file_limit))

        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=environment,
                preexec_fn=limit_files if file_limit else None,
            )
        _servers.append(self)
        self.port = self._wait_for_port()
        self.address = ("127.0.0.1", self.port)

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            match = re.search(r'"event":"listening","address":"127\.0\.0\.1:(\d+)"', self.stderr_path.read_text())
            if match:
                return int(match.group(1))
            if self.process.poll() is not None:
                raise RuntimeError(f"band-edge exited: {self.stderr_path.read_text()}")
            time.sleep(0.02)
        raise RuntimeError("band-edge did not announce its port")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def listening_ports(self, count: int = 2, timeout: float = 10) -> list[int]:
        """The ports of the first `count` listeners, in the order they were announced, waiting for
        them (the server logs one line per listener, and `_wait_for_port` waits only for the first)."""
        deadline = time.monotonic() + timeout
        while True:
            ports = [int(e["address"].rsplit(":", 1)[1]) for e in self.events() if e.get("event") == "listening"]
            if len(ports) >= count or time.monotonic() > deadline:
                return ports
            time.sleep(0.02)

    def connect(self, **kwargs) -> "Client":
        return Client(self.address, **kwargs)

    @property
    def admin_port(self) -> int:
        """The admin listener's port (from its `admin_listening` line)."""
        if self._admin_port is None:
            deadline = time.monotonic() + 10
            while self._admin_port is None:
                for e in self.events():
                    if e.get("event") == "admin_listening":
                        self._admin_port = int(e["address"].rsplit(":", 1)[1])
                if self._admin_port is None:
                    if time.monotonic() > deadline:
                        raise RuntimeError("band-edge did not announce an admin listener")
                    time.sleep(0.02)
        return self._admin_port

    def admin(self, path: str) -> Response:
        """GET `path` from the admin listener."""
        client = Client(("127.0.0.1", self.admin_port))
        try:
            client.send(request("GET", path, {"Connection": "close"}))
            return client.read_response()
        finally:
            client.close()

    def metrics(self) -> str:
        """The admin listener's exposition."""
        response = self.admin("/metrics")
        assert response.status == 200, response
        assert response.header("content-type") == "text/plain; version=0.0.4; charset=utf-8"
        return response.body.decode()

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    def wait(self, timeout: float = 15) -> int:
        """Waits for a process the test ended itself (a signal it sent) and returns its status, for
        the test to check; `stop` then leaves it alone."""
        status = self.process.wait(timeout=timeout)
        self.ended_by_test = True
        return status

    ended_by_test = False
    _stopped = False

    def stop(self, check: bool = True) -> None:
        """SIGTERM and wait. With `check`, the first stop of a process the test did not end itself
        (`wait`, `fleet.Instance.kill`) asserts it was still running and exited 0: a server that
        crashed or was killed during a test fails that test."""
        check = check and not self._stopped and not self.ended_by_test
        self._stopped = True
        if check:
            assert self.process.poll() is None, (
                f"band-edge had exited ({self.process.returncode}) before the test stopped it: "
                f"{self.stderr_path.read_text()[-2000:]}")
        if self.process.poll() is None and self.scraped_at_stop:
            try:
                _scrapes.append((" ".join(self.process.args[1:]), self.metrics()))
            except (OSError, RuntimeError, AssertionError):
                pass  # a server that stopped answering: nothing to check
            self.scraped_at_stop = False
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if check:
            assert self.process.returncode == 0, (
                f"band-edge exited {self.process.returncode} on SIGTERM: {self.stderr_path.read_text()[-2000:]}")

    def access_log(self, minimum: int = 1, timeout: float = 5) -> list[dict]:
        """Access-log lines (JSON), waiting until at least `minimum` are there (the log is flushed
        within about a second)."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [json.loads(line) for line in self.stdout_path.read_text().splitlines() if line.strip()]
            if len(lines) >= minimum or time.monotonic() > deadline:
                return lines

    def logs(self, timeout: float = 5) -> str:
        """Everything the server has logged (its access log, then its events), once the access log
        holds a line for every request the server has counted (`band_edge_http_requests_total` on
        the admin listener): each loop writes its lines about a second after their requests, so a
        check that reads the file at once can miss the last ones. Fails after `timeout` seconds."""
        counted = sum(int(float(line.rsplit(" ", 1)[1])) for line in self.metrics().splitlines()
                      if line.startswith("band_edge_http_requests_total{"))
        deadline = time.monotonic() + timeout
        while (written := self.stdout_path.read_text().count("\n")) < counted:
            assert time.monotonic() < deadline, (
                f"the access log has {written} lines {timeout:g} s on; the server counted {counted} requests")
            time.sleep(0.05)
        return self.stdout_path.read_text() + self.stderr_path.read_text()

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.stderr_path.read_text().splitlines() if line.startswith("{")]


@dataclass
class Response:
    status: int
    reason: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    raw_head: bytes = b""

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def header_names(self) -> list[str]:
        return [key.lower() for key, _ in self.headers]


class Client:
    """A raw socket that reads HTTP/1.1 responses exactly as they arrive."""

    def __init__(self, address, timeout: float = 5.0, rcvbuf: int | None = None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(address)
        except BaseException:
            # Else the refused socket lives as long as the exception's traceback (a load that keeps
            # its failures kept thousands of descriptors open).
            self.sock.close()
            raise
        self.buffer = b""

    def send(self, data: bytes | str) -> None:
        self.sock.sendall(data.encode("latin-1") if isinstance(data, str) else data)

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        if not chunk:
            return False
        self.buffer += chunk
        return True

    def read_response(self, head_request: bool = False) -> Response:
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill():
                raise ConnectionError(f"closed before a response head; got {self.buffer!r}")
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        version, status, reason = lines[0].split(" ", 2)
        assert version == "HTTP/1.1", lines[0]
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
        response = Response(int(status), reason, headers, raw_head=head)
        length = response.header("content-length")
        if head_request or response.status in (100, 204, 304) or length is None:
            return response
        while len(self.buffer) < int(length):
            if not self._fill():
                raise ConnectionError("closed inside a body")
        response.body, self.buffer = self.buffer[: int(length)], self.buffer[int(length):]
        return response

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the server closes (EOF or reset) within `timeout` with nothing more sent."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buffer += chunk
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()


def request(method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    for key, value in (headers or {}).items():
        lines.append(f"{key}: {value}")
    if body and not any(k.lower() in ("content-length", "transfer-encoding") for k in (headers or {})):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def fetch(server: "Server", path: str, headers: dict[str, str] | None = None, method: str = "GET") -> Response:
    """One request on a fresh connection (over h2 in the h2 pass)."""
    return exchange(server, method, path, [("Host", "127.0.0.1"), *(headers or {}).items()])


def exchange(server: "Server", method: str, path: str, headers: list[tuple[str, str]], body: bytes = b"") -> Response:
    """One request on a fresh connection, its header lines exactly as given (no Host added). In the
    h2 pass the same fields go out as one HEADERS block (Host as :authority, connection-specific
    fields dropped as RFC 9113 §8.2.2 requires) and the body as DATA."""
    if protocol() == "h2":
        from h2client import H2Connection
        connection = H2Connection(server.address)
        try:
            return connection.request(method, path, headers, body)
        finally:
            connection.close()
    client = server.connect()
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    client.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    response = client.read_response(head_request=method == "HEAD")
    client.close()
    return response


class KeepAlive:
    """One connection kept open for many requests: pipelined HTTP/1.1, or in the h2 pass streams
    opened together on one HTTP/2 connection. `send` returns the answers in the order asked."""

    def __init__(self, server: "Server"):
        self.server = server
        self.h2 = None
        self.client = None
        self.reconnect()

    def reconnect(self) -> None:
        self.close()
        if protocol() == "h2":
            from h2client import H2Connection
            self.h2 = H2Connection(self.server.address)
        else:
            self.client = self.server.connect()

    def send(self, *asked: tuple[str, str, dict[str, str]]) -> list[Response]:
        if self.h2 is not None:
            from h2client import NotProcessed
            # After a GOAWAY (a reload or a drain) the next requests go on a new connection, and
            # requests the server did not process are sent again there, as browsers do; only
            # GET and HEAD, which a repeat cannot harm.
            for attempt in range(2):
                if self.h2.gone is not None:
                    self.reconnect()
                try:
                    return self.h2.requests([(m, p, [("Host", "127.0.0.1"), *h.items()]) for m, p, h in asked])
                except NotProcessed:
                    if attempt or any(m not in ("GET", "HEAD") for m, _, _ in asked):
                        raise
                    self.reconnect()
        self.client.send(b"".join(request(m, p, h) for m, p, h in asked))
        return [self.client.read_response(head_request=m == "HEAD") for m, _, _ in asked]

    def close(self) -> None:
        for connection in (self.h2, self.client):
            if connection is not None:
                connection.close()
        self.h2 = self.client = None


class Workers:
    """Client threads, each running `work(i)` round after round (`rounds` times, or until `stop`).
    Nothing a thread raises is lost with it: `done[i]` counts thread i's completed rounds, and `join`
    and `stop` raise the first failure of any thread."""

    def __init__(self, work, threads: int, rounds: int | None = None):
        self.work, self.rounds = work, rounds
        self.stopping = threading.Event()
        self.done = [0] * threads
        self.failures: list[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self, i: int) -> None:
        try:
            while not self.stopping.is_set() and (self.rounds is None or self.done[i] < self.rounds):
                self.work(i)
                self.done[i] += 1
        except BaseException as error:
            self.failures.append(error)

    def check(self) -> None:
        """Raises the first failure of any thread so far."""
        if self.failures:
            raise AssertionError(f"{len(self.failures)} client threads failed; the first: "
                                 f"{self.failures[0]!r}") from self.failures[0]

    def join(self, timeout: float = 120) -> list[int]:
        """Waits for every thread to finish its rounds; the rounds each completed."""
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in self.threads), "client threads still running"
        self.check()
        return self.done

    def stop(self) -> list[int]:
        """Ends the rounds (each thread finishes the one it is in) and waits, as `join`."""
        self.stopping.set()
        return self.join()
