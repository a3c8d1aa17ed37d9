import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import edge  # noqa: E402
from edge import Server  # noqa: E402


def pytest_configure(config):
    """tmp_path directories live in this session's own directory (not pytest's shared numbered
    ones, which a second session running at the same time would prune), removed at the end."""
    if not config.option.basetemp:
        config.option.basetemp = str(edge.temporary_directory("band-edge-pytest-"))
    config.addinivalue_line(
        "markers", "sqlite_only(reason): the test needs SQLite itself (opens, corrupts or locks the file, "
        "or passes --data); skipped when BAND_EDGE_E2E_ENGINE=postgres")
    config.addinivalue_line(
        "markers", "http1_only(reason): the test is about HTTP/1.1 itself (raw bytes, pipelining, keep-alive, "
        "framing, Connection headers) or its client speaks only HTTP/1.1; skipped when BAND_EDGE_E2E_PROTOCOL=h2")


def pytest_report_header(config):
    return f"band-edge store engine: {edge.engine()}, protocol: {edge.protocol()}"


def pytest_collection_modifyitems(config, items):
    """In the PostgreSQL pass, tests marked sqlite_only are skipped, and in the h2 pass those marked
    http1_only, each with its reason."""
    for name, on, label, default in (
            ("sqlite_only", edge.engine() == "postgres", "SQLite only", "needs SQLite itself"),
            ("http1_only", edge.protocol() == "h2", "HTTP/1.1 only", "about HTTP/1.1 itself")):
        if not on:
            continue
        for item in items:
            marker = item.get_closest_marker(name)
            if marker:
                reason = marker.args[0] if marker.args else default
                item.add_marker(pytest.mark.skip(reason=f"{label}: {reason}"))


def pytest_sessionfinish(session, exitstatus):
    """Every server still running is stopped and every temporary directory removed, pass or fail.
    Then every server's last exposition (taken as it stopped, `edge.Server.stop`) goes through
    `promtool check metrics`: anything it reports fails the run."""
    edge.cleanup()
    if not edge._scrapes:
        return
    import shutil
    import subprocess
    promtool = shutil.which("promtool")
    if promtool is None:
        print("\nband-edge: error: promtool (Debian's prometheus) is not installed; the expositions are unchecked")
        session.exitstatus = 1
        return
    reported = []
    for command, text in edge._scrapes:
        result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        if result.returncode != 0 or result.stdout.strip() or result.stderr.strip():
            reported.append(f"{command}:\n{result.stdout}{result.stderr}")
    print(f"\npromtool check metrics: {len(edge._scrapes)} expositions, {len(reported)} with findings")
    if reported:
        print("\n".join(reported[:5]))
        session.exitstatus = 1


@pytest.fixture
def server():
    """A server with the test routes and default limits."""
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def make_server():
    """Starts servers with custom flags; stops them all afterwards."""
    started = []

    def start(*args, **kwargs):
        s = Server(*args, **kwargs)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def mail_sink():
    """A real SMTP server on loopback (aiosmtpd) capturing every message; stopped afterwards."""
    from mailsink import MailSink
    sink = MailSink().start()
    yield sink
    sink.stop()
