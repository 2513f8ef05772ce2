"""The scan index of a Lite file: each entity already translated, kept beside Lite's own table.

DataHub Lite keeps every aspect as JSON text; a scan needs each entity as a node and its edges.
Decoding and translating the JSON of every upstream entity on every scan cost ~150 µs an
entity (``benchmarks/RESULTS.md``), several times the whole budget of a fast scan. So every
write transaction of mlcopilot (:meth:`~mlcopilot.catalog.lite.LiteCatalog.writing`: ``catalog
load``, the write-back) ends with :func:`refresh`, which stores, for each entity a walk reads
as a node (:data:`WALKED`: datasets, features, models, jobs...) that has none, what
:func:`~mlcopilot.catalog.aspects.node_from_aspects` and
:func:`~mlcopilot.catalog.aspects.edges_from_aspects` make of its aspects — the very functions a
scan without the index calls — in one compact msgpack record (``msgspec``), in the same
transaction. A scan then reads one record per entity and builds the node straight from it.

What keeps it exact:

- **Any change to an entity's rows drops its record.** Triggers on ``metadata_aspect_v2``
  delete the record of every urn whose rows are inserted, deleted or changed (its JSON, version
  or ``createdon``; a re-dated ``system_metadata`` changes nothing a scan reads), whoever
  writes: mlcopilot, ``datahub lite`` or anything else. An entity without a record is read the
  slow way, from its JSON, and gets a record at the next write transaction of mlcopilot. The
  records are trusted only while the three triggers are there, unchanged.
- **A record is what the translation made, or nothing.** It holds every field of the node
  :func:`~mlcopilot.catalog.aspects.node_from_aspects` made, in types msgpack keeps exactly
  (``tests/catalog/test_lite_scan_identical.py`` compares whole scans with and without
  records); an entity whose translation fails gets none, and a record that does not decode
  as an :class:`Entry` is ignored: either is read the slow way (which fails, or not, as
  before).
- **Records of other code are not used.** The index is stamped with a digest of the code that
  makes nodes (this module, :mod:`~mlcopilot.catalog.aspects`, the model, the SDK's and
  msgspec's versions); when it differs from the running code's, every record is ignored, and
  rebuilt by the next write transaction.
- **What other entities say is not in it.** Assertions and incidents (which name the entity
  from elsewhere) and a model's training runs (when it has no date of its own) are joined at
  scan time, as without the index.

The index is two tables, ``mlcopilot_scan_index`` and ``mlcopilot_scan_index_meta``, and the
three ``mlcopilot_scan_index_*`` triggers: DataHub Lite ignores them, and the file stays a
Lite catalog (``datahub lite`` reads and writes it as before). Dropping the tables without
the triggers would make every later write to ``metadata_aspect_v2`` fail; drop the triggers
first.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import multiprocessing
import os
import queue
import signal
import sqlite3
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import datetime
from functools import lru_cache
from importlib import metadata
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, get_args

import msgspec

from mlcopilot.catalog import aspects as ax
from mlcopilot.model import (
    UPDATE_HISTORY,
    AssertionState,
    ColumnEdge,
    Deprecation,
    Edge,
    EdgeKind,
    EntityType,
    IncidentSignal,
    Node,
    Schema,
    SchemaField,
    Urn,
)
from mlcopilot.model import catalog as _model_catalog
from mlcopilot.model import profiles as _model_profiles

FORMAT = 1
"""The record layout; part of the stamp (:func:`stamp`)."""
TABLE = "mlcopilot_scan_index"
META = "mlcopilot_scan_index_meta"
_BATCH = 500  # urns per IN (...) query, well under SQLite's bound-parameter limit
_DATASET_URNS = "urn:li:dataset:"

_TRIGGERS = {
    f"{TABLE}_insert": (
        f"CREATE TRIGGER {TABLE}_insert AFTER INSERT ON metadata_aspect_v2 "
        f"BEGIN DELETE FROM {TABLE} WHERE urn = NEW.urn; END"
    ),
    f"{TABLE}_update": (
        f"CREATE TRIGGER {TABLE}_update "
        "AFTER UPDATE OF urn, aspect_name, version, metadata, createdon ON metadata_aspect_v2 "
        f"BEGIN DELETE FROM {TABLE} WHERE urn IN (OLD.urn, NEW.urn); END"
    ),
    f"{TABLE}_delete": (
        f"CREATE TRIGGER {TABLE}_delete AFTER DELETE ON metadata_aspect_v2 "
        f"BEGIN DELETE FROM {TABLE} WHERE urn = OLD.urn; END"
    ),
}
"""Every change to an entity's rows drops its record (see the module)."""
_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (urn TEXT PRIMARY KEY, entry BLOB NOT NULL) WITHOUT ROWID",
    f"CREATE TABLE IF NOT EXISTS {META} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
WALKED = tuple(t for t in EntityType if t is not EntityType.OTHER)
"""The entity types a lineage walk reads as nodes: only they get records. Tags, users,
assertions, incidents... are read otherwise (or, asked for as nodes, the slow way)."""
_MISSING = (
    # Every entity of those types without a record: each type a range of Lite's (urn, aspect,
    # version) index (``urn:li:dataset:`` up to ``urn:li:dataset;``, the next character),
    # each distinct urn looked up in the records' primary key.
    "SELECT urn FROM ("
    + " UNION ALL ".join(
        "SELECT DISTINCT urn FROM metadata_aspect_v2 WHERE urn >= ? AND urn < ?" for _ in WALKED
    )
    + f") AS held WHERE NOT EXISTS (SELECT 1 FROM {TABLE} WHERE {TABLE}.urn = held.urn)"
)
_MISSING_TYPES = [bound for t in WALKED for bound in (f"urn:li:{t.value}:", f"urn:li:{t.value};")]

UPDATE_STAMP = (
    # aspects.update_stamps in SQL: an operation's lastUpdatedTimestamp, else (missing or 0)
    # its timestampMillis; a properties version's lastModified.time.
    "CASE aspect_name WHEN 'operation' THEN COALESCE(NULLIF(json_extract(metadata, "
    "'$.lastUpdatedTimestamp'), 0), json_extract(metadata, '$.timestampMillis')) "
    "ELSE json_extract(metadata, '$.lastModified.time') END"
)
_UPDATE_HISTORY = (
    "SELECT urn, stamp FROM (SELECT urn, stamp, ROW_NUMBER() OVER "
    "(PARTITION BY urn, aspect_name ORDER BY stamp DESC) AS newest FROM ("
    f"SELECT urn, aspect_name, {UPDATE_STAMP} AS stamp FROM metadata_aspect_v2 "
    "WHERE urn IN ({urns}) AND aspect_name IN ({names}) AND version > 0"
    ")) WHERE newest <= ? AND stamp > 0"
)
_NEWEST_PROFILES = (
    # Each dataset's profile with the newest timestampMillis, the last loaded of a tie: Lite's
    # own sink leaves the last *written* event in v0, and that is not the newest.
    "SELECT urn, metadata FROM (SELECT urn, metadata, ROW_NUMBER() OVER (PARTITION BY urn "
    "ORDER BY json_extract(metadata, '$.timestampMillis') DESC, version DESC) AS newest "
    "FROM metadata_aspect_v2 WHERE urn IN ({urns}) AND aspect_name = 'datasetProfile' "
    "AND version > 0) WHERE newest = 1"
)
_SCHEMA_WRITTEN = (
    # Per urn and schema aspect, when its newest version was written (``createdon``, the bare
    # column of the row MAX picks): see Entry.schema_before.
    "SELECT urn, MAX(version), createdon FROM metadata_aspect_v2 WHERE urn IN ({urns}) "
    "AND aspect_name IN ({names}) AND version > 0 GROUP BY urn, aspect_name"
)


# --- the record ---------------------------------------------------------------------------


class _Field(msgspec.Struct, array_like=True, omit_defaults=True, frozen=True):
    """A :class:`~mlcopilot.model.SchemaField`; its position is its place in the list."""

    path: str
    type: str
    native_type: str = ""
    description: str = ""
    tags: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()


class _Deprecation(msgspec.Struct, array_like=True, frozen=True):
    note: str
    decommission_time: datetime | None
    replacement: Any


class Entry(msgspec.Struct, array_like=True, omit_defaults=True):
    """One entity's record: its :class:`~mlcopilot.model.Node` but for what others say of it.

    Sets are kept sorted, column lineage as runs of one upstream dataset (its fields in
    pairs), edges as (kind, upstream). ``schema`` is kept undecoded until asked for, so equal
    schemas are decoded once a scan (:class:`Reader`).
    """

    entity_type: EntityType
    name: str
    exists: bool = True
    schema: msgspec.Raw = msgspec.Raw(b"\xc0")
    """Its schema's fields, or nil (``0xC0``) for none."""
    tags: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()
    structured_properties: dict[str, tuple[Any, ...]] = {}
    custom_properties: dict[str, str] = {}
    deprecation: _Deprecation | None = None
    owners: tuple[str, ...] | None = None
    removed: bool = False
    last_updated: datetime | None = None
    column_lineage: tuple[tuple[str, tuple[str, ...]], ...] = ()
    source_columns: tuple[str, ...] = ()
    trained_at: datetime | None = None
    update_times: tuple[datetime, ...] | None = None
    domains: tuple[str, ...] = ()
    annotated_columns: tuple[_Field, ...] = ()
    profile: str | None = None
    """The newest ``datasetProfile``'s JSON, for a dataset that exists and has one."""
    edges: tuple[tuple[EdgeKind, str], ...] = ()
    jobs: tuple[str, ...] = ()
    """A model's training jobs, when it has no date of its own (its runs then date it)."""
    schema_before: int | None = None
    """When the newest version of its last-changed schema aspect was written (``createdon``,
    epoch ms): the schema as of any later time is the current one. None when it has no
    versions, or one is not dated by an integer (then history is read from SQL)."""


_NODE_FIELDS = (
    "urn",
    "entity_type",
    "name",
    "exists",
    "schema",
    "tags",
    "terms",
    "structured_properties",
    "custom_properties",
    "deprecation",
    "owners",
    "removed",
    "last_updated",
    "column_lineage",
    "source_columns",
    "trained_at",
    "assertions",
    "incidents",
    "update_times",
    "domains",
    "annotated_columns",
    "profile",
)
"""Node's fields in order, as :func:`_node` passes them; another Node disables the index."""
_KINDS: dict[str, EdgeKind] = {kind: kind for kind in get_args(EdgeKind)}
_NO_SCHEMA = msgspec.Raw(b"\xc0")
_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(Entry)
_FIELDS = msgspec.msgpack.Decoder(tuple[_Field, ...])


@lru_cache(maxsize=1)
def stamp() -> str | None:
    """A digest of the code that makes nodes; None when it cannot be read (no index then)."""
    if tuple(f.name for f in dataclasses.fields(Node)) != _NODE_FIELDS:
        return None
    digest = hashlib.sha256(f"format {FORMAT}\n".encode())
    for module in (sys.modules[__name__], ax, _model_catalog, _model_profiles):
        source = getattr(module, "__file__", None)
        try:
            digest.update(Path(source).read_bytes() if source else b"")
        except OSError:
            return None
        if not source:
            return None
    for package in ("acryl-datahub", "msgspec"):
        try:
            digest.update(f"{package} {metadata.version(package)}\n".encode())
        except metadata.PackageNotFoundError:
            return None
    return digest.hexdigest()


# --- writing ------------------------------------------------------------------------------


def refresh(client: sqlite3.Connection, helper: Helper | None = None) -> int:
    """Give every entity of the file without a record one; return how many were written.

    Called inside a write transaction, after its writes: creates the tables and triggers
    the first time, and drops records another version of the code wrote. Entities whose
    translation fails get none. No cyclic garbage collection meanwhile (see
    :func:`mlcopilot.scan.checking.walk_and_check`): a first load translates every entity.
    ``helper``: a second process that translates every other batch (:class:`Helper`).
    """
    current = stamp()
    if current is None:
        return 0
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _refresh(client, current, helper)
    finally:
        if collecting:
            gc.enable()


def _refresh(client: sqlite3.Connection, current: str, helper: Helper | None) -> int:
    for statement in _CREATE:
        client.execute(statement)
    held = dict(
        client.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN (?, ?, ?)",
            list(_TRIGGERS),
        ).fetchall()
    )
    for name, sql in _TRIGGERS.items():
        if held.get(name) != sql:
            client.execute(f"DROP TRIGGER IF EXISTS {name}")
            client.execute(sql)
    row = client.execute(f"SELECT value FROM {META} WHERE key = 'stamp'").fetchone()
    if row is None or row[0] != current or held.keys() != _TRIGGERS.keys():
        client.execute(f"DELETE FROM {TABLE}")  # made by other code, or never kept current
        client.execute(f"INSERT OR REPLACE INTO {META} VALUES ('stamp', ?)", (current,))
    missing = [urn for (urn,) in client.execute(_MISSING, _MISSING_TYPES)]
    chunks = [missing[start : start + _BATCH] for start in range(0, len(missing), _BATCH)]
    written = 0
    if helper is not None and len(chunks) > 1:
        # Reading and writing stay here (the transaction is this connection's); translating
        # is shared: a batch goes to the helper while it has fewer than two waiting, else this
        # process translates it, so each takes as much as it keeps up with (reading a batch
        # costs about a third of translating it: 28 and 91 µs an entity).
        for chunk in chunks:
            gathered = _gather(client, chunk)
            if helper.outstanding < 2:
                helper.submit(gathered)
                continue
            for rows in (_build(gathered), *helper.ready()):
                client.executemany(f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?)", rows)
                written += len(rows)
        while helper.outstanding:
            rows = helper.next()
            client.executemany(f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?)", rows)
            written += len(rows)
        return written
    for chunk in chunks:
        rows = _build(_gather(client, chunk))
        client.executemany(f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?)", rows)
        written += len(rows)
    return written


_Gathered = tuple[
    list[Urn],
    list[tuple[Urn, str, str]],
    dict[Urn, list[int]],
    list[tuple[Urn, str]],
    dict[Urn, int | None],
]
"""What translating a batch of entities needs from the file, read (and picklable): the urns,
their v0 aspects (urn, name, JSON), update history, newest profile rows, schema dates."""


def _gather(client: sqlite3.Connection, urns: Sequence[Urn]) -> _Gathered:
    query = (
        "SELECT urn, aspect_name, metadata FROM metadata_aspect_v2 "
        f"WHERE version = 0 AND urn IN ({','.join('?' * len(urns))})"
    )
    return (
        list(urns),
        client.execute(query, urns).fetchall(),
        update_history(client, urns),
        newest_profile_rows(client, urns),
        _schema_written(client, urns),
    )


def _build(gathered: _Gathered) -> list[tuple[Urn, bytes]]:
    """The records of a gathered batch, translated as a scan without the index does."""
    urns, rows, history, profile_rows, written = gathered
    found: dict[Urn, dict[str, Any]] = {}
    broken: set[Urn] = set()
    for urn, name, text in rows:
        try:
            found.setdefault(urn, {})[name] = loads(text)
        except (TypeError, ValueError, RecursionError):
            broken.add(urn)
    profiles: dict[Urn, tuple[str, Any]] = {}
    for urn, text in profile_rows:
        try:
            profiles[urn] = (text, loads(text))
        except (TypeError, ValueError, RecursionError):
            broken.add(urn)
    records: list[tuple[Urn, bytes]] = []
    for urn in urns:
        if urn in broken:
            continue
        record = _record(urn, found.get(urn, {}), history, profiles.get(urn), written)
        if record is not None:
            records.append((urn, record))
    return records


class Helper:
    """A forked process that translates batches for :func:`refresh` on a second core.

    Forked when the transaction starts, while the process is still small (its pages shared
    with the loading process, so its own memory is what a batch needs), and before any thread
    of this class exists. It never touches the catalog's connection (the batches come over a
    pipe, already read), ends without interpreter teardown, and ends when told to or when the
    pipe closes (the loading process died).

    Two threads of the loading process move the batches and their records, so handing work
    over never waits for the helper to finish what it is translating, and the helper never
    waits for the loading process to take its records.
    """

    def __init__(self) -> None:
        context = multiprocessing.get_context("fork")
        self._connection, helpers = context.Pipe()
        self._process = context.Process(target=_help, args=(helpers, self._connection), daemon=True)
        self._process.start()
        helpers.close()
        self._outgoing: queue.SimpleQueue[_Gathered | None] = queue.SimpleQueue()
        self._incoming: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self.outstanding = 0
        """Batches submitted whose records have not been taken yet."""

    def submit(self, gathered: _Gathered) -> None:
        """Hand a batch over to translate (in the background); :meth:`next` gives its records."""
        if not self._threads:
            self._threads = [
                threading.Thread(target=self._send, daemon=True),
                threading.Thread(target=self._receive, daemon=True),
            ]
            for thread in self._threads:
                thread.start()
        self._outgoing.put(gathered)
        self.outstanding += 1

    def ready(self) -> list[list[tuple[Urn, bytes]]]:
        """The records of every batch translated by now (without waiting)."""
        done = []
        while self.outstanding and not self._incoming.empty():
            done.append(self.next())
        return done

    def next(self) -> list[tuple[Urn, bytes]]:
        """The records of the next translated batch (waiting for it)."""
        kind, value = self._incoming.get()
        self.outstanding -= 1
        if kind == "crash":
            raise RuntimeError(f"the scan index's helper process failed:\n{value}")
        if kind == "gone":
            raise RuntimeError("the scan index's helper process died")
        records: list[tuple[Urn, bytes]] = value
        return records

    def close(self) -> None:
        """End the helper, once it has translated what it was given; again does nothing.

        Before the catalog's journal mode is set back: the helper holds the descriptors the
        process had when it forked, so a WAL file SQLite deletes keeps its space while the
        helper lives (on a full disk, leaving WAL then fails: ``tests/catalog/test_load_crash``).
        """
        if self._connection.closed:
            return
        if self._threads:  # the sender tells the helper to stop; its exit ends the receiver
            self._outgoing.put(None)
        else:
            with suppress(OSError):
                self._connection.send(None)
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        for thread in self._threads:
            thread.join()
        self._connection.close()

    def _send(self) -> None:
        with suppress(OSError):  # the helper died: the receiver says so
            while True:
                gathered = self._outgoing.get()
                self._connection.send(gathered)
                if gathered is None:
                    return

    def _receive(self) -> None:
        while True:
            try:
                answer: tuple[str, Any] = self._connection.recv()
            except (EOFError, OSError):
                self._incoming.put(("gone", None))
                return
            self._incoming.put(answer)


def _help(connection: Connection, transactions: Connection) -> None:
    # Only the transaction's process may hold the other end: it closing that ends this one.
    transactions.close()
    # The transaction's process decides about signals: a Ctrl-C there ends this one's pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    gc.disable()  # as in refresh: the batches make many objects, none of them cyclic garbage
    try:
        while True:
            try:
                gathered: _Gathered | None = connection.recv()
            except (EOFError, OSError):
                break
            if gathered is None:  # told to stop
                break
            try:
                answer: tuple[str, Any] = ("records", _build(gathered))
            except Exception:  # a bug: hand the traceback over rather than die silently
                answer = ("crash", traceback.format_exc())
            connection.send(answer)
    except (BrokenPipeError, OSError):
        pass  # the transaction's process is gone
    finally:
        connection.close()
        os._exit(0)  # no interpreter teardown: the forked copy of the catalog stays untouched


def _record(
    urn: Urn,
    aspects: Mapping[str, Any],
    history: Mapping[Urn, list[int]],
    profile: tuple[str, Any] | None,
    written: Mapping[Urn, int | None],
) -> bytes | None:
    """The record of one entity; None when its translation fails (read the slow way then).

    ``profile``: its newest ``datasetProfile``, as stored and decoded.
    """
    text, value = profile if profile is not None else (None, None)
    try:
        node = ax.node_from_aspects(
            urn,
            aspects,
            updates=history.get(urn),
            related={},
            assertions=None,
            incidents=None,
            profile=value if isinstance(value, dict) else None,
        )
        edges = ax.edges_from_aspects(urn, aspects)
        jobs: tuple[str, ...] = ()
        if node.entity_type is EntityType.ML_MODEL and node.trained_at is None:
            jobs = tuple(ax.training_jobs(aspects))
        kept_profile = text if node.profile is not None else None
        entry = _entry(node, edges, jobs, kept_profile, written.get(urn))
        if entry is None:
            return None
        return _ENCODER.encode(entry)
    except Exception:  # a scan reads such an entity the slow way, and fails (or not) as before
        return None


def _entry(
    node: Node,
    edges: Sequence[Edge],
    jobs: tuple[str, ...],
    profile: str | None,
    schema_before: int | None,
) -> Entry | None:
    if any(e.downstream != node.urn for e in edges):
        return None
    schema = _NO_SCHEMA
    if node.schema is not None:
        fields = _fields(node.schema.fields)
        if fields is None:
            return None
        schema = msgspec.Raw(_ENCODER.encode(fields))
    annotated = _fields(node.annotated_columns)
    if annotated is None:
        return None
    deprecation = node.deprecation
    return Entry(
        entity_type=node.entity_type,
        name=node.name,
        exists=node.exists,
        schema=schema,
        tags=tuple(sorted(node.tags)),
        terms=tuple(sorted(node.terms)),
        structured_properties=dict(node.structured_properties),
        custom_properties=dict(node.custom_properties),
        deprecation=None
        if deprecation is None
        else _Deprecation(deprecation.note, deprecation.decommission_time, deprecation.replacement),
        owners=node.owners,
        removed=node.removed,
        last_updated=node.last_updated,
        column_lineage=_runs(node.column_lineage),
        source_columns=node.source_columns,
        trained_at=node.trained_at,
        update_times=node.update_times,
        domains=node.domains,
        annotated_columns=annotated,
        profile=profile,
        edges=tuple((e.kind, e.upstream) for e in edges),
        jobs=jobs,
        schema_before=schema_before,
    )


def _fields(fields: Sequence[SchemaField]) -> tuple[_Field, ...] | None:
    kept: list[_Field] = []
    for position, field in enumerate(fields):
        if field.position != position:
            return None
        kept.append(
            _Field(
                field.path,
                field.type,
                field.native_type,
                field.description,
                tuple(sorted(field.tags)),
                tuple(sorted(field.terms)),
            )
        )
    return tuple(kept)


def _runs(edges: Sequence[ColumnEdge]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Column edges as runs of one upstream: ``((upstream, (up, down, up, down...)), ...)``."""
    runs: list[tuple[str, list[str]]] = []
    for edge in edges:
        if not runs or runs[-1][0] != edge.upstream:
            runs.append((edge.upstream, []))
        runs[-1][1].extend((edge.upstream_field, edge.downstream_field))
    return tuple((upstream, tuple(pairs)) for upstream, pairs in runs)


def _schema_written(client: sqlite3.Connection, urns: Sequence[Urn]) -> dict[Urn, int | None]:
    """Per urn: the latest ``createdon`` of its schema aspects' newest versions (see Entry)."""
    names = list(ax.SCHEMA_ASPECTS)
    query = _SCHEMA_WRITTEN.format(urns=",".join("?" * len(urns)), names=",".join("?" * len(names)))
    found: dict[Urn, int] = {}
    undated: set[Urn] = set()
    for urn, _, created in client.execute(query, [*urns, *names]):
        if isinstance(created, int):
            found[urn] = max(created, found.get(urn, created))
        else:
            undated.add(urn)
    return {urn: None if urn in undated else at for urn, at in found.items()} | dict.fromkeys(
        undated
    )


# --- reading ------------------------------------------------------------------------------


def usable(client: sqlite3.Connection) -> bool:
    """Whether the file's records may be used: made by this code, the triggers in place."""
    current = stamp()
    if current is None:
        return False
    try:
        row = client.execute(f"SELECT value FROM {META} WHERE key = 'stamp'").fetchone()
        triggers = dict(
            client.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN (?, ?, ?)",
                list(_TRIGGERS),
            ).fetchall()
        )
    except sqlite3.OperationalError:
        return False  # no index in this file
    return row is not None and row[0] == current and triggers == _TRIGGERS


def read(client: sqlite3.Connection, urns: Sequence[Urn]) -> dict[Urn, Entry]:
    """The records of those of ``urns`` that have one (a chunk of urns per query)."""
    found: dict[Urn, Entry] = {}
    decode = _DECODER.decode
    for start in range(0, len(urns), _BATCH):
        chunk = urns[start : start + _BATCH]
        query = f"SELECT urn, entry FROM {TABLE} WHERE urn IN ({','.join('?' * len(chunk))})"
        for urn, record in client.execute(query, chunk):
            try:
                found[urn] = decode(record)
            except msgspec.DecodeError:
                continue  # not a record of this code: read the slow way
    return found


class Reader:
    """Builds nodes from records; equal schemas decoded once, as one shared object."""

    def __init__(self) -> None:
        self._schemas: dict[bytes, Schema] = {}

    def node(
        self,
        urn: Urn,
        entry: Entry,
        assertions: tuple[AssertionState, ...] | None,
        incidents: tuple[IncidentSignal, ...] | None,
        related: Mapping[Urn, ax.Aspects],
    ) -> tuple[Node, list[Edge]]:
        """The node and own upstream edges of ``urn``, as the translation made them.

        ``assertions`` and ``incidents``: those naming it (kept for the entity types the
        translation keeps them for); ``related``: the training jobs' aspects, for a model
        with :attr:`Entry.jobs`.
        """
        entity_type = entry.entity_type
        exists = entry.exists
        schema = None if entry.schema == _NO_SCHEMA else self._schema(entry.schema)
        trained_at = entry.trained_at
        if entry.jobs:
            trained_at = ax.trained_at_from_runs(entry.jobs, related)
        deprecation = None
        if entry.deprecation is not None:
            kept = entry.deprecation
            deprecation = Deprecation(kept.note, kept.decommission_time, kept.replacement)
        profile = None
        if entry.profile is not None:
            profile = ax.dataset_profile(json.loads(entry.profile))
        last_updated, times = entry.last_updated, entry.update_times
        if times and last_updated == times[-1]:
            last_updated = times[-1]  # one object, as the translation keeps it
        node = Node(
            urn,
            entity_type,
            entry.name,
            exists,
            schema,
            _frozen(entry.tags) if entry.tags else _EMPTY,
            _frozen(entry.terms) if entry.terms else _EMPTY,
            entry.structured_properties,
            entry.custom_properties,
            deprecation,
            entry.owners,
            entry.removed,
            last_updated,
            _column_edges(entry.column_lineage) if entry.column_lineage else (),
            entry.source_columns,
            trained_at,
            assertions if exists and entity_type in ax.ASSERTION_ENTITY_TYPES else None,
            incidents if exists and entity_type in ax.INCIDENT_ENTITY_TYPES else None,
            times,
            _interned(entry.domains) if entry.domains else (),
            _annotated(entry.annotated_columns) if entry.annotated_columns else (),
            profile,
        )
        intern = sys.intern
        # The kind as the translation's literal: one string for all edges of a kind.
        edges = [Edge(urn, intern(target), _KINDS[kind]) for kind, target in entry.edges]
        return node, edges

    def _schema(self, raw: msgspec.Raw) -> Schema:
        key = bytes(raw)
        schema = self._schemas.get(key)
        if schema is None:
            if len(self._schemas) >= 1 << 14:
                self._schemas.clear()  # distinct schemas in the thousands: keep memory bounded
            schema = Schema(_schema_fields(_FIELDS.decode(raw)))
            self._schemas[key] = schema
        return schema


def _schema_fields(fields: Sequence[_Field]) -> tuple[SchemaField, ...]:
    plain = ax.plain_field
    intern = sys.intern
    built: list[SchemaField] = []
    for position, field in enumerate(fields):
        if not (field.description or field.tags or field.terms):
            built.append(plain(field.path, field.type, field.native_type, position))
        else:
            built.append(
                SchemaField(
                    intern(field.path),
                    field.type,
                    intern(field.native_type),
                    field.description,
                    position,
                    _frozen(field.tags),
                    _frozen(field.terms),
                )
            )
    return tuple(built)


def _annotated(fields: Sequence[_Field]) -> tuple[SchemaField, ...]:
    intern = sys.intern
    return tuple(
        SchemaField(
            intern(f.path),
            f.type,
            f.native_type,
            f.description,
            position,
            _frozen(f.tags),
            _frozen(f.terms),
        )
        for position, f in enumerate(fields)
    )


def _column_edges(runs: Sequence[tuple[str, tuple[str, ...]]]) -> tuple[ColumnEdge, ...]:
    intern = sys.intern
    built: list[ColumnEdge] = []
    for upstream, pairs in runs:
        dataset = intern(upstream)
        built += [
            ColumnEdge(dataset, intern(pairs[index]), intern(pairs[index + 1]))
            for index in range(0, len(pairs), 2)
        ]
    return tuple(built)


def _frozen(items: tuple[str, ...]) -> frozenset[str]:
    if not items:
        return _EMPTY
    intern = sys.intern
    return frozenset(intern(i) for i in items)


def _interned(items: tuple[str, ...]) -> tuple[str, ...]:
    if not items:
        return ()
    intern = sys.intern
    return tuple(intern(i) for i in items)


_EMPTY: frozenset[str] = frozenset()


# --- the SQL the translation's other inputs come from ---------------------------------------


_JSON = msgspec.json.Decoder().decode


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, decoded by msgspec (in C) when it can.

    msgspec refuses what ``json`` reads differently or not at all (``NaN``, ``Infinity``,
    numbers too large for a float, lone surrogates, nesting past its depth): ``json`` reads
    those, so the value is always the one ``json.loads`` gives (``tests/catalog``
    compares them).
    """
    try:
        return _JSON(text)
    except (msgspec.DecodeError, RecursionError):
        return json.loads(text)


def update_history(client: sqlite3.Connection, urns: Sequence[Urn]) -> dict[Urn, list[int]]:
    """When each dataset among ``urns`` changed, as its stored history says (epoch ms).

    Every stored ``operation`` event and ``datasetProperties`` version, dated as
    :func:`~mlcopilot.catalog.aspects.update_stamps` dates them (:data:`UPDATE_STAMP` is that
    rule in SQL, so each row's JSON is parsed once, by SQLite); of each aspect only the newest
    :data:`~mlcopilot.model.UPDATE_HISTORY` by time (a busy table has thousands of
    operations), whatever order they were written in. A dataset with none gets [].
    """
    datasets = [u for u in urns if u.startswith(_DATASET_URNS)]
    history: dict[Urn, list[int]] = {u: [] for u in datasets}
    if not datasets:
        return history
    names = list(ax.UPDATE_ASPECTS)
    query = _UPDATE_HISTORY.format(
        urns=",".join("?" * len(datasets)), names=",".join("?" * len(names))
    )
    for urn, stamp_ in client.execute(query, [*datasets, *names, UPDATE_HISTORY]):
        if isinstance(stamp_, int | float):  # not a number: a damaged row, skipped
            history[urn].append(int(stamp_))
    return history


def newest_profile_rows(client: sqlite3.Connection, urns: Sequence[Urn]) -> list[tuple[Urn, str]]:
    """Each dataset's newest ``datasetProfile`` by ``timestampMillis``, as stored (JSON)."""
    datasets = [u for u in urns if u.startswith(_DATASET_URNS)]
    if not datasets:
        return []
    query = _NEWEST_PROFILES.format(urns=",".join("?" * len(datasets)))
    return client.execute(query, datasets).fetchall()
