"""Verified-link files, /config and reload against the real binary, for staging and production."""

import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest
from edge import ROOT, KeepAlive, Server, binary, fetch

FINGERPRINT = "14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5"
FINGERPRINT_2 = "5A:0B:31:C2:9E:44:7D:18:E6:A3:02:BF:71:9C:D4:28:63:F0:0E:85:3B:C7:49:1A:AE:52:D6:0F:97:6B:E1:34"
ENVIRONMENTS = {
    "staging": {"origin": "https://staging.bandlicence.test", "label": "Staging",
                "apple": ["R3TY7UIO9P.test.bandlicence.app.staging"], "package": "test.bandlicence.app.staging",
                "fingerprints": [FINGERPRINT_2]},
    "production": {"origin": "https://app.bandlicence.test", "label": "Production",
                   "apple": ["K7QW2X9P4M.test.bandlicence.app"], "package": "test.bandlicence.app",
                   "fingerprints": [FINGERPRINT]},
}
PATHS = ["/.well-known/apple-app-site-association", "/apple-app-site-association", "/.well-known/assetlinks.json"]
APP_ID = re.compile(r"^[A-Z0-9]{10}\.[A-Za-z0-9.-]+$")
SHA = re.compile(r"^([0-9A-F]{2}:){31}[0-9A-F]{2}$")


def config(environment, tmp_path, **overrides):
    e = ENVIRONMENTS[environment]
    other = "production" if environment == "staging" else "staging"
    o = ENVIRONMENTS[other]
    data = {
        "environment": environment, "origin": e["origin"], "label": e["label"],
        "apple": {"appIDs": e["apple"]},
        "android": {"packageName": e["package"], "sha256CertFingerprints": e["fingerprints"]},
        "knownIdentities": {other: {"appleBundleIDs": [a.split(".", 1)[1] for a in o["apple"]],
                                    "androidPackageName": o["package"]}},
        "verifiedLinkPaths": ["/native/callback", "/qr/*"],
        # Staging and production need a relay to start; nothing here sends mail (port 9: discard).
        "mail": {"smtp": "smtp://127.0.0.1:9", "from": "Band Licence <no-reply@bandlicence.test>"},
    }
    data.update(overrides)
    path = tmp_path / f"{environment}.json"
    path.write_text(json.dumps(data))
    return path


def strict_json(body: bytes):
    def reject(constant):
        raise ValueError(f"non-standard JSON constant {constant}")
    return json.loads(body.decode("utf-8"), parse_constant=reject)


@pytest.mark.parametrize("environment", ["staging", "production"])
def test_link_files_list_exactly_this_environments_identities(tmp_path, environment):
    server = Server("--config", str(config(environment, tmp_path)), test_routes=False,
                    env={"BAND_LICENCE_ENV": environment})
    try:
        mine, theirs = ENVIRONMENTS[environment], ENVIRONMENTS["production" if environment == "staging" else "staging"]
        bodies = {}
        for path in PATHS:
            for headers in ({}, {"Accept-Encoding": "gzip"}, {"User-Agent": "AASA-Bot/1.0 (unusual; +probe)"}):
                response = fetch(server, path, headers)
                assert response.status == 200
                assert response.header("content-type") == "application/json"
                assert response.header("location") is None
                assert response.header("set-cookie") is None
                assert response.header("content-encoding") is None
                assert response.header("cache-control") == "public, max-age=3600"
                assert response.body[:1] in (b"{", b"[") and not response.body.startswith(b"\xef\xbb\xbf")
                assert len(response.body) <= 128 * 1024
                bodies.setdefault(path, response.body)
                assert response.body == bodies[path], "same bytes for any client"
        assert bodies[PATHS[0]] == bodies[PATHS[1]], "both Apple paths serve identical bytes"
        apple = strict_json(bodies[PATHS[0]])
        android = strict_json(bodies[PATHS[2]])
        app_ids = [i for d in apple["applinks"]["details"] for i in d["appIDs"]]
        assert app_ids == mine["apple"] and apple["webcredentials"]["apps"] == mine["apple"]
        assert all(APP_ID.match(i) for i in app_ids)
        assert [c["/"] for c in apple["applinks"]["details"][0]["components"]] == ["/native/callback", "/qr/*"]
        assert len(android) == 1
        target = android[0]["target"]
        assert target["namespace"] == "android_app" and target["package_name"] == mine["package"]
        assert target["sha256_cert_fingerprints"] == mine["fingerprints"]
        assert all(SHA.match(f) for f in target["sha256_cert_fingerprints"])
        assert sorted(android[0]["relation"]) == ["delegate_permission/common.get_login_creds",
                                                  "delegate_permission/common.handle_all_urls"]
        listed = set(app_ids) | {target["package_name"]} | set(target["sha256_cert_fingerprints"])
        for identity in theirs["apple"] + [theirs["package"]] + theirs["fingerprints"]:
            assert identity not in listed, f"{environment} lists {identity}"
            assert f'"{identity}"' not in b"".join(bodies.values()).decode()
        nope = fetch(server, "/.well-known/nope")
        assert nope.status == 404 and not nope.header("content-type").startswith("text/html")
        etag = fetch(server, PATHS[0]).header("etag")
        assert fetch(server, PATHS[0], {"If-None-Match": etag}).status == 304
    finally:
        server.stop()


def test_client_config_has_exactly_the_contract_fields(tmp_path):
    server = Server("--config", str(config("production", tmp_path)), test_routes=False,
                    env={"BAND_LICENCE_ENV": "production"})
    try:
        response = fetch(server, "/api/client/v1/config")
        assert response.status == 200
        assert response.header("cache-control") == "no-store"
        assert response.header("content-type") == "application/json; charset=utf-8"
        body = strict_json(response.body)
        assert body == {
            "contractVersion": 2, "appName": "Band Licence", "origin": "https://app.bandlicence.test",
            "deployment": {"environment": "production", "label": "Production"},
            "paths": {"signIn": "/native/sign-in", "exchange": "/api/client/v1/native/exchange",
                      "session": "/api/client/v1/session", "account": "/account", "deletion": "/account/delete"},
            "handoff": {"codeChallengeMethods": ["S256"], "lifetimeSeconds": 120},
            "verifiedLinkPaths": ["/native/callback", "/qr/*"],
            "capabilities": {"nativeSignIn": True, "verifiedLinks": True, "codeScanning": True, "attendance": False,
                             "scheduling": False, "studentManagement": False, "offlineSync": False,
                             "subscriptions": False, "pdfReports": False},
            "minimumAppVersion": {"ios": "1.0.0", "android": "1.0.0"},
        }
    finally:
        server.stop()


def test_invalid_configuration_stops_start_up_with_every_problem(tmp_path):
    bad = config("production", tmp_path, origin="http://example.com", verifiedLinkPaths=["qr"])
    result = subprocess.run([str(binary()), "serve", "--listen", "127.0.0.1:0", "--config", str(bad)],
                            capture_output=True, text=True, timeout=10, env={"BAND_LICENCE_ENV": "production"})
    assert result.returncode == 1
    assert "must use https in production" in result.stderr
    assert "is a placeholder" in result.stderr
    assert "verified link path 'qr' must start with /" in result.stderr
    assert "refusing to start" in result.stderr


def test_test_routes_and_open_listeners_are_refused_where_they_do_not_belong(tmp_path):
    production = config("production", tmp_path)
    result = subprocess.run([str(binary()), "serve", "--listen", "127.0.0.1:0", "--config", str(production),
                             "--test-routes"], capture_output=True, text=True, timeout=10,
                            env={"BAND_LICENCE_ENV": "production"})
    assert result.returncode == 1 and "development only" in result.stderr
    result = subprocess.run([str(binary()), "serve", "--listen", "0.0.0.0:0"], capture_output=True, text=True,
                            timeout=10)
    assert result.returncode == 1 and "loopback only" in result.stderr


@pytest.mark.parametrize("name,code", [("development.json", 0), ("staging.example.json", 1),
                                       ("production.example.json", 1)])
def test_config_check_on_the_shipped_files(name, code):
    result = subprocess.run([str(binary()), "config", "check", "--config", str(ROOT / "config" / name)],
                            capture_output=True, text=True, timeout=10, env={})
    assert result.returncode == code, result.stderr
    if code:
        assert "is still a placeholder" in result.stderr and "is a placeholder" in result.stderr
    else:
        assert "apple-app-site-association" in result.stdout and "assetlinks.json" in result.stdout


def test_links_print_matches_what_is_served(tmp_path):
    path = config("production", tmp_path)
    env = {"BAND_LICENCE_ENV": "production"}
    printed = subprocess.run([str(binary()), "links", "print", "apple", "--config", str(path)], capture_output=True,
                             timeout=10, env=env, check=True).stdout
    server = Server("--config", str(path), test_routes=False, env=env)
    try:
        assert printed.strip() == fetch(server, PATHS[0]).body
    finally:
        server.stop()


def test_reload_under_load_swaps_atomically_and_refuses_an_invalid_file(tmp_path):
    path = config("production", tmp_path)
    server = Server("--config", str(path), "--threads", "2", test_routes=False, env={"BAND_LICENCE_ENV": "production"})
    labels, failures, count = [], [], [0]
    stop = threading.Event()

    def load():
        client = KeepAlive(server)
        while not stop.is_set() or count[0] < 2000:
            try:
                (response,) = client.send(("GET", "/api/client/v1/config", {}))
                if response.status != 200:
                    failures.append(response.status)
                else:
                    labels.append(json.loads(response.body)["deployment"]["label"])
            except Exception as error:  # noqa: BLE001
                failures.append(repr(error))
                client.reconnect()
            count[0] += 1
            if count[0] > 200000:
                break
        client.close()

    worker = threading.Thread(target=load)
    worker.start()
    try:
        while count[0] < 300:
            time.sleep(0.01)
        path.write_text(path.read_text().replace('"Production"', '"Production (reloaded)"'))
        server.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "Production (reloaded)" not in labels[-50:] and time.monotonic() < deadline:
            time.sleep(0.02)
        seen_new = len(labels)
        path.write_text(path.read_text().replace('"https://app.bandlicence.test"', '"http://example.com"'))
        server.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reload_refused" not in [e["event"] for e in server.events()] and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
    finally:
        stop.set()
        worker.join(timeout=30)
    assert count[0] >= 2000
    assert failures == []
    assert labels[0] == "Production"
    assert "Production (reloaded)" in labels
    first_new = labels.index("Production (reloaded)")
    assert all(label == "Production (reloaded)" for label in labels[first_new:]), "no old answer after the swap"
    assert seen_new < len(labels), "requests kept succeeding after the refused reload"
    refused = [e for e in server.events() if e["event"] == "reload_refused"]
    assert len(refused) == 1
    assert "must use https in production" in refused[0]["problems"] and "is a placeholder" in refused[0]["problems"]


def test_a_bad_gateway_section_on_reload_keeps_the_old_configuration_and_logs_every_problem(tmp_path):
    prefix = "/api/client/v1/schools/:schoolId"
    path = config("production", tmp_path, upstreams={"core": {"url": "http://127.0.0.1:8081"}},
                  forward=[{"path": f"{prefix}/attendance", "methods": {"GET": "read_only"}, "upstream": "core",
                            "capability": "attendance"}])
    # Forward routes outside development need the key-encryption key: 64 hex digits, mode 0600.
    kek = tmp_path / "kek"
    kek.write_text(os.urandom(32).hex() + "\n")
    kek.chmod(0o600)
    server = Server("--config", str(path), "--key-encryption-key", str(kek), test_routes=False,
                    env={"BAND_LICENCE_ENV": "production"})
    try:
        assert strict_json(fetch(server, "/api/client/v1/config").body)["capabilities"]["attendance"] is True
        data = json.loads(path.read_text())
        data["upstreams"]["core"].update(url="http://10.1.2.3:8081", queue=-1)
        data["forward"][0]["enabled"] = False
        data["forward"].append({"path": f"{prefix}/members/:id", "methods": {"DELETE": "administrator"},
                                "upstream": "core", "audit": "member.removed"})
        path.write_text(json.dumps(data))
        server.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reload_refused" not in [e["event"] for e in server.events()] and time.monotonic() < deadline:
            time.sleep(0.02)
        refused = [e for e in server.events() if e["event"] == "reload_refused"]
        assert len(refused) == 1
        assert refused[0]["problems"] == "; ".join([
            "upstreams.core.url 'http://10.1.2.3:8081' must be https:// or unix: outside development: "
            "plain http:// only to 127.0.0.0/8 or [::1]",
            "upstreams.core.queue must be a whole number between 0 and 100000",
            f"forward route '{prefix}/members/:id' overlaps band-edge's own route '{prefix}/members/:accountId': "
            "both match /api/client/v1/schools/1/members/1; band-edge answers that path itself",
        ])
        # The old configuration still serves: its route, and so attendance, stay on.
        assert strict_json(fetch(server, "/api/client/v1/config").body)["capabilities"]["attendance"] is True
    finally:
        server.stop()


def test_kill_switch_takes_effect_on_reload(tmp_path):
    path = config("production", tmp_path)
    server = Server("--config", str(path), test_routes=False, env={"BAND_LICENCE_ENV": "production"})
    try:
        assert strict_json(fetch(server, PATHS[2]).body) != []
        data = json.loads(path.read_text())
        data["killSwitches"] = ["verifiedLinks"]
        path.write_text(json.dumps(data))
        server.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while strict_json(fetch(server, PATHS[2]).body) != [] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert strict_json(fetch(server, PATHS[2]).body) == []
        assert strict_json(fetch(server, PATHS[0]).body) == {"applinks": {"details": []}, "webcredentials": {"apps": []}}
        assert fetch(server, PATHS[0]).status == 200
        config_body = strict_json(fetch(server, "/api/client/v1/config").body)
        assert config_body["capabilities"]["verifiedLinks"] is False and config_body["verifiedLinkPaths"] == []
    finally:
        server.stop()
