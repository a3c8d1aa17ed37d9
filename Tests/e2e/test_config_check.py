"""`band-edge config check` shows the store `serve` would open, whichever setting named it
(BAND_LICENCE_DATABASE_URL, else the file's "database", else sqlite:data), with its password masked
and where it was named; a file naming a key twice is a problem with the file."""

import json
import subprocess

from edge import binary, built_shell

SECRET = "s3cret-check-word"


def check(path, env):
    return subprocess.run([str(binary()), "config", "check", "--config", str(path)], capture_output=True,
                          text=True, timeout=30, env=env)


def database_line(result):
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("database:")]
    assert len(lines) == 1, result.stdout
    return lines[0].removeprefix("database:").strip()


def test_the_store_serve_would_open_and_where_it_was_named(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"database": f"postgresql://file:{SECRET}@file.example.test/db"}))
    from_env = check(path, {"BAND_LICENCE_DATABASE_URL": f"sqlite:{tmp_path / 'env'}"})
    assert database_line(from_env) == f"sqlite:{tmp_path / 'env'} (from BAND_LICENCE_DATABASE_URL)"
    # serve opens that one too: its migration makes the file there, and nothing at the file's.
    served = subprocess.run([str(binary()), "serve", "--listen", "127.0.0.1:0", "--shell", str(built_shell()),
                             "--config", str(path), "--print-routes"], capture_output=True, text=True, timeout=60,
                            env={"BAND_LICENCE_DATABASE_URL": f"sqlite:{tmp_path / 'env'}"})
    assert served.returncode == 0, served.stderr
    assert (tmp_path / "env" / "band-edge.sqlite").exists()

    masked = check(path, {"BAND_LICENCE_DATABASE_URL": f"postgresql://env:{SECRET}@env.example.test/db"})
    assert database_line(masked) == "postgresql://env:***@env.example.test/db (from BAND_LICENCE_DATABASE_URL)"
    assert SECRET not in masked.stdout + masked.stderr
    from_file = check(path, {"BAND_LICENCE_DATABASE_URL": ""})
    assert database_line(from_file) == ('postgresql://file:***@file.example.test/db '
                                        '(from the configuration file\'s "database")')
    path.write_text("{}")
    assert database_line(check(path, {})) == "sqlite:data (the default: nothing names a store)"


def test_a_database_serve_would_refuse_is_a_problem(tmp_path):
    path = tmp_path / "c.json"
    path.write_text("{}")
    refused = check(path, {"BAND_LICENCE_DATABASE_URL": f"mysql://u:{SECRET}@h/db"})
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        "band-edge: error: BAND_LICENCE_DATABASE_URL takes sqlite:DIR or a postgresql:// URI",
        "band-edge: error: the configuration has 1 problem"]
    path.write_text(json.dumps({"database": "nowhere"}))
    assert "database in the configuration takes sqlite:DIR" in check(path, {}).stderr


def test_a_file_naming_a_key_twice_is_a_problem(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"environment": "development", "label": "A", "label": "B"}')
    refused = check(path, {})
    assert refused.returncode == 1 and refused.stdout == ""
    assert f"config file {path} names the key 'label' twice in one object; keep one of them" in refused.stderr
