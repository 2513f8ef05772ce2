"""What a real GMS does to lineage reads at scale, in the stand-in, and how the backend copes.

GMS (``LineageSearchService``, ``GraphQueryBaseDAO``, ``datahub.gms.rateLimits``):

- caches the graph walk behind ``searchAcrossLineage`` / ``scrollAcrossLineage`` per (urn,
  direction, hops, flags) unless ``searchFlags.skipCache``, for ``CACHE_TTL_SECONDS`` (600 s),
  and never says so (``freshness`` stays null);
- walks the graph index, which is current, but hydrates results through the search index,
  which lags an entity's first write (over 90 s on quickstart, datahub #18809), while aspect
  reads and ``relationships`` see it at once;
- refuses a walk that reaches ``maxRelations`` (40,000) entities or runs past its 50 s graph
  timeout with an error, or answers ``isPartial`` when partial results are on;
- answers 429 with a ``Retry-After`` of a minute or more when a rate limit is on.

The backend reads every edge from aspects (current), asks lineage search only to save
requests and always with ``skipCache``, so none of this can make its walk partial: it must
come out exactly as the embedded catalog's. A read it cannot do fails the scan and records
nothing, rather than reporting what it did not read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.ingestion.graph.client import DatahubClientConfig, DataHubGraph

from mlcopilot.catalog.datahub import queries as q
from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.errors import CatalogUnavailable
from mlcopilot.model import Lineage
from mlcopilot.protocols import WalkLimits
from mlcopilot.scan import ScanOptions, scan
from mlcopilot.store.sql import open_store
from standin import StandIn
from standin.fixtures import StandInFactory
from testing.builders import dataset, dataset_urn, feature_urn, ml_feature, ml_model, model_urn
from tests.catalog.datahub_backend import needs_standin

pytestmark = needs_standin

MCPs = list[MetadataChangeProposalWrapper]
NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
ALL_HOPS = [{"and": [{"field": "degree", "condition": "EQUAL", "values": ["1", "2", "3+"]}]}]
RESULTS = "total isPartial freshness { cached } searchResults { degree entity { urn } }"
SEARCH = f"""query lineage($input: SearchAcrossLineageInput!) {{
  searchAcrossLineage(input: $input) {{ {RESULTS} }} }}"""
SCROLL = f"""query lineage($input: ScrollAcrossLineageInput!) {{
  scrollAcrossLineage(input: $input) {{ nextScrollId {RESULTS} }} }}"""
DATASETS = """query datasets { scrollAcrossEntities(input: {types: [DATASET], query: "*",
  count: 1000}) { searchResults { entity { urn } } } }"""
READERS = """query readers($urn: String!) { entity(urn: $urn) { urn
  relationships(input: {types: ["DownstreamOf"], direction: INCOMING}) {
    relationships { entity { urn } } } } }"""


def table(name: str, upstreams: Sequence[str] = ()) -> MCPs:
    """A dataset that exists (it has a schema), with these upstreams."""
    return dataset(name, fields=[("id", "long")], upstreams=upstreams)


def chain(n: int = 10) -> MCPs:
    """model -> feature -> c0 -> c1 -> ... -> c{n-1}: long enough for the backend to scroll."""
    mcps: MCPs = []
    for i in range(n):
        mcps += table(f"chain.c{i}", [f"chain.c{i + 1}"] if i + 1 < n else [])
    mcps += ml_feature("fs", "f", sources=["chain.c0"])
    mcps += ml_model("deep", features=[feature_urn("fs", "f")])
    return mcps


def extension(last: str = "chain.c9") -> MCPs:
    """Two new datasets upstream of the chain's end (its ``upstreamLineage`` rewritten)."""
    return [
        *table(last, ["new.x0"]),
        *table("new.x0", ["new.x1"]),
        *table("new.x1"),
    ]


def post(server: StandIn, query: str, variables: dict[str, Any] | None = None) -> Any:
    answer = requests.post(
        f"{server.url}/api/graphql", json={"query": query, "variables": variables or {}}, timeout=30
    )
    answer.raise_for_status()
    return answer.json()


def lineage_input(urn: str, **flags: Any) -> dict[str, Any]:
    return {
        "urn": urn,
        "direction": "UPSTREAM",
        "orFilters": ALL_HOPS,
        "count": 1000,
        **({"searchFlags": flags} if flags else {}),
    }


def upstream(server: StandIn, urn: str, document: str = SEARCH, **flags: Any) -> set[str]:
    """The urns lineage search names upstream of ``urn`` (it must answer without an error)."""
    body = post(server, document, {"input": lineage_input(urn, **flags)})
    assert "errors" not in body, body["errors"]
    page = next(iter(body["data"].values()))
    assert page["freshness"] is None  # GMS never tells a cached answer from a fresh one
    return {r["entity"]["urn"] for r in page["searchResults"]}


def walk_of(server: StandIn, **options: Any) -> Lineage:
    with DataHubCatalog(server.url, **{"timeout": 5.0, "retries": 1, **options}) as catalog:
        return catalog.lineage(model_urn("deep"), WalkLimits())


def same_as_lite(got: Lineage, tmp_path: Path, mcps: MCPs) -> None:
    """``got`` is exactly the embedded catalog's walk of the same metadata, and complete."""
    with LiteCatalog(tmp_path / "truth.db", create=True) as lite:
        lite.ingest(mcps)
        expected = lite.lineage(model_urn("deep"), WalkLimits())
    assert set(got.nodes) == set(expected.nodes)
    assert set(got.edges) == set(expected.edges)
    assert dict(got.paths) == dict(expected.paths)
    assert not got.truncated
    assert not expected.truncated


def entity_requests(server: StandIn) -> int:
    return sum(
        1
        for r in server.requests
        if r.operation == "mlcopilotEntities" or r.path.endswith("/batchGet")
    )


def emit(server: StandIn, mcps: Sequence[MetadataChangeProposalWrapper]) -> None:
    """Write through GMS's API, as an ingestion does (the search index lags it)."""
    graph = DataHubGraph(DatahubClientConfig(server=server.url))
    try:
        graph.emit_mcps(list(mcps))
    finally:
        graph.close()


# --- the stand-in: GMS's lineage cache ------------------------------------------------------------


def test_lineage_search_is_answered_from_gms_cache_unless_skip_cache(
    standin_factory: StandInFactory,
) -> None:
    server = standin_factory(chain())
    c2, x0, x1 = dataset_urn("chain.c2"), dataset_urn("new.x0"), dataset_urn("new.x1")
    before = upstream(server, c2)
    assert len(before) == 7  # c3 ... c9
    server.write(extension())  # indexed long ago: only the cache can hide them
    # The walk was cached for these flags; filters and paging are applied to it afresh.
    assert upstream(server, c2) == before
    # scrollAcrossLineage keys by the flags as given, search by its defaults: another entry.
    assert upstream(server, c2, SCROLL) == before | {x0, x1}
    assert upstream(server, c2, SCROLL) == before | {x0, x1}
    assert upstream(server, c2, skipCache=True) == before | {x0, x1}
    # skipCache neither reads nor refreshes the cache, and is no part of the key.
    assert upstream(server, c2, skipHighlighting=True) == before | {x0, x1}
    assert upstream(server, c2, skipHighlighting=True, skipCache=False) == before | {x0, x1}
    assert upstream(server, c2) == before
    # Caffeine's expireAfterWrite (CACHE_TTL_SECONDS, 600 s) ends it.
    server.advance(server.backend.lineage_cache.ttl_s + 1)
    assert upstream(server, c2) == before | {x0, x1}


def test_a_cache_kept_past_a_day_serves_the_stale_walk_once_more_from_search(
    standin_factory: StandInFactory,
) -> None:
    server = standin_factory(chain())
    server.backend.lineage_cache.ttl_s = 2 * 86_400  # CACHE_TTL_SECONDS raised past a day
    c2, new = dataset_urn("chain.c2"), {dataset_urn("new.x0"), dataset_urn("new.x1")}
    before = upstream(server, c2)
    assert upstream(server, c2, SCROLL, skipAggregates=True) == before  # a key of its own
    server.write(extension())
    server.advance(86_400 + 1)
    # searchAcrossLineage serves the day-old walk and refills in the background (whose entry
    # GMS cannot read back: the next request walks afresh); scrollAcrossLineage only logs.
    assert upstream(server, c2) == before
    assert upstream(server, c2) == before | new
    assert upstream(server, c2, SCROLL, skipAggregates=True) == before
    assert upstream(server, c2, SCROLL, skipAggregates=True) == before


# --- the stand-in: the search index lags first writes ---------------------------------------------


def test_the_search_index_lags_new_entities_while_aspects_and_relationships_do_not(
    standin_factory: StandInFactory,
) -> None:
    server = standin_factory(chain())
    c2, x0, x1 = dataset_urn("chain.c2"), dataset_urn("new.x0"), dataset_urn("new.x1")
    emit(server, extension())
    # The primary store and the graph index have them at once ...
    entity = post(server, "query($u: String!) { entity(urn: $u) { urn } }", {"u": x0})
    assert entity["data"]["entity"] == {"urn": x0}
    readers = post(server, READERS, {"urn": x0})["data"]["entity"]["relationships"]
    assert [r["entity"]["urn"] for r in readers["relationships"]] == [dataset_urn("chain.c9")]
    # ... the search index not yet: lineage search and entity search leave them out.
    found = upstream(server, c2, skipCache=True)
    assert dataset_urn("chain.c9") in found
    assert not {x0, x1} & found
    datasets = post(server, DATASETS)["data"]["scrollAcrossEntities"]["searchResults"]
    assert x0 not in {r["entity"]["urn"] for r in datasets}
    server.advance(server.backend.search_lag_s)
    assert {x0, x1} <= upstream(server, c2, skipCache=True)
    datasets = post(server, DATASETS)["data"]["scrollAcrossEntities"]["searchResults"]
    assert x0 in {r["entity"]["urn"] for r in datasets}


# --- the stand-in: the relation cap and the graph timeout -----------------------------------------


def fan(width: int = 5) -> MCPs:
    """top <- m0..m{w-1} <- the same r0..r{w-1} each <- root: w*w+2w edges, 2w+1 entities."""
    raws = [f"fan.r{i}" for i in range(width)]
    mcps: MCPs = [m for r in raws for m in table(r, ["fan.root"])]
    mcps += table("fan.root")
    mcps += [m for i in range(width) for m in table(f"fan.m{i}", raws)]
    mcps += table("fan.top", [f"fan.m{i}" for i in range(width)])
    return mcps


def test_max_relations_counts_entities_reached_and_is_an_error_or_partial(
    standin_factory: StandInFactory,
) -> None:
    server = standin_factory(fan())
    top = dataset_urn("fan.top")
    server.backend.max_relations = 12  # 11 entities behind 31 edges: under the cap
    assert len(upstream(server, top, skipCache=True)) == 11
    server.backend.max_relations = 8  # the second hop reaches 10
    body = post(server, SEARCH, {"input": lineage_input(top, skipCache=True)})
    [error] = body["errors"]
    assert error["message"] == (
        "Lineage results exceeded the configured maxRelations limit of 8. "
        f"Entity: {top}, Direction: UPSTREAM, MaxHops: 1000. Consider reducing maxHops or "
        "increasing the maxRelations limit, or set partialResults to true to return partial "
        "results."
    )
    assert error["extensions"]["code"] == 500
    assert error["extensions"]["type"] == "SERVER_ERROR"
    server.backend.partial_lineage = True  # impact.partialResults
    body = post(server, SCROLL, {"input": lineage_input(top, skipCache=True)})
    page = body["data"]["scrollAcrossLineage"]
    assert page["isPartial"] is True
    # The hop that reached the cap is kept whole; the next (fan.root) is never walked.
    assert {r["degree"] for r in page["searchResults"]} == {1, 2}
    assert page["total"] == 10


def test_the_graph_timeout_is_an_error_partial_or_for_visualization_silently_short(
    standin_factory: StandInFactory,
) -> None:
    server = standin_factory(chain())
    c0 = dataset_urn("chain.c0")
    server.backend.graph.page_seconds = 15  # each hop "takes" 15 s of GMS's 50 s
    body = post(server, SCROLL, {"input": lineage_input(c0, skipCache=True)})
    [error] = body["errors"]
    assert error["message"] == (
        "Lineage operation timed out after 50 seconds. "
        f"Entity: {c0}, Direction: UPSTREAM, MaxHops: 1000. Consider increasing the timeout "
        "or set partialResults to true to return partial results."
    )
    assert error["extensions"]["code"] == 500
    server.backend.partial_lineage = True  # 20% of the time is kept for the search phase
    page = post(server, SCROLL, {"input": lineage_input(c0, skipCache=True)})["data"]
    page = page["scrollAcrossLineage"]
    assert page["isPartial"] is True
    assert max(r["degree"] for r in page["searchResults"]) == 3
    server.backend.partial_lineage = False
    # The visualization walk (explore limits) stops at the timeout and does not say so.
    explored = {"entitiesExploredPerHopLimit": 50}
    shown = {**lineage_input(c0, skipCache=True), "lineageFlags": explored}
    page = post(server, SCROLL, {"input": shown})["data"]["scrollAcrossLineage"]
    assert page["isPartial"] is False
    assert max(r["degree"] for r in page["searchResults"]) == 4


# --- the stand-in: rate limits --------------------------------------------------------------------


def test_a_rate_limit_answers_429_as_gms_does(standin_factory: StandInFactory) -> None:
    server = standin_factory(chain())
    c0 = dataset_urn("chain.c0")
    assert requests.get(f"{server.url}/health", timeout=10).status_code == 200
    server.rate_limit(2, period_s=60)  # the actor's bucket: 2 requests, 2 more a minute
    assert upstream(server, c0, skipCache=True)
    assert requests.get(f"{server.url}/config", timeout=10).status_code == 200
    denied = requests.post(
        f"{server.url}/api/graphql", json={"query": SCROLL, "variables": {}}, timeout=10
    )
    assert denied.status_code == 429
    assert denied.json() == {"error": "Rate limit exceeded"}
    assert denied.headers["Retry-After"] == "60"  # at least minRetryAfterSeconds
    assert denied.headers["X-DataHub-RateLimit-Rule"] == "scoped:actor"
    assert denied.headers["X-DataHub-RateLimit-Type"] == "endpoint"
    assert denied.headers["X-DataHub-RateLimit-Source"] == "graphql-gate"
    rest = requests.get(f"{server.url}/config", timeout=10)
    assert rest.status_code == 429
    assert rest.headers["X-DataHub-RateLimit-Source"] == "servlet-filter"
    assert requests.get(f"{server.url}/health", timeout=10).status_code == 200  # excluded
    server.advance(30)  # a token back
    assert upstream(server, c0, skipCache=True)
    server.clear_rate_limits()
    # A heavy-resolver bucket limits only requests of that top-level field.
    server.rate_limit(1, period_s=3600, resolver="scrollAcrossLineage")
    assert upstream(server, c0, SCROLL, skipCache=True)
    for _ in range(3):
        assert upstream(server, c0, skipCache=True)  # searchAcrossLineage: not limited
    denied = requests.post(
        f"{server.url}/api/graphql",
        json={"query": SCROLL, "variables": {"input": lineage_input(c0)}},
        timeout=10,
    )
    assert denied.status_code == 429
    assert denied.headers["X-DataHub-RateLimit-Rule"] == "scoped:op:scrollAcrossLineage"
    assert denied.headers["Retry-After"] == "3600"  # the wait for the next token


# --- the backend: fresh lineage whatever GMS's lineage search says --------------------------------


def test_the_walk_skips_gms_lineage_cache(standin_factory: StandInFactory, tmp_path: Path) -> None:
    mcps = chain()
    server = standin_factory(mcps)
    first = walk_of(server)
    assert len(first.nodes) == 12
    cost = entity_requests(server)
    # Someone walked every urn with the backend's own flags but without skipCache ...
    roots = [dataset_urn(f"chain.c{i}") for i in range(10)]
    for root in roots:
        variables = q.lineage_variables(root, ["1", "2", "3+"], 1000, None)
        variables["input"]["searchFlags"]["skipCache"] = False
        assert "errors" not in post(server, q.LINEAGE, variables)
    server.write(extension())  # ... so GMS now holds walks without the new datasets
    stale = q.lineage_variables(roots[2], ["1", "2", "3+"], 1000, None)
    stale["input"]["searchFlags"]["skipCache"] = False
    cached = post(server, q.LINEAGE, stale)["data"]["scrollAcrossLineage"]["searchResults"]
    assert dataset_urn("new.x0") not in {r["entity"]["urn"] for r in cached}
    server.clear_requests()
    second = walk_of(server)
    same_as_lite(second, tmp_path, [*mcps, *extension()])
    # The scroll saw the new datasets, so they came in the same batches as the rest: a walk
    # served the cached walk would have fetched each of them a level at a time.
    assert any(r.operation == "mlcopilotLineage" for r in server.requests)
    assert entity_requests(server) == cost


def test_the_walk_reads_entities_the_search_index_has_not_caught_up_with(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    mcps = chain()
    server = standin_factory(mcps)
    emit(server, extension())  # through the API, just now
    fresh = q.lineage_variables(dataset_urn("chain.c2"), ["1", "2", "3+"], 1000, None)
    scrolled = post(server, q.LINEAGE, fresh)["data"]["scrollAcrossLineage"]["searchResults"]
    assert dataset_urn("new.x0") not in {r["entity"]["urn"] for r in scrolled}  # lagging
    same_as_lite(walk_of(server), tmp_path, [*mcps, *extension()])


def test_a_model_written_just_now_is_scanned_when_named_by_urn(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    server = standin_factory(chain())
    fresh = ml_model("fresh", features=[feature_urn("fs", "f")])
    emit(server, fresh)
    with (
        DataHubCatalog(server.url, timeout=5.0, retries=1) as catalog,
        open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        # Every model: listed by the search index, which has not caught up with it yet.
        assert catalog.models() == [model_urn("deep")]
        # Named by urn: read from its aspects, which are current.
        result = scan(catalog, store, [], ScanOptions(now=NOW, models=[model_urn("fresh")]))
    [report] = result.models
    assert report.urn == model_urn("fresh")
    assert len(report.lineage.nodes) == 12
    assert not report.lineage.truncated


@pytest.mark.parametrize("refusal", ["relation-cap", "partial", "graph-timeout", "rate-limit"])
def test_a_refused_or_partial_lineage_scroll_leaves_the_walk_complete(
    standin_factory: StandInFactory,
    tmp_path: Path,
    refusal: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    mcps = chain()
    server = standin_factory(mcps)
    if refusal in ("relation-cap", "partial"):
        server.backend.max_relations = 3
        server.backend.partial_lineage = refusal == "partial"
    elif refusal == "graph-timeout":
        server.backend.graph.page_seconds = 60
    else:  # GMS's heavy-resolver bucket is empty: Retry-After is GMS's minimum, a minute
        server.rate_limit(0, refill_tokens=1, period_s=60, resolver="scrollAcrossLineage")
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="mlcopilot.catalog.datahub.catalog"):
        # The defaults: 30 s a try, 2 retries; a call may take 90 s, so it could wait a minute.
        got = walk_of(server, timeout=30.0, retries=2)
    same_as_lite(got, tmp_path, mcps)
    assert time.monotonic() - started < 10  # no Retry-After was waited out
    scrolls = [r for r in server.requests if r.operation == "mlcopilotLineage"]
    said = {
        "relation-cap": "exceeded the configured maxRelations limit of 3",
        "partial": "DataHub's lineage of urn:li:dataset:(urn:li:dataPlatform:hive,chain.c2,PROD) "
        "is partial",
        "graph-timeout": "Lineage operation timed out after 50 seconds",
        "rate-limit": "lineage scroll from urn:li:dataset:(urn:li:dataPlatform:hive,chain.c2,PROD)"
        " given up (HTTP 429)",
    }[refusal]
    assert said in caplog.text
    if refusal == "rate-limit":
        assert [r.status for r in scrolls] == [429]  # asked once: the wait is not worth it


# --- the backend: a rate limit it cannot wait out fails the scan ----------------------------------


def test_a_rate_limited_scan_waits_a_short_retry_after_out(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    mcps = chain()
    server = standin_factory(mcps)
    server.rate_limit(3, refill_tokens=3, period_s=1, min_retry_after_s=1)
    with (
        DataHubCatalog(server.url, timeout=5.0, retries=4, max_workers=1) as catalog,
        open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        result = scan(catalog, store, [], ScanOptions(now=NOW))
        assert store.last_scan_at() is not None
    assert 429 in {r.status for r in server.requests}
    [report] = result.models
    same_as_lite(report.lineage, tmp_path, mcps)


def test_a_rate_limit_past_the_calls_deadline_fails_the_scan_and_records_nothing(
    standin_factory: StandInFactory, tmp_path: Path
) -> None:
    server = standin_factory(chain())
    server.rate_limit(4, refill_tokens=1, period_s=3600)  # GMS: Retry-After an hour
    with (
        DataHubCatalog(server.url, timeout=2.0, retries=1) as catalog,
        open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        with pytest.raises(CatalogUnavailable) as caught:
            scan(catalog, store, [], ScanOptions(now=NOW))
        assert store.last_scan_at() is None
    assert caught.value.exit_code == 3
    assert "HTTP 429, and the next retry (3600 s later) would be past" in str(caught.value)
