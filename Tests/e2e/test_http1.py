"""The HTTP/1.1 engine over real sockets: keep-alive, pipelining, framing, rejections, limits."""

import json
import subprocess

import pytest
from edge import request

# (name, raw request, expected status): every one must also close the connection.
REJECTIONS = [
    ("content-length and transfer-encoding",
     b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("invalid content-length", b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3x\r\n\r\nabc", 400),
    ("conflicting content-length",
     b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
    ("transfer-encoding without final chunked", b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    ("chunked then gzip", b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400),
    ("obs-fold", b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Long: a\r\n  continued\r\n\r\n", 400),
    ("whitespace before colon", b"GET /healthz HTTP/1.1\r\nHost : a\r\n\r\n", 400),
    ("bare LF line ending", b"GET /healthz HTTP/1.1\nHost: a\n\n", 400),
    ("bare CR in a value", b"GET /healthz HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", 400),
    ("NUL in a value", b"GET /healthz HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", 400),
    ("other control in a value", b"GET /healthz HTTP/1.1\r\nHost: a\r\nX: a\x1bb\r\n\r\n", 400),
    ("missing Host", b"GET /healthz HTTP/1.1\r\nX: a\r\n\r\n", 400),
    ("duplicate Host", b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("bare LF in chunk framing",
     b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", 400),
    ("bare CR after chunk data",
     b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\rx0\r\n\r\n", 400),
    ("unknown major version", b"GET /healthz HTTP/2.0\r\nHost: a\r\n\r\n", 505),
    ("target too long", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n\r\n", 414),
    ("header section too large", b"GET /healthz HTTP/1.1\r\nHost: a\r\nX: " + b"b" * 20000 + b"\r\n\r\n", 431),
    ("too many header fields", b"GET /healthz HTTP/1.1\r\nHost: a\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(101)) + b"\r\n", 431),
    ("body too large", b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n", 413),
    ("unknown transfer coding", b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: foo, chunked\r\n\r\n0\r\n\r\n", 501),
    ("unknown expectation", b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\na", 417),
    # Refused at the first byte that cannot belong to a request line (a 408 after
    # the 10 s head timeout would never arrive within the client's 5 s).
    ("TLS ClientHello on the plain port", bytes.fromhex("16030100a5010000a10303") + b"\x00" * 32, 400),
    ("fragment in the target", b"GET /healthz#top HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("empty Host", b"GET /healthz HTTP/1.1\r\nHost:\r\n\r\n", 400),
    ("over-long method", b"M" * 100 + b" /healthz HTTP/1.1\r\nHost: a\r\n\r\n", 501),
    ("over-long method, unterminated", b"M" * 100, 501),
    # Chunk extensions are bounded.
    ("chunk extension too long",
     b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;" + b"e" * 300, 400),
]


@pytest.mark.parametrize("name,raw,status", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_rejection_has_its_status_a_plain_message_and_closes(server, name, raw, status):
    client = server.connect()
    client.send(raw)
    response = client.read_response()
    assert response.status == status
    assert response.header("connection") == "close"
    assert response.header("cache-control") == "no-store"
    assert response.header("content-type") == "text/plain; charset=utf-8"
    assert response.body.startswith(response.reason.encode() + b": ")
    assert client.closed_by_peer()


def test_rejection_closes_even_with_unread_bytes_and_still_delivers_the_answer(server):
    client = server.connect()
    client.send(b"GET /healthz HTTP/1.1\r\nHost: a\r\nX : y\r\n\r\n" + b"z" * 100000)
    assert client.read_response().status == 400
    assert client.closed_by_peer()


def test_keep_alive_serves_several_requests_on_one_connection(server):
    client = server.connect()
    for _ in range(3):
        client.send(request("GET", "/healthz"))
        response = client.read_response()
        assert response.status == 200
        assert response.body == b"ok\n"
        assert response.header("connection") is None
    assert not client.closed_by_peer(timeout=0.2)


def test_three_pipelined_requests_in_one_write_are_answered_in_order(server):
    client = server.connect()
    client.send(b"".join(request("POST", "/_test/echo", body=word) for word in (b"one", b"two", b"three")))
    assert [client.read_response().body for _ in range(3)] == [b"one", b"two", b"three"]


def test_pipelining_behind_a_pooled_request_keeps_order(server):
    client = server.connect()
    client.send(request("GET", "/_test/sleep?ms=200") + request("POST", "/_test/echo", body=b"after"))
    assert client.read_response().body == b"slept 200\n"
    assert client.read_response().body == b"after"


def test_connection_close_is_honoured(server):
    client = server.connect()
    client.send(request("GET", "/healthz", {"Connection": "close"}))
    response = client.read_response()
    assert response.status == 200
    assert response.header("connection") == "close"
    assert client.closed_by_peer()


def test_half_closed_client_gets_its_answers(server):
    client = server.connect()
    client.send(request("GET", "/healthz") + request("GET", "/healthz"))
    client.sock.shutdown(1)  # SHUT_WR, as `printf ... | nc` does
    assert client.read_response().status == 200
    assert client.read_response().status == 200
    assert client.closed_by_peer()


def test_http10_keep_alive_and_default_close(server):
    client = server.connect()
    client.send(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    response = client.read_response()
    assert response.header("connection") == "keep-alive"
    client.send(b"GET /healthz HTTP/1.0\r\n\r\n")
    response = client.read_response()
    assert response.header("connection") == "close"
    assert client.closed_by_peer()


def test_expect_100_continue(server):
    client = server.connect()
    client.send(b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
    interim = client.read_response()
    assert interim.status == 100
    client.send(b"hello")
    final = client.read_response()
    assert final.status == 200
    assert final.body == b"hello"


# The head alone decides these, before any body is read and before 100 Continue; a client
# waiting for 100 Continue is answered and the connection closed (its body would be read as the
# next request). (name, head, status, error code, extra field that must be there)
HEAD_ANSWERS = [
    ("404 for a path that does not exist",
     b"POST /api/client/v1/nowhere HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Type: application/json\r\n"
     b"Content-Length: 10\r\n\r\n", 404, "not_found", None),
    ("405 for a method the path does not take",
     b"PUT /api/client/v1/session HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n",
     405, "method_not_allowed", ("allow", "DELETE, GET, HEAD")),
    ("415 for an exchange that is not JSON",
     b"POST /api/client/v1/native/exchange HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
     b"Content-Type: text/plain\r\nContent-Length: 10\r\n\r\n", 415, "unsupported_media_type", ("pragma", "no-cache")),
    ("413 for an exchange larger than its 4096 bytes",
     b"POST /api/client/v1/native/exchange HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
     b"Content-Type: application/json\r\nContent-Length: 4097\r\n\r\n", 413, "request_too_large", ("pragma", "no-cache")),
    ("413 for an account change larger than its 4096 bytes, without Expect",
     b"PATCH /api/client/v1/account HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
     b"Content-Length: 5000\r\n\r\n", 413, "request_too_large", None),
]


@pytest.mark.parametrize("name,head,status,code,field", HEAD_ANSWERS, ids=[c[0] for c in HEAD_ANSWERS])
def test_answers_on_the_head_before_the_body(server, name, head, status, code, field):
    client = server.connect()
    client.send(head)  # and never the body
    response = client.read_response()
    assert response.status == status, name
    assert json.loads(response.body)["error"] == code
    assert response.header("connection") == "close" and response.header("cache-control") == "no-store"
    if field:
        assert response.header(field[0]) == field[1]
    assert client.closed_by_peer()


# A body of unknown length (chunked) past a JSON route's 4096 bytes is refused while it is read,
# with the route's own answer: the handlers do not check the size again.
CHUNKED_PAST_THE_ROUTE = [
    ("PATCH", "/api/client/v1/account", None),
    ("POST", "/api/client/v1/native/exchange", "no-cache"),
    ("PATCH", "/api/client/v1/schools/sch_x/members/acc_x", None),
    ("POST", "/api/client/v1/schools/sch_x/invitations", None),
]


@pytest.mark.parametrize("method,path,pragma", CHUNKED_PAST_THE_ROUTE, ids=[c[1] for c in CHUNKED_PAST_THE_ROUTE])
def test_a_chunked_body_past_the_routes_limit_gets_the_routes_own_413(server, method, path, pragma):
    client = server.connect()
    chunks = b"".join(b"400\r\n" + b" " * 1024 + b"\r\n" for _ in range(5)) + b"0\r\n\r\n"
    client.send(f"{method} {path} HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n".encode() + chunks)
    response = client.read_response()
    assert response.status == 413
    assert json.loads(response.body)["error"] == "request_too_large", "the route's answer, not the engine's"
    assert response.header("connection") == "close" and response.header("pragma") == pragma


def test_a_refused_body_without_expect_is_dropped_and_the_connection_goes_on(server):
    client = server.connect()
    client.send(b"POST /nowhere HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n")
    early = client.read_response()
    assert early.status == 404 and early.header("connection") is None
    client.send(b"abcdeGET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
    assert client.read_response().status == 200


def test_a_body_the_route_takes_gets_100_continue(server):
    client = server.connect()
    body = b'{"code":"x"}'
    client.send(b"POST /api/client/v1/native/exchange HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
    assert client.read_response().status == 100
    client.send(body)
    answer = client.read_response()
    assert answer.status == 400 and json.loads(answer.body)["error"] in ("invalid_request", "invalid_grant")


def test_chunked_body_with_trailer(server):
    client = server.connect()
    client.send(
        b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: 1\r\n\r\n"
    )
    response = client.read_response()
    assert response.body == b"hello world"
    assert response.header("x-trailer-count") == "1"


def test_head_matches_get_without_content(server):
    client = server.connect()
    client.send(request("GET", "/healthz") + request("HEAD", "/healthz"))
    get = client.read_response()
    head = client.read_response(head_request=True)
    assert head.status == 200
    assert head.header("content-length") == get.header("content-length") == "3"
    assert [h for h in head.headers if h[0] != "Date"] == [h for h in get.headers if h[0] != "Date"]
    client.send(request("GET", "/healthz"))  # nothing stray was left on the wire
    assert client.read_response().body == b"ok\n"


def test_not_found_and_method_not_allowed(server):
    client = server.connect()
    client.send(request("GET", "/nope") + request("DELETE", "/healthz"))
    missing = client.read_response()
    assert missing.status == 404
    assert missing.header("cache-control") == "no-store"
    wrong = client.read_response()
    assert wrong.status == 405
    assert wrong.header("allow") == "GET, HEAD"


def test_eight_kib_target_is_accepted(server):
    client = server.connect()
    client.send(request("GET", "/healthz?" + "a" * (8192 - len("/healthz?"))))
    assert client.read_response().status == 200


def test_healthz_with_curl_exact_headers(server):
    out = subprocess.run(["curl", "-sS", "-i", server.url("/healthz")], capture_output=True, check=True).stdout
    head, body = out.split(b"\r\n\r\n", 1)
    names = [line.split(b":")[0].lower() for line in head.split(b"\r\n")[1:]]
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert sorted(names) == [b"cache-control", b"content-length", b"content-type", b"date"]
    assert b"Cache-Control: no-store" in head
    assert body == b"ok\n"


def test_access_log_is_one_json_line_per_request_without_query_or_headers(server):
    client = server.connect()
    client.send(request("GET", "/healthz?code=c0de-secret", {"Authorization": "Bearer t0ken-secret",
                                                             "Cookie": "bl=cookie-secret"}))
    client.read_response()
    client.send(request("GET", "/nope"))
    client.read_response()
    lines = server.access_log(minimum=2)
    assert [(line["method"], line["path"], line["status"]) for line in lines] == [
        ("GET", "/healthz", 200), ("GET", "/nope", 404)]
    assert all(set(line) == {"time", "method", "path", "protocol", "status", "bytes", "duration_us", "client"} for line in lines)
    assert lines[0]["client"].startswith("127.0.0.1:")
    text = server.stdout_path.read_text() + server.stderr_path.read_text()
    assert "secret" not in text


def test_connection_limit_per_loop(make_server):
    server = make_server("--threads", "1", "--max-connections", "2")
    first, second = server.connect(), server.connect()
    first.send(request("GET", "/healthz"))
    assert first.read_response().status == 200
    third = server.connect()
    assert third.closed_by_peer()
    second.send(request("GET", "/healthz"))
    assert second.read_response().status == 200


def test_large_body_arrives_whole_and_the_next_response_follows(server):
    client = server.connect()
    size = 3_000_000
    client.send(request("GET", f"/_test/bytes?n={size}") + request("GET", "/healthz"))
    big = client.read_response()
    assert big.status == 200
    assert len(big.body) == size and big.body == b"x" * size
    assert client.read_response().body == b"ok\n"


def test_an_unknown_method_is_501_and_the_connection_stays_open(server):
    """RFC 9110 §9.1: a method no route serves is not implemented; the request was well-formed."""
    client = server.connect()
    client.send(request("BREW", "/healthz") + request("GET", "/healthz"))
    unknown = client.read_response()
    assert unknown.status == 501 and unknown.header("connection") is None
    assert unknown.body == b"This method is not implemented here.\n"
    assert client.read_response().status == 200


def test_options_asterisk_is_204_with_every_method_served(server):
    client = server.connect()
    client.send(b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n")
    response = client.read_response()
    assert response.status == 204
    assert response.header("content-length") is None
    assert set(response.header("allow").split(", ")) >= {"DELETE", "GET", "HEAD", "OPTIONS", "POST"}


API_ERRORS = [
    ("413 over the engine's body limit", b"POST /api/client/v1/x HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n",
     413, "payload_too_large", True),
    ("400 parse error", b"GET /api/client/v1/session HTTP/1.1\r\nHost: a\r\nX : y\r\n\r\n", 400, "bad_request", True),
    ("400 empty Host", b"GET /api/client/v1/session HTTP/1.1\r\nHost:\r\n\r\n", 400, "bad_request", True),
    ("414 target too long", b"GET /api/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n\r\n", 414, "uri_too_long", True),
    ("431 header section too large", b"GET /api/x HTTP/1.1\r\nHost: a\r\nX: " + b"b" * 20000 + b"\r\n\r\n", 431,
     "request_header_fields_too_large", True),
    ("501 unknown method", b"BREW /api/client/v1/session HTTP/1.1\r\nHost: a\r\n\r\n", 501, "not_implemented", False),
    ("404", b"GET /api/client/v1/nope HTTP/1.1\r\nHost: a\r\n\r\n", 404, "not_found", False),
    ("405 for a standard method", b"PATCH /api/client/v1/session HTTP/1.1\r\nHost: a\r\n\r\n", 405,
     "method_not_allowed", False),
]


@pytest.mark.parametrize("name,raw,status,code,closes", API_ERRORS, ids=[e[0] for e in API_ERRORS])
def test_engine_errors_under_api_are_json(server, name, raw, status, code, closes):
    """Every refusal the engine writes under /api/ has the contract's shape."""
    client = server.connect()
    client.send(raw)
    response = client.read_response()
    assert response.status == status
    assert response.header("content-type") == "application/json; charset=utf-8"
    assert response.header("cache-control") == "no-store"
    body = json.loads(response.body)
    assert body["error"] == code and set(body) == {"error", "message"}
    assert body["message"] and "\n" not in body["message"]
    if closes:
        assert response.header("connection") == "close"
        assert client.closed_by_peer()


BROWSER = b"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"

# (name, raw request, status, content type): the head is refused before it is complete, so the
# shape comes from the Accept line that arrived with it.
EARLY_REFUSALS = [
    ("browser 414", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n" + BROWSER + b"\r\n", 414,
     "text/html; charset=utf-8"),
    ("browser 431", b"GET /x HTTP/1.1\r\nHost: a\r\n" + BROWSER + b"X: " + b"b" * 20000 + b"\r\n\r\n", 431,
     "text/html; charset=utf-8"),
    ("browser 414 under /api/", b"GET /api/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n" + BROWSER + b"\r\n",
     414, "application/json; charset=utf-8"),
    ("browser 431 under /api/", b"GET /api/x HTTP/1.1\r\nHost: a\r\n" + BROWSER + b"X: " + b"b" * 20000
     + b"\r\n\r\n", 431, "application/json; charset=utf-8"),
    ("browser 414 under /.well-known/", b"GET /.well-known/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n" + BROWSER
     + b"\r\n", 414, "text/plain; charset=utf-8"),
    ("non-browser 414", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n", 414,
     "text/plain; charset=utf-8"),
    ("non-browser 431", b"GET /x HTTP/1.1\r\nHost: a\r\nAccept: application/json\r\nX: " + b"b" * 20000
     + b"\r\n\r\n", 431, "text/plain; charset=utf-8"),
]


@pytest.mark.parametrize("name,raw,status,content_type", EARLY_REFUSALS, ids=[r[0] for r in EARLY_REFUSALS])
def test_a_head_refused_before_its_end_takes_its_shape_from_the_accept_that_arrived(
        server, name, raw, status, content_type):
    """A browser's 414 and 431 are pages; /api/ is JSON; others plain."""
    client = server.connect()
    client.send(raw)
    response = client.read_response()
    assert response.status == status
    assert response.header("content-type") == content_type
    assert response.header("cache-control") == "no-store"
    assert response.header("connection") == "close"
    if content_type.startswith("text/html"):
        page = response.body.decode()
        assert page.startswith('<!doctype html>\n<html lang="en-GB"') and 'href="/">Go to the start page</a>' in page
    elif content_type.startswith("application/json"):
        body = json.loads(response.body)
        assert set(body) == {"error", "message"}
        assert body["error"] == ("uri_too_long" if status == 414 else "request_header_fields_too_large")
    else:
        assert response.body.startswith(response.reason.encode() + b": ")
    assert client.closed_by_peer()
