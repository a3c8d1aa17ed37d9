"""RFC 9113 section 8: HTTP semantics over HTTP/2 (message framing,
content-length, trailers, field validity, connection-specific fields,
pseudo-header fields, CONNECT, server push)."""
from __future__ import annotations

import pytest

from frames import (
    PROTOCOL_ERROR, PUSH_PROMISE, HeadersFrame,
    PushPromiseFrame, RstStreamFrame, data_frame, encode_headers,
    headers_frame, raw_frame,
)


def _req(conn, target, method="GET", path=None):
    return [(":method", method), (":scheme", conn.scheme),
            (":path", target.path if path is None else path),
            (":authority", conn.authority)]


def _malformed(conn, headers, sid=1, end_stream=True):
    """Send ``headers`` as a request; RFC 9113 8.1.1: a malformed request
    MUST be a stream error PROTOCOL_ERROR (or a connection error); the
    server MAY send an HTTP response first, but the RST_STREAM (or
    GOAWAY, or close) must still come."""
    conn.try_send(headers_frame(sid, encode_headers(headers),
                                end_stream=end_stream))
    conn.expect_stream_error(sid, PROTOCOL_ERROR, allow_response=True)


# ------------------------------------------------------- 8.1 message framing

def test_8_1_second_headers_without_end_stream(conn, target):
    """RFC 9113 8.1: a trailer section MUST end the stream; a second HEADERS
    without END_STREAM is malformed: stream error PROTOCOL_ERROR."""
    conn.send_headers(1, _req(conn, target, "POST", target.post_path),
                      end_stream=False)
    conn.try_send(headers_frame(1, encode_headers([("x-trailer", "1")]),
                                end_stream=False))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_trailers_accepted(conn, target):
    """RFC 9113 8.1: HEADERS, DATA, then a trailer HEADERS with END_STREAM
    is a complete request and MUST be answered."""
    conn.send_headers(1, _req(conn, target, "POST", target.post_path) +
                      [("te", "trailers")], end_stream=False)
    conn.send(data_frame(1, b"body"))
    conn.send_headers(1, [("x-checksum", "abc")], end_stream=True)
    assert conn.expect_response(1).status < 500


def test_8_1_1_content_length_larger_than_data(conn, target):
    """RFC 9113 8.1.1: content-length not equal to the DATA payload length
    MUST be treated as malformed: stream error PROTOCOL_ERROR."""
    conn.send_headers(1, _req(conn, target, "POST", target.post_path) +
                      [("content-length", "1")], end_stream=False)
    conn.try_send(data_frame(1, b"test", end_stream=True))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_1_content_length_sum_of_data(conn, target):
    """RFC 9113 8.1.1: content-length not equal to the sum of several DATA
    payloads MUST be a stream error PROTOCOL_ERROR."""
    conn.send_headers(1, _req(conn, target, "POST", target.post_path) +
                      [("content-length", "8")], end_stream=False)
    conn.try_send(data_frame(1, b"test") +
                  data_frame(1, b"test") + data_frame(1, b"x",
                                                      end_stream=True))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_1_content_length_more_than_sent(conn, target):
    """RFC 9113 8.1.1: a request ending with fewer octets than its
    content-length MUST be a stream error PROTOCOL_ERROR."""
    conn.send_headers(1, _req(conn, target, "POST", target.post_path) +
                      [("content-length", "10")], end_stream=False)
    conn.try_send(data_frame(1, b"short", end_stream=True))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_1_1_content_length_with_no_data(conn, target):
    """RFC 9113 8.1.1: HEADERS with END_STREAM and a non-zero content-length
    is malformed: stream error PROTOCOL_ERROR."""
    _malformed(conn, _req(conn, target, "POST", target.post_path) +
               [("content-length", "4")])


def test_8_1_1_matching_content_length_accepted(conn, target):
    """RFC 9113 8.1.1: a content-length equal to the DATA total MUST be
    accepted."""
    conn.send_headers(1, _req(conn, target, "POST", target.post_path) +
                      [("content-length", "8")], end_stream=False)
    conn.send(data_frame(1, b"four") + data_frame(1, b"more",
                                                  end_stream=True))
    assert conn.expect_response(1).status < 500


# ------------------------------------------------------- 8.2 field validity

def test_8_2_uppercase_field_name(conn, target):
    """RFC 9113 8.2: a field name with uppercase characters MUST be treated
    as malformed: stream error PROTOCOL_ERROR."""
    _malformed(conn, _req(conn, target) + [("X-TestHeader", "test")])


@pytest.mark.parametrize("name", [b"x-sp ace", b"x-col:on", b"x-nul\0",
                                  b"x-del\x7f", b""],
                         ids=["space", "colon", "nul", "del", "empty"])
def test_8_2_1_invalid_field_name(conn, target, name):
    """RFC 9113 8.2.1: a field name with characters outside the token set
    (or empty) MUST be treated as malformed: stream error
    PROTOCOL_ERROR."""
    _malformed(conn, _req(conn, target) + [(name, b"v")])


@pytest.mark.parametrize("value", [b"a\r\nx-injected: 1", b"a\nb", b"a\0b"],
                         ids=["crlf", "lf", "nul"])
def test_8_2_1_invalid_field_value(conn, target, value):
    """RFC 9113 8.2.1: a field value containing NUL, LF or CR MUST be
    treated as malformed: stream error PROTOCOL_ERROR."""
    _malformed(conn, _req(conn, target) + [(b"x-value", value)])


@pytest.mark.parametrize("value", [b" lead", b"trail\t"],
                         ids=["leading_space", "trailing_tab"])
def test_8_2_1_field_value_surrounding_whitespace(conn, target, value):
    """RFC 9113 8.2.1: a field value MUST NOT start or end with whitespace;
    such a request MUST be treated as malformed: stream error
    PROTOCOL_ERROR."""
    _malformed(conn, _req(conn, target) + [(b"x-value", value)])


@pytest.mark.parametrize("name,value", [
    ("connection", "keep-alive"), ("keep-alive", "timeout=5"),
    ("proxy-connection", "keep-alive"), ("transfer-encoding", "chunked"),
    ("upgrade", "h2c")])
def test_8_2_2_connection_specific_field(conn, target, name, value):
    """RFC 9113 8.2.2: a request with a connection-specific field MUST be
    treated as malformed: stream error PROTOCOL_ERROR."""
    _malformed(conn, _req(conn, target) + [(name, value)])


def test_8_2_2_te_other_than_trailers(conn, target):
    """RFC 9113 8.2.2: TE with any value other than "trailers" MUST be
    treated as malformed: stream error PROTOCOL_ERROR."""
    _malformed(conn, _req(conn, target) + [("te", "trailers, deflate")])


def test_8_2_2_te_trailers_accepted(conn, target):
    """RFC 9113 8.2.2: TE: trailers is allowed and MUST be accepted."""
    conn.send_headers(1, _req(conn, target) + [("te", "trailers")])
    assert conn.expect_response(1).status == 200


def test_8_2_3_split_cookie_accepted(conn, target):
    """RFC 9113 8.2.3: cookie may be split into several fields; the request
    MUST be accepted."""
    conn.send_headers(1, _req(conn, target) + [("cookie", "a=1"),
                                               ("cookie", "b=2")])
    assert conn.expect_response(1).status == 200


def test_8_2_response_is_well_formed(conn, target):
    """RFC 9113 8.2/8.2.2/8.3.2: the server's response MUST have lowercase
    field names, :status as its only pseudo-field, no connection-specific
    fields, and a content-length (if any) equal to the body."""
    conn.send_request(1, "GET", target.path)
    r = conn.expect_response(1)
    names = [n for n, _ in r.headers]
    assert names[0] == ":status"
    assert [n for n in names if n.startswith(":")] == [":status"]
    assert all(n == n.lower() for n in names)
    bad = {"connection", "keep-alive", "proxy-connection",
           "transfer-encoding", "upgrade"}
    assert not bad & set(names)
    cl = dict(r.headers).get("content-length")
    if cl is not None:
        assert int(cl) == len(r.body)


# ------------------------------------------------------- 8.3 pseudo-headers

def test_8_3_unknown_pseudo_header(conn, target):
    """RFC 9113 8.3: an undefined pseudo-header field MUST be treated as
    malformed: stream error PROTOCOL_ERROR."""
    _malformed(conn, _req(conn, target) + [(":test", "test")])


def test_8_3_response_pseudo_header_in_request(conn, target):
    """RFC 9113 8.3: a response pseudo-header (:status) in a request MUST
    be treated as malformed: stream error PROTOCOL_ERROR."""
    _malformed(conn, _req(conn, target) + [(":status", "200")])


def test_8_3_pseudo_header_in_trailers(conn, target):
    """RFC 9113 8.3: pseudo-header fields MUST NOT appear in a trailer
    section: stream error PROTOCOL_ERROR."""
    conn.send_headers(1, _req(conn, target, "POST", target.post_path) +
                      [("te", "trailers")], end_stream=False)
    conn.send(data_frame(1, b"test"))
    conn.try_send(headers_frame(1, encode_headers([(":method", "POST")])))
    conn.expect_stream_error(1, PROTOCOL_ERROR)


def test_8_3_pseudo_header_after_regular_field(conn, target):
    """RFC 9113 8.3: all pseudo-header fields MUST precede regular fields;
    otherwise malformed: stream error PROTOCOL_ERROR."""
    r = _req(conn, target)
    _malformed(conn, r[:3] + [("x-regular", "1")] + r[3:])


def test_8_3_1_empty_path(conn, target):
    """RFC 9113 8.3.1: :path MUST NOT be empty for http/https URIs: stream
    error PROTOCOL_ERROR."""
    _malformed(conn, _req(conn, target, path=""))


@pytest.mark.parametrize("omit", [":method", ":scheme", ":path"])
def test_8_3_1_missing_pseudo_header(conn, target, omit):
    """RFC 9113 8.3.1: all HTTP/2 requests MUST include exactly one valid
    value for :method, :scheme and :path (unless CONNECT): stream error
    PROTOCOL_ERROR."""
    _malformed(conn, [h for h in _req(conn, target) if h[0] != omit])


@pytest.mark.parametrize("dup", [":method", ":scheme", ":path",
                                 ":authority"])
def test_8_3_1_duplicated_pseudo_header(conn, target, dup):
    """RFC 9113 8.3: the same pseudo-header field MUST NOT appear more than
    once in a field block: stream error PROTOCOL_ERROR."""
    r = _req(conn, target)
    i = [n for n, _ in r].index(dup)
    _malformed(conn, r[:i + 1] + [r[i]] + r[i + 1:])


def test_8_3_1_host_without_authority_accepted(conn, target):
    """RFC 9113 8.3.1: :authority may be absent when a Host field carries
    the authority; the request MUST be answered."""
    conn.send_headers(1, [(":method", "GET"), (":scheme", conn.scheme),
                          (":path", target.path), ("host", conn.authority)])
    assert conn.expect_response(1).status < 500


def test_8_3_1_options_asterisk_accepted(conn, target):
    """RFC 9113 8.3.1: OPTIONS with :path "*" is a valid request and MUST
    NOT be treated as malformed."""
    conn.send_headers(1, _req(conn, target, "OPTIONS", "*"))
    f = conn.read_until(lambda f: f.stream_id == 1 and isinstance(
        f, (HeadersFrame, RstStreamFrame)), "an answer on stream 1")
    if isinstance(f, RstStreamFrame):
        assert f.error_code != PROTOCOL_ERROR


# --------------------------------------------------------------- 8.5 CONNECT

def test_8_5_connect_with_scheme_and_path(conn, target):
    """RFC 9113 8.5: a CONNECT request MUST omit :scheme and :path; one with
    them is malformed: stream error PROTOCOL_ERROR."""
    _malformed(conn, [(":method", "CONNECT"), (":scheme", conn.scheme),
                      (":path", "/"), (":authority", "example.test:443")],
               end_stream=False)


def test_8_5_connect_without_authority(conn, target):
    """RFC 9113 8.5: a CONNECT request MUST carry :authority; without it it
    is malformed: stream error PROTOCOL_ERROR."""
    _malformed(conn, [(":method", "CONNECT")], end_stream=False)


def test_8_5_well_formed_connect_not_malformed(conn, target):
    """RFC 9113 8.5: a well-formed CONNECT (:method and :authority only)
    MUST NOT be treated as malformed: no PROTOCOL_ERROR (stream or
    connection) before a PING barrier; any response, a wait, or a refusal
    such as REFUSED_STREAM or CONNECT_ERROR is fine."""
    conn.send(headers_frame(1, encode_headers(
        [(":method", "CONNECT"), (":authority", "127.0.0.1:9")]),
        end_stream=False))
    conn.expect_alive(allow_rst=True)
    for f in conn.received:
        if isinstance(f, RstStreamFrame) and f.stream_id == 1:
            assert f.error_code not in (PROTOCOL_ERROR,), \
                "CONNECT treated as malformed"


# ----------------------------------------------------------- 8.4 server push

def test_8_4_push_promise_from_client(conn, target):
    """RFC 9113 8.4: a client cannot push: PUSH_PROMISE received by a server
    MUST be a connection error PROTOCOL_ERROR."""
    conn.send_headers(1, _req(conn, target, "POST", target.post_path),
                      end_stream=False)
    conn.try_send(raw_frame(PUSH_PROMISE, 0x4, 1, b"\0\0\0\x03" +
                            encode_headers(_req(conn, target))))
    conn.expect_connection_error(PROTOCOL_ERROR)


def test_8_4_no_push_when_disabled(conn, target):
    """RFC 9113 8.4/6.5.2: with SETTINGS_ENABLE_PUSH 0 the server MUST NOT
    send PUSH_PROMISE."""
    conn.send_request(1, "GET", target.path)
    conn.expect_response(1)
    conn.expect_alive()
    assert not [f for f in conn.received if isinstance(f, PushPromiseFrame)]
