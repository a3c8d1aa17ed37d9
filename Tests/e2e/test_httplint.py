"""httplint (PyPI) reads every kind of shell response as received and must find nothing BAD. In the
h2 pass it reads the HTTP/2 answer's fields as received, written out as a head (h2client.py)."""

import json
import subprocess

import pytest
from edge import KeepAlive, built_shell, fetch


def shell_paths():
    manifest = json.loads((built_shell() / "shell-manifest.json").read_text())
    paths = {e["path"] for e in manifest["entries"]}
    js = sorted(p for p in paths if p.endswith(".js") and p != "/sw.js")[0]
    icon = sorted(p for p in paths if p.endswith(".png"))[0]
    return {"index": "/", "fingerprinted js": js, "service worker": "/sw.js", "offline page": "/offline.html",
            "web manifest": "/manifest.webmanifest", "icon": icon, "404": "/nope"}


CASES = list(shell_paths().items())


def lint(raw: bytes) -> str:
    result = subprocess.run(["httplint", "-n"], input=raw, capture_output=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.decode()


@pytest.mark.parametrize("name,path", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("encoding", ["br, gzip", None])
def test_no_bad_notes(server, name, path, encoding):
    response = fetch(server, path, {"Accept-Encoding": encoding} if encoding else {})
    report = lint(response.raw_head + b"\r\n\r\n" + response.body)
    assert "[BAD]" not in report, report


def test_no_bad_notes_on_a_304(server):
    client = KeepAlive(server)
    (first,) = client.send(("GET", "/", {"Accept-Encoding": "br"}))
    (response,) = client.send(("GET", "/", {"Accept-Encoding": "br", "If-None-Match": first.header("etag")}))
    client.close()
    assert response.status == 304
    report = lint(response.raw_head + b"\r\n\r\n")
    assert "[BAD]" not in report, report


@pytest.mark.parametrize("path", ["/.well-known/apple-app-site-association", "/apple-app-site-association",
                                  "/.well-known/assetlinks.json", "/api/client/v1/config"])
def test_no_bad_notes_on_link_files_and_config(tmp_path, path):
    from test_links import config  # a production configuration with real-looking identities

    from edge import Server
    server = Server("--config", str(config("production", tmp_path)), test_routes=False,
                    env={"BAND_LICENCE_ENV": "production"})
    try:
        response = fetch(server, path)
        assert response.status == 200
        report = lint(response.raw_head + b"\r\n\r\n" + response.body)
        assert "[BAD]" not in report, report
    finally:
        server.stop()
