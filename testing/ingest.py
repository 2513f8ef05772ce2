"""A metadata file sent to a GMS (the stand-in) through DataHub's own ingestion pipeline.

What a user's ``datahub ingest`` of a file source into ``datahub-rest`` does, without the one
thing a test must not: ``Pipeline.run`` first asks PyPI and GitHub for the latest versions
(``upgrade.retrieve_version_stats``, no setting turns it off). Offline, that failed after the
timeout and left its other requests' coroutines to be collected in whichever test ran next.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from datahub.ingestion.run.pipeline import Pipeline


class _OfflinePipeline(Pipeline):
    def _warn_old_cli_version(self) -> None:
        """Asks the internet for versions: not in a test."""


def ingest(path: Path, server_url: str) -> Pipeline:
    """Run the pipeline ``file`` → ``datahub-rest`` for ``path`` into ``server_url``."""
    with _loggers_as_before():
        pipeline = _OfflinePipeline.create(
            {
                "source": {"type": "file", "config": {"path": str(path)}},
                "sink": {"type": "datahub-rest", "config": {"server": server_url}},
                "reporting": [],
            }
        )
        pipeline.run()
    return pipeline


@contextmanager
def _loggers_as_before() -> Iterator[None]:
    """Every logger's level, propagation and state as before, whatever the pipeline set.

    The pipeline imports ``datahub.utilities.logging_manager``, which sets ``urllib3`` to ERROR
    for the whole process when imported: every later test in the worker would lose the HTTP
    libraries' warnings the command shows with ``--verbose`` (mlcopilot never imports it).
    """
    manager = logging.Logger.manager
    before = {
        name: (logger.level, logger.propagate, logger.disabled)
        for name, logger in manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    try:
        yield
    finally:
        for name, logger in list(manager.loggerDict.items()):
            if isinstance(logger, logging.Logger):
                level, propagate, disabled = before.get(name, (logging.NOTSET, True, False))
                logger.setLevel(level)
                logger.propagate = propagate
                logger.disabled = disabled
