"""Coverage gaps: where a model's lineage stops before a dataset, in every report format.

Catalogs are real DataHub metadata (``testing/builders.py``) in a Lite file, scanned by the real
scan with the real checks and store; the no-model catalog runs through the command.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks import load_checks
from mlcopilot.cli.render.terminal import print_scan
from mlcopilot.lineage import coverage
from mlcopilot.lineage.coverage import NO_LINEAGE, coverage_gaps
from mlcopilot.model import ColumnUsage
from mlcopilot.protocols import WalkLimits
from mlcopilot.report.json import render_json, render_markdown
from mlcopilot.scan import ScanOptions, ScanResult, scan
from mlcopilot.store import open_store
from testing.builders import (
    MCPs,
    data_job,
    data_job_urn,
    dataset,
    dataset_urn,
    feature_table_urn,
    feature_urn,
    ml_feature,
    ml_feature_table,
    ml_model,
    model_urn,
    training_run,
    training_run_urn,
    write_metadata_file,
)
from testing.installed_cli import Ran, run_cli

NOW = datetime(2026, 3, 1, tzinfo=UTC)
BARE = model_urn("bare_model")
PARTIAL = model_urn("partial_model")
COVERED = model_urn("covered_model")
SOURCED = feature_urn("user_features", "age")
UNSOURCED = feature_urn("user_features", "favourite_colour")
EMPTY_RUN = training_run_urn("run-without-inputs")
GHOST_JOB = data_job_urn("training", "train_ghost")


def estate() -> MCPs:
    """Three models: one with no lineage, one half covered, one fully covered."""
    return [
        *dataset("raw.users", fields=[("age", "int")]),
        *ml_feature("user_features", "age", sources=[dataset_urn("raw.users")]),
        *ml_feature("user_features", "favourite_colour"),
        # The table holds both features and has no primary keys: not a gap, a container.
        *ml_feature_table("user_features", features=[SOURCED, UNSOURCED]),
        *training_run("run-without-inputs"),
        *ml_model("bare_model"),
        *ml_model(
            "partial_model",
            features=[SOURCED, UNSOURCED],
            training_jobs=[EMPTY_RUN, GHOST_JOB],
        ),
        *ml_model("covered_model", features=[SOURCED]),
    ]


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[LiteCatalog]:
    lite = LiteCatalog(tmp_path / "catalog.db", create=True)
    lite.ingest(estate())
    yield lite
    lite.close()


@pytest.fixture
def result(catalog: LiteCatalog, tmp_path: Path) -> ScanResult:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        return scan(catalog, store, load_checks(), ScanOptions(now=NOW, dry_run=True))
    finally:
        store.close()


def gaps_of(result: ScanResult, model: str) -> dict[str, str]:
    report = next(m for m in result.models if m.urn == model)
    return {g.entity: g.reason for g in report.gaps}


def test_a_model_without_lineage_is_one_gap_at_the_model(result: ScanResult) -> None:
    assert gaps_of(result, BARE) == {BARE: NO_LINEAGE}


def test_a_partial_gap_names_each_entity_where_lineage_stops(result: ScanResult) -> None:
    gaps = gaps_of(result, PARTIAL)
    assert set(gaps) == {UNSOURCED, EMPTY_RUN, GHOST_JOB}
    assert "no source dataset" in gaps[UNSOURCED]
    assert "mlFeatureProperties.sources" in gaps[UNSOURCED]
    assert "training run with no inputs" in gaps[EMPTY_RUN]
    assert "not in the catalog" in gaps[GHOST_JOB]
    # The sourced feature reached raw.users; the feature table is a container, not a gap.
    assert SOURCED not in gaps
    assert feature_table_urn("user_features") not in gaps


def test_a_model_whose_lineage_reaches_datasets_has_no_gap(result: ScanResult) -> None:
    assert gaps_of(result, COVERED) == {}


def test_a_job_without_inputs_is_a_gap_but_a_dataset_upstream_is_not(tmp_path: Path) -> None:
    lite = LiteCatalog(tmp_path / "jobs.db", create=True)
    job = data_job_urn("etl", "build")
    lite.ingest(
        [
            *data_job("etl", "build"),
            *dataset("raw.events"),  # a dataset with no upstream of its own: lineage reached it
            *ml_model("job_model", training_jobs=[job], training_data=[dataset_urn("raw.events")]),
        ]
    )
    gaps = coverage_gaps(lite.lineage(model_urn("job_model"), WalkLimits()))
    lite.close()
    assert [(g.entity, g.reason) for g in gaps] == [
        (job, "job with no inputs recorded (dataJobInputOutput)")
    ]


def test_a_truncated_walk_says_a_gap_may_be_the_cap(catalog: LiteCatalog) -> None:
    lineage = catalog.lineage(PARTIAL, WalkLimits(max_hops=1))
    assert lineage.truncated
    reasons = {g.entity: g.reason for g in coverage_gaps(lineage)}
    # The sourced feature's dataset lies beyond the cap: it looks like a gap, and says why.
    assert "beyond the walk's cap" in reasons[SOURCED]


def test_json_report_lists_gaps_and_counts_them(result: ScanResult) -> None:
    report = json.loads(render_json(result, version=2))
    assert report["version"] == 2
    by_urn = {m["urn"]: m for m in report["models"]}
    assert by_urn[BARE]["coverage"]["gaps"] == [{"entity": BARE, "reason": NO_LINEAGE}]
    assert {g["entity"] for g in by_urn[PARTIAL]["coverage"]["gaps"]} == {
        UNSOURCED,
        EMPTY_RUN,
        GHOST_JOB,
    }
    assert by_urn[COVERED]["coverage"]["gaps"] == []
    # `unknown` keeps its meaning: the referenced-only job lacked what every check needs.
    assert GHOST_JOB in by_urn[PARTIAL]["coverage"]["unknown"]
    assert report["summary"] == {
        "models": 3,
        "findings": len(result.findings),
        "unknown": sum(len(m.unknown) for m in result.models),
        "gaps": 4,
        "models_with_gaps": 2,
    }
    assert report["notes"] == []


def test_markdown_report_shows_gaps_and_no_clean_bill(result: ScanResult) -> None:
    text = render_markdown(result)
    bare = text.split("## bare_model", 1)[1].split("## ", 1)[0]
    assert "Walked 1 node; 1 coverage gap." in bare
    assert "No findings, but coverage is incomplete" in bare
    assert "No findings." not in bare
    assert f"- `{BARE}`: {NO_LINEAGE}" in bare
    partial = text.split("## partial_model", 1)[1].split("## ", 1)[0]
    assert "3 coverage gaps" in partial
    assert f"- `{UNSOURCED}`:" in partial
    covered = text.split("## covered_model", 1)[1]
    assert "No findings." in covered.split("## Summary", 1)[0]
    assert "- coverage: 2 models with coverage gaps (4 gaps)" in text.split("## Summary", 1)[1]


def test_terminal_shows_gaps_with_readable_names(result: ScanResult) -> None:
    console = Console(record=True, width=200, color_system=None)
    print_scan(result, console)
    text = console.export_text()
    assert "walked 1 node, 1 coverage gap" in text
    assert f"gap: bare_model: {NO_LINEAGE}" in text
    assert "gap: user_features.favourite_colour: feature with no source dataset" in text
    assert "gap: training.train_ghost: not in the catalog" in text
    assert "no findings, but coverage is incomplete" in text
    assert "Scanned 3 models: 0 findings; 2 models with coverage gaps (4 gaps)." in text


def mlcopilot(home: Path, *args: str) -> Ran:
    return run_cli(home, *args, columns=200)


def test_a_catalog_without_models_is_a_note_and_exit_0(tmp_path: Path) -> None:
    metadata = write_metadata_file(
        tmp_path / "no_models.json",
        [
            *dataset("raw.a", fields=[("id", "int")]),
            *dataset("raw.b", fields=[("id", "int")]),
            *dataset("raw.c", fields=[("id", "int")]),
            *data_job("etl", "load_a"),
            *data_job("etl", "load_b"),
        ],
    )
    home = tmp_path / "home"
    assert mlcopilot(home, "catalog", "load", str(metadata)).returncode == 0
    path = home / "catalog.db"
    note = (
        f"No ML models in lite:{path} (it holds 5 entities: 3 datasets, 2 dataJobs). "
        "Nothing to scan."
    )
    table = mlcopilot(home, "scan")
    assert table.returncode == 0, table.stderr
    assert note in " ".join(table.stdout.split())
    assert "Incidents:" not in table.stdout  # nothing was reconciled: no incident line
    markdown = mlcopilot(home, "scan", "--format", "markdown")
    assert markdown.returncode == 0, markdown.stderr
    assert note in " ".join(markdown.stdout.split())
    as_json = mlcopilot(home, "scan", "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["models"] == []
    assert report["notes"] == [note]
    assert report["summary"]["models"] == 0


@pytest.mark.parametrize(
    "usage",
    [
        ColumnUsage(whole=True),
        ColumnUsage(),
        ColumnUsage(columns=frozenset({"a"}), complete=True),
        ColumnUsage(columns=frozenset({"a"}), unused=frozenset({"b", "c"})),
        ColumnUsage(unused=frozenset({"a", "x"})),
    ],
)
def test_readiness_counts_the_columns_that_feed_or_may_feed(usage: ColumnUsage) -> None:
    names = ["a", "b", "c", "d", "a"]
    expected = sum(1 for c in names if usage.feeds(c) is not False)
    assert coverage._count_feeding(names, usage) == expected
