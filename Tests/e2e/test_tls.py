"""TLS termination through the real binary, with a test CA made here by the openssl CLI: curl and
Python's ssl connect, TLS 1.0/1.1 are refused, ALPN says http/1.1, TLS 1.2 sessions resume, large
bodies arrive intact, a stalled handshake is cut off, and bad key files or certificates stop
start-up with one clear line."""

import json
import os
import socket
import sys
import ssl
import subprocess
import time

import pytest

from edge import ROOT, Server, binary, built_shell


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A test CA, a certificate for 127.0.0.1/localhost, one for another host and one for staging."""
    sys.path.insert(0, str(ROOT / "build" / "lib"))
    import test_pki

    return test_pki.make(tmp_path_factory.mktemp("pki"), {
        "server": "IP:127.0.0.1,DNS:localhost", "other": "DNS:other.test", "staging": "DNS:staging.bandlicence.test"})


def tls_server(make_server, pki, *flags):
    server = make_server("--tls-listen", "127.0.0.1:0", "--cert", str(pki / "server.pem"), "--key",
                         str(pki / "server.key"), *flags)
    ports = server.listening_ports()
    return server, ports[1]


@pytest.mark.parametrize("flags,offered,chosen,curl_version", [
    ((), ["h2", "http/1.1"], "h2", "2"),
    ((), ["http/1.1"], "http/1.1", "2"),
    (("--no-http2",), ["h2", "http/1.1"], "http/1.1", "1.1"),
])
def test_curl_and_python_connect_over_tls_with_alpn(make_server, pki, flags, offered, chosen, curl_version):
    """ALPN: h2 first by default, http/1.1 for a client that offers only it, and for every client
    with --no-http2; HTTP/1.1 over TLS keeps pipelining."""
    server, port = tls_server(make_server, pki, *flags)
    out = subprocess.run(["curl", "-s", "--cacert", str(pki / "ca.pem"), "-w", " %{http_code} %{http_version}",
                          f"https://127.0.0.1:{port}/healthz"], capture_output=True, text=True, timeout=30)
    assert out.stdout == f"ok\n 200 {curl_version}"
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    context.set_alpn_protocols(offered)
    with socket.create_connection(("127.0.0.1", port)) as raw, context.wrap_socket(raw, server_hostname="localhost") as s:
        assert s.selected_alpn_protocol() == chosen
        if chosen == "h2":
            return
        assert s.version() in ("TLSv1.2", "TLSv1.3")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        assert data.count(b"HTTP/1.1 200 OK") == 2


def old_protocol_handshake(port, flag):
    """An OpenSSL client offering only `flag`'s protocol. At its default security level OpenSSL 3
    will not offer TLS 1.0 or 1.1 at all (it fails before sending anything); level 0 lets it."""
    return subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", flag,
                           "-cipher", "DEFAULT@SECLEVEL=0"], input="", capture_output=True, text=True, timeout=30)


def test_old_protocols_are_refused(make_server, pki):
    _, port = tls_server(make_server, pki)
    for flag in ("-tls1", "-tls1_1"):
        result = old_protocol_handshake(port, flag)
        assert result.returncode != 0, flag
        # The server's alert (RFC 8446 §6.2 protocol_version, 70), not the client refusing itself.
        assert "alert protocol version" in result.stderr and "alert number 70" in result.stderr, (flag, result.stderr)
        assert "Cipher is (NONE)" in result.stdout, flag


def negotiated_cipher(port, pki, *flags):
    result = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", str(pki / "ca.pem"),
                             *flags], input="", capture_output=True, text=True, timeout=30)
    return next(line.split("Cipher is ", 1)[1] for line in result.stdout.splitlines() if "Cipher is " in line)


def test_the_client_chooses_the_tls13_suite_and_the_server_the_tls12_cipher(make_server, pki):
    """Mozilla intermediate: in TLS 1.3 every suite is strong and the client's order wins; in TLS 1.2
    the server's order (AES-128-GCM first) wins over a client that lists AES-256 first."""
    _, port = tls_server(make_server, pki)
    assert negotiated_cipher(port, pki, "-ciphersuites", "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384") \
        == "TLS_AES_128_GCM_SHA256"
    assert negotiated_cipher(port, pki, "-ciphersuites", "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256") \
        == "TLS_AES_256_GCM_SHA384"
    assert negotiated_cipher(port, pki, "-tls1_2", "-cipher",
                             "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256") \
        == "ECDHE-ECDSA-AES128-GCM-SHA256"


def test_tls12_sessions_resume(make_server, pki):
    _, port = tls_server(make_server, pki)
    result = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_2", "-reconnect",
                             "-CAfile", str(pki / "ca.pem")], input="", capture_output=True, text=True, timeout=30)
    lines = [line for line in result.stdout.splitlines() if line.startswith(("New,", "Reused,"))]
    assert lines[0].startswith("New,") and all(line.startswith("Reused,") for line in lines[1:]) and len(lines) > 1


def test_large_bodies_arrive_intact(make_server, pki):
    server, port = tls_server(make_server, pki)
    shell = built_shell()
    largest = max((p for p in shell.iterdir() if p.suffix == ".js"), key=lambda p: p.stat().st_size)
    out = subprocess.run(["curl", "-s", "--cacert", str(pki / "ca.pem"), "-H", "Accept-Encoding: identity",
                          f"https://127.0.0.1:{port}/{largest.name}"], capture_output=True, timeout=30)
    assert out.stdout == largest.read_bytes()


def read_responses(s, count):
    """Reads `count` HTTP/1.1 responses with Content-Length bodies from `s`; returns their bodies."""
    data, bodies = b"", []
    while len(bodies) < count:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            assert chunk, "the connection ended early"
            data += chunk
        head, data = data.split(b"\r\n\r\n", 1)
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        while len(data) < length:
            chunk = s.recv(4096)
            assert chunk, "the connection ended inside a body"
            data += chunk
        bodies.append(data[:length])
        data = data[length:]
    return bodies


def large_pipeline():
    """16 pipelined requests, about 16 MB of responses in all (more than the socket buffers hold):
    the shell's largest script between bodies of distinct lengths, so that order shows."""
    shell = built_shell()
    script = max((p for p in shell.iterdir() if p.suffix == ".js"), key=lambda p: p.stat().st_size)
    requests, expected = b"", []
    for i in range(8):
        n = (1 << 20) + 1000 * i
        requests += f"GET /_test/bytes?n={n} HTTP/1.1\r\nHost: a\r\n\r\n".encode()
        requests += f"GET /{script.name} HTTP/1.1\r\nHost: a\r\nAccept-Encoding: identity\r\n\r\n".encode()
        expected += [b"x" * n, script.read_bytes()]
    return requests, expected


def small_buffer_tls_client(pki, port):
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", port))
    return context.wrap_socket(raw, server_hostname="localhost")


def test_a_slow_reader_gets_every_pipelined_response_whole_and_in_order(make_server, pki):
    """Records are batched, and what the socket does not take waits for it: a client that reads
    nothing for a while still gets every byte, in order, once it reads."""
    _, port = tls_server(make_server, pki)
    requests, expected = large_pipeline()
    with small_buffer_tls_client(pki, port) as s:
        s.sendall(requests)
        time.sleep(0.3)  # the server fills the socket and keeps the rest
        assert read_responses(s, len(expected)) == expected


def test_a_reader_that_stops_is_cut_off_at_the_write_deadline(make_server, pki):
    """Ciphertext waiting for the socket counts as unwritten: the write deadline still applies."""
    _, port = tls_server(make_server, pki, "--write-timeout", "0.5")
    requests, expected = large_pipeline()
    with small_buffer_tls_client(pki, port) as s:
        s.sendall(requests)
        time.sleep(2)  # four write deadlines
        s.settimeout(10)
        with pytest.raises((ConnectionError, AssertionError, ssl.SSLError)):
            read_responses(s, len(expected))


def test_a_stalled_handshake_is_cut_off(make_server, pki):
    _, port = tls_server(make_server, pki, "--head-timeout", "0.5")
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(5)
        started = time.monotonic()
        assert s.recv(1) == b""  # closed by the server, nothing sent
        assert time.monotonic() - started < 4


def start_failure(pki, cert, key):
    result = subprocess.run([str(binary()), "serve", "--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0",
                             "--cert", str(pki / cert), "--key", str(pki / key), "--shell", str(built_shell()),
                             "--data", str(pki / "data")], capture_output=True, text=True, timeout=30, env={})
    return result


def test_a_world_readable_key_is_refused(pki, tmp_path):
    key = tmp_path / "open.key"
    key.write_bytes((pki / "server.key").read_bytes())
    os.chmod(key, 0o644)
    result = start_failure(pki, "server.pem", key)
    assert result.returncode == 1
    assert result.stderr == f"band-edge: error: the key file {key} is readable by every user (mode 644); chmod 600 it\n"


def test_a_certificate_for_another_host_is_refused(pki):
    result = start_failure(pki, "other.pem", "other.key")
    assert result.returncode == 1
    assert "does not cover 127.0.0.1, the configured origin's host" in result.stderr
    assert result.stderr.count("\n") == 1


def test_staging_serves_plain_http_only_as_a_redirect_and_tls_with_hsts(make_server, pki, tmp_path):
    from test_links import PATHS, config

    server = make_server("--config", str(config("staging", tmp_path)), "--tls-listen", "127.0.0.1:0", "--cert",
                         str(pki / "staging.pem"), "--key", str(pki / "staging.key"), test_routes=False,
                         env={"BAND_LICENCE_ENV": "staging"})
    port = server.listening_ports()[1]
    from edge import fetch
    for path in PATHS + ["/", "/sign-in?x=1", "/api/client/v1/config"]:
        response = fetch(server, path)
        assert response.status == 308, path
        assert response.header("location") == "https://staging.bandlicence.test" + path
        assert response.header("strict-transport-security") is None
    post = fetch(server, "/sign-in", method="POST")
    assert post.status == 308
    assert fetch(server, "/healthz").status == 200, "load balancers still get /healthz in the clear"
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with socket.create_connection(("127.0.0.1", port)) as raw, \
            context.wrap_socket(raw, server_hostname="staging.bandlicence.test") as s:
        s.sendall(b"GET /.well-known/assetlinks.json HTTP/1.1\r\nHost: staging.bandlicence.test\r\n"
                  b"Connection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].decode()
    assert head.startswith("HTTP/1.1 200 OK")
    assert "Strict-Transport-Security: max-age=63072000; includeSubDomains" in head.split("\r\n")


def test_reload_under_load_switches_certificates_with_no_failed_request(make_server, pki, tmp_path):
    import shutil
    import signal
    import threading

    live_cert, live_key = tmp_path / "live.pem", tmp_path / "live.key"

    def install(name):
        for source, target in ((pki / f"{name}.pem", live_cert), (pki / f"{name}.key", live_key)):
            staging = target.with_suffix(".new")
            shutil.copy(source, staging)
            os.chmod(staging, 0o600)
            os.replace(staging, target)  # atomic: a reload never reads half a file

    install("server")
    server = make_server("--tls-listen", "127.0.0.1:0", "--cert", str(live_cert), "--key", str(live_key))
    port = server.listening_ports()[1]
    # A second certificate for the same host, from the same CA: only its serial differs.
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "second.key",
            "-out", "second.csr", "-subj", "/CN=second", cwd=pki)
    openssl("x509", "-req", "-in", "second.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
            "second.pem", "-days", "2", "-extfile", "server.cnf", cwd=pki)
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))

    def serial():
        with socket.create_connection(("127.0.0.1", port)) as raw, context.wrap_socket(raw, server_hostname="localhost") as s:
            der = s.getpeercert(binary_form=True)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
            assert data.startswith(b"HTTP/1.1 200 OK"), data
            return der

    first = serial()
    failures, seen = [], set()

    def load():
        for _ in range(2000):
            try:
                seen.add(serial())
            except Exception as error:  # noqa: BLE001 - every failure is counted
                failures.append(repr(error))

    worker = threading.Thread(target=load)
    worker.start()
    time.sleep(0.5)
    install("second")
    server.signal(signal.SIGHUP)
    worker.join(timeout=300)
    assert failures == []
    assert len(seen) == 2, "both certificates were served during the run"
    assert serial() != first
    # A certificate for another host is refused on reload; the current one keeps serving.
    install("other")
    server.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while not any(e.get("event") == "reload_refused" for e in server.events()) and time.monotonic() < deadline:
        time.sleep(0.05)
    refused = [e for e in server.events() if e.get("event") == "reload_refused"]
    assert refused and "does not cover 127.0.0.1" in refused[0]["problems"]
    assert serial() not in (first,)


def test_tls_settings_from_the_configuration_file(make_server, pki, tmp_path):
    import json

    from edge import ROOT
    settings = json.loads((ROOT / "config" / "development.json").read_text())
    settings["tls"] = {"listen": ["127.0.0.1:0"], "certificate": str(pki / "server.pem"), "key": str(pki / "server.key")}
    path = tmp_path / "tls.json"
    path.write_text(json.dumps(settings))
    server = make_server("--config", str(path))
    port = server.listening_ports()[1]
    out = subprocess.run(["curl", "-s", "--cacert", str(pki / "ca.pem"), f"https://localhost:{port}/healthz"],
                         capture_output=True, text=True, timeout=30)
    assert out.stdout == "ok\n"
    settings["tls"]["bogus"] = 1
    path.write_text(json.dumps(settings))
    result = subprocess.run([str(binary()), "config", "check", "--config", str(path)], capture_output=True, text=True,
                            env={})
    assert result.returncode == 1 and "unknown setting 'tls.bogus'" in result.stderr


class TLSClient:
    """The raw-socket client of the HTTP suites, over TLS."""

    def __init__(self, port, ca):
        from edge import Client
        context = ssl.create_default_context(cafile=str(ca))
        self.inner = Client.__new__(Client)
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.inner.sock = context.wrap_socket(raw, server_hostname="localhost")
        self.inner.buffer = b""

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_the_http_corpus_over_tls(make_server, pki):
    """Every rejection of the HTTP/1.1 corpus, keep-alive and pipelining, through TLS."""
    from edge import request
    from test_http1 import REJECTIONS

    _, port = tls_server(make_server, pki)
    for name, raw, status in REJECTIONS:
        client = TLSClient(port, pki / "ca.pem")
        client.send(raw)
        response = client.read_response()
        assert response.status == status, name
        assert response.header("connection") == "close", name
        assert response.header("strict-transport-security") == "max-age=63072000; includeSubDomains", name
        try:
            assert client.closed_by_peer(), name
        except ssl.SSLError:
            pass  # a reset after close_notify is also a close
        client.close()
    client = TLSClient(port, pki / "ca.pem")
    client.send(b"".join(request("POST", "/_test/echo", body=word) for word in (b"one", b"two", b"three")))
    assert [client.read_response().body for _ in range(3)] == [b"one", b"two", b"three"]
    for _ in range(3):
        client.send(request("GET", "/healthz"))
        assert client.read_response().status == 200
    client.send(request("GET", "/_test/sleep?ms=100") + request("POST", "/_test/echo", body=b"after"))
    assert client.read_response().body == b"slept 100\n"
    assert client.read_response().body == b"after"
    client.close()


def test_session_ticket_keys_rotate(make_server, pki, tmp_path):
    """A ticket resumes within the rotation period and not after it (new keys, same certificate)."""
    server, port = tls_server(make_server, pki, "--ticket-rotation", "2")

    def connect(*args):
        return subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_2", "-CAfile",
                               str(pki / "ca.pem"), *args], input="", capture_output=True, text=True, timeout=30).stdout

    session = tmp_path / "session.pem"
    assert "New," in connect("-sess_out", str(session))
    assert "Reused," in connect("-sess_in", str(session)), "resumed within the period"
    deadline = time.monotonic() + 10
    while not any(e.get("event") == "tls_ticket_keys_rotated" for e in server.events()):
        assert time.monotonic() < deadline, "the keys were not rotated"
        time.sleep(0.1)
    time.sleep(0.2)  # the loops take the new context from their mailboxes
    assert "New," in connect("-sess_in", str(session)), "not resumed after the rotation"


def test_sni_chooses_the_certificate_for_the_requested_host(make_server, pki):
    """Two certificates: the default (127.0.0.1/localhost) and one for other.test, chosen by SNI."""
    server = make_server("--tls-listen", "127.0.0.1:0", "--cert", str(pki / "server.pem"), "--key",
                         str(pki / "server.key"), "--cert", str(pki / "other.pem"), "--key", str(pki / "other.key"))
    port = server.listening_ports()[1]
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    for name, expected in (("localhost", "server"), ("other.test", "other")):
        with socket.create_connection(("127.0.0.1", port)) as raw, context.wrap_socket(raw, server_hostname=name) as s:
            subject = dict(pair[0] for pair in s.getpeercert()["subject"])
            assert subject["commonName"] == expected, name
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            assert s.recv(64).startswith(b"HTTP/1.1 200 OK")
    # An unknown name gets the default certificate (and so fails verification for that name).
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port)) as raw, \
            unverified.wrap_socket(raw, server_hostname="unknown.test") as s:
        der = s.getpeercert(binary_form=True)
        assert der == ssl.PEM_cert_to_DER_cert((pki / "server.pem").read_text())


def test_alpn_without_a_protocol_spoken_here_is_refused_with_no_application_protocol(make_server, pki):
    """RFC 7301 §3.2, as nginx does: a client offering only h3 gets the fatal alert; no ALPN is served."""
    _, port = tls_server(make_server, pki)
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    context.set_alpn_protocols(["h3"])
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with pytest.raises(ssl.SSLError, match="alert no application protocol"):
            context.wrap_socket(raw, server_hostname="localhost")
    result = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-alpn", "spdy/3,h3"],
                            input="", capture_output=True, text=True, timeout=30)
    assert "no application protocol" in result.stderr
    plain = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with socket.create_connection(("127.0.0.1", port)) as raw, plain.wrap_socket(raw, server_hostname="localhost") as s:
        assert s.selected_alpn_protocol() is None
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200 OK\r\n")
    old = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    old.set_alpn_protocols(["http/1.0"])
    with socket.create_connection(("127.0.0.1", port)) as raw, old.wrap_socket(raw, server_hostname="localhost") as s:
        assert s.selected_alpn_protocol() == "http/1.0"


def test_plain_http_sent_to_the_tls_port_gets_400_then_a_close(make_server, pki):
    """Like nginx's "The plain HTTP request was sent to HTTPS port": an answer in the clear, then EOF."""
    _, port = tls_server(make_server, pki)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"Connection: close\r\n" in data and b"plain HTTP was sent to the HTTPS port" in data
    assert b"Strict-Transport-Security" not in data


def test_plain_http_under_api_sent_to_the_tls_port_gets_a_json_400_then_a_close(make_server, pki):
    """The request line that arrived shows /api/: the 400 takes the API's error shape."""
    _, port = tls_server(make_server, pki)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /api/x HTTP/1.1\r\nHost: a\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"\r\nContent-Type: application/json; charset=utf-8" in head
    assert b"\r\nConnection: close" in head and b"Strict-Transport-Security" not in head
    assert json.loads(body) == {
        "error": "bad_request", "message": "Bad Request: plain HTTP was sent to the HTTPS port; use https://."}
