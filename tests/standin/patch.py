"""DataHub-flavoured JSON Patch for ``PATCH`` writes (OpenAPI v3 and Rest.li ``changeType: PATCH``).

GMS treats some arrays as maps keyed by element fields, so ``/tags//urn:li:tag:PII`` addresses
the tag association whose ``attribution.source`` is empty and whose ``tag`` is that urn.
acryl-datahub 1.7 sends the keys with the patch (``arrayPrimaryKeys``, nested fields joined by
U+241F); older builders rely on GMS's per-aspect templates, approximated by ``_TEMPLATE_KEYS``.
Arrays without keys take numeric indexes, ``-`` to append, or (arrays of strings) the string.
"""

from __future__ import annotations

import copy
from typing import Any

Json = dict[str, Any]
Key = tuple[str, ...]  # a nested field path inside an array element

_SEPARATOR = "\u241f"
_TEMPLATE_KEYS: dict[str, list[Key]] = {
    "tags": [("tag",)],
    "terms": [("urn",)],
    "owners": [("owner",), ("type",)],
    "properties": [("propertyUrn",)],
    "editableSchemaFieldInfo": [("fieldPath",)],
    "upstreams": [("dataset",)],
    "elements": [("url",)],
    "inputDatasetEdges": [("destinationUrn",)],
    "outputDatasetEdges": [("destinationUrn",)],
    "inputDatajobEdges": [("destinationUrn",)],
    "inputEdges": [("destinationUrn",)],
    "outputEdges": [("destinationUrn",)],
    "relatedAssets": [("asset",)],
    "relatedDocuments": [("document",)],
}


def _unescape(step: str) -> str:
    return step.replace("~1", "/").replace("~0", "~")


def _get(item: Any, key: Key) -> str:
    for part in key:
        item = item.get(part) if isinstance(item, dict) else None
    return "" if item is None else str(item)


def _matches(item: Any, keys: list[Key], values: list[str]) -> bool:
    if not isinstance(item, dict):
        return bool(values) and str(item) == values[0]
    return all(_get(item, k) == v for k, v in zip(keys, values, strict=False))


def _new_element(keys: list[Key], values: list[str]) -> Json:
    element: Json = {}
    for key, value in zip(keys, values, strict=False):
        if value == "":
            continue
        node = element
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = value
    return element


def apply_patch(
    current: Json | None, operations: list[Json], array_keys: dict[str, list[str]] | None = None
) -> Json:
    """Apply ``operations`` (add/remove/replace) to a copy of ``current``."""
    keys = dict(_TEMPLATE_KEYS)
    for field, declared in (array_keys or {}).items():
        keys[field.rsplit("/", 1)[-1]] = [tuple(k.split(_SEPARATOR)) for k in declared]
    doc: Json = copy.deepcopy(current) if current else {}
    for op in operations:
        steps = [_unescape(s) for s in str(op.get("path", "")).split("/")[1:]]
        _apply(doc, steps, op.get("op", "add"), op.get("value"), "", keys)
    return doc


def _apply(
    node: Any, steps: list[str], op: str, value: Any, parent: str, keys: dict[str, list[Key]]
) -> None:
    if not steps:
        return
    step, rest = steps[0], steps[1:]
    if isinstance(node, dict):
        if not rest:
            if op == "remove":
                node.pop(step, None)
            else:
                node[step] = value
            return
        if step not in node:
            if op == "remove":
                return
            node[step] = [] if step in keys or rest[0].isdigit() or rest[0] == "-" else {}
        _apply(node[step], rest, op, value, step, keys)
        return
    if not isinstance(node, list):
        return
    array_keys = keys.get(parent)
    if array_keys is None:  # a plain array: index, "-" or the string itself
        if step == "-" and op != "remove":
            node.append(value)
            return
        if step.isdigit():
            index: int | None = int(step)
        else:
            index = next((i for i, x in enumerate(node) if str(x) == step), None)
        if not rest:
            if op == "remove":
                if index is not None and index < len(node):
                    node.pop(index)
            elif index is None:
                node.append(value)
            else:
                node[index] = value
        elif index is not None:
            _apply(node[index], rest, op, value, "", keys)
        return
    width = len(array_keys)
    values, rest = steps[:width], steps[width:]
    found = [i for i, item in enumerate(node) if _matches(item, array_keys, values)]
    if not rest:
        if op == "remove":
            for i in reversed(found):
                node.pop(i)
        elif found:
            node[found[0]] = value
        else:
            node.append(value)
        return
    if not found:
        if op == "remove":
            return
        node.append(_new_element(array_keys, values))
        found = [len(node) - 1]
    _apply(node[found[0]], rest, op, value, "", keys)
