"""The outbox's delivery through a real SMTP server on loopback
(aiosmtpd): a message arrives once with a stable Message-ID, an SMTP outage delays but loses
nothing, a restart keeps what was queued, two instances sharing one outbox send each message
once, and no body reaches a log."""

import collections
import os
import secrets
import subprocess

import pytest

from edge import Server, binary

FAST = ("--mail-interval", "0.05", "--mail-retry", "0.2")


def admin(store_args, *args, env=None):
    return subprocess.run([str(binary()), "admin", *store_args, *args], capture_output=True, text=True, timeout=60,
                          env=env or {})


def queue(store_args, to):
    done = admin(store_args, "outbox", "test", "--to", to)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[1]  # the Message-ID


def test_a_queued_message_arrives_once_with_its_message_id_and_its_body_is_then_erased(mail_sink):
    server = Server("--smtp", mail_sink.url, *FAST)
    try:
        message_id = queue(server.database_args, "ada@example.test")
        message = mail_sink.wait_for(lambda m: m.to == "ada@example.test")
        assert message.message_id == message_id and message.subject == "Band Licence: a test message"
        assert "checks that Band Licence can send mail" in message.text and "<p>" in message.html
        assert message.mail_from == "no-reply@example.test"
        listed = admin(server.database_args, "outbox", "list").stdout
        assert "relay_test ada@example.test sent" in listed
        number = listed.split()[0]
        shown = admin(server.database_args, "outbox", "show", "--id", number,
                      env={"BAND_LICENCE_ENV": "development"}).stdout
        assert "the body was erased once the message was delivered" in shown
        logs = server.stdout_path.read_text() + server.stderr_path.read_text()
        assert "mail_sent" in logs and "checks that Band Licence" not in logs, "metadata only in the log"
    finally:
        server.stop()


def test_outbox_show_prints_the_text_only_in_development(tmp_path):
    store = ["--data", str(tmp_path / "d")]
    queue(store, "ada@example.test")
    shown = admin(store, "outbox", "show", "--id", "1", env={"BAND_LICENCE_ENV": "development"}).stdout
    assert "checks that Band Licence can send mail" in shown
    unset = admin(store, "outbox", "show", "--id", "1", env={}).stdout
    assert "Message-ID:" in unset and "checks that Band Licence" not in unset, "unset is not development"
    for environment in ("staging", "production"):
        hidden = admin(store, "outbox", "show", "--id", "1", env={"BAND_LICENCE_ENV": environment}).stdout
        assert "Message-ID:" in hidden and "checks that Band Licence" not in hidden
        assert f"bodies are shown in development only; this is {environment}" in hidden


def test_an_smtp_outage_delays_delivery_and_loses_nothing(mail_sink):
    mail_sink.stop()
    server = Server("--smtp", mail_sink.url, *FAST)
    try:
        ids = [queue(server.database_args, f"person{i}@example.test") for i in range(5)]
        failed = lambda: [e for e in server.events() if e.get("event") == "mail_failed"]
        import time
        deadline = time.monotonic() + 15
        while len(failed()) < 5:
            assert time.monotonic() < deadline, "the sender tried while the relay was away"
            time.sleep(0.05)
        assert all("SMTP delivery failed" in e["error"] for e in failed())
        mail_sink.start()
        mail_sink.wait_for(count=5)
        got = collections.Counter(m.message_id for m in mail_sink.received())
        assert set(got) == set(ids) and set(got.values()) == {1}, got
    finally:
        server.stop()


def test_what_was_queued_while_no_server_ran_is_delivered_at_the_next_start(mail_sink, tmp_path):
    store = ["--data", str(tmp_path / "d")]
    ids = [queue(store, "ada@example.test") for _ in range(3)]
    server = Server(*store, "--smtp", mail_sink.url, *FAST)
    try:
        mail_sink.wait_for(count=3)
        assert sorted(m.message_id for m in mail_sink.received()) == sorted(ids)
    finally:
        server.stop()


@pytest.mark.skipif(not os.environ.get("BAND_EDGE_TEST_POSTGRES"), reason="BAND_EDGE_TEST_POSTGRES is not set")
def test_two_instances_sharing_one_outbox_send_each_message_once(mail_sink):
    import psycopg
    base = os.environ["BAND_EDGE_TEST_POSTGRES"]
    schema = "mail_" + secrets.token_hex(6)
    with psycopg.connect(base, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
    uri = base + f"&options=-csearch_path%3D{schema}"
    store = ["--database", uri]
    servers = []
    try:
        assert admin(store, "migrate").returncode == 0
        servers = [Server(*store, "--smtp", mail_sink.url, *FAST) for _ in range(2)]
        ids = [queue(store, f"person{i}@example.test") for i in range(30)]
        mail_sink.wait_for(count=30)
        got = collections.Counter(m.message_id for m in mail_sink.received())
        assert set(got) == set(ids) and set(got.values()) == {1}, "each message once, fleet-wide"
        import time
        deadline = time.monotonic() + 10  # each logs after the relay has answered
        while sum(senders := [sum(e.get("event") == "mail_sent" for e in s.events()) for s in servers]) < 30:
            assert time.monotonic() < deadline, senders
            time.sleep(0.05)
        print(f"\nmessages sent by each instance: {senders}")
        assert sum(senders) == 30
    finally:
        for server in servers:
            server.stop()
        with psycopg.connect(base, autocommit=True) as db:
            db.execute(f"DROP SCHEMA {schema} CASCADE")


def test_a_relay_off_loopback_must_offer_starttls(mail_sink):
    """The same sink named as an IPv4-mapped IPv6 address is not 'loopback' to the check: band-edge
    asks for STARTTLS, the sink offers none, and nothing is sent in the clear."""
    server = Server("--smtp", f"smtp://[::ffff:127.0.0.1]:{mail_sink.port}", *FAST)
    try:
        queue(server.database_args, "ada@example.test")
        import time
        deadline = time.monotonic() + 15
        while not (failed := [e for e in server.events() if e.get("event") == "mail_failed"]):
            assert time.monotonic() < deadline, "no delivery attempt"
            time.sleep(0.05)
        assert "TLS" in failed[0]["error"] or "STARTTLS" in failed[0]["error"], failed[0]
        assert mail_sink.received() == [], "nothing went out without TLS"
    finally:
        server.stop()
