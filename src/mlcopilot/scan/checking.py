"""Walk and check: each model's lineage walked, its baselines chosen, every check run on it.

Reads only: the catalog (lineage, schema and profile history) and the stored baselines. What it
returns is what reconciliation needs: each model's report, the baselines first chosen in this
scan (stored with it), and which (model, check, entity) triples were evaluated.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from mlcopilot.lineage.columns import ColumnPaths, column_usage
from mlcopilot.lineage.coverage import coverage_gaps, profile_readiness
from mlcopilot.lineage.upstream import ShortestPaths
from mlcopilot.model import (
    UNKNOWN_USAGE,
    Baseline,
    ChosenBaselines,
    CurrentSchemas,
    DatasetProfile,
    EntityType,
    Finding,
    Lineage,
    ModelReport,
    Node,
    ProfileBaseline,
    Schema,
    Urn,
)
from mlcopilot.protocols import (
    BatchedHistory,
    Catalog,
    Check,
    CheckContext,
    LineagePrefetch,
    ProfileHistory,
    StateStore,
    WalkLimits,
)

Progress = Callable[[int, int, Urn], None]
"""Called before each model as ``progress(done, total, model_urn)``."""
Step = Callable[[str], None]
"""Called as the walk goes on to its next part, with what that is (``"running the checks"``)."""


@dataclass(frozen=True, slots=True)
class Checked:
    """What walking and checking a scan's models gave."""

    reports: list[ModelReport]
    baselines: ChosenBaselines
    """Schema baselines chosen for the first time in this scan (stored with it)."""
    profile_baselines: list[ProfileBaseline]
    """Profile baselines chosen for the first time in this scan (stored with it)."""
    evaluated: Evaluated

    @property
    def findings(self) -> list[Finding]:
        """Every model's findings."""
        return [f for r in self.reports for f in r.findings]


def walk_and_check(
    catalog: Catalog,
    store: StateStore,
    checks: Sequence[Check],
    models: Sequence[Urn],
    *,
    now: datetime,
    limits: WalkLimits,
    progress: Progress | None = None,
    step: Step | None = None,
    keep_new: bool = True,
) -> Checked:
    """Walk every model's lineage, choose its baselines and run every check on every node.

    ``keep_new``: keep the baselines chosen for the first time, to be stored (False: a dry
    run, which stores nothing; :attr:`Checked.baselines` and ``profile_baselines`` are then
    empty). A first scan of an estate chooses one per model and upstream dataset, a million.
    """
    with _no_collections():
        return _walk_and_check(
            catalog,
            store,
            checks,
            models,
            now=now,
            limits=limits,
            progress=progress,
            step=step,
            keep_new=keep_new,
        )


@contextmanager
def _no_collections() -> Iterator[None]:
    """No cyclic garbage collection while walking and checking (it resumes after).

    The walk and the checks build what the scan keeps (nodes, edges, paths, findings) and
    make no reference cycles; each collection would re-examine all of it, a sixth of a
    100,000-entity walk's time (``benchmarks/RESULTS.md``). Objects are still freed as
    soon as nothing refers to them; cyclic garbage, if any, is collected after.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _walk_and_check(
    catalog: Catalog,
    store: StateStore,
    checks: Sequence[Check],
    models: Sequence[Urn],
    *,
    now: datetime,
    limits: WalkLimits,
    progress: Progress | None,
    step: Step | None,
    keep_new: bool,
) -> Checked:
    step = step or _nowhere
    if len(models) > 1 and isinstance(catalog, LineagePrefetch):
        step(f"reading the lineage of all {len(models)} models at once")
        catalog.prefetch(models, limits)
    lineages: list[Lineage] = []
    for done, model in enumerate(models):
        if progress is not None:
            progress(done, len(models), model)
        lineages.append(catalog.lineage(model, limits))
    # History for every model at once (a dataset many models share is read once); the stored
    # baselines a part of the models at a time as the checks come.
    step("reading the schemas the models were trained on")
    schemas = read_schema_baselines(catalog, store, lineages, now)
    profiles_read = reads_profiles(checks)
    if profiles_read:
        step("reading the profiles the models were trained on")
    profiled = (
        profile_baselines(catalog, store, lineages, now)
        if profiles_read
        else {lineage.root: ({}, []) for lineage in lineages}
    )
    step("running the checks")
    evaluated = Evaluated(frozenset(check.name for check in checks))
    checked = Checked([], ChosenBaselines(), [], evaluated)
    # Each model's baselines by dataset are made for its checks and let go after (a model
    # named twice keeps its new ones once, at its last): an estate's are a million entries.
    last = {lineage.root: index for index, lineage in enumerate(lineages)}
    for index, lineage in enumerate(lineages):
        model_known, model_baselines = schemas.of(lineage)
        model_profiles, new_profiles = profiled[lineage.root]
        if last[lineage.root] == index:
            schemas.release(lineage.root)
            del profiled[lineage.root]
        report, missed = check_model(
            checks, lineage, model_known, now, model_profiles if profiles_read else None
        )
        checked.reports.append(report)
        if keep_new and last[lineage.root] == index:
            checked.baselines.add(lineage.root, model_baselines)
            checked.profile_baselines.extend(new_profiles)
        checked.evaluated.add(lineage, missed.checks, missed.fields)
    if progress is not None:
        progress(len(models), len(models), "")
    return checked


def _nowhere(what: str) -> None:
    """A walk nobody follows."""


def check_model(
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
    column_paths = ColumnPaths(lineage, usage)
    findings: list[Finding] = []
    unknown: dict[Urn, list[str]] = {}
    errors: list[str] = []
    missed: set[tuple[str, Urn]] = set()
    undecided: set[tuple[str, Urn, str | None]] = set()
    # Every check runs on every node (10,000s of times a scan): the loop is kept lean.
    runs = [(check.name, check.run) for check in checks]
    usage_of, profile_of = usage.get, (profiles or {}).get
    # A walk keeps its paths unmade (see ShortestPaths): all of them are read here, so they are
    # made at once, cheaply, and let go with the model's checks.
    paths = lineage.paths.every() if isinstance(lineage.paths, ShortestPaths) else lineage.paths
    path_of = column_paths.path
    for urn, node in lineage.nodes.items():
        if urn == lineage.root:
            continue
        baseline = known.get(urn)
        ctx = CheckContext(
            model=model,
            path=paths[urn],
            now=now,
            usage=usage_of(urn, UNKNOWN_USAGE),
            baseline=baseline.schema if baseline is not None else None,
            profile_baseline=profile_of(urn),
            column_path=partial(path_of, urn),
        )
        for name, run in runs:
            try:
                outcome = run(node, ctx)
            except Exception as exc:  # a crashing check must not stop the walk; it is reported
                errors.append(f"check {name} crashed on {urn}: {type(exc).__name__}: {exc}")
                missed.add((name, urn))
                continue
            if outcome.findings:
                findings.extend(outcome.findings)
            if outcome.undecided:
                undecided.update((name, urn, field) for field in outcome.undecided)
            if outcome.unknown is not None:
                unknown.setdefault(urn, []).append(f"{name}: {outcome.unknown}")
                missed.add((name, urn))
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


def reads_profiles(checks: Sequence[Check]) -> bool:
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


class Evaluated:
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


STORED_PART = 500
"""Models whose stored schema baselines are read at a time, as their checks come."""


def read_schema_baselines(
    catalog: Catalog, store: StateStore, lineages: Sequence[Lineage], now: datetime
) -> SchemaBaselines:
    """What choosing every model's schema baselines reads: the store, then the catalog's history.

    Established on first sight: first choice is what is stored; then the catalog's aspect
    history as of the model's training time; when history cannot tell, the current schema
    becomes the baseline (the first-scan snapshot). Which datasets have a stored baseline is
    read for all models first, and the history of every model's other datasets in one batched
    call, never once per dataset: an estate has thousands of models sharing thousands of
    datasets. The stored baselines themselves are read a part of the models at a time as
    their checks come (:meth:`SchemaBaselines.of`), each model's made when it is checked: an
    estate's are a million: a second scan held them all, and its walk ended 180 MB above the
    first scan's at 10,000 models.
    """
    # Each (dataset, training time) once: an estate's models share both.
    wanted: dict[tuple[Urn, datetime], None] = {}
    for part in _parts(lineages, STORED_PART):
        stored = store.baselined_datasets([lineage.root for lineage in part])
        for lineage in part:
            model = lineage.nodes[lineage.root]
            if model.trained_at is None:
                continue
            for node in _datasets(lineage):
                if node.urn not in stored[model.urn]:
                    wanted[(node.urn, model.trained_at)] = None
    return SchemaBaselines(store, lineages, _history(catalog, list(wanted)), now)


def _parts(lineages: Sequence[Lineage], size: int) -> Iterator[Sequence[Lineage]]:
    for start in range(0, len(lineages), size):
        yield lineages[start : start + size]


class SchemaBaselines:
    """Every model's schema baselines, made as its checks come (see :func:`read_schema_baselines`).

    The stored ones are read :data:`STORED_PART` models at a time, in the order the models are
    checked; a model's are let go after its last check (:meth:`release`).
    """

    def __init__(
        self,
        store: StateStore,
        lineages: Sequence[Lineage],
        history: Mapping[tuple[Urn, datetime], Schema | None],
        now: datetime,
    ) -> None:
        self.history = history
        self.now = now
        self._store = store
        # A stored schema equal to today's is held as today's object, as a first scan holds it.
        self._current = CurrentSchemas(
            {
                urn: node.schema
                for lineage in lineages
                for urn, node in lineage.nodes.items()
                if node.schema is not None and node.entity_type is EntityType.DATASET
            }
        )
        self._next = [lineage.root for lineage in reversed(lineages)]
        """The models in the order they are checked, the next one last."""
        self._read: set[Urn] = set()
        """The models whose stored baselines were read."""
        self._stored: dict[Urn, list[Baseline]] = {}

    def release(self, model: Urn) -> None:
        """Let go of ``model``'s stored baselines (its last :meth:`of` is done)."""
        self._stored.pop(model, None)

    def of(self, lineage: Lineage) -> tuple[dict[Urn, Baseline], list[Baseline]]:
        """The model's baseline for each upstream dataset, and those chosen in this scan."""
        model = lineage.nodes[lineage.root]
        stored = {b.dataset: b for b in self._stored_of(model.urn)}
        known: dict[Urn, Baseline] = {}
        new: list[Baseline] = []
        for node in _datasets(lineage):
            if node.urn in stored:
                known[node.urn] = stored[node.urn]
                continue
            assert node.schema is not None
            when = model.trained_at
            historic = self.history.get((node.urn, when)) if when is not None else None
            if historic is None:
                new.append(Baseline(model.urn, node.urn, node.schema, "first_scan", self.now))
            else:
                # The same schema as today's (the common case) is kept once, not twice.
                schema = node.schema if historic == node.schema else historic
                new.append(Baseline(model.urn, node.urn, schema, "history", self.now))
        known.update((b.dataset, b) for b in new)
        return known, new

    def _stored_of(self, model: Urn) -> list[Baseline]:
        """``model``'s stored baselines, reading them with the next models' when not yet read."""
        if model not in self._read:
            part = {model: None}
            while self._next and len(part) < STORED_PART:
                if (later := self._next.pop()) not in self._read:
                    part[later] = None
            self._read.update(part)
            self._stored.update(self._store.baselines_of(list(part), current=self._current))
        return self._stored.get(model, [])


def _datasets(lineage: Lineage) -> Iterator[Node]:
    """The model's upstream datasets that have a schema."""
    for urn, node in lineage.nodes.items():
        if (
            urn != lineage.root
            and node.entity_type is EntityType.DATASET
            and node.schema is not None
        ):
            yield node


def profile_baselines(
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
