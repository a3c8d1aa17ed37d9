"""One table of limits feeds the flags, the configuration file, --help and docs/limits.md."""

import json
import re
import subprocess

import pytest

from edge import ROOT, Server, binary, request


def run(*args, env=None):
    return subprocess.run([str(binary()), *args], capture_output=True, text=True, timeout=20, env=env or {})


def output():
    out = run("config", "limits")
    assert out.returncode == 0
    return out.stdout.strip()


def table():
    """The limit table (flags and the file's "limits"): the output's first paragraph."""
    return output().split("\n\n", 1)[0]


def gateway_tables():
    """The gateway's numbers, per upstream and per forward route: the rest of the output."""
    return output().split("\n\n", 1)[1]


def names():
    return re.findall(r"^\| `([a-z-]+)` \|", table(), re.M)


def between(text, marker):
    return text.split(f"<!-- {marker}: begin -->\n")[1].split(f"\n<!-- {marker}: end -->")[0]


def test_docs_carry_exactly_the_table():
    docs = (ROOT / "docs" / "limits.md").read_text()
    assert between(docs, "limits table") == table(), (
        "docs/limits.md is out of date: paste `band-edge config limits` between the markers")
    assert between(docs, "gateway tables") == gateway_tables(), (
        "docs/limits.md is out of date: paste the gateway tables of `band-edge config limits` between their markers")
    assert "| `connectTimeout` | seconds | 0.05–600 | 1 |" in gateway_tables()
    assert "| `maxBodyBytes` | bytes | 0–16777216 | 65536 |" in gateway_tables()


def test_every_limit_is_a_flag_in_help():
    help_text = run("serve", "--help").stdout
    assert len(names()) >= 25
    for name in names():
        assert f"--{name} " in help_text, name


@pytest.mark.parametrize("limits,problem", [
    ({"max-connections": 0.5}, "limits.max-connections takes a whole number from 1 to 1000000, not 0.5"),
    ({"max-connections": 0}, "limits.max-connections takes a whole number from 1 to 1000000, not 0"),
    ({"head-timeout": 0}, "limits.head-timeout takes seconds from 0.001 to 86400, not 0"),
    ({"max-body-bytes": -1}, "limits.max-body-bytes takes a whole number from 0 to 1073741824, not -1"),
    ({"pool-threads": 1e9}, "limits.pool-threads takes a whole number from 1 to 1024, not 1000000000"),
    ({"max-fun": 1}, "limits.max-fun is not a limit; see band-edge config limits"),
    ({"pool-queue": 0}, "limits.pool-queue takes a whole number from 1 to 1000000, not 0"),
    ({"max-body-bytes": 100_000_000}, "max-body-bytes (100000000) is larger than max-buffered-request-bytes (67108864): "
                                      "a body that large could never be accepted"),
    ({"idle-timeout": "60"}, "limits.idle-timeout must be a number"),
])
def test_config_check_applies_the_flags_ranges_to_the_file(tmp_path, limits, problem):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"limits": limits}))
    result = run("config", "check", "--config", str(path))
    assert result.returncode == 1
    assert f"band-edge: error: {problem}\n" in result.stderr, result.stderr
    served = run("serve", "--config", str(path), "--listen", "127.0.0.1:0")
    assert served.returncode == 1 and problem in served.stderr


@pytest.mark.parametrize("flag,value,message", [
    ("--max-connections", "0.5", "--max-connections takes a whole number from 1 to 1000000, not 0.5"),
    ("--max-connections", "1e3", "--max-connections takes a whole number, not '1e3'"),
    ("--head-timeout", "-1", "--head-timeout takes seconds, not '-1'"),
    ("--head-timeout", "nan", "--head-timeout takes seconds, not 'nan'"),
    ("--retention-days", "36501", "--retention-days takes whole days from 0 to 36500, not 36501"),
    ("--background-queue", "0", "--background-queue takes a whole number from 1 to 1000000, not 0"),
])
def test_flags_out_of_range_are_usage_errors(flag, value, message):
    result = run("serve", flag, value)
    assert result.returncode == 2
    assert result.stderr == f"band-edge: error: {message}\n"


def test_a_file_limit_applies_and_a_flag_overrides_it(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"limits": {"max-body-bytes": 10, "max-header-count": 5}}))
    server = Server("--config", str(path), "--max-header-count", "50")
    try:
        client = server.connect()
        client.send(request("POST", "/_test/echo", body=b"x" * 11))
        assert client.read_response().status == 413, "the file's max-body-bytes applies"
        client = server.connect()
        headers = {f"X-{i}": "y" for i in range(10)}
        client.send(request("GET", "/healthz", headers=headers))
        assert client.read_response().status == 200, "the flag's max-header-count wins over the file's"
    finally:
        server.stop()


def test_limits_that_cannot_work_together_stop_start_up():
    result = run("serve", "--listen", "127.0.0.1:0", "--max-body-bytes", "2000000", "--max-buffered-request-bytes",
                 "1000000")
    assert result.returncode == 1
    assert result.stderr == ("band-edge: error: max-body-bytes (2000000) is larger than max-buffered-request-bytes "
                             "(1000000): a body that large could never be accepted\n")
