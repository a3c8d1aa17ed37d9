"""Deadlines (configured short), the worker pool's bound, draining, reload and the command line."""

import json
import os
import signal
import socket
import subprocess
import time
import warnings

import pytest

from edge import binary, request


def test_slow_head_is_cut_at_its_deadline(make_server):
    server = make_server("--head-timeout", "0.5")
    client = server.connect()
    client.send(b"GET /healthz HTTP/1.1\r\nHost: a\r\n")
    response = client.read_response()
    assert response.status == 408
    assert response.header("connection") == "close"
    assert client.closed_by_peer()


def test_trickling_head_is_cut_however_it_progresses(make_server):
    server = make_server("--head-timeout", "0.6")
    client = server.connect()
    client.send(b"GET /healthz HTTP/1.1\r\nHost: a\r\n")
    started = time.monotonic()
    cut = False
    while time.monotonic() - started < 5:
        try:
            client.send(b"X-A: b\r\n")
        except (BrokenPipeError, ConnectionResetError):
            cut = True
            break
        if client.closed_by_peer(timeout=0.1):
            cut = True
            break
    assert cut
    assert client.buffer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")


def test_silent_connection_is_closed_at_the_head_deadline(make_server):
    server = make_server("--head-timeout", "0.5")
    assert server.connect().closed_by_peer()


def test_slow_body_is_cut_at_its_deadline(make_server):
    server = make_server("--body-timeout", "0.5")
    client = server.connect()
    client.send(b"POST /_test/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nab")
    response = client.read_response()
    assert response.status == 408
    assert client.closed_by_peer()


def test_idle_keep_alive_connection_is_closed(make_server):
    server = make_server("--idle-timeout", "0.5")
    client = server.connect()
    client.send(request("GET", "/healthz"))
    assert client.read_response().status == 200
    assert client.closed_by_peer()


def server_holds_connection(server, client_port: int) -> bool:
    """Whether the server process still has the socket of the connection from `client_port` open."""
    out = subprocess.run(["ss", "-tnpH", "state", "all", f"( sport = :{server.port} and dport = :{client_port} )"],
                         capture_output=True, text=True, timeout=10).stdout
    return f"pid={server.process.pid}," in out


def test_client_that_does_not_read_is_cut_at_the_write_deadline(make_server):
    server = make_server("--write-timeout", "0.5")
    size = 32 << 20
    client = server.connect(rcvbuf=4096)
    client.send(request("GET", f"/_test/bytes?n={size}"))
    # Read nothing until the server has let go of the socket (the write deadline passed with no
    # progress); a fixed sleep would race a busy machine.
    port = client.sock.getsockname()[1]
    deadline = time.monotonic() + 15
    while server_holds_connection(server, port):
        assert time.monotonic() < deadline, "the server kept a client that does not read"
        time.sleep(0.05)
    received = 0
    client.sock.settimeout(5)
    try:
        while True:
            chunk = client.sock.recv(1 << 20)
            if not chunk:
                break
            received += len(chunk)
    except ConnectionResetError:
        pass
    assert received < size


def full_pool(make_server):
    """A server whose one worker is busy and whose one queue place is taken: (server, running,
    waiting, a third connection). --busy-hold 0: a refusal is sent at once (the default holds it a
    second, as a tarpit; see ConnectionMachineTests)."""
    server = make_server("--threads", "1", "--pool-threads", "1", "--pool-queue", "1", "--busy-hold", "0")
    running, waiting, refused = server.connect(), server.connect(), server.connect()
    running.send(request("GET", "/_test/sleep?ms=1500"))
    time.sleep(0.3)  # let the only worker take it
    waiting.send(request("GET", "/_test/sleep?ms=10"))
    time.sleep(0.1)
    return server, running, waiting, refused


def test_full_pool_queue_answers_503_with_retry_after_at_once(make_server):
    _, running, waiting, refused = full_pool(make_server)
    started = time.monotonic()
    refused.send(request("GET", "/_test/sleep?ms=10"))
    busy = refused.read_response()
    assert busy.status == 503
    assert busy.header("retry-after") == "1"
    assert busy.header("cache-control") == "no-store"
    assert time.monotonic() - started < 1.0, "the refusal did not wait for the busy worker"
    assert running.read_response().status == 200
    assert waiting.read_response().status == 200


def test_sigterm_lets_the_request_in_flight_finish_then_exits_zero(make_server):
    server = make_server("--drain-timeout", "10")
    busy = server.connect()
    idle = server.connect()
    idle.send(request("GET", "/healthz"))
    assert idle.read_response().status == 200
    busy.send(request("GET", "/_test/sleep?ms=800"))
    time.sleep(0.2)
    server.signal(signal.SIGTERM)
    assert idle.closed_by_peer(), "an idle connection is closed when draining starts"
    response = busy.read_response()
    assert response.status == 200
    assert response.header("connection") == "close"
    assert server.wait() == 0
    events = [e["event"] for e in server.events()]
    assert events[-2:] == ["draining", "stopped"]


def test_drain_timeout_bounds_the_exit(make_server):
    server = make_server("--drain-timeout", "0.5")
    busy = server.connect()
    busy.send(request("GET", "/_test/sleep?ms=5000"))
    time.sleep(0.2)
    started = time.monotonic()
    server.signal(signal.SIGTERM)
    assert server.wait() == 0
    assert time.monotonic() - started < 4
    assert "drain_timeout" in [e["event"] for e in server.events()]


def test_sighup_reloads_and_keeps_serving(server):
    server.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "reloaded" not in [e["event"] for e in server.events()] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "reloaded" in [e["event"] for e in server.events()]
    client = server.connect()
    client.send(request("GET", "/healthz"))
    assert client.read_response().status == 200


def run_cli(*args):
    return subprocess.run([str(binary()), *args], capture_output=True, text=True, timeout=10)


def test_help_for_every_command():
    for args in (["help"], ["--help"], ["serve", "--help"]):
        result = run_cli(*args)
        assert result.returncode == 0
        assert "Usage: band-edge" in result.stdout


def test_usage_errors_are_one_line_and_exit_2():
    for args in (["serve", "--bogus"], ["serve", "--listen", "localhost:80"], ["serve", "--threads", "0"],
                 ["serve", "--head-timeout", "soon"], ["frobnicate"]):
        result = run_cli(*args)
        assert result.returncode == 2, args
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("band-edge: error: "), result.stderr


def test_address_in_use_exits_1_with_one_line(server):
    # SO_REUSEPORT would let a second band-edge share the port silently; it must refuse instead.
    result = run_cli("serve", "--listen", f"127.0.0.1:{server.port}", "--shell", str(server.shell))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("band-edge: error: could not start: bind 127.0.0.1:")
    assert "Address already in use" in result.stderr


@pytest.mark.sqlite_only("an unusable --data directory")
def test_unusable_data_directory_stops_start_up_with_one_line(server):
    result = run_cli("serve", "--listen", "127.0.0.1:0", "--shell", str(server.shell), "--data", "/etc/hostname")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("band-edge: error: cannot open database /etc/hostname/band-edge.sqlite")


def test_migrations_run_at_start_and_stdout_stays_the_json_access_log(server):
    assert server.store.query("SELECT COUNT(*) FROM accounts") == [(0,)], "migrated before serving"
    client = server.connect()
    client.send(request("GET", "/healthz"))
    client.read_response()
    deadline = time.monotonic() + 5
    while not server.stdout_path.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = server.stdout_path.read_text().splitlines()
    assert lines and all(line.startswith("{") for line in lines), lines


def test_listens_on_ipv6_loopback_too(tmp_path):
    import re
    import socket

    from edge import built_shell
    process = subprocess.Popen([str(binary()), "serve", "--listen", "[::1]:0", "--listen", "127.0.0.1:0",
                                "--shell", str(built_shell()), "--data", str(tmp_path)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lines = [process.stderr.readline() for _ in range(2)]
        ports = dict(re.search(r'"address":"(\[::1\]|127\.0\.0\.1):(\d+)"', line).groups() for line in lines)
        for family, host in ((socket.AF_INET6, "::1"), (socket.AF_INET, "127.0.0.1")):
            key = "[::1]" if family == socket.AF_INET6 else host
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect((host, int(ports[key])))
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
            assert data.startswith(b"HTTP/1.1 200 OK\r\n") and data.endswith(b"ok\n"), family
    finally:
        process.terminate()
        assert process.wait(timeout=15) == 0


def test_full_pool_queue_answers_503_in_json_under_api(make_server):
    """The pool's 503 under /api/ has the contract's shape."""
    _, running, waiting, refused = full_pool(make_server)
    refused.send(request("DELETE", "/api/client/v1/session"))
    busy = refused.read_response()
    assert busy.status == 503 and busy.header("retry-after") == "1"
    assert busy.header("content-type") == "application/json; charset=utf-8"
    assert json.loads(busy.body) == {"error": "service_unavailable", "message": "The server is busy; try again shortly."}
    assert running.read_response().status == 200
    assert waiting.read_response().status == 200


def chunked(path, chunks, extension=b""):
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(c), extension, c) for c in chunks) + b"0\r\n\r\n"
    return b"POST %s HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" % path.encode() + body


def test_chunk_framing_counts_against_the_body_limit(make_server):
    """300 one-byte chunks with extensions are 300 bytes of data but ~5 KB sent."""
    server = make_server("--max-body-bytes", "4096")
    small = server.connect()
    small.send(chunked("/_test/echo", [b"x"] * 300))  # 300 x 6 bytes of framing and data: fits
    assert small.read_response().status == 200
    client = server.connect()
    client.send(chunked("/_test/echo", [b"x"] * 300, b";e=" + b"v" * 10))
    response = client.read_response()
    assert response.status == 413 and response.header("connection") == "close"
    api = server.connect()
    api.send(chunked("/api/_test/echo", [b"x"] * 300, b";e=" + b"v" * 10))
    refused = api.read_response()
    assert refused.status == 413 and json.loads(refused.body)["error"] == "payload_too_large"
    # A path that does not exist is answered on its head (404, before the body); the
    # body is then read past and dropped, and passing the limit ends the connection without a
    # second answer.
    nowhere = server.connect()
    nowhere.send(chunked("/api/client/v1/x", [b"x"] * 300, b";e=" + b"v" * 10))
    early = nowhere.read_response()
    assert early.status == 404 and json.loads(early.body)["error"] == "not_found"
    nowhere.sock.settimeout(5)
    assert nowhere.sock.recv(100) == b"", "closed, nothing more said"


def test_bodies_past_the_process_wide_budget_get_503_and_give_it_back(make_server):
    """What connections buffer is capped for the whole process. Two bodies, each
    within the body limit, are half sent at once; together they pass the allowance, so whichever
    arrived second is refused (503, JSON under /api/, close) while the first goes on."""
    server = make_server("--threads", "1", "--max-body-bytes", "140000", "--max-buffered-request-bytes", "200000")
    first, second = server.connect(), server.connect()
    first.send(b"POST /api/_test/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 130000\r\n\r\n" + b"z" * 100000)
    second.send(b"POST /api/_test/echo HTTP/1.1\r\nHost: a\r\nContent-Length: 130000\r\n\r\n" + b"z" * 100000)
    refused, going_on = None, None
    for client, other in ((first, second), (second, first)):
        client.sock.settimeout(2)
        try:
            answer = client.read_response()
        except (TimeoutError, OSError):
            continue
        refused, going_on = answer, other
        break
    assert refused is not None, "neither body was refused"
    assert refused.status == 503 and refused.header("retry-after") == "1"
    assert refused.header("connection") == "close"
    assert json.loads(refused.body) == {"error": "service_unavailable", "message": "The server is busy; try again shortly."}
    going_on.sock.settimeout(5)
    going_on.send(b"z" * 30000)
    assert going_on.read_response().status == 200, "the first body was read whole and answered"
    for _ in range(3):  # the allowance was given back: bodies within it are served, again and again
        again = server.connect()
        again.send(request("POST", "/_test/echo", body=b"y" * 40000))
        answer = again.read_response()
        assert answer.status == 200 and answer.body == b"y" * 40000


def test_out_of_descriptors_the_server_backs_off_logs_a_little_and_recovers(make_server):
    """Under a small descriptor limit (soft = hard, so it cannot be raised) the
    server warns at start, pauses accepting instead of spinning, logs a bounded number of lines,
    and serves again once clients go away."""
    limit = 64

    server = make_server("--threads", "2", "--no-access-log", file_limit=limit)
    low = [e for e in server.events() if e.get("event") == "file_limit_low"]
    assert len(low) == 1 and low[0]["limit"] == str(limit)
    held = []
    for _ in range(limit + 40):  # more than fit: the kernel's backlog keeps the rest
        held.append(socket.create_connection(server.address, timeout=5))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until ten failed accepts are counted (about a second of it)
        if sum(int(e["failures"]) for e in server.events() if e.get("event") == "accept_paused") >= 10:
            break
        time.sleep(0.05)
    paused = [e for e in server.events() if e.get("event") == "accept_paused"]
    assert paused, "accept never ran out of descriptors"
    assert all(e["error"].startswith("accept") and "Too many open files" in e["error"] for e in paused)
    lines = server.stderr_path.read_text().splitlines()
    assert len(lines) < 40, f"{len(lines)} log lines: the loops spin"
    for s in held:
        s.close()

    def held_by_the_server() -> str:
        """What the server and the kernel hold now, for whoever reads a warning or a failure."""
        sockets = subprocess.run(["ss", "-tanp", f"( sport = :{server.port} or dport = :{server.port} )"],
                                 capture_output=True, text=True).stdout
        descriptors = sorted(os.readlink(f"/proc/{server.process.pid}/fd/{fd}")
                             for fd in os.listdir(f"/proc/{server.process.pid}/fd"))
        return f"server log:\n{server.stderr_path.read_text()}\ndescriptors: {descriptors}\nsockets:\n{sockets}"

    # Served again: each try is a new connection, for up to 30 s. A try that is not answered
    # within 5 s is reported as a warning with what was held then (seen once in CI, never here);
    # the test fails only when none is answered.
    deadline = time.monotonic() + 30
    while True:
        client = server.connect(timeout=5)
        client.send(request("GET", "/healthz"))
        try:
            status = client.read_response().status
            break
        except OSError as error:
            state = held_by_the_server()
            if time.monotonic() > deadline:
                pytest.fail(f"no answer after the clients left ({error}); {state}")
            warnings.warn(f"an unanswered try after the clients left ({error}); {state}")
        finally:
            client.close()
    assert status == 200
    assert len(server.stderr_path.read_text().splitlines()) < 60
