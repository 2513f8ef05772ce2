"""The fast paths decide exactly as the SDK's urn classes they stand in for.

A large lineage parses millions of schemaField urns and names hundreds of thousands of
datasets, so :mod:`mlcopilot.catalog.aspects` does it with string operations; an estate's
write-back names hundreds of thousands of incidents and documents, whose type
:func:`mlcopilot.catalog.urns.urn_type` reads off the urn. These tests hold them to the SDK's
answers on well-formed, malformed and adversarial urns.
"""

from __future__ import annotations

from datahub.metadata.urns import SchemaFieldUrn, Urn
from datahub.utilities.urns.error import InvalidUrnError
from hypothesis import given, settings
from hypothesis import strategies as st

from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog import urns
from mlcopilot.model import ColumnEdge

PIECES = [
    "(",
    ")",
    ",",
    ":",
    "urn:li:",
    "dataset:",
    "schemaField:",
    "a",
    "b.c",
    "%2C",
    "%28",
    "␟",
    "[version=2.0].[type=struct].x",
    "urn:li:dataPlatform:hive",
    "urn:li:dataset:(urn:li:dataPlatform:hive,db.t,PROD)",
    "PROD",
    "",
]
DATASET = "urn:li:dataset:(urn:li:dataPlatform:hive,db.t,PROD)"


def sdk_schema_field(urn: str) -> tuple[str, str] | None:
    try:
        parsed = SchemaFieldUrn.from_string(urn)
    except InvalidUrnError:
        return None
    return parsed.parent, ax.simple_field_path(ax._decode(parsed.field_path))


def sdk_type(urn: str) -> str | None:
    try:
        return str(Urn.from_string(urn).entity_type)
    except (InvalidUrnError, ValueError):
        return None


def sdk_name(urn: str) -> str:
    try:
        ids = Urn.from_string(urn).entity_ids
    except InvalidUrnError:
        return urn
    return ax._decode(ids[1] if len(ids) >= 2 else ids[0])


pieces = st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map("".join)


@settings(max_examples=600, deadline=None)
@given(pieces)
def test_schema_field_urns_parse_as_the_sdk_parses_them(body: str) -> None:
    for urn in (f"urn:li:schemaField:{body}", f"urn:li:schemaField:({body})"):
        assert ax._schema_field(urn) == sdk_schema_field(urn), urn


@settings(max_examples=600, deadline=None)
@given(st.lists(pieces, min_size=1, max_size=4))
def test_dataset_names_are_the_sdks(parts: list[str]) -> None:
    urn = "urn:li:dataset:(" + ",".join(parts) + ")"
    assert ax._name_from_urn(urn) == sdk_name(urn), urn


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["incident", "document", "dataset", "tag"]), pieces)
def test_entity_types_are_the_sdks(entity_type: str, body: str) -> None:
    for urn in (f"urn:li:{entity_type}:{body}", f"urn:li:{entity_type}:mlcopilot-{body}-1"):
        assert urns.urn_type(urn) == sdk_type(urn), urn


def test_a_write_backs_incidents_and_documents_are_typed_without_being_remembered() -> None:
    """564,044 at 10,000 models, each made for the asking: remembered, they stayed alive."""
    named = [
        f"urn:li:{kind}:mlcopilot-{n:016x}-1"
        for kind in ("incident", "document")
        for n in range(500)
    ]
    urns._parsed_type.cache_clear()  # a worker's earlier tests may have filled it
    held = urns._parsed_type.cache_info().currsize
    assert {urns.urn_type(urn) for urn in named} == {"incident", "document"}
    assert urns._parsed_type.cache_info().currsize == held
    assert [urns.urn_type(urn) for urn in named] == [sdk_type(urn) for urn in named]
    # Anything else is the SDK's reading, remembered: a walk asks again and again.
    walked = "urn:li:dataset:(urn:li:dataPlatform:hive,db.remembered_once,PROD)"
    assert urns.urn_type(walked) == urns.urn_type(walked) == sdk_type(walked) == "dataset"
    assert urns._parsed_type.cache_info().currsize == held + 1
    assert urns.urn_type("urn:li:incident:a,b") == sdk_type("urn:li:incident:a,b")


def test_well_formed_urns_take_the_fast_path_and_agree() -> None:
    fields = ["c0", "[version=2.0].[type=struct].a.b", "a%2Cb", "x%28y%29"]
    for field in fields:
        urn = f"urn:li:schemaField:({DATASET},{field})"
        assert ax._schema_field(urn) == sdk_schema_field(urn) is not None
    for name in ("db.t", "a%2Cb", "x.y.z"):
        urn = f"urn:li:dataset:(urn:li:dataPlatform:hive,{name},PROD)"
        assert ax._name_from_urn(urn) == sdk_name(urn) == ax._decode(name)


def test_column_lineage_keeps_only_this_datasets_fields_and_each_edge_once() -> None:
    other = "urn:li:dataset:(urn:li:dataPlatform:hive,db.other,PROD)"
    up = "urn:li:dataset:(urn:li:dataPlatform:hive,db.up,PROD)"

    def field(dataset: str, path: str) -> str:
        return f"urn:li:schemaField:({dataset},{path})"

    aspect = {
        "fineGrainedLineages": [
            {"upstreams": [field(up, "a"), "junk"], "downstreams": [field(DATASET, "x")]},
            {"upstreams": [field(up, "a")], "downstreams": [field(DATASET, "x")]},  # again
            {"upstreams": [field(up, "b")], "downstreams": [field(other, "y")]},  # not ours
            {"upstreams": [field(up, "c")], "downstreams": []},  # DataHub's sample quirk
            {"upstreams": [field(up, "d")], "downstreams": [field(DATASET, "a%2Cb")]},
        ]
    }
    assert ax.column_lineage(DATASET, aspect) == (
        ColumnEdge(up, "a", "x"),
        ColumnEdge(up, "d", "a,b"),
    )
