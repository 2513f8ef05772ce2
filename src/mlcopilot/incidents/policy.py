"""The notification lifecycle policy, as one pure function: no I/O, no clock, no database.

PagerDuty's semantics with Alertmanager's timing, per group (one root cause)::

    group opens (first open member)          -> "open" on each of its targets, after group_wait
    a routed member asks for a new target    -> "open" there (the group joins it), with the
                                                next update
    members or their severity change         -> one "update" (threaded), at most every
                                                group_interval; later changes fold into it
    open, unchanged, unacknowledged          -> a "reminder" at most every repeat_interval
    acknowledged                             -> "acknowledge" on the targets whose sink takes
                                                it (PagerDuty...); nothing more but the resolve
    every member cleared                     -> "resolve" (issue closed, root message edited);
                                                when the "open" was never sent, nothing at all
    a member recurs after the group resolved -> a new generation: a new issue and thread

The store calls :func:`decide` inside the scan's transaction with the group as stored and
its members as they are after the scan, and writes what it returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from mlcopilot.incidents.grouping import diff, member_state
from mlcopilot.incidents.payload import (
    Action,
    GroupSnapshot,
    GroupState,
    Member,
    Notification,
    NotifyPolicy,
    PlannedRow,
    SinkName,
    encode_notification,
)
from mlcopilot.model import Urn, sink_of


@dataclass(frozen=True, slots=True)
class StoredGroup:
    """A notification group generation as the store keeps it.

    ``notified`` maps each open member's incident id to its :func:`member_state` as of the last
    planned notification; comparing it with the members now tells whether to update.
    """

    key: str
    generation: int
    check: str
    entity: Urn
    state: GroupState
    opened_at: datetime
    notified_at: datetime
    notified: Mapping[str, str]
    sinks: tuple[SinkName, ...]
    updates: int = 0
    reminders: int = 0
    resolved_at: datetime | None = None
    acknowledged_by: str | None = None


@dataclass(frozen=True, slots=True)
class PendingRow:
    """An outbox row of the group not yet picked up by a relay (it can still change)."""

    id: int
    sink: SinkName
    action: Action
    seq: int
    payload: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Decision:
    """What to store for one group: its new state, rows to add, rewrite and cancel."""

    group: StoredGroup
    is_new: bool
    inserts: tuple[PlannedRow, ...] = ()
    rewrites: tuple[tuple[int, Mapping[str, Any]], ...] = ()
    cancels: tuple[int, ...] = ()


def decide(
    stored: StoredGroup | None,
    members: Sequence[Member],
    pending: Sequence[PendingRow],
    *,
    key: str,
    check: str,
    entity: Urn,
    next_generation: int,
    acknowledged_by: str | None,
    sinks: Sequence[SinkName],
    policy: NotifyPolicy,
    now: datetime,
    acknowledging: frozenset[str] = frozenset(),
) -> Decision | None:
    """Decide what one group's notifications are after a scan.

    Args:
        stored: The group's latest generation as stored (None: never seen).
        members: The group's members after the scan: for an open group, every incident of
            its generation; for a new one, the incidents about to open it.
        pending: The group's rows that no relay has picked up yet.
        key: The group key.
        check: The group's root risk kind.
        entity: The group's upstream entity.
        next_generation: The generation a new group would get.
        acknowledged_by: Who acknowledged an open member, if anyone did.
        sinks: The targets the group's open members are routed to: a new group opens on
            these; an open group joins those it lacks with its next update.
        policy: The timing.
        now: The scan time.
        acknowledging: The sinks told of an acknowledgement (an "acknowledge" row).

    Returns:
        The decision, or None when nothing changes.
    """
    current = {
        m.incident_id: member_state(m.severity.value, m.change, m.previous_field)
        for m in members
        if m.open
    }
    if stored is None or stored.state is GroupState.RESOLVED:
        if not current:
            return None
        return _open(key, check, entity, next_generation, members, current, sinks, policy, now)
    if not current:
        return _resolve(stored, members, pending, policy, now)
    if acknowledged_by is not None:
        if stored.state is GroupState.ACKNOWLEDGED:
            return None
        group = replace(stored, state=GroupState.ACKNOWLEDGED, acknowledged_by=acknowledged_by)
        return _acknowledge(group, members, now, acknowledging)
    added, cleared, changed = diff(stored.notified, current)
    if added or cleared or changed:
        joining = [s for s in sinks if s not in stored.sinks]
        return _update(stored, members, pending, current, policy, now, joining)
    repeat = policy.repeat_interval
    if repeat is not None and now - stored.notified_at >= repeat:
        return _remind(stored, members, pending, now)
    return None


def quiet(
    stored: StoredGroup | None,
    current: Mapping[str, str],
    acknowledged_by: str | None,
    *,
    policy: NotifyPolicy,
    now: datetime,
) -> bool:
    """Whether :func:`decide` returns None for ``stored`` whatever else its members hold.

    ``current``: each open member's :func:`member_state`; ``acknowledged_by``: as for
    :func:`decide`. True only where :func:`decide` decides from these alone, without the
    members' content or the pending rows: an open group whose members' states are the ones
    last notified, with no reminder due, or an acknowledged group with a member still
    acknowledged. A scan of models sharing upstream entities touches thousands of such groups
    (every member refreshed, none changed): their members need not be read whole.
    """
    if stored is None or stored.state is GroupState.RESOLVED or not current:
        return False
    if acknowledged_by is not None:
        return stored.state is GroupState.ACKNOWLEDGED
    if any(diff(stored.notified, current)):
        return False
    repeat = policy.repeat_interval
    return repeat is None or now - stored.notified_at < repeat


_LATEST = datetime.max.replace(tzinfo=UTC)


def _later(at: datetime, delay: timedelta) -> datetime:
    """``at + delay``, saturating at the last representable instant instead of overflowing.

    A clock near the end of the calendar (or a huge configured interval) must not crash a
    scan: a notification due "after the end of time" is simply never due.
    """
    try:
        return at + delay
    except OverflowError:
        return _LATEST if delay >= timedelta(0) else datetime.min.replace(tzinfo=UTC)


def _snapshot(
    group: StoredGroup, members: Sequence[Member], state: GroupState | None = None
) -> GroupSnapshot:
    return GroupSnapshot(
        key=group.key,
        generation=group.generation,
        check=group.check,
        entity=group.entity,
        state=state or group.state,
        opened_at=group.opened_at,
        members=tuple(sorted(members, key=lambda m: (m.model, m.entity, m.field or ""))),
        resolved_at=group.resolved_at,
        acknowledged_by=group.acknowledged_by,
    )


def _payload(
    action: Action,
    seq: int,
    snapshot: GroupSnapshot,
    base: Mapping[str, str],
    current: Mapping[str, str],
) -> dict[str, Any]:
    added, cleared, changed = diff(base, current)
    notification = Notification(action, seq, snapshot, added, cleared, changed)
    payload = encode_notification(notification)
    payload["base"] = dict(base)
    return payload


def _open(
    key: str,
    check: str,
    entity: Urn,
    generation: int,
    members: Sequence[Member],
    current: Mapping[str, str],
    sinks: Sequence[SinkName],
    policy: NotifyPolicy,
    now: datetime,
) -> Decision:
    group = StoredGroup(
        key=key,
        generation=generation,
        check=check,
        entity=entity,
        state=GroupState.OPEN,
        opened_at=now,
        notified_at=_later(now, policy.group_wait),
        notified=dict(current),
        sinks=tuple(sinks),
    )
    payload = _payload("open", 0, _snapshot(group, members), {}, current)
    rows = tuple(
        PlannedRow(sink, "open", key, generation, 0, _later(now, policy.group_wait), payload)
        for sink in group.sinks
    )
    return Decision(group=group, is_new=True, inserts=rows)


def _resolve(
    stored: StoredGroup,
    members: Sequence[Member],
    pending: Sequence[PendingRow],
    policy: NotifyPolicy,
    now: datetime,
) -> Decision:
    group = replace(stored, state=GroupState.RESOLVED, resolved_at=now, notified={})
    snapshot = _snapshot(group, members)
    inserts: list[PlannedRow] = []
    cancels: list[int] = []
    for sink in stored.sinks:
        rows = [r for r in pending if r.sink == sink]
        # Superseded by the resolution; an "open" never sent means nobody needs to hear more.
        cancels += [r.id for r in rows]
        if any(r.action == "open" for r in rows) or not policy.notify_resolved:
            continue
        payload = _payload("resolve", 0, snapshot, stored.notified, {})
        inserts.append(PlannedRow(sink, "resolve", stored.key, stored.generation, 0, now, payload))
    return Decision(group=group, is_new=False, inserts=tuple(inserts), cancels=tuple(cancels))


def _acknowledge(
    group: StoredGroup, members: Sequence[Member], now: datetime, acknowledging: frozenset[str]
) -> Decision:
    """The group acknowledged: an "acknowledge" row on each target whose sink takes one."""
    snapshot = _snapshot(group, members)
    current = dict(group.notified)
    inserts = tuple(
        PlannedRow(
            sink,
            "acknowledge",
            group.key,
            group.generation,
            0,
            now,
            _payload("acknowledge", 0, snapshot, current, current),
        )
        for sink in group.sinks
        if sink_of(sink) in acknowledging
    )
    return Decision(group=group, is_new=False, inserts=inserts)


def _update(
    stored: StoredGroup,
    members: Sequence[Member],
    pending: Sequence[PendingRow],
    current: Mapping[str, str],
    policy: NotifyPolicy,
    now: datetime,
    joining: Sequence[SinkName] = (),
) -> Decision:
    snapshot = _snapshot(stored, members)
    seq = stored.updates + 1
    not_before = max(now, _later(stored.notified_at, policy.group_interval))
    inserts: list[PlannedRow] = []
    rewrites: list[tuple[int, Mapping[str, Any]]] = []
    inserted = False
    for sink in stored.sinks:
        waiting = [r for r in pending if r.sink == sink]
        if waiting:
            # Not sent yet: fold this change into it rather than queue a second message.
            last = waiting[-1]
            base = last.payload.get("base", {})
            payload = _payload(last.action, last.seq, snapshot, base, current)
            if "route" in last.payload:  # the labels and mentions its target was opened with
                payload["route"] = last.payload["route"]
            rewrites.append((last.id, payload))
            continue
        payload = _payload("update", seq, snapshot, stored.notified, current)
        inserts.append(
            PlannedRow(sink, "update", stored.key, stored.generation, seq, not_before, payload)
        )
        inserted = True
    # A target the group did not have (a routed member's team): it hears of the group now.
    opening = _payload("open", 0, snapshot, {}, current)
    inserts += [
        PlannedRow(sink, "open", stored.key, stored.generation, 0, now, opening) for sink in joining
    ]
    group = replace(
        stored,
        notified=dict(current),
        notified_at=not_before if inserted else stored.notified_at,
        updates=seq if inserted else stored.updates,
        sinks=(*stored.sinks, *joining),
    )
    return Decision(group=group, is_new=False, inserts=tuple(inserts), rewrites=tuple(rewrites))


def _remind(
    stored: StoredGroup,
    members: Sequence[Member],
    pending: Sequence[PendingRow],
    now: datetime,
) -> Decision | None:
    seq = stored.reminders + 1
    snapshot = _snapshot(stored, members)
    inserts = tuple(
        PlannedRow(
            sink,
            "reminder",
            stored.key,
            stored.generation,
            seq,
            now,
            _payload("reminder", seq, snapshot, stored.notified, stored.notified),
        )
        for sink in stored.sinks
        if not any(r.sink == sink for r in pending)
    )
    if not inserts:
        return None
    group = replace(stored, notified_at=now, reminders=seq)
    return Decision(group=group, is_new=False, inserts=inserts)
