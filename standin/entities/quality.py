"""Assertions (DataHub's data-quality checks) and their runs, as GMS serves them from Lite.

GMS lists an entity's assertions by the incoming ``Asserts`` edges the graph index derives
from ``assertionInfo`` (``EntityAssertionsResolver``: 200 by default, soft-deleted ones left
out), reads runs from the timeseries index newest ``timestampMillis`` first
(``AssertionRunEventResolver``), and computes ``health`` from the latest completed run of
each (``EntityHealthResolver``). Lite keeps every distinct run event as a version row, in
write order, so the order is made here.
"""

from __future__ import annotations

from typing import Any

from standin.catalog import Catalog
from standin.entities.base import Json, Node

ASSERTS = "Asserts"
ASSERTIONS_PAGE = 200  # EntityAssertionsResolver's default count
HEALTH_ASSERTIONS = 500  # EntityHealthResolver reads this many Asserts edges


def assertion_urns(ctx: Catalog, urn: str, *, include_removed: bool = False) -> list[str]:
    """The assertions on ``urn`` (incoming ``Asserts`` edges), by urn."""
    edges = ctx.index.relationships(urn, [ASSERTS], outgoing=False)
    found = sorted({e.src for e in edges})
    if include_removed:
        return found
    return [u for u in found if not (ctx.aspect(u, "status") or {}).get("removed")]


def run_events(ctx: Catalog, urn: str, args: Json) -> list[Json]:
    """The assertion's run events as stored, filtered and newest first (ties: last written)."""
    rows = ctx.backend.store.history(urn, "assertionRunEvent")
    start, end = args.get("startTimeMillis"), args.get("endTimeMillis")
    status = args.get("status")
    picked = [
        (r.value.get("timestampMillis", 0), r.version, r.value)
        for r in rows
        if (status is None or r.value.get("status") == status)
        and (start is None or r.value.get("timestampMillis", 0) >= start)
        and (end is None or r.value.get("timestampMillis", 0) <= end)
    ]
    picked.sort(key=lambda p: (p[0], p[1]), reverse=True)
    limit = args.get("limit")
    events = [value for _, _, value in picked]
    return events[:limit] if limit is not None else events


def entity_assertions(ctx: Catalog, urn: str, args: Json) -> Json:
    """``assertions(start, count, includeSoftDeleted)`` on an entity, as GMS answers it."""
    start = int(args.get("start") or 0)
    count = args.get("count")
    every = assertion_urns(ctx, urn, include_removed=True)
    page = every[start : start + (ASSERTIONS_PAGE if count is None else int(count))]
    kept = page if args.get("includeSoftDeleted") else [u for u in page if _live(ctx, u)]
    return {
        "start": start,
        "count": len(page),  # GMS counts the relationships read, soft-deleted ones too
        "total": len(every),
        "assertions": [ctx.ref(u) for u in kept],
    }


def assertions_health(ctx: Catalog, urn: str) -> Json | None:
    """The ``ASSERTIONS`` health of ``urn``: FAIL when any latest completed run did not pass."""
    active = assertion_urns(ctx, urn)[:HEALTH_ASSERTIONS]
    latest = {}
    for assertion in active:
        events = [e for e in run_events(ctx, assertion, {"status": "COMPLETE"}) if _on(e, urn)]
        if events:
            latest[assertion] = (events[0].get("result") or {}).get("type")
    if not latest:
        return None  # assertions that never ran give no health
    failing = [u for u, kind in latest.items() if kind != "SUCCESS"]
    if failing:
        return {
            "type": "ASSERTIONS",
            "status": "FAIL",
            "message": f"{len(failing)} of {len(active)} assertions are failing",
            "causes": failing,
        }
    return {"type": "ASSERTIONS", "status": "PASS", "message": "All assertions are passing"}


def _on(event: Json, urn: str) -> bool:
    return event.get("asserteeUrn") in (None, urn)


def _live(ctx: Catalog, urn: str) -> bool:
    return ctx.exists(urn) and not (ctx.aspect(urn, "status") or {}).get("removed")


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

    def platform(self, _info: Any, **_: Any) -> Node | None:
        platform = (self._a("dataPlatformInstance") or {}).get("platform")
        return self._platform_ref(platform or "urn:li:dataPlatform:unknown")

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
