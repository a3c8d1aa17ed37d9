"""Content-Type is parsed per RFC 9110 §8.3.1: white space around ';', any case, quoted values."""

import json
import re

import pytest

from edge import exchange
from test_native_handoff import App, post_json
from test_web_sign_in import PASSWORD, Browser, add_account


def post_form(server, browser, content_type, body):
    """POST /sign-in with the browser's cookies and this Content-Type, exactly as written."""
    cookies = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    return exchange(server, "POST", "/sign-in", [
        ("Host", f"127.0.0.1:{server.port}"), ("Connection", "close"), ("Origin", f"http://127.0.0.1:{server.port}"),
        ("Cookie", cookies), ("Content-Type", content_type), ("Content-Length", str(len(body)))], body)


@pytest.mark.parametrize("content_type", [
    "application/x-www-form-urlencoded", "application/x-www-form-urlencoded ; charset=UTF-8",
    "Application/X-WWW-Form-Urlencoded;Charset=\"utf-8\"", "application/x-www-form-urlencoded\t;\tcharset=utf-8",
])
def test_sign_in_form_accepts_every_spelling_of_its_media_type(make_server, content_type):
    server = make_server()
    add_account(server, "ada@example.test", "Ada Example")
    browser = Browser(server)
    page = browser.send("GET", "/sign-in")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page.body).group(1).decode()
    from urllib.parse import urlencode
    body = urlencode({"csrf": csrf, "email": "ada@example.test", "password": PASSWORD}).encode()
    answer = post_form(server, browser, content_type, body)
    assert answer.status == 303


@pytest.mark.parametrize("content_type,status", [
    ("application/json", 400), ("application/json ; charset=utf-8", 400), ("APPLICATION/JSON;charset=\"UTF-8\"", 400),
    ("application/json; charset=iso-8859-1", 415), ("application/jsonx", 415), ("text/plain", 415),
    ("application/json; charset", 415),
])
def test_exchange_media_types(make_server, content_type, status):
    server = make_server()
    app = App(server)
    body = {"code": "x" * 43, "codeVerifier": app.verifier, "state": app.state, "platform": "ios",
            "appVersion": "1.4.0"}
    response = post_json(server, "/api/client/v1/native/exchange", json.dumps(body).encode(),
                         {"Idempotency-Key": "k"}, content_type=content_type)
    assert response.status == status, response.body
    assert response.header("content-type") == "application/json; charset=utf-8"


@pytest.mark.parametrize("content_type", [
    "application/x-www-form-urlencoded; charset=latin1", "text/plain", "multipart/form-data; boundary=x",
])
def test_a_form_in_another_encoding_gets_415_and_a_page_that_says_so(make_server, content_type):
    server = make_server()
    browser = Browser(server)
    page = browser.send("GET", "/sign-in")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page.body).group(1).decode()
    body = f"csrf={csrf}&email=ada%40example.test&password=x".encode()
    answer = post_form(server, browser, content_type, body)
    assert answer.status == 415
    assert answer.header("content-type") == "text/html; charset=utf-8" and b"URL-encoded UTF-8" in answer.body
