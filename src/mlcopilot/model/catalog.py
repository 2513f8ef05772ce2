"""What the catalog says about entities: urns, schemas, lineage and column usage.

Catalog adapters translate DataHub aspects (SDK classes, GraphQL or MCP payloads) into these
types at the boundary; the checks, the walker and the store only ever see these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from datetime import datetime
from enum import StrEnum
from typing import Literal

Urn = str
"""A DataHub URN, e.g. ``urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)``."""


class EntityType(StrEnum):
    """The DataHub entity types the walk understands (the URN's entity-type segment)."""

    ML_MODEL = "mlModel"
    ML_MODEL_GROUP = "mlModelGroup"
    ML_FEATURE = "mlFeature"
    ML_FEATURE_TABLE = "mlFeatureTable"
    ML_PRIMARY_KEY = "mlPrimaryKey"
    DATASET = "dataset"
    DATA_JOB = "dataJob"
    DATA_PROCESS_INSTANCE = "dataProcessInstance"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class SchemaField:
    """One column of a dataset schema, as DataHub's ``schemaMetadata`` describes it.

    ``tags`` and ``terms`` merge the ingested field annotations with the ones edited in the UI
    (``editableSchemaMetadata``), as URNs.
    """

    path: str
    type: str
    native_type: str = ""
    description: str = ""
    position: int = 0
    tags: frozenset[Urn] = frozenset()
    terms: frozenset[Urn] = frozenset()


@dataclass(frozen=True, slots=True)
class Schema:
    """A dataset schema: its fields in declared order."""

    fields: tuple[SchemaField, ...]

    def by_path(self) -> dict[str, SchemaField]:
        """The fields keyed by field path."""
        return {f.path: f for f in self.fields}


@dataclass(frozen=True, slots=True)
class Deprecation:
    """DataHub's ``deprecation`` aspect, reduced to what a user needs to act."""

    note: str = ""
    decommission_time: datetime | None = None
    replacement: Urn | None = None


@dataclass(frozen=True, slots=True)
class ColumnEdge:
    """Column-level lineage: ``upstream_field`` of dataset ``upstream`` feeds ``downstream_field``.

    Read from ``upstreamLineage.fineGrainedLineages`` of the downstream dataset.
    """

    upstream: Urn
    upstream_field: str
    downstream_field: str


@dataclass(frozen=True, slots=True)
class Node:
    """One entity in a model's upstream lineage, with the metadata the checks read.

    ``None`` always means "the catalog has no such metadata" (unknown), never "healthy".
    ``exists`` is False for an entity that lineage references but the catalog has no aspect for.
    """

    urn: Urn
    entity_type: EntityType
    name: str
    exists: bool = True
    schema: Schema | None = None
    tags: frozenset[Urn] = frozenset()
    terms: frozenset[Urn] = frozenset()
    structured_properties: Mapping[str, tuple[str | float, ...]] = _field(default_factory=dict)
    custom_properties: Mapping[str, str] = _field(default_factory=dict)
    deprecation: Deprecation | None = None
    owners: tuple[Urn, ...] | None = None
    """The owners' urns (users or groups) from DataHub's ``ownership`` aspect: empty when the
    aspect lists none, None when the entity has no ``ownership`` aspect at all."""
    removed: bool = False
    last_updated: datetime | None = None
    column_lineage: tuple[ColumnEdge, ...] = ()
    source_columns: tuple[str, ...] = ()
    """For an ML feature or primary key: the source-dataset columns it is computed from, when
    the catalog says so (DataHub itself has no feature-to-column lineage)."""
    trained_at: datetime | None = None
    """For an ML model: when it was trained (``mlModelProperties.date``, ``created`` or the
    training runs' times); the baseline for schema drift is the upstream schema as of then."""


EdgeKind = Literal[
    "feature",  # mlModelProperties.mlFeatures
    "feature_source",  # mlFeatureProperties.sources / mlPrimaryKeyProperties.sources
    "feature_table",  # mlFeatureTableProperties.mlFeatures (incoming Contains; not DataHub lineage)
    "primary_key",  # mlFeatureTableProperties.mlPrimaryKeys
    "training_data",  # mlModelTrainingData (not DataHub lineage)
    "training_job",  # mlModelProperties.trainingJobs
    "job_input",  # dataJobInputOutput inputs / dataProcessInstanceInput
    "dataset_upstream",  # upstreamLineage.upstreams
    "produced_by",  # dataJobInputOutput outputs / dataProcessInstanceOutput (incoming Produces)
]


@dataclass(frozen=True, slots=True)
class Edge:
    """One upstream hop: ``upstream`` feeds ``downstream``."""

    downstream: Urn
    upstream: Urn
    kind: EdgeKind


@dataclass(frozen=True, slots=True)
class Lineage:
    """The upstream lineage of one model as walked: nodes, edges and honest coverage.

    ``paths`` maps every reached urn to one shortest path from the model (model first).
    ``truncated`` is True when a hop or node cap stopped the walk before it was complete.
    """

    root: Urn
    nodes: Mapping[Urn, Node]
    edges: tuple[Edge, ...]
    paths: Mapping[Urn, tuple[Urn, ...]]
    truncated: bool = False

    def upstream_of(self, urn: Urn) -> list[Edge]:
        """The edges whose downstream end is ``urn``."""
        return [e for e in self.edges if e.downstream == urn]

    def downstream_of(self, urn: Urn) -> list[Edge]:
        """The edges whose upstream end is ``urn``."""
        return [e for e in self.edges if e.upstream == urn]


TAG_PREFIX = "urn:li:tag:"
"""What every tag urn starts with."""


@dataclass(frozen=True, slots=True)
class ColumnUsage:
    """Which columns of one upstream node feed the model, as far as lineage can prove.

    ``whole`` means the entity as a whole is consumed (e.g. it is the model's training data), so
    every column feeds. ``columns`` feed for certain; ``unused`` are proven not to feed by
    column-level lineage; when ``complete`` is True no column outside ``columns`` feeds.
    Anything else is unknown.
    """

    whole: bool = False
    columns: frozenset[str] = frozenset()
    unused: frozenset[str] = frozenset()
    complete: bool = False

    def feeds(self, column: str) -> bool | None:
        """True if ``column`` feeds the model, False if lineage proves it does not, else None."""
        if self.whole or column in self.columns:
            return True
        if self.complete or column in self.unused:
            return False
        return None


UNKNOWN_USAGE = ColumnUsage()
