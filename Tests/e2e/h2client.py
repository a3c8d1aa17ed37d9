"""A small HTTP/2 client for the end-to-end suites (BAND_EDGE_E2E_PROTOCOL=h2): prior-knowledge h2c
on a plain loopback socket, on the PyPI `h2` package. It sends the requests the HTTP/1.1 helpers
send and returns the same `edge.Response` shape: status, headers as received (lower-case names, no
reason phrase), body. The library checks every frame and header block it receives, so a server
that sent a connection-specific header or a malformed block fails the test here."""

from __future__ import annotations

import socket

import h2.config
import h2.connection
import h2.events

# RFC 9113 §8.2.2: connection-specific fields must not appear in HTTP/2; Host becomes :authority.
_DROPPED = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"}


class NotProcessed(ConnectionError):
    """GOAWAY named a last stream below one of ours: the server never saw that request (RFC 9113
    §6.8), so a client may send it again on a new connection, as browsers do."""


class H2Connection:
    """One h2c connection; `request` runs one stream, `requests` opens several at once (the HTTP/2
    counterpart of pipelining) and returns their answers in the order asked."""

    def __init__(self, address, timeout: float = 5.0):
        self.sock = socket.create_connection(address, timeout=timeout)
        self.conn = h2.connection.H2Connection(config=h2.config.H2Configuration(
            client_side=True, header_encoding=None, normalize_inbound_headers=False))
        self.conn.initiate_connection()
        self._flush()
        self.streams: dict[int, dict] = {}
        self.pending: dict[int, bytes] = {}
        # The last stream a GOAWAY said the server processes (None: no GOAWAY yet).
        self.gone: int | None = None

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def _open(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> int:
        authority = next((v for k, v in headers if k.lower() == "host"), "127.0.0.1")
        block = [(":method", method), (":scheme", "http"), (":authority", authority), (":path", path)]
        block += [(k.lower(), v) for k, v in headers if k.lower() not in _DROPPED]
        if body and not any(k == "content-length" for k, _ in block):
            block.append(("content-length", str(len(body))))
        stream = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream, block, end_stream=not body)
        self.streams[stream] = {"method": method, "headers": None, "body": bytearray(), "done": False}
        if body:
            self.pending[stream] = body
            self._send_pending()
        self._flush()
        return stream

    def _send_pending(self) -> None:
        """Sends request bodies as far as the peer's flow-control windows allow."""
        for stream, body in list(self.pending.items()):
            while body:
                room = min(self.conn.local_flow_control_window(stream), self.conn.max_outbound_frame_size)
                if room <= 0:
                    break
                self.conn.send_data(stream, body[:room], end_stream=len(body) <= room)
                body = body[room:]
            if body:
                self.pending[stream] = body
            else:
                del self.pending[stream]

    def _receive(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the HTTP/2 connection")
        for event in self.conn.receive_data(data):
            state = self.streams.get(getattr(event, "stream_id", 0))
            if isinstance(event, h2.events.ResponseReceived):
                state["headers"] = event.headers
            elif isinstance(event, h2.events.InformationalResponseReceived):
                pass
            elif isinstance(event, h2.events.DataReceived):
                state["body"] += event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                state["done"] = True
            elif isinstance(event, h2.events.StreamReset):
                raise ConnectionError(f"stream {event.stream_id} reset by the server: {event.error_code!r}")
            elif isinstance(event, h2.events.ConnectionTerminated):
                # Streams up to the last one named are still answered; later ones never will be.
                self.gone = event.last_stream_id
                if event.error_code != 0:
                    raise ConnectionError(f"GOAWAY {event.error_code!r}")
                if any(not s["done"] and id > event.last_stream_id for id, s in self.streams.items()):
                    raise NotProcessed(f"GOAWAY with last stream {event.last_stream_id}: a stream was not processed")
            elif isinstance(event, h2.events.WindowUpdated):
                self._send_pending()
        self._flush()

    def _response(self, stream: int):
        from edge import Response
        while not self.streams[stream]["done"]:
            self._receive()
        state = self.streams.pop(stream)
        fields = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in state["headers"]]
        status = int(next(v for k, v in fields if k == ":status"))
        headers = [(k, v) for k, v in fields if not k.startswith(":")]
        head = f"HTTP/2 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
        return Response(status, "", headers, bytes(state["body"]), raw_head=head.rstrip("\r\n").encode("latin-1"))

    def request(self, method: str, path: str, headers: list[tuple[str, str]] | None = None, body: bytes = b""):
        return self._response(self._open(method, path, list(headers or []), body))

    def requests(self, asked: list[tuple[str, str, list[tuple[str, str]]]]):
        """Opens every (method, path, headers) stream before reading any answer."""
        streams = [self._open(method, path, list(headers), b"") for method, path, headers in asked]
        return [self._response(stream) for stream in streams]

    def close(self) -> None:
        try:
            self.conn.close_connection()
            self._flush()
        except OSError:
            pass
        self.sock.close()
