"""Generated benchmark catalogs as DataHub Lite files, built once and cached by shape.

A catalog is keyed by its :class:`~benchmarks.generate.Shape` and the generator's source, so a
change to either builds a new one and reruns of ``make bench`` start at once. Files live in
``benchmarks/.cache/`` (git-ignored).

Two ways to load, both ending in the same ``metadata_aspect_v2`` rows (checked by
``tests/test_bench_catalogs.py``):

- ``ingest``: :meth:`mlcopilot.catalog.lite.LiteCatalog.ingest`, the product's own loader path
  (each record is parsed into the SDK's classes and written by DataHub Lite). About 1 ms per
  aspect, almost all of it the SDK's Avro serialisation; used up to a few tens of thousands
  of aspects.
- ``bulk``: the rows Lite would write for a first load (v1 and v0 per aspect, ``sysVersion``
  1, ``createdon`` = ``lastObserved``) inserted in one transaction; used for the
  100,000-entity catalog, which would otherwise take many minutes to load.

Either way the file ends with the scan index every write of the product leaves
(:mod:`mlcopilot.catalog.lite_index`); a cached file whose index another version of the code
wrote gets it rebuilt on first use (an empty write transaction, as any write of the product
would), so ``lite:`` is always measured as a catalog the product loaded.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from datahub.lite.sqlite_lite import SqliteLite
from datahub.lite.sqlite_lite_config import SqliteLiteConfig

from benchmarks.generate import Shape, generate, wrappers
from mlcopilot.catalog import lite_index
from mlcopilot.catalog.lite import LiteCatalog

CACHE = Path(__file__).resolve().parent / ".cache"
_GENERATOR = Path(__file__).resolve().parent / "generate.py"

Loader = Literal["ingest", "bulk"]


def cache_key(shape: Shape, loader: Loader) -> str:
    """A short hash of the shape, the loader and the generator's code.

    The code is hashed as its syntax tree, so reformatting the generator keeps the cache.
    """
    text = json.dumps({"shape": asdict(shape), "loader": loader}, sort_keys=True)
    tree = ast.dump(ast.parse(_GENERATOR.read_text(encoding="utf-8")))
    return hashlib.sha256(f"{text}\n{tree}".encode()).hexdigest()[:12]


def ensure(name: str, shape: Shape, *, loader: Loader = "ingest", log: Any = print) -> Path:
    """The Lite file of ``shape``, built (and cached) when missing."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{name}-{cache_key(shape, loader)}.db"
    if path.exists():
        index(path, log)
        return path
    started = time.perf_counter()
    tmp = path.with_name(path.name + ".tmp")
    for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
        leftover.unlink(missing_ok=True)
    records = generate(shape)
    count = ingest(records, tmp) if loader == "ingest" else bulk_load(records, tmp)
    os.replace(tmp, path)
    log(f"built {path.name}: {count} aspects in {time.perf_counter() - started:.1f}s")
    return path


def ingest(records: Iterable[dict[str, Any]], path: Path) -> int:
    """Load file-sink records through the product's Lite loader path."""
    mcps = wrappers(records)
    with LiteCatalog(path, create=True) as catalog:
        catalog.ingest(mcps)
    return len(mcps)


def bulk_load(records: Iterable[dict[str, Any]], path: Path) -> int:
    """Insert the rows DataHub Lite writes for a first load of ``records``, in one transaction.

    Only for records that each name a distinct (urn, aspect): a repeated one would need a
    second version, which is Lite's job.
    """
    SqliteLite(SqliteLiteConfig(file=str(path))).close()  # Lite creates its own tables
    seen: set[tuple[str, str]] = set()
    rows: list[tuple[str, str, int, str, str, int]] = []
    for record in records:
        urn, name = record["entityUrn"], record["aspectName"]
        if (urn, name) in seen:
            raise ValueError(f"bulk_load: {name} of {urn} given twice; use ingest")
        seen.add((urn, name))
        system = dict(record["systemMetadata"])
        system["properties"] = {**system.get("properties", {}), "sysVersion": "1"}
        metadata = json.dumps(record["aspect"]["json"])
        meta = json.dumps(system)
        created = int(system["lastObserved"])
        rows.append((urn, name, 1, metadata, meta, created))
        rows.append((urn, name, 0, metadata, meta, created))
    db = sqlite3.connect(path)
    try:
        with db:
            db.executemany("INSERT INTO metadata_aspect_v2 VALUES (?, ?, ?, ?, ?, ?)", rows)
    finally:
        db.close()
    index(path)
    return len(seen)


def index(path: Path, log: Any = None) -> None:
    """Give ``path`` the scan index of this code, as any write of the product does."""
    with sqlite3.connect(path) as db:
        current = lite_index.usable(db)
    db.close()
    if current:
        return
    started = time.perf_counter()
    with LiteCatalog(path) as catalog, catalog.writing():
        pass  # the transaction's end writes a record for every entity without one
    if log is not None:
        log(f"indexed {path.name} in {time.perf_counter() - started:.1f}s")
