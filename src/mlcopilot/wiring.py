"""Turn settings (flags, environment) into the objects a command works with.

This is the only module that knows the concrete catalog and store classes. Environment
variables are read in one place, :func:`Environment.from_env`, so the rest stays testable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mlcopilot.catalog.connection import settings_from_spec
from mlcopilot.catalog.datahub import DataHubCatalog
from mlcopilot.catalog.lite import LiteCatalog, open_lite_catalog
from mlcopilot.catalog.mcp import McpCatalog
from mlcopilot.errors import UsageError
from mlcopilot.protocols import Catalog, StateStore
from mlcopilot.store import default_state_url, open_store

_NEXT_ISSUE_BACKENDS = {"datahub", "mcp"}


@dataclass(frozen=True, slots=True)
class Environment:
    """Where mlcopilot keeps its files and which catalog and state database it uses."""

    home: Path
    catalog: str | None = None
    state_url: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Environment:
        """Read ``MLCOPILOT_HOME``, ``MLCOPILOT_CATALOG`` and ``MLCOPILOT_STATE_URL``.

        ``MLCOPILOT_HOME`` defaults to ``~/.mlcopilot``.
        """
        env = os.environ if environ is None else environ
        home = Path(env.get("MLCOPILOT_HOME") or Path.home() / ".mlcopilot").expanduser()
        return cls(
            home=home,
            catalog=env.get("MLCOPILOT_CATALOG") or None,
            state_url=env.get("MLCOPILOT_STATE_URL") or None,
        )

    @property
    def default_catalog(self) -> str:
        """The embedded catalog's spec: ``lite:$MLCOPILOT_HOME/catalog.db``."""
        return f"lite:{self.home / 'catalog.db'}"


def parse_catalog_spec(spec: str) -> tuple[str, str]:
    """Split ``kind:location`` (``lite:PATH``, ``datahub:[URL]``, ``mcp:URL``)."""
    kind, sep, location = spec.partition(":")
    # `datahub:` alone means "the server DataHub's own CLI is configured for".
    if (
        not sep
        or (not location and kind != "datahub")
        or kind not in {"lite", *_NEXT_ISSUE_BACKENDS}
    ):
        raise UsageError(
            f"--catalog {spec!r}: expected lite:PATH, datahub:URL or mcp:URL "
            "(e.g. lite:~/.mlcopilot/catalog.db)"
        )
    return kind, location


def open_catalog(spec: str, *, create: bool = False) -> Catalog:
    """Open the catalog named by ``spec``: ``lite:PATH`` or ``datahub:[URL]`` (no I/O for DataHub).

    ``datahub:`` alone reads the server and token as DataHub's CLI does (``DATAHUB_GMS_URL``,
    ``DATAHUB_GMS_TOKEN``, ``~/.datahubenv``); ``datahub:URL`` takes the token from
    ``DATAHUB_GMS_TOKEN``.
    """
    kind, location = parse_catalog_spec(spec)
    if kind == "datahub":
        return DataHubCatalog.from_settings(settings_from_spec(location))
    if kind == "mcp":
        # mcp-server-datahub is spawned on first use, with the token from DATAHUB_GMS_TOKEN.
        return McpCatalog(settings_from_spec(location))
    if kind != "lite":
        raise UsageError(
            f"--catalog {spec!r}: the {kind}: backend is not available in this version yet; "
            "use lite:PATH (load DataHub metadata files with `mlcopilot catalog load`)"
        )
    return open_lite_catalog(Path(location).expanduser(), create=create)


def open_lite(spec: str) -> LiteCatalog:
    """Open (creating if needed) an embedded catalog for loading metadata into."""
    kind, location = parse_catalog_spec(spec)
    if kind != "lite":
        raise UsageError(
            f"--catalog {spec!r}: `catalog load` writes into an embedded catalog; use lite:PATH"
        )
    return open_lite_catalog(Path(location).expanduser(), create=True)


def open_state(env: Environment, url: str | None = None) -> StateStore:
    """Open the state database: ``url``, else ``MLCOPILOT_STATE_URL``, else SQLite in home."""
    return open_store(url or env.state_url or default_state_url(env.home))
