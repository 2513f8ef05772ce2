"""Rescan requests in SQL: record (coalesced per model), claim under a lease, complete, fail.

``mlcopilot watch`` records a request per affected model as events arrive and a worker claims
them. Like the outbox's claim, PostgreSQL claims with ``FOR UPDATE SKIP LOCKED`` so concurrent
watchers on one database split the requests and never scan one twice at once; SQLite
serialises writers with ``BEGIN IMMEDIATE``. A claim carries a lease: a watcher that dies
mid-scan leaves its rows claimed until the lease expires, then another watcher takes them; a
live watcher renews the lease of the rows it holds while it scans (:func:`renew`), so a scan
longer than the lease keeps its claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, case, delete, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from mlcopilot.model import Urn
from mlcopilot.protocols import RescanRequest
from mlcopilot.redact import redact
from mlcopilot.store import schema as t
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
    stmt = dialect.insert(r)
    stmt = stmt.on_conflict_do_update(
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
    text = reason[:_REASON_LIMIT]
    conn.execute(
        stmt,
        [
            {"model": m, "reason": text, "requested_at": now, "due_at": now, "attempts": 0}
            for m in wanted
        ],
    )
    return len(set(wanted) - existing)


def claim(
    conn: Connection, *, owner: str, now: datetime, lease: timedelta, limit: int
) -> list[RescanRequest]:
    """Take up to ``limit`` due, unclaimed (or lease-expired) rows for ``owner``."""
    r = t.rescan_requests
    query = (
        select(r)
        .where(
            r.c.due_at <= now,
            or_(r.c.claimed_by.is_(None), r.c.lease_until <= now),
        )
        .order_by(r.c.due_at, r.c.model)
        .limit(limit)
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    rows = [dict(row._mapping) for row in conn.execute(query)]
    if not rows:
        return []
    conn.execute(
        update(r)
        .where(r.c.model.in_([m["model"] for m in rows]))
        .values(claimed_by=owner, claimed_at=now, lease_until=now + lease)
    )
    return [_request({**m, "claimed_by": owner, "claimed_at": now}) for m in rows]


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
    models = list(dict.fromkeys(item.model for item in requests))
    for chunk in chunks(models):
        held = and_(r.c.model.in_(chunk), r.c.claimed_by == owner)
        # Asked for again while being scanned: what changed may postdate what was read.
        # Released here, so they are no longer held for the statement after.
        asked_again = r.c.requested_at > r.c.claimed_at
        done += int(
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
    return done


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
    )
