"""DataHub's JSON Patch for ``PATCH`` writes (OpenAPI v3 and Rest.li ``changeType: PATCH``).

Applied as GMS applies it (``entity-registry/.../aspect/patch/template``: ``Template``,
``CompoundKeyTemplate``, ``GenericPatchTemplate``, ``ArrayMergingTemplate``, ``TemplateUtil``):

1. The current aspect, or the default when there is none: an empty record for a generic patch
   (one that names ``arrayPrimaryKeys``), the aspect template's default otherwise.
2. Each keyed array field becomes nested maps, one level per key (``attribution␟source`` is
   the nested field ``attribution.source``; a missing key is ``""``). Elements with the same
   keys are merged into one. Generic patches name their fields and keys; template patches use
   the aspect template's (``GlobalTagsTemplate``: ``tags`` by ``tag``;
   ``StructuredPropertiesTemplate``: ``properties`` by ``propertyUrn`` then source...).
3. ``populateTopLevelKeys``: every intermediate object on each operation's path is created
   when missing (for ``remove``, the target too, so removing what is not there is a no-op).
   The path is split as Java's ``String.split`` does, which drops trailing empty segments: an
   ``add`` to ``/properties/<urn>/`` on an entity without that property fails, as it does on
   GMS releases before datahub-project/datahub#17449.
4. RFC 6902 ``add``/``remove``/``replace``, strictly (a missing parent or target fails).
5. The maps become arrays again, in map order (grouped by the first key); a scalar key that
   only lived in the path is put back into its element.

A failure raises ValueError: the server answers it with 400.
"""

from __future__ import annotations

import copy
from typing import Any

Json = dict[str, Any]
Key = tuple[str, ...]  # a nested field path inside an array element
Keys = dict[str, list[Key]]  # array field -> its primary keys, outermost first

SEPARATOR = "\u241f"
_SOURCE: Key = ("attribution", "source")

# The aspects GMS has a template for (AspectTemplateEngine.SUPPORTED_TEMPLATES, plus the
# dataProcessInstance ones), with the keyed array fields each template transforms.
TEMPLATES: dict[str, Keys] = {
    "globalTags": {"tags": [("tag",)]},
    "glossaryTerms": {"terms": [("urn",)]},
    "structuredProperties": {"properties": [("propertyUrn",), _SOURCE]},
    "ownership": {"owners": [("owner",), ("type",)]},
    "upstreamLineage": {"upstreams": [("dataset",)]},
    "editableSchemaMetadata": {"editableSchemaFieldInfo": [("fieldPath",)]},
    "institutionalMemory": {"elements": [("url",)]},
    "domains": {"domains": []},
    "siblings": {"siblings": []},
    "dataJobInputOutput": {
        "inputDatasetEdges": [("destinationUrn",)],
        "outputDatasetEdges": [("destinationUrn",)],
        "inputDatajobEdges": [("destinationUrn",)],
        "inputDatasets": [],
        "outputDatasets": [],
        "inputDatajobs": [],
    },
    "dataProcessInstanceInput": {"inputEdges": [("destinationUrn",)], "inputs": []},
    "dataProcessInstanceOutput": {"outputEdges": [("destinationUrn",)], "outputs": []},
    "dataProductProperties": {"assets": [("destinationUrn",)]},
    "datasetProperties": {},
    "editableDatasetProperties": {},
    "dataFlowInfo": {},
    "dataJobInfo": {},
    "chartInfo": {},
    "dashboardInfo": {},
    "propertyDefinition": {},
    "formInfo": {},
    "versionProperties": {},
    "editableContainerProperties": {},
    "editableMlModelGroupProperties": {},
}


def apply_patch(
    aspect: str,
    current: Json | None,
    operations: list[Json],
    array_keys: dict[str, list[str]] | None = None,
    *,
    force_generic: bool = False,
) -> Json:
    """The value of ``aspect`` after ``operations``, from ``current`` (None: none stored).

    ``array_keys`` are a generic patch's ``arrayPrimaryKeys``; without them (and without
    ``forceGenericPatch``) the aspect's template decides, and an aspect without one refuses
    the patch, as GMS does.
    """
    if array_keys or force_generic:
        keys: Keys = {
            field: [tuple(k.split(SEPARATOR)) for k in declared]
            for field, declared in (array_keys or {}).items()
        }
        default: Json = {}
    elif aspect in TEMPLATES:
        keys = TEMPLATES[aspect]
        default = {field: [] for field in keys}
    else:
        raise ValueError(f"ChangeType not supported: PATCH for aspect {aspect}")
    doc = copy.deepcopy(current) if current is not None else default
    for field, field_keys in keys.items():
        doc[field] = _to_map(doc.get(field), field_keys)
    for op in operations:
        _populate(doc, op)
    for op in operations:
        _apply(doc, op)
    for field, field_keys in keys.items():
        doc[field] = _to_array(doc.get(field), field_keys)
    return doc


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


def _to_map(array: Any, keys: list[Key]) -> Json:
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


def _to_array(mapped: Any, keys: list[Key]) -> list[Any]:
    if isinstance(mapped, list):
        return mapped  # a ``replace`` of the whole field
    if mapped is None:
        return []
    if not keys:
        return list(mapped.values()) if isinstance(mapped, dict) else [mapped]
    return _merge(mapped, keys)


def _merge(node: Any, keys: list[Key]) -> list[Any]:
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


# --- JSON Patch ----------------------------------------------------------------------------


def _decode(step: str) -> str:
    return step.replace("~1", "/").replace("~0", "~")


def _java_split(path: str) -> list[str]:
    """``path.split("/")`` in Java: trailing empty segments are dropped."""
    parts = path.split("/")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _populate(doc: Json, op: Json) -> None:
    """TemplateUtil.populateTopLevelKeys for one operation."""
    kind = str(op.get("op", ""))
    parts = _java_split(str(op.get("path", "")))
    end = len(parts) if kind == "remove" else len(parts) - 1
    parent: Any = doc
    for raw in parts[1:end]:
        step = _decode(raw)
        if not isinstance(parent, dict):
            raise ValueError(f"Cannot patch {op.get('path')}: {step!r} is inside an array")
        parent = parent.setdefault(step, {})


def _apply(doc: Json, op: Json) -> None:
    kind = op.get("op")
    path = str(op.get("path", ""))
    if kind not in ("add", "remove", "replace"):
        raise ValueError(f"Unsupported PATCH operation: `{kind}`")
    if not path.startswith("/"):
        raise ValueError(f"Invalid JSON Pointer {path!r}")
    steps = [_decode(s) for s in path.split("/")[1:]]
    parent: Any = doc
    for step in steps[:-1]:
        parent = _child(parent, step, path)
    last = steps[-1]
    value = copy.deepcopy(op.get("value"))
    if isinstance(parent, dict):
        if kind != "add" and last not in parent:
            raise ValueError(f"The JSON Patch operation '{kind}' failed: {path} does not exist")
        if kind == "remove":
            del parent[last]
        else:
            parent[last] = value
        return
    if not isinstance(parent, list):
        raise ValueError(f"The JSON Patch operation '{kind}' failed: {path} has no parent")
    if kind == "add" and last == "-":
        parent.append(value)
        return
    index = _index(last, len(parent) + (1 if kind == "add" else 0), path)
    if kind == "add":
        parent.insert(index, value)
    elif kind == "remove":
        parent.pop(index)
    else:
        parent[index] = value


def _child(node: Any, step: str, path: str) -> Any:
    if isinstance(node, dict) and step in node:
        return node[step]
    if isinstance(node, list):
        return node[_index(step, len(node), path)]
    raise ValueError(f"JSON Pointer {path} refers to a non-existing value")


def _index(step: str, size: int, path: str) -> int:
    if not step.isdigit() or int(step) >= size:
        raise ValueError(f"JSON Pointer {path}: {step!r} is not an index of the array")
    return int(step)
