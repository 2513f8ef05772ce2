"""The in-memory graph index: built once from Lite, then updated on every write.

It plays the part of GMS's graph index (Elasticsearch ``graph_service_v1``) plus the little
of the entity search index that lineage needs: which urns exist and which are soft-deleted.
Reads never rescan Lite; each write replaces the edges of the one aspect it touched.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from standin.edges import Edge, edges_from_aspect, entity_type

UPSTREAM = "UPSTREAM"
DOWNSTREAM = "DOWNSTREAM"

MAX_HOPS = 1000  # elasticsearch.search.graph.impact.maxHops
VISUALIZATION_MAX_HOPS = 20  # lineageMaxHops, used once explore limits or ignoreAsHops are set
MAX_RELATIONS = 40_000  # elasticsearch.search.graph.impact.maxRelations
GRAPH_TIMEOUT_S = 50.0  # elasticsearch.search.graph.timeoutSeconds
SEARCH_QUERY_TIME_RESERVATION = 0.2  # ...impact.searchQueryTimeReservation (partial results)
GRAPH_PAGE = 1000  # elasticsearch.search.graph.batchSize: edges per graph-index page
MAX_PATHS_PER_ENTITY = 100  # keeps diamond-shaped graphs from exploding path lists


def split_field_urn(urn: str) -> tuple[str, str]:
    """``urn:li:schemaField:(<parent>,<path>)`` → (parent, path); ("", "") for other urns."""
    if not urn.startswith("urn:li:schemaField:(") or not urn.endswith(")"):
        return "", ""
    parent, _, path = urn[len("urn:li:schemaField:(") : -1].rpartition(",")
    return parent, path


class LineageLimitError(RuntimeError):
    """More relations than ``impact.maxRelations`` and partial results were not allowed.

    Worded as GMS's ``GraphQueryBaseDAO.getImpactLineage`` words its ``IllegalStateException``.
    """


class LineageTimeoutError(LineageLimitError):
    """The walk outlasted ``graph.timeoutSeconds`` and partial results were not allowed."""


@dataclass
class GraphLimits:
    """What bounds one impact-analysis walk, as ``elasticsearch.search.graph.*`` does.

    ``page_seconds`` is simulated time each page of the graph index costs (a hop reads
    ``ceil(edges / 1000)`` pages, at least one): 0 leaves only the walk's real time, so a test
    can make a walk "take" past ``timeout_s`` without waiting for it.
    """

    max_relations: int = MAX_RELATIONS
    partial: bool = False
    timeout_s: float = GRAPH_TIMEOUT_S
    page_seconds: float = 0.0


@dataclass
class Hop:
    """One entity found by a lineage walk."""

    urn: str
    degree: int
    edge: Edge  # the first edge that reached it
    degrees: list[int] = field(default_factory=list)
    paths: list[list[str]] = field(default_factory=list)
    explored: bool = False
    truncated_children: bool = False
    ignored_as_hop: bool = False


@dataclass
class LineageWalk:
    hops: list[Hop]
    relations: int
    partial: bool


class EdgeIndex:
    """Edges by source and destination, lineage adjacency both ways, and entity presence."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._owned: dict[tuple[str, str], list[Edge]] = {}
        self._out: dict[str, Counter[Edge]] = {}
        self._in: dict[str, Counter[Edge]] = {}
        self._up: dict[str, Counter[tuple[str, Edge]]] = {}
        self._down: dict[str, Counter[tuple[str, Edge]]] = {}
        self._aspects: dict[str, set[str]] = {}
        self._removed: set[str] = set()
        self._fields: dict[str, set[str]] = {}  # dataset -> field paths of its latest schema
        self._unsearchable_until: dict[str, float] = {}  # urn -> when its search doc lands

    # --- maintenance ---------------------------------------------------------------------

    def set_aspect(
        self, urn: str, name: str, value: dict[str, Any] | None, last_observed: int | None = None
    ) -> None:
        """Replace what one aspect contributes; ``value=None`` means the aspect is gone."""
        with self._lock:
            for edge in self._owned.pop((urn, name), []):
                self._unlink(edge)
            if name == "schemaMetadata":
                paths = {f.get("fieldPath") for f in (value or {}).get("fields") or []}
                self._fields[urn] = {p for p in paths if p}
            if value is None:
                names = self._aspects.get(urn, set())
                names.discard(name)
                if not names:
                    self._aspects.pop(urn, None)
                if name == "status" or not names:
                    self._removed.discard(urn)
                return
            self._aspects.setdefault(urn, set()).add(name)
            if name == "status":
                if value.get("removed"):
                    self._removed.add(urn)
                else:
                    self._removed.discard(urn)
            edges = edges_from_aspect(urn, name, value, last_observed)
            self._owned[(urn, name)] = edges
            for edge in edges:
                self._link(edge)

    def _link(self, edge: Edge) -> None:
        self._out.setdefault(edge.src, Counter())[edge] += 1
        self._in.setdefault(edge.dst, Counter())[edge] += 1
        if edge.lineage:
            parent, child = edge.lineage_parent_child()
            self._up.setdefault(child, Counter())[(parent, edge)] += 1
            self._down.setdefault(parent, Counter())[(child, edge)] += 1

    def _unlink(self, edge: Edge) -> None:
        def drop(table: dict[str, Counter[Any]], key: str, item: object) -> None:
            counts = table.get(key)
            if counts is None:
                return
            counts[item] -= 1
            if counts[item] <= 0:
                del counts[item]
            if not counts:
                del table[key]

        drop(self._out, edge.src, edge)
        drop(self._in, edge.dst, edge)
        if edge.lineage:
            parent, child = edge.lineage_parent_child()
            drop(self._up, child, (parent, edge))
            drop(self._down, parent, (child, edge))

    # --- presence ------------------------------------------------------------------------

    def exists(self, urn: str) -> bool:
        """GMS's notion: the entity has a key aspect, i.e. any aspect was ever written.

        A column exists once its dataset's schema lists it: GMS's schemaField side effect
        creates those entities from ``schemaMetadata``.
        """
        with self._lock:
            if urn in self._aspects:
                return True
            parent, path = split_field_urn(urn)
            return bool(parent) and path in self._fields.get(parent, ())

    def hold_from_search(self, urn: str, until: float) -> None:
        """``urn`` (just written for the first time) reaches the search index at ``until``."""
        with self._lock:
            self._unsearchable_until[urn] = until

    def searchable(self, urn: str, now: float) -> bool:
        """Whether the search index has a document for ``urn`` at ``now`` (epoch seconds).

        An entity exists in the search index once the index has caught up with its first
        write; a column follows its dataset. The graph edges and aspects are current at once.
        """
        if not self.exists(urn):
            return False
        parent, _ = split_field_urn(urn)
        with self._lock:
            until = self._unsearchable_until.get(parent or urn)
            if until is not None and now >= until:
                del self._unsearchable_until[parent or urn]
                until = None
        return until is None

    def is_removed(self, urn: str) -> bool:
        with self._lock:
            parent, _ = split_field_urn(urn)
            return urn in self._removed or (bool(parent) and parent in self._removed)

    def aspect_names(self, urn: str) -> set[str]:
        with self._lock:
            return set(self._aspects.get(urn, ()))

    def urns(self, types: Iterable[str] | None = None) -> list[str]:
        """Existing urns, sorted, optionally only of the given entity types."""
        wanted = set(types) if types is not None else None
        with self._lock:
            found = list(self._aspects)
        return sorted(u for u in found if wanted is None or entity_type(u) in wanted)

    # --- relationships -------------------------------------------------------------------

    def relationships(self, urn: str, types: Iterable[str], outgoing: bool) -> list[Edge]:
        """Edges of the given relationship types leaving (or entering) ``urn``, deduplicated."""
        wanted = set(types)
        with self._lock:
            table = self._out if outgoing else self._in
            edges = [e for e in table.get(urn, Counter()) if e.rel in wanted]
        unique: dict[tuple[str, str, str], Edge] = {}
        for edge in sorted(edges, key=lambda e: (e.rel, e.dst if outgoing else e.src)):
            unique.setdefault((edge.src, edge.rel, edge.dst), edge)
        return list(unique.values())

    def lineage_neighbours(self, urn: str, direction: str) -> list[tuple[str, Edge]]:
        """One hop of lineage: (neighbour, edge), one per (neighbour, relationship)."""
        with self._lock:
            table = self._up if direction == UPSTREAM else self._down
            pairs = list(table.get(urn, Counter()))
        unique: dict[tuple[str, str], tuple[str, Edge]] = {}
        for other, edge in sorted(pairs, key=lambda p: (p[0], p[1].rel)):
            unique.setdefault((other, edge.rel), (other, edge))
        return list(unique.values())

    # --- multi-hop lineage ---------------------------------------------------------------

    def walk(
        self,
        start: str,
        direction: str,
        *,
        max_hops: int = MAX_HOPS,
        explore_limit: int | None = None,
        ignore_as_hop: Callable[[str], bool] | None = None,
        limits: GraphLimits | None = None,
        visualization: bool = False,
    ) -> LineageWalk:
        """Breadth-first lineage from ``start``, hop by hop, as GMS's graph service does.

        Each entity is reported once, at the first hop that reaches it (``degree``), with
        every path that reached it at that hop; later hops that reach it again only add to
        ``degrees``. The start entity is never a result, even through a cycle.

        Impact analysis (``getImpactLineage``, the default) is bounded by ``limits``: after
        each hop, ``max_relations`` entities reached (GMS counts relationships, one per entity
        first reached) or more is an error, or with ``partial`` the walk stops there and says
        so; before each hop, a walk past ``timeout_s`` (``80%`` of it with ``partial``: the
        rest is reserved for the search phase) is an error, or stops and says so. The
        visualization walk (``getLineage``: explore limits or ``ignoreAsHops`` set) has no
        relation cap and, past the timeout, returns what it has *without* saying it is
        partial, as GMS does.
        """
        bounds = limits or GraphLimits()
        budget = bounds.timeout_s * (1 - SEARCH_QUERY_TIME_RESERVATION if bounds.partial else 1)
        started = time.perf_counter()
        simulated = 0.0
        found: dict[str, Hop] = {}
        frontier: dict[str, list[list[str]]] = {start: [[start]]}
        visited = {start}
        relations = 0
        partial = False
        hop = 0
        while frontier and hop < max_hops and not partial:
            if time.perf_counter() - started + simulated > budget:
                if visualization:
                    break  # getLineage: "Returning results so far", isPartial false
                if not bounds.partial:
                    raise LineageTimeoutError(
                        f"Lineage operation timed out after {bounds.timeout_s:g} seconds. "
                        f"Entity: {start}, Direction: {direction}, MaxHops: {max_hops}. "
                        "Consider increasing the timeout or set partialResults to true to "
                        "return partial results."
                    )
                partial = True
                break
            hop += 1
            reached: dict[str, list[list[str]]] = {}
            first_edge: dict[str, Edge] = {}
            scanned = 0
            for node in sorted(frontier):
                if node in found:
                    found[node].explored = True
                for other, edge in self.lineage_neighbours(node, direction):
                    relations += 1
                    scanned += 1
                    if other in visited:
                        if other in found and hop not in found[other].degrees:
                            found[other].degrees.append(hop)
                        continue
                    paths = reached.setdefault(other, [])
                    first_edge.setdefault(other, edge)
                    for path in frontier[node]:
                        if len(paths) < MAX_PATHS_PER_ENTITY:
                            paths.append([*path, other])
            simulated += bounds.page_seconds * max(1, math.ceil(scanned / GRAPH_PAGE))
            next_frontier: dict[str, list[list[str]]] = {}
            for other in sorted(reached):
                visited.add(other)
                ignored = bool(ignore_as_hop and ignore_as_hop(other))
                found[other] = Hop(
                    urn=other,
                    degree=hop,
                    edge=first_edge[other],
                    degrees=[hop],
                    paths=reached[other],
                    ignored_as_hop=ignored,
                )
                if not ignored:
                    next_frontier[other] = reached[other]
            if explore_limit is not None and len(next_frontier) > explore_limit:
                kept = sorted(next_frontier)[:explore_limit]
                for urn in set(next_frontier) - set(kept):
                    for path in next_frontier[urn]:
                        parent = path[-2]
                        if parent in found:
                            found[parent].truncated_children = True
                next_frontier = {u: next_frontier[u] for u in kept}
            frontier = next_frontier
            cap = bounds.max_relations
            if not visualization and cap > 0 and len(found) >= cap:
                if not bounds.partial:
                    raise LineageLimitError(
                        f"Lineage results exceeded the configured maxRelations limit of {cap}. "
                        f"Entity: {start}, Direction: {direction}, MaxHops: {max_hops}. "
                        "Consider reducing maxHops or increasing the maxRelations limit, or set "
                        "partialResults to true to return partial results."
                    )
                partial = True  # the hop that reached the cap is kept whole, as GMS keeps it
        return LineageWalk(hops=list(found.values()), relations=relations, partial=partial)


# --- GMS's cache of lineage walks ---------------------------------------------------------

CACHE_TTL_S = 600.0
"""``cache.primary.ttlSeconds`` (``CACHE_TTL_SECONDS``): the Caffeine (or Hazelcast) cache GMS
keeps lineage walks in expires each entry this long after it was written."""
LINEAGE_TTL_S = 86_400.0
"""``cache.search.lineage.ttlSeconds``: past this age a cached walk is stale (only reachable
when ``CACHE_TTL_SECONDS`` is raised above it)."""
CACHE_MAX_ENTRIES = 10_000  # cache.primary.maxSize


@dataclass(frozen=True)
class CachedWalk:
    walk: LineageWalk
    stored_at: float  # epoch seconds on the stand-in's clock


class LineageCache:
    """GMS's ``relationshipSearchService`` cache of lineage walks (``LineageSearchService``).

    Keyed as GMS keys it: source urn, direction, hops, explore limit, and the search and
    lineage flags except ``skipCache`` (``searchAcrossLineage`` applies its default flags
    first, so it and ``scrollAcrossLineage`` keep separate entries); the query, filters, types
    and paging are applied to the cached walk afresh on every request, so the pages of a
    scroll share one walk. Entries expire ``ttl_s`` after they were written.
    """

    def __init__(self, ttl_s: float = CACHE_TTL_S, max_entries: int = CACHE_MAX_ENTRIES) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.enabled = True  # featureFlags.lineageSearchCacheEnabled
        self._entries: OrderedDict[Hashable, CachedWalk] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, now: float) -> CachedWalk | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and now - entry.stored_at > self.ttl_s:
                del self._entries[key]  # expireAfterWrite
                entry = None
            return entry

    def put(self, key: Hashable, walk: LineageWalk, now: float) -> None:
        with self._lock:
            self._entries[key] = CachedWalk(walk, now)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def drop(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
