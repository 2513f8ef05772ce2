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

A catalog can answer the question itself by offering :class:`DownstreamModels` (optional);
the index is then only the fallback for what that answer misses.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from mlcopilot.model import Lineage, Urn
from mlcopilot.protocols import Catalog, WalkLimits

MODEL_PREFIX = "urn:li:mlModel:"


@runtime_checkable
class DownstreamModels(Protocol):
    """A catalog that can say which models read an entity, across the ML hops (optional)."""

    def downstream_models(self, urn: Urn) -> list[Urn]:
        """The mlModels whose upstream lineage reaches ``urn`` (``urn`` itself if a model)."""
        ...


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
    index.update(catalog.lineage(model, limits) for model in models)
    return index


def models_downstream(catalog: Catalog, urn: Urn, limits: WalkLimits) -> list[Urn]:
    """The catalog's models whose upstream lineage reaches ``urn``, sorted.

    A catalog offering :class:`DownstreamModels` answers itself; otherwise every model is
    walked once (correct on any catalog, and the cost grows with the estate, not the change).
    """
    if isinstance(catalog, DownstreamModels):
        return sorted(catalog.downstream_models(urn))
    return sorted(build_index(catalog, (), limits).downstream(urn))
