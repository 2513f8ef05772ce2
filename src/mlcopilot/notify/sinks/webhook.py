"""A signed JSON event per notification, POSTed to the operator's own receiver.

One :class:`~mlcopilot.notify.sinks.webhook_event.WebhookEvent` per outbox row (one transition
of a notification group). The request::

    POST <MLCOPILOT_WEBHOOK_URL>
    Content-Type: application/json
    Idempotency-Key: <the event's id: 64 hex digits>
    X-Mlcopilot-Timestamp: <unix seconds of this attempt>
    X-Mlcopilot-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>" with the secret>

The body is built from the row alone (never from the clock), so every attempt at one event
sends the same bytes; only the timestamp and the signature are made per attempt (per HTTP
request: a 429's retry inside one call is stamped again), so a receiver can refuse old ones
(replays) without refusing our retries. The event's ``id`` is the ``Idempotency-Key``: a hash
of the row's ``dedupe_key`` and of the event's content. A row that a later scan rewrites while
it waits (the policy folds a new change into an update not yet delivered) is a new event with
a new id, so a receiver that already processed the earlier version gets the newer one too,
instead of discarding it as a duplicate (or refusing a key reused with another body, as
idempotency-key servers do). The same row, unchanged, has the same id in every process.

Receivers deduplicate by that key, which makes retries safe: a 5xx or a timeout is transient
and marked ``sent`` (the relay retries; no reconciliation is needed). The receiver's answers:

- 2xx: delivered; 409 Conflict (it already had the key): delivered;
- 429: ``Retry-After`` waited out on our clock within ``max_rate_limit_wait_s``, then handed to
  the relay (``DeliveryError(retry_after=…)``);
- 408, 425, 5xx, timeouts, dropped connections: transient (``sent=True``);
- any other 4xx (400, 401, 403, 404, 410, 413, 422…) and 3xx (redirects are never followed):
  permanent; the row goes dead, ``mlcopilot outbox retry`` sends it again once fixed.

It goes over the sinks' one HTTP stack (:mod:`~mlcopilot.notify.sinks.http`): one total
deadline per call, allowlisted addresses checked after DNS resolution. The secret signs and
nothing else: it is never sent, logged or put in an error (an error quoting the receiver's
answer is scrubbed of it).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import httpx
from pydantic import ValidationError

from mlcopilot import redact
from mlcopilot.clock import Clock, SystemClock
from mlcopilot.errors import ConfigError
from mlcopilot.incidents.payload import (
    Action,
    Delivered,
    DeliveryError,
    Notification,
    OutboxItem,
    PayloadError,
    SinkRef,
    decode_notification,
    problems,
)
from mlcopilot.notify.content import entity_url, info
from mlcopilot.notify.sinks.config import WebhookSettings
from mlcopilot.notify.sinks.http import DeadlineTransport, Poster, failed, retry_after
from mlcopilot.notify.sinks.urls import AddressPolicy
from mlcopilot.notify.sinks.webhook_event import VERSION, EventType, WebhookEvent

IDEMPOTENCY_HEADER = "Idempotency-Key"
TIMESTAMP_HEADER = "X-Mlcopilot-Timestamp"
SIGNATURE_HEADER = "X-Mlcopilot-Signature"
EVENT_TYPES: Mapping[Action, EventType] = {
    "open": "incident.opened",
    "update": "incident.updated",
    "reminder": "incident.reminder",
    "acknowledge": "incident.acknowledged",
    "resolve": "incident.resolved",
}
_JSON = "application/json"
_TRANSIENT_4XX = frozenset({408, 425})  # Request Timeout, Too Early: try again later


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Mlcopilot-Signature`` value: ``sha256=`` and the HMAC of ``<timestamp>.<body>``."""
    mac = hmac.new(secret, timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def event_of(
    item: OutboxItem, notification: Notification, *, datahub_url: str | None
) -> WebhookEvent:
    """The event of outbox row ``item`` (whose payload is ``notification``).

    Built from the row and ``datahub_url`` only, so the same row makes the same event, byte for
    byte, in any process.

    Raises:
        ValidationError: The row holds something the event's schema does not allow.
        KeyError: ``item`` is not a notification row (a write-back).
    """
    group = notification.group
    content: dict[str, Any] = {
        "type": EVENT_TYPES[item.action],
        "occurred_at": _iso(item.created_at),
        "seq": item.seq,
        "group": {
            "key": group.key,
            "generation": group.generation,
            "check": group.check,
            "check_title": info(group).title,
            "entity": group.entity,
            "state": group.state.value,
            "opened_at": _iso(group.opened_at),
            "resolved_at": _iso(group.resolved_at) if group.resolved_at else None,
            "acknowledged_by": group.acknowledged_by,
            "worst_severity": group.worst.value,
        },
        "incidents": [
            {
                "id": m.incident_id,
                "generation": m.generation,
                "check": m.check,
                "severity": m.severity.value,
                "model": m.model,
                "entity": m.entity,
                "field": m.field,
                "change": m.change,
                "previous_field": m.previous_field,
                "message": m.message,
                "path": list(m.path),
                "open": m.open,
                "links": {
                    "model": entity_url(datahub_url, m.model),
                    "entity": entity_url(datahub_url, m.entity),
                },
            }
            for m in group.members
        ],
        "added": list(notification.added),
        "cleared": list(notification.cleared),
        "changed": list(notification.changed),
        "links": {
            "entity": entity_url(datahub_url, group.entity),
            "reports": dict(sorted(notification.report_urls.items())),
        },
    }
    return WebhookEvent.model_validate(
        {"version": VERSION, "id": event_id(item.dedupe_key, content), **content}
    )


def event_id(dedupe_key: str, content: Mapping[str, Any]) -> str:
    """The ``Idempotency-Key``: the row's dedupe key and the event's content, hashed.

    The same for every attempt at one row; another when the row's content was rewritten.
    """
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    text = "\x1f".join(("mlcopilot-webhook", f"v{VERSION}", dedupe_key, canonical))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class WebhookSink:
    """Signed JSON events to the operator's receiver, one per notification row.

    ``transport`` replaces the HTTP stack (under the signing, which always applies), as
    :class:`~mlcopilot.notify.sinks.slack.SlackWebhookSink`'s does.
    """

    name: ClassVar[str] = "webhook"
    events: ClassVar[frozenset[Action]] = frozenset(EVENT_TYPES)

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        clock: Clock,
        datahub_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
        signing_clock: Clock | None = None,
    ) -> None:
        """A sink POSTing to ``settings.url``.

        ``clock`` paces retries; ``signing_clock`` dates each attempt's signature: the wall
        clock by default, as the receiver's is (a scan's clock may be in the past, ``--now``).
        """
        secret = settings.secret.get_secret_value().strip()
        if not secret:
            raise ConfigError("webhook.secret is empty: set MLCOPILOT_WEBHOOK_SECRET(_FILE)")
        redact.register_secret(secret)
        self._secret = secret
        self._url = settings.url
        self._timeout_s = settings.timeout_s
        self._datahub_url = datahub_url
        inner = transport or DeadlineTransport(
            settings.timeout_s,
            base_url=settings.url,
            policy=AddressPolicy.of(settings.allowed_hosts, allow_loopback=settings.allow_local),
        )
        signing = _Signing(inner, secret.encode("utf-8"), signing_clock or SystemClock())
        self._http = Poster(settings, settings.url, clock=clock, transport=signing)

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """POST the row's event; delivered once the receiver has it (2xx, or 409: it had it)."""
        if item.action not in self.events:
            raise DeliveryError(
                f"webhook: outbox row {item.id} is a {item.action} row, not a notification",
                permanent=True,
            )
        try:
            event = event_of(item, decode_notification(item.payload), datahub_url=self._datahub_url)
        except PayloadError as exc:
            raise DeliveryError(self._clean(f"webhook: {exc}"), permanent=True) from None
        except ValidationError as exc:
            raise DeliveryError(
                self._clean(f"webhook: outbox row {item.id} makes no valid event: {problems(exc)}"),
                permanent=True,
            ) from None
        except ValueError as exc:  # a group without members has no worst severity
            raise DeliveryError(
                self._clean(f"webhook: outbox row {item.id} makes no event: {exc}"),
                permanent=True,
            ) from None
        body = event.model_dump_json().encode("utf-8")
        headers = {"Content-Type": _JSON, IDEMPOTENCY_HEADER: event.id}
        try:
            response = self._http.post(self._url, body, headers)
        except httpx.HTTPError as exc:
            error = failed("webhook", exc, total_s=self._timeout_s, sent=True)
            raise DeliveryError(
                self._clean(str(error)), permanent=error.permanent, sent=error.sent
            ) from None
        status = response.status_code
        if 200 <= status < 300 or status == 409:
            return Delivered()
        detail = self._clean(f"webhook: HTTP {status}{_excerpt(response)}")
        if status == 429:
            wait = timedelta(seconds=retry_after(response.headers))
            raise DeliveryError(detail, retry_after=wait)
        if status >= 500 or status in _TRANSIENT_4XX:
            raise DeliveryError(detail, sent=True)
        if 300 <= status < 400:
            detail += " (redirects are not followed: configure the receiver's final URL)"
        raise DeliveryError(detail, permanent=True)

    def _clean(self, text: str) -> str:
        """``text`` redacted, and without the secret even if it is too short to register."""
        return redact.redact(text).replace(self._secret, redact.MASK)


class _Signing(httpx.BaseTransport):
    """Stamps and signs each request as it goes out, so every attempt carries its own time."""

    def __init__(self, inner: httpx.BaseTransport, secret: bytes, clock: Clock) -> None:
        self._inner = inner
        self._secret = secret
        self._clock = clock

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timestamp = str(int(self._clock.now().timestamp()))
        request.headers[TIMESTAMP_HEADER] = timestamp
        request.headers[SIGNATURE_HEADER] = sign(self._secret, timestamp, request.content)
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def _iso(moment: datetime) -> str:
    """``moment`` in UTC, ISO 8601 with its offset (a naive time from the store is UTC)."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat()


def _excerpt(response: httpx.Response) -> str:
    """The start of the receiver's answer, on one line, for the error (empty when none)."""
    text = " ".join(response.text.split())
    if not text:
        return ""
    return f" ({text[:200]}…)" if len(text) > 200 else f" ({text})"
