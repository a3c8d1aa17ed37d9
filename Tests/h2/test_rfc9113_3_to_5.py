"""RFC 9113 sections 3 to 5: the preface, frame format and size, header
compression as connection state, stream states and identifiers,
concurrency, flow-control basics, error handling and extensions."""
from __future__ import annotations

import socket

import pytest

from frames import (
    CANCEL, COMPRESSION_ERROR, ENABLE_PUSH,
    FRAME_SIZE_ERROR, HEADERS, INITIAL_WINDOW_SIZE, MAX_CONCURRENT_STREAMS,
    PING, PREFACE, PROTOCOL_ERROR, REFUSED_STREAM, STREAM_CLOSED,
    ConnectionClosed, DataFrame, GoAwayFrame, HeadersFrame,
    SettingsFrame, continuation_frame, data_frame, encode_headers,
    headers_frame, hpack_indexed, hpack_literal, ping_frame, priority_frame,
    raw_frame, rst_stream_frame, settings_frame, window_update_frame,
)

WINDOW_0 = ((ENABLE_PUSH, 0), (INITIAL_WINDOW_SIZE, 0))


# ------------------------------------------------------------------ 3.4

def test_3_4_server_preface_is_settings(raw_conn):
    """RFC 9113 3.4: the server connection preface is a SETTINGS frame,
    which MUST be the first frame the server sends."""
    raw_conn.send(PREFACE + settings_frame())
    first = raw_conn.read_frame()
    assert isinstance(first, SettingsFrame) and "ACK" not in first.flags


def test_3_4_invalid_preface_closes(raw_conn):
    """RFC 9113 3.4: an invalid connection preface MUST be treated as a
    connection error of type PROTOCOL_ERROR (GOAWAY, or the TCP connection
    closed)."""
    raw_conn.try_send(b"INVALID CONNECTION PREFACE\r\n\r\n" + settings_frame())
    raw_conn.expect_connection_error(PROTOCOL_ERROR)


def test_3_4_preface_not_followed_by_settings(raw_conn):
    """RFC 9113 3.4: the client preface MUST be followed by a SETTINGS
    frame; a PING first is an invalid preface: connection error
    PROTOCOL_ERROR."""
    raw_conn.try_send(PREFACE + ping_frame(b"notfirst"))
    raw_conn.expect_connection_error(PROTOCOL_ERROR)


def test_3_4_http1_request_instead_of_preface(raw_conn):
    """RFC 9113 3.4: an HTTP/1.1 request on a prior-knowledge connection
    is not the preface: the server MUST NOT go on as HTTP/2 (it closes,
    with or without GOAWAY PROTOCOL_ERROR, or answers in HTTP/1.1 and
    closes)."""
    raw_conn.try_send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        data = raw_conn.read_raw(9, timeout=raw_conn.timeout)
    except ConnectionClosed:
        return
    except socket.timeout:
        pytest.fail("the server neither closed nor answered")
    if data.startswith(b"HTTP/1."):
        return
    raw_conn.buf[:0] = data
    raw_conn.expect_connection_error(PROTOCOL_ERROR)


# ------------------------------------------------------------------ 4.1

def test_4_1_unknown_frame_type_ignored(conn):
    """RFC 9113 4.1/5.5: a frame of unknown type MUST be ignored and
    discarded."""
    conn.send(raw_frame(0xFA, 0, 0, b"unknown payload"))
    conn.expect_alive()


def test_4_1_undefined_flags_ignored(conn):
    """RFC 9113 4.1: undefined flags MUST be ignored."""
    conn.send(raw_frame(PING, 0x16, 0, b"flagsflg"))
    f = conn.read_until(lambda f: f.type == PING, "PING ACK")
    assert "ACK" in f.flags and f.opaque_data == b"flagsflg"


def test_4_1_reserved_bit_ignored(conn, target):
    """RFC 9113 4.1: the reserved bit of the stream identifier MUST be
    ignored on receipt."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.send(raw_frame(HEADERS, 0x5, 1, block, reserved=True))
    assert conn.expect_response(1).status == 200


# ------------------------------------------------------------------ 4.2

def test_4_2_data_of_16384_octets_accepted(conn, target):
    """RFC 9113 4.2: an endpoint MUST be capable of receiving frames of up
    to 2^14 octets."""
    conn.send_request(1, "POST", target.post_path, end_stream=False)
    conn.send(data_frame(1, b"x" * 16384, end_stream=True))
    assert conn.expect_response(1).status < 500


def test_4_2_data_over_max_frame_size(conn, target):
    """RFC 9113 4.2: a frame larger than SETTINGS_MAX_FRAME_SIZE MUST be
    answered with FRAME_SIZE_ERROR (stream or connection error for
    DATA)."""
    conn.send_request(1, "POST", target.post_path, end_stream=False)
    conn.try_send(data_frame(1, b"x" * 16385, end_stream=True))
    conn.expect_stream_error(1, FRAME_SIZE_ERROR)


def test_4_2_headers_over_max_frame_size(conn, target):
    """RFC 9113 4.2: a HEADERS frame over SETTINGS_MAX_FRAME_SIZE can alter
    connection state (HPACK), so it MUST be a connection error
    FRAME_SIZE_ERROR."""
    hdrs = conn.request_headers("GET", target.path) + \
        [(f"x-big-{i}", "y" * 100) for i in range(170)]
    block = encode_headers(hdrs)
    assert len(block) > 16384
    conn.try_send(headers_frame(1, block))
    conn.expect_connection_error(FRAME_SIZE_ERROR)


def test_4_2_length_lies_beyond_frame_limit_on_settings(conn):
    """RFC 9113 4.2: a SETTINGS frame longer than the maximum frame size
    MUST be a connection error FRAME_SIZE_ERROR."""
    conn.try_send(settings_frame(*[(0xF0, i) for i in range(2731)]))
    conn.expect_connection_error(FRAME_SIZE_ERROR)


# ------------------------------------------------------------------ 4.3

def test_4_3_invalid_header_block(conn):
    """RFC 9113 4.3: a header block that cannot be decoded MUST be a
    connection error COMPRESSION_ERROR."""
    # literal with incremental indexing whose name length runs past the end
    conn.try_send(headers_frame(1, b"\x40\x7f\xff\xff\xff\x0f"))
    conn.expect_connection_error(COMPRESSION_ERROR)


def test_4_3_priority_inside_header_block(conn, target):
    """RFC 9113 4.3: a header block MUST be sent as a contiguous sequence;
    a PRIORITY frame between HEADERS and CONTINUATION is a connection
    error PROTOCOL_ERROR."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.try_send(headers_frame(1, block, end_headers=False) +
                  priority_frame(1, 0, 16) + continuation_frame(1, b""))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_4_3_headers_on_other_stream_inside_header_block(conn, target):
    """RFC 9113 4.3: HEADERS on another stream inside an unfinished header
    block is a connection error PROTOCOL_ERROR."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.try_send(headers_frame(1, block, end_headers=False) +
                  headers_frame(3, block))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_4_3_rejected_request_still_updates_hpack_state(conn, target):
    """RFC 9113 4.3: a receiver MUST decode every header block, even for a
    stream it rejects, so the dynamic table stays in step: an entry added
    by a malformed request is usable by the next one."""
    bad = encode_headers([(":method", "GET"), (":scheme", conn.scheme),
                          (":path", target.path),
                          (":authority", conn.authority),
                          (":bogus", "pseudo")]) + \
        hpack_literal(b"x-h2suite-kept", b"yes", indexing="incremental")
    conn.send(headers_frame(1, bad))
    how = conn.expect_stream_error(1, PROTOCOL_ERROR)
    if not how.startswith("RST_STREAM"):
        return  # escalated to a connection error: no later block to check
    good = encode_headers(conn.request_headers("GET", target.path)) + \
        hpack_indexed(62)
    conn.send(headers_frame(3, good))
    assert conn.expect_response(3).status == 200


def test_4_3_cancelled_request_still_updates_hpack_state(conn, target):
    """RFC 9113 4.3: the header block of a stream the client reset at once
    MUST still be decoded: its new dynamic-table entry is usable by the
    next request."""
    block = encode_headers(conn.request_headers("POST", target.post_path)) \
        + hpack_literal(b"x-h2suite-cancelled", b"yes",
                        indexing="incremental")
    conn.send(headers_frame(1, block, end_stream=False) +
              rst_stream_frame(1, CANCEL))
    good = encode_headers(conn.request_headers("GET", target.path)) + \
        hpack_indexed(62)
    conn.send(headers_frame(3, good))
    assert conn.expect_response(3).status == 200


# ------------------------------------------------------------------ 5.1

def test_5_1_idle_data(conn):
    """RFC 9113 5.1 idle: DATA on an idle stream MUST be a connection error
    PROTOCOL_ERROR."""
    conn.try_send(data_frame(1, b"test", end_stream=True))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_1_idle_rst_stream(conn):
    """RFC 9113 5.1 idle / 6.4: RST_STREAM on an idle stream MUST be a
    connection error PROTOCOL_ERROR."""
    conn.try_send(rst_stream_frame(1, CANCEL))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_1_idle_window_update(conn):
    """RFC 9113 5.1 idle: WINDOW_UPDATE on an idle stream MUST be a
    connection error PROTOCOL_ERROR."""
    conn.try_send(window_update_frame(1, 100))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_1_idle_continuation(conn, target):
    """RFC 9113 5.1 idle / 6.10: CONTINUATION on an idle stream MUST be a
    connection error PROTOCOL_ERROR."""
    conn.try_send(continuation_frame(
        1, encode_headers(conn.request_headers("GET", target.path))))
    conn.expect_connection_error(PROTOCOL_ERROR)


def _half_closed_remote(target):
    """Stream 1 half-closed (remote): the request ended, and the response
    cannot finish because our stream window is 0."""
    c = target.conn()
    c.handshake(settings=WINDOW_0)
    c.send_request(1, "GET", target.path)
    c.read_until(lambda f: isinstance(f, HeadersFrame) and f.stream_id == 1,
                 "response HEADERS on stream 1")
    return c


def test_5_1_half_closed_remote_data(target):
    """RFC 9113 5.1 half-closed (remote): DATA MUST be a stream error
    STREAM_CLOSED."""
    c = _half_closed_remote(target)
    try:
        c.try_send(data_frame(1, b"test", end_stream=True))
        c.expect_stream_error(1, STREAM_CLOSED)
    finally:
        c.close()


def test_5_1_half_closed_remote_headers(target):
    """RFC 9113 5.1 half-closed (remote): HEADERS MUST be a stream error
    STREAM_CLOSED."""
    c = _half_closed_remote(target)
    try:
        c.try_send(headers_frame(1, encode_headers(
            c.request_headers("GET", target.path))))
        c.expect_stream_error(1, STREAM_CLOSED)
    finally:
        c.close()


def test_5_1_half_closed_remote_continuation(target):
    """RFC 9113 5.1 / 6.10: a CONTINUATION on a half-closed (remote) stream
    follows no open header block: STREAM_CLOSED or PROTOCOL_ERROR."""
    c = _half_closed_remote(target)
    try:
        c.try_send(continuation_frame(1, encode_headers(
            [("x-dummy", "1")])))
        c.expect_stream_error(1, STREAM_CLOSED, PROTOCOL_ERROR)
    finally:
        c.close()


def _open_then_reset(conn, target):
    conn.send_request(1, "POST", target.post_path, end_stream=False)
    conn.send(rst_stream_frame(1, CANCEL))


def test_5_1_closed_after_rst_data(conn, target):
    """RFC 9113 5.1 closed: a frame other than PRIORITY after the peer's
    RST_STREAM MUST be a stream error STREAM_CLOSED."""
    _open_then_reset(conn, target)
    conn.try_send(data_frame(1, b"test", end_stream=True))
    conn.expect_stream_error(1, STREAM_CLOSED)


def test_5_1_closed_after_rst_headers(conn, target):
    """RFC 9113 5.1 closed: HEADERS after the peer's RST_STREAM MUST be a
    stream error STREAM_CLOSED."""
    _open_then_reset(conn, target)
    conn.try_send(headers_frame(1, encode_headers(
        conn.request_headers("GET", target.path))))
    conn.expect_stream_error(1, STREAM_CLOSED)


def test_5_1_closed_after_rst_continuation(conn, target):
    """RFC 9113 5.1 / 6.10: CONTINUATION after RST_STREAM: STREAM_CLOSED,
    or PROTOCOL_ERROR as it follows no open header block."""
    _open_then_reset(conn, target)
    conn.try_send(continuation_frame(1, encode_headers([("x-dummy", "1")])))
    conn.expect_stream_error(1, STREAM_CLOSED, PROTOCOL_ERROR)


def _closed(conn, target):
    conn.send_request(1, "GET", target.path)
    conn.expect_response(1)


def test_5_1_closed_data(conn, target):
    """RFC 9113 5.1 closed: DATA after END_STREAM on a closed stream is
    STREAM_CLOSED (stream or connection error)."""
    _closed(conn, target)
    conn.try_send(data_frame(1, b"test", end_stream=True))
    conn.expect_stream_error(1, STREAM_CLOSED)


def test_5_1_closed_headers(conn, target):
    """RFC 9113 5.1 closed / 5.1.1: HEADERS on a stream closed by
    END_STREAM MUST be a connection error STREAM_CLOSED."""
    _closed(conn, target)
    conn.try_send(headers_frame(1, encode_headers(
        conn.request_headers("GET", target.path))))
    conn.expect_connection_error(STREAM_CLOSED)


def test_5_1_closed_continuation(conn, target):
    """RFC 9113 5.1 / 6.10: CONTINUATION on a closed stream: connection
    error STREAM_CLOSED or PROTOCOL_ERROR."""
    _closed(conn, target)
    conn.try_send(continuation_frame(1, encode_headers([("x-dummy", "1")])))
    conn.expect_connection_error(STREAM_CLOSED, PROTOCOL_ERROR)


# ------------------------------------------------------------------ 5.1.1

def test_5_1_1_even_stream_id(conn, target):
    """RFC 9113 5.1.1: a client-initiated stream MUST use an odd
    identifier; an even one is a connection error PROTOCOL_ERROR."""
    conn.try_send(headers_frame(2, encode_headers(
        conn.request_headers("GET", target.path))))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_1_1_stream_id_smaller_than_previous(conn, target):
    """RFC 9113 5.1.1: a new stream identifier MUST be larger than all
    previously opened; a smaller one is a connection error PROTOCOL_ERROR.
    (5.1 also calls stream 3 closed once 5 was used, and HEADERS on a
    closed stream a connection error STREAM_CLOSED: either code.)"""
    conn.send_request(5, "GET", target.path)
    conn.expect_response(5)
    conn.try_send(headers_frame(3, encode_headers(
        conn.request_headers("GET", target.path))))
    conn.expect_connection_error(PROTOCOL_ERROR, STREAM_CLOSED)


# ------------------------------------------------------------------ 5.1.2

def test_5_1_2_exceeding_max_concurrent_streams(target):
    """RFC 9113 5.1.2: HEADERS beyond the advertised
    SETTINGS_MAX_CONCURRENT_STREAMS MUST be a stream error PROTOCOL_ERROR
    or REFUSED_STREAM."""
    c = target.conn()
    try:
        c.handshake()
        limit = c.server_settings.get(MAX_CONCURRENT_STREAMS)
        if limit is None or limit > 1000:
            pytest.skip(f"server advertises no small stream limit ({limit})")
        block = encode_headers(c.request_headers("POST", target.post_path))
        out = b"".join(headers_frame(2 * i + 1, block, end_stream=False)
                       for i in range(limit))
        c.send(out)
        extra = 2 * limit + 1
        c.try_send(headers_frame(extra, block, end_stream=False))
        c.expect_stream_error(extra, PROTOCOL_ERROR, REFUSED_STREAM)
    finally:
        c.close()


# ------------------------------------------------------------------ 5.2

def test_5_2_server_honours_initial_window_of_1(target):
    """RFC 9113 5.2 / 6.9.1: with SETTINGS_INITIAL_WINDOW_SIZE 1 the server
    MUST NOT send more than 1 octet of DATA before a WINDOW_UPDATE."""
    c = target.conn()
    try:
        c.handshake(settings=((ENABLE_PUSH, 0), (INITIAL_WINDOW_SIZE, 1)))
        c.auto_window_update = False
        c.send_request(1, "GET", target.path)
        f = c.read_until(lambda f: isinstance(f, DataFrame)
                         and f.stream_id == 1, "DATA on stream 1")
        assert len(f.data) == 1, f"server sent {len(f.data)} octets"
        c.expect_alive()
        extra = [f for f in c.received if isinstance(f, DataFrame)
                 and f.stream_id == 1]
        assert sum(len(f.data) for f in extra) == 1
        if "END_STREAM" not in f.flags:  # the rest flows once opened
            c.auto_window_update = True
            c.send(window_update_frame(1, 1 << 20))
            more = c.read_until(lambda g: isinstance(g, DataFrame) and
                                g.stream_id == 1 and g.data, "more DATA")
            assert more.data
    finally:
        c.close()


def test_5_2_flow_control_excludes_headers(target):
    """RFC 9113 5.2.1/6.9: only DATA is flow controlled: with a stream
    window of 0 the response HEADERS MUST still arrive."""
    c = _half_closed_remote(target)  # waits for HEADERS on stream 1
    try:
        assert not [f for f in c.received if isinstance(f, DataFrame)
                    and f.data]
    finally:
        c.close()


# ------------------------------------------------------------------ 5.3.1

def test_5_3_1_headers_depends_on_itself(conn, target):
    """RFC 9113 5.3.1: a stream cannot depend on itself; HEADERS doing so
    MUST be a stream error PROTOCOL_ERROR."""
    conn.try_send(headers_frame(1, encode_headers(
        conn.request_headers("GET", target.path)), priority=(1, 16, False)))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_5_3_1_priority_depends_on_itself(conn):
    """RFC 9113 5.3.1: a PRIORITY frame making a stream depend on itself
    MUST be a stream error PROTOCOL_ERROR."""
    conn.try_send(priority_frame(1, 1, 16))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


# ------------------------------------------------------------------ 5.4

def test_5_4_1_connection_error_closes_tcp(conn):
    """RFC 9113 5.4.1: after a connection error the endpoint MUST close the
    TCP connection."""
    conn.try_send(raw_frame(PING, 0, 0, b"\0" * 6))
    while True:
        try:
            conn.read_frame()
        except ConnectionClosed:
            return
        except socket.timeout:
            pytest.fail("the connection stayed open after a connection "
                        "error")


def test_5_4_1_connection_error_sends_goaway(conn):
    """RFC 9113 5.4.1: an endpoint that encounters a connection error SHOULD
    first send GOAWAY (here FRAME_SIZE_ERROR for a 6-octet PING, 6.7)."""
    conn.try_send(raw_frame(PING, 0, 0, b"\0" * 6))
    f = conn.read_until(lambda f: isinstance(f, GoAwayFrame), "GOAWAY")
    assert f.error_code == FRAME_SIZE_ERROR


def test_5_4_1_goaway_last_stream_id(conn, target):
    """RFC 9113 6.8 / 5.4.1: the GOAWAY of a connection error carries the
    last stream the server processed (here 1, already answered)."""
    conn.send_request(1, "GET", target.path)
    conn.expect_response(1)
    conn.try_send(raw_frame(PING, 0, 0, b"\0" * 6))
    f = conn.read_until(lambda f: isinstance(f, GoAwayFrame), "GOAWAY")
    assert f.last_stream_id == 1


def test_5_4_2_stream_error_leaves_connection_usable(conn, target):
    """RFC 9113 5.4.2: a stream error is answered with RST_STREAM and
    closes only that stream; the connection and other streams go on. (5.4
    lets an endpoint escalate any stream error, so this pins the intended
    behaviour for a malformed request, 8.1.1/8.2.1, not a bare MUST.)"""
    conn.send(headers_frame(1, encode_headers(
        conn.request_headers("GET", target.path, extra=[("X-Upper", "1")]))))
    how = conn.expect_stream_error(1, PROTOCOL_ERROR)
    if not how.startswith("RST_STREAM"):
        pytest.fail(f"a stream error became a connection error ({how})")
    conn.send_request(3, "GET", target.path)
    assert conn.expect_response(3).status == 200


# ------------------------------------------------------------------ 5.5

def test_5_5_unknown_extension_frame_ignored(conn, target):
    """RFC 9113 5.5: unknown extension frames MUST be ignored, also on a
    stream."""
    conn.send_request(1, "GET", target.path)
    conn.send(raw_frame(0xFF, 0xFF, 1, b"extension"))
    conn.expect_response(1)
    conn.expect_alive()


def test_5_5_unknown_frame_inside_header_block(conn, target):
    """RFC 9113 5.5/6.10: an extension frame inside a header block MUST be
    a connection error PROTOCOL_ERROR."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.try_send(headers_frame(1, block, end_headers=False) +
                  raw_frame(0xFF, 0, 1, b"inside") +
                  continuation_frame(1, b""))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_5_5_unknown_setting_ignored(conn):
    """RFC 9113 5.5/6.5.2: an unknown SETTINGS identifier MUST be
    ignored, and the SETTINGS acknowledged."""
    conn.send(settings_frame((0xFE, 1)))
    conn.read_until(lambda f: isinstance(f, SettingsFrame) and "ACK" in
                    f.flags, "SETTINGS ACK")
    conn.expect_alive()
