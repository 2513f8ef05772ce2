"""A local receiver of mlcopilot's signed webhook, strict as a real one should be.

``POST <path>`` (:data:`PATH` by default) is checked in this order, each failure answered as a
receiver would and recorded with its reason in :attr:`FakeReceiver.deliveries`:

1. the signature (:func:`verify`): ``X-Mlcopilot-Signature`` must be the HMAC-SHA256, with the
   shared secret, of ``<X-Mlcopilot-Timestamp>.<raw body>``, compared in constant time; then the
   timestamp must be within five minutes of the receiver's own clock (:attr:`clock`, which a
   test may set; real time by default). Either failing: 401.
2. ``Content-Type: application/json`` (else 415) and a JSON object (else 400).
3. the shipped schema ``mlcopilot/schemas/webhook-event-v1.json`` (else 422 naming the error),
   so every event any test sends is checked against the contract receivers code against.
4. ``Idempotency-Key`` present and equal to the event's ``id`` (else 400).
5. deduplication by ``Idempotency-Key``: the first event of a key is kept in :attr:`events`;
   a repeat with the same bytes answers :attr:`duplicate_status` (200 with ``{"duplicate":
   true}``, or 409 Conflict), and a repeat with *other* bytes answers 422, as an
   idempotency-key server refuses a key reused for another request.

Scripted faults (:meth:`~testing.fakes.http.FakeServer.fail`, ``after=True`` for "processed,
then the answer was lost") and slow drips come from :class:`~testing.fakes.http.FakeServer`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any, Protocol

from jsonschema import Draft202012Validator

from testing.fakes.http import FakeServer, Request, Response

SECRET = "whsec-CANARY-" + "7" * 32
PATH = "/hooks/mlcopilot"
TOLERANCE_S = 300
"""How old (or how far ahead) a timestamp may be: five minutes, as Stripe and Slack allow."""
ACCEPTED = "accepted"
DUPLICATE = "duplicate"


def verify(secret: str, headers: Mapping[str, str], body: bytes, now: float | None = None) -> None:
    """Raise ValueError unless mlcopilot signed ``body`` with ``secret`` within 5 min of ``now``.

    ``headers``: the request's headers, names in lower case (or a case-insensitive mapping);
    ``body``: the raw bytes received, before any JSON parsing; ``now``: unix seconds.
    """
    timestamp = headers.get("x-mlcopilot-timestamp", "")
    signature = headers.get("x-mlcopilot-signature", "")
    if not (timestamp.isascii() and timestamp.isdigit()):
        raise ValueError("missing or malformed X-Mlcopilot-Timestamp")
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    if not hmac.compare_digest(signature.encode(), b"sha256=" + mac.hexdigest().encode()):
        raise ValueError("bad signature")
    if abs((time.time() if now is None else now) - int(timestamp)) > TOLERANCE_S:
        raise ValueError("timestamp outside the 5-minute window (a replay?)")


@cache
def shipped_schema() -> dict[str, Any]:
    """The event schema as the wheel ships it."""
    text = resources.files("mlcopilot").joinpath("schemas/webhook-event-v1.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_errors(event: Any) -> list[str]:
    """What the shipped schema finds wrong with ``event`` (empty: it validates)."""
    validator = Draft202012Validator(
        shipped_schema(), format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
        for e in validator.iter_errors(event)
    ]


class _Clock(Protocol):
    def now(self) -> datetime: ...


@dataclass(frozen=True)
class Delivery:
    """One POST to the receiver's path, as received, and what the receiver made of it."""

    headers: dict[str, str]
    """Names in lower case."""
    body: bytes
    verdict: str
    """``accepted``, ``duplicate``, why it was refused (``bad signature``…), or empty when a
    scripted fault answered before the receiver looked at it."""

    @property
    def key(self) -> str:
        return self.headers.get("idempotency-key", "")

    @property
    def timestamp(self) -> int:
        return int(self.headers["x-mlcopilot-timestamp"])

    @property
    def signature(self) -> str:
        return self.headers.get("x-mlcopilot-signature", "")

    def json(self) -> Any:
        return json.loads(self.body)


class FakeReceiver(FakeServer):
    """A webhook receiver that verifies, validates and deduplicates (see the module)."""

    def __init__(
        self,
        *,
        secret: str = SECRET,
        path: str = PATH,
        duplicate_status: int = 200,
        clock: _Clock | None = None,
    ) -> None:
        super().__init__()
        self.secret = secret
        self.path = path
        self.duplicate_status = duplicate_status
        self.clock = clock
        self.events: list[dict[str, Any]] = []
        """The events accepted, one per Idempotency-Key, in the order they arrived."""
        self._first: dict[str, bytes] = {}
        self._verdicts: dict[int, str] = {}
        self._receiving = threading.Lock()
        self.route("POST", re.escape(path), self._receive)

    @property
    def endpoint(self) -> str:
        """The URL to configure as ``MLCOPILOT_WEBHOOK_URL``."""
        return self.url + self.path

    @property
    def deliveries(self) -> list[Delivery]:
        """Every POST to the path, in order, each with the receiver's verdict."""
        with self._receiving:
            return [
                Delivery(r.headers, r.body, self._verdicts.get(id(r), ""))
                for r in self.calls("POST", re.escape(self.path))
            ]

    def _receive(self, request: Request, _: re.Match[str]) -> Response:
        status, verdict, answer = self._judge(request)
        with self._receiving:
            self._verdicts[id(request)] = verdict
        return Response(status, answer)

    def _judge(self, request: Request) -> tuple[int, str, dict[str, Any]]:
        now = self.clock.now().timestamp() if self.clock is not None else time.time()
        try:
            verify(self.secret, request.headers, request.body, now)
        except ValueError as exc:
            return 401, str(exc), {"error": str(exc)}
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return 415, "not JSON", {"error": "Content-Type must be application/json"}
        try:
            event = json.loads(request.body)
        except ValueError:
            return 400, "malformed JSON", {"error": "the body is not JSON"}
        if not isinstance(event, dict):
            return 400, "not an object", {"error": "the body is not a JSON object"}
        errors = schema_errors(event)
        if errors:
            return 422, f"schema: {errors[0]}", {"error": errors[0]}
        key = request.headers.get("idempotency-key", "")
        if not key or key != event["id"]:
            return 400, "key is not the id", {"error": "Idempotency-Key is not the event's id"}
        with self._receiving:
            first = self._first.get(key)
            if first is None:
                self._first[key] = request.body
                self.events.append(event)
                return 200, ACCEPTED, {"ok": True}
        if first != request.body:
            return 422, "key reused", {"error": "Idempotency-Key reused with another body"}
        return self.duplicate_status, DUPLICATE, {"duplicate": True}
