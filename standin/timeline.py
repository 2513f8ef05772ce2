"""The Timeline API, by diffing consecutive Lite versions of an aspect.

Covers TECHNICAL_SCHEMA (``schemaMetadata`` fields added, removed or retyped), TAG and
GLOSSARY_TERM (entity-level), DOCUMENTATION (dataset description) and DEPRECATION. Semantic
versions follow GMS's rule of thumb: removals and type changes are MAJOR, additions MINOR,
anything else PATCH; the first version of an aspect is ``0.0.0-computed``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from standin.catalog import Catalog
from standin.store import AspectRow

Json = dict[str, Any]
Event = Json

_RANK = {"NONE": 0, "PATCH": 1, "MINOR": 2, "MAJOR": 3}
ACTOR = "urn:li:corpuser:datahub"


def _event(
    urn: str, category: str, op: str, modifier: str, change: str, text: str, **params: Any
) -> Event:
    return {
        "entityUrn": urn,
        "category": category,
        "operation": op,
        "modifier": modifier,
        "parameters": {k: v for k, v in params.items() if v is not None},
        "semVerChange": change,
        "description": text,
    }


def _schema_events(urn: str, old: Json | None, new: Json) -> list[Event]:
    before = {f["fieldPath"]: f for f in (old or {}).get("fields") or []}
    after = {f["fieldPath"]: f for f in new.get("fields") or []}
    events = []
    for path in after.keys() - before.keys():
        field_urn = f"urn:li:schemaField:({urn},{path})"
        events.append(
            _event(
                urn,
                "TECHNICAL_SCHEMA",
                "ADD",
                field_urn,
                "MINOR",
                f"A forwards & backwards compatible change due to the newly added field '{path}'.",
                fieldPath=path,
                fieldUrn=field_urn,
                nullable=after[path].get("nullable"),
            )
        )
    for path in before.keys() - after.keys():
        field_urn = f"urn:li:schemaField:({urn},{path})"
        events.append(
            _event(
                urn,
                "TECHNICAL_SCHEMA",
                "REMOVE",
                field_urn,
                "MAJOR",
                f"A backwards incompatible change due to removal of field: '{path}'.",
                fieldPath=path,
                fieldUrn=field_urn,
                nullable=before[path].get("nullable"),
            )
        )
    for path in before.keys() & after.keys():
        old_type, new_type = before[path].get("nativeDataType"), after[path].get("nativeDataType")
        if old_type != new_type or before[path].get("type") != after[path].get("type"):
            field_urn = f"urn:li:schemaField:({urn},{path})"
            events.append(
                _event(
                    urn,
                    "TECHNICAL_SCHEMA",
                    "MODIFY",
                    field_urn,
                    "MAJOR",
                    f"A backwards incompatible change due to native datatype of the field "
                    f"'{path}' changed from '{old_type}' to '{new_type}'.",
                    fieldPath=path,
                    fieldUrn=field_urn,
                )
            )
    return sorted(events, key=lambda e: (e["operation"], e["modifier"]))


def _label_events(
    category: str, key: str, list_name: str
) -> Callable[[str, Json | None, Json], list[Event]]:
    def diff(urn: str, old: Json | None, new: Json) -> list[Event]:
        before = {t.get(key) for t in (old or {}).get(list_name) or []}
        after = {t.get(key) for t in new.get(list_name) or []}
        noun = "Tag" if category == "TAG" else "Term"
        return [
            _event(
                urn, category, "ADD", label, "MINOR", f"{noun} '{label}' added to entity '{urn}'."
            )
            for label in sorted(after - before)
        ] + [
            _event(
                urn,
                category,
                "REMOVE",
                label,
                "MINOR",
                f"{noun} '{label}' removed from entity '{urn}'.",
            )
            for label in sorted(before - after)
        ]

    return diff


def _doc_events(urn: str, old: Json | None, new: Json) -> list[Event]:
    was, now = (old or {}).get("description"), new.get("description")
    if was == now:
        return []
    op = "ADD" if not was else "REMOVE" if not now else "MODIFY"
    return [
        _event(
            urn,
            "DOCUMENTATION",
            op,
            urn,
            "MINOR",
            f"Documentation for '{urn}' changed.",
            description=now,
        )
    ]


def _deprecation_events(urn: str, old: Json | None, new: Json) -> list[Event]:
    was, now = bool((old or {}).get("deprecated")), bool(new.get("deprecated"))
    if was == now:
        return []
    status = "DEPRECATED" if now else "ACTIVE"
    return [
        _event(
            urn,
            "DEPRECATION",
            "MODIFY",
            status,
            "MINOR",
            f"Deprecation status of '{urn}' changed to {status}.",
            status=status,
        )
    ]


_CATEGORIES: dict[str, list[tuple[str, Callable[[str, Json | None, Json], list[Event]]]]] = {
    "TECHNICAL_SCHEMA": [("schemaMetadata", _schema_events)],
    "TAG": [("globalTags", _label_events("TAG", "tag", "tags"))],
    "GLOSSARY_TERM": [("glossaryTerms", _label_events("GLOSSARY_TERM", "urn", "terms"))],
    "DOCUMENTATION": [
        ("datasetProperties", _doc_events),
        ("editableDatasetProperties", _doc_events),
    ],
    "DEPRECATION": [("deprecation", _deprecation_events)],
}


def _bump(version: tuple[int, int, int], change: str) -> tuple[int, int, int]:
    major, minor, patch = version
    if change == "MAJOR":
        return (major + 1, 0, 0)
    if change == "MINOR":
        return (major, minor + 1, 0)
    if change == "PATCH":
        return (major, minor, patch + 1)
    return version


def transactions(
    ctx: Catalog, urn: str, categories: list[str], start: int = -1, end: int = 0
) -> list[Json]:
    """Change transactions for ``urn`` in the given categories, oldest first."""
    raw: list[tuple[int, str, AspectRow, list[Event]]] = []
    for category in categories:
        for aspect, differ in _CATEGORIES.get(category, []):
            previous: Json | None = None
            for row in ctx.backend.store.history(urn, aspect):
                events = differ(urn, previous, row.value)
                previous = row.value
                if events:
                    raw.append((row.created_on, f"{aspect}:{row.version}", row, events))
    raw.sort(key=lambda item: (item[0], item[1]))
    version = (0, 0, 0)
    out = []
    for i, (when, stamp, _row, events) in enumerate(raw):
        change = max((e["semVerChange"] for e in events), key=lambda c: _RANK[c])
        version = version if i == 0 else _bump(version, change)
        for e in events:
            e["auditStamp"] = {"time": when, "actor": ACTOR}
        if (start > 0 and when < start) or (end > 0 and when > end):
            continue
        out.append(
            {
                "timestamp": when,
                "actor": ACTOR,
                "semVer": "{}.{}.{}-computed".format(*version),
                "semVerChange": change,
                "versionStamp": stamp,
                "changeEvents": events,
            }
        )
    return out


def graphql_timeline(ctx: Catalog, input: Json) -> Json:
    categories = input.get("changeCategories") or list(_CATEGORIES)
    result = []
    for tx in transactions(ctx, input["urn"], categories):
        ops = {e["operation"] for e in tx["changeEvents"]}
        result.append(
            {
                "timestampMillis": tx["timestamp"],
                "lastSemanticVersion": tx["semVer"],
                "versionStamp": tx["versionStamp"],
                "changeType": ops.pop() if len(ops) == 1 else "MODIFY",
                "actor": tx["actor"],
                "changes": [
                    {
                        "urn": e["entityUrn"],
                        "category": e["category"] if e["category"] != "DEPRECATION" else None,
                        "operation": e["operation"],
                        "modifier": e["modifier"],
                        "parameters": [
                            {"key": k, "value": str(v)} for k, v in e["parameters"].items()
                        ],
                        "auditStamp": e["auditStamp"],
                        "description": e["description"],
                    }
                    for e in tx["changeEvents"]
                ],
            }
        )
    return {"changeTransactions": result}
