"""Catalogs: where a scan reads lineage, schemas and tags, and writes its incidents back.

Three backends implement :class:`~mlcopilot.protocols.Catalog`, one per ``--catalog`` kind:

* ``lite:PATH``: an embedded DataHub Lite (SQLite) file, offline (:mod:`.lite`; filled by
  ``mlcopilot catalog load`` through :mod:`.loader`);
* ``datahub:[URL]``: DataHub's GMS through the acryl-datahub SDK (:mod:`.datahub`);
* ``mcp:URL``: the same server through a spawned ``mcp-server-datahub`` (:mod:`.mcp`).

The other modules here are what the backends share (aspect JSON translated and validated:
:mod:`.aspects`, :mod:`.aspect_json`; the write-back loop and the proposals it sends:
:mod:`.aspect_writes`, :mod:`.proposals`; urn facts and GMS answers: :mod:`.urns`,
:mod:`.payloads`), and what fills and writes a Lite file (:mod:`.loader`, :mod:`.load_stream`,
:mod:`.patch`, :mod:`.lite_writer`).

This module imports none of them. :data:`BACKENDS` names each backend's entry point as a
string, and :func:`load_backend` imports only the one a command opens: a ``lite:`` scan never
pays for the ``datahub:`` backend or the MCP SDK, nor a command that stops at a bad flag for
any of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from mlcopilot.errors import PluginUnavailable

if TYPE_CHECKING:
    from pathlib import Path

    from mlcopilot.catalog.datahub.connection import DataHubSettings
    from mlcopilot.catalog.lite import LiteCatalog
    from mlcopilot.protocols import Catalog

__all__ = ["BACKENDS", "Backend", "LiteOpener", "ServerCatalog", "load_backend"]


@dataclass(frozen=True)
class Backend:
    """One catalog backend: where its entry point is, and what it needs installed."""

    entry_point: str
    """``module:attribute``, imported only when the backend is opened."""
    requires: Mapping[str, str]
    """The third-party modules its code imports, each with the package that provides it: a
    missing one is named with its package; any other import failure is left as it is."""


_DATAHUB: Final = {"datahub": "acryl-datahub"}

BACKENDS: Final[Mapping[str, Backend]] = {
    # A LiteOpener: open_lite_catalog(path, create=...).
    "lite": Backend("mlcopilot.catalog.lite:open_lite_catalog", _DATAHUB),
    # ServerCatalogs: the class, called with the server's resolved settings.
    "datahub": Backend(
        "mlcopilot.catalog.datahub.catalog:DataHubCatalog",
        {**_DATAHUB, "requests": "requests", "urllib3": "urllib3"},
    ),
    "mcp": Backend(
        "mlcopilot.catalog.mcp.catalog:McpCatalog",
        {**_DATAHUB, "mcp": "mcp", "anyio": "anyio", "requests": "requests", "urllib3": "urllib3"},
    ),
}
"""Each ``--catalog`` kind and its backend. The entry point of ``lite`` is a
:class:`LiteOpener`; those of ``datahub`` and ``mcp`` are :class:`ServerCatalog` classes."""


class LiteOpener(Protocol):
    """The ``lite`` entry point: the Lite file at a path, created when missing if asked."""

    def __call__(self, path: Path, /, *, create: bool) -> LiteCatalog:
        """Open the file at ``path`` (``create``: make it when it is missing)."""
        ...


class ServerCatalog(Protocol):
    """The ``datahub`` and ``mcp`` entry points: a catalog over a DataHub server's settings."""

    def __call__(self, settings: DataHubSettings, /) -> Catalog:
        """A catalog for the server ``settings`` resolve (no I/O until it is used)."""
        ...


def load_backend(kind: str) -> object:
    """Import the entry point of the ``kind`` backend (a key of :data:`BACKENDS`).

    Raises:
        KeyError: no backend is called ``kind`` (``--catalog`` is checked before this).
        PluginUnavailable: a package the backend itself imports is not installed; the
            message names it.
        ImportError: anything else failed while importing (a broken package underneath,
            a missing module of mlcopilot's own): raised as it is, with its traceback.
    """
    backend = BACKENDS[kind]
    module_name, _, attribute = backend.entry_point.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only the top-level package itself missing is "not installed"; a module missing
        # inside an installed package (exc.name "mcp.client.stdio", or one of its own
        # dependencies) is a failure underneath, for its traceback to tell.
        package = backend.requires.get(exc.name or "")
        if package is None:
            raise
        raise PluginUnavailable(
            f"the {kind}: catalog needs the Python package {package}, which is not installed "
            f"(no module named {exc.name!r}); install it (pip install {package}) or "
            "reinstall ml-incident-copilot"
        ) from exc
    entry: object = getattr(module, attribute)
    return entry
