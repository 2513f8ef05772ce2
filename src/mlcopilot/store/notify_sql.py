"""Notification groups and the outbox in SQL: planned inside a scan's transaction.

:func:`plan` reads the groups a scan touches and asks
:func:`mlcopilot.incidents.policy.decide` what to notify, overlaying the scan's incident
changes on what is stored (so ``--dry-run`` can show the same plan without writing);
:func:`apply` writes the plan in the caller's transaction.
The database has the last word: a second open generation of a group, or a second row with
the same dedupe key, is refused — so two scanners never notify twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    func,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from mlcopilot.incidents.grouping import group_of, inhibitors, member_state
from mlcopilot.incidents.payload import with_infos, with_report, with_route
from mlcopilot.incidents.policy import Decision, PendingRow, StoredGroup, decide, quiet
from mlcopilot.model import (
    GroupState,
    Incident,
    IncidentChanges,
    IncidentState,
    Member,
    NotifyRequest,
    OutboxStatus,
    PlannedRow,
    SinkName,
    Urn,
)
from mlcopilot.store import schema as t
from mlcopilot.store.chunks import WRITE_CHUNK, batches, chunks, one_of
from mlcopilot.store.rows import incident_from_mapping

WRITEBACK_GROUP = "-"
"""The group key of DataHub write-back rows: one ordered stream per database."""

WRITEBACK_PART = 10_000
"""Writes per write-back row. A scan's write-back is its rows in order, each part of its plan:
an estate's is half a million writes, which one row held as one JSON text (69 MB for 1,000
models), encoded whole when recorded and decoded whole when delivered."""


class PlanConflict(Exception):
    """A row the plan relied on changed meanwhile (claimed by a relay, or a group opened)."""


@dataclass(slots=True)
class Plan:
    """What a scan adds to the notification tables."""

    assignments: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    """(incident id, generation) -> (group key, group generation) for opened incidents."""
    decisions: list[Decision] = field(default_factory=list)
    writeback: list[PlannedRow] = field(default_factory=list)
    """The write-back's rows, its parts in order (none when there is nothing to write)."""

    @property
    def notifications(self) -> list[PlannedRow]:
        """The notification rows the plan inserts (every row but the write-back's)."""
        return [row for d in self.decisions for row in d.inserts]

    @property
    def rows(self) -> list[PlannedRow]:
        """Every row the plan inserts, write-back first."""
        return self.writeback + self.notifications


def plan(
    conn: Connection,
    changes: IncidentChanges,
    request: NotifyRequest,
    *,
    now: datetime,
    run_id: int | None,
    lock: bool,
) -> Plan:
    """Decide the groups and rows implied by ``changes`` (which are not yet stored)."""
    result = Plan()
    writes = request.writeback
    seq = run_id if run_id is not None else 0
    result.writeback = [
        PlannedRow(
            "datahub",
            "writeback",
            WRITEBACK_GROUP,
            0,
            seq,
            now,
            # Not copied: a scan's writes are encoded only if the row is stored (see _row).
            {"v": 1, "writes": writes[start : start + WRITEBACK_PART]},
            part=start // WRITEBACK_PART,
        )
        for start in range(0, len(writes), WRITEBACK_PART)
    ]
    folded_by = inhibitors(request.infos)
    roots = sorted({root for names in folded_by.values() for root in names})
    open_at = _open_roots_after(conn, changes, roots)
    # The members of a group share its one (key, check, entity) and its one (key,
    # generation): a first scan of an estate opens 282,022 incidents, and with a key string
    # and two tuples made for each the plan peaked 54 MB higher (1,015 -> 961 MB, probe).
    shared: dict[tuple[str, str, Urn], tuple[str, str, Urn]] = {}
    opening: dict[tuple[str, int], tuple[str, str, Urn]] = {}
    for inc in changes.opened:
        group_here = group_of(inc, open_at, folded_by)
        opening[(inc.id, inc.generation)] = shared.setdefault(group_here, group_here)
    del shared
    known = _stored_groups_of(conn, [*changes.updated, *changes.resolved])
    # Only the groups these changes touch are read (and locked): never the whole store's.
    keys = sorted({key for key, _, _ in opening.values()} | {key for key, _ in known})
    stored_open = _open_groups(conn, keys, lock=lock)
    next_generation = _max_generations(conn, keys)
    touched: dict[tuple[str, int], tuple[str, Urn]] = {}
    placed: dict[tuple[str, int], tuple[str, int]] = {}
    for incident_key, (key, check, entity) in opening.items():
        group = stored_open.get(key)
        generation = group.generation if group else next_generation.get(key, 0) + 1
        pair = placed.get((key, generation))
        if pair is None:
            pair = placed[(key, generation)] = (key, generation)
            touched[pair] = (check, entity)
        result.assignments[incident_key] = pair
    for key, generation in known:
        group = stored_open.get(key)
        if group is not None and group.generation == generation:
            touched[(key, generation)] = (group.check, group.entity)
    index = _ChangeIndex.of(changes, result.assignments)
    groups = sorted(touched)
    # Read per batch of groups, not per group (a scan touches thousands), nor all at once (a
    # group's stored members are only needed while it is decided).
    for start in range(0, len(groups), _GROUPS_PER_QUERY):
        batch = _unquiet(
            conn, groups[start : start + _GROUPS_PER_QUERY], stored_open, index, request, now
        )
        if not batch:
            continue
        stored_members = _stored_members(conn, batch)
        pending = _pending(conn, batch)
        for key, generation in batch:
            check, entity = touched[(key, generation)]
            group = stored_open.get(key)
            stored = group if group is not None and group.generation == generation else None
            members, acknowledged_by = _members(
                stored_members.get((key, generation), {}), key, generation, index
            )
            decision = decide(
                stored,
                members,
                pending.get((key, generation), []),
                key=key,
                check=check,
                entity=entity,
                next_generation=generation,
                acknowledged_by=acknowledged_by,
                sinks=_targets(members, request, stored),
                policy=request.policy,
                now=now,
                acknowledging=request.acknowledging,
            )
            if decision is not None:
                result.decisions.append(_carrying(decision, request))
    return result


def _targets(
    members: Sequence[Member], request: NotifyRequest, stored: StoredGroup | None
) -> tuple[SinkName, ...]:
    """The targets the group's open members are routed to.

    Members routed nowhere yet (no route given: a change made by hand, a scan without routing)
    count as the configured sinks for a new group and as nothing new for an open one.
    """
    found: list[SinkName] = []
    unrouted = False
    for member in members:
        if not member.open:
            continue
        routes = request.routes.get(member.incident_id)
        if routes is None:
            unrouted = True
            continue
        found += (r.target for r in routes)
    if unrouted and stored is None:
        found += request.sinks
    return tuple(dict.fromkeys(found))


def _carrying(decision: Decision, request: NotifyRequest) -> Decision:
    """``decision`` with its rows' payloads carrying infos, report links and routing extras.

    The infos of their checks (see ``with_infos``), the links to the scan's published report
    when ``report.url`` is set (see ``with_report``), and on an "open" the labels and mentions
    its target's routes ask for (see ``with_route``).
    """

    def carry(payload: Mapping[str, Any]) -> dict[str, Any]:
        return with_report(with_infos(payload, request.infos), request.report_url)

    def carry_row(row: PlannedRow) -> PlannedRow:
        payload = carry(row.payload)
        if row.action == "open" and request.routes:
            payload = with_route(payload, row.sink, request.routes)
        return replace(row, payload=payload)

    return replace(
        decision,
        inserts=tuple(carry_row(r) for r in decision.inserts),
        rewrites=tuple((row_id, carry(p)) for row_id, p in decision.rewrites),
    )


def apply(conn: Connection, result: Plan, *, now: datetime, run_id: int | None) -> None:
    """Write ``result`` in the caller's transaction (after the incidents were written)."""
    i = t.incidents
    # An executemany a part at a time, not a statement per incident: a first scan of an
    # estate opens 280,000.
    assign = (
        update(i)
        .where(i.c.id == bindparam("_id"), i.c.generation == bindparam("_generation"))
        .values(group_key=bindparam("_key"), group_generation=bindparam("_group_generation"))
    )
    for part in batches(result.assignments.items(), WRITE_CHUNK):
        conn.execute(
            assign,
            [
                {"_id": id_, "_generation": gen, "_key": key, "_group_generation": group_gen}
                for (id_, gen), (key, group_gen) in part
            ],
        )
    for decision in result.decisions:
        _save_group(conn, decision)
        for row_id, payload in decision.rewrites:
            _guarded(conn, row_id, {"payload": dict(payload)})
        for row_id in decision.cancels:
            _guarded(conn, row_id, {"status": OutboxStatus.CANCELLED.value})
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(t.outbox).on_conflict_do_nothing(index_elements=["dedupe_key"])
    # A write-back part a statement: each is encoded only as it is written.
    for row in result.writeback:
        conn.execute(stmt, _row(row, now=now, run_id=run_id))
    notifications = result.notifications
    if notifications:
        conn.execute(stmt, [_row(r, now=now, run_id=run_id) for r in notifications])


# --- reading


def _open_roots_after(
    conn: Connection, changes: IncidentChanges, roots: Sequence[str]
) -> dict[Urn, set[str]]:
    """Entity → which of the checks ``roots`` (those that fold others in) are open there.

    For the entities of the incidents ``changes`` opens (the only ones grouping asks about),
    as it will be once ``changes`` apply: stored open incidents not resolved by this scan,
    plus the ones it opens or sees again.
    """
    found: dict[Urn, set[str]] = {}
    entities = sorted({inc.entity for inc in changes.opened})
    if not roots or not entities:
        return found
    i = t.incidents
    resolved = {inc.id for inc in changes.resolved}
    for chunk in chunks(entities):
        query = select(i.c.entity, i.c.check_name, i.c.id).where(
            i.c.check_name.in_(roots),
            i.c.state != IncidentState.RESOLVED.value,
            i.c.entity.in_(chunk),
        )
        for entity, check, incident_id in conn.execute(query):
            if incident_id not in resolved:
                found.setdefault(entity, set()).add(check)
    for inc in (*changes.opened, *changes.updated):
        if inc.check in roots:
            found.setdefault(inc.entity, set()).add(inc.check)
    return found


def _open_groups(conn: Connection, keys: Sequence[str], *, lock: bool) -> dict[str, StoredGroup]:
    """The unresolved generation of each group of ``keys`` that has one.

    ``lock``: held ``FOR UPDATE`` on PostgreSQL until the transaction ends, taken in key order
    so that two scanners locking overlapping groups wait for each other, never deadlock.
    """
    g = t.notify_groups
    found: dict[str, StoredGroup] = {}
    for chunk in chunks(keys):
        query = (
            select(g)
            .where(g.c.state != GroupState.RESOLVED.value, g.c.key.in_(chunk))
            .order_by(g.c.key)
        )
        if lock and conn.dialect.name == "postgresql":
            query = query.with_for_update()
        found.update((row.key, _group_from(dict(row._mapping))) for row in conn.execute(query))
    return found


def _max_generations(conn: Connection, keys: Sequence[str]) -> dict[str, int]:
    """The newest generation of each group of ``keys`` that exists."""
    g = t.notify_groups
    found: dict[str, int] = {}
    for chunk in chunks(keys):
        query = (
            select(g.c.key, func.max(g.c.generation)).where(g.c.key.in_(chunk)).group_by(g.c.key)
        )
        found.update((key, int(gen)) for key, gen in conn.execute(query))
    return found


def _stored_groups_of(conn: Connection, incidents: Sequence[Incident]) -> set[tuple[str, int]]:
    """The stored groups, as (key, generation), that these generations of ``incidents`` are in.

    The groups only, not each incident's: a second scan of an estate refreshes 282,022
    incidents in 14,378 groups, and a map from each incident to its group held a fresh key
    string and two tuples per incident while the notifications were planned.
    """
    if not incidents:
        return set()
    i = t.incidents
    # By id, a scan's one generation of each: no (id, generation) tuple made per incident.
    generation_of: dict[str, int] = {}
    more: set[tuple[str, int]] = set()  # an id at another generation too (never a scan's)
    for inc in incidents:
        if generation_of.setdefault(inc.id, inc.generation) != inc.generation:
            more.add((inc.id, inc.generation))
    found: set[tuple[str, int]] = set()
    for chunk in chunks(sorted(generation_of)):
        query = select(i.c.id, i.c.generation, i.c.group_key, i.c.group_generation).where(
            one_of(conn, i.c.id, chunk), i.c.group_key.is_not(None)
        )
        for incident_id, generation, key, group_generation in conn.execute(query):
            if generation_of[incident_id] == generation or (incident_id, generation) in more:
                found.add((key, int(group_generation)))
    return found


@dataclass(frozen=True, slots=True)
class _ById:
    """Incidents by id: a scan's one generation of each in a plain map, any other aside.

    Not a list per id: a second scan of an estate refreshes 282,022 incidents, and as many
    one-element lists were held while its notifications were planned.
    """

    one: dict[str, Incident]
    more: dict[str, list[Incident]]
    """Ids given at another generation too (never a scan's): those generations."""

    @classmethod
    def of(cls, incidents: Iterable[Incident]) -> _ById:
        one: dict[str, Incident] = {}
        more: dict[str, list[Incident]] = {}
        for inc in incidents:
            if one.setdefault(inc.id, inc) is not inc:
                more.setdefault(inc.id, []).append(inc)
        return cls(one, more)

    def get(self, incident_id: str) -> tuple[Incident, ...]:
        """The generations of ``incident_id`` given, in the order given."""
        first = self.one.get(incident_id)
        if first is None:
            return ()
        return (first, *self.more.get(incident_id, ()))


@dataclass(frozen=True, slots=True)
class _ChangeIndex:
    """A scan's incident changes indexed once, so each group finds its own in constant time.

    Looping over every change for every group is quadratic in findings (tens of thousands
    of groups in an estate). Each keeps the order of ``changes``.
    """

    updated: _ById
    resolved: _ById
    opened: dict[tuple[str, int], list[Incident]]
    """(group key, group generation) -> the opened incidents assigned to it."""

    @classmethod
    def of(
        cls,
        changes: IncidentChanges,
        assignments: Mapping[tuple[str, int], tuple[str, int]],
    ) -> _ChangeIndex:
        """Index ``changes``; ``assignments`` places each opened incident in its group."""
        opened: dict[tuple[str, int], list[Incident]] = {}
        for inc in changes.opened:
            group = assignments.get((inc.id, inc.generation))
            if group is not None:
                opened.setdefault(group, []).append(inc)
        return cls(_ById.of(changes.updated), _ById.of(changes.resolved), opened)


_GROUPS_PER_QUERY = 100
"""(key, generation) pairs per read: two parameters each, under SQLite's limit. Their stored
members are held while the batch is decided: an estate's groups have dozens each."""


def _of_groups(groups: Sequence[tuple[str, int]]) -> tuple[ColumnElement[bool], ...]:
    """Where an incident is in one of ``groups`` (``(key, generation)`` pairs).

    The keys are named on their own too: SQLite answers a row-value IN alone by reading every
    incident, once per batch of groups (a second scan of an estate reads hundreds of
    batches), and searches the group index with them.
    """
    i = t.incidents
    keys = sorted({key for key, _ in groups})
    return i.c.group_key.in_(keys), tuple_(i.c.group_key, i.c.group_generation).in_(groups)


_MEMBER_COLUMNS = tuple(c for c in t.incidents.c if c.name != "evidence")
"""An incident's columns but its evidence: no member needs it, and it is most of the row (a
second scan of an estate reads every stored member of every group its findings are in)."""


_STATE_COLUMNS = (
    t.incidents.c.group_key,
    t.incidents.c.group_generation,
    t.incidents.c.id,
    t.incidents.c.generation,
    t.incidents.c.state,
    t.incidents.c.severity,
    t.incidents.c.change,
    t.incidents.c.previous_field,
    t.incidents.c.acknowledged_by,
)
"""What tells whether a group's notifications change (see :func:`_unquiet`)."""


def _unquiet(
    conn: Connection,
    groups: Sequence[tuple[str, int]],
    stored_open: Mapping[str, StoredGroup],
    index: _ChangeIndex,
    request: NotifyRequest,
    now: datetime,
) -> list[tuple[str, int]]:
    """``groups`` but those :func:`~mlcopilot.incidents.policy.quiet` says nothing changes for.

    Decided from each member's state, severity and change alone, read light and overlaid
    with ``index`` as :func:`_members` overlays the whole members: every group a rescan of
    models on shared upstream entities touches has members across the estate (~36,000 read
    whole, and locked meanwhile, by each batch of 250 of a 1,000-model estate), and nearly
    all of them are unchanged.
    """
    candidates = [
        (key, generation)
        for key, generation in groups
        if (stored := stored_open.get(key)) is not None
        and stored.generation == generation
        and not index.opened.get((key, generation))
    ]
    if not candidates:
        return list(groups)
    i = t.incidents
    query = select(*_STATE_COLUMNS).where(*_of_groups(candidates)).order_by(i.c.id, i.c.generation)
    latest: dict[tuple[str, int], dict[str, tuple[Any, ...]]] = {}
    for key, group_generation, incident_id, *rest in conn.execute(query):
        latest.setdefault((key, int(group_generation)), {})[incident_id] = tuple(rest)
    quiet_groups = {
        group
        for group in candidates
        if _quiet_group(stored_open[group[0]], latest.get(group, {}), index, request, now)
    }
    return [group for group in groups if group not in quiet_groups]


def _quiet_group(
    stored: StoredGroup,
    latest: Mapping[str, tuple[Any, ...]],
    index: _ChangeIndex,
    request: NotifyRequest,
    now: datetime,
) -> bool:
    """:func:`~mlcopilot.incidents.policy.quiet` of one group from its members' states."""
    current: dict[str, str] = {}
    acknowledged: list[str] = []
    for incident_id, (generation, state, severity, change, previous, by) in latest.items():
        for inc in index.updated.get(incident_id):
            if inc.generation == generation:  # refreshed: its content, the stored state
                severity, change, previous = inc.severity.value, inc.change, inc.previous_field
        if any(inc.generation == generation for inc in index.resolved.get(incident_id)):
            continue
        if state == IncidentState.RESOLVED.value:
            continue
        if state == IncidentState.ACKNOWLEDGED.value:
            acknowledged.append(by or "someone")
        current[incident_id] = member_state(severity, change, previous)
    by_whom = min(acknowledged) if acknowledged else None
    return quiet(stored, current, by_whom, policy=request.policy, now=now)


def _stored_members(
    conn: Connection, groups: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], dict[str, Mapping[str, Any]]]:
    """The stored latest generation of each incident of each group, by incident id.

    Within a group, incidents are in id order, as a query of that group alone gives them.
    Their evidence is not read (given as empty): :func:`_members` needs none of it.
    """
    i = t.incidents
    query = select(*_MEMBER_COLUMNS).where(*_of_groups(groups)).order_by(i.c.id, i.c.generation)
    found: dict[tuple[str, int], dict[str, Mapping[str, Any]]] = {}
    for row in conn.execute(query):
        group = (row.group_key, int(row.group_generation))
        found.setdefault(group, {})[row.id] = {**row._mapping, "evidence": {}}
    return found


def _members(
    latest: Mapping[str, Mapping[str, Any]],
    key: str,
    generation: int,
    changes: _ChangeIndex,
) -> tuple[list[Member], str | None]:
    """The group's members once ``changes`` apply, and who acknowledged an open one.

    ``latest``: the group's stored incidents (:func:`_stored_members`).
    """
    by_id: dict[str, Incident] = {}
    for incident_id, mapping in latest.items():
        by_id[incident_id] = _incident(mapping)
    # Only stored members can be updated or resolved; a change touches its own id alone, so
    # visiting the stored ids applies the same changes as visiting every change.
    stored_ids = list(by_id)
    for incident_id in stored_ids:
        for inc in changes.updated.get(incident_id):
            stored = by_id[incident_id]
            if stored.generation == inc.generation:
                # The stored state wins: an acknowledgement made while the scan ran is kept.
                by_id[incident_id] = _with_state(inc, stored)
    for incident_id in stored_ids:
        for inc in changes.resolved.get(incident_id):
            if by_id[incident_id].generation == inc.generation:
                by_id[incident_id] = inc
    for inc in changes.opened.get((key, generation), ()):
        by_id[inc.id] = inc
    acknowledged = sorted(
        (inc.acknowledged_by or "someone")
        for inc in by_id.values()
        if inc.state is IncidentState.ACKNOWLEDGED
    )
    return [_member(inc) for inc in by_id.values()], (acknowledged[0] if acknowledged else None)


def _pending(
    conn: Connection, groups: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], list[PendingRow]]:
    """Each group's pending notification rows, in id order."""
    o = t.outbox
    query = (
        select(o.c.id, o.c.sink, o.c.action, o.c.seq, o.c.payload)
        .add_columns(o.c.group_key, o.c.group_generation)  # to tell the groups apart
        .where(
            and_(
                tuple_(o.c.group_key, o.c.group_generation).in_(groups),
                o.c.status == OutboxStatus.PENDING.value,
                o.c.sink != "datahub",
            )
        )
        .order_by(o.c.id)
    )
    found: dict[tuple[str, int], list[PendingRow]] = {}
    for r in conn.execute(query):
        row = PendingRow(id=r.id, sink=r.sink, action=r.action, seq=r.seq, payload=r.payload)
        found.setdefault((r.group_key, int(r.group_generation)), []).append(row)
    return found


# --- writing


def _save_group(conn: Connection, decision: Decision) -> None:
    g = t.notify_groups
    group = decision.group
    values = {
        "state": group.state.value,
        "notified_at": group.notified_at,
        "resolved_at": group.resolved_at,
        "acknowledged_by": group.acknowledged_by,
        "notified": dict(group.notified),
        "sinks": list(group.sinks),
        "updates": group.updates,
        "reminders": group.reminders,
    }
    if decision.is_new:
        conn.execute(
            insert(g).values(
                key=group.key,
                generation=group.generation,
                check_name=group.check,
                entity=group.entity,
                opened_at=group.opened_at,
                **values,
            )
        )
        return
    result = conn.execute(
        update(g)
        .where(
            g.c.key == group.key,
            g.c.generation == group.generation,
            g.c.state != GroupState.RESOLVED.value,
        )
        .values(**values)
    )
    if result.rowcount != 1:
        raise PlanConflict(f"notification group {group.key} changed meanwhile")


def _guarded(conn: Connection, row_id: int, values: Mapping[str, Any]) -> None:
    o = t.outbox
    result = conn.execute(
        update(o).where(o.c.id == row_id, o.c.status == OutboxStatus.PENDING.value).values(**values)
    )
    if result.rowcount != 1:
        raise PlanConflict(f"outbox row {row_id} was picked up by a relay meanwhile")


def _stored_payload(row: PlannedRow) -> dict[str, Any]:
    """``row``'s payload as its JSON column takes it: a write-back's writes made a list.

    A scan plans them as :class:`~mlcopilot.notify.sinks.datahub.EncodedWrites`, encoded
    only now (a dry run never stores the row).
    """
    payload = dict(row.payload)
    writes = payload.get("writes")
    if row.action == "writeback" and writes is not None and not isinstance(writes, list):
        payload["writes"] = list(writes)
    return payload


def _row(row: PlannedRow, *, now: datetime, run_id: int | None) -> dict[str, Any]:
    return {
        "dedupe_key": row.dedupe_key,
        "sink": row.sink,
        "action": row.action,
        "group_key": row.group_key,
        "group_generation": row.group_generation,
        "seq": row.seq,
        "payload": _stored_payload(row),
        "status": OutboxStatus.PENDING.value,
        "attempts": 0,
        "uncertain": False,
        "created_at": now,
        "not_before": row.not_before,
        "next_attempt_at": now,
        "run_id": run_id,
    }


# --- rows <-> types


def _group_from(m: Mapping[str, Any]) -> StoredGroup:
    sinks: tuple[SinkName, ...] = tuple(m["sinks"])
    return StoredGroup(
        key=m["key"],
        generation=int(m["generation"]),
        check=m["check_name"],
        entity=m["entity"],
        state=GroupState(m["state"]),
        opened_at=m["opened_at"],
        notified_at=m["notified_at"],
        notified=dict(m["notified"]),
        sinks=sinks,
        updates=int(m["updates"]),
        reminders=int(m["reminders"]),
        resolved_at=m["resolved_at"],
        acknowledged_by=m["acknowledged_by"],
    )


def _incident(m: Mapping[str, Any]) -> Incident:
    return incident_from_mapping(m)


def _with_state(refreshed: Incident, stored: Incident) -> Incident:
    if (refreshed.state, refreshed.acknowledged_at, refreshed.acknowledged_by) == (
        stored.state,
        stored.acknowledged_at,
        stored.acknowledged_by,
    ):
        return refreshed  # the same state already (a scan's common case): no copy
    return replace(
        refreshed,
        state=stored.state,
        acknowledged_at=stored.acknowledged_at,
        acknowledged_by=stored.acknowledged_by,
    )


def _member(inc: Incident) -> Member:
    return Member(
        incident_id=inc.id,
        generation=inc.generation,
        check=inc.check,
        severity=inc.severity,
        model=inc.model,
        entity=inc.entity,
        field=inc.field,
        change=inc.change,
        previous_field=inc.previous_field,
        message=inc.message,
        path=tuple(inc.path),
        open=inc.is_open,
    )
