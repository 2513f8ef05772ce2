"""The stand-in, exercised by the real clients: acryl-datahub's DataHubGraph / DataHubClient and
the real ``mcp-server-datahub`` process over stdio with the official ``mcp`` client."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Coroutine, Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
import pytest
import requests
from anyio.from_thread import start_blocking_portal
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.rest_emitter import ClientMode  # type: ignore[attr-defined]
from datahub.ingestion.graph.client import DatahubClientConfig, DataHubGraph
from datahub.metadata import schema_classes as sc
from datahub.sdk.main_client import DataHubClient

from standin import StandIn, sdl_path
from standin import scenario as sn
from standin.fixtures import StandInFactory, require_sdl

T = TypeVar("T")

ENTITIES_QUERY = """
query($urns:[String!]!){ entities(urns:$urns){ urn type
  ... on Dataset {
    status { removed }
    deprecation { deprecated note decommissionTime actor replacement { urn } }
    properties { name description lastModified { time actor } created
                 customProperties { key value } }
    lastIngested
    tags { tags { tag { urn properties { name } } associatedUrn } }
    glossaryTerms { terms { term { urn properties { name } } } }
    ownership { owners { owner { ... on CorpUser { urn } } ownershipType { urn } } }
    schemaMetadata(version: 0) { name platformUrn version hash createdAt
      fields { fieldPath type nativeDataType nullable description isPartOfKey
               tags { tags { tag { urn } } } glossaryTerms { terms { term { urn } } }
               schemaFieldEntity { urn
                 structuredProperties { properties { structuredProperty { urn }
                   values { ... on StringValue { stringValue } ... on NumberValue { numberValue } }
                 } }
                 deprecation { deprecated } } } }
    editableSchemaMetadata { editableSchemaFieldInfo { fieldPath description
      tags { tags { tag { urn } } } glossaryTerms { terms { term { urn } } } } }
    operations(limit: 1) { timestampMillis lastUpdatedTimestamp operationType
                           customOperationType actor }
    datasetProfiles(limit: 1) { timestampMillis rowCount columnCount }
    structuredProperties { properties { structuredProperty { urn definition { qualifiedName } }
      values { ... on StringValue { stringValue } ... on NumberValue { numberValue } } } }
    incidents(state: ACTIVE) { total incidents { urn incidentType customType title priority
      incidentStatus { state stage } } }
    health { type status message }
  }
  ... on MLModel { name modelProps: properties { name description mlFeatures tags
                   customProperties { key value } }
                   trainingData { dataset motivation } deprecation { deprecated }
                   tags { tags { tag { urn } } }
                   structuredProperties { properties { structuredProperty { urn } } } }
  ... on MLFeature { name featureNamespace
                     featureProperties { description dataType sources { urn } }
                     relationships(input:{types:["Contains"],direction:INCOMING}) {
                       relationships { entity { urn } } } }
  ... on MLFeatureTable { name featureTableProperties { mlFeatures { urn } mlPrimaryKeys { urn } } }
} }
"""

SCROLL_QUERY = """
query scrollAcrossLineage($input: ScrollAcrossLineageInput!) {
  scrollAcrossLineage(input: $input) {
    nextScrollId total count isPartial
    searchResults { degree degrees explored entity { urn type } paths { path { urn } } }
  }
}
"""

ALL_HOPS = [{"and": [{"field": "degree", "condition": "EQUAL", "values": ["1", "2", "3+"]}]}]


def calls(server: StandIn) -> list[Any]:
    """Recorded requests, less the SDK's telemetry probe (telemetry is decided at import)."""
    return [r for r in server.requests if "telemetry" not in r.path]


def graph(server: StandIn, **config: Any) -> DataHubGraph:
    return DataHubGraph(DatahubClientConfig(server=server.url, **config))


@pytest.fixture
def server(standin_factory: StandInFactory) -> StandIn:
    return standin_factory(sn.ml_catalog())


def scroll_all(g: DataHubGraph, urn: str, **extra: Any) -> tuple[list[dict[str, Any]], int]:
    """Every page of an upstream scroll; returns (results, pages)."""
    results: list[dict[str, Any]] = []
    scroll_id, pages = None, 0
    while True:
        variables = {"urn": urn, "direction": "UPSTREAM", "orFilters": ALL_HOPS, **extra}
        data = g.execute_graphql(SCROLL_QUERY, {"input": {**variables, "scrollId": scroll_id}})
        page = data["scrollAcrossLineage"]
        results += page["searchResults"]
        pages += 1
        scroll_id = page["nextScrollId"]
        if not scroll_id:
            return results, pages


# --- SDK: reads ------------------------------------------------------------------------------


def test_sdl_path_points_at_the_graphql_files() -> None:
    require_sdl()
    folder = sdl_path()
    assert folder is not None
    assert (folder / "entity.graphql").is_file()


def test_connection_config_and_version(server: StandIn) -> None:
    g = graph(server)
    g.test_connection()
    assert g.server_config.service_version == "v1.5.0"
    assert not g.server_config.is_datahub_cloud
    assert [(r.method, r.path) for r in calls(server)] == [("GET", "/config")]


def test_get_aspect_exists_and_versions(server: StandIn) -> None:
    g = graph(server)
    assert g.exists(sn.CURATED)
    assert g.exists(sn.MODEL)
    assert not g.exists("urn:li:dataset:(urn:li:dataPlatform:hive,nowhere,PROD)")
    latest = g.get_aspect(sn.CURATED, sc.SchemaMetadataClass)
    first = g.get_aspect(sn.CURATED, sc.SchemaMetadataClass, version=1)
    assert latest is not None
    assert first is not None
    assert [f.fieldPath for f in latest.fields] == ["customer_id", "email_domain", "tenure_days"]
    assert [f.fieldPath for f in first.fields] == ["customer_id", "email_domain"]
    assert g.get_aspect(sn.CURATED, sc.GlobalTagsClass) is None
    # exists() asks for the key aspect, which GMS synthesises for every existing entity
    assert any(r.query.get("aspect") == ["datasetKey"] for r in server.requests)


def test_entities_query_from_the_api_notes(server: StandIn) -> None:
    urns = [sn.RAW, sn.CURATED, sn.LEGACY, sn.MODEL, sn.F_EMAIL, sn.TABLE, sn.LANDING + "x"]
    data = graph(server).execute_graphql(ENTITIES_QUERY, {"urns": urns})
    raw, curated, legacy, model, feature, table, missing = data["entities"]
    assert missing is None  # GMS batch loaders return null for urns that do not exist
    email = raw["schemaMetadata"]["fields"][1]
    assert email["fieldPath"] == "email"
    assert email["type"] == "STRING"
    assert email["tags"]["tags"][0]["tag"]["urn"] == sn.TAG_PII
    assert raw["properties"]["lastModified"]["time"] == sn.T0 + sn.DAY
    assert legacy["deprecation"]["deprecated"] is True
    assert curated["operations"][0]["timestampMillis"] == sn.T0 + 3 * sn.DAY
    assert curated["incidents"]["total"] == 0
    assert model["modelProps"]["mlFeatures"] == [sn.F_EMAIL, sn.F_TENURE, sn.F_ORDERS]
    assert model["trainingData"] == [{"dataset": sn.TRAINING, "motivation": None}]
    assert feature["featureProperties"]["sources"] == [{"urn": sn.CURATED}]
    assert feature["relationships"]["relationships"] == [{"entity": {"urn": sn.TABLE}}]
    assert table["featureTableProperties"]["mlPrimaryKeys"] == [{"urn": sn.PK}]


def test_graphql_errors_are_worded_like_gms(server: StandIn) -> None:
    body = {"query": '{ entity(urn: "x") { urn nosuchfield } }'}
    reply = requests.post(f"{server.url}/api/graphql", json=body, timeout=10).json()
    message = reply["errors"][0]["message"]
    assert message.startswith("Validation error (FieldUndefined@[entity/nosuchfield])")
    assert reply["errors"][0]["extensions"]["classification"] == "ValidationError"
    intro = graph(server).execute_graphql("{ __schema { queryType { name } } }")
    assert intro["__schema"]["queryType"]["name"] == "Query"


def test_timeseries_timeline_and_batch_get(server: StandIn) -> None:
    g = graph(server)
    op = g.get_latest_timeseries_value(sn.CURATED, sc.OperationClass, {})
    assert op is not None
    assert op.timestampMillis == sn.T0 + 3 * sn.DAY
    url = f"{server.url}/openapi/v2/timeline/v1/{quote(sn.CURATED, safe='')}"
    changes = requests.get(url, params={"categories": "TECHNICAL_SCHEMA"}, timeout=10).json()
    added = [e for tx in changes for e in tx["changeEvents"] if e["operation"] == "ADD"]
    assert [e["parameters"]["fieldPath"] for e in added][-1] == "tenure_days"
    assert changes[-1]["semVerChange"] == "MINOR"
    entities = g.get_entities("dataset", [sn.CURATED], ["schemaMetadata"])
    schema, _meta = entities[sn.CURATED]["schemaMetadata"]
    assert isinstance(schema, sc.SchemaMetadataClass)
    assert len(schema.fields) == 3


def test_timeseries_sort_and_time_window_as_gms(server: StandIn) -> None:
    # Three operations on CURATED (a day apart), as the Rest.li action returns them.
    url = f"{server.url}/aspects"
    body: dict[str, Any] = {"urn": sn.CURATED, "entity": "dataset", "aspect": "operation"}

    def stamps(**extra: Any) -> list[int]:
        answer = requests.post(
            url,
            params={"action": "getTimeseriesAspectValues"},
            json={**body, **extra},
            timeout=10,
        ).json()["value"]["values"]
        return [json.loads(v["aspect"]["value"])["timestampMillis"] for v in answer]

    newest_first = stamps()
    assert newest_first == sorted(newest_first, reverse=True)
    assert len(newest_first) >= 2
    ascending = {"field": "timestampMillis", "order": "ASCENDING"}
    assert stamps(sort=ascending, limit=1) == [min(newest_first)]
    assert stamps(endTimeMillis=newest_first[1], limit=1) == [newest_first[1]]


# --- SDK: lineage ----------------------------------------------------------------------------


def test_scroll_across_lineage_multi_hop_with_paging(server: StandIn) -> None:
    results, pages = scroll_all(graph(server), sn.MODEL, count=3)
    assert pages == 3  # 8 results, 3 per page
    assert {r["entity"]["urn"]: r["degree"] for r in results} == sn.UPSTREAM_OF_MODEL
    landing = next(r for r in results if r["entity"]["urn"] == sn.LANDING)
    path = [e["urn"] for e in landing["paths"][0]["path"]]
    assert path[0] == sn.MODEL
    assert path[-1] == sn.LANDING
    assert sn.RAW in path


def test_degree_filter_limits_hops(server: StandIn) -> None:
    g = graph(server)
    one = [{"and": [{"field": "degree", "condition": "EQUAL", "values": ["1"]}]}]
    results, _ = scroll_all(g, sn.MODEL, orFilters=one)
    assert {r["degree"] for r in results} == {1}
    only_datasets, _ = scroll_all(g, sn.MODEL, types=["DATASET"])
    assert {r["entity"]["urn"] for r in only_datasets} == {
        sn.CURATED,
        sn.LEGACY,
        sn.RAW,
        sn.LANDING,
    }


def test_sdk_lineage_client(server: StandIn) -> None:
    client = DataHubClient(server=server.url, token="x")
    found = {r.urn: r.hops for r in client.lineage.get_lineage(source_urn=sn.MODEL, max_hops=3)}
    assert found == sn.UPSTREAM_OF_MODEL  # REMOVED (soft-deleted) is filtered out
    columns = client.lineage.get_lineage(
        source_urn=sn.CURATED, source_column="email_domain", max_hops=3
    )
    assert {r.urn: r.hops for r in columns} == {
        sn.field_urn(sn.RAW, "email"): 1,
        sn.field_urn(sn.LANDING, "email"): 2,
    }


def test_documented_gaps_are_reproduced(server: StandIn) -> None:
    g = graph(server)
    results, _ = scroll_all(g, sn.MODEL)
    urns = {r["entity"]["urn"] for r in results}
    # mlModelTrainingData has no @Relationship; feature tables and deployments are not lineage
    assert sn.TRAINING not in urns
    assert sn.TABLE not in urns
    assert sn.DEPLOYMENT not in urns
    # ... but the training dataset has its own lineage, and the table is a relationship
    training, _ = scroll_all(g, sn.TRAINING)
    assert {r["entity"]["urn"] for r in training} == {sn.RAW, sn.LANDING}
    query = """query($u:String!){ entity(urn:$u){ ... on MLFeature {
        relationships(input:{types:["Contains"],direction:INCOMING}) { total relationships {
          type direction entity { urn type } } }
        lineage(input:{direction:UPSTREAM}) { total relationships { type entity { urn } } } } } }"""
    feature = g.execute_graphql(query, {"u": sn.F_EMAIL})["entity"]
    assert feature["relationships"]["relationships"] == [
        {
            "type": "Contains",
            "direction": "INCOMING",
            "entity": {"urn": sn.TABLE, "type": "MLFEATURE_TABLE"},
        }
    ]
    assert feature["lineage"]["relationships"] == [
        {"type": "DerivedFrom", "entity": {"urn": sn.CURATED}}
    ]


# --- SDK: writes -----------------------------------------------------------------------------


def _tags(urn: str) -> MetadataChangeProposalWrapper:
    return MetadataChangeProposalWrapper(
        entityUrn=urn, aspect=sc.GlobalTagsClass(tags=[sc.TagAssociationClass(sn.TAG_SENSITIVE)])
    )


def test_emit_restli_lands_in_lite(server: StandIn) -> None:
    graph(server).emit(_tags(sn.LANDING))
    assert [(r.path, r.query) for r in calls(server)] == [
        ("/aspects", {"action": ["ingestProposal"]})
    ]
    row = server.backend.store.get(sn.LANDING, "globalTags")
    assert row is not None
    assert row.value["tags"] == [{"tag": sn.TAG_SENSITIVE}]


def test_emit_openapi_lands_in_lite_as_new_version(server: StandIn) -> None:
    g = graph(server, client_mode=ClientMode.SDK)
    g.test_connection()
    g.emit(_tags(sn.RAW))
    g.emit(
        MetadataChangeProposalWrapper(
            entityUrn=sn.RAW, aspect=sc.GlobalTagsClass(tags=[sc.TagAssociationClass(sn.TAG_PII)])
        )
    )
    assert [r.path for r in calls(server)][1:] == ["/openapi/v3/entity/dataset"] * 2
    history = server.backend.store.history(sn.RAW, "globalTags")
    assert [h.value["tags"][0]["tag"] for h in history] == [sn.TAG_SENSITIVE, sn.TAG_PII]


def test_last_ingested_moves_only_with_ingestion_runs(server: StandIn) -> None:
    """As in GMS: writes without a run id (UI edits, plain emitters) leave ``lastIngested``."""
    query = "query($u:String!){ entity(urn:$u){ ... on Dataset { lastIngested } } }"
    g = graph(server)

    def last_ingested() -> Any:
        return g.execute_graphql(query, {"u": sn.RAW})["entity"]["lastIngested"]

    before = last_ingested()
    assert isinstance(before, int)  # the scenario is written by a run
    g.emit(_tags(sn.RAW))
    assert server.backend.store.get(sn.RAW, "globalTags") is not None
    assert last_ingested() == before
    run = sc.SystemMetadataClass(lastObserved=before + 60_000, runId="ingestion-2")
    g.emit(
        MetadataChangeProposalWrapper(
            entityUrn=sn.RAW, aspect=sc.StatusClass(removed=False), systemMetadata=run
        )
    )
    assert last_ingested() == before + 60_000


def test_mutations_tags_properties_and_incidents(server: StandIn) -> None:
    g = graph(server)
    add = "mutation($i: BatchAddTagsInput!){ batchAddTags(input:$i) }"
    resources = [
        {
            "resourceUrn": sn.CURATED,
            "subResourceType": "DATASET_FIELD",
            "subResource": "email_domain",
        }
    ]
    assert g.execute_graphql(add, {"i": {"tagUrns": [sn.TAG_PII], "resources": resources}})[
        "batchAddTags"
    ]
    upsert = """mutation($i: UpsertStructuredPropertiesInput!){
        upsertStructuredProperties(input:$i){ properties { structuredProperty { urn }
          values { ... on NumberValue { numberValue } } } } }"""
    params = [{"structuredPropertyUrn": sn.PROP_RISK, "values": [{"numberValue": 0.9}]}]
    props = g.execute_graphql(
        upsert, {"i": {"assetUrn": sn.MODEL, "structuredPropertyInputParams": params}}
    )
    assert props["upsertStructuredProperties"]["properties"][0]["values"] == [{"numberValue": 0.9}]
    raise_q = "mutation($i: RaiseIncidentInput!){ raiseIncident(input:$i) }"
    incident = g.execute_graphql(
        raise_q,
        {
            "i": {
                "type": "DATA_SCHEMA",
                "title": "drift",
                "resourceUrn": sn.CURATED,
                "priority": "HIGH",
            }
        },
    )["raiseIncident"]
    assert incident.startswith("urn:li:incident:")
    data = g.execute_graphql(ENTITIES_QUERY, {"urns": [sn.CURATED]})["entities"][0]
    assert data["incidents"]["incidents"][0]["priority"] == "HIGH"
    assert data["health"][0]["status"] == "FAIL"
    assert data["editableSchemaMetadata"]["editableSchemaFieldInfo"][0]["tags"]["tags"] == [
        {"tag": {"urn": sn.TAG_PII}}
    ]
    resolve = "mutation($u:String!){ updateIncidentStatus(urn:$u, input:{state: RESOLVED}) }"
    assert g.execute_graphql(resolve, {"u": incident})["updateIncidentStatus"] is True
    data = g.execute_graphql(ENTITIES_QUERY, {"urns": [sn.CURATED]})["entities"][0]
    assert data["incidents"]["total"] == 0
    assert data["health"] == [{"type": "INCIDENTS", "status": "PASS", "message": None}]
    bad = {
        "i": {
            "assetUrn": sn.MODEL,
            "structuredPropertyInputParams": [
                {"structuredPropertyUrn": sn.PROP_RISK, "values": [{"stringValue": "high"}]}
            ],
        }
    }
    with pytest.raises(Exception, match="should be a number"):
        g.execute_graphql(upsert, bad)


# --- recording and faults --------------------------------------------------------------------


def test_requests_are_recorded_and_cleared(server: StandIn) -> None:
    g = graph(server)
    g.exists(sn.MODEL)
    g.execute_graphql(
        "query getTags($u:[String!]!){ entities(urns:$u){ urn } }", {"u": [sn.TAG_PII]}
    )
    ops = [(r.method, r.operation, r.status) for r in server.requests]
    assert ops == [("GET", None, 200), ("POST", "getTags", 200)]
    assert server.requests[1].root_fields == ("entities",)
    assert server.requests[1].body_bytes > 0
    assert server.requests[1].response_bytes > 0
    assert server.handler_seconds == pytest.approx(sum(r.duration_s for r in server.requests))
    server.clear_requests()
    assert server.requests == []


def test_token_is_required_when_configured(standin_factory: StandInFactory) -> None:
    server = standin_factory(sn.ml_catalog(), token="secret")
    with pytest.raises(requests.HTTPError, match="401"):
        graph(server).get_aspect(sn.MODEL, sc.MLModelPropertiesClass)
    assert graph(server, token="secret").get_aspect(sn.MODEL, sc.MLModelPropertiesClass) is not None
    graph(server).test_connection()  # /config is public, as in GMS


def test_injected_status_latency_and_retry(server: StandIn) -> None:
    server.inject("GET /aspects/*", status=401, times=1)
    with pytest.raises(requests.HTTPError, match="401"):
        graph(server).get_aspect(sn.MODEL, sc.MLModelPropertiesClass)
    fault = server.inject("scrollAcrossLineage", status=503, times=1)
    results, _ = scroll_all(graph(server), sn.MODEL)  # the SDK retries 503 and succeeds
    assert fault.hits == 1
    assert len(results) == len(sn.UPSTREAM_OF_MODEL)
    assert [r.status for r in server.requests if r.operation == "scrollAcrossLineage"][:2] == [
        503,
        200,
    ]
    server.inject("scrollAcrossLineage", status=500)
    with pytest.raises(Exception, match="500"):
        scroll_all(graph(server, retry_max_times=0), sn.MODEL)
    server.clear_faults()
    server.clear_requests()
    server.inject("GET /config", latency=0.2, times=1)
    started = time.perf_counter()
    graph(server).test_connection()
    assert time.perf_counter() - started >= 0.2
    (config,) = calls(server)
    assert config.injected_delay_s == pytest.approx(0.2)
    assert config.duration_s < 0.2


def test_hang_times_out_the_client(server: StandIn) -> None:
    server.inject("GetEntity", hang=True)
    g = graph(server, timeout_sec=0.5, retry_max_times=0)
    started = time.perf_counter()
    with pytest.raises(Exception, match=r"(?i)timed? ?out"):
        g.execute_graphql("query GetEntity($u:String!){ entity(urn:$u){ urn } }", {"u": sn.MODEL})
    assert time.perf_counter() - started < 5


# --- the real mcp-server-datahub over stdio --------------------------------------------------


class McpSession:
    """An ``mcp`` ClientSession on anyio's blocking portal (its own event loop in a thread),
    called synchronously; ``close`` ends the session, the server process and the loop."""

    def __init__(self, env: dict[str, str]) -> None:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        command = Path(sys.executable).with_name("mcp-server-datahub")
        params = StdioServerParameters(command=str(command), args=[], env=env)
        self._stack = ExitStack()
        try:
            self._portal = self._stack.enter_context(start_blocking_portal())
            read, write = self._stack.enter_context(
                self._portal.wrap_async_context_manager(stdio_client(params))
            )
            self.session = self._stack.enter_context(
                self._portal.wrap_async_context_manager(ClientSession(read, write))
            )
            self.initialized = self.run(self.session.initialize())
        except BaseException:
            self._stack.close()
            raise

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        async def bounded() -> T:
            with anyio.fail_after(timeout):
                return await coro

        return self._portal.call(bounded)

    def call(self, tool: str, **arguments: Any) -> Any:
        return self.run(
            self.session.call_tool(tool, arguments, read_timeout_seconds=timedelta(seconds=30))
        )

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="module")
def mcp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandIn, McpSession]]:
    require_sdl()
    workdir = tmp_path_factory.mktemp("mcp")
    server = StandIn.from_mcps(sn.ml_catalog(), workdir).start()
    env = {
        "DATAHUB_GMS_URL": server.url,
        "DATAHUB_GMS_TOKEN": "x",
        "TOOLS_IS_MUTATION_ENABLED": "true",
        "DATAHUB_TELEMETRY_ENABLED": "false",
        "HOME": str(workdir / "home"),
    }
    session = McpSession(env)
    try:
        yield server, session
    finally:
        session.close()
        server.close()


def _ok(result: Any) -> Any:
    assert result.isError is False, result.content
    return json.loads(result.content[0].text)


def test_mcp_starts_with_one_config_call_and_lists_tools(mcp: tuple[StandIn, McpSession]) -> None:
    server, session = mcp
    assert session.initialized.serverInfo.name == "datahub"
    names = {t.name for t in session.run(session.session.list_tools()).tools}
    assert {"add_tags", "save_document", "get_aspect_history", "get_lineage"} <= names
    config_calls = [r for r in server.requests if r.path == "/config"]
    assert len(config_calls) == 1


def test_mcp_get_lineage(mcp: tuple[StandIn, McpSession]) -> None:
    _, session = mcp
    out = _ok(session.call("get_lineage", urn=sn.MODEL, max_hops=3, max_results=30))
    found = {r["entity"]["urn"]: r["degree"] for r in out["upstreams"]["searchResults"]}
    assert found == sn.UPSTREAM_OF_MODEL


def test_mcp_list_schema_fields_and_get_entities(mcp: tuple[StandIn, McpSession]) -> None:
    _, session = mcp
    fields = _ok(session.call("list_schema_fields", urn=sn.RAW))
    by_path = {f["fieldPath"]: f for f in fields["fields"]}
    assert by_path["email"]["tags"] == ["PII"]  # MCP reports tag names, not urns
    entities = _ok(session.call("get_entities", urns=[sn.LEGACY, sn.MODEL]))
    assert [e["urn"] for e in entities] == [sn.LEGACY, sn.MODEL]
    assert entities[0]["deprecation"]["deprecated"] is True


def test_mcp_writes_land_in_lite(mcp: tuple[StandIn, McpSession]) -> None:
    server, session = mcp
    _ok(session.call("add_tags", tag_urns=[sn.TAG_SENSITIVE], entity_urns=[sn.LEGACY]))
    tags = server.backend.store.get(sn.LEGACY, "globalTags")
    assert tags is not None
    assert tags.value["tags"] == [{"tag": sn.TAG_SENSITIVE}]
    _ok(
        session.call(
            "add_structured_properties",
            property_values={sn.PROP_RISK: ["0.75"]},
            entity_urns=[sn.LEGACY],
        )
    )
    props = server.backend.store.get(sn.LEGACY, "structuredProperties")
    assert props is not None
    assert props.value["properties"][0]["values"] == [{"double": 0.75}]
    saved = _ok(
        session.call(
            "save_document",
            document_type="Insight",
            title="Churn drift",
            content="curated.customers gained tenure_days",
            related_assets=[sn.MODEL],
        )
    )
    assert saved["success"] is True
    doc = saved["urn"]
    assert doc in server.backend.index.urns(["document"])
    info = server.backend.store.get(doc, "documentInfo")
    assert info is not None
    assert info.value["title"] == "Churn drift"


def test_mcp_get_aspect_history(mcp: tuple[StandIn, McpSession]) -> None:
    _, session = mcp
    out = _ok(
        session.call("get_aspect_history", urns=[sn.CURATED], aspect_names=["schemaMetadata"])
    )
    (result,) = out["results"]
    assert result.get("error") is None
    current = [f["fieldPath"] for f in result["current"]["value"]["fields"]]
    older = [f["fieldPath"] for f in result["history"][0]["value"]["fields"]]
    assert "tenure_days" in current
    assert "tenure_days" not in older
