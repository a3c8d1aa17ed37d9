"""Lockout and per-address rate limits through the real binary."""

import json
import re

import pytest

from edge import Server
from test_web_sign_in import PASSWORD, Browser, add_account


def attempt(server, email, password, headers=None):
    browser = Browser(server)
    form = browser.send("GET", "/sign-in")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', form.body).group(1).decode()
    return browser, browser.send("POST", "/sign-in", form={"csrf": csrf, "email": email, "password": password},
                                 headers=headers)


def test_lockout_refuses_the_right_password_and_touches_nothing_else(make_server):
    server = make_server()
    add_account(server, "ada@example.test", "Ada Example")
    add_account(server, "bo@example.test", "Bo Example")
    bo, signed = attempt(server, "bo@example.test", PASSWORD)
    assert signed.status == 303
    pages = []
    for _ in range(5):
        pages.append(attempt(server, "ada@example.test", "wrong password")[1])
    _, locked = attempt(server, "ada@example.test", PASSWORD)
    unknown = [attempt(server, "nobody@example.test", "wrong password")[1] for _ in range(6)]

    def scrub(response):
        body = re.sub(rb'name="csrf" value="[^"]+"', b"", response.body)
        return re.sub(rb'(id="email"[^>]*?) value="[^"]*"', rb"\1", body)

    # Wrong password and unknown email: the same status, page and cookie names; once locked (the 5th
    # failure on), "Too many attempts" for every email alike, known or not, right password or not.
    refused = pages[:4] + unknown[:4]
    locked_pages = pages[4:] + [locked] + unknown[4:]
    everything = refused + locked_pages
    assert {r.status for r in everything} == {400}
    assert len({scrub(r) for r in refused}) == 1
    assert len({scrub(r) for r in locked_pages}) == 1
    assert all(b"Too many attempts" in r.body for r in locked_pages)
    assert not any(b"Too many attempts" in r.body for r in refused)
    assert len({tuple(sorted(v.split("=")[0] for k, v in r.headers if k.lower() == "set-cookie"))
                for r in everything}) == 1
    assert attempt(server, "bo@example.test", PASSWORD)[1].status == 303, "other accounts are not locked"
    assert bo.send("GET", "/api/client/v1/session").status == 200, "existing sessions go on"
    from test_web_sign_in import admin
    events = [json.loads(line) for line in admin(server, "audit", "--json").splitlines()]
    assert sum(1 for e in events if e["action"] == "sign_in.failed") == 12
    assert "nobody" not in json.dumps(events)


def sign_in_as(server, spelling, form):
    """The right password with `spelling` for the email, through the web or the native form."""
    if form == "web":
        return attempt(server, spelling, PASSWORD)
    from test_native_handoff import App, sign_in_through_the_browser
    return sign_in_through_the_browser(server, App(server), email=spelling)


def assert_not_signed_in(server, browser, response):
    assert response.status == 400, response.status
    assert "__Host-bl_session" not in browser.cookies
    from test_web_sign_in import admin
    events = [json.loads(line) for line in admin(server, "audit", "--json").splitlines()]
    assert not any(e["action"] == "sign_in.succeeded" for e in events)


# Spellings that EmailAddress normalises to tom@example.test: ASCII upper case is lowered, and Unicode
# space separators (category Zs: U+0020, no-break U+00A0, em U+2003, narrow no-break U+202F,
# ideographic U+3000) are trimmed at both ends. The lockout counter sees the same address.
@pytest.mark.parametrize("spelling", [
    "TOM@EXAMPLE.TEST", "Tom@Example.Test", " tom@example.test", "tom@example.test  ",
    "\u00a0tom@example.test\u00a0", "\u3000TOM@example.test", "\u2003tom@EXAMPLE.test\u202f", "  Tom@example.TEST ",
])
@pytest.mark.parametrize("form", ["web", "native"])
def test_no_spelling_of_a_locked_email_signs_in(make_server, spelling, form):
    server = make_server()
    add_account(server, "tom@example.test", "Tom Example")
    for _ in range(5):
        attempt(server, "tom@example.test", "wrong password")
    assert b"Too many attempts" in attempt(server, "tom@example.test", PASSWORD)[1].body
    browser, response = sign_in_as(server, spelling, form)
    assert_not_signed_in(server, browser, response)
    assert b"Too many attempts" in response.body, response.body


# Spellings that are not addresses at all (EmailAddress refuses control characters anywhere and
# anything not printable ASCII; nothing is folded to ASCII): they never reach Tom's account, locked or not.
@pytest.mark.parametrize("spelling", [
    "tom@example.test\x00x", "\x00tom@example.test", "tom\x00@example.test", "TOM@EXAMPLE.TEST\x00",
    "tom@ex\u0430mple.test", "tom@example.test\u200b", "\uff54om@example.test", " tom@example.test\r\n",
])
@pytest.mark.parametrize("form", ["web", "native"])
def test_a_spelling_that_is_not_an_address_never_signs_in(make_server, spelling, form):
    server = make_server()
    add_account(server, "tom@example.test", "Tom Example")
    browser, response = sign_in_as(server, spelling, form)
    assert_not_signed_in(server, browser, response)
    assert b"That email address and password do not match" in response.body, response.body


def test_too_many_attempts_get_429_with_retry_after_before_any_password_work(make_server):
    server = make_server("--sign-in-burst", "3", "--sign-in-per-minute", "6")
    add_account(server, "ada@example.test", "Ada Example")
    statuses = []
    for i in range(5):
        # Changing X-Forwarded-For does not help: no proxy is trusted, so the socket peer counts.
        _, response = attempt(server, "ada@example.test", "wrong password", {"X-Forwarded-For": f"198.51.100.{i}"})
        statuses.append(response.status)
        if response.status == 429:
            assert response.header("cache-control") == "no-store"
            assert re.fullmatch(r"[1-9]\d*", response.header("retry-after"))
            assert b"Too many attempts" in response.body
    assert statuses == [400, 400, 400, 429, 429]
    from test_web_sign_in import admin
    events = [json.loads(line) for line in admin(server, "audit", "--json").splitlines()]
    assert sum(1 for e in events if e["action"] == "sign_in.failed") == 3, "refused attempts never reached a check"


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_bucket(make_server):
    server = make_server("--sign-in-burst", "1", "--trusted-proxy", "127.0.0.1")
    add_account(server, "ada@example.test", "Ada Example")
    assert attempt(server, "x@example.test", "wrong", {"X-Forwarded-For": "198.51.100.1"})[1].status == 400
    assert attempt(server, "x@example.test", "wrong", {"X-Forwarded-For": "198.51.100.1"})[1].status == 429
    assert attempt(server, "x@example.test", "wrong", {"X-Forwarded-For": "198.51.100.2"})[1].status == 400
    # A client prepending its own entry still lands in the proxy's right-most one.
    spoof = attempt(server, "x@example.test", "wrong", {"X-Forwarded-For": "203.0.113.9, 198.51.100.1"})[1]
    assert spoof.status == 429


def test_the_exchange_is_limited_too(make_server):
    server = make_server("--exchange-burst", "2")
    from test_native_handoff import App
    app = App(server)
    statuses = [app.exchange("x" * 43).status for _ in range(3)]
    assert statuses == [400, 400, 429]


@pytest.mark.parametrize("form", ["web", "native"])
def test_a_strangers_lock_does_not_hold_the_browser_the_person_signed_in_with_before(make_server, form):
    """The lock anyone can set by typing wrong passwords for an email holds every other client, but
    not a browser that proved the password before (its __Host-bl_device cookie)."""
    server = make_server()
    add_account(server, "tom@example.test", "Tom Example")
    from test_native_handoff import App, sign_in_through_the_browser
    if form == "web":
        toms, signed = attempt(server, "tom@example.test", PASSWORD)
    else:
        toms, signed = sign_in_through_the_browser(server, App(server), email="tom@example.test")
    assert signed.status == 303
    device = next(v for v in toms.set_cookie_lines if v.startswith("__Host-bl_device="))
    name_value, *attributes = [part.strip() for part in device.split(";")]
    assert {a for a in attributes if not a.startswith("Max-Age=")} == {"Path=/", "Secure", "HttpOnly", "SameSite=Lax"}
    toms.cookies.pop("__Host-bl_session", None)  # signed out; the device cookie stays
    for _ in range(6):
        attempt(server, "tom@example.test", "a stranger's guess")
    assert b"Too many attempts" in attempt(server, "tom@example.test", PASSWORD)[1].body, "locked for everyone else"
    page = toms.send("GET", "/sign-in")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page.body).group(1).decode()
    again = toms.send("POST", "/sign-in", form={"csrf": csrf, "email": "tom@example.test", "password": PASSWORD})
    assert again.status == 303, "Tom's own browser still signs in"
    assert "__Host-bl_session" in toms.cookies
