"""Target selection for the HTTP/2 suite, from the environment.

H2_TARGET=host:port     required; without it every test is skipped
H2_TLS=1                TLS with ALPN h2 (certificate not checked)
H2_PATH=/               a path answering GET with 200 and a body
H2_POST_PATH            a path taking a POST body (default: H2_PATH)
H2_EARLY_ANSWERS=1      the server answers a request on its head when its
                        route reads no body (H2_PATH GET-only): see
                        test_answered_streams.py
H2_LARGE_PATH           a path answering GET with 200 and a body of 7
                        octets or more, for flow control (default: H2_PATH)
H2_EXPECTED_FAILURES    file of test ids known to fail on this server,
                        one a line, '#' starts a comment; they become
                        xfail(strict=True), so a fix shows as XPASS(strict)
H2_TIMEOUT=2            seconds to wait for any expected frame
H2_WRITE_TIMEOUT        the server's write deadline (test_floods); the
                        never-reading client test is skipped when unset
"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from frames import H2Conn, env_float, parse_target  # noqa: E402


class Target:
    def __init__(self):
        self.raw = os.environ.get("H2_TARGET", "")
        self.host, self.port = parse_target(self.raw) if self.raw else ("", 0)
        self.tls = os.environ.get("H2_TLS", "") in ("1", "true", "yes")
        self.path = os.environ.get("H2_PATH", "") or "/"
        self.post_path = os.environ.get("H2_POST_PATH", "") or self.path
        self.large_path = os.environ.get("H2_LARGE_PATH", "") or self.path
        self.timeout = env_float("H2_TIMEOUT", 2.0)
        wt = os.environ.get("H2_WRITE_TIMEOUT", "")
        self.write_timeout = float(wt) if wt else None

    def conn(self, timeout: float | None = None) -> H2Conn:
        return H2Conn(self.host, self.port, tls=self.tls,
                      timeout=timeout or self.timeout).connect()


_TARGET = Target()


def _expected_failures() -> dict[str, str]:
    path = os.environ.get("H2_EXPECTED_FAILURES", "")
    out: dict[str, str] = {}
    if not path:
        return out
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            entry, _, why = line.partition("#")
            entry = entry.strip()
            if entry:
                out[entry] = why.strip() or "known failure on this server"
    return out


def _short_id(nodeid: str) -> str:
    file, _, rest = nodeid.partition("::")
    return os.path.basename(file) + "::" + rest


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    mine = [i for i in items if str(i.fspath).startswith(here)]
    if not _TARGET.raw:
        skip = pytest.mark.skip(reason="H2_TARGET=host:port is not set "
                                "(no HTTP/2 server to test)")
        for item in mine:
            item.add_marker(skip)
        return
    expected = _expected_failures()
    seen = set()
    for item in mine:
        sid = _short_id(item.nodeid)
        for key in (item.nodeid, sid):
            if key in expected:
                seen.add(key)
                item.add_marker(pytest.mark.xfail(reason=expected[key],
                                                  strict=True))
                break
    unknown = sorted(set(expected) - seen)
    if unknown:
        raise pytest.UsageError("H2_EXPECTED_FAILURES names tests that do "
                                "not exist: " + ", ".join(unknown))


@pytest.fixture
def target() -> Target:
    return _TARGET


@pytest.fixture
def conn(target):
    """A connection past the preface and the SETTINGS exchange."""
    c = target.conn()
    try:
        c.handshake()
        yield c
    finally:
        c.close()


@pytest.fixture
def raw_conn(target):
    """A bare TCP (or TLS) connection, nothing sent yet."""
    c = target.conn()
    try:
        yield c
    finally:
        c.close()
