"""The rows a load stores are byte for byte the rows the loader stored before it was made fast.

``DIGESTS`` was computed by the loader as it was before the issue-27 work (``ijson`` streaming,
every aspect normalised and re-serialised) on DataHub's own sample and golden files, each
loaded into a new catalog, and on all of them loaded one after the other and then again
(history, unchanged aspects, timeseries and PATCH against stored values). Every layout of the
same records (as shipped: DataHub's ``indent=4``; one compact record a line; the whole list on
one line; CRLF line ends), read in this process or in a second one, must store exactly those
rows: the aspects and their system metadata (``metadata_aspect_v2``) and the browse edges
(``metadata_edge_v2``), hashed in key order.

To recompute after a *deliberate* change of what is stored: ``python -m
tests.catalog.test_load_rows_digest`` prints the table.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from mlcopilot.catalog import lite_writer, patch
from mlcopilot.catalog.loader import load_metadata_files

SAMPLES = Path(__file__).parents[2] / ".." / "shared" / "datahub-samples"
needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"no samples at {SAMPLES}")
NOW = 1_800_000_000.0
"""The clock of a load (``createdon`` and ``lastObserved`` of records that carry none)."""

DIGESTS = {
    "bootstrap_mce.json": "aabe28e971605f0ff7dd82fb",
    "ml_showcase.json": "93694fbfa910413b677f79c8",
    "golden/bigquery_lineage_usage_golden.json": "2d26feb039b6dc3a7625ae5d",
    "golden/dbt_test_events_golden.json": "b5e01233291164714d70071b",
    "golden/ge_mcps_golden.json": "d08db9938a5710608c2ab926",
    "golden/golden_mces_folder_no_partition_exclude.json": "60267ad26702bdc54d1dc01f",
    "golden/golden_mces_relative_path.json": "ec1a89c3f28fc3b1bc41fb69",
    "golden/golden_test_paginated_rdl_lineage.json": "49c7ab97c9149171bdcf3db0",
    "golden/hive_metastore_hms3_spark_catalog_mces_golden.json": "4b9fda3d874a266fd6886432",
    "golden/incremental_column_lineage_golden.json": "bfdef741332807a2492791c1",
    "golden/mysql_mces_no_db_golden.json": "14554041cc3c5788bd14d6f4",
    "golden/patch-lineage.json": "48b926fc3e3938c44fdfd4e2",
    "golden/snowflake_marketplace_golden.json": "9bb405c38370e804cbb33fec",
    "golden/test_bigid_source.json": "84a3d7cbe0cedb857fb39406",
    "golden/test_datajob_inputs_only_golden.json": "bc4649abf3525195331e36fc",
    "golden/test_mlmodel_basic_golden.json": "c7f3e8a3e86c80fd726616a2",
    "all, then all again": "5a381a3a07fa5e1b60b0f1dc",
}


def digest(db: Path) -> str:
    """SHA-256 over every aspect row and browse edge, in key order (its first 24 digits)."""
    sha = hashlib.sha256()
    with sqlite3.connect(db) as conn:
        for table in ("metadata_aspect_v2", "metadata_edge_v2"):
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3, 4"):
                sha.update(repr(row).encode("utf-8") + b"\n")
    return sha.hexdigest()[:24]


@contextmanager
def fixed_clock() -> Iterator[None]:
    """The clocks of a load at :data:`NOW`: Lite's (``createdon`` of records without
    ``lastObserved``) and PATCH's (audit stamps of the aspects GMS's templates create)."""
    clock = types.SimpleNamespace(time=lambda: NOW)
    with pytest.MonkeyPatch.context() as clocks:
        clocks.setattr(lite_writer, "time", clock)
        clocks.setattr(patch, "time", clock)
        yield


def as_shipped(path: Path, out: Path) -> Path:
    return path


def compact(path: Path, out: Path) -> Path:
    """One record a line without indentation (``benchmarks.load``'s compact layout)."""
    records = json.loads(path.read_text(encoding="utf-8"))
    out.write_text("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n", "utf-8")
    return out


def one_line(path: Path, out: Path) -> Path:
    out.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8"))), "utf-8")
    return out


def crlf(path: Path, out: Path) -> Path:
    records = json.loads(path.read_text(encoding="utf-8"))
    lines = ",\r\n".join(json.dumps(r, ensure_ascii=False) for r in records)
    out.write_bytes(("[\r\n" + lines + "\r\n]").encode("utf-8"))
    return out


LAYOUTS: dict[str, Callable[[Path, Path], Path]] = {
    "as shipped": as_shipped,
    "compact": compact,
    "one line": one_line,
    "crlf": crlf,
}


def load_digests(tmp: Path, layout: str, *, parallel: bool) -> dict[str, str]:
    """The digest of each sample file loaded alone, and of all of them loaded twice."""
    names = [n for n in DIGESTS if n.endswith(".json")]
    files: list[Path] = []
    for index, name in enumerate(names):
        files.append(LAYOUTS[layout](SAMPLES / name, tmp / f"{index}-{layout}.json"))
    found: dict[str, str] = {}
    with fixed_clock():
        for index, (name, file) in enumerate(zip(names, files, strict=True)):
            db = tmp / f"{index}-{layout}.db"
            load_metadata_files(db, [file], parallel=parallel)
            found[name] = digest(db)
        db = tmp / f"all-{layout}.db"
        load_metadata_files(db, files, parallel=parallel)
        load_metadata_files(db, files, parallel=parallel)
        found["all, then all again"] = digest(db)
    return found


def differences(found: dict[str, str], expected: dict[str, str]) -> Sequence[str]:
    return [name for name in expected if found.get(name) != expected[name]]


@needs_samples
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_layout_stores_the_rows_the_previous_loader_stored(
    layout: str, tmp_path: Path
) -> None:
    found = load_digests(tmp_path, layout, parallel=False)
    assert differences(found, DIGESTS) == []


@needs_samples
@pytest.mark.parametrize("layout", ["as shipped", "compact"])
def test_reading_in_a_second_process_stores_the_same_rows(layout: str, tmp_path: Path) -> None:
    found = load_digests(tmp_path, layout, parallel=True)
    assert differences(found, DIGESTS) == []


@needs_samples
def test_a_load_that_stops_remembering_its_aspects_stores_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first load into a new catalog remembers the aspects it wrote instead of looking them
    up, up to a bound; past it, it looks them up (here from the fourth aspect on)."""
    monkeypatch.setattr(lite_writer, "_MAX_REMEMBERED", 3)
    found = load_digests(tmp_path, "compact", parallel=False)
    assert differences(found, DIGESTS) == []


def main() -> None:
    """Print :data:`DIGESTS` as the loader of this tree computes them."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        found = load_digests(Path(tmp), "as shipped", parallel=False)
    for name, value in found.items():
        print(f'    "{name}": "{value}",')


if __name__ == "__main__":
    main()
