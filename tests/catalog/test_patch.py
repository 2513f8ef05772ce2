"""DataHub PATCH semantics: what GMS's patch templates do to an aspect, reproduced on JSON.

Expected values come from DataHub's templates and their Java tests (entity-registry's
``aspect/patch/template``), from the SDK's own patch builders, and from DataHub's golden files.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.aspect import ASPECT_MAP
from datahub.emitter.mce_builder import make_dataset_urn
from datahub.emitter.serialization_helper import post_json_transform, pre_json_transform
from datahub.metadata.schema_classes import (
    AuditStampClass,
    DatasetLineageTypeClass,
    GlossaryTermAssociationClass,
    MetadataAttributionClass,
    MetadataChangeProposalClass,
    OwnerClass,
    OwnershipTypeClass,
    TagAssociationClass,
    UpstreamClass,
)
from datahub.specific.datajob import DataJobPatchBuilder
from datahub.specific.dataset import DatasetPatchBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlcopilot.catalog.patch import SYSTEM_ACTOR, PatchError, apply_patch, templated_aspects

GOLDEN = Path(__file__).parents[2] / ".." / "shared" / "datahub-samples" / "golden"
NOW = 1_700_000_000_000
TAG_A, TAG_B, TAG_C = "urn:li:tag:a", "urn:li:tag:b", "urn:li:tag:c"
DS_1 = make_dataset_urn("hive", "db.one")
DS_2 = make_dataset_urn("hive", "db.two")
S3_DS = make_dataset_urn("s3", "bucket/raw/events~v2")
S3_DS_POINTER = S3_DS.replace("~", "~0").replace("/", "~1")


def patch(aspect: str, current: dict[str, Any] | None, ops: object) -> dict[str, Any]:
    return apply_patch(aspect, current, ops, now_ms=NOW)


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def remove(path: str) -> dict[str, Any]:
    return {"op": "remove", "path": path}


def validate(aspect: str, value: dict[str, Any]) -> Any:
    """The SDK's class for the aspect, built from the JSON and validated (as the loader does)."""
    obj = ASPECT_MAP[aspect].from_obj(post_json_transform(value))
    assert obj.validate(), f"{aspect} does not validate: {value}"
    return obj


# --- globalTags: keyed by tag --------------------------------------------------------------------


def test_tags_add_remove_and_replace_by_key_keep_the_order_of_the_stored_array() -> None:
    current = {"tags": [{"tag": TAG_A}, {"tag": TAG_B, "context": "old"}]}
    result = patch(
        "globalTags",
        current,
        [
            add(f"/tags/{TAG_C}", {"tag": TAG_C}),
            add(f"/tags/{TAG_B}", {"tag": TAG_B, "context": "new"}),  # add replaces in place
            remove(f"/tags/{TAG_A}"),
        ],
    )
    assert result == {"tags": [{"tag": TAG_B, "context": "new"}, {"tag": TAG_C}]}
    assert current == {"tags": [{"tag": TAG_A}, {"tag": TAG_B, "context": "old"}]}


def test_removing_an_absent_tag_is_a_no_op_because_gms_creates_the_path_first() -> None:
    # TemplateUtil.populateTopLevelKeys creates {} at every segment of a remove's path.
    current = {"tags": [{"tag": TAG_A}]}
    assert patch("globalTags", current, [remove(f"/tags/{TAG_B}")]) == current


def test_removing_the_same_absent_key_twice_in_one_patch_fails_as_in_gms() -> None:
    # The path objects are created once, before any operation runs: the first remove takes the
    # created {} away, the second finds nothing (Parsson: "doesn't contain key").
    once = [remove("/customProperties/gone")]
    assert patch("datasetProperties", None, once)["customProperties"] == {}
    with pytest.raises(PatchError, match=r"^remove /customProperties/gone: "):
        patch("datasetProperties", None, once * 2)


def test_a_key_that_only_lives_in_the_path_is_put_back_into_the_element() -> None:
    # ArrayMergingTemplate.reinjectKey: `tag` is a string field of TagAssociation.
    result = patch("globalTags", None, [add(f"/tags/{TAG_A}", {})])
    assert result == {"tags": [{"tag": TAG_A}]}
    validate("globalTags", result)


def test_patching_an_absent_aspect_starts_from_the_template_default() -> None:
    assert patch("globalTags", None, []) == {"tags": []}
    assert patch("upstreamLineage", None, []) == {"upstreams": [], "fineGrainedLineages": []}
    assert patch("status", None, []) == {"removed": False}
    terms = patch("glossaryTerms", None, [])
    assert terms == {"terms": [], "auditStamp": {"actor": SYSTEM_ACTOR, "time": NOW}}
    ownership = patch("ownership", None, [])
    assert ownership == {"owners": [], "lastModified": {"time": NOW, "actor": SYSTEM_ACTOR}}
    job = patch("dataJobInputOutput", None, [])
    assert job["inputDatasets"] == job["outputDatasets"] == job["inputDatasetEdges"] == []
    for aspect in ("glossaryTerms", "ownership", "dataJobInputOutput", "editableSchemaMetadata"):
        validate(aspect, patch(aspect, None, []))


def test_stored_elements_with_the_same_key_merge_into_one() -> None:
    # ObjectNode.setAll: the later element's fields win, fields only the earlier has stay.
    current = {"tags": [{"tag": TAG_A, "context": "first"}, {"tag": TAG_A, "extra": 1}]}
    merged = {"tags": [{"tag": TAG_A, "context": "first", "extra": 1}]}
    assert patch("globalTags", current, []) == merged


def test_an_array_set_at_the_key_level_is_expanded_into_the_result() -> None:
    # mergeToArray: add /tags/<urn> with [{...}] gives those elements, keys put back.
    result = patch(
        "globalTags", None, [add(f"/tags/{TAG_A}", [{"context": "1"}, {"context": "2"}])]
    )
    assert result == {"tags": [{"context": "1", "tag": TAG_A}, {"context": "2", "tag": TAG_A}]}


def test_replacing_the_whole_array_keeps_what_the_patch_gives() -> None:
    result = patch("globalTags", {"tags": [{"tag": TAG_A}]}, [add("/tags", [{"tag": TAG_C}])])
    assert result == {"tags": [{"tag": TAG_C}]}


# --- glossaryTerms, upstreams, edges, owners, properties -----------------------------------------


def test_terms_by_urn_and_the_required_audit_stamp() -> None:
    term_x, term_y = "urn:li:glossaryTerm:x", "urn:li:glossaryTerm:y"
    current = {"terms": [{"urn": term_x}], "auditStamp": {"time": 5, "actor": "urn:li:corpuser:a"}}
    result = patch("glossaryTerms", current, [add(f"/terms/{term_y}", {"urn": term_y})])
    assert result["terms"] == [{"urn": term_x}, {"urn": term_y}]
    assert result["auditStamp"] == {"time": 5, "actor": "urn:li:corpuser:a"}
    removed = patch("glossaryTerms", {"terms": [{"urn": term_x}]}, [remove(f"/terms/{term_x}")])
    # A stored aspect without its (deprecated, required) auditStamp gets one from GMS.
    assert removed == {"terms": [], "auditStamp": {"actor": SYSTEM_ACTOR, "time": NOW}}


def test_upstreams_by_dataset_urn_with_escaped_pointer_segments() -> None:
    current = {"upstreams": [{"dataset": DS_1, "type": "TRANSFORMED", "auditStamp": {"time": 0}}]}
    s3_upstream = {"dataset": S3_DS, "type": "COPY", "auditStamp": {"time": 1}}
    result = patch("upstreamLineage", current, [add(f"/upstreams/{S3_DS_POINTER}", s3_upstream)])
    assert [u["dataset"] for u in result["upstreams"]] == [DS_1, S3_DS]
    assert "~1" not in json.dumps(result)
    result = patch("upstreamLineage", result, [remove(f"/upstreams/{S3_DS_POINTER}")])
    assert [u["dataset"] for u in result["upstreams"]] == [DS_1]


def test_data_job_edges_by_destination_urn() -> None:
    job = patch("dataJobInputOutput", None, [add(f"/inputDatasetEdges/{DS_1}", {})])
    assert job["inputDatasetEdges"] == [{"destinationUrn": DS_1}]
    job = patch(
        "dataJobInputOutput",
        job,
        [
            add(f"/outputDatasetEdges/{DS_2}", {"destinationUrn": DS_2}),
            remove(f"/inputDatasetEdges/{DS_1}"),
        ],
    )
    assert job["inputDatasetEdges"] == []
    assert job["outputDatasetEdges"] == [{"destinationUrn": DS_2}]
    validate("dataJobInputOutput", job)


def test_owners_are_keyed_by_owner_then_type() -> None:
    alice, bob = "urn:li:corpuser:alice", "urn:li:corpuser:bob"
    current = {
        "owners": [
            {"owner": alice, "type": "TECHNICAL_OWNER"},
            {"owner": alice, "type": "BUSINESS_OWNER"},
            {"owner": bob, "type": "TECHNICAL_OWNER"},
        ],
        "lastModified": {"time": 0, "actor": alice},
    }
    one_type = patch("ownership", current, [remove(f"/owners/{alice}/BUSINESS_OWNER")])
    assert [(o["owner"], o["type"]) for o in one_type["owners"]] == [
        (alice, "TECHNICAL_OWNER"),
        (bob, "TECHNICAL_OWNER"),
    ]
    every_type = patch("ownership", current, [remove(f"/owners/{alice}")])
    assert every_type["owners"] == [{"owner": bob, "type": "TECHNICAL_OWNER"}]
    # Both keys come back from the path: owner is a string, type an enum.
    added = patch("ownership", None, [add(f"/owners/{bob}/DATA_STEWARD", {})])
    assert added["owners"] == [{"type": "DATA_STEWARD", "owner": bob}]
    validate("ownership", added)


def test_custom_properties_are_a_plain_map_and_dataset_tags_a_string_array() -> None:
    current = {"customProperties": {"a/b": "1", "keep": "2"}, "tags": ["x"]}
    result = patch(
        "datasetProperties",
        current,
        [
            remove("/customProperties/a~1b"),
            remove("/customProperties/never-there"),
            add("/customProperties/t~0ilde", "3"),
            add("/tags/y", "y"),
            remove("/tags/x"),
        ],
    )
    assert result == {"customProperties": {"keep": "2", "t~ilde": "3"}, "tags": ["y"]}


def test_structured_properties_by_property_urn() -> None:
    prop = "urn:li:structuredProperty:io.acryl.privacy.retentionTime"
    value = {"propertyUrn": prop, "values": [{"double": 90.0}]}
    result = patch("structuredProperties", None, [add(f"/properties/{prop}", value)])
    assert result == {"properties": [value]}
    validate("structuredProperties", result)
    assert patch("structuredProperties", result, [remove(f"/properties/{prop}")]) == {
        "properties": []
    }


def test_editable_schema_metadata_nested_keyed_paths() -> None:
    current = {
        "created": {"time": 0, "actor": SYSTEM_ACTOR},
        "editableSchemaFieldInfo": [
            {"fieldPath": "email", "globalTags": {"tags": [{"tag": TAG_A}]}},
            {"fieldPath": "id", "description": "key"},
        ],
    }
    term = "urn:li:glossaryTerm:pii"
    result = patch(
        "editableSchemaMetadata",
        current,
        [
            add(f"/editableSchemaFieldInfo/email/globalTags/tags/{TAG_B}", {"tag": TAG_B}),
            remove(f"/editableSchemaFieldInfo/email/globalTags/tags/{TAG_A}"),
            add(f"/editableSchemaFieldInfo/phone/glossaryTerms/terms/{term}", {"urn": term}),
        ],
    )
    fields = {f["fieldPath"]: f for f in result["editableSchemaFieldInfo"]}
    assert list(fields) == ["email", "id", "phone"]
    assert fields["email"]["globalTags"] == {"tags": [{"tag": TAG_B}]}
    assert fields["id"] == {"fieldPath": "id", "description": "key"}
    # The new field's terms get GlossaryTerms' required audit stamp from the nested template.
    assert fields["phone"]["glossaryTerms"] == {
        "terms": [{"urn": term}],
        "auditStamp": {"actor": SYSTEM_ACTOR, "time": NOW},
    }


# --- fine-grained lineage ------------------------------------------------------------------------

FIELD_UP = (
    "urn:li:schemaField:(urn:li:dataset:(urn:li:dataPlatform:bigquery,upstream_table_2,PROD),c1)"
)
FIELD_DOWN = (
    "urn:li:schemaField:(urn:li:dataset:(urn:li:dataPlatform:bigquery,upstream_table_1,PROD),c1)"
)


def test_fine_grained_lineage_as_in_upstream_lineage_template_test() -> None:
    # UpstreamLineageTemplateTest.testPatchUpstream, first two steps.
    first = patch(
        "upstreamLineage",
        None,
        [add(f"/fineGrainedLineages/CREATE/{FIELD_DOWN}//{FIELD_UP}", {"confidenceScore": 1.0})],
    )
    assert first["fineGrainedLineages"] == [
        {
            "downstreams": [FIELD_DOWN],
            "upstreams": [FIELD_UP],
            "upstreamType": "FIELD_SET",
            "downstreamType": "FIELD",
            "confidenceScore": 1.0,
            "transformOperation": "CREATE",
        }
    ]
    down2 = FIELD_UP.replace(",c1)", ",c2)")
    up2 = FIELD_DOWN.replace(",c1)", ",c2)")
    path = f"/fineGrainedLineages/CREATE/{down2}/urn:li:query:someQuery/{up2}"
    second = patch(
        "upstreamLineage",
        first,
        [
            add(
                path,
                {"upstreamType": "FIELD_SET", "confidenceScore": 1.0, "downstreamType": "FIELD"},
            ),
            add(
                path,
                {"upstreamType": "DATASET", "confidenceScore": 0.1, "downstreamType": "FIELD_SET"},
            ),
        ],
    )
    assert second["fineGrainedLineages"][0] == first["fineGrainedLineages"][0]
    assert second["fineGrainedLineages"][1] == {
        "downstreams": [down2],
        "upstreams": [up2],
        "query": "urn:li:query:someQuery",
        "upstreamType": "DATASET",
        "downstreamType": "FIELD_SET",
        "confidenceScore": 0.1,
        "transformOperation": "CREATE",
    }
    validate("upstreamLineage", second)


def test_fine_grained_lineage_removing_its_last_upstream_drops_it() -> None:
    current = patch(
        "upstreamLineage",
        None,
        [add(f"/fineGrainedLineages/NONE/{FIELD_DOWN}/NONE/{FIELD_UP}", {})],
    )
    assert len(current["fineGrainedLineages"]) == 1
    result = patch(
        "upstreamLineage",
        current,
        [remove(f"/fineGrainedLineages/NONE/{FIELD_DOWN}/NONE/{FIELD_UP}")],
    )
    assert result["fineGrainedLineages"] == []


def test_stored_fine_grained_lineages_are_merged_and_take_the_lowest_score() -> None:
    current = {
        "upstreams": [],
        "fineGrainedLineages": [
            {"downstreams": [FIELD_DOWN], "upstreams": [DS_1], "confidenceScore": 0.123456789},
            {"downstreams": [FIELD_DOWN], "upstreams": [FIELD_UP], "confidenceScore": 0.5},
        ],
    }
    (merged,) = patch("upstreamLineage", current, [])["fineGrainedLineages"]
    assert merged["upstreams"] == [DS_1, FIELD_UP]
    # The lowest, not the last; held as a 32-bit float and written back by Float.toString.
    assert merged["confidenceScore"] == 0.12345679
    # Types default per stored lineage (a dataset upstream: DATASET); the last upstream's wins.
    assert merged["upstreamType"] == "FIELD_SET"
    assert merged["transformOperation"] == "NONE"
    (alone,) = patch(
        "upstreamLineage", {"fineGrainedLineages": current["fineGrainedLineages"][:1]}, []
    )["fineGrainedLineages"]
    assert (alone["upstreamType"], alone["confidenceScore"]) == ("DATASET", 0.12345679)


def test_stored_upstreams_of_one_lineage_come_back_in_java_hash_map_order() -> None:
    # GMS collects them with Collectors.toMap: "Aa" and "BB" share String.hashCode 2112
    # (bucket 0, insertion order kept); "a" is 97 (bucket 1).
    current = {
        "fineGrainedLineages": [
            {
                "downstreams": [FIELD_DOWN],
                "upstreams": ["a", "BB", "Aa"],
                "upstreamType": "FIELD_SET",
            }
        ]
    }
    (lineage,) = patch("upstreamLineage", current, [])["fineGrainedLineages"]
    assert lineage["upstreams"] == ["BB", "Aa", "a"]


def test_fine_grained_lineage_with_two_downstreams_cannot_be_patched() -> None:
    current = {"fineGrainedLineages": [{"downstreams": [FIELD_DOWN, FIELD_UP], "upstreams": []}]}
    with pytest.raises(PatchError, match="exactly one downstream"):
        patch("upstreamLineage", current, [])


# --- the generic envelope ------------------------------------------------------------------------

TAG_KEYS = {"tags": ["attribution\u241fsource", "tag"]}
SRC_1, SRC_2 = "urn:li:platformResource:source1", "urn:li:platformResource:source2"


def attributed(tag: str, source: str) -> dict[str, Any]:
    return {"tag": tag, "attribution": {"source": source, "actor": SYSTEM_ACTOR, "time": 0}}


def test_generic_patch_groups_tags_by_attribution_source() -> None:
    # GenericPatchTemplateTest.testGlobalTagsWithAttributionNonAttributed, and the order that
    # follows from the map: unattributed ("" source) first, then by source, in first-seen order.
    current = {"tags": [attributed(TAG_A, SRC_2), {"tag": "urn:li:tag:existing"}]}
    result = patch(
        "globalTags",
        current,
        {
            "arrayPrimaryKeys": TAG_KEYS,
            "patch": [
                add(f"/tags/{SRC_1}/{TAG_B}", attributed(TAG_B, SRC_1)),
                add(f"/tags/{SRC_2}/{TAG_C}", attributed(TAG_C, SRC_2)),
                add(f"/tags//{TAG_A}", {"tag": TAG_A}),
            ],
        },
    )
    assert [(t["tag"], t.get("attribution", {}).get("source")) for t in result["tags"]] == [
        (TAG_A, SRC_2),
        (TAG_C, SRC_2),
        ("urn:li:tag:existing", None),
        (TAG_A, None),
        (TAG_B, SRC_1),
    ]
    validate("globalTags", result)


def test_generic_remove_with_reordered_keys_removes_every_source_of_a_tag() -> None:
    # What the SDK's remove_tag(tag) sends: tag-first keys and a path that stops at the tag.
    current = {"tags": [attributed(TAG_A, SRC_1), {"tag": TAG_A}, {"tag": TAG_B}]}
    result = patch(
        "globalTags",
        current,
        {
            "arrayPrimaryKeys": {"tags": ["tag", "attribution\u241fsource"]},
            "patch": [remove(f"/tags/{TAG_A}")],
        },
    )
    assert result == {"tags": [{"tag": TAG_B}]}


def test_generic_patch_does_not_reinject_a_record_typed_key() -> None:
    # GenericPatchTemplateTest.testRecordTypedFlatKeyFieldIsNotReinjectedAsString.
    result = patch(
        "globalTags",
        {"tags": []},
        {
            "arrayPrimaryKeys": {"tags": ["attribution", "source"]},
            "patch": [add(f"/tags/{SRC_1}/{TAG_A}", {"tag": TAG_A})],
        },
    )
    assert result == {"tags": [{"tag": TAG_A}]}


def test_an_aspect_without_template_takes_only_a_generic_patch() -> None:
    url = "https://wiki.example.com/a/b"
    element = {"url": url, "description": "doc", "createStamp": {"time": 1, "actor": SYSTEM_ACTOR}}
    pointer = "/elements/" + url.replace("/", "~1")
    assert "institutionalMemory" not in templated_aspects()
    with pytest.raises(PatchError, match="PATCH of institutionalMemory: GMS has no patch template"):
        patch("institutionalMemory", None, [add(pointer, element)])
    result = patch(
        "institutionalMemory",
        None,
        {"arrayPrimaryKeys": {"elements": ["url"]}, "patch": [add(pointer, element)]},
    )
    assert result == {"elements": [element]}
    forced = patch(
        "institutionalMemory",
        None,
        {"forceGenericPatch": True, "patch": [add("/elements", [element])]},
    )
    assert forced == {"elements": [element]}


def test_generic_patch_on_an_absent_templated_aspect_starts_from_its_default() -> None:
    result = patch("glossaryTerms", None, {"arrayPrimaryKeys": {"terms": ["urn"]}, "patch": []})
    assert result == {"terms": [], "auditStamp": {"actor": SYSTEM_ACTOR, "time": NOW}}


# --- what GMS refuses ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("aspect", "current", "ops", "message"),
    [
        (
            "globalTags",
            None,
            [{"op": "replace", "path": "/tags/urn:li:tag:x", "value": {}}],
            "replace /tags/urn:li:tag:x: ",
        ),
        ("globalTags", None, [{"op": "test", "path": "/tags", "value": []}], "test /tags: "),
        ("globalTags", None, [{"op": "merge", "path": "/tags"}], "operation 0 has op 'merge'"),
        ("globalTags", None, [{"op": "add", "value": 1}], "operation 0 (add) has no string 'path'"),
        ("globalTags", None, [add("/tags/urn:li:tag:x/context/deeper", "x"), add("/x", [])], None),
        (
            "datasetProperties",
            {"tags": [], "name": "n"},
            [add("/name/sub/deeper", 1)],
            "add /name/sub/deeper: the path crosses a string",
        ),
        (
            "editableDatasetProperties",
            {"x": [1, 2]},
            [remove("/x/5")],
            "remove /x/5: the path crosses an array",
        ),
        ("versionProperties", None, [], "the aspect is absent and GMS has no default"),
        ("globalTags", None, {"tags": []}, "an object patch needs a 'patch' list"),
        ("globalTags", None, {"patch": [], "extra": 1}, "unknown generic patch field(s) extra"),
        (
            "globalTags",
            None,
            {
                "arrayPrimaryKeys": TAG_KEYS,
                "patch": [{"op": "copy", "from": "/tags", "path": "/t"}],
            },
            "has field(s) from",
        ),
        ("globalTags", None, "add", "the patch is a string"),
        ("globalTags", None, [add("", [])], "add : the aspect became an array"),
    ],
)
def test_refused_patches_name_the_operation(
    aspect: str, current: dict[str, Any] | None, ops: object, message: str | None
) -> None:
    if message is None:  # control: a deep add creates the objects on its way
        assert patch(aspect, current, ops)["tags"] == [
            {"context": {"deeper": "x"}, "tag": "urn:li:tag:x"}
        ]
        return
    with pytest.raises(PatchError) as raised:
        patch(aspect, current, ops)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_result_shares_nothing_with_the_inputs() -> None:
    current = {"tags": [{"tag": TAG_A, "context": {"k": "v"}}]}
    ops = [add(f"/tags/{TAG_B}", {"tag": TAG_B, "context": {"k": "w"}})]
    before_current, before_ops = copy.deepcopy(current), copy.deepcopy(ops)
    result = patch("globalTags", current, ops)
    result["tags"][0]["context"]["k"] = "changed"
    result["tags"][1]["context"]["k"] = "changed"
    assert current == before_current
    assert ops == before_ops


# --- DataHub's golden files ----------------------------------------------------------------------


def golden_patches() -> list[tuple[str, int, dict[str, Any]]]:
    found = []
    for path in sorted(GOLDEN.glob("*.json")):
        for index, record in enumerate(json.loads(path.read_text())):
            if record.get("changeType") == "PATCH":
                found.append((path.name, index, record))
    return found


def patch_payload(record: dict[str, Any]) -> Any:
    aspect = record["aspect"]
    return aspect["json"] if "json" in aspect else json.loads(aspect["value"])


@pytest.mark.parametrize(
    ("file", "index", "record"),
    golden_patches(),
    ids=lambda v: str(v)[:40] if not isinstance(v, dict) else "",
)
def test_every_golden_patch_applies_to_an_absent_aspect_and_validates(
    file: str, index: int, record: dict[str, Any]
) -> None:
    validate(record["aspectName"], patch(record["aspectName"], None, patch_payload(record)))


def load_golden(file: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every PATCH record of a file applied in order, per (entity, aspect), from absent."""
    state: dict[tuple[str, str], dict[str, Any]] = {}
    for name, _, record in golden_patches():
        if name == file:
            key = (record["entityUrn"], record["aspectName"])
            state[key] = patch(record["aspectName"], state.get(key), patch_payload(record))
    return state


def snowflake(name: str) -> str:
    return make_dataset_urn("snowflake", f"snowflake.db.{name}")


def test_golden_patch_lineage_upstreams_by_urn() -> None:
    state = load_golden("patch-lineage.json")
    upstreams = {
        urn.split("snowflake.db.")[1].split(",")[0]: [u["dataset"] for u in aspect["upstreams"]]
        for (urn, _), aspect in state.items()
    }
    assert upstreams == {
        "audit_log": [snowflake("sessions")],
        "daily_summary": [snowflake("orders")],
        "orders": [snowflake("orders"), snowflake("shipments"), snowflake("temp_orders")],
        "user_summary": [snowflake("orders"), snowflake("users")],
        "users": [snowflake("sessions"), snowflake("users")],
    }
    (audit_fgl,) = state[(snowflake("audit_log"), "upstreamLineage")]["fineGrainedLineages"]
    assert audit_fgl["transformOperation"] == 'COPY: "SESSIONS"."USER_ID" AS "USER_ID"'
    assert audit_fgl["query"].startswith("urn:li:query:3f2c7000")
    assert audit_fgl["confidenceScore"] == 0.2


def test_golden_incremental_column_lineage() -> None:
    ((_, aspect),) = load_golden("incremental_column_lineage_golden.json").items()
    assert [u["dataset"] for u in aspect["upstreams"]] == [
        make_dataset_urn("platform", "upstream1"),
        make_dataset_urn("platform", "upstream2"),
    ]
    columns = [
        (f["downstreams"][0].rsplit(",", 1)[1], len(f["upstreams"]))
        for f in aspect["fineGrainedLineages"]
    ]
    assert columns == [("col_a)", 2), ("col_b)", 2), ("col_c)", 2)]


def test_golden_bigid_terms_on_fields_and_unattributed_tags() -> None:
    state = load_golden("test_bigid_source.json")
    customers = make_dataset_urn("snowflake", "public.customers")
    fields = state[(customers, "editableSchemaMetadata")]["editableSchemaFieldInfo"]
    assert [f["fieldPath"] for f in fields] == ["email", "full_name", "phone"]
    assert all(len(f["glossaryTerms"]["terms"]) == 1 for f in fields)
    assert state[(customers, "globalTags")] == {
        "tags": [{"tag": "urn:li:tag:bigid.Classification:PII"}]
    }


def test_golden_snowflake_marketplace_generic_patches() -> None:
    state = load_golden("snowflake_marketplace_golden.json")
    container = "urn:li:container:6edf895e98d7a1e235faf5308b1e5239"
    assert [t["tag"] for t in state[(container, "globalTags")]["tags"]] == [
        "urn:li:tag:Marketplace:Imported",
        "urn:li:tag:Marketplace:Provider:ACME Corp",
    ]
    (link,) = state[(container, "institutionalMemory")]["elements"]
    assert link["url"].startswith("https://app.snowflake.com/marketplace/internal/listing/")


def test_golden_datajob_and_dashboard_edges() -> None:
    ((_, job),) = load_golden("test_datajob_inputs_only_golden.json").items()
    assert job["inputDatasetEdges"] == [
        {"destinationUrn": make_dataset_urn("snowflake", "source_table")}
    ]
    ((_, dashboard),) = load_golden("golden_test_paginated_rdl_lineage.json").items()
    assert dashboard["title"] == "Printable SalesMarketing"
    assert [e["destinationUrn"] for e in dashboard["datasetEdges"]] == [
        make_dataset_urn("mssql", "sales-sqlserver.internal.MarketingDB")
    ]


# --- the SDK's patch builders, property-tested ---------------------------------------------------

DATASET = make_dataset_urn("hive", "db.target")
TAGS = [f"urn:li:tag:t{i}" for i in range(5)]
TERMS = [f"urn:li:glossaryTerm:g{i}" for i in range(5)]
SOURCES = [None, "urn:li:dataPlatform:bigid", "urn:li:dataPlatform:dbt"]
UPSTREAMS = [DS_1, DS_2, S3_DS, make_dataset_urn("s3", "b/~weird/path")]
OWNERS = ["urn:li:corpuser:alice", "urn:li:corpuser:bob", "urn:li:corpGroup:data/eng"]
OWNER_TYPES = [OwnershipTypeClass.TECHNICAL_OWNER, OwnershipTypeClass.DATA_STEWARD]
PROPS = ["io.acryl.retention", "io.acryl.tier/level"]
PROP_KEYS = st.text(alphabet="ab/~.", min_size=1, max_size=4)


def attribution(source: str | None) -> MetadataAttributionClass | None:
    return (
        None
        if source is None
        else MetadataAttributionClass(time=0, actor=SYSTEM_ACTOR, source=source)
    )


def pairs(items: Sequence[str]) -> st.SearchStrategy[list[tuple[str, str | None]]]:
    return st.lists(
        st.tuples(st.sampled_from(items), st.sampled_from(SOURCES)), unique=True, max_size=6
    )


def split(items: Sequence[Any]) -> st.SearchStrategy[tuple[list[Any], list[Any]]]:
    """Two disjoint subsets: what the builder adds and what it removes (one op per key)."""
    return st.lists(st.sampled_from(items), unique=True).flatmap(
        lambda chosen: st.integers(0, len(chosen)).map(lambda cut: (chosen[:cut], chosen[cut:]))
    )


def apply_mcps(mcps: list[MetadataChangeProposalClass], state: dict[str, Any]) -> dict[str, Any]:
    """Apply a builder's MCPs in order, as GMS would, to {aspect name: JSON}."""
    state = dict(state)
    for mcp in mcps:
        assert mcp.changeType == "PATCH"
        assert mcp.aspect is not None
        name = mcp.aspectName
        assert name is not None
        state[name] = apply_patch(name, state.get(name), json.loads(mcp.aspect.value), now_ms=NOW)
    return state


def keyed(value: Any, key: Any) -> dict[Any, Any]:
    return {key(item): item for item in value}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start_tags=pairs(TAGS),
    tag_ops=split([(t, s) for t in TAGS for s in SOURCES]),
    remove_tag_everywhere=st.lists(st.sampled_from(TAGS), unique=True, max_size=2),
    start_terms=pairs(TERMS),
    term_ops=split([(t, s) for t in TERMS for s in SOURCES]),
    start_upstreams=st.lists(st.sampled_from(UPSTREAMS), unique=True),
    upstream_ops=split(UPSTREAMS),
    start_props=st.dictionaries(PROP_KEYS, st.text(max_size=3), max_size=4),
    prop_ops=st.tuples(
        st.dictionaries(PROP_KEYS, st.text(max_size=3), max_size=3),
        st.lists(PROP_KEYS, unique=True, max_size=3),
    ),
    start_owners=st.lists(
        st.tuples(st.sampled_from(OWNERS), st.sampled_from(OWNER_TYPES)), unique=True
    ),
    owner_ops=split([(o, t) for o in OWNERS for t in OWNER_TYPES]),
    structured=split(PROPS),
)
def test_dataset_patch_builder_payloads_do_what_the_builder_intends(
    start_tags: list[tuple[str, str | None]],
    tag_ops: tuple[list[tuple[str, str | None]], list[tuple[str, str | None]]],
    remove_tag_everywhere: list[str],
    start_terms: list[tuple[str, str | None]],
    term_ops: tuple[list[tuple[str, str | None]], list[tuple[str, str | None]]],
    start_upstreams: list[str],
    upstream_ops: tuple[list[str], list[str]],
    start_props: dict[str, str],
    prop_ops: tuple[dict[str, str], list[str]],
    start_owners: list[tuple[str, str]],
    owner_ops: tuple[list[tuple[str, str]], list[tuple[str, str]]],
    structured: tuple[list[str], list[str]],
) -> None:
    start: dict[str, Any] = {
        "globalTags": {
            "tags": [
                pre_json_transform(TagAssociationClass(t, attribution=attribution(s)).to_obj())
                for t, s in start_tags
            ]
        },
        "glossaryTerms": {
            "terms": [
                pre_json_transform(
                    GlossaryTermAssociationClass(t, attribution=attribution(s)).to_obj()
                )
                for t, s in start_terms
            ],
            "auditStamp": {"time": 1, "actor": SYSTEM_ACTOR},
        },
        "upstreamLineage": {
            "upstreams": [
                {"dataset": u, "type": "COPY", "auditStamp": {"time": 0, "actor": SYSTEM_ACTOR}}
                for u in start_upstreams
            ]
        },
        "datasetProperties": {"customProperties": start_props},
        "ownership": {"owners": [{"owner": o, "type": t} for o, t in start_owners]},
    }
    builder = DatasetPatchBuilder(DATASET)
    tags_to_add, tags_to_remove = tag_ops
    tags_to_remove = [
        (t, s) for t, s in tags_to_remove if s is not None and t not in remove_tag_everywhere
    ]
    tags_to_add = [(t, s) for t, s in tags_to_add if t not in remove_tag_everywhere]
    for tag, source in tags_to_add:
        builder.add_tag(TagAssociationClass(tag, attribution=attribution(source)))
    for tag, source in tags_to_remove:
        builder.remove_tag(tag, attribution_source=source)
    for tag in remove_tag_everywhere:
        builder.remove_tag(tag)
    terms_to_add, terms_to_remove = term_ops
    # Removing a term everywhere and then from one source in the same MCP is refused by GMS
    # (see test_removing_the_same_absent_key_twice...), so the builder is not asked to.
    everywhere = {t for t, s in terms_to_remove if s is None}
    terms_to_remove = [(t, s) for t, s in terms_to_remove if s is None or t not in everywhere]
    for term, source in terms_to_add:
        builder.add_term(GlossaryTermAssociationClass(term, attribution=attribution(source)))
    for term, source in terms_to_remove:
        builder.remove_term(term, attribution_source=source)
    upstreams_to_add, upstreams_to_remove = upstream_ops
    for upstream in upstreams_to_add:
        builder.add_upstream_lineage(
            UpstreamClass(
                upstream,
                DatasetLineageTypeClass.TRANSFORMED,
                auditStamp=AuditStampClass(5, SYSTEM_ACTOR),
            )
        )
    for upstream in upstreams_to_remove:
        builder.remove_upstream_lineage(upstream)
    props_to_add, props_to_remove = prop_ops
    props_to_remove = [k for k in props_to_remove if k not in props_to_add]
    for key, value in props_to_add.items():
        builder.add_custom_property(key, value)
    for key in props_to_remove:
        builder.remove_custom_property(key)
    owners_to_add, owners_to_remove = owner_ops
    removed_owners = {o for o, _ in owners_to_remove} - {o for o, _ in owners_to_add}
    for owner, owner_type in owners_to_add:
        builder.add_owner(OwnerClass(owner, owner_type))
    for owner in removed_owners:
        builder.remove_owner(owner)
    props_set, props_removed = structured
    for prop in props_set:
        builder.set_structured_property(prop, 42.0)
    for prop in props_removed:
        builder.remove_structured_property(prop)

    result = apply_mcps(builder.build(), start)

    # What those operations mean, computed directly on the start values.
    def tag_key(t: dict[str, Any]) -> tuple[str, str | None]:
        return t["tag"], (t.get("attribution") or {}).get("source")

    want_tags = keyed(start["globalTags"]["tags"], tag_key)
    for tag, source in tags_to_add:
        want_tags[(tag, source)] = pre_json_transform(
            TagAssociationClass(tag, attribution=attribution(source)).to_obj()
        )
    for tag, source in tags_to_remove:
        want_tags.pop((tag, source), None)
    want_tags = {k: v for k, v in want_tags.items() if k[0] not in remove_tag_everywhere}
    assert keyed(validate("globalTags", result["globalTags"]).to_obj()["tags"], tag_key) == {
        k: TagAssociationClass.from_obj(post_json_transform(v)).to_obj()
        for k, v in want_tags.items()
    }

    def term_key(t: dict[str, Any]) -> tuple[str, str | None]:
        return t["urn"], (t.get("attribution") or {}).get("source")

    # One MCP in call order: the adds, then the removes; remove_term(t) drops every source of t.
    want_terms = {term_key(t) for t in start["glossaryTerms"]["terms"]} | set(terms_to_add)
    want_terms -= {(t, s) for t, s in terms_to_remove if s is not None}
    removed_everywhere = {t for t, s in terms_to_remove if s is None}
    want_terms = {(t, s) for t, s in want_terms if t not in removed_everywhere}
    got_terms = {
        term_key(t) for t in validate("glossaryTerms", result["glossaryTerms"]).to_obj()["terms"]
    }
    assert got_terms == want_terms

    want_upstreams = [u for u in start_upstreams if u not in upstreams_to_remove]
    want_upstreams += [u for u in upstreams_to_add if u not in want_upstreams]
    got_upstreams = validate("upstreamLineage", result["upstreamLineage"]).upstreams
    # Stored upstreams keep their place (a re-added one too), new ones are appended.
    assert [u.dataset for u in got_upstreams] == want_upstreams
    assert all(u.type == "TRANSFORMED" for u in got_upstreams if u.dataset in upstreams_to_add)

    want_props = {**start_props, **props_to_add}
    for key in props_to_remove:
        want_props.pop(key, None)
    assert result["datasetProperties"]["customProperties"] == want_props

    want_owners = {(o, t) for o, t in start_owners if o not in removed_owners} | set(owners_to_add)
    got_owners = {(o["owner"], o["type"]) for o in result["ownership"]["owners"]}
    assert got_owners == want_owners

    if props_set or props_removed:
        got_props = validate("structuredProperties", result["structuredProperties"]).properties
        assert sorted(p.propertyUrn for p in got_props) == sorted(
            f"urn:li:structuredProperty:{p}" for p in props_set
        )


@settings(max_examples=30, deadline=None)
@given(
    start_inputs=st.lists(st.sampled_from(UPSTREAMS), unique=True),
    inputs=split(UPSTREAMS),
    outputs=split(UPSTREAMS),
)
def test_data_job_patch_builder_payloads_do_what_the_builder_intends(
    start_inputs: list[str],
    inputs: tuple[list[str], list[str]],
    outputs: tuple[list[str], list[str]],
) -> None:
    start = {
        "dataJobInputOutput": {
            "inputDatasets": [],
            "outputDatasets": [],
            "inputDatasetEdges": [{"destinationUrn": u} for u in start_inputs],
        }
    }
    builder = DataJobPatchBuilder("urn:li:dataJob:(urn:li:dataFlow:(airflow,dag,PROD),task)")
    for urn in inputs[0]:
        builder.add_input_dataset(urn)
    for urn in inputs[1]:
        builder.remove_input_dataset(urn)
    for urn in outputs[0]:
        builder.add_output_dataset(urn)
    for urn in outputs[1]:
        builder.remove_output_dataset(urn)
    result = apply_mcps(builder.build(), start)["dataJobInputOutput"]
    validated = validate("dataJobInputOutput", result)
    want_inputs = [u for u in start_inputs if u not in inputs[1]] + [
        u for u in inputs[0] if u not in start_inputs
    ]
    assert [e.destinationUrn for e in validated.inputDatasetEdges or []] == want_inputs
    assert [e.destinationUrn for e in validated.outputDatasetEdges or []] == outputs[0]
