"""One scan: walk each model's lineage, run the checks, reconcile incidents, notify.

In four steps: which models and whether the clock may run (:mod:`.selection`); walk and check
(:mod:`.checking`); reconcile and plan (the incident changes, the write-back, what to notify);
commit (one transaction in the store), then deliver (the relay). :mod:`.wiring` builds what a
scan runs with from the settings, :mod:`.delivery` its sinks, :mod:`.whatif` runs it twice.

The scan only reads until the very end: acknowledgements made in DataHub or GitHub are read
back, findings and incident changes are computed, then the changes *and every side effect they
imply* (the DataHub write-back, GitHub and Slack notifications) are stored in one transaction
as outbox rows. Only then does the relay deliver them. An aborted scan leaves nothing
half-written and loses no notification; ``dry_run`` stops before the store and shows the
would-be write-back and notifications.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from mlcopilot.checks import infos_of
from mlcopilot.clock import Clock, OffsetClock
from mlcopilot.errors import StoreConflict
from mlcopilot.incidents.lifecycle import reconcile
from mlcopilot.incidents.payload import NotifyPolicy, NotifyRequest, PlannedRow, Sink
from mlcopilot.incidents.writeback import incident_types_of, plan_writeback
from mlcopilot.model import (
    Baseline,
    CheckInfo,
    EntityType,
    Finding,
    Incident,
    IncidentChanges,
    IncidentHeads,
    ModelReport,
    ProfileBaseline,
    SinkName,
    Urn,
    Write,
)
from mlcopilot.notify.acks import AckReport, AckSource, read_back
from mlcopilot.notify.relay import Failpoint, Relay, RelayReport, RetryPolicy, no_failpoint
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.notify.sinks.datahub import DataHubSink, EncodedWrites
from mlcopilot.protocols import Catalog, Check, StateStore, WalkLimits
from mlcopilot.scan.bound import WalkBound
from mlcopilot.scan.checking import Checked, Progress, walk_and_check
from mlcopilot.scan.routes import routes
from mlcopilot.scan.selection import check_clock, models_to_scan, nothing_to_scan
from mlcopilot.text.wording import count


@dataclass(frozen=True, slots=True)
class ScanOptions:
    """What to scan and how."""

    now: datetime
    models: Sequence[Urn] = ()
    """Models to scan; empty means every mlModel in the catalog."""
    dry_run: bool = False
    limits: WalkLimits = field(default_factory=WalkLimits)
    walk_timeout: timedelta | None = None
    """The bound on the whole walk (``[datahub] walk_timeout``; None: none): past it the scan
    stops with :class:`~mlcopilot.errors.CatalogUnavailable`, having recorded nothing."""
    report_targets: bool = True
    """Read, after the commit, where each incident's notifications went (the report's
    ``targets``). A watcher renders no report and leaves it: 0.45 s of a 7.7 s batch of 250
    models on an estate sharing its upstream (profiled in process)."""


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
    routing: NotifySettings | None = None
    """Route each incident (rules, owners in DataHub, defaults); None: every incident goes to
    every sink's default."""
    acknowledging: frozenset[str] = frozenset()
    """The sinks told of an acknowledgement (their rows: "acknowledge")."""


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
    targets: Mapping[tuple[str, int], tuple[SinkName, ...]] = field(default_factory=dict)
    """Where each open incident's notifications go (its group's targets), by ``(id,
    generation)``; with ``dry_run``, where this scan's planned rows would go."""

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
    check_clock(store, options.now)
    with WalkBound(catalog, options.walk_timeout) as bound:
        models = models_to_scan(catalog, options.models)
        checked = (
            walk_and_check(
                catalog,
                store,
                checks,
                models,
                now=options.now,
                limits=options.limits,
                progress=bound.progress(progress),
                step=bound.step,
                keep_new=not options.dry_run,  # a dry run stores no baselines
            )
            if models
            else None
        )
    notes = () if delivery.write_back else (WRITE_BACK_OFF,)
    if checked is None:
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
            notes=(nothing_to_scan(catalog),),
        )
    acks = AckReport()
    if not options.dry_run:
        acks = read_back(store, delivery.ack_sources, models, now=options.now)
        # From here to "after_commit": the one transaction that records the scan.
        delivery.failpoint("before_commit")
    for attempt in range(1, _CONFLICT_RETRIES + 1):
        planned = _reconcile_and_plan(
            catalog, store, checks, checked, models, delivery, options.now
        )
        if options.dry_run:
            rows = store.planned_notifications(planned.changes, planned.request, now=options.now)
            return ScanResult(
                now=options.now,
                catalog=catalog.label,
                models=tuple(checked.reports),
                changes=planned.changes,
                writes=tuple(catalog.apply(planned.writes, dry_run=True)) if planned.writes else (),
                dry_run=True,
                run_id=None,
                notifications=tuple(rows),
                notes=notes,
                write_back=delivery.write_back,
                targets=planned_targets(rows),
            )
        try:
            recorded = store.record_scan(
                planned.changes,
                started_at=started_at,
                now=options.now,
                catalog=catalog.label,
                models=models,
                findings=len(checked.findings),
                baselines=checked.baselines,
                notify=planned.request,
                profile_baselines=checked.profile_baselines,
            )
            break
        except StoreConflict:
            # Another scanner stored the same incidents first: reconcile against them.
            if attempt == _CONFLICT_RETRIES:
                raise
    delivery.failpoint("after_commit")
    # Stored: the new baselines are let go before the delivery (an estate's first scan chose
    # 1.45 million, held to the end).
    reports, ids = checked.reports, [f.id for f in checked.findings]
    del checked
    relayed: RelayReport | None = None
    written: tuple[Write, ...] = ()
    if delivery.deliver:
        relayed, written = _deliver(catalog, store, delivery, options.now)
    return ScanResult(
        now=options.now,
        catalog=catalog.label,
        models=tuple(reports),
        changes=planned.changes,
        writes=written,
        dry_run=False,
        run_id=recorded.run_id,
        notifications=recorded.rows,
        targets=store.incident_targets(ids) if options.report_targets else {},
        relay=relayed,
        acks=acks,
        notes=notes,
        write_back=delivery.write_back,
    )


@dataclass(frozen=True, slots=True)
class _Planned:
    """Reconciled incident changes and every side effect they imply, not yet stored."""

    changes: IncidentChanges
    writes: list[Write]
    """The write-back to the catalog (empty with write-back off)."""
    request: NotifyRequest


def planned_targets(
    rows: Sequence[PlannedRow],
) -> dict[tuple[str, int], tuple[SinkName, ...]]:
    """Where rows would tell each of their groups' open members, by ``(id, generation)``."""
    found: dict[tuple[str, int], dict[SinkName, None]] = {}
    for row in rows:
        if row.sink == "datahub":
            continue
        for member in row.payload["group"]["members"]:
            if member.get("open"):
                key = (member["incident_id"], int(member["generation"]))
                found.setdefault(key, {})[row.sink] = None
    return {key: tuple(sinks) for key, sinks in found.items()}


def _reconcile_and_plan(
    catalog: Catalog,
    store: StateStore,
    checks: Sequence[Check],
    checked: Checked,
    models: Sequence[Urn],
    delivery: Delivery,
    now: datetime,
) -> _Planned:
    """The incident changes against what is stored now, the write-back and what to notify."""
    # The scanned models' incidents: never the whole store's, which a watcher would read again
    # every few seconds.
    previous, heads = _previous(store, models, checked.findings)
    changes = reconcile(
        previous,
        checked.findings,
        evaluated=checked.evaluated.covers,
        now=now,
        undecided=checked.evaluated.undecided,
        refreshing=heads.get,
    )
    del heads
    # Stored incidents of checks not running now are still written back and notified.
    infos = infos_of(checks)
    after: list[Incident] = []
    held: set[tuple[Urn, str]] = set()
    if delivery.write_back:
        # The refreshed ones were read as heads: what they were before is what they are now
        # but for what a refresh replaces (their model, entity and check are their id's).
        before = [*previous, *changes.updated]
        after, held = _after(previous, changes), _held_by_others(store, before)
        del before
    # What the changes supersede is let go before the write-back is planned.
    del previous
    plan = (
        _plan_writeback(catalog, after, held, models=models, infos=infos)
        if delivery.write_back
        else []
    )
    routed = (
        routes(
            catalog,
            delivery.routing,
            (*changes.opened, *changes.updated),
            checked.reports,
            tuple(s.name for s in delivery.sinks),
        )
        if delivery.routing is not None and delivery.sinks
        else {}
    )
    request = NotifyRequest(
        policy=delivery.policy,
        sinks=tuple(s.name for s in delivery.sinks),
        writeback=EncodedWrites(plan),  # encoded only if recorded: never in a dry run
        infos=infos,
        report_url=delivery.report_url,
        routes=routed,
        acknowledging=delivery.acknowledging,
    )
    return _Planned(changes, plan, request)


def _previous(
    store: StateStore, models: Sequence[Urn], findings: Sequence[Finding]
) -> tuple[list[Incident], IncidentHeads]:
    """The scanned models' stored incidents, to reconcile ``findings`` with.

    All of them as heads (:mod:`mlcopilot.model.incident_heads`): what a refresh keeps of an
    incident, packed. A second scan of an estate refreshes nearly all it reads (282,022 at
    10,000 models). Whole only the ones a refresh will not replace: incidents resolved now
    or left as they are, and recurrences.
    """
    heads = store.incident_heads(models)
    found = {f.id for f in findings}
    rest = [*heads.ids(open=False), *(i for i in heads.ids(open=True) if i not in found)]
    # One gone between the reads (never deleted by this product) is not reconciled at all.
    return (store.incidents(ids=rest) if rest else []), heads


def _deliver(
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


def _plan_writeback(
    catalog: Catalog,
    after: Sequence[Incident],
    held: set[tuple[Urn, str]],
    *,
    models: Sequence[Urn],
    infos: Mapping[str, CheckInfo],
) -> list[Write]:
    """What the catalog should hold for the scanned models' incidents once changes apply.

    ``after``: their latest generations then (:func:`_after`); ``held``: the kinds other
    models hold open on the same entities (:func:`_held_by_others`).
    """
    # What an incident may name there: a recent DataHub's shows the model's health too.
    targets = incident_types_of(catalog) if after else None
    return plan_writeback(
        after, models=models, everything=after, held=held, infos=infos, incident_types=targets
    )


@runtime_checkable
class _OpenKinds(Protocol):
    """A store that says which kinds of incident are open on entities without reading them."""

    def open_kinds(
        self, entities: Sequence[Urn], *, other_than: Sequence[Urn] = ()
    ) -> set[tuple[Urn, str]]:
        """``(entity, check)`` of each open incident on ``entities``, but ``other_than``'s."""
        ...


def _held_by_others(store: StateStore, previous: Sequence[Incident]) -> set[tuple[Urn, str]]:
    """``(entity, check)`` of the open incidents of other models on the entities of ``previous``.

    Enough to plan the tags: an entity's tag is planned for an incident of the scanned models,
    and one they had before (the entity is then in ``previous``) may be held by another's.
    The pairs are asked of the store, not the incidents read: in a full rescan's batch those
    are tens of thousands of other models' incidents on shared upstream entities.
    """
    models = sorted({i.model for i in previous})
    entities = sorted({i.entity for i in previous})
    if not entities:
        return set()
    if isinstance(store, _OpenKinds):
        return store.open_kinds(entities, other_than=models)
    mine = {i.id for i in previous}
    others = store.incidents(entities=entities, include_resolved=False, other_than=models)
    return {(i.entity, i.check) for i in others if i.id not in mine}


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
    """:func:`accept_baselines`, returning the accepted schemas and the accepted profiles.

    ``model`` is a model's urn or its name, as for a scan.
    """
    [model] = models_to_scan(catalog, [model])
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
