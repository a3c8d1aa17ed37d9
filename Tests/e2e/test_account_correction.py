"""Corrections on /account through the real binary over raw HTTP, with a real SMTP server on
loopback: the name (form and PATCH /api/client/v1/account), the password (the current one
required; every other session ends, this one stays; a mail) and the email (a link to the new
address; the old one told; nothing changes until it is followed)."""

import json
from urllib.parse import urlsplit

import pytest

from test_web_sign_in import PASSWORD, Browser, add_account, admin

NEW_PASSWORD = "another phrase for ada here"


@pytest.fixture
def signed_twice(make_server, mail_sink):
    server = make_server("--smtp", mail_sink.url)
    add_account(server, "ada@example.test", "Ada Example", [("northfield", "teacher")])
    add_account(server, "bo@example.test", "Bo Example")
    one, two = Browser(server), Browser(server)
    assert one.sign_in("ada@example.test").status == 303 and two.sign_in("ada@example.test").status == 303
    return server, mail_sink, one, two


def path_of(link):
    parts = urlsplit(link)
    return parts.path + "?" + parts.query


def actions(server):
    return [json.loads(line)["action"] for line in admin(server, "audit", "--json").splitlines()]


def logs(server):
    return server.logs()


def patch(browser, body, origin=True):
    """PATCH /api/client/v1/account with the browser's cookies (and its Origin unless told not);
    `body` is sent as JSON, or as it is when it is bytes."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    client = browser.server.connect()
    lines = ["PATCH /api/client/v1/account HTTP/1.1", f"Host: 127.0.0.1:{browser.server.port}",
             "Connection: close", "Content-Type: application/json", f"Content-Length: {len(data)}",
             "Cookie: " + "; ".join(f"{k}={v}" for k, v in browser.cookies.items())]
    if origin:
        lines.append(f"Origin: {browser.origin}")
    client.send(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
    response = client.read_response()
    client.close()
    return response


def test_the_name_on_the_page_and_through_the_api(signed_twice):
    server, _, one, two = signed_twice
    account = one.send("GET", "/account")
    # The forms post to the page's own address (a refusal stays there); the old paths still answer.
    assert b'action="/account"' in account.body and b'name="form" value="name"' in account.body
    done = one.send("POST", "/account", form={"csrf": one.csrf(account), "form": "name", "name": "Ada Lovelace"})
    assert done.status == 303 and done.header("location") == "/account?changed=name"
    assert b"Your name has been changed." in one.send("GET", "/account?changed=name").body
    # The other browser's GET /session (maybe cached) shows it at once.
    assert json.loads(two.send("GET", "/api/client/v1/session").body)["account"]["displayName"] == "Ada Lovelace"
    refused = one.send("POST", "/account/name", form={"csrf": one.csrf(account), "name": "x" * 101})
    assert refused.status == 400

    assert json.loads(two.send("GET", "/api/client/v1/session").body)["account"]["displayName"] == "Ada Lovelace"
    answer = patch(two, {"displayName": "Ada King"})
    assert answer.status == 200 and answer.header("cache-control") == "no-store"
    assert json.loads(answer.body)["account"]["displayName"] == "Ada King"
    assert json.loads(one.send("GET", "/api/client/v1/session").body)["account"]["displayName"] == "Ada King"
    assert patch(two, {"displayName": "Ada"}, origin=False).status == 403
    bad = patch(two, {"displayName": "Ada\u0007"})
    assert bad.status == 400 and json.loads(bad.body)["error"] == "invalid_display_name"
    assert actions(server).count("account.name_changed") == 2


def test_a_body_naming_a_key_twice_is_refused_like_malformed_json(signed_twice):
    """Which displayName would win is the parser's guess: a key named twice is refused (RFC 7493
    §2.3), with the contract's error shape, as a body that is not JSON is."""
    _, _, one, _ = signed_twice
    malformed = patch(one, b'{"displayName": "A",')
    assert malformed.status == 400 and json.loads(malformed.body)["error"] == "invalid_request"
    for body in [b'{"displayName":"A","displayName":"B"}', b'{"displayName": "A", "\\u0064isplayName": "B"}']:
        repeated = patch(one, body)
        assert repeated.status == 400 and repeated.header("content-type") == malformed.header("content-type")
        assert json.loads(repeated.body) == {
            "error": "invalid_request", "message": "The body names a key more than once; send each key once."}
    assert json.loads(one.send("GET", "/api/client/v1/session").body)["account"]["displayName"] == "Ada Example"


def test_the_password_with_the_current_one(signed_twice):
    server, sink, one, two = signed_twice
    account = one.send("GET", "/account")
    wrong = one.send("POST", "/account/password", form={
        "csrf": one.csrf(account), "current-password": "not it at all", "new-password": NEW_PASSWORD})
    assert wrong.status == 400 and b"Your current password is not right." in wrong.body
    common = one.send("POST", "/account/password", form={
        "csrf": one.csrf(account), "current-password": PASSWORD, "new-password": "qwertyuiop123"})
    assert common.status == 400 and b"one of the most common" in common.body
    done = one.send("POST", "/account/password", form={
        "csrf": one.csrf(account), "current-password": PASSWORD, "new-password": NEW_PASSWORD})
    assert done.status == 303 and done.header("location") == "/account?changed=password"
    assert one.send("GET", "/api/client/v1/session").status == 200
    assert two.send("GET", "/api/client/v1/session").status == 401
    message = sink.wait_for(lambda m: m.to == "ada@example.test" and "was changed" in m.subject)
    assert "every other device" in message.text
    assert Browser(server).sign_in("ada@example.test", PASSWORD).status == 400
    assert Browser(server).sign_in("ada@example.test", NEW_PASSWORD).status == 303
    assert "account.password_changed" in actions(server)
    assert NEW_PASSWORD not in logs(server) and NEW_PASSWORD not in admin(server, "audit", "--json")


def test_the_email_changes_when_the_link_is_followed(signed_twice):
    server, sink, one, two = signed_twice
    account = one.send("GET", "/account")
    taken = one.send("POST", "/account/email", form={
        "csrf": one.csrf(account), "new-email": "bo@example.test", "email-password": PASSWORD})
    assert taken.status == 303 and taken.header("location") == "/account?changed=email"
    assert "already belongs" in sink.wait_for(lambda m: m.to == "bo@example.test").text
    asked = one.send("POST", "/account/email", form={
        "csrf": one.csrf(account), "new-email": "Ada.New@example.test", "email-password": PASSWORD})
    assert asked.status == 303 and asked.header("location") == "/account?changed=email"
    confirm = sink.wait_for(lambda m: m.to == "ada.new@example.test")
    notice = sink.wait_for(lambda m: m.to == "ada@example.test" and "changing" in m.subject
                           and "ada.new@example.test" in m.text)
    assert "ada.new@example.test" in notice.text and "token" not in notice.text
    (link,) = confirm.links
    assert path_of(link).startswith("/account/email/confirm?token=")
    assert json.loads(one.send("GET", "/api/client/v1/session").body)["account"]["email"] == "ada@example.test"

    # Confirmed from Ada's own signed-in browser (the link alone is not enough: see
    # test_credential_changes.py).
    phone = one
    landed = phone.send("GET", path_of(link))
    assert landed.status == 303 and landed.header("location") == "/account/email/confirm"
    assert landed.header("referrer-policy") == "no-referrer"
    page = phone.send("GET", "/account/email/confirm")
    assert b"ada.new@example.test" in page.body
    done = phone.send("POST", "/account/email/confirm", form={"csrf": phone.csrf(page)})
    assert done.status == 303 and done.header("location") == "/account/email/confirmed"
    for browser in (one, two):
        assert json.loads(browser.send("GET", "/api/client/v1/session").body)["account"]["email"] \
            == "ada.new@example.test"
    assert Browser(server).send("GET", path_of(link)).status == 410
    assert Browser(server).sign_in("ada.new@example.test").status == 303
    assert Browser(server).sign_in("ada@example.test").status == 400
    assert server.store.query("SELECT email_verified_at IS NOT NULL FROM accounts WHERE email = ?",
                              ("ada.new@example.test",)) in ([(1,)], [(True,)])
    trail = actions(server)
    assert "account.email_change_requested" in trail and "account.email_changed" in trail
    token = path_of(link).split("=", 1)[1]
    assert token not in logs(server) and token not in admin(server, "audit", "--json")
