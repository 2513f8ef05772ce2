"""Run the watcher's pipeline in this process (``mlcopilot watch``), stopped by a signal."""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import FrameType
from typing import Any

from datahub_actions.pipeline.pipeline import Pipeline

from mlcopilot.errors import CatalogUnavailable
from mlcopilot.settings import Settings
from mlcopilot.watch.events import CHANGE_LOG_ASPECTS
from mlcopilot.watch.pipeline import pipeline_config


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


def watch(config: dict[str, Any], settings: Settings, *, say: Callable[[str], None]) -> None:
    """Create the pipeline (walks every watched model), run it until SIGTERM or SIGINT.

    Raises:
        CatalogUnavailable: the event source failed for good (e.g. no broker within a minute).
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("mlcopilot.watch").setLevel(logging.INFO)
    pipeline = Pipeline.create(config)

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
