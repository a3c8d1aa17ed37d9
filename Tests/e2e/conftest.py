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


def pytest_sessionfinish(session, exitstatus):
    """Every server still running is stopped and every temporary directory removed, pass or fail."""
    edge.cleanup()


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
