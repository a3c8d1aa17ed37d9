"""Web sign-in through the real binary with a raw HTTP client: the form, the cookie, CSRF and
same-origin checks, sign-out, live memberships and disabled accounts, and a walk of the whole
route table for no-store."""

import hashlib
import json
import re
import subprocess
from urllib.parse import urlencode

import pytest

from edge import Server, binary, exchange, protocol

PASSWORD = "a-long-demo-password-42"


def admin(server, *args, stdin=""):
    result = subprocess.run([str(binary()), "admin", *server.database_args, *args], input=stdin,
                            capture_output=True, text=True, timeout=60, env={})
    assert result.returncode == 0, result.stderr
    return result.stdout


def add_account(server, email, name, schools=()):
    out = admin(server, "account", "create", "--email", email, "--name", name, stdin=PASSWORD + "\n")
    for slug, role in schools:
        if not admin_ok(server, "school", "create", "--name", slug.title() + " School", "--slug", slug):
            pass
        admin(server, "member", "add", "--email", email, "--school", slug, "--role", role)
    return out


def admin_ok(server, *args):
    return subprocess.run([str(binary()), "admin", *server.database_args, *args], capture_output=True,
                          timeout=60, env={}).returncode == 0


class Browser:
    """A raw-socket HTTP/1.1 client (HTTP/2 in the h2 pass: edge.exchange) with a cookie jar,
    speaking as a page on the server's origin."""

    def __init__(self, server, origin=True):
        self.server = server
        self.origin = f"http://127.0.0.1:{server.port}" if origin is True else origin
        self.cookies = {}
        self.set_cookie_lines = []
        self.bodies = []

    def send(self, method, path, form=None, headers=None, origin=None, cookies=True):
        lines = [("Host", f"127.0.0.1:{self.server.port}"), ("Connection", "close")]
        chosen = self.origin if origin is None else origin
        if method != "GET" and chosen:
            lines.append(("Origin", chosen))
        if cookies and self.cookies:
            lines.append(("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items())))
        lines += list((headers or {}).items())
        body = b""
        if form is not None:
            body = urlencode(form).encode()
            lines += [("Content-Type", "application/x-www-form-urlencoded"), ("Content-Length", str(len(body)))]
        response = exchange(self.server, method, path, lines, body)
        self.bodies.append(response.raw_head + b"\r\n\r\n" + response.body)
        for key, value in response.headers:
            if key.lower() == "set-cookie":
                self.set_cookie_lines.append(value)
                name, _, rest = value.partition("=")
                cookie_value = rest.split(";")[0]
                if "Max-Age=0" in value:
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = cookie_value
        return response

    def csrf(self, response):
        match = re.search(rb'name="csrf" value="([^"]+)"', response.body)
        assert match, response.body
        return match.group(1).decode()

    def sign_in(self, email, password=PASSWORD):
        form = self.send("GET", "/sign-in")
        return self.send("POST", "/sign-in", form={"csrf": self.csrf(form), "email": email, "password": password})


def counts(server):
    return tuple(server.store.query(sql)[0][0] for sql in (
        "SELECT COUNT(*) FROM sessions", "SELECT COUNT(*) FROM sessions WHERE revoked_at IS NULL",
        "SELECT COUNT(*) FROM audit_events"))


@pytest.fixture
def web(make_server):
    server = make_server()
    add_account(server, "ada@example.test", "Ada Example", [("northfield", "teacher"), ("riverside", "administrator")])
    add_account(server, "bo@example.test", "Bo Example", [("southgate", "read_only")])
    return server


def test_a_cookie_split_into_crumbs_is_one_cookie_list_over_h2(web):
    """What Chromium sends over h2: one `cookie` field per cookie. The session is read from the
    second crumb as from a single joined field (HTTP/1.1 allows one Cookie line only, so the h1
    pass checks the joined field alone)."""
    browser = Browser(web)
    browser.sign_in("ada@example.test")
    crumbs = [("Cookie", f"{k}={v}") for k, v in browser.cookies.items()]
    assert [name for name, _ in crumbs].count("Cookie") >= 3 and list(browser.cookies)[1] == "__Host-bl_session"
    joined = exchange(web, "GET", "/api/client/v1/session", [("Host", f"127.0.0.1:{web.port}"), (
        "Cookie", "; ".join(f"{k}={v}" for k, v in browser.cookies.items()))])
    assert joined.status == 200
    if protocol() != "h2":
        return
    split = exchange(web, "GET", "/api/client/v1/session", [("Host", f"127.0.0.1:{web.port}"), *crumbs])
    assert split.status == 200 and split.body == joined.body


def test_sign_in_read_the_session_and_sign_out(web):
    browser = Browser(web)
    form = browser.send("GET", "/sign-in")
    assert form.status == 200 and form.header("cache-control") == "no-store"
    assert "frame-ancestors 'none'" in form.header("content-security-policy")
    assert "form-action 'self'" in form.header("content-security-policy")
    assert form.header("x-content-type-options") == "nosniff"
    response = browser.send("POST", "/sign-in", form={"csrf": browser.csrf(form), "email": "Ada@Example.test",
                                                      "password": PASSWORD})
    assert response.status == 303 and response.header("location") == "/"
    assert response.header("cache-control") == "no-store"
    cookie = next(v for v in browser.set_cookie_lines if v.startswith("__Host-bl_session="))
    name_value, *attributes = [part.strip() for part in cookie.split(";")]
    assert len(name_value.split("=", 1)[1]) == 43
    assert {a for a in attributes if not a.startswith("Max-Age=")} == {"Path=/", "Secure", "HttpOnly", "SameSite=Lax"}
    assert not any(a.lower().startswith("domain") for a in attributes)
    session = browser.send("GET", "/api/client/v1/session")
    assert session.status == 200 and session.header("cache-control") == "no-store"
    body = json.loads(session.body)
    assert body["account"]["email"] == "ada@example.test"
    assert sorted(s["slug"] for s in body["schools"]) == ["northfield", "riverside"]
    account = browser.send("GET", "/account")
    assert account.status == 200 and account.header("cache-control") == "no-store"
    assert b"Ada Example" in account.body and b"Administrator" in account.body and b"Web browser" in account.body
    token = browser.cookies["__Host-bl_session"]
    out = browser.send("POST", "/sign-out", form={"csrf": browser.csrf(account)})
    assert out.status == 303 and "__Host-bl_session" not in browser.cookies
    stale = Browser(web)
    stale.cookies["__Host-bl_session"] = token
    assert stale.send("GET", "/api/client/v1/session").status == 401
    assert stale.send("GET", "/account").header("location") == "/sign-in?return=%2Faccount"
    actions = [json.loads(line)["action"] for line in admin(web, "audit", "--json").splitlines()]
    assert "sign_in.succeeded" in actions and actions[-1] == "session.revoked"


def test_the_cookie_value_changes_at_sign_in(web):
    browser = Browser(web)
    browser.sign_in("ada@example.test")
    first = browser.cookies["__Host-bl_session"]
    # Signing in again (another tab's form) while holding a session replaces it.
    browser.cookies["__Host-bl_csrf"] = "binding-value"
    form = Browser(web).send("GET", "/sign-in")
    assert form.status == 200
    pre = Browser(web)
    pre_form = pre.send("GET", "/sign-in")
    pre.cookies["__Host-bl_session"] = first
    again = pre.send("POST", "/sign-in", form={"csrf": pre.csrf(pre_form), "email": "ada@example.test",
                                               "password": PASSWORD})
    assert again.status == 303
    second = pre.cookies["__Host-bl_session"]
    assert second != first
    old = Browser(web)
    old.cookies["__Host-bl_session"] = first
    assert old.send("GET", "/api/client/v1/session").status == 401


@pytest.mark.parametrize("case", ["cross-origin", "null-origin", "no-origin", "cross-referer", "no-csrf", "wrong-csrf"])
def test_forged_sign_in_is_refused_and_changes_nothing(web, case):
    browser = Browser(web)
    form = browser.send("GET", "/sign-in")
    fields = {"csrf": browser.csrf(form), "email": "ada@example.test", "password": PASSWORD}
    headers = {}
    origin = None
    if case == "cross-origin":
        origin = "https://attacker.example"
    elif case == "null-origin":
        origin = "null"
    elif case in ("no-origin", "cross-referer"):
        origin = ""
        if case == "cross-referer":
            headers["Referer"] = "https://attacker.example/page"
    elif case == "no-csrf":
        del fields["csrf"]
    else:
        fields["csrf"] = "A" * 43
    before = counts(web)
    response = browser.send("POST", "/sign-in", form=fields, headers=headers, origin=origin)
    assert response.status == 403 and response.header("cache-control") == "no-store"
    assert "__Host-bl_session" not in browser.cookies
    assert counts(web) == before


def test_forged_sign_out_and_revoke_change_nothing(web):
    browser = Browser(web)
    browser.sign_in("ada@example.test")
    account = browser.send("GET", "/account")
    csrf = browser.csrf(account)
    before = counts(web)
    assert browser.send("POST", "/sign-out", form={"csrf": csrf}, origin="https://attacker.example").status == 403
    assert browser.send("POST", "/sign-out", form={}).status == 403
    session_id = re.search(rb'name="session" value="([^"]+)"', account.body).group(1).decode()
    assert browser.send("POST", "/account/sessions/revoke", form={"session": session_id}).status == 403
    assert browser.send("DELETE", "/api/client/v1/session", origin="https://attacker.example").status == 403
    assert browser.send("DELETE", "/api/client/v1/session", origin="").status == 403
    assert counts(web) == before
    assert browser.send("GET", "/api/client/v1/session").status == 200
    # The same-origin DELETE from the shell signs out and clears the cookie.
    deleted = browser.send("DELETE", "/api/client/v1/session")
    assert deleted.status == 204 and "__Host-bl_session" not in browser.cookies


def test_cross_account_live_memberships_and_disabled_accounts(web):
    ada, bo = Browser(web), Browser(web)
    ada.sign_in("ada@example.test")
    bo.sign_in("bo@example.test")
    ada_schools = {s["slug"] for s in json.loads(ada.send("GET", "/api/client/v1/session").body)["schools"]}
    bo_schools = {s["slug"] for s in json.loads(bo.send("GET", "/api/client/v1/session").body)["schools"]}
    assert ada_schools == {"northfield", "riverside"} and bo_schools == {"southgate"}
    # Bo cannot revoke Ada's session by its ID, and sees only his own devices.
    ada_ids = [s["id"] for s in json.loads(ada.send("GET", "/api/client/v1/sessions").body)["sessions"]]
    bo_ids = [s["id"] for s in json.loads(bo.send("GET", "/api/client/v1/sessions").body)["sessions"]]
    assert not set(ada_ids) & set(bo_ids)
    assert bo.send("DELETE", f"/api/client/v1/sessions/{ada_ids[0]}").status == 404
    assert ada.send("GET", "/api/client/v1/session").status == 200
    admin(web, "member", "revoke", "--email", "ada@example.test", "--school", "riverside")
    after = {s["slug"] for s in json.loads(ada.send("GET", "/api/client/v1/session").body)["schools"]}
    assert after == {"northfield"}
    assert b"Riverside" not in ada.send("GET", "/account").body
    admin(web, "account", "disable", "--email", "ada@example.test")
    assert ada.send("GET", "/api/client/v1/session").status == 401
    assert ada.send("GET", "/account").status == 303
    assert Browser(web).sign_in("ada@example.test").status == 400
    assert bo.send("GET", "/api/client/v1/session").status == 200


def test_failures_are_indistinguishable_and_nothing_secret_is_ever_written(web):
    wrong = Browser(web).sign_in("ada@example.test", "not-the-password")
    unknown = Browser(web).sign_in("nobody@example.test", "not-the-password")
    assert wrong.status == unknown.status == 400

    def scrub(body):
        # The typed email is shown again (escaped); apart from it the pages are the same.
        return re.sub(rb'name="csrf" value="[^"]+"|value="[a-z]+@example\.test"', b"", body)

    assert scrub(wrong.body) == scrub(unknown.body)
    browser = Browser(web)
    browser.sign_in("ada@example.test")
    browser.send("GET", "/account")
    browser.send("GET", "/api/client/v1/sessions")
    token = browser.cookies["__Host-bl_session"]
    web.access_log(minimum=8)
    captured = b"".join(browser.bodies) + web.stdout_path.read_bytes() + web.stderr_path.read_bytes()
    captured += admin(web, "audit", "--json").encode() + admin(web, "sessions", "list", "--all").encode()
    for secret in (PASSWORD, "not-the-password", token, hashlib.sha256(token.encode()).hexdigest()):
        needle = secret.encode()
        # The session token appears exactly where it must: its own Set-Cookie header.
        allowed = b"".join(v.encode() for v in browser.set_cookie_lines) if secret == token else b""
        assert captured.count(needle) == allowed.count(needle), secret[:6]


def test_every_private_route_answers_no_store(web, tmp_path):
    """Walks the served route table (serve --print-routes with the same flags) and requests each
    route signed out, and signed in as Ada: with real IDs for its parameters (a school she
    administers, a member, an invitation and another session of hers) and, for a form, a valid CSRF
    token. A route that ends her session is followed by a new sign-in, so every route is asked signed in."""
    listing = subprocess.run([str(binary()), "serve", "--print-routes", "--shell", str(web.shell),
                              *web.database_args, "--test-routes"], capture_output=True, text=True, timeout=60, env={})
    assert listing.returncode == 0, listing.stderr
    routes = [line.split(" ", 2) for line in listing.stdout.splitlines()]
    assert len(routes) > 20
    private_prefixes = ("/api/", "/sign-in", "/sign-out", "/account", "/native/")
    add_account(web, "cy@example.test", "Cy Example", [("riverside", "teacher")])
    add_account(web, "di@example.test", "Di Example", [("riverside", "teacher")])
    riverside = web.store.query("SELECT id FROM schools WHERE slug = 'riverside'")[0][0]
    ids = dict(web.store.query("SELECT email, id FROM accounts"))
    for invitation in ("inv_walk_api", "inv_walk_page"):
        web.store.query("INSERT INTO invitations (id, school_id, email, role, invited_by, token_digest, created_at, "
                        "expires_at) VALUES (?, ?, 'dee@example.test', 'teacher', ?, ?, 0, 4102444800)",
                        (invitation, riverside, ids["ada@example.test"], hashlib.sha256(invitation.encode()).digest()))

    def another_session():
        elsewhere = Browser(web)
        assert elsewhere.sign_in("ada@example.test").status == 303
        sessions = json.loads(elsewhere.send("GET", "/api/client/v1/sessions").body)["sessions"]
        return next(s["id"] for s in sessions if s["current"])

    arguments = {"schoolId": riverside, "accountId": ids["cy@example.test"], "id": another_session()}
    # What a form or query names, for the routes that act on one thing (Di, a page's invitation, a session).
    fields = {"/schools/:schoolId/people/remove": {"account": ids["di@example.test"]},
              "/schools/:schoolId/people/role": {"account": ids["di@example.test"], "role": "read_only"},
              "/schools/:schoolId/invitations/revoke": {"invitation": "inv_walk_page"},
              "/account/sessions/revoke": {"session": another_session()}}

    def signed_in():
        browser = Browser(web)
        assert browser.sign_in("ada@example.test").status == 303
        browser.form_csrf = browser.csrf(browser.send("GET", "/account"))
        return browser

    # The signed-out requests go from a browser of their own: what their answers set or clear never
    # reaches the signed-in one.
    browser, stranger = signed_in(), Browser(web)
    checked = sign_ins = 0
    signed_in_statuses = {}
    for method, pattern, rest in routes:
        cache_control = rest.rsplit(" ", 1)[0]
        if pattern.startswith(private_prefixes):
            assert cache_control == "no-store", f"{method} {pattern} is private but declared {cache_control}"
        if pattern.startswith("/_test/"):
            continue
        values = dict(arguments, id="inv_walk_api") if "/invitations/" in pattern else arguments
        path = re.sub(r":(\w+)", lambda m: values[m.group(1)], pattern).replace("*", "x")
        if method == "GET" and pattern in fields:
            path += "?" + urlencode(fields[pattern])
        for signed in (True, False):
            form = None
            if method == "POST" and signed:
                # The token of the form's own page where it has one (signed-out forms bind theirs to
                # the visitor's CSRF cookie), else the one bound to the session.
                page = browser.send("GET", path) if ["GET", pattern] in [r[:2] for r in routes] else None
                own = re.search(rb'name="csrf" value="([^"]+)"', page.body) if page else None
                form = {"csrf": own.group(1).decode() if own else browser.form_csrf, **fields.get(pattern, {})}
            elif method == "POST":
                form = {}
            response = (browser if signed else stranger).send(method, path, cookies=signed, form=form)
            if cache_control == "no-store" or response.status >= 400:
                assert response.header("cache-control") == "no-store", f"{method} {path}: {response.status}"
            checked += 1
            if signed:
                signed_in_statuses[f"{method} {pattern}"] = response.status
                if browser.send("GET", "/api/client/v1/session").status != 200:
                    browser = signed_in()
                    sign_ins += 1
    assert checked >= 2 * 20
    print(f"\n{checked} requests, {sign_ins} new sign-ins; signed in: {signed_in_statuses}")
    # Ada's own session, her own sign-out and the API's DELETE end it; nothing else.
    assert sign_ins == 2, signed_in_statuses
    # Signed in with real IDs and a valid token, a route is reached, not refused at the door; except
    # the forms of a mailed link (without the link their pages answer 410 or 404 and offer no token)
    # and the sign-in form, which someone signed in is not shown.
    link_only = {"GET /invitations/accept", "POST /invitations/accept", "POST /account/reset",
                 "POST /account/set-password", "POST /account/email/confirm", "POST /account/email/restore",
                 "POST /sign-in"}
    refused = {route: status for route, status in signed_in_statuses.items()
               if status in (401, 403, 404) and route not in link_only}
    assert refused == {}, refused


def test_deletion_re_asks_the_password_ends_everything_and_retention_erases(web):
    from test_session_api import add_session

    # Ada administers Riverside: someone else must too, or the deletion is refused (see
    # test_credential_changes.py::test_the_last_administrator_cannot_delete_their_account).
    add_account(web, "rae@example.test", "Rae Example", [("riverside", "administrator")])
    browser = Browser(web)
    browser.sign_in("ada@example.test")
    other_browser = Browser(web)
    other_browser.sign_in("ada@example.test")
    page = browser.send("GET", "/account/delete")
    assert page.status == 200 and page.header("cache-control") == "no-store"
    csrf = browser.csrf(page)
    before = counts(web)
    wrong = browser.send("POST", "/account/delete", form={"csrf": csrf, "password": "not it"})
    assert wrong.status == 400 and browser.send("GET", "/api/client/v1/session").status == 200
    forged = browser.send("POST", "/account/delete", form={"csrf": csrf, "password": PASSWORD},
                          origin="https://attacker.example")
    assert forged.status == 403 and counts(web)[1] == before[1]
    done = browser.send("POST", "/account/delete", form={"csrf": csrf, "password": PASSWORD})
    assert done.status == 303 and done.header("location") == "/account/deleted"
    assert "__Host-bl_session" not in browser.cookies
    assert other_browser.send("GET", "/api/client/v1/session").status == 401, "every session ended"
    assert Browser(web).sign_in("ada@example.test").status == 400
    assert Browser(web).send("GET", "/account/deleted").status == 200
    refused = subprocess.run([str(binary()), "admin", *web.database_args, "account", "enable", "--email",
                              "ada@example.test"], capture_output=True, text=True, env={})
    assert refused.returncode == 1 and "deleted" in refused.stderr
    assert admin(web, "retention", "--days", "1") == "erased 0 deleted accounts\n", "inside the window"
    assert admin(web, "retention", "--days", "0") == "erased 1 deleted account\n"
    row = web.store.query("SELECT id, email, display_name, password_hash FROM accounts WHERE email LIKE 'erased-%'")[0]
    assert row[1] == f"erased-{row[0]}@invalid" and row[2] == "" and row[3] == "!"
    assert web.store.query("SELECT COUNT(*) FROM memberships WHERE account_id = ?", (row[0],))[0][0] == 0
    audit = admin(web, "audit", "--json")
    assert "ada@example.test" not in audit and "Ada Example" not in audit
    assert [json.loads(line)["subject"] for line in audit.splitlines()
            if json.loads(line)["action"] == "account.erased"] == [row[0]]


# The form keeps the typed email, and sign-in returns the person to
# the page they asked for, never to another site.

def test_a_failed_attempt_keeps_the_typed_email_escaped_and_never_the_password(web):
    browser = Browser(web)
    for typed, shown in [("ada@example.test", b'value="ada@example.test"'),
                         ("o'brien&co@example.test", b'value="o&#39;brien&amp;co@example.test"'),
                         ('"><b>x</b>@example.test', None), ("My Secret Passw0rd!", None),
                         ("ada@example.test\x00x", None)]:
        form = browser.send("GET", "/sign-in")
        response = browser.send("POST", "/sign-in",
                                form={"csrf": browser.csrf(form), "email": typed, "password": "wrong-password-1"})
        assert response.status == 400
        assert b'type="text" inputmode="email" autocomplete="username"' in response.body
        if shown:
            assert shown in response.body
        else:
            assert b" value=" not in response.body.split(b'id="email"')[1].split(b">")[0]
        assert b"wrong-password-1" not in response.body and b"Passw0rd" not in response.body


def test_the_account_page_sends_a_signed_out_person_to_sign_in_and_back(web):
    browser = Browser(web)
    account = browser.send("GET", "/account")
    assert account.status == 303 and account.header("location") == "/sign-in?return=%2Faccount"
    form = browser.send("GET", account.header("location"))
    assert b'<input type="hidden" name="return" value="/account">' in form.body
    response = browser.send("POST", "/sign-in", form={"csrf": browser.csrf(form), "email": "ada@example.test",
                                                      "password": PASSWORD, "return": "/account"})
    assert response.status == 303 and response.header("location") == "/account"
    page = browser.send("GET", "/account")
    assert b">Sign out</button>" in page.body and b"Revoke" not in page.body
    assert b"Times are in Europe/London time." in page.body


@pytest.mark.parametrize("target", ["//evil.example/", "/\\evil.example", "https://evil.example/", "/\t/evil.example",
                                    "/%0d%0aSet-Cookie:x=1", "\\\\evil.example", "javascript:alert(1)",
                                    "/\r\nLocation: https://evil.example/"])
def test_sign_in_never_returns_to_another_site(web, target):
    browser = Browser(web)
    form = browser.send("GET", "/sign-in?" + urlencode({"return": target}))
    assert form.status == 200
    response = browser.send("POST", "/sign-in", form={"csrf": browser.csrf(form), "email": "ada@example.test",
                                                      "password": PASSWORD, "return": target})
    assert response.status == 303
    location = response.header("location")
    assert location in ("/", target) and location.startswith("/") and not location.startswith(("//", "/\\"))
    assert "\r" not in location and "\n" not in location and "\t" not in location
    assert len([v for v in browser.set_cookie_lines if v.startswith("x=")]) == 0


def test_the_return_path_is_written_as_a_valid_uri_reference(web):
    browser = Browser(web)
    target = '/account?x="><script>'
    form = browser.send("GET", "/sign-in?" + urlencode({"return": target}))
    response = browser.send("POST", "/sign-in", form={"csrf": browser.csrf(form), "email": "ada@example.test",
                                                      "password": PASSWORD, "return": target})
    assert response.status == 303
    assert response.header("location") == "/account?x=%22%3E%3Cscript%3E"


def test_deletion_while_the_email_is_locked_says_so(web):
    browser = Browser(web)
    browser.sign_in("ada@example.test")
    for _ in range(5):
        Browser(web).send("POST", "/sign-in", form={"csrf": "", "email": "ada@example.test", "password": "guess"})
        stranger = Browser(web)
        page = stranger.send("GET", "/sign-in")
        stranger.send("POST", "/sign-in", form={"csrf": stranger.csrf(page), "email": "ada@example.test",
                                                "password": "guess"})
    browser.cookies.pop("__Host-bl_device", None)  # a browser the lock holds
    page = browser.send("GET", "/account/delete")
    answer = browser.send("POST", "/account/delete", form={"csrf": browser.csrf(page), "password": PASSWORD})
    assert answer.status == 400 and b"Too many attempts" in answer.body
    assert browser.send("GET", "/api/client/v1/session").status == 200, "nothing was deleted"
