"""The ``mlcopilot`` DataHub Action: each change event becomes rescan requests, then an ack.

``act()`` never scans. It decides which watched models the event affects
(:mod:`mlcopilot.watch.events`, :mod:`mlcopilot.watch.affected`), records one coalesced rescan
request per model in the state database and returns, so the pipeline commits the event's
offset only once its requests are stored. The worker (:mod:`mlcopilot.watch.worker`), started
by :meth:`MlcopilotAction.create`, scans them. Registered in the entry point group
``datahub_actions.action.plugins`` as ``mlcopilot``, so ``datahub actions -c FILE`` runs it
too (``mlcopilot watch --print-config`` writes that file).

Failure modes: an event that cannot be read raises :class:`~mlcopilot.watch.events.PoisonEvent`
after one clear log line; the pipeline (``failure_mode: CONTINUE``) writes it to its
failed-events file and moves on. A state database that cannot be written is retried here,
with backoff, until it can (the event is not acked meanwhile); when the watcher is stopped
first, the event is left unacked and is delivered again to the next watcher.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from datahub_actions.action.action import Action
from datahub_actions.event.event_envelope import EventEnvelope
from datahub_actions.pipeline.pipeline_context import PipelineContext
from pydantic import BaseModel, ConfigDict, Field

from mlcopilot.errors import ConfigError, StoreError
from mlcopilot.lineage.downstream import DownstreamIndex, build_index
from mlcopilot.protocols import StateStore, WalkLimits
from mlcopilot.settings import Settings, load_settings, parse_duration
from mlcopilot.watch.affected import affected_models
from mlcopilot.watch.events import PoisonEvent, changed_entities
from mlcopilot.watch.worker import LEASE, Worker, WorkerOptions

log = logging.getLogger("mlcopilot.watch")

STORE_RETRY_CAP = 30.0
"""Longest wait, in seconds, between two attempts to record requests in the state database."""


class ActionConfig(BaseModel):
    """The action's ``config`` in the pipeline YAML (what ``--print-config`` writes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: str | None = Field(None, description="mlcopilot's configuration file")
    catalog: str | None = None
    state_url: str | None = None
    models: list[str] = Field(default_factory=list, description="watch only these models")
    rescan_interval: str | None = Field(None, description='full rescan period, or "off"')
    worker: bool = Field(True, description="run the worker (scans) in this process")
    lease: str | None = Field(
        None, description="how long a claimed rescan outlives its watcher (default 15m)"
    )


class MlcopilotAction(Action):
    """Records a rescan request for every watched model a change event affects."""

    def __init__(
        self,
        settings: Settings,
        store: StateStore,
        index: DownstreamIndex,
        worker: Worker | None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._index = index
        self._worker = worker
        self._stopping = threading.Event()
        self.recorded = 0
        """Rescan requests recorded (for tests and the closing line)."""

    @classmethod
    def create(cls, config_dict: dict[str, Any], ctx: PipelineContext) -> MlcopilotAction:
        """Read the settings, walk every watched model once, start the worker.

        If it cannot start, it closes the event source the pipeline opened before it:
        datahub-actions' ``Pipeline.create`` leaves it open, and its Kafka consumer would go
        on polling the broker for as long as the process lives.
        """
        try:
            return cls._start(config_dict, ctx)
        except BaseException:
            if ctx.event_source is not None:
                ctx.event_source.close()
            raise

    @classmethod
    def _start(cls, config_dict: dict[str, Any], ctx: PipelineContext) -> MlcopilotAction:
        from mlcopilot.scan.wiring import open_catalog, open_state

        config = ActionConfig.model_validate(config_dict or {})
        settings = load_settings(
            Path(config.config) if config.config else None,
            catalog=config.catalog,
            state_url=config.state_url,
        )
        interval = settings.watch.rescan_interval
        if config.rescan_interval is not None:
            off = config.rescan_interval.strip().lower() in ("off", "never", "none")
            interval = None if off else parse_duration(config.rescan_interval, "rescan_interval")
        lease = LEASE if config.lease is None else parse_duration(config.lease, "lease")
        if lease.total_seconds() <= 0:
            raise ConfigError(f"lease {config.lease}: must be more than 0")
        limits = WalkLimits()
        catalog = open_catalog(settings.catalog_spec, settings)
        try:
            # Before the first event is consumed: an event can only be placed once every
            # watched model's lineage is known.
            index = build_index(catalog, config.models, limits)
        finally:
            catalog.close()
        store = open_state(settings, create=True)
        worker = None
        if config.worker:
            options = WorkerOptions(
                models=tuple(config.models),
                rescan_interval=interval,
                retry_backoff=settings.watch.retry_backoff,
                limits=limits,
                lease=lease,
                rescan_batch=settings.watch.rescan_batch,
            )
            worker = Worker(settings, index, options)
            worker.start()
        log.info("watch: pipeline %s watching %d model(s)", ctx.pipeline_name, len(index.models))
        return cls(settings, store, index, worker)

    def act(self, event: EventEnvelope) -> bool | None:
        """Record rescan requests for the models ``event`` affects; True once stored."""
        if self._stopping.is_set():
            return False
        try:
            change = changed_entities(event, ignore_actors=self._settings.watch.ignore_actors)
        except PoisonEvent as exc:
            log.error(
                "watch: skipping an unreadable %s event (%s); it is kept in the failed-events file",
                event.event_type,
                exc,
            )
            raise
        if not change.entities:
            return True
        models = affected_models(change.entities, self._index)
        if not models:
            return True
        reason = f"{change.reason} on {change.entities[0]}"
        if not self._record(models, reason):
            return False
        if self._worker is not None:
            self._worker.wake()
        return True

    def _record(self, models: list[str], reason: str) -> bool:
        from datetime import UTC, datetime

        wait = 0.5
        while not self._stopping.is_set():
            try:
                self._store.request_rescans(models, reason=reason, now=datetime.now(UTC))
            except StoreError as exc:
                log.error("watch: cannot record rescan requests, retrying in %.0fs: %s", wait, exc)
                self._stopping.wait(wait)
                wait = min(wait * 2, STORE_RETRY_CAP)
            else:
                self.recorded += len(models)
                return True
        return False

    def close(self) -> None:
        """Stop the worker after its scan in progress, then release the database."""
        self._stopping.set()
        try:
            if self._worker is not None:
                self._worker.stop()
        finally:
            self._store.close()
