"""Thread-safe access to the DataHub Lite (SQLite) file the stand-in serves.

Writes go through Lite's own ``write()`` so versioning is exactly Lite's: the first write makes
rows v1 and v0, every changed value adds v(N+1) and rewrites v0, and an identical value only
re-dates v0. GMS numbers versions the same way (v0 latest, 1 oldest), so rows map one to one.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.mcp_builder import mcps_from_mce
from datahub.lite.sqlite_lite import SqliteLite
from datahub.lite.sqlite_lite_config import SqliteLiteConfig
from datahub.metadata.schema_classes import MetadataChangeEventClass

Json = dict[str, Any]

CACHED_READS = 10_000
"""Entities (and aspect histories) whose decoded rows the store keeps, the least recently
read let go first: about 150 MB at the benchmark estate's 15 KB an entity."""


@dataclass(frozen=True)
class AspectRow:
    """One stored aspect version."""

    urn: str
    name: str
    version: int  # the row's number: 0 is the latest value, 1 the oldest
    value: Json
    system_metadata: Json
    created_on: int  # epoch ms: the writer's lastObserved, else the write time

    @property
    def latest_version(self) -> int:
        """For a v0 row, the number of the newest positive row (Lite's ``sysVersion``)."""
        raw = (self.system_metadata.get("properties") or {}).get("sysVersion")
        try:
            return int(raw) if raw is not None else self.version
        except ValueError:
            return self.version


class LiteStore:
    """One Lite file; every call holds a lock because Lite shares a single connection.

    Reads are cached: an entity's latest rows, and an aspect's history, are selected and
    decoded once and kept until a write through this store touches that entity (the stand-in
    owns the file while it serves it: its edge index is built once, at start, the same way).
    GMS too serves repeated reads from caches; without one, selecting and decoding the same
    rows again was half of the stand-in's CPU in a full rescan through it, which shares the
    benchmark machine's two CPUs with the watchers it measures. The rows handed out are
    shared: a caller that changes a value copies it first (as every patch and mutation does).
    """

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = Path(path)
        # Not durable: no fsync per write (Lite commits each aspect), for a copy thrown away.
        options = {} if durable else {"synchronous": "OFF"}
        self._lite = SqliteLite(SqliteLiteConfig(file=str(self.path), options=options))
        self._db = self._lite.sqlite_client
        self._lock = threading.RLock()
        self._latest: OrderedDict[str, dict[str, AspectRow]] = OrderedDict()
        self._history: OrderedDict[str, dict[str, list[AspectRow]]] = OrderedDict()

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Hold the store across a read and the write that follows it (GMS applies a patch
        to the latest value inside one transaction)."""
        with self._lock:
            yield

    def close(self) -> None:
        """Close the file; Lite rebuilds its browse index first (``datahub lite ls``)."""
        with self._lock, warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            self._lite.close()

    # --- writes --------------------------------------------------------------------------

    def write(
        self, records: Iterable[MetadataChangeProposalWrapper | MetadataChangeEventClass]
    ) -> list[tuple[str, str]]:
        """Write records in order; return the (urn, aspect) pairs they touched, in order."""
        touched: dict[tuple[str, str], None] = {}
        with self._lock, warnings.catch_warnings():
            # Lite's browse-index hook calls SDK methods the SDK itself deprecates: not ours.
            warnings.simplefilter("ignore", DeprecationWarning)
            for record in records:
                mcps = (
                    mcps_from_mce(record)
                    if isinstance(record, MetadataChangeEventClass)
                    else [record]
                )
                for mcp in mcps:
                    if mcp.aspect is None or not mcp.entityUrn or not mcp.aspectName:
                        continue
                    self._lite.write(mcp)
                    touched[(mcp.entityUrn, mcp.aspectName)] = None
            self._forget(urn for urn, _ in touched)
        return list(touched)

    def delete(self, urn: str, aspect: str | None = None) -> list[tuple[str, str]]:
        """Hard-delete an entity (or one aspect of it); return the pairs removed."""
        with self._lock:
            where, params = "urn = ?", [urn]
            if aspect:
                where += " AND aspect_name = ?"
                params.append(aspect)
            names = [
                r[0]
                for r in self._db.execute(
                    f"SELECT DISTINCT aspect_name FROM metadata_aspect_v2 WHERE {where}", params
                )
            ]
            self._db.execute(f"DELETE FROM metadata_aspect_v2 WHERE {where}", params)
            self._db.commit()
            self._forget([urn])
        return [(urn, n) for n in names]

    def _forget(self, urns: Iterable[str]) -> None:
        for urn in set(urns):
            self._latest.pop(urn, None)
            self._history.pop(urn, None)

    # --- reads ---------------------------------------------------------------------------

    def _rows(self, sql: str, params: Iterable[Any]) -> list[AspectRow]:
        with self._lock:
            rows = self._db.execute(sql, list(params)).fetchall()
        return [
            AspectRow(
                r[0], r[1], int(r[2]), json.loads(r[3]), json.loads(r[4] or "{}"), int(r[5] or 0)
            )
            for r in rows
        ]

    # Lite rewrites v0's value on each change but keeps its first ``createdon``; GMS dates v0
    # by its latest change, which is the createdon of row N (N = sysVersion).
    _COLUMNS = (
        "m.urn, m.aspect_name, m.version, m.metadata, m.system_metadata, "
        "CASE WHEN m.version = 0 THEN COALESCE((SELECT h.createdon FROM metadata_aspect_v2 h "
        "WHERE h.urn = m.urn AND h.aspect_name = m.aspect_name AND h.version = "
        "CAST(json_extract(m.system_metadata, '$.properties.sysVersion') AS INTEGER)), "
        "m.createdon) ELSE m.createdon END"
    )

    def latest(self, urn: str, names: Iterable[str] | None = None) -> dict[str, AspectRow]:
        """The v0 row of every (or each named) aspect of ``urn``."""
        rows = self._cached(self._latest, urn, lambda: self._all_latest(urn))
        wanted = list(names or [])
        if not wanted:
            return dict(rows)
        return {name: rows[name] for name in wanted if name in rows}

    def _all_latest(self, urn: str) -> dict[str, AspectRow]:
        sql = f"SELECT {self._COLUMNS} FROM metadata_aspect_v2 m WHERE m.urn = ? AND m.version = 0"
        return {row.name: row for row in self._rows(sql, [urn])}

    def _cached(self, cache: OrderedDict[Any, Any], key: Hashable, read: Callable[[], Any]) -> Any:
        with self._lock:
            found = cache.get(key)
            if found is not None:
                cache.move_to_end(key)
                return found
            found = cache[key] = read()
            if len(cache) > CACHED_READS:
                cache.popitem(last=False)
            return found

    def get(self, urn: str, name: str, version: int = 0) -> AspectRow | None:
        if version == 0:
            with self._lock:
                known = self._latest.get(urn)
            if known is not None:
                return known.get(name)
        # One aspect, not cached: re-indexing after a write reads just what it wrote.
        rows = self._rows(
            f"SELECT {self._COLUMNS} FROM metadata_aspect_v2 m "
            "WHERE m.urn = ? AND m.aspect_name = ? AND m.version = ?",
            [urn, name, version],
        )
        return rows[0] if rows else None

    def history(self, urn: str, name: str) -> list[AspectRow]:
        """Rows 1..N of one aspect, oldest first (row N equals v0)."""
        histories: dict[str, list[AspectRow]] = self._cached(self._history, urn, dict)
        with self._lock:
            rows = histories.get(name)
            if rows is None:
                rows = histories[name] = self._rows(
                    f"SELECT {self._COLUMNS} FROM metadata_aspect_v2 m "
                    "WHERE m.urn = ? AND m.aspect_name = ? AND m.version > 0 ORDER BY m.version",
                    [urn, name],
                )
        return list(rows)

    def scan_latest(self) -> Iterator[AspectRow]:
        """Every v0 row (used once, to build the edge index)."""
        yield from self._rows(
            f"SELECT {self._COLUMNS} FROM metadata_aspect_v2 m WHERE m.version = 0 ORDER BY m.urn",
            [],
        )
