"""The served OpenAPI document against the real binary: it is the repository's file, schemathesis
finds no 5xx and no response that violates it over more than 1,000 generated requests (signed in
and signed out), and the answers schemathesis cannot reach (a granted exchange, the session, the
device list) validate against the document's schemas."""

import json
import shutil
import subprocess

import jsonschema
import pytest
from edge import ROOT, Server, fetch
from test_session_api import add_session

DOCUMENT = json.loads((ROOT / "docs" / "client-api-v1.openapi.json").read_text())
ST = shutil.which("st") or shutil.which("schemathesis")


def validate(instance, schema_name):
    """Validates against components/schemas/NAME with the document's $refs resolved."""
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": DOCUMENT["components"]}
    jsonschema.Draft202012Validator(schema).validate(instance)


def test_the_served_document_is_the_repositorys(server):
    response = fetch(server, "/api/client/v1/openapi.json")
    assert response.status == 200 and response.header("cache-control") == "no-store"
    assert json.loads(response.body) == DOCUMENT


@pytest.mark.http1_only("schemathesis's client (requests) speaks HTTP/1.1 only: in the h2 pass it would repeat "
                        "the HTTP/1.1 run on the same port")
def test_schemathesis_finds_no_server_error_and_no_violation(make_server):
    assert ST, "schemathesis is installed by build/setup --test"
    server = make_server("--exchange-burst", "1000000", "--exchange-per-minute", "1000000")
    token = add_session(server, "ada@example.test", [("northfield", "teacher")])
    url = server.url("/api/client/v1/openapi.json")
    # positive_data_acceptance is left out on purpose: a schema-valid exchange body with a random
    # code is refused with 400 invalid_grant by contract, not accepted.
    # The forwarded operation (`{forwardedPath}`, x-forwarded) is left out too: it is the template of
    # whatever the configuration forwards, and a generated path such as `…/{schoolId}/invitations`
    # is one of band-edge's own routes, judged by its own operation; the gateway suites
    # (test_gateway*.py) test what forwarding answers.
    common = [ST, "run", url, "--checks", "all", "--exclude-checks", "positive_data_acceptance",
              "--exclude-path-regex", "forwardedPath", "--generation-deterministic", "--no-shrink",
              "--warnings", "off"]
    runs = [
        # Signed in, everything but the DELETEs (which would end the session for the rest).
        common + ["-n", "250", "-H", f"Authorization: Bearer {token}", "--exclude-method", "DELETE"],
        # Signed out, every operation.
        common + ["-n", "100"],
    ]
    for command in runs:
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=server.dir)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    lines = server.access_log(minimum=1000, timeout=10)
    api = [line for line in lines if line["path"].startswith("/api/client/v1/")]
    assert len(api) >= 1000, len(api)
    assert not [line for line in api if line["status"] >= 500]


def test_answers_schemathesis_cannot_reach_match_the_document(make_server):
    from test_native_handoff import App, sign_in_through_the_browser
    from test_web_sign_in import add_account
    from urllib.parse import parse_qs, urlsplit

    server = make_server()
    add_account(server, "ada@example.test", "Ada Example", [("northfield", "teacher")])
    app = App(server)
    _, redirect = sign_in_through_the_browser(server, app)
    code = parse_qs(urlsplit(redirect.header("location")).query)["code"][0]
    granted = json.loads(app.exchange(code).body)
    validate(granted, "ExchangeResponse")
    auth = {"Authorization": f"Bearer {granted['sessionToken']}"}
    validate(json.loads(fetch(server, "/api/client/v1/session", auth).body), "Session")
    validate(json.loads(fetch(server, "/api/client/v1/sessions", auth).body), "Devices")
    validate(json.loads(fetch(server, "/api/client/v1/config").body), "Config")
    too_old = fetch(server, "/api/client/v1/session", {**auth, "Band-Licence-Client": "ios/0.1.0"})
    assert too_old.status == 426
    validate(json.loads(too_old.body), "AppVersionUnsupported")


def test_the_document_lists_every_engine_answer_where_it_can_happen():
    pooled = {("/api/client/v1/session", "get"), ("/api/client/v1/session", "delete"),
              ("/api/client/v1/sessions", "get"), ("/api/client/v1/sessions/{id}", "delete"),
              ("/api/client/v1/native/exchange", "post"),
              ("/api/client/v1/schools/{schoolId}/members", "get"),
              ("/api/client/v1/schools/{schoolId}/members/{accountId}", "patch"),
              ("/api/client/v1/schools/{schoolId}/members/{accountId}", "delete"),
              ("/api/client/v1/schools/{schoolId}/invitations", "get"),
              ("/api/client/v1/schools/{schoolId}/invitations", "post"),
              ("/api/client/v1/schools/{schoolId}/invitations/{id}", "delete"),
              ("/api/client/v1/account", "patch")}
    # The forwarded template: pooled like the school endpoints (and 503 when its core is switched off).
    pooled |= {("/api/client/v1/schools/{schoolId}/{forwardedPath}", m)
               for m in ("get", "head", "post", "put", "patch", "delete")}
    for path, operations in DOCUMENT["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert {"400", "413"} <= codes, (path, method)
            assert ("503" in codes) == ((path, method) in pooled), (path, method)
    assert "429" in DOCUMENT["paths"]["/api/client/v1/native/exchange"]["post"]["responses"]
    client = DOCUMENT["components"]["parameters"]["Client"]["schema"]
    assert client["pattern"] == r"^(ios|android)/[0-9]{1,6}(\.[0-9]{1,6}){1,2}$"


def test_a_web_session_is_named_by_its_browser_from_a_fixed_word_list(make_server):
    from test_web_sign_in import PASSWORD, Browser, add_account
    import re
    server = make_server()
    add_account(server, "ada@example.test", "Ada Example")
    browser = Browser(server)
    agent = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0 <script>x</script>"
    page = browser.send("GET", "/sign-in")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page.body).group(1).decode()
    signed = browser.send("POST", "/sign-in", form={"csrf": csrf, "email": "ada@example.test", "password": PASSWORD},
                          headers={"User-Agent": agent})
    assert signed.status == 303
    devices = json.loads(browser.send("GET", "/api/client/v1/sessions").body)["sessions"]
    validate({"sessions": devices}, "Devices")
    assert [d["browser"] for d in devices] == ["Firefox on Linux"]
    account = browser.send("GET", "/account").body
    assert b"Firefox on Linux" in account and b"script" not in account.split(b"<main")[1].split(b"</main>")[0]


def test_every_operation_added_by_the_account_lifecycle_says_since_when_and_for_which_apps():
    """The API expansion rules: each new endpoint is documented with the contract version that
    added it and the oldest app version that may call it."""
    import json
    from pathlib import Path
    document = json.loads((Path(__file__).resolve().parents[2] / "docs" / "client-api-v1.openapi.json").read_text())
    new = [(path, method, op) for path, item in document["paths"].items()
           if path.startswith(("/api/client/v1/schools/", "/api/client/v1/account"))
           for method, op in item.items() if method in ("get", "post", "patch", "delete", "put")
           and not op.get("x-forwarded")]
    assert len(new) == 7
    forwarded = [op for item in document["paths"].values() for op in item.values() if op.get("x-forwarded")]
    assert len(forwarded) == 6
    for path, method, op in new + [("forwarded", "any", op) for op in forwarded]:
        since = op.get("x-since", {})
        assert since.get("contractVersion") == 2 and set(since.get("minimumAppVersion", {})) == {"ios", "android"}, \
            (method, path)
