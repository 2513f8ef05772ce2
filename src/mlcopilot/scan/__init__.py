"""One scan: walk each model's lineage, run the checks, reconcile incidents, notify.

The scan only reads until the very end: acknowledgements made in DataHub or GitHub are read
back, findings and incident changes are computed, then the changes *and every side effect they
imply* (the DataHub write-back, GitHub and Slack notifications) are stored in one transaction
as outbox rows. Only then does the relay deliver them. An aborted scan leaves nothing
half-written and loses no notification; ``dry_run`` stops before the store and shows the
would-be write-back and notifications.
"""

from __future__ import annotations

import difflib
import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from mlcopilot.checks import infos_of
from mlcopilot.clock import Clock, OffsetClock
from mlcopilot.errors import CatalogError, UsageError
from mlcopilot.incidents.lifecycle import reconcile
from mlcopilot.incidents.payload import NotifyPolicy, NotifyRequest, PlannedRow, Sink
from mlcopilot.incidents.writeback import plan_writeback
from mlcopilot.lineage.columns import column_usage
from mlcopilot.lineage.coverage import coverage_gaps, profile_readiness
from mlcopilot.model import (
    UNKNOWN_USAGE,
    Baseline,
    DatasetProfile,
    EntityType,
    Finding,
    Incident,
    IncidentChanges,
    Lineage,
    ModelReport,
    Node,
    ProfileBaseline,
    Schema,
    Urn,
    Write,
)
from mlcopilot.notify.acks import AckReport, AckSource, read_back
from mlcopilot.notify.relay import Failpoint, Relay, RelayReport, RetryPolicy, no_failpoint
from mlcopilot.notify.sinks.datahub import DataHubSink, encode_writes
from mlcopilot.protocols import Catalog, Check, CheckContext, StateStore, WalkLimits
from mlcopilot.store import StoreConflict
from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count

Progress = Callable[[int, int, Urn], None]
"""Called before each model as ``progress(done, total, model_urn)``."""


@runtime_checkable
class LineagePrefetch(Protocol):
    """A catalog that can load the lineage of many models at once (optional).

    A remote catalog then reads the entities the models share once, a whole level of every
    model's walk per batch, instead of walking model after model.
    """

    def prefetch(self, roots: Sequence[Urn], limits: WalkLimits) -> None:
        """Make the lineage of every root cheap to walk afterwards."""
        ...


@runtime_checkable
class BatchedHistory(Protocol):
    """A catalog that reads training-time schemas of many datasets at once (optional)."""

    def schemas_at(
        self, requests: Iterable[tuple[Urn, datetime]]
    ) -> dict[tuple[Urn, datetime], Schema | None]:
        """:meth:`~mlcopilot.protocols.Catalog.schema_as_of` of each (urn, time), in batches."""
        ...


@runtime_checkable
class ProfileHistory(Protocol):
    """A catalog that reads a dataset's past ``datasetProfile`` s (optional).

    Without it, a dataset's first profile baseline is the profile current when a scan first
    reads it.
    """

    def profiles_before(
        self, requests: Iterable[tuple[Urn, datetime]]
    ) -> dict[tuple[Urn, datetime], DatasetProfile | None]:
        """For each (dataset, time): its newest profile taken at or before then, else None."""
        ...

    def oldest_profiles(self, urns: Sequence[Urn]) -> dict[Urn, DatasetProfile | None]:
        """Each dataset's oldest profile DataHub holds, by ``timestampMillis``."""
        ...


@runtime_checkable
class EntityCensus(Protocol):
    """A catalog that can say how many entities of each type it holds (optional).

    Used to say what a catalog without ML models does hold, rather than just "nothing".
    """

    def entity_counts(self) -> Mapping[str, int]:
        """The number of entities of each entity type (``dataset``, ``dataJob``...)."""
        ...


@dataclass(frozen=True, slots=True)
class ScanOptions:
    """What to scan and how."""

    now: datetime
    models: Sequence[Urn] = ()
    """Models to scan; empty means every mlModel in the catalog."""
    dry_run: bool = False
    limits: WalkLimits = field(default_factory=WalkLimits)


@dataclass(frozen=True, slots=True)
class Delivery:
    """How a scan's side effects leave: sinks besides DataHub, timing, clock, acknowledgements.

    The default notifies nobody and writes back to the catalog through the outbox.
    ``deliver=False`` commits the intents and leaves them for ``mlcopilot outbox deliver``.
    """

    sinks: Sequence[Sink] = ()
    policy: NotifyPolicy = field(default_factory=NotifyPolicy)
    ack_sources: Sequence[AckSource] = ()
    clock: Clock | None = None
    """The relay's clock; default: real time, starting at the scan's ``now``."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    failpoint: Failpoint = no_failpoint
    deliver: bool = True
    write_back: bool = True
    """False: write nothing to the catalog (a shadow run). Incidents are still recorded and
    notified; no outbox row for the catalog is made, and the relay leaves DataHub alone."""
    report_url: str | None = None
    """``report.url`` (checked): the scan's notifications link to the report published there."""


_CONFLICT_RETRIES = 3

WRITE_BACK_OFF = (
    "Write-back to the catalog is off (--no-write-back, [datahub] write_back or "
    "MLCOPILOT_WRITE_BACK): nothing is written to it; incidents are recorded and notified."
)
"""The note a scan with write-back off carries."""


@dataclass(frozen=True, slots=True)
class ScanResult:
    """Everything a scan found and did."""

    now: datetime
    catalog: str
    models: tuple[ModelReport, ...]
    changes: IncidentChanges
    writes: tuple[Write, ...]
    """Catalog writes made (or, with ``dry_run``, that would be made)."""
    dry_run: bool
    run_id: int | None
    notifications: tuple[PlannedRow, ...] = ()
    """Outbox rows this scan committed (or, with ``dry_run``, would commit)."""
    relay: RelayReport | None = None
    """What the relay delivered after the commit (None: not run)."""
    acks: AckReport = field(default_factory=AckReport)
    """Acknowledgements read back from DataHub and GitHub."""
    notes: tuple[str, ...] = ()
    """What the reader should know about the scan as a whole (e.g. there was nothing to scan)."""
    write_back: bool = True
    """Whether the catalog was (or, with ``dry_run``, would be) written back to."""

    @property
    def findings(self) -> list[Finding]:
        """All findings of all models."""
        return [f for m in self.models for f in m.findings]

    @property
    def summary(self) -> ScanSummary:
        """The scan's totals, for the last line of every report."""
        return ScanSummary(
            models=len(self.models),
            findings=sum(len(m.findings) for m in self.models),
            unknown=sum(len(m.unknown) for m in self.models),
            gaps=sum(len(m.gaps) for m in self.models),
            models_with_gaps=sum(1 for m in self.models if m.gaps),
        )


@dataclass(frozen=True, slots=True)
class ScanSummary:
    """A scan's totals: models, findings, entities that lacked metadata, coverage gaps."""

    models: int
    findings: int
    unknown: int
    """Entities (counted once per model) that lacked metadata some check needed."""
    gaps: int
    models_with_gaps: int

    def sentence(self) -> str:
        """The totals as one line of the terminal and markdown reports."""
        gaps = (
            f"{count(self.models_with_gaps, 'model')} with coverage gaps "
            f"({count(self.gaps, 'gap')})"
            if self.gaps
            else "no coverage gaps"
        )
        return f"Scanned {count(self.models, 'model')}: {count(self.findings, 'finding')}; {gaps}."


def scan(
    catalog: Catalog,
    store: StateStore,
    checks: Sequence[Check],
    options: ScanOptions,
    *,
    progress: Progress | None = None,
    delivery: Delivery | None = None,
) -> ScanResult:
    """Scan ``options.models`` (or every model), reconcile, store, write back and notify."""
    with _fewer_collections():
        return _scan(catalog, store, checks, options, progress=progress, delivery=delivery)


GC_THRESHOLD = 20_000
"""Allocations between two young-generation collections during a scan (Python's default: 700)."""


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often for the duration of a scan.

    A scan builds hundreds of thousands of objects that live until it ends (nodes, schema
    fields, paths) and frees little; with the default threshold the collector re-examines them
    so often that it takes about 40% of a large walk (``benchmarks/RESULTS.md``). Cyclic
    garbage is still collected, a little later; the previous threshold is restored after.
    """
    before = gc.get_threshold()
    if before[0] == 0:  # automatic collection is off: leave it so
        yield
        return
    gc.set_threshold(max(before[0], GC_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _scan(
    catalog: Catalog,
    store: StateStore,
    checks: Sequence[Check],
    options: ScanOptions,
    *,
    progress: Progress | None,
    delivery: Delivery | None,
) -> ScanResult:
    delivery = delivery or Delivery()
    started_at = options.now
    _check_clock(store, options.now)
    models = _models_to_scan(catalog, options.models)
    notes = () if delivery.write_back else (WRITE_BACK_OFF,)
    if not models:
        # Nothing to walk, reconcile or deliver: say what the catalog holds and stop, with
        # nothing stored (no run, no outbox rows) and nothing written back.
        return ScanResult(
            now=options.now,
            catalog=catalog.label,
            models=(),
            changes=IncidentChanges(),
            writes=(),
            dry_run=options.dry_run,
            run_id=None,
            notes=(_nothing_to_scan(catalog),),
        )
    reports: list[ModelReport] = []
    baselines: list[Baseline] = []
    evaluated = _Evaluated(frozenset(check.name for check in checks))
    if len(models) > 1 and isinstance(catalog, LineagePrefetch):
        catalog.prefetch(models, options.limits)
    lineages: list[Lineage] = []
    for done, model in enumerate(models):
        if progress is not None:
            progress(done, len(models), model)
        lineages.append(catalog.lineage(model, options.limits))
    # Every model's baselines at once: a dataset many models share has its history read once.
    known = _baselines(catalog, store, lineages, options.now)
    profiles_read = _reads_profiles(checks)
    profiled = (
        _profile_baselines(catalog, store, lineages, options.now)
        if profiles_read
        else {lineage.root: ({}, []) for lineage in lineages}
    )
    profile_baselines: list[ProfileBaseline] = []
    for lineage in lineages:
        model_known, model_baselines = known[lineage.root]
        model_profiles, new_profiles = profiled[lineage.root]
        report, missed = _scan_model(
            checks, lineage, model_known, options.now, model_profiles if profiles_read else None
        )
        reports.append(report)
        baselines.extend(model_baselines)
        profile_baselines.extend(new_profiles)
        evaluated.add(lineage, missed.checks, missed.fields)
    if progress is not None:
        progress(len(models), len(models), "")

    findings = [f for r in reports for f in r.findings]
    acks = AckReport()
    if not options.dry_run:
        acks = read_back(store, delivery.ack_sources, models, now=options.now)
    sinks = tuple(s.name for s in delivery.sinks)
    # Stored incidents of checks not running now are still written back and notified.
    infos = infos_of(checks)
    for attempt in range(1, _CONFLICT_RETRIES + 1):
        # The scanned models' incidents, and the open ones of other models on the same
        # entities (a tag stays while any model has an open incident there): never the whole
        # store's, which a watcher would read again every few seconds.
        previous = store.incidents(models=models)
        stored = _with_open_on(store, previous)
        changes = reconcile(
            previous,
            findings,
            evaluated=evaluated.covers,
            now=options.now,
            undecided=evaluated.undecided,
        )
        after = _after(previous, changes)
        everything = _after(stored, changes)
        plan = plan_writeback(after, models=models, everything=everything, infos=infos)
        if not delivery.write_back:
            plan = []
        request = NotifyRequest(
            policy=delivery.policy,
            sinks=sinks,
            writeback=encode_writes(plan),
            infos=infos,
            report_url=delivery.report_url,
        )
        if options.dry_run:
            rows = store.planned_notifications(changes, request, now=options.now)
            return ScanResult(
                now=options.now,
                catalog=catalog.label,
                models=tuple(reports),
                changes=changes,
                writes=tuple(catalog.apply(plan, dry_run=True)) if plan else (),
                dry_run=True,
                run_id=None,
                notifications=tuple(rows),
                notes=notes,
                write_back=delivery.write_back,
            )
        try:
            recorded = store.record_scan(
                changes,
                started_at=started_at,
                now=options.now,
                catalog=catalog.label,
                models=models,
                findings=len(findings),
                baselines=baselines,
                notify=request,
                profile_baselines=profile_baselines,
            )
            break
        except StoreConflict:
            # Another scanner stored the same incidents first: reconcile against them.
            if attempt == _CONFLICT_RETRIES:
                raise
    delivery.failpoint("after_commit")
    relayed: RelayReport | None = None
    written: tuple[Write, ...] = ()
    if delivery.deliver:
        relayed, written = _relay(catalog, store, delivery, options.now)
    return ScanResult(
        now=options.now,
        catalog=catalog.label,
        models=tuple(reports),
        changes=changes,
        writes=written,
        dry_run=False,
        run_id=recorded.run_id,
        notifications=recorded.rows,
        relay=relayed,
        acks=acks,
        notes=notes,
        write_back=delivery.write_back,
    )


def _relay(
    catalog: Catalog,
    store: StateStore,
    delivery: Delivery,
    now: datetime,
) -> tuple[RelayReport, tuple[Write, ...]]:
    datahub = DataHubSink(catalog)
    clock = delivery.clock or OffsetClock(now)
    # Write-back off: the catalog's rows (from before it was turned off) stay pending.
    catalog_sinks: list[Sink] = [datahub] if delivery.write_back else []
    relay = Relay(
        store,
        [*catalog_sinks, *delivery.sinks],
        clock=clock,
        retry=delivery.retry,
        failpoint=delivery.failpoint,
    )
    # A new group's first message waits group_wait (so findings of a concurrent scan join
    # it); stay that long for anything due by then, this scan's or another's.
    report = relay.run(linger=delivery.policy.group_wait)
    return report, tuple(datahub.applied)


def _check_clock(store: StateStore, now: datetime) -> None:
    """Refuse a clock earlier than the last committed scan's, before anything is read or written.

    Reconciling against the past would resolve incidents before they were opened and send
    reminders backwards. A dry run is held to the same rule: it previews what this scan
    would do, and this scan would be refused.
    """
    last = store.last_scan_at()
    if last is not None and now < last:
        raise UsageError(
            f"--now {_instant(now)} is earlier than the last committed scan "
            f"({_instant(last)}) in the state database: scans move forward in time; use a "
            "later --now (or none), or another --state-url"
        )


def _instant(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _models_to_scan(catalog: Catalog, requested: Sequence[Urn]) -> list[Urn]:
    """The models to scan; empty when the catalog holds entities but no ML model."""
    if not requested:
        models = catalog.models()
        if not models and isinstance(catalog, EntityCensus) and not catalog.entity_counts():
            raise CatalogError(
                f"{catalog.label}: the catalog is empty, it has no ML models (mlModel "
                "entities) to scan; load metadata with `mlcopilot catalog load FILE`"
            )
        return models
    urns = [u if u.startswith("urn:li:") else _model_named(catalog, u) for u in requested]
    for urn in urns:
        if not urn.startswith("urn:li:mlModel:("):
            raise UsageError(
                f"--model {urn!r} is not an mlModel urn; expected a model's name or "
                "urn:li:mlModel:(urn:li:dataPlatform:PLATFORM,NAME,ENV) "
                "(`mlcopilot catalog models` lists them)"
            )
    found = catalog.nodes(urns)
    missing = [u for u in urns if not found[u].exists]
    if missing:
        raise UsageError(
            f"--model {missing[0]}: no such model in {catalog.label}"
            + _did_you_mean(catalog, short_name(missing[0]))
        )
    return list(dict.fromkeys(urns))


def _model_named(catalog: Catalog, name: str) -> Urn:
    """The one model whose name (its urn's name part) is ``name``.

    Raises:
        UsageError: No model has that name (close names are suggested), or several do (in
            different platforms or environments: they are listed, to pick one by urn).
    """
    models = catalog.models()
    named = [u for u in models if short_name(u) == name]
    if not named:  # a name typed in another case is still unambiguous if only one matches
        named = [u for u in models if short_name(u).lower() == name.lower()]
    if len(named) == 1:
        return named[0]
    if named:
        raise UsageError(
            f"--model {name}: {len(named)} models have this name; give one's urn: "
            + ", ".join(named)
        )
    raise UsageError(
        f"--model {name}: no model of that name in {catalog.label}"
        + _did_you_mean(catalog, name, models)
    )


def _did_you_mean(catalog: Catalog, name: str, models: Sequence[Urn] | None = None) -> str:
    """``; did you mean a, b?`` with the models named most like ``name`` (or nothing)."""
    names = sorted({short_name(u) for u in (catalog.models() if models is None else models)})
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return f"; did you mean {', '.join(close)}? (`mlcopilot catalog models` lists them all)"
    return "; `mlcopilot catalog models` lists the models it holds"


def _nothing_to_scan(catalog: Catalog) -> str:
    """What a catalog without ML models holds, e.g. ``No ML models in lite:PATH (...).``."""
    held = ""
    if isinstance(catalog, EntityCensus):
        counts = catalog.entity_counts()
        by_type = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        detail = ", ".join(count(n, entity_type) for entity_type, n in by_type)
        held = f" (it holds {count(sum(counts.values()), 'entity')}: {detail})"
    return f"No ML models in {catalog.label}{held}. Nothing to scan."


def _scan_model(
    checks: Sequence[Check],
    lineage: Lineage,
    known: Mapping[Urn, Baseline],
    now: datetime,
    profiles: Mapping[Urn, ProfileBaseline] | None = None,
) -> tuple[ModelReport, _Missed]:
    """The model's report, and what was not evaluated in it.

    ``profiles``: the profile baselines, when a check reads profiles (None: none does; the
    report then says nothing of profiles).
    """
    model = lineage.nodes[lineage.root]
    # Usage is judged on the baseline's columns too: drift asks about removed and renamed ones.
    usage = column_usage(lineage, {urn: b.schema for urn, b in known.items()})
    findings: list[Finding] = []
    unknown: dict[Urn, list[str]] = {}
    errors: list[str] = []
    missed: set[tuple[str, Urn]] = set()
    undecided: set[tuple[str, Urn, str | None]] = set()
    for urn, node in lineage.nodes.items():
        if urn == lineage.root:
            continue
        baseline = known.get(urn)
        ctx = CheckContext(
            model=model,
            path=lineage.paths[urn],
            now=now,
            usage=usage.get(urn, UNKNOWN_USAGE),
            baseline=baseline.schema if baseline is not None else None,
            profile_baseline=(profiles or {}).get(urn),
        )
        for check in checks:
            try:
                outcome = check.run(node, ctx)
            except Exception as exc:  # a crashing check must not stop the walk; it is reported
                errors.append(f"check {check.name} crashed on {urn}: {type(exc).__name__}: {exc}")
                missed.add((check.name, urn))
                continue
            findings.extend(outcome.findings)
            undecided.update((check.name, urn, field) for field in outcome.undecided)
            if outcome.unknown is not None:
                unknown.setdefault(urn, []).append(f"{check.name}: {outcome.unknown}")
                missed.add((check.name, urn))
    report = ModelReport(
        urn=model.urn,
        lineage=lineage,
        findings=tuple(sorted(findings, key=lambda f: (-f.severity.rank, f.entity, f.field or ""))),
        unknown={u: tuple(r) for u, r in unknown.items()},
        errors=tuple(errors),
        gaps=coverage_gaps(lineage),
        profiles=profile_readiness(lineage, usage) if profiles is not None else None,
    )
    return report, _Missed(missed, undecided)


def _reads_profiles(checks: Sequence[Check]) -> bool:
    """Whether a check compares DataHub profiles (its ``reads_profiles`` is True).

    Only then does the scan choose profile baselines and work out profile readiness.
    """
    return any(getattr(check, "reads_profiles", False) is True for check in checks)


@dataclass(frozen=True, slots=True)
class _Missed:
    """What one model's scan did not evaluate."""

    checks: set[tuple[str, Urn]]
    """(check, node) pairs that were not evaluated (unknown or crashed)."""
    fields: set[tuple[str, Urn, str | None]]
    """(check, node, field) a check that decided at the node still could not decide."""


class _Evaluated:
    """Which (model, check, entity) triples a scan evaluated, for reconciliation.

    Every check runs on every upstream node of every model, so the triples are kept as each
    model's nodes plus the few that were not evaluated (unknown or crashed), not as a set of
    all of them (one per check, node and model: millions in a large estate).
    """

    def __init__(self, checks: frozenset[str]) -> None:
        self._checks = checks
        self._nodes: dict[Urn, Mapping[Urn, Node]] = {}
        self._missed: dict[Urn, set[tuple[str, Urn]]] = {}
        self._undecided: dict[Urn, set[tuple[str, Urn, str | None]]] = {}

    def add(
        self,
        lineage: Lineage,
        missed: set[tuple[str, Urn]],
        undecided: set[tuple[str, Urn, str | None]] | None = None,
    ) -> None:
        """Record one model's walk, what was not evaluated in it and the undecided fields."""
        self._nodes[lineage.root] = lineage.nodes
        self._missed[lineage.root] = missed
        self._undecided[lineage.root] = undecided or set()

    def undecided(self, model: Urn, check: str, entity: Urn, field: str | None) -> bool:
        """True when ``check`` decided at ``entity`` for ``model`` but not on ``field``."""
        return (check, entity, field) in self._undecided.get(model, set())

    def covers(self, model: Urn, check: str, entity: Urn) -> bool:
        """True when ``check`` was evaluated at ``entity`` for ``model``."""
        nodes = self._nodes.get(model)
        return (
            nodes is not None
            and entity != model
            and entity in nodes
            and check in self._checks
            and (check, entity) not in self._missed[model]
        )


def _baselines(
    catalog: Catalog, store: StateStore, lineages: Sequence[Lineage], now: datetime
) -> dict[Urn, tuple[dict[Urn, Baseline], list[Baseline]]]:
    """Per model: the schema it was trained on for each upstream dataset, and the new ones.

    Established on first sight: first choice is what is stored; then the catalog's aspect
    history as of the model's training time; when history cannot tell, the current schema
    becomes the baseline (the first-scan snapshot). The store is read once for all models and the
    history of every model's new datasets in one batched call, never once per dataset: an
    estate has thousands of models sharing thousands of datasets.
    """
    missing: dict[Urn, list[Node]] = {}
    known: dict[Urn, dict[Urn, Baseline]] = {}
    wanted: list[tuple[Urn, datetime]] = []
    all_stored = store.baselines_of([lineage.root for lineage in lineages])
    for lineage in lineages:
        model = lineage.nodes[lineage.root]
        datasets = [
            node
            for urn, node in lineage.nodes.items()
            if urn != lineage.root
            and node.entity_type is EntityType.DATASET
            and node.schema is not None
        ]
        stored = {b.dataset: b for b in all_stored[model.urn]}
        known[model.urn] = {n.urn: stored[n.urn] for n in datasets if n.urn in stored}
        missing[model.urn] = [n for n in datasets if n.urn not in stored]
        if model.trained_at is not None:
            wanted += [(n.urn, model.trained_at) for n in missing[model.urn]]
    history = _history(catalog, wanted)
    result: dict[Urn, tuple[dict[Urn, Baseline], list[Baseline]]] = {}
    for lineage in lineages:
        model = lineage.nodes[lineage.root]
        new: list[Baseline] = []
        for node in missing[model.urn]:
            assert node.schema is not None
            when = model.trained_at
            historic = history.get((node.urn, when)) if when is not None else None
            if historic is None:
                new.append(Baseline(model.urn, node.urn, node.schema, "first_scan", now))
            else:
                # The same schema as today's (the common case) is kept once, not twice.
                schema = node.schema if historic == node.schema else historic
                new.append(Baseline(model.urn, node.urn, schema, "history", now))
        known[model.urn].update((b.dataset, b) for b in new)
        result[model.urn] = (known[model.urn], new)
    return result


def _profile_baselines(
    catalog: Catalog, store: StateStore, lineages: Sequence[Lineage], now: datetime
) -> dict[Urn, tuple[dict[Urn, ProfileBaseline], list[ProfileBaseline]]]:
    """Per model: the profile each profiled upstream dataset is compared with, and the new ones.

    As for schemas, what is stored comes first. A dataset with a profile and no stored
    baseline gets one: the newest profile taken at or before the model's training time, else
    (none by then, or no training time) the oldest profile DataHub holds. The store and the
    catalog are each read once for all models, in batches.
    """
    all_stored = store.profile_baselines_of([lineage.root for lineage in lineages])
    known: dict[Urn, dict[Urn, ProfileBaseline]] = {}
    missing: dict[Urn, list[Node]] = {}
    wanted: list[tuple[Urn, datetime]] = []
    for lineage in lineages:
        model = lineage.nodes[lineage.root]
        stored = {b.dataset: b for b in all_stored[model.urn]}
        profiled = [
            node
            for urn, node in lineage.nodes.items()
            if urn != lineage.root
            and node.entity_type is EntityType.DATASET
            and node.profile is not None
        ]
        # A stored baseline counts even when DataHub holds no profile now (the check says so).
        known[model.urn] = {urn: b for urn, b in stored.items() if urn in lineage.nodes}
        missing[model.urn] = [n for n in profiled if n.urn not in stored]
        if model.trained_at is not None:
            wanted += [(n.urn, model.trained_at) for n in missing[model.urn]]
    before: Mapping[tuple[Urn, datetime], DatasetProfile | None] = {}
    oldest: Mapping[Urn, DatasetProfile | None] = {}
    if isinstance(catalog, ProfileHistory):
        if wanted:
            before = catalog.profiles_before(dict.fromkeys(wanted))
        first_seen = {
            node.urn
            for lineage in lineages
            for node in missing[lineage.root]
            if _at_training(before, node.urn, lineage.nodes[lineage.root].trained_at) is None
        }
        if first_seen:
            oldest = catalog.oldest_profiles(sorted(first_seen))
    result: dict[Urn, tuple[dict[Urn, ProfileBaseline], list[ProfileBaseline]]] = {}
    for lineage in lineages:
        model = lineage.nodes[lineage.root]
        new: list[ProfileBaseline] = []
        for node in missing[model.urn]:
            assert node.profile is not None
            at_training = _at_training(before, node.urn, model.trained_at)
            if at_training is not None:
                new.append(ProfileBaseline(model.urn, node.urn, at_training, "history", now))
            else:
                seen = oldest.get(node.urn) or node.profile
                new.append(ProfileBaseline(model.urn, node.urn, seen, "first_scan", now))
        known[model.urn].update((b.dataset, b) for b in new)
        result[model.urn] = (known[model.urn], new)
    return result


def _at_training(
    found: Mapping[tuple[Urn, datetime], DatasetProfile | None], urn: Urn, when: datetime | None
) -> DatasetProfile | None:
    return found.get((urn, when)) if when is not None else None


def _history(
    catalog: Catalog, wanted: Sequence[tuple[Urn, datetime]]
) -> Mapping[tuple[Urn, datetime], Schema | None]:
    """The schema of each urn as of each time, batched when the catalog can."""
    if not wanted:
        return {}
    if isinstance(catalog, BatchedHistory):
        return catalog.schemas_at(wanted)
    return {(urn, when): catalog.schema_as_of(urn, when) for urn, when in dict.fromkeys(wanted)}


def _with_open_on(store: StateStore, previous: Sequence[Incident]) -> list[Incident]:
    """``previous`` and the open incidents of other models on the entities ``previous`` names.

    Enough to plan the tags: an entity's tag is planned for an incident of the scanned models,
    and one they had before (the entity is then in ``previous``) may be held by another's.
    """
    mine = {i.id for i in previous}
    entities = sorted({i.entity for i in previous})
    others = store.incidents(entities=entities, include_resolved=False) if entities else []
    return [*previous, *(i for i in others if i.id not in mine)]


def _after(previous: Sequence[Incident], changes: IncidentChanges) -> list[Incident]:
    """The latest generation of every incident once ``changes`` are applied."""
    latest = {i.id: i for i in previous}
    for incident in (*changes.opened, *changes.updated, *changes.resolved):
        latest[incident.id] = incident
    return list(latest.values())


def accept_baselines(
    catalog: Catalog,
    store: StateStore,
    model: Urn,
    *,
    now: datetime,
    limits: WalkLimits | None = None,
) -> list[Baseline]:
    """Make the current schema and profile of every upstream dataset of ``model`` its baseline.

    Drift reported against the old baselines (schema and profile drift) clears on the next
    scan. Returns the schema baselines; :func:`accept_all_baselines` also returns the
    profile ones.
    """
    return accept_all_baselines(catalog, store, model, now=now, limits=limits)[0]


def accept_all_baselines(
    catalog: Catalog,
    store: StateStore,
    model: Urn,
    *,
    now: datetime,
    limits: WalkLimits | None = None,
) -> tuple[list[Baseline], list[ProfileBaseline]]:
    """:func:`accept_baselines`, returning the accepted schemas and the accepted profiles."""
    _models_to_scan(catalog, [model])
    lineage = catalog.lineage(model, limits or WalkLimits())
    datasets = [n for n in lineage.nodes.values() if n.entity_type is EntityType.DATASET]
    accepted = [
        Baseline(model, node.urn, node.schema, "accepted", now)
        for node in datasets
        if node.schema is not None
    ]
    profiles = [
        ProfileBaseline(model, node.urn, node.profile, "accepted", now)
        for node in datasets
        if node.profile is not None
    ]
    store.save_baselines(accepted)
    store.save_profile_baselines(profiles)
    return accepted, profiles
