"""Which libraries a serving process maps (docs/architecture.md, "The binary"): libpq and libcurl
are loaded when first used, not linked, so a server on SQLite without mail maps neither (nor what
they bring: Kerberos, LDAP, SASL, GnuTLS), PostgreSQL loads libpq at its first connection, and a
relay (`--smtp`) loads libcurl at start, where a missing one would stop the start. A library that
cannot be loaded is named in one line, and the command stops before it serves or touches a store."""

import os
import re
import shutil
import subprocess

import pytest

from edge import binary, built_shell, engine, temporary_directory
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


def library_path(soname: str) -> str:
    """Where the dynamic loader finds `soname` (ldconfig's cache), the file a bind mount then hides."""
    listing = subprocess.run(["ldconfig", "-p"], check=True, capture_output=True, text=True).stdout
    for line in listing.splitlines():
        if line.split()[0] == soname and "=>" in line:
            return os.path.realpath(line.split("=>")[-1].strip())
    raise AssertionError(f"ldconfig does not list {soname}")


def without(sonames: list[str], command: list[str]) -> subprocess.CompletedProcess:
    """Runs `command` in a private mount namespace where each library is /dev/null (so dlopen fails
    on it), as on a machine without Debian's libpq5 or libcurl4."""
    hide = " && ".join(f"mount --bind /dev/null {library_path(name)}" for name in sonames)
    return subprocess.run(["unshare", "--mount", "sh", "-c", f'{hide} && exec "$@"', "sh", *command],
                          capture_output=True, text=True, timeout=30)


def can_hide_a_library() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode == 0


needs_namespace = pytest.mark.skipif(not can_hide_a_library(), reason="needs root and unshare --mount to hide a library")


@needs_namespace
@pytest.mark.parametrize("command", ["admin", "serve"])
def test_without_libpq_postgresql_is_refused_in_one_line(command):
    url = "postgresql://band_edge@127.0.0.1:1/band_edge_test"
    if command == "admin":
        arguments = [str(binary()), "admin", "--database", url, "migrate"]
    else:
        arguments = [str(binary()), "serve", "--listen", "127.0.0.1:0", "--shell", str(built_shell()),
                     "--database", url]
    finished = without(["libpq.so.5"], arguments)
    assert finished.returncode == 1, (finished.stdout, finished.stderr)
    lines = finished.stderr.strip().splitlines()
    assert lines[-1] == ("band-edge: error: PostgreSQL needs libpq: cannot load libpq.so.5 "
                         "(Debian's libpq5 package)"), finished.stderr
    assert "Fatal error" not in finished.stderr and "listening" not in finished.stderr


@needs_namespace
def test_without_libcurl_a_relay_is_refused_before_serving():
    data = temporary_directory()
    finished = without(["libcurl.so.4"], [
        str(binary()), "serve", "--listen", "127.0.0.1:0", "--shell", str(built_shell()), "--data", str(data),
        "--smtp", "smtp://127.0.0.1:1"])
    assert finished.returncode == 1, (finished.stdout, finished.stderr)
    assert finished.stderr.strip().splitlines() == [
        "band-edge: error: mail needs libcurl: cannot load libcurl.so.4 (Debian's libcurl4 package)"]
    assert not (data / "band-edge.sqlite").exists()
