"""Password recovery and set-password links through the real binary over raw HTTP, with a real SMTP
server on loopback (aiosmtpd): the mail arrives, its link works once, the token leaves the URL at
once, the old password fails, every session ends, the audit trail has it, and no token or
password reaches a log."""

import json
from urllib.parse import urlsplit

import pytest

from test_web_sign_in import PASSWORD, Browser, add_account, admin

NEW_PASSWORD = "a fresh phrase for ada now"


@pytest.fixture
def mailed(make_server, mail_sink):
    server = make_server("--smtp", mail_sink.url)
    add_account(server, "ada@example.test", "Ada Example", [("northfield", "teacher")])
    return server, mail_sink


def path_of(link):
    parts = urlsplit(link)
    return parts.path + ("?" + parts.query if parts.query else "")


def ask_for_link(browser, email):
    form = browser.send("GET", "/account/recover")
    assert form.status == 200 and form.header("cache-control") == "no-store"
    return browser.send("POST", "/account/recover", form={"csrf": browser.csrf(form), "email": email})


def actions(server):
    return [json.loads(line)["action"] for line in admin(server, "audit", "--json").splitlines()]


def logs(server):
    return server.logs()


def test_recovery_end_to_end(mailed):
    server, sink = mailed
    elsewhere = Browser(server)
    assert elsewhere.sign_in("ada@example.test").status == 303
    assert elsewhere.send("GET", "/api/client/v1/session").status == 200

    sign_in = Browser(server).send("GET", "/sign-in")
    assert b'<a href="/account/recover">Forgot your password?</a>' in sign_in.body

    unknown = ask_for_link(Browser(server), "nobody@example.test")
    browser = Browser(server)
    known = ask_for_link(browser, "Ada@Example.test")
    assert (unknown.status, unknown.header("location")) == (known.status, known.header("location")) \
        == (303, "/account/recover/sent")
    assert unknown.body == known.body
    assert browser.send("GET", "/account/recover/sent").status == 200

    message = sink.wait_for(lambda m: m.to == "ada@example.test" and "new" in m.subject.lower())
    assert message.subject == "Choose a new Band Licence password"
    (link,) = message.links
    assert path_of(link).startswith("/account/reset?token=")
    assert link in message.html
    token = path_of(link).split("=", 1)[1]
    assert server.store.query("SELECT count(*) FROM outbox WHERE to_address = ?", ("nobody@example.test",)) \
        == [(0,)]

    landed = browser.send("GET", path_of(link))
    assert landed.status == 303 and landed.header("location") == "/account/reset"
    assert landed.header("referrer-policy") == "no-referrer"
    cookie = next(v for v in browser.set_cookie_lines if v.startswith("__Host-bl_reset="))
    assert {a.strip() for a in cookie.split(";")[1:] if not a.strip().startswith("Max-Age=")} \
        == {"Path=/", "Secure", "HttpOnly", "SameSite=Lax"}
    form = browser.send("GET", "/account/reset")
    assert form.status == 200 and b"ada@example.test" in form.body and token.encode() not in form.body
    weak = browser.send("POST", "/account/reset", form={"csrf": browser.csrf(form), "password": "ada@example.test"})
    assert weak.status == 400 and b"must not be your email address" in weak.body
    foreign = browser.send("POST", "/account/reset", form={"csrf": browser.csrf(form), "password": NEW_PASSWORD},
                           origin="https://evil.example")
    assert foreign.status == 403
    done = browser.send("POST", "/account/reset", form={"csrf": browser.csrf(form), "password": NEW_PASSWORD})
    assert done.status == 303 and done.header("location") == "/account/reset/done"
    assert "__Host-bl_reset" not in browser.cookies
    assert b"Sign in with your new password" in browser.send("GET", "/account/reset/done").body

    changed = sink.wait_for(lambda m: m.to == "ada@example.test" and "was changed" in m.subject)
    assert "every device signed in to it has been signed out" in changed.text
    assert elsewhere.send("GET", "/api/client/v1/session").status == 401
    assert Browser(server).sign_in("ada@example.test", PASSWORD).status == 400
    assert Browser(server).sign_in("ada@example.test", NEW_PASSWORD).status == 303
    assert Browser(server).send("GET", path_of(link)).status == 410
    assert server.store.query("SELECT email_verified_at IS NOT NULL FROM accounts WHERE email = ?",
                              ("ada@example.test",)) in ([(1,)], [(True,)])

    trail = actions(server)
    assert trail.count("account.recovery_requested") == 2 and "account.password_reset" in trail
    audit = admin(server, "audit", "--json")
    for secret in (token, NEW_PASSWORD, PASSWORD):
        assert secret not in audit and secret not in logs(server)


def test_at_most_three_links_per_address_per_hour(mailed):
    server, sink = mailed
    for _ in range(5):
        assert ask_for_link(Browser(server), "ada@example.test").status == 303
    sink.wait_for(lambda m: m.to == "ada@example.test", count=3)
    assert server.store.query("SELECT count(*) FROM outbox WHERE to_address = ?", ("ada@example.test",)) == [(3,)]
    details = [json.loads(line).get("detail") for line in admin(server, "audit", "--json").splitlines()
               if json.loads(line)["action"] == "account.recovery_requested"]
    assert details.count("limited") == 2


def test_recovery_is_rate_limited_per_client_address(make_server, mail_sink):
    server = make_server("--smtp", mail_sink.url, "--sign-in-burst", "2", "--sign-in-per-minute", "1")
    statuses = [ask_for_link(Browser(server), "ada@example.test").status for _ in range(4)]
    assert statuses[:2] == [303, 303] and statuses[-1] == 429


def test_a_set_password_link_from_the_operator(mailed):
    server, sink = mailed
    out = admin(server, "account", "create", "--email", "Bo@Example.test", "--name", "Bo Example",
                "--send-set-password")
    assert out.startswith("created account acc_") and "set-password link" in out
    message = sink.wait_for(lambda m: m.to == "bo@example.test")
    assert message.subject == "Your Band Licence account is ready"
    (link,) = message.links
    assert path_of(link).startswith("/account/set-password?token=")
    browser = Browser(server)
    assert Browser(server).sign_in("bo@example.test", NEW_PASSWORD).status == 400
    landed = browser.send("GET", path_of(link))
    assert landed.status == 303 and landed.header("location") == "/account/set-password"
    form = browser.send("GET", "/account/set-password")
    assert b"Choose your password" in form.body
    short = browser.send("POST", "/account/set-password", form={"csrf": browser.csrf(form), "password": "short"})
    assert short.status == 400 and b"at least 12 characters" in short.body
    done = browser.send("POST", "/account/set-password", form={"csrf": browser.csrf(form), "password": NEW_PASSWORD})
    assert done.status == 303 and done.header("location") == "/account/set-password/done"
    assert Browser(server).sign_in("bo@example.test", NEW_PASSWORD).status == 303
    assert Browser(server).send("GET", path_of(link)).status == 410
    assert server.store.query("SELECT email_verified_at IS NOT NULL FROM accounts WHERE email = ?",
                              ("bo@example.test",)) in ([(1,)], [(True,)])
    assert "account.password_set" in actions(server)
    token = path_of(link).split("=", 1)[1]
    assert token not in logs(server) and NEW_PASSWORD not in logs(server)
