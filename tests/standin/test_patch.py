"""The stand-in applies PATCH as GMS's templates do (see ``standin/patch.py``).

Patches are built with acryl-datahub's own builders, so the wire form is the SDK's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from datahub.configuration.common import OperationalError
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.mcp_patch_builder import MetadataPatchProposal
from datahub.ingestion.graph.client import DatahubClientConfig, DataHubGraph
from datahub.metadata.schema_classes import (
    GlobalTagsClass,
    MetadataChangeProposalClass,
    TagAssociationClass,
)
from datahub.specific.aspect_helpers.structured_properties import HasStructuredPropertiesPatch
from datahub.specific.aspect_helpers.tags import HasTagsPatch

from standin.fixtures import StandInFactory
from standin.patch import apply_patch

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
PROP = "urn:li:structuredProperty:io.x.p"


class _Patch(HasTagsPatch, HasStructuredPropertiesPatch, MetadataPatchProposal):
    pass


def _applied(aspect: str, current: dict[str, Any] | None, mcp: MetadataChangeProposalClass) -> Any:
    assert mcp.aspect is not None
    body = json.loads(mcp.aspect.value)
    if isinstance(body, list):
        return apply_patch(aspect, current, body)
    return apply_patch(aspect, current, body["patch"], body.get("arrayPrimaryKeys"))


def _tags(*urns: str, source: str | None = None) -> list[dict[str, Any]]:
    if source is None:
        return [{"tag": u} for u in urns]
    return [{"tag": u, "attribution": {"source": source, "time": 0, "actor": "a"}} for u in urns]


def test_add_tag_keeps_every_other_tag_and_creates_a_missing_aspect() -> None:
    [mcp] = _Patch(MODEL).add_tag(TagAssociationClass("urn:li:tag:ours")).build()
    current = {"tags": _tags("urn:li:tag:theirs")}
    assert _applied("globalTags", current, mcp) == {
        "tags": _tags("urn:li:tag:theirs", "urn:li:tag:ours")
    }
    assert _applied("globalTags", None, mcp) == {"tags": _tags("urn:li:tag:ours")}
    # Adding what is there replaces it in place: the patch is idempotent.
    twice = _applied("globalTags", _applied("globalTags", current, mcp), mcp)
    assert twice == {"tags": _tags("urn:li:tag:theirs", "urn:li:tag:ours")}


def test_remove_tag_removes_only_that_tag_and_a_missing_one_is_a_no_op() -> None:
    [mcp] = _Patch(MODEL).remove_tag("urn:li:tag:ours").build()
    current = {"tags": _tags("urn:li:tag:theirs", "urn:li:tag:ours")}
    assert _applied("globalTags", current, mcp) == {"tags": _tags("urn:li:tag:theirs")}
    assert _applied("globalTags", {"tags": _tags("urn:li:tag:theirs")}, mcp) == {
        "tags": _tags("urn:li:tag:theirs")
    }
    assert _applied("globalTags", None, mcp) == {"tags": []}


def test_arrays_come_back_grouped_by_the_first_key_as_gms_rebuilds_them() -> None:
    current = {
        "tags": [
            *_tags("urn:li:tag:a"),
            *_tags("urn:li:tag:b", source="urn:li:x"),
            *_tags("urn:li:tag:c"),
        ]
    }
    [mcp] = _Patch(MODEL).add_tag(TagAssociationClass("urn:li:tag:d")).build()
    assert [t["tag"] for t in _applied("globalTags", current, mcp)["tags"]] == [
        "urn:li:tag:a",
        "urn:li:tag:c",
        "urn:li:tag:d",
        "urn:li:tag:b",
    ]


def test_a_trailing_empty_segment_fails_on_first_touch_as_before_gms_17449() -> None:
    """The SDK's ``set_structured_property`` path ends in ``/`` (the empty source)."""
    [mcp] = _Patch(MODEL).set_structured_property(PROP, ["x"]).build()
    assert mcp.aspect is not None
    assert b'/", "value"' in mcp.aspect.value
    with pytest.raises(ValueError, match="non-existing"):
        _applied("structuredProperties", {"properties": []}, mcp)
    # With the property already there, the parent exists and the value is replaced.
    current = {"properties": [{"propertyUrn": PROP, "values": [{"string": "old"}]}]}
    assert _applied("structuredProperties", current, mcp) == {
        "properties": [{"propertyUrn": PROP, "values": [{"string": "x"}]}]
    }


def test_remove_structured_property_keeps_the_others() -> None:
    [mcp] = _Patch(MODEL).remove_structured_property(PROP).build()
    theirs = {"propertyUrn": "urn:li:structuredProperty:io.x.theirs", "values": [{"double": 1.0}]}
    current = {"properties": [{"propertyUrn": PROP, "values": [{"string": "x"}]}, theirs]}
    assert _applied("structuredProperties", current, mcp) == {"properties": [theirs]}


def test_template_patches_and_refusals() -> None:
    # An old-style patch (a bare list) uses the aspect's template keys.
    ops = [{"op": "add", "path": "/tags/urn:li:tag:x", "value": {"tag": "urn:li:tag:x"}}]
    assert apply_patch("globalTags", None, ops) == {"tags": _tags("urn:li:tag:x")}
    with pytest.raises(ValueError, match="not supported"):
        apply_patch("incidentInfo", None, ops)
    with pytest.raises(ValueError, match="does not exist"):
        apply_patch("globalTags", {"tags": []}, [{"op": "replace", "path": "/x", "value": 1}])


def test_a_patch_over_http_lands_on_what_the_store_holds_then(
    standin_factory: StandInFactory,
) -> None:
    """Rest.li PATCH from the SDK's emitter; a hook's write, just before it, is kept."""
    from datahub.emitter.mcp import MetadataChangeProposalWrapper

    def tags(*urns: str) -> MetadataChangeProposalWrapper:
        aspect = GlobalTagsClass([TagAssociationClass(u) for u in urns])
        return MetadataChangeProposalWrapper(entityUrn=MODEL, aspect=aspect)

    server = standin_factory([tags("urn:li:tag:first")])
    fault = server.inject(
        "POST /aspects", hook=lambda: server.write([tags("urn:li:tag:meanwhile")]), times=1
    )
    graph = DataHubGraph(DatahubClientConfig(server=server.url, openapi_ingestion=False))
    graph.emit_mcps(_Patch(MODEL).add_tag(TagAssociationClass("urn:li:tag:ours")).build())
    row = server.backend.store.get(MODEL, "globalTags")
    assert row is not None
    assert row.value == {"tags": _tags("urn:li:tag:meanwhile", "urn:li:tag:ours")}
    assert fault.hits == 1
    # A patch GMS cannot apply is refused, and nothing is written.
    with pytest.raises(OperationalError, match="non-existing"):
        graph.emit_mcps(_Patch(MODEL).set_structured_property(PROP, ["x"]).build())
    assert server.backend.store.get(MODEL, "structuredProperties") is None
    graph.close()


# --- templates ported for the golden files -------------------------------------------------

DS = "urn:li:dataset:(urn:li:dataPlatform:hive,t,PROD)"
UP = "urn:li:dataset:(urn:li:dataPlatform:hive,u,PROD)"


def _field(dataset: str, name: str) -> str:
    return f"urn:li:schemaField:({dataset},{name})"


def test_fine_grained_lineage_keys_by_operation_downstream_query_upstream() -> None:
    down, up_a, up_b = _field(DS, "a"), _field(UP, "a"), _field(UP, "b")
    stored = {
        "upstreams": [],
        "fineGrainedLineages": [
            {
                "upstreamType": "FIELD_SET",
                "upstreams": [up_a],
                "downstreamType": "FIELD",
                "downstreams": [down],
                "confidenceScore": 0.9,
            }
        ],
    }
    added = apply_patch(
        "upstreamLineage",
        stored,
        [{"op": "add", "path": f"/fineGrainedLineages/NONE/{down}/NONE/{up_b}", "value": {}}],
    )
    (lineage,) = added["fineGrainedLineages"]
    assert lineage["upstreams"] == [up_a, up_b]  # merged into the one lineage
    assert lineage["confidenceScore"] == 0.9  # the lowest score wins
    assert lineage["transformOperation"] == "NONE"
    assert "query" not in lineage
    removed = apply_patch(
        "upstreamLineage",
        added,
        [
            {"op": "remove", "path": f"/fineGrainedLineages/NONE/{down}/NONE/{up_a}"},
            {"op": "remove", "path": f"/fineGrainedLineages/NONE/{down}/NONE/{up_b}"},
        ],
    )
    assert removed["fineGrainedLineages"] == []  # no upstream left: the lineage is dropped


def test_field_glossary_term_gets_the_templates_audit_stamp() -> None:
    term = "urn:li:glossaryTerm:pii"
    value = apply_patch(
        "editableSchemaMetadata",
        None,
        [
            {
                "op": "add",
                "path": f"/editableSchemaFieldInfo/email/glossaryTerms/terms/{term}",
                "value": {"urn": term},
            }
        ],
    )
    (info,) = value["editableSchemaFieldInfo"]
    assert info["fieldPath"] == "email"  # the key that only lived in the path is put back
    assert info["glossaryTerms"]["terms"] == [{"urn": term}]
    assert info["glossaryTerms"]["auditStamp"]["actor"] == "urn:li:corpuser:__datahub_system"
    assert value["created"]["actor"] == "urn:li:corpuser:__datahub_system"


def test_dashboard_default_and_edges() -> None:
    value = apply_patch(
        "dashboardInfo",
        None,
        [{"op": "add", "path": f"/datasetEdges/{DS}", "value": {"destinationUrn": DS}}],
    )
    assert value["datasetEdges"] == [{"destinationUrn": DS}]
    assert value["title"] == ""
    assert value["lastModified"]["created"]["time"] > 0


def test_version_properties_without_a_stored_aspect_is_refused() -> None:
    with pytest.raises(ValueError, match="no sensible default"):
        apply_patch("versionProperties", None, [{"op": "add", "path": "/isLatest", "value": True}])


def _post_proposal(url: str, change: str, aspect: str, value: Any) -> Any:
    import requests

    proposal: dict[str, Any] = {
        "entityType": "dataset",
        "entityUrn": DS,
        "changeType": change,
        "aspectName": aspect,
        "aspect": {"value": json.dumps(value), "contentType": "application/json"},
    }
    return requests.post(
        f"{url}/aspects?action=ingestProposal",
        json={"proposal": proposal, "async": "false"},
        headers={"X-RestLi-Protocol-Version": "2.0.0"},
        timeout=30,
    )


def test_create_refuses_what_exists(standin_factory: StandInFactory) -> None:
    server = standin_factory([])
    status = {"removed": False}
    assert _post_proposal(server.url, "CREATE_ENTITY", "status", status).status_code == 200
    assert _post_proposal(server.url, "CREATE", "globalTags", {"tags": []}).status_code == 200
    again = _post_proposal(server.url, "CREATE", "globalTags", {"tags": []})
    assert again.status_code == 422
    assert "already exists" in again.json()["message"]
    entity = _post_proposal(server.url, "CREATE_ENTITY", "status", status)
    assert entity.status_code == 422
    assert "CREATE_ENTITY" in entity.json()["message"]
