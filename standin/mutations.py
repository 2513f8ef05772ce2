"""GraphQL mutations: read the current aspect, change it as GMS's resolver would, write it back.

Every write becomes a ``MetadataChangeProposalWrapper`` built with acryl-datahub's aspect
classes, so a malformed value fails the way GMS's validation would, and lands in Lite as a
new version. Functions are named ``m_<mutation>`` and take the request's catalog first.
Validation messages follow GMS's resolvers (``LabelUtils``, ``RaiseIncidentResolver``, ...)
closely enough for tests that look for the gist.
"""

from __future__ import annotations

import copy
import time
import uuid
from typing import Any

from datahub.emitter.aspect import ASPECT_MAP
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.serialization_helper import post_json_transform

from standin.catalog import TYPES, Catalog
from standin.edges import entity_type
from standin.entities import entity, ref
from standin.incident_support import IncidentNotWritten, InvalidIncident, check_incident

Json = dict[str, Any]

_PRIORITY = {"CRITICAL": 0, "HIGH": 1, "MEDIUM": 2, "LOW": 3}  # IncidentUtils.mapIncidentPriority
_VALUE_TYPES = {"string", "rich_text", "number", "urn", "date"}


def _now() -> int:
    return int(time.time() * 1000)


def _stamp(ctx: Catalog) -> Json:
    return {"time": _now(), "actor": ctx.actor}


def _mcp(urn: str, name: str, value: Json) -> MetadataChangeProposalWrapper:
    aspect = ASPECT_MAP[name].from_obj(post_json_transform(copy.deepcopy(value)))
    return MetadataChangeProposalWrapper(entityUrn=urn, aspect=aspect)


def _write(ctx: Catalog, writes: list[tuple[str, str, Json]]) -> None:
    ctx.write([_mcp(urn, name, value) for urn, name, value in writes])


def _require(ctx: Catalog, urn: str, what: str) -> None:
    if not ctx.exists(urn):
        raise ValueError(f"Failed to update {what}. {urn} does not exist.")


# --- tags and glossary terms -----------------------------------------------------------------


def _validate_label(ctx: Catalog, label: str, kind: str) -> None:
    # LabelUtils.validateLabel (skipped when removing)
    if entity_type(label) != ("tag" if kind == "tag" else "glossaryTerm"):
        raise ValueError(
            f"Failed to validate label with urn {label}. Urn type does not match entity type "
            f"{'tag' if kind == 'tag' else 'glossaryTerm'}.."
        )
    if not ctx.exists(label):
        raise ValueError(f"Failed to validate label with urn {label}. Urn does not exist.")


def _validate_resource(ctx: Catalog, urn: str, field: str | None, field_type: str | None) -> None:
    # LabelUtils.validateResource / validateSubresourceExists, messages verbatim
    if not ctx.exists(urn):
        raise ValueError(f"Failed to update resource with urn {urn}. Entity does not exist.")
    if not field and not field_type:
        return
    if not field:
        raise ValueError(
            f"Failed to update resource with urn {urn}. SubResourceType ({field_type}) "
            "provided without a subResource."
        )
    if not field_type:
        raise ValueError(
            f"Failed to updates resource with urn {urn}. SubResource ({field}) "
            "provided without a subResourceType."
        )
    schema = ctx.aspect(urn, "schemaMetadata")
    if schema is None:
        raise ValueError(f"Failed to update {urn} & field {field}. {urn} has no schema.")
    if field not in {f.get("fieldPath") for f in schema.get("fields") or []}:
        raise ValueError(
            f"Failed to update {urn} & field {field}. "
            f"Field {field} does not exist in the datasets schema."
        )


def _labels(
    ctx: Catalog, kind: str, labels: list[str], resources: list[Json | None], add: bool
) -> bool:
    """Add or remove tags/terms on entities or on dataset fields (``subResource``)."""
    writes: list[tuple[str, str, Json]] = []
    for resource in resources:
        if not resource:
            continue
        target = resource["resourceUrn"]
        field = resource.get("subResource")
        for label in labels:
            if add:
                _validate_label(ctx, label, kind)
            _validate_resource(ctx, target, field, resource.get("subResourceType"))
        if field:
            writes.append(_field_labels(ctx, kind, labels, target, field, add))
        else:
            writes.append(_entity_labels(ctx, kind, labels, target, add))
    _write(ctx, writes)
    return True


def _merge(entries: list[Json], key: str, labels: list[str], add: bool) -> list[Json]:
    if add:
        present = {e.get(key) for e in entries}
        return entries + [{key: label} for label in labels if label not in present]
    return [e for e in entries if e.get(key) not in set(labels)]


def _entity_labels(
    ctx: Catalog, kind: str, labels: list[str], urn: str, add: bool
) -> tuple[str, str, Json]:
    if kind == "tag":
        value = copy.deepcopy(ctx.aspect(urn, "globalTags") or {"tags": []})
        value["tags"] = _merge(value.get("tags") or [], "tag", labels, add)
        return urn, "globalTags", value
    value = copy.deepcopy(ctx.aspect(urn, "glossaryTerms") or {"terms": []})
    value["terms"] = _merge(value.get("terms") or [], "urn", labels, add)
    value["auditStamp"] = _stamp(ctx)
    return urn, "glossaryTerms", value


def _field_labels(
    ctx: Catalog, kind: str, labels: list[str], urn: str, field: str, add: bool
) -> tuple[str, str, Json]:
    value = copy.deepcopy(ctx.aspect(urn, "editableSchemaMetadata") or {})
    value.setdefault("created", _stamp(ctx))
    value["lastModified"] = _stamp(ctx)
    infos = value.setdefault("editableSchemaFieldInfo", [])
    info = next((i for i in infos if i.get("fieldPath") == field), None)
    if info is None:
        info = {"fieldPath": field}
        infos.append(info)
    if kind == "tag":
        holder = info.setdefault("globalTags", {"tags": []})
        holder["tags"] = _merge(holder.get("tags") or [], "tag", labels, add)
    else:
        holder = info.setdefault("glossaryTerms", {"terms": [], "auditStamp": _stamp(ctx)})
        holder["terms"] = _merge(holder.get("terms") or [], "urn", labels, add)
    return urn, "editableSchemaMetadata", value


def _one(input: Json) -> list[Json | None]:
    return [
        {
            "resourceUrn": input["resourceUrn"],
            "subResourceType": input.get("subResourceType"),
            "subResource": input.get("subResource"),
        }
    ]


def m_batchAddTags(ctx: Catalog, input: Json) -> bool:
    return _labels(ctx, "tag", input["tagUrns"], input["resources"], add=True)


def m_batchRemoveTags(ctx: Catalog, input: Json) -> bool:
    return _labels(ctx, "tag", input["tagUrns"], input["resources"], add=False)


def m_addTags(ctx: Catalog, input: Json) -> bool:
    return _labels(ctx, "tag", input["tagUrns"], _one(input), add=True)


def m_addTag(ctx: Catalog, input: Json) -> bool:
    return _labels(ctx, "tag", [input["tagUrn"]], _one(input), add=True)


def m_removeTag(ctx: Catalog, input: Json) -> bool:
    return _labels(ctx, "tag", [input["tagUrn"]], _one(input), add=False)


def m_batchAddTerms(ctx: Catalog, input: Json) -> bool:
    return _labels(ctx, "term", input["termUrns"], input["resources"], add=True)


def m_batchRemoveTerms(ctx: Catalog, input: Json) -> bool:
    return _labels(ctx, "term", input["termUrns"], input["resources"], add=False)


def m_addTerms(ctx: Catalog, input: Json) -> bool:
    return _labels(ctx, "term", input["termUrns"], _one(input), add=True)


def m_addTerm(ctx: Catalog, input: Json) -> bool:
    return _labels(ctx, "term", [input["termUrn"]], _one(input), add=True)


def m_removeTerm(ctx: Catalog, input: Json) -> bool:
    return _labels(ctx, "term", [input["termUrn"]], _one(input), add=False)


def m_createTag(ctx: Catalog, input: Json) -> str:
    urn = f"urn:li:tag:{input.get('id') or uuid.uuid4()}"
    if ctx.exists(urn):
        raise ValueError("This Tag already exists!")
    props = {"name": input["name"]}
    if input.get("description"):
        props["description"] = input["description"]
    _write(ctx, [(urn, "tagProperties", props)])
    return urn


def m_updateDeprecation(ctx: Catalog, input: Json) -> bool:
    urn = input["urn"]
    _require(ctx, urn, urn)
    value: Json = {
        "deprecated": input["deprecated"],
        "note": input.get("note") or "",
        "actor": ctx.actor,
    }
    if input.get("decommissionTime") is not None:
        value["decommissionTime"] = input["decommissionTime"]
    if input.get("replacement"):
        value["replacement"] = input["replacement"]
    _write(ctx, [(urn, "deprecation", value)])
    return True


# --- structured properties -------------------------------------------------------------------


def _definition(ctx: Catalog, prop: str) -> Json:
    definition = ctx.aspect(prop, "propertyDefinition")
    if definition is None:
        raise ValueError(f"Unable to update structured property {prop}: it does not exist.")
    return definition


def _check_values(prop: str, definition: Json, asset: str, values: list[Json]) -> list[Json]:
    kind = str(definition.get("valueType", "")).rsplit(".", 1)[-1]
    allowed_types = {str(t).rsplit(".", 1)[-1] for t in definition.get("entityTypes") or []}
    if allowed_types and entity_type(asset) not in allowed_types:
        raise ValueError(
            f"Structured property {prop} cannot be applied to entity type {entity_type(asset)}"
        )
    if definition.get("cardinality", "SINGLE") == "SINGLE" and len(values) > 1:
        raise ValueError(
            f"Structured property {prop} is single-valued but got {len(values)} values"
        )
    stored: list[Json] = []
    for v in values:
        number, text = v.get("numberValue"), v.get("stringValue")
        if kind == "number":
            if number is None:
                raise ValueError(f"Property: {prop}, value: {text} should be a number")
            stored.append({"double": float(number)})
        else:
            if text is None:
                raise ValueError(f"Property: {prop}, value: {number} should be a string")
            stored.append({"string": text})
    allowed = [a.get("value") for a in definition.get("allowedValues") or []]
    if allowed:
        for s in stored:
            if s not in allowed:
                raise ValueError(
                    f"Property: {prop}, value: {next(iter(s.values()))} is not allowed"
                )
    return stored


def _asset_properties(ctx: Catalog, asset: str) -> Json | None:
    node = ref(ctx, asset)
    return node.structuredProperties(None) if node is not None else None


def m_upsertStructuredProperties(ctx: Catalog, input: Json) -> Json | None:
    asset = input["assetUrn"]
    _require(ctx, asset, f"structured properties on {asset}")
    value = copy.deepcopy(ctx.aspect(asset, "structuredProperties") or {"properties": []})
    entries = value.setdefault("properties", [])
    for param in input["structuredPropertyInputParams"]:
        prop = param["structuredPropertyUrn"]
        stored = _check_values(prop, _definition(ctx, prop), asset, param["values"])
        existing = next((e for e in entries if e.get("propertyUrn") == prop), None)
        if existing is None:
            entries.append(
                {
                    "propertyUrn": prop,
                    "values": stored,
                    "created": _stamp(ctx),
                    "lastModified": _stamp(ctx),
                }
            )
        else:
            existing["values"] = stored
            existing["lastModified"] = _stamp(ctx)
    _write(ctx, [(asset, "structuredProperties", value)])
    return _asset_properties(ctx, asset)


def m_removeStructuredProperties(ctx: Catalog, input: Json) -> Json | None:
    asset = input["assetUrn"]
    _require(ctx, asset, f"structured properties on {asset}")
    value = copy.deepcopy(ctx.aspect(asset, "structuredProperties") or {"properties": []})
    drop = set(input["structuredPropertyUrns"])
    value["properties"] = [
        e for e in value.get("properties") or [] if e.get("propertyUrn") not in drop
    ]
    _write(ctx, [(asset, "structuredProperties", value)])
    return _asset_properties(ctx, asset)


def m_createStructuredProperty(ctx: Catalog, input: Json) -> Any:
    ident = input.get("id") or str(uuid.uuid4())
    urn = f"urn:li:structuredProperty:{ident}"
    if ctx.exists(urn):
        raise ValueError(f"Structured property with urn {urn} already exists")
    value_type = input["valueType"]
    if value_type.rsplit(".", 1)[-1] not in _VALUE_TYPES:
        raise ValueError(f"Invalid value type {value_type}")
    for t in input["entityTypes"]:
        if t.rsplit(".", 1)[-1] not in TYPES:
            raise ValueError(f"Invalid entity type {t}")
    definition: Json = {
        "qualifiedName": input.get("qualifiedName") or ident,
        "valueType": value_type,
        "cardinality": input.get("cardinality") or "SINGLE",
        "entityTypes": input["entityTypes"],
        "immutable": bool(input.get("immutable", False)),
        "created": _stamp(ctx),
        "lastModified": _stamp(ctx),
    }
    for key in ("displayName", "description"):
        if input.get(key):
            definition[key] = input[key]
    if input.get("typeQualifier"):
        definition["typeQualifier"] = {
            "allowedTypes": input["typeQualifier"].get("allowedTypes") or []
        }
    if input.get("allowedValues"):
        definition["allowedValues"] = [
            {
                "value": {"double": float(a["numberValue"])}
                if a.get("numberValue") is not None
                else {"string": a.get("stringValue") or ""},
                **({"description": a["description"]} if a.get("description") else {}),
            }
            for a in input["allowedValues"]
        ]
    writes = [(urn, "propertyDefinition", definition)]
    if input.get("settings"):
        settings = {k: bool(v) for k, v in input["settings"].items() if v is not None}
        writes.append(
            (urn, "structuredPropertySettings", {**settings, "lastModified": _stamp(ctx)})
        )
    _write(ctx, writes)
    return entity(ctx, urn)


# --- incidents -------------------------------------------------------------------------------


def m_raiseIncident(ctx: Catalog, input: Json) -> str:
    resources = list(input.get("resourceUrns") or [])
    if input.get("resourceUrn"):
        resources = [input["resourceUrn"], *[r for r in resources if r != input["resourceUrn"]]]
    if not resources:
        raise ValueError("Failed to raise incident: a resourceUrn or resourceUrns is required.")
    _check_incident(ctx, resources)
    status = input.get("status") or {}
    info: Json = {
        "type": input["type"],
        "entities": resources,
        "status": {
            "state": status.get("state") or "ACTIVE",
            "lastUpdated": _stamp(ctx),
            **({"stage": status["stage"]} if status.get("stage") else {}),
            **({"message": status["message"]} if status.get("message") else {}),
        },
        "source": {"type": (input.get("source") or {}).get("type") or "MANUAL"},
        "created": _stamp(ctx),
    }
    for key in ("customType", "title", "description", "startedAt"):
        if input.get(key) is not None:
            info[key] = input[key]
    if input.get("priority"):
        info["priority"] = _PRIORITY[input["priority"]]
    if input.get("assigneeUrns"):
        info["assignees"] = [{"actor": a, "assignedAt": _stamp(ctx)} for a in input["assigneeUrns"]]
    urn = f"urn:li:incident:{uuid.uuid4()}"
    _write(ctx, [(urn, "incidentInfo", info)])
    return urn


def _check_incident(ctx: Catalog, resources: list[str]) -> None:
    """As GMS: the write fails validation and the resolver rethrows it (code 500)."""
    try:
        check_incident(resources, ctx.backend.incident_types)
    except InvalidIncident as exc:
        raise IncidentNotWritten(f"java.lang.RuntimeException: {exc}") from exc


def _incident(ctx: Catalog, urn: str) -> Json:
    info = ctx.aspect(urn, "incidentInfo")
    if info is None:
        raise ValueError(f"Failed to update incident. Incident with urn {urn} does not exist.")
    return copy.deepcopy(info)


def m_updateIncidentStatus(ctx: Catalog, urn: str, input: Json) -> bool:
    info = _incident(ctx, urn)
    info["status"] = {"state": input["state"], "lastUpdated": _stamp(ctx)}
    for key in ("stage", "message"):
        if input.get(key):
            info["status"][key] = input[key]
    _write(ctx, [(urn, "incidentInfo", info)])
    return True


def m_updateIncident(ctx: Catalog, urn: str, input: Json) -> bool:
    info = _incident(ctx, urn)
    if input.get("resourceUrns"):
        _check_incident(ctx, list(input["resourceUrns"]))  # before anything is written
    for key in ("title", "description", "startedAt"):
        if input.get(key) is not None:
            info[key] = input[key]
    if input.get("status"):
        m_updateIncidentStatus(ctx, urn, input["status"])
        info["status"] = _incident(ctx, urn)["status"]
    if input.get("priority"):
        info["priority"] = _PRIORITY[input["priority"]]
    if input.get("resourceUrns"):
        info["entities"] = input["resourceUrns"]
    if input.get("assigneeUrns") is not None:
        info["assignees"] = [{"actor": a, "assignedAt": _stamp(ctx)} for a in input["assigneeUrns"]]
    _write(ctx, [(urn, "incidentInfo", info)])
    return True
