"""``mlcopilot scan --shared``: a full rescan in batches, taken by every scanner and watcher.

Every scanner and watcher on one state database takes from the same batches. A scanner
starts a full rescan (:meth:`~mlcopilot.protocols.StateStore.split_rescan`: batch requests of
``watch.rescan_batch`` models, due now; the models as the catalog's index lists them,
:func:`rescan_models`), or joins the one under way (another scanner's, or
``mlcopilot watch``'s hourly one). Then it claims one batch at a time under a lease, renewed
every third of it by a thread while it scans, scans the batch's models (those still in the
catalog and not soft-deleted, :func:`still_listed`) through the function it is given (an
ordinary scan, committed in one transaction, its deliveries left in the outbox), completes the
batch, and takes the next. With none left to take, it waits while other processes hold
batches (one whose holder dies is taken over once its lease runs out) and returns once no
batch is waiting or held. A batch whose scan failed is
retried after ``watch.retry_backoff`` by whoever claims it then; the failing scanner stops
with the scan's error, as ``mlcopilot scan`` would; one interrupted is due again at once.

Its report covers the batches it scanned (:func:`merged`): each model of the rescan is in
exactly one scanner's report, and every incident and notification is recorded once whichever
scanner found it (the store's unique incident generations and the outbox's dedupe keys; two
scans committing the same incidents at once conflict and the second reconciles again).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from mlcopilot.model import IncidentChanges, Node, Urn
from mlcopilot.notify.acks import AckReport
from mlcopilot.protocols import Catalog, ModelIndex, RescanRequest, RescanSplit, StateStore
from mlcopilot.scan import Delivery, ScanResult, _deliver
from mlcopilot.text.wording import count

SHARED_LEASE = timedelta(minutes=2)
"""How long a batch a scanner claimed outlives the scanner's last renewal (it renews every
third of it while it scans): how long the others wait before taking over a dead one's batch."""
POLL_S = 1.0
"""Seconds between two looks for a batch to take while other processes hold the rest."""

Say = Callable[[str], None]


def owner_name() -> str:
    """This scanner's name on its claims: ``scan:HOST:PID``."""
    return f"scan:{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class SharedRun:
    """What one scanner did for a shared full rescan."""

    split: RescanSplit
    """Whether it started the rescan (batches made) or joined the one under way."""
    results: tuple[ScanResult, ...] = ()
    """One per batch it scanned, in order."""
    batches: int = 0
    """Batches it scanned (a batch whose models were all gone counts, with no result)."""
    failing: int = 0
    """Batches left waiting for a retry after a failed scan when it returned."""


def run_shared(
    store: StateStore,
    catalog: Catalog,
    scan_batch: Callable[[Sequence[Urn]], ScanResult],
    *,
    owner: str,
    size: int,
    reason: str,
    renewals: Callable[[], StateStore],
    lease: timedelta = SHARED_LEASE,
    retry_backoff: timedelta = timedelta(seconds=30),
    sleep: Callable[[float], None] = time.sleep,
) -> SharedRun:
    """Start or join a full rescan of ``catalog``'s models; scan batches until none is left.

    ``scan_batch`` scans and commits the models it is given (with ``deliver=False``: one
    delivery after the last batch is the caller's). ``renewals`` opens the store the lease
    thread renews claims through (a connection of its own). Returns what this scanner did.

    Raises:
        Exception: what ``scan_batch`` raised for a batch (the batch is then released to be
            retried after ``retry_backoff``), or the store's error.
    """
    split = store.split_rescan(
        rescan_models(catalog), size=size, reason=reason, now=_now(), stale_after=lease
    )
    results: list[ScanResult] = []
    batches = 0
    with _Renewal(renewals, owner=owner, lease=lease) as renewal:
        while True:
            claimed = store.claim_rescans(owner=owner, now=_now(), lease=lease, only_batches=True)
            if not claimed:
                waiting, failing = _left(store.rescans())
                if not waiting:
                    return SharedRun(split, tuple(results), batches, failing)
                sleep(POLL_S)
                continue
            renewal.hold(claimed)
            try:
                result = _scan_claimed(catalog, scan_batch, claimed)
            except BaseException as exc:
                # Interrupted: due again at once, for another scanner to take without waiting
                # for the lease. Failed: retried after the backoff, as a watcher's scan is.
                now = _now()
                again = now if isinstance(exc, KeyboardInterrupt) else now + retry_backoff
                error = str(exc) or type(exc).__name__
                store.fail_rescans(claimed, owner=owner, error=error, now=now, retry_at=again)
                raise
            finally:
                renewal.hold([])
            store.complete_rescans(claimed, owner=owner, now=_now())
            batches += len(claimed)
            if result is not None:
                results.append(result)


def rescan_models(catalog: Catalog) -> list[Urn]:
    """The models a full rescan is split into batches of, sorted.

    From the catalog's index where it has one (:class:`~mlcopilot.protocols.ModelIndex`):
    :meth:`~mlcopilot.protocols.Catalog.models` would read every model's aspects to drop the
    ones gone or soft-deleted, and each batch reads its models again before scanning them
    (:func:`still_listed`). On 2,000 models through ``datahub:`` that read was most of the
    split, which one process makes while the others wait for batches: the split took 0.8-1.6 s
    with it and 0.2-0.6 s without (benchmarks/RESULTS.md, session 20).
    """
    return catalog.indexed_models() if isinstance(catalog, ModelIndex) else catalog.models()


def still_listed(models: Sequence[Urn], found: Mapping[Urn, Node]) -> list[Urn]:
    """Those of a batch's ``models`` that :meth:`~mlcopilot.protocols.Catalog.models` lists.

    ``found`` holds their nodes, read now: each exists and is not soft-deleted.
    """
    return [m for m in models if found[m].exists and not found[m].removed]


def _scan_claimed(
    catalog: Catalog,
    scan_batch: Callable[[Sequence[Urn]], ScanResult],
    claimed: Sequence[RescanRequest],
) -> ScanResult | None:
    """Scan the claimed batch's models still listed by the catalog; None when none is."""
    wanted = list(dict.fromkeys(m for r in claimed for m in r.models))
    models = still_listed(wanted, catalog.nodes(wanted)) if wanted else []
    return scan_batch(models) if models else None


def _left(requests: Sequence[RescanRequest]) -> tuple[bool, int]:
    """Whether a batch is waiting or held (not failing), and how many batches are failing."""
    batches = [r for r in requests if r.is_batch]
    return any(r.attempts == 0 for r in batches), sum(1 for r in batches if r.attempts)


class _Renewal:
    """A thread renewing, every third of ``lease``, the claim on the batch being scanned."""

    def __init__(self, opener: Callable[[], StateStore], *, owner: str, lease: timedelta) -> None:
        self._opener = opener
        self._owner = owner
        self._lease = lease
        self._held: list[RescanRequest] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mlcopilot-scan-lease", daemon=True)

    def __enter__(self) -> _Renewal:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def hold(self, requests: Sequence[RescanRequest]) -> None:
        """Renew these from now on (none: nothing to renew)."""
        with self._lock:
            self._held = list(requests)

    def _run(self) -> None:
        store: StateStore | None = None
        try:
            while not self._stop.wait(self._lease.total_seconds() / 3):
                with self._lock:
                    held = list(self._held)
                if not held:
                    continue
                try:
                    if store is None:
                        store = self._opener()
                    store.renew_rescans(held, owner=self._owner, now=_now(), lease=self._lease)
                except Exception:  # the next renewal tries again, within the lease
                    continue
        finally:
            if store is not None:
                store.close()


def merged(
    run: SharedRun,
    *,
    catalog: Catalog,
    store: StateStore,
    delivery: Delivery,
    now: datetime,
) -> ScanResult:
    """One result for the batches ``run`` scanned, delivered once when ``delivery`` says so."""
    results = run.results
    changes = IncidentChanges(
        opened=tuple(i for r in results for i in r.changes.opened),
        updated=tuple(i for r in results for i in r.changes.updated),
        resolved=tuple(i for r in results for i in r.changes.resolved),
    )
    acks = AckReport()
    targets: dict[tuple[str, int], tuple[str, ...]] = {}
    notes: dict[str, None] = {}
    for r in results:
        acks.acknowledged.update(r.acks.acknowledged)
        acks.warnings.extend(r.acks.warnings)
        targets.update(r.targets)
        notes.update(dict.fromkeys(r.notes))
    notes[_note(run)] = None
    result = ScanResult(
        now=max((r.now for r in results), default=now),
        catalog=catalog.label,
        models=tuple(m for r in results for m in r.models),
        changes=changes,
        writes=(),
        dry_run=False,
        run_id=results[-1].run_id if results else None,
        notifications=tuple(n for r in results for n in r.notifications),
        acks=acks,
        notes=tuple(notes),
        write_back=delivery.write_back,
        targets=targets,
    )
    if not delivery.deliver:
        return result
    relayed, written = _deliver(catalog, store, delivery, now)
    return replace(result, relay=relayed, writes=written)


def _note(run: SharedRun) -> str:
    models = sum(len(r.models) for r in run.results)
    started = (
        f"split into {count(run.split.batches, 'batch')}"
        if run.split.batches
        else f"joined the one under way ({count(run.split.under_way, 'batch')} then)"
    )
    said = (
        f"A full rescan shared through the state database ({started}): this scanner scanned "
        f"{count(run.batches, 'batch')} ({count(models, 'model')}); other scanners and "
        "watchers scanned the rest."
    )
    if run.failing:
        said += (
            f" {count(run.failing, 'batch')} failed and will be retried by whoever claims "
            "them next."
        )
    return said


def _now() -> datetime:
    return datetime.now(UTC)
