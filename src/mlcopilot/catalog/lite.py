"""The embedded catalog: a DataHub Lite (SQLite) file, walked and written back to offline.

Lite stores every aspect with its version history but keeps no lineage index, so the edges
come from the aspects themselves (:mod:`mlcopilot.catalog.aspects`); the reverse hops (feature
table → feature, job → produced dataset) come from an index built once per catalog instance.

Each entity is read and translated once per instance, in chunks (so a level of a huge walk
never holds all its raw JSON at once), and kept as a node and its edges: models of an estate
share most of their upstream. What is kept is dropped when this instance writes, and when
SQLite's ``data_version`` says another connection has changed the file since.

An entity is read from the file's scan index when it has a record there
(:mod:`mlcopilot.catalog.lite_index`: its node, translated when it was written, kept current by
every write transaction of this class), else from its aspects' JSON; both give the same node.
"""

from __future__ import annotations

import json
import os
import sqlite3
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.serialization_helper import pre_json_transform
from datahub.lite.sqlite_lite_config import SqliteLiteConfig

from mlcopilot.catalog import aspect_writes, lite_index
from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog.lite_writer import TIMESERIES, LiteWriter, Outcome, TransactionalLite
from mlcopilot.errors import CatalogError
from mlcopilot.lineage.downstream import downstream_models_of
from mlcopilot.lineage.upstream import walk_upstream
from mlcopilot.model import (
    CONTACT_ASPECTS,
    AssertionState,
    Contact,
    DatasetProfile,
    Edge,
    IncidentSignal,
    Lineage,
    Node,
    Schema,
    Urn,
    Write,
    contact_from_aspects,
    contact_kind,
)
from mlcopilot.protocols import ClosedOnExit, WalkLimits

_BATCH = 500  # urns per IN (...) query, well under SQLite's bound-parameter limit
_MODEL_URNS = "urn:li:mlModel:*"  # GLOB is case-sensitive, unlike LIKE
_DATASET_URNS = "urn:li:dataset:"
_ASSERTION_URNS = "urn:li:assertion:*"  # a prefix GLOB: SQLite reads just that range of urns
_INCIDENT_URNS = "urn:li:incident:*"
_LATEST_RUNS = (
    # Each assertion's completed run with the newest timestampMillis, the last loaded of a
    # tie: Lite's own sink leaves the last *written* event in v0, and that is not the newest.
    "SELECT urn, metadata FROM (SELECT urn, metadata, ROW_NUMBER() OVER (PARTITION BY urn "
    "ORDER BY json_extract(metadata, '$.timestampMillis') DESC, version DESC) AS newest "
    "FROM metadata_aspect_v2 WHERE urn GLOB ? AND aspect_name = ? AND version > 0 "
    "AND json_extract(metadata, '$.status') = 'COMPLETE') WHERE newest = 1"
)

_CONTACT_ROWS = (
    # Every latest aspect of some owners: any of them means Lite holds the owner (GMS's
    # notion of existence, the key aspect included), and only the contact aspects' JSON is
    # returned, without a group's member lists (an identity provider's groups can be huge).
    "SELECT urn, aspect_name, CASE WHEN aspect_name IN ({names}) "
    "THEN json_remove(metadata, '$.members', '$.admins', '$.groups') END "
    "FROM metadata_aspect_v2 WHERE version = 0 AND urn IN ({urns})"
)
_CONTACT_NAMES = sorted({name for pair in CONTACT_ASPECTS.values() for name in pair})

_PROFILE_STAMPS = (
    # Every stored profile event of some datasets, dated: the baseline is picked from these.
    "SELECT urn, version, json_extract(metadata, '$.timestampMillis') FROM metadata_aspect_v2 "
    "WHERE urn IN ({urns}) AND aspect_name = 'datasetProfile' AND version > 0"
)
_Aspects = dict[Urn, dict[str, ax.JsonObject]]
_WRITE_PRAGMAS = {"journal_mode": "WAL", "synchronous": "NORMAL"}
_WAL_MODE = 2
"""Bytes 18 and 19 of a SQLite header (write and read format versions) in WAL mode."""


class LiteCatalog(ClosedOnExit):
    """A :class:`~mlcopilot.protocols.Catalog` over a DataHub Lite SQLite file.

    Construction does no I/O; the file is opened read-only on first use and reopened for
    writing only when something is written, so a scan never creates or alters a file it only
    reads. Use :func:`open_lite_catalog` to check the file up front.
    """

    def __init__(self, path: str | Path, *, create: bool = False) -> None:
        self._path = Path(path)
        self._create = create
        self._lite: TransactionalLite | None = None
        self._writable = False
        self._reverse: dict[Urn, list[Edge]] | None = None
        self._down: dict[Urn, list[Edge]] | None = None
        """Every edge by its upstream end (built once, for the reverse walk)."""
        self._nodes: dict[Urn, Node] = {}
        self._edges: dict[Urn, list[Edge]] = {}
        """Each read entity's own upstream edges (declared by its aspects)."""
        self._read_at: tuple[int, int] | None = None
        """(connection, ``data_version``) the kept nodes and edges were read at."""
        self._signals: _Signals | None = None
        """Assertions and active incidents by the entity they name (built once, see there)."""
        self._indexed: bool | None = None
        """Whether the file's scan index may be read (None: not asked yet)."""
        self._reader = lite_index.Reader()
        self._schema_before: dict[Urn, int | None] = {}
        """Of each entity read from the scan index: its ``Entry.schema_before``."""

    @property
    def label(self) -> str:
        """``lite:<path>``."""
        return f"lite:{self._path}"

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self._path

    def models(self) -> list[Urn]:
        """Every ML model that exists and is not soft-deleted (``status.removed``), sorted."""
        found = self._read("urn GLOB ?", [_MODEL_URNS])
        return sorted(
            urn
            for urn, aspects in found.items()
            if ax.exists(aspects) and not ax.is_removed(aspects)
        )

    def entity_counts(self) -> dict[str, int]:
        """How many entities of each type exist and are not soft-deleted, as :meth:`models`."""
        query = "SELECT urn, aspect_name FROM metadata_aspect_v2 WHERE version = 0"
        names: dict[Urn, dict[str, ax.JsonObject]] = {}
        with self._errors():
            for urn, name in self._handle().sqlite_client.execute(query):
                names.setdefault(urn, {})[name] = {}
        statuses = self._read("aspect_name = ?", ["status"])
        counts: dict[str, int] = {}
        for urn, aspects in names.items():
            if ax.exists(aspects) and not ax.is_removed(statuses.get(urn, {})):
                entity_type = urn.split(":", 3)[2] if urn.count(":") >= 3 else "other"
                counts[entity_type] = counts.get(entity_type, 0) + 1
        return counts

    def contacts(self, owners: Sequence[Urn]) -> dict[Urn, Contact]:
        """How to reach each owner the file holds (:class:`~mlcopilot.protocols.OwnerDirectory`).

        An owner is held when it has any aspect; its contact comes from its
        ``corp{User,Group}EditableInfo`` and ``corp{User,Group}Info``, read a chunk of owners
        per query. Urns of no user or group, and owners with no aspect, are absent.
        """
        wanted = [urn for urn in dict.fromkeys(owners) if contact_kind(urn) is not None]
        held: dict[Urn, dict[str, ax.JsonObject]] = {}
        with self._errors():
            client = self._handle().sqlite_client
            for start in range(0, len(wanted), _BATCH):
                chunk = wanted[start : start + _BATCH]
                query = _CONTACT_ROWS.format(
                    names=",".join("?" * len(_CONTACT_NAMES)), urns=",".join("?" * len(chunk))
                )
                for urn, name, metadata in client.execute(query, [*_CONTACT_NAMES, *chunk]):
                    aspects = held.setdefault(urn, {})
                    value = json.loads(metadata) if metadata is not None else None
                    if isinstance(value, dict):
                        aspects[name] = value
        found = ((urn, contact_from_aspects(urn, held[urn])) for urn in wanted if urn in held)
        return {urn: contact for urn, contact in found if contact is not None}

    def nodes(self, urns: Sequence[Urn]) -> dict[Urn, Node]:
        """The current metadata of each urn; an urn with no aspects gets ``exists=False``."""
        self._check_current()
        todo = [u for u in dict.fromkeys(urns) if u not in self._nodes]
        for start in range(0, len(todo), _BATCH):
            self._translate(todo[start : start + _BATCH])
        return {urn: self._nodes[urn] for urn in urns}

    def upstream(self, urns: Sequence[Urn]) -> list[Edge]:
        """Every edge one hop upstream of each urn: declared by its aspects or by others'."""
        self._check_current()
        unique = list(dict.fromkeys(urns))
        unread = [u for u in unique if u not in self._edges]
        if unread:
            found = self._aspects(unread, sorted(ax.EDGE_ASPECTS))
            for urn in unread:
                self._edges[urn] = ax.edges_from_aspects(urn, found.get(urn, {}))
        reverse = self._reverse_index()
        # Every edge here ends at the urn it was found for, and each urn's own edges are
        # distinct already: only its reverse edges can repeat one (then dropped, in order).
        edges: list[Edge] = []
        own = self._edges
        for urn in unique:
            mine = own[urn]
            edges += mine
            theirs = reverse.get(urn)
            if theirs:
                held = set(mine)
                edges += [edge for edge in dict.fromkeys(theirs) if edge not in held]
        return edges

    def lineage(self, root: Urn, limits: WalkLimits) -> Lineage:
        """The upstream lineage of ``root`` within ``limits``."""
        return walk_upstream(self, root, limits)

    def downstream(self, urns: Sequence[Urn]) -> list[Edge]:
        """Every edge one hop downstream of each urn: the reverse of :meth:`upstream`.

        From an index of every edge the catalog's aspects declare, by upstream end, built
        once per instance with two range reads (Lite keeps no graph index to ask).
        """
        self._check_current()
        index = self._downstream_index()
        edges: dict[Edge, None] = {}
        for urn in dict.fromkeys(urns):
            edges.update(dict.fromkeys(index.get(urn, [])))
        return list(edges)

    def downstream_models(self, urn: Urn, limits: WalkLimits | None = None) -> list[Urn]:
        """The models whose lineage reaches ``urn`` (:mod:`mlcopilot.lineage.downstream`)."""
        return downstream_models_of(self, urn, limits or WalkLimits())

    def schema_as_of(self, urn: Urn, when: datetime) -> Schema | None:
        """The schema of the newest version written before ``when``; None if there was none.

        A version is dated by the ``systemMetadata.lastObserved`` of the record that wrote it,
        or by the time it was written when the record carried none.
        """
        as_of = ax.datetime_to_ms(when)
        if as_of <= 0:
            return None
        with self._errors():
            found = self._handle().get(urn, list(ax.SCHEMA_ASPECTS), as_of=as_of)
        if not found:
            return None
        return ax.schema_from_aspects({k: v for k, v in found.items() if isinstance(v, dict)})

    def profiles_before(
        self, requests: Iterable[tuple[Urn, datetime]]
    ) -> dict[tuple[Urn, datetime], DatasetProfile | None]:
        """For each (dataset, time): its newest profile taken at or before then, else None.

        Profiles are ordered by ``timestampMillis`` (the last loaded of a tie), never by the
        order they were written in; every stored event counts (Lite keeps them all).
        """
        wanted = list(dict.fromkeys(requests))
        stamps = self._profile_stamps([urn for urn, _ in wanted])
        chosen: dict[tuple[Urn, datetime], tuple[Urn, int]] = {}
        for urn, when in wanted:
            limit = ax.datetime_to_ms(when)
            held = [(stamp, v) for stamp, v in stamps.get(urn, ()) if stamp <= limit]
            if held:
                chosen[(urn, when)] = (urn, max(held)[1])
        events = self._profile_events(chosen.values())
        return {key: events.get(chosen[key]) if key in chosen else None for key in wanted}

    def oldest_profiles(self, urns: Sequence[Urn]) -> dict[Urn, DatasetProfile | None]:
        """Each dataset's oldest profile by ``timestampMillis`` (the first loaded of a tie)."""
        stamps = self._profile_stamps(urns)
        chosen = {
            urn: (urn, min(stamps[urn], key=lambda e: (e[0], e[1]))[1])
            for urn in urns
            if stamps.get(urn)
        }
        events = self._profile_events(chosen.values())
        return {urn: events.get(chosen[urn]) if urn in chosen else None for urn in urns}

    def _profile_stamps(self, urns: Sequence[Urn]) -> dict[Urn, list[tuple[int, int]]]:
        """Every profile event of ``urns`` as ``(timestampMillis, version)``, unparsed."""
        found: dict[Urn, list[tuple[int, int]]] = {}
        unique = list(dict.fromkeys(urns))
        with self._errors():
            client = self._handle().sqlite_client
            for start in range(0, len(unique), _BATCH):
                chunk = unique[start : start + _BATCH]
                query = _PROFILE_STAMPS.format(urns=",".join("?" * len(chunk)))
                for urn, version, stamp in client.execute(query, chunk):
                    if isinstance(stamp, int) and not isinstance(stamp, bool):
                        found.setdefault(urn, []).append((stamp, int(version)))
        return found

    def _profile_events(
        self, keys: Iterable[tuple[Urn, int]]
    ) -> dict[tuple[Urn, int], DatasetProfile]:
        """The profile events stored as the given (urn, version) rows."""
        wanted = list(dict.fromkeys(keys))
        found: dict[tuple[Urn, int], DatasetProfile] = {}
        with self._errors():
            client = self._handle().sqlite_client
            for start in range(0, len(wanted), _BATCH // 2):
                chunk = wanted[start : start + _BATCH // 2]
                where = " OR ".join("(urn = ? AND version = ?)" for _ in chunk)
                query = (
                    "SELECT urn, version, metadata FROM metadata_aspect_v2 "
                    f"WHERE aspect_name = 'datasetProfile' AND ({where})"
                )
                params = [part for key in chunk for part in key]
                for urn, version, metadata in client.execute(query, params):
                    profile = ax.dataset_profile(lite_index.loads(metadata))
                    if profile is not None:
                        found[(urn, int(version))] = profile
        return found

    def _newest_profiles(self, urns: Sequence[Urn]) -> dict[Urn, ax.JsonObject]:
        """Each dataset's newest profile event by ``timestampMillis`` (JSON), if it has one."""
        found: dict[Urn, ax.JsonObject] = {}
        with self._errors():
            client = self._handle().sqlite_client
            for urn, metadata in lite_index.newest_profile_rows(client, urns):
                event = lite_index.loads(metadata)
                if isinstance(event, dict):
                    found[urn] = event
        return found

    def schemas_at(
        self, requests: Iterable[tuple[Urn, datetime]]
    ) -> dict[tuple[Urn, datetime], Schema | None]:
        """The schema of each urn as of its time (:meth:`schemas_as_of` per distinct time)."""
        by_time: dict[datetime, list[Urn]] = {}
        for urn, when in dict.fromkeys(requests):
            by_time.setdefault(when, []).append(urn)
        found: dict[tuple[Urn, datetime], Schema | None] = {}
        for when, urns in by_time.items():
            found.update(((u, when), s) for u, s in self.schemas_as_of(urns, when).items())
        return found

    def schemas_as_of(self, urns: Sequence[Urn], when: datetime) -> dict[Urn, Schema | None]:
        """:meth:`schema_as_of` of each urn, a chunk of urns per query.

        The same rule as Lite's own ``get(as_of=...)`` (which reads one urn per query): per
        aspect, the newest version row written before ``when``. When those are the latest
        versions of every schema aspect the urn has (the usual case: the schema has not
        changed since), the schema is the current one, and a node already read gives it
        without reading and translating the JSON again. A node read from the scan index says
        when those latest versions were written (``Entry.schema_before``): all before
        ``when``, they are the versions the rule picks, and no query is needed.
        """
        unique = list(dict.fromkeys(urns))
        result: dict[Urn, Schema | None] = dict.fromkeys(unique)
        as_of = ax.datetime_to_ms(when)
        if as_of <= 0:
            return result
        self._check_current()  # the nodes kept must be what the file holds now
        asked: list[Urn] = []
        for urn in unique:
            written = self._schema_before.get(urn)
            if written is not None and written < as_of:
                result[urn] = self._nodes[urn].schema
            else:
                asked.append(urn)
        unique = asked
        names = list(ax.SCHEMA_ASPECTS)
        for start in range(0, len(unique), _BATCH):
            chunk = unique[start : start + _BATCH]
            where = (
                f"urn IN ({','.join('?' * len(chunk))}) "
                f"AND aspect_name IN ({','.join('?' * len(names))}) AND version > 0"
            )
            query = (
                "SELECT urn, MIN(CASE WHEN chosen = latest THEN 1 ELSE 0 END), COUNT(chosen) "
                "FROM (SELECT urn, aspect_name, MAX(version) AS latest, "
                "MAX(CASE WHEN createdon < ? THEN version END) AS chosen "
                f"FROM metadata_aspect_v2 WHERE {where} GROUP BY urn, aspect_name) "
                "GROUP BY urn"
            )
            unchanged: set[Urn] = set()
            with self._errors():
                rows = self._handle().sqlite_client.execute(query, [as_of, *chunk, *names])
                for urn, current, found in rows:
                    if found and current and urn in self._nodes:
                        unchanged.add(urn)
            for urn in unchanged:
                result[urn] = self._nodes[urn].schema
            result.update(self._schemas_before([u for u in chunk if u not in unchanged], as_of))
        return result

    def _schemas_before(self, urns: Sequence[Urn], as_of: int) -> dict[Urn, Schema | None]:
        if not urns:
            return {}
        names = list(ax.SCHEMA_ASPECTS)
        query = (
            "SELECT urn, aspect_name, metadata FROM ("
            "SELECT urn, aspect_name, metadata, ROW_NUMBER() OVER "
            "(PARTITION BY urn, aspect_name ORDER BY version DESC) AS rank_in_aspect "
            f"FROM metadata_aspect_v2 WHERE urn IN ({','.join('?' * len(urns))}) "
            f"AND aspect_name IN ({','.join('?' * len(names))}) "
            "AND version > 0 AND createdon < ?"
            ") ranked WHERE rank_in_aspect = 1"
        )
        found: _Aspects = {}
        with self._errors():
            for urn, name, metadata in self._handle().sqlite_client.execute(
                query, [*urns, *names, as_of]
            ):
                value = lite_index.loads(metadata)
                if isinstance(value, dict):
                    found.setdefault(urn, {})[name] = value
        return {urn: ax.schema_from_aspects(aspects) for urn, aspects in found.items()}

    def apply(self, writes: Sequence[Write], *, dry_run: bool = False) -> list[Write]:
        """Make the catalog hold ``writes``; return those that changed something.

        Writes to the same entity fold in order. Tags and structured properties a write uses
        are created when missing. With ``dry_run`` nothing is written.
        """
        # Only what the comparison reads: the targets' schemas would double a large scan's memory.
        state = self._aspects(aspect_writes.state_needs(writes), ax.WRITE_ASPECTS)
        folded = aspect_writes.fold(writes, state)
        if folded.pending and not dry_run:
            mcps = [
                MetadataChangeProposalWrapper(entityUrn=urn, aspect=ax.from_json(name, value))
                for (urn, name), value in folded.pending.items()
            ]
            self._write(mcps)
        return folded.changed

    def ingest(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> int:
        """Write validated MCPs in order, in one transaction; return the new aspect versions.

        An aspect identical to the stored one makes no new version (Lite only re-dates it).
        """
        return self._write(mcps)

    @contextmanager
    def writing(self, *, parallel: bool = False) -> Iterator[LiteWriter]:
        """One transaction for many aspect writes: all of them are stored, or none.

        ``parallel``: for a large load, translate the scan index in a second process too
        (:class:`~mlcopilot.catalog.lite_index.Helper`, forked now, while this one is small).

        The writes go into Lite's table directly, in Lite's row format
        (:mod:`mlcopilot.catalog.lite_writer`). Any exception inside the block, or the process
        dying, leaves the file as it was: SQLite's journal undoes an uncommitted transaction.

        Raises:
            CatalogError: when the file cannot be opened or written (a full disk included).
        """
        lite = self._handle(writable=True)
        self._forget()
        client = lite.sqlite_client
        helper = lite_index.Helper() if parallel else None
        try:
            with self._errors():
                # WAL while writing (readers keep reading); an earlier write of this handle
                # left the file in rollback mode at rest (below). Not into a catalog with no
                # aspect yet (a first load): it has nothing for a reader to read, and WAL
                # would write every page twice (to the WAL, then the checkpoint's copy; 1 of
                # 9 s of a 200 MB load) where the rollback journal writes the file once.
                if not _empty(client):
                    client.execute("PRAGMA journal_mode = WAL")
                # A load rewrites index pages over and over: keep up to 64 MB of them in
                # memory rather than spilling them to the WAL before the commit.
                client.execute("PRAGMA cache_size = -65536")
                client.execute("BEGIN IMMEDIATE")  # the write lock now, not at the first row
                lite.start_deferring()
                try:
                    writer = LiteWriter(lite)
                    yield writer
                    writer.finish()
                    lite_index.refresh(client, helper)  # every entity written gets its record
                    client.commit()
                except BaseException:
                    client.rollback()
                    raise
                finally:
                    if helper is not None:
                        helper.close()
                    lite.stop_deferring()
                    self._forget()
            # A large load leaves a WAL as big as itself: fold it into the file and drop it.
            # The load is committed already, so a failure here (a full disk) must not be
            # reported as a failed load: SQLite checkpoints again later.
            with suppress(sqlite3.Error):
                client.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            if helper is not None:
                helper.close()  # (ended already, unless the transaction never started)
            # At rest in rollback-journal mode, committed or not: a WAL file can only be read
            # where SQLite may create its -shm and -wal files, so a read-only folder (or a
            # dry run, which must write no file at all) could not read it. Fails harmlessly,
            # leaving WAL, when another connection has the file open.
            with suppress(sqlite3.Error):
                client.execute("PRAGMA journal_mode = DELETE")

    def timeseries(
        self, urn: Urn, aspect_name: str, limit: int | None = None
    ) -> list[ax.JsonObject]:
        """Every stored event of a timeseries aspect of ``urn``, newest ``timestampMillis`` first.

        Args:
            urn: The entity.
            aspect_name: A timeseries aspect (``operation``, ``datasetProfile``, ...).
            limit: At most this many events (the newest ones).

        Raises:
            ValueError: when ``aspect_name`` is not a timeseries aspect.
        """
        if aspect_name not in TIMESERIES:
            raise ValueError(f"{aspect_name!r} is not a timeseries aspect")
        query = (
            "SELECT version, metadata FROM metadata_aspect_v2 "
            "WHERE urn = ? AND aspect_name = ? AND version > 0"
        )
        with self._errors():
            rows = self._handle().sqlite_client.execute(query, (urn, aspect_name)).fetchall()
        events = [(lite_index.loads(metadata), version) for version, metadata in rows]
        # Newest event first; of two at the same time, the one loaded last.
        events.sort(key=lambda e: (_stamp(e[0]), e[1]), reverse=True)
        return [event for event, _ in events[:limit] if isinstance(event, dict)]

    def close(self) -> None:
        """Release the file."""
        self._release()

    def check(self) -> None:
        """Open the file now, so a missing or unusable catalog fails before any work.

        Raises:
            CatalogError: when the file is missing (and not to be created), is not SQLite or
                is not a DataHub Lite catalog.
        """
        self._handle()

    def _write(self, mcps: Sequence[MetadataChangeProposalWrapper]) -> int:
        new_versions = 0
        with self.writing() as writer:
            for mcp in mcps:
                # All three are set by the MCPW itself.
                assert mcp.entityUrn, mcp
                assert mcp.aspectName, mcp
                assert mcp.aspect is not None, mcp
                system = mcp.systemMetadata.to_obj() if mcp.systemMetadata else None
                value = pre_json_transform(mcp.aspect.to_obj())
                outcome = writer.put(mcp.entityUrn, mcp.aspectName, value, system)
                new_versions += outcome is Outcome.NEW_VERSION
        return new_versions

    def _translate(self, urns: Sequence[Urn]) -> None:
        """Read and translate ``urns``; only their nodes and edges are kept, not the JSON.

        Those with a record in the scan index are built from it; the others are read from
        their aspects' JSON and translated (the same node either way).
        """
        signals = self._signal_index()
        entries = self._entries(urns)
        if entries:
            jobs = {job for entry in entries.values() for job in entry.jobs}
            related: Mapping[Urn, ax.Aspects] = (
                self._aspects(sorted(jobs), ax.TRAINING_RUN_ASPECTS) if jobs else {}
            )
            build = self._reader.node
            for urn, entry in entries.items():
                self._nodes[urn], self._edges[urn] = build(
                    urn,
                    entry,
                    signals.assertions.get(urn, ()),
                    signals.incidents.get(urn, ()),
                    related,
                )
                self._schema_before[urn] = entry.schema_before
            urns = [urn for urn in urns if urn not in entries]
            if not urns:
                return
        found = self._aspects(urns)
        jobs = {job for aspects in found.values() for job in ax.training_jobs(aspects)}
        related = self._aspects(sorted(jobs), ax.TRAINING_RUN_ASPECTS) if jobs else {}
        history = self._update_history(urns)
        profiles = self._newest_profiles(urns)
        for urn in urns:
            aspects = found.get(urn, {})
            self._nodes[urn] = ax.node_from_aspects(
                urn,
                aspects,
                updates=history.get(urn),
                related=related,
                assertions=signals.assertions.get(urn, ()),
                incidents=signals.incidents.get(urn, ()),
                profile=profiles.get(urn),
            )
            self._edges[urn] = ax.edges_from_aspects(urn, aspects)

    def _entries(self, urns: Sequence[Urn]) -> dict[Urn, lite_index.Entry]:
        """The scan index's records of ``urns`` (none when the file's index may not be read)."""
        with self._errors():
            client = self._handle().sqlite_client
            if self._indexed is None:
                self._indexed = lite_index.usable(client)
            return lite_index.read(client, urns) if self._indexed else {}

    def _update_history(self, urns: Sequence[Urn]) -> dict[Urn, list[int]]:
        """When each dataset among ``urns`` changed (:func:`lite_index.update_history`)."""
        with self._errors():
            return lite_index.update_history(self._handle().sqlite_client, urns)

    def _check_current(self) -> None:
        """Forget what was read if another connection has written to the file since."""
        client = self._handle().sqlite_client
        with self._errors():
            (version,) = client.execute("PRAGMA data_version").fetchone()
        read_at = (id(client), int(version))
        if read_at != self._read_at:
            self._forget()
            self._read_at = read_at

    def _forget(self) -> None:
        self._reverse = None
        self._down = None
        self._signals = None
        self._nodes = {}
        self._edges = {}
        self._read_at = None
        self._indexed = None
        self._reader = lite_index.Reader()
        self._schema_before = {}

    def _release(self) -> None:
        lite, self._lite = self._lite, None
        self._read_at = None
        if lite is None:
            return
        with self._errors():
            # Not Lite's close(): it re-reads and re-indexes the whole catalog for browsing,
            # which every write here has kept current already (lite_writer).
            lite.sqlite_client.close()

    def _aspects(self, urns: Sequence[Urn], names: Sequence[str] | None = None) -> _Aspects:
        found: _Aspects = {}
        unique = list(dict.fromkeys(urns))
        for start in range(0, len(unique), _BATCH):
            chunk = unique[start : start + _BATCH]
            where = f"urn IN ({','.join('?' * len(chunk))})"
            params: list[Any] = list(chunk)
            if names:
                where += f" AND aspect_name IN ({','.join('?' * len(names))})"
                params += names
            found.update(self._read(where, params))
        return found

    def _reverse_index(self) -> dict[Urn, list[Edge]]:
        if self._reverse is None:
            names = sorted(ax.REVERSE_EDGE_ASPECTS)
            holders = self._holders(names)
            index: dict[Urn, list[Edge]] = {}
            for urn in sorted(holders):
                for edge in ax.reverse_edges_from_aspects(urn, holders[urn]):
                    index.setdefault(edge.downstream, []).append(edge)
            self._reverse = index
        return self._reverse

    def _downstream_index(self) -> dict[Urn, list[Edge]]:
        """Every edge, own and reverse, by upstream urn: what :meth:`upstream` gives, inverted.

        Own edges are read from every holder of an edge aspect (what ``_edges`` holds per urn);
        reverse edges are the index :meth:`upstream` already uses, so both agree by
        construction.
        """
        if self._down is None:
            names = sorted(ax.EDGE_ASPECTS)
            holders = self._holders(names)
            index: dict[Urn, dict[Edge, None]] = {}
            for urn in sorted(holders):
                for edge in ax.edges_from_aspects(urn, holders[urn]):
                    index.setdefault(edge.upstream, {})[edge] = None
            for edges in self._reverse_index().values():
                for edge in edges:
                    index.setdefault(edge.upstream, {})[edge] = None
            self._down = {urn: list(edges) for urn, edges in index.items()}
        return self._down

    def _signal_index(self) -> _Signals:
        """Every assertion and active incident, by the entity it names; built once.

        Lite has no ``Asserts`` or ``IncidentOn`` edge to follow, so the join is made here:
        an assertion names its entity in ``assertionInfo`` (else its run's ``asserteeUrn``),
        an incident in ``incidentInfo.entities``. Three range reads, whatever the walk asks.
        """
        if self._signals is not None:
            return self._signals
        names = list(ax.ASSERTION_ASPECTS)
        held = self._read(
            f"urn GLOB ? AND aspect_name IN ({','.join('?' * len(names))})",
            [_ASSERTION_URNS, *names],
        )
        runs: dict[Urn, ax.JsonObject] = {}
        with self._errors():
            query = self._handle().sqlite_client.execute(
                _LATEST_RUNS, (_ASSERTION_URNS, ax.ASSERTION_RUN_EVENT)
            )
            for urn, metadata in query:
                event = lite_index.loads(metadata)
                if isinstance(event, dict):
                    runs[urn] = event
        assertions: dict[Urn, list[AssertionState]] = {}
        for urn in sorted(held):
            state = ax.assertion_from_aspects(urn, held[urn], runs.get(urn))
            if state is not None:
                assertions.setdefault(state.entity, []).append(state)
        incidents: dict[Urn, list[IncidentSignal]] = {}
        raised = self._read(
            "urn GLOB ? AND aspect_name IN (?, ?)", [_INCIDENT_URNS, "incidentInfo", "status"]
        )
        for urn in sorted(raised):
            info = raised[urn].get("incidentInfo")
            signal = ax.incident_from_info(urn, info, raised[urn]) if info else None
            if signal is not None:
                for entity in dict.fromkeys(ax.incident_entities(info or {})):
                    incidents.setdefault(entity, []).append(signal)
        self._signals = _Signals(
            assertions={e: tuple(found) for e, found in assertions.items()},
            incidents={e: tuple(found) for e, found in incidents.items()},
        )
        return self._signals

    def _holders(self, names: Sequence[str]) -> _Aspects:
        """The latest of ``names`` of every entity holding any of them.

        Who holds them comes from Lite's (urn, aspect, version) index alone, then only their
        rows are read: a filter on the aspect name alone would read the whole table.
        """
        query = (
            "SELECT DISTINCT urn FROM metadata_aspect_v2 "
            f"WHERE version = 0 AND aspect_name IN ({','.join('?' * len(names))})"
        )
        with self._errors():
            urns = [urn for (urn,) in self._handle().sqlite_client.execute(query, list(names))]
        return self._aspects(urns, names)

    def _read(self, where: str, params: Sequence[Any]) -> _Aspects:
        # Lite's public get() reads one urn per query; a lineage level or the reverse index
        # needs many, so this reads Lite's own table directly (latest versions only).
        query = (
            "SELECT urn, aspect_name, metadata FROM metadata_aspect_v2 "
            f"WHERE version = 0 AND {where}"
        )
        found: _Aspects = {}
        with self._errors():
            for urn, name, metadata in self._handle().sqlite_client.execute(query, params):
                found.setdefault(urn, {})[name] = lite_index.loads(metadata)
        return found

    def _handle(self, *, writable: bool = False) -> TransactionalLite:
        if self._lite is not None and (self._writable or not writable):
            return self._lite
        self._release()
        is_new = not self._path.exists() or self._path.stat().st_size == 0
        if is_new and not self._create:
            raise CatalogError(
                f"no catalog at {self._path} — load metadata first with "
                "`mlcopilot catalog load FILE`"
            )
        if not is_new:
            # Probe read-only first, so a foreign SQLite file never gets Lite's tables added.
            self._lite = self._open(read_only=True)
            self._writable = False
        if writable or is_new:
            self._release()
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._lite = self._open(read_only=False)
            self._writable = True
        assert self._lite is not None
        return self._lite

    def _open(self, *, read_only: bool) -> TransactionalLite:
        immutable = read_only and self._needs_immutable()
        try:
            config = SqliteLiteConfig(
                file=str(self._path),
                read_only=read_only,
                # WAL: readers (a scan) keep reading while a load writes, and a load's
                # one transaction is undone by SQLite if the process dies before commit.
                options={} if read_only else _WRITE_PRAGMAS,
            )
            lite = _ImmutableLite(config) if immutable else TransactionalLite(config)
            lite.sqlite_client.execute("SELECT 1 FROM metadata_aspect_v2 LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            raise CatalogError(self._unusable(exc, read_only=read_only)) from exc
        return lite

    def _needs_immutable(self) -> bool:
        """True for a WAL-mode file in a folder SQLite cannot write (e.g. a read-only mount).

        SQLite reads a WAL-mode file only where it can create the ``-shm`` index beside it;
        ``immutable=1`` reads the file alone, which is exact when nothing is waiting in the
        ``-wal`` file (a folder nobody can write to has no writer adding to it either).

        Raises:
            CatalogError: the ``-wal`` file holds changes that are not in the file yet.
        """
        try:
            with self._path.open("rb") as file:
                header = file.read(20)
        except OSError:
            return False  # the open says why
        if header[18:20] != bytes((_WAL_MODE, _WAL_MODE)):
            return False
        if os.access(self._path.parent, os.W_OK):
            return False
        wal = self._path.with_name(self._path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise CatalogError(
                f"{self._path}: its folder is read-only and the catalog has changes in {wal} "
                "that SQLite can only read where it may write beside them; open it once "
                "where the folder is writable (or copy the folder elsewhere)"
            )
        return True

    def _unusable(self, exc: sqlite3.Error, *, read_only: bool) -> str:
        """Why the file cannot be opened, blaming its content only when the content is at fault."""
        path = self._path
        text = str(exc)
        if "unable to open" in text or "readonly" in text or "read-only" in text:
            if not os.access(path, os.R_OK):
                return f"cannot read {path}: permission denied; check the file's permissions"
            if not read_only and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
                return (
                    f"cannot write to {path}: the file or its folder is read-only ({text}); "
                    "loading metadata and writing back need both writable (a dry run does not)"
                )
            return f"cannot open {path}: {text}; check that the file and its folder can be read"
        if "no such table" in text:
            return (
                f"{path} is not a DataHub Lite catalog: a SQLite database without Lite's "
                "tables; point --catalog at a Lite file, or load metadata with "
                "`mlcopilot catalog load`"
            )
        if "malformed" in text or "not a database" in text:
            return f"{path} is not a DataHub Lite catalog, or is damaged: {text}"
        return f"{path}: cannot use it as a DataHub Lite catalog: {text}"

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            with warnings.catch_warnings():
                # Lite's browse index calls SDK methods the SDK itself deprecates: not ours.
                warnings.simplefilter("ignore", DeprecationWarning)
                yield
        except sqlite3.Error as exc:
            raise CatalogError(f"{self.label}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class _Signals:
    """DataHub's own quality signals by the entity they name (see ``_signal_index``)."""

    assertions: Mapping[Urn, tuple[AssertionState, ...]]
    incidents: Mapping[Urn, tuple[IncidentSignal, ...]]


class _ImmutableLite(TransactionalLite):
    """A read-only Lite handle that reads the file alone (``immutable=1``): no lock, no -shm."""

    def _connect(self, fpath: Path) -> None:
        self.sqlite_client = sqlite3.connect(
            f"{fpath.resolve().as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False
        )


def open_lite_catalog(path: str | Path, *, create: bool) -> LiteCatalog:
    """Open the Lite catalog at ``path`` and check that it is usable.

    Args:
        path: The SQLite file.
        create: Create the file when missing (loading metadata); False for scans.

    Raises:
        CatalogError: when the file is missing and ``create`` is False, or is not a DataHub
            Lite catalog.
    """
    catalog = LiteCatalog(path, create=create)
    catalog.check()
    return catalog


def _stamp(event: object) -> int:
    stamp = event.get("timestampMillis") if isinstance(event, dict) else None
    return stamp if isinstance(stamp, int) else 0


def _empty(client: sqlite3.Connection) -> bool:
    """Whether the catalog holds no aspect at all (a new file, or one never loaded)."""
    return client.execute("SELECT 1 FROM metadata_aspect_v2 LIMIT 1").fetchone() is None
