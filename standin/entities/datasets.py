"""Datasets, their schemas and columns (``SchemaFieldEntity``)."""

from __future__ import annotations

from typing import Any

from standin.assertions import entity_assertions
from standin.entities.base import Json, Node, custom_properties, fabric

_FIELD_TYPES = {
    "BooleanType": "BOOLEAN",
    "FixedType": "FIXED",
    "StringType": "STRING",
    "BytesType": "BYTES",
    "NumberType": "NUMBER",
    "DateType": "DATE",
    "TimeType": "TIME",
    "EnumType": "ENUM",
    "NullType": "NULL",
    "MapType": "MAP",
    "ArrayType": "ARRAY",
    "UnionType": "UNION",
    "RecordType": "STRUCT",
}


class Dataset(Node):
    typename = "Dataset"

    def name(self, _info: Any, **_: Any) -> str:
        return self._key().get("name") or self.urn

    def platform(self, _info: Any, **_: Any) -> str | None:
        return self._platform_urn(self._key().get("platform"))

    def origin(self, _info: Any, **_: Any) -> str:
        return fabric(self._key().get("origin"))

    def description(self, _info: Any, **_: Any) -> str | None:
        editable = self._a("editableDatasetProperties") or {}
        return editable.get("description") or (self._a("datasetProperties") or {}).get(
            "description"
        )

    def properties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("datasetProperties")
        if value is None:
            return None
        created = value.get("created") or {}
        modified = value.get("lastModified") or {}
        return {
            "name": value.get("name") or self.name(None),
            "qualifiedName": value.get("qualifiedName"),
            "origin": self.origin(None),
            "description": value.get("description"),
            "customProperties": custom_properties(value.get("customProperties"), self.urn),
            "externalUrl": value.get("externalUrl"),
            "created": created.get("time"),
            "createdActor": created.get("actor"),
            "lastModified": {"time": modified.get("time", 0), "actor": modified.get("actor")},
            "lastModifiedActor": modified.get("actor"),
        }

    def editableProperties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("editableDatasetProperties")
        return None if value is None else {"description": value.get("description")}

    def schemaMetadata(self, _info: Any, version: int | None = None, **_: Any) -> Json | None:
        row = self._ctx.backend.store.get(self.urn, "schemaMetadata", int(version or 0))
        if row is None:
            return None
        return self._schema(row.value, row.version)

    def _schema(self, value: Json, version: int) -> Json:
        fields = [self._field(f) for f in value.get("fields") or []]
        return {
            "aspectVersion": version,
            "datasetUrn": self.urn,
            "name": value.get("schemaName") or "",
            "platformUrn": value.get("platform") or "",
            "version": value.get("version", 0),
            "cluster": value.get("cluster"),
            "hash": value.get("hash") or "",
            "platformSchema": _platform_schema(value.get("platformSchema")),
            "fields": fields,
            "primaryKeys": value.get("primaryKeys"),
            "foreignKeys": [
                {
                    "name": fk.get("name"),
                    "foreignFields": list(fk.get("foreignFields") or []),
                    "sourceFields": list(fk.get("sourceFields") or []),
                    "foreignDataset": fk.get("foreignDataset"),
                }
                for fk in value.get("foreignKeys") or []
            ],
            "createdAt": (value.get("created") or {}).get("time"),
        }

    def _field(self, f: Json) -> Json:
        type_key = next(iter((f.get("type") or {}).get("type") or {}), "")
        path = f.get("fieldPath", "")
        return {
            "fieldPath": path,
            "jsonPath": f.get("jsonPath"),
            "label": f.get("label"),
            "nullable": bool(f.get("nullable", False)),
            "description": f.get("description"),
            "type": _FIELD_TYPES.get(type_key.rsplit(".", 1)[-1], "NULL"),
            "nativeDataType": f.get("nativeDataType"),
            "recursive": bool(f.get("recursive", False)),
            "globalTags": self._tags(f.get("globalTags")),
            "tags": self._tags(f.get("globalTags")),
            "glossaryTerms": self._terms(f.get("glossaryTerms")),
            "isPartOfKey": f.get("isPartOfKey"),
            "isPartitioningKey": f.get("isPartitioningKey"),
            "jsonProps": f.get("jsonProps"),
            "schemaFieldEntity": f"urn:li:schemaField:({self.urn},{path})",
        }

    def editableSchemaMetadata(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("editableSchemaMetadata")
        if value is None:
            return None
        return {
            "editableSchemaFieldInfo": [
                {
                    "fieldPath": info.get("fieldPath", ""),
                    "description": info.get("description"),
                    "globalTags": self._tags(info.get("globalTags")),
                    "tags": self._tags(info.get("globalTags")),
                    "glossaryTerms": self._terms(info.get("glossaryTerms")),
                }
                for info in value.get("editableSchemaFieldInfo") or []
            ]
        }

    def _timeseries(self, name: str, args: Json) -> list[Json]:
        # Lite keeps a timeseries aspect as a versioned one: every distinct event is a row.
        rows = self._ctx.backend.store.history(self.urn, name)
        events = [r.value for r in rows]
        start, end = args.get("startTimeMillis"), args.get("endTimeMillis")
        events = [
            e
            for e in events
            if (start is None or e.get("timestampMillis", 0) >= start)
            and (end is None or e.get("timestampMillis", 0) <= end)
        ]
        events.sort(key=lambda e: e.get("timestampMillis", 0), reverse=True)
        limit = args.get("limit")
        return events[:limit] if limit is not None else events

    def operations(self, _info: Any, **args: Any) -> list[Json]:
        return [
            {
                "timestampMillis": op.get("timestampMillis", 0),
                "actor": op.get("actor"),
                "operationType": op.get("operationType") or "UNKNOWN",
                "customOperationType": op.get("customOperationType"),
                "sourceType": op.get("sourceType"),
                "numAffectedRows": op.get("numAffectedRows"),
                "affectedDatasets": op.get("affectedDatasets"),
                "lastUpdatedTimestamp": op.get("lastUpdatedTimestamp", 0),
                "partition": (op.get("partitionSpec") or {}).get("partition"),
                "customProperties": [
                    {"key": k, "value": v}
                    for k, v in sorted((op.get("customProperties") or {}).items())
                ],
            }
            for op in self._timeseries("operation", args)
        ]

    def datasetProfiles(self, _info: Any, **args: Any) -> list[Json]:
        return [
            {
                "timestampMillis": p.get("timestampMillis", 0),
                "rowCount": p.get("rowCount"),
                "columnCount": p.get("columnCount"),
                "sizeInBytes": p.get("sizeInBytes"),
                "fieldProfiles": p.get("fieldProfiles"),
            }
            for p in self._timeseries("datasetProfile", args)
        ]

    def assertions(self, _info: Any, **args: Any) -> Json:
        return entity_assertions(self._ctx, self.urn, args)

    def viewProperties(self, _info: Any, **_: Any) -> Json | None:
        value = self._a("viewProperties")
        if value is None:
            return None
        return {
            "materialized": bool(value.get("materialized", False)),
            "logic": value.get("viewLogic") or "",
            "formattedLogic": value.get("formattedViewLogic"),
            "language": value.get("viewLanguage") or "",
        }

    def fineGrainedLineages(self, _info: Any, **_: Any) -> list[Json] | None:
        value = self._a("upstreamLineage")
        if value is None:
            return None
        return [fine_grained(fgl) for fgl in value.get("fineGrainedLineages") or []]


def _field_ref(urn: str) -> Json:
    inner = urn.removeprefix("urn:li:schemaField:(")[:-1]
    parent, _, path = inner.rpartition(",")
    return {"urn": parent, "path": path}


def fine_grained(fgl: Json) -> Json:
    return {
        "upstreams": [_field_ref(u) for u in fgl.get("upstreams") or []],
        "downstreams": [_field_ref(u) for u in fgl.get("downstreams") or []],
        "query": fgl.get("query"),
        "transformOperation": fgl.get("transformOperation"),
    }


def _platform_schema(value: Json | None) -> Json | None:
    if not value:
        return None
    kind, body = next(iter(value.items()))
    if kind.endswith("KafkaSchema"):
        return {
            "__typename": "KeyValueSchema",
            "keySchema": body.get("keySchema") or "",
            "valueSchema": body.get("documentSchema") or "",
        }
    text = next((v for v in body.values() if isinstance(v, str)), "")
    return {"__typename": "TableSchema", "schema": text}


class SchemaFieldEntity(Node):
    typename = "SchemaFieldEntity"

    def fieldPath(self, _info: Any, **_: Any) -> str:
        return str(self._key().get("fieldPath") or _field_ref(self.urn)["path"])

    def parent(self, _info: Any, **_: Any) -> str | None:
        parent: str | None = self._key().get("parent") or _field_ref(self.urn)["urn"]
        return parent
