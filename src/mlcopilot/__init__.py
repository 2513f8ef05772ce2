"""ML Incident Copilot: watches what feeds your ML models in DataHub.

The stable library API; the ``mlcopilot`` command is a thin client of it.
"""

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
