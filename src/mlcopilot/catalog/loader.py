"""Load DataHub metadata files (the file sink's JSON: MCPs and/or MCEs) into a Lite catalog.

Every record of every file is parsed and validated with the SDK's own classes before anything
is written, so a bad file leaves the catalog as it was and the error names the file, the record
and what is wrong with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from avrogen.dict_wrapper import DictWrapper
from datahub.emitter.aspect import ASPECT_MAP, JSON_CONTENT_TYPE
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.emitter.mcp_builder import mcps_from_mce
from datahub.emitter.serialization_helper import post_json_transform
from datahub.metadata.schema_classes import (
    ENTITY_TYPE_TO_ASPECT_NAMES,
    KEY_ASPECTS,
    MetadataChangeEventClass,
    SystemMetadataClass,
    _Aspect,
)
from datahub.metadata.urns import Urn as SdkUrn

from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog.lite import LiteCatalog, open_lite_catalog
from mlcopilot.errors import InputError

_SNAPSHOT_TYPES = frozenset(
    s.name
    for s in MetadataChangeEventClass.RECORD_SCHEMA.fields_dict["proposedSnapshot"].type.schemas
)
_JSON_KINDS = {dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """What one load did."""

    files: int
    records: int
    """JSON records read (an MCE counts once however many aspects it carries)."""
    urns: int
    """Distinct entities the records touch."""
    aspects: int
    """Aspects written (MCEs are split into one per aspect)."""
    new_versions: int
    """Aspect versions that did not exist before: new aspects and changed ones."""


class _BadRecord(Exception):
    """One record is wrong; the caller adds the file and record number."""


def load_metadata_files(catalog: LiteCatalog | str | Path, files: Sequence[Path]) -> LoadSummary:
    """Validate ``files`` completely, then write them, in order, into ``catalog``.

    Args:
        catalog: An open Lite catalog, or the path of one (created when missing).
        files: DataHub metadata files: JSON lists of MCPs and/or MCEs.

    Returns:
        What was read and written.

    Raises:
        InputError: on the first record of any file that is not valid DataHub metadata;
            nothing is written then.
        CatalogError: when the catalog cannot be opened or written.
    """
    records = 0
    mcps: list[MetadataChangeProposalWrapper] = []
    for path in files:
        count, parsed = read_metadata_file(path)
        records += count
        mcps += parsed
    if isinstance(catalog, LiteCatalog):
        new_versions = catalog.ingest(mcps)
    else:
        with open_lite_catalog(catalog, create=True) as opened:
            new_versions = opened.ingest(mcps)
    return LoadSummary(
        files=len(files),
        records=records,
        urns=len({mcp.entityUrn for mcp in mcps}),
        aspects=len(mcps),
        new_versions=new_versions,
    )


def read_metadata_file(path: Path) -> tuple[int, list[MetadataChangeProposalWrapper]]:
    """Parse and validate one metadata file.

    Returns:
        The number of records and the MCPs they hold, one per aspect.

    Raises:
        InputError: naming the file (and record, counted from 1) on the first problem.
    """
    data = _read_json(path)
    if not isinstance(data, list):
        raise InputError(
            f"{path}: expected a JSON list of DataHub MCPs/MCEs, got {_json_kind(data)}"
        )
    mcps: list[MetadataChangeProposalWrapper] = []
    for number, record in enumerate(data, start=1):
        try:
            mcps += _parse_record(record)
        except _BadRecord as exc:
            raise InputError(f"{path}: record {number}: {exc}") from exc
    return len(data), mcps


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate a BOM from Windows editors
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc


def _parse_record(record: object) -> list[MetadataChangeProposalWrapper]:
    if not isinstance(record, dict):
        raise _BadRecord(f"expected a JSON object, got {_json_kind(record)}")
    if "proposedSnapshot" in record:
        return _from_mce(record)
    if "aspect" in record or "aspectName" in record:
        return [_from_mcp(record)]
    raise _BadRecord("neither an MCP (entityUrn, aspectName, aspect) nor an MCE (proposedSnapshot)")


def _from_mcp(record: Mapping[str, Any]) -> MetadataChangeProposalWrapper:
    urn = record.get("entityUrn")
    if not isinstance(urn, str) or not urn:
        raise _BadRecord("an MCP needs an entityUrn (entityKeyAspect alone is not supported)")
    entity_type = _entity_type(urn)
    declared = record.get("entityType")
    if declared is not None and str(declared).lower() != entity_type.lower():
        raise _BadRecord(f"entityType {declared!r} does not match the urn {urn!r}")
    change = record.get("changeType", "UPSERT")
    if change != "UPSERT":
        raise _BadRecord(f"change type {change!r} is not supported, only UPSERT")
    name = record.get("aspectName")
    if not isinstance(name, str) or not name:
        raise _BadRecord("an MCP needs an aspectName")
    aspect = _aspect(entity_type, name, _payload(name, record.get("aspect")))
    return MetadataChangeProposalWrapper(
        entityUrn=urn, aspect=aspect, systemMetadata=_system_metadata(record)
    )


def _from_mce(record: Mapping[str, Any]) -> list[MetadataChangeProposalWrapper]:
    snapshot = record["proposedSnapshot"]
    if not isinstance(snapshot, dict) or len(snapshot) != 1:
        raise _BadRecord("proposedSnapshot must be an object holding one snapshot")
    kind = next(iter(snapshot))
    if kind.rsplit(".", 1)[-1] not in _SNAPSHOT_TYPES:
        raise _BadRecord(f"unknown snapshot type {kind!r}")
    try:
        mce = MetadataChangeEventClass.from_obj(dict(record))
    except ax.TranslationError as exc:
        raise _BadRecord(f"not a valid MCE: {_brief(exc)}") from exc
    entity_type = _entity_type(mce.proposedSnapshot.urn)
    for aspect, raw in zip(mce.proposedSnapshot.aspects, _raw_aspect_names(record), strict=True):
        # An unknown union member is parsed as the first candidate, silently; catch that.
        if raw.rsplit(".", 1)[-1] != type(aspect).RECORD_SCHEMA.name:
            raise _BadRecord(f"unknown aspect {raw!r}")
        _check_allowed(entity_type, aspect.get_aspect_name())
        _check_valid(aspect.get_aspect_name(), aspect)
    if not mce.validate():
        raise _BadRecord("not a valid MCE")
    return list(mcps_from_mce(mce))


def _raw_aspect_names(record: Mapping[str, Any]) -> list[str]:
    snapshot = next(iter(record["proposedSnapshot"].values()))
    return [next(iter(a)) if isinstance(a, dict) and a else "" for a in snapshot["aspects"]]


def _entity_type(urn: str) -> str:
    try:
        entity_type = SdkUrn.from_string(urn).entity_type
    except ax.TranslationError as exc:
        raise _BadRecord(f"invalid urn {urn!r}: {_brief(exc)}") from exc
    if entity_type not in ENTITY_TYPE_TO_ASPECT_NAMES:
        raise _BadRecord(f"unknown entity type {entity_type!r} in urn {urn!r}")
    return str(entity_type)


def _payload(name: str, aspect: object) -> Any:
    if isinstance(aspect, dict) and "json" in aspect:
        return aspect["json"]
    if isinstance(aspect, dict) and isinstance(aspect.get("value"), str):
        content_type = aspect.get("contentType", JSON_CONTENT_TYPE)
        if content_type != JSON_CONTENT_TYPE:
            raise _BadRecord(f"aspect {name!r}: content type {content_type!r} is not supported")
        try:
            return json.loads(aspect["value"])
        except json.JSONDecodeError as exc:
            raise _BadRecord(f"aspect {name!r}: value is not valid JSON: {exc.msg}") from exc
    raise _BadRecord(
        f'aspect {name!r} must be {{"json": {{...}}}} '
        f'or {{"value": "<JSON text>", "contentType": "application/json"}}'
    )


def _aspect(entity_type: str, name: str, payload: Any) -> _Aspect:
    if name not in ASPECT_MAP:
        raise _BadRecord(f"unknown aspect {name!r}")
    _check_allowed(entity_type, name)
    if not isinstance(payload, dict):
        raise _BadRecord(f"aspect {name!r} is not valid: expected an object")
    try:
        aspect: _Aspect = ASPECT_MAP[name].from_obj(post_json_transform(payload))
    except ax.TranslationError as exc:
        raise _BadRecord(f"aspect {name!r} is not valid: {_brief(exc)}") from exc
    _check_valid(name, aspect)
    return aspect


def _check_allowed(entity_type: str, name: str) -> None:
    allowed = ENTITY_TYPE_TO_ASPECT_NAMES[entity_type]
    if name not in allowed and name != KEY_ASPECTS[entity_type].ASPECT_NAME:
        raise _BadRecord(f"aspect {name!r} is not an aspect of entity type {entity_type!r}")


def _check_valid(name: str, aspect: _Aspect) -> None:
    if not aspect.validate():
        raise _BadRecord(f"aspect {name!r} is not valid: {_invalid_field(aspect)}")


def _system_metadata(record: Mapping[str, Any]) -> SystemMetadataClass | None:
    raw = record.get("systemMetadata")
    if raw is None:
        return None
    try:
        system = SystemMetadataClass.from_obj(post_json_transform(raw))
    except ax.TranslationError as exc:
        raise _BadRecord(f"systemMetadata is not valid: {_brief(exc)}") from exc
    if not system.validate():
        raise _BadRecord(f"systemMetadata is not valid: {_invalid_field(system)}")
    return system


def _invalid_field(record: DictWrapper) -> str:
    """Say which field makes an SDK record fail validation, and with what value."""
    converter = record._get_json_converter()  # the converter validate() itself uses
    schema: Any = record.RECORD_SCHEMA
    datum: Any = record
    path: list[str] = []
    while True:
        child = _first_invalid_child(converter, schema, datum)
        if child is None:
            break
        step, schema, datum = child
        path.append(step)
    where = "".join(path).lstrip(".") or "value"
    return f"field {where!r} does not fit the schema (got {_short(datum)})"


def _first_invalid_child(converter: Any, schema: Any, datum: Any) -> tuple[str, Any, Any] | None:
    if schema.type == "record" and isinstance(datum, DictWrapper | dict):
        for field in schema.fields:
            value = datum.get(field.name, field.default if field.has_default else None)
            if not converter.validate(field.type, value):
                return f".{field.name}", field.type, value
    elif schema.type == "array" and isinstance(datum, list):
        for index, item in enumerate(datum):
            if not converter.validate(schema.items, item):
                return f"[{index}]", schema.items, item
    elif schema.type == "map" and isinstance(datum, dict):
        for key, item in datum.items():
            if not converter.validate(schema.values, item):
                return f"[{key!r}]", schema.values, item
    elif schema.type == "union" and isinstance(datum, DictWrapper):
        for candidate in schema.schemas:
            if getattr(candidate, "fullname", None) == datum.RECORD_SCHEMA.fullname:
                return "", candidate, datum
    return None


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return _JSON_KINDS.get(type(value), type(value).__name__)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _brief(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    return _short_text(lines[0])


def _short_text(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."
