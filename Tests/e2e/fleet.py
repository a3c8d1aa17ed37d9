"""Helpers for the fleet tests (docs/fleet.md): several band-edge instances on one PostgreSQL schema, an
nginx in front of them, a private PostgreSQL a test may restart, and a small HTTP client that
carries cookies from one instance to the next."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import edge
from edge import Response, binary, built_shell, temporary_directory

BASE = os.environ.get("BAND_EDGE_TEST_POSTGRES")
PASSWORD = "a-long-demo-password-42"
# The deployment's origin without --config (development): a page from it passes the same-origin
# check on every instance, whatever port the request reaches.
ORIGIN = "http://127.0.0.1:8080"
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")


def free_port() -> int:
    """A loopback port nothing listens on now (for an instance nginx must find on a fixed port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_database(uri: str, name: str) -> str:
    """`uri` (postgresql:///db?...) naming database `name` instead."""
    scheme, rest = uri.split("://", 1)
    authority, _, tail = rest.partition("/")
    query = tail.partition("?")[2]
    return f"{scheme}://{authority}/{name}" + (f"?{query}" if query else "")


def with_schema(uri: str, schema: str) -> str:
    """`uri` with the search_path set to `schema`."""
    return uri + ("&" if "?" in uri else "?") + f"options=-csearch_path%3D{schema}"


@contextmanager
def fresh_schema(base: str | None = None):
    """A libpq URI of a new, empty schema (on `base`, default the test server); dropped afterwards."""
    import psycopg
    base = base or BASE
    schema = "fleet_" + secrets.token_hex(6)
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_schema(base, schema)
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@contextmanager
def fresh_database():
    """A libpq URI of a new, empty database on the test server (for what is per database, such as
    event triggers); dropped afterwards, its connections ended."""
    import psycopg
    name = "fleet_" + secrets.token_hex(6)
    with psycopg.connect(BASE, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield with_database(BASE, name)
    finally:
        with psycopg.connect(BASE, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def sql(uri: str, statement: str, parameters=None) -> list[tuple]:
    """Rows of one statement on its own connection (autocommit)."""
    import psycopg
    with psycopg.connect(uri, autocommit=True) as connection:
        cursor = connection.execute(statement, parameters)
        return cursor.fetchall() if cursor.description else []


def admin(database: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """`band-edge admin --database URI ARGS` with an empty environment."""
    return subprocess.run([str(binary()), "admin", "--database", database, *args], input=stdin,
                          capture_output=True, text=True, timeout=60, env={})


def add_account(database: str, email: str, name: str) -> None:
    created = admin(database, "account", "create", "--email", email, "--name", name, stdin=PASSWORD + "\n")
    assert created.returncode == 0, created.stderr


def digest(token: str) -> bytes:
    """What the store keeps of a session token."""
    return hashlib.sha256(token.encode()).digest()


class Instance(edge.Server):
    """One band-edge on `database`, on a fixed loopback port (0: a random one, kept across restarts),
    restartable with the same flags. Each start writes its own log files."""

    def __init__(self, database: str, *args: str, port: int = 0, wait: bool = True):
        self.database = database
        self.args = args
        self.dir = temporary_directory("band-edge-fleet-")
        self.shell = built_shell()
        self.data = self.dir / "data"
        self.port = port
        self.starts = 0
        self.launch()
        edge._servers.append(self)
        if wait:
            self.wait_until_listening()

    def launch(self) -> None:
        """Starts the process (without waiting for it to listen)."""
        self.starts += 1
        self.ended_by_test = self._stopped = False
        self.stdout_path = self.dir / f"stdout-{self.starts}.log"
        self.stderr_path = self.dir / f"stderr-{self.starts}.log"
        command = [str(binary()), "serve", "--listen", f"127.0.0.1:{self.port}", "--shell", str(self.shell),
                   "--database", self.database, "--no-access-log", *self.args]
        environment = {k: v for k, v in os.environ.items() if not k.startswith("BAND_LICENCE_")}
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                            env=environment)

    def wait_until_listening(self) -> None:
        self.port = self._wait_for_port()
        self.address = ("127.0.0.1", self.port)

    def restart(self) -> None:
        """SIGTERM, wait for the drain to end (exit 0), start again on the same port."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=30) == 0, self.stderr_path.read_text()
        self.launch()
        self.wait_until_listening()

    def kill(self) -> None:
        """SIGKILL: no drain, nothing flushed."""
        self.process.kill()
        self.process.wait(timeout=15)
        self.ended_by_test = True


def send(address: tuple[str, int], method: str, path: str, headers: dict[str, str] | None = None,
         body: bytes = b"", timeout: float = 15.0) -> Response:
    """One request on a fresh connection (Connection: close); raises on a connection failure or when
    no answer comes within `timeout` seconds."""
    client = edge.Client(address, timeout=timeout)
    try:
        lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{address[1]}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if body:
            lines.append(f"Content-Length: {len(body)}")
        client.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        return client.read_response(head_request=method == "HEAD")
    finally:
        client.close()


class Visitor:
    """A browser's cookie jar and origin, sending each request to whichever instance it is told."""

    def __init__(self):
        self.cookies: dict[str, str] = {}

    def send(self, target, method: str, path: str, form: dict | None = None,
             headers: dict[str, str] | None = None, timeout: float = 15.0) -> Response:
        address = target.address if hasattr(target, "address") else target
        fields = dict(headers or {})
        if method != "GET":
            fields.setdefault("Origin", ORIGIN)
        if self.cookies:
            fields["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = b""
        if form is not None:
            body = urlencode(form).encode()
            fields["Content-Type"] = "application/x-www-form-urlencoded"
        response = send(address, method, path, fields, body, timeout=timeout)
        for key, value in response.headers:
            if key.lower() == "set-cookie":
                name, _, rest = value.partition("=")
                if "Max-Age=0" in value:
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = rest.split(";")[0]
        return response

    @staticmethod
    def csrf(response: Response) -> str:
        match = re.search(rb'name="csrf" value="([^"]+)"', response.body)
        assert match, response.body[:300]
        return match.group(1).decode()

    def sign_in(self, form_from, post_to, email: str, password: str = PASSWORD, timeout: float = 15.0) -> Response:
        """The form from one instance, the POST to another (they may be the same); the form's answer
        when it is not 200."""
        page = self.send(form_from, "GET", "/sign-in", timeout=timeout)
        if page.status != 200:
            return page
        return self.send(post_to, "POST", "/sign-in", form={"csrf": self.csrf(page), "email": email,
                                                             "password": password}, timeout=timeout)

    @property
    def token(self) -> str | None:
        return self.cookies.get("__Host-bl_session")


class Nginx:
    """nginx in front of `ports` on a random loopback port, its configuration, logs and temporary
    files in a directory of its own; `stop()` ends it."""

    def __init__(self, ports: list[int], server_options: str = " max_fails=0",
                 next_upstream: str = "error timeout non_idempotent", keepalive: bool = True):
        """`server_options`, `next_upstream` and `keepalive` vary the recommended configuration (for
        showing what each setting is for)."""
        self.dir = temporary_directory("band-edge-nginx-")
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.address = ("127.0.0.1", self.port)
        servers = "\n".join(f"    server 127.0.0.1:{p}{server_options};" for p in ports)
        self.config = self.dir / "nginx.conf"
        self.config.write_text(NGINX_CONFIG.format(
            dir=self.dir, port=self.port, servers=servers, next_upstream=next_upstream,
            keepalive="keepalive 16;" if keepalive else "",
            connection='proxy_set_header Connection "";' if keepalive else ""))
        executable = shutil.which("nginx") or "/usr/sbin/nginx"
        self.process = subprocess.Popen(
            [executable, "-p", str(self.dir), "-c", str(self.config), "-e", str(self.dir / "error.log"),
             "-g", "daemon off;"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=(self.dir / "stderr.log").open("wb"))
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(self.address, timeout=1).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("nginx did not start: " + (self.dir / "error.log").read_text()
                                       + (self.dir / "stderr.log").read_text())
                time.sleep(0.02)

    def error_log(self) -> str:
        return (self.dir / "error.log").read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# docs/fleet.md's recipe (keep the two alike: the rolling-restart test runs this text), plus the
# temporary paths a private nginx needs.
NGINX_CONFIG = """\
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  upstream band_edge {{
{servers}
    {keepalive}
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://band_edge;
      proxy_http_version 1.1;
      {connection}
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_next_upstream {next_upstream};
      proxy_next_upstream_tries 3;
      proxy_connect_timeout 1s;
    }}
  }}
}}
"""


class PrivatePostgres:
    """A PostgreSQL 15 of the test's own in a temporary directory, on a Unix socket there (as
    build/lib/common.sh starts the shared one), so that the test may stop and start it."""

    def __init__(self):
        self.dir = Path(temporary_directory("band-edge-pg-"))
        os.chmod(self.dir, 0o755)
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        subprocess.run([*self.as_user, str(POSTGRES_BIN / "initdb"), "-D", str(self.dir / "data"), "-U",
                        "band_edge", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
                       check=True, capture_output=True)
        self.start()
        subprocess.run([*self.as_user, str(POSTGRES_BIN / "createdb"), "-h", str(self.dir), "-U", "band_edge",
                        "band_edge_test"], check=True, capture_output=True)
        self.uri = f"postgresql:///band_edge_test?host={self.dir}&user=band_edge"

    def start(self) -> None:
        subprocess.run([*self.as_user, str(POSTGRES_BIN / "pg_ctl"), "-D", str(self.dir / "data"), "-l",
                        str(self.dir / "server.log"), "-o", f"-k {self.dir} -c listen_addresses='' -c fsync=off",
                        "-w", "start"], check=True, capture_output=True)

    def stop(self) -> None:
        if (self.dir / "data" / "postmaster.pid").exists():
            subprocess.run([*self.as_user, str(POSTGRES_BIN / "pg_ctl"), "-D", str(self.dir / "data"), "-m",
                            "fast", "-w", "stop"], capture_output=True)
