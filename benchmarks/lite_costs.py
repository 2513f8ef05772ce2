"""Where a ``lite:`` scan's time goes, per upstream entity (``python -m benchmarks.lite_costs``).

The ``lite:`` throughput target (20,000 entities checked per second) leaves 50 µs per entity.
This splits one model's walk and checks into the steps every entity goes through, each timed
alone (CPU time, best of three) on a benchmark catalog (``--n``: one-10000 by default):

- as a scan reads a file ``catalog load`` wrote: each entity's record in the scan index
  (:mod:`mlcopilot.catalog.lite_index`) read from SQLite, decoded (msgspec) and built into
  its node and edges;
- as a scan reads a file nobody indexed (``datahub lite``'s own, say): its aspects' JSON read,
  decoded (the standard library's ``json`` and the msgspec-first ``lite_index.loads`` the
  scan uses) and translated (:func:`~mlcopilot.catalog.aspects.node_from_aspects`);
- what writing the index costs a load, per entity;
- the whole walk, then the checks (as :func:`mlcopilot.scan.checking.check_model` runs them,
  column usage included) on the walked lineage.

RESULTS.md's analysis quotes its output.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.catalogs import Loader, ensure
from benchmarks.generate import NOW_MS, Shape
from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog import lite_index
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks import load_checks
from mlcopilot.protocols import WalkLimits
from mlcopilot.scan import checking
from mlcopilot.store import open_store

LIMITS = WalkLimits(max_hops=50, max_nodes=250_000)


def best_of(runs: int, step: Callable[[], Any]) -> tuple[float, Any]:
    """The least CPU time of ``runs`` runs of ``step``, and its last result.

    The cyclic garbage collector is off meanwhile, as during a scan's walk and checks.
    """
    best, result = float("inf"), None
    for _ in range(runs):
        gc.collect()
        gc.disable()
        try:
            started = time.process_time()
            result = step()
            best = min(best, time.process_time() - started)
        finally:
            gc.enable()
    return best, result


def _build(records: dict[str, lite_index.Entry]) -> list[Any]:
    """Every record's node and edges, as one scan builds them (one reader)."""
    reader = lite_index.Reader()
    return [reader.node(urn, entry, (), (), {}) for urn, entry in records.items()]


def main(argv: list[str] | None = None) -> None:
    """Print each step's time, whole and per entity."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000, help="upstream entities (one model)")
    args = parser.parse_args(argv)
    loader: Loader = "bulk" if args.n > 20_000 else "ingest"
    path = ensure(f"one-{args.n}", Shape.one_model(args.n), loader=loader)
    steps: list[tuple[str, float, int]] = []
    with sqlite3.connect(path) as db:
        urns = [u for (u,) in db.execute(f"SELECT urn FROM {lite_index.TABLE}")]
        read_s, records = best_of(3, lambda: lite_index.read(db, urns))
        raw_s, _ = best_of(
            3, lambda: db.execute(f"SELECT urn, entry FROM {lite_index.TABLE}").fetchall()
        )
        steps.append(("index: SQLite read + msgspec decode", read_s, len(urns)))
        steps.append(("  of which the SQLite read", raw_s, len(urns)))
        build_s, _ = best_of(3, lambda: _build(records))
        steps.append(("index: build nodes and edges", build_s, len(urns)))
        query = "SELECT urn, aspect_name, metadata FROM metadata_aspect_v2 WHERE version = 0"
        json_read_s, rows = best_of(3, lambda: db.execute(query).fetchall())
        stdlib_s, _ = best_of(3, lambda: [json.loads(r[2]) for r in rows])
        loads_s, values = best_of(3, lambda: [lite_index.loads(r[2]) for r in rows])
    db.close()
    by_urn: dict[str, dict[str, Any]] = {}
    for (urn, name, _), value in zip(rows, values, strict=True):
        by_urn.setdefault(urn, {})[name] = value
    translate_s, _ = best_of(
        3,
        lambda: [
            (ax.node_from_aspects(u, a), ax.edges_from_aspects(u, a)) for u, a in by_urn.items()
        ],
    )
    steps += [
        ("JSON: SQLite read", json_read_s, len(by_urn)),
        ("JSON: decode (stdlib json)", stdlib_s, len(by_urn)),
        ("JSON: decode (lite_index.loads)", loads_s, len(by_urn)),
        ("JSON: translate to nodes and edges", translate_s, len(by_urn)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "catalog.db"
        shutil.copy(path, copy)
        with LiteCatalog(copy) as catalog, catalog.writing() as _:
            client = catalog._handle().sqlite_client

            def rebuild() -> int:
                client.execute(f"DELETE FROM {lite_index.TABLE}")
                return lite_index.refresh(client)

            index_s, written = best_of(1, rebuild)
        steps.append(("writing the index (in a load)", index_s, written))
    catalog = LiteCatalog(path)
    (model,) = catalog.models()
    walk_s, lineage = best_of(1, lambda: catalog.lineage(model, LIMITS))
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'state.db'}")
        now = datetime.fromtimestamp(NOW_MS / 1000, tz=UTC)
        known = checking.read_schema_baselines(catalog, store, [lineage], now).of(lineage)[0]
        store.close()
    checks = load_checks()
    checks_s, _ = best_of(3, lambda: checking.check_model(checks, lineage, known, now, {}))
    catalog.close()
    entities = len(lineage.nodes) - 1
    steps += [
        ("walk (from the index)", walk_s, entities),
        (f"{len(checks)} checks, column usage included", checks_s, entities),
    ]
    print(f"{entities:,} upstream entities; CPU time, best of 3 (the walk: one run)")
    for step, seconds, count in steps:
        print(f"{step:<42} {seconds:6.2f} s  {seconds / count * 1e6:6.1f} µs per entity")


if __name__ == "__main__":
    main()
