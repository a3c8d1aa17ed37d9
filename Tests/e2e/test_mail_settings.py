"""Mail settings: staging and production refuse to start without a relay and a
sender; `--smtp` wins over the file; in development without a relay mail stays in the outbox,
which `admin outbox` shows — with its text only in development."""

import json
import subprocess

from edge import binary, built_shell
from test_links import config


def serve(path, *args, env):
    return subprocess.run([str(binary()), "serve", "--listen", "127.0.0.1:0", "--shell", str(built_shell()),
                           "--config", str(path), "--print-routes", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def test_staging_and_production_refuse_to_start_without_mail(tmp_path):
    for environment in ("staging", "production"):
        path = config(environment, tmp_path)
        data = json.loads(path.read_text())
        del data["mail"]
        path.write_text(json.dumps(data))
        refused = serve(path, "--data", str(tmp_path / "d"), env={"BAND_LICENCE_ENV": environment})
        assert refused.returncode == 1
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "needs mail" in lines[0], refused.stderr
        given = serve(path, "--data", str(tmp_path / "d"), "--smtp", "smtp://127.0.0.1:9",
                      env={"BAND_LICENCE_ENV": environment})
        assert "needs mail" not in given.stderr and "mail.from is needed" in given.stderr, "the sender is needed too"


def test_a_relay_url_of_another_scheme_is_a_usage_error(tmp_path):
    bad = serve(config("staging", tmp_path), "--smtp", "http://relay.example.test", env={"BAND_LICENCE_ENV": "staging"})
    assert bad.returncode == 2 and "smtp:// or smtps://" in bad.stderr


def test_the_file_s_mail_settings_are_checked(tmp_path):
    path = config("staging", tmp_path, mail={"smtp": "ftp://x", "from": "nobody", "colour": "red"})
    checked = subprocess.run([str(binary()), "config", "check", "--config", str(path)], capture_output=True, text=True,
                             timeout=30, env={"BAND_LICENCE_ENV": "staging"})
    assert checked.returncode == 1
    assert "mail.smtp must be an smtp:// or smtps:// URL" in checked.stderr
    assert "mail.from must be an email address" in checked.stderr
    assert "colour" in checked.stderr
