"""A local PagerDuty Events API v2 (``POST /v2/enqueue``), checked and deduplicated like PagerDuty.

What it checks, as PagerDuty documents the alert event (developer docs, "Send an Alert Event"):

- ``routing_key``: required, 32 characters, and the integration's own key (:attr:`routing_key`,
  :data:`ROUTING_KEY` by default);
- ``event_action``: ``trigger``, ``acknowledge`` or ``resolve``;
- ``dedup_key``: at most 255 characters; required for ``acknowledge`` and ``resolve`` (a trigger
  without one gets a generated key, returned in the answer);
- a trigger's ``payload``: ``summary`` (at most 1024 characters), ``source`` and ``severity``
  (``critical``, ``error``, ``warning`` or ``info``) required; ``custom_details`` an object;
  each of ``links`` needs an ``href``, each of ``images`` a ``src``.

A bad event is answered ``400 {"status": "invalid event", "message": "Event object is invalid",
"errors": [...]}``; a good one ``202 {"status": "success", "message": "Event processed",
"dedup_key": ...}``. The error texts are this fake's, in PagerDuty's shape.

Alerts are kept by dedup key, with PagerDuty's de-duplication: a trigger whose key has an open
(triggered or acknowledged) alert is merged into it (no new alert; an acknowledged alert stays
acknowledged); once that alert is resolved, a trigger with the key opens a new alert, and an
acknowledge or resolve with no open alert is accepted and dropped. :attr:`FakePagerDuty.alerts`
holds every alert in the order they were opened, :attr:`FakePagerDuty.events` every accepted
event with what it did. :meth:`FakePagerDuty.resolve_by_hand` is a responder (or the service's
auto-resolution) resolving an alert in PagerDuty's UI. :meth:`FakePagerDuty.fail_for` scripts a
fault for the events of one dedup key (the base class's faults hit the next requests, whatever
they carry).
"""

from __future__ import annotations

import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from testing.fakes.http import FakeServer, Request, Response

ROUTING_KEY = "5f1c2d3e4b5a69788796a5b4c3d2e1f0"
"""The integration key of the fake's one Events API v2 integration (32 characters)."""
ENQUEUE = "/v2/enqueue"
ACTIONS = ("trigger", "acknowledge", "resolve")
SEVERITIES = ("critical", "error", "warning", "info")
SUMMARY_LIMIT = 1024
DEDUP_KEY_LIMIT = 255

AlertState = Literal["triggered", "acknowledged", "resolved"]
Outcome = Literal["created", "merged", "acknowledged", "resolved", "dropped"]


@dataclass
class Alert:
    """One PagerDuty alert: the trigger that opened it, its state, and every event merged in."""

    dedup_key: str
    payload: dict[str, Any]
    links: list[dict[str, Any]]
    client: str | None
    state: AlertState = "triggered"
    log: list[str] = field(default_factory=list)
    """The event actions applied to it, the opening trigger first."""

    @property
    def severity(self) -> str:
        return str(self.payload["severity"])

    @property
    def summary(self) -> str:
        return str(self.payload["summary"])

    @property
    def events(self) -> int:
        """How many events were applied to it (1: only the trigger that opened it)."""
        return len(self.log)

    @property
    def open(self) -> bool:
        return self.state != "resolved"


@dataclass
class Event:
    """An accepted event: its action, its dedup key, its body, and what it did."""

    action: str
    dedup_key: str
    body: dict[str, Any]
    outcome: Outcome


@dataclass
class _KeyFault:
    dedup_key: str
    response: Response
    after: bool
    times: int


class FakePagerDuty(FakeServer):
    def __init__(self, *, routing_key: str = ROUTING_KEY) -> None:
        super().__init__()
        self.routing_key = routing_key
        self.alerts: list[Alert] = []
        self.events: list[Event] = []
        self._key_faults: list[_KeyFault] = []
        self._guard = threading.Lock()
        self.route("POST", ENQUEUE, self._enqueue)

    # --- set-up

    def fail_for(
        self,
        dedup_key: str,
        status: int = 502,
        body: Any = None,
        headers: dict[str, str] | None = None,
        *,
        after: bool = False,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` events for ``dedup_key`` with ``status``.

        ``after``: the event is processed first, then its answer is lost behind the fault (a
        gateway's 502 in front of a PagerDuty that did the work).
        """
        response = Response(status, body, headers or {})
        with self._guard:
            self._key_faults.append(_KeyFault(dedup_key, response, after, times))

    def resolve_by_hand(self, dedup_key: str) -> None:
        """A responder resolves the open alert of ``dedup_key`` in PagerDuty itself."""
        with self._guard:
            alert = self._open(dedup_key)
            assert alert is not None, f"no open alert for {dedup_key}"
            alert.state = "resolved"
            alert.log.append("resolved by hand")

    # --- queries

    def alerts_for(self, dedup_key: str) -> list[Alert]:
        """Every alert ever opened with ``dedup_key``, oldest first."""
        return [a for a in self.alerts if a.dedup_key == dedup_key]

    def alert(self, dedup_key: str) -> Alert:
        """The one alert of ``dedup_key`` (fails when there are none or several)."""
        (alert,) = self.alerts_for(dedup_key)
        return alert

    def enqueued(self) -> list[Request]:
        """Every request to ``/v2/enqueue``, accepted or not."""
        return self.calls("POST", ENQUEUE)

    # --- the API

    def _enqueue(self, request: Request, m: re.Match[str]) -> Response:
        try:
            data = request.json()
        except ValueError:
            return _invalid(["Event object is not valid JSON"])
        if not isinstance(data, dict):
            return _invalid(["Event object must be a JSON object"])
        errors = self._problems(data)
        if errors:
            return _invalid(errors)
        action = str(data["event_action"])
        key = str(data.get("dedup_key") or uuid.uuid4().hex)
        with self._guard:
            fault = self._take_key_fault(key)
            if fault is not None and not fault.after:
                return fault.response
            outcome = self._apply(action, key, data)
            self.events.append(Event(action, key, data, outcome))
        if fault is not None:
            return fault.response
        return Response(202, {"status": "success", "message": "Event processed", "dedup_key": key})

    def _problems(self, data: dict[str, Any]) -> list[str]:
        errors: list[str] = []
        routing_key = data.get("routing_key")
        if not isinstance(routing_key, str) or not routing_key.strip():
            errors.append("'routing_key' is missing or blank")
        elif len(routing_key) != 32:
            errors.append("Routing key must be 32 characters")
        elif routing_key != self.routing_key:
            errors.append("Invalid routing key")
        action = data.get("event_action")
        if action not in ACTIONS:
            errors.append("'event_action' must be one of trigger, acknowledge or resolve")
        key = data.get("dedup_key")
        if key is not None and (not isinstance(key, str) or len(key) > DEDUP_KEY_LIMIT):
            errors.append(f"'dedup_key' must be a string of at most {DEDUP_KEY_LIMIT} characters")
        if action in ("acknowledge", "resolve") and not key:
            errors.append(f"'dedup_key' is required for an {action} event")
        if action == "trigger":
            errors += _payload_problems(data.get("payload"))
            errors += _context_problems(data.get("links"), "links", "href")
            errors += _context_problems(data.get("images"), "images", "src")
        return errors

    def _apply(self, action: str, key: str, data: dict[str, Any]) -> Outcome:
        alert = self._open(key)
        if action == "trigger":
            if alert is not None:
                alert.log.append("trigger")
                return "merged"
            links = list(data.get("links") or [])
            client = data.get("client")
            self.alerts.append(Alert(key, dict(data["payload"]), links, client, log=["trigger"]))
            return "created"
        if alert is None:
            return "dropped"
        alert.log.append(action)
        if action == "acknowledge":
            alert.state = "acknowledged"
            return "acknowledged"
        alert.state = "resolved"
        return "resolved"

    def _open(self, key: str) -> Alert | None:
        return next((a for a in reversed(self.alerts) if a.dedup_key == key and a.open), None)

    def _take_key_fault(self, key: str) -> _KeyFault | None:
        for fault in self._key_faults:
            if fault.dedup_key == key:
                fault.times -= 1
                if fault.times <= 0:
                    self._key_faults.remove(fault)
                return fault
        return None


def _invalid(errors: list[str]) -> Response:
    return Response(
        400, {"status": "invalid event", "message": "Event object is invalid", "errors": errors}
    )


def _payload_problems(payload: object) -> list[str]:
    if not isinstance(payload, dict):
        return ["'payload' is missing or not an object"]
    errors = []
    for name in ("summary", "source", "severity"):
        value = payload.get(name)
        if not isinstance(value, str) or not value.strip():
            errors.append(f"'payload.{name}' is missing or blank")
    summary = payload.get("summary")
    if isinstance(summary, str) and len(summary) > SUMMARY_LIMIT:
        errors.append(f"'payload.summary' is longer than {SUMMARY_LIMIT} characters")
    severity = payload.get("severity")
    if isinstance(severity, str) and severity.strip() and severity not in SEVERITIES:
        errors.append("'payload.severity' must be one of critical, error, warning or info")
    details = payload.get("custom_details")
    if details is not None and not isinstance(details, dict):
        errors.append("'payload.custom_details' must be an object")
    return errors


def _context_problems(items: object, name: str, required: str) -> list[str]:
    if items is None:
        return []
    if not isinstance(items, list):
        return [f"'{name}' must be a list"]
    return [
        f"'{name}[{n}].{required}' is missing or blank"
        for n, item in enumerate(items)
        if not isinstance(item, dict) or not str(item.get(required) or "").strip()
    ]
