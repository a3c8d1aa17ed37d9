"""Which libraries a serving process maps (docs/architecture.md, "The binary"): libpq and libcurl
are loaded when first used, not linked, so a server on SQLite without mail maps neither (nor what
they bring: Kerberos, LDAP, SASL, GnuTLS), PostgreSQL loads libpq at its first connection, and a
relay (`--smtp`) loads libcurl at start, where a missing one would stop the start."""

import os
import re

import pytest

from edge import engine
from test_web_sign_in import Browser, add_account

BROUGHT_BY_LIBPQ = {"libpq", "libkrb5", "libgssapi_krb5", "libldap", "libsasl2"}
BROUGHT_BY_LIBCURL = {"libcurl", "libssh2", "librtmp", "libpsl", "libnghttp2"}
BROUGHT_BY_EITHER = {"libgnutls", "libnettle", "libp11-kit"}


def mapped(server) -> set[str]:
    """The names of the shared objects the server maps, without their versions."""
    names = set()
    with open(f"/proc/{server.process.pid}/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if ".so" in path:
                names.add(re.sub(r"\.so.*$", "", os.path.basename(path)))
    return names


def use_the_store(server):
    """A sign-in and a session read: the store is read and written on the server's own connections."""
    add_account(server, "ada@example.test", "Ada Example", [("northfield", "teacher")])
    browser = Browser(server)
    browser.sign_in("ada@example.test")
    assert browser.send("GET", "/api/client/v1/session").status == 200


def test_without_mail_neither_libcurl_nor_what_it_brings_is_mapped(make_server):
    server = make_server()
    use_the_store(server)
    names = mapped(server)
    assert {"libc", "libssl", "libcrypto", "libsqlite3"} <= names
    assert not names & BROUGHT_BY_LIBCURL, names
    if engine() == "sqlite":
        assert not names & (BROUGHT_BY_LIBPQ | BROUGHT_BY_EITHER), names
    else:
        assert "libpq" in names


@pytest.mark.skipif(engine() != "postgres", reason="on PostgreSQL (the PostgreSQL pass of build/test)")
def test_postgres_loads_libpq_at_the_first_connection(make_server):
    server = make_server()
    use_the_store(server)
    assert "libpq" in mapped(server)


def test_a_relay_loads_libcurl_at_start(make_server, mail_sink):
    server = make_server("--smtp", mail_sink.url)
    assert "libcurl" in mapped(server)
