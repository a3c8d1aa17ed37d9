"""The public shell over real sockets: negotiation, validators, ranges, cache classes, headers."""

import gzip
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import brotli
import pytest
from edge import ROOT, Server, binary, built_shell, fetch, protocol

ENCODINGS = [None, "", "br, gzip", "gzip, br", "gzip", "br;q=0.5, gzip;q=1", "br;q=0, gzip", "gzip;q=0",
             "gzip, identity;q=0", "*;q=0, identity", "*"]


def manifest():
    return json.loads((built_shell() / "shell-manifest.json").read_text())


def entries_with_variants():
    return [e for e in manifest()["entries"] if e["variants"]]


def decode(response):
    coding = response.header("content-encoding")
    if coding == "br":
        return brotli.decompress(response.body)
    if coding == "gzip":
        return gzip.decompress(response.body)
    assert coding is None
    return response.body


def test_the_helpers_speak_the_protocol_of_this_run(server):
    """fetch goes over HTTP/2 in the h2 pass (no reason phrase, lower-case names, RFC 9113 §8.3.2 and
    §8.2.1) and over HTTP/1.1 otherwise, so a pass that silently fell back to HTTP/1.1 fails here."""
    response = fetch(server, "/healthz")
    assert response.status == 200
    if protocol() == "h2":
        assert response.reason == "" and response.raw_head.startswith(b"HTTP/2 200")
        assert all(name == name.lower() for name, _ in response.headers)
    else:
        assert response.reason == "OK" and response.raw_head.startswith(b"HTTP/1.1 200 OK")


def test_every_precompressed_file_decodes_to_the_original_for_every_accept_encoding(server):
    for entry in entries_with_variants():
        original = (built_shell() / entry["file"]).read_bytes()
        etags = set()
        for value in ENCODINGS:
            headers = {} if value is None else {"Accept-Encoding": value}
            response = fetch(server, entry["path"], headers)
            assert response.status == 200, (entry["path"], value)
            assert decode(response) == original, (entry["path"], value)
            assert response.header("vary") == "Accept-Encoding"
            etags.add((response.header("content-encoding"), response.header("etag")))
        assert len({etag for _, etag in etags}) == len({coding for coding, _ in etags}), "one ETag per representation"


def test_negotiation_choices_follow_rfc_9110(server):
    expected = {None: None, "": None, "br, gzip": "br", "gzip": "gzip", "br;q=0.5, gzip;q=1": "gzip",
                "br;q=0, gzip": "gzip", "gzip;q=0": None, "gzip, identity;q=0": "gzip", "*;q=0, identity": None}
    for value, coding in expected.items():
        headers = {} if value is None else {"Accept-Encoding": value}
        assert fetch(server, "/", headers).header("content-encoding") == coding, value


def test_not_acceptable_only_when_identity_is_refused_and_nothing_fits(server):
    response = fetch(server, "/", {"Accept-Encoding": "*;q=0"})
    assert response.status == 406
    assert response.header("cache-control") == "no-store"


def test_precompressed_siblings_decompress_to_exactly_the_original():
    for entry in entries_with_variants():
        original = (built_shell() / entry["file"]).read_bytes()
        assert hashlib.sha256(original).hexdigest() == entry["sha256"]
        for variant in entry["variants"]:
            data = (built_shell() / variant["file"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == variant["sha256"]
            assert len(data) < len(original), "a variant is kept only when smaller"
            decoded = brotli.decompress(data) if variant["coding"] == "br" else gzip.decompress(data)
            assert decoded == original, variant["file"]


def test_if_none_match_gives_304_only_for_its_own_representation(server):
    br = fetch(server, "/", {"Accept-Encoding": "br"})
    plain = fetch(server, "/")
    assert br.header("etag") != plain.header("etag")
    again = fetch(server, "/", {"Accept-Encoding": "br", "If-None-Match": br.header("etag")})
    assert again.status == 304
    assert again.body == b""
    assert again.header("etag") == br.header("etag")
    assert again.header("cache-control") == "no-cache"
    assert again.header("vary") == "Accept-Encoding"
    assert again.header("content-length") is None
    other = fetch(server, "/", {"Accept-Encoding": "br", "If-None-Match": plain.header("etag")})
    assert other.status == 200
    listed = fetch(server, "/", {"If-None-Match": f'"nope", W/{plain.header("etag")}'})
    assert listed.status == 304
    star = fetch(server, "/", {"If-None-Match": "*"})
    assert star.status == 304


def test_if_modified_since(server):
    first = fetch(server, "/")
    assert fetch(server, "/", {"If-Modified-Since": first.header("last-modified")}).status == 304
    assert fetch(server, "/", {"If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"}).status == 200


def test_ranges_on_the_identity_representation(server):
    js = next(e for e in manifest()["entries"] if e["path"].endswith(".js") and e["path"].startswith("/app."))
    original = (built_shell() / js["file"]).read_bytes()
    size = len(original)
    part = fetch(server, js["path"], {"Range": "bytes=0-9"})
    assert part.status == 206
    assert part.body == original[:10]
    assert part.header("content-range") == f"bytes 0-9/{size}"
    tail = fetch(server, js["path"], {"Range": "bytes=-7"})
    assert tail.body == original[-7:]
    assert fetch(server, js["path"], {"Range": f"bytes={size}-"}).header("content-range") == f"bytes */{size}"
    assert fetch(server, js["path"], {"Range": f"bytes={size}-"}).status == 416
    etag = fetch(server, js["path"]).header("etag")
    assert fetch(server, js["path"], {"Range": "bytes=0-9", "If-Range": etag}).status == 206
    assert fetch(server, js["path"], {"Range": "bytes=0-9", "If-Range": '"other"'}).status == 200


def test_head_matches_get_without_the_body(server):
    for path in ("/", "/sw.js", manifest()["precache"][-1]):
        got = fetch(server, path, {"Accept-Encoding": "br"})
        head = fetch(server, path, {"Accept-Encoding": "br"}, method="HEAD")
        strip = lambda r: [(k, v) for k, v in r.headers if k.lower() != "date"]  # noqa: E731
        assert strip(head) == strip(got), path


def test_cache_classes(server):
    for entry in manifest()["entries"]:
        response = fetch(server, entry["path"])
        if entry["path"] in ("/", "/index.html", "/offline.html", "/sw.js", "/manifest.webmanifest"):
            assert response.header("cache-control") == "no-cache", entry["path"]
        else:
            assert response.header("cache-control") == "public, max-age=31536000, immutable", entry["path"]
        assert response.header("x-content-type-options") == "nosniff"


@pytest.mark.parametrize("path", ["/nope", "/app.js", "/.well-known/nope", "/api/client/v1/unknown", "/a/b/c",
                                  "/../shell-manifest.json", "/shell-manifest.json", "/index.html.br"])
def test_anything_outside_the_catalog_is_a_404_no_store_never_the_shell(server, path):
    response = fetch(server, path, {"Accept": "text/html"})
    assert response.status == 404
    assert response.header("cache-control") == "no-store"
    assert b'id="signed-out"' not in response.body, "never the shell's index.html"
    if path.startswith(("/.well-known/", "/api/")):
        assert not response.header("content-type").startswith("text/html")
    else:
        # A browser gets the error page; other clients plain text (below).
        assert b"<h1>Page not found</h1>" in response.body
        assert fetch(server, path).header("content-type") == "text/plain; charset=utf-8"


def test_security_headers_on_html(server):
    for path in ("/", "/index.html", "/offline.html"):
        response = fetch(server, path)
        csp = response.header("content-security-policy")
        assert csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp, path
        assert response.header("x-content-type-options") == "nosniff"
        assert response.header("referrer-policy") == "same-origin"
        assert "camera=()" in response.header("permissions-policy")
        assert "microphone=()" in response.header("permissions-policy")
        assert "geolocation=()" in response.header("permissions-policy")
        assert response.header("cross-origin-opener-policy") == "same-origin"


def test_service_worker_precache_list_matches_the_manifest_and_never_private_paths():
    sw = (built_shell() / "sw.js").read_text()
    listed = json.loads(sw.split("const PRECACHE = ", 1)[1].split(";", 1)[0])
    assert listed == manifest()["precache"]
    served = {e["path"] for e in manifest()["entries"]}
    assert set(listed) <= served
    for private in ("/api/", "/.well-known/", "/sign-in", "/native/", "/account"):
        assert not any(url.startswith(private) for url in listed)
        assert private not in sw


def test_build_is_deterministic(tmp_path):
    for name in ("a", "b"):
        subprocess.run([str(binary()), "shell", "build", "--from", str(ROOT / "Public"), "--to", str(tmp_path / name)],
                       check=True, capture_output=True)
    for file in (tmp_path / "a").rglob("*"):
        if file.is_file():
            assert file.read_bytes() == (tmp_path / "b" / file.relative_to(tmp_path / "a")).read_bytes(), file


def test_a_tampered_file_stops_start_up_naming_it(tmp_path):
    shell = tmp_path / "shell"
    shutil.copytree(built_shell(), shell)
    target = next(shell.glob("styles.*.css"))
    target.write_bytes(target.read_bytes() + b"/* changed */")
    result = subprocess.run([str(binary()), "serve", "--listen", "127.0.0.1:0", "--shell", str(shell)],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 1
    assert target.name in result.stderr and "SHA-256" in result.stderr


def test_no_shell_refuses_to_start_and_names_the_command(tmp_path):
    result = subprocess.run([str(binary()), "serve", "--listen", "127.0.0.1:0", "--shell", str(tmp_path / "none")],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 1
    assert "band-edge shell build" in result.stderr


# Browsers get pages for errors, app links get a web page, and the
# favicon answers under its stable name.

HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.mark.parametrize("method,path,status", [("GET", "/no/such/page", 404), ("GET", "/sign-in/x", 404),
                                                 ("DELETE", "/", 405), ("POST", "/account/deleted", 405),
                                                 ("HEAD", "/no/such/page", 404)])
def test_a_browser_gets_an_error_page(server, method, path, status):
    response = fetch(server, path, HTML, method=method)
    assert response.status == status
    assert response.header("content-type") == "text/html; charset=utf-8"
    assert response.header("cache-control") == "no-store"
    assert "frame-ancestors 'none'" in response.header("content-security-policy")
    assert response.header("x-content-type-options") == "nosniff"
    if method == "HEAD":
        assert response.body == b""
        return
    page = response.body.decode()
    assert page.startswith('<!doctype html>\n<html lang="en-GB"')
    assert "<title>[Development] " in page and '<header class="bar">' in page and '<footer class="foot">' in page
    assert 'href="/">Go to the start page</a>' in page and '<link rel="icon" href="/favicon.ico"' in page
    stylesheet = re.search(r'<link rel="stylesheet" href="(/styles\.[0-9a-f]{8}\.css)">', page)
    assert stylesheet and fetch(server, stylesheet.group(1)).status == 200
    if status == 405:
        assert response.header("allow")


@pytest.mark.parametrize("path,accept,content_type", [
    ("/no/such/page", None, "text/plain; charset=utf-8"),
    ("/no/such/page", "application/json", "text/plain; charset=utf-8"),
    ("/no/such/page", "text/html;q=0", "text/plain; charset=utf-8"),
    ("/api/client/v1/nothing", "text/html", "application/json; charset=utf-8"),
    ("/.well-known/nothing", "text/html", "text/plain; charset=utf-8"),
])
def test_everyone_else_keeps_plain_or_json_errors(server, path, accept, content_type):
    response = fetch(server, path, {"Accept": accept} if accept else {})
    assert response.status == 404 and response.header("content-type") == content_type
    assert b"<html" not in response.body


@pytest.mark.parametrize("path, policy", [
    ("/", "same-origin"), ("/offline.html", "same-origin"), ("/sign-in", "same-origin"),
    ("/account/recover", "same-origin"), ("/nope", "same-origin"),
    ("/qr/ABC123", "no-referrer"), ("/native/callback?code=c&state=s", "no-referrer"),
])
def test_the_referrer_policy_of_each_kind_of_page_is_what_the_readme_says(server, path, policy):
    """README: the shell, the server-rendered pages and the error page send `same-origin`; pages
    whose address may carry a code or token (callback, app-link fallbacks) send `no-referrer`."""
    response = fetch(server, path, HTML)
    assert response.header("content-type") == "text/html; charset=utf-8", path
    assert response.header("referrer-policy") == policy, path


@pytest.mark.parametrize("path", ["/qr/ABC123", "/qr/%3Cscript%3Ealert(1)%3C%2Fscript%3E", "/qr/a/b/c"])
def test_an_app_link_without_the_app_gets_a_page_that_echoes_nothing(server, path):
    response = fetch(server, path, HTML)
    assert response.status == 200
    assert response.header("cache-control") == "no-store"
    assert response.header("referrer-policy") == "no-referrer"
    assert response.header("content-type") == "text/html; charset=utf-8"
    page = response.body.decode()
    assert "Open this code in the Band Licence app" in page
    assert "App Store" in page and "Google Play" in page
    assert "ABC123" not in page and "script" not in page.replace("<script", "") and "a/b/c" not in page
    assert not re.search(r"https?://", page), "no third-party address, no tracker"
    # The same bytes whatever the code: nothing of the path reaches the page.
    assert fetch(server, "/qr/other", HTML).body == response.body
    # The native callback keeps its own page.
    assert b"Return to the Band Licence app" in fetch(server, "/native/callback", HTML).body


def test_the_favicon_answers_under_its_stable_name(server):
    response = fetch(server, "/favicon.ico")
    assert response.status == 200
    assert response.header("content-type") == "image/x-icon"
    assert response.header("cache-control") == "no-cache"
    assert response.body == (ROOT / "Public" / "favicon.ico").read_bytes() or response.header("content-encoding")
    index = fetch(server, "/").body.decode()
    assert re.search(r'<link rel="icon" href="/favicon\.[0-9a-f]{8}\.ico" sizes="any">', index)
