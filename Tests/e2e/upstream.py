"""A recording API core for the gateway's end-to-end tests: a threaded HTTP/1.1 server on a loopback
port or a Unix socket, written on raw sockets so that it can misbehave on purpose. It records every
request as received (raw bytes, parsed head, body) and answers each with what `behaviour` says:

- "json" (default): 200, a small JSON body naming the request, keep-alive;
- "status:<n>": that status with a JSON body;
- "close-idle:<seconds>": like "json", then closes each connection idle that long (no warning);
- "close-after": answers, then closes at once without `Connection: close` (a stale keep-alive);
- "reset-mid-body": sends the head and half the body, then resets the connection;
- "stall": reads the request and never answers;
- "stall:<seconds>": reads the request, waits that long, then answers as "json";
- "slow-body:<seconds>": sends the head and half the body at once, the rest that long after;
- "bad-framing": a Content-Length and Transfer-Encoding together;
- "huge-head": a response head of 20 KiB;
- "set-cookie": a JSON answer with Set-Cookie, Server, X-Powered-By, Cache-Control: public and a
  hop-by-hop field named in Connection.

`behaviour` may be changed between requests. With `tls` (a certificate and key file) it speaks
HTTPS."""

from __future__ import annotations

import json
import os
import socket
import ssl
import struct
import tempfile
import threading
import time


class Received:
    def __init__(self, raw: bytes, connection: int):
        self.raw = raw
        self.connection = connection
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.method, self.target, self.version = lines[0].split(" ")
        self.fields: list[tuple[str, str]] = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.fields.append((name, value.strip()))

    def all(self, name: str) -> list[str]:
        return [v for n, v in self.fields if n.lower() == name.lower()]

    def header(self, name: str) -> str | None:
        values = self.all(name)
        return values[0] if values else None


class RecordingUpstream:
    def __init__(self, unix: bool = False, behaviour: str = "json", tls: tuple[str, str] | None = None):
        self.behaviour = behaviour
        self.tls = None
        if tls:
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(*tls)
        self.handshake_failures = 0
        self.requests: list[Received] = []
        self.connections = 0
        self.lock = threading.Lock()
        self.path = None
        if unix:
            self.path = os.path.join(tempfile.mkdtemp(prefix="band-edge-core-"), "core.sock")
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(self.path)
            self.url = f"unix:{self.path}"
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(("127.0.0.1", 0))
            scheme = "https" if tls else "http"
            self.url = f"{scheme}://127.0.0.1:{self.sock.getsockname()[1]}"
        self.sock.listen(64)
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self):
        self.stopped = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        if self.path:
            try:
                os.unlink(self.path)
                os.rmdir(os.path.dirname(self.path))
            except OSError:
                pass

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.01)
        with self.lock:
            return list(self.requests)

    def _accept(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                number = self.connections
            threading.Thread(target=self._converse, args=(conn, number), daemon=True).start()

    @staticmethod
    def _request_length(buffer: bytes) -> int | None:
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        length = 0
        for line in buffer[:end].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        return end + 4 + length if len(buffer) >= end + 4 + length else None

    def _converse(self, conn: socket.socket, number: int):
        buffer = b""
        if self.tls:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except (ssl.SSLError, OSError):
                with self.lock:
                    self.handshake_failures += 1
                conn.close()
                return
        try:
            while True:
                behaviour = self.behaviour
                if behaviour.startswith("close-idle:"):
                    conn.settimeout(float(behaviour.split(":", 1)[1]))
                while self._request_length(buffer) is None:
                    try:
                        data = conn.recv(65536)
                    except socket.timeout:
                        return
                    if not data:
                        return
                    buffer += data
                length = self._request_length(buffer)
                request = Received(buffer[:length], number)
                buffer = buffer[length:]
                with self.lock:
                    self.requests.append(request)
                if not self._answer(conn, request, self.behaviour):
                    return
        except OSError:
            pass
        finally:
            conn.close()

    @staticmethod
    def _json(request: Received, status: int = 200) -> bytes:
        return json.dumps({"method": request.method, "target": request.target, "status": status}).encode()

    def _answer(self, conn: socket.socket, request: Received, behaviour: str) -> bool:
        """Answers `request`; False when the connection is to close."""
        status = int(behaviour.split(":", 1)[1]) if behaviour.startswith("status:") else 200
        body = self._json(request, status)
        if behaviour == "stall":
            time.sleep(30)
            return False
        if behaviour.startswith("stall:"):
            time.sleep(float(behaviour.split(":", 1)[1]))
        if behaviour.startswith("slow-body:"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                         % len(body) + body[: len(body) // 2])
            time.sleep(float(behaviour.split(":", 1)[1]))
            conn.sendall(body[len(body) // 2:])
            return True
        if behaviour == "bad-framing":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
            return False
        if behaviour == "huge-head":
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 20 * 1024 + b"\r\nContent-Length: 0\r\n\r\n")
            return False
        if behaviour == "reset-mid-body":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                         % len(body) + body[: len(body) // 2])
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        extra = b""
        if behaviour == "set-cookie":
            extra = (b"Set-Cookie: core=1; Path=/\r\nServer: core/1.0\r\nX-Powered-By: core\r\n"
                     b"Cache-Control: public, max-age=600\r\nConnection: x-core-hop\r\nX-Core-Hop: 1\r\n"
                     b"ETag: \"v1\"\r\n")
        head = (b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % (status, len(body))
                + extra + b"\r\n")
        conn.sendall(head + (b"" if request.method == "HEAD" else body))
        return behaviour != "close-after"
