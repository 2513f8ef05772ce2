"""Shared mappers and the ``Node`` base class every GraphQL entity object extends.

graphql-core's default resolver reads a field from an object attribute and calls it with
``(info, **args)`` when it is a method, so each GraphQL field is a method (or attribute) named
like the field. Fields not mapped resolve to None, and the resolver wrapper in
:mod:`standin.gql` fills missing non-null fields with defaults. A field whose GraphQL type is
an entity (``owner``, ``platform``, ``entity``, ...) gives the urn, and that same wrapper
makes the entity object of it. Helpers start with ``_`` so they can never shadow a GraphQL
field.
"""

from __future__ import annotations

import json
from typing import Any

from standin import lineage, search
from standin.assertions import assertions_health
from standin.catalog import Catalog, key_of, type_enum
from standin.edges import entity_type

Json = dict[str, Any]

NO_RUN_ID = "no-run-id-provided"
"""The run id GMS gives writes that name none (UI edits, plain emitters)."""
_FABRICS = {"DEV", "TEST", "QA", "UAT", "EI", "PRE", "STG", "NON_PROD", "PROD", "CORP"}
_FABRICS |= {"RVW", "SANDBOX", "PRD", "TST"}

# --- small mappers ---------------------------------------------------------------------------


def audit(stamp: Json | None) -> Json | None:
    if not stamp:
        return None
    return {"time": stamp.get("time", 0), "actor": stamp.get("actor")}


def custom_properties(props: Json | None, urn: str) -> list[Json]:
    return [{"key": k, "value": v, "associatedUrn": urn} for k, v in sorted((props or {}).items())]


def union_value(value: Any) -> Any:
    """A Rest.li union (``{"double": 0.9}``) → its member; anything else unchanged."""
    if isinstance(value, dict) and len(value) == 1:
        return next(iter(value.values()))
    return value


def property_value(value: Any) -> Json:
    inner = union_value(value)
    if isinstance(inner, (int, float)) and not isinstance(inner, bool):
        return {"__typename": "NumberValue", "numberValue": float(inner)}
    return {"__typename": "StringValue", "stringValue": str(inner)}


def fabric(origin: Any) -> str:
    return origin if origin in _FABRICS else "PROD"


def _as_str(value: Any) -> str | None:
    inner = union_value(value)
    return None if inner is None else str(inner)


def params(items: list[Json] | None) -> list[Json]:
    return [
        {
            "name": p.get("name"),
            "description": p.get("description"),
            "value": _as_str(p.get("value")),
            "createdAt": p.get("createdAt"),
        }
        for p in items or []
    ]


# --- the base class --------------------------------------------------------------------------


class Node:
    """Fields every entity type shares; subclasses add their own."""

    typename = "Entity"

    def __init__(self, ctx: Catalog, urn: str) -> None:
        self._ctx = ctx
        self.urn = urn
        self.type = type_enum(urn)
        self._etype = entity_type(urn)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.urn})"

    # helpers
    def _a(self, name: str) -> Json | None:
        return self._ctx.aspect(self.urn, name)

    def _key(self) -> Json:
        return key_of(self.urn)

    def _platform_urn(self, platform: str | None) -> str | None:
        if platform and not platform.startswith("urn:li:dataPlatform:"):
            platform = f"urn:li:dataPlatform:{platform}"
        return platform

    def _tags(self, value: Json | None) -> Json | None:
        if value is None:
            return None
        return {
            "tags": [
                {
                    "tag": t.get("tag"),
                    "associatedUrn": self.urn,
                    "context": t.get("context"),
                }
                for t in value.get("tags") or []
            ]
        }

    def _terms(self, value: Json | None) -> Json | None:
        if value is None:
            return None
        return {
            "terms": [
                {
                    "term": t.get("urn"),
                    "actor": t.get("actor"),
                    "associatedUrn": self.urn,
                    "context": t.get("context"),
                }
                for t in value.get("terms") or []
            ]
        }

    # common fields
    def exists(self, _info: Any, **_: Any) -> bool:
        return self._ctx.exists(self.urn)

    def lastIngested(self, _info: Any, **_: Any) -> int | None:
        # As GMS computes it (SystemMetadataUtils.getLastIngestedTime): the newest lastObserved
        # of aspects written by an ingestion run. UI edits and emitters without a run id
        # ("no-run-id-provided") do not move it, so it is no signal that an entity changed.
        times = [
            r.system_metadata.get("lastObserved") or 0
            for r in self._ctx.rows(self.urn).values()
            if r.system_metadata.get("runId") not in (None, "", NO_RUN_ID)
        ]
        return max(times) if times else None

    def status(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("status")
        return None if value is None else {"removed": bool(value.get("removed", False))}

    def deprecation(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("deprecation")
        if value is None:
            return None
        return {
            "deprecated": bool(value.get("deprecated", False)),
            "decommissionTime": value.get("decommissionTime"),
            "note": value.get("note"),
            "actor": value.get("actor"),
            "actorEntity": value.get("actor"),
            "replacement": value.get("replacement"),
        }

    def tags(self, _info: Any, **_: Any) -> Json | None:
        return self._tags(self._a("globalTags"))

    globalTags = tags

    def glossaryTerms(self, _info: Any, **_: Any) -> Json | None:
        return self._terms(self._a("glossaryTerms"))

    def ownership(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("ownership")
        if value is None:
            return None
        owners = []
        for owner in value.get("owners") or []:
            kind = owner.get("type") or "NONE"
            type_urn = owner.get("typeUrn") or f"urn:li:ownershipType:__system__{kind.lower()}"
            owners.append(
                {
                    "owner": owner.get("owner"),
                    "type": kind,
                    "ownershipType": type_urn,
                    "associatedUrn": self.urn,
                    "source": owner.get("source"),
                }
            )
        return {"owners": owners, "lastModified": audit(value.get("lastModified")) or {"time": 0}}

    def structuredProperties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("structuredProperties")
        if value is None:
            return None
        entries = []
        for item in value.get("properties") or []:
            values = [union_value(v) for v in item.get("values") or []]
            entries.append(
                {
                    "structuredProperty": item.get("propertyUrn"),
                    "values": [property_value(v) for v in values],
                    "valueEntities": [
                        v for v in values if isinstance(v, str) and v.startswith("urn:li:")
                    ],
                    "associatedUrn": self.urn,
                }
            )
        return {"properties": entries}

    def domain(self, _info: Any, **_: Any) -> Json | None:
        domains = (self._a("domains") or {}).get("domains") or []
        return {"domain": domains[0], "associatedUrn": self.urn} if domains else None

    def subTypes(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("subTypes")
        return None if value is None else {"typeNames": value.get("typeNames") or []}

    def container(self, _info: Any, **_: Any) -> str | None:
        return (self._a("container") or {}).get("container")

    def dataPlatformInstance(self, _info: Any, **_: Any) -> str | None:
        value = self._a("dataPlatformInstance") or {}
        return value.get("instance")

    def aspects(self, _info: Any, input: Json | None = None, **_: Any) -> list[Json]:
        """Raw aspect payloads (``aspects(input: {aspectNames})``), as GMS's RawAspect."""
        names = (input or {}).get("aspectNames")
        rows = self._ctx.rows(self.urn)
        chosen = [n for n in (names or sorted(rows)) if n in rows]
        return [{"aspectName": n, "payload": json.dumps(rows[n].value)} for n in chosen]

    def relationships(self, _info: Any, input: Json, **_: Any) -> Json:
        return lineage.relationships(self._ctx, self.urn, input)

    def lineage(self, _info: Any, input: Json, **_: Any) -> Json:
        return lineage.one_hop(self._ctx, self.urn, input)

    def relatedDocuments(self, _info: Any, input: Json | None = None, **_: Any) -> Json:
        return search.related_documents(self._ctx, self.urn, input or {})

    def incidents(self, _info: Any, **args: Any) -> Json:
        return search.incidents_on(self._ctx, self.urn, args)

    def health(self, _info: Any, **_: Any) -> list[Json]:
        """As GMS's ``EntityHealthResolver``: incidents first, then assertions (if any ran)."""
        active = search.incidents_on(self._ctx, self.urn, {"state": "ACTIVE", "count": 0})["total"]
        healths: list[Json] = [
            {
                "type": "INCIDENTS",
                "status": "FAIL",
                "message": f"{active} active incident{'s' if active > 1 else ''}",
                "causes": ["ACTIVE_INCIDENTS"],
            }
            if active
            else {"type": "INCIDENTS", "status": "PASS", "message": None, "causes": None}
        ]
        assertions = assertions_health(self._ctx, self.urn)
        if assertions is not None:
            healths.append(assertions)
        return healths
