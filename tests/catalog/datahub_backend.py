"""A DataHub catalog talking to the stand-in GMS: for the contract suite and the DataHub tests.

The stand-in (``standin/``) serves DataHub's real GraphQL SDL over a DataHub Lite file and
computes lineage the way GMS's graph index does, so training-data and feature-table hops are
missing from its lineage exactly as they are from a real DataHub's.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from datahub.emitter.mcp import MetadataChangeProposalWrapper

from mlcopilot.catalog.datahub.catalog import DataHubCatalog


def _why_unavailable() -> str | None:
    if importlib.util.find_spec("graphql") is None:
        return "graphql-core is not installed (pip install -e '.[dev]')"
    try:
        from standin import sdl_path
        from standin.sdl import expected_sdl_location
    except ImportError as exc:  # the stand-in package itself is missing or broken
        return f"the DataHub stand-in cannot be imported: {exc}"
    if sdl_path() is None:
        return f"DataHub GraphQL SDL not found at {expected_sdl_location()}"
    return None


UNAVAILABLE = _why_unavailable()
needs_standin = pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")

TEST_OPTIONS: dict[str, Any] = {"timeout": 5.0, "retries": 1, "max_workers": 4}
"""Catalog options for tests: quick to fail, one retry (the SDK's first retry has no backoff)."""


class StandInCatalog(DataHubCatalog):
    """A :class:`DataHubCatalog` that owns the stand-in it talks to and stops it on close."""

    def __init__(self, server: Any, *, token: str | None = None, **options: Any) -> None:
        super().__init__(server.url, token=token, **{**TEST_OPTIONS, **options})
        self.server = server

    def close(self) -> None:
        super().close()
        self.server.__exit__(None, None, None)


def start_standin(
    mcps: Sequence[MetadataChangeProposalWrapper],
    workdir: Path,
    *,
    version: str = "v1.5.0",
    token: str | None = None,
) -> Any:
    """A started stand-in holding ``mcps`` (stop it with ``__exit__`` or ``with``)."""
    from standin import StandIn

    workdir.mkdir(parents=True, exist_ok=True)
    server = StandIn.from_mcps(list(mcps), workdir, version=version, token=token)
    server.__enter__()
    return server


def standin_catalog(
    workdir: Path, mcps: Sequence[MetadataChangeProposalWrapper], **options: Any
) -> StandInCatalog:
    """A catalog over a fresh stand-in holding ``mcps`` (the contract suite's factory)."""
    return StandInCatalog(start_standin(mcps, workdir), **options)
