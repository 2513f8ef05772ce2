"""The product's own small, frozen domain types, by what they describe.

- :mod:`~mlcopilot.model.catalog`: what the catalog says (urns, schemas, lineage, column usage);
- :mod:`~mlcopilot.model.findings`: what the checks find and what becomes of it (check infos,
  findings, incidents, baselines, reports);
- :mod:`~mlcopilot.model.writes`: the write-back intents;
- :mod:`~mlcopilot.model.notify`: notification groups, notifications and outbox rows.

Every name is re-exported here, so ``from mlcopilot.model import Node`` works whichever module
defines it. This package is the bottom layer: it imports nothing of mlcopilot's but ``names``.
"""

from __future__ import annotations

from mlcopilot.model.catalog import (
    TAG_PREFIX,
    UNKNOWN_USAGE,
    ColumnEdge,
    ColumnUsage,
    Deprecation,
    Edge,
    EdgeKind,
    EntityType,
    Lineage,
    Node,
    Schema,
    SchemaField,
    Urn,
)
from mlcopilot.model.findings import (
    JSON,
    NOT_IN_CATALOG,
    Baseline,
    ChangeKind,
    CheckInfo,
    CheckOutcome,
    CoverageGap,
    Finding,
    Incident,
    IncidentChanges,
    IncidentState,
    IncidentType,
    ModelReport,
    Severity,
    finding_id,
    plain_json,
)
from mlcopilot.model.notify import (
    NOTIFY_SINKS,
    Action,
    Delivered,
    GroupSnapshot,
    GroupState,
    Member,
    Notification,
    NotifyPolicy,
    NotifyRequest,
    OutboxItem,
    OutboxStatus,
    PlannedRow,
    SinkName,
    SinkRef,
    WatchedGroup,
    dedupe_key,
)
from mlcopilot.model.writes import (
    DocumentWrite,
    IncidentWrite,
    PropertyWrite,
    TagWrite,
    Write,
)

# Re-exported so code that names entities by ``model.short_name`` gets the one readable form.
from mlcopilot.names import short_name as short_name

__all__ = [
    "JSON",
    "NOTIFY_SINKS",
    "NOT_IN_CATALOG",
    "TAG_PREFIX",
    "UNKNOWN_USAGE",
    "Action",
    "Baseline",
    "ChangeKind",
    "CheckInfo",
    "CheckOutcome",
    "ColumnEdge",
    "ColumnUsage",
    "CoverageGap",
    "Delivered",
    "Deprecation",
    "DocumentWrite",
    "Edge",
    "EdgeKind",
    "EntityType",
    "Finding",
    "GroupSnapshot",
    "GroupState",
    "Incident",
    "IncidentChanges",
    "IncidentState",
    "IncidentType",
    "IncidentWrite",
    "Lineage",
    "Member",
    "ModelReport",
    "Node",
    "Notification",
    "NotifyPolicy",
    "NotifyRequest",
    "OutboxItem",
    "OutboxStatus",
    "PlannedRow",
    "PropertyWrite",
    "Schema",
    "SchemaField",
    "Severity",
    "SinkName",
    "SinkRef",
    "TagWrite",
    "Urn",
    "WatchedGroup",
    "Write",
    "dedupe_key",
    "finding_id",
    "plain_json",
    "short_name",
]
