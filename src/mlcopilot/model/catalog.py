"""What the catalog says about entities: urns, schemas, lineage and column usage.

Catalog adapters translate DataHub aspects (SDK classes, GraphQL or MCP payloads) into these
types at the boundary; the checks, the walker and the store only ever see these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Literal

from mlcopilot.model.profiles import DatasetProfile

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


AssertionType = Literal["DATASET", "FRESHNESS", "VOLUME", "SQL", "FIELD", "DATA_SCHEMA", "CUSTOM"]
"""DataHub's ``assertionInfo.type`` values (a newer server may send others: kept as sent)."""
AssertionResultType = Literal["SUCCESS", "FAILURE", "ERROR", "INIT"]
"""DataHub's ``assertionRunEvent.result.type``: ERROR means the check could not run at all."""

_INTERVALS = {
    "SECOND": timedelta(seconds=1),
    "MINUTE": timedelta(minutes=1),
    "HOUR": timedelta(hours=1),
    "DAY": timedelta(days=1),
    "WEEK": timedelta(weeks=1),
    # Calendar units are taken at their longest, so an expectation built on them never
    # calls a source late before the calendar does.
    "MONTH": timedelta(days=31),
    "QUARTER": timedelta(days=92),
    "YEAR": timedelta(days=366),
}


@dataclass(frozen=True, slots=True)
class FreshnessSchedule:
    """When a freshness assertion expects its entity to change (``freshnessAssertion.schedule``).

    ``type`` is ``CRON`` (``cron`` in ``timezone``: the times by which a change is due, the
    window opening ``window_start_offset`` before each), ``FIXED_INTERVAL`` (a change at least
    every ``multiple`` × ``unit``) or ``SINCE_THE_LAST_CHECK``. dbt's source freshness, which
    dbt ingestion writes as a ``CUSTOM`` assertion, becomes a ``FIXED_INTERVAL`` schedule of its
    ``error_after`` (else ``warn_after``) period.
    """

    type: str
    cron: str | None = None
    timezone: str | None = None
    window_start_offset: timedelta | None = None
    unit: str | None = None
    """``SECOND`` … ``YEAR`` (DataHub's ``CalendarInterval``)."""
    multiple: int | None = None

    @property
    def interval(self) -> timedelta | None:
        """The fixed interval as a duration; None for any other schedule.

        Months, quarters and years count at their longest; a unit DataHub does not define
        gives None.
        """
        if self.type != "FIXED_INTERVAL" or self.unit is None:
            return None
        unit = _INTERVALS.get(self.unit.upper())
        return None if unit is None else unit * (self.multiple or 1)


@dataclass(frozen=True, slots=True)
class AssertionRun:
    """One run of an assertion (an ``assertionRunEvent``): what it found, and when.

    ``severity`` is the producer's own (``LOW``/``MEDIUM``/``HIGH``; dbt says LOW for a
    ``warn`` and HIGH for a ``fail``), only meaningful on a FAILURE. ``native_results`` are
    the producer's own result properties (dbt's error message, GE's observed values), as
    strings.
    """

    result: str
    """One of :data:`AssertionResultType` (kept as sent)."""
    at: datetime
    severity: str | None = None
    native_results: Mapping[str, str] = _field(default_factory=dict)
    external_url: str | None = None
    run_id: str = ""
    row_count: int | None = None
    unexpected_count: int | None = None
    missing_count: int | None = None
    actual_value: float | None = None
    error_type: str | None = None
    """``result.error.type`` of an ERROR (e.g. ``SOURCE_QUERY_FAILED``), when given."""


@dataclass(frozen=True, slots=True)
class AssertionState:
    """A DataHub assertion on an entity (``assertionInfo``), with its latest run.

    ``last_run`` is the completed run with the newest ``timestampMillis`` (never the last one
    written: connectors backfill); None when it has never run, which says nothing about the
    data. ``fields`` are the columns it covers (simple field paths), empty for a
    dataset-level assertion. ``schedule`` is set for freshness assertions (see
    :class:`FreshnessSchedule`).
    """

    urn: Urn
    type: str
    """One of :data:`AssertionType` (kept as sent)."""
    entity: Urn
    """The entity it asserts on."""
    fields: tuple[str, ...] = ()
    description: str = ""
    native_type: str = ""
    """The producer's name for it: GE's expectation, dbt's test name or custom type."""
    source_type: str | None = None
    """``NATIVE`` (DataHub runs it), ``EXTERNAL`` (dbt, GE, …) or ``INFERRED``."""
    platform: Urn | None = None
    """Where it is evaluated (``dataPlatformInstance.platform``, e.g. dbt)."""
    external_url: str | None = None
    custom_properties: Mapping[str, str] = _field(default_factory=dict)
    last_run: AssertionRun | None = None
    schedule: FreshnessSchedule | None = None

    @property
    def label(self) -> str:
        """What to call it: its description, else the producer's name for it, else its urn."""
        return self.description or self.native_type or self.urn

    @property
    def is_freshness(self) -> bool:
        """True for a freshness assertion (DataHub's own, or dbt's source freshness)."""
        return self.type == "FRESHNESS" or self.schedule is not None


@dataclass(frozen=True, slots=True)
class IncidentSignal:
    """An active DataHub incident that names the entity (``incidentInfo``), whoever raised it.

    ``priority`` is DataHub's number: 0 critical, 1 high, 2 medium, 3 low; None when unset.
    ``source_type`` is ``MANUAL`` or ``ASSERTION_FAILURE`` (then ``source_urn`` is the
    assertion). mlcopilot's own incidents (urns ``urn:li:incident:mlcopilot-…``) are among them.
    """

    urn: Urn
    type: str
    """``FRESHNESS``, ``VOLUME``, ``FIELD``, ``SQL``, ``DATA_SCHEMA``, ``OPERATIONAL`` or
    ``CUSTOM`` (then ``custom_type`` says which)."""
    title: str = ""
    description: str = ""
    custom_type: str | None = None
    priority: int | None = None
    state: str = "ACTIVE"
    stage: str | None = None
    source_type: str | None = None
    source_urn: Urn | None = None
    started_at: datetime | None = None
    created_at: datetime | None = None


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
    assertions: tuple[AssertionState, ...] | None = None
    """DataHub assertions on the entity or its columns, each with its latest run, by urn:
    empty when there are none, None when the catalog cannot tell. Every backend reads them
    for datasets in the catalog (DataHub's GraphQL has them on datasets only) and for
    nothing else, so all say the same."""
    incidents: tuple[IncidentSignal, ...] | None = None
    """The ACTIVE DataHub incidents naming the entity, by urn (resolved ones are not read):
    empty when there are none, None when the catalog cannot tell. Every backend reads them
    for datasets and data jobs in the catalog (the types the walk reaches that DataHub's
    GraphQL has ``incidents`` on) and for nothing else."""
    update_times: tuple[datetime, ...] | None = None
    """For a dataset: when its data changed, oldest first, distinct, at most the newest
    :data:`UPDATE_HISTORY` (its ``operation`` events' ``lastUpdatedTimestamp`` and the
    ``lastModified`` of its ``datasetProperties``: of every version on ``lite:``, of the current
    one on ``datahub:`` and ``mcp:``); None when the backend read none."""
    domains: tuple[Urn, ...] = ()
    """The domains the entity belongs to (DataHub's ``domains`` aspect), sorted."""
    annotated_columns: tuple[SchemaField, ...] = ()
    """For a dataset without ``schemaMetadata``: the columns its ``editableSchemaMetadata``
    annotates, with their tags, terms and descriptions but no type (no schema says it).
    Empty when the schema is known: its fields carry them."""
    profile: DatasetProfile | None = None
    """For a dataset: its newest ``datasetProfile`` by ``timestampMillis`` (never the last one
    written); None when DataHub holds none. Every backend reads it for datasets in the catalog
    and for nothing else."""


UPDATE_HISTORY = 50
"""How many of a dataset's most recent updates the backends read into ``Node.update_times``."""


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
