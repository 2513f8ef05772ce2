"""The catalog as it would be after one dataset changed, and the baselines a scan now sets.

:class:`OverlayCatalog` wraps the real catalog and delegates everything, except that the
changed dataset reads as it would after the change: its node (from ``nodes`` and in every
walked lineage) carries the proposed schema and deprecation. Lineage itself is not changed:
no change the preview takes (columns, deprecation) adds or removes an edge. History answers
as the real catalog does. It writes nothing: ``apply`` only previews.

:class:`BaselineView` is the state store, read-only, as a scan run *now* would leave it: a
model with no stored baseline for the changed dataset gets the one that scan would store (the
catalog's history at the model's training time, else today's schema: the first-scan
snapshot). Without it, a model scanned for the first time after the change would take the
changed schema as its baseline and see no drift; the preview answers what a scan now and
again after the change compare.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal, cast

from mlcopilot.model import Baseline, CurrentSchemas, Edge, Lineage, Node, Schema, Urn, Write
from mlcopilot.protocols import BatchedHistory, Catalog, LineagePrefetch, StateStore, WalkLimits


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
        """The real catalog's history."""
        return self._inner.schema_as_of(urn, when)

    def schemas_at(
        self, requests: Iterable[tuple[Urn, datetime]]
    ) -> dict[tuple[Urn, datetime], Schema | None]:
        """The real catalog's history of each request, batched when it batches."""
        return history(self._inner, requests)

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


def history(
    catalog: Catalog, requests: Iterable[tuple[Urn, datetime]]
) -> dict[tuple[Urn, datetime], Schema | None]:
    """:meth:`Catalog.schema_as_of` of each request, in batches when the catalog can."""
    wanted = list(dict.fromkeys(requests))
    if isinstance(catalog, BatchedHistory):
        found = catalog.schemas_at(wanted)
        return {key: found.get(key) for key in wanted}
    return {(urn, when): catalog.schema_as_of(urn, when) for urn, when in wanted}


class BaselineView:
    """A state store, read-only, with the baselines a scan now would add (see the module).

    Only what a dry-run scan reads is offered; anything that would write raises.
    """

    def __init__(self, inner: StateStore, added: Mapping[Urn, Baseline]) -> None:
        self._inner = inner
        self._added = dict(added)
        """Model → its would-be baseline of the changed dataset."""

    @classmethod
    def now(
        cls, catalog: Catalog, store: StateStore, before: Node, models: Sequence[Urn], at: datetime
    ) -> StateStore:
        """``store`` plus the baseline of ``before`` a scan at ``at`` would give each model."""
        if before.schema is None:
            return store
        missing = [m for m in models if store.baseline(m, before.urn) is None]
        trained = {u: n.trained_at for u, n in catalog.nodes(missing).items()}
        asked = [(before.urn, when) for when in trained.values() if when is not None]
        historic = history(catalog, asked)
        added: dict[Urn, Baseline] = {}
        for model in missing:
            when = trained.get(model)
            schema = historic.get((before.urn, when)) if when is not None else None
            source: Literal["history", "first_scan"] = "first_scan"
            if schema is not None:
                source = "history"
            added[model] = Baseline(model, before.urn, schema or before.schema, source, at)
        # Structurally a store for what a dry-run scan calls (see the class); writers raise.
        return cast("StateStore", cls(store, added))

    def baseline(self, model: Urn, dataset: Urn) -> Baseline | None:
        """The stored baseline, else the would-be one."""
        stored = self._inner.baseline(model, dataset)
        added = self._added.get(model)
        if stored is None and added is not None and added.dataset == dataset:
            return added
        return stored

    def baselines(self, model: Urn) -> list[Baseline]:
        """The stored baselines and the would-be one, by dataset."""
        stored = self._inner.baselines(model)
        added = self._added.get(model)
        if added is not None and all(b.dataset != added.dataset for b in stored):
            stored = sorted([*stored, added], key=lambda b: b.dataset)
        return stored

    def baselines_of(
        self, models: Sequence[Urn], *, current: CurrentSchemas | None = None
    ) -> dict[Urn, list[Baseline]]:
        """:meth:`baselines` of each of ``models`` (``current`` as the store's, see there)."""
        found = self._inner.baselines_of(models, current=current)
        for model in models:
            added = self._added.get(model)
            if added is not None and all(b.dataset != added.dataset for b in found[model]):
                found[model] = sorted([*found[model], added], key=lambda b: b.dataset)
        return found

    def baselined_datasets(self, models: Sequence[Urn]) -> dict[Urn, set[Urn]]:
        """The stored baselines' datasets and the would-be one's."""
        found = self._inner.baselined_datasets(models)
        for model in models:
            added = self._added.get(model)
            if added is not None:
                found[model].add(added.dataset)
        return found

    def __getattr__(self, name: str) -> Any:
        if name in _WRITERS:
            raise RuntimeError(f"the impact preview's store view never writes ({name})")
        return getattr(self._inner, name)


_WRITERS = frozenset(
    {
        "save_baselines",
        "record_scan",
        "acknowledge",
        "resolve",
        "retry_outbox",
        "request_rescans",
        "claim_rescans",
        "complete_rescans",
        "fail_rescans",
        "claim",
        "complete",
        "fail",
    }
)
