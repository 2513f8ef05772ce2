"""Turn :class:`~mlcopilot.settings.Settings` into the objects a command works with.

This is the only module that knows the concrete catalog and store classes. It reads nothing
itself: the settings object is the one reader of the environment and the configuration file.
"""

from __future__ import annotations

from pathlib import Path

from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.catalog.datahub.connection import settings_from_spec
from mlcopilot.catalog.lite import LiteCatalog, open_lite_catalog
from mlcopilot.catalog.mcp.catalog import McpCatalog
from mlcopilot.checks import load_checks
from mlcopilot.errors import ConfigError, StoreError, UsageError
from mlcopilot.protocols import Catalog, Check, StateStore
from mlcopilot.settings import Settings
from mlcopilot.store import MissingStore, default_state_url, open_store

_NEXT_ISSUE_BACKENDS = {"datahub", "mcp"}


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


def open_catalog(spec: str, settings: Settings | None = None, *, create: bool = False) -> Catalog:
    """Open the catalog named by ``spec``: ``lite:PATH`` or ``datahub:[URL]`` (no I/O for DataHub).

    ``datahub:`` alone takes the server and token from ``settings.datahub`` (``DATAHUB_GMS_URL``,
    ``DATAHUB_GMS_TOKEN``, ``[datahub]`` in the file), else as DataHub's CLI does
    (``~/.datahubenv``); ``datahub:URL`` takes the token from the settings. ``settings`` None
    reads them now.
    """
    kind, location = parse_catalog_spec(spec)
    if kind == "datahub":
        return DataHubCatalog.from_settings(settings_from_spec(location, settings))
    if kind == "mcp":
        # mcp-server-datahub is spawned on first use, with the token from the settings.
        return McpCatalog(settings_from_spec(location, settings))
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


def open_state(settings: Settings, *, create: bool = False, preview: bool = False) -> StateStore:
    """Open the state database: ``state_url`` (flag, variable or file), else SQLite in home.

    Args:
        settings: Where it is.
        create: The command records (``scan``, ``baseline accept``): a missing database, and
            the home folder it defaults into, may be created. Commands that only read or
            change what is recorded pass False, so a mistyped location is an error, not an
            empty estate.
        preview: A dry run: open it read-only, or, when there is none yet, an empty
            in-memory store, so that nothing at all is written.

    Raises:
        MissingStore: There is none there (and neither ``create`` nor ``preview``).
        StoreError: It cannot be used.
    """
    url = settings.state_url
    if url is None:
        if create and not preview:
            try:
                settings.home_path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the home folder {settings.home_path} for the state "
                    f"database: {exc.strerror}; set MLCOPILOT_HOME or --state-url elsewhere"
                ) from exc
        url = default_state_url(settings.home_path)
    if not preview:
        return open_store(url, create=create)
    try:
        return open_store(url, read_only=True)
    except MissingStore:
        return open_store("sqlite://")  # a first scan's preview: nothing recorded yet


def configured_checks(settings: Settings) -> list[Check]:
    """The checks to run, each built from its own ``[checks.NAME]`` section.

    Raises:
        ConfigError: a section its check refuses (the message names the check and the key),
            prefixed with the configuration file the sections come from.
    """
    try:
        return load_checks(settings.checks)
    except ConfigError as exc:
        if settings.file is None or not settings.checks:
            raise
        raise ConfigError(f"{settings.file}: {exc}") from exc
