"""The relay's side of the outbox in SQL: claim a row, then mark it done, retried or dead.

A claim takes the oldest due row whose predecessors in the same (sink, group) are all done,
so an issue is created before it is commented on and closed. PostgreSQL claims with
``FOR UPDATE SKIP LOCKED``, so concurrent relays never take the same row; SQLite serialises
writers with ``BEGIN IMMEDIATE``. A claimed row carries a lease: a relay that dies mid-delivery
leaves the row ``sending`` until the lease expires, and the next claim marks it ``uncertain``
so the sink reconciles before sending again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Connection, and_, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from mlcopilot.errors import StoreError
from mlcopilot.model import Delivered, OutboxItem, OutboxStatus, SinkName, SinkRef
from mlcopilot.notify.codec import problems
from mlcopilot.redact import redact
from mlcopilot.store import schema as t

_BLOCKING = (OutboxStatus.PENDING.value, OutboxStatus.SENDING.value, OutboxStatus.DEAD.value)
CLAIM_WINDOW = 50
"""Due rows a claim considers at once, oldest first (see :func:`claim`)."""


def claim(
    conn: Connection, *, sinks: Sequence[SinkName], owner: str, now: datetime, lease: timedelta
) -> OutboxItem | None:
    """Take the next deliverable row of ``sinks`` for ``owner`` (None: nothing is due).

    The due rows are looked at :data:`CLAIM_WINDOW` at a time, oldest first, and only those
    are checked for an undelivered predecessor: asked of every due row at once, the check ran
    once per row of a backlog for each claim (15 ms a claim with 3,000 rows waiting on
    PostgreSQL), so a relay slowed down as it fell behind.
    """
    o = t.outbox
    earlier = o.alias("earlier")
    blocked = (
        select(earlier.c.id)
        .where(
            earlier.c.sink == o.c.sink,
            earlier.c.group_key == o.c.group_key,
            earlier.c.group_generation == o.c.group_generation,
            earlier.c.id < o.c.id,
            earlier.c.status.in_(_BLOCKING),
            # A write-back row holds the whole desired state: a dead older one must not
            # stall the newer ones (a notification, though, needs its group's open first).
            or_(o.c.sink != "datahub", earlier.c.status != OutboxStatus.DEAD.value),
        )
        .exists()
    )
    due = (
        o.c.sink.in_(list(sinks)),
        o.c.not_before <= now,
        o.c.next_attempt_at <= now,
        or_(
            o.c.status == OutboxStatus.PENDING.value,
            and_(o.c.status == OutboxStatus.SENDING.value, o.c.lease_expires_at <= now),
        ),
    )
    after = 0
    while True:
        window = list(
            conn.execute(
                select(o.c.id).where(*due, o.c.id > after).order_by(o.c.id).limit(CLAIM_WINDOW)
            ).scalars()
        )
        if not window:
            return None
        query = select(o).where(o.c.id.in_(window), *due, ~blocked).order_by(o.c.id).limit(1)
        if conn.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True, of=o)
        row = conn.execute(query).first()
        if row is not None:
            break
        after = window[-1]  # every one of these is blocked or being claimed: look further
    m = dict(row._mapping)
    # A row still "sending" was being delivered by a relay that died: it may have landed.
    uncertain = bool(m["uncertain"]) or m["status"] == OutboxStatus.SENDING.value
    attempts = int(m["attempts"]) + 1
    conn.execute(
        update(o)
        .where(o.c.id == m["id"])
        .values(
            status=OutboxStatus.SENDING.value,
            attempts=attempts,
            uncertain=uncertain,
            lease_owner=owner,
            lease_expires_at=now + lease,
        )
    )
    return item_from(
        {**m, "status": OutboxStatus.SENDING.value, "attempts": attempts, "uncertain": uncertain}
    )


def complete(
    conn: Connection, item: OutboxItem, delivered: Delivered, *, owner: str, now: datetime
) -> bool:
    """Mark ``item`` done and store its sink reference; False if ``owner`` lost the lease."""
    o = t.outbox
    result = conn.execute(
        update(o)
        .where(
            o.c.id == item.id,
            o.c.status == OutboxStatus.SENDING.value,
            o.c.lease_owner == owner,
        )
        .values(
            status=OutboxStatus.DONE.value,
            delivered_at=now,
            lease_owner=None,
            lease_expires_at=None,
            warning=redact(delivered.warning) if delivered.warning else None,
        )
    )
    if delivered.ref is not None:
        ref = delivered.ref
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        stmt = dialect.insert(t.sink_refs).on_conflict_do_nothing(
            index_elements=["group_key", "group_generation", "sink"]
        )
        conn.execute(
            stmt,
            {
                "group_key": item.group_key,
                "group_generation": item.group_generation,
                "sink": ref.sink,
                "ref": ref.key,
                "url": ref.url,
                "data": dict(ref.data or {}),
                "created_at": now,
            },
        )
    return bool(result.rowcount == 1)


def fail(
    conn: Connection,
    item: OutboxItem,
    *,
    owner: str,
    error: str,
    now: datetime,
    retry_at: datetime | None,
    uncertain: bool,
    count_attempt: bool,
) -> None:
    """Put ``item`` back to pending until ``retry_at``, or make it dead (``retry_at`` None)."""
    o = t.outbox
    values: dict[str, Any] = {
        "status": OutboxStatus.PENDING.value if retry_at else OutboxStatus.DEAD.value,
        "last_error": redact(error)[:2000],
        "lease_owner": None,
        "lease_expires_at": None,
        "uncertain": uncertain or item.uncertain,
        "next_attempt_at": retry_at or now,
    }
    if not count_attempt:
        values["attempts"] = max(0, item.attempts - 1)
    conn.execute(
        update(o)
        .where(
            o.c.id == item.id, o.c.status == OutboxStatus.SENDING.value, o.c.lease_owner == owner
        )
        .values(**values)
    )


def sink_ref(conn: Connection, group_key: str, generation: int, sink: SinkName) -> SinkRef | None:
    """The stored reference of a group in ``sink``."""
    r = t.sink_refs
    row = conn.execute(
        select(r).where(
            r.c.group_key == group_key, r.c.group_generation == generation, r.c.sink == sink
        )
    ).first()
    if row is None:
        return None
    m = row._mapping
    return SinkRef(sink=m["sink"], key=m["ref"], url=m["url"], data=dict(m["data"]))


def next_due(conn: Connection, *, sinks: Sequence[SinkName]) -> datetime | None:
    """When the earliest waiting row of ``sinks`` becomes due."""
    o = t.outbox
    pending = select(func.min(o.c.not_before), func.min(o.c.next_attempt_at)).where(
        o.c.sink.in_(list(sinks)), o.c.status == OutboxStatus.PENDING.value
    )
    leased = select(func.min(o.c.lease_expires_at)).where(
        o.c.sink.in_(list(sinks)), o.c.status == OutboxStatus.SENDING.value
    )
    not_before, next_attempt = conn.execute(pending).one()
    lease = conn.execute(leased).scalar()
    candidates = []
    if not_before is not None:
        candidates.append(max(not_before, next_attempt))
    if lease is not None:
        candidates.append(lease)
    if not candidates:
        return None
    return _aware(min(candidates))


def held(conn: Connection, *, sinks: Sequence[SinkName], now: datetime) -> list[OutboxItem]:
    """Rows of ``sinks`` still ``sending`` under a lease that runs past ``now``, oldest first."""
    o = t.outbox
    query = (
        select(o)
        .where(
            o.c.sink.in_(list(sinks)),
            o.c.status == OutboxStatus.SENDING.value,
            o.c.lease_expires_at > now,
        )
        .order_by(o.c.id)
    )
    return [item_from(dict(row._mapping)) for row in conn.execute(query)]


def items(
    conn: Connection, *, statuses: Sequence[OutboxStatus] | None, limit: int
) -> list[OutboxItem]:
    """Outbox rows, newest first, optionally only in ``statuses``."""
    o = t.outbox
    query = select(o).order_by(o.c.id.desc()).limit(limit)
    if statuses:
        query = query.where(o.c.status.in_([s.value for s in statuses]))
    return [item_from(dict(row._mapping)) for row in conn.execute(query)]


def retry(conn: Connection, ids: Sequence[int] | None, *, now: datetime) -> int:
    """Make dead rows (``ids``, or every dead row) pending again, due now; how many."""
    o = t.outbox
    stmt = (
        update(o)
        .where(o.c.status == OutboxStatus.DEAD.value)
        .values(status=OutboxStatus.PENDING.value, attempts=0, next_attempt_at=now)
    )
    if ids is not None:
        stmt = stmt.where(o.c.id.in_(list(ids)))
    return int(conn.execute(stmt).rowcount)


_ITEM: Final = TypeAdapter(OutboxItem)


def item_from(m: Mapping[str, Any]) -> OutboxItem:
    """An :class:`OutboxItem` from an ``outbox`` row: its columns are the item's fields.

    Raises:
        StoreError: A column holds what no outbox row may (an unknown action, say).
    """
    try:
        return _ITEM.validate_python(m)
    except ValidationError as exc:
        raise StoreError(f"outbox row {m.get('id')} is unreadable: {problems(exc)}") from exc


def _aware(value: datetime) -> datetime:
    # Aggregates (MIN) bypass the column type on SQLite and come back as naive UTC text.
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
