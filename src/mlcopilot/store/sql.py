"""The state store on SQLAlchemy: one implementation for SQLite and PostgreSQL.

The URL chooses the engine: ``sqlite:///PATH`` or ``postgresql+psycopg://USER@HOST/DB``
(``postgresql://`` and ``postgres://`` mean psycopg 3 too). To keep the tables in their own
PostgreSQL schema, add ``?options=-csearch_path%3DNAME`` to the URL (the schema must exist).

Opening a store brings its tables up to date with the Alembic migrations shipped in this
package. Every failure to open or use the database becomes one :class:`~mlcopilot.errors.StoreError`
line that names the URL, with any password hidden, and says how to fix it.
"""

from __future__ import annotations

import math
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import Enum
from functools import cache, partial
from importlib import resources
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Row,
    and_,
    bindparam,
    create_engine,
    event,
    func,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.engine import URL, Dialect, make_url
from sqlalchemy.exc import (
    ArgumentError,
    IntegrityError,
    NoSuchModuleError,
    SQLAlchemyError,
    StatementError,
)

from mlcopilot.errors import MissingStore, StoreConflict, StoreError, UsageError
from mlcopilot.incidents import lifecycle
from mlcopilot.model import (
    Baseline,
    ChosenBaselines,
    Claimed,
    CurrentSchemas,
    Delivered,
    Incident,
    IncidentChanges,
    IncidentHeads,
    IncidentState,
    NotifyRequest,
    OutboxItem,
    OutboxStatus,
    PlannedRow,
    ProfileBaseline,
    RecordedScan,
    SinkName,
    SinkRef,
    Urn,
    WatchedGroup,
    content_digest,
)
from mlcopilot.protocols import ClosedOnExit, RescanRequest, RescanSplit
from mlcopilot.store import (
    groups_sql,
    notify_sql,
    outbox_sql,
    profiles_sql,
    rescan_sql,
    wakeups,
)
from mlcopilot.store import schema as t
from mlcopilot.store.baselines_sql import (
    baseline_from,
    drop_unused_schemas,
    read_baselines,
    replaced_digests,
    select_baselines,
    upsert_baselines,
)
from mlcopilot.store.chunks import IN_CHUNK, WRITE_CHUNK, chunks, one_of
from mlcopilot.store.opening import (
    check_sqlite_file,
    empty_store_message,
    read_only_url,
    sqlite_file,
)
from mlcopilot.store.pings import ping_when_idle
from mlcopilot.store.rows import (
    Times,
    incident_from_mapping,
    raw_time,
    require_aware,
)

if TYPE_CHECKING:
    from mlcopilot.protocols import StateStore

_TABLES: Final = frozenset(t.metadata.tables)
"""mlcopilot's own tables: what the newest migration makes (no list to keep in step)."""
_MIGRATION_LOCK: Final = 0x6D6C_636F_7069_6C6F  # "mlcopilo": serialises migrations on Postgres
_PG_CONNECT_TIMEOUT_S: Final = 10
_WRITE: Final = "mlcopilot_write"
_DEADLOCK: Final = "40P01"
"""PostgreSQL's SQLSTATE for a transaction it aborted to break a deadlock."""


def default_state_url(home: Path) -> str:
    """The SQLite state database in ``home`` (``<home>/state.db``); nothing is created.

    Args:
        home: mlcopilot's home directory, e.g. ``~/.mlcopilot``.

    Returns:
        A ``sqlite:///`` URL with an absolute path.
    """
    path = (home.expanduser() / "state.db").resolve()
    return URL.create("sqlite", database=str(path)).render_as_string()


def open_store(url: str, *, create: bool = True, read_only: bool = False) -> SqlStore:
    """Open the state database at ``url``, upgrading its schema as needed.

    An existing SQLite file is used only when it already is an mlcopilot state database: an
    empty (zero-length) file, another program's database or a file whose schema revision is
    gone is refused, never set up afresh, since that would silently lose its history.

    Args:
        url: A SQLAlchemy URL: ``sqlite:///PATH`` or ``postgresql+psycopg://USER@HOST:PORT/DB``,
            optionally with ``?options=-csearch_path%3DSCHEMA`` to use a PostgreSQL schema.
        create: Create the database when there is none yet (the SQLite file, or the tables in
            an empty PostgreSQL database or schema). Commands that only read pass False.
        read_only: Open it without writing anything, ever (SQLite's ``mode=ro``): no file,
            no schema upgrade. A dry run passes True.

    Returns:
        The open store; close it with :meth:`SqlStore.close` (or use it in a ``with`` block).

    Raises:
        MissingStore: There is no state database there and ``create`` is False (or
            ``read_only`` is True).
        StoreError: The URL is not a usable database URL, the database cannot be reached, is not
            an mlcopilot state database, was written by a newer mlcopilot, or (``read_only``)
            needs a schema upgrade.
    """
    parsed = _parse(url)
    shown = _shown(parsed)
    path = sqlite_file(parsed)
    fresh = False
    if path is not None:
        fresh = check_sqlite_file(path, shown, create=create and not read_only)
        if read_only:
            parsed = read_only_url(parsed, path)
    engine: Engine | None = None
    try:
        if fresh and path is not None and _created_whole(parsed, path, shown):
            fresh = False  # there now, complete: ours, or another process's made meanwhile
        engine = _create_engine(parsed)
        opening = _Opening(shown, path=path, fresh=fresh, create=create, read_only=read_only)
        _migrate(engine, opening)
    except BaseException as exc:
        if engine is not None:
            engine.dispose()
        if fresh and path is not None:
            _remove_if_empty(path)  # a file this open created and could not set up
        if isinstance(exc, SQLAlchemyError | CommandError | OSError | ImportError):
            raise StoreError(
                f"cannot open state database {shown}: {_reason(exc, parsed)}; {_hint(exc, parsed)}"
            ) from exc
        raise
    return SqlStore(engine, shown=shown)


class SqlStore(ClosedOnExit):
    """Baselines, scan runs and incidents in a SQL database. Create it with :func:`open_store`.

    Timestamps go in and come out timezone-aware (UTC on the way out); naive ones are refused
    with ``ValueError``. Incidents are keyed by ``(id, generation)`` and the database itself
    guarantees that at most one generation of an id is open or acknowledged.
    """

    def __init__(self, engine: Engine, *, shown: str) -> None:
        self._engine = engine
        self._shown = shown

    @property
    def url(self) -> str:
        """The database URL with any password hidden, for messages."""
        return self._shown

    def last_scan_at(self) -> datetime | None:
        """The clock (``now``) of the latest committed scan run, or None before the first."""
        runs = t.scan_runs
        query = select(runs.c.now).order_by(runs.c.now.desc()).limit(1)
        with self._read("reading scan runs") as conn:
            value: datetime | None = conn.execute(query).scalar()
        return value

    # --- baselines

    def baseline(self, model: Urn, dataset: Urn) -> Baseline | None:
        """The stored baseline schema of ``dataset`` for ``model``, or None."""
        b = t.baselines
        query = select_baselines().where(b.c.model == model, b.c.dataset == dataset)
        with self._read("reading a baseline") as conn:
            row = conn.execute(query).first()
        return None if row is None else baseline_from(row)

    def baselines(self, model: Urn) -> list[Baseline]:
        """Every stored baseline of ``model``, sorted by dataset."""
        b = t.baselines
        query = select_baselines().where(b.c.model == model).order_by(b.c.dataset)
        with self._read("reading baselines") as conn:
            return [baseline_from(row) for row in conn.execute(query)]

    def baselines_of(
        self, models: Sequence[Urn], *, current: CurrentSchemas | None = None
    ) -> dict[Urn, list[Baseline]]:
        """:meth:`baselines` of each of ``models`` (every one a key), a statement per chunk.

        Each distinct stored schema is one :class:`~mlcopilot.model.Schema`, shared by every
        baseline holding it; one that is its dataset's in ``current`` is that object, not
        read (see :mod:`~mlcopilot.store.baselines_sql`). Decoded row by row, the second
        scan of 1,000 models over 5,000 datasets made 145,071 schemas: 0.9 GB more than the
        first scan, which holds the walk's own.
        """
        with self._read("reading baselines") as conn:
            return read_baselines(conn, models, current)

    def baselined_datasets(self, models: Sequence[Urn]) -> dict[Urn, set[Urn]]:
        """The datasets each of ``models`` has a stored baseline of (every model a key)."""
        b = t.baselines
        found: dict[Urn, set[Urn]] = {model: set() for model in models}
        urns: dict[str, str] = {}
        with self._read("reading baselines") as conn:
            for chunk in chunks(list(found)):
                query = select(b.c.model, b.c.dataset).where(one_of(conn, b.c.model, chunk))
                for model, dataset in conn.execute(query):
                    found[model].add(urns.setdefault(dataset, dataset))
        return found

    def save_baselines(self, baselines: Iterable[Baseline]) -> None:
        """Insert or replace baselines, one per model and dataset (the last one given wins)."""
        chosen = _chosen(baselines)
        if not chosen:
            return
        with self._write("saving baselines") as conn:
            replaced = replaced_digests(conn, chosen)
            upsert_baselines(conn, chosen)
            drop_unused_schemas(conn, replaced)

    def profile_baselines_of(self, models: Sequence[Urn]) -> dict[Urn, list[ProfileBaseline]]:
        """Every stored profile baseline of each of ``models`` (every one a key), by dataset."""
        with self._read("reading profile baselines") as conn:
            return profiles_sql.read_profile_baselines(conn, models)

    def save_profile_baselines(self, baselines: Sequence[ProfileBaseline]) -> None:
        """Insert or replace profile baselines, one per model and dataset (the last one wins)."""
        if not baselines:
            return
        with self._write("saving profile baselines") as conn:
            profiles_sql.upsert_profile_baselines(conn, baselines)

    # --- incidents

    def incidents(
        self,
        *,
        include_resolved: bool = True,
        models: Sequence[Urn] | None = None,
        entities: Sequence[Urn] | None = None,
        ids: Sequence[str] | None = None,
        other_than: Sequence[Urn] = (),
    ) -> list[Incident]:
        """The latest generation of every incident (optionally filtered), newest first.

        Args:
            include_resolved: False to leave out incidents whose latest generation is resolved.
            models: Only these models' incidents (what a scan of them reconciles against,
                rather than every incident in the store).
            entities: Only incidents on these entities.
            ids: Only these incidents.
            other_than: Leaving out these models' incidents (a scan has read its models'
                already). Told apart by reading ids and models first, so the rows left out
                are never decoded, however many models are named.

        Returns:
            Incidents ordered by ``opened_at``, newest first, then by id.
        """
        i = t.incidents
        wanted: list[tuple[Any, list[Urn]]] = []
        if models is not None:
            wanted.append((i.c.model, list(dict.fromkeys(models))))
        if entities is not None:
            wanted.append((i.c.entity, list(dict.fromkeys(entities))))
        if ids is not None:
            wanted.append((i.c.id, list(dict.fromkeys(ids))))
        if len(wanted) > 1:
            raise ValueError("incidents(): give one of models, entities and ids")
        column, values = wanted[0] if wanted else (None, [])
        slices: list[list[Urn] | None] = list(chunks(values)) if column is not None else [None]
        skip = frozenset(other_than)
        found: list[Incident] = []
        with self._read("reading incidents") as conn:
            rows = _IncidentRows(conn.dialect)
            for chunk in slices:
                latest = select(i.c.id, func.max(i.c.generation).label("generation")).group_by(
                    i.c.id
                )
                if column is not None and chunk is not None:
                    latest = latest.where(column.in_(chunk))
                newest = latest.subquery("latest")
                query = select(*_INCIDENT_COLUMNS).join(
                    newest, and_(i.c.id == newest.c.id, i.c.generation == newest.c.generation)
                )
                if not include_resolved:
                    query = query.where(i.c.state != IncidentState.RESOLVED.value)
                if skip:
                    keys = conn.execute(query.with_only_columns(i.c.id, i.c.model)).all()
                    kept = [row.id for row in keys if row.model not in skip]
                    for part in chunks(kept):
                        found += map(rows.incident, conn.execute(query.where(i.c.id.in_(part))))
                    continue
                found += map(rows.incident, conn.execute(query))
        # An incident keeps its model and entity across generations: no id is in two chunks.
        found.sort(key=lambda x: x.id)
        found.sort(key=lambda x: x.opened_at, reverse=True)
        return found

    def incident_heads(self, models: Sequence[Urn]) -> IncidentHeads:
        """The latest generation of ``models``' incidents, packed: what a refresh keeps of them.

        Every generation is read, the latest kept by :class:`IncidentHeads` (the database's
        grouping and join cost more). Nothing but the distinct times is decoded, and no row
        becomes an object: 3.7 s and 10.4 MB for a second scan's 282,022, read alone.
        """
        i = t.incidents
        query = select(
            i.c.id,
            i.c.generation,
            i.c.state,
            raw_time(i.c.opened_at),
            raw_time(i.c.resolved_at),
            raw_time(i.c.acknowledged_at),
            i.c.acknowledged_by,
            i.c.resolution,
            raw_time(i.c.seen_at),
            i.c.content_digest,
        )
        with self._read("reading incidents") as conn:
            rows = chain.from_iterable(
                conn.execute(query.where(one_of(conn, i.c.model, chunk)))
                for chunk in chunks(list(dict.fromkeys(models)))
            )
            return IncidentHeads(rows, decode_time=Times(conn.dialect))

    def open_kinds(
        self, entities: Sequence[Urn], *, other_than: Sequence[Urn] = ()
    ) -> set[tuple[Urn, str]]:
        """``(entity, check)`` of each open incident on ``entities``, but ``other_than``'s.

        What holds a tag on an entity for models other than a scan's (see
        :func:`~mlcopilot.incidents.writeback.plan_writeback`): the distinct pairs only, as the
        database groups them, never the incidents (a batch of a full rescan on shared upstream
        entities would read tens of thousands of other models' incidents for a few thousand
        pairs). Only a latest generation is ever unresolved, so no generation is compared.
        """
        found: set[tuple[Urn, str]] = set()
        skip = list(dict.fromkeys(other_than))
        with self._read("reading open incidents") as conn:
            others: list[Urn] | None = None
            if len(skip) > _SKIPPED_IN_SQL:
                # A full rescan's: every model, or nearly. Which others hold anything open is
                # one read; when none do (the whole estate scanned), nothing else is.
                others = sorted(_open_models(conn) - set(skip))
                if not others:
                    return found
            for chunk in chunks(list(dict.fromkeys(entities))):
                found.update(_open_kinds(conn, chunk, skip, others))
        return found

    def get(self, incident_id: str) -> Incident | None:
        """The latest generation of one incident, or None when the id is unknown."""
        with self._read("reading an incident") as conn:
            return _latest(conn, incident_id)

    def record_scan(
        self,
        changes: IncidentChanges,
        *,
        started_at: datetime,
        now: datetime,
        catalog: str,
        models: Sequence[Urn],
        findings: int,
        finished_at: datetime | None = None,
        baselines: Iterable[Baseline] = (),
        notify: NotifyRequest | None = None,
        profile_baselines: Sequence[ProfileBaseline] = (),
    ) -> RecordedScan:
        """Store a scan run and its incident changes in one transaction: all or nothing.

        ``opened`` incidents are inserted. ``updated`` ones get their severity, message, change,
        path, evidence and ``updated_at`` refreshed but keep their stored state, so an
        acknowledgement made while the scan ran is not lost. ``resolved`` ones are resolved.

        Args:
            changes: What :func:`mlcopilot.incidents.lifecycle.reconcile` decided.
            started_at: When the scan started.
            now: The scan's notion of now (what staleness was measured against).
            catalog: The catalog's label; a password in it is hidden before it is stored.
            models: The models scanned.
            findings: How many findings the scan produced.
            finished_at: When the scan finished; defaults to the current time.
            baselines: Baselines to save in the same transaction (see :meth:`save_baselines`).
            profile_baselines: Profile baselines to save in the same transaction.
            notify: The notifications to plan in the same transaction: the outbox rows for
                the DataHub write-back and for every notification group the changes touch.

        Returns:
            The id of the stored scan run (increasing), and the outbox rows planned.

        Raises:
            StoreConflict: Another process opened, resolved or removed one of these incidents
                since they were read; nothing from this scan was written. Run the scan again.
            StoreError: The database failed.
        """
        finished = finished_at if finished_at is not None else datetime.now(UTC)
        for name, value in (("started_at", started_at), ("now", now), ("finished_at", finished)):
            require_aware(name, value)
        run = {
            "started_at": started_at,
            "finished_at": finished,
            "now": now,
            "catalog": _redact_text(catalog),
            "models": list(models),
            "findings": findings,
            "opened": len(changes.opened),
            "updated": len(changes.updated),
            "resolved": len(changes.resolved),
        }
        with self._deadlock_is_a_conflict(), self._write("recording the scan") as conn:
            upsert_baselines(conn, _chosen(baselines))
            profiles_sql.upsert_profile_baselines(conn, profile_baselines)
            key = conn.execute(insert(t.scan_runs), run).inserted_primary_key
            assert key is not None  # both engines report autoincrement keys
            run_id = int(key[0])
            # The incidents first, the notification groups last: the incidents are this scan's
            # models' own (no other batch of a full rescan writes them), the groups are shared
            # by every batch on the same upstream. Locked last, a group is held only while the
            # plan is made and committed, so concurrent batches' commits overlap (locked first,
            # they ran one after the other). Acknowledging by hand takes them in this order too.
            self._write_incidents(conn, changes, run_id=run_id, now=now)
            planned = None
            if notify is not None:
                planned = notify_sql.plan(conn, changes, notify, now=now, run_id=run_id, lock=True)
                self._apply_plan(conn, planned, now=now, run_id=run_id)
        return RecordedScan(run_id, tuple(planned.rows) if planned is not None else ())

    def _write_incidents(
        self, conn: Connection, changes: IncidentChanges, *, run_id: int, now: datetime
    ) -> None:
        """Insert the opened incidents, refresh the updated ones, resolve the resolved ones.

        An executemany of :data:`WRITE_CHUNK` rows at a time, not a statement per incident (a
        batch of a full rescan refreshes tens of thousands), nor every row's parameters at once
        (an estate's first scan opens 280,000). Each in ``(id,
        generation)`` order, so two scans touching the same incidents lock them in the same
        order. An incident found again as stored (``changes.unchanged``) is only stamped seen,
        many in one statement (:meth:`_stamp_seen`).
        """
        opened = _in_id_order(changes.opened)
        try:
            for part in chunks(opened, WRITE_CHUNK):
                conn.execute(insert(t.incidents), [_incident_row(inc, run_id) for inc in part])
        except IntegrityError as exc:
            ids = ", ".join(sorted({inc.id for inc in changes.opened}))
            raise self._conflict(
                f"opening incidents ({_shorten(ids)}) clashed with incidents already stored"
            ) from exc
        self._update_open(
            conn,
            changes.refreshed(unchanged=False),
            partial(_updated_values, run_id=run_id),
            run_id,
            "updated",
        )
        self._stamp_seen(conn, changes.refreshed(unchanged=True), run_id)
        self._update_open(
            conn,
            changes.resolved,
            partial(_resolved_values, run_id=run_id, now=now),
            run_id,
            "resolved",
        )

    @contextmanager
    def _deadlock_is_a_conflict(self) -> Iterator[None]:
        """A scan PostgreSQL aborted to break a deadlock is in conflict with another.

        Nothing of it was written, and the scan retries against what the other one stored, as
        for any conflict.
        """
        try:
            yield
        except StoreError as exc:
            if getattr(getattr(exc.__cause__, "orig", None), "sqlstate", None) != _DEADLOCK:
                raise
            raise self._conflict("two scans waited for each other's incidents") from exc

    def planned_notifications(
        self, changes: IncidentChanges, notify: NotifyRequest, *, now: datetime
    ) -> list[PlannedRow]:
        """The outbox rows :meth:`record_scan` would insert for ``changes``; writes nothing."""
        with self._read("planning notifications") as conn:
            planned = notify_sql.plan(conn, changes, notify, now=now, run_id=None, lock=False)
        rows: list[PlannedRow] = planned.rows
        return rows

    def acknowledge(
        self,
        incident_id: str,
        *,
        by: str,
        at: datetime,
        notify: NotifyRequest | None = None,
    ) -> Incident:
        """Mark an open incident acknowledged (a no-op when it already is).

        With ``notify``, its notification group is acknowledged in the same transaction: no
        more updates or reminders about it, only the resolution.

        Raises:
            UsageError: No incident has this id, it is resolved, or ``by`` is blank.
        """
        require_aware("at", at)
        with self._write("acknowledging the incident") as conn:
            current = self._must_get(conn, incident_id)
            done = lifecycle.acknowledge(current, by=by, at=at)
            if done is not current:
                self._set(conn, current, done)
                if notify is not None:
                    changes = IncidentChanges(updated=(done,))
                    planned = notify_sql.plan(conn, changes, notify, now=at, run_id=None, lock=True)
                    self._apply_plan(conn, planned, now=at, run_id=None)
        return done

    def resolve(
        self,
        incident_id: str,
        *,
        at: datetime,
        reason: str,
        notify: NotifyRequest | None = None,
    ) -> Incident:
        """Resolve an incident by hand; if its risk is still there, the next scan reopens it.

        With ``notify``, the resolution's notifications (and write-back) are planned in the
        same transaction.

        Raises:
            UsageError: No incident has this id, it is already resolved, or ``reason`` is blank.
        """
        require_aware("at", at)
        with self._write("resolving the incident") as conn:
            current = self._must_get(conn, incident_id)
            done = lifecycle.resolve(current, at=at, reason=reason)
            self._set(conn, current, done)
            if notify is not None:
                changes = IncidentChanges(resolved=(done,))
                seq = _writeback_seq(conn)
                planned = notify_sql.plan(conn, changes, notify, now=at, run_id=seq, lock=True)
                self._apply_plan(conn, planned, now=at, run_id=None)
        return done

    # --- the outbox (see mlcopilot.model.notify and mlcopilot.notify.relay)

    def claim(
        self,
        *,
        sinks: Sequence[SinkName],
        owner: str,
        now: datetime,
        lease: timedelta,
        limit: int = 1,
    ) -> list[Claimed]:
        """Take up to ``limit`` deliverable outbox rows of ``sinks`` for ``owner``, oldest first.

        At most one row of a group: each can be delivered or released on its own.
        """
        with self._write("claiming outbox rows") as conn:
            return outbox_sql.claim(
                conn, sinks=sinks, owner=owner, now=now, lease=lease, limit=limit
            )

    def renew(
        self, items: Sequence[OutboxItem], *, owner: str, now: datetime, lease: timedelta
    ) -> set[int]:
        """Extend ``owner``'s lease on claimed rows; the ids of those it still held."""
        if not items:
            return set()
        with self._write("renewing outbox leases") as conn:
            return outbox_sql.renew(conn, items, owner=owner, now=now, lease=lease)

    def release(self, items: Sequence[OutboxItem], *, owner: str) -> None:
        """Give back claimed rows not tried: pending again, their attempt not counted."""
        if items:
            with self._write("releasing outbox rows") as conn:
                outbox_sql.release(conn, items, owner=owner)

    def complete(
        self, item: OutboxItem, delivered: Delivered, *, owner: str, now: datetime
    ) -> bool:
        """Mark a delivered row done and remember where its group lives in the sink.

        False when ``owner`` had lost the row's lease to another relay (the row is left alone).
        """
        if self._postgres:
            kept, _ = self.complete_and_renew(
                item, delivered, owner=owner, now=now, renew=(), lease=timedelta(0)
            )
            return kept
        with self._write("recording a delivery") as conn:
            return outbox_sql.complete(conn, item, delivered, owner=owner, now=now)

    def complete_and_renew(
        self,
        item: OutboxItem,
        delivered: Delivered,
        *,
        owner: str,
        now: datetime,
        renew: Sequence[OutboxItem],
        lease: timedelta,
    ) -> tuple[bool, set[int]]:
        """:meth:`complete` and :meth:`renew` of the rows still queued, in one transaction.

        On PostgreSQL, one statement outside a transaction: the relay's one round trip a row.
        """
        if self._postgres:
            with self._statement("recording a delivery") as conn:
                return outbox_sql.complete_and_renew_at_once(
                    conn, item, delivered, owner=owner, now=now, renew=renew, lease=lease
                )
        with self._write("recording a delivery") as conn:
            kept = outbox_sql.complete(conn, item, delivered, owner=owner, now=now)
            held = outbox_sql.renew(conn, renew, owner=owner, now=now, lease=lease)
            return kept, held

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
        """Put a row back to pending until ``retry_at``, or dead (``retry_at`` None)."""
        with self._write("recording a failed delivery") as conn:
            outbox_sql.fail(
                conn,
                item,
                owner=owner,
                error=error,
                now=now,
                retry_at=retry_at,
                uncertain=uncertain,
                count_attempt=count_attempt,
            )

    def sink_ref(self, group_key: str, generation: int, sink: SinkName) -> SinkRef | None:
        """Where a notification group lives in ``sink`` (its issue, its root message)."""
        with self._read("reading a sink reference") as conn:
            return outbox_sql.sink_ref(conn, group_key, generation, sink)

    def next_due(self, *, sinks: Sequence[SinkName]) -> datetime | None:
        """When the earliest waiting outbox row of ``sinks`` becomes due."""
        with self._read("reading the outbox") as conn:
            return outbox_sql.next_due(conn, sinks=sinks)

    def held(self, *, sinks: Sequence[SinkName], now: datetime) -> list[OutboxItem]:
        """Outbox rows of ``sinks`` being sent under a lease that has not expired at ``now``."""
        with self._read("reading the outbox") as conn:
            return outbox_sql.held(conn, sinks=sinks, now=now)

    def outbox(
        self, *, statuses: Sequence[OutboxStatus] | None = None, limit: int = 200
    ) -> list[OutboxItem]:
        """Outbox rows, newest first (optionally only in ``statuses``)."""
        with self._read("reading the outbox") as conn:
            return outbox_sql.items(conn, statuses=statuses, limit=limit)

    def retry_outbox(self, ids: Sequence[int] | None = None, *, now: datetime) -> int:
        """Make dead outbox rows (``ids``, else all) pending again; returns how many."""
        require_aware("now", now)
        with self._write("retrying outbox rows") as conn:
            return outbox_sql.retry(conn, ids, now=now)

    # --- rescan requests (mlcopilot watch)

    def request_rescans(self, models: Sequence[Urn], *, reason: str, now: datetime) -> int:
        """Ask for ``models`` to be scanned again (coalesced per model); how many are new."""
        require_aware("now", now)
        if self._postgres:
            with self._statement("recording rescan requests") as conn:
                return rescan_sql.request_at_once(conn, models, reason=reason, now=now)
        with self._write("recording rescan requests") as conn:
            return rescan_sql.request(conn, models, reason=reason, now=now)

    def claim_rescans(
        self,
        *,
        owner: str,
        now: datetime,
        lease: timedelta,
        limit: int = 100,
        only_batches: bool = False,
    ) -> list[RescanRequest]:
        """Take due rescan requests for ``owner`` under a lease: models first, else a batch."""
        require_aware("now", now)
        with self._write("claiming rescan requests") as conn:
            return rescan_sql.claim(
                conn, owner=owner, now=now, lease=lease, limit=limit, only_batches=only_batches
            )

    def split_rescan(
        self,
        models: Sequence[Urn],
        *,
        size: int,
        reason: str,
        now: datetime,
        stale_after: timedelta,
        owner: str = "",
        held: Sequence[RescanRequest] = (),
        again_at: datetime | None = None,
    ) -> RescanSplit:
        """Start (or join) a full rescan of ``models`` in batches of ``size``; see the protocol."""
        require_aware("now", now)
        if again_at is not None:
            require_aware("again_at", again_at)
        with self._write("splitting a full rescan") as conn:
            return rescan_sql.split(
                conn,
                models,
                size=size,
                reason=reason,
                now=now,
                stale_after=stale_after,
                owner=owner,
                held=held,
                again_at=again_at,
            )

    def renew_rescans(
        self, requests: Sequence[RescanRequest], *, owner: str, now: datetime, lease: timedelta
    ) -> int:
        """Extend the lease of the requests ``owner`` still holds; how many it still holds."""
        require_aware("now", now)
        with self._write("renewing rescan leases") as conn:
            return rescan_sql.renew(conn, requests, owner=owner, now=now, lease=lease)

    def complete_rescans(
        self,
        requests: Sequence[RescanRequest],
        *,
        owner: str,
        now: datetime,
        again_at: datetime | None = None,
    ) -> int:
        """Remove scanned requests (or schedule them at ``again_at``); how many."""
        with self._write("completing rescan requests") as conn:
            return rescan_sql.complete(conn, requests, owner=owner, now=now, again_at=again_at)

    def fail_rescans(
        self,
        requests: Sequence[RescanRequest],
        *,
        owner: str,
        error: str,
        now: datetime,
        retry_at: datetime,
    ) -> None:
        """Release requests after a failed scan, due again at ``retry_at``."""
        with self._write("recording a failed rescan") as conn:
            rescan_sql.fail(conn, requests, owner=owner, error=error, now=now, retry_at=retry_at)

    def listen_for_rescans(self, wake: Callable[[], None], stop: threading.Event) -> bool:
        """Call ``wake`` whenever any process makes rescan requests due on this database.

        And once as soon as it listens; until ``stop`` is set (:mod:`~mlcopilot.store.wakeups`).
        PostgreSQL only: on SQLite it returns False at once, and watchers poll.
        """
        if not self._postgres:
            return False
        with self._errors("listening for rescan requests"):
            wakeups.listen(self._engine, wake, stop)
        return True

    def rescans(self) -> list[RescanRequest]:
        """Every waiting or claimed rescan request, by due time."""
        with self._read("reading rescan requests") as conn:
            return rescan_sql.items(conn)

    def watched_groups(
        self, models: Sequence[Urn] | None = None, *, keys: Sequence[str] | None = None
    ) -> list[WatchedGroup]:
        """Open, unacknowledged notification groups (of ``models``), with refs and members.

        What a scan reads acknowledgements back for: the GitHub issue and the DataHub incidents.
        The members are the open incidents of ``models`` (all of the group's with ``keys``),
        named by id.
        """
        with self._read("reading notification groups") as conn:
            return groups_sql.watched(conn, models, keys)

    def incident_refs(self, sink: SinkName) -> dict[tuple[str, int], SinkRef]:
        """Each incident occurrence's group reference in ``sink``, whatever its state."""
        with self._read("reading sink references") as conn:
            return groups_sql.incident_refs(conn, sink)

    def incident_targets(self, ids: Sequence[str]) -> dict[tuple[str, int], tuple[SinkName, ...]]:
        """Where each occurrence of the incidents ``ids`` is told (its group's targets)."""
        with self._read("reading notification targets") as conn:
            return groups_sql.incident_targets(conn, ids)

    def _apply_plan(
        self, conn: Connection, planned: notify_sql.Plan, *, now: datetime, run_id: int | None
    ) -> None:
        try:
            notify_sql.apply(conn, planned, now=now, run_id=run_id)
        except (IntegrityError, notify_sql.PlanConflict) as exc:
            raise self._conflict(f"planning notifications clashed: {_reason(exc, None)}") from exc

    def close(self) -> None:
        """Release connections."""
        self._engine.dispose()

    # --- internals

    @contextmanager
    def _read(self, action: str) -> Iterator[Connection]:
        with self._errors(action), self._engine.connect() as conn:
            yield conn

    @property
    def _postgres(self) -> bool:
        """Whether the database is PostgreSQL (some writes are one statement there)."""
        return self._engine.dialect.name == "postgresql"

    @contextmanager
    def _write(self, action: str) -> Iterator[Connection]:
        with self._errors(action), self._engine.connect() as conn:
            conn.execution_options(**{_WRITE: True})
            with conn.begin():
                yield conn

    @contextmanager
    def _statement(self, action: str) -> Iterator[Connection]:
        """A connection for one statement, atomic on its own: no ``BEGIN`` and ``COMMIT``."""
        with self._errors(action), self._engine.connect() as conn:
            yield conn.execution_options(isolation_level="AUTOCOMMIT")

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except StatementError as exc:
            if isinstance(exc.orig, ValueError | TypeError):  # our bug, not the database's
                raise exc.orig from exc
            raise self._failed(action, exc) from exc
        except SQLAlchemyError as exc:
            raise self._failed(action, exc) from exc

    def _failed(self, action: str, exc: SQLAlchemyError) -> StoreError:
        why = _reason(exc, None)
        if "locked" in why:
            why += "; another process is writing to it: try again"
        return StoreError(f"state database {self._shown}: {action} failed: {why}")

    def _conflict(self, what: str) -> StoreConflict:
        return StoreConflict(
            f"state database {self._shown}: {what}; another scan or user changed the same "
            "incidents at the same time, so nothing from this scan was saved: run it again"
        )

    def _must_get(self, conn: Connection, incident_id: str) -> Incident:
        current = _latest(conn, incident_id, for_update=True)
        if current is None:
            raise UsageError(f"no incident {incident_id} — see `mlcopilot incidents list`")
        return current

    def _update_open(
        self,
        conn: Connection,
        incidents: Sequence[Incident],
        values: Callable[[Incident], Mapping[str, Any]],
        run_id: int,
        what: str,
    ) -> None:
        """Set ``values(incident)`` on each of ``incidents`` (the same keys each).

        An executemany of :data:`WRITE_CHUNK` rows at a time. Each row only while that
        generation is still unresolved: every one must match, or another process resolved
        (or removed) one since it was read, and it is a conflict. Both drivers report the
        rows an executemany matched, summed over its parameter sets.
        """
        i = t.incidents
        statement = update(i).where(
            i.c.id == bindparam("_id"),
            i.c.generation == bindparam("_generation"),
            i.c.state != IncidentState.RESOLVED.value,
        )
        ordered = _in_id_order(incidents)
        for part in chunks(ordered, WRITE_CHUNK):
            rows = [{**values(inc), "_id": inc.id, "_generation": inc.generation} for inc in part]
            if conn.execute(statement, rows).rowcount != len(rows):
                raise self._not_open(conn, part, run_id, what)

    def _not_open(
        self, conn: Connection, incidents: Sequence[Incident], run_id: int, what: str
    ) -> StoreConflict:
        """The conflict of a write that matched fewer of ``incidents`` than it was given."""
        inc = _first_not_written(conn, incidents, run_id=run_id)
        return self._conflict(
            f"incident {inc.id} (generation {inc.generation}) to be {what} is no longer open"
        )

    def _stamp_seen(self, conn: Connection, incidents: Sequence[Incident], run_id: int) -> None:
        """Stamp ``incidents`` (found again as stored) seen by this run: nothing else changes.

        One statement for each :data:`IN_CHUNK` of them sharing a generation and their times
        (a scan's all share its times, and most are generation 1), not :meth:`_update_open`'s
        executemany of each row's text and JSON (benchmarks/RESULTS.md, session 27). By ``id
        IN (...)`` and one generation, which the primary key answers (a list of ``(id,
        generation)`` pairs is not, on PostgreSQL: every statement read the whole table). Only
        while that generation is unresolved, as in :meth:`_update_open`: every one must match.
        """
        i = t.incidents
        alike: dict[tuple[int, datetime, datetime | None], list[Incident]] = {}
        for inc in incidents:
            alike.setdefault((inc.generation, inc.updated_at, inc.seen_at), []).append(inc)
        for (generation, updated_at, seen_at), same in alike.items():
            for part in chunks(_in_id_order(same)):
                statement = (
                    update(i)
                    .where(
                        one_of(conn, i.c.id, [inc.id for inc in part]),
                        i.c.generation == generation,
                        i.c.state != IncidentState.RESOLVED.value,
                    )
                    .values(updated_at=updated_at, seen_at=seen_at, last_run_id=run_id)
                )
                if conn.execute(statement).rowcount != len(part):
                    raise self._not_open(conn, part, run_id, "updated")

    def _set(self, conn: Connection, before: Incident, after: Incident) -> None:
        i = t.incidents
        result = conn.execute(
            update(i)
            .where(
                i.c.id == before.id,
                i.c.generation == before.generation,
                i.c.state == before.state.value,
            )
            .values(
                state=after.state.value,
                updated_at=after.updated_at,
                acknowledged_at=after.acknowledged_at,
                acknowledged_by=after.acknowledged_by,
                resolved_at=after.resolved_at,
                resolution=after.resolution,
            )
        )
        if result.rowcount != 1:  # pragma: no cover - the row is locked since it was read
            raise StoreConflict(
                f"state database {self._shown}: incident {before.id} changed while it was being "
                "updated; nothing was saved: try again"
            )


# --- opening and migrating


def _parse(url: str) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(
            f"state database URL {_redact_text(url)!r} is not a database URL; use "
            "sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DATABASE"
        ) from exc
    backend, _, driver = parsed.drivername.partition("+")
    if backend in ("postgres", "postgresql") and driver in ("", "psycopg"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def _created_whole(url: URL, path: Path, shown: str) -> bool:
    """Create the SQLite state database at ``path`` complete; False if this filesystem cannot.

    It is made under a temporary name beside ``path`` and hard-linked into place, so a file at
    ``path`` is never a half-made database: another process opening it meanwhile (a watcher
    and its relay lanes starting on a new state file together) would otherwise find it empty,
    take the write lock before its creator and refuse it as a truncated one. When another
    process links its own first, that one is used. Where hard links are refused, the caller
    creates the file in place, as before.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.new")
    try:
        engine = _create_engine(url.set(database=str(temporary)))
        try:
            opening = _Opening(shown, path=temporary, fresh=True, create=True, read_only=False)
            _migrate(engine, opening)
        finally:
            engine.dispose()
        try:
            os.link(temporary, path)
        except FileExistsError:
            return True
        except OSError:
            return False
        return True
    finally:
        temporary.unlink(missing_ok=True)


def _remove_if_empty(path: Path) -> None:
    with suppress(OSError):
        if path.stat().st_size == 0:
            path.unlink()


def _shown(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def _create_engine(url: URL) -> Engine:
    backend = url.get_backend_name()
    if backend == "sqlite":
        engine = create_engine(url)
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if backend == "postgresql":
        connect_args: dict[str, Any] = {}
        if "connect_timeout" not in url.query:
            connect_args["connect_timeout"] = _PG_CONNECT_TIMEOUT_S
        return ping_when_idle(create_engine(url, connect_args=connect_args))
    raise StoreError(
        f"state database {_shown(url)}: {backend} is not supported; use sqlite:///PATH or "
        "postgresql+psycopg://USER@HOST:PORT/DATABASE"
    )


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite would otherwise start
    # transactions lazily and run DDL outside them), and enforce foreign keys.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    # Writers take the write lock up front, so two writers queue instead of deadlocking.
    immediate = conn.get_execution_options().get(_WRITE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@dataclass(frozen=True, slots=True)
class _Revisions:
    heads: frozenset[str]
    known: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Opening:
    """How :func:`open_store` was asked to open a database, for :func:`_migrate`."""

    shown: str
    path: Path | None
    """The SQLite file; None for PostgreSQL and in-memory SQLite."""
    fresh: bool
    """The SQLite file did not exist: this open creates it."""
    create: bool
    read_only: bool

    @property
    def existing_file(self) -> bool:
        """A SQLite file that was there before: it must already be mlcopilot's."""
        return self.path is not None and not self.fresh


def _migrate(engine: Engine, opening: _Opening) -> None:
    shown = opening.shown
    with resources.as_file(resources.files("mlcopilot.store") / "migrations") as location:
        script, revisions = _scripts(str(location))
        with engine.connect() as conn:
            current = _current(conn, revisions, shown)
            if current == revisions.heads:
                return  # up to date: opening changes nothing and takes no write lock
            _may_set_up(conn, current, opening)
        with engine.connect() as conn:
            conn.execution_options(**{_WRITE: True})
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
                current = _current(conn, revisions, shown)
                if current == revisions.heads:
                    return  # another process migrated while we waited
                if not current:
                    if opening.existing_file:
                        # Still nothing of ours with the lock held: a new file is linked into
                        # place whole (_created_whole), so this one is empty (truncated?) or
                        # another program's. (Where hard links are refused, a first scan
                        # creating it in place may still be caught here before its lock.)
                        _refuse_unrecognised(conn, opening)
                    _refuse_foreign(conn, shown)
                    _create_at_head(conn, script)
                    return
                cfg = _config(str(location))
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")


def _create_at_head(conn: Connection, script: ScriptDirectory) -> None:
    """Create a new database's tables as the newest migration leaves them, and stamp it so.

    Alembic's recipe for a database built from scratch: the tables from the schema
    (:mod:`mlcopilot.store.schema`, which a test proves equal to what the migrations build, on
    both engines), instead of every migration in turn: SQLite's copy whole tables to alter
    them, and every scan, watcher and test that starts on a new store paid for all of them.
    Existing databases are upgraded migration by migration.
    """
    t.metadata.create_all(conn, checkfirst=False)
    MigrationContext.configure(conn).stamp(script, "head")


def _config(location: str) -> Config:
    """Alembic's configuration for the migrations at ``location``.

    A new one for each upgrade: the connection is handed over in its attributes.
    """
    cfg = Config()
    cfg.set_main_option("script_location", location.replace("%", "%%"))
    cfg.set_main_option("path_separator", "os")
    return cfg


@cache
def _scripts(location: str) -> tuple[ScriptDirectory, _Revisions]:
    """The migrations at ``location`` and their revisions, read once a process.

    Reading them loads every migration script, and every open of a store asks which revision
    is the newest.
    """
    script = ScriptDirectory.from_config(_config(location))
    revisions = _Revisions(
        heads=frozenset(script.get_heads()),
        known=frozenset(rev.revision for rev in script.walk_revisions()),
    )
    return script, revisions


def _current(conn: Connection, revisions: _Revisions, shown: str) -> frozenset[str]:
    current = frozenset(MigrationContext.configure(conn).get_current_heads())
    unknown = sorted(current - revisions.known)
    if unknown:
        raise StoreError(
            f"state database {shown} was written by a newer mlcopilot (schema revision "
            f"{', '.join(unknown)} is unknown to this version); upgrade mlcopilot, or use "
            "another state database"
        )
    return current


def _may_set_up(conn: Connection, current: frozenset[str], opening: _Opening) -> None:
    """Refuse, before any lock is taken, to set up or upgrade what this open must not."""
    shown = opening.shown
    if current:
        if opening.read_only:
            raise StoreError(
                f"state database {shown} was written by an older mlcopilot and needs a schema "
                "upgrade, which a read-only open (a dry run) does not make: run any command "
                "without --dry-run once (e.g. `mlcopilot incidents list`)"
            )
        return  # an upgrade of our own database: done under the lock
    if opening.existing_file:
        if opening.read_only or not opening.create or inspect(conn).get_table_names():
            _refuse_unrecognised(conn, opening)
        return  # zero bytes: maybe a concurrent first scan is creating it (checked locked)
    if opening.read_only or not opening.create:
        raise MissingStore(
            f"state database {shown} holds no mlcopilot state yet: run `mlcopilot scan` "
            "first, or check --state-url / MLCOPILOT_STATE_URL"
        )


def _refuse_unrecognised(conn: Connection, opening: _Opening) -> None:
    """Refuse an existing SQLite file without mlcopilot's schema revision (always raises)."""
    shown = opening.shown
    tables = set(inspect(conn).get_table_names())
    if not tables:
        raise StoreError(empty_store_message(shown, opening.path))
    if tables <= _TABLES:
        raise StoreError(
            f"state database {shown} holds mlcopilot's tables but no schema revision (its "
            "alembic_version table is gone), so this version cannot tell what they hold: "
            "restore it from a backup, or move it away to start afresh"
        )
    raise _foreign(shown, tables)


def _refuse_foreign(conn: Connection, shown: str) -> None:
    tables = set(inspect(conn).get_table_names())
    # A SQLite file is ours alone; in a PostgreSQL schema only our own table names matter.
    clash = tables if conn.dialect.name == "sqlite" else tables & _TABLES
    if clash:
        raise _foreign(shown, clash)


def _foreign(shown: str, tables: set[str]) -> StoreError:
    return StoreError(
        f"state database {shown} already holds tables that are not mlcopilot's "
        f"({', '.join(sorted(tables)[:5])}); point mlcopilot at a new database file or schema"
    )


def _reason(exc: BaseException, url: URL | None) -> str:
    """The first line of what went wrong, from the driver when there is one, secrets hidden."""
    cause: BaseException = exc
    if isinstance(exc, StatementError) and exc.orig is not None:
        cause = exc.orig
    text = str(cause)
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    line = line or type(cause).__name__
    if url is not None and url.password:
        line = line.replace(str(url.password), "***")
    return _redact_text(line)


def _hint(exc: BaseException, url: URL) -> str:
    reason = _reason(exc, url).lower()
    if isinstance(exc, NoSuchModuleError | ImportError):
        return "install the driver: pip install 'ml-incident-copilot[postgres]'"
    if url.get_backend_name() == "sqlite":
        if "malformed" in reason:
            return "it is damaged: restore it from a backup, or move it away to start afresh"
        if "not a database" in reason or "encrypted" in reason:
            return "it is not a SQLite database: move it away or use another state file"
        if "readonly" in reason or "read-only" in reason:
            return "its file or folder is read-only: use a writable location"
        if "unable to open" in reason:
            return "check that the directory exists and is writable"
        if "locked" in reason:
            return "another mlcopilot process is using it: try again"
        return "check the path, or move the file away to start afresh"
    return (
        "check that PostgreSQL is running there and that the host, port, user, password and "
        "database in the URL are right"
    )


# --- secrets

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][\w+.-]*://)(?P<user>[^:/@\s]*):(?P<secret>[^@/\s]+)@")


def _redact_text(text: str) -> str:
    """``text`` with the password of any ``scheme://user:password@`` URL in it hidden."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)


# --- rows <-> domain types


def _jsonable(value: object) -> Any:
    """``value`` as plain JSON data: mappings, lists, strings, finite numbers, bools, None.

    Tuples become lists, sets sorted lists, datetimes ISO strings, enums their values, and
    anything else (including NaN and infinities) its ``str``; mapping keys become strings.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Enum):
        return _jsonable(value.value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def _in_id_order(incidents: Sequence[Incident]) -> list[Incident]:
    """``incidents`` in (id, generation) order.

    Sorted twice by one attribute (stable sorts), not by an (id, generation) key: that is a
    tuple an incident, and an estate's first scan opens 282,022 incidents.
    """
    ordered = sorted(incidents, key=attrgetter("generation"))
    ordered.sort(key=attrgetter("id"))
    return ordered


def _chosen(baselines: Iterable[Baseline]) -> ChosenBaselines:
    """``baselines`` as a scan holds its new ones (a scan's own are given so already)."""
    return baselines if isinstance(baselines, ChosenBaselines) else ChosenBaselines(baselines)


def _incident_row(inc: Incident, run_id: int | None) -> dict[str, Any]:
    for name in ("opened_at", "updated_at", "resolved_at", "acknowledged_at"):
        value = getattr(inc, name)
        if value is not None:
            require_aware(name, value)
    return {
        "id": inc.id,
        "generation": inc.generation,
        "state": inc.state.value,
        "check_name": inc.check,
        "severity": inc.severity.value,
        "model": inc.model,
        "entity": inc.entity,
        "field": inc.field,
        "change": inc.change,
        "previous_field": inc.previous_field,
        "message": inc.message,
        "path": list(inc.path),
        "evidence": _jsonable(inc.evidence),
        "opened_at": inc.opened_at,
        "updated_at": inc.updated_at,
        "resolved_at": inc.resolved_at,
        "acknowledged_at": inc.acknowledged_at,
        "acknowledged_by": inc.acknowledged_by,
        "resolution": inc.resolution,
        "seen_at": inc.seen_at,
        "content_digest": content_digest(inc),
        "last_run_id": run_id,
    }


_SKIPPED_IN_SQL: Final = 4 * IN_CHUNK
"""Models left out by the database itself (``NOT IN``) up to this many; more, and their pairs
are read per model and left out here, to stay well under SQLite's limit on parameters."""


def _open_models(conn: Connection) -> set[Urn]:
    """The models with an open incident (only a latest generation is ever unresolved)."""
    i = t.incidents
    query = select(i.c.model).where(i.c.state != IncidentState.RESOLVED.value).distinct()
    return set(conn.execute(query).scalars())


def _open_kinds(
    conn: Connection, entities: Sequence[Urn], skip: Sequence[Urn], others: Sequence[Urn] | None
) -> Iterator[tuple[Urn, str]]:
    """``(entity, check)`` open on ``entities`` but for ``skip``'s models.

    ``others``: the models with open incidents but ``skip``'s, when known.
    """
    i = t.incidents
    open_here = (i.c.entity.in_(entities), i.c.state != IncidentState.RESOLVED.value)
    narrowed: tuple[ColumnElement[bool], ...] | None = None
    if others is not None and len(others) <= _SKIPPED_IN_SQL:
        narrowed = (i.c.model.in_(others),)
    elif len(skip) <= _SKIPPED_IN_SQL:
        narrowed = (i.c.model.not_in(skip),) if skip else ()
    if narrowed is not None:
        query = select(i.c.entity, i.c.check_name).where(*open_here, *narrowed).distinct()
        for row in conn.execute(query):
            yield row.entity, row.check_name
        return
    skipped = frozenset(skip)
    query = select(i.c.entity, i.c.check_name, i.c.model).where(*open_here).distinct()
    for pair in conn.execute(query):
        if pair.model not in skipped:
            yield pair.entity, pair.check_name


def _first_not_written(conn: Connection, incidents: Sequence[Incident], *, run_id: int) -> Incident:
    """The first of ``incidents`` (by id) whose row this run did not write: it was not open.

    Told by the run id the statement set on every row it matched (it may have resolved them).
    """
    i = t.incidents
    written: set[tuple[str, int]] = set()
    for chunk in chunks(sorted({inc.id for inc in incidents})):
        query = select(i.c.id, i.c.generation).where(i.c.id.in_(chunk), i.c.last_run_id == run_id)
        written.update((row.id, int(row.generation)) for row in conn.execute(query))
    ordered = sorted(incidents, key=lambda inc: (inc.id, inc.generation))
    return next((inc for inc in ordered if (inc.id, inc.generation) not in written), ordered[0])


def _updated_values(inc: Incident, *, run_id: int) -> dict[str, Any]:
    """What a scan refreshes of an incident it saw again (never its state)."""
    return {
        "severity": inc.severity.value,
        "change": inc.change,
        "previous_field": inc.previous_field,
        "message": inc.message,
        "path": list(inc.path),
        "evidence": _jsonable(inc.evidence),
        "updated_at": inc.updated_at,
        "seen_at": inc.seen_at,
        "content_digest": content_digest(inc),
        "last_run_id": run_id,
    }


def _resolved_values(inc: Incident, *, run_id: int, now: datetime) -> dict[str, Any]:
    """What a scan sets on an incident whose risk cleared."""
    return {
        "state": IncidentState.RESOLVED.value,
        "resolved_at": inc.resolved_at or now,
        "resolution": inc.resolution or lifecycle.CLEARED,
        "updated_at": inc.updated_at,
        "last_run_id": run_id,
    }


def _incident_from(row: Row[Any], strings: dict[str, str] | None = None) -> Incident:
    return incident_from_mapping(dict(row._mapping), strings)


_TIMES: Final = tuple(c.name for c in t.incidents.c if isinstance(c.type, t.UTCDateTime))
_INCIDENT_COLUMNS: Final = [raw_time(c) if c.name in _TIMES else c for c in t.incidents.c]
"""An incident's columns for :class:`_IncidentRows`: its times raw."""


class _IncidentRows:
    """Incidents read back sharing what their rows repeat: urns, checks, columns and times."""

    def __init__(self, dialect: Dialect) -> None:
        self._strings: dict[str, str] = {}
        self._times = Times(dialect)

    def incident(self, row: Row[Any]) -> Incident:
        """The incident of one row selected as :data:`_INCIDENT_COLUMNS` says."""
        mapping = dict(row._mapping)
        for name in _TIMES:
            mapping[name] = self._times(mapping[name])
        return incident_from_mapping(mapping, self._strings)


def _latest(conn: Connection, incident_id: str, *, for_update: bool = False) -> Incident | None:
    i = t.incidents
    query = select(i).where(i.c.id == incident_id).order_by(i.c.generation.desc()).limit(1)
    if for_update and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = conn.execute(query).first()
    return None if row is None else _incident_from(row)


def _writeback_seq(conn: Connection) -> int:
    """A fresh sequence number for a write-back row made outside a scan run."""
    o = t.outbox
    lowest = conn.execute(
        select(func.min(o.c.seq)).where(o.c.sink == "datahub", o.c.seq < 0)
    ).scalar()
    return int(lowest) - 1 if lowest is not None else -1


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


if TYPE_CHECKING:

    def _is_a_state_store(store: SqlStore) -> StateStore:
        return store
