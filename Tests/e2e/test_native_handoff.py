"""The native app's sign-in handoff through the real binary, played with an independent PKCE
implementation (authlib): system-browser form, 303 to the configured callback, the exchange,
idempotent retries, replays, and every refusal."""

import json
import re
import secrets
import time
from urllib.parse import urlencode, urlsplit, parse_qs

import pytest
from authlib.common.security import generate_token
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from edge import Server, exchange
from test_web_sign_in import PASSWORD, Browser, add_account

DEV_ORIGIN = "http://127.0.0.1:8080"  # config/development.json: the callback is built from it


def test_rfc7636_appendix_b_vector():
    assert create_s256_code_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == \
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


class App:
    """What the iOS or Android app does: state, verifier, challenge, then the exchange."""

    def __init__(self, server, platform="ios", version="1.4.0"):
        self.server = server
        self.platform, self.version = platform, version
        self.state = generate_token(32)
        self.verifier = generate_token(64)
        self.challenge = create_s256_code_challenge(self.verifier)

    def params(self, **overrides):
        p = {"state": self.state, "code_challenge": self.challenge, "code_challenge_method": "S256",
             "platform": self.platform, "app_version": self.version}
        p.update(overrides)
        return {k: v for k, v in p.items() if v is not None}

    def exchange(self, code, key="key-1", **overrides):
        body = {"code": code, "codeVerifier": self.verifier, "state": self.state, "platform": self.platform,
                "appVersion": self.version}
        body.update(overrides)
        return post_json(self.server, "/api/client/v1/native/exchange", body, {"Idempotency-Key": key} if key else {})


def post_json(server, path, body, headers=None, content_type="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    lines = [("Host", f"127.0.0.1:{server.port}"), ("Connection", "close"), ("Content-Type", content_type),
             ("Content-Length", str(len(data))), *(headers or {}).items()]
    return exchange(server, "POST", path, lines, data)


def sign_in_through_the_browser(server, app, email="ada@example.test", password=PASSWORD):
    browser = Browser(server)
    page = browser.send("GET", "/native/sign-in?" + urlencode(app.params()))
    assert page.status == 200, page.body
    fields = dict(re.findall(rb'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.body))
    form = {k.decode(): v.decode() for k, v in fields.items() if k != b"action"}
    form.update(email=email, password=password)
    return browser, browser.send("POST", "/native/sign-in", form=form)


@pytest.fixture
def server(make_server):
    s = make_server()
    add_account(s, "ada@example.test", "Ada Example", [("northfield", "teacher")])
    return s


def test_the_full_handoff(server):
    app = App(server)
    _, redirect = sign_in_through_the_browser(server, app)
    assert redirect.status == 303 and redirect.header("cache-control") == "no-store"
    location = redirect.header("location")
    code = parse_qs(urlsplit(location).query)["code"][0]
    assert location == f"{DEV_ORIGIN}/native/callback?code={code}&state={app.state}"
    assert len(code) == 43  # 256 bits, base64url
    answer = app.exchange(code)
    assert answer.status == 200, answer.body
    assert answer.header("cache-control") == "no-store" and answer.header("pragma") == "no-cache"
    body = json.loads(answer.body)
    assert set(body) == {"tokenType", "sessionToken", "expiresAt", "session"}
    assert body["tokenType"] == "Bearer" and len(body["sessionToken"]) == 43
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body["expiresAt"])
    assert body["session"]["account"]["email"] == "ada@example.test"
    session = fetch_session(server, body["sessionToken"])
    assert session.status == 200 and json.loads(session.body) == body["session"]
    # The same Idempotency-Key and body within the lifetime: the same session, token and all.
    again = app.exchange(code)
    assert again.status == 200 and json.loads(again.body)["sessionToken"] == body["sessionToken"]
    # A different key is a replay: invalid_grant, and the session issued from the code ends.
    replay = app.exchange(code, key="key-2")
    assert replay.status == 400 and json.loads(replay.body)["error"] == "invalid_grant"
    assert fetch_session(server, body["sessionToken"]).status == 401


def fetch_session(server, token):
    return exchange(server, "GET", "/api/client/v1/session",
                    [("Host", "a"), ("Authorization", f"Bearer {token}"), ("Connection", "close")])


REFUSALS = {
    "no method (counts as plain)": {"code_challenge_method": None},
    "plain": {"code_challenge_method": "plain"},
    "short challenge": {"code_challenge": "abc"},
    "challenge with padding": {"code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM="},
    "short state": {"state": "tooshort"},
    "state with a slash": {"state": "state/0123456789abcdef"},
    "long state": {"state": "s" * 513},
    "unknown platform": {"platform": "windows"},
    "malformed version": {"app_version": "1.4-beta"},
    "version below the minimum": {"app_version": "0.9.0"},
    "redirect_uri": {"redirect_uri": "https://attacker.example/cb"},
    "return_to": {"return_to": "https://attacker.example/"},
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_every_bad_sign_in_link_gets_400_and_no_redirect(server, case):
    app = App(server)
    response = Browser(server).send("GET", "/native/sign-in?" + urlencode(app.params(**REFUSALS[case])))
    assert response.status == 400 and response.header("location") is None
    assert response.header("cache-control") == "no-store"
    assert b"<form" not in response.body


def test_a_repeated_parameter_is_refused(server):
    app = App(server)
    query = urlencode(app.params()) + "&state=" + "x" * 20
    assert Browser(server).send("GET", "/native/sign-in?" + query).status == 400


def test_cancel_returns_access_denied_with_the_state(server):
    app = App(server)
    browser = Browser(server)
    page = browser.send("GET", "/native/sign-in?" + urlencode(app.params()))
    fields = {k.decode(): v.decode() for k, v in re.findall(rb'<input type="hidden" name="([^"]+)" value="([^"]*)"',
                                                               page.body)}
    fields["action"] = "cancel"
    response = browser.send("POST", "/native/sign-in", form=fields)
    assert response.status == 303
    assert response.header("location") == f"{DEV_ORIGIN}/native/callback?error=access_denied&state={app.state}"


def test_continue_as_the_signed_in_browser_person(server):
    app = App(server)
    browser = Browser(server)
    browser.sign_in("ada@example.test")
    page = browser.send("GET", "/native/sign-in?" + urlencode(app.params()))
    assert b"Continue as Ada Example" in page.body
    fields = {k.decode(): v.decode() for k, v in re.findall(rb'<input type="hidden" name="([^"]+)" value="([^"]*)"',
                                                               page.body)}
    fields["action"] = "continue"
    response = browser.send("POST", "/native/sign-in", form=fields)
    code = parse_qs(urlsplit(response.header("location")).query)["code"][0]
    assert app.exchange(code).status == 200


def test_wrong_verifier_then_right_one_both_refused(server):
    app = App(server)
    _, redirect = sign_in_through_the_browser(server, app)
    code = parse_qs(urlsplit(redirect.header("location")).query)["code"][0]
    wrong = app.exchange(code, codeVerifier=generate_token(64))
    right = app.exchange(code, key="key-2")
    assert wrong.status == right.status == 400
    assert json.loads(wrong.body) == json.loads(right.body)


@pytest.mark.parametrize("field,value", [("state", "x" * 32), ("platform", "android"), ("appVersion", "1.5.0")])
def test_a_mismatch_with_the_handoff_is_invalid_grant(server, field, value):
    app = App(server)
    _, redirect = sign_in_through_the_browser(server, app)
    code = parse_qs(urlsplit(redirect.header("location")).query)["code"][0]
    response = app.exchange(code, **{field: value})
    assert response.status == 400 and json.loads(response.body)["error"] == "invalid_grant"


def test_unknown_and_used_codes_are_indistinguishable(server):
    app = App(server)
    unknown = app.exchange(generate_token(43))
    _, redirect = sign_in_through_the_browser(server, app)
    code = parse_qs(urlsplit(redirect.header("location")).query)["code"][0]
    assert app.exchange(code).status == 200
    used = app.exchange(code, key="other")
    assert unknown.status == used.status == 400 and unknown.body == used.body


def test_two_codes_differ(server):
    codes = set()
    for _ in range(2):
        app = App(server)
        _, redirect = sign_in_through_the_browser(server, app)
        codes.add(parse_qs(urlsplit(redirect.header("location")).query)["code"][0])
    assert len(codes) == 2


def test_expired_code(make_server, tmp_path):
    path = tmp_path / "dev.json"
    base = json.loads((__import__("edge").ROOT / "config" / "development.json").read_text())
    base["handoffLifetimeSeconds"] = 1
    path.write_text(json.dumps(base))
    server = make_server("--config", str(path))
    add_account(server, "ada@example.test", "Ada Example")
    app = App(server)
    _, redirect = sign_in_through_the_browser(server, app)
    code = parse_qs(urlsplit(redirect.header("location")).query)["code"][0]
    time.sleep(1.2)  # the configured lifetime is one second
    assert app.exchange(code).status == 400


def test_exchange_framing(server):
    app = App(server)
    text = post_json(server, "/api/client/v1/native/exchange", b"code=x", content_type="text/plain")
    assert text.status == 415 and text.header("content-type") == "application/json; charset=utf-8"
    big = post_json(server, "/api/client/v1/native/exchange", {"code": "x" * 5000})
    assert big.status == 413
    malformed = post_json(server, "/api/client/v1/native/exchange", b"{not json")
    assert malformed.status == 400 and json.loads(malformed.body)["error"] == "invalid_request"
    # A code in the query string is never read.
    _, redirect = sign_in_through_the_browser(server, app)
    code = parse_qs(urlsplit(redirect.header("location")).query)["code"][0]
    query = post_json(server, f"/api/client/v1/native/exchange?code={code}", {})
    assert query.status == 400 and json.loads(query.body)["error"] == "invalid_request"
    assert app.exchange(code).status == 200, "the code was not touched"
    get = Browser(server).send("GET", "/api/client/v1/native/exchange")
    assert get.status == 405 and get.header("allow") == "POST"


def test_disabled_and_too_old(make_server, tmp_path):
    base = json.loads((__import__("edge").ROOT / "config" / "development.json").read_text())
    base["capabilities"] = {"nativeSignIn": False}
    path = tmp_path / "off.json"
    path.write_text(json.dumps(base))
    server = make_server("--config", str(path))
    app = App(server)
    off = app.exchange(generate_token(43))
    assert off.status == 403 and json.loads(off.body)["error"] == "native_sign_in_disabled"
    assert Browser(server).send("GET", "/native/sign-in?" + urlencode(app.params())).status == 400
    base["capabilities"] = {"nativeSignIn": True}
    base["minimumAppVersion"] = {"ios": "2.0.0", "android": "1.0.0"}
    path.write_text(json.dumps(base))
    server = make_server("--config", str(path))
    old = App(server).exchange(generate_token(43))
    assert old.status == 426 and json.loads(old.body) == {
        "error": "app_version_unsupported", "minimumVersion": "2.0.0", "message": "Please update the app to continue."}


def test_the_callback_page_in_a_browser(server):
    response = Browser(server).send("GET", "/native/callback?code=" + "c" * 43 + "&state=" + "s" * 20)
    assert response.status == 200 and response.header("cache-control") == "no-store"
    assert response.header("referrer-policy") == "no-referrer"
    assert b"c" * 43 not in response.body and b"s" * 20 not in response.body


def test_nothing_secret_in_logs_or_audit(server):
    app = App(server)
    browser, redirect = sign_in_through_the_browser(server, app)
    code = parse_qs(urlsplit(redirect.header("location")).query)["code"][0]
    token = json.loads(app.exchange(code).body)["sessionToken"]
    server.access_log(minimum=3)
    from test_web_sign_in import admin
    captured = server.stdout_path.read_text() + server.stderr_path.read_text() + admin(server, "audit", "--json")
    for secret in (code, token, app.verifier, PASSWORD):
        assert secret not in captured


# A refused link speaks to the person, lists every reason for the developer,
# and offers a way back to the app when the state can carry it.

def test_a_refused_link_lists_every_reason_and_offers_the_way_back(server):
    app = App(server)
    query = urlencode(app.params(code_challenge_method="plain", code_challenge="short", platform="windows"))
    response = Browser(server).send("GET", "/native/sign-in?" + query)
    assert response.status == 400 and response.header("location") is None
    assert response.header("referrer-policy") == "no-referrer" and response.header("cache-control") == "no-store"
    page = response.body.decode()
    assert "The app opened a sign-in link that does not work" in page
    details = page.split("<summary>Details for the app's developer</summary>")[1].split("</details>")[0]
    assert details.count("<li>") == 3
    assert "code_challenge_method must be S256" in details and "code_challenge must be 43" in details
    assert "platform must be ios or android" in details
    back = f'href="http://127.0.0.1:{server.port}/native/callback?error=invalid_request&amp;state={app.state}"'
    assert back.replace(str(server.port), "8080") in page or back in page


def test_no_way_back_without_a_valid_state(server):
    app = App(server)
    response = Browser(server).send("GET", "/native/sign-in?" + urlencode(app.params(state="bad state!", platform="x")))
    assert response.status == 400
    assert b"/native/callback" not in response.body
    assert response.body.count(b"<li>") == 2


def test_a_failed_native_attempt_keeps_the_email(server):
    app = App(server)
    _, response = sign_in_through_the_browser(server, app, password="not-the-password-9")
    assert response.status == 400
    assert b'value="ada@example.test"' in response.body and b"not-the-password-9" not in response.body
