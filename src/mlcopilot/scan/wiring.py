"""Turn :class:`~mlcopilot.settings.Settings` into the objects a command works with.

This is the only module that knows the concrete catalog and store classes. It reads nothing
itself: the settings object is the one reader of the environment and the configuration file.

It imports them only when one is opened: a catalog backend through
:data:`~mlcopilot.catalog.BACKENDS` (a ``lite:`` scan never loads the ``datahub:`` backend or
the MCP SDK), the state store (SQLAlchemy, Alembic) in :func:`open_state`. So importing this
module costs little, and a command that stops at a bad flag never pays for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from pydantic import ValidationError

from mlcopilot.catalog import BACKENDS, LiteOpener, ServerCatalog, load_backend
from mlcopilot.checks import load_checks
from mlcopilot.errors import ConfigError, StoreError, UsageError

if TYPE_CHECKING:
    from mlcopilot.catalog.lite import LiteCatalog
    from mlcopilot.protocols import Catalog, Check, StateStore
    from mlcopilot.settings import Settings


def parse_catalog_spec(spec: str) -> tuple[str, str]:
    """Split ``kind:location`` (``lite:PATH``, ``datahub:[URL]``, ``mcp:URL``)."""
    kind, sep, location = spec.partition(":")
    # `datahub:` alone means "the server DataHub's own CLI is configured for".
    if not sep or (not location and kind != "datahub") or kind not in BACKENDS:
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
    reads them now. Only the backend named is imported.

    Raises:
        UsageError: ``spec`` names no backend.
        PluginUnavailable: a package the backend needs is not installed.
    """
    kind, location = parse_catalog_spec(spec)
    if kind == "lite":
        return _open_lite(location, create=create)
    # datahub: and mcp: (mcp-server-datahub is spawned on first use, with the settings' token).
    server_catalog = cast("ServerCatalog", load_backend(kind))
    from mlcopilot.catalog.datahub.connection import settings_from_spec  # imported by now

    return server_catalog(settings_from_spec(location, settings))


def open_lite(spec: str) -> LiteCatalog:
    """Open (creating if needed) an embedded catalog for loading metadata into."""
    kind, location = parse_catalog_spec(spec)
    if kind != "lite":
        raise UsageError(
            f"--catalog {spec!r}: `catalog load` writes into an embedded catalog; use lite:PATH"
        )
    return _open_lite(location, create=True)


def _open_lite(location: str, *, create: bool) -> LiteCatalog:
    open_lite_catalog = cast("LiteOpener", load_backend("lite"))
    return open_lite_catalog(Path(location).expanduser(), create=create)


def open_state(settings: Settings, *, create: bool = False, dry_run: bool = False) -> StateStore:
    """Open the state database: ``state_url`` (flag, variable or file), else SQLite in home.

    Args:
        settings: Where it is.
        create: The command records (``scan``, ``baseline accept``): a missing database, and
            the home folder it defaults into, may be created. Commands that only read or
            change what is recorded pass False, so a mistyped location is an error, not an
            empty estate.
        dry_run: Open it read-only, or, when there is none yet, an empty
            in-memory store, so that nothing at all is written.

    Raises:
        MissingStore: There is none there (and neither ``create`` nor ``dry_run``).
        StoreError: It cannot be used.
    """
    from mlcopilot.store import MissingStore, default_state_url, open_store  # SQLAlchemy

    url = settings.state_url
    if url is None:
        if create and not dry_run:
            try:
                settings.home_path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the home folder {settings.home_path} for the state "
                    f"database: {exc.strerror}; set MLCOPILOT_HOME or --state-url elsewhere"
                ) from exc
        url = default_state_url(settings.home_path)
    if not dry_run:
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
        raise ConfigError(_where_in_file(settings, exc)) from exc


def _where_in_file(settings: Settings, exc: ConfigError) -> str:
    """``exc`` (a check section refused) said as ``PATH:LINE: checks.NAME.KEY: problem``.

    As every other key of the file is named (``config show`` too); the file alone when the
    key cannot be placed.
    """
    message = str(exc)
    name = next((n for n in settings.checks if f"check {n!r}" in message), None)
    cause = exc.__cause__
    if name is None:
        return f"{settings.file}: {message}"
    if not isinstance(cause, ValidationError):  # an unknown check, a section not a table
        return f"{settings.where_is(f'checks.{name}')}: {message}"
    problems = []
    for error in cause.errors():
        key = ".".join(str(part) for part in error["loc"])
        dotted = f"checks.{name}.{key}" if key else f"checks.{name}"
        what = (
            "unknown key"
            if error["type"] == "extra_forbidden"
            else f"{error['msg'].removeprefix('Value error, ')} (got {error.get('input')!r})"
        )
        problems.append(f"{settings.where_is(dotted)}: {dotted}: {what}")
    return "; ".join(problems)
