"""The DataHub backend against the stand-in GMS: request budget, equivalence with Lite, faults.

The contract suite (``test_contract.py``) already runs on this backend; these tests cover what
only a remote catalog has: how many requests a lineage walk costs, that it gives exactly what
Lite gives for the same metadata, and how it fails.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import read_metadata_file
from mlcopilot.errors import CatalogError, CatalogUnavailable
from mlcopilot.model import DocumentWrite, IncidentWrite, TagWrite
from mlcopilot.protocols import Catalog, WalkLimits
from testing.builders import (
    T0,
    dataset,
    dataset_urn,
    feature_urn,
    ml_feature,
    ml_feature_table,
    ml_model,
    ml_primary_key,
    model_urn,
    training_run,
    training_run_urn,
)
from tests.catalog.datahub_backend import StandInCatalog, needs_standin, start_standin
from tests.catalog.signals import dbt_test, incident, run
from tests.catalog.writes import pii_incident, writes_for
from tests.conftest import DEMO_DATA, SAMPLES

pytestmark = needs_standin

TOKEN = "canary-token-4f1d2c9e8b7a6d5c"
MCPs = list[MetadataChangeProposalWrapper]
Servers = Callable[..., Any]
TAGGABLE = {"dataset", "mlFeature", "mlFeatureTable", "mlPrimaryKey", "mlModel", "dataJob"}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    """Start stand-ins (``servers(mcps, **kwargs)``); all are stopped after the test."""
    started: list[Any] = []

    def start(mcps: Sequence[MetadataChangeProposalWrapper], **kwargs: Any) -> Any:
        started.append(start_standin(mcps, tmp_path / f"standin{len(started)}", **kwargs))
        return started[-1]

    yield start
    for server in started:
        server.__exit__(None, None, None)


def catalog_for(server: Any, **options: Any) -> DataHubCatalog:
    options = {"timeout": 5.0, "retries": 1, **options}
    return DataHubCatalog(server.url, **options)


def lite_for(tmp_path: Path, mcps: MCPs) -> LiteCatalog:
    catalog = LiteCatalog(tmp_path / "lite.db", create=True)
    catalog.ingest(mcps)
    return catalog


def generated(features: int = 100, tables: int = 4) -> MCPs:
    """A model several hundred entities deep, with every hop DataHub's index misses.

    Each feature reads its own clean dataset, built from a staging one from one of 20 raw
    sources; features sit in ``tables`` feature tables whose primary keys read key datasets;
    the model trains on a dataset with its own upstream, from a run with its own input.
    """
    mcps: MCPs = []
    raws = [f"raw.src{i}" for i in range(20)]
    for raw in raws:
        mcps += dataset(raw, fields=[("id", "long"), ("value", "string")], last_operation=T0)
    names = [f"f{i}" for i in range(features)]
    for i, name in enumerate(names):
        mcps += dataset(f"stage.{name}", fields=[("value", "string")], upstreams=[raws[i % 20]])
        mcps += dataset(f"clean.{name}", fields=[("value", "string")], upstreams=[f"stage.{name}"])
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
    mcps += dataset("train.extra", fields=[("weight", "double")])
    mcps += training_run("run-1", inputs=["train.extra"], created=T0)
    mcps += ml_model(
        "big",
        features=[feature_urn(f"ft{i % tables}", n) for i, n in enumerate(names)],
        training_data=["train.set"],
        training_jobs=[training_run_urn("run-1")],
    )
    return mcps


def requests_of(server: Any, operation: str) -> list[Any]:
    return [r for r in server.requests if r.operation == operation]


def is_write(request: Any) -> bool:
    actions = request.query.get("action", [])
    return any(a.startswith("ingestProposal") for a in actions) or (
        request.path.startswith("/openapi/v3/entity/") and not request.path.endswith("batchGet")
    )


def entity_requests(server: Any) -> list[Any]:
    return [
        r
        for r in server.requests
        if r.operation == "mlcopilotEntities" or r.path.endswith("/batchGet")
    ]


# --- request budget ---------------------------------------------------------------------------


@pytest.mark.parametrize(("page", "batch"), [(1000, 100), (100, 50)])
def test_lineage_request_budget(servers: Servers, tmp_path: Path, page: int, batch: int) -> None:
    mcps = generated()
    lite = lite_for(tmp_path, mcps)
    expected = lite.lineage(model_urn("big"), WalkLimits())
    server = servers(mcps)
    catalog = catalog_for(server, lineage_page=page, batch_size=batch)
    server.clear_requests()
    lineage = catalog.lineage(model_urn("big"), WalkLimits())
    n = len(lineage.nodes)
    assert n == len(expected.nodes) > 300
    scrolls = requests_of(server, "mlcopilotLineage")
    # Pages of the model's own scroll, plus one scroll per root DataHub's index cannot reach:
    # the training set and each feature table's primary key (4).
    assert len(scrolls) <= math.ceil(n / page) + 1 + 4
    # Whole batches, plus one partial batch per round (root scroll, gaps, their upstreams).
    assert len(entity_requests(server)) <= math.ceil(n / batch) + 6
    assert len(server.requests) <= len(scrolls) + len(entity_requests(server)) + 1
    assert all(
        r.method in ("GET", "POST") and "ingestProposal" not in r.path for r in server.requests
    )
    # A second walk of the same model is free: everything is cached for this scan.
    server.clear_requests()
    assert catalog.lineage(model_urn("big"), WalkLimits()) == lineage
    assert server.requests == []
    catalog.close()
    lite.close()


def test_nodes_are_fetched_once_in_batches(servers: Servers) -> None:
    names = [f"raw.t{i}" for i in range(250)]
    server = servers([m for n in names for m in dataset(n, fields=[("id", "long")])])
    catalog = catalog_for(server, batch_size=100)
    server.clear_requests()
    urns = [dataset_urn(n) for n in names]
    nodes = catalog.nodes(urns)
    assert all(node.exists for node in nodes.values())
    assert len(entity_requests(server)) == 3
    catalog.nodes(urns[:10])
    assert len(entity_requests(server)) == 3
    catalog.close()


def test_incident_statuses_are_read_in_batches(servers: Servers) -> None:
    names = [f"raw.t{i}" for i in range(5)]
    server = servers([m for n in names for m in dataset(n, fields=[("id", "long")])])
    incidents = [
        pii_incident(f"{i:08d}", name, (dataset_urn(name),), active=i % 2 == 0)
        for i, name in enumerate(names)
    ]
    writer = catalog_for(server)
    assert writer.apply(incidents)
    writer.close()
    reader = catalog_for(server, batch_size=2)
    server.clear_requests()
    found = reader.incident_status([w.urn for w in incidents] + ["urn:li:incident:never-written"])
    # Three batches (two urns each), every incident written found, the one never written not.
    assert len([r for r in server.requests if r.path.endswith("/incident/batchGet")]) == 3
    assert {urn: state for urn, (state, _, _) in found.items()} == {
        w.urn: "ACTIVE" if w.active else "RESOLVED" for w in incidents
    }
    reader.close()


def test_lineage_completes_the_hops_datahubs_index_misses(servers: Servers, tmp_path: Path) -> None:
    mcps = generated(features=8, tables=2)
    server = servers(mcps)
    catalog = catalog_for(server)
    lineage = catalog.lineage(model_urn("big"), WalkLimits())
    kinds = {e.kind for e in lineage.edges}
    assert {"training_data", "feature_table", "primary_key", "job_input"} <= kinds
    assert dataset_urn("train.src") in lineage.nodes  # upstream of the training data
    assert dataset_urn("keys.src1") in lineage.nodes  # upstream of a primary key
    assert lineage.paths[dataset_urn("train.src")] == (
        model_urn("big"),
        dataset_urn("train.set"),
        dataset_urn("train.src"),
    )
    catalog.close()


def test_lineage_limits_are_respected_and_reported(servers: Servers, tmp_path: Path) -> None:
    mcps = generated(features=20, tables=2)
    lite = lite_for(tmp_path, mcps)
    catalog = catalog_for(servers(mcps))
    for limits in (WalkLimits(max_hops=2), WalkLimits(max_nodes=25), WalkLimits(max_hops=1)):
        got = catalog.lineage(model_urn("big"), limits)
        assert got == lite.lineage(model_urn("big"), limits)
        assert got.truncated
    catalog.close()
    lite.close()


# --- equivalence with Lite ------------------------------------------------------------------


def demo_mcps() -> MCPs:
    return [m for path in sorted(DEMO_DATA.glob("*.json")) for m in read_metadata_file(path)[1]]


def sample_mcps() -> MCPs:
    return [m for path in sorted(SAMPLES.glob("*.json")) for m in read_metadata_file(path)[1]]


def assert_same_catalog(lite: Catalog, remote: Catalog) -> None:
    models = lite.models()
    assert remote.models() == models
    assert models
    everything: set[str] = set()
    for model in models:
        expected = lite.lineage(model, WalkLimits())
        got = remote.lineage(model, WalkLimits())
        assert set(got.nodes) == set(expected.nodes), model
        assert got.edges == expected.edges, model
        assert dict(got.paths) == dict(expected.paths), model
        assert dict(got.nodes) == dict(expected.nodes), model
        assert got.truncated == expected.truncated
        everything |= set(expected.nodes)
    urns = sorted(everything)
    assert remote.nodes(urns) == lite.nodes(urns)
    assert remote.upstream(urns) == lite.upstream(urns)
    # History is read per dataset (a few requests each): compare a bounded sample.
    for urn in [u for u in urns if u.startswith("urn:li:dataset:")][:40]:
        for when in (T0, T0 + timedelta(days=3650)):
            assert remote.schema_as_of(urn, when) == lite.schema_as_of(urn, when), urn


def assert_same_write_back(lite: Catalog, remote: Catalog) -> None:
    models = lite.models()
    reached = {u for m in models for u in lite.lineage(m, WalkLimits()).nodes}
    # Entities that can carry tags in DataHub (a training run cannot: GMS would refuse).
    entities = sorted(u for u in reached if u.split(":")[2] in TAGGABLE)[:12]
    writes = writes_for(models, entities)
    assert remote.apply(writes, dry_run=True) == lite.apply(writes, dry_run=True)
    first = lite.apply(writes)
    assert remote.apply(writes) == first
    assert first
    assert remote.apply(writes) == lite.apply(writes) == []
    touched = sorted({*entities, *models, *(w.urn for w in writes if hasattr(w, "urn"))})
    assert remote.nodes(touched) == lite.nodes(touched)
    resolved = [replace(w, active=False) if isinstance(w, IncidentWrite) else w for w in writes]
    assert remote.apply(resolved) == lite.apply(resolved)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(demo_mcps, id="demo"),
        pytest.param(
            sample_mcps,
            id="samples",
            marks=pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"no samples at {SAMPLES}"),
        ),
        pytest.param(generated, id="generated"),
    ],
)
def test_same_answers_as_lite(source: Callable[[], MCPs], servers: Servers, tmp_path: Path) -> None:
    mcps = source()
    lite = lite_for(tmp_path, mcps)
    remote = catalog_for(servers(mcps))
    assert_same_catalog(lite, remote)
    assert_same_write_back(lite, remote)
    remote.close()
    lite.close()


# --- faults -------------------------------------------------------------------------------


def assert_clean(message: str) -> None:
    assert TOKEN not in message
    assert "\n" not in message


def test_refused_token_is_a_catalog_error(servers: Servers) -> None:
    server = servers(ml_model("churn"), token=TOKEN)
    catalog = catalog_for(server, token="not-the-token")
    with pytest.raises(CatalogError, match=r"refused the token \(401\)") as caught:
        catalog.models()
    assert not isinstance(caught.value, CatalogUnavailable)
    assert "DATAHUB_GMS_TOKEN" in str(caught.value)
    assert server.url in str(caught.value)
    catalog.close()
    good = catalog_for(server, token=TOKEN)
    assert good.models() == [model_urn("churn")]
    good.close()


def test_server_error_is_retried_then_recovers(servers: Servers) -> None:
    server = servers(ml_model("churn"))
    catalog = catalog_for(server, retries=1)
    server.inject("/api/graphql", status=500, times=1)
    assert catalog.models() == [model_urn("churn")]
    assert [r.status for r in server.requests][:2] == [500, 200]
    catalog.close()


def test_persistent_server_error_is_unavailable(servers: Servers) -> None:
    server = servers(ml_model("churn"), token=TOKEN)
    catalog = catalog_for(server, token=TOKEN, retries=1)
    server.inject("/api/graphql", status=503)
    with pytest.raises(CatalogUnavailable, match="HTTP 503") as caught:
        catalog.models()
    assert_clean(str(caught.value))
    assert len(server.requests) == 2  # the first try and one retry, then give up
    catalog.close()


def test_hung_server_times_out(servers: Servers) -> None:
    server = servers(ml_model("churn"), token=TOKEN)
    catalog = catalog_for(server, token=TOKEN, timeout=1.0, retries=0)
    server.inject("/api/graphql", hang=True)
    with pytest.raises(
        CatalogUnavailable, match=r"no complete answer within 1 s \(timed out\)"
    ) as caught:
        catalog.models()
    assert_clean(str(caught.value))
    catalog.close()


def test_stopped_server_is_unavailable(servers: Servers) -> None:
    server = servers(ml_model("churn"), token=TOKEN)
    url = server.url
    server.__exit__(None, None, None)
    catalog = DataHubCatalog(url, token=TOKEN, timeout=2.0, retries=0)
    with pytest.raises(CatalogUnavailable, match="connection refused") as caught:
        catalog.lineage(model_urn("churn"), WalkLimits())
    assert url in str(caught.value)
    assert_clean(str(caught.value))
    assert caught.value.exit_code == 3
    catalog.close()


def test_graphql_errors_and_malformed_answers_are_catalog_errors(servers: Servers) -> None:
    server = servers(ml_model("churn"))
    catalog = catalog_for(server, retries=0)
    server.inject("/api/graphql", status=200, body="<html>not json</html>", times=1)
    with pytest.raises(CatalogError, match="mlcopilotSearch") as caught:
        catalog.models()
    assert not isinstance(caught.value, CatalogUnavailable)
    server.inject(
        "/api/graphql",
        status=200,
        body='{"errors": [{"message": "Validation error of type FieldUndefined"}]}',
        times=1,
    )
    with pytest.raises(CatalogError, match="FieldUndefined"):
        catalog.nodes([model_urn("other")])
    catalog.close()


def test_token_never_reaches_logs_or_errors(
    servers: Servers, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # the SDK logs requests and failures at DEBUG
    server = servers(ml_model("churn"), token=TOKEN)
    messages: list[str] = []
    refused = catalog_for(server, token=f"wrong-{TOKEN}")
    with pytest.raises(CatalogError) as caught:
        refused.lineage(model_urn("churn"), WalkLimits())
    messages.append(str(caught.value))
    refused.close()
    catalog = catalog_for(server, token=TOKEN, retries=0)
    write = TagWrite(model_urn("churn"), "urn:li:tag:mlcopilot-pii-exposure", present=True)
    server.inject("POST /aspects", status=500)
    with pytest.raises(CatalogUnavailable) as failed:
        catalog.apply([write])
    messages.append(str(failed.value))
    server.clear_faults()
    assert catalog.apply([write]) == [write]
    assert catalog.label == f"datahub:{server.url}"
    catalog.close()
    assert caplog.text  # something was logged, and none of it is the token
    for text in [caplog.text, *messages]:
        assert TOKEN not in text


def test_unknown_and_malformed_urns_are_nodes_that_do_not_exist(servers: Servers) -> None:
    catalog = catalog_for(servers(ml_model("churn")))
    odd = ["urn:li:chart:(looker,c1)", "urn:li:whatever:x", "not-an-urn", "urn:li:dataset:bad"]
    nodes = catalog.nodes(odd)
    assert [n.exists for n in nodes.values()] == [False] * 4
    assert catalog.upstream(odd) == []
    catalog.close()


# --- write-back specifics -------------------------------------------------------------------


def document() -> DocumentWrite:
    return DocumentWrite(
        urn="urn:li:document:mlcopilot-0123456789abcdef-1",
        title="PII reaches churn",
        text="# PII",
        related_assets=(model_urn("churn"),),
        created_at=T0,
        modified_at=T0,
    )


def test_documents_are_skipped_before_datahub_1_4(servers: Servers) -> None:
    server = servers(ml_model("churn"), version="v1.3.0")
    catalog = catalog_for(server)
    tag = TagWrite(model_urn("churn"), "urn:li:tag:mlcopilot-pii-exposure", present=True)
    assert catalog.apply([document(), tag]) == [tag]
    assert catalog.skipped_writes == (document(),)
    assert not catalog.nodes([document().urn])[document().urn].exists
    assert not catalog.server_info().documents
    catalog.close()


def test_write_back_emits_once_and_only_changes(servers: Servers) -> None:
    server = servers(ml_model("churn"))
    catalog = catalog_for(server)
    tag = TagWrite(model_urn("churn"), "urn:li:tag:mlcopilot-pii-exposure", present=True)
    server.clear_requests()
    assert catalog.apply([tag, document()]) == [tag, document()]
    writes = [r for r in server.requests if is_write(r)]
    assert len(writes) == 1  # every changed aspect in one batch
    server.clear_requests()
    assert catalog.apply([tag, document()]) == []
    assert not [r for r in server.requests if is_write(r)]
    catalog.close()


def test_history_reads_are_bounded(servers: Servers) -> None:
    mcps: MCPs = []
    for version in range(30):
        mcps += dataset(
            "raw.events",
            fields=[(f"c{version}", "string")],
            observed_at=T0 + timedelta(days=version),
        )
    server = servers(mcps)
    catalog = catalog_for(server)
    server.clear_requests()
    recent = catalog.schema_as_of(dataset_urn("raw.events"), T0 + timedelta(days=27, hours=1))
    assert recent is not None
    assert [f.path for f in recent.fields] == ["c27"]
    assert len(server.requests) <= 4
    server.clear_requests()
    # Older than the probe budget reaches: history cannot tell, and says so with None.
    assert catalog.schema_as_of(dataset_urn("raw.events"), T0 + timedelta(hours=1)) is None
    assert len(server.requests) <= 1 + 21
    catalog.close()


def test_standin_catalog_closes_its_server(tmp_path: Path) -> None:
    catalog = StandInCatalog(start_standin(ml_model("churn"), tmp_path))
    assert catalog.models() == [model_urn("churn")]
    catalog.close()


# --- DataHub's quality signals: in the entity batches, further pages followed ---------------


def test_signals_come_in_the_entity_batch_and_long_lists_are_paged(
    servers: Servers, tmp_path: Path
) -> None:
    names = [f"raw.t{i}" for i in range(3)]
    many = dataset_urn(names[0])
    mcps = [
        *(m for n in names for m in dataset(n, fields=[("id", "long")])),
        *ml_model("churn", training_data=[dataset_urn(n) for n in names]),
        # Past one page of assertions (200) and of incidents (100) on the first dataset.
        *(m for i in range(205) for m in dbt_test(f"t{i:03}", many, column="id")),
        *(m for i in range(205) for m in run(f"t{i:03}", many, T0, "FAILURE")),
        *(m for i in range(103) for m in incident(f"i{i:03}", [many], created=T0)),
        *dbt_test("other", dataset_urn(names[1])),
        *incident("other", [dataset_urn(names[2])], created=T0),
    ]
    server = servers(mcps)
    catalog = catalog_for(server)
    server.clear_requests()
    lineage = catalog.lineage(model_urn("churn"), WalkLimits())
    operations = [r.operation for r in server.requests]
    catalog.close()
    first = lineage.nodes[many]
    assert len(first.assertions or ()) == 205
    assert all(
        a.last_run is not None and a.last_run.result == "FAILURE" for a in first.assertions or ()
    )
    assert len(first.incidents or ()) == 103
    assert len(lineage.nodes[dataset_urn(names[1])].assertions or ()) == 1
    assert len(lineage.nodes[dataset_urn(names[2])].incidents or ()) == 1
    # One batch for the level, plus one further page of each long list: no request per dataset.
    assert sorted(o for o in operations if o != "mlcopilotEntities") == [
        "mlcopilotAssertions",
        "mlcopilotIncidents",
    ]
    assert lite_for(tmp_path, mcps).nodes([many])[many] == first
