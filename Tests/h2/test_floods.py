"""Abuse cases: floods that cost a server work or memory per frame.

RFC 9113 10.5 lets an endpoint treat abusive, legal-looking traffic as a
connection error ENHANCE_YOUR_CALM. These tests describe band-edge's
intended defences: each flood is bounded in count and time, and
the server MUST end the connection (GOAWAY ENHANCE_YOUR_CALM, or a TCP
close) before the bound. A reference server may not defend against every
flood; its expected-failures file says which.

Bounds (environment):
H2_FLOOD_COUNT=20000      frames (or frame pairs) per flood
H2_FLOOD_SECONDS=10       wall-clock bound per flood
H2_RAPID_RESET_MAX=500    responses allowed in a rapid-reset flood
H2_CONTINUATION_MAX_BYTES=1048576, H2_CONTINUATION_MAX_FRAMES=2000
H2_RESET_PROVOKED_MAX=2000  server-provoked resets per connection
H2_WRITE_TIMEOUT          the server's write deadline (s); unset: skipped
"""
from __future__ import annotations

import socket
import time

import pytest

from frames import (
    CANCEL, COMPRESSION_ERROR, ENABLE_PUSH, ENHANCE_YOUR_CALM,
    INITIAL_WINDOW_SIZE, INTERNAL_ERROR,
    PROTOCOL_ERROR, STREAM_CLOSED, ConnectionClosed, GoAwayFrame,
    continuation_frame, data_frame, encode_headers, env_float, err_name,
    flood, headers_frame, hpack_literal, ping_frame, priority_frame,
    rst_stream_frame, settings_frame, window_update_frame,
)

COUNT = int(env_float("H2_FLOOD_COUNT", 20000))
SECONDS = env_float("H2_FLOOD_SECONDS", 10.0)
RAPID_RESET_MAX = int(env_float("H2_RAPID_RESET_MAX", 500))
CONT_MAX_BYTES = int(env_float("H2_CONTINUATION_MAX_BYTES", 1 << 20))
CONT_MAX_FRAMES = int(env_float("H2_CONTINUATION_MAX_FRAMES", 2000))
PROVOKED_MAX = int(env_float("H2_RESET_PROVOKED_MAX", 2000))


def _defended(res, accept=(ENHANCE_YOUR_CALM,)) -> None:
    if res.goaway is not None:
        assert res.goaway in accept, (
            f"GOAWAY {err_name(res.goaway)}, expected "
            f"{'/'.join(err_name(c) for c in accept)}: {res.describe()}")
        return
    assert res.closed, f"no defence: {res.describe()}"


# ------------------------------------------------------------ rapid reset

def test_10_5_rapid_reset_flood(conn, target):
    """RFC 9113 10.5 / CVE-2023-44487: HEADERS immediately cancelled by
    RST_STREAM, repeated: the server MUST answer at most a few hundred
    (H2_RAPID_RESET_MAX) and then end the connection with GOAWAY
    ENHANCE_YOUR_CALM (or close) within H2_FLOOD_COUNT pairs."""
    block = encode_headers(conn.request_headers("GET", target.path))

    def pair(i):
        sid = 2 * i + 1
        return headers_frame(sid, block) + rst_stream_frame(sid, CANCEL)

    res = flood(conn, pair, COUNT, SECONDS)
    _defended(res)
    assert res.answered <= RAPID_RESET_MAX, res.describe()


# ----------------------------------------------------- CONTINUATION floods

def _continuation_flood(conn, target, frame_size, max_frames):
    head = encode_headers(conn.request_headers("GET", target.path))
    field = hpack_literal(b"x-flood", b"f" * 90, indexing="none")
    chunk = (field * (frame_size // len(field) + 1))[:frame_size]

    def unit(i):
        if i == 0:
            return headers_frame(1, head, end_headers=False)
        return continuation_frame(1, chunk, end_headers=False)

    # no PING barrier: inside a header block it would be an error itself
    res = flood(conn, unit, max_frames, SECONDS, barrier=False)
    _defended(res, accept=(ENHANCE_YOUR_CALM, PROTOCOL_ERROR,
                           COMPRESSION_ERROR, INTERNAL_ERROR))
    return res


def test_10_5_continuation_flood_large_frames(conn, target):
    """RFC 9113 10.5.1 / CVE-2024-27316 class: an endless header block in
    16 KB CONTINUATION frames: the server MUST close (GOAWAY with an error
    code, or TCP close) before H2_CONTINUATION_MAX_BYTES of header
    block."""
    _continuation_flood(conn, target, 16384,
                        max(2, CONT_MAX_BYTES // 16384))


def test_10_5_continuation_flood_small_frames(conn, target):
    """RFC 9113 10.5.1: an endless header block in tiny CONTINUATION frames
    (16 octets): the server MUST close before H2_CONTINUATION_MAX_FRAMES
    frames."""
    _continuation_flood(conn, target, 16, CONT_MAX_FRAMES)


# ----------------------------------------------- control-frame floods

def test_10_5_settings_flood(conn):
    """RFC 9113 10.5 / CVE-2019-9515: each SETTINGS demands an ACK; a flood
    MUST end in GOAWAY ENHANCE_YOUR_CALM or close within H2_FLOOD_COUNT."""
    one = settings_frame()
    _defended(flood(conn, lambda i: one, COUNT, SECONDS))


def test_10_5_ping_flood(conn):
    """RFC 9113 10.5 / CVE-2019-9512: each PING demands an ACK; a flood
    MUST end in GOAWAY ENHANCE_YOUR_CALM or close within H2_FLOOD_COUNT."""
    _defended(flood(conn, lambda i: ping_frame(i.to_bytes(8, "big")),
                    COUNT, SECONDS))


def test_10_5_priority_flood(conn):
    """RFC 9113 10.5 / CVE-2019-9513: PRIORITY frames on ever new idle
    streams (priority-tree churn): GOAWAY ENHANCE_YOUR_CALM or close
    within H2_FLOOD_COUNT."""
    _defended(flood(conn, lambda i: priority_frame(2 * i + 1, 0, 16),
                    COUNT, SECONDS))


def test_10_5_window_update_flood(conn):
    """RFC 9113 10.5: connection WINDOW_UPDATEs of 1, repeated (legal,
    useless work): GOAWAY ENHANCE_YOUR_CALM or close within
    H2_FLOOD_COUNT."""
    one = window_update_frame(0, 1)
    _defended(flood(conn, lambda i: one, COUNT, SECONDS))


def test_10_5_empty_data_flood(conn, target):
    """RFC 9113 10.5 / CVE-2019-9518: empty DATA frames without END_STREAM
    on an open stream cost work and no flow control: GOAWAY
    ENHANCE_YOUR_CALM or close within H2_FLOOD_COUNT."""
    conn.send_request(1, "POST", target.post_path, end_stream=False)
    one = data_frame(1, b"")
    _defended(flood(conn, lambda i: one, COUNT, SECONDS))


# ------------------------------------------ server-provoked resets

def test_10_5_made_you_reset_window_update_0(conn, target):
    """RFC 9113 10.5 / CVE-2025-8671 (MadeYouReset): WINDOW_UPDATE 0 on an
    open stream makes the server reset it (stream error, 6.9); repeated,
    the server MUST end the connection (GOAWAY ENHANCE_YOUR_CALM, or an
    escalated PROTOCOL_ERROR, or close) within H2_RESET_PROVOKED_MAX."""
    block = encode_headers(conn.request_headers("POST", target.post_path))

    def unit(i):
        sid = 2 * i + 1
        return headers_frame(sid, block, end_stream=False) + \
            window_update_frame(sid, 0)

    res = flood(conn, unit, PROVOKED_MAX, SECONDS)
    _defended(res, accept=(ENHANCE_YOUR_CALM, PROTOCOL_ERROR))


def test_10_5_made_you_reset_data_on_half_closed(conn, target):
    """RFC 9113 10.5 / CVE-2025-8671: DATA on a half-closed (remote) stream
    makes the server reset it (STREAM_CLOSED, 5.1); repeated, the server
    MUST end the connection (GOAWAY ENHANCE_YOUR_CALM, an escalated
    STREAM_CLOSED, or close) within H2_RESET_PROVOKED_MAX."""
    block = encode_headers(conn.request_headers("GET", target.path))

    def unit(i):
        sid = 2 * i + 1
        return headers_frame(sid, block) + data_frame(sid, b"x")

    res = flood(conn, unit, PROVOKED_MAX, SECONDS)
    _defended(res, accept=(ENHANCE_YOUR_CALM, STREAM_CLOSED))


# ------------------------------------------ a reader that never reads

def test_10_5_reader_never_opens_window(target):
    """RFC 9113 10.5/5.2: a client that advertises a window of 0 and never
    opens it pins responses in the server; the server MUST NOT hold them
    without bound: the connection is cut within H2_WRITE_TIMEOUT (plus
    half of it and H2_TIMEOUT as slack). Skipped when H2_WRITE_TIMEOUT is
    unset."""
    if target.write_timeout is None:
        pytest.skip("H2_WRITE_TIMEOUT is not set (the server's write "
                    "deadline; band-edge's default is 10)")
    c = target.conn()
    try:
        c.handshake(settings=((ENABLE_PUSH, 0), (INITIAL_WINDOW_SIZE, 0)),
                    open_window=False)
        for k in range(5):
            c.send_request(2 * k + 1, "GET", target.path)
        start = time.monotonic()
        limit = target.write_timeout * 1.5 + target.timeout
        while True:
            left = limit - (time.monotonic() - start)
            if left <= 0:
                pytest.fail(f"the connection was still open after "
                            f"{limit:.1f}s with every window at 0")
            try:
                f = c.read_frame(timeout=left)
            except ConnectionClosed:
                return
            except socket.timeout:
                continue
            if isinstance(f, GoAwayFrame):
                return
    finally:
        c.close()
