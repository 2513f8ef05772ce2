"""What notifying people is made of: groups and their members, notifications, outbox rows.

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
from typing import Any, Literal, NamedTuple

from mlcopilot.model.catalog import Urn
from mlcopilot.model.findings import CheckInfo, IncidentState, Severity

SinkName = str
"""A sink target: the sink's name (``slack``, ``pagerduty``, a plugin's), or its name and the
destination routing chose, after a colon (``slack:C0PAYMENTS``, ``github:acme/payments-ml``).
An outbox row, its dedupe key and a group's reference in a sink are per target, so a group's
thread lives in the channel it started in."""
NOTIFY_SINKS: tuple[SinkName, ...] = ("github", "slack", "pagerduty", "teams", "webhook")
"""The built-in sinks that notify people (DataHub receives the write-back, not notifications)."""

Action = Literal["writeback", "open", "update", "reminder", "acknowledge", "resolve"]
"""What a row does: the write-back, or one transition of a group's notification."""
NOTIFY_ACTIONS: tuple[Action, ...] = ("open", "update", "reminder", "acknowledge", "resolve")


def sink_of(target: SinkName) -> str:
    """The sink a target goes through: ``slack`` for ``slack:C0PAYMENTS``."""
    return target.split(":", 1)[0]


def destination_of(target: SinkName) -> str | None:
    """The destination routing chose (``C0PAYMENTS``), or None for the sink's default."""
    _, colon, rest = target.partition(":")
    return rest if colon and rest else None


def target_of(sink: str, destination: str | None = None) -> SinkName:
    """The target of ``sink`` at ``destination`` (the sink's default when None)."""
    return f"{sink}:{destination}" if destination else sink


class OutboxStatus(StrEnum):
    """Where an outbox row is in its delivery."""

    PENDING = "pending"
    SENDING = "sending"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"


GroupState = IncidentState
"""A notification group's lifecycle (one root cause, one issue, one Slack thread): the same
open, acknowledged, resolved as its incidents', so it is the same enum."""


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
    the row was planned (see :func:`mlcopilot.incidents.payload.with_infos`); a row planned before
    rows carried them has none, and the renderer falls back to the built-in checks' infos.
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
    report_urls: Mapping[Urn, str] = field(default_factory=dict)
    """Model → the published HTML report of the scan that planned the row (``report.url``);
    empty when none is configured, and in rows planned before rows carried it."""


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
    lease_owner: str | None = None
    """The relay delivering a ``sending`` row (host:pid:id)."""
    lease_expires_at: datetime | None = None
    """When a ``sending`` row may be claimed again, should its relay have died."""


@dataclass(frozen=True, slots=True)
class SinkRef:
    """Where a group lives in a sink: the GitHub issue, the Slack root message."""

    sink: SinkName
    key: str
    """The issue number, or ``channel/ts``."""
    url: str | None = None
    data: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Claimed:
    """An outbox row a relay claimed, with where its group already lives in the row's sink."""

    item: OutboxItem
    ref: SinkRef | None = None
    """The group's issue or root message, once its ``open`` was delivered (never for a
    write-back row)."""


@dataclass(frozen=True, slots=True)
class Delivered:
    """What a sink did: the reference to remember (if new) and any warning to report."""

    ref: SinkRef | None = None
    warning: str | None = None
    detail: Any = None


@dataclass(frozen=True, slots=True)
class Mention:
    """A person a message names: live (``<@U…>``) when Slack knows them by a member id."""

    name: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class Route:
    """Where one incident is told, and why (a rule, the owners in DataHub, the default)."""

    target: SinkName
    why: str
    labels: tuple[str, ...] = ()
    """GitHub labels a rule adds to the group's issue."""
    mentions: tuple[Mention, ...] = ()
    """The owning people a Slack message names."""


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
    report_url: str | None = None
    """``report.url``, checked: where this scan's HTML report is published, so its rows link
    to it (see :func:`mlcopilot.incidents.payload.with_report`). None for changes made by hand."""
    routes: Mapping[str, tuple[Route, ...]] = field(default_factory=dict)
    """Incident id → where it is told (:mod:`mlcopilot.notify.routing`). A group opens on the
    targets of its open members; an incident routed nowhere yet (none given) counts as
    ``sinks``. A target a group did not have joins it (with an "open") when a routed member
    asks for it."""
    acknowledging: frozenset[str] = frozenset()
    """The sinks that take an "acknowledge" row when a group is acknowledged (PagerDuty...)."""


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
    part: int = 0
    """Which part of a scan's write-back this row is (a row holds at most
    :data:`~mlcopilot.store.notify_sql.WRITEBACK_PART` writes); 0 for every other row."""

    @property
    def dedupe_key(self) -> str:
        """Unique per notification: the database refuses a second row with it."""
        return dedupe_key(
            self.sink, self.group_key, self.group_generation, self.action, self.seq, self.part
        )


@dataclass(frozen=True, slots=True)
class RecordedScan:
    """What :meth:`~mlcopilot.protocols.StateStore.record_scan` committed."""

    run_id: int
    """The stored scan run's id (increasing)."""
    rows: tuple[PlannedRow, ...] = ()
    """The outbox rows planned in the same transaction, write-back first."""


def dedupe_key(
    sink: str, group_key: str, generation: int, action: str, seq: int, part: int = 0
) -> str:
    """``sink:group:generation:action:seq`` — the outbox's uniqueness key.

    A write-back's later parts add ``.part`` (the first keeps the key it always had).
    """
    key = f"{sink}:{group_key}:{generation}:{action}:{seq}"
    return f"{key}.{part}" if part else key


class WatchedMember(NamedTuple):
    """An open incident of a watched group, as reading acknowledgements back names it."""

    id: str
    generation: int
    model: Urn

    @property
    def key(self) -> str:
        """``id`` plus generation, as :attr:`Incident.key`: its DataHub incident's name."""
        return f"{self.id}-{self.generation}"


@dataclass(frozen=True, slots=True)
class WatchedGroup:
    """An open, unacknowledged group: where it lives in each sink and its open incidents.

    The incidents are named, not read whole: a group on a shared upstream entity has
    members across the estate, read again by every batch of a full rescan.
    """

    key: str
    generation: int
    refs: Mapping[SinkName, SinkRef]
    incidents: tuple[WatchedMember, ...]
