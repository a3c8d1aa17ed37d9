"""RFC 9113 section 6 (every frame type) and section 7 (error codes)."""
from __future__ import annotations

import pytest

from frames import (
    CANCEL, DATA, ENABLE_PUSH, FLOW_CONTROL_ERROR, FRAME_SIZE_ERROR,
    GOAWAY, HEADER_TABLE_SIZE, HEADERS, INITIAL_WINDOW_SIZE,
    MAX_CONCURRENT_STREAMS, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE,
    MAX_WINDOW, PING, PRIORITY, PROTOCOL_ERROR, PUSH_PROMISE, RST_STREAM,
    SETTINGS, STREAM_CLOSED, WINDOW_UPDATE, DataFrame, HeadersFrame,
    PingFrame, SettingsFrame, continuation_frame,
    data_frame, encode_headers, goaway_frame, headers_frame, ping_frame,
    priority_frame, raw_frame, rst_stream_frame, settings_frame,
    settings_payload, window_update_frame,
)


def _conn_with(target, *settings):
    c = target.conn()
    c.handshake(settings=((ENABLE_PUSH, 0),) + settings)
    return c


def _post_open(conn, target, sid=1):
    """Stream ``sid`` open: a POST whose body has not ended."""
    conn.send_request(sid, "POST", target.post_path, end_stream=False)


def _settings_ack(conn):
    conn.read_until(lambda f: isinstance(f, SettingsFrame)
                    and "ACK" in f.flags, "SETTINGS ACK")


# ------------------------------------------------------------------ 6.1 DATA

def test_6_1_data_on_stream_0(conn):
    """RFC 9113 6.1: DATA not associated with a stream (stream 0) MUST be a
    connection error PROTOCOL_ERROR."""
    conn.try_send(data_frame(0, b"test", end_stream=True))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_1_data_on_stream_not_open(conn, target):
    """RFC 9113 6.1: DATA on a stream that is not open or half-closed
    (local) MUST be a stream error STREAM_CLOSED."""
    conn.send_request(1, "GET", target.path)  # half-closed (remote)
    conn.try_send(data_frame(1, b"test", end_stream=True))
    conn.expect_stream_error(1, STREAM_CLOSED, allow_response=True)


def test_6_1_data_invalid_pad_length(conn, target):
    """RFC 9113 6.1: padding length not less than the payload length MUST be
    a connection error PROTOCOL_ERROR."""
    _post_open(conn, target)
    # PADDED, pad length 6, but only 5 octets follow the pad length octet
    conn.try_send(raw_frame(DATA, 0x8, 1, b"\x06hello"))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_1_data_maximal_padding_accepted(conn, target):
    """RFC 9113 6.1: a DATA frame that is all padding (pad length = payload
    length - 1) is valid and MUST be accepted."""
    _post_open(conn, target)
    conn.send(raw_frame(DATA, 0x8, 1, b"\x05" + b"\0" * 5))
    conn.send(data_frame(1, b"end", end_stream=True))
    assert conn.expect_response(1).status < 500


# --------------------------------------------------------------- 6.2 HEADERS

def test_6_2_headers_without_end_headers_then_priority(conn, target):
    """RFC 9113 6.2/6.10: HEADERS without END_HEADERS MUST be followed by
    CONTINUATION on the same stream; a PRIORITY on another stream is a
    connection error PROTOCOL_ERROR."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.try_send(headers_frame(1, block, end_headers=False) +
                  priority_frame(3, 0, 16))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_2_headers_to_other_stream_during_block(conn, target):
    """RFC 9113 6.2: HEADERS on stream 3 while stream 1's block is open
    MUST be a connection error PROTOCOL_ERROR."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.try_send(headers_frame(1, block, end_headers=False) +
                  headers_frame(3, block))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_2_headers_on_stream_0(conn, target):
    """RFC 9113 6.2: HEADERS on stream 0 MUST be a connection error
    PROTOCOL_ERROR."""
    conn.try_send(headers_frame(0, encode_headers(
        conn.request_headers("GET", target.path))))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_2_headers_invalid_pad_length(conn, target):
    """RFC 9113 6.2: a pad length not less than the remaining payload MUST
    be a connection error PROTOCOL_ERROR."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.try_send(raw_frame(HEADERS, 0xD, 1,
                            bytes([len(block) + 1]) + block))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_2_headers_padded_and_priority_accepted(conn, target):
    """RFC 9113 6.2: PADDED and PRIORITY together MUST be accepted."""
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.send(headers_frame(1, block, pad_length=3, priority=(0, 100, True)))
    assert conn.expect_response(1).status == 200


# -------------------------------------------------------------- 6.3 PRIORITY

def test_6_3_priority_on_stream_0(conn):
    """RFC 9113 6.3: PRIORITY on stream 0 MUST be a connection error
    PROTOCOL_ERROR."""
    conn.try_send(priority_frame(0, 1, 16))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_3_priority_wrong_length(conn, target):
    """RFC 9113 6.3: a PRIORITY frame of a length other than 5 MUST be a
    stream error FRAME_SIZE_ERROR."""
    _post_open(conn, target)
    conn.try_send(raw_frame(PRIORITY, 0, 1, b"\0\0\0\0\x10\0"))
    conn.expect_stream_error(1, FRAME_SIZE_ERROR)


# ------------------------------------------------------------ 6.4 RST_STREAM

def test_6_4_rst_stream_on_stream_0(conn):
    """RFC 9113 6.4: RST_STREAM on stream 0 MUST be a connection error
    PROTOCOL_ERROR."""
    conn.try_send(rst_stream_frame(0, CANCEL))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_4_rst_stream_on_idle_stream(conn, target):
    """RFC 9113 6.4: RST_STREAM on an idle stream MUST be a connection
    error PROTOCOL_ERROR."""
    conn.send_request(1, "GET", target.path)
    conn.expect_response(1)
    conn.try_send(rst_stream_frame(3, CANCEL))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_4_rst_stream_wrong_length(conn, target):
    """RFC 9113 6.4: RST_STREAM of a length other than 4 MUST be a
    connection error FRAME_SIZE_ERROR."""
    _post_open(conn, target)
    conn.try_send(raw_frame(RST_STREAM, 0, 1, b"\0\0\0\x08\0"))
    conn.expect_connection_error(FRAME_SIZE_ERROR)


def test_6_4_rst_and_window_update_after_close_ignored(conn, target):
    """RFC 9113 5.1 closed: WINDOW_UPDATE or RST_STREAM received shortly
    after END_STREAM was sent MUST be ignored."""
    conn.send_request(1, "GET", target.path)
    conn.expect_response(1)
    conn.send(window_update_frame(1, 100) + rst_stream_frame(1, CANCEL))
    conn.expect_alive()


# -------------------------------------------------------------- 6.5 SETTINGS

def test_6_5_settings_ack_with_payload(conn):
    """RFC 9113 6.5: a SETTINGS ACK with a payload MUST be a connection
    error FRAME_SIZE_ERROR."""
    conn.try_send(raw_frame(SETTINGS, 0x1, 0,
                            settings_payload((INITIAL_WINDOW_SIZE, 1))))
    conn.expect_connection_error(FRAME_SIZE_ERROR)


def test_6_5_settings_on_stream_1(conn):
    """RFC 9113 6.5: SETTINGS on a stream other than 0 MUST be a
    connection error PROTOCOL_ERROR."""
    conn.try_send(settings_frame((INITIAL_WINDOW_SIZE, 100), stream_id=1))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_5_settings_length_not_multiple_of_6(conn):
    """RFC 9113 6.5: a SETTINGS length not a multiple of 6 MUST be a
    connection error FRAME_SIZE_ERROR."""
    conn.try_send(raw_frame(SETTINGS, 0, 0,
                            settings_payload((INITIAL_WINDOW_SIZE, 100))[:5]))
    conn.expect_connection_error(FRAME_SIZE_ERROR)


def test_6_5_empty_settings_acknowledged(conn):
    """RFC 9113 6.5/6.5.3: an empty SETTINGS MUST be acknowledged."""
    conn.send(settings_frame())
    _settings_ack(conn)


# ----------------------------------------------------- 6.5.2 each parameter

def test_6_5_2_enable_push_2(conn):
    """RFC 9113 6.5.2: SETTINGS_ENABLE_PUSH other than 0 or 1 MUST be a
    connection error PROTOCOL_ERROR."""
    conn.try_send(settings_frame((ENABLE_PUSH, 2)))
    conn.expect_connection_error(PROTOCOL_ERROR)


@pytest.mark.parametrize("value", [0, 1])
def test_6_5_2_enable_push_valid(conn, value):
    """RFC 9113 6.5.2: SETTINGS_ENABLE_PUSH 0 and 1 MUST be accepted."""
    conn.send(settings_frame((ENABLE_PUSH, value)))
    _settings_ack(conn)
    conn.expect_alive()


def test_6_5_2_initial_window_size_over_max(conn):
    """RFC 9113 6.5.2: SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1 MUST be a
    connection error FLOW_CONTROL_ERROR."""
    conn.try_send(settings_frame((INITIAL_WINDOW_SIZE, MAX_WINDOW + 1)))
    conn.expect_connection_error(FLOW_CONTROL_ERROR)


@pytest.mark.parametrize("value", [0, MAX_WINDOW])
def test_6_5_2_initial_window_size_bounds_accepted(conn, value):
    """RFC 9113 6.5.2: SETTINGS_INITIAL_WINDOW_SIZE 0 and 2^31-1 are in
    range and MUST be accepted."""
    conn.send(settings_frame((INITIAL_WINDOW_SIZE, value)))
    _settings_ack(conn)
    conn.expect_alive()


@pytest.mark.parametrize("value", [0, 16383])
def test_6_5_2_max_frame_size_below_initial(conn, value):
    """RFC 9113 6.5.2: SETTINGS_MAX_FRAME_SIZE below 2^14 MUST be a
    connection error PROTOCOL_ERROR."""
    conn.try_send(settings_frame((MAX_FRAME_SIZE, value)))
    conn.expect_connection_error(PROTOCOL_ERROR)


@pytest.mark.parametrize("value", [2**24, 2**32 - 1])
def test_6_5_2_max_frame_size_above_max(conn, value):
    """RFC 9113 6.5.2: SETTINGS_MAX_FRAME_SIZE above 2^24-1 MUST be a
    connection error PROTOCOL_ERROR."""
    conn.try_send(settings_frame((MAX_FRAME_SIZE, value)))
    conn.expect_connection_error(PROTOCOL_ERROR)


@pytest.mark.parametrize("value", [16384, 2**24 - 1])
def test_6_5_2_max_frame_size_bounds_accepted(conn, target, value):
    """RFC 9113 6.5.2: SETTINGS_MAX_FRAME_SIZE 2^14 and 2^24-1 MUST be
    accepted, and responses still arrive."""
    conn.send(settings_frame((MAX_FRAME_SIZE, value)))
    _settings_ack(conn)
    conn.send_request(1, "GET", target.path)
    assert conn.expect_response(1).status == 200


def test_6_5_2_header_table_size_0(conn, target):
    """RFC 9113 6.5.2 / RFC 7541 4.2: SETTINGS_HEADER_TABLE_SIZE 0 MUST be
    accepted; the server's encoder MUST then use no dynamic table larger
    than 0 (our decoder refuses a larger size update)."""
    conn.send(settings_frame((HEADER_TABLE_SIZE, 0)))
    _settings_ack(conn)
    conn.decoder.max_allowed_table_size = 0
    for sid in (1, 3):
        conn.send_request(sid, "GET", target.path)
        assert conn.expect_response(sid).status == 200


@pytest.mark.parametrize("value", [0, 2**32 - 1])
def test_6_5_2_max_concurrent_streams_accepted(conn, value):
    """RFC 9113 6.5.2: any SETTINGS_MAX_CONCURRENT_STREAMS value (0 limits
    server push only) MUST be accepted."""
    conn.send(settings_frame((MAX_CONCURRENT_STREAMS, value)))
    _settings_ack(conn)
    conn.expect_alive()


def test_6_5_2_max_header_list_size_accepted(conn, target):
    """RFC 9113 6.5.2: SETTINGS_MAX_HEADER_LIST_SIZE is advisory and MUST
    be accepted."""
    conn.send(settings_frame((MAX_HEADER_LIST_SIZE, 4096)))
    _settings_ack(conn)
    conn.send_request(1, "GET", target.path)
    assert conn.expect_response(1).status == 200


def test_6_5_2_unknown_identifier_ignored(conn):
    """RFC 9113 6.5.2: an unknown or unsupported setting MUST be ignored."""
    conn.send(settings_frame((0x00FF, 12345), (0x4242, 0)))
    _settings_ack(conn)
    conn.expect_alive()


# -------------------------------------------------------------- 6.5.3

def test_6_5_3_values_processed_in_order(target):
    """RFC 9113 6.5.3: the values in a SETTINGS frame MUST be processed in
    the order they appear: IWS 100 then 1 leaves a window of 1."""
    c = _conn_with(target, (INITIAL_WINDOW_SIZE, 100), (INITIAL_WINDOW_SIZE, 1))
    try:
        c.auto_window_update = False
        c.send_request(1, "GET", target.path)
        f = c.read_until(lambda f: isinstance(f, DataFrame), "DATA")
        assert len(f.data) == 1
    finally:
        c.close()


def test_6_5_3_settings_acknowledged(conn):
    """RFC 9113 6.5.3: a SETTINGS without ACK MUST be answered with a
    SETTINGS ACK."""
    conn.send(settings_frame((INITIAL_WINDOW_SIZE, 65535)))
    f = conn.read_until(lambda f: isinstance(f, SettingsFrame), "SETTINGS")
    assert "ACK" in f.flags and not f.settings


# ---------------------------------------------------------- 6.6 PUSH_PROMISE

def test_6_6_push_promise_from_client(conn, target):
    """RFC 9113 6.6/8.4: a client cannot push; PUSH_PROMISE received by a
    server MUST be a connection error PROTOCOL_ERROR."""
    _post_open(conn, target)
    block = encode_headers(conn.request_headers("GET", target.path))
    conn.try_send(raw_frame(PUSH_PROMISE, 0x4, 1,
                            b"\x00\x00\x00\x02" + block))
    conn.expect_connection_error(PROTOCOL_ERROR)


# ------------------------------------------------------------------ 6.7 PING

def test_6_7_ping_ack_identical_payload(conn):
    """RFC 9113 6.7: a PING MUST be answered by a PING with ACK and an
    identical payload."""
    conn.send(ping_frame(b"\x01\x02\x03\x04\x05\x06\x07\x08"))
    f = conn.read_until(lambda f: isinstance(f, PingFrame), "PING")
    assert "ACK" in f.flags
    assert f.opaque_data == b"\x01\x02\x03\x04\x05\x06\x07\x08"


def test_6_7_ping_ack_not_answered(conn):
    """RFC 9113 6.7: an endpoint MUST NOT respond to a PING with ACK: the
    first PING back is the answer to our later, ordinary PING."""
    conn.send(ping_frame(b"ackackac", ack=True) + ping_frame(b"realping"))
    f = conn.read_until(lambda f: isinstance(f, PingFrame), "PING")
    assert f.opaque_data == b"realping", "the server answered a PING ACK"


def test_6_7_ping_on_stream_1(conn):
    """RFC 9113 6.7: PING with a stream identifier other than 0 MUST be a
    connection error PROTOCOL_ERROR."""
    conn.try_send(ping_frame(b"stream!!", stream_id=1))
    conn.expect_connection_error(PROTOCOL_ERROR)


@pytest.mark.parametrize("length", [0, 6, 9])
def test_6_7_ping_wrong_length(conn, length):
    """RFC 9113 6.7: PING of a length other than 8 MUST be a connection
    error FRAME_SIZE_ERROR."""
    conn.try_send(raw_frame(PING, 0, 0, b"\0" * length))
    conn.expect_connection_error(FRAME_SIZE_ERROR)


# ---------------------------------------------------------------- 6.8 GOAWAY

def test_6_8_goaway_on_stream_1(conn):
    """RFC 9113 6.8: GOAWAY with a stream identifier other than 0 MUST be a
    connection error PROTOCOL_ERROR."""
    conn.try_send(goaway_frame(0, stream_id=1))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_8_goaway_too_short(conn):
    """RFC 9113 6.8/4.2: a GOAWAY shorter than 8 octets cannot be parsed:
    connection error FRAME_SIZE_ERROR."""
    conn.try_send(raw_frame(GOAWAY, 0, 0, b"\0\0\0\0"))
    conn.expect_connection_error(FRAME_SIZE_ERROR)


def test_6_8_goaway_with_debug_data_accepted(conn):
    """RFC 9113 6.8: GOAWAY may carry opaque debug data; the server MUST
    NOT answer it with an error."""
    conn.send(goaway_frame(0, 0, b"h2suite going away"))
    conn.send(ping_frame(b"aftergoa"))
    try:
        while True:
            f = conn.read_frame()
            if f.type == GOAWAY:
                assert f.error_code == 0, f"GOAWAY {f.error_code}"
            if isinstance(f, PingFrame):
                return
    except Exception as e:  # closing is allowed
        if isinstance(e, AssertionError):
            raise


# --------------------------------------------------------- 6.9 WINDOW_UPDATE

def test_6_9_window_update_zero_on_connection(conn):
    """RFC 9113 6.9: a WINDOW_UPDATE increment of 0 on the connection MUST
    be a connection error PROTOCOL_ERROR."""
    conn.try_send(window_update_frame(0, 0))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_9_window_update_zero_on_stream(conn, target):
    """RFC 9113 6.9: a WINDOW_UPDATE increment of 0 on a stream MUST be a
    stream error PROTOCOL_ERROR."""
    _post_open(conn, target)
    conn.try_send(window_update_frame(1, 0))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


@pytest.mark.parametrize("length", [3, 5])
def test_6_9_window_update_wrong_length(conn, length):
    """RFC 9113 6.9: a WINDOW_UPDATE of a length other than 4 MUST be a
    connection error FRAME_SIZE_ERROR."""
    conn.try_send(raw_frame(WINDOW_UPDATE, 0, 0,
                            (b"\0\0\0\x01\0")[:length]))
    conn.expect_connection_error(FRAME_SIZE_ERROR)


def test_6_9_window_update_reserved_bit_ignored(conn):
    """RFC 9113 6.9: the reserved bit of the increment MUST be ignored."""
    conn.send(raw_frame(WINDOW_UPDATE, 0, 0, b"\x80\0\0\x01"))
    conn.expect_alive()


# -------------------------------------------------------------- 6.9.1

def test_6_9_1_initial_window_1_headers(target):
    """RFC 9113 6.9.1: with a window of 1 the server MUST NOT send DATA
    longer than the space available: each 1-octet WINDOW_UPDATE buys one
    octet."""
    c = _conn_with(target, (INITIAL_WINDOW_SIZE, 1))
    try:
        c.auto_window_update = False
        c.send_request(1, "GET", target.path)
        got, updates = [], 0
        for i in range(3):
            f = c.read_until(lambda f: isinstance(f, DataFrame), "DATA")
            got.append(len(f.data))
            if "END_STREAM" in f.flags or i == 2:
                break
            c.send(window_update_frame(1, 1))
            updates += 1
        c.expect_alive()
        sent = sum(len(f.data) for f in c.received
                   if isinstance(f, DataFrame))
        assert all(n <= 1 for n in got), got
        assert sent <= 1 + updates, f"{sent} octets for a window of " \
            f"{1 + updates}"
    finally:
        c.close()


def test_6_9_1_connection_window_overflow(conn):
    """RFC 9113 6.9.1: a WINDOW_UPDATE taking the connection window above
    2^31-1 MUST be a connection error FLOW_CONTROL_ERROR."""
    conn.try_send(window_update_frame(0, MAX_WINDOW) +
                  window_update_frame(0, MAX_WINDOW))
    conn.expect_connection_error(FLOW_CONTROL_ERROR)


def test_6_9_1_stream_window_overflow(conn, target):
    """RFC 9113 6.9.1: a WINDOW_UPDATE taking a stream window above 2^31-1
    MUST be a stream error FLOW_CONTROL_ERROR."""
    _post_open(conn, target)
    conn.try_send(window_update_frame(1, MAX_WINDOW) +
                  window_update_frame(1, MAX_WINDOW))
    conn.expect_stream_error(1, FLOW_CONTROL_ERROR)


# -------------------------------------------------------------- 6.9.2

def test_6_9_2_initial_window_change_applies_to_open_streams(target):
    """RFC 9113 6.9.2: a change of SETTINGS_INITIAL_WINDOW_SIZE MUST adjust
    every open stream's window: 0, then 1, lets one octet through."""
    c = _conn_with(target, (INITIAL_WINDOW_SIZE, 0))
    try:
        c.auto_window_update = False
        c.send_request(1, "GET", target.path)
        c.read_until(lambda f: isinstance(f, HeadersFrame), "HEADERS")
        c.send(settings_frame((INITIAL_WINDOW_SIZE, 1)))
        f = c.read_until(lambda f: isinstance(f, DataFrame), "DATA")
        assert len(f.data) == 1
    finally:
        c.close()


def test_6_9_2_negative_window_tracked(target):
    """RFC 9113 6.9.2: a smaller SETTINGS_INITIAL_WINDOW_SIZE can make a
    window negative; the server MUST track it: window 5, 5 sent, IWS 3
    (window -2), WINDOW_UPDATE 3: exactly one more octet."""
    c = _conn_with(target, (INITIAL_WINDOW_SIZE, 5))
    try:
        c.auto_window_update = False
        c.send_request(1, "GET", target.large_path)
        n = 0
        while n < 5:
            f = c.read_until(lambda f: isinstance(f, DataFrame), "DATA")
            n += len(f.data)
            assert "END_STREAM" not in f.flags, \
                "H2_LARGE_PATH's body is shorter than 7 octets: nothing is tested"
        assert n == 5
        c.send(settings_frame((INITIAL_WINDOW_SIZE, 3)))
        _settings_ack(c)
        c.send(window_update_frame(1, 3))
        f = c.read_until(lambda f: isinstance(f, DataFrame), "DATA")
        assert len(f.data) == 1
        c.expect_alive()
        assert sum(len(f.data) for f in c.received
                   if isinstance(f, DataFrame)) == 6
    finally:
        c.close()


def test_6_9_2_initial_window_change_overflows_stream(target):
    """RFC 9113 6.9.2: a SETTINGS_INITIAL_WINDOW_SIZE change that takes an
    open stream's window above 2^31-1 MUST be a connection error
    FLOW_CONTROL_ERROR."""
    c = _conn_with(target, (INITIAL_WINDOW_SIZE, 65535))
    try:
        _post_open(c, target)
        c.send(window_update_frame(1, MAX_WINDOW - 65535))
        c.expect_alive()
        c.try_send(settings_frame((INITIAL_WINDOW_SIZE, 65536)))
        c.expect_connection_error(FLOW_CONTROL_ERROR)
    finally:
        c.close()


def test_6_9_2_initial_window_size_over_max(conn):
    """RFC 9113 6.9.2: SETTINGS_INITIAL_WINDOW_SIZE 2^32-1 exceeds the
    maximum window: connection error FLOW_CONTROL_ERROR."""
    conn.try_send(settings_frame((INITIAL_WINDOW_SIZE, 2**32 - 1)))
    conn.expect_connection_error(FLOW_CONTROL_ERROR)


# ---------------------------------------------------------- 6.10 CONTINUATION

def _block(conn, target):
    return encode_headers(conn.request_headers("GET", target.path))


def test_6_10_multiple_continuations_accepted(conn, target):
    """RFC 9113 6.10: any number of CONTINUATION frames may follow HEADERS
    and MUST be accepted."""
    b = _block(conn, target)
    conn.send(headers_frame(1, b[:1], end_headers=False) +
              continuation_frame(1, b[1:2], end_headers=False) +
              continuation_frame(1, b"", end_headers=False) +
              continuation_frame(1, b[2:]))
    assert conn.expect_response(1).status == 200


def test_6_10_continuation_then_other_frame(conn, target):
    """RFC 9113 6.10: a CONTINUATION without END_HEADERS followed by any
    other frame MUST be a connection error PROTOCOL_ERROR."""
    b = _block(conn, target)
    conn.try_send(headers_frame(1, b[:2], end_headers=False) +
                  continuation_frame(1, b[2:4], end_headers=False) +
                  data_frame(1, b"x"))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_10_continuation_on_stream_0(conn, target):
    """RFC 9113 6.10: CONTINUATION on stream 0 MUST be a connection error
    PROTOCOL_ERROR."""
    b = _block(conn, target)
    conn.try_send(headers_frame(1, b[:2], end_headers=False) +
                  continuation_frame(0, b[2:]))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_10_continuation_on_other_stream(conn, target):
    """RFC 9113 6.10: CONTINUATION MUST be on the stream of the HEADERS it
    continues; another stream is a connection error PROTOCOL_ERROR."""
    b = _block(conn, target)
    conn.try_send(headers_frame(1, b[:2], end_headers=False) +
                  continuation_frame(3, b[2:]))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_10_continuation_after_end_headers(conn, target):
    """RFC 9113 6.10: CONTINUATION after a HEADERS with END_HEADERS MUST be
    a connection error PROTOCOL_ERROR."""
    _post_open(conn, target)
    conn.try_send(continuation_frame(1, encode_headers([("x-late", "1")])))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_10_continuation_after_continuation_end_headers(conn, target):
    """RFC 9113 6.10: CONTINUATION after a CONTINUATION with END_HEADERS
    MUST be a connection error PROTOCOL_ERROR."""
    b = encode_headers(conn.request_headers("POST", target.post_path))
    conn.try_send(headers_frame(1, b[:2], end_stream=False,
                                end_headers=False) +
                  continuation_frame(1, b[2:]) +
                  continuation_frame(1, encode_headers([("x-late", "1")])))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_6_10_continuation_after_data(conn, target):
    """RFC 9113 6.10: CONTINUATION preceded by DATA MUST be a connection
    error PROTOCOL_ERROR."""
    _post_open(conn, target)
    conn.try_send(data_frame(1, b"body") +
                  continuation_frame(1, encode_headers([("x-late", "1")])))
    conn.expect_connection_error(PROTOCOL_ERROR)


# ------------------------------------------------------------------ 7

def test_7_goaway_unknown_error_code(conn):
    """RFC 9113 7: unknown error codes MUST NOT trigger special behaviour:
    a GOAWAY with code 0xFF is not answered with an error."""
    conn.send(goaway_frame(0, 0xFF))
    conn.send(ping_frame(b"unknown!"))
    try:
        while True:
            f = conn.read_frame()
            if f.type == GOAWAY:
                assert f.error_code == 0, f"GOAWAY {f.error_code}"
            if isinstance(f, PingFrame):
                return
    except Exception as e:  # closing is allowed after GOAWAY
        if isinstance(e, AssertionError):
            raise


def test_7_rst_stream_unknown_error_code(conn, target):
    """RFC 9113 7: a RST_STREAM with an unknown error code closes the stream
    like any other, and the connection goes on."""
    _post_open(conn, target)
    conn.send(rst_stream_frame(1, 0xFF))
    conn.expect_alive()
    conn.send_request(3, "GET", target.path)
    assert conn.expect_response(3).status == 200



