"""Invitations and members through the real binary, with a real SMTP server on loopback: a new
person invited over the API (the mail, its link, a name and password, signed in, a member with the
role), an existing person invited from the People page (sign in, accept), a role change and a
removal (the removed member's next GET /session lacks the school), a withdrawn link refused, a link
that works once; no token, password or mail body in any log line or audit entry."""

import json
import re
from urllib.parse import urlsplit

import pytest

from edge import request
from test_contract import validate
from test_session_api import add_session
from test_web_sign_in import PASSWORD, Browser, add_account, admin

NEW_PASSWORD = "a new and long secret 7"


def api(server, method, path, token=None, body=None, key=None, headers=None):
    """One JSON call on a fresh connection (Bearer `token`)."""
    fields = dict(headers or {})
    if token:
        fields["Authorization"] = f"Bearer {token}"
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        fields["Content-Type"] = "application/json"
    if key:
        fields["Idempotency-Key"] = key
    if method in ("POST", "PATCH", "DELETE") and not data:
        fields["Content-Length"] = "0"
    client = server.connect()
    client.send(request(method, path, fields, data))
    response = client.read_response()
    client.close()
    return response


def school_id(server, slug):
    return server.store.query("SELECT id FROM schools WHERE slug = ?", (slug,))[0][0]


def link_path(message):
    """The invitation link's path and query (the mail names the deployment's origin)."""
    links = [link for link in message.links if "/invitations/accept?token=" in link]
    assert len(links) == 1, message.text
    parts = urlsplit(links[0])
    return parts.path + "?" + parts.query


def session_schools(server, token):
    answer = api(server, "GET", "/api/client/v1/session", token)
    assert answer.status == 200, answer.body
    return {s["slug"]: s["role"] for s in json.loads(answer.body)["schools"]}


@pytest.fixture
def school(make_server, mail_sink):
    server = make_server("--smtp", mail_sink.url)
    add_account(server, "ada@example.test", "Ada Example", [("northfield", "administrator")])
    server.admin_token = add_session(server, "ana@example.test", [])
    admin(server, "member", "add", "--email", "ana@example.test", "--school", "northfield", "--role", "administrator")
    server.sink = mail_sink
    return server


def test_a_new_person_is_invited_over_the_api_and_joins(school):
    northfield = school_id(school, "northfield")
    path = f"/api/client/v1/schools/{northfield}/invitations"
    created = api(school, "POST", path, school.admin_token, {"email": "Lee@Example.test", "role": "teacher"}, "k-1")
    assert created.status == 201, created.body
    assert created.header("cache-control") == "no-store"
    invitation = json.loads(created.body)
    validate(invitation, "Invitation")
    assert set(invitation) == {"id", "email", "role", "expiresAt"} and invitation["email"] == "lee@example.test"
    # A retry with the same key and body: the same answer, and still one mail.
    again = api(school, "POST", path, school.admin_token, {"email": "Lee@Example.test", "role": "teacher"}, "k-1")
    assert again.status == 201 and again.body == created.body
    assert api(school, "POST", path, school.admin_token, {"email": "lee@example.test", "role": "teacher"},
               "k-1").status == 422
    assert api(school, "POST", path, school.admin_token, {"email": "lee@example.test", "role": "teacher"}).status == 400
    message = school.sink.wait_for(lambda m: m.to == "lee@example.test")
    assert "Northfield" in message.subject and message.message_id
    listed_body = json.loads(api(school, "GET", path, school.admin_token).body)
    validate(listed_body, "Invitations")
    listed = listed_body["invitations"]
    assert [i["id"] for i in listed] == [invitation["id"]]

    lee = Browser(school)
    link = lee.send("GET", link_path(message))
    assert link.status == 303 and link.header("location") == "/invitations/accept"
    assert link.header("referrer-policy") == "no-referrer"
    page = lee.send("GET", "/invitations/accept")
    assert page.status == 200 and page.header("cache-control") == "no-store"
    assert link_path(message).split("token=")[1].encode() not in page.body
    assert b"Create my account and join" in page.body
    short = lee.send("POST", "/invitations/accept", form={"csrf": lee.csrf(page), "name": "Lee", "password": "short"})
    assert short.status == 400
    done = lee.send("POST", "/invitations/accept",
                    form={"csrf": lee.csrf(page), "name": "Lee Example", "password": NEW_PASSWORD})
    assert done.status == 303 and done.header("location") == "/account", done.body
    session = json.loads(lee.send("GET", "/api/client/v1/session").body)
    assert session["account"]["displayName"] == "Lee Example"
    assert [(s["slug"], s["role"]) for s in session["schools"]] == [("northfield", "teacher")]
    verified = school.store.query("SELECT email_verified_at FROM accounts WHERE email = ?", ("lee@example.test",))
    assert verified[0][0] is not None
    # The new password signs in.
    assert Browser(school).sign_in("lee@example.test", NEW_PASSWORD).status == 303
    # The link works once.
    replay = Browser(school)
    replay.send("GET", link_path(message))
    assert replay.send("GET", "/invitations/accept").status == 404
    assert json.loads(api(school, "GET", path, school.admin_token).body)["invitations"] == []
    actions = [json.loads(line)["action"] for line in admin(school, "audit", "--json").splitlines()]
    assert "invitation.created" in actions and "invitation.accepted" in actions
    assert_no_secrets(school, [message], [NEW_PASSWORD, PASSWORD])


def test_an_existing_person_is_invited_from_the_people_page_and_accepts(school):
    add_account(school, "sam@example.test", "Sam Example")
    northfield = school_id(school, "northfield")
    ada = Browser(school)
    ada.sign_in("ada@example.test")
    people = ada.send("GET", f"/schools/{northfield}/people")
    assert people.status == 200 and b"Ada Example" in people.body
    sent = ada.send("POST", f"/schools/{northfield}/invitations",
                    form={"csrf": ada.csrf(people), "email": "sam@example.test", "role": "read_only"})
    assert sent.status == 303
    message = school.sink.wait_for(lambda m: m.to == "sam@example.test")
    assert b"sam@example.test" in ada.send("GET", f"/schools/{northfield}/people").body

    sam = Browser(school)
    sam.send("GET", link_path(message))
    page = sam.send("GET", "/invitations/accept")
    assert b"sign in to accept" in page.body and b"return=%2Finvitations%2Faccept" in page.body
    form = sam.send("GET", "/sign-in?return=%2Finvitations%2Faccept")
    signed = sam.send("POST", "/sign-in", form={"csrf": sam.csrf(form), "email": "sam@example.test",
                                                "password": PASSWORD, "return": "/invitations/accept"})
    assert signed.status == 303 and signed.header("location") == "/invitations/accept"
    page = sam.send("GET", "/invitations/accept")
    assert b"Accept and join" in page.body
    accepted = sam.send("POST", "/invitations/accept", form={"csrf": sam.csrf(page)})
    assert accepted.status == 303
    session = json.loads(sam.send("GET", "/api/client/v1/session").body)
    assert [(s["slug"], s["role"]) for s in session["schools"]] == [("northfield", "read_only")]
    assert_no_secrets(school, [message], [PASSWORD])


def test_a_person_signed_in_with_another_email_is_told(school):
    add_account(school, "bo@example.test", "Bo Example")
    northfield = school_id(school, "northfield")
    api(school, "POST", f"/api/client/v1/schools/{northfield}/invitations", school.admin_token,
        {"email": "kit@example.test", "role": "teacher"}, "k")
    message = school.sink.wait_for(lambda m: m.to == "kit@example.test")
    bo = Browser(school)
    bo.sign_in("bo@example.test")
    bo.send("GET", link_path(message))
    page = bo.send("GET", "/invitations/accept")
    assert page.status == 403 and b"You are signed in as bo@example.test" in page.body
    assert bo.send("POST", "/invitations/accept", form={"csrf": bo.csrf(page)}).status == 403
    assert not school.store.query("SELECT id FROM accounts WHERE email = ?", ("kit@example.test",))


def test_role_change_and_removal_reach_the_next_request(school):
    northfield = school_id(school, "northfield")
    tom = add_session(school, "tom@example.test", [("northfield", "teacher")])
    tom_id = school.store.query("SELECT id FROM accounts WHERE email = ?", ("tom@example.test",))[0][0]
    member = f"/api/client/v1/schools/{northfield}/members/{tom_id}"
    members = json.loads(api(school, "GET", f"/api/client/v1/schools/{northfield}/members", school.admin_token).body)
    validate(members, "Members")
    assert all(set(m) == {"accountId", "displayName", "email", "role"} for m in members["members"])
    assert session_schools(school, tom) == {"northfield": "teacher"}
    # Tom may not manage people.
    assert api(school, "GET", f"/api/client/v1/schools/{northfield}/members", tom).status == 403
    changed = api(school, "PATCH", member, school.admin_token, {"role": "read_only"})
    assert changed.status == 200 and json.loads(changed.body)["role"] == "read_only"
    validate(json.loads(changed.body), "Member")
    assert session_schools(school, tom) == {"northfield": "read_only"}
    # The People page changes it too.
    ada = Browser(school)
    ada.sign_in("ada@example.test")
    people = ada.send("GET", f"/schools/{northfield}/people")
    assert ada.send("POST", f"/schools/{northfield}/people/role",
                    form={"csrf": ada.csrf(people), "account": tom_id, "role": "teacher"}).status == 303
    assert session_schools(school, tom) == {"northfield": "teacher"}
    assert api(school, "DELETE", member, school.admin_token).status == 204
    assert session_schools(school, tom) == {}
    assert api(school, "GET", f"/api/client/v1/schools/{northfield}/members", tom).status == 404
    actions = [json.loads(line)["action"] for line in admin(school, "audit", "--json").splitlines()]
    changes = [a for a in actions if a.startswith("membership.")]
    assert changes[-3:] == ["membership.role_changed", "membership.role_changed", "membership.revoked"]


def test_the_last_administrator_stays(school):
    northfield = school_id(school, "northfield")
    ada_id = school.store.query("SELECT id FROM accounts WHERE email = ?", ("ada@example.test",))[0][0]
    ana_id = school.store.query("SELECT id FROM accounts WHERE email = ?", ("ana@example.test",))[0][0]
    base = f"/api/client/v1/schools/{northfield}/members/"
    assert api(school, "DELETE", base + ada_id, school.admin_token).status == 204
    last = api(school, "PATCH", base + ana_id, school.admin_token, {"role": "teacher"})
    assert last.status == 409 and json.loads(last.body)["error"] == "last_administrator"
    assert api(school, "DELETE", base + ana_id, school.admin_token).status == 409


def test_a_withdrawn_link_is_refused(school):
    northfield = school_id(school, "northfield")
    created = api(school, "POST", f"/api/client/v1/schools/{northfield}/invitations", school.admin_token,
                  {"email": "max@example.test", "role": "teacher"}, "k")
    invitation = json.loads(created.body)["id"]
    message = school.sink.wait_for(lambda m: m.to == "max@example.test")
    withdrawn = api(school, "DELETE", f"/api/client/v1/schools/{northfield}/invitations/{invitation}",
                    school.admin_token)
    assert withdrawn.status == 204
    visitor = Browser(school)
    visitor.send("GET", link_path(message))
    refused = visitor.send("GET", "/invitations/accept")
    assert refused.status == 404 and b"does not work" in refused.body
    assert api(school, "DELETE", f"/api/client/v1/schools/{northfield}/invitations/{invitation}",
               school.admin_token).status == 404


def assert_no_secrets(server, messages, passwords):
    """No token, password or mail body in the logs or the audit trail."""
    tokens = [re.search(r"token=([A-Za-z0-9_-]+)", link_path(m)).group(1) for m in messages]
    logs = server.logs()
    audit = admin(server, "audit", "--json")
    for secret in tokens + passwords:
        assert secret not in logs and secret not in audit
    for message in messages:
        body_line = message.text.strip().splitlines()[2]
        assert body_line not in logs and body_line not in audit
