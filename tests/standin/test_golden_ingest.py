"""Every DataHub golden file goes into an empty stand-in through DataHub's own ingestion.

``Pipeline`` (file source -> datahub-rest sink) is how a user gets a golden file into GMS, so
the stand-in must take every record of it, and what its PATCH records say must be stored. The
facts checked are read from each file's own JSON Patch operations, and read back through the
stand-in's Rest.li ``/aspects`` endpoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from datahub.emitter.aspect import TIMESERIES_ASPECT_MAP

from standin.fixtures import StandInFactory
from standin.server import StandIn
from testing.ingest import ingest
from tests.conftest import DEMO_DATA, SAMPLES

Json = dict[str, Any]

GOLDEN = sorted((SAMPLES / "golden").glob("*.json")) + sorted(SAMPLES.glob("*.json"))
_IDS = [p.name for p in GOLDEN] or ["no-samples"]


def _records(path: Path) -> list[Json]:
    records: list[Json] = json.loads(path.read_text())
    return records


def _patches(records: list[Json], aspect: str) -> Iterator[tuple[str, Json]]:
    """(urn, operation) for every JSON Patch operation on ``aspect``."""
    for record in records:
        if record.get("changeType") != "PATCH" or record.get("aspectName") != aspect:
            continue
        body = record["aspect"]
        ops = body["json"] if "json" in body else json.loads(body["value"])
        for op in ops["patch"] if isinstance(ops, dict) else ops:
            yield record["entityUrn"], op


def _steps(path: str) -> list[str]:
    return [s.replace("~1", "/").replace("~0", "~") for s in path.split("/")[1:]]


def _aspect(server: StandIn, urn: str, name: str) -> Json:
    resp = requests.get(
        f"{server.url}/aspects/{quote(urn, safe='')}",
        params={"aspect": name, "version": "0"},
        headers={"X-RestLi-Protocol-Version": "2.0.0"},
        timeout=30,
    )
    assert resp.status_code == 200, f"{name} of {urn} not stored: {resp.text[:300]}"
    (value,) = resp.json()["aspect"].values()
    assert isinstance(value, dict)
    return value


@pytest.fixture(params=GOLDEN, ids=_IDS)
def golden(request: pytest.FixtureRequest) -> Path:
    if not GOLDEN:
        pytest.skip(f"DataHub golden files not found under {SAMPLES}")
    path: Path = request.param
    return path


def test_golden_file_ingests_cleanly(golden: Path, standin_factory: StandInFactory) -> None:
    server = standin_factory([])
    pipeline = ingest(golden, server.url)
    report = pipeline.sink.get_report()
    assert not pipeline.has_failures(), report.as_string()[:2000]
    refused = [(r.method, r.path, r.status) for r in server.requests if r.status >= 400]
    assert refused == []
    assert server.errors == []
    records = _records(golden)
    # The pipeline adds its own work units (e.g. status), never fewer than the file holds.
    assert report.total_records_written >= len(records)

    # Every versioned UPSERT aspect and every MCE is stored (nothing dropped on the way).
    for record in records:
        if record.get("changeType") == "UPSERT" and record["aspectName"] not in (
            TIMESERIES_ASPECT_MAP
        ):
            _aspect(server, record["entityUrn"], record["aspectName"])
        if "proposedSnapshot" in record:
            snapshot = next(iter(record["proposedSnapshot"].values()))
            assert server._backend.index.exists(snapshot["urn"]), snapshot["urn"]

    _check_upstream_lineage(server, records)
    _check_edges(server, records, "dashboardInfo", "datasetEdges")
    _check_edges(server, records, "dashboardInfo", "chartEdges")
    _check_edges(server, records, "chartInfo", "inputEdges")
    for field in ("inputDatasetEdges", "outputDatasetEdges", "inputDatajobEdges"):
        _check_edges(server, records, "dataJobInputOutput", field)
    _check_field_terms(server, records)
    _check_custom_properties(server, records)


def _check_upstream_lineage(server: StandIn, records: list[Json]) -> None:
    for urn, op in _patches(records, "upstreamLineage"):
        steps = _steps(op["path"])
        if op["op"] != "add":
            continue
        stored = _aspect(server, urn, "upstreamLineage")
        if steps[0] == "upstreams":
            datasets = [u["dataset"] for u in stored["upstreams"]]
            assert steps[1] in datasets, f"{urn}: upstream {steps[1]} missing"
        if steps[0] == "fineGrainedLineages":
            operation, downstream, query, upstream = steps[1:5]
            matches = [
                fgl
                for fgl in stored["fineGrainedLineages"]
                if fgl["downstreams"] == [downstream]
                and upstream in fgl["upstreams"]
                and fgl.get("transformOperation") == operation
                and fgl.get("query") == (None if query == "NONE" else query)
            ]
            assert len(matches) == 1, f"{urn}: fine-grained {op['path']} stored as {matches}"
            assert matches[0]["confidenceScore"] <= op["value"].get("confidenceScore", 1.0)


def _check_edges(server: StandIn, records: list[Json], aspect: str, field: str) -> None:
    for urn, op in _patches(records, aspect):
        steps = _steps(op["path"])
        if op["op"] == "add" and steps[0] == field:
            stored = _aspect(server, urn, aspect)
            assert steps[1] in [e["destinationUrn"] for e in stored[field]], op["path"]


def _check_field_terms(server: StandIn, records: list[Json]) -> None:
    for urn, op in _patches(records, "editableSchemaMetadata"):
        steps = _steps(op["path"])
        if op["op"] != "add" or steps[2:4] != ["glossaryTerms", "terms"]:
            continue
        stored = _aspect(server, urn, "editableSchemaMetadata")
        (info,) = [f for f in stored["editableSchemaFieldInfo"] if f["fieldPath"] == steps[1]]
        terms = info["glossaryTerms"]
        assert terms["auditStamp"]["actor"]  # the template's required stamp
        (term,) = [t for t in terms["terms"] if t["urn"] == steps[4]]
        assert term == op["value"] | {"urn": steps[4]}


def _check_custom_properties(server: StandIn, records: list[Json]) -> None:
    for aspect in ("datasetProperties", "dataProductProperties"):
        for urn, op in _patches(records, aspect):
            steps = _steps(op["path"])
            if op["op"] == "add" and steps[0] == "customProperties":
                stored = _aspect(server, urn, aspect)
                assert stored["customProperties"][steps[1]] == op["value"]


def test_golden_files_exercise_the_templates() -> None:
    """The checks above are not vacuous: the golden files hold each kind of patch."""
    if not GOLDEN:
        pytest.skip(f"DataHub golden files not found under {SAMPLES}")
    paths = [
        (aspect, _steps(op["path"])[0])
        for path in GOLDEN
        for aspect in ("upstreamLineage", "dashboardInfo", "dataJobInputOutput")
        for _, op in _patches(_records(path), aspect)
    ]
    terms = [
        op
        for path in GOLDEN
        for _, op in _patches(_records(path), "editableSchemaMetadata")
        if "/glossaryTerms/terms/" in op["path"]
    ]
    for expected in (
        ("upstreamLineage", "upstreams"),
        ("upstreamLineage", "fineGrainedLineages"),
        ("dashboardInfo", "datasetEdges"),
        ("dataJobInputOutput", "inputDatasetEdges"),
    ):
        assert expected in paths
    assert terms


def test_the_pipeline_leaves_the_http_libraries_loggers_as_a_new_process_has_them(
    standin_factory: StandInFactory,
) -> None:
    """DataHub's ingestion sets ``urllib3`` to ERROR when it loads its logging manager; the
    suite's later tests in the same worker must still see the warnings a command shows."""
    server = standin_factory([])
    ingest(DEMO_DATA / "01_catalog.json", server.url)
    assert logging.getLogger("urllib3").level == logging.NOTSET
    assert logging.getLogger("urllib3.connectionpool").getEffectiveLevel() == (
        logging.getLogger().getEffectiveLevel()
    )
