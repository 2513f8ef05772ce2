"""Apply a DataHub ``PATCH`` MCP to an aspect the way GMS does.

DataHub's file sink and ingestion write ``changeType: "PATCH"`` records whose aspect is either a
list of RFC 6902 operations or DataHub's generic envelope ``{"patch": [...], "arrayPrimaryKeys":
{...}, "forceGenericPatch": bool}``. GMS does not apply those operations to the stored JSON
directly: each aspect's patch template (``metadata/aspect/patch/template`` in DataHub's
entity-registry) first turns keyed arrays into maps, so ``/tags/urn:li:tag:pii`` names the tag
association whose ``tag`` is that urn; then the operations run; then the maps become arrays
again, in the maps' insertion order. This module reproduces those steps on plain JSON:

* ``arrayFieldToMap`` / ``transformedMapToArray`` / ``mergeToArray`` of ``ArrayMergingTemplate``,
  including compound keys (``owners/<owner>/<type>``), nested keys written ``attribution␟source``
  (a missing key part is ``""``), string arrays keyed by the string, and the re-injection of a
  scalar key that only lived in the path (``add /tags/<urn>`` with ``{}`` gives ``{"tag": urn}``).
* ``TemplateUtil.populateTopLevelKeys``: before the operations run, every object on each
  operation's path is created if missing (for ``remove`` the last segment too). So ``add`` may
  create nested keys, and ``remove`` of a key that is not there is a no-op, not an error, on
  every aspect GMS patches (the empty object it creates is removed again). The objects are
  created once, before the first operation, so removing the same absent key twice in one patch
  fails on the second remove, as in GMS. ``replace``/``test`` of a missing path and a path that
  crosses an array or a string fail, as Parsson's JsonPatch and the template's cast do.
* the generic envelope as GMS's Jackson reads it: unknown fields, and operation fields other than
  ``op``/``path``/``value`` (so ``move``/``copy``), are refused.
* each template's ``getDefault()`` as the start value of an absent aspect, and GMS's refusal to
  patch an aspect without a template unless the patch is generic (``arrayPrimaryKeys`` or
  ``forceGenericPatch``), in which case the start value is the template's default or ``{}``.
* ``FineGrainedLineageTemplateHelper``: ``fineGrainedLineages`` of upstreamLineage and
  dataJobInputOutput are keyed ``/<transformOperation>/<downstream>/<query>/<upstream>``
  (``NONE`` for a missing operation or query), one lineage per (operation, downstream, query)
  with the lowest confidence score of its upstreams.

The RFC 6902 part itself is the ``jsonpatch`` library. Validating the result against the aspect's
schema is the caller's job (the loader validates with the SDK's classes).
"""

from __future__ import annotations

import copy
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import jsonpatch
import jsonpointer
from avro.schema import ArraySchema, RecordSchema, Schema, UnionSchema
from datahub.emitter.aspect import ASPECT_MAP

JsonObject = dict[str, Any]

SYSTEM_ACTOR = "urn:li:corpuser:__datahub_system"
"""The actor GMS puts in the audit stamps its templates create (``Constants.SYSTEM_ACTOR``)."""

_UNIT_SEPARATOR = "\u241f"
_OPERATIONS = frozenset({"add", "remove", "replace", "move", "copy", "test"})
_ENVELOPE_FIELDS = frozenset({"patch", "arrayPrimaryKeys", "forceGenericPatch"})
_ENVELOPE_OP_FIELDS = frozenset({"op", "path", "value"})
_SCALAR_AVRO_TYPES = frozenset({"string", "int", "long", "float", "double", "boolean", "enum"})


class PatchError(ValueError):
    """A patch GMS would refuse; the message is one line naming the operation and path."""


# --- keyed arrays (ArrayMergingTemplate) -------------------------------------------------------


def _key_text(value: Any) -> str:
    """A key value as Jackson's ``JsonNode.asText()`` renders it."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        # Java renders doubles >= 1e7 or < 1e-3 in E notation; keys are urns and enums in
        # practice, so that difference is not reproduced.
        return repr(value)
    return ""  # asText() of an object or array node


def _element_key(element: JsonObject, key_field: str) -> str:
    """The map key of one array element for one key field; a missing key (part) is ``""``."""
    node: Any = element
    parts = key_field.split(_UNIT_SEPARATOR)
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or parts[-1] not in node:
        return ""
    return _key_text(node[parts[-1]])


def _array_to_map(node: JsonObject, field: str, keys: Sequence[str]) -> JsonObject:
    """``arrayFieldToMap``: ``node[field]`` as nested maps keyed by ``keys`` (a map always)."""
    mapped: JsonObject = {}
    array = node.get(field)
    if isinstance(array, list):
        for index, element in enumerate(array):
            if not keys:
                mapped[element if isinstance(element, str) else ""] = element
                continue
            if not isinstance(element, dict):
                raise PatchError(f"{field}[{index}] is not an object, GMS cannot key it")
            slot = mapped
            for key_field in keys:
                key = _element_key(element, key_field)
                if key not in slot:
                    slot[key] = {}
                slot = slot[key]
            # Elements with the same key merge, later fields winning, as ObjectNode.setAll does.
            slot.update(element)
    return {**node, field: mapped}


def _merge_to_array(node: Any, keys: Sequence[str], scalar_keys: frozenset[str]) -> list[Any]:
    """``mergeToArray``: flatten nested maps back to elements, restoring scalar keys."""
    if not keys:
        # An array set at the last key level (add /tags/<urn> with [{...}]) is expanded.
        return list(node) if isinstance(node, list) else [node]
    key_field, rest = keys[0], keys[1:]
    merged: list[Any] = []
    if isinstance(node, dict):
        for key, child in node.items():
            elements = _merge_to_array(child, rest, scalar_keys)
            if key and _UNIT_SEPARATOR not in key_field and key_field in scalar_keys:
                for element in elements:
                    if isinstance(element, dict) and key_field not in element:
                        element[key_field] = key
            merged.extend(elements)
    elif isinstance(node, list):
        # A non-object set at an intermediate level: no key to restore, values kept as they are.
        for child in node:
            merged.extend(_merge_to_array(child, rest, scalar_keys))
    return merged


def _map_to_array(
    node: JsonObject, field: str, keys: Sequence[str], scalar_keys: frozenset[str]
) -> JsonObject:
    """``transformedMapToArray``: undo :func:`_array_to_map` after the operations ran."""
    mapped = node.get(field)
    if isinstance(mapped, list):
        return node  # the patch replaced the whole array
    if mapped is None:
        return {**node, field: []}  # the patch removed the whole field
    if not isinstance(mapped, dict):
        raise PatchError(f"{field} became {_kind(mapped)}; GMS expects a keyed map there")
    array = _merge_to_array(mapped, keys, scalar_keys) if keys else list(mapped.values())
    return {**node, field: array}


def _non_null(schema: Schema) -> Schema:
    """The type of an optional avro field (``["null", X]`` is how Pegasus optionals map)."""
    if isinstance(schema, UnionSchema):
        branches = [s for s in schema.schemas if s.type != "null"]
        if len(branches) == 1:
            branch: Schema = branches[0]
            return branch
    return schema


@lru_cache(maxsize=256)
def _scalar_item_fields(aspect_name: str, field: str) -> frozenset[str]:
    """Fields of ``aspect_name.field``'s array items that are primitives or enums.

    GMS only re-injects a path key into such fields (``ArrayMergingTemplate.isScalarKeyField``);
    the item schema comes from the SDK's copy of the aspect's schema.
    """
    aspect_class = ASPECT_MAP.get(aspect_name)
    if aspect_class is None:
        return frozenset()
    schema_field = aspect_class.RECORD_SCHEMA.fields_dict.get(field)
    if schema_field is None:
        return frozenset()
    array = _non_null(schema_field.type)
    if not isinstance(array, ArraySchema):
        return frozenset()
    items = _non_null(array.items)
    if not isinstance(items, RecordSchema):
        return frozenset()
    return frozenset(
        name
        for name, item_field in items.fields_dict.items()
        if _non_null(item_field.type).type in _SCALAR_AVRO_TYPES
    )


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a boolean" if isinstance(value, bool) else "a number"


class _FieldTransform(Protocol):
    """One step of a template: reshape a field before the operations, and back after."""

    def to_map(self, node: JsonObject, now_ms: int) -> JsonObject: ...

    def to_array(self, node: JsonObject, now_ms: int) -> JsonObject: ...


@dataclass(frozen=True, slots=True)
class _Keyed:
    """An array field keyed by ``keys`` (empty: an array of strings keyed by the string)."""

    schema_owner: str
    """The aspect whose schema holds the field (the nested aspect for nested templates)."""
    field: str
    keys: tuple[str, ...] = ()

    def to_map(self, node: JsonObject, now_ms: int) -> JsonObject:
        return _array_to_map(node, self.field, self.keys)

    def to_array(self, node: JsonObject, now_ms: int) -> JsonObject:
        scalar = _scalar_item_fields(self.schema_owner, self.field) if self.keys else frozenset()
        return _map_to_array(node, self.field, self.keys, scalar)


@dataclass(frozen=True, slots=True)
class _IfPresent:
    """A transform applied only when the field exists (StructuredPropertyDefinitionTemplate)."""

    inner: _Keyed

    def to_map(self, node: JsonObject, now_ms: int) -> JsonObject:
        return self.inner.to_map(node, now_ms) if self.inner.field in node else node

    def to_array(self, node: JsonObject, now_ms: int) -> JsonObject:
        return self.inner.to_array(node, now_ms) if self.inner.field in node else node


@dataclass(frozen=True, slots=True)
class _AuditStampIfMissing:
    """GlossaryTermsTemplate sets its required (deprecated) ``auditStamp`` before and after."""

    field: str = "auditStamp"

    def to_map(self, node: JsonObject, now_ms: int) -> JsonObject:
        if node.get(self.field) is None:
            return {**node, self.field: {"actor": SYSTEM_ACTOR, "time": now_ms}}
        return node

    def to_array(self, node: JsonObject, now_ms: int) -> JsonObject:
        return self.to_map(node, now_ms)


@dataclass(frozen=True, slots=True)
class _InObject:
    """Transforms applied inside an object field, created when absent (FormInfo ``actors``)."""

    field: str
    inner: tuple[_FieldTransform, ...]

    def to_map(self, node: JsonObject, now_ms: int) -> JsonObject:
        return {**node, self.field: _run_all(self._sub(node), self.inner, now_ms, forward=True)}

    def to_array(self, node: JsonObject, now_ms: int) -> JsonObject:
        return {**node, self.field: _run_all(self._sub(node), self.inner, now_ms, forward=False)}

    def _sub(self, node: JsonObject) -> JsonObject:
        sub = node.get(self.field, {})
        if not isinstance(sub, dict):
            raise PatchError(f"{self.field} is {_kind(sub)}; GMS expects an object there")
        return sub


@dataclass(frozen=True, slots=True)
class _PerElement:
    """EditableSchemaMetadataTemplate: a keyed array whose elements hold nested templates.

    ``editableSchemaFieldInfo`` is keyed by ``fieldPath``; inside each element ``globalTags``
    and ``glossaryTerms`` are reshaped by their own templates, so
    ``/editableSchemaFieldInfo/<fieldPath>/globalTags/tags/<tag urn>`` addresses one tag.
    """

    keyed: _Keyed
    nested: tuple[tuple[str, tuple[_FieldTransform, ...]], ...]

    def to_map(self, node: JsonObject, now_ms: int) -> JsonObject:
        node = self.keyed.to_map(node, now_ms)
        for element in node[self.keyed.field].values():
            self._each(element, now_ms, forward=True)
        return node

    def to_array(self, node: JsonObject, now_ms: int) -> JsonObject:
        node = self.keyed.to_array(node, now_ms)
        for element in node[self.keyed.field]:
            if isinstance(element, dict):
                self._each(element, now_ms, forward=False)
        return node

    def _each(self, element: JsonObject, now_ms: int, *, forward: bool) -> None:
        for field, transforms in self.nested:
            if element.get(field) is None:
                continue
            sub = element[field]
            if not isinstance(sub, dict):
                raise PatchError(
                    f"{self.keyed.field}/{element.get(self.keyed.keys[0], '')}/{field} is "
                    f"{_kind(sub)}; GMS expects an object there"
                )
            element[field] = _run_all(sub, transforms, now_ms, forward=forward)


@dataclass(frozen=True, slots=True)
class _AllowedValues:
    """StructuredPropertyDefinitionTemplate's ``allowedValues``.

    Keyed by ``value␟string`` or ``value␟double`` (the member of the first element's value
    union) going in, and flattened with the key ``value`` coming out, as the template does.
    """

    field: str = "allowedValues"

    def to_map(self, node: JsonObject, now_ms: int) -> JsonObject:
        if self.field not in node:
            return node
        values = node[self.field]
        if not isinstance(values, list):
            raise PatchError(f"{self.field} is {_kind(values)}; GMS expects an array there")
        key = "value"
        if values:
            first = values[0].get("value") if isinstance(values[0], dict) else None
            if not isinstance(first, dict) or not first:
                raise PatchError(f"{self.field}[0] has no value; GMS cannot key the array")
            key = f"value{_UNIT_SEPARATOR}{next(iter(first))}"
        return _array_to_map(node, self.field, (key,))

    def to_array(self, node: JsonObject, now_ms: int) -> JsonObject:
        if self.field not in node:
            return node
        scalar = _scalar_item_fields("propertyDefinition", self.field)
        return _map_to_array(node, self.field, ("value",), scalar)


def _run_all(
    node: JsonObject, transforms: Sequence[_FieldTransform], now_ms: int, *, forward: bool
) -> JsonObject:
    for transform in transforms:
        node = transform.to_map(node, now_ms) if forward else transform.to_array(node, now_ms)
    return node


# --- fine-grained lineage (FineGrainedLineageTemplateHelper) -----------------------------------

_NONE = "NONE"
_DEFAULT_CONFIDENCE = 1.0


def _java_float(value: Any) -> float:
    """A JSON number as Java's ``JsonNode.floatValue()`` then written back by Jackson.

    GMS holds confidence scores as 32-bit floats and writes them with ``Float.toString``
    (shortest decimal that round-trips in 32 bits), so 0.123456789 comes back as 0.12345679.
    Non-numbers read as 0.0, as Jackson's ``floatValue()`` of a non-numeric node does.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    bits = struct.pack(">f", float(value))
    single = struct.unpack(">f", bits)[0]
    for digits in range(1, 10):
        text = f"{single:.{digits}g}"
        if struct.pack(">f", float(text)) == bits:
            return float(text)
    return float(single)


def _java_string_hash(text: str) -> int:
    """``String.hashCode()`` over UTF-16 code units, as an unsigned 32-bit value."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h


def _java_hash_map_order(keys: Sequence[str]) -> list[str]:
    """The iteration order of a ``java.util.HashMap`` filled with ``keys`` (distinct) in order.

    GMS collects a lineage's upstream urns with ``Collectors.toMap`` (a HashMap) before putting
    them in the JSON map, so upstreams already stored come back in hash-bucket order. Buckets
    are ``(h ^ h >>> 16) & (capacity - 1)``; within one bucket entries keep insertion order
    (resizes split buckets preserving it). Tree bins (9+ keys in one bucket) are not modelled.
    """
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)


def _entity_type(urn: str) -> str:
    parts = urn.split(":", 3)
    if len(parts) < 4 or parts[0] != "urn" or parts[1] != "li":
        raise PatchError(f"fineGrainedLineages: {urn!r} is not an urn")
    return parts[2]


def _lineages_to_map(lineages: Any, where: str) -> JsonObject:
    """``combineAndTransformFineGrainedLineages``."""
    mapped: JsonObject = {}
    if not isinstance(lineages, list):
        return mapped
    for index, lineage in enumerate(lineages):
        if not isinstance(lineage, dict):
            raise PatchError(f"{where}[{index}] is not an object")
        operation = _key_text(lineage.get("transformOperation", _NONE))
        by_downstream = mapped.setdefault(operation, {})
        downstreams = lineage.get("downstreams")
        if not isinstance(downstreams, list) or len(downstreams) != 1:
            raise PatchError(
                f"{where}[{index}] has {len(downstreams) if isinstance(downstreams, list) else 0}"
                " downstreams; GMS patches only lineages with exactly one downstream"
            )
        score = _java_float(lineage.get("confidenceScore", _DEFAULT_CONFIDENCE))
        upstreams = lineage.get("upstreams")
        # Present-but-null fields read as "null" (JsonNode.asText), absent ones get defaults.
        upstream_type = lineage.get("upstreamType")
        if "upstreamType" not in lineage:
            if isinstance(upstreams, list) and not upstreams:
                raise PatchError(f"{where}[{index}] has an empty upstreams and no upstreamType")
            first = _key_text(upstreams[0]) if isinstance(upstreams, list) else None
            is_dataset = first is not None and _entity_type(first) == "dataset"
            upstream_type = "DATASET" if is_dataset else "FIELD_SET"
        downstream_type = lineage.get("downstreamType", "FIELD")
        query = _key_text(lineage.get("query", _NONE))
        by_query = by_downstream.setdefault(_key_text(downstreams[0]), {})
        by_upstream = by_query.setdefault(query, {})
        if isinstance(upstreams, list):
            distinct = list(dict.fromkeys(_key_text(u) for u in upstreams))
            for upstream in _java_hash_map_order(distinct):
                by_upstream[upstream] = {
                    "confidenceScore": score,
                    "upstreamType": _key_text(upstream_type),
                    "downstreamType": _key_text(downstream_type),
                }
    return mapped


def _object_at(value: Any, where: str) -> JsonObject:
    if not isinstance(value, dict):
        raise PatchError(f"{where} is {_kind(value)}; GMS expects an object there")
    return value


def _map_to_lineages(mapped: Any, where: str) -> Any:
    """``reconstructFineGrainedLineages``."""
    if isinstance(mapped, list):
        return mapped  # the patch replaced the whole array
    lineages: list[JsonObject] = []
    for operation, by_downstream in _object_at(mapped, where).items():
        for downstream, by_query in _object_at(by_downstream, f"{where}/{operation}").items():
            at = f"{where}/{operation}/{downstream}"
            for query, by_upstream in _object_at(by_query, at).items():
                upstreams = _object_at(by_upstream, f"{at}/{query}")
                if not upstreams:
                    continue  # every upstream was removed
                lowest = _DEFAULT_CONFIDENCE
                upstream_type, downstream_type = "FIELD_SET", "FIELD"
                for upstream, value in upstreams.items():
                    value = _object_at(value, f"{at}/{query}/{upstream}")
                    if "confidenceScore" in value:
                        lowest = min(lowest, _java_float(value["confidenceScore"]))
                    upstream_type = _key_text(value.get("upstreamType", upstream_type))
                    downstream_type = _key_text(value.get("downstreamType", downstream_type))
                lineage: JsonObject = {"downstreams": [downstream], "upstreams": list(upstreams)}
                if query.strip() and query != _NONE:
                    lineage["query"] = query
                lineage["upstreamType"] = upstream_type
                lineage["downstreamType"] = downstream_type
                lineage["confidenceScore"] = lowest
                lineage["transformOperation"] = operation
                lineages.append(lineage)
    return lineages


@dataclass(frozen=True, slots=True)
class _FineGrainedLineages:
    field: str = "fineGrainedLineages"

    def to_map(self, node: JsonObject, now_ms: int) -> JsonObject:
        return {**node, self.field: _lineages_to_map(node.get(self.field), self.field)}

    def to_array(self, node: JsonObject, now_ms: int) -> JsonObject:
        return {**node, self.field: _map_to_lineages(node.get(self.field), self.field)}


# --- the templates GMS registers (SnapshotEntityRegistry.populateTemplateEngine) --------------


def _stamp(now_ms: int) -> JsonObject:
    return {"actor": SYSTEM_ACTOR, "time": now_ms}


@dataclass(frozen=True, slots=True)
class _Template:
    default: Callable[[int], JsonObject] | None
    """``getDefault()`` given the time in ms; None where GMS has no sensible default."""
    transforms: tuple[_FieldTransform, ...] = ()


def _edges(aspect: str, *fields: str) -> tuple[_FieldTransform, ...]:
    return tuple(_Keyed(aspect, field, ("destinationUrn",)) for field in fields)


def _strings(aspect: str, *fields: str) -> tuple[_FieldTransform, ...]:
    return tuple(_Keyed(aspect, field) for field in fields)


_GLOBAL_TAGS = (_Keyed("globalTags", "tags", ("tag",)),)
_GLOSSARY_TERMS: tuple[_FieldTransform, ...] = (
    _AuditStampIfMissing(),
    _Keyed("glossaryTerms", "terms", ("urn",)),
)

_TEMPLATES: Mapping[str, _Template] = {
    "ownership": _Template(
        lambda now: {"owners": [], "lastModified": {"time": now, "actor": SYSTEM_ACTOR}},
        (_Keyed("ownership", "owners", ("owner", "type")),),
    ),
    "datasetProperties": _Template(
        lambda now: {"tags": [], "customProperties": {}}, _strings("datasetProperties", "tags")
    ),
    "upstreamLineage": _Template(
        lambda now: {"upstreams": [], "fineGrainedLineages": []},
        (_Keyed("upstreamLineage", "upstreams", ("dataset",)), _FineGrainedLineages()),
    ),
    "documentation": _Template(
        lambda now: {"documentations": []},
        (_Keyed("documentation", "documentations", (f"attribution{_UNIT_SEPARATOR}source",)),),
    ),
    "globalTags": _Template(lambda now: {"tags": []}, _GLOBAL_TAGS),
    "editableSchemaMetadata": _Template(
        lambda now: {
            "created": _stamp(now),
            "lastModified": _stamp(now),
            "editableSchemaFieldInfo": [],
        },
        (
            _PerElement(
                _Keyed("editableSchemaMetadata", "editableSchemaFieldInfo", ("fieldPath",)),
                (("globalTags", _GLOBAL_TAGS), ("glossaryTerms", _GLOSSARY_TERMS)),
            ),
        ),
    ),
    "glossaryTerms": _Template(
        lambda now: {"terms": [], "auditStamp": _stamp(now)}, _GLOSSARY_TERMS
    ),
    "dataFlowInfo": _Template(lambda now: {"customProperties": {}}),
    "dataJobInfo": _Template(lambda now: {"customProperties": {}}),
    "dataProductProperties": _Template(
        lambda now: {"assets": []}, _edges("dataProductProperties", "assets")
    ),
    "chartInfo": _Template(
        lambda now: {
            "description": "",
            "title": "",
            "lastModified": {"created": _stamp(now), "lastModified": _stamp(now)},
            "inputEdges": [],
            "inputs": [],
        },
        _edges("chartInfo", "inputEdges") + _strings("chartInfo", "inputs"),
    ),
    "dashboardInfo": _Template(
        lambda now: {
            "title": "",
            "description": "",
            "lastModified": {"created": _stamp(now), "lastModified": _stamp(now)},
            "chartEdges": [],
            "datasetEdges": [],
            "datasets": [],
            "charts": [],
        },
        _edges("dashboardInfo", "chartEdges", "datasetEdges", "dashboards")
        + _strings("dashboardInfo", "datasets", "charts"),
    ),
    "dataJobInputOutput": _Template(
        lambda now: {
            "inputDatajobEdges": [],
            "inputDatasetEdges": [],
            "outputDatasetEdges": [],
            "fineGrainedLineages": [],
            "inputDatasetFields": [],
            "outputDatasetFields": [],
            "inputDatajobs": [],
            "inputDatasets": [],
            "outputDatasets": [],
        },
        _edges("dataJobInputOutput", "inputDatajobEdges", "inputDatasetEdges", "outputDatasetEdges")
        + _strings("dataJobInputOutput", "inputDatasetFields", "outputDatasetFields")
        + (_FineGrainedLineages(),),
    ),
    "structuredProperties": _Template(
        lambda now: {"properties": []},
        (_Keyed("structuredProperties", "properties", ("propertyUrn",)),),
    ),
    "propertyDefinition": _Template(
        lambda now: {
            "qualifiedName": "",
            "valueType": "urn:li:dataType:datahub.string",
            "entityTypes": [],
        },
        (
            _Keyed("propertyDefinition", "entityTypes"),
            _IfPresent(_Keyed("propertyDefinition", "allowedPlatforms")),
            _AllowedValues(),
        ),
    ),
    "formInfo": _Template(
        lambda now: {"name": ""},
        (
            _Keyed("formInfo", "prompts", ("id",)),
            _InObject("actors", _strings("formInfo", "users", "groups")),
        ),
    ),
    "versionProperties": _Template(None),
    "siblings": _Template(
        lambda now: {"siblings": [], "primary": False}, _strings("siblings", "siblings")
    ),
    "status": _Template(lambda now: {"removed": False}),
    "domains": _Template(lambda now: {"domains": []}, _strings("domains", "domains")),
    "editableDatasetProperties": _Template(lambda now: {}),
    "editableContainerProperties": _Template(lambda now: {}),
    "editableMlModelGroupProperties": _Template(lambda now: {}),
}


def templated_aspects() -> frozenset[str]:
    """The aspects GMS has a patch template for (plain JSON Patch lists apply to these only)."""
    return frozenset(_TEMPLATES)


# --- parsing and applying ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ParsedPatch:
    operations: list[JsonObject]
    array_primary_keys: dict[str, tuple[str, ...]]
    generic: bool
    """True when GMS routes the patch to GenericPatchTemplate (keys given or forced)."""


def _parse(aspect_name: str, patch: object) -> _ParsedPatch:
    where = f"PATCH of {aspect_name}"
    keys: dict[str, tuple[str, ...]] = {}
    force = False
    if isinstance(patch, dict):
        if "patch" not in patch:
            raise PatchError(f"{where}: an object patch needs a 'patch' list of operations")
        # GMS reads the envelope with a plain Jackson ObjectMapper, which fails on unknown
        # properties, both of the envelope and of its operations (PatchOp has op/path/value).
        unknown = sorted(set(patch) - _ENVELOPE_FIELDS)
        if unknown:
            raise PatchError(f"{where}: unknown generic patch field(s) {', '.join(unknown)}")
        raw_ops = patch["patch"]
        raw_keys = patch.get("arrayPrimaryKeys") or {}
        force = patch.get("forceGenericPatch") or False
        if not isinstance(force, bool):
            raise PatchError(f"{where}: forceGenericPatch is {_kind(force)}, not a boolean")
        if not isinstance(raw_keys, dict):
            raise PatchError(f"{where}: arrayPrimaryKeys is {_kind(raw_keys)}, not an object")
        for field, field_keys in raw_keys.items():
            if not isinstance(field_keys, list) or not all(isinstance(k, str) for k in field_keys):
                raise PatchError(f"{where}: arrayPrimaryKeys.{field} is not a list of strings")
            keys[field] = tuple(field_keys)
    elif isinstance(patch, list):
        raw_ops = patch
    else:
        raise PatchError(f"{where}: the patch is {_kind(patch)}, not a list of operations")
    if not isinstance(raw_ops, list):
        raise PatchError(f"{where}: 'patch' is {_kind(raw_ops)}, not a list of operations")
    operations = [_operation(where, index, raw) for index, raw in enumerate(raw_ops)]
    if isinstance(patch, dict):
        for index, operation in enumerate(operations):
            extra = sorted(set(operation) - _ENVELOPE_OP_FIELDS)
            if extra:
                raise PatchError(
                    f"{where}: operation {index} ({_describe(operation)}) has field(s) "
                    f"{', '.join(extra)}, which a generic patch's operations cannot carry"
                )
    return _ParsedPatch(operations, keys, generic=bool(keys) or force)


def _operation(where: str, index: int, raw: Any) -> JsonObject:
    if not isinstance(raw, dict):
        raise PatchError(f"{where}: operation {index} is {_kind(raw)}, not an object")
    name, path = raw.get("op"), raw.get("path")
    if not isinstance(name, str) or name.lower() not in _OPERATIONS:
        raise PatchError(f"{where}: operation {index} has op {name!r}; GMS supports {_op_names()}")
    if not isinstance(path, str):
        raise PatchError(f"{where}: operation {index} ({name}) has no string 'path'")
    # GMS checks the op name upper-cased (PatchOperationType.valueOf); jsonpatch wants it lower.
    # A deep copy, so the result never shares objects with the caller's patch.
    return {**copy.deepcopy(raw), "op": name.lower()}


def _op_names() -> str:
    return ", ".join(sorted(_OPERATIONS))


def _describe(operation: JsonObject) -> str:
    return f"{operation['op']} {operation['path']}"


def _populate_path_objects(doc: JsonObject, operations: Iterable[JsonObject]) -> None:
    """``TemplateUtil.populateTopLevelKeys``: create the objects each operation's path crosses.

    Every segment but the last is created as ``{}`` when missing; for ``remove`` (and for a path
    ending in ``/``) the last one too, which is why removing an absent key is a no-op in GMS.
    A path that crosses a non-object (an array, a string) fails, as the Java cast does.
    """
    for operation in operations:
        segments = operation["path"].split("/")
        through = (
            len(segments)
            if operation["op"] == "remove" or segments[-1] == ""
            else len(segments) - 1
        )
        parent: Any = doc
        for raw in segments[1:through]:
            key = jsonpointer.unescape(raw)
            if not isinstance(parent, dict):
                raise PatchError(
                    f"{_describe(operation)}: the path crosses {_kind(parent)} before {key!r}"
                )
            if key not in parent:
                parent[key] = {}
            parent = parent[key]


def _apply_operations(doc: JsonObject, operations: Sequence[JsonObject]) -> JsonObject:
    for operation in operations:
        try:
            applied = jsonpatch.JsonPatch([operation]).apply(doc, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
            raise PatchError(f"{_describe(operation)}: {error}") from None
        if not isinstance(applied, dict):
            raise PatchError(f"{_describe(operation)}: the aspect became {_kind(applied)}")
        doc = applied
    return doc


def apply_patch(
    aspect_name: str,
    current: dict[str, Any] | None,
    patch: object,
    *,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """Return a NEW aspect JSON: ``current`` (or the aspect's default) with ``patch`` applied.

    Args:
        aspect_name: The aspect's name, e.g. ``"globalTags"``.
        current: The stored aspect in DataHub JSON form (as in the file sink), or None when the
            entity has no such aspect yet. Never mutated.
        patch: The PATCH MCP's aspect: a list of JSON Patch operations, or the generic envelope
            ``{"patch": [...], "arrayPrimaryKeys": {...}, "forceGenericPatch": bool}``.
        now_ms: The time for audit stamps GMS's templates create (absent aspects, glossary
            terms without ``auditStamp``); the wall clock when None.

    Returns:
        The patched aspect JSON, not yet validated against the aspect's schema.

    Raises:
        PatchError: When GMS would refuse the patch: an aspect without a patch template given a
            plain list of operations, an absent aspect without a default, a malformed patch, or
            an operation that fails (``replace``/``test`` of a missing path, a path through an
            array or string, ...). The message is one line naming the operation and path.
    """
    parsed = _parse(aspect_name, patch)
    template = _TEMPLATES.get(aspect_name)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    if current is not None and not isinstance(current, dict):
        raise PatchError(f"PATCH of {aspect_name}: the stored aspect is {_kind(current)}")

    transforms: tuple[_FieldTransform, ...]
    if parsed.generic:
        # PatchItemImpl.applyGenericPatch: the template's default if any, else the empty record.
        transforms = tuple(
            _Keyed(aspect_name, field, keys) for field, keys in parsed.array_primary_keys.items()
        )
        default = template.default if template is not None else None
        start = copy.deepcopy(current) if current is not None else (default(now) if default else {})
    else:
        if template is None:
            raise PatchError(
                f"PATCH of {aspect_name}: GMS has no patch template for this aspect; only a "
                "generic patch (with arrayPrimaryKeys or forceGenericPatch) can change it"
            )
        transforms = template.transforms
        if current is not None:
            start = copy.deepcopy(current)
        elif template.default is not None:
            start = template.default(now)
        else:
            raise PatchError(
                f"PATCH of {aspect_name}: the aspect is absent and GMS has no default for it"
            )

    doc = _run_all(start, transforms, now, forward=True)
    _populate_path_objects(doc, parsed.operations)
    doc = _apply_operations(doc, parsed.operations)
    return _run_all(doc, transforms, now, forward=False)
