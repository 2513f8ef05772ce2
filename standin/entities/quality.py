"""The GraphQL ``Assertion`` object: an assertion's definition and its runs.

Which assertions an entity has, their run events and the health they give are read in
:mod:`standin.assertions`.
"""

from __future__ import annotations

from typing import Any

from standin.assertions import run_events
from standin.entities.base import Json, Node


def _entries(value: Json | None) -> list[Json] | None:
    if value is None:
        return None
    return [{"key": str(k), "value": str(v)} for k, v in sorted(value.items())]


def _field_ref(urn: str) -> Json:
    inner = urn.removeprefix("urn:li:schemaField:(")[:-1]
    _, _, path = inner.rpartition(",")
    return {"urn": urn, "path": path}


class Assertion(Node):
    typename = "Assertion"

    def _info(self) -> Json:
        return self._a("assertionInfo") or {}

    def platform(self, _info: Any, **_: Any) -> str | None:
        platform = (self._a("dataPlatformInstance") or {}).get("platform")
        return self._platform_urn(platform or "urn:li:dataPlatform:unknown")

    def info(self, _info: Any, **_: Any) -> Json | None:
        info = self._a("assertionInfo")
        if info is None:
            return None
        dataset = info.get("datasetAssertion")
        custom = info.get("customAssertion")
        return {
            "type": info.get("type") or "CUSTOM",
            "description": info.get("description"),
            "externalUrl": info.get("externalUrl"),
            "datasetAssertion": None
            if dataset is None
            else {
                "datasetUrn": dataset.get("dataset"),
                "scope": dataset.get("scope") or "UNKNOWN",
                "fields": [_field_ref(u) for u in dataset.get("fields") or []],
                "aggregation": dataset.get("aggregation"),
                "operator": dataset.get("operator") or "_NATIVE_",
                "nativeType": dataset.get("nativeType"),
                "nativeParameters": _entries(dataset.get("nativeParameters")),
                "logic": dataset.get("logic"),
            },
            "customAssertion": None
            if custom is None
            else {
                "type": custom.get("type") or "",
                "entityUrn": custom.get("entity"),
                "field": _field_ref(custom["field"]) if custom.get("field") else None,
                "logic": custom.get("logic"),
            },
            "source": None
            if info.get("source") is None
            else {"type": info["source"].get("type") or "NATIVE"},
        }

    def runEvents(self, _info: Any, **args: Any) -> Json:
        events = [self._event(e) for e in run_events(self._ctx, self.urn, args)]

        def count(kind: str) -> int:
            return sum(
                1
                for e in events
                if e["status"] == "COMPLETE" and (e["result"] or {}).get("type") == kind
            )

        return {
            "total": len(events),
            "failed": count("FAILURE"),
            "succeeded": count("SUCCESS"),
            "errored": count("ERROR"),
            "runEvents": events,
        }

    def _event(self, event: Json) -> Json:
        result = event.get("result")
        error = (result or {}).get("error")
        return {
            "timestampMillis": event.get("timestampMillis", 0),
            "lastObservedMillis": None,
            "assertionUrn": event.get("assertionUrn") or self.urn,
            "asserteeUrn": event.get("asserteeUrn") or "",
            "runId": event.get("runId") or "",
            "status": event.get("status") or "COMPLETE",
            "partitionSpec": event.get("partitionSpec"),
            "runtimeContext": _entries(event.get("runtimeContext")),
            "result": None
            if result is None
            else {
                "type": result.get("type") or "INIT",
                "severity": result.get("severity"),
                "rowCount": result.get("rowCount"),
                "missingCount": result.get("missingCount"),
                "unexpectedCount": result.get("unexpectedCount"),
                "actualAggValue": result.get("actualAggValue"),
                "externalUrl": result.get("externalUrl"),
                "nativeResults": _entries(result.get("nativeResults")),
                "error": None
                if error is None
                else {
                    "type": error.get("type") or "UNKNOWN_ERROR",
                    "properties": _entries(error.get("properties")),
                },
            },
        }
