"""Generic cases: a server MUST accept each ordinary frame and message shape.

Laid out like h2spec's "generic" group (starting HTTP/2, streams, each frame
type, message exchanges, HPACK representations); section numbers are RFC
9113's unless marked RFC 7541.
"""
from __future__ import annotations

import pytest

from frames import (
    CANCEL, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE,
    continuation_frame, data_frame, encode_headers, goaway_frame,
    headers_frame, hpack_indexed, hpack_literal, hpack_size_update,
    ping_frame, priority_frame, rst_stream_frame, settings_frame,
    window_update_frame,
)


# -- 3.4 starting HTTP/2

def test_3_4_generic_client_preface_accepted(raw_conn):
    """RFC 9113 3.4: the server MUST accept the client connection preface
    and answer with its own SETTINGS."""
    raw_conn.handshake()
    raw_conn.expect_alive()


# -- 5.1 streams and multiplexing

def test_5_1_generic_priority_on_idle_stream(conn):
    """RFC 9113 5.1/6.3: PRIORITY may be sent on an idle stream; it MUST
    be accepted."""
    conn.send(priority_frame(1, 0, 16))
    conn.expect_alive()


def _half_closed_remote(conn, target, sid=1):
    # a POST whose request is complete but whose answer we do not read yet
    conn.send_request(sid, "GET", target.path)


def test_5_1_generic_window_update_on_half_closed_remote(conn, target):
    """RFC 9113 5.1: WINDOW_UPDATE on a half-closed (remote) stream MUST be
    accepted."""
    _half_closed_remote(conn, target)
    conn.send(window_update_frame(1, 1))
    conn.expect_response(1)
    conn.expect_alive()


def test_5_1_generic_priority_on_half_closed_remote(conn, target):
    """RFC 9113 5.1: PRIORITY on a half-closed (remote) stream MUST be
    accepted."""
    _half_closed_remote(conn, target)
    conn.send(priority_frame(1, 0, 32))
    conn.expect_response(1)
    conn.expect_alive()


def test_5_1_generic_rst_stream_on_half_closed_remote(conn, target):
    """RFC 9113 5.1: RST_STREAM on a half-closed (remote) stream MUST be
    accepted (the stream closes; the connection stays)."""
    _half_closed_remote(conn, target)
    conn.send(rst_stream_frame(1, CANCEL))
    conn.expect_alive()


def test_5_1_generic_priority_on_closed_stream(conn, target):
    """RFC 9113 5.1: PRIORITY on a closed stream MUST be accepted."""
    conn.send_request(1, "GET", target.path)
    conn.expect_response(1)
    conn.send(priority_frame(1, 0, 16))
    conn.expect_alive()


# -- 6.10 CONTINUATION

def test_6_10_generic_continuation_accepted(conn, target):
    """RFC 9113 6.10: a header block split into HEADERS + CONTINUATION MUST
    be accepted."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.send(headers_frame(1, block[:3], end_headers=False) +
              continuation_frame(1, block[3:]))
    assert conn.expect_response(1).status == 200


def test_6_10_generic_multiple_continuations_accepted(conn, target):
    """RFC 9113 6.10: several CONTINUATION frames MUST be accepted."""
    block = encode_headers(conn.request_headers("GET", target.path))
    parts = [block[i:i + 4] for i in range(0, len(block), 4)]
    out = headers_frame(1, parts[0], end_headers=False)
    for i, p in enumerate(parts[1:], start=1):
        out += continuation_frame(1, p, end_headers=(i == len(parts) - 1))
    conn.send(out)
    assert conn.expect_response(1).status == 200


# -- 6.1 DATA

def _post(conn, target, sid=1):
    conn.send_request(sid, "POST", target.post_path,
                      extra=[("content-type", "text/plain")],
                      end_stream=False)


def test_6_1_generic_data_accepted(conn, target):
    """RFC 9113 6.1: a DATA frame on an open stream MUST be accepted."""
    _post(conn, target)
    conn.send(data_frame(1, b"hello", end_stream=True))
    assert conn.expect_response(1).status < 500


def test_6_1_generic_multiple_data_accepted(conn, target):
    """RFC 9113 6.1: several DATA frames on a stream MUST be accepted."""
    _post(conn, target)
    conn.send(data_frame(1, b"one ") + data_frame(1, b"two ") +
              data_frame(1, b"three", end_stream=True))
    assert conn.expect_response(1).status < 500


def test_6_1_generic_data_with_padding_accepted(conn, target):
    """RFC 9113 6.1: a padded DATA frame MUST be accepted."""
    _post(conn, target)
    conn.send(data_frame(1, b"padded", end_stream=True, pad_length=8))
    assert conn.expect_response(1).status < 500


# -- 6.2 HEADERS

def test_6_2_generic_headers_accepted(conn, target):
    """RFC 9113 6.2: a HEADERS frame opens a stream and MUST be answered."""
    conn.send_request(1, "GET", target.path)
    assert conn.expect_response(1).status == 200


def test_6_2_generic_headers_with_padding_accepted(conn, target):
    """RFC 9113 6.2: a padded HEADERS frame MUST be accepted."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.send(headers_frame(1, block, pad_length=16))
    assert conn.expect_response(1).status == 200


def test_6_2_generic_headers_with_priority_accepted(conn, target):
    """RFC 9113 6.2: HEADERS with the PRIORITY flag MUST be accepted."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.send(headers_frame(1, block, priority=(0, 255, False)))
    assert conn.expect_response(1).status == 200


# -- 6.3 PRIORITY

def test_6_3_generic_priority_weight_1(conn):
    """RFC 9113 6.3: PRIORITY with weight 1 MUST be accepted."""
    conn.send(priority_frame(1, 0, 1))
    conn.expect_alive()


def test_6_3_generic_priority_weight_256(conn):
    """RFC 9113 6.3: PRIORITY with weight 256 MUST be accepted."""
    conn.send(priority_frame(1, 0, 256))
    conn.expect_alive()


def test_6_3_generic_priority_with_dependency(conn):
    """RFC 9113 6.3: PRIORITY with a stream dependency MUST be accepted."""
    conn.send(priority_frame(1, 0, 16) + priority_frame(3, 1, 16))
    conn.expect_alive()


def test_6_3_generic_priority_exclusive(conn):
    """RFC 9113 6.3: PRIORITY with the exclusive bit MUST be accepted."""
    conn.send(priority_frame(1, 0, 16) +
              priority_frame(3, 1, 16, exclusive=True))
    conn.expect_alive()


def test_6_3_generic_priority_idle_then_lower_headers(conn, target):
    """RFC 9113 5.1.1/6.3: PRIORITY on idle stream 5 does not open it, so a
    HEADERS on the lower stream 3 MUST still be answered."""
    conn.send(priority_frame(5, 0, 16))
    conn.send_request(3, "GET", target.path)
    assert conn.expect_response(3).status == 200


# -- 6.4 RST_STREAM, 6.5 SETTINGS, 6.7 PING, 6.8 GOAWAY, 6.9 WINDOW_UPDATE

def test_6_4_generic_rst_stream_accepted(conn, target):
    """RFC 9113 6.4: RST_STREAM on an open stream MUST be accepted."""
    _post(conn, target)
    conn.send(rst_stream_frame(1, CANCEL))
    conn.expect_alive()


def test_6_5_generic_settings_accepted(conn):
    """RFC 9113 6.5: a SETTINGS frame MUST be accepted and acknowledged."""
    conn.send(settings_frame((INITIAL_WINDOW_SIZE, 65535),
                             (MAX_FRAME_SIZE, 16384)))
    conn.read_until(lambda f: f.type == 0x4 and "ACK" in f.flags,
                    "SETTINGS ACK")
    conn.expect_alive()


def test_6_7_generic_ping_accepted(conn):
    """RFC 9113 6.7: a PING MUST be answered with an ACK."""
    conn.expect_alive()


def test_6_8_generic_goaway_accepted(conn):
    """RFC 9113 6.8: a client GOAWAY(NO_ERROR) MUST be accepted: no error
    is sent back (the server may close afterwards)."""
    conn.send(goaway_frame(0))
    conn.send(ping_frame(b"goaway!!"))
    while True:
        try:
            f = conn.read_frame()
        except Exception:  # closed, or nothing more: both acceptable
            return
        assert not (f.type == 0x7 and f.error_code != 0), \
            f"server answered GOAWAY with error {f.error_code}"
        if f.type == 0x6 and "ACK" in f.flags:
            return


def test_6_9_generic_window_update_connection(conn):
    """RFC 9113 6.9: WINDOW_UPDATE on stream 0 MUST be accepted."""
    conn.send(window_update_frame(0, 1))
    conn.expect_alive()


def test_6_9_generic_window_update_stream(conn, target):
    """RFC 9113 6.9: WINDOW_UPDATE on an open stream MUST be accepted."""
    _post(conn, target)
    conn.send(window_update_frame(1, 1))
    conn.send(data_frame(1, b"x", end_stream=True))
    assert conn.expect_response(1).status < 500


# -- 8 message exchanges

def test_8_1_generic_get(conn, target):
    """RFC 9113 8.1: a GET MUST be answered."""
    conn.send_request(1, "GET", target.path)
    r = conn.expect_response(1)
    assert r.status == 200 and r.body


def test_8_1_generic_head(conn, target):
    """RFC 9113 8.1 / RFC 9110 9.3.2: a HEAD MUST be answered, without
    content."""
    conn.send_request(1, "HEAD", target.path)
    r = conn.expect_response(1)
    assert r.status == 200 and r.body == b""


def test_8_1_generic_post(conn, target):
    """RFC 9113 8.1: a POST with a body MUST be answered."""
    conn.send_request(1, "POST", target.post_path,
                      extra=[("content-length", "4")], end_stream=False)
    conn.send(data_frame(1, b"test", end_stream=True))
    assert conn.expect_response(1).status < 500


def test_8_1_generic_post_with_trailers(conn, target):
    """RFC 9113 8.1: a POST whose body is followed by a trailer section
    MUST be answered."""
    conn.send_request(1, "POST", target.post_path,
                      extra=[("te", "trailers")], end_stream=False)
    conn.send(data_frame(1, b"test"))
    conn.send_headers(1, [("x-trailer", "done")], end_stream=True)
    assert conn.expect_response(1).status < 500


# -- RFC 7541 representations (h2spec generic/5)

def _get_with(conn, target, *fields: bytes, sid=1):
    """A GET whose block is the required pseudo-fields followed by the
    given raw representations (regular fields come after pseudo-fields,
    RFC 9113 8.3)."""
    block = encode_headers(conn.request_headers("GET", target.path)) + \
        b"".join(fields)
    conn.send(headers_frame(sid, block))
    return conn.expect_response(sid)


def test_rfc7541_6_1_generic_indexed_field(conn, target):
    """RFC 7541 6.1: an indexed header field representation MUST be
    accepted (static index 2, :method GET)."""
    block = hpack_indexed(2) + encode_headers(
        [(":scheme", conn.scheme), (":path", target.path),
         (":authority", conn.authority)])
    conn.send(headers_frame(1, block))
    assert conn.expect_response(1).status == 200


_LITERALS = [
    ("incremental", True, False), ("incremental", True, True),
    ("incremental", False, False), ("incremental", False, True),
    ("none", True, False), ("none", True, True),
    ("none", False, False), ("none", False, True),
    ("never", True, False), ("never", True, True),
    ("never", False, False), ("never", False, True),
]


def _lit_id(p):
    kind, indexed_name, huff = p
    return f"{kind}-{'indexed_name' if indexed_name else 'new_name'}" \
        f"{'-huffman' if huff else ''}"


@pytest.mark.parametrize("kind,indexed_name,huffman", _LITERALS,
                         ids=[_lit_id(p) for p in _LITERALS])
def test_rfc7541_6_2_generic_literal_field(conn, target, kind, indexed_name,
                                           huffman):
    """RFC 7541 6.2.1-6.2.3: literal header fields (incremental, without
    and never indexing; indexed or new name; raw or Huffman) MUST be
    accepted."""
    if indexed_name:  # static 58: user-agent
        f = hpack_literal(b"", b"h2suite", indexing=kind, name_index=58,
                          huffman=huffman)
    else:
        f = hpack_literal(b"x-h2suite", b"literal", indexing=kind,
                          huffman=huffman)
    assert _get_with(conn, target, f).status == 200
    if kind == "incremental":  # the entry is now dynamic index 62
        assert _get_with(conn, target, hpack_indexed(62), sid=3).status == 200


def test_rfc7541_6_3_generic_table_size_update(conn, target):
    """RFC 7541 6.3: a dynamic table size update at the start of a block
    MUST be accepted."""
    block = hpack_size_update(0) + encode_headers(
        conn.request_headers("GET", target.path))
    conn.send(headers_frame(1, block))
    assert conn.expect_response(1).status == 200


def test_rfc7541_6_3_generic_multiple_table_size_updates(conn, target):
    """RFC 7541 4.2: two size updates at the start of a block (a smaller,
    then the final size) MUST be accepted."""
    block = hpack_size_update(0) + hpack_size_update(4096) + encode_headers(
        conn.request_headers("GET", target.path))
    conn.send(headers_frame(1, block))
    assert conn.expect_response(1).status == 200
