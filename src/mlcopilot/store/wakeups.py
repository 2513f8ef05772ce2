"""Waking every watcher on a PostgreSQL database when rescan requests come due there.

Without it, a watcher finds requests another process recorded at its next look, a second
later (:data:`mlcopilot.watch.worker.POLL`): an hour's full rescan waited for the first look
to be split and for the next ones to be shared, and a rescan of 2,000 independent models,
eight batches of well under a second, took 5.5 s with one watcher and 4.2 s with two. Every
transaction that makes requests due now notifies :data:`CHANNEL` with its schema's name
(delivered at its commit, not at all if it rolls back); a watcher listening on the same
database and schema looks at once. SQLite has no such channel: its watchers poll.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from sqlalchemy import Connection, Engine, func, select

from mlcopilot.errors import StoreError

CHANNEL: Final = "mlcopilot_rescans"
"""The channel, one for every schema: each notification carries its schema's name."""

LOOK_EVERY: Final = 1.0
"""Seconds a listener waits for a notification before it checks whether to stop."""


def notify(conn: Connection) -> None:
    """Tell listeners on this schema, at the transaction's commit, that requests are due."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_notify(CHANNEL, func.current_schema())))


def listen(engine: Engine, wake: Callable[[], None], stop: threading.Event) -> None:
    """Call ``wake`` for every notification on this engine's schema until ``stop`` is set.

    And once as soon as it listens: requests made due before then are not missed. On a
    connection of its own, closed afterwards rather than pooled (a session that listened
    would go on hearing). Raises :class:`StoreError` when the connection fails or is lost.
    """
    import psycopg  # the PostgreSQL driver, there whenever the engine is PostgreSQL's

    raw = engine.raw_connection()
    try:
        pg = raw.driver_connection
        if not isinstance(pg, psycopg.Connection):  # pragma: no cover - the URL sets psycopg
            raise StoreError(f"listening needs psycopg, not {type(pg).__name__}")
        pg.rollback()  # the pool's ping may have begun a transaction
        pg.autocommit = True
        row = pg.execute("SELECT current_schema()").fetchone()
        schema = row[0] if row else None
        pg.execute(f"LISTEN {CHANNEL}")
        wake()  # what was made due before it listened (at a start, after a lost connection)
        while not stop.is_set():
            for notice in pg.notifies(timeout=LOOK_EVERY):
                if notice.payload == schema:
                    wake()
    except psycopg.Error as exc:
        raise StoreError(f"listening for rescan requests failed: {exc}") from exc
    finally:
        raw.invalidate()
