"""Where a ``lite:`` scan's time goes, per upstream entity (``python -m benchmarks.lite_costs``).

The ``lite:`` throughput target (20,000 entities checked per second) leaves 50 µs per entity.
This splits one model's walk and checks into the steps every entity goes through — reading
its current aspects from SQLite, decoding their JSON, translating them into nodes and edges,
running the checks — each timed alone (best of three) on the one-10000 benchmark catalog.
RESULTS.md's analysis quotes its output.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from benchmarks.catalogs import ensure
from benchmarks.generate import Shape
from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks import load_checks
from mlcopilot.protocols import WalkLimits

N = 10_000
LIMITS = WalkLimits(max_hops=50, max_nodes=250_000)
NOW = datetime(2036, 1, 1, tzinfo=UTC)


def best_of(runs: int, step: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of ``runs`` timings of ``step``, and its last result."""
    best, result = float("inf"), None
    for _ in range(runs):
        started = time.perf_counter()
        result = step()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    """Print each step's time, whole and per entity."""
    path = ensure(f"one-{N}", Shape.one_model(N))
    gc.set_threshold(20_000, 10, 10)  # as a scan runs (mlcopilot.scan)
    query = "SELECT urn, aspect_name, metadata FROM metadata_aspect_v2 WHERE version = 0"
    with sqlite3.connect(path) as db:
        read_s, rows = best_of(3, lambda: db.execute(query).fetchall())
    decode_s, values = best_of(3, lambda: [json.loads(r[2]) for r in rows])
    by_urn: dict[str, dict[str, Any]] = {}
    for (urn, name, _), value in zip(rows, values, strict=True):
        by_urn.setdefault(urn, {})[name] = value
    translate_s, _ = best_of(
        3,
        lambda: [
            (ax.node_from_aspects(u, a), ax.edges_from_aspects(u, a)) for u, a in by_urn.items()
        ],
    )
    catalog = LiteCatalog(path)
    (model,) = catalog.models()
    walk_s, lineage = best_of(1, lambda: catalog.lineage(model, LIMITS))
    from mlcopilot.scan import checking

    checks = load_checks()
    checks_s, _ = best_of(3, lambda: checking.check_model(checks, lineage, {}, NOW))
    catalog.close()
    size = sum(len(r[2]) for r in rows)
    entities = len(lineage.nodes) - 1
    print(f"{entities:,} upstream entities; {size / 1e6:.1f} MB of current aspect JSON")
    for step, seconds, count in (
        ("SQLite read", read_s, len(by_urn)),
        ("JSON decode (stdlib)", decode_s, len(by_urn)),
        ("translate to nodes and edges", translate_s, len(by_urn)),
        ("walk (read + decode + translate + BFS)", walk_s, entities),
        ("four checks", checks_s, entities),
    ):
        print(f"{step:<40} {seconds:6.2f} s  {seconds / count * 1e6:6.0f} µs per entity")


if __name__ == "__main__":
    main()
