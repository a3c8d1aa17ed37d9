"""A real SMTP server on loopback for the mail tests (PyPI aiosmtpd): it accepts every message and
keeps it, parsed, for the test to read. Stoppable and restartable on the same port, so a test can
take the relay away mid-run.

    sink = MailSink(); sink.start()
    server = Server("--smtp", sink.url)
    message = sink.wait_for(lambda m: m.to == "ada@example.test")
    message.text, message.html, message.links, message.message_id
"""

from __future__ import annotations

import email
import email.policy
import re
import socket
import threading
import time
from dataclasses import dataclass

from aiosmtpd.controller import Controller


@dataclass
class Message:
    """One delivered message."""
    mail_from: str
    to: str
    raw: bytes
    subject: str
    message_id: str
    text: str
    html: str

    @property
    def links(self) -> list[str]:
        """Every http(s) URL in the plain-text part, in order."""
        return re.findall(r"https?://\S+", self.text)


class _Handler:
    def __init__(self, sink: "MailSink"):
        self.sink = sink

    async def handle_DATA(self, server, session, envelope):
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        parts = {p.get_content_type(): p.get_content() for p in parsed.walk() if p.get_content_maintype() == "text"}
        for recipient in envelope.rcpt_tos:
            self.sink._add(Message(envelope.mail_from, recipient, envelope.content, str(parsed["Subject"]),
                                   str(parsed["Message-ID"]), parts.get("text/plain", ""), parts.get("text/html", "")))
        return "250 Message accepted for delivery"


class MailSink:
    """An SMTP server on 127.0.0.1 (a free port, kept across restarts)."""

    def __init__(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.messages: list[Message] = []
        self._lock = threading.Lock()
        self._controller: Controller | None = None

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def start(self) -> "MailSink":
        self._controller = Controller(_Handler(self), hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller:
            self._controller.stop()
            self._controller = None

    def _add(self, message: Message) -> None:
        with self._lock:
            self.messages.append(message)

    def received(self) -> list[Message]:
        with self._lock:
            return list(self.messages)

    def wait_for(self, match=lambda m: True, count: int = 1, timeout: float = 15) -> Message:
        """The first message `match` accepts, once at least `count` such have arrived."""
        deadline = time.monotonic() + timeout
        while True:
            found = [m for m in self.received() if match(m)]
            if len(found) >= count:
                return found[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"no such message within {timeout} s; got {[(m.to, m.subject) for m in self.received()]}")
            time.sleep(0.02)
