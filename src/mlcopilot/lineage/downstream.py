"""Which models read an entity: the models downstream of it.

"Downstream" is the reverse of the scan's own upstream walk (:meth:`Catalog.lineage`), so it
crosses every hop the walk crosses, the ML hops DataHub's lineage index does not follow
(training data, features, feature tables, training runs) included. The watcher keeps the
reverse of every watched model's walk in memory (:class:`DownstreamIndex`): built once when it
starts, before it consumes an event, and replaced for each model every time a scan walks it
again. That keeps it right as lineage changes: an edge is added or removed by an aspect of an
entity the model's walk already reaches (the downstream end's ``upstreamLineage``, a job's
inputs and outputs, a model's properties), so the change itself rescans the model, and the
rescan's walk updates the index.

A catalog can answer the question itself by offering :class:`DownstreamModels` (optional),
which :func:`models_downstream` (the impact preview) prefers to indexing every model. Every
backend does it the same way: one batched read, :meth:`DownstreamSource.downstream` (the
edges one hop downstream of a whole level, the exact reverse of :meth:`Catalog.upstream`),
and the one walk here, :func:`walk_downstream`, level by level as
:func:`mlcopilot.lineage.upstream.walk_upstream` goes up.

What the reverse walk agrees on with the fallback (walk every model, index what each reached):

- ``max_hops``: a model is found when its shortest path to the entity is at most
  ``max_hops`` hops, exactly the models whose capped upstream walk reaches it.
- ``max_nodes`` caps one model's upstream walk and has no reverse: the reverse walk visits
  each urn once and is not capped by it, so a model whose own walk is truncated before it
  reaches the entity is still named (a preview should over-warn, not miss).
- Soft-deleted entities are crossed, as the upstream walk crosses them; a soft-deleted or
  missing *model* is not named (``Catalog.models`` leaves those out, so no scan reports them).
- An entity the catalog has no aspects for is no error (the upstream walk raises only for a
  missing root model): its downstream is whatever still references it, often nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from mlcopilot.model import Edge, Lineage, Node, Urn
from mlcopilot.protocols import Catalog, LineagePrefetch, WalkLimits

MODEL_PREFIX = "urn:li:mlModel:"


@runtime_checkable
class DownstreamModels(Protocol):
    """A catalog that can say which models read an entity, across the ML hops (optional)."""

    def downstream_models(self, urn: Urn, limits: WalkLimits | None = None) -> list[Urn]:
        """The mlModels whose upstream lineage reaches ``urn`` (``urn`` itself if a model).

        Sorted; within ``limits`` as described in the module docstring (default limits when
        None). Soft-deleted and missing models are left out.
        """
        ...


@runtime_checkable
class DownstreamSource(Protocol):
    """The two catalog reads a reverse walk needs."""

    def nodes(self, urns: Sequence[Urn]) -> dict[Urn, Node]:
        """Current metadata of each urn."""
        ...

    def downstream(self, urns: Sequence[Urn]) -> list[Edge]:
        """Every edge one hop downstream of each urn: those whose ``upstream`` is one of them.

        The exact reverse of :meth:`Catalog.upstream`: an edge is here for ``u`` if and only
        if ``upstream([edge.downstream])`` lists it.
        """
        ...


def walk_downstream(source: DownstreamSource, root: Urn, limits: WalkLimits) -> dict[Urn, int]:
    """Every urn downstream of ``root`` within ``limits.max_hops``, with its distance in hops.

    Breadth-first, one :meth:`DownstreamSource.downstream` call per level (never one per
    urn), so a remote catalog can batch; each urn is visited once, so cycles end. ``root`` is
    in the result at distance 0.
    """
    hops: dict[Urn, int] = {root: 0}
    frontier: list[Urn] = [root]
    level = 0
    while frontier and level < limits.max_hops:
        new: list[Urn] = []
        for edge in source.downstream(frontier):
            if edge.upstream in hops and edge.downstream not in hops:
                hops[edge.downstream] = level + 1
                new.append(edge.downstream)
        frontier = new
        level += 1
    return hops


def downstream_models_of(source: DownstreamSource, root: Urn, limits: WalkLimits) -> list[Urn]:
    """The models :func:`walk_downstream` reaches that exist and are not soft-deleted, sorted."""
    reached = [u for u in walk_downstream(source, root, limits) if u.startswith(MODEL_PREFIX)]
    if not reached:
        return []
    nodes = source.nodes(reached)
    return sorted(u for u in reached if nodes[u].exists and not nodes[u].removed)


class DownstreamIndex:
    """Entity → the watched models whose last walk reached it. Safe across threads."""

    def __init__(self, watched: Sequence[Urn] = ()) -> None:
        self._only = frozenset(watched)
        self._lock = threading.Lock()
        self._models_of: dict[Urn, set[Urn]] = {}
        self._reached: dict[Urn, frozenset[Urn]] = {}

    @property
    def models(self) -> list[Urn]:
        """The models indexed, sorted."""
        with self._lock:
            return sorted(self._reached)

    def watches(self, model: Urn) -> bool:
        """Whether ``model`` is watched (every model, unless ``--model`` named some)."""
        return not self._only or model in self._only

    def update(self, lineages: Iterable[Lineage]) -> None:
        """Replace what each lineage's model reaches with what its new walk reached."""
        with self._lock:
            for lineage in lineages:
                if not self.watches(lineage.root):
                    continue
                self._forget(lineage.root)
                reached = frozenset({lineage.root, *lineage.nodes})
                self._reached[lineage.root] = reached
                for urn in reached:
                    self._models_of.setdefault(urn, set()).add(lineage.root)

    def forget(self, models: Iterable[Urn]) -> None:
        """Drop models that are gone from the catalog."""
        with self._lock:
            for model in models:
                self._forget(model)

    def _forget(self, model: Urn) -> None:
        for urn in self._reached.pop(model, frozenset()):
            readers = self._models_of.get(urn)
            if readers is not None:
                readers.discard(model)
                if not readers:
                    del self._models_of[urn]

    def downstream(self, urn: Urn) -> set[Urn]:
        """The indexed models whose walk reached ``urn``."""
        with self._lock:
            return set(self._models_of.get(urn, ()))


def build_index(catalog: Catalog, watched: Sequence[Urn], limits: WalkLimits) -> DownstreamIndex:
    """Walk every watched model (all the catalog's, when ``watched`` is empty) once."""
    index = DownstreamIndex(watched)
    models = list(watched) or catalog.models()
    if len(models) > 1 and isinstance(catalog, LineagePrefetch):
        # A remote catalog reads the estate a level per batch, as a scan of it would.
        catalog.prefetch(models, limits)
    index.update(catalog.lineage(model, limits) for model in models)
    return index


def models_downstream(catalog: Catalog, urn: Urn, limits: WalkLimits) -> list[Urn]:
    """The catalog's models whose upstream lineage reaches ``urn``, sorted.

    A catalog offering :class:`DownstreamModels` answers itself; otherwise every model is
    walked once (correct on any catalog, and the cost grows with the estate, not the change).
    """
    if isinstance(catalog, DownstreamModels):
        return sorted(catalog.downstream_models(urn, limits))
    return sorted(build_index(catalog, (), limits).downstream(urn))
