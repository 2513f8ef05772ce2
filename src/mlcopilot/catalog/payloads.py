"""Reading the JSON answers GMS and ``mcp-server-datahub`` send, shared by both backends.

Their answers have the same shapes where they meet (search results, OpenAPI envelopes, audit
stamps), so each shape is read once here and both backends see the same facts in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mlcopilot.errors import CatalogError
from mlcopilot.model import Urn

JsonObject = dict[str, Any]


def mapping(value: object, source: str, what: str) -> Mapping[str, Any]:
    """``value`` as an object, or one CatalogError naming who answered ``what`` with what."""
    if not isinstance(value, Mapping):
        raise CatalogError(f"{source} answered {what} with {type(value).__name__}, not an object")
    return value


def as_int(value: object) -> int:
    """A JSON integer (never a boolean), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def result_urns(results: object) -> list[Urn]:
    """The urns of a ``searchResults`` list (``[{"entity": {"urn": ...}}, ...]``), in order."""
    urns: list[Urn] = []
    for result in results if isinstance(results, list) else []:
        entity = result.get("entity") if isinstance(result, Mapping) else None
        if isinstance(entity, Mapping) and isinstance(entity.get("urn"), str):
            urns.append(entity["urn"])
    return urns


def stamp(holder: object, key: str) -> int | None:
    """A positive epoch-millisecond ``holder[key]`` (an audit stamp's ``time``...), else None."""
    value = holder.get(key) if isinstance(holder, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def written_at(envelope: Mapping[str, Any]) -> int | None:
    """When an aspect version was written: its audit stamp, else its ``lastObserved``."""
    return stamp(envelope.get("auditStamp"), "time") or stamp(
        envelope.get("systemMetadata"), "lastObserved"
    )


def envelope_values(entity: Mapping[str, Any], names: Iterable[str]) -> dict[str, JsonObject]:
    """The aspect values of an OpenAPI entity (``{name: {"value": {...}}}``) among ``names``."""
    values: dict[str, JsonObject] = {}
    for name in names:
        envelope = entity.get(name)
        if isinstance(envelope, Mapping) and isinstance(envelope.get("value"), dict):
            values[name] = envelope["value"]
    return values
