"""Lineage and relationship queries: ``searchAcrossLineage``, ``scrollAcrossLineage``,
``Entity.lineage`` (one hop) and ``Entity.relationships``, following GMS's
``LineageSearchService`` and ``EntityLineageResultResolver``. Results name entities by urn;
:mod:`standin.gql` makes the GraphQL objects.

Lineage search is two phases, as in GMS: a walk of the graph index (current at once, bounded
by ``elasticsearch.search.graph.*``, cached unless ``searchFlags.skipCache``), then the walk's
entities filtered and hydrated through the entity search index, which lags first writes.
"""

from __future__ import annotations

import json
from typing import Any

from standin import search
from standin.catalog import Catalog, modelled, to_entity_type
from standin.edges import Edge, entity_type
from standin.index import (
    DOWNSTREAM,
    MAX_HOPS,
    UPSTREAM,
    VISUALIZATION_MAX_HOPS,
    Hop,
    LineageWalk,
)

Json = dict[str, Any]

DEGREE = "degree"
LIGHTNING_THRESHOLD = 300  # cache.search.lineage.lightningThreshold
_SIMPLE_FILTER_FIELDS = {"platform", "origin"}  # the only filters the "lightning" path allows


def max_hops(clauses: list[list[Json]]) -> int | None:
    """``SearchUtils.getMaxHops``: "3+" (or no degree filter) is unbounded, else 2 or 1."""
    values = {
        v
        for clause in clauses
        for c in clause
        if c.get("field") == DEGREE
        for v in search.criterion_values(c)
    }
    if "3+" in values:
        return None
    if "2" in values:
        return 2
    if "1" in values:
        return 1
    return None


def _degree_ok(clauses: list[list[Json]], degree: int) -> bool:
    # LineageSearchService.filterRelationships looks only at the first OR clause.
    if not clauses:
        return True
    values = [
        v
        for c in clauses[0]
        if c.get("field") in (DEGREE, "degree.keyword")
        for v in search.criterion_values(c)
    ]
    if not values:
        return True
    return any(
        (v == "1" and degree == 1) or (v == "2" and degree == 2) or (v == "3+" and degree > 2)
        for v in values
    )


def _groups_schema_fields(flags: Json) -> bool:
    """Whether schemaField results are replaced by their dataset (GMS's default grouping)."""
    criteria = ((flags.get("groupingSpec") or {}).get("groupingCriteria")) or None
    if criteria is None:
        return True
    return any(
        c.get("baseEntityType") in (None, "SCHEMA_FIELD")
        and c.get("groupingEntityType") == "DATASET"
        for c in criteria
    )


def _field_parent(urn: str) -> str:
    inner = urn.removeprefix("urn:li:schemaField:(")[:-1]
    return inner.rpartition(",")[0]


def _ignore_predicate(flags: Json) -> Any:
    rules = flags.get("ignoreAsHops") or []
    if not rules:
        return None

    def ignored(urn: str) -> bool:
        for rule in rules:
            if entity_type(urn) != to_entity_type(rule.get("entityType", "")):
                continue
            platforms = rule.get("platforms")
            if not platforms or any(p in urn for p in platforms):
                return True
        return False

    return ignored


def _path_objects(paths: list[list[str]]) -> list[Json]:
    return [{"path": list(path)} for path in paths]


def _frozen(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _cached_walk(
    ctx: Catalog,
    input: Json,
    *,
    scroll: bool,
    urn: str,
    direction: str,
    hops: int,
    visualization: bool,
) -> LineageWalk:
    """The graph walk, from GMS's lineage cache unless ``searchFlags.skipCache`` is set.

    A hit is served as cached: edges written since are not in it. An entry expires
    ``cache.ttl_s`` after it was written (GMS's Caffeine ``expireAfterWrite``,
    ``CACHE_TTL_SECONDS``, 600 s by default). A hit older than ``lineage_ttl_s`` (a day) is
    still served; ``searchAcrossLineage`` then refills it in the background, which in GMS
    stores a value the next read cannot use, so the next request walks afresh;
    ``scrollAcrossLineage`` only logs.
    """
    flags = input.get("searchFlags") or {}
    lineage_flags = input.get("lineageFlags") or {}
    cache = ctx.backend.lineage_cache
    use_cache = cache.enabled and not flags.get("skipCache")
    key = (
        # searchAcrossLineage keys its walk by the flags after applying its defaults,
        # scrollAcrossLineage by the flags as given: the two rarely share an entry.
        "scroll" if scroll else "search",
        urn,
        direction,
        hops,
        lineage_flags.get("entitiesExploredPerHopLimit"),
        _frozen({k: v for k, v in flags.items() if k != "skipCache"}),
        _frozen(lineage_flags),
    )
    now = ctx.backend.now()
    if use_cache:
        hit = cache.get(key, now)
        if hit is not None:
            if not scroll and now - hit.stored_at > ctx.backend.lineage_ttl_s:
                cache.drop(key)  # the background refill: the next request walks afresh
            return hit.walk
    walk = ctx.index.walk(
        urn,
        direction,
        max_hops=hops,
        explore_limit=lineage_flags.get("entitiesExploredPerHopLimit"),
        ignore_as_hop=_ignore_predicate(lineage_flags),
        limits=ctx.backend.graph,
        visualization=visualization,
    )
    if use_cache:
        cache.put(key, walk, now)
    return walk


def search_lineage(ctx: Catalog, input: Json, *, scroll: bool) -> Json:
    """``searchAcrossLineage`` (offset paging) or ``scrollAcrossLineage`` (cursor paging)."""
    urn = input.get("urn") or ""
    direction = UPSTREAM if input.get("direction") == "UPSTREAM" else DOWNSTREAM
    clauses = search.or_filters(input)
    flags = input.get("searchFlags") or {}
    lineage_flags = input.get("lineageFlags") or {}
    explore_limit = lineage_flags.get("entitiesExploredPerHopLimit")
    visualization = explore_limit is not None or bool(lineage_flags.get("ignoreAsHops"))
    hops = max_hops(clauses) or MAX_HOPS
    if visualization:
        hops = min(hops, VISUALIZATION_MAX_HOPS)
    walk = _cached_walk(
        ctx,
        input,
        scroll=scroll,
        urn=urn,
        direction=direction,
        hops=hops,
        visualization=visualization,
    )
    found = _group(walk.hops) if _groups_schema_fields(flags) else walk.hops
    types = {to_entity_type(t) for t in input.get("types") or []}
    found = [h for h in found if (not types or entity_type(h.urn) in types)]
    found = [h for h in found if _degree_ok(clauses, h.degree)]

    query = input.get("query") or "*"
    other = [
        c for clause in clauses for c in clause if c.get("field") not in (DEGREE, "degree.keyword")
    ]
    lightning = (
        len(found) > LIGHTNING_THRESHOLD
        and query == "*"
        and all(c.get("field") in _SIMPLE_FILTER_FIELDS for c in other)
        and not input.get("sortInput")
    )
    if lightning:
        # GMS answers big unfiltered walks straight from the graph, in walk order, without
        # consulting the search index: ghost, soft-deleted and not yet indexed entities are
        # included then.
        hits = [h for h in found if search.matches_filters(ctx, h.urn, clauses, skip={DEGREE})]
    else:
        # The "tortoise" path hydrates through the search index: an entity it has no
        # document for yet (written less than the index's lag ago) is not a result.
        include_deleted = bool(flags.get("includeSoftDeleted"))
        hits = sorted(
            (
                h
                for h in found
                if ctx.searchable(h.urn)
                and (include_deleted or not ctx.index.is_removed(h.urn))
                and search.matches_filters(ctx, h.urn, clauses, skip={DEGREE, "degree.keyword"})
                and search.matches_query(ctx, h.urn, query)
            ),
            key=lambda h: h.urn,
        )
    start, end, next_id = search.page_bounds(input, len(hits), scroll=scroll)
    page = [h for h in hits[start:end] if modelled(h.urn)]
    results = [
        {
            "entity": h.urn,
            "paths": _path_objects(h.paths),
            "degree": h.degree,
            "degrees": h.degrees,
            "explored": h.explored,
            "truncatedChildren": h.truncated_children,
            "ignoredAsHop": h.ignored_as_hop,
            "matchedFields": [],
            "insights": [],
        }
        for h in page
    ]
    body: Json = {
        "count": len(results),
        "total": len(hits),
        "searchResults": results,
        "facets": _facets(ctx, hits, flags),
        # GMS computes FreshnessStats (cached, LineageGraphCache time) but never sets them on
        # the result: a cached answer cannot be told from a fresh one.
        "freshness": None,
        "isPartial": walk.partial,
    }
    if scroll:
        body["nextScrollId"] = next_id
    else:
        body["start"] = start
    return body


def _group(hops: list[Hop]) -> list[Hop]:
    """schemaField results → their dataset, paths merged (``generateUrnToRelationshipMap``)."""
    merged: dict[str, Hop] = {}
    for hop in hops:
        urn = _field_parent(hop.urn) if entity_type(hop.urn) == "schemaField" else hop.urn
        if urn in merged:
            merged[urn].paths.extend(hop.paths)
            continue
        merged[urn] = Hop(
            urn=urn,
            degree=hop.degree,
            edge=hop.edge,
            degrees=list(hop.degrees),
            paths=list(hop.paths),
            explored=hop.explored,
            truncated_children=hop.truncated_children,
            ignored_as_hop=hop.ignored_as_hop,
        )
    return list(merged.values())


def _facets(ctx: Catalog, hits: list[Hop], flags: Json) -> list[Json]:
    degrees = {"1": 0, "2": 0, "3+": 0}
    for h in hits:
        degrees["1" if h.degree == 1 else "2" if h.degree == 2 else "3+"] += 1
    degree_facet = {
        "field": DEGREE,
        "displayName": "Degree of Dependencies",
        "aggregations": [{"value": k, "count": v, "entity": None} for k, v in degrees.items()],
    }
    return [degree_facet, *search.facets(ctx, [h.urn for h in hits], flags)]


# --- one hop and generic relationships -------------------------------------------------------


def _edge_times(edge: Edge) -> Json:
    return {
        "createdOn": edge.created_on,
        "createdActor": edge.created_actor,
        "updatedOn": edge.updated_on,
        "updatedActor": edge.updated_actor,
    }


def one_hop(ctx: Catalog, urn: str, input: Json) -> Json:
    """``Entity.lineage(input)``: GMS hard-codes ``maxHops=1`` here; count defaults to 100."""
    direction = UPSTREAM if input.get("direction") == "UPSTREAM" else DOWNSTREAM
    neighbours = ctx.index.lineage_neighbours(urn, direction)
    if input.get("includeGhostEntities"):
        kept = neighbours
    else:
        kept = [(o, e) for o, e in neighbours if ctx.exists(o) and not ctx.index.is_removed(o)]
    kept = [(o, e) for o, e in kept if modelled(o)]
    start = int(input.get("start") or 0)
    count = input.get("count")
    page = kept[start : start + (100 if count is None else int(count))]
    return {
        "start": start,
        "count": len(page),
        "total": len(kept),
        "filtered": len(neighbours) - len(kept),
        "relationships": [
            {
                "type": edge.rel,
                "entity": other,
                "degree": 1,
                "isManual": None,
                "paths": [{"path": [urn, other]}],
                **_edge_times(edge),
            }
            for other, edge in page
        ],
    }


def relationships(ctx: Catalog, urn: str, input: Json) -> Json:
    """``Entity.relationships(input: {types, direction, start, count, includeSoftDelete})``."""
    outgoing = input.get("direction") == "OUTGOING"
    edges = ctx.index.relationships(urn, input.get("types") or [], outgoing=outgoing)
    others = [(e.dst if outgoing else e.src, e) for e in edges]
    if input.get("includeSoftDelete") is False:
        others = [(o, e) for o, e in others if not ctx.index.is_removed(o)]
    start = int(input.get("start") or 0)
    count = input.get("count")
    page = others[start : start + (100 if count is None else int(count))]
    return {
        "start": start,
        "count": len(page),
        "total": len(others),
        "relationships": [
            {
                "type": edge.rel,
                "direction": "OUTGOING" if outgoing else "INCOMING",
                "entity": other,
                "created": {"time": edge.created_on, "actor": edge.created_actor}
                if edge.created_on
                else None,
            }
            for other, edge in page
        ],
    }
