"""A metadata file sent to a GMS (the stand-in) through DataHub's own ingestion pipeline.

What a user's ``datahub ingest`` of a file source into ``datahub-rest`` does, without the one
thing a test must not: ``Pipeline.run`` first asks PyPI and GitHub for the latest versions
(``upgrade.retrieve_version_stats``, no setting turns it off). Offline, that failed after the
timeout and left its other requests' coroutines to be collected in whichever test ran next.
"""

from __future__ import annotations

from pathlib import Path

from datahub.ingestion.run.pipeline import Pipeline


class _OfflinePipeline(Pipeline):
    def _warn_old_cli_version(self) -> None:
        """Asks the internet for versions: not in a test."""


def ingest(path: Path, server_url: str) -> Pipeline:
    """Run the pipeline ``file`` → ``datahub-rest`` for ``path`` into ``server_url``."""
    pipeline = _OfflinePipeline.create(
        {
            "source": {"type": "file", "config": {"path": str(path)}},
            "sink": {"type": "datahub-rest", "config": {"server": server_url}},
            "reporting": [],
        }
    )
    pipeline.run()
    return pipeline
