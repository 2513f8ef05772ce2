"""Walks at the limits, and the batching that makes scans cost what the work costs.

A 1,000-hop chain and a lineage past GMS's 40,000-relation cap through Lite and through the
DataHub backend against the stand-in: complete when the caps allow, ``truncated`` when they
do not, never a crash and never fewer nodes than Lite finds. An estate of models sharing
their upstream: each entity read once. Training-time schemas read in batches give what one
read per dataset gives. (``make bench`` measures the same things at full scale.)
"""

from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from benchmarks.catalogs import bulk_load
from benchmarks.generate import NOW_MS, Shape, generate, wrappers
from mlcopilot.catalog.datahub.catalog import BATCH_SIZE, DataHubCatalog
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import read_metadata_file
from mlcopilot.checks import load_checks
from mlcopilot.model import Lineage
from mlcopilot.protocols import WalkLimits
from mlcopilot.scan import Delivery, ScanOptions, scan
from mlcopilot.scan.checking import read_schema_baselines
from mlcopilot.store import open_store
from standin import StandIn
from testing.builders import T0, dataset, dataset_urn, feature_urn, ml_feature, ml_model, model_urn
from tests.catalog.datahub_backend import needs_standin, start_standin
from tests.catalog.mcp_backend import mcp_catalog_for
from tests.conftest import DEMO_DATA

MCPs = list[MetadataChangeProposalWrapper]
CHAIN = 1000
WIDE = 201  # x 200 upstreams each: 40,200 edges, but ~400 entities for GMS's maxRelations
WIDE_CAP = 400
"""GMS's ``maxRelations`` counts the entities a walk reaches (one relationship each), not the
edges it reads: the wide lineage's ~405 from the scroll root reach a cap scaled down to this."""


def chain() -> MCPs:
    """model -> feature -> d0 -> d1 -> ... -> d999: 1,002 entities, 1,001 hops deep."""
    mcps: MCPs = []
    for i in range(CHAIN):
        last = i + 1 == CHAIN  # the only one without upstreams needs an aspect to exist
        mcps += dataset(
            f"chain.d{i}", upstreams=[] if last else [f"chain.d{i + 1}"], removed=last or None
        )
    mcps += ml_feature("fs", "f", sources=["chain.d0"])
    mcps += ml_model("deep", features=[feature_urn("fs", "f")])
    return mcps


def wide() -> MCPs:
    """A short chain into a hub with 201 upstreams, each with the same 200 upstreams.

    Scrolling DataHub's lineage from the chain reads 40,404 edges to reach about 405 entities:
    more than :data:`WIDE_CAP` allows.
    """
    mcps: MCPs = [m for i in range(200) for m in dataset(f"raw.r{i}", removed=False)]
    raws = [f"raw.r{i}" for i in range(200)]
    mcps += [m for i in range(WIDE) for m in dataset(f"mid.m{i}", upstreams=raws)]
    mcps += dataset("hub", upstreams=[f"mid.m{i}" for i in range(WIDE)])
    for i in range(5):
        mcps += dataset(f"pipe.p{i}", upstreams=[f"pipe.p{i + 1}" if i < 4 else "hub"])
    mcps += ml_feature("fs", "f", sources=["pipe.p0"])
    mcps += ml_model("wide", features=[feature_urn("fs", "f")])
    return mcps


@contextmanager
def served(workdir: Path, mcps: MCPs) -> Iterator[tuple[LiteCatalog, StandIn]]:
    """``mcps`` in a running stand-in and in a Lite catalog of its own, loaded once.

    The stand-in loads the metadata into its Lite file; the Lite catalog reads a copy of it.
    """
    server = StandIn.from_mcps(mcps, workdir / "standin")
    source = sqlite3.connect(server.lite_path)
    target = sqlite3.connect(workdir / "lite.db")
    source.backup(target)  # reads through the stand-in's write-ahead log
    source.close()
    target.close()
    with LiteCatalog(workdir / "lite.db") as lite, server:
        yield lite, server


# Each catalog takes seconds to build: the tests using it are one xdist group, for
# `--dist loadgroup` to keep on one worker.
ON_THE_CHAIN = pytest.mark.xdist_group("scale-chain")
ON_THE_WIDE = pytest.mark.xdist_group("scale-wide")


def served_once(name: str, build: Callable[[], MCPs]) -> Any:
    """A module fixture serving the catalog ``build`` makes (see :func:`served`)."""

    @pytest.fixture(scope="module", name=f"{name}_catalogs")
    def catalogs(
        tmp_path_factory: pytest.TempPathFactory,
    ) -> Iterator[tuple[LiteCatalog, StandIn]]:
        with served(tmp_path_factory.mktemp(name), build()) as built:
            yield built

    return catalogs


chain_catalogs = served_once("chain", chain)
wide_catalogs = served_once("wide", wide)


def same_lineage(got: Lineage, expected: Lineage) -> None:
    assert set(got.nodes) == set(expected.nodes)
    assert got.edges == expected.edges
    assert dict(got.paths) == dict(expected.paths)
    assert got.truncated == expected.truncated


@needs_standin  # the chain is built by the stand-in
@ON_THE_CHAIN
def test_a_1000_hop_chain_through_lite(chain_catalogs: tuple[LiteCatalog, StandIn]) -> None:
    lite, _ = chain_catalogs
    full = lite.lineage(model_urn("deep"), WalkLimits(max_hops=2 * CHAIN))
    assert len(full.nodes) == CHAIN + 2
    assert not full.truncated
    assert len(full.paths[dataset_urn(f"chain.d{CHAIN - 1}")]) == CHAIN + 2
    capped = lite.lineage(model_urn("deep"), WalkLimits())  # the default 50 hops
    assert capped.truncated
    assert len(capped.nodes) == 51
    by_nodes = lite.lineage(model_urn("deep"), WalkLimits(max_hops=2 * CHAIN, max_nodes=500))
    assert by_nodes.truncated
    assert len(by_nodes.nodes) == 500


@needs_standin
@ON_THE_CHAIN
def test_a_1000_hop_chain_through_datahub_costs_a_scroll_not_a_request_per_hop(
    chain_catalogs: tuple[LiteCatalog, StandIn],
) -> None:
    lite, server = chain_catalogs
    for limits in (WalkLimits(max_hops=2 * CHAIN), WalkLimits()):
        with DataHubCatalog(server.url, timeout=10.0, retries=1) as remote:
            server.clear_requests()
            same_lineage(
                remote.lineage(model_urn("deep"), limits), lite.lineage(model_urn("deep"), limits)
            )
            # A few levels one by one, then one scroll and batches: not 1,000 round trips.
            assert len(server.requests) <= 5 + 2 + math.ceil((CHAIN + 2) / BATCH_SIZE) + 2


@needs_standin
@ON_THE_WIDE
@pytest.mark.parametrize("partial", [False, True])
def test_a_lineage_past_the_relation_cap_is_complete_or_says_truncated(
    wide_catalogs: tuple[LiteCatalog, StandIn], partial: bool, caplog: pytest.LogCaptureFixture
) -> None:
    lite, server = wide_catalogs
    server.backend.partial_lineage = partial  # GMS: an error, or isPartial results
    server.backend.max_relations = WIDE_CAP
    try:
        for limits in (WalkLimits(), WalkLimits(max_nodes=300)):
            with (
                DataHubCatalog(server.url, timeout=10.0, retries=1) as remote,
                caplog.at_level(logging.INFO, logger="mlcopilot.catalog.datahub.catalog"),
            ):
                got = remote.lineage(model_urn("wide"), limits)
            expected = lite.lineage(model_urn("wide"), limits)
            same_lineage(got, expected)
            assert got.truncated == (limits != WalkLimits())
        # The scroll did hit the cap, and said so; the walk went on without it.
        assert "partial" in caplog.text or "no lineage scroll" in caplog.text
    finally:
        server.backend.partial_lineage = False
        server.backend.max_relations = 40_000


# --- estates ----------------------------------------------------------------------------------


def generated(shape: Shape) -> MCPs:
    return wrappers(generate(shape))


@needs_standin
def test_an_estate_reads_each_shared_entity_once(tmp_path: Path) -> None:
    mcps = generated(Shape.estate(30, 300, seed=3))
    lite = LiteCatalog(tmp_path / "lite.db", create=True)
    lite.ingest(mcps)
    with start_standin(mcps, tmp_path / "standin") as server:
        remote = DataHubCatalog(server.url, timeout=10.0, retries=1, batch_size=100)
        asked: list[str] = []
        fetch = remote._fetch

        def counted(urns: Any, **options: Any) -> Any:
            asked.extend(urns)
            return fetch(urns, **options)

        remote._fetch = counted  # type: ignore[method-assign]
        models = lite.models()
        assert len(models) == 30
        server.clear_requests()
        remote.prefetch(models, WalkLimits())
        lineages = {m: remote.lineage(m, WalkLimits()) for m in models}
        unique = {u for lineage in lineages.values() for u in lineage.nodes}
        assert sorted(asked) == sorted(unique)  # every entity once, none twice
        # A level of every model per round: about a batch per 100 entities, not per model.
        assert len(server.requests) <= math.ceil(len(unique) / 100) + 10
        for model, lineage in lineages.items():
            same_lineage(lineage, lite.lineage(model, WalkLimits()))
        remote.close()
    lite.close()


@needs_standin
def test_an_estate_scan_costs_rounds_not_requests_per_model(tmp_path: Path) -> None:
    """Through ``datahub:`` and ``mcp:``, the same findings and writes as Lite, in rounds.

    ``get_lineage`` takes one urn and ``get_aspect_history`` probes each: neither is per model.
    """
    mcps = generated(Shape.estate(12, 150, seed=5))
    lite = LiteCatalog(tmp_path / "lite.db", create=True)
    lite.ingest(mcps)
    checks = load_checks()
    options = ScanOptions(now=T0 + timedelta(days=3650), dry_run=True)
    expected = scan(lite, open_store(f"sqlite:///{tmp_path / 'lite-state.db'}"), checks, options)
    lite.close()
    requests: dict[str, list[Any]] = {}
    with start_standin(mcps, tmp_path / "standin") as server:
        server.ml_incidents = True  # today's DataHub: incidents name the model, as in Lite
        catalogs: dict[str, Any] = {
            "datahub": DataHubCatalog(server.url, timeout=10.0, retries=1),
            "mcp": mcp_catalog_for(server),
        }
        catalogs["mcp"].session.start()  # the server's own start-up requests are not the scan's
        for name, catalog in catalogs.items():
            server.clear_requests()
            store = open_store(f"sqlite:///{tmp_path / f'{name}-state.db'}")
            got = scan(catalog, store, checks, options)
            requests[name] = list(server.requests)
            catalog.close()
            assert [f.id for f in got.findings] == [f.id for f in expected.findings], name
            assert got.writes == expected.writes, name
    versions = [r for r in requests["datahub"] if r.query.get("systemMetadata") == ["true"]]
    # Two rounds (current version, then the one before training) for every dataset of every
    # model at once: not two requests per dataset per model.
    assert len(versions) == 2
    assert len(requests["mcp"]) <= 3 * len(requests["datahub"])
    lineage_calls = [r for r in requests["mcp"] if r.operation == "GetEntityLineage"]
    assert len(lineage_calls) < 12  # not one per model
    probes = [r for r in requests["mcp"] if r.path.startswith("/aspects/")]
    assert not probes  # no exists() probe per dataset for its training-time schema


ESTATE_MODELS = 200


@needs_standin
def test_an_estate_through_datahub_costs_under_half_a_request_per_model(tmp_path: Path) -> None:
    """Issue 27 §2: at most 0.5 GMS requests per model, on the first scan and on the second.

    The first scan (stored, nothing delivered, as the benchmark's) reads each entity once, the
    history in two rounds; the second reads no history (its baselines are stored) and holds,
    for them, the walk's own schemas, as the first does: read back one per model and dataset,
    they made the second scan of 1,000 models 0.9 GB larger than the first.
    """
    path = tmp_path / "estate.db"
    bulk_load(generate(Shape.estate(ESTATE_MODELS, 1000, seed=9)), path)
    now = datetime.fromtimestamp(NOW_MS / 1000, tz=UTC)
    limits = WalkLimits(max_hops=50, max_nodes=250_000)
    options = ScanOptions(now=now, limits=limits)
    checks = load_checks()
    requests: list[list[Any]] = []
    with (
        StandIn.from_lite(path, durable=False) as server,
        open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        for dry_run in (False, True):
            server.clear_requests()
            with DataHubCatalog(server.url, timeout=30.0, retries=1) as catalog:
                result = scan(
                    catalog,
                    store,
                    checks,
                    replace(options, dry_run=dry_run),
                    delivery=Delivery(deliver=False),
                )
            requests.append(list(server.requests))
            assert len(result.models) == ESTATE_MODELS
            assert result.findings
        first, second = requests
        assert len(first) <= ESTATE_MODELS / 2, [r.operation or r.path for r in first]
        assert len(second) <= ESTATE_MODELS / 2, [r.operation or r.path for r in second]
        assert len([r for r in first if r.query.get("systemMetadata") == ["true"]]) == 2
        assert not [r for r in second if r.query.get("systemMetadata") == ["true"]]
        with DataHubCatalog(server.url, timeout=30.0, retries=1) as catalog:
            models = catalog.models()
            catalog.prefetch(models, limits)
            lineages = [catalog.lineage(model, limits) for model in models]
            reads = read_schema_baselines(catalog, store, lineages, now)
            known = {lineage.root: reads.of(lineage) for lineage in lineages}
    held = [
        baseline.schema is lineage.nodes[urn].schema
        for lineage in lineages
        for urn, baseline in known[lineage.root][0].items()
    ]
    assert len(held) > ESTATE_MODELS
    assert all(held)
    assert not any(new for _, new in known.values())  # every baseline was stored


# --- batched training-time schemas ------------------------------------------------------------


def demo_catalog(tmp_path: Path) -> LiteCatalog:
    lite = LiteCatalog(tmp_path / "demo.db", create=True)
    for path in sorted(DEMO_DATA.glob("*.json")):
        lite.ingest(read_metadata_file(path)[1])
    return lite


def test_lite_batched_history_is_the_single_read(tmp_path: Path) -> None:
    lite = demo_catalog(tmp_path)
    urns = sorted({u for m in lite.models() for u in lite.lineage(m, WalkLimits()).nodes})
    lite.nodes(urns)  # nodes kept: the batched read may answer from them when nothing changed
    seen: set[Any] = set()
    for days in range(-400, 4000, 30):
        when = T0 + timedelta(days=days)
        batched = lite.schemas_as_of(urns, when)
        assert batched == {u: lite.schema_as_of(u, when) for u in urns}, when
        seen.add(tuple(sorted((u, s is not None) for u, s in batched.items())))
    assert len(seen) > 1  # the window covers schemas before, at and after changes
    lite.close()


@needs_standin
def test_datahub_batched_history_is_the_lite_read(tmp_path: Path) -> None:
    mcps = [m for path in sorted(DEMO_DATA.glob("*.json")) for m in read_metadata_file(path)[1]]
    lite = demo_catalog(tmp_path)
    urns = sorted({u for m in lite.models() for u in lite.lineage(m, WalkLimits()).nodes})
    with start_standin(mcps, tmp_path / "standin") as server:
        remote = DataHubCatalog(server.url, timeout=10.0, retries=1)
        for days in range(-400, 4000, 90):
            when = T0 + timedelta(days=days)
            assert remote.schemas_as_of(urns, when) == {u: lite.schema_as_of(u, when) for u in urns}
        remote.close()
    lite.close()


@needs_standin
def test_datahub_history_of_many_times_at_once_is_the_lite_read(tmp_path: Path) -> None:
    """One call for every dataset at many times: each urn's keys walk its versions together.

    The rounds answer each key as soon as its urn's batch is in and keep no value past it
    (issue 27 §2: a round of an estate's first scan is 100,000 versions); a key answered in
    the first round and one walking further back on the same urn must both be right.
    """
    mcps = [m for path in sorted(DEMO_DATA.glob("*.json")) for m in read_metadata_file(path)[1]]
    lite = demo_catalog(tmp_path)
    urns = sorted({u for m in lite.models() for u in lite.lineage(m, WalkLimits()).nodes})
    times = [T0 + timedelta(days=days) for days in range(-400, 4000, 45)]
    asked = [(urn, when) for when in times for urn in urns]
    with start_standin(mcps, tmp_path / "standin") as server:
        remote = DataHubCatalog(server.url, timeout=10.0, retries=1)
        remote.nodes(urns)  # as in a scan: answers equal to today's are the walk's schemas
        found = remote.schemas_at(asked)
        assert found == {(urn, when): lite.schema_as_of(urn, when) for urn, when in asked}
        # Some urn is answered differently at different times: keys of one urn that settled
        # in different rounds.
        assert any(len({found[(urn, when)] for when in times}) > 1 for urn in urns)
        assert not remote._versions
        remote.close()
    lite.close()
