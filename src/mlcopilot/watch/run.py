"""Run the watcher's pipeline in this process (``mlcopilot watch``), stopped by a signal."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import FrameType
from typing import Any

from datahub_actions.pipeline.pipeline import Pipeline

from mlcopilot.errors import CatalogUnavailable, MlCopilotError
from mlcopilot.settings import Settings
from mlcopilot.watch.connect import CONNECT_WAIT_S, check_kafka, check_registry
from mlcopilot.watch.events import CHANGE_LOG_ASPECTS
from mlcopilot.watch.pipeline import check_cloud_settings, pipeline_config
from mlcopilot.watch.relays import LOG_FORMAT


def config_for(
    settings: Settings,
    *,
    models: Sequence[str] = (),
    rescan_interval: timedelta | None = None,
    rescan_given: bool = False,
    for_display: bool = False,
    lease: timedelta | None = None,
) -> dict[str, Any]:
    """The pipeline config for ``settings`` (``rescan_given``: the flag set the interval)."""
    config = pipeline_config(
        settings,
        models=models,
        rescan_interval=rescan_interval,
        for_display=for_display,
        change_log_aspects=sorted(CHANGE_LOG_ASPECTS),
        lease=lease,
    )
    if rescan_given and rescan_interval is None:
        config["action"]["config"]["rescan_interval"] = "off"
    return config


def watch(
    config: dict[str, Any],
    settings: Settings,
    *,
    say: Callable[[str], None],
    connect_wait: float = CONNECT_WAIT_S,
) -> None:
    """Check the broker and registry, create the pipeline, run it until SIGTERM or SIGINT.

    Creating the pipeline walks every watched model and starts the worker.

    Raises:
        ConfigError: ``watch.source = datahub-cloud`` with no GMS URL or token configured.
        CatalogUnavailable: Kafka or the schema registry did not answer within
            ``connect_wait`` seconds, the catalog cannot be reached, or the event source
            failed for good.
        MlCopilotError: what the action raised while starting (the state database cannot be
            opened, the catalog cannot be read...), as itself rather than the framework's
            wrapping.
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    logging.getLogger("mlcopilot.watch").setLevel(logging.INFO)
    if config["source"]["type"] == "kafka":
        # Before the action walks the catalog and starts scanning: a watcher that cannot
        # hear events must say so and stop, not scan once and then fail a minute later.
        watch_settings = settings.watch
        topics = list(config["source"]["config"]["topic_routes"].values())
        check_kafka(watch_settings.bootstrap, topics, group=config["name"], wait=connect_wait)
        check_registry(watch_settings.schema_registry_url, wait=connect_wait)
    else:
        check_cloud_settings(settings)
    try:
        pipeline = Pipeline.create(config)
    except Exception as exc:
        ours = _our_error(exc)
        if ours is None:
            raise
        raise ours from exc

    def stop(signum: int, _frame: FrameType | None) -> None:
        say(f"watch: {signal.Signals(signum).name}: stopping after the scan in progress")
        pipeline.stop()

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    source = config["source"]["type"]
    say(f"watch: following {source} events as consumer group {config['name']!r}")
    try:
        pipeline.run()
    except Exception as exc:
        raise CatalogUnavailable(f"the {source} event source failed: {exc}") from exc
    finally:
        try:
            pipeline.close()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    stats = pipeline.stats()
    say(f"watch: stopped; {stats.get_failed_event_count()} event(s) skipped as unreadable")


def _our_error(exc: BaseException) -> MlCopilotError | None:
    """The mlcopilot error the framework wrapped (``create_action`` re-raises a bare Exception)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, MlCopilotError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
