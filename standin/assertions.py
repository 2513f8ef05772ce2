"""Assertions (DataHub's data-quality checks) and their runs, as GMS serves them from Lite.

GMS lists an entity's assertions by the incoming ``Asserts`` edges the graph index derives
from ``assertionInfo`` (``EntityAssertionsResolver``: 200 by default, soft-deleted ones left
out), reads runs from the timeseries index newest ``timestampMillis`` first
(``AssertionRunEventResolver``), and computes ``health`` from the latest completed run of
each (``EntityHealthResolver``). Lite keeps every distinct run event as a version row, in
write order, so the order is made here. Assertions are given as urns; the GraphQL
``Assertion`` object is :class:`standin.entities.quality.Assertion`.
"""

from __future__ import annotations

from typing import Any

from standin.catalog import Catalog

Json = dict[str, Any]

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
        "assertions": kept,
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
