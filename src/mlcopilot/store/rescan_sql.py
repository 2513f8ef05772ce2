"""Rescan requests in SQL: record (coalesced per model), claim under a lease, complete, fail.

``mlcopilot watch`` records a request per affected model as events arrive and a worker claims
them. Like the outbox's claim, PostgreSQL claims with ``FOR UPDATE SKIP LOCKED`` so concurrent
watchers on one database split the requests and never scan one twice at once; SQLite
serialises writers with ``BEGIN IMMEDIATE``. A claim carries a lease: a watcher that dies
mid-scan leaves its rows claimed until the lease expires, then another watcher takes them; a
live watcher renews the lease of the rows it holds while it scans (:func:`renew`), so a scan
longer than the lease keeps its claim.

A full rescan is split into batch requests (:func:`split`), rows keyed ``*/...`` with their
models in ``models``, claimed one per claim by every watcher and ``mlcopilot scan --shared``
on the database, after the requests for models (an event's rescan never waits behind a full
rescan's batches).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import (
    Connection,
    Select,
    and_,
    any_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from mlcopilot.model import Urn
from mlcopilot.protocols import BATCH_PREFIX, RescanRequest, RescanSplit
from mlcopilot.redact import redact
from mlcopilot.store import schema as t
from mlcopilot.store import wakeups
from mlcopilot.store.chunks import chunks

_REASON_LIMIT = 500
_ERROR_LIMIT = 2000


def request(conn: Connection, models: Sequence[Urn], *, reason: str, now: datetime) -> int:
    """Insert or bump one row per model; how many rows are new."""
    r = t.rescan_requests
    wanted = list(dict.fromkeys(models))
    if not wanted:
        return 0
    existing = set(conn.execute(select(r.c.model).where(r.c.model.in_(wanted))).scalars())
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    text = reason[:_REASON_LIMIT]
    conn.execute(
        _bumped(dialect.insert(r)),
        [
            {"model": m, "reason": text, "requested_at": now, "due_at": now, "attempts": 0}
            for m in wanted
        ],
    )
    wakeups.notify(conn)
    return len(set(wanted) - existing)


def request_at_once(conn: Connection, models: Sequence[Urn], *, reason: str, now: datetime) -> int:
    """:func:`request` as one PostgreSQL statement: atomic on its own, so no transaction.

    The watcher's consumer records each event's requests as it hears them: one round trip
    where ``BEGIN``, the read of the rows already there, the upsert, the notification and
    ``COMMIT`` took five. The count of rows already there is read in the same snapshot as
    the upsert, before it.
    """
    wanted = list(dict.fromkeys(models))
    if not wanted:
        return 0
    values = {"wanted": wanted, "why": reason[:_REASON_LIMIT], "at": now}
    existing = conn.execute(_requesting(), values).scalar_one()
    return len(wanted) - int(existing)


@cache
def _requesting() -> Select[int, Any]:
    """The statement of :func:`request_at_once`."""
    r = t.rescan_requests
    wanted = bindparam("wanted", type_=postgresql.ARRAY(r.c.model.type))
    at = bindparam("at", type_=r.c.requested_at.type)
    incoming = select(
        func.unnest(wanted), bindparam("why", type_=r.c.reason.type), at, at, literal(0)
    )
    columns = ["model", "reason", "requested_at", "due_at", "attempts"]
    upserted = _bumped(postgresql.insert(r).from_select(columns, incoming)).cte("upserted")
    existing = select(func.count()).where(r.c.model == any_(wanted)).scalar_subquery()
    woken = func.pg_notify(wakeups.CHANNEL, func.current_schema())
    return select(existing, woken).add_cte(upserted)


def _bumped(
    stmt: postgresql.Insert | sqlite.Insert,
) -> postgresql.Insert | sqlite.Insert:
    """``stmt`` bumping the row of a model already requested: asked again now, due now."""
    r = t.rescan_requests
    return stmt.on_conflict_do_update(
        index_elements=[r.c.model],
        set_={
            "requested_at": stmt.excluded.requested_at,
            "reason": stmt.excluded.reason,
            # Due now, unless backing off after failed scans: a burst of events for a model
            # whose scan keeps failing must not turn the backoff into a busy loop.
            "due_at": case(
                (and_(r.c.attempts == 0, r.c.due_at > stmt.excluded.due_at), stmt.excluded.due_at),
                else_=r.c.due_at,
            ),
        },
    )


def claim(
    conn: Connection,
    *,
    owner: str,
    now: datetime,
    lease: timedelta,
    limit: int,
    only_batches: bool = False,
) -> list[RescanRequest]:
    """Take due, unclaimed (or lease-expired) rows for ``owner``.

    Up to ``limit`` rows for models (``*`` included); when none is due (or ``only_batches``),
    one batch.
    """
    r = t.rescan_requests
    rows = [] if only_batches else _claimable(conn, r.c.models.is_(None), now=now, limit=limit)
    if not rows:
        rows = _claimable(conn, r.c.models.is_not(None), now=now, limit=1)
    if not rows:
        return []
    until = now + lease
    conn.execute(
        update(r)
        .where(r.c.model.in_([m["model"] for m in rows]))
        .values(claimed_by=owner, claimed_at=now, lease_until=until)
    )
    return [
        _request({**m, "claimed_by": owner, "claimed_at": now, "lease_until": until}) for m in rows
    ]


def _claimable(conn: Connection, kind: Any, *, now: datetime, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` due rows of ``kind`` no live lease holds, locked (PostgreSQL) or not."""
    r = t.rescan_requests
    query = (
        select(r)
        .where(
            kind,
            r.c.due_at <= now,
            or_(r.c.claimed_by.is_(None), r.c.lease_until <= now),
        )
        .order_by(r.c.due_at, r.c.model)
        .limit(limit)
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return [dict(row._mapping) for row in conn.execute(query)]


def split(
    conn: Connection,
    models: Sequence[Urn],
    *,
    size: int,
    reason: str,
    now: datetime,
    stale_after: timedelta,
    owner: str,
    held: Sequence[RescanRequest],
    again_at: datetime | None,
) -> RescanSplit:
    """Complete ``held`` and make the batches of a full rescan of ``models``, or join one.

    See :meth:`mlcopilot.protocols.StateStore.split_rescan`. Splits are serialised: on
    PostgreSQL by a transaction-scoped advisory lock on this schema's table (two splitters
    must not both see no rescan under way and both start one; claims do not take it), on
    SQLite by the write lock every write transaction takes.
    """
    if size < 1:
        raise ValueError(f"a rescan batch holds at least one model, not {size}")
    r = t.rescan_requests
    if conn.dialect.name == "postgresql":
        conn.execute(
            select(func.pg_advisory_xact_lock(func.hashtext(func.current_schema()), _SPLIT_LOCK))
        )
    if held and not complete(conn, held, owner=owner, now=now, again_at=again_at):
        return RescanSplit(batches=0, held=False)
    batches = list(
        conn.execute(
            select(r.c.claimed_by, r.c.lease_until, r.c.requested_at, r.c.attempts).where(
                r.c.models.is_not(None)
            )
        )
    )
    since = now - stale_after
    under_way = any(
        (claimed is not None and lease_until is not None and lease_until > now)
        or (attempts == 0 and requested_at > since)
        for claimed, lease_until, requested_at, attempts in batches
    )
    if under_way:
        return RescanSplit(batches=0, under_way=len(batches))
    # No batch is held under a live lease: whatever is left of an earlier rescan (its every
    # holder died, or it kept failing) is covered by this one.
    conn.execute(delete(r).where(r.c.models.is_not(None)))
    wanted = list(dict.fromkeys(models))
    parts = [wanted[i : i + size] for i in range(0, len(wanted), size)]
    stamp = f"{now:%Y%m%dT%H%M%S.%fZ}"
    text = reason[:_REASON_LIMIT]
    rows = [
        {
            "model": f"{BATCH_PREFIX}{stamp}/{n:05d}",
            "reason": f"full rescan, batch {n} of {len(parts)}: {text}"[:_REASON_LIMIT],
            "requested_at": now,
            "due_at": now,
            "attempts": 0,
            "models": part,
        }
        for n, part in enumerate(parts, start=1)
    ]
    for chunk in chunks(rows):
        conn.execute(insert(r), list(chunk))
    if rows:
        wakeups.notify(conn)  # every watcher on the database takes batches, not only this one
    return RescanSplit(batches=len(rows))


_SPLIT_LOCK = 0x6D6C_7273
"""The second key of the advisory lock splits take (the first: this schema's name, hashed)."""


def renew(
    conn: Connection,
    requests: Sequence[RescanRequest],
    *,
    owner: str,
    now: datetime,
    lease: timedelta,
) -> int:
    """Extend to ``now + lease`` the lease of the rows ``owner`` still holds; how many.

    A row another watcher took meanwhile (this one stopped renewing long enough for the lease
    to run out) is not renewed: the count says the claim was lost.
    """
    r = t.rescan_requests
    if not requests:
        return 0
    result = conn.execute(
        update(r)
        .where(r.c.model.in_([i.model for i in requests]), r.c.claimed_by == owner)
        .values(lease_until=now + lease)
    )
    return int(result.rowcount or 0)


def complete(
    conn: Connection,
    requests: Sequence[RescanRequest],
    *,
    owner: str,
    now: datetime,
    again_at: datetime | None,
) -> int:
    """Delete (or reschedule) the rows ``owner`` still holds; re-asked ones stay due now.

    Two statements per chunk whatever the number of requests: a watcher completes hundreds
    per scan.
    """
    r = t.rescan_requests
    released = {"claimed_by": None, "claimed_at": None, "lease_until": None}
    done = 0
    due_now = 0
    models = list(dict.fromkeys(item.model for item in requests))
    for chunk in chunks(models):
        held = and_(r.c.model.in_(chunk), r.c.claimed_by == owner)
        # Asked for again while being scanned: what changed may postdate what was read.
        # Released here, so they are no longer held for the statement after.
        asked_again = r.c.requested_at > r.c.claimed_at
        due_now += int(
            conn.execute(
                update(r)
                .where(held, asked_again)
                .values(**released, attempts=0, last_error=None, due_at=now)
            ).rowcount
            or 0
        )
        if again_at is not None:
            result = conn.execute(
                update(r)
                .where(held)
                .values(**released, attempts=0, last_error=None, due_at=again_at)
            )
        else:
            result = conn.execute(delete(r).where(held))
        done += int(result.rowcount or 0)
    if due_now:
        wakeups.notify(conn)
    return done + due_now


def fail(
    conn: Connection,
    requests: Sequence[RescanRequest],
    *,
    owner: str,
    error: str,
    now: datetime,
    retry_at: datetime,
) -> None:
    """Release the rows ``owner`` holds, one more attempt counted, due at ``retry_at``."""
    r = t.rescan_requests
    conn.execute(
        update(r)
        .where(r.c.model.in_([i.model for i in requests]), r.c.claimed_by == owner)
        .values(
            claimed_by=None,
            claimed_at=None,
            lease_until=None,
            attempts=r.c.attempts + 1,
            last_error=redact(error)[:_ERROR_LIMIT],
            due_at=retry_at,
        )
    )


def items(conn: Connection) -> list[RescanRequest]:
    """Every row, by due time."""
    r = t.rescan_requests
    rows = conn.execute(select(r).order_by(r.c.due_at, r.c.model))
    return [_request(dict(row._mapping)) for row in rows]


def _request(m: dict[str, Any]) -> RescanRequest:
    return RescanRequest(
        model=m["model"],
        reason=m["reason"],
        requested_at=m["requested_at"],
        due_at=m["due_at"],
        attempts=int(m["attempts"]),
        claimed_by=m["claimed_by"],
        claimed_at=m["claimed_at"],
        last_error=m["last_error"],
        models=tuple(m.get("models") or ()),
        lease_until=m.get("lease_until"),
    )
