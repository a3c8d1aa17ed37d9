"""A small raw HTTP/2 client for conformance and abuse tests.

Built on hyperframe (frame parsing and serialising) and hpack (the response
decoder, integer and Huffman primitives).  Unlike the `h2` state machine it
will put anything on the wire, malformed frames included, and it reports
what the server sends back with short, configurable timeouts.

The verdict helpers follow h2spec's conventions:

* ``expect_connection_error(codes)``: GOAWAY with one of ``codes``, or the
  TCP connection closed (RFC 9113 5.4.1 lets an endpoint close without a
  GOAWAY).
* ``expect_stream_error(stream, codes)``: RST_STREAM with one of ``codes`` on
  ``stream``, or GOAWAY with one of ``codes`` (RFC 9113 5.4.2 lets a stream
  error be treated as a connection error), or the connection closed.
* ``expect_response(stream)``: a complete response (HEADERS ... END_STREAM)
  on ``stream`` with no error before it.
* ``expect_alive()``: a PING answered with an identical ACK and no GOAWAY on
  the way (the barrier used to prove a frame was accepted).

Request header blocks are encoded without touching the dynamic table
(indexed static entries, otherwise literals without indexing), so a block
the server rejects or never decodes cannot desynchronise later blocks.
"""
from __future__ import annotations

import bisect
import os
import select
import socket
import ssl
import struct
import time
from dataclasses import dataclass, field

from hpack import Decoder
from hpack.hpack import encode_integer
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hpack.table import HeaderTable
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PushPromiseFrame,
    RstStreamFrame,
    SettingsFrame,
)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types (RFC 9113 6 / 11.2)
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, \
    WINDOW_UPDATE, CONTINUATION = range(10)

# Flags
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20

# Error codes (RFC 9113 7)
NO_ERROR = 0x0
PROTOCOL_ERROR = 0x1
INTERNAL_ERROR = 0x2
FLOW_CONTROL_ERROR = 0x3
SETTINGS_TIMEOUT = 0x4
STREAM_CLOSED = 0x5
FRAME_SIZE_ERROR = 0x6
REFUSED_STREAM = 0x7
CANCEL = 0x8
COMPRESSION_ERROR = 0x9
CONNECT_ERROR = 0xA
ENHANCE_YOUR_CALM = 0xB
INADEQUATE_SECURITY = 0xC
HTTP_1_1_REQUIRED = 0xD

ERROR_NAMES = {
    0x0: "NO_ERROR", 0x1: "PROTOCOL_ERROR", 0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR", 0x4: "SETTINGS_TIMEOUT", 0x5: "STREAM_CLOSED",
    0x6: "FRAME_SIZE_ERROR", 0x7: "REFUSED_STREAM", 0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR", 0xA: "CONNECT_ERROR", 0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY", 0xD: "HTTP_1_1_REQUIRED",
}

# SETTINGS identifiers (RFC 9113 6.5.2)
HEADER_TABLE_SIZE = 0x1
ENABLE_PUSH = 0x2
MAX_CONCURRENT_STREAMS = 0x3
INITIAL_WINDOW_SIZE = 0x4
MAX_FRAME_SIZE = 0x5
MAX_HEADER_LIST_SIZE = 0x6

MAX_WINDOW = 2**31 - 1
CONN_WINDOW = 1 << 24  # the connection window handshake() opens


def err_name(code: int) -> str:
    return ERROR_NAMES.get(code, f"0x{code:x}")


class H2Failure(AssertionError):
    """The server did not do what the RFC requires."""


class ConnectionClosed(Exception):
    """The peer closed (or reset) the TCP connection."""


# ---------------------------------------------------------------- raw frames

def raw_frame(ftype: int, flags: int, stream_id: int, payload: bytes = b"",
              length: int | None = None, reserved: bool = False) -> bytes:
    """Serialise one frame by hand; ``length`` may lie, ``reserved`` sets
    the reserved bit of the stream identifier."""
    if length is None:
        length = len(payload)
    sid = (stream_id & 0x7FFFFFFF) | (0x80000000 if reserved else 0)
    return struct.pack(">I", length)[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def settings_payload(*pairs: tuple[int, int]) -> bytes:
    return b"".join(struct.pack(">HI", k, v) for k, v in pairs)


def settings_frame(*pairs: tuple[int, int], ack: bool = False,
                   stream_id: int = 0) -> bytes:
    return raw_frame(SETTINGS, ACK if ack else 0, stream_id,
                     settings_payload(*pairs))


def ping_frame(data: bytes = b"\0" * 8, ack: bool = False,
               stream_id: int = 0) -> bytes:
    return raw_frame(PING, ACK if ack else 0, stream_id, data)


def window_update_frame(stream_id: int, increment: int) -> bytes:
    return raw_frame(WINDOW_UPDATE, 0, stream_id,
                     struct.pack(">I", increment & 0x7FFFFFFF))


def rst_stream_frame(stream_id: int, code: int = CANCEL) -> bytes:
    return raw_frame(RST_STREAM, 0, stream_id, struct.pack(">I", code))


def priority_frame(stream_id: int, depends_on: int = 0, weight: int = 16,
                   exclusive: bool = False) -> bytes:
    dep = (depends_on & 0x7FFFFFFF) | (0x80000000 if exclusive else 0)
    return raw_frame(PRIORITY, 0, stream_id,
                     struct.pack(">IB", dep, weight - 1))


def goaway_frame(last_stream_id: int = 0, code: int = NO_ERROR,
                 debug: bytes = b"", stream_id: int = 0) -> bytes:
    return raw_frame(GOAWAY, 0, stream_id,
                     struct.pack(">II", last_stream_id, code) + debug)


def data_frame(stream_id: int, data: bytes = b"", end_stream: bool = False,
               pad_length: int | None = None) -> bytes:
    flags = END_STREAM if end_stream else 0
    payload = data
    if pad_length is not None:
        flags |= PADDED
        payload = bytes([pad_length]) + data + b"\0" * pad_length
    return raw_frame(DATA, flags, stream_id, payload)


def headers_frame(stream_id: int, block: bytes, end_stream: bool = True,
                  end_headers: bool = True, pad_length: int | None = None,
                  priority: tuple[int, int, bool] | None = None) -> bytes:
    """HEADERS with a ready-made header block fragment.  ``priority`` is
    (depends_on, weight 1..256, exclusive)."""
    flags = (END_STREAM if end_stream else 0) | \
        (END_HEADERS if end_headers else 0)
    payload = b""
    if pad_length is not None:
        flags |= PADDED
        payload += bytes([pad_length])
    if priority is not None:
        flags |= PRIORITY_FLAG
        dep, weight, excl = priority
        payload += struct.pack(">IB", (dep & 0x7FFFFFFF) |
                               (0x80000000 if excl else 0), weight - 1)
    payload += block
    if pad_length is not None:
        payload += b"\0" * pad_length
    return raw_frame(HEADERS, flags, stream_id, payload)


def continuation_frame(stream_id: int, block: bytes,
                       end_headers: bool = True) -> bytes:
    return raw_frame(CONTINUATION, END_HEADERS if end_headers else 0,
                     stream_id, block)


# --------------------------------------------------------------- HPACK bits

_HUFF = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)
_STATIC = HeaderTable.STATIC_TABLE  # tuple of (name, value), index 1-based


def hpack_int(value: int, prefix_bits: int, pattern: int) -> bytes:
    """An HPACK integer (RFC 7541 5.1) with ``pattern`` in the first
    octet's high bits."""
    out = bytearray(encode_integer(value, prefix_bits))
    out[0] |= pattern
    return bytes(out)


def hpack_string(s: bytes | str, huffman: bool = False) -> bytes:
    if isinstance(s, str):
        s = s.encode()
    if huffman:
        data = _HUFF.encode(s)
        return hpack_int(len(data), 7, 0x80) + data
    return hpack_int(len(s), 7, 0x00) + s


def hpack_indexed(index: int) -> bytes:
    """Indexed header field (RFC 7541 6.1)."""
    return hpack_int(index, 7, 0x80)


def hpack_literal(name: bytes | str, value: bytes | str, *,
                  indexing: str = "none", name_index: int | None = None,
                  huffman: bool = False) -> bytes:
    """Literal header field (RFC 7541 6.2): ``indexing`` is "incremental"
    (6.2.1), "none" (6.2.2) or "never" (6.2.3).  With ``name_index`` the
    name is taken from the table."""
    prefix, pattern = {"incremental": (6, 0x40), "none": (4, 0x00),
                       "never": (4, 0x10)}[indexing]
    if name_index is not None:
        return hpack_int(name_index, prefix, pattern) + \
            hpack_string(value, huffman)
    return hpack_int(0, prefix, pattern) + hpack_string(name, huffman) + \
        hpack_string(value, huffman)


def hpack_size_update(size: int) -> bytes:
    """Dynamic table size update (RFC 7541 6.3)."""
    return hpack_int(size, 5, 0x20)


def _as_bytes(x: bytes | str) -> bytes:
    return x if isinstance(x, bytes) else x.encode()


def encode_headers(headers, huffman: bool = False) -> bytes:
    """Encode without using the dynamic table: full static matches are
    indexed, static names are referenced, everything else is a literal
    without indexing.  No validation: any name or value goes out."""
    out = b""
    for name, value in headers:
        name, value = _as_bytes(name), _as_bytes(value)
        full = name_only = None
        for i, (n, v) in enumerate(_STATIC, start=1):
            if n == name:
                if v == value:
                    full = i
                    break
                if name_only is None:
                    name_only = i
        if full is not None:
            out += hpack_indexed(full)
        else:
            out += hpack_literal(name, value, name_index=name_only,
                                 huffman=huffman)
    return out


# ---------------------------------------------------------------- the client

@dataclass
class Response:
    stream_id: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    trailers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def status(self) -> int:
        for n, v in self.headers:
            if n == ":status":
                return int(v)
        raise H2Failure(f"response on stream {self.stream_id} has no :status")


class H2Conn:
    """One HTTP/2 connection to the target.

    ``timeout`` bounds every wait for a frame; nothing here sleeps to decide
    a verdict."""

    def __init__(self, host: str, port: int, *, tls: bool = False,
                 timeout: float = 2.0, authority: str | None = None,
                 scheme: str | None = None):
        self.host, self.port, self.tls = host, port, tls
        self.timeout = timeout
        self.authority = authority or f"{host}:{port}"
        self.scheme = scheme or ("https" if tls else "http")
        self.sock: socket.socket | None = None
        self.buf = bytearray()
        self.decoder = Decoder()
        self.decoder.max_header_list_size = 1 << 24
        self.server_settings: dict[int, int] = {}
        self.closed = False
        self.auto_window_update = True
        self.received: list[Frame] = []  # every frame read, in order
        self._ping_seq = 0
        self._hdr_stream: int | None = None  # server block in progress
        self._hdr_block = b""
        self._hdr_end_stream = False

    # -- transport
    def connect(self) -> "H2Conn":
        raw = socket.create_connection((self.host, self.port),
                                       timeout=self.timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE  # loopback test certificate
            ctx.set_alpn_protocols(["h2"])
            raw = ctx.wrap_socket(raw, server_hostname=self.host)
            if raw.selected_alpn_protocol() != "h2":
                raise H2Failure("TLS server did not select ALPN h2 "
                                f"(got {raw.selected_alpn_protocol()!r})")
        self.sock = raw
        return self

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def send(self, data: bytes) -> None:
        """Send raw bytes; ConnectionClosed when the peer is gone."""
        if self.sock is None:
            raise ConnectionClosed("not connected")
        try:
            self.sock.settimeout(self.timeout)
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError,
                ConnectionAbortedError, ssl.SSLError) as e:
            self.closed = True
            raise ConnectionClosed(str(e)) from e

    def try_send(self, data: bytes) -> bool:
        """Send, and report False instead of raising if the peer is gone
        (a connection error may legitimately close it mid-write)."""
        try:
            self.send(data)
            return True
        except ConnectionClosed:
            return False
        except socket.timeout:
            return False

    def _fill(self, deadline: float) -> None:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout("no frame before the deadline")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, ConnectionAbortedError,
                    BrokenPipeError) as e:
                self.closed = True
                raise ConnectionClosed(str(e)) from e
            except ssl.SSLError as e:
                self.closed = True
                raise ConnectionClosed(str(e)) from e
            if not chunk:
                self.closed = True
                raise ConnectionClosed("EOF")
            self.buf += chunk
            return

    def read_raw(self, n: int, timeout: float | None = None) -> bytes:
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(self.buf) < n:
            self._fill(deadline)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_frame(self, timeout: float | None = None) -> Frame:
        """Next frame from the server.  Raises socket.timeout or
        ConnectionClosed."""
        deadline = time.monotonic() + (timeout if timeout is not None
                                       else self.timeout)
        while len(self.buf) < 9:
            self._fill(deadline)
        frame, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
        while len(self.buf) < 9 + length:
            self._fill(deadline)
        body = memoryview(bytes(self.buf[9:9 + length]))
        del self.buf[:9 + length]
        frame.parse_body(body)
        self._after_read(frame)
        self.received.append(frame)
        return frame

    def _after_read(self, frame: Frame) -> None:
        if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
            self.server_settings.update(frame.settings)
            self.send(settings_frame(ack=True))
        elif isinstance(frame, (HeadersFrame, PushPromiseFrame)):
            self._hdr_stream = frame.stream_id
            self._hdr_block = frame.data
            self._hdr_end_stream = (isinstance(frame, HeadersFrame) and
                                    "END_STREAM" in frame.flags)
            if "END_HEADERS" in frame.flags:
                self._decode_block(frame)
        elif isinstance(frame, ContinuationFrame):
            self._hdr_block += frame.data
            if "END_HEADERS" in frame.flags:
                self._decode_block(frame)
        elif isinstance(frame, DataFrame) and self.auto_window_update:
            n = frame.flow_controlled_length
            if n:
                self.try_send(window_update_frame(0, n) +
                              (window_update_frame(frame.stream_id, n)
                               if "END_STREAM" not in frame.flags else b""))

    def _decode_block(self, frame: Frame) -> None:
        frame.decoded = [(n, v) for n, v in
                         self.decoder.decode(self._hdr_block, raw=False)]
        frame.ends_stream = self._hdr_end_stream
        self._hdr_stream = None
        self._hdr_block = b""

    # -- session set-up
    def handshake(self, settings: tuple[tuple[int, int], ...] | None = None,
                  wait_ack: bool = True,
                  open_window: bool = True) -> "H2Conn":
        """Client preface and SETTINGS; wait for the server's SETTINGS (RFC
        9113 3.4: it MUST be the server's first frame) and its ACK of ours."""
        if settings is None:
            settings = ((ENABLE_PUSH, 0), (INITIAL_WINDOW_SIZE, 1 << 20))
        self.send(PREFACE + settings_frame(*settings) +
                  (window_update_frame(0, CONN_WINDOW - 65535)
                   if open_window else b""))
        first = self.read_frame()
        if not isinstance(first, SettingsFrame) or "ACK" in first.flags:
            raise H2Failure(f"server's first frame is not SETTINGS: {first}")
        if wait_ack:
            self.read_until(lambda f: isinstance(f, SettingsFrame)
                            and "ACK" in f.flags, "SETTINGS ACK")
        return self

    # -- request helpers
    def request_headers(self, method: str = "GET", path: str = "/",
                        extra=(), scheme: str | None = None,
                        authority: str | None = None):
        return [(":method", method), (":scheme", scheme or self.scheme),
                (":path", path), (":authority", authority or self.authority),
                *extra]

    def send_headers(self, stream_id: int, headers, end_stream: bool = True,
                     end_headers: bool = True, **kw) -> None:
        self.send(headers_frame(stream_id, encode_headers(headers),
                                end_stream=end_stream,
                                end_headers=end_headers, **kw))

    def send_request(self, stream_id: int, method: str = "GET",
                     path: str = "/", extra=(), end_stream: bool = True):
        self.send_headers(stream_id, self.request_headers(method, path, extra),
                          end_stream=end_stream)

    # -- reading helpers
    def read_until(self, pred, what: str, timeout: float | None = None):
        """Read frames until ``pred(frame)``; fail on GOAWAY, close or
        timeout."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            try:
                f = self.read_frame(max(0.0, deadline - time.monotonic()))
            except socket.timeout:
                raise H2Failure(f"timed out waiting for {what}") from None
            except ConnectionClosed as e:
                raise H2Failure(f"connection closed waiting for {what} "
                                f"({e})") from None
            if pred(f):
                return f
            if isinstance(f, GoAwayFrame):
                raise H2Failure(f"GOAWAY {err_name(f.error_code)} while "
                                f"waiting for {what} (debug "
                                f"{f.additional_data[:100]!r})")

    def ping(self) -> bytes:
        self._ping_seq += 1
        data = b"h2suite" + bytes([self._ping_seq & 0xFF])
        self.send(ping_frame(data))
        return data

    def expect_alive(self, allow_rst: bool = False) -> None:
        """A PING gets an identical ACK, with no GOAWAY or RST before it.
        RST_STREAM on any stream fails too: callers use this after sending
        something the server MUST accept."""
        data = self.ping()

        def pred(f):
            if isinstance(f, RstStreamFrame) and not allow_rst:
                raise H2Failure(f"unexpected RST_STREAM {err_name(f.error_code)}"
                                f" on stream {f.stream_id}")
            return isinstance(f, PingFrame) and "ACK" in f.flags and \
                f.opaque_data == data
        self.read_until(pred, "PING ACK")

    def expect_connection_error(self, *codes: int,
                                timeout: float | None = None) -> str:
        """RFC 9113 5.4.1: GOAWAY with one of ``codes``, or close."""
        deadline = time.monotonic() + (timeout or self.timeout)
        want = "/".join(err_name(c) for c in codes)
        while True:
            try:
                f = self.read_frame(max(0.0, deadline - time.monotonic()))
            except ConnectionClosed:
                return "closed"
            except socket.timeout:
                raise H2Failure(f"expected GOAWAY {want} or close; the "
                                f"connection stayed open") from None
            if isinstance(f, GoAwayFrame):
                if f.error_code in codes:
                    return f"GOAWAY {err_name(f.error_code)}"
                raise H2Failure(f"expected GOAWAY {want}, got GOAWAY "
                                f"{err_name(f.error_code)}")

    def expect_stream_error(self, stream_id: int, *codes: int,
                            timeout: float | None = None,
                            allow_response: bool = False) -> str:
        """RFC 9113 5.4.2: RST_STREAM with one of ``codes`` on
        ``stream_id``, or a connection error with one of them, or close.
        A response on the stream fails unless ``allow_response`` (for a
        valid request followed by the offending frame)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        want = "/".join(err_name(c) for c in codes)
        answered = None
        while True:
            try:
                f = self.read_frame(max(0.0, deadline - time.monotonic()))
            except ConnectionClosed:
                return "closed"
            except socket.timeout:
                got = "nothing" if answered is None else \
                    f"only a response (:status {answered}), no reset"
                raise H2Failure(f"expected RST_STREAM {want} on stream "
                                f"{stream_id} or GOAWAY {want}; got "
                                f"{got}") from None
            if isinstance(f, HeadersFrame) and f.stream_id == stream_id \
                    and answered is None:
                answered = dict(getattr(f, "decoded", []) or []).get(
                    ":status", "?")
            if isinstance(f, GoAwayFrame):
                if f.error_code in codes:
                    return f"GOAWAY {err_name(f.error_code)}"
                raise H2Failure(f"expected {want}, got GOAWAY "
                                f"{err_name(f.error_code)}")
            if isinstance(f, RstStreamFrame) and f.stream_id == stream_id:
                if f.error_code in codes:
                    return f"RST_STREAM {err_name(f.error_code)}"
                raise H2Failure(f"expected RST_STREAM {want} on stream "
                                f"{stream_id}, got {err_name(f.error_code)}")
            if isinstance(f, HeadersFrame) and f.stream_id == stream_id \
                    and not allow_response:
                st = dict(getattr(f, "decoded", []) or []).get(":status")
                raise H2Failure(f"expected {want} on stream {stream_id}; the "
                                f"server answered it (:status {st})")

    def expect_response(self, stream_id: int,
                        timeout: float | None = None) -> Response:
        """A complete response on ``stream_id``; 1xx heads are skipped."""
        resp = Response(stream_id)
        deadline = time.monotonic() + (timeout or self.timeout)
        got_final = False
        while True:
            def pred(f):
                if f.stream_id != stream_id:
                    return False
                if isinstance(f, RstStreamFrame):
                    raise H2Failure(f"RST_STREAM {err_name(f.error_code)} "
                                    f"on stream {stream_id} instead of a "
                                    "response")
                return isinstance(f, (HeadersFrame, DataFrame,
                                      ContinuationFrame))
            f = self.read_until(pred, f"a response on stream {stream_id}",
                                max(0.01, deadline - time.monotonic()))
            if isinstance(f, DataFrame):
                resp.body += f.data
            elif hasattr(f, "decoded"):
                if not got_final:
                    st = dict(f.decoded).get(":status", "")
                    if st.startswith("1") and st != "101":
                        continue
                    resp.headers = f.decoded
                    got_final = True
                else:
                    resp.trailers = f.decoded
            if getattr(f, "ends_stream", False) or (
                    isinstance(f, DataFrame) and "END_STREAM" in f.flags):
                if not got_final:
                    raise H2Failure(f"stream {stream_id} ended without a "
                                    "response head")
                return resp

    def drain(self, timeout: float = 0.0) -> list[Frame]:
        """Frames already readable (``timeout`` 0: only those buffered)."""
        out = []
        while True:
            try:
                if timeout == 0.0 and len(self.buf) < 9:
                    r, _, _ = select.select([self.sock], [], [], 0)
                    if not r and not (self.tls and self.sock.pending()):
                        return out
                out.append(self.read_frame(timeout or 0.05))
            except socket.timeout:
                return out


def parse_target(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"H2_TARGET must be host:port, not {value!r}")
    return host.strip("[]"), int(port)


def env_float(name: str, default: float) -> float:
    v = os.environ.get(name, "")
    return float(v) if v else default


# ------------------------------------------------------------------ floods

@dataclass
class FloodResult:
    sent: int = 0                # units written completely
    goaway: int | None = None    # GOAWAY error code, if one came
    goaway_last_stream: int | None = None
    closed: bool = False         # TCP closed or reset by the server
    answered: int = 0            # streams that got a response HEADERS
    resets: int = 0              # RST_STREAM frames from the server
    elapsed: float = 0.0
    frames_in: int = 0

    def describe(self) -> str:
        g = "none" if self.goaway is None else err_name(self.goaway)
        return (f"sent {self.sent} units in {self.elapsed:.1f}s; GOAWAY "
                f"{g}; closed {self.closed}; {self.answered} streams "
                f"answered; {self.resets} RST_STREAM from the server")


def flood(conn: H2Conn, unit, count: int, seconds: float,
          batch: int = 64, barrier: bool = True) -> FloodResult:
    """Write ``unit(i)`` (bytes) for i in range(count), in batches, while
    reading what the server sends (so neither side blocks on a full
    socket).  Stops at a GOAWAY, a close, ``count`` units or ``seconds``.
    Then, unless the server already ended the connection, a PING barrier
    (everything the server does about the flood arrives before its ACK),
    or with ``barrier=False`` (inside a header block, where a PING would
    itself be an error) a wait of ``conn.timeout`` for a GOAWAY or close.

    Frames from the server are scanned, not decoded (headers are counted,
    never read), so the connection is not usable afterwards."""
    res = FloodResult()
    sock = conn.sock
    start = time.monotonic()
    end = start + seconds
    pending = bytearray(conn.buf)  # unread input from before
    conn.buf.clear()
    inbuf = pending
    out = bytearray()
    answered: set[int] = set()
    i = 0
    ping_data = b"floodend"
    sock.setblocking(False)

    def scan() -> bool:
        """Consume complete frames from inbuf; True when the server ended
        the connection (GOAWAY) or the barrier came back."""
        done = False
        while len(inbuf) >= 9:
            length = int.from_bytes(inbuf[:3], "big")
            if len(inbuf) < 9 + length:
                break
            ftype, flags = inbuf[3], inbuf[4]
            sid = int.from_bytes(inbuf[5:9], "big") & 0x7FFFFFFF
            payload = bytes(inbuf[9:9 + length])
            del inbuf[:9 + length]
            res.frames_in += 1
            if ftype == HEADERS and sid:
                answered.add(sid)
            elif ftype == RST_STREAM:
                res.resets += 1
            elif ftype == GOAWAY and len(payload) >= 8:
                res.goaway_last_stream = int.from_bytes(payload[:4],
                                                        "big") & 0x7FFFFFFF
                res.goaway = int.from_bytes(payload[4:8], "big")
                done = True
            elif ftype == SETTINGS and not flags & ACK:
                out.extend(settings_frame(ack=True))
            elif ftype == PING and flags & ACK and payload == ping_data:
                done = True
        return done

    ends: list[int] = []   # cumulative byte offset where each unit ends
    queued = 0             # bytes of units queued so far
    written = 0            # bytes of units written to the socket
    extra = 0              # bytes of our own frames (ACKs, PING) in out
    tail = False           # after the last unit: waiting for the verdict
    try:
        while True:
            now = time.monotonic()
            if not tail and (i >= count or now >= end):
                tail = True
                end = now + conn.timeout
                if barrier:
                    out.extend(ping_frame(ping_data))
            if tail and now >= end:
                break
            while not tail and len(out) < 65536 and i < count:
                for _ in range(batch):
                    if i >= count:
                        break
                    u = unit(i)
                    out.extend(u)
                    queued += len(u)
                    ends.append(queued)
                    i += 1
            want_w = [sock] if out else []
            r, w, _ = select.select([sock], want_w, [], 0.05)
            if r or (conn.tls and sock.pending()):
                try:
                    chunk = sock.recv(262144)
                except (ssl.SSLWantReadError, BlockingIOError):
                    chunk = None
                if chunk == b"":
                    res.closed = True
                    break
                if chunk:
                    before = len(out)
                    inbuf.extend(chunk)
                    stop = scan()
                    extra += len(out) - before
                    if stop:
                        break
            if w and out:
                try:
                    n = sock.send(out[:65536])
                    del out[:n]
                    written += n
                except (ssl.SSLWantWriteError, BlockingIOError):
                    pass
    except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
            ssl.SSLError, OSError):
        res.closed = True
    # units count as sent once all their bytes were written (our own ACKs
    # interleaved make this an upper bound by at most a few units)
    res.sent = bisect.bisect_right(ends, written)
    res.answered = len(answered)
    res.elapsed = time.monotonic() - start
    conn.closed = conn.closed or res.closed
    try:
        sock.setblocking(True)
    except OSError:
        pass
    return res
