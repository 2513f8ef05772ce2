"""Scans through ``datahub:`` whose reports must never change when only the scan gets faster.

The ``datahub:`` counterpart of :mod:`tests.catalog.lite_scan_scenarios`: each scenario serves
a DataHub Lite file through the stand-in GMS (in this process), scans it through
:class:`~mlcopilot.catalog.datahub.catalog.DataHubCatalog` with a fixed ``now`` and keeps, per
scan, the JSON report (``scan --format json``) and a digest of every walked node, edge and
path (:func:`~tests.catalog.lite_scan_scenarios.lineage_digests`).

The steps are those whose cost issue 27 §2 measures: a first scan that stores baselines and
incidents without delivering (the benchmark's first scan), a second, dry-run scan on that state
(the benchmark's ``datahub-second``), a scan that delivers (writes tags, incidents and
documents back through GMS) and a scan after that write-back, which reads mlcopilot's own
incidents and tags back through GraphQL. Assertions, incidents, operations and profiles come
from the benchmark's enrichment, as in the ``lite:`` scenarios.

``tests/data/datahub_scan/`` holds what the code before the ``datahub:`` speed work (issue 27
§2) produced; :mod:`tests.catalog.test_datahub_scan_identical` compares. Regenerate only from
that code: ``python -m tests.catalog.datahub_scan_scenarios --write``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from benchmarks import freshness, profile_drift, signals
from benchmarks.catalogs import ingest
from benchmarks.generate import NOW_MS, Shape, generate
from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.loader import read_metadata_file
from mlcopilot.checks import load_checks
from mlcopilot.report.json import render_json
from mlcopilot.scan import Delivery, ScanOptions, ScanResult, scan
from mlcopilot.store import open_store
from standin import StandIn
from testing.notify_world import FakeClock
from tests.catalog.lite_scan_scenarios import (
    GENERATED_NOW,
    LIMITS,
    SAMPLES_NOW,
    SIGNALS_NOW,
    lineage_digests,
)
from tests.conftest import DEMO_DATA

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "datahub_scan"

Scans = dict[str, tuple[str, dict[str, str]]]
"""Step name → (JSON report, node digests by urn)."""

Step = tuple[str, bool, bool]
"""(name, dry run, deliver) of one scan."""

STEPS: tuple[Step, ...] = (
    ("first", False, False),
    ("second", True, False),
    ("delivered", False, True),
    ("after write-back", True, False),
)


STANDIN_URL = "http://standin.invalid"
"""The stand-in's URL as the fixtures give it (its port differs from run to run)."""


def _outcome(result: ScanResult, url: str) -> tuple[str, dict[str, str]]:
    digests: dict[str, str] = {}
    for report in result.models:
        digests.update({f"{report.urn} {u}": d for u, d in lineage_digests(report.lineage).items()})
    return render_json(result).replace(url, STANDIN_URL), digests


def scan_once(
    server: StandIn, state: Path, now: datetime, *, dry_run: bool, deliver: bool
) -> ScanResult:
    """One scan through a fresh ``datahub:`` catalog (one catalog is one scan's view)."""
    with (
        DataHubCatalog(server.url, timeout=30.0, retries=1) as catalog,
        open_store(f"sqlite:///{state}") as store,
    ):
        return scan(
            catalog,
            store,
            load_checks(),
            ScanOptions(now=now, dry_run=dry_run, limits=LIMITS),
            delivery=Delivery(clock=FakeClock(now), deliver=deliver),
        )


def _steps(server: StandIn, state: Path, now: datetime, steps: tuple[Step, ...]) -> Scans:
    return {
        name: _outcome(scan_once(server, state, now, dry_run=dry_run, deliver=deliver), server.url)
        for name, dry_run, deliver in steps
    }


def generated(
    shape: Shape, *, enriched: bool, ml_incidents: bool = False
) -> Callable[[Path], Scans]:
    """A benchmark catalog served by the stand-in; ``enriched`` as the ``lite:`` scenarios'."""

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
        with StandIn.from_lite(path, durable=False, ml_incidents=ml_incidents) as server:
            return _steps(server, tmp / "state.db", now, STEPS)

    return build


def demo(tmp: Path) -> Scans:
    """The demo's three files written in turn into the stand-in, each step scanned twice.

    Today's DataHub (incidents on ML entities): the incidents name the model.
    """
    found: Scans = {}
    (tmp / "standin").mkdir(parents=True, exist_ok=True)
    with StandIn.from_mcps([], tmp / "standin", ml_incidents=True) as server:
        for step in sorted(DEMO_DATA.glob("*.json")):
            server.write(read_metadata_file(step)[1])
            for name, scanned in _steps(server, tmp / "state.db", SAMPLES_NOW, STEPS).items():
                found[f"{step.stem} {name}"] = scanned
    return found


def scenarios() -> dict[str, Callable[[Path], Scans]]:
    """Every scenario by name."""
    return {
        "demo": demo,
        "generated-estate-8x200": generated(
            Shape.estate(8, 200, deprecated=0.1, seed=11), enriched=False
        ),
        "generated-one-200-enriched": generated(
            Shape.one_model(200), enriched=True, ml_incidents=True
        ),
    }


def fixture_path(name: str, step: str, kind: str) -> Path:
    """Where the expected output of one scan is kept."""
    slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in step)
    return FIXTURES / f"{name}.{slug}.{kind}.json"


def run(name: str, tmp: Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    """(step, report, digests) of every scan of scenario ``name``, built under ``tmp``."""
    tmp.mkdir(parents=True, exist_ok=True)
    for step, (report, digests) in scenarios()[name](tmp).items():
        yield step, report, digests


def main(argv: list[str] | None = None) -> None:
    """Write the fixtures (only from the code they are the reference of)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="write tests/data/datahub_scan/")
    parser.add_argument("--work", type=Path, default=Path("/tmp/datahub-scan-scenarios"))
    parser.add_argument("--only", nargs="*", help="only these scenarios")
    args = parser.parse_args(argv)
    if not args.write:
        parser.error("--write is required (this overwrites the reference outputs)")
    FIXTURES.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.work, ignore_errors=True)
    for name in args.only or scenarios():
        for step, report, digests in run(name, args.work / name):
            fixture_path(name, step, "report").write_text(report, encoding="utf-8")
            text = json.dumps(digests, indent=0, sort_keys=True) + "\n"
            fixture_path(name, step, "nodes").write_text(text, encoding="utf-8")
            print(f"{name} / {step}: {len(report):,} bytes of report, {len(digests)} digests")


if __name__ == "__main__":
    main()
