"""Structured properties, incidents and documents."""

from __future__ import annotations

from typing import Any

from standin.entities.base import Json, Node, audit, custom_properties, property_value

_PRIORITIES = {0: "CRITICAL", 1: "HIGH", 2: "MEDIUM", 3: "LOW"}  # IncidentUtils


class StructuredPropertyEntity(Node):
    typename = "StructuredPropertyEntity"

    def definition(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("propertyDefinition")
        if value is None:
            return None
        qualifier = value.get("typeQualifier") or {}
        return {
            "qualifiedName": value.get("qualifiedName") or "",
            "displayName": value.get("displayName"),
            "description": value.get("description"),
            "cardinality": value.get("cardinality") or "SINGLE",
            "allowedValues": [
                {"value": property_value(v.get("value")), "description": v.get("description")}
                for v in value.get("allowedValues") or []
            ]
            or None,
            "valueType": value.get("valueType"),
            "typeQualifier": {"allowedTypes": list(qualifier.get("allowedTypes") or [])}
            if qualifier
            else None,
            "entityTypes": list(value.get("entityTypes") or []),
            "immutable": bool(value.get("immutable", False)),
            "created": _resolved(value.get("created")),
            "lastModified": _resolved(value.get("lastModified")),
        }

    def settings(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("structuredPropertySettings")
        if value is None:
            return None
        flags = (
            "isHidden",
            "showInSearchFilters",
            "showInAssetSummary",
            "hideInAssetSummaryWhenEmpty",
            "showAsAssetBadge",
            "showInColumnsTable",
        )
        return {k: bool(value.get(k, False)) for k in flags}


def _resolved(stamp: Json | None) -> Json | None:
    if not stamp:
        return None
    return {"time": stamp.get("time", 0), "actor": stamp.get("actor")}


class Incident(Node):
    typename = "Incident"

    def _info(self) -> Json:
        return self._a("incidentInfo") or {}

    def incidentType(self, _info: Any, **_: Any) -> str:
        return self._info().get("type") or "CUSTOM"

    def customType(self, _info: Any, **_: Any) -> str | None:
        return self._info().get("customType")

    def title(self, _info: Any, **_: Any) -> str | None:
        return self._info().get("title")

    def description(self, _info: Any, **_: Any) -> str | None:
        return self._info().get("description")

    def incidentStatus(self, _info: Any, **_: Any) -> Json:
        status = self._info().get("status") or {}
        return {
            "state": status.get("state") or "ACTIVE",
            "stage": status.get("stage"),
            "message": status.get("message"),
            "lastUpdated": audit(status.get("lastUpdated")) or {"time": 0},
        }

    status = incidentStatus

    def priority(self, _info: Any, **_: Any) -> str | None:
        return _PRIORITIES.get(self._info().get("priority"))  # type: ignore[arg-type]

    def assignees(self, _info: Any, **_: Any) -> list[Any]:
        return [a.get("actor") for a in self._info().get("assignees") or []]

    def entity(self, _info: Any, **_: Any) -> str | None:
        entities = self._info().get("entities") or []
        return entities[0] if entities else None

    def source(self, _info: Any, **_: Any) -> Json | None:
        source = self._info().get("source")
        if source is None:
            return None
        return {
            "type": source.get("type") or "MANUAL",
            "source": source.get("sourceUrn"),
        }

    def startedAt(self, _info: Any, **_: Any) -> int | None:
        return self._info().get("startedAt")

    def created(self, _info: Any, **_: Any) -> Json:
        return audit(self._info().get("created")) or {"time": 0}


class Document(Node):
    typename = "Document"

    def info(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("documentInfo")
        if value is None:
            return None
        parent = (value.get("parentDocument") or {}).get("document")
        return {
            "title": value.get("title"),
            "source": value.get("source"),
            "status": value.get("status"),
            "contents": {"text": (value.get("contents") or {}).get("text") or ""},
            "created": _resolved(value.get("created")) or {"time": 0},
            "lastModified": _resolved(value.get("lastModified")) or {"time": 0},
            "relatedAssets": [{"asset": a.get("asset")} for a in value.get("relatedAssets") or []],
            "relatedDocuments": [
                {"document": d.get("document")} for d in value.get("relatedDocuments") or []
            ],
            "parentDocument": {"document": parent} if parent else None,
            "customProperties": custom_properties(value.get("customProperties"), self.urn),
        }

    def settings(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("documentSettings")
        return (
            None
            if value is None
            else {"showInGlobalContext": bool(value.get("showInGlobalContext", True))}
        )

    def subType(self, _info: Any, **_: Any) -> str | None:
        names = (self._a("subTypes") or {}).get("typeNames") or []
        return names[0] if names else None

    def platform(self, _info: Any, **_: Any) -> str | None:
        platform = (self._a("dataPlatformInstance") or {}).get("platform")
        return self._platform_urn(platform or "urn:li:dataPlatform:datahub")

    def changeHistory(self, _info: Any, **_: Any) -> list[Json]:
        return []
