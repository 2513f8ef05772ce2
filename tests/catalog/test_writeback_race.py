"""The write-back never clobbers what someone else writes between its read and its write.

On ``datahub:`` and ``mcp:``, against the stand-in GMS: a person adds a tag (GraphQL
``addTag``, as DataHub's UI does) and another tool sets a structured property
(``upsertStructuredProperties``), or an ingestion UPSERTs a different tag set, at the exact
point between the write-back's read of the state and its first write: a stand-in hook on that
write request runs the foreign write before the request is answered. Everything the others
wrote survives, the write-back stays idempotent, and a removal removes only our own entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import (
    GlobalTagsClass,
    StructuredPropertyDefinitionClass,
    TagAssociationClass,
)

from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.mcp.catalog import McpCatalog
from mlcopilot.catalog.proposals import label_patch, proposals
from mlcopilot.checks import builtin_infos
from mlcopilot.incidents.writeback import OPEN_RISKS_PROPERTY
from mlcopilot.model import PropertyWrite, TagWrite, Write
from standin import mutations
from testing.builders import dataset, dataset_urn, ml_model, model_urn, tag
from tests.catalog.datahub_backend import needs_standin, start_standin
from tests.catalog.mcp_backend import MCP_UNAVAILABLE, mcp_catalog_for

TAGS = {name: info.tag for name, info in builtin_infos().items()}

pytestmark = needs_standin

OURS = TAGS["pii_exposure"]
FOREIGN = "urn:li:tag:Foreign"
LATER = "urn:li:tag:Later"
OWNER = "urn:li:structuredProperty:io.other.owner"
RAW = dataset_urn("raw.x")
MODEL = model_urn("churn")
MUTATIONS = frozenset(name[2:] for name in dir(mutations) if name.startswith("m_"))

Backend = Callable[[Any], DataHubCatalog | McpCatalog]


def _seed() -> list[MetadataChangeProposalWrapper]:
    """A dataset someone tagged Tier1, a model, and the definitions people write with."""
    owner = StructuredPropertyDefinitionClass(
        qualifiedName="io.other.owner",
        valueType="urn:li:dataType:datahub.string",
        cardinality="SINGLE",
        entityTypes=["urn:li:entityType:datahub.mlModel"],
    )
    return [
        *dataset("raw.x", fields=[("id", "long")], tags=["Tier1"]),
        *ml_model("churn"),
        *tag("Tier1"),
        *tag("Foreign"),
        *tag("Later"),
        MetadataChangeProposalWrapper(entityUrn=OWNER, aspect=owner),
    ]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    started = start_standin(_seed(), tmp_path / "standin")
    yield started
    started.__exit__(None, None, None)


def _datahub(server: Any) -> DataHubCatalog:
    return DataHubCatalog(server.url, timeout=5.0, retries=1)


def _mcp(server: Any) -> McpCatalog:
    if MCP_UNAVAILABLE is not None:
        pytest.skip(MCP_UNAVAILABLE)
    return mcp_catalog_for(server)


BACKENDS = [pytest.param(_datahub, id="datahub"), pytest.param(_mcp, id="mcp")]


# --- the foreign writers --------------------------------------------------------------------


def _graphql(server: Any, query: str, variables: dict[str, Any]) -> None:
    answer = requests.post(
        f"{server.url}/api/graphql", json={"query": query, "variables": variables}, timeout=10
    ).json()
    assert not answer.get("errors"), answer


def a_person_tags(server: Any, urn: str, tag_urn: str) -> None:
    _graphql(
        server,
        "mutation t($i: TagAssociationInput!) { addTag(input: $i) }",
        {"i": {"tagUrn": tag_urn, "resourceUrn": urn}},
    )


def a_tool_sets_the_owner(server: Any, value: str) -> None:
    _graphql(
        server,
        "mutation p($i: UpsertStructuredPropertiesInput!) {"
        " upsertStructuredProperties(input: $i) { properties { structuredProperty { urn } } } }",
        {
            "i": {
                "assetUrn": MODEL,
                "structuredPropertyInputParams": [
                    {"structuredPropertyUrn": OWNER, "values": [{"stringValue": value}]}
                ],
            }
        },
    )


class Race:
    """Runs ``foreign`` when the first write request reaches the stand-in, and records what
    the stand-in had been asked by then (so the test can check it came after the read)."""

    def __init__(self, server: Any, foreign: Callable[[], None]) -> None:
        self.server = server
        self.foreign = foreign
        self.before: list[Any] | None = None
        # Every way the backends write tags and properties: Rest.li ingestion (the SDK) and
        # GraphQL mutations (the MCP tools). One hook per way; the first to fire runs the
        # foreign write. (OpenAPI writes only documents here; its glob would match reads.)
        self.faults = [
            server.inject(pattern, hook=self._fire, times=1)
            for pattern in ("POST /aspects", *sorted(MUTATIONS))
        ]

    def _fire(self) -> None:
        if self.before is not None:
            return
        self.before = self.server.requests
        for fault in self.faults:
            fault.times = 0  # the foreign write's own requests must not fire it again
        self.server.clear_faults()
        self.foreign()

    def check_it_came_after_the_read(self) -> None:
        assert self.before is not None, "no write reached the stand-in"
        assert any(r.path.endswith("/batchGet") for r in self.before)  # the write state
        assert not [r for r in self.before if is_write(r)]


def is_write(request: Any) -> bool:
    actions = request.query.get("action", [])
    if any(a.startswith("ingestProposal") for a in actions):
        return True
    if request.path.startswith("/openapi/v3/entity/"):
        return request.method != "GET" and not request.path.endswith("/batchGet")
    return bool(MUTATIONS.intersection(request.root_fields))


def labels(server: Any, urn: str) -> tuple[set[str], dict[str, tuple[Any, ...]]]:
    """Tags and structured properties DataHub holds now (a fresh read)."""
    catalog = DataHubCatalog(server.url, timeout=5.0, retries=1)
    node = catalog.nodes([urn])[urn]
    catalog.close()
    return set(node.tags), dict(node.structured_properties)


def _open(risks: str) -> list[Write]:
    return [
        TagWrite(RAW, OURS, present=True),
        PropertyWrite(MODEL, OPEN_RISKS_PROPERTY, (risks,)),
    ]


# --- the races ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tag_and_a_property_written_meanwhile_both_survive(server: Any, backend: Backend) -> None:
    catalog = backend(server)

    def someone_else() -> None:
        a_person_tags(server, RAW, FOREIGN)
        a_person_tags(server, MODEL, FOREIGN)
        a_tool_sets_the_owner(server, "team-a")

    race = Race(server, someone_else)
    writes = _open("pii_exposure")
    server.clear_requests()
    assert catalog.apply(writes) == writes
    race.check_it_came_after_the_read()
    tags, _ = labels(server, RAW)
    assert tags == {"urn:li:tag:Tier1", FOREIGN, OURS}
    model_tags, properties = labels(server, MODEL)
    assert model_tags == {FOREIGN}
    assert properties == {
        "io.other.owner": ("team-a",),
        "io.mlcopilot.openRisks": ("pii_exposure",),
    }
    # Idempotent: the same writes again find everything there and send nothing.
    server.clear_requests()
    assert catalog.apply(writes) == []
    assert not [r for r in server.requests if is_write(r)]
    catalog.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_removal_takes_only_our_entries(server: Any, backend: Backend) -> None:
    catalog = backend(server)
    assert catalog.apply(_open("pii_exposure")) == _open("pii_exposure")
    a_tool_sets_the_owner(server, "team-a")

    def someone_else() -> None:
        a_person_tags(server, RAW, LATER)
        a_tool_sets_the_owner(server, "team-b")

    race = Race(server, someone_else)
    resolved: list[Write] = [
        TagWrite(RAW, OURS, present=False),
        PropertyWrite(MODEL, OPEN_RISKS_PROPERTY, ()),
    ]
    server.clear_requests()
    assert catalog.apply(resolved) == resolved
    race.check_it_came_after_the_read()
    tags, _ = labels(server, RAW)
    assert tags == {"urn:li:tag:Tier1", LATER}
    _, properties = labels(server, MODEL)
    assert properties == {"io.other.owner": ("team-b",)}
    server.clear_requests()
    assert catalog.apply(resolved) == []
    assert not [r for r in server.requests if is_write(r)]
    catalog.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_ingestion_upserting_another_tag_set_meanwhile_survives(
    server: Any, backend: Backend
) -> None:
    """An entity DataHub has no aspects of yet: mcp's tools refuse it, so the SDK writes it."""
    catalog = backend(server)
    ghost = dataset_urn("raw.not_yet_ingested")

    def an_ingestion() -> None:
        tags = GlobalTagsClass(tags=[TagAssociationClass(FOREIGN)])
        server.write([MetadataChangeProposalWrapper(entityUrn=ghost, aspect=tags)])

    race = Race(server, an_ingestion)
    writes: list[Write] = [TagWrite(ghost, OURS, present=True)]
    server.clear_requests()
    assert catalog.apply(writes) == writes
    race.check_it_came_after_the_read()
    assert labels(server, ghost)[0] == {FOREIGN, OURS}
    server.clear_requests()
    assert catalog.apply(writes) == []
    assert not [r for r in server.requests if is_write(r)]
    catalog.close()


def test_the_write_request_budget_is_one_batch(server: Any) -> None:
    """Tags on many entities and the model's property: still one write request."""
    catalog = DataHubCatalog(server.url, timeout=5.0, retries=1)
    writes: list[Write] = [
        *(TagWrite(RAW, t, present=True) for t in TAGS.values()),
        TagWrite(MODEL, OURS, present=True),
        PropertyWrite(MODEL, OPEN_RISKS_PROPERTY, ("stale_source",)),
    ]
    server.clear_requests()
    assert catalog.apply(writes) == writes
    assert len([r for r in server.requests if is_write(r)]) == 1
    catalog.close()


# --- what is sent ---------------------------------------------------------------------------


def test_only_the_changed_entries_are_patched_in_one_proposal_per_aspect() -> None:
    before = {"tags": [{"tag": FOREIGN}, {"tag": TAGS["stale_source"]}]}
    after = {"tags": [{"tag": FOREIGN}, {"tag": OURS}]}
    [mcp] = label_patch(RAW, "globalTags", before, after)
    assert mcp.changeType == "PATCH"
    assert mcp.aspect is not None
    body = mcp.aspect.value.decode()
    assert OURS in body
    assert TAGS["stale_source"] in body
    assert FOREIGN not in body  # never sent: nothing can put back an old value of it
    assert "/tags//" in body  # keyed by (source, tag): no path ends in an empty segment
    assert label_patch(RAW, "globalTags", before, before) == []


def test_owned_aspects_are_upserted_and_shared_ones_patched() -> None:
    pending: dict[tuple[str, str], dict[str, Any]] = {
        (RAW, "globalTags"): {"tags": [{"tag": OURS}]},
        (OURS, "tagProperties"): {"name": "mlcopilot-pii-exposure"},
    }
    sent = proposals(pending, {})
    assert [(type(p).__name__, p.aspectName, p.changeType) for p in sent] == [
        ("MetadataChangeProposalClass", "globalTags", "PATCH"),
        ("MetadataChangeProposalWrapper", "tagProperties", "UPSERT"),
    ]
