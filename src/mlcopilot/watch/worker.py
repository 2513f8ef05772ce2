"""The watcher's worker: claims rescan requests and runs the ordinary scan of those models.

The threads of the watch process, each with its own state store connection:

- the *scanner* claims due requests (its own and any other watcher's on the same database),
  opens a catalog for the scan (a catalog caches what it read: a kept one would answer with
  the metadata from before the change), scans the claimed models exactly as
  ``mlcopilot scan --model ... --no-deliver`` would, which
  commits incidents and outbox rows in one transaction, then completes the requests. A scan
  that fails leaves them to retry with backoff (``watch.retry_backoff``, doubled per failure,
  at most the rescan interval). The request :data:`~mlcopilot.protocols.ALL_MODELS` is the
  full rescan: made when the watcher starts, and rescheduled every ``watch.rescan_interval``
  (freshness has no event: staleness is the absence of one). The watcher that claims it lists
  the models and splits it, in the transaction that reschedules it, into batch requests of
  ``watch.rescan_batch`` models (or joins the full rescan already under way); every watcher on
  the database (and ``mlcopilot scan --shared``) then claims those batches under the same
  leases as any request, one per claim and only when no model's request is due, so several
  watchers share the full rescan and an event's rescan never waits behind it.
- the *lease* thread renews, every third of ``lease``, the claim on the requests the scanner
  holds, so a scan longer than the lease is never taken over by a second watcher while this
  one is alive; once it dies (SIGKILL, a lost node) renewals stop and the lease runs out.
- the *relay lanes*, one per configured sink, each deliver that sink's outbox rows in a
  process of its own (:mod:`mlcopilot.watch.relays`), woken after each scan's commit.

Every scan's walks refresh the :class:`~mlcopilot.lineage.downstream.DownstreamIndex` the action
reads.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Generator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from mlcopilot.clock import SystemClock
from mlcopilot.incidents.payload import SinkName
from mlcopilot.lineage.downstream import DownstreamIndex
from mlcopilot.protocols import (
    ALL_MODELS,
    Catalog,
    RescanRequest,
    RescanWakeups,
    StateStore,
    WalkLimits,
)
from mlcopilot.settings import Settings
from mlcopilot.watch.relays import RelayProcess

if TYPE_CHECKING:
    from mlcopilot.scan import ScanResult
    from mlcopilot.service import Service

log = logging.getLogger("mlcopilot.watch")

LEASE = timedelta(minutes=15)
"""How long a claimed request is held without renewal before another watcher may take it (its
watcher died). Renewed every third of it while the scan runs."""
POLL = 1.0
"""Seconds between two looks for requests other watchers recorded (own ones wake at once)."""
BATCH = 500
"""Requests one scan takes at most. A scan's cost is mostly per scan (its batched reads), so
under a backlog a bigger batch is more models a second; at 100 a watcher fell behind at 50
distinct changed models a second (``benchmarks/watch.py``)."""

Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What the worker scans and how often."""

    models: Sequence[str] = ()
    """Only these models (default: every model in the catalog)."""
    rescan_interval: timedelta | None = timedelta(hours=1)
    retry_backoff: timedelta = timedelta(seconds=30)
    limits: WalkLimits = field(default_factory=WalkLimits)
    lease: timedelta = LEASE
    """How long a claim outlives its watcher's last renewal."""
    rescan_batch: int = 250
    """Models per batch of a full rescan (``watch.rescan_batch``)."""


def owner_name() -> str:
    """This watcher's name on its claims: host, process and a thread-independent tag."""
    return f"watch:{socket.gethostname()}:{os.getpid()}"


class Worker:
    """The scanner and the lease renewal of one watcher, and its relay process."""

    def __init__(
        self,
        settings: Settings,
        index: DownstreamIndex,
        options: WorkerOptions,
        *,
        say: Say = log.info,
        warn: Say = log.warning,
        owner: str | None = None,
    ) -> None:
        self._settings = settings
        self._index = index
        self._options = options
        self._say = say
        """Progress (a scan's counts): shown with ``--verbose``."""
        self._warn = warn
        """Problems the worker rides out (retries, a lost claim): always shown."""
        self.owner = owner or owner_name()
        self._stop = threading.Event()
        self._work = threading.Event()
        self._relays: list[RelayProcess] = []
        """One process per relay lane."""
        self._threads: list[threading.Thread] = []
        self._held: list[RescanRequest] = []
        self._held_lock = threading.Lock()
        self._lease_stop = threading.Event()
        self._lease_thread: threading.Thread | None = None
        self.scans = 0
        """Scans committed (for tests and the closing line)."""
        self.batches = 0
        """Batches of a full rescan among them."""
        self.failures = 0

    @property
    def lanes(self) -> tuple[SinkName, ...]:
        """The relay lanes: ``datahub`` unless the write-back is off, then each sink configured."""
        from mlcopilot.notify.sinks.config import NotifySettings

        notify = NotifySettings.from_settings(self._settings)
        writeback: tuple[SinkName, ...] = ("datahub",) if notify.write_back else ()
        return writeback + notify.sinks

    def start(self) -> None:
        """Ask for the start-up full rescan; start the scanner and the relay process."""
        from mlcopilot.scan.wiring import open_state

        lanes = self.lanes  # a settings error stops the start, before any thread runs
        store = open_state(self._settings, create=True)
        try:
            store.request_rescans([ALL_MODELS], reason="watch started", now=_now())
        finally:
            store.close()
        self._relays = [
            RelayProcess(self._settings, lane, self._options.retry_backoff) for lane in lanes
        ]
        for relay in self._relays:
            relay.start()
            self._say(f"watch: the {relay.lane} relay lane runs in process {relay.pid}")
        scanner = threading.Thread(
            target=self._scanner, name="mlcopilot-watch-scanner", daemon=True
        )
        scanner.start()
        self._threads.append(scanner)
        listener = threading.Thread(
            target=self._listener, name="mlcopilot-watch-listener", daemon=True
        )
        listener.start()
        self._threads.append(listener)
        self._lease_thread = threading.Thread(
            target=self._renewer, name="mlcopilot-watch-lease", daemon=True
        )
        self._lease_thread.start()

    def wake(self) -> None:
        """New requests were recorded: look now rather than at the next poll."""
        self._work.set()

    def stop(self, timeout: float = 120.0) -> None:
        """Stop after the scan in progress (if any) is committed; wait up to ``timeout``."""
        self._stop.set()
        self._work.set()
        for thread in self._threads:
            thread.join(timeout)
        for relay in self._relays:  # after the scanner: it may have committed rows to send
            relay.stop(timeout)
        # Only now: the scan in progress keeps its claim until it has completed its requests.
        self._lease_stop.set()
        if self._lease_thread is not None:
            self._lease_thread.join(timeout)

    # --- the scanner

    def _scanner(self) -> None:
        from mlcopilot.service import Service

        service = Service.from_settings(self._settings)
        with closing(self._opened_states(say_why=True)) as states:
            for store in states:
                while not self._stop.is_set():
                    if not self.run_once(store, service):
                        self._work.wait(POLL)
                        self._work.clear()

    def _listener(self) -> None:
        """Wake the scanner whenever any process makes rescan requests due (PostgreSQL).

        Another watcher's split, an event another watcher heard, ``mlcopilot rescan``: each is
        looked at once, not at the next poll. Where the store cannot tell (SQLite), or while
        listening fails, the scanner still looks every :data:`POLL` seconds.
        """
        # The scanner says why the database cannot be opened: it opens the same one.
        with closing(self._opened_states(say_why=False)) as states:
            for store in states:
                try:
                    if not isinstance(store, RescanWakeups):
                        return
                    if not store.listen_for_rescans(self.wake, self._stop):
                        return
                except Exception as exc:
                    self._warn(
                        f"watch: stopped listening for rescan requests ({exc}); looking for "
                        f"them every {POLL:.0f} s meanwhile"
                    )
                    self._stop.wait(self._options.retry_backoff.total_seconds())

    def _opened_states(self, *, say_why: bool) -> Generator[StateStore]:
        """The state database, opened anew each time the loop asks, until the watcher stops.

        Each is closed when the next is asked for, or when the loop ends. An open that fails
        (the database is down) is tried again after the retry backoff.
        """
        from mlcopilot.scan.wiring import open_state

        while not self._stop.is_set():
            try:
                store = open_state(self._settings, create=True)
            except Exception as exc:
                if say_why:
                    self._warn(f"watch: cannot open the state database: {exc}")
                self._stop.wait(self._options.retry_backoff.total_seconds())
                continue
            try:
                yield store
            finally:
                store.close()

    def run_once(self, store: StateStore, service: Service) -> bool:
        """Claim one batch of due requests and scan it; False when nothing was due.

        Each scan reads a catalog opened for it: a catalog caches what it read for its
        lifetime (one scan's walks share entities), so a catalog kept from the previous scan
        would answer a rescan with the metadata from before the change that asked for it.
        """
        from mlcopilot.scan.wiring import open_catalog

        now = _now()
        try:
            claimed = store.claim_rescans(
                owner=self.owner, now=now, lease=self._options.lease, limit=BATCH
            )
        except Exception as exc:
            self._warn(f"watch: cannot claim rescan requests: {exc}")
            self._stop.wait(POLL)
            return False
        if not claimed:
            return False
        self._hold(claimed)
        try:
            catalog = open_catalog(self._settings.catalog_spec, self._settings)
            try:
                self._scan(catalog, store, service, claimed, now)
            finally:
                catalog.close()
        except Exception as exc:
            self.failures += 1
            self._failed(store, claimed, exc)
        finally:
            self._hold([])
        return True

    def _hold(self, claimed: list[RescanRequest]) -> None:
        with self._held_lock:
            self._held = list(claimed)

    # --- the lease

    def _renewer(self) -> None:
        from mlcopilot.scan.wiring import open_state

        every = self._options.lease.total_seconds() / 3
        store: StateStore | None = None
        try:
            while not self._lease_stop.wait(every):
                with self._held_lock:
                    held = list(self._held)
                if not held:
                    continue
                try:
                    if store is None:
                        store = open_state(self._settings, create=False)
                    kept = store.renew_rescans(
                        held, owner=self.owner, now=_now(), lease=self._options.lease
                    )
                except Exception as exc:  # the next renewal tries again, within the lease
                    self._warn(f"watch: cannot renew the lease of the scan in progress: {exc}")
                    continue
                if kept < len(held):
                    self._warn(
                        f"watch: {len(held) - kept} of {len(held)} request(s) in progress were "
                        "taken by another watcher after this one missed its renewals"
                    )
        finally:
            if store is not None:
                store.close()

    def _scan(
        self,
        catalog: Catalog,
        store: StateStore,
        service: Service,
        claimed: list[RescanRequest],
        now: datetime,
    ) -> None:
        from mlcopilot.scan import ScanOptions
        from mlcopilot.scan.selection import on_shared_clock
        from mlcopilot.scan.shared import still_listed

        full = [r for r in claimed if r.model == ALL_MODELS]
        if full:
            self._split(catalog, store, full, now)
        claimed = [r for r in claimed if r.model != ALL_MODELS]
        # A batch's models, or the models asked for (each model once: a batch is claimed alone).
        asked = dict.fromkeys(m for r in claimed for m in (r.models or (r.model,)))
        wanted = [m for m in asked if self._index.watches(m)]
        found = catalog.nodes(wanted) if wanted else {}
        self._index.forget(m for m in wanted if not found[m].exists)
        if any(r.is_batch for r in claimed) and not self._options.models:
            # A full rescan of every model: its batches hold what the catalog's index listed
            # (rescan_models), soft-deleted models included.
            models = still_listed(wanted, found)
        else:  # asked for by an event, or named with --model: scanned while it exists
            models = [m for m in wanted if found[m].exists]
        if models:
            # The clock is read now, not at the claim: another watcher's scan may have been
            # committed meanwhile, and a scan never runs on a clock earlier than the last one's.
            def scan_at(now: datetime) -> ScanResult:
                options = ScanOptions(
                    now=now, models=models, limits=self._options.limits, report_targets=False
                )
                # Committed as outbox rows; the relay processes deliver them (woken below).
                return service.scan(catalog, store, options, clock=SystemClock(), deliver=False)

            result = on_shared_clock(store, scan_at)
            self._index.update(report.lineage for report in result.models)
            self.scans += 1
            self.batches += sum(1 for r in claimed if r.is_batch)
            changes = result.changes
            self._say(
                f"watch: scanned {len(models)} model(s) ({_reasons(claimed)}): "
                f"{len(changes.opened)} opened, {len(changes.updated)} updated, "
                f"{len(changes.resolved)} resolved"
            )
            for relay in self._relays:
                relay.wake()
        store.complete_rescans(claimed, owner=self.owner, now=_now())

    def _split(
        self, catalog: Catalog, store: StateStore, full: list[RescanRequest], now: datetime
    ) -> None:
        """Split the full rescan into batch requests (or join the one under way); reschedule it."""
        from mlcopilot.scan.shared import rescan_models

        interval = self._options.rescan_interval
        models = list(self._options.models) or rescan_models(catalog)
        split = store.split_rescan(
            models,
            size=self._options.rescan_batch,
            reason=_reasons(full),
            now=_now(),
            stale_after=self._options.lease,
            owner=self.owner,
            held=full,
            again_at=None if interval is None else now + interval,
        )
        if split.batches:
            self._say(
                f"watch: full rescan of {len(models)} listed model(s) ({_reasons(full)}) split "
                f"into {split.batches} batch(es) of up to {self._options.rescan_batch}"
            )
        elif split.held:
            self._say(
                f"watch: a full rescan is already under way ({split.under_way} batch(es) left): "
                "joined it"
            )

    def _failed(self, store: StateStore, claimed: list[RescanRequest], exc: Exception) -> None:
        attempts = max(r.attempts for r in claimed)
        cap = self._options.rescan_interval or timedelta(hours=1)
        wait = min(
            self._options.retry_backoff * (2**attempts), max(cap, self._options.retry_backoff)
        )
        self._warn(
            f"watch: rescan of {len(claimed)} request(s) failed, retrying in "
            f"{int(wait.total_seconds())}s: {exc}"
        )
        try:
            now = _now()
            store.fail_rescans(
                claimed, owner=self.owner, error=str(exc), now=now, retry_at=now + wait
            )
        except Exception as again:  # the lease expires and another claim retries it
            self._warn(f"watch: cannot record the failed rescan: {again}")


def _reasons(claimed: Sequence[RescanRequest]) -> str:
    reasons = sorted({r.reason for r in claimed})
    return "; ".join(reasons[:3]) + ("; ..." if len(reasons) > 3 else "")


def _now() -> datetime:
    return datetime.now(UTC)
