"""What a change to one dataset would break: the models downstream, and how badly.

:func:`preview_change` answers with the scan's own code, so the preview and the incidents a
scan opens after the change agree by construction:

1. the models reading the dataset: :func:`mlcopilot.lineage.downstream.models_downstream`;
2. a dry-run scan of those models against the real catalog, and another against the
   catalog as it would be after the change (:class:`~mlcopilot.scan.whatif.overlay.OverlayCatalog`),
   with the same checks and clock, and the store (only read) as a scan now would leave it:
   each model with a baseline of the dataset (:class:`~mlcopilot.scan.whatif.overlay.BaselineView`);
3. the findings of the second that the first does not have, by incident id (model, check,
   entity, field): the incidents the change would open. A finding already present before the
   change (an open incident) is not the change's doing and is not counted, even when the
   change makes it worse.

Per model, the severity is that of its worst new finding; the affected features are the ML
features (and primary keys and feature tables) in its lineage through which the changed
entity reaches it; the fields are the columns of the new findings.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from mlcopilot.checks.column_types import platform_of
from mlcopilot.errors import UsageError
from mlcopilot.lineage.downstream import models_downstream
from mlcopilot.model import (
    EntityType,
    Finding,
    IncidentChanges,
    Lineage,
    ModelReport,
    Node,
    Severity,
    Urn,
)
from mlcopilot.protocols import Catalog, Check, StateStore, WalkLimits
from mlcopilot.scan import Delivery, ScanOptions, ScanResult, scan
from mlcopilot.scan.whatif.changes import ChangeSet, apply_to_schema
from mlcopilot.scan.whatif.overlay import BaselineView, OverlayCatalog
from mlcopilot.text.names import short_name

_FEATURE_TYPES = frozenset(
    {EntityType.ML_FEATURE, EntityType.ML_PRIMARY_KEY, EntityType.ML_FEATURE_TABLE}
)
DATASET_PREFIX = "urn:li:dataset:("


@dataclass(frozen=True, slots=True)
class ModelImpact:
    """One model downstream of the changed dataset, and what the change would do to it."""

    urn: Urn
    findings: tuple[Finding, ...]
    """The findings the change would add (the incidents a scan after it would open)."""
    features: tuple[Urn, ...]
    """The features (and primary keys, feature tables) the change reaches the model through."""
    fields: tuple[str, ...]
    """The columns of the new findings (a renamed column under its new name)."""
    report: ModelReport
    """The model's dry-run report on the changed catalog (lineage, coverage)."""

    @property
    def severity(self) -> Severity | None:
        """The worst new finding's severity; None when the change does not affect the model."""
        if not self.findings:
            return None
        return max(self.findings, key=lambda f: f.severity.rank).severity

    @property
    def affected(self) -> bool:
        """True when the change would open an incident for this model."""
        return bool(self.findings)


@dataclass(frozen=True, slots=True)
class ImpactReport:
    """What :func:`preview_change` found: per downstream model, what the change would break."""

    dataset: Urn
    catalog: str
    now: datetime
    changes: ChangeSet
    models: tuple[ModelImpact, ...]
    """Every model downstream of the dataset: affected ones first, worst first, then by urn."""
    before: Node
    after: Node
    notes: tuple[str, ...] = ()

    @property
    def affected(self) -> tuple[ModelImpact, ...]:
        """The models the change would open an incident for."""
        return tuple(m for m in self.models if m.affected)

    @property
    def worst(self) -> Severity | None:
        """The worst severity over every model; None when nothing is affected."""
        found = [m.severity for m in self.models if m.severity is not None]
        return max(found, key=lambda s: s.rank) if found else None

    @property
    def findings(self) -> list[Finding]:
        """Every new finding, model by model."""
        return [f for m in self.models for f in m.findings]

    def fails(self, threshold: Severity) -> tuple[ModelImpact, ...]:
        """The models affected at or above ``threshold`` (a gate's failures)."""
        return tuple(
            m for m in self.models if m.severity is not None and m.severity.at_least(threshold)
        )

    def as_scan_result(self) -> ScanResult:
        """The new findings as a dry-run scan's result, for the reports a scan has (CI formats).

        One model report per downstream model, holding only its new findings; nothing else
        (coverage gaps, unknowns) is the change's doing, so none is carried.
        """
        models = tuple(
            ModelReport(urn=m.urn, lineage=m.report.lineage, findings=m.findings, unknown={})
            for m in self.models
        )
        return ScanResult(
            now=self.now,
            catalog=self.catalog,
            models=models,
            changes=IncidentChanges(),
            writes=(),
            dry_run=True,
            run_id=None,
            notes=self.notes,
            write_back=False,
        )


def preview_change(
    catalog: Catalog,
    store: StateStore,
    checks: Sequence[Check],
    dataset: Urn,
    changes: ChangeSet,
    now: datetime,
    limits: WalkLimits | None = None,
) -> ImpactReport:
    """Which models downstream of ``dataset`` the change would break, and how badly.

    Writes nothing to ``store`` or ``catalog``: both scans are dry runs (open the store
    read-only to be sure). See the module for how the answer is reached.

    Args:
        catalog: The catalog the dataset lives in.
        store: The state database: its baselines and open incidents are what a scan would use.
        checks: The checks a scan would run.
        dataset: The dataset's urn (:func:`resolve_dataset` turns a name into one).
        changes: What would change (:func:`~mlcopilot.scan.whatif.changes.parse_changes`, or
            :func:`~mlcopilot.scan.whatif.changes.derive_changes` from a proposed schema).
        now: The clock both scans run at (not before the store's last scan).
        limits: Caps on each walk (default :class:`WalkLimits`).

    Raises:
        UsageError: No change, a dataset the catalog lacks, or a column change it refuses.
    """
    limits = limits or WalkLimits()
    if changes.empty:
        raise UsageError(
            "no change to preview: give --drop, --rename, --retype, --deprecate or --schema-file"
        )
    before = _dataset_node(catalog, dataset, limits)
    schema = apply_to_schema(
        before.schema, changes, where=short_name(dataset), platform=platform_of(dataset)
    )
    after = replace(
        before,
        schema=schema,
        deprecation=changes.deprecation if changes.deprecation is not None else before.deprecation,
    )
    downstream = models_downstream(catalog, dataset, limits)
    notes: list[str] = []
    if not downstream:
        notes.append(f"No model reads {short_name(dataset)}: the change affects none.")
        return ImpactReport(dataset, catalog.label, now, changes, (), before, after, tuple(notes))
    options = ScanOptions(now=now, models=tuple(downstream), dry_run=True, limits=limits)
    # No write-back planned: the preview needs only the findings.
    quiet = Delivery(write_back=False)
    # Both scans see the store as a scan now would leave it: a baseline of the dataset for
    # every model (else a model never scanned would take the changed schema as its baseline).
    view = BaselineView.now(catalog, store, before, downstream, now)
    was = scan(catalog, view, checks, options, delivery=quiet)
    would = scan(OverlayCatalog(catalog, before, after), view, checks, options, delivery=quiet)
    seen = {f.id for f in was.findings}
    impacts = [_impact(report, seen) for report in would.models]
    impacts.sort(key=lambda m: (-(m.severity.rank if m.severity else -1), m.urn))
    return ImpactReport(dataset, catalog.label, now, changes, tuple(impacts), before, after)


def _impact(report: ModelReport, seen: set[str]) -> ModelImpact:
    new = tuple(f for f in report.findings if f.id not in seen)
    features: dict[Urn, None] = {}
    fields: dict[str, None] = {}
    for finding in new:
        columns = {c for c in (finding.field, finding.previous_field) if c is not None}
        features.update(dict.fromkeys(_features_reaching(report.lineage, finding.entity, columns)))
        if finding.field is not None:
            fields[finding.field] = None
    return ModelImpact(report.urn, new, tuple(features), tuple(fields), report)


def _features_reaching(lineage: Lineage, entity: Urn, columns: set[str]) -> list[Urn]:
    """The feature-like nodes of ``lineage`` that ``entity`` (its ``columns``) feeds.

    Nearest the model first. A feature computed straight from ``entity`` whose source columns
    are recorded is left out when none of ``columns`` is among them: the change does not
    reach the model through it.
    """
    downstream_of: dict[Urn, list[Urn]] = {}
    for edge in lineage.edges:
        downstream_of.setdefault(edge.upstream, []).append(edge.downstream)
    reached: set[Urn] = {entity}
    queue = deque([entity])
    while queue:
        for urn in downstream_of.get(queue.popleft(), ()):
            if urn not in reached:
                reached.add(urn)
                queue.append(urn)
    direct = {
        e.downstream for e in lineage.edges if e.upstream == entity and e.kind == "feature_source"
    }
    found = []
    for urn in reached:
        node = lineage.nodes.get(urn)
        if node is None or node.entity_type not in _FEATURE_TYPES:
            continue
        unrelated = columns and node.source_columns and not columns & set(node.source_columns)
        if urn in direct and unrelated:
            continue
        found.append(urn)
    return sorted(found, key=lambda u: (len(lineage.paths.get(u, ())), u))


def _dataset_node(catalog: Catalog, dataset: Urn, limits: WalkLimits) -> Node:
    if not dataset.startswith(DATASET_PREFIX):
        raise UsageError(
            f"{dataset}: not a dataset urn; expected a dataset's name or "
            "urn:li:dataset:(urn:li:dataPlatform:PLATFORM,NAME,ENV)"
        )
    node = catalog.nodes([dataset])[dataset]
    if not node.exists:
        raise UsageError(
            f"{dataset}: no such dataset in {catalog.label}"
            + _did_you_mean(short_name(dataset), known_datasets(catalog, limits))
        )
    return node


def known_datasets(catalog: Catalog, limits: WalkLimits) -> list[Urn]:
    """Every dataset some model's lineage reaches (the datasets a change could matter to)."""
    found: set[Urn] = set()
    for model in catalog.models():
        lineage = catalog.lineage(model, limits)
        found.update(u for u, n in lineage.nodes.items() if n.entity_type is EntityType.DATASET)
    return sorted(found)


def resolve_dataset(catalog: Catalog, name: str, limits: WalkLimits | None = None) -> Urn:
    """``name`` as a dataset urn: an urn as it is, else the one dataset of that name.

    A name is looked up among the datasets models read (:func:`known_datasets`): a dataset no
    model reads has no impact to preview, and its urn can still be given.

    Raises:
        UsageError: No dataset of that name (close names are suggested) or several.
    """
    if name.startswith("urn:li:"):
        return name
    datasets = known_datasets(catalog, limits or WalkLimits())
    named = [u for u in datasets if short_name(u) == name] or [
        u for u in datasets if short_name(u).lower() == name.lower()
    ]
    if len(named) == 1:
        return named[0]
    if named:
        raise UsageError(
            f"{name}: {len(named)} datasets have this name; give one's urn: " + ", ".join(named)
        )
    raise UsageError(
        f"{name}: no dataset of that name upstream of a model in {catalog.label}"
        + _did_you_mean(name, datasets)
    )


def _did_you_mean(name: str, datasets: Sequence[Urn]) -> str:
    import difflib

    names = sorted({short_name(u) for u in datasets})
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return f"; did you mean {', '.join(close)}?"
    return "; no dataset a model reads is named like it"
