"""The MCP backend with the real ``mcp-server-datahub`` against the stand-in GMS.

The contract suite (``test_contract.py``) already runs on this backend. These tests cover what
only it has: the same answers as Lite and the DataHub backend on real and generated catalogs,
which tool answers what (and what it costs), the tools' limits (result caps, the token
budget, history pages) and how it fails.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import ENTITY_TYPE_TO_ASPECT_NAMES

from benchmarks.generate import Shape, generate
from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import read_metadata_file
from mlcopilot.catalog.mcp.catalog import McpCatalog
from mlcopilot.checks import load_checks
from mlcopilot.cli.demo_run import SCAN_TIMES
from mlcopilot.model import DocumentWrite, IncidentWrite, PropertyWrite, TagWrite, Write
from mlcopilot.protocols import Catalog, WalkLimits
from mlcopilot.scan import ScanOptions, scan
from mlcopilot.store import open_store
from standin import StandIn
from testing.builders import (
    T0,
    dataset,
    dataset_urn,
    feature_table_urn,
    feature_urn,
    ml_feature,
    ml_feature_table,
    ml_model,
    ml_primary_key,
    model_urn,
    primary_key_urn,
    tag,
    training_run,
    training_run_urn,
)
from tests.catalog.datahub_backend import start_standin
from tests.catalog.mcp_backend import SharedServer, mcp_catalog_for, needs_mcp
from tests.catalog.writes import writes_for
from tests.conftest import DEMO_DATA, SAMPLES

pytestmark = needs_mcp

MCPs = list[MetadataChangeProposalWrapper]
Servers = Callable[..., Any]


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Stand-in databases already loaded, by catalog name: copying one beats loading again."""
    return {}


@pytest.fixture
def servers(tmp_path: Path, templates: dict[str, Path]) -> Iterator[Servers]:
    """Start stand-ins (``servers(mcps, name=None)``); all are stopped after the test.

    With a ``name``, the loaded database is kept and later stand-ins of that name start from
    a copy of it.
    """
    started: list[Any] = []

    def start(mcps: Sequence[MetadataChangeProposalWrapper], name: str | None = None) -> Any:
        workdir = tmp_path / f"standin{len(started)}"
        if name is None or name not in templates:
            server = start_standin(mcps, workdir)
            if name is not None:
                templates[name] = Path(tempfile.mkdtemp(prefix="mlcopilot-template-")) / "t.db"
                server.__exit__(None, None, None)
                shutil.copy(server.lite_path, templates[name])
                server.__enter__()
        else:
            workdir.mkdir(parents=True)
            shutil.copy(templates[name], workdir / "standin.db")
            server = StandIn.from_lite(workdir / "standin.db").start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


def lite_for(path: Path, mcps: MCPs) -> LiteCatalog:
    catalog = LiteCatalog(path, create=True)
    catalog.ingest(mcps)
    return catalog


def sdk_for(server: Any) -> DataHubCatalog:
    return DataHubCatalog(server.url, timeout=5.0, retries=1)


# --- catalogs -----------------------------------------------------------------------------


def demo_mcps() -> MCPs:
    return [m for path in sorted(DEMO_DATA.glob("*.json")) for m in read_metadata_file(path)[1]]


def sample_mcps() -> MCPs:
    return [m for path in sorted(SAMPLES.glob("*.json")) for m in read_metadata_file(path)[1]]


def generated_mcps(tmp: Path, upstream: int = 300) -> MCPs:
    """``benchmarks/generate.py``: one model with about ``upstream`` upstream entities."""
    path = tmp / "generated.json"
    path.write_text(json.dumps(list(generate(Shape.one_model(upstream)))))
    return read_metadata_file(path)[1]


def gaps_mcps(features: int = 12, tables: int = 3) -> MCPs:
    """A model with every hop DataHub's lineage index misses: training data, feature tables,
    their primary keys, a training run's input."""
    mcps: MCPs = []
    names = [f"f{i}" for i in range(features)]
    for i, name in enumerate(names):
        mcps += dataset(f"raw.{name}", fields=[("v", "string")])
        mcps += dataset(f"clean.{name}", fields=[("v", "string")], upstreams=[f"raw.{name}"])
        mcps += ml_feature(f"ft{i % tables}", name, sources=[f"clean.{name}"])
    for t in range(tables):
        mcps += dataset(f"keys.src{t}", fields=[("id", "long")])
        mcps += dataset(f"keys.t{t}", fields=[("id", "long")], upstreams=[f"keys.src{t}"])
        mcps += ml_primary_key(f"ft{t}", "id", sources=[f"keys.t{t}"])
        mcps += ml_feature_table(
            f"ft{t}",
            features=[n for i, n in enumerate(names) if i % tables == t],
            primary_keys=["id"],
        )
    mcps += dataset("train.src", fields=[("label", "long")])
    mcps += dataset("train.set", fields=[("label", "long")], upstreams=["train.src", "clean.f0"])
    mcps += dataset("train.extra", fields=[("w", "double")])
    mcps += training_run("run-1", inputs=["train.extra"], created=T0)
    mcps += ml_model(
        "big",
        features=[feature_urn(f"ft{i % tables}", n) for i, n in enumerate(names)],
        training_data=["train.set"],
        training_jobs=[training_run_urn("run-1")],
    )
    return mcps


# --- equivalence --------------------------------------------------------------------------


def assert_same_reads(expected: Catalog, *others: Catalog) -> None:
    """Identical models, lineage (nodes, edges in order, paths), nodes, edges, baselines."""
    models = expected.models()
    assert models
    everything: set[str] = set()
    for model in models:
        want = expected.lineage(model, WalkLimits())
        everything |= set(want.nodes)
        for other in others:
            got = other.lineage(model, WalkLimits())
            assert set(got.nodes) == set(want.nodes), (other.label, model)
            assert got.edges == want.edges, (other.label, model)
            assert dict(got.paths) == dict(want.paths), (other.label, model)
            assert dict(got.nodes) == dict(want.nodes), (other.label, model)
            assert got.truncated == want.truncated
    urns = sorted(everything)
    for other in others:
        assert other.models() == models, other.label
        assert other.nodes(urns) == expected.nodes(urns), other.label
        assert other.upstream(urns) == expected.upstream(urns), other.label
    datasets = [u for u in urns if u.startswith("urn:li:dataset:")][:10]
    for urn in datasets:
        for when in (T0, T0 + timedelta(days=3650)):
            want_schema = expected.schema_as_of(urn, when)
            for other in others:
                assert other.schema_as_of(urn, when) == want_schema, (other.label, urn)


def _aspects_of(urn: str) -> set[str]:
    return set(ENTITY_TYPE_TO_ASPECT_NAMES.get(urn.split(":")[2]) or ())


def assert_same_write_back(expected: Catalog, *others: Catalog) -> None:
    """The same writes report the same changes and leave the same metadata everywhere."""
    models = expected.models()
    reached = {u for m in models for u in expected.lineage(m, WalkLimits()).nodes}
    # Entities that can carry tags in DataHub (a training run cannot: GMS would refuse).
    entities = sorted(u for u in reached if "globalTags" in _aspects_of(u))[:12]
    writes = writes_for(models, entities)
    touched = sorted({*entities, *models, *(w.urn for w in writes if hasattr(w, "urn"))})
    resolved = [replace(w, active=False) if isinstance(w, IncidentWrite) else w for w in writes]
    edited = [replace(w, text="resolved") if isinstance(w, DocumentWrite) else w for w in writes]
    want_dry = expected.apply(writes, dry_run=True)
    want = [expected.apply(writes), expected.apply(writes)]
    want_nodes = expected.nodes(touched)
    want_later = [expected.apply(resolved), expected.apply(edited)]
    assert want[0]
    assert want[1] == []
    for other in others:
        assert other.apply(writes, dry_run=True) == want_dry, other.label
        assert [other.apply(writes), other.apply(writes)] == want, other.label
        assert other.nodes(touched) == want_nodes, other.label
        assert [other.apply(resolved), other.apply(edited)] == want_later, other.label


SOURCES = [
    pytest.param(lambda tmp: demo_mcps(), id="demo"),
    pytest.param(
        lambda tmp: sample_mcps(),
        id="samples",
        marks=pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"no samples at {SAMPLES}"),
    ),
    pytest.param(generated_mcps, id="generated"),
    pytest.param(lambda tmp: gaps_mcps(), id="index-gaps"),
]


@pytest.mark.parametrize("source", SOURCES)
def test_same_answers_as_lite_and_datahub(
    source: Callable[[Path], MCPs],
    servers: Servers,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    mcps = source(tmp_path)
    name = request.node.callspec.id
    lite = lite_for(tmp_path / "lite.db", mcps)
    reads = servers(mcps, name)
    mcp, sdk = mcp_catalog_for(reads), sdk_for(reads)
    assert_same_reads(lite, mcp, sdk)
    mcp.close()
    sdk.close()
    mcp_writes, sdk_writes = mcp_catalog_for(servers(mcps, name)), sdk_for(servers(mcps, name))
    assert_same_write_back(lite, mcp_writes, sdk_writes)
    mcp_writes.close()
    sdk_writes.close()
    lite.close()


# --- which tool answers what, and what it costs -------------------------------------------


def operations(server: Any) -> Counter[str]:
    return Counter(r.operation or f"{r.method} {r.path.split('?')[0]}" for r in server.requests)


def test_the_mcp_tools_do_the_mcp_work(servers: Servers) -> None:
    server = servers(gaps_mcps(features=4, tables=2))
    catalog = mcp_catalog_for(server)
    model = model_urn("big")
    server.clear_requests()
    assert catalog.models() == [model]
    lineage = catalog.lineage(model, WalkLimits())
    seen = operations(server)
    # One get_lineage from the model (its index has the training run and its input), then
    # one from each hop the index misses that leads further: the training set, the two
    # primary keys (feature tables have no lineage of their own).
    assert seen["search"] == 1
    assert seen["GetEntityLineage"] == 1 + 1 + 2
    assert feature_table_urn("ft1") in lineage.nodes
    server.clear_requests()
    assert catalog.schema_as_of(dataset_urn("train.set"), T0 + timedelta(days=3650)) is not None
    assert [r.path for r in server.requests if r.path.endswith("batchGet")] == [
        "/openapi/v3/entity/dataset/batchGet"
    ] * 2  # the tool's v0 read, then the SDK's read of the chosen version
    server.clear_requests()
    writes: list[Write] = [
        TagWrite(dataset_urn("train.set"), "urn:li:tag:PII", present=True),
        PropertyWrite(model, "urn:li:structuredProperty:io.mlcopilot.openRisks", ("none",)),
        DocumentWrite(
            urn="urn:li:document:mlcopilot-0000000000000001-1",
            title="t",
            text="x",
            related_assets=(model,),
            created_at=T0,
            modified_at=T0,
        ),
    ]
    assert catalog.apply(writes) == writes
    seen = operations(server)
    assert seen["batchAddTags"] == 1
    assert seen["upsertStructuredProperties"] == 1
    assert seen["getMe"] == 1  # save_document
    assert seen["POST /openapi/v3/entity/document"] >= 1
    assert not server.errors
    catalog.close()


def test_request_counts_on_a_generated_catalog(servers: Servers, tmp_path: Path) -> None:
    """Requests a whole scan's reads cost, MCP vs SDK, on a model with ~300 upstream entities."""
    mcps = generated_mcps(tmp_path)
    counts: dict[str, Counter[str]] = {}
    sizes: dict[str, int] = {}
    for name, make in (("datahub", sdk_for), ("mcp", mcp_catalog_for)):
        server = servers(mcps, "generated")
        catalog: Any = make(server)
        if name == "mcp":
            catalog.session.start()  # the server's own start-up requests are not the scan's
        server.clear_requests()
        (model,) = catalog.models()
        sizes[name] = len(catalog.lineage(model, WalkLimits()).nodes)
        counts[name] = operations(server)
        catalog.close()
    assert sizes["mcp"] == sizes["datahub"] > 250
    assert counts["mcp"]["GetEntityLineage"] <= 3
    assert sum(counts["mcp"].values()) <= sum(counts["datahub"].values()) + 8


# --- the tools' limits --------------------------------------------------------------------


def test_result_caps_are_raised_until_everything_is_found(servers: Servers, tmp_path: Path) -> None:
    mcps = gaps_mcps(features=30, tables=2)
    lite = lite_for(tmp_path / "lite.db", mcps)
    server = servers(mcps)
    catalog = mcp_catalog_for(server, lineage_results=5)
    server.clear_requests()
    assert catalog.lineage(model_urn("big"), WalkLimits()) == lite.lineage(
        model_urn("big"), WalkLimits()
    )
    # The model's first page held 5 of its upstream entities and one more call fetched the
    # rest; then one call each from the training set and the two primary keys.
    assert operations(server)["GetEntityLineage"] == 2 + 1 + 2
    catalog.close()
    lite.close()


def test_token_budget_truncation_is_paged_through(servers: Servers, tmp_path: Path) -> None:
    mcps = gaps_mcps(features=30, tables=2)
    lite = lite_for(tmp_path / "lite.db", mcps)
    server = servers(mcps)
    shared = SharedServer()  # a server of its own, with a tiny response budget
    shared.session._env["TOOL_RESPONSE_TOKEN_LIMIT"] = "2000"
    try:
        catalog = shared.catalog(server)
        server.clear_requests()
        assert catalog.lineage(model_urn("big"), WalkLimits()) == lite.lineage(
            model_urn("big"), WalkLimits()
        )
        # Without a budget: 4 calls (the model, the training set, two primary keys).
        assert operations(server)["GetEntityLineage"] > 4  # the model's answer came in pages
        catalog.close()
    finally:
        shared.close()
        lite.close()


def test_lineage_limits_are_respected_and_reported(servers: Servers, tmp_path: Path) -> None:
    mcps = gaps_mcps(features=20, tables=2)
    lite = lite_for(tmp_path / "lite.db", mcps)
    catalog = mcp_catalog_for(servers(mcps))
    for limits in (WalkLimits(max_hops=2), WalkLimits(max_nodes=25), WalkLimits(max_hops=1)):
        got = catalog.lineage(model_urn("big"), limits)
        assert got == lite.lineage(model_urn("big"), limits)
        assert got.truncated
    catalog.close()
    lite.close()


def test_wide_schema_history_keeps_every_type(servers: Servers, tmp_path: Path) -> None:
    """``get_aspect_history`` trims large values and drops logical types; the SDK reads the
    version it picks."""
    kinds = ["string", "long", "date", "boolean", "double", "record", "array"]
    wide = [(f"column_{i:04d}_with_a_long_name", kinds[i % len(kinds)]) for i in range(400)]
    versions = [wide[:300], wide, [(p, "string") for p, _ in wide]]
    mcps = [
        m
        for i, fields in enumerate(versions)
        for m in dataset("raw.wide", fields=fields, observed_at=T0 + timedelta(days=10 * i))
    ]
    lite = lite_for(tmp_path / "lite.db", mcps)
    catalog = mcp_catalog_for(servers(mcps))
    urn = dataset_urn("raw.wide")
    for days in (-1, 1, 11, 25):
        when = T0 + timedelta(days=days)
        assert catalog.schema_as_of(urn, when) == lite.schema_as_of(urn, when), days
    schema = catalog.schema_as_of(urn, T0 + timedelta(days=11))
    assert schema is not None
    assert {f.type for f in schema.fields} >= {"StringType", "NumberType", "DateType"}
    catalog.close()
    lite.close()


def test_documents_keep_their_deterministic_urns(servers: Servers) -> None:
    server = servers(ml_model("churn"))
    catalog = mcp_catalog_for(server)
    document = DocumentWrite(
        urn="urn:li:document:mlcopilot-00000000000000aa-1",
        title="PII reaches churn",
        text="# first",
        related_assets=(model_urn("churn"),),
        created_at=T0,
        modified_at=T0,
    )
    assert catalog.apply([document]) == [document]
    assert catalog.apply([document]) == []
    edited = replace(document, related_assets=(model_urn("churn"), dataset_urn("raw.x")))
    assert catalog.apply([edited]) == [edited]
    # save_document's "Shared" folder, and our document at our urn: no random duplicates.
    assert sorted(server.backend.index.urns(["document"])) == sorted(
        [document.urn, "urn:li:document:__system_shared_documents"]
    )
    catalog.close()


def test_removing_a_tag_without_a_tag_entity_goes_through_the_sdk(servers: Servers) -> None:
    """``remove_tags`` refuses tags DataHub has no entity for; the SDK writes those removals."""
    server = servers(
        [*dataset("raw.x", tags=["Foreign", "Tier1"]), *tag("Tier1"), *ml_model("churn")]
    )
    catalog = mcp_catalog_for(server)
    raw = dataset_urn("raw.x")
    writes: list[Write] = [
        TagWrite(raw, "urn:li:tag:Foreign", present=False),
        TagWrite(model_urn("churn"), "urn:li:tag:Tier1", present=False),
    ]
    server.clear_requests()
    assert catalog.apply(writes) == writes[:1]
    assert catalog.nodes([raw])[raw].tags == {"urn:li:tag:Tier1"}
    assert "batchRemoveTags" not in operations(server)
    catalog.close()


def test_primary_key_and_feature_table_hops_are_found(servers: Servers) -> None:
    catalog = mcp_catalog_for(servers(gaps_mcps(features=4, tables=2)))
    lineage = catalog.lineage(model_urn("big"), WalkLimits())
    assert primary_key_urn("ft1", "id") in lineage.nodes
    assert dataset_urn("keys.src1") in lineage.nodes
    assert lineage.paths[dataset_urn("train.src")] == (
        model_urn("big"),
        dataset_urn("train.set"),
        dataset_urn("train.src"),
    )
    catalog.close()


def test_catalog_label_and_wiring() -> None:
    from mlcopilot.scan.wiring import open_catalog

    catalog = open_catalog("mcp:http://user:secret@localhost:8080/")
    assert isinstance(catalog, McpCatalog)
    assert catalog.label == "mcp:http://localhost:8080"
    catalog.close()


def test_the_demo_story_finds_and_writes_the_same(servers: Servers, tmp_path: Path) -> None:
    """The whole product, end to end: three scans of the demo story through ``lite:`` and
    ``mcp:`` find the same risks, open and resolve the same incidents, write the same back."""
    files = [read_metadata_file(path)[1] for path in sorted(DEMO_DATA.glob("*.json"))]
    lite = lite_for(tmp_path / "lite.db", files[0])
    server = servers(files[0])
    server.ml_incidents = True  # today's DataHub: incidents name the model, as in Lite
    stores = {name: open_store(f"sqlite:///{tmp_path / name}-state.db") for name in ("lite", "mcp")}
    checks = load_checks()
    wrote = []
    for step, when in enumerate(SCAN_TIMES):
        if step:
            lite.ingest(files[step])
            server.write(files[step])
        mcp = mcp_catalog_for(server)  # a new catalog per scan, as each CLI run opens one
        results = {
            name: scan(catalog, stores[name], checks, ScanOptions(now=when))
            for name, catalog in (("lite", lite), ("mcp", mcp))
        }
        mcp.close()
        want, got = results["lite"], results["mcp"]
        assert sorted(got.findings, key=repr) == sorted(want.findings, key=repr), step
        assert want.findings
        assert got.changes == want.changes, step
        assert got.writes == want.writes, step
        wrote.append(bool(want.writes))
    assert all(wrote)
    assert results["lite"].changes.resolved  # the story ends with a resolved incident
    for store in stores.values():
        store.close()
    lite.close()
