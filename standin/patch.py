"""DataHub's JSON Patch for ``PATCH`` writes (OpenAPI v3 and Rest.li ``changeType: PATCH``).

Applied as GMS applies it (``entity-registry/.../aspect/patch/template``: ``Template``,
``CompoundKeyTemplate``, ``GenericPatchTemplate``, ``ArrayMergingTemplate``, ``TemplateUtil``):

1. The current aspect, or the default when there is none: an empty record for a generic patch
   (one that names ``arrayPrimaryKeys``), the aspect template's default otherwise.
2. The template turns keyed arrays into maps (see :mod:`standin.patch_templates`, which
   holds every template GMS registers, ``fineGrainedLineages`` and nested field templates
   included). Generic patches name their fields and keys.
3. ``populateTopLevelKeys``: every intermediate object on each operation's path is created
   when missing (for ``remove``, the target too, so removing what is not there is a no-op).
   The path is split as Java's ``String.split`` does, which drops trailing empty segments: an
   ``add`` to ``/properties/<urn>/`` on an entity without that property fails, as it does on
   GMS releases before datahub-project/datahub#17449.
4. RFC 6902 ``add``/``remove``/``replace``, strictly (a missing parent or target fails).
5. The template turns the maps back into arrays, in map order (grouped by the first key); a
   scalar key that only lived in the path is put back into its element.

A failure raises ValueError: the server answers it with 400.
"""

from __future__ import annotations

import copy
from typing import Any

from standin.patch_templates import TEMPLATES, NoDefaultError, Template, generic

Json = dict[str, Any]


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
    template: Template
    if array_keys or force_generic:
        template = generic(array_keys or {})
    elif aspect in TEMPLATES:
        template = TEMPLATES[aspect]
    else:
        raise ValueError(f"ChangeType not supported: PATCH for aspect {aspect}")
    if current is None:
        try:
            current = template.default()
        except NoDefaultError as exc:
            raise ValueError(f"Cannot PATCH {aspect}: none stored and {exc}") from exc
    doc = template.transform(current)
    for op in operations:
        _populate(doc, op)
    for op in operations:
        _apply(doc, op)
    return template.rebase(doc)


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
