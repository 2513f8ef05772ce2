"""A scan's write-back in parts: rows of at most ``WRITEBACK_PART`` writes, in order.

One row held an estate's whole plan (a JSON text of hundreds of megabytes, encoded whole
and decoded whole); in parts, the catalog ends up the same and so does what the scan says.
"""

from __future__ import annotations

import json
import math
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from benchmarks.generate import Shape, generate, wrappers
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks import load_checks
from mlcopilot.scan import Delivery, ScanOptions, ScanResult, scan
from mlcopilot.store import open_store
from testing.builders import T0
from testing.notify_world import FakeClock
from tests.catalog.lite_scan_scenarios import catalog_digests

NOW = T0 + timedelta(days=3650)


def _scan(tmp: Path, *, dry_run: bool = False) -> tuple[ScanResult, dict[str, str]]:
    """A scan of a small estate, delivered to its Lite catalog; the catalog after."""
    with LiteCatalog(tmp / "lite.db", create=True) as catalog:
        catalog.ingest(wrappers(generate(Shape.estate(6, 60, seed=7))))
        with open_store(f"sqlite:///{tmp / 'state.db'}") as store:
            result = scan(
                catalog,
                store,
                load_checks(),
                ScanOptions(now=NOW, dry_run=dry_run),
                delivery=Delivery(clock=FakeClock(NOW)),
            )
        return result, catalog_digests(catalog)


def _rows(state: Path) -> list[tuple[str, str, list[dict[str, object]]]]:
    """The write-back rows: dedupe key, status and writes, in the order they are delivered."""
    with sqlite3.connect(state) as db:
        found = db.execute(
            "SELECT dedupe_key, status, payload FROM outbox WHERE sink = 'datahub' ORDER BY id"
        ).fetchall()
    return [(key, status, json.loads(payload)["writes"]) for key, status, payload in found]


def test_a_write_back_in_parts_leaves_the_catalog_as_one_row_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole, whole_catalog = _scan(tmp_path / "whole")
    [(key, status, writes)] = _rows(tmp_path / "whole" / "state.db")
    assert (key, status) == ("datahub:-:0:writeback:1", "done")
    assert len(writes) > 20

    monkeypatch.setattr("mlcopilot.store.notify_sql.WRITEBACK_PART", 7)
    parted, parted_catalog = _scan(tmp_path / "parts")
    rows = _rows(tmp_path / "parts" / "state.db")

    assert len(rows) == math.ceil(len(writes) / 7)
    assert [key for key, _, _ in rows] == [
        "datahub:-:0:writeback:1",
        *(f"datahub:-:0:writeback:1.{part}" for part in range(1, len(rows))),
    ]
    assert {status for _, status, _ in rows} == {"done"}
    assert all(len(part) <= 7 for _, _, part in rows)
    assert [w for _, _, part in rows for w in part] == writes  # the same plan, in order
    assert parted.writes == whole.writes
    assert parted_catalog == whole_catalog
    assert [r.dedupe_key for r in parted.notifications if r.sink == "datahub"] == [
        key for key, _, _ in rows
    ]


def test_a_dry_run_plans_the_parts_it_would_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mlcopilot.store.notify_sql.WRITEBACK_PART", 7)
    planned, _ = _scan(tmp_path / "dry", dry_run=True)
    recorded, _ = _scan(tmp_path / "recorded")

    def parts(result: ScanResult) -> list[list[object]]:
        return [list(r.payload["writes"]) for r in result.notifications if r.sink == "datahub"]

    assert len(parts(planned)) > 1
    assert parts(planned) == parts(recorded)
