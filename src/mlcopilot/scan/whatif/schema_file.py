"""``impact --schema-file``: the proposed schema of a dataset, read from a file.

Accepted, told apart by their keys:

- a DataHub ``schemaMetadata`` aspect (an object with ``fields``);
- an MCP holding one (``aspectName: schemaMetadata`` with ``aspect.json`` or ``aspect.value``),
  an MCE holding one (``proposedSnapshot`` whose aspects include a ``SchemaMetadata``), or a
  list of MCPs and MCEs such as ``mlcopilot catalog load`` reads: the record for the dataset
  is taken;
- a dbt ``manifest.json`` (``nodes`` and ``metadata.dbt_schema_version``): the model, seed,
  snapshot or source whose ``database.schema.alias`` (or its tail) is the dataset's name. Its
  ``columns`` are the proposed schema, in their order: dbt lists only the columns documented in
  the project's YAML, so a column it does not list is taken as dropped. A column without a
  ``data_type`` keeps its current type, one without a description its current description.

The catalog merges the annotations edited in DataHub's UI (``editableSchemaMetadata``) into
the schema it reads; a proposed schema does not carry them, and they survive a change of the
other aspect. So a proposed column keeps the tags, terms and description the current column
of the same path has (a renamed column does not: the UI's edits are keyed by field path).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mlcopilot.catalog.aspects import schema_from_aspects
from mlcopilot.errors import InputError
from mlcopilot.model import Schema, SchemaField, Urn
from mlcopilot.scan.whatif.changes import logical_type_of

_DBT_RESOURCES = ("model", "seed", "snapshot", "source")


def read_schema_file(path: Path, dataset: Urn, current: Schema | None) -> Schema:
    """The proposed schema of ``dataset`` in ``path`` (see the module for the formats).

    Raises:
        InputError: The file cannot be read, is not JSON, or holds no schema for ``dataset``;
            the message names the file and why.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--schema-file {path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"--schema-file {path}: not UTF-8 text ({exc.reason})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"--schema-file {path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    try:
        if _is_manifest(data):
            return _dbt_schema(data, dataset, current)
        return _with_annotations(_schema_of(_schema_aspect(data, dataset)), current)
    except _NoSchema as exc:
        raise InputError(f"--schema-file {path}: {exc}") from exc


class _NoSchema(Exception):
    """The file's content holds no usable schema for the dataset (the message says why)."""


def is_dbt_manifest(data: object) -> bool:
    """Whether ``data`` (parsed JSON) is a dbt ``manifest.json``."""
    return _is_manifest(data)


def dbt_node(manifest: Mapping[str, Any], dataset: Urn) -> Mapping[str, Any] | None:
    """The dbt model, seed, snapshot or source that is ``dataset``'s relation, or None.

    Matched as ``--schema-file`` matches it (``database.schema.alias``, then ever shorter
    tails); None when no node, or several, match.
    """
    try:
        return _dbt_node(manifest, dataset)
    except _NoSchema:
        return None


def _is_manifest(data: object) -> bool:
    return (
        isinstance(data, Mapping)
        and isinstance(data.get("nodes"), Mapping)
        and isinstance(data.get("metadata"), Mapping)
        and "dbt_schema_version" in data["metadata"]
    )


def _schema_aspect(data: object, dataset: Urn) -> Mapping[str, Any]:
    """The ``schemaMetadata`` aspect JSON in ``data`` for ``dataset``."""
    if isinstance(data, list):
        found: dict[str, Mapping[str, Any]] = {}
        for record in data:
            unwrapped = _from_record(record)
            if unwrapped is not None:
                found.setdefault(unwrapped[0] or "", unwrapped[1])
        if dataset in found:
            return found[dataset]
        if not found:
            raise _NoSchema("no schemaMetadata aspect among its records")
        raise _NoSchema(
            f"no schemaMetadata for {dataset} (it has one for "
            + ", ".join(urn or "a record without entityUrn" for urn in sorted(found))
            + ")"
        )
    if isinstance(data, Mapping):
        if isinstance(data.get("fields"), list):
            return data
        unwrapped = _from_record(data)
        if unwrapped is not None:
            urn, aspect = unwrapped
            if urn and urn != dataset:
                raise _NoSchema(f"its schemaMetadata is for {urn}, not {dataset}")
            return aspect
    raise _NoSchema(
        "neither a schemaMetadata aspect (an object with fields), an MCP or MCE holding one, "
        "a list of those, nor a dbt manifest.json"
    )


def _from_record(record: object) -> tuple[str | None, Mapping[str, Any]] | None:
    """(entity urn, schemaMetadata JSON) of one MCP or MCE; None when it holds none."""
    if not isinstance(record, Mapping):
        return None
    if record.get("aspectName") == "schemaMetadata":
        aspect = record.get("aspect")
        if isinstance(aspect, Mapping):
            if isinstance(aspect.get("json"), Mapping):
                aspect = aspect["json"]
            elif isinstance(aspect.get("value"), str):
                try:
                    aspect = json.loads(aspect["value"])
                except json.JSONDecodeError as exc:
                    raise _NoSchema(f"the MCP's aspect.value is not JSON: {exc.msg}") from exc
        if not isinstance(aspect, Mapping) or not isinstance(aspect.get("fields"), list):
            raise _NoSchema("its schemaMetadata aspect has no fields list")
        urn = record.get("entityUrn")
        return (urn if isinstance(urn, str) else None), aspect
    snapshot = record.get("proposedSnapshot")
    if isinstance(snapshot, Mapping) and len(snapshot) == 1:
        body = next(iter(snapshot.values()))
        if isinstance(body, Mapping):
            for item in body.get("aspects") or []:
                if isinstance(item, Mapping):
                    for key, value in item.items():
                        if str(key).endswith(".SchemaMetadata") and isinstance(value, Mapping):
                            urn = body.get("urn")
                            return (urn if isinstance(urn, str) else None), value
    return None


def _schema_of(aspect: Mapping[str, Any]) -> Schema:
    # The catalog's own reading of the aspect: the preview sees the fields a scan would.
    schema = schema_from_aspects({"schemaMetadata": dict(aspect)})
    if schema is None:  # never: the aspect is there
        raise _NoSchema("no schemaMetadata")
    return schema


def _with_annotations(proposed: Schema, current: Schema | None) -> Schema:
    """``proposed`` with each current column's tags, terms and description kept on its path."""
    if current is None:
        return proposed
    now = current.by_path()
    fields: list[SchemaField] = []
    for field in proposed.fields:
        old = now.get(field.path)
        if old is None:
            fields.append(field)
            continue
        fields.append(
            replace(
                field,
                tags=field.tags | old.tags,
                terms=field.terms | old.terms,
                description=field.description or old.description,
            )
        )
    return Schema(tuple(fields))


def _dbt_schema(manifest: Mapping[str, Any], dataset: Urn, current: Schema | None) -> Schema:
    node = _dbt_node(manifest, dataset)
    columns = node.get("columns")
    if not isinstance(columns, Mapping) or not columns:
        raise _NoSchema(
            f"dbt {node.get('unique_id')} lists no columns (document them in its YAML, or "
            "use --drop/--rename/--retype)"
        )
    now = current.by_path() if current is not None else {}
    fields: list[SchemaField] = []
    for position, (key, column) in enumerate(columns.items()):
        info = column if isinstance(column, Mapping) else {}
        name = str(info.get("name") or key)
        old = now.get(name)
        native = info.get("data_type")
        if isinstance(native, str) and native.strip():
            native_type = native.strip()
            logical = logical_type_of(native_type) or (old.type if old is not None else "")
        else:
            native_type = old.native_type if old is not None else ""
            logical = old.type if old is not None else ""
        description = str(info.get("description") or "") or (old.description if old else "")
        fields.append(
            SchemaField(
                path=name,
                type=logical,
                native_type=native_type,
                description=description,
                position=position,
                tags=old.tags if old is not None else frozenset(),
                terms=old.terms if old is not None else frozenset(),
            )
        )
    return Schema(tuple(fields))


def _dbt_node(manifest: Mapping[str, Any], dataset: Urn) -> Mapping[str, Any]:
    """The manifest's node (or source) whose relation name is the dataset's name."""
    wanted = _dataset_name(dataset).lower()
    nodes = [
        n
        for group in ("nodes", "sources")
        for n in (manifest.get(group) or {}).values()
        if isinstance(n, Mapping) and n.get("resource_type") in _DBT_RESOURCES
    ]
    # The full relation name first, then ever shorter tails of it (schema.table, table).
    names = wanted.split(".")
    for parts in range(min(3, len(names)), 0, -1):
        target = ".".join(names[-parts:])
        matched = [n for n in nodes if _relation(n, parts) == target]
        if len(matched) == 1:
            return matched[0]
        if matched:
            ids = ", ".join(sorted(str(n.get("unique_id")) for n in matched))
            raise _NoSchema(f"several dbt nodes are named {target!r}: {ids}")
    tail = wanted.rsplit(".", 1)[-1]
    close = sorted(str(n.get("unique_id")) for n in nodes if _relation(n, 1) == tail)
    hint = f" (nodes named {tail!r}: {', '.join(close)})" if close else ""
    raise _NoSchema(f"no dbt model, seed, snapshot or source is the relation {wanted!r}{hint}")


def _relation(node: Mapping[str, Any], parts: int) -> str:
    name = node.get("alias") or node.get("identifier") or node.get("name") or ""
    full = [str(node.get("database") or ""), str(node.get("schema") or ""), str(name)]
    return ".".join(p for p in full[-parts:] if p).lower()


def _dataset_name(urn: Urn) -> str:
    """The name part of a dataset urn, ``db.schema.table`` in ``(platform,NAME,ENV)``."""
    inner = urn.removeprefix("urn:li:dataset:(").removesuffix(")")
    parts = inner.split(",")
    return ",".join(parts[1:-1]) if len(parts) >= 3 else urn
