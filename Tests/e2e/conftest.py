import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from edge import Server  # noqa: E402


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
