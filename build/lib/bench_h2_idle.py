"""Idle HTTP/2 connections for build/bench h2's memory figure: TLS with ALPN h2, the client preface
and an empty SETTINGS, the server's SETTINGS read and acknowledged (and its ACK of ours), then
nothing more until the block ends.
Alone: bench_h2_idle.py PORT COUNT SECONDS holds COUNT connections to 127.0.0.1:PORT for SECONDS."""

import contextlib
import os
import resource
import selectors
import socket
import ssl
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, GOAWAY, ACK = 4, 7, 1


def frame(kind, flags=0, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", 0) + payload


def establish(port, context, deadline):
    """One connection that has exchanged SETTINGS both ways."""
    tls = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")
    if tls.selected_alpn_protocol() != "h2":
        raise SystemExit(f"bench: error: 127.0.0.1:{port} chose ALPN {tls.selected_alpn_protocol()!r}, not h2")
    tls.sendall(PREFACE + frame(SETTINGS))
    buffer, theirs, acked = b"", False, False
    while not (theirs and acked):
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: error: 127.0.0.1:{port} did not exchange SETTINGS in time")
        data = tls.recv(65536)
        if not data:
            raise SystemExit(f"bench: error: 127.0.0.1:{port} closed an idle h2 connection during its set-up")
        buffer += data
        while len(buffer) >= 9:
            length = int.from_bytes(buffer[:3], "big")
            if len(buffer) < 9 + length:
                break
            kind, flags = buffer[3], buffer[4]
            buffer = buffer[9 + length:]
            if kind == SETTINGS and flags & ACK:
                acked = True
            elif kind == SETTINGS:
                theirs = True
                tls.sendall(frame(SETTINGS, ACK))
            elif kind == GOAWAY:
                raise SystemExit(f"bench: error: 127.0.0.1:{port} sent GOAWAY to an idle h2 connection")
    return tls


def still_open(connections):
    """How many of CONNECTIONS the server has not closed (nor sent GOAWAY on)."""
    with selectors.DefaultSelector() as selector:
        for tls in connections:
            selector.register(tls, selectors.EVENT_READ)
        closed = 0
        for key, _ in selector.select(timeout=0):
            tls = key.fileobj
            tls.setblocking(False)
            try:
                data = tls.recv(65536)
                closed += not data or (len(data) >= 9 and data[3] == GOAWAY)
            except ssl.SSLWantReadError:
                pass
            except OSError:
                closed += 1
        return len(connections) - closed


@contextlib.contextmanager
def hold(port, count):
    """Opens COUNT idle h2 connections to 127.0.0.1:PORT from CPU 1 and yields them, all
    established; closes them after the block."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 256), hard))
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {1})
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    connections = []
    try:
        deadline = time.monotonic() + 30 + count / 20
        for _ in range(count):
            connections.append(establish(port, context, deadline))
        yield connections
    finally:
        for tls in connections:
            with contextlib.suppress(OSError):
                tls.close()
        os.sched_setaffinity(0, affinity)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


if __name__ == "__main__":
    port, count, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    with hold(port, count) as held:
        time.sleep(seconds)
        print(f"{still_open(held)} of {count} idle h2 connections still open after {seconds:g} s")
