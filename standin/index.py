"""The in-memory graph index: built once from Lite, then updated on every write.

It plays the part of GMS's graph index (Elasticsearch ``graph_service_v1``) plus the little
of the entity search index that lineage needs: which urns exist and which are soft-deleted.
Reads never rescan Lite; each write replaces the edges of the one aspect it touched.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from standin.edges import Edge, edges_from_aspect, entity_type

UPSTREAM = "UPSTREAM"
DOWNSTREAM = "DOWNSTREAM"

MAX_HOPS = 1000  # elasticsearch.search.graph.impact.maxHops
VISUALIZATION_MAX_HOPS = 20  # lineageMaxHops, used once explore limits or ignoreAsHops are set
MAX_RELATIONS = 40_000  # elasticsearch.search.graph.impact.maxRelations
MAX_PATHS_PER_ENTITY = 100  # keeps diamond-shaped graphs from exploding path lists


def split_field_urn(urn: str) -> tuple[str, str]:
    """``urn:li:schemaField:(<parent>,<path>)`` → (parent, path); ("", "") for other urns."""
    if not urn.startswith("urn:li:schemaField:(") or not urn.endswith(")"):
        return "", ""
    parent, _, path = urn[len("urn:li:schemaField:(") : -1].rpartition(",")
    return parent, path


class LineageLimitError(RuntimeError):
    """More relations than ``impact.maxRelations`` and partial results were not allowed."""


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
        max_relations: int = MAX_RELATIONS,
        allow_partial: bool = False,
    ) -> LineageWalk:
        """Breadth-first lineage from ``start``, hop by hop, as GMS's graph service does.

        Each entity is reported once, at the first hop that reaches it (``degree``), with
        every path that reached it at that hop; later hops that reach it again only add to
        ``degrees``. The start entity is never a result, even through a cycle.
        """
        found: dict[str, Hop] = {}
        frontier: dict[str, list[list[str]]] = {start: [[start]]}
        visited = {start}
        relations = 0
        partial = False
        hop = 0
        while frontier and hop < max_hops and not partial:
            hop += 1
            reached: dict[str, list[list[str]]] = {}
            first_edge: dict[str, Edge] = {}
            for node in sorted(frontier):
                if node in found:
                    found[node].explored = True
                for other, edge in self.lineage_neighbours(node, direction):
                    relations += 1
                    if relations > max_relations:
                        if not allow_partial:
                            raise LineageLimitError(
                                f"Lineage of {start} exceeds {max_relations} relations"
                            )
                        partial = True
                        break
                    if other in visited:
                        if other in found and hop not in found[other].degrees:
                            found[other].degrees.append(hop)
                        continue
                    paths = reached.setdefault(other, [])
                    first_edge.setdefault(other, edge)
                    for path in frontier[node]:
                        if len(paths) < MAX_PATHS_PER_ENTITY:
                            paths.append([*path, other])
                if partial:
                    break
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
        return LineageWalk(hops=list(found.values()), relations=relations, partial=partial)
