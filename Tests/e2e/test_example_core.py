"""band-edge example-core, the reference API core of build/run: development only, and what its
help promises (the checks themselves are unit-tested in Tests/ExampleCoreTests)."""

import os
import subprocess

import pytest

from edge import ROOT, binary


def run(*args, env=None):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BAND_LICENCE_")}
    environment.update(env or {})
    return subprocess.run([str(binary()), "example-core", *args], capture_output=True, text=True, timeout=10,
                          env=environment)


@pytest.mark.parametrize("args,env,reason", [
    ([], {"BAND_LICENCE_ENV": "production"}, "BAND_LICENCE_ENV is production"),
    ([], {"BAND_LICENCE_ENV": "staging"}, "BAND_LICENCE_ENV is staging"),
    (["--config", str(ROOT / "config" / "production.example.json")], {}, "production.example.json says production"),
    ([], {"BAND_LICENCE_CONFIG": str(ROOT / "config" / "staging.example.json")}, "staging.example.json says staging"),
])
def test_it_refuses_staging_and_production(args, env, reason):
    result = run("--listen", "127.0.0.1:0", *args, env=env)
    assert result.returncode == 1
    assert result.stderr.startswith("band-edge: error: the example core is for development only; ")
    assert reason in result.stderr and result.stderr.count("\n") == 1


def test_help_and_usage_errors():
    helped = run("--help")
    assert helped.returncode == 0 and "--jwks URL" in helped.stdout and "--audience NAME" in helped.stdout
    for args in (["--listen", "0.0.0.0:8081"], ["--bogus"], ["--jwks", "file:///etc/passwd"]):
        result = run(*args)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, args
