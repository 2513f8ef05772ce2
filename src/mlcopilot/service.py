"""The use cases every front-end calls: the command line, the MCP server and the watcher.

One :class:`Service` per invocation, built from the settings: it configures the checks and the
notification settings once, opens the catalog and the state store the settings name (closed
on the way out), and runs a scan, a change preview or a report page the same way whichever
front-end asks. What stays in a front-end is its own: flags and printing (``cli/``), tool
arguments and structured answers (``agent/``), events, claims and leases (``watch/``).

Imports are deferred to the call that needs them, so a front-end that builds a service and
then fails on a flag has loaded no backend, store or sink.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from mlcopilot.scan import Delivery, ScanOptions, ScanResult, scan
from mlcopilot.scan.checking import Progress

if TYPE_CHECKING:
    from mlcopilot.clock import Clock
    from mlcopilot.notify.sinks.config import NotifySettings
    from mlcopilot.protocols import Catalog, Check, StateStore, WalkLimits
    from mlcopilot.scan.whatif.changes import ChangeSet
    from mlcopilot.scan.whatif.preview import ImpactReport
    from mlcopilot.settings import Settings


@dataclass(frozen=True, slots=True)
class Service:
    """What one invocation works with: its settings, checks and notification settings."""

    settings: Settings
    checks: Sequence[Check]
    notify: NotifySettings

    @classmethod
    def from_settings(cls, settings: Settings, *, write_back: bool | None = None) -> Service:
        """Configure the checks and the notification settings ``settings`` hold.

        Raises:
            ConfigError: A check's section or a sink's setting cannot be used.
        """
        from mlcopilot.notify.sinks.config import NotifySettings
        from mlcopilot.scan.wiring import configured_checks

        notify = NotifySettings.from_settings(settings)
        if write_back is not None:
            notify = replace(notify, write_back=write_back)
        return cls(settings, configured_checks(settings), notify)

    @contextmanager
    def opened(
        self, *, create: bool = False, dry_run: bool = False
    ) -> Iterator[tuple[Catalog, StateStore]]:
        """The catalog and the state store the settings name, both closed on the way out.

        ``create``: the caller records, so a missing state database is created. ``dry_run``:
        the store is opened read-only (an empty one in memory when there is none yet).
        """
        from mlcopilot.scan.wiring import open_catalog, open_state

        with ExitStack() as stack:
            catalog = open_catalog(self.settings.catalog_spec, self.settings)
            stack.callback(catalog.close)
            store = open_state(self.settings, create=create, dry_run=dry_run)
            stack.callback(store.close)
            yield catalog, store

    def delivery(self, catalog: Catalog, clock: Clock, *, deliver: bool = True) -> Delivery:
        """How a scan on ``catalog`` notifies: the configured sinks, policy and ack sources."""
        from mlcopilot.scan.delivery import scan_delivery

        return scan_delivery(self.notify, catalog, clock, deliver=deliver)

    def scan(
        self,
        catalog: Catalog,
        store: StateStore,
        options: ScanOptions,
        *,
        clock: Clock | None = None,
        deliver: bool = True,
        progress: Progress | None = None,
        steps: Callable[[str], None] | None = None,
    ) -> ScanResult:
        """Scan with the configured checks and sinks; the relay's clock starts at ``options.now``.

        ``deliver=False`` commits the write-back and notifications as outbox rows and returns
        (a relay delivers them): what a tool call or an event handler that must not block does.
        The walk is bounded by ``[datahub] walk_timeout``. ``steps`` is told each step the
        scan and its relay take, by name (``before_commit``, ``after_commit``,
        ``before_send:github``...: the failpoints), before the configured failpoint is.
        """
        from mlcopilot.clock import OffsetClock

        delivery = self.delivery(catalog, clock or OffsetClock(options.now), deliver=deliver)
        if steps is not None:
            configured = delivery.failpoint

            def step(name: str) -> None:
                steps(name)
                configured(name)

            delivery = replace(delivery, failpoint=step)
        options = replace(options, walk_timeout=self.settings.datahub.walk_timeout)
        return scan(catalog, store, self.checks, options, progress=progress, delivery=delivery)

    def preview_change(
        self,
        catalog: Catalog,
        store: StateStore,
        dataset: str,
        changes: ChangeSet,
        now: datetime,
        limits: WalkLimits | None = None,
    ) -> ImpactReport:
        """What a scan after ``changes`` to ``dataset`` (its urn or name) would open."""
        from mlcopilot.protocols import WalkLimits
        from mlcopilot.scan.whatif.preview import preview_change, resolve_dataset

        limits = limits or WalkLimits()
        urn = resolve_dataset(catalog, dataset, limits)
        return preview_change(catalog, store, self.checks, urn, changes, now, limits)

    def report_page(
        self, catalog: Catalog, store: StateStore, options: ScanOptions
    ) -> tuple[ScanResult, str]:
        """A dry-run scan of ``options.models`` and the HTML page `mlcopilot report` writes."""
        from mlcopilot.report.html import report_page

        options = replace(options, walk_timeout=self.settings.datahub.walk_timeout)
        return report_page(
            catalog, store, self.checks, options, datahub_url=self.notify.datahub_url
        )
