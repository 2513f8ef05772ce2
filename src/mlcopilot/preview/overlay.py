"""A catalog as it would be after one dataset changed, for the scan to run on unaltered.

:class:`OverlayCatalog` wraps the real catalog and delegates everything, except that the
changed dataset reads as it would after the change: its node (from ``nodes`` and in every
walked lineage) carries the proposed schema and deprecation. Lineage itself is not changed:
no change the preview takes (columns, deprecation) adds or removes an edge.

History answers as the real catalog does, with one exception that keeps the preview honest
about first scans: where the catalog's history cannot tell the dataset's schema at a model's
training time, a scan takes the *current* schema as the model's baseline. Run now and again
after the change, that baseline is today's schema, the one before the change; so the
overlay answers today's schema there, never the proposed one (which would hide the change
from schema drift).

It writes nothing: ``apply`` only previews (a dry-run scan asks for nothing else).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from mlcopilot.model import Edge, Lineage, Node, Schema, Urn, Write
from mlcopilot.protocols import Catalog, WalkLimits
from mlcopilot.scan import BatchedHistory, LineagePrefetch


class OverlayCatalog:
    """``inner`` with ``changed`` in place of the node of the same urn (see the module)."""

    def __init__(self, inner: Catalog, before: Node, changed: Node) -> None:
        if before.urn != changed.urn:
            raise ValueError(f"overlay of {before.urn} given a node of {changed.urn}")
        self._inner = inner
        self._before = before
        self._changed = changed

    @property
    def label(self) -> str:
        """The real catalog's label: the reports name the catalog the change is made in."""
        return self._inner.label

    @property
    def changed(self) -> Node:
        """The dataset as it would be after the change."""
        return self._changed

    def models(self) -> list[Urn]:
        """Every ML model of the real catalog."""
        return self._inner.models()

    def nodes(self, urns: Sequence[Urn]) -> dict[Urn, Node]:
        """The real nodes, the changed dataset as it would be."""
        found = self._inner.nodes(urns)
        if self._changed.urn in found:
            found[self._changed.urn] = self._changed
        return found

    def upstream(self, urns: Sequence[Urn]) -> list[Edge]:
        """The real edges (a column change or deprecation changes none)."""
        return self._inner.upstream(urns)

    def lineage(self, root: Urn, limits: WalkLimits) -> Lineage:
        """The real walk, with the changed dataset's node swapped in where it was reached."""
        walked = self._inner.lineage(root, limits)
        if self._changed.urn not in walked.nodes:
            return walked
        nodes: Mapping[Urn, Node] = {**walked.nodes, self._changed.urn: self._changed}
        return replace(walked, nodes=nodes)

    def prefetch(self, roots: Sequence[Urn], limits: WalkLimits) -> None:
        """Let the real catalog load the walks in batches, when it can."""
        if isinstance(self._inner, LineagePrefetch):
            self._inner.prefetch(roots, limits)

    def schema_as_of(self, urn: Urn, when: datetime) -> Schema | None:
        """The real history; today's schema of the changed dataset where history cannot tell."""
        return self._answer(urn, self._inner.schema_as_of(urn, when))

    def schemas_at(
        self, requests: Iterable[tuple[Urn, datetime]]
    ) -> dict[tuple[Urn, datetime], Schema | None]:
        """:meth:`schema_as_of` of each request, batched when the real catalog batches."""
        wanted = list(dict.fromkeys(requests))
        if isinstance(self._inner, BatchedHistory):
            found = self._inner.schemas_at(wanted)
        else:
            found = {(urn, when): self._inner.schema_as_of(urn, when) for urn, when in wanted}
        return {key: self._answer(key[0], found.get(key)) for key in wanted}

    def _answer(self, urn: Urn, historic: Schema | None) -> Schema | None:
        if historic is None and urn == self._changed.urn:
            return self._before.schema
        return historic

    def apply(self, writes: Sequence[Write], *, dry_run: bool = False) -> list[Write]:
        """What the real catalog would change for ``writes``; never writes.

        Raises:
            RuntimeError: Asked to write: a preview must not.
        """
        if not dry_run:
            raise RuntimeError("the impact preview's catalog overlay never writes")
        return self._inner.apply(writes, dry_run=True)

    def close(self) -> None:
        """Nothing: the real catalog belongs to the caller."""
