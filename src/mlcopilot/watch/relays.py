"""The watcher's relay lanes, each in a process of its own.

A *relay lane* per configured sink (``datahub`` for the write-back, ``github``, ``slack``)
delivers that sink's outbox rows as ``mlcopilot outbox deliver`` does, under the outbox's
leases, so several watchers deliver each row once. The lanes run side by side, each in its
own process with its own :class:`~mlcopilot.notify.relay.Relay`, store connection and sink
objects: a write-back row costs several DataHub requests, and Slack's rows must not queue
behind them. A sink's rows stay in its lane, in the order the outbox gives them. A
notification lane builds its sink once and keeps it for its every pass: what a sink learns is
meant to outlive one pass (the Slack channel's id looked up by name, the GitHub bot's login
and the labels it made sure of, each pacer's last write, which Slack's and PagerDuty's rate
limits are counted from). The write-back lane opens a catalog per pass with rows due (a
catalog caches what it read: a kept one would compare with what DataHub held before).

Why a process per lane: every row is several database round trips and an HTTP call, and a
thread waiting on one gives up the interpreter; sharing it with the scanner's CPU-bound work,
or with the write-back's (it serialises every aspect it emits), it waited for that work at each
of them, and at 50 events/s the Slack lane fell ever further behind (``benchmarks/watch.py``).
Each child is spawned (no fork of a threaded process), woken by the scanner after each commit,
stopped with the watcher (SIGTERM: after the pass in progress), and exits at once when its
parent dies without stopping it (SIGKILL, a lost node), as a thread would have died with it:
the rows it held come back to another relay once their lease runs out, checked against their
sink first.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import TYPE_CHECKING

from mlcopilot.clock import SystemClock
from mlcopilot.incidents.payload import SinkName
from mlcopilot.settings import Settings

if TYPE_CHECKING:
    from multiprocessing.process import BaseProcess
    from multiprocessing.synchronize import Event

    from mlcopilot.notify.relay import Relay
    from mlcopilot.notify.sinks.registry import ByDestination
    from mlcopilot.protocols import StateStore

log = logging.getLogger("mlcopilot.watch")

POLL = 1.0
"""Seconds between two looks for rows due without a wake-up (group_wait, retries, a lease
another relay let lapse)."""
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
"""How the watch process and its relay process print what they say."""


class RelayProcess:
    """A relay lane in a child process: started, woken, stopped by the worker."""

    def __init__(self, settings: Settings, lane: SinkName, backoff: timedelta):
        context = multiprocessing.get_context("spawn")
        self.lane = lane
        self._wake = context.Event()
        self._stop = context.Event()
        self._process: BaseProcess = context.Process(
            target=_child,
            args=(settings, lane, backoff, self._wake, self._stop),
            name=f"mlcopilot-watch-relay-{lane}",
            daemon=True,
        )

    @property
    def pid(self) -> int | None:
        """The child's process id, once started."""
        return self._process.pid

    def start(self) -> None:
        """Start the child (it looks for due rows at once)."""
        self._process.start()

    def wake(self) -> None:
        """Rows were committed: look now rather than at the next poll."""
        self._wake.set()

    def stop(self, timeout: float) -> None:
        """Stop after the pass in progress; wait up to ``timeout``, then kill."""
        self._stop.set()
        self._wake.set()
        if self._process.pid is None:
            return
        self._process.join(timeout)
        if self._process.is_alive():
            log.warning(
                "watch: %s did not stop within %gs; killing it", self._process.name, timeout
            )
            self._process.kill()
            self._process.join(5)


def _child(
    settings: Settings, lane: SinkName, backoff: timedelta, wake: Event, stop: Event
) -> None:
    """The relay process: delivers ``lane`` until ``stop`` is set (or the parent dies)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    # Ctrl-C reaches the whole process group: the parent decides when the lane stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        stop.set()
        wake.set()

    signal.signal(signal.SIGTERM, on_term)
    threading.Thread(target=_exit_with_parent, name="mlcopilot-relay-parent", daemon=True).start()
    _relay(settings, lane, backoff, wake, stop)


def _exit_with_parent() -> None:
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    multiprocessing.connection.wait([parent.sentinel])
    os._exit(1)  # the watcher died without stopping its lane: die with it, as a thread would


def _relay(
    settings: Settings, lane: SinkName, backoff: timedelta, wake: Event, stop: Event
) -> None:
    """Deliver ``lane``'s rows whenever some are due, until ``stop``."""
    from mlcopilot.scan.wiring import open_state

    delivering = _Lane(settings, lane)
    while not stop.is_set():
        try:
            store = open_state(settings, create=True)
        except Exception as exc:
            log.warning("watch: the %s relay cannot open the state database: %s", lane, exc)
            stop.wait(backoff.total_seconds())
            continue
        try:
            while not stop.is_set():
                # Cleared before the look, not after it: a wake-up during a pass (rows
                # committed meanwhile) makes the wait below return at once.
                wake.clear()
                # Rows come due after a scan (now) or later (group_wait, retries, a lease
                # another relay let lapse): next_due is never later than the first of them.
                due = store.next_due(sinks=[lane])
                if due is not None and due <= _now() and not delivering.deliver(store):
                    log.warning("watch: some %s deliveries failed; they stay in the outbox", lane)
                wake.wait(POLL)
        except Exception as exc:
            log.warning("watch: delivering the %s outbox failed: %s", lane, exc)
            stop.wait(POLL)
        finally:
            store.close()


class _Lane:
    """One relay lane's passes, and what it keeps from one pass to the next.

    A notification lane keeps its sink, built at its first pass rather than at the lane's
    start: a sink that cannot be built (a plugin's error) fails that pass, which is
    logged and tried again, as any pass's failure is. The write-back lane keeps nothing: it
    opens the catalog for each pass, so that it compares with what DataHub holds now, not with
    what an earlier pass cached.
    """

    def __init__(self, settings: Settings, name: SinkName) -> None:
        from mlcopilot.notify.relay import env_failpoint
        from mlcopilot.notify.sinks.config import NotifySettings

        self._settings = settings
        self._name = name
        self._notify = NotifySettings.from_settings(settings)
        self._clock = SystemClock()
        self._failpoint = env_failpoint(self._notify.failpoint)
        self._sinks: list[ByDestination] | None = None

    def deliver(self, store: StateStore) -> bool:
        """One relay run over the lane's due rows; whether it delivered all of them once."""
        if self._name == "datahub":
            return self._write_back(store)
        return self._notifying(store).run().ok

    def _notifying(self, store: StateStore) -> Relay:
        from mlcopilot.notify.relay import Relay
        from mlcopilot.scan.delivery import notification_sinks

        if self._sinks is None:
            built = notification_sinks(self._notify, self._clock)
            self._sinks = [s for s in built if s.name == self._name]
        return Relay(store, self._sinks, clock=self._clock, failpoint=self._failpoint)

    def _write_back(self, store: StateStore) -> bool:
        from mlcopilot.scan.delivery import relay
        from mlcopilot.scan.wiring import open_catalog

        catalog = open_catalog(self._settings.catalog_spec, self._settings)
        try:
            # The write-back alone: GitHub and Slack have lanes of their own.
            relaying, _ = relay(self._notify.writeback_only(), catalog, store, self._clock)
            return relaying.run().ok
        finally:
            catalog.close()


def _now() -> datetime:
    return datetime.now(UTC)
