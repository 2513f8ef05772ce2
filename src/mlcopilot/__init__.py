"""ML Incident Copilot: watches what feeds your ML models in DataHub.

The stable library API; the ``mlcopilot`` command is a thin client of it.

The names are imported on first use (PEP 562), not with the package: every ``mlcopilot.*``
import runs this file first, and ``scan`` alone pulls in the store and SQLAlchemy, which
``mlcopilot --help`` and ``mlcopilot checks`` must not pay for.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    __version__: str
    """This distribution's version, from its installed metadata (read on first use)."""

    from mlcopilot.errors import (
        CatalogError,
        CatalogUnavailable,
        ConfigError,
        InputError,
        MlCopilotError,
        NodeNotFound,
        StoreError,
        UsageError,
    )
    from mlcopilot.model import (
        CheckOutcome,
        ColumnUsage,
        Edge,
        EntityType,
        Finding,
        Incident,
        IncidentChanges,
        IncidentState,
        Lineage,
        Node,
        Schema,
        SchemaField,
        Severity,
    )
    from mlcopilot.protocols import Catalog, Check, CheckContext, StateStore, WalkLimits
    from mlcopilot.scan import ScanOptions, ScanResult, scan

__all__ = [
    "Catalog",
    "CatalogError",
    "CatalogUnavailable",
    "Check",
    "CheckContext",
    "CheckOutcome",
    "ColumnUsage",
    "ConfigError",
    "Edge",
    "EntityType",
    "Finding",
    "Incident",
    "IncidentChanges",
    "IncidentState",
    "InputError",
    "Lineage",
    "MlCopilotError",
    "Node",
    "NodeNotFound",
    "ScanOptions",
    "ScanResult",
    "Schema",
    "SchemaField",
    "Severity",
    "StateStore",
    "StoreError",
    "UsageError",
    "WalkLimits",
    "scan",
]

_HOME = {
    **dict.fromkeys(
        (
            "CatalogError",
            "CatalogUnavailable",
            "ConfigError",
            "InputError",
            "MlCopilotError",
            "NodeNotFound",
            "StoreError",
            "UsageError",
        ),
        "mlcopilot.errors",
    ),
    **dict.fromkeys(
        (
            "CheckOutcome",
            "ColumnUsage",
            "Edge",
            "EntityType",
            "Finding",
            "Incident",
            "IncidentChanges",
            "IncidentState",
            "Lineage",
            "Node",
            "Schema",
            "SchemaField",
            "Severity",
        ),
        "mlcopilot.model",
    ),
    **dict.fromkeys(
        ("Catalog", "Check", "CheckContext", "StateStore", "WalkLimits"), "mlcopilot.protocols"
    ),
    **dict.fromkeys(("ScanOptions", "ScanResult"), "mlcopilot.scan"),
}
"""Each public name → the module it is defined in."""


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use, then keep it here."""
    if name == "__version__":
        globals()[name] = _version()
        return globals()[name]
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


DISTRIBUTION = "ml-incident-copilot"
"""The name this package is installed under (``pip install ml-incident-copilot``)."""


def _version() -> str:
    """The installed distribution's version (``mlcopilot --version``), from its metadata."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """This package, whose ``scan`` is the function even after the submodule is imported.

    ``scan`` names both a public function and the submodule that defines it. Importing a
    submodule sets the package attribute of its name, so once anything imported
    ``mlcopilot.scan`` (the CLI, the wiring) a lazy ``scan`` would be the module. A property
    on the module's class outranks that attribute, and its setter ignores it: ``scan`` is
    the function, as it was when this file imported it eagerly.
    """

    @property
    def scan(self) -> Any:
        """:func:`mlcopilot.scan.scan`."""
        return importlib.import_module("mlcopilot.scan").scan

    @scan.setter
    def scan(self, value: object) -> None:
        # Only the import system sets it (to the submodule); the submodule stays in sys.modules.
        pass


sys.modules[__name__].__class__ = _Package
