"""The transactional outbox: what must reach DataHub, GitHub and Slack, as data.

A scan stores its incident changes and the notifications they imply in one transaction (the
outbox rows); the relay (:mod:`mlcopilot.notify.relay`) delivers them afterwards. A row's
``dedupe_key`` is unique in the database, so two scanners that decide the same notification
store it once. Rows hold rendered-ready content, never credentials.

Row states::

    pending ──claim──► sending ──ok──► done
       ▲                  │
       └──transient error─┤ (bounded, jittered backoff)
                          └──permanent error / budget spent──► dead ──`outbox retry`──► pending
    pending ──group resolved before it was sent──► cancelled
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, Protocol

from mlcopilot.model import CheckInfo, Incident, Severity, Urn

SinkName = Literal["datahub", "github", "slack"]
NOTIFY_SINKS: tuple[SinkName, ...] = ("github", "slack")
"""The sinks that notify people (DataHub receives the write-back, not notifications)."""

Action = Literal["writeback", "open", "update", "reminder", "resolve"]


class OutboxStatus(StrEnum):
    """Where an outbox row is in its delivery."""

    PENDING = "pending"
    SENDING = "sending"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"


class GroupState(StrEnum):
    """A notification group's lifecycle: one root cause, one issue, one Slack thread."""

    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class Member:
    """One affected (model, entity, field) of a group, as it stood when the row was planned."""

    incident_id: str
    generation: int
    check: str
    severity: Severity
    model: Urn
    entity: Urn
    field: str | None
    change: str | None
    previous_field: str | None
    message: str
    path: tuple[Urn, ...]
    open: bool


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """A group as a notification describes it: the root cause and every affected member.

    ``infos`` are the infos of the group's check and its members' checks as they were when
    the row was planned (see :func:`with_infos`); a row planned before rows carried them has
    none, and the renderer falls back to the built-in checks' infos.
    """

    key: str
    generation: int
    check: str
    entity: Urn
    state: GroupState
    opened_at: datetime
    members: tuple[Member, ...]
    resolved_at: datetime | None = None
    acknowledged_by: str | None = None
    infos: Mapping[str, CheckInfo] = field(default_factory=dict)

    @property
    def open_members(self) -> tuple[Member, ...]:
        """Members still open."""
        return tuple(m for m in self.members if m.open)

    @property
    def models(self) -> tuple[Urn, ...]:
        """The affected models, sorted."""
        return tuple(sorted({m.model for m in self.members}))

    @property
    def worst(self) -> Severity:
        """The most severe open member's severity (of all members when none is open)."""
        pool = self.open_members or self.members
        return max((m.severity for m in pool), key=lambda s: s.rank)


@dataclass(frozen=True, slots=True)
class Notification:
    """The content of one GitHub/Slack outbox row.

    ``added`` and ``cleared`` name the members (incident ids) that joined or cleared since the
    previous notification of the group: what an update is about.
    """

    action: Action
    seq: int
    group: GroupSnapshot
    added: tuple[str, ...] = ()
    cleared: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One stored outbox row."""

    id: int
    sink: SinkName
    action: Action
    group_key: str
    group_generation: int
    seq: int
    dedupe_key: str
    payload: Mapping[str, Any]
    status: OutboxStatus
    attempts: int
    created_at: datetime
    not_before: datetime
    next_attempt_at: datetime
    uncertain: bool = False
    """A previous attempt may have reached the sink (it crashed or timed out after sending):
    the sink must reconcile before sending again."""
    last_error: str | None = None
    warning: str | None = None
    delivered_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class SinkRef:
    """Where a group lives in a sink: the GitHub issue, the Slack root message."""

    sink: SinkName
    key: str
    """The issue number, or ``channel/ts``."""
    url: str | None = None
    data: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Delivered:
    """What a sink did: the reference to remember (if new) and any warning to report."""

    ref: SinkRef | None = None
    warning: str | None = None
    detail: Any = None


class DeliveryError(Exception):
    """A sink could not deliver. ``retry_after`` is set for rate limits.

    ``permanent`` errors (bad credentials, a repository that does not exist, a payload the
    API refuses) go straight to ``dead``; transient ones are retried with backoff. ``sent``
    says the request may have reached the sink (timeout, 5xx): the next attempt reconciles.
    """

    def __init__(
        self,
        message: str,
        *,
        permanent: bool = False,
        retry_after: timedelta | None = None,
        sent: bool = False,
    ) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after
        self.sent = sent


class Sink(Protocol):
    """Delivers outbox rows to one external system, idempotently."""

    @property
    def name(self) -> SinkName:
        """Which sink this is."""
        ...

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Deliver ``item``; ``ref`` is where its group already lives in this sink, if anywhere.

        Raises:
            DeliveryError: It could not (yet) be delivered.
        """
        ...


@dataclass(frozen=True, slots=True)
class NotifyPolicy:
    """When to notify, with Alertmanager's timing defaults.

    ``group_wait`` holds a new group's first notification so related findings (from this
    scan or a concurrent one) join it; ``group_interval`` is the least time between two
    updates of a group; ``repeat_interval`` (None: never) reminds about a group that stays open
    and unacknowledged.
    """

    group_wait: timedelta = timedelta(seconds=30)
    group_interval: timedelta = timedelta(minutes=5)
    repeat_interval: timedelta | None = timedelta(hours=4)
    notify_resolved: bool = True


@dataclass(frozen=True, slots=True)
class NotifyRequest:
    """What a scan asks the store to commit along with its incident changes.

    ``sinks`` are the notification sinks configured now; ``writeback`` is the catalog plan
    the DataHub sink will apply (empty: no write-back row).
    """

    policy: NotifyPolicy = NotifyPolicy()
    sinks: tuple[SinkName, ...] = ()
    writeback: Sequence[Mapping[str, Any]] = ()
    infos: Mapping[str, CheckInfo] = field(default_factory=dict)
    """Every check's info the scan knows: the grouping rule (``folds_in``) and what each
    planned row carries so it stays deliverable if its check is uninstalled meanwhile."""


@dataclass(frozen=True, slots=True)
class PlannedRow:
    """An outbox row a scan would insert (what ``--dry-run`` shows)."""

    sink: SinkName
    action: Action
    group_key: str
    group_generation: int
    seq: int
    not_before: datetime
    payload: Mapping[str, Any]

    @property
    def dedupe_key(self) -> str:
        """Unique per notification: the database refuses a second row with it."""
        return dedupe_key(self.sink, self.group_key, self.group_generation, self.action, self.seq)


def dedupe_key(sink: str, group_key: str, generation: int, action: str, seq: int) -> str:
    """``sink:group:generation:action:seq`` — the outbox's uniqueness key."""
    return f"{sink}:{group_key}:{generation}:{action}:{seq}"


@dataclass(frozen=True, slots=True)
class WatchedGroup:
    """An open, unacknowledged group: where it lives in each sink and its open incidents."""

    key: str
    generation: int
    refs: Mapping[SinkName, SinkRef]
    incidents: tuple[Incident, ...]


class OutboxStore(Protocol):
    """The state store's side of the outbox, as the relay uses it."""

    def claim(
        self, *, sinks: Sequence[SinkName], owner: str, now: datetime, lease: timedelta
    ) -> OutboxItem | None:
        """Take the next deliverable row (due, first of its group and sink) for ``owner``."""
        ...

    def complete(
        self, item: OutboxItem, delivered: Delivered, *, owner: str, now: datetime
    ) -> None:
        """Mark ``item`` done and remember the sink reference it produced."""
        ...

    def fail(
        self,
        item: OutboxItem,
        *,
        owner: str,
        error: str,
        now: datetime,
        retry_at: datetime | None,
        uncertain: bool,
        count_attempt: bool = True,
    ) -> None:
        """Put ``item`` back to ``pending`` until ``retry_at``, or ``dead`` when None."""
        ...

    def sink_ref(self, group_key: str, generation: int, sink: SinkName) -> SinkRef | None:
        """Where a group lives in ``sink``, once its ``open`` row was delivered."""
        ...

    def next_due(self, *, sinks: Sequence[SinkName]) -> datetime | None:
        """When the earliest waiting row of ``sinks`` becomes due (None: nothing waits)."""
        ...


# --- payload encoding: rows hold JSON; these are the only readers and writers of its shape


def encode_notification(notification: Notification) -> dict[str, Any]:
    """``notification`` as the JSON an outbox row stores."""
    group = notification.group
    return {
        "v": 1,
        "action": notification.action,
        "seq": notification.seq,
        "added": list(notification.added),
        "cleared": list(notification.cleared),
        "changed": list(notification.changed),
        "group": {
            "key": group.key,
            "generation": group.generation,
            "check": group.check,
            "entity": group.entity,
            "state": group.state.value,
            "opened_at": group.opened_at.isoformat(),
            "resolved_at": group.resolved_at.isoformat() if group.resolved_at else None,
            "acknowledged_by": group.acknowledged_by,
            "members": [
                {
                    "incident_id": m.incident_id,
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
                }
                for m in group.members
            ],
            **({"checks": _encode_infos(group.infos)} if group.infos else {}),
        },
    }


def with_infos(payload: Mapping[str, Any], infos: Mapping[str, CheckInfo]) -> dict[str, Any]:
    """``payload`` carrying the infos of its group's check and its members' checks.

    Copied at planning time, so the row renders the same if the check's plugin is uninstalled
    before the relay delivers it. Checks missing from ``infos`` are left out.
    """
    group = dict(payload["group"])
    names = {group["check"], *(m["check"] for m in group["members"])}
    group["checks"] = _encode_infos({name: infos[name] for name in names if name in infos})
    return {**payload, "group": group}


def _encode_infos(infos: Mapping[str, CheckInfo]) -> dict[str, Any]:
    return {name: _encode_info(infos[name]) for name in sorted(infos)}


def _encode_info(info: CheckInfo) -> dict[str, Any]:
    # The docs stay out: notifications do not show them, and they can be long.
    return {
        "name": info.name,
        "title": info.title,
        "tag": info.tag,
        "tag_description": info.tag_description,
        "incident_type": info.incident_type,
        "custom_incident_type": info.custom_incident_type,
        "why": info.why,
        "action": info.action,
        "folds_in": sorted(info.folds_in),
    }


def _decode_info(raw: Mapping[str, Any]) -> CheckInfo:
    return CheckInfo(
        name=raw["name"],
        title=raw["title"],
        tag=raw["tag"],
        tag_description=raw.get("tag_description", ""),
        incident_type=raw["incident_type"],
        custom_incident_type=raw.get("custom_incident_type"),
        why=raw.get("why", ""),
        action=raw.get("action", ""),
        folds_in=frozenset(raw.get("folds_in", ())),
    )


def decode_notification(payload: Mapping[str, Any]) -> Notification:
    """The :class:`Notification` an outbox row's JSON holds."""
    g = payload["group"]
    group = GroupSnapshot(
        key=g["key"],
        generation=int(g["generation"]),
        check=g["check"],
        entity=g["entity"],
        state=GroupState(g["state"]),
        opened_at=datetime.fromisoformat(g["opened_at"]),
        resolved_at=datetime.fromisoformat(g["resolved_at"]) if g.get("resolved_at") else None,
        acknowledged_by=g.get("acknowledged_by"),
        members=tuple(
            Member(
                incident_id=m["incident_id"],
                generation=int(m["generation"]),
                check=m["check"],
                severity=Severity(m["severity"]),
                model=m["model"],
                entity=m["entity"],
                field=m.get("field"),
                change=m.get("change"),
                previous_field=m.get("previous_field"),
                message=m["message"],
                path=tuple(m.get("path", ())),
                open=bool(m["open"]),
            )
            for m in g["members"]
        ),
        infos={name: _decode_info(raw) for name, raw in g.get("checks", {}).items()},
    )
    return Notification(
        action=payload["action"],
        seq=int(payload["seq"]),
        group=group,
        added=tuple(payload.get("added", ())),
        cleared=tuple(payload.get("cleared", ())),
        changed=tuple(payload.get("changed", ())),
    )
