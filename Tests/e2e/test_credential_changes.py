"""The attacks on credential changes, each played end to end against the real binary with a real SMTP server on
loopback: a credential change (password change, reset, set-password, disabling, deletion) ends
everything an attacker could hold — an email-change link, trusted-device cookies, a native sign-in
code, an invitation sent with a stolen administrator's session — and the old address gets its
account back after an email change it did not make. Then the invitation limits, names that could
smuggle links into mail, and the last administrator."""

import base64
import hashlib
import json
import os
import re
import time
from urllib.parse import urlencode, urlsplit, parse_qs

import pytest

from test_invitations import api, link_path, school_id, session_schools
from test_native_handoff import App, fetch_session
from test_recovery import ask_for_link, path_of
from test_session_api import add_session
from test_web_sign_in import PASSWORD, Browser, add_account, admin

NEW_PASSWORD = "the owner's brand new phrase 9"
ATTACKER = "mallory@example.test"


@pytest.fixture
def owned(make_server, mail_sink):
    """Ada, an administrator of Northfield; an SMTP sink."""
    server = make_server("--smtp", mail_sink.url)
    add_account(server, "ada@example.test", "Ada Example", [("northfield", "administrator")])
    server.sink = mail_sink
    return server


def audit(server):
    return [json.loads(line) for line in admin(server, "audit", "--json").splitlines()]


def email_of(server):
    return server.store.query("SELECT email FROM accounts WHERE display_name = 'Ada Example'")[0][0]


def session_for(server, email):
    """A native session token for the existing account `email` (written as the store would)."""
    token = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    account = server.store.query("SELECT id FROM accounts WHERE email = ?", (email,))[0][0]
    now = int(time.time())
    server.store.query(
        "INSERT INTO sessions (id, token_digest, account_id, kind, platform, app_version, created_at, "
        "last_seen_at, expires_at) VALUES (?, ?, ?, 'native', 'ios', '1.4.0', ?, ?, ?)",
        ("ses_" + token[:8], hashlib.sha256(token.encode()).digest(), account, now, now, now + 86400))
    return token


def reset_password(server, password=NEW_PASSWORD, email="ada@example.test"):
    """The owner recovers the account by mail and chooses `password` (ends every session)."""
    browser = Browser(server)
    ask_for_link(browser, email)
    message = server.sink.wait_for(
        lambda m: m.to == email and m.subject == "Choose a new Band Licence password")
    server.sink.messages.remove(message)
    browser.send("GET", path_of(message.links[0]))
    form = browser.send("GET", "/account/reset")
    done = browser.send("POST", "/account/reset", form={"csrf": browser.csrf(form), "password": password})
    assert done.status == 303 and done.header("location") == "/account/reset/done", done.body
    return browser


def change_password(browser, current=PASSWORD, new=NEW_PASSWORD):
    page = browser.send("GET", "/account")
    done = browser.send("POST", "/account/password", form={
        "csrf": browser.csrf(page), "current-password": current, "new-password": new})
    assert done.status == 303 and done.header("location") == "/account?changed=password", done.body


def ask_email_change(browser, to=ATTACKER, password=PASSWORD):
    page = browser.send("GET", "/account")
    return browser.send("POST", "/account/email", form={
        "csrf": browser.csrf(page), "new-email": to, "email-password": password})


# 1. HIGH: the email-change link ------------------------------------------------------------------

@pytest.mark.parametrize("owner_acts", ["change", "reset", "both"])
def test_an_email_change_link_dies_with_a_credential_change(owned, owner_acts):
    """The attacker once knew the password: signs in, asks to move the account to their address.
    The owner changes and/or resets the password; the attacker follows the link and gets
    nothing: the link was voided, and the account keeps its address and school role."""
    attacker = Browser(owned)
    assert attacker.sign_in("ada@example.test").status == 303
    assert ask_email_change(attacker).header("location") == "/account?changed=email"
    link = path_of(owned.sink.wait_for(lambda m: m.to == ATTACKER).links[0])

    owner = Browser(owned)
    assert owner.sign_in("ada@example.test").status == 303
    if owner_acts in ("change", "both"):
        change_password(owner)
    if owner_acts in ("reset", "both"):
        reset_password(owned, NEW_PASSWORD + " again")
    assert attacker.send("GET", "/api/client/v1/session").status == 401

    landed = attacker.send("GET", link)
    assert landed.status == 410 and b"expired or has been used" in landed.body
    assert attacker.send("GET", "/account/email/confirm").status == 410
    assert email_of(owned) == "ada@example.test"
    # Recovery by mail for the attacker's address finds no account.
    ask_for_link(Browser(owned), ATTACKER)
    assert owned.store.query("SELECT count(*) FROM action_tokens WHERE email = ? AND purpose = 'recovery'",
                             (ATTACKER,)) == [(0,)]


def test_an_email_change_link_alone_changes_nothing(owned):
    """Confirming needs the account's own live session: the link, even with its cookie, does not."""
    owner = Browser(owned)
    assert owner.sign_in("ada@example.test").status == 303
    ask_email_change(owner, "ada.new@example.test")
    link = path_of(owned.sink.wait_for(lambda m: m.to == "ada.new@example.test").links[0])
    stranger = Browser(owned)
    stranger.send("GET", link)
    page = stranger.send("GET", "/account/email/confirm")
    assert page.status == 200 and b"Sign in to confirm" in page.body and b"ada@example.test" not in page.body
    assert b'name="csrf"' not in page.body, "no form to confirm with"
    refused = stranger.send("POST", "/account/email/confirm", form={"csrf": ""})
    assert refused.status == 403
    assert email_of(owned) == "ada@example.test"
    # The owner sees the pending change and cancels it; the link then works for nobody.
    account = owner.send("GET", "/account")
    assert b"ada.new@example.test" in account.body and b'action="/account/email/cancel"' in account.body
    cancelled = owner.send("POST", "/account/email/cancel", form={"csrf": owner.csrf(account)})
    assert cancelled.header("location") == "/account?changed=email-cancelled"
    assert b"ada.new@example.test" not in owner.send("GET", "/account").body
    assert owner.send("GET", link).status == 410
    assert "account.email_change_cancelled" in [e["action"] for e in audit(owned)]


def test_the_old_address_takes_the_account_back(owned):
    """An attacker holding a live session moves the account to their address. The old address is
    told, with a way back: following it restores the address, ends the attacker's session, makes
    the known password useless, and lets the owner choose a new one; the attacker's own later
    recovery by mail finds nothing."""
    attacker = Browser(owned)
    assert attacker.sign_in("ada@example.test").status == 303
    ask_email_change(attacker)
    attacker.send("GET", path_of(owned.sink.wait_for(lambda m: m.to == ATTACKER).links[0]))
    page = attacker.send("GET", "/account/email/confirm")
    done = attacker.send("POST", "/account/email/confirm", form={"csrf": attacker.csrf(page)})
    assert done.header("location") == "/account/email/confirmed"
    assert email_of(owned) == ATTACKER
    told = owned.sink.wait_for(lambda m: m.to == "ada@example.test" and "was changed" in m.subject)
    assert "token" not in told.text.split("http")[0]
    (back,) = told.links
    assert path_of(back).startswith("/account/email/restore?token=")

    owner = Browser(owned)
    owner.send("GET", path_of(back))
    ask = owner.send("GET", "/account/email/restore")
    assert ask.status == 200 and b"ada@example.test" in ask.body
    restored = owner.send("POST", "/account/email/restore", form={"csrf": owner.csrf(ask)})
    assert restored.status == 303 and restored.header("location") == "/account/reset"
    assert email_of(owned) == "ada@example.test"
    assert attacker.send("GET", "/api/client/v1/session").status == 401
    assert Browser(owned).sign_in("ada@example.test").status == 400
    assert Browser(owned).sign_in(ATTACKER).status == 400
    form = owner.send("GET", "/account/reset")
    set_new = owner.send("POST", "/account/reset", form={"csrf": owner.csrf(form), "password": NEW_PASSWORD})
    assert set_new.header("location") == "/account/reset/done"
    assert Browser(owned).sign_in("ada@example.test", NEW_PASSWORD).status == 303
    assert owner.send("GET", path_of(back)).status == 410
    assert "account.email_restored" in [e["action"] for e in audit(owned)]


def test_an_email_change_to_a_taken_address_is_answered_alike(owned):
    add_account(owned, "bo@example.test", "Bo Example")
    owner = Browser(owned)
    owner.sign_in("ada@example.test")
    taken = ask_email_change(owner, "bo@example.test")
    free = ask_email_change(owner, "ada.free@example.test")
    assert (taken.status, taken.header("location")) == (free.status, free.header("location")) \
        == (303, "/account?changed=email")
    told = owned.sink.wait_for(lambda m: m.to == "bo@example.test")
    assert "already belongs to your account" in told.text and "/account/email/confirm" not in told.text
    owned.sink.wait_for(lambda m: m.to == "ada.free@example.test")


# 2. MEDIUM: trusted-device cookies ----------------------------------------------------------------

def test_device_cookies_share_one_lockout_and_die_with_a_password_change(owned):
    """Four sign-ins leave four device cookies. While a stranger keeps the email locked they buy
    five guesses between them, not twenty; after the owner changes the password none is trusted."""
    browsers = [Browser(owned) for _ in range(4)]
    for b in browsers:
        assert b.sign_in("ada@example.test").status == 303
        b.cookies.pop("__Host-bl_session")
    assert len({b.cookies["__Host-bl_device"] for b in browsers}) == 4
    stranger = Browser(owned)
    for _ in range(5):
        stranger.sign_in("ada@example.test", "a stranger's guess")
    assert b"Too many attempts" in stranger.sign_in("ada@example.test").body
    answers = [browsers[i % 4].sign_in("ada@example.test", f"guess number {i}") for i in range(12)]
    not_locked = [a for a in answers if b"Too many attempts" not in a.body]
    assert len(not_locked) == 4, "the fifth failure locks every trusted browser of the account"
    assert all(b"Too many attempts" in b.sign_in("ada@example.test").body for b in browsers)


def test_a_device_cookie_is_no_trust_after_a_password_change(owned):
    kept = Browser(owned)
    assert kept.sign_in("ada@example.test").status == 303
    kept.cookies.pop("__Host-bl_session")
    owner = Browser(owned)
    owner.sign_in("ada@example.test")
    change_password(owner)
    stranger = Browser(owned)
    for _ in range(5):
        stranger.sign_in("ada@example.test", "a stranger's guess")
    # The old device cookie no longer passes the email's lock, even with the new password.
    assert b"Too many attempts" in kept.sign_in("ada@example.test", NEW_PASSWORD).body
    assert owned.store.query("SELECT count(*) FROM trusted_devices") == [(0,)]


def test_at_most_five_trusted_browsers_per_account(owned):
    for _ in range(7):
        assert Browser(owned).sign_in("ada@example.test").status == 303
    assert owned.store.query("SELECT count(*) FROM trusted_devices") == [(5,)]


# 3. MEDIUM: a native sign-in code minted before a reset ------------------------------------------

@pytest.mark.parametrize("change", ["reset", "change", "disable"])
def test_a_handoff_code_from_before_a_credential_change_is_refused(owned, change):
    """'Continue as' with a stolen web session mints a code; the owner resets (or changes) the
    password or an operator disables the account; the exchange is invalid_grant, no session."""
    add_account(owned, "ana@example.test", "Ana Example", [("northfield", "administrator")])
    thief = Browser(owned)
    assert thief.sign_in("ada@example.test").status == 303
    app = App(owned)
    page = thief.send("GET", "/native/sign-in?" + urlencode(app.params()))
    fields = {k.decode(): v.decode() for k, v in re.findall(rb'<input type="hidden" name="([^"]+)" value="([^"]*)"',
                                                               page.body)}
    fields["action"] = "continue"
    code = parse_qs(urlsplit(thief.send("POST", "/native/sign-in", form=fields).header("location")).query)["code"][0]
    if change == "reset":
        reset_password(owned)
    elif change == "change":
        owner = Browser(owned)
        owner.sign_in("ada@example.test")
        change_password(owner)
    else:
        admin(owned, "account", "disable", "--email", "ada@example.test")
    answer = app.exchange(code)
    assert answer.status == 400 and json.loads(answer.body)["error"] == "invalid_grant"
    assert owned.store.query("SELECT count(*) FROM sessions WHERE kind = 'native'") == [(0,)]


# 4. MEDIUM: an invitation keeps its sender's authority only while the sender has it ------------------

def invite_attacker(server, browser_or_token, role="administrator", key="k1"):
    northfield = school_id(server, "northfield")
    created = api(server, "POST", f"/api/client/v1/schools/{northfield}/invitations", browser_or_token,
                  {"email": ATTACKER, "role": role}, key)
    assert created.status == 201, created.body
    message = server.sink.wait_for(lambda m: m.to == ATTACKER and "invited" in m.subject)
    server.sink.messages.remove(message)
    return json.loads(created.body)["id"], link_path(message)


def accept_as_new_person(server, link):
    visitor = Browser(server)
    visitor.send("GET", link)
    page = visitor.send("GET", "/invitations/accept")
    if page.status != 200:
        return page
    return visitor.send("POST", "/invitations/accept", form={
        "csrf": visitor.csrf(page), "name": "Mallory Example", "password": "mallory's long password 1"})


@pytest.mark.parametrize("loss", ["reset", "changed", "removed", "demoted", "disabled"])
def test_an_invitation_dies_when_its_sender_loses_authority(owned, loss):
    """A stolen administrator's session invites the attacker as administrator. When the sender
    resets or changes the password, is removed, demoted or disabled, the invitation is withdrawn
    and accepting it grants nothing."""
    add_account(owned, "sam@example.test", "Sam Example", [("northfield", "administrator")])
    stolen = session_for(owned, "sam@example.test")
    _, link = invite_attacker(owned, stolen)
    sam_id = owned.store.query("SELECT id FROM accounts WHERE email = 'sam@example.test'")[0][0]
    northfield = school_id(owned, "northfield")
    ada = session_for(owned, "ada@example.test")
    if loss == "reset":
        reset_password(owned, email="sam@example.test")
    elif loss == "changed":
        sam = Browser(owned)
        assert sam.sign_in("sam@example.test").status == 303
        change_password(sam)
    elif loss == "removed":
        assert api(owned, "DELETE", f"/api/client/v1/schools/{northfield}/members/{sam_id}", ada).status == 204
    elif loss == "demoted":
        assert api(owned, "PATCH", f"/api/client/v1/schools/{northfield}/members/{sam_id}", ada,
                   {"role": "teacher"}).status == 200
    else:
        admin(owned, "account", "disable", "--email", "sam@example.test")
    refused = accept_as_new_person(owned, link)
    assert refused.status == 404 and b"does not work" in refused.body
    assert owned.store.query("SELECT count(*) FROM accounts WHERE email = ?", (ATTACKER,)) == [(0,)]
    pending = api(owned, "GET", f"/api/client/v1/schools/{northfield}/invitations", ada)
    assert json.loads(pending.body)["invitations"] == []


def test_an_invitation_checks_its_sender_at_acceptance(owned):
    """Even written around the withdrawal (a sender demoted by SQL, as an operator might), the
    acceptance itself checks that the sender is still an administrator."""
    token = add_session(owned, "sam@example.test", [("northfield", "administrator")])
    _, link = invite_attacker(owned, token)
    owned.store.query("UPDATE memberships SET role = 'teacher' WHERE account_id = "
                      "(SELECT id FROM accounts WHERE email = 'sam@example.test')")
    assert accept_as_new_person(owned, link).status == 404
    assert owned.store.query("SELECT count(*) FROM accounts WHERE email = ?", (ATTACKER,)) == [(0,)]
    assert any(e["action"] == "invitation.revoked" and e["detail"].endswith("inviter_lost_authority")
               for e in audit(owned))


def test_a_live_senders_invitation_still_works(owned):
    token = add_session(owned, "sam@example.test", [("northfield", "administrator")])
    _, link = invite_attacker(owned, token, role="teacher")
    assert accept_as_new_person(owned, link).status == 303
    assert owned.store.query(
        "SELECT m.role FROM memberships m JOIN accounts a ON a.id = m.account_id WHERE a.email = ?",
        (ATTACKER,)) == [("teacher",)]


# 5. Invitations: limits and names in mail ---------------------------------------------------------

def test_invitations_are_limited_per_address_inviter_and_school(make_server, mail_sink):
    server = make_server("--smtp", mail_sink.url, "--invitations-per-address", "2",
                         "--invitations-per-inviter", "4", "--invitations-per-school", "5")
    token = add_session(server, "sam@example.test", [("northfield", "administrator")])
    other = add_session(server, "ivy@example.test", [("northfield", "administrator")])
    northfield = school_id(server, "northfield")
    path = f"/api/client/v1/schools/{northfield}/invitations"
    statuses = [api(server, "POST", path, token, {"email": "max@example.test", "role": "teacher"}, f"a{i}").status
                for i in range(3)]
    assert statuses == [201, 201, 429]
    limited = api(server, "POST", path, token, {"email": "max@example.test", "role": "teacher"}, "a9")
    assert limited.status == 429 and 1 <= int(limited.header("retry-after")) <= 3600
    body = json.loads(limited.body)
    assert body["error"] == "too_many_invitations" and "Try again" in body["message"]
    assert [api(server, "POST", path, token, {"email": f"p{i}@example.test", "role": "teacher"}, f"b{i}").status
            for i in range(3)] == [201, 201, 429], "the inviter's 4 an hour"
    assert [api(server, "POST", path, other, {"email": f"q{i}@example.test", "role": "teacher"}, f"c{i}").status
            for i in range(2)] == [201, 429], "the school's 5 an hour"
    # The People page says the same, with Retry-After.
    add_account(server, "ada@example.test", "Ada Example", [("northfield", "administrator")])
    ada = Browser(server)
    ada.sign_in("ada@example.test")
    people = ada.send("GET", f"/schools/{northfield}/people")
    page = ada.send("POST", f"/schools/{northfield}/invitations", form={
        "csrf": ada.csrf(people), "email": "r@example.test", "role": "teacher"})
    assert page.status == 429 and page.header("retry-after") and b"Too many invitations" in page.body
    assert len([m for m in mail_sink.messages if "invited" in m.subject]) <= 5


@pytest.mark.parametrize("name", [
    "Ada \u202eevil.test\u202c", "Ada\u200bExample", "Visit www.example.test", "https://example.test",
    "Ada evil.example", "ada@example.test", "Ada /reset", "x" * 101,
])
def test_a_name_that_could_smuggle_a_link_or_reorder_text_is_refused(owned, name):
    ada = Browser(owned)
    ada.sign_in("ada@example.test")
    page = ada.send("GET", "/account")
    refused = ada.send("POST", "/account/name", form={"csrf": ada.csrf(page), "name": name})
    assert refused.status == 400 and b"web or email addresses" in refused.body
    token = add_session(owned, "sam@example.test", [("northfield", "administrator")])
    _, link = invite_attacker(owned, token, role="teacher")
    visitor = Browser(owned)
    visitor.send("GET", link)
    form = visitor.send("GET", "/invitations/accept")
    answer = visitor.send("POST", "/invitations/accept", form={
        "csrf": visitor.csrf(form), "name": name, "password": "mallory's long password 1"})
    assert answer.status == 400
    assert owned.store.query("SELECT count(*) FROM accounts WHERE email = ?", (ATTACKER,)) == [(0,)]


def test_a_stored_name_that_breaks_the_rules_never_reaches_mail(owned):
    """A name stored before the rules (written here by SQL) is left out of the invitation mail."""
    token = add_session(owned, "sam@example.test", [("northfield", "administrator")])
    owned.store.query("UPDATE accounts SET display_name = ? WHERE email = 'sam@example.test'",
                      ("Sam, see evil.example/login",))
    northfield = school_id(owned, "northfield")
    assert api(owned, "POST", f"/api/client/v1/schools/{northfield}/invitations", token,
               {"email": ATTACKER, "role": "teacher"}, "k2").status == 201
    message = owned.sink.wait_for(lambda m: m.to == ATTACKER)
    assert "evil.example" not in message.text + message.html
    assert "An administrator of Northfield" in message.text, message.text


def test_a_replayed_key_after_the_invitation_is_withdrawn_says_it_is_gone(owned):
    token = add_session(owned, "sam@example.test", [("northfield", "administrator")])
    northfield = school_id(owned, "northfield")
    path = f"/api/client/v1/schools/{northfield}/invitations"
    body = {"email": "max@example.test", "role": "teacher"}
    first = api(owned, "POST", path, token, body, "same-key")
    assert first.status == 201 and api(owned, "POST", path, token, body, "same-key").status == 201
    invitation = json.loads(first.body)["id"]
    assert api(owned, "DELETE", f"{path}/{invitation}", token).status == 204
    gone = api(owned, "POST", path, token, body, "same-key")
    assert gone.status == 410 and json.loads(gone.body)["error"] == "invitation_gone"


# 6. The last administrator ------------------------------------------------------------------------

def test_the_last_administrator_cannot_delete_their_account(owned):
    ada = Browser(owned)
    ada.sign_in("ada@example.test")
    form = ada.send("GET", "/account/delete")
    refused = ada.send("POST", "/account/delete", form={"csrf": ada.csrf(form), "password": PASSWORD})
    assert refused.status == 409
    assert b"only administrator" in refused.body and b"Northfield School" in refused.body
    assert b"Make someone else an administrator" in refused.body
    assert ada.send("GET", "/api/client/v1/session").status == 200
    # With a second administrator, the deletion goes through.
    add_account(owned, "ana@example.test", "Ana Example", [("northfield", "administrator")])
    form = ada.send("GET", "/account/delete")
    done = ada.send("POST", "/account/delete", form={"csrf": ada.csrf(form), "password": PASSWORD})
    assert done.status == 303 and done.header("location") == "/account/deleted"


def test_an_operator_cannot_disable_the_last_administrator_unless_forced(owned):
    import subprocess
    from edge import binary
    refused = subprocess.run([str(binary()), "admin", *owned.database_args, "account", "disable", "--email",
                              "ada@example.test"], capture_output=True, text=True, timeout=60, env={})
    assert refused.returncode != 0 and "only administrator of northfield" in refused.stderr
    assert "--force" in refused.stderr
    assert owned.store.query("SELECT disabled FROM accounts WHERE email = 'ada@example.test'") == [(0,)]
    assert "disabled account" in admin(owned, "account", "disable", "--email", "ada@example.test", "--force")


def continue_as(server, browser, app):
    page = browser.send("GET", "/native/sign-in?" + urlencode(app.params()))
    fields = {k.decode(): v.decode() for k, v in re.findall(rb'<input type="hidden" name="([^"]+)" value="([^"]*)"',
                                                               page.body)}
    fields["action"] = "continue"
    return parse_qs(urlsplit(browser.send("POST", "/native/sign-in", form=fields).header("location")).query)["code"][0]


def test_signing_out_every_other_device_ends_their_codes_and_trust(owned):
    """"Sign out of all other devices" ends what those devices hold besides their sessions: a
    native sign-in code one of them minted, and their trusted-browser places; this browser's stays."""
    thief = Browser(owned)
    assert thief.sign_in("ada@example.test").status == 303
    app = App(owned)
    code = continue_as(owned, thief, app)
    owner = Browser(owned)
    assert owner.sign_in("ada@example.test").status == 303
    assert owned.store.query("SELECT count(*) FROM trusted_devices") == [(2,)]
    page = owner.send("GET", "/account")
    done = owner.send("POST", "/account/sessions/revoke-others", form={"csrf": owner.csrf(page)})
    assert done.status == 303
    assert thief.send("GET", "/api/client/v1/session").status == 401
    assert owner.send("GET", "/api/client/v1/session").status == 200
    answer = app.exchange(code)
    assert answer.status == 400 and json.loads(answer.body)["error"] == "invalid_grant"
    assert owned.store.query("SELECT count(*) FROM trusted_devices") == [(1,)]
    # The owner's browser is still trusted through a stranger's lock; the thief's is not.
    thief.cookies.pop("__Host-bl_session", None)
    owner.cookies.pop("__Host-bl_session", None)
    stranger = Browser(owned)
    for _ in range(5):
        stranger.sign_in("ada@example.test", "a stranger's guess")
    assert b"Too many attempts" in thief.sign_in("ada@example.test").body
    assert owner.sign_in("ada@example.test").status == 303
