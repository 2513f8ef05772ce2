"""GMS's aspect templates for PATCH: each aspect's default and how its arrays become maps.

Ported from ``entity-registry/.../aspect/patch/template/**`` (``AspectTemplateEngine``'s
registered templates, ``ArrayMergingTemplate``, ``CompoundKeyTemplate``,
``FineGrainedLineageTemplateHelper``). A template ``transform``s the stored (or default) aspect
so a JSON Patch can address array elements by key, and ``rebase``s the patched document back
into the aspect's shape:

- a keyed array becomes nested maps, one level per key (``attribution␟source`` is the nested
  field ``attribution.source``; a missing key is ``""``); elements with equal keys merge;
- an array of strings (no keys) becomes a map from each string to itself;
- ``fineGrainedLineages`` becomes ``transformOperation → downstream → query → upstream →
  {confidenceScore, upstreamType, downstreamType}`` (patches address
  ``/fineGrainedLineages/<op>/<downstream>/<query>/<upstream>``);
- ``editableSchemaMetadata`` applies the ``globalTags``/``glossaryTerms`` templates inside
  each field, and ``glossaryTerms`` always gets the auditStamp its schema requires.

Where the newest GMS keys ``glossaryTerms`` by ``(urn, attribution␟source)``, this keys it by
``urn`` (the GMS releases acryl-datahub 1.7's field-level ``add_term`` paths target: those
paths stop at the urn, and under the two-key template they rebuild into an invalid array).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]
Key = tuple[str, ...]  # a nested field path inside an array element

SEPARATOR = "\u241f"
SYSTEM_ACTOR = "urn:li:corpuser:__datahub_system"
FINE_GRAINED = "fineGrainedLineages"
_NONE = "NONE"  # the transformOperation / query key of lineages without one


class NoDefaultError(ValueError):
    """The aspect has no template default (GMS: ``getDefault`` is unsupported)."""


def _stamp() -> Json:
    return {"time": int(time.time() * 1000), "actor": SYSTEM_ACTOR}


def _change_stamps() -> Json:
    stamp = _stamp()
    return {"created": stamp, "lastModified": dict(stamp)}


@dataclass(frozen=True)
class Template:
    """One aspect's PATCH template.

    ``arrays``: keyed array fields and their keys, outermost first (``()`` for string arrays).
    ``if_present``: of those, the ones only transformed when the aspect has them.
    ``fine_grained``: the aspect has ``fineGrainedLineages`` keyed as GMS's helper keys them.
    ``audit_stamp``: add the (deprecated, required) ``auditStamp`` when missing.
    ``element_templates``: array field -> element field -> the template applied inside.
    ``record_templates``: record field -> the template applied to it (``formInfo.actors``).
    ``keyed_by_first``: arrays keyed by ``value.<the first element's value field>``
    (``StructuredPropertyDefinitionTemplate``'s ``allowedValues``: ``string`` or ``number``).
    """

    default: Callable[[], Json]
    arrays: Mapping[str, tuple[Key, ...]] = field(default_factory=dict)
    if_present: frozenset[str] = frozenset()
    fine_grained: bool = False
    audit_stamp: bool = False
    element_templates: Mapping[str, Mapping[str, Template]] = field(default_factory=dict)
    record_templates: Mapping[str, Template] = field(default_factory=dict)
    keyed_by_first: frozenset[str] = frozenset()

    def transform(self, doc: Json) -> Json:
        """The stored aspect with its arrays as maps (``doc`` is not changed)."""
        out = copy.deepcopy(doc)
        if self.audit_stamp and out.get("auditStamp") is None:
            out["auditStamp"] = _stamp()
        for name, keys in self.arrays.items():
            if name in self.if_present and out.get(name) is None:
                continue
            if name in self.keyed_by_first:
                keys = _first_value_key(out.get(name))
            out[name] = _to_map(out.get(name), keys)
        if self.fine_grained:
            out[FINE_GRAINED] = _fine_grained_to_map(out.get(FINE_GRAINED))
        for name, inner in self.element_templates.items():
            for element in out[name].values() if isinstance(out.get(name), dict) else []:
                _apply_inner(element, inner, transform=True)
        for name, template in self.record_templates.items():
            if isinstance(out.get(name), dict):
                out[name] = template.transform(out[name])
        return out

    def rebase(self, doc: Json) -> Json:
        """The patched document back in the aspect's shape."""
        out = doc
        if self.audit_stamp and out.get("auditStamp") is None:
            out["auditStamp"] = _stamp()
        for name, keys in self.arrays.items():
            if name in self.if_present and out.get(name) is None:
                continue
            out[name] = _to_array(out.get(name), keys)
        if self.fine_grained:
            out[FINE_GRAINED] = _fine_grained_to_array(out.get(FINE_GRAINED))
        for name, inner in self.element_templates.items():
            for element in out.get(name) or []:
                _apply_inner(element, inner, transform=False)
        for name, template in self.record_templates.items():
            if isinstance(out.get(name), dict):
                out[name] = template.rebase(out[name])
        return out


def _first_value_key(array: Any) -> tuple[Key, ...]:
    first = array[0] if isinstance(array, list) and array else None
    value = first.get("value") if isinstance(first, dict) else None
    if isinstance(value, dict) and value:
        return (("value", next(iter(value))),)
    return (("value",),)


def _apply_inner(element: Any, inner: Mapping[str, Template], *, transform: bool) -> None:
    if not isinstance(element, dict):
        return
    for name, template in inner.items():
        if isinstance(element.get(name), dict):
            value = element[name]
            element[name] = template.transform(value) if transform else template.rebase(value)


def generic(array_keys: Mapping[str, list[str]]) -> Template:
    """GenericPatchTemplate: the patch names its keyed arrays; the default is an empty record."""
    return Template(
        default=dict,
        arrays={
            name: tuple(tuple(k.split(SEPARATOR)) for k in keys)
            for name, keys in array_keys.items()
        },
    )


# --- arrays as maps ------------------------------------------------------------------------


def _key_of(element: Any, key: Key) -> str:
    value = element
    for part in key:
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"  # Jackson's asText
    return str(value)


def _to_map(array: Any, keys: tuple[Key, ...]) -> Json:
    mapped: Json = {}
    for element in array if isinstance(array, list) else []:
        if not keys:  # an array of strings: each string keys itself
            mapped[element if isinstance(element, str) else ""] = element
            continue
        leaf = mapped
        for key in keys:
            leaf = leaf.setdefault(_key_of(element, key), {})
        if isinstance(element, dict):
            leaf.update(copy.deepcopy(element))  # elements with equal keys merge
    return mapped


def _to_array(mapped: Any, keys: tuple[Key, ...]) -> list[Any]:
    if isinstance(mapped, list):
        return mapped  # a ``replace`` of the whole field
    if mapped is None:
        return []  # the whole field was removed
    if not keys:
        return list(mapped.values()) if isinstance(mapped, dict) else [mapped]
    return _merge(mapped, keys)


def _merge(node: Any, keys: tuple[Key, ...]) -> list[Any]:
    if not keys:
        return list(node) if isinstance(node, list) else [node]
    key, rest = keys[0], keys[1:]
    merged: list[Any] = []
    if isinstance(node, dict):
        for value, child in node.items():
            elements = _merge(child, rest)
            if value and len(key) == 1:  # a nested key is never put back (GMS's reinjectKey)
                for element in elements:
                    if isinstance(element, dict) and key[0] not in element:
                        element[key[0]] = value
            merged += elements
    elif isinstance(node, list):
        for child in node:
            merged += _merge(child, rest)
    return merged


# --- fine-grained lineage ------------------------------------------------------------------


def _present(node: Json, name: str) -> bool:
    # Pegasus data never holds null: a null field read from Lite is an absent one.
    return node.get(name) is not None


def _fine_grained_to_map(lineages: Any) -> Json:
    mapped: Json = {}
    for node in lineages if isinstance(lineages, list) else []:
        if not isinstance(node, dict):
            continue
        operation = (
            str(node["transformOperation"]) if _present(node, "transformOperation") else _NONE
        )
        by_downstream = mapped.setdefault(operation, {})
        downstreams = node.get("downstreams")
        if not isinstance(downstreams, list) or len(downstreams) != 1:
            raise ValueError(
                "Patching not supported on fine grained lineages with not exactly one "
                "downstream. Current fine grained lineage implementation is downstream derived "
                "and patches are keyed on the root of this derivation."
            )
        score = float(node["confidenceScore"]) if _present(node, "confidenceScore") else 1.0
        upstreams = node.get("upstreams") if isinstance(node.get("upstreams"), list) else None
        query = str(node["query"]) if _present(node, "query") else _NONE
        upstream_type = node.get("upstreamType")
        if upstream_type is None:
            first = str(upstreams[0]) if upstreams else ""
            upstream_type = "DATASET" if first.startswith("urn:li:dataset:") else "FIELD_SET"
        downstream_type = node.get("downstreamType") or "FIELD"
        by_query = by_downstream.setdefault(str(downstreams[0]), {}).setdefault(query, {})
        for upstream in upstreams or []:
            by_query[str(upstream)] = {
                "confidenceScore": score,
                "upstreamType": upstream_type,
                "downstreamType": downstream_type,
            }
    return mapped


def _fine_grained_to_array(mapped: Any) -> list[Any]:
    if isinstance(mapped, list):
        return mapped  # a ``replace`` of the whole field
    if not isinstance(mapped, dict):
        return []
    lineages: list[Any] = []
    for operation, by_downstream in mapped.items():
        for downstream, by_query in _object(by_downstream, operation).items():
            for query, by_upstream in _object(by_query, downstream).items():
                upstreams = _object(by_upstream, query)
                if upstreams:  # a lineage whose upstreams were all removed is dropped
                    lineages.append(_lineage(operation, downstream, query, upstreams))
    return lineages


def _lineage(operation: str, downstream: str, query: str, upstreams: Json) -> Json:
    score, upstream_type, downstream_type = 1.0, "FIELD_SET", "FIELD"
    for upstream, value in upstreams.items():
        value = _object(value, upstream)
        if _present(value, "confidenceScore"):
            score = min(score, float(value["confidenceScore"]))  # the lowest score wins
        upstream_type = str(value.get("upstreamType") or upstream_type)  # the last one wins
        downstream_type = str(value.get("downstreamType") or downstream_type)
    lineage: Json = {"downstreams": [downstream], "upstreams": list(upstreams)}
    if query.strip() and query != _NONE:
        lineage["query"] = query
    lineage.update(
        upstreamType=upstream_type,
        downstreamType=downstream_type,
        confidenceScore=score,
        transformOperation=operation,
    )
    return lineage


def _object(node: Any, where: str) -> Json:
    if not isinstance(node, dict):
        raise ValueError(f"fineGrainedLineages/.../{where} is not an object: {node!r}")
    return node


# --- the registered templates --------------------------------------------------------------

_EDGE: tuple[Key, ...] = (("destinationUrn",),)
_STRINGS: tuple[Key, ...] = ()


def _empty(*arrays: str, **extra: Callable[[], Any]) -> Callable[[], Json]:
    def default() -> Json:
        doc: Json = {name: [] for name in arrays}
        doc.update({name: make() for name, make in extra.items()})
        return doc

    return default


def _no_default() -> Json:
    raise NoDefaultError("no sensible default")


GLOBAL_TAGS = Template(default=_empty("tags"), arrays={"tags": (("tag",),)})
GLOSSARY_TERMS = Template(
    default=_empty("terms", auditStamp=_stamp), arrays={"terms": (("urn",),)}, audit_stamp=True
)
_FORM_ACTORS = Template(
    default=dict,
    arrays={"users": _STRINGS, "groups": _STRINGS},
    if_present=frozenset({"users", "groups"}),
)

TEMPLATES: dict[str, Template] = {
    "globalTags": GLOBAL_TAGS,
    "glossaryTerms": GLOSSARY_TERMS,
    "structuredProperties": Template(
        default=_empty("properties"),
        arrays={"properties": (("propertyUrn",), ("attribution", "source"))},
    ),
    "ownership": Template(
        default=_empty("owners", lastModified=_stamp),
        arrays={"owners": (("owner",), ("type",), ("typeUrn",))},
    ),
    "upstreamLineage": Template(
        default=_empty("upstreams", FINE_GRAINED),
        arrays={"upstreams": (("dataset",),)},
        fine_grained=True,
    ),
    "editableSchemaMetadata": Template(
        default=_empty("editableSchemaFieldInfo", created=_stamp, lastModified=_stamp),
        arrays={"editableSchemaFieldInfo": (("fieldPath",),)},
        element_templates={
            "editableSchemaFieldInfo": {"globalTags": GLOBAL_TAGS, "glossaryTerms": GLOSSARY_TERMS}
        },
    ),
    "institutionalMemory": Template(default=_empty("elements"), arrays={"elements": (("url",),)}),
    "domains": Template(default=_empty("domains"), arrays={"domains": _STRINGS}),
    "siblings": Template(
        default=_empty("siblings", primary=lambda: False), arrays={"siblings": _STRINGS}
    ),
    "dataJobInputOutput": Template(
        default=_empty(
            "inputDatajobEdges",
            "inputDatasetEdges",
            "outputDatasetEdges",
            FINE_GRAINED,
            "inputDatasetFields",
            "outputDatasetFields",
            "inputDatajobs",
            "inputDatasets",
            "outputDatasets",
        ),
        arrays={
            "inputDatajobEdges": _EDGE,
            "inputDatasetEdges": _EDGE,
            "outputDatasetEdges": _EDGE,
            "inputDatasetFields": _STRINGS,
            "outputDatasetFields": _STRINGS,
        },
        fine_grained=True,
    ),
    "dataProcessInstanceInput": Template(
        default=_empty("inputs"), arrays={"inputEdges": _EDGE, "inputs": _STRINGS}
    ),
    "dataProcessInstanceOutput": Template(
        default=_empty("outputs"), arrays={"outputEdges": _EDGE, "outputs": _STRINGS}
    ),
    "dataProductProperties": Template(default=_empty("assets"), arrays={"assets": _EDGE}),
    "datasetProperties": Template(
        default=_empty("tags", customProperties=dict), arrays={"tags": _STRINGS}
    ),
    "chartInfo": Template(
        default=_empty(
            "inputEdges", "inputs", title=str, description=str, lastModified=_change_stamps
        ),
        arrays={"inputEdges": _EDGE, "inputs": _STRINGS},
    ),
    "dashboardInfo": Template(
        default=_empty(
            "chartEdges",
            "datasetEdges",
            "datasets",
            "charts",
            title=str,
            description=str,
            lastModified=_change_stamps,
        ),
        arrays={
            "chartEdges": _EDGE,
            "datasetEdges": _EDGE,
            "datasets": _STRINGS,
            "charts": _STRINGS,
        },
    ),
    "dataFlowInfo": Template(default=_empty(customProperties=dict)),
    "dataJobInfo": Template(default=_empty(customProperties=dict)),
    "propertyDefinition": Template(
        default=_empty(
            "entityTypes", qualifiedName=str, valueType=lambda: "urn:li:dataType:datahub.string"
        ),
        arrays={
            "entityTypes": _STRINGS,
            "allowedPlatforms": _STRINGS,
            "allowedValues": (("value", "string"),),  # rebuilt by one level, never re-keyed
        },
        if_present=frozenset({"allowedPlatforms", "allowedValues"}),
        keyed_by_first=frozenset({"allowedValues"}),
    ),
    "formInfo": Template(
        default=_empty(name=str),
        arrays={"prompts": (("id",),)},
        record_templates={"actors": _FORM_ACTORS},
    ),
    "versionProperties": Template(default=_no_default),
    "editableDatasetProperties": Template(default=dict),
    "editableContainerProperties": Template(default=dict),
    "editableMlModelGroupProperties": Template(default=dict),
}
