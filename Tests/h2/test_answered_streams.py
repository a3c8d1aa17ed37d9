"""Protocol errors on streams a server may already have answered, and on
streams it no longer tracks: h2spec's frames, sent to H2_PATH and to
H2_POST_PATH (a path that reads the body).

With H2_EARLY_ANSWERS=1 (band-edge) the server answers a request on its head
when its route reads no body: H2_PATH is then a GET-only path (a POST gets 405
before its DATA), a GET without END_STREAM is answered at once on either path,
and each test waits for that answer before it breaks the protocol, so the
violation lands on an answered stream. An answer sent early never excuses a
later violation: RFC 9113 asks for the same error whatever the server has
written on the stream. Without the variable the frames go out at once, as
h2spec sends them."""
from __future__ import annotations

import os

import pytest

from frames import (
    CANCEL, DATA, FLOW_CONTROL_ERROR, MAX_WINDOW, PROTOCOL_ERROR,
    STREAM_CLOSED, data_frame, encode_headers, headers_frame, raw_frame,
    rst_stream_frame, window_update_frame,
)

EARLY = os.environ.get("H2_EARLY_ANSWERS", "") in ("1", "true", "yes")
PATHS = ["answered on the head", "reading the body"]


def _path(target, which: str) -> str:
    return target.path if which == "answered on the head" else target.post_path


def _open(conn, target, which: str, method: str, extra=()):
    """Stream 1: `method` on the path `which` names, its request not ended.
    When the server answers such a request on its head (all but a POST to
    the body-reading path), the answer is awaited, so that what follows
    arrives on an answered stream."""
    conn.send_request(1, method, _path(target, which), extra=extra, end_stream=False)
    if EARLY and (which == "answered on the head" or method != "POST"):
        conn.expect_response(1)


@pytest.mark.parametrize("which", PATHS)
def test_5_1_1_lower_stream_after_an_answered_one(conn, target, which):
    """RFC 9113 5.1.1 (h2spec 5.1.1 #2): HEADERS on stream 3 after stream 5
    is a connection error PROTOCOL_ERROR, also once 5 has its answer."""
    path = _path(target, which)
    conn.send_request(5, "GET", path)
    if EARLY:
        conn.expect_response(5)
    conn.try_send(headers_frame(3, encode_headers(conn.request_headers("GET", path))))
    conn.expect_connection_error(PROTOCOL_ERROR)


@pytest.mark.parametrize("which", PATHS)
def test_6_1_invalid_pad_length_on_an_answered_stream(conn, target, which):
    """RFC 9113 6.1 (h2spec 6.1 #3): a pad length past the payload is a
    connection error PROTOCOL_ERROR, not a reset of a stream answered on its
    head."""
    _open(conn, target, which, "POST", extra=[("content-length", "4")])
    conn.try_send(raw_frame(DATA, 0x8, 1, b"\x06Test"))
    conn.expect_connection_error(PROTOCOL_ERROR)


@pytest.mark.parametrize("which", PATHS)
def test_8_1_second_headers_without_end_stream(conn, target, which):
    """RFC 9113 8.1 (h2spec 8.1 #1): a second HEADERS that does not end the
    stream is a stream error PROTOCOL_ERROR, whether or not it was answered."""
    _open(conn, target, which, "POST")
    conn.try_send(data_frame(1, b"test"))
    conn.try_send(headers_frame(1, encode_headers(conn.request_headers("POST", _path(target, which))),
                                end_stream=False))
    conn.expect_stream_error(1, PROTOCOL_ERROR, allow_response=True)


@pytest.mark.parametrize("which", PATHS)
def test_8_1_2_1_pseudo_field_in_trailers(conn, target, which):
    """RFC 9113 8.1 (h2spec 8.1.2.1 #3): trailers with a pseudo-header field
    are malformed: a stream error PROTOCOL_ERROR."""
    _open(conn, target, which, "POST")
    conn.try_send(data_frame(1, b"test"))
    conn.try_send(headers_frame(1, encode_headers([(":method", "POST"), ("x-trailer", "1")]), end_stream=True))
    conn.expect_stream_error(1, PROTOCOL_ERROR, allow_response=True)


@pytest.mark.parametrize("frames", [1, 2])
@pytest.mark.parametrize("which", PATHS)
def test_8_1_1_content_length_disagrees(conn, target, which, frames):
    """RFC 9113 8.1.1 (h2spec 8.1.2.6 #1, #2): DATA that does not add up to
    content-length is malformed: a stream error PROTOCOL_ERROR."""
    _open(conn, target, which, "POST", extra=[("content-length", "1")])
    if frames == 2:
        conn.try_send(data_frame(1, b"test"))
    conn.try_send(data_frame(1, b"test", end_stream=True))
    conn.expect_stream_error(1, PROTOCOL_ERROR, allow_response=True)


@pytest.mark.parametrize("late", ["DATA", "HEADERS"])
@pytest.mark.parametrize("which", PATHS)
def test_5_1_frames_after_the_clients_own_reset(conn, target, which, late):
    """RFC 9113 5.1 (h2spec 5.1 #8, #9): DATA or HEADERS after the client's
    RST_STREAM is STREAM_CLOSED (a stream error, or a connection error,
    5.4.1), also when the server had answered the stream on its head."""
    path = _path(target, which)
    _open(conn, target, which, "GET")
    conn.try_send(rst_stream_frame(1, CANCEL))
    if late == "DATA":
        conn.try_send(data_frame(1, b"test", end_stream=True))
    else:
        conn.try_send(headers_frame(1, encode_headers(conn.request_headers("GET", path))))
    conn.expect_stream_error(1, STREAM_CLOSED, allow_response=True)


@pytest.mark.parametrize("which", PATHS)
def test_6_9_window_update_zero_on_an_answered_stream(conn, target, which):
    """RFC 9113 6.9 (h2spec 6.9 #2): WINDOW_UPDATE of 0 on a stream is a
    stream error PROTOCOL_ERROR, also after its answer."""
    _open(conn, target, which, "GET")
    conn.try_send(window_update_frame(1, 0))
    conn.expect_stream_error(1, PROTOCOL_ERROR, allow_response=True)


@pytest.mark.parametrize("which", PATHS)
def test_6_9_1_stream_window_past_the_maximum(conn, target, which):
    """RFC 9113 6.9.1 (h2spec 6.9.1 #3): a stream's window pushed past
    2^31-1 is a stream error FLOW_CONTROL_ERROR (RST_STREAM)."""
    _open(conn, target, which, "GET")
    conn.try_send(window_update_frame(1, MAX_WINDOW) + window_update_frame(1, MAX_WINDOW))
    conn.expect_stream_error(1, FLOW_CONTROL_ERROR, allow_response=True)


@pytest.mark.skipif(not EARLY, reason="H2_EARLY_ANSWERS is not set: the server may wait for the body")
@pytest.mark.parametrize("which", PATHS)
def test_a_small_body_after_an_early_answer_is_read_without_error(conn, target, which):
    """RFC 9113 8.1: a server may answer before the request ends and still
    read the rest. A few bytes of body after the answer are read and dropped
    (the stream ends normally, no reset), and the connection goes on."""
    _open(conn, target, which, "POST" if which == "answered on the head" else "GET")
    conn.try_send(data_frame(1, b"test", end_stream=True))
    conn.expect_alive()
