"""Scans of ``lite:`` catalogs whose reports must never change when only the scan gets faster.

Each scenario builds a DataHub Lite file from real metadata (DataHub's golden files and
samples, the demo's three steps) or from the benchmark generator (with assertions, incidents,
operations, classification and profiles added as :mod:`benchmarks.signals`,
:mod:`benchmarks.freshness` and :mod:`benchmarks.profile_drift` add them), scans it with a fixed
``now`` and gives, per scan:

- the JSON report (``scan --format json``), as text;
- a digest of every walked node, edge and path in a canonical form (every field of every
  :class:`~mlcopilot.model.Node`, sets sorted), so a translation that differs anywhere is
  caught even where no finding shows it.

``tests/data/lite_scan/`` holds what the code before the ``lite:`` speed work (issue 27 §1)
produced; :mod:`tests.catalog.test_lite_scan_identical` compares. Regenerate only from that
code: ``python -m tests.catalog.lite_scan_scenarios --write`` (it says which files it wrote).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from benchmarks import freshness, profile_drift, signals
from benchmarks.catalogs import ingest
from benchmarks.generate import NOW_MS, Shape, generate
from mlcopilot.catalog import lite_index
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.checks import load_checks
from mlcopilot.model import Lineage
from mlcopilot.protocols import WalkLimits
from mlcopilot.report.json import render_json
from mlcopilot.scan import Delivery, ScanOptions, ScanResult, scan
from mlcopilot.store import open_store
from testing.notify_world import FakeClock
from tests.conftest import DEMO_DATA, SAMPLES

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "lite_scan"
GOLDEN = SAMPLES / "golden"
LIMITS = WalkLimits(max_hops=50, max_nodes=250_000)
SAMPLES_NOW = datetime(2026, 11, 29, tzinfo=UTC)
GENERATED_NOW = datetime.fromtimestamp(NOW_MS / 1000, tz=UTC)
SIGNALS_NOW = datetime(2036, 1, 1, tzinfo=UTC)

Scans = dict[str, tuple[str, dict[str, str]]]
"""Step name → (JSON report, node digests by urn)."""
INDEX_MODES = ("kept", "none", "half")
"""How much of the scan index a scan finds: all of it as written, none, every other record."""
_mode = {"index": "kept"}


def _drop_records(catalog: LiteCatalog) -> None:
    """Before each read: leave the scan index's records as :data:`INDEX_MODES` says."""
    if _mode["index"] == "kept":
        return
    with sqlite3.connect(catalog.path) as db:
        urns = [u for (u,) in db.execute(f"SELECT urn FROM {lite_index.TABLE} ORDER BY urn")]
        dropped = urns if _mode["index"] == "none" else urns[::2]
        db.executemany(f"DELETE FROM {lite_index.TABLE} WHERE urn = ?", [(u,) for u in dropped])
    db.close()


def canonical(value: Any) -> Any:
    """``value`` as plain JSON data, independent of set order and hash seeds."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, frozenset | set):
        return sorted((canonical(v) for v in value), key=repr)
    if isinstance(value, Mapping):
        return [[canonical(k), canonical(v)] for k, v in sorted(value.items(), key=repr)]
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, float):
        return repr(value)
    return value


def lineage_digests(lineage: Lineage) -> dict[str, str]:
    """Per node of ``lineage``: a digest of the node, its path and the edges into it."""
    into: dict[str, list[Any]] = {}
    for edge in lineage.edges:
        into.setdefault(edge.downstream, []).append(canonical(edge))
    found: dict[str, str] = {}
    for urn, node in lineage.nodes.items():
        text = json.dumps(
            [canonical(node), list(lineage.paths[urn]), into.get(urn, [])], sort_keys=True
        )
        found[urn] = hashlib.sha256(text.encode()).hexdigest()[:20]
    found["(truncated)"] = str(lineage.truncated)
    return found


def catalog_digests(catalog: LiteCatalog) -> dict[str, str]:
    """Every entity of the file and every urn its edges name, as the catalog reads them.

    Per urn: a digest of its node, its edges one hop upstream and one hop downstream (what a
    walk from anywhere would see), whether or not a model's lineage reaches it.
    """
    _drop_records(catalog)
    with sqlite3.connect(catalog.path) as db:
        held = [u for (u,) in db.execute("SELECT DISTINCT urn FROM metadata_aspect_v2")]
    up = catalog.upstream(held)
    down = catalog.downstream(held)
    urns = sorted({*held, *(e.upstream for e in up), *(e.downstream for e in down)})
    nodes = catalog.nodes(urns)
    edges: dict[str, list[Any]] = {}
    for edge in [*catalog.upstream(urns), *catalog.downstream(urns)]:
        edges.setdefault(edge.downstream, []).append(canonical(edge))
        edges.setdefault(edge.upstream, []).append(canonical(edge))
    found: dict[str, str] = {}
    for urn in urns:
        mine = sorted(edges.get(urn, []), key=repr)
        text = json.dumps([canonical(nodes[urn]), mine], sort_keys=True)
        found[urn] = hashlib.sha256(text.encode()).hexdigest()[:20]
    return found


def _outcome(result: ScanResult) -> tuple[str, dict[str, str]]:
    digests: dict[str, str] = {}
    for report in result.models:
        digests.update({f"{report.urn} {u}": d for u, d in lineage_digests(report.lineage).items()})
    return render_json(result), digests


def _scan(catalog: LiteCatalog, state: Path, now: datetime, *, dry_run: bool = True) -> ScanResult:
    _drop_records(catalog)
    with open_store(f"sqlite:///{state}") as store:
        return scan(
            catalog,
            store,
            load_checks(),
            ScanOptions(now=now, dry_run=dry_run, limits=LIMITS),
            delivery=Delivery(clock=FakeClock(now)),
        )


def metadata_file(path: Path) -> Callable[[Path], Scans]:
    """One file loaded with ``catalog load``, every model scanned."""

    def build(tmp: Path) -> Scans:
        with LiteCatalog(tmp / "catalog.db", create=True) as catalog:
            load_metadata_files(catalog, [path])
            return {
                "scan": _outcome(_scan(catalog, tmp / "state.db", SAMPLES_NOW)),
                "catalog": ("", catalog_digests(catalog)),
            }

    return build


def demo(tmp: Path) -> Scans:
    """The demo's three files in turn; the first scan writes back and keeps its baselines."""
    steps = sorted(DEMO_DATA.glob("*.json"))
    found: Scans = {}
    with LiteCatalog(tmp / "catalog.db", create=True) as catalog:
        for number, step in enumerate(steps):
            load_metadata_files(catalog, [step])
            result = _scan(catalog, tmp / "state.db", SAMPLES_NOW, dry_run=number > 0)
            found[step.stem] = _outcome(result)
            if number == 0:  # the write-back's tags and incidents are read by the next scans
                again = _scan(catalog, tmp / "state.db", SAMPLES_NOW)
                found[f"{step.stem}, again"] = _outcome(again)
        found["catalog"] = ("", catalog_digests(catalog))
    return found


def generated(shape: Shape, *, enriched: bool) -> Callable[[Path], Scans]:
    """A benchmark catalog; ``enriched``: with assertions, incidents, history and profiles."""

    def build(tmp: Path) -> Scans:
        path = tmp / "catalog.db"
        ingest(generate(shape), path)
        now = GENERATED_NOW
        if enriched:
            lineage = signals.walk(path)
            signals.add_signals(path, lineage)
            freshness.add_history(path, lineage)
            profile_drift.add_profiles(path, lineage, NOW_MS - 5 * profile_drift.DAY)
            now = SIGNALS_NOW
        with LiteCatalog(path) as catalog:
            return {
                "scan": _outcome(_scan(catalog, tmp / "state.db", now)),
                "catalog": ("", catalog_digests(catalog)),
            }

    return build


def scenarios() -> dict[str, Callable[[Path], Scans]]:
    """Every scenario by name."""
    found: dict[str, Callable[[Path], Scans]] = {}
    for path in sorted(GOLDEN.glob("*.json")) + sorted(SAMPLES.glob("*.json")):
        found[f"file-{path.stem}"] = metadata_file(path)
    found["demo"] = demo
    found["generated-one-300"] = generated(Shape.one_model(300), enriched=False)
    found["generated-one-120-enriched"] = generated(Shape.one_model(120), enriched=True)
    found["generated-estate-6x150"] = generated(
        Shape.estate(6, 150, deprecated=0.1), enriched=False
    )
    return found


def fixture_path(name: str, step: str, kind: str) -> Path:
    """Where the expected output of one scan is kept."""
    slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in step)
    return FIXTURES / f"{name}.{slug}.{kind}.json"


def run(name: str, tmp: Path, index: str = "kept") -> Iterator[tuple[str, str, dict[str, str]]]:
    """(step, report, digests) of every scan of scenario ``name``, built under ``tmp``.

    ``index``: what each scan finds of the scan index (:data:`INDEX_MODES`).
    """
    tmp.mkdir(parents=True, exist_ok=True)
    _mode["index"] = index
    try:
        built = scenarios()[name](tmp)
    finally:
        _mode["index"] = "kept"
    for step, (report, digests) in built.items():
        yield step, report.replace(str(tmp), "TMP"), digests  # the catalog's label names it


def main(argv: list[str] | None = None) -> None:
    """Write the fixtures (only from the code they are the reference of)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="write tests/data/lite_scan/")
    parser.add_argument("--work", type=Path, default=Path("/tmp/lite-scan-scenarios"))
    args = parser.parse_args(argv)
    if not args.write:
        parser.error("--write is required (this overwrites the reference outputs)")
    FIXTURES.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.work, ignore_errors=True)
    for name in scenarios():
        for step, report, digests in run(name, args.work / name):
            if report:
                fixture_path(name, step, "report").write_text(report, encoding="utf-8")
            text = json.dumps(digests, indent=0, sort_keys=True) + "\n"
            fixture_path(name, step, "nodes").write_text(text, encoding="utf-8")
            print(f"{name} / {step}: {len(report):,} bytes of report, {len(digests)} digests")


if __name__ == "__main__":
    main()
