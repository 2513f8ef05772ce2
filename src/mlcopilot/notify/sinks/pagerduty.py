"""PagerDuty as a notification sink: one alert per incident through the Events API v2.

A row is one transition of a notification group (one root cause at one upstream entity), but
PagerDuty pages per incident: each member of the group is its own alert, its ``dedup_key``
the member's incident id. A row becomes zero or more events, each one ``POST
{url}/v2/enqueue``:

=============== ================================================================================
row             events
=============== ================================================================================
``open``        ``trigger`` for each open member at least ``min_severity``
``update``      ``trigger`` for each added or changed open member at least ``min_severity``;
                ``resolve`` for each cleared member
``reminder``    ``trigger`` for each open member at least ``min_severity`` (see below)
``acknowledge`` ``acknowledge`` for each open member, whatever its severity now
``resolve``     ``resolve`` for every member
=============== ================================================================================

Severities map to PagerDuty's: critical → ``critical``, high → ``error``, medium → ``warning``,
low → ``info``. A trigger carries a one-line summary (the check's title, the entity, the field
and the model: what a phone call reads out; at most 1024 characters, cleaned of control and
bidi characters), the affected entity's urn as ``source``, the model's name as
``component``, the group's entity as ``group`` (PagerDuty's alert grouping can use it), the
check as ``class``, the details in ``custom_details``, and links to the model and the entity
in DataHub (and to the scan's report) when their URLs are known.

Idempotency. PagerDuty deduplicates by ``dedup_key``: a trigger for a key whose alert is open
(triggered or acknowledged) is merged into it, without a new alert or page; an acknowledge or
resolve for a key with no open alert is dropped. So every event can be sent again safely, and
a row's retry re-sends all of its events, including those an earlier attempt got through: no
progress is kept between attempts, and none is needed. A 5xx or a timeout is transient with
``sent`` set (PagerDuty may have processed the event); a ``400`` (an event PagerDuty refuses)
is permanent; a ``429`` is waited out by the :class:`~mlcopilot.notify.sinks.http.Poster` while
the wait is short, else handed back to the relay (``Retry-After``, or PagerDuty's advised
:data:`RATE_LIMIT_WAIT_S` when it gives none). Events go in a stable order, the most severe
trigger first, then acknowledges and resolves by incident id; at most one every
:data:`EVENT_SPACING_S` seconds (PagerDuty takes about 120 events a minute per integration key).

Why a reminder re-triggers instead of sending nothing: on an open alert the trigger is merged
(PagerDuty escalates per its own policy and does not page again), so it costs nothing there;
but when the alert was resolved in PagerDuty while the incident is still open (by a responder,
by the service's auto-resolution timeout, or by a late retry of an earlier generation's
resolve, since keys outlive generations), the re-trigger opens a new alert, which is what a
reminder of an open incident is for. Alertmanager's PagerDuty receiver re-sends its triggers
the same way. Reminders are planned only for open, unacknowledged groups.

Why an acknowledge and a cleared member go to every member and not only those at least
``min_severity``: a member paged as critical may have been lowered since; its alert must not
keep escalating. Events for keys never paged are dropped by PagerDuty.

The routing key is a secret: it is only ever in the request body, never in an error, a warning
or a log line (it is registered with :mod:`mlcopilot.redact`, and masked in anything PagerDuty
or a proxy answers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, timedelta
from typing import Any, ClassVar, Final

import httpx

from mlcopilot.clock import Clock
from mlcopilot.incidents.payload import (
    Action,
    Delivered,
    DeliveryError,
    GroupSnapshot,
    Member,
    Notification,
    OutboxItem,
    SinkRef,
    decode_notification,
)
from mlcopilot.model import Severity
from mlcopilot.notify.content import change_word, entity_url, info
from mlcopilot.notify.sinks.config import PagerDutySettings
from mlcopilot.notify.sinks.http import Poster, failed, retry_after
from mlcopilot.notify.sinks.pacing import Pacer
from mlcopilot.redact import MASK, redact, register_secret
from mlcopilot.text.names import short_name
from mlcopilot.text.safe import clean, truncate

SEVERITY: Final[Mapping[Severity, str]] = {
    Severity.CRITICAL: "critical",
    Severity.HIGH: "error",
    Severity.MEDIUM: "warning",
    Severity.LOW: "info",
}
"""mlcopilot's severities as PagerDuty's."""
SUMMARY_LIMIT: Final = 1024
"""PagerDuty's limit on ``payload.summary``."""
MESSAGE_LIMIT: Final = 2000
"""The member's message in ``custom_details``, cut to this."""
EVENT_SPACING_S: Final = 0.5
"""Seconds between two events: PagerDuty accepts about 120 a minute per integration key."""
RATE_LIMIT_WAIT_S: Final = 30.0
"""The wait handed to the relay for a 429 without ``Retry-After`` (PagerDuty's advice)."""
CLIENT: Final = "mlcopilot"
_JSON: Final = "application/json"


class PagerDutySink:
    """Triggers, acknowledges and resolves one PagerDuty alert per incident of a group.

    ``transport`` replaces the HTTP stack, as the other sinks' does.
    """

    name: ClassVar[str] = "pagerduty"
    events: ClassVar[frozenset[Action]] = frozenset(
        {"open", "update", "reminder", "acknowledge", "resolve"}
    )

    def __init__(
        self,
        settings: PagerDutySettings,
        *,
        clock: Clock,
        datahub_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._key = settings.routing_key.get_secret_value().strip()
        register_secret(self._key)
        self._min = settings.min_severity
        self._timeout_s = settings.timeout_s
        self._datahub_url = datahub_url
        self._url = settings.enqueue_url
        self._pacer = Pacer(clock, EVENT_SPACING_S)
        self._http = Poster(settings, self._url, clock=clock, transport=transport)

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Send the row's events, in order; a retry sends them all again (merged by key).

        ``ref`` is not needed: every event's key is a member's incident id.
        """
        notification = decode_notification(item.payload)
        if item.action not in self.events:
            raise DeliveryError(
                f"PagerDuty: a {item.action!r} row is not a notification", permanent=True
            )
        planned = plan(notification, self._min)
        created = item.created_at
        timestamp = (created if created.tzinfo else created.replace(tzinfo=UTC)).isoformat()
        for done, (action, key, member) in enumerate(planned):
            if member is None:
                body: dict[str, Any] = {"event_action": action, "dedup_key": key}
            else:
                body = trigger(
                    notification, member, timestamp=timestamp, datahub_url=self._datahub_url
                )
            self._send(body, f"{action} of incident {key}", done=done, total=len(planned))
        if item.action != "open":
            return Delivered()
        keys = [key for action, key, _ in planned if action == "trigger"]
        return Delivered(
            ref=SinkRef(item.sink, keys[0] if keys else item.group_key, None, {"dedup_keys": keys})
        )

    def _send(self, event: dict[str, Any], what: str, *, done: int, total: int) -> None:
        """POST one event; raise what its answer means for the row (``done`` already went)."""
        self._pacer.wait()
        body = json.dumps({"routing_key": self._key, **event}).encode()
        try:
            response = self._http.post(self._url, body, {"Content-Type": _JSON})
        except httpx.HTTPError as exc:
            error = failed(f"PagerDuty {what}", exc, total_s=self._timeout_s, sent=True)
            raise DeliveryError(
                self._masked(str(error)) + _progress(done, total),
                permanent=error.permanent,
                sent=error.sent or done > 0,
            ) from None
        status = response.status_code
        if 200 <= status < 300:
            return
        detail = self._masked(f"PagerDuty {what}: HTTP {status}{_said(response)}")
        detail += _progress(done, total)
        if status == 429:  # not ingested: the retry sends it for the first time
            wait = retry_after(response.headers) if "retry-after" in response.headers else None
            raise DeliveryError(
                detail,
                retry_after=timedelta(seconds=RATE_LIMIT_WAIT_S if wait is None else wait),
                sent=done > 0,
            )
        if status >= 500:
            raise DeliveryError(detail, sent=True)
        # 400 (an event PagerDuty refuses), a redirect (never followed), any other 4xx.
        raise DeliveryError(detail, permanent=True, sent=done > 0)

    def _masked(self, text: str) -> str:
        return redact(text.replace(self._key, MASK))


Planned = tuple[str, str, Member | None]
"""An event to send: its action, its dedup key, and for a trigger the member it pages."""


def plan(notification: Notification, min_severity: Severity) -> list[Planned]:
    """The events of a row, in the order they are sent (see the module's table)."""
    group = notification.group
    action = notification.action

    def paged(member: Member) -> bool:
        return member.open and member.severity.at_least(min_severity)

    if action in ("open", "reminder"):
        triggers = [m for m in group.members if paged(m)]
    elif action == "update":
        touched = {*notification.added, *notification.changed}
        triggers = [m for m in group.members if m.incident_id in touched and paged(m)]
    else:
        triggers = []
    triggers.sort(key=lambda m: (-m.severity.rank, m.incident_id))
    events: list[Planned] = [("trigger", m.incident_id, m) for m in triggers]
    if action == "acknowledge":
        ids = sorted(m.incident_id for m in group.open_members)
        events += [("acknowledge", incident, None) for incident in ids]
    elif action == "resolve":
        ids = sorted(m.incident_id for m in group.members)
        events += [("resolve", incident, None) for incident in ids]
    elif action == "update":
        cleared = set(notification.cleared) - {m.incident_id for m in triggers}
        events += [("resolve", incident, None) for incident in sorted(cleared)]
    return events


def trigger(
    notification: Notification, member: Member, *, timestamp: str, datahub_url: str | None
) -> dict[str, Any]:
    """The ``trigger`` event of ``member`` (without the routing key)."""
    group = notification.group
    details: dict[str, Any] = {
        "model": member.model,
        "entity": member.entity,
        "field": member.field,
        "check": member.check,
        "severity": member.severity.value,
        "message": truncate(member.message, MESSAGE_LIMIT),
        "path": list(member.path),
        "group_key": group.key,
    }
    event: dict[str, Any] = {
        "event_action": "trigger",
        "dedup_key": member.incident_id,
        "payload": {
            "summary": summary(group, member),
            "source": member.entity,
            "severity": SEVERITY[member.severity],
            "timestamp": timestamp,
            "component": clean(short_name(member.model)),
            "group": group.entity,
            "class": member.check,
            "custom_details": details,
        },
        "client": CLIENT,
    }
    links = _links(notification, member, datahub_url)
    if links:
        event["links"] = links
    return event


def summary(group: GroupSnapshot, member: Member) -> str:
    """One line a responder hears first: check, entity, field, change, model."""
    where = clean(short_name(member.entity))
    if member.field:
        where += f", field {clean(member.field)}"
    kind = info(group, member.check).title
    what = f" ({clean(change_word(group, member))})" if member.change else ""
    text = f"{kind} at {where}{what} affects model {clean(short_name(member.model))}"
    return clean(text, SUMMARY_LIMIT)


def _links(
    notification: Notification, member: Member, datahub_url: str | None
) -> list[dict[str, str]]:
    model = clean(short_name(member.model))
    found = [
        (entity_url(datahub_url, member.model), f"Model {model} in DataHub"),
        (entity_url(datahub_url, member.entity), f"{clean(short_name(member.entity))} in DataHub"),
        (notification.report_urls.get(member.model), f"mlcopilot report for {model}"),
    ]
    links: list[dict[str, str]] = []
    for href, text in found:
        if href and all(link["href"] != href for link in links):
            links.append({"href": href, "text": text})
    return links


def _said(response: httpx.Response) -> str:
    """What PagerDuty (or whatever answered) said, short: `` (message: error; error)``."""
    try:
        data = json.loads(response.text)
    except ValueError:
        text = clean(response.text, 100)
        return f" ({text})" if text else ""
    if not isinstance(data, dict):
        return ""
    message = clean(str(data.get("message") or data.get("status") or ""), 100)
    errors = data.get("errors")
    listed = "; ".join(clean(str(e), 200) for e in errors) if isinstance(errors, list) else ""
    said = ": ".join(part for part in (message, truncate(listed, 400)) if part)
    return f" ({said})" if said else ""


def _progress(done: int, total: int) -> str:
    if done == 0:
        return ""
    return (
        f" (after {done} of {total} events of this row were accepted; a retry sends them "
        "again, merged by dedup_key)"
    )
