"""The extension points on one page: what a catalog, a check and a state store must do.

Implementations do not inherit from these: mypy checks them structurally wherever one is used
as such (``wiring.open_catalog``, the end of ``store/sql.py``, the catalog contract tests), and
the contract suites check their behaviour. The relay's side of the store is
:class:`OutboxStore`, which :class:`StateStore` extends.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from mlcopilot.config import PluginConfig
from mlcopilot.model import (
    Baseline,
    CheckInfo,
    CheckOutcome,
    Claimed,
    ColumnUsage,
    Contact,
    CurrentSchemas,
    DatasetProfile,
    Delivered,
    Edge,
    Finding,
    Incident,
    IncidentChanges,
    IncidentHeads,
    Lineage,
    Node,
    NotifyRequest,
    OutboxItem,
    OutboxStatus,
    PlannedRow,
    ProfileBaseline,
    RecordedScan,
    Schema,
    Severity,
    SinkName,
    SinkRef,
    Urn,
    WatchedGroup,
    Write,
)

ALL_MODELS = "*"
"""The rescan request that stands for every watched model (the periodic full rescan). Whoever
claims it splits it into batches (:meth:`StateStore.split_rescan`) that every watcher and
``mlcopilot scan --shared`` on the database then claim."""

BATCH_PREFIX = "*/"
"""How the key of a full rescan's batch request begins (never an urn, nor :data:`ALL_MODELS`)."""


@dataclass(frozen=True, slots=True)
class RescanRequest:
    """One model ``mlcopilot watch`` must scan again (coalesced: one per model), or a batch."""

    model: Urn
    """An mlModel urn, :data:`ALL_MODELS`, or a batch's key (:data:`BATCH_PREFIX`...)."""
    reason: str
    """What asked for it last (e.g. ``TECHNICAL_SCHEMA REMOVE on urn:li:dataset:...``)."""
    requested_at: datetime
    due_at: datetime
    """Not claimed before this (a failed scan's backoff, the next periodic rescan)."""
    attempts: int
    """Failed scans since it last succeeded."""
    claimed_by: str | None = None
    claimed_at: datetime | None = None
    last_error: str | None = None
    models: tuple[Urn, ...] = ()
    """A batch of a full rescan: the models it scans (empty for any other request)."""
    lease_until: datetime | None = None
    """While claimed: when the claim lapses unless its holder renews it."""

    @property
    def is_batch(self) -> bool:
        """Whether this is a batch of a full rescan (:data:`BATCH_PREFIX`)."""
        return self.model.startswith(BATCH_PREFIX)


@dataclass(frozen=True, slots=True)
class RescanSplit:
    """What :meth:`StateStore.split_rescan` did."""

    batches: int
    """Batch requests made: 0 when it joined a full rescan under way, or lost its claim."""
    under_way: int = 0
    """The batches, waiting or claimed, of the full rescan under way that it joined."""
    held: bool = True
    """False: the caller no longer held the full-rescan request it split (another watcher
    took it after a lapse), so nothing was done."""


@dataclass(frozen=True, slots=True)
class WalkLimits:
    """Caps on one upstream walk; hitting one marks the lineage as truncated."""

    max_hops: int = 50
    max_nodes: int = 10_000


class Catalog(Protocol):
    """A metadata catalog (DataHub) that can be walked upstream and written back to."""

    @property
    def label(self) -> str:
        """What the report calls this catalog, e.g. ``lite:/home/me/.mlcopilot/catalog.db``."""
        ...

    def models(self) -> list[Urn]:
        """Every ML model in the catalog, sorted."""
        ...

    def nodes(self, urns: Sequence[Urn]) -> dict[Urn, Node]:
        """The current metadata of each urn; an urn with no aspects gets ``exists=False``."""
        ...

    def upstream(self, urns: Sequence[Urn]) -> list[Edge]:
        """Every edge one hop upstream of each of ``urns``.

        That includes the ML hops that DataHub's own lineage index misses: training data,
        feature tables, training-run inputs.
        """
        ...

    def lineage(self, root: Urn, limits: WalkLimits) -> Lineage:
        """The whole upstream lineage of ``root`` within ``limits``."""
        ...

    def schema_as_of(self, urn: Urn, when: datetime) -> Schema | None:
        """The schema of ``urn`` as it stood at ``when``; None when history cannot tell."""
        ...

    def apply(self, writes: Sequence[Write], *, dry_run: bool = False) -> list[Write]:
        """Make the catalog hold ``writes``; return those that changed something.

        Idempotent: applying the same writes twice returns an empty list the second time.
        With ``dry_run`` nothing is written and the would-be changes are returned.
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@dataclass(frozen=True, slots=True)
class CheckContext:
    """What a check may consult about one node besides the node itself."""

    model: Node
    path: tuple[Urn, ...]
    """The lineage path from the model to the node, model first."""
    now: datetime
    usage: ColumnUsage
    """Which of the node's columns feed the model."""
    baseline: Schema | None
    """For a dataset: the schema the model was trained on (None when none is known yet)."""
    profile_baseline: ProfileBaseline | None = None
    """For a dataset: the ``datasetProfile`` its data is compared with (see
    :class:`~mlcopilot.model.ProfileBaseline`); None when none is known."""
    column_path: Callable[[str], tuple[Urn, ...] | None] | None = None
    """The path along which one of the node's columns reaches the model, model first, when
    lineage names it edge by edge (None: it does not). A finding about a column carries it
    instead of ``path``, so every surface shows the way the column really takes."""

    def finding(
        self,
        check: str,
        severity: Severity,
        node: Node,
        field: str | None,
        message: str,
        **extra: Any,
    ) -> Finding:
        """Build a finding of ``check`` at ``node``, carrying this context's model and path.

        The path is the column's own (``column_path``) for a finding about a column whose way
        to the model lineage names; else the walk's path to the node.
        """
        path = self.path
        if field is not None and self.column_path is not None:
            path = self.column_path(field) or path
        return Finding(
            check=check,
            severity=severity,
            model=self.model.urn,
            entity=node.urn,
            field=field,
            message=message,
            path=path,
            **extra,
        )


class Check(Protocol):
    """One risk rule, run once per (model, upstream node).

    It describes itself: ``info`` is everything the write-back, notifications and setup say
    about its findings, and ``config_model`` parses its ``[checks.<name>]`` section.
    """

    name: ClassVar[str]
    info: ClassVar[CheckInfo]
    config_model: ClassVar[type[PluginConfig]]

    def __init__(self, config: Any) -> None: ...

    def run(self, node: Node, ctx: CheckContext) -> CheckOutcome:
        """Findings at ``node``, or the reason it lacked the metadata to decide."""
        ...


class OutboxStore(Protocol):
    """The state store's side of the outbox, as the relay uses it."""

    def claim(
        self,
        *,
        sinks: Sequence[SinkName],
        owner: str,
        now: datetime,
        lease: timedelta,
        limit: int = 1,
    ) -> list[Claimed]:
        """Take up to ``limit`` deliverable rows for ``owner``, oldest first (none: none due).

        Deliverable: due, and the first undelivered row of its group and sink. Each comes with
        its group's stored sink reference.
        """
        ...

    def renew(
        self, items: Sequence[OutboxItem], *, owner: str, now: datetime, lease: timedelta
    ) -> set[int]:
        """Extend ``owner``'s lease on ``items`` to ``now + lease``; the ids it still held.

        A row another relay took over once the lease had run out is not among them.
        """
        ...

    def release(self, items: Sequence[OutboxItem], *, owner: str) -> None:
        """Give back rows ``owner`` claimed and did not try: ``pending`` again.

        The claim's attempt is not counted; a row some relay had left ``sending`` stays
        uncertain.
        """
        ...

    def complete(
        self, item: OutboxItem, delivered: Delivered, *, owner: str, now: datetime
    ) -> bool:
        """Mark ``item`` done and remember the sink reference it produced.

        Returns False when ``owner`` no longer held the row (its lease expired and another
        relay claimed it): the row is left as that relay has it.
        """
        ...

    def complete_and_renew(
        self,
        item: OutboxItem,
        delivered: Delivered,
        *,
        owner: str,
        now: datetime,
        renew: Sequence[OutboxItem],
        lease: timedelta,
    ) -> tuple[bool, set[int]]:
        """:meth:`complete` ``item`` and :meth:`renew` the rows ``renew`` in one transaction.

        Returns what each returns: whether ``owner`` still held ``item``, and the ids of
        ``renew`` it still holds (their leases now run to ``now + lease``).
        """
        ...

    def fail(
        self,
        item: OutboxItem,
        *,
        owner: str,
        error: str,
        now: datetime,
        retry_at: datetime | None,
        uncertain: bool,
        count_attempt: bool = True,
    ) -> None:
        """Put ``item`` back to ``pending`` until ``retry_at``, or ``dead`` when None."""
        ...

    def sink_ref(self, group_key: str, generation: int, sink: SinkName) -> SinkRef | None:
        """Where a group lives in ``sink``, once its ``open`` row was delivered."""
        ...

    def next_due(self, *, sinks: Sequence[SinkName]) -> datetime | None:
        """When the earliest waiting row of ``sinks`` becomes due (None: nothing waits)."""
        ...

    def held(self, *, sinks: Sequence[SinkName], now: datetime) -> list[OutboxItem]:
        """Rows of ``sinks`` being sent under a lease that has not expired at ``now``."""
        ...


class StateStore(OutboxStore, Protocol):
    """Where baselines, scan runs, incidents and the outbox live (SQLite or PostgreSQL)."""

    def baseline(self, model: Urn, dataset: Urn) -> Baseline | None:
        """The stored baseline schema of ``dataset`` for ``model``."""
        ...

    def baselines(self, model: Urn) -> list[Baseline]:
        """Every stored baseline of ``model``, sorted by dataset."""
        ...

    def baselines_of(
        self, models: Sequence[Urn], *, current: CurrentSchemas | None = None
    ) -> dict[Urn, list[Baseline]]:
        """:meth:`baselines` of each of ``models`` (every one a key), in one read.

        ``current``: datasets' schemas now; a stored schema equal to its dataset's is given
        as that very object (a scan's baselines then hold the walk's schemas, as on its first
        scan, and an unchanged one is seen as the same), without reading its stored text.
        """
        ...

    def baselined_datasets(self, models: Sequence[Urn]) -> dict[Urn, set[Urn]]:
        """The datasets each of ``models`` (every one a key) has a stored baseline of.

        What :meth:`baselines_of` would give, without the baselines: a scan asks it of every
        model before its checks, to know whose history to read.
        """
        ...

    def save_baselines(self, baselines: Iterable[Baseline]) -> None:
        """Insert or replace baselines (one per model and dataset)."""
        ...

    def profile_baselines_of(self, models: Sequence[Urn]) -> dict[Urn, list[ProfileBaseline]]:
        """The stored profile baselines of each of ``models`` (every one a key), by dataset."""
        ...

    def save_profile_baselines(self, baselines: Sequence[ProfileBaseline]) -> None:
        """Insert or replace profile baselines (one per model and dataset)."""
        ...

    def incidents(
        self,
        *,
        include_resolved: bool = True,
        models: Sequence[Urn] | None = None,
        entities: Sequence[Urn] | None = None,
        ids: Sequence[str] | None = None,
        other_than: Sequence[Urn] = (),
    ) -> list[Incident]:
        """The latest generation of every incident, newest first (optionally filtered).

        ``models``: of these models; ``entities``: on these entities; ``ids``: these
        incidents (one of the three at most); ``other_than``: leaving out these models'
        incidents.
        """
        ...

    def incident_heads(self, models: Sequence[Urn]) -> IncidentHeads:
        """The latest generation of ``models``' incidents, packed: what a refresh keeps."""
        ...

    def get(self, incident_id: str) -> Incident | None:
        """The latest generation of one incident."""
        ...

    def last_scan_at(self) -> datetime | None:
        """The clock (``now``) of the latest committed scan, or None before the first."""
        ...

    def record_scan(
        self,
        changes: IncidentChanges,
        *,
        started_at: datetime,
        now: datetime,
        catalog: str,
        models: Sequence[Urn],
        findings: int,
        finished_at: datetime | None = None,
        baselines: Iterable[Baseline] = (),
        notify: NotifyRequest | None = None,
        profile_baselines: Sequence[ProfileBaseline] = (),
    ) -> RecordedScan:
        """Store a scan run, its incident changes, ``baselines`` and outbox rows in one transaction.

        Returns the run id and the outbox rows planned. ``updated`` incidents keep their
        stored state (an acknowledgement made meanwhile stays); a concurrent change to the
        same incidents makes the whole scan fail with nothing saved. With ``notify``, the
        write-back and the notifications the changes imply are committed as outbox rows in the
        same transaction.
        """
        ...

    def planned_notifications(
        self, changes: IncidentChanges, notify: NotifyRequest, *, now: datetime
    ) -> list[PlannedRow]:
        """The outbox rows :meth:`record_scan` would commit for ``changes``; writes nothing."""
        ...

    def acknowledge(
        self, incident_id: str, *, by: str, at: datetime, notify: NotifyRequest | None = None
    ) -> Incident:
        """Mark an open incident acknowledged (and, with ``notify``, its group)."""
        ...

    def resolve(
        self, incident_id: str, *, at: datetime, reason: str, notify: NotifyRequest | None = None
    ) -> Incident:
        """Resolve an incident by hand (with ``notify``, plan what that notifies)."""
        ...

    def watched_groups(
        self, models: Sequence[Urn] | None = None, *, keys: Sequence[str] | None = None
    ) -> list[WatchedGroup]:
        """Open, unacknowledged notification groups (of ``models``: with their incidents only).

        With ``keys``, the open groups of those keys with every open incident of theirs.
        """
        ...

    def incident_refs(self, sink: SinkName) -> dict[tuple[str, int], SinkRef]:
        """Each incident occurrence's group reference in ``sink``, by ``(id, generation)``.

        ``sink`` is a sink's name: every target through it counts (``github:acme/x`` for
        ``github``). Read-only, and whatever the state: acknowledged and resolved incidents
        included.
        """
        ...

    def incident_targets(self, ids: Sequence[str]) -> dict[tuple[str, int], tuple[SinkName, ...]]:
        """Where each occurrence of the incidents ``ids`` is told: its group's targets.

        By ``(id, generation)``; occurrences no group holds yet are absent.
        """
        ...

    def outbox(
        self, *, statuses: Sequence[OutboxStatus] | None = None, limit: int = 200
    ) -> list[OutboxItem]:
        """Outbox rows, newest first."""
        ...

    def retry_outbox(self, ids: Sequence[int] | None = None, *, now: datetime) -> int:
        """Make dead outbox rows pending again; how many."""
        ...

    def request_rescans(self, models: Sequence[Urn], *, reason: str, now: datetime) -> int:
        """Ask for ``models`` to be scanned again, due now; how many rows were new.

        Coalesced: a model already waiting keeps its one row, with ``requested_at`` and
        ``reason`` bumped (and, unless it is backing off after a failure, due now). A request
        for a model being scanned makes it run again once that scan completes.
        """
        ...

    def claim_rescans(
        self,
        *,
        owner: str,
        now: datetime,
        lease: timedelta,
        limit: int = 100,
        only_batches: bool = False,
    ) -> list[RescanRequest]:
        """Take due requests for ``owner`` until ``now + lease``.

        Up to ``limit`` requests for models (and :data:`ALL_MODELS`); when none is due, one
        batch of a full rescan, so that an event's rescan never waits behind a full rescan.
        ``only_batches``: a batch or nothing (``mlcopilot scan --shared``). Concurrent
        claimers never take the same row (``FOR UPDATE SKIP LOCKED`` on PostgreSQL); a row
        whose lease expired (its holder died) is taken again.
        """
        ...

    def split_rescan(
        self,
        models: Sequence[Urn],
        *,
        size: int,
        reason: str,
        now: datetime,
        stale_after: timedelta,
        owner: str = "",
        held: Sequence[RescanRequest] = (),
        again_at: datetime | None = None,
    ) -> RescanSplit:
        """Start a full rescan of ``models``: batch requests of ``size`` models, due now.

        In one transaction, and one at a time (concurrent splits wait for each other):
        ``held``, the :data:`ALL_MODELS` request ``owner`` claimed, is completed (or, with
        ``again_at``, scheduled then), and nothing else is done if ``owner`` no longer holds
        it. A full rescan already under way is joined instead of starting another: one with a
        batch claimed under a live lease, or made less than ``stale_after`` ago and not
        failing. The leftovers of one no longer under way (every holder died) are replaced.
        """
        ...

    def renew_rescans(
        self, requests: Sequence[RescanRequest], *, owner: str, now: datetime, lease: timedelta
    ) -> int:
        """Extend to ``now + lease`` the lease of the ``requests`` ``owner`` still holds.

        A watcher calls it while it scans (its heartbeat), so a scan longer than the lease is
        not taken over by another watcher; once it stops (dies), the lease runs out. Returns
        how many rows it still holds (fewer: another watcher took them after a lapse).
        """
        ...

    def complete_rescans(
        self,
        requests: Sequence[RescanRequest],
        *,
        owner: str,
        now: datetime,
        again_at: datetime | None = None,
    ) -> int:
        """Remove ``requests`` once scanned (or, with ``again_at``, schedule them then).

        A request asked for again while it was being scanned stays, due now. Rows ``owner``
        no longer holds are left alone; returns how many rows were completed.
        """
        ...

    def fail_rescans(
        self,
        requests: Sequence[RescanRequest],
        *,
        owner: str,
        error: str,
        now: datetime,
        retry_at: datetime,
    ) -> None:
        """Release ``requests`` after a failed scan, counting the attempt, due at ``retry_at``."""
        ...

    def rescans(self) -> list[RescanRequest]:
        """Every waiting or claimed request, by due time."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


# --- what a catalog may also do (each optional; checked with isinstance) -------------------


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
class IncidentTargets(Protocol):
    """A catalog that says which entity types an incident may name (optional).

    DataHub checks ``incidentInfo.entities`` against its ``IncidentOn`` allowlist and rejects
    the whole write for any other type; it lists an incident on an entity's page only where
    GraphQL has ``incidents`` for that type. ML models and features are among them since
    DataHub PR #19112, feature tables since #19367. Without it, the write-back names the
    affected entity and the model whatever their types.
    """

    def incident_entity_types(self) -> frozenset[str]:
        """Entity types (``dataset``, ``mlModel``...) an incident may name; never raises."""
        ...


@runtime_checkable
class EntityCensus(Protocol):
    """A catalog that can say how many entities of each type it holds (optional).

    Used to say what a catalog without ML models does hold, rather than just "nothing".
    """

    def entity_counts(self) -> Mapping[str, int]:
        """The number of entities of each entity type (``dataset``, ``dataJob``...)."""
        ...


@runtime_checkable
class ModelIndex(Protocol):
    """A catalog that can list its models from an index, without reading them (optional).

    Listing is :meth:`Catalog.models`' first step on DataHub: its search index. ``models()``
    then reads every model's aspects to drop those gone or soft-deleted since the index was
    written. A full rescan need not: each of its batches reads its models anyway, and skips
    those.
    """

    def indexed_models(self) -> list[Urn]:
        """Every ML model the index lists, sorted.

        It may still list models deleted or soft-deleted since it was written (DataHub's
        search, asked as ``datahub:`` asks it, lists soft-deleted ones).
        """
        ...


@runtime_checkable
class OwnerDirectory(Protocol):
    """A catalog that says how to reach the owners it records (optional).

    DataHub keeps a user's or group's Slack and email on the owner itself
    (``corpUserEditableInfo``, ``corpGroupEditableInfo``, their ``*Info``), so routing can
    send an incident to where its model's owners work. Without it, owners are known by urn
    only.
    """

    def contacts(self, owners: Sequence[Urn]) -> Mapping[Urn, Contact]:
        """How to reach each owner the catalog knows (users and groups); unknown ones absent.

        Read in batches, never a request per owner; an urn that is neither a ``corpuser``
        nor a ``corpGroup`` is absent too.
        """
        ...


@runtime_checkable
class TimedWalk(Protocol):
    """A catalog whose calls can be held to a deadline (optional).

    A remote catalog makes many calls, some at once on threads of its own: given the deadline
    of a scan's walk, it starts none past it and ends any in progress by then, with
    :class:`~mlcopilot.errors.CatalogUnavailable`. Without it, a scan checks its bound between
    models only.
    """

    def walk_until(self, deadline: float | None) -> None:
        """Hold every call to ``deadline`` (a ``time.monotonic()``); None: no bound."""
        ...


@runtime_checkable
class RescanWakeups(Protocol):
    """A state store that tells its watchers when rescan requests come due (optional).

    Without it (SQLite), a watcher finds requests other processes recorded at its next look.
    """

    def listen_for_rescans(self, wake: Callable[[], None], stop: threading.Event) -> bool:
        """Call ``wake`` whenever any process makes requests due, until ``stop`` is set.

        It is called once as soon as the store listens, for what came due before.
        Returns False at once when this store cannot tell (its watchers poll); raises
        :class:`~mlcopilot.errors.StoreError` when listening fails.
        """
        ...


class ClosedOnExit(ABC):
    """A resource used as ``with resource:``; leaving the block calls :meth:`close`."""

    @abstractmethod
    def close(self) -> None:
        """Release what the resource holds; safe to call more than once."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
