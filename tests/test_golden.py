"""Every metadata file DataHub's own connectors write loads, and every model in it scans, on all
three backends.

The files are DataHub's golden files (``../shared/datahub-samples/golden/``: dbt, Great
Expectations, BigID, Snowflake, s3, hive, powerbi... with PATCH records, assertions and
classification tags) and its sample metadata. For each file the test reads its facts straight
from the JSON (which models it defines, which upstreams and tags its PATCH records add) and checks
that the product sees exactly those:

- ``lite:``: ``mlcopilot catalog load FILE`` (the product's loader);
- ``datahub:`` and ``mcp:``: the file goes into the stand-in GMS the way a real DataHub gets it,
  through DataHub's own ingestion pipeline (file source, ``datahub-rest`` sink), PATCH proposals
  included; the scan then reads it back through GraphQL or ``mcp-server-datahub``.

The three scans must agree: same models, same findings, same coverage gaps.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.lite import LiteCatalog
from testing.installed_cli import Ran, run_cli
from tests.catalog.datahub_backend import TEST_OPTIONS, UNAVAILABLE, start_standin
from tests.catalog.mcp_backend import MCP_UNAVAILABLE
from tests.conftest import SAMPLES

GOLDEN = SAMPLES / "golden"
FILES = sorted(GOLDEN.glob("*.json")) + sorted(SAMPLES.glob("*.json"))
NOW = "2026-11-29T00:00:00Z"

pytestmark = [
    pytest.mark.skipif(not GOLDEN.is_dir(), reason=f"DataHub's golden files not found at {GOLDEN}"),
    # On one worker: the module's fixtures (every file ingested into a stand-in of its own and
    # scanned through lite:) are built once per worker that runs any of its tests.
    pytest.mark.xdist_group("golden"),
]


# --- facts read from the file itself ------------------------------------------------------


@dataclass
class Facts:
    """What a metadata file says, read from its JSON without the product's code."""

    models: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    upstreams: set[tuple[str, str]] = field(default_factory=set)
    """(downstream, upstream) pairs that PATCH records add (upstreams, job input edges)."""
    tags: set[tuple[str, str]] = field(default_factory=set)
    """(entity, tag) pairs that PATCH records add to ``globalTags`` of datasets."""
    field_terms: set[tuple[str, str, str]] = field(default_factory=set)
    """(dataset, field path, term) that PATCH records add to ``editableSchemaMetadata``."""
    patches: int = 0


_EDGE_PATHS = {
    ("upstreamLineage", "upstreams"),
    ("dataJobInputOutput", "inputDatasetEdges"),
    ("dataJobInputOutput", "inputDatasets"),
}


def _unescape(step: str) -> str:
    return step.replace("~1", "/").replace("~0", "~")


def _operations(record: dict[str, Any]) -> list[dict[str, Any]]:
    aspect = record["aspect"]
    payload = aspect["json"] if "json" in aspect else json.loads(aspect["value"])
    return list(payload["patch"] if isinstance(payload, dict) else payload)


def _urn_of(record: dict[str, Any]) -> str:
    if "proposedSnapshot" in record:
        return str(next(iter(record["proposedSnapshot"].values()))["urn"])
    return str(record["entityUrn"])


def facts_of(path: Path) -> Facts:
    facts = Facts()
    for record in json.loads(path.read_text()):
        urn = _urn_of(record)
        if urn.startswith("urn:li:mlModel:"):
            facts.models.add(urn)
        if record.get("aspectName") == "status" and record["aspect"].get("json", {}).get("removed"):
            facts.removed.add(urn)
        if record.get("changeType") != "PATCH":
            continue
        facts.patches += 1
        name = record["aspectName"]
        for op in _operations(record):
            if op["op"] != "add":
                continue
            steps = [_unescape(s) for s in op["path"].split("/")[1:]]
            if (name, steps[0]) in _EDGE_PATHS:
                facts.upstreams.add((urn, steps[1]))
            elif name == "globalTags" and urn.startswith("urn:li:dataset:"):
                facts.tags.add((urn, steps[-1]))
            elif name == "editableSchemaMetadata" and "terms" in steps:
                facts.field_terms.add((urn, steps[1], steps[-1]))
    return facts


def test_the_golden_files_hold_what_this_suite_claims() -> None:
    """The facts this suite checks are really in the files (a guard on ``facts_of`` itself)."""
    by_name = {p.name: facts_of(p) for p in FILES}
    assert sum(f.patches for f in by_name.values()) == 28
    lineage = by_name["patch-lineage.json"]
    assert (
        "urn:li:dataset:(urn:li:dataPlatform:snowflake,snowflake.db.audit_log,PROD)",
        "urn:li:dataset:(urn:li:dataPlatform:snowflake,snowflake.db.sessions,PROD)",
    ) in lineage.upstreams
    assert by_name["test_datajob_inputs_only_golden.json"].upstreams == {
        (
            "urn:li:dataJob:(urn:li:dataFlow:(airflow,example_dag,PROD),process_job)",
            "urn:li:dataset:(urn:li:dataPlatform:snowflake,source_table,PROD)",
        )
    }
    assert (
        "urn:li:dataset:(urn:li:dataPlatform:snowflake,public.customers,PROD)",
        "urn:li:tag:bigid.Classification:PII",
    ) in by_name["test_bigid_source.json"].tags
    assert len(by_name["dbt_test_events_golden.json"].upstreams) == 8
    assert sum(len(f.models) for f in by_name.values()) == 7


# --- running the product --------------------------------------------------------------------


def mlcopilot(home: Path, *args: str, env: dict[str, str] | None = None) -> Ran:
    return run_cli(home, *args, env=env)


def scan_json(home: Path, catalog: str) -> dict[str, Any]:
    scanned = mlcopilot(
        home, "scan", "--catalog", catalog, "--now", NOW, "--dry-run", "--format", "json"
    )
    assert scanned.returncode == 0, scanned.stderr
    assert "warning" not in scanned.stderr, scanned.stderr
    report: dict[str, Any] = json.loads(scanned.stdout)
    return report


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """What must be identical whichever backend read the catalog."""
    return {
        "models": sorted(m["urn"] for m in report["models"]),
        "findings": sorted(
            (m["urn"], f["id"], f["check"], f["entity"], f["field"] or "", f["severity"])
            for m in report["models"]
            for f in m["findings"]
        ),
        "gaps": sorted(
            (m["urn"], g["entity"], g["reason"])
            for m in report["models"]
            for g in m["coverage"].get("gaps", [])
        ),
        "unknown": sorted(
            (m["urn"], u) for m in report["models"] for u in m["coverage"]["unknown"]
        ),
    }


@pytest.fixture(scope="module")
def lite_scans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Each file loaded by ``catalog load`` into its own Lite catalog and scanned."""
    done: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path in FILES:
        home = tmp_path_factory.mktemp(path.stem)
        catalog = home / "catalog.db"
        loaded = mlcopilot(home, "catalog", "load", "--catalog", f"lite:{catalog}", str(path))
        assert loaded.returncode == 0, f"{path.name}: {loaded.stderr}"
        done[path.name] = (catalog, scan_json(home, f"lite:{catalog}"))
    return done


def stored_field_terms(catalog: Path, dataset: str, column: str) -> set[str]:
    """The glossary terms Lite's latest ``editableSchemaMetadata`` gives ``column``."""
    with closing(sqlite3.connect(catalog)) as db:
        row = db.execute(
            "SELECT metadata FROM metadata_aspect_v2 WHERE urn = ? "
            "AND aspect_name = 'editableSchemaMetadata' AND version = 0",
            [dataset],
        ).fetchone()
    fields = json.loads(row[0])["editableSchemaFieldInfo"] if row else []
    return {
        t["urn"]
        for f in fields
        if f["fieldPath"] == column
        for t in (f.get("glossaryTerms") or {}).get("terms", [])
    }


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_lite_holds_what_the_file_says(
    path: Path, lite_scans: dict[str, tuple[Path, dict[str, Any]]]
) -> None:
    facts = facts_of(path)
    catalog_path, report = lite_scans[path.name]
    with LiteCatalog(catalog_path) as catalog:
        downstreams = sorted({d for d, _ in facts.upstreams})
        found = {(e.downstream, e.upstream) for e in catalog.upstream(downstreams)}
        assert facts.upstreams <= found
        nodes = catalog.nodes(sorted({e for e, _ in facts.tags}))
        for entity, tag in facts.tags:
            assert tag in nodes[entity].tags, (entity, tag)
    # BigID classifies columns of datasets it has no schema for: checked on the stored aspect.
    for dataset, column, term in facts.field_terms:
        assert term in stored_field_terms(catalog_path, dataset, column), (dataset, column, term)
    assert {m["urn"] for m in report["models"]} == facts.models - facts.removed


def test_models_whose_lineage_stops_short_are_reported_as_gaps(
    lite_scans: dict[str, tuple[Path, dict[str, Any]]],
) -> None:
    models = {m["urn"]: m for _, report in lite_scans.values() for m in report["models"]}
    # The SDK v2 golden model names a training job the file does not define, and nothing else:
    # no features, no training data. Its lineage stops at the job.
    basic = models["urn:li:mlModel:(urn:li:dataPlatform:mlflow,test_model,PROD)"]
    job = "urn:li:dataJob:(urn:li:dataFlow:(airflow,training_pipeline,prod),train_model)"
    assert [g["entity"] for g in basic["coverage"]["gaps"]] == [job]
    assert "not in the catalog" in basic["coverage"]["gaps"][0]["reason"]
    report = lite_scans["test_mlmodel_basic_golden.json"][1]
    assert report["summary"]["models_with_gaps"] == 1
    # scienceModel's lineage reaches a dataset the file only references: unknown, not a gap.
    science = models["urn:li:mlModel:(urn:li:dataPlatform:science,scienceModel,PROD)"]
    assert science["coverage"]["gaps"] == []
    assert any("pageViewsHive" in u for u in science["coverage"]["unknown"])


def test_a_catalog_without_models_says_what_it_holds(
    lite_scans: dict[str, tuple[Path, dict[str, Any]]], tmp_path: Path
) -> None:
    catalog, report = lite_scans["patch-lineage.json"]
    assert report["models"] == []
    assert report["summary"]["findings"] == 0
    table = mlcopilot(tmp_path, "scan", "--catalog", f"lite:{catalog}", "--now", NOW, "--dry-run")
    assert table.returncode == 0, table.stderr
    note = table.stdout + table.stderr
    assert "No ML models" in note
    assert "dataset" in note  # what was loaded instead


def test_a_patch_that_removes_a_tag_removes_it(tmp_path: Path) -> None:
    source = GOLDEN / "test_bigid_source.json"
    customers = "urn:li:dataset:(urn:li:dataPlatform:snowflake,public.customers,PROD)"
    pii = "urn:li:tag:bigid.Classification:PII"
    removal = {
        "entityType": "dataset",
        "entityUrn": customers,
        "changeType": "PATCH",
        "aspectName": "globalTags",
        "aspect": {
            "json": {
                "arrayPrimaryKeys": {"tags": ["attribution\u241fsource", "tag"]},
                "patch": [{"op": "remove", "path": f"/tags//{pii}"}],
            }
        },
    }
    edited = tmp_path / "bigid-untagged.json"
    edited.write_text(json.dumps([*json.loads(source.read_text()), removal]))
    for path, expected in ((source, True), (edited, False)):
        target = tmp_path / f"{path.stem}.db"
        loaded = mlcopilot(tmp_path, "catalog", "load", "--catalog", f"lite:{target}", str(path))
        assert loaded.returncode == 0, loaded.stderr
        with LiteCatalog(target) as lite:
            assert (pii in lite.nodes([customers])[customers].tags) is expected


# --- the same files through DataHub (the stand-in) ----------------------------------------


def ingest_into_standin(path: Path, workdir: Path) -> Any:
    """A stand-in GMS that received ``path`` through DataHub's own ingestion pipeline."""
    from testing.ingest import ingest

    server = start_standin([], workdir)
    pipeline = ingest(path, server.url)
    failures = pipeline.sink.get_report().failures
    assert not failures, f"{path.name}: the stand-in refused records: {list(failures)[:3]}"
    assert not server.errors, server.errors
    # GMS's search index takes a while to catch up with an ingestion (over 90 s on
    # quickstart): the scans compared here run once it has.
    server.advance(server.backend.search_lag_s)
    return server


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if UNAVAILABLE is not None:
        pytest.skip(UNAVAILABLE)
    servers = {
        p.name: ingest_into_standin(p, tmp_path_factory.mktemp(f"gms-{p.stem}")) for p in FILES
    }
    yield servers
    for server in servers.values():
        server.__exit__(None, None, None)


BACKENDS = [
    "datahub",
    pytest.param(
        "mcp", marks=pytest.mark.skipif(MCP_UNAVAILABLE is not None, reason=MCP_UNAVAILABLE or "")
    ),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_datahub_backends_read_what_lite_reads(
    path: Path,
    backend: str,
    standins: dict[str, Any],
    lite_scans: dict[str, tuple[Path, dict[str, Any]]],
    tmp_path: Path,
) -> None:
    server = standins[path.name]
    if backend == "datahub":  # the facts through the SDK reads both backends share
        facts = facts_of(path)
        with DataHubCatalog(server.url, **TEST_OPTIONS) as datahub:
            downstreams = sorted({d for d, _ in facts.upstreams})
            found = {(e.downstream, e.upstream) for e in datahub.upstream(downstreams)}
            assert facts.upstreams <= found
            nodes = datahub.nodes(sorted({e for e, _ in facts.tags}))
            for entity, tag in facts.tags:
                assert tag in nodes[entity].tags, (entity, tag)
    report = scan_json(tmp_path, f"{backend}:{server.url}")
    assert summary(report) == summary(lite_scans[path.name][1])
