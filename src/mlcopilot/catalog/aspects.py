"""Pure translation between DataHub aspect JSON and mlcopilot's domain types.

The JSON is the form DataHub Lite stores and DataHub's REST/OpenAPI return: the
``MetadataChangeProposalWrapper.to_obj(simplified_structure=True)["aspect"]["json"]`` dict of
one aspect. Every backend that can hand over aspects in that form reuses this module, so the
meaning of each aspect is decided in one place.

Reading: :func:`node_from_aspects`, :func:`schema_from_aspects`, :func:`edges_from_aspects`
and :func:`reverse_edges_from_aspects`. Writing: :func:`aspects_for_write` and
:func:`prerequisites` turn a write intent into the aspect JSON to store, built with the SDK's
own classes so the shapes are DataHub's real ones.
"""

from __future__ import annotations

import copy
import re
import sys
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, TypeGuard, TypeVar

from avro.errors import AvroException, AvroTypeException
from datahub.emitter.aspect import ASPECT_MAP
from datahub.emitter.serialization_helper import post_json_transform, pre_json_transform
from datahub.metadata.schema_classes import (
    KEY_ASPECT_NAMES,
    AuditStampClass,
    DocumentContentsClass,
    DocumentInfoClass,
    DocumentSourceClass,
    DocumentStatusClass,
    GlobalTagsClass,
    IncidentInfoClass,
    IncidentSourceClass,
    IncidentStatusClass,
    RelatedAssetClass,
    StructuredPropertiesClass,
    StructuredPropertyDefinitionClass,
    StructuredPropertyValueAssignmentClass,
    TagAssociationClass,
    TagPropertiesClass,
    _Aspect,
)
from datahub.metadata.urns import DataPlatformUrn, TagUrn
from datahub.metadata.urns import Urn as SdkUrn
from datahub.utilities.urn_encoder import RESERVED_CHARS
from datahub.utilities.urns.error import InvalidUrnError
from datahub.utilities.urns.field_paths import get_simple_field_path_from_v2_field_path

from mlcopilot.catalog.urns import urn_type
from mlcopilot.errors import CatalogError
from mlcopilot.model import (
    UPDATE_HISTORY,
    AssertionRun,
    AssertionState,
    ColumnEdge,
    DatasetProfile,
    Deprecation,
    DocumentWrite,
    Edge,
    EdgeKind,
    EntityType,
    FreshnessSchedule,
    IncidentSignal,
    IncidentWrite,
    Node,
    PropertyWrite,
    Schema,
    SchemaField,
    TagWrite,
    Urn,
    Write,
    profile_from_json,
)

JsonObject = dict[str, Any]
Aspects = Mapping[str, JsonObject]
"""One entity's aspects: aspect name → aspect JSON."""

ACTOR = "urn:li:corpuser:mlcopilot"
"""Who the audit stamps of mlcopilot's writes name."""

STRUCTURED_PROPERTY_PREFIX = "urn:li:structuredProperty:"

TranslationError = (ValueError, TypeError, KeyError, AttributeError, AvroException, InvalidUrnError)
"""What the SDK raises when aspect JSON does not fit its class; backends wrap these."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_UNION_PRIMITIVES = frozenset({"string", "double", "float", "int", "long", "boolean"})
_DECODINGS = {urllib.parse.quote(c): c for c in RESERVED_CHARS}
_ENCODED = re.compile("|".join(re.escape(k) for k in _DECODINGS), re.IGNORECASE)
_NAME_ASPECTS = (
    "datasetProperties",
    "mlModelProperties",
    "mlModelGroupProperties",
    "dataJobInfo",
    "dataProcessInstanceProperties",
)

# (aspect, field, key inside each item or None for a plain urn list, edge kind)
_EdgeSpec = tuple[str, str, str | None, EdgeKind]
_OWN_EDGES: tuple[_EdgeSpec, ...] = (
    ("mlModelProperties", "mlFeatures", None, "feature"),
    ("mlModelProperties", "trainingJobs", None, "training_job"),
    ("mlModelTrainingData", "trainingData", "dataset", "training_data"),
    ("mlFeatureProperties", "sources", None, "feature_source"),
    ("mlPrimaryKeyProperties", "sources", None, "feature_source"),
    ("mlFeatureTableProperties", "mlPrimaryKeys", None, "primary_key"),
    ("upstreamLineage", "upstreams", "dataset", "dataset_upstream"),
    ("dataJobInputOutput", "inputDatasets", None, "job_input"),
    ("dataJobInputOutput", "inputDatasetEdges", "destinationUrn", "job_input"),
    ("dataJobInputOutput", "inputDatajobs", None, "job_input"),
    ("dataJobInputOutput", "inputDatajobEdges", "destinationUrn", "job_input"),
    ("dataProcessInstanceInput", "inputs", None, "job_input"),
    ("dataProcessInstanceInput", "inputEdges", "destinationUrn", "job_input"),
)
# The entity holding these aspects is the *upstream* end; the listed urns are downstream.
_REVERSE_EDGES: tuple[_EdgeSpec, ...] = (
    ("mlFeatureTableProperties", "mlFeatures", None, "feature_table"),
    ("dataJobInputOutput", "outputDatasets", None, "produced_by"),
    ("dataJobInputOutput", "outputDatasetEdges", "destinationUrn", "produced_by"),
    ("dataProcessInstanceOutput", "outputs", None, "produced_by"),
    ("dataProcessInstanceOutput", "outputEdges", "destinationUrn", "produced_by"),
)

EDGE_ASPECTS = frozenset(spec[0] for spec in _OWN_EDGES)
"""The aspects :func:`edges_from_aspects` reads."""
REVERSE_EDGE_ASPECTS = frozenset(spec[0] for spec in _REVERSE_EDGES)
"""The aspects :func:`reverse_edges_from_aspects` reads (a backend indexes these)."""
SCHEMA_ASPECTS = ("schemaMetadata", "editableSchemaMetadata")
"""The aspects :func:`schema_from_aspects` reads."""
TRAINING_RUN_ASPECTS = ("dataProcessInstanceProperties",)
"""The aspects of a model's training jobs that :func:`node_from_aspects` reads via ``related``."""

_T = TypeVar("_T")

_EMPTY: frozenset[str] = frozenset()
"""Every empty tag or term set shares this one (an empty frozenset is 216 bytes, and a large
lineage has millions of them: one per schema field for tags and for terms)."""
_V2_PREFIX = "[version=2.0]"
_SCHEMA_FIELD_PREFIX = "urn:li:schemaField:"
_TYPE_NAMES: dict[str, str] = {}
_NO_EDIT: JsonObject = {}  # read only: the edits of a field nobody edited
_RESERVED = frozenset(RESERVED_CHARS)
_DATASET_PREFIX = "urn:li:dataset:("


def _mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, a JSON object's ``dict`` answered without the ABC."""
    return type(value) is dict or isinstance(value, Mapping)


# --- reading -------------------------------------------------------------------------------


def entity_type_of(urn: Urn) -> EntityType:
    """The entity type named by the urn's type segment; OTHER for any type the walk ignores."""
    parts = urn.split(":", 3)
    if len(parts) < 4 or parts[:2] != ["urn", "li"]:
        return EntityType.OTHER
    try:
        return EntityType(parts[2])
    except ValueError:
        return EntityType.OTHER


def exists(aspects: Aspects) -> bool:
    """True when the entity has at least one aspect besides its key."""
    return any(name not in KEY_ASPECT_NAMES for name in aspects)


def is_removed(aspects: Aspects) -> bool:
    """True when the entity is soft-deleted (``status.removed``)."""
    return _get(aspects, "status", "removed") is True


def node_from_aspects(
    urn: Urn,
    aspects: Aspects,
    *,
    updates: Iterable[int] | None = None,
    related: Mapping[Urn, Aspects] | None = None,
    assertions: tuple[AssertionState, ...] | None = None,
    incidents: tuple[IncidentSignal, ...] | None = None,
    profile: Mapping[str, Any] | None = None,
) -> Node:
    """Translate one entity's current aspects into a :class:`~mlcopilot.model.Node`.

    Args:
        urn: The entity.
        aspects: Its aspects, by name; empty when the catalog has none (``exists=False``).
        updates: Of a dataset: when its data changed as its history says, in epoch
            milliseconds, in any order (:func:`update_stamps` of its ``operation`` events and
            ``datasetProperties`` versions); None when the backend read no history.
        related: Aspects of other entities the translation consults: a model's training jobs
            (``dataProcessInstanceProperties``) date the model when it has no date itself.
        assertions: The assertions on it (:func:`assertion_from_aspects`), which live on
            other entities; None when the backend cannot tell. Kept only for an entity that
            exists and is of :data:`ASSERTION_ENTITY_TYPES`, so every backend says the same.
        incidents: The active incidents naming it (:func:`incident_from_info`); None when the
            backend cannot tell. Kept only for an entity that exists and is of
            :data:`INCIDENT_ENTITY_TYPES`.
        profile: Of a dataset: its newest ``datasetProfile`` by ``timestampMillis`` (the
            aspect's JSON, or GraphQL's ``DatasetProfile``); None when it has none. Kept only
            for a dataset that exists.

    Returns:
        The node. Metadata the aspects do not carry stays None or empty; nothing is invented.
    """
    entity_type = entity_type_of(urn)
    custom = custom_properties(aspects)
    times = (
        update_times(aspects, updates)
        if updates is not None and entity_type is EntityType.DATASET and exists(aspects)
        else None
    )
    return Node(
        urn=urn,
        entity_type=entity_type,
        name=_name(urn, aspects),
        exists=exists(aspects),
        schema=schema_from_aspects(aspects),
        tags=_frozen(_tag_urns(aspects.get("globalTags"))),
        terms=_frozen(_term_urns(aspects.get("glossaryTerms"))),
        structured_properties=structured_properties(aspects.get("structuredProperties")),
        custom_properties=custom,
        deprecation=_deprecation(aspects.get("deprecation")),
        owners=_owners(aspects.get("ownership")),
        removed=is_removed(aspects),
        # The newest update in the history, not the last one written: connectors backfill.
        last_updated=times[-1] if times else _last_updated(aspects),
        update_times=times,
        domains=_domains(aspects.get("domains")),
        annotated_columns=annotated_columns(aspects),
        column_lineage=column_lineage(urn, aspects.get("upstreamLineage")),
        source_columns=_source_columns(custom)
        if entity_type in (EntityType.ML_FEATURE, EntityType.ML_PRIMARY_KEY)
        else (),
        trained_at=_trained_at(aspects, related or {})
        if entity_type is EntityType.ML_MODEL
        else None,
        assertions=assertions
        if entity_type in ASSERTION_ENTITY_TYPES and exists(aspects)
        else None,
        incidents=incidents if entity_type in INCIDENT_ENTITY_TYPES and exists(aspects) else None,
        profile=dataset_profile(profile)
        if profile is not None and entity_type is EntityType.DATASET and exists(aspects)
        else None,
    )


def schema_from_aspects(aspects: Aspects) -> Schema | None:
    """The schema from ``schemaMetadata``, merged with ``editableSchemaMetadata``.

    Field paths are simplified (v2 ``[version=2.0].[type=...]`` segments dropped); the first
    field wins when two simplify to the same path. None when there is no ``schemaMetadata``.
    """
    metadata = aspects.get("schemaMetadata")
    if metadata is None:
        return None
    edits = _editable_fields(aspects.get("editableSchemaMetadata"))
    fields: list[SchemaField] = []
    seen: set[str] = set()
    for raw in metadata.get("fields") or []:
        path = simple_field_path(raw.get("fieldPath") or "")
        if path in seen:
            continue
        seen.add(path)
        edit = edits.get(path, _NO_EDIT) if edits else _NO_EDIT
        if not edit and not (
            raw.get("globalTags") or raw.get("glossaryTerms") or raw.get("description")
        ):
            fields.append(_plain_field(path, raw, len(fields)))
            continue
        fields.append(
            SchemaField(
                path=sys.intern(path),
                type=_field_type(raw.get("type")),
                native_type=sys.intern(raw.get("nativeDataType") or ""),
                description=_text(raw.get("description")) or _text(edit.get("description")),
                position=len(fields),
                tags=_frozen(_tag_urns(raw.get("globalTags"), edit.get("globalTags"))),
                terms=_frozen(_term_urns(raw.get("glossaryTerms"), edit.get("glossaryTerms"))),
            )
        )
    return Schema(tuple(fields))


def _plain_field(path: str, raw: Mapping[str, Any], position: int) -> SchemaField:
    """A field with no tags, terms or description, shared with every field equal to it.

    A large lineage holds millions of fields, most of them plain; sharing them keeps memory
    to the distinct ones, and a lookup is cheaper than building the field.
    """
    native_type = raw.get("nativeDataType") or ""
    return _shared_field(path, _field_type(raw.get("type")), native_type, position)


@lru_cache(maxsize=1 << 16)
def _shared_field(path: str, type_name: str, native_type: str, position: int) -> SchemaField:
    # Plain fields repeat across a catalog's tables (``id``, ``created_at``...): one object each.
    return SchemaField(
        path=sys.intern(path),
        type=type_name,
        native_type=sys.intern(native_type),
        position=position,
        tags=_EMPTY,
        terms=_EMPTY,
    )


plain_field = _shared_field
"""``plain_field(path, type, native_type, position)``: a field with no description, tags or
terms, the one object every equal field shares (what :func:`schema_from_aspects` builds)."""


def annotated_columns(aspects: Aspects) -> tuple[SchemaField, ...]:
    """Of a dataset without ``schemaMetadata``: the columns ``editableSchemaMetadata`` annotates.

    BigID, for one, classifies columns of datasets whose schema nothing else ingested: its
    terms and tags are the only field-level metadata there is. The fields have no type (no
    schema says it); a field with nothing on it is left out. Empty when ``schemaMetadata`` is
    there: :func:`schema_from_aspects` merges the edits into its fields.
    """
    if "schemaMetadata" in aspects:
        return ()
    columns: list[SchemaField] = []
    for path, edit in _editable_fields(aspects.get("editableSchemaMetadata")).items():
        tags = _frozen(_tag_urns(edit.get("globalTags")))
        terms = _frozen(_term_urns(edit.get("glossaryTerms")))
        description = _text(edit.get("description"))
        if path and (tags or terms or description):
            columns.append(
                SchemaField(
                    path=sys.intern(path),
                    type="",
                    description=description,
                    position=len(columns),
                    tags=tags,
                    terms=terms,
                )
            )
    return tuple(columns)


def edges_from_aspects(urn: Urn, aspects: Aspects) -> list[Edge]:
    """The upstream edges an entity's own aspects declare (``urn`` is the downstream end)."""
    # Distinct (kind, target) pairs are distinct edges (all end at ``urn``): deduplicated as
    # tuples, before the edges are made.
    return [
        Edge(downstream=urn, upstream=target, kind=kind)
        for kind, target in dict.fromkeys(_targets(aspects, _OWN_EDGES))
    ]


def reverse_edges_from_aspects(urn: Urn, aspects: Aspects) -> list[Edge]:
    """Edges where ``urn`` is the *upstream* end, declared by its own aspects.

    A feature table is upstream of each feature it contains; a job or training run is upstream
    of each dataset it produces. A backend indexes these by downstream urn.
    """
    edges = (
        Edge(downstream=target, upstream=urn, kind=kind)
        for kind, target in _targets(aspects, _REVERSE_EDGES)
    )
    return _unique(edges)


def training_jobs(aspects: Aspects) -> list[Urn]:
    """The training jobs or runs a model's ``mlModelProperties`` names."""
    return [str(u) for u in _get(aspects, "mlModelProperties", "trainingJobs") or []]


def column_lineage(urn: Urn, upstream_lineage: JsonObject | None) -> tuple[ColumnEdge, ...]:
    """Column edges from ``upstreamLineage.fineGrainedLineages`` of dataset ``urn``.

    Each entry's upstream and downstream schema fields are crossed. Upstreams that are not
    schema fields, downstreams of another dataset and entries without downstreams (a real
    quirk of DataHub's bootstrap sample) contribute nothing.
    """
    entries = (upstream_lineage or {}).get("fineGrainedLineages")
    if not entries:
        return ()
    # A downstream field of this dataset is exactly an urn starting with ``own`` (the
    # schemaField urn splits at its last comma, and a field path holds no comma): no parsing.
    own = f"{_SCHEMA_FIELD_PREFIX}({urn},"
    start = len(own)
    own_valid = _parent_urn(urn) is not None
    edges: dict[tuple[Urn, str, str], ColumnEdge] = {}
    field_path, schema_field = _field_path, _schema_field
    for entry in entries:  # a dataset has one per column: kept to plain loops
        downstreams = entry.get("downstreams")
        if not (own_valid and downstreams):
            continue
        downs: list[str] = []
        for down in downstreams:
            if isinstance(down, str) and down.startswith(own) and down[-1] == ")":
                path = field_path(down[start:-1])
                if path is not None:
                    downs.append(path)
        if not downs:
            continue
        for up in entry.get("upstreams") or ():
            field = schema_field(up) if isinstance(up, str) else None
            if field is None:
                continue
            for down in downs:
                key = (field[0], field[1], down)
                if key not in edges:
                    edges[key] = ColumnEdge(*key)
    return tuple(edges.values())


@lru_cache(maxsize=1 << 16)  # field names repeat across a catalog's column lineage
def _field_path(raw: str) -> str | None:
    """The simple form of the field part of a schemaField urn; None when the SDK refuses it."""
    if not raw or not _RESERVED.isdisjoint(raw):
        return None
    if "%" in raw:
        raw = _decode(raw)
    return sys.intern(simple_field_path(raw))


def structured_properties(aspect: JsonObject | None) -> dict[str, tuple[str | float, ...]]:
    """Structured property values keyed by qualified name (the urn without its prefix)."""
    result: dict[str, tuple[str | float, ...]] = {}
    for assignment in (aspect or {}).get("properties") or []:
        name = str(assignment.get("propertyUrn", "")).removeprefix(STRUCTURED_PROPERTY_PREFIX)
        result[name] = tuple(_unwrap(v) for v in assignment.get("values") or [])
    return result


def custom_properties(aspects: Aspects) -> dict[str, str]:
    """``customProperties`` of the ``*Properties``/``*Info`` aspects, merged in name order."""
    merged: dict[str, str] = {}
    for name in sorted(aspects):
        if not name.endswith(("Properties", "Info")):
            continue
        props = aspects[name].get("customProperties")
        if _mapping(props):
            merged.update({str(k): str(v) for k, v in props.items()})
    return merged


def simple_field_path(field_path: str) -> str:
    """A field path in plain dotted form, without v2 ``[version=...]``/``[type=...]`` segments."""
    if not field_path.startswith(_V2_PREFIX):
        return field_path  # what the SDK returns for a v1 path, without the call
    return str(get_simple_field_path_from_v2_field_path(field_path))


PROFILE_ASPECT = "datasetProfile"
"""The timeseries aspect of a dataset's profiles."""


def dataset_profile(value: Mapping[str, Any] | None) -> DatasetProfile | None:
    """A ``datasetProfile`` (its JSON) as a profile, field paths simplified as schemas' are."""
    if not _mapping(value):
        return None
    return profile_from_json(value, simple_field_path)


def ms_to_datetime(value: object) -> datetime | None:
    """An aware UTC datetime from epoch milliseconds; None for missing or placeholder (≤ 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return _EPOCH + timedelta(milliseconds=value)


def datetime_to_ms(when: datetime) -> int:
    """Epoch milliseconds of ``when``; a naive datetime is taken as UTC."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - _EPOCH) // _MS


def _targets(aspects: Aspects, specs: Iterable[_EdgeSpec]) -> Iterator[tuple[EdgeKind, Urn]]:
    for aspect, field, key, kind in specs:
        if aspect not in aspects:
            continue  # most entities hold one or two of the aspects that declare edges
        for item in _get(aspects, aspect, field) or []:
            target = item.get(key) if key is not None and _mapping(item) else item
            if isinstance(target, str) and target:
                # An urn many entities point at is one string, not one per aspect read.
                yield kind, sys.intern(target)


def _name(urn: Urn, aspects: Aspects) -> str:
    for aspect in _NAME_ASPECTS:
        name = _get(aspects, aspect, "name")
        if isinstance(name, str) and name:
            return name
    return _name_from_urn(urn)


def _name_from_urn(urn: Urn) -> str:
    """The name part of an urn: ``(platform,NAME,env)``, ``(namespace,NAME)`` or ``ID``."""
    if urn.startswith(_DATASET_PREFIX) and urn.endswith(")"):
        # Most nodes are datasets: decide as the SDK's DatasetUrn does, without its cost.
        parts = urn[len(_DATASET_PREFIX) : -1].split(",")
        if len(parts) == 3 and all(parts) and all(_RESERVED.isdisjoint(p) for p in parts):
            return _decode(parts[1]) if _platform_urn(parts[0]) else urn
    try:
        ids = SdkUrn.from_string(urn).entity_ids
    except InvalidUrnError:
        return urn
    return _decode(ids[1] if len(ids) >= 2 else ids[0])


@lru_cache(maxsize=1 << 10)
def _platform_urn(urn: str) -> bool:
    try:
        DataPlatformUrn.from_string(urn)
    except InvalidUrnError:
        return False
    return True


def _decode(text: str) -> str:
    """Undo DataHub's percent-encoding of the characters urns reserve: ``,``, ``(``, ``)``."""
    if "%" not in text:
        return text  # nothing encoded (most names): no pattern to run
    return _ENCODED.sub(lambda m: _DECODINGS[m.group(0).upper()], text)


@lru_cache(maxsize=1 << 15)  # a column feeds several datasets' lineage
def _schema_field(urn: str) -> tuple[Urn, str] | None:
    """The (dataset, simple field path) a ``schemaField`` urn names; None if it is not one.

    Exactly what ``SchemaFieldUrn.from_string`` accepts, without its cost on every call (a
    large lineage has millions of column edges): the field part holds no reserved character
    (else the SDK refuses it), so the urn splits at its last comma, and whether the parent is
    an urn the SDK accepts is decided once per parent.
    """
    if not urn.startswith(_SCHEMA_FIELD_PREFIX):
        return None
    ids = urn[len(_SCHEMA_FIELD_PREFIX) :]
    if not (ids.startswith("(") and ids.endswith(")")):
        return None
    parent, _, field_path = ids[1:-1].rpartition(",")
    path = _field_path(field_path)
    if path is None:
        return None
    checked = _parent_urn(parent)
    if checked is None:
        return None
    return checked, path


@lru_cache(maxsize=1 << 16)
def _parent_urn(parent: str) -> Urn | None:
    """``parent`` when it is a valid schemaField parent (as the SDK decides), else None.

    Besides being an urn the SDK parses, its parentheses must nest within it and it must
    have no top-level comma: otherwise the SDK would split the schemaField urn differently.
    """
    depth = 0
    for c in parent:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return None
        elif c == "," and depth == 0:
            return None
    if depth != 0 or not parent or urn_type(parent) is None:
        # urn_type is the SDK's parse, remembered: a remote backend has parsed each dataset's
        # urn already (to batch it), and the check of its own column lineage asks again.
        return None
    return sys.intern(parent)


def _field_type(type_json: object) -> str:
    """The logical type class short name (``StringType``) from the ``type.type`` union."""
    union = type_json.get("type") if _mapping(type_json) else None
    if _mapping(union) and union:
        key = str(next(iter(union)))
        name = _TYPE_NAMES.get(key)
        if name is None:  # a few dozen type classes exist: one string each
            name = _TYPE_NAMES.setdefault(key, sys.intern(key.rsplit(".", 1)[-1]))
        return name
    return ""


def _editable_fields(aspect: JsonObject | None) -> dict[str, JsonObject]:
    edits: dict[str, JsonObject] = {}
    for info in (aspect or {}).get("editableSchemaFieldInfo") or []:
        edits.setdefault(simple_field_path(info.get("fieldPath") or ""), info)
    return edits


def _tag_urns(*aspects: JsonObject | None) -> Iterator[Urn]:
    for aspect in aspects:
        for association in (aspect or {}).get("tags") or []:
            if association.get("tag"):
                yield sys.intern(str(association["tag"]))


def _term_urns(*aspects: JsonObject | None) -> Iterator[Urn]:
    for aspect in aspects:
        for association in (aspect or {}).get("terms") or []:
            if association.get("urn"):
                yield sys.intern(str(association["urn"]))


def _frozen(items: Iterator[Urn]) -> frozenset[Urn]:
    found = frozenset(items)
    return found if found else _EMPTY


def _owners(aspect: JsonObject | None) -> tuple[Urn, ...] | None:
    """The owner urns of ``ownership``, sorted; None without the aspect (not known)."""
    if aspect is None:
        return None
    owners = aspect.get("owners")
    if not isinstance(owners, list):
        return ()
    found = {o["owner"] for o in owners if _mapping(o) and isinstance(o.get("owner"), str)}
    return tuple(sorted(found))


def _deprecation(aspect: JsonObject | None) -> Deprecation | None:
    if not aspect or aspect.get("deprecated") is not True:
        return None
    return Deprecation(
        note=_text(aspect.get("note")),
        decommission_time=ms_to_datetime(aspect.get("decommissionTime")),
        replacement=aspect.get("replacement") or None,
    )


UPDATE_ASPECTS = ("operation", "datasetProperties")
"""The aspects whose history :func:`update_stamps` reads (a backend reads their versions)."""


def update_stamps(name: str, value: Mapping[str, Any]) -> int | None:
    """When one ``operation`` event or ``datasetProperties`` version says the data changed.

    An operation's ``lastUpdatedTimestamp`` (when the data changed; ``timestampMillis`` is
    when it was reported, the fallback), a properties version's ``lastModified.time``. In epoch
    milliseconds; None when it says nothing (placeholders such as 0 included).
    """
    if name == "operation":
        stamp = value.get("lastUpdatedTimestamp") or value.get("timestampMillis")
    elif name == "datasetProperties":
        modified = value.get("lastModified")
        stamp = modified.get("time") if _mapping(modified) else None
    else:
        return None
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or stamp <= 0:
        return None
    return int(stamp)


def update_times(aspects: Aspects, history: Iterable[int]) -> tuple[datetime, ...]:
    """A dataset's updates, oldest first, distinct, the newest :data:`UPDATE_HISTORY` only.

    ``history`` is what the backend read of the :data:`UPDATE_ASPECTS` versions (epoch
    milliseconds, any order); the current aspects count too, for a backend that reads no
    ``datasetProperties`` versions.
    """
    stamps = set(history)
    for name in UPDATE_ASPECTS:
        value = aspects.get(name)
        current = update_stamps(name, value) if _mapping(value) else None
        if current is not None:
            stamps.add(current)
    newest = sorted(stamps)[-UPDATE_HISTORY:]
    return tuple(t for t in (ms_to_datetime(s) for s in newest) if t is not None)


def _domains(aspect: JsonObject | None) -> tuple[Urn, ...]:
    domains = (aspect or {}).get("domains")
    if not isinstance(domains, list):
        return ()
    return tuple(sorted({sys.intern(d) for d in domains if isinstance(d, str) and d}))


def _last_updated(aspects: Aspects) -> datetime | None:
    return ms_to_datetime(_get(aspects, "operation", "lastUpdatedTimestamp")) or ms_to_datetime(
        _get(aspects, "datasetProperties", "lastModified", "time")
    )


def _source_columns(custom: Mapping[str, str]) -> tuple[str, ...]:
    columns: list[str] = []
    for key in sorted(custom):
        if key == "source_column" or key.endswith(".source_column"):
            columns.extend(c.strip() for c in custom[key].split(",") if c.strip())
    return tuple(dict.fromkeys(columns))


def _trained_at(aspects: Aspects, related: Mapping[Urn, Aspects]) -> datetime | None:
    own = ms_to_datetime(_get(aspects, "mlModelProperties", "date")) or ms_to_datetime(
        _get(aspects, "mlModelProperties", "created", "time")
    )
    if own is not None:
        return own
    return trained_at_from_runs(training_jobs(aspects), related)


def trained_at_from_runs(jobs: Iterable[Urn], related: Mapping[Urn, Aspects]) -> datetime | None:
    """When a model without a date of its own was trained: its newest training run's time.

    ``jobs``: its :func:`training_jobs`; ``related``: their aspects
    (:data:`TRAINING_RUN_ASPECTS`). None when no run is dated.
    """
    runs = (
        ms_to_datetime(
            _get(related.get(job, {}), "dataProcessInstanceProperties", "created", "time")
        )
        for job in jobs
    )
    return max((t for t in runs if t is not None), default=None)


def _get(aspects: Aspects, aspect: str, *path: str) -> Any:
    value: Any = aspects.get(aspect)
    for key in path:
        if not _mapping(value):
            return None
        value = value.get(key)
    return value


def _text(value: object) -> str:
    value = _unwrap(value)
    return value if isinstance(value, str) else ""


def _unwrap(value: Any) -> Any:
    """``{"string": "x"}`` / ``{"double": 1.0}`` union forms → the bare value."""
    if _mapping(value) and len(value) == 1:
        key = next(iter(value))
        if key in _UNION_PRIMITIVES:
            return value[key]
    return value


def _unique(items: Iterable[_T]) -> list[_T]:
    return list(dict.fromkeys(items))


# --- DataHub's own quality signals: assertions and incidents -------------------------------

ASSERTION_ENTITY_TYPES = frozenset({EntityType.DATASET})
"""The entity types whose assertions every backend reads: DataHub's GraphQL has
``assertions`` on datasets only (and GMS nothing on an entity without aspects)."""
INCIDENT_ENTITY_TYPES = frozenset({EntityType.DATASET, EntityType.DATA_JOB})
"""The entity types whose incidents every backend reads: of the types the walk reaches,
DataHub's GraphQL has ``incidents`` on these only."""
ASSERTION_ASPECTS = ("assertionInfo", "dataPlatformInstance", "status")
"""The aspects of an assertion entity :func:`assertion_from_aspects` reads."""
ASSERTION_RUN_EVENT = "assertionRunEvent"
"""The timeseries aspect of an assertion's runs."""

_ASSERTION_TARGETS = (
    # (sub-record, the key naming its entity): the current shapes and the older ones
    ("datasetAssertion", "dataset"),
    ("freshnessAssertion", "entity"),
    ("volumeAssertion", "entity"),
    ("sqlAssertion", "entity"),
    ("fieldAssertion", "entity"),
    ("schemaAssertion", "entity"),
    ("customAssertion", "entity"),
)
_DBT_FRESHNESS = "dbt_freshness_test"
"""The custom property dbt ingestion marks its source-freshness assertions with."""


def assertion_entity(info: Mapping[str, Any]) -> Urn | None:
    """The entity an ``assertionInfo`` asserts on (a column's dataset for a column's urn).

    Read from the sub-record of its type (``datasetAssertion.dataset``,
    ``freshnessAssertion.entity``, ``customAssertion.entity``, …), else ``entityUrn``.
    """
    for record, key in _ASSERTION_TARGETS:
        sub = info.get(record)
        target = sub.get(key) if isinstance(sub, dict) else None
        if isinstance(target, str) and target:
            return _dataset_of(target)
    target = info.get("entityUrn")
    return _dataset_of(target) if isinstance(target, str) and target else None


def _dataset_of(urn: Urn) -> Urn:
    field = _schema_field(urn) if urn.startswith(_SCHEMA_FIELD_PREFIX) else None
    return sys.intern(field[0] if field is not None else urn)


def assertion_fields(info: Mapping[str, Any]) -> tuple[str, ...]:
    """The columns (simple field paths) an ``assertionInfo`` covers; empty for the whole entity.

    From ``datasetAssertion.fields`` and ``customAssertion.field``/``fields`` (schemaField
    urns), ``fieldAssertion`` (its field spec's ``path``, or ``fieldPath``) and any target
    that is itself a column's urn.
    """
    # A large estate holds tens of thousands of assertions: only the sub-records present are
    # looked at, and JSON objects are dicts (no ABC checks on the way).
    names: list[object] = [info.get("entityUrn")]
    for record, key in _ASSERTION_TARGETS:
        sub = info.get(record)
        if not isinstance(sub, dict):
            continue
        names.append(sub.get(key))
        if record in ("datasetAssertion", "customAssertion"):
            names += sub.get("fields") or ()
            names.append(sub.get("field"))
        elif record == "fieldAssertion":
            names += _field_spec_paths(sub)
    paths: list[str] = []
    for name in names:  # urns, or a field spec's plain path
        if not isinstance(name, str) or not name:
            continue
        if name.startswith(_SCHEMA_FIELD_PREFIX):
            field = _schema_field(name)
            if field is not None:
                paths.append(field[1])
        elif not name.startswith("urn:li:"):
            paths.append(sys.intern(simple_field_path(name)))
    return tuple(dict.fromkeys(paths)) if paths else ()


def _field_spec_paths(field_assertion: dict[str, Any]) -> list[object]:
    """The field paths a ``fieldAssertion`` names (its field spec's ``path``, ``fieldPath``)."""
    paths: list[object] = [field_assertion.get("fieldPath")]
    for kind in ("fieldValuesAssertion", "fieldMetricAssertion"):
        spec = _get(field_assertion, kind, "field")
        if isinstance(spec, dict):
            paths.append(spec.get("path"))
    return paths


def latest_run(events: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The completed run with the newest ``timestampMillis``; of two at once, the later one.

    ``events`` come in write order (Lite's versions); write order is not time order, as
    connectors backfill. Runs not ``COMPLETE`` have no verdict and are skipped, as DataHub's
    own ``runEvents(status: COMPLETE)``.
    """
    best: Mapping[str, Any] | None = None
    best_at = -1
    for event in events:
        if not _mapping(event) or event.get("status") != "COMPLETE":
            continue
        at = event.get("timestampMillis")
        stamp = at if isinstance(at, int) and not isinstance(at, bool) else 0
        if stamp >= best_at:
            best, best_at = event, stamp
    return best


def assertion_run(event: Mapping[str, Any]) -> AssertionRun | None:
    """An ``assertionRunEvent`` as an :class:`~mlcopilot.model.AssertionRun`; None undated.

    A complete run without a result counts as ``INIT`` (no verdict).
    """
    at = ms_to_datetime(event.get("timestampMillis"))
    if at is None:
        return None
    result = _record(event.get("result"))
    error = _record(result.get("error"))
    kind = result.get("type")
    return AssertionRun(
        result=kind if isinstance(kind, str) and kind else "INIT",
        at=at,
        severity=_str_or_none(result.get("severity")),
        native_results=_string_map(result.get("nativeResults")),
        external_url=_str_or_none(result.get("externalUrl")),
        run_id=_text(event.get("runId")),
        row_count=_int_or_none(result.get("rowCount")),
        unexpected_count=_int_or_none(result.get("unexpectedCount")),
        missing_count=_int_or_none(result.get("missingCount")),
        actual_value=_float_or_none(result.get("actualAggValue")),
        error_type=_str_or_none(error.get("type")),
    )


def assertion_from_aspects(
    urn: Urn, aspects: Aspects, run: Mapping[str, Any] | None
) -> AssertionState | None:
    """One assertion entity as an :class:`~mlcopilot.model.AssertionState`.

    Args:
        urn: The assertion.
        aspects: Its aspects (:data:`ASSERTION_ASPECTS`).
        run: Its latest completed run (:func:`latest_run`), if any.

    Returns:
        None for an assertion DataHub would not list: soft-deleted, without ``assertionInfo``
        or naming no entity (neither in its info nor as the run's ``asserteeUrn``).
    """
    info = aspects.get("assertionInfo")
    if not _mapping(info) or is_removed(aspects):
        return None
    entity = assertion_entity(info)
    if entity is None and run is not None and isinstance(run.get("asserteeUrn"), str):
        entity = _dataset_of(run["asserteeUrn"])
    if entity is None:
        return None
    kind = _text(info.get("type")) or "CUSTOM"
    custom = info.get("customProperties")
    props = {str(k): str(v) for k, v in custom.items()} if _mapping(custom) else {}
    platform = _record(aspects.get("dataPlatformInstance")).get("platform")
    return AssertionState(
        urn=urn,
        type=kind,
        entity=entity,
        fields=assertion_fields(info),
        description=_text(info.get("description")).strip(),
        native_type=_native_type(info),
        source_type=_str_or_none(_record(info.get("source")).get("type")),
        platform=platform if isinstance(platform, str) and platform else None,
        external_url=_str_or_none(info.get("externalUrl")),
        custom_properties=props,
        last_run=assertion_run(run) if run is not None else None,
        schedule=_freshness_schedule(info, props),
    )


def _native_type(info: Mapping[str, Any]) -> str:
    """GE's expectation, dbt's test name, or a custom assertion's own type."""
    for record in ("datasetAssertion", "customAssertion"):
        native = _record(info.get(record)).get("nativeType")
        if isinstance(native, str) and native:
            return native
    custom = _record(info.get("customAssertion")).get("type")
    return custom if isinstance(custom, str) else ""


def _freshness_schedule(
    info: Mapping[str, Any], props: Mapping[str, str]
) -> FreshnessSchedule | None:
    raw = _record(info.get("freshnessAssertion")).get("schedule")
    if _mapping(raw) and isinstance(raw.get("type"), str):
        cron = _record(raw.get("cron"))
        fixed = _record(raw.get("fixedInterval"))
        offset = _int_or_none(cron.get("windowStartOffsetMs"))
        return FreshnessSchedule(
            type=raw["type"],
            cron=_str_or_none(cron.get("cron")),
            timezone=_str_or_none(cron.get("timezone")),
            window_start_offset=None if offset is None else timedelta(milliseconds=offset),
            unit=_str_or_none(fixed.get("unit")),
            multiple=_int_or_none(fixed.get("multiple")),
        )
    if props.get(_DBT_FRESHNESS, "").lower() != "true":
        return None
    # dbt's source freshness: stale past error_after (warn_after when only that is set).
    for bound in ("error_after", "warn_after"):
        count = props.get(f"{bound}_count", "")
        period = props.get(f"{bound}_period", "")
        if count.isdigit() and int(count) > 0 and period:
            return FreshnessSchedule(
                type="FIXED_INTERVAL", unit=period.upper(), multiple=int(count)
            )
    return None


def incident_entities(info: Mapping[str, Any]) -> list[Urn]:
    """The entities an ``incidentInfo`` names."""
    return [sys.intern(u) for u in info.get("entities") or [] if isinstance(u, str) and u]


def incident_from_info(
    urn: Urn, info: Mapping[str, Any], aspects: Aspects | None = None
) -> IncidentSignal | None:
    """An ACTIVE incident as an :class:`~mlcopilot.model.IncidentSignal`; None otherwise.

    Args:
        urn: The incident.
        info: Its ``incidentInfo``.
        aspects: All its aspects, when at hand: a soft-deleted incident is not listed.
    """
    status = _record(info.get("status"))
    if status.get("state") != "ACTIVE" or (aspects is not None and is_removed(aspects)):
        return None
    source = _record(info.get("source"))
    priority = _int_or_none(info.get("priority"))
    return IncidentSignal(
        urn=urn,
        type=_text(info.get("type")) or "CUSTOM",
        title=_text(info.get("title")),
        description=_text(info.get("description")),
        custom_type=_str_or_none(info.get("customType")),
        priority=priority,
        state="ACTIVE",
        stage=_str_or_none(status.get("stage")),
        source_type=_str_or_none(source.get("type")),
        source_urn=_str_or_none(source.get("sourceUrn")),
        started_at=ms_to_datetime(info.get("startedAt")),
        created_at=ms_to_datetime(_get(info, "created", "time")),
    )


def _record(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    if isinstance(value, dict):  # what JSON gives: no ABC check
        return value
    return value if _mapping(value) else _NO_EDIT


def _string_map(value: object) -> dict[str, str]:
    if not _mapping(value):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _str_or_none(value: object) -> str | None:
    if isinstance(value, str) or value is None:  # the usual cases, without the union check
        return value or None
    value = _unwrap(value)
    return value if isinstance(value, str) and value else None


def _int_or_none(value: object) -> int | None:
    if value is None:
        return None
    value = _unwrap(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _float_or_none(value: object) -> float | None:
    if value is None:
        return None
    value = _unwrap(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


# --- writing -------------------------------------------------------------------------------

WRITE_ASPECTS: tuple[str, ...] = (
    "globalTags",
    "structuredProperties",
    "incidentInfo",
    "documentInfo",
    "tagProperties",
    "propertyDefinition",
)
"""The aspects :func:`write_updates` compares intents with: all a backend reads before writing
(a write-back touches thousands of entities; their schemas and lineage are not compared)."""


def write_target(write: Write) -> Urn:
    """The entity a write changes."""
    if isinstance(write, TagWrite | PropertyWrite):
        return write.entity
    return write.urn


def aspects_for_write(write: Write, current: Aspects) -> dict[str, JsonObject]:
    """The aspects to store on :func:`write_target` so that it holds ``write``.

    Args:
        write: The intent.
        current: The target entity's current aspects.

    Returns:
        New aspect JSON by aspect name, only for aspects that must change: empty when the
        entity already holds the intent, so re-applying is a no-op. Timestamps come from the
        intent only.

    Raises:
        ValueError: when a current aspect or the intent does not fit DataHub's model (the SDK
            may also raise one of :data:`TranslationError`).
    """
    if isinstance(write, IncidentWrite | DocumentWrite):
        # One normalization of the stored aspect serves both the fields people own (kept
        # from it) and the comparison.
        name = "incidentInfo" if isinstance(write, IncidentWrite) else "documentInfo"
        kept = normalized(name, current[name]) if name in current else None
        value = _info(write, kept)
        return {} if kept == value else {name: value}
    desired = _desired(write, current)
    return {
        name: value
        for name, value in desired.items()
        if name not in current or normalized(name, current[name]) != value
    }


def prerequisites(write: Write) -> dict[Urn, dict[str, JsonObject]]:
    """Entities a write relies on, with the aspect to create when the entity lacks it.

    A tag needs its ``tagProperties``; a structured property its definition
    (``propertyDefinition``). They are created once and never overwritten, so a
    description edited in DataHub survives.
    """
    # Every write of a scan needs the same few: built once, handed out as copies.
    if isinstance(write, TagWrite) and write.present:
        return {write.tag: copy.deepcopy(_tag_prerequisite(write.tag))}
    if isinstance(write, PropertyWrite) and write.values:
        numeric = all(not isinstance(v, str) for v in write.values)
        return {write.property: copy.deepcopy(_property_prerequisite(write.property, numeric))}
    return {}


@lru_cache(maxsize=256)
def _tag_prerequisite(tag: Urn) -> dict[str, JsonObject]:
    name = TagUrn.from_string(tag).name
    props = TagPropertiesClass(name=name, description="Set by ML Incident Copilot.")
    return {props.ASPECT_NAME: to_json(props)}


@lru_cache(maxsize=256)
def _property_prerequisite(prop: Urn, numeric: bool) -> dict[str, JsonObject]:
    definition = _definition(prop, numeric)
    return {definition.ASPECT_NAME: to_json(definition)}


def to_json(aspect: _Aspect) -> JsonObject:
    """The stored JSON form of an SDK aspect (what Lite keeps and REST returns).

    Raises:
        ValueError: when the aspect does not validate against DataHub's schema.
    """
    try:
        # ``to_obj`` validates against the schema as it converts (avrogen's
        # ``to_json_object``): a ``validate()`` first walked every aspect twice.
        converted = aspect.to_obj()
    except AvroTypeException:
        raise ValueError(
            f"{aspect.get_aspect_name()} does not fit DataHub's schema: {aspect}"
        ) from None
    result: JsonObject = pre_json_transform(converted)
    return result


def from_json(name: str, value: Mapping[str, Any]) -> _Aspect:
    """The SDK aspect of the stored JSON ``value`` of aspect ``name``.

    Raises:
        ValueError: for an aspect name DataHub does not know (the SDK may also raise one of
            :data:`TranslationError` for JSON that does not fit).
    """
    cls = ASPECT_MAP.get(name)
    if cls is None:
        raise ValueError(f"unknown aspect {name!r}")
    aspect: _Aspect = cls.from_obj(post_json_transform(dict(value)))
    return aspect


def normalized(name: str, value: Mapping[str, Any]) -> JsonObject:
    """``value`` round-tripped through its SDK class, so equal meaning gives equal dicts."""
    return to_json(from_json(name, value))


def _desired(write: TagWrite | PropertyWrite, current: Aspects) -> dict[str, JsonObject]:
    if isinstance(write, TagWrite):
        return _tags(write, current.get("globalTags"))
    return _properties(write, current.get("structuredProperties"))


def _info(write: IncidentWrite | DocumentWrite, kept: JsonObject | None) -> JsonObject:
    return _incident(write, kept) if isinstance(write, IncidentWrite) else _document(write, kept)


def _tags(write: TagWrite, current: JsonObject | None) -> dict[str, JsonObject]:
    if current is None and not write.present:
        return {}
    tags = GlobalTagsClass(tags=[]) if current is None else from_json("globalTags", current)
    assert isinstance(tags, GlobalTagsClass)
    others = [t for t in tags.tags if t.tag != write.tag]
    if not write.present:
        tags.tags = others
    elif len(others) == len(tags.tags):
        tags.tags = [*tags.tags, TagAssociationClass(tag=write.tag)]
    return {"globalTags": to_json(tags)}


def _properties(write: PropertyWrite, current: JsonObject | None) -> dict[str, JsonObject]:
    if current is None and not write.values:
        return {}
    props = (
        StructuredPropertiesClass(properties=[])
        if current is None
        else from_json("structuredProperties", current)
    )
    assert isinstance(props, StructuredPropertiesClass)
    values = [_property_value(v) for v in write.values]
    assignments: list[StructuredPropertyValueAssignmentClass] = []
    placed = False
    for assignment in props.properties:
        if assignment.propertyUrn != write.property:
            assignments.append(assignment)
        elif not placed and values:
            placed = True
            if [_unwrap(v) for v in assignment.values] != values:
                assignment = StructuredPropertyValueAssignmentClass(write.property, list(values))
            assignments.append(assignment)
    if values and not placed:
        assignments.append(StructuredPropertyValueAssignmentClass(write.property, list(values)))
    props.properties = assignments
    return {"structuredProperties": to_json(props)}


def _property_value(value: str | float) -> str | float:
    return value if isinstance(value, str) else float(value)


def _definition(prop: Urn, numeric: bool) -> StructuredPropertyDefinitionClass:
    return StructuredPropertyDefinitionClass(
        qualifiedName=prop.removeprefix(STRUCTURED_PROPERTY_PREFIX),
        displayName=prop.removeprefix(STRUCTURED_PROPERTY_PREFIX),
        valueType=f"urn:li:dataType:datahub.{'number' if numeric else 'string'}",
        cardinality="MULTIPLE",
        entityTypes=[
            f"urn:li:entityType:datahub.{t.value}" for t in EntityType if t is not EntityType.OTHER
        ],
        description="Set by ML Incident Copilot.",
    )


_INCIDENT_TYPES: frozenset[str] = frozenset(
    IncidentInfoClass.RECORD_SCHEMA.fields_dict["type"].type.symbols
)
_INT_RANGE = range(-(2**31), 2**31)
"""Avro ``int`` (incidentInfo.priority)."""


def _incident(write: IncidentWrite, kept: JsonObject | None) -> JsonObject:
    """The incidentInfo JSON of ``write``; ``kept``: the stored aspect, normalized, if any.

    Built as the plain dict :func:`to_json` would make of the SDK class (tests compare the
    two): building, validating and serializing the SDK object costs about 0.4 ms, paid per
    incident of a large scan. Anything the dict cannot be sure of — a value the schema may
    refuse — goes through the SDK, which raises as before.
    """
    description = write.description  # rendered on each read (a planned incident's)
    if not (
        type(write.incident_type) is str
        and write.incident_type in _INCIDENT_TYPES
        and (write.custom_type is None or type(write.custom_type) is str)
        and type(write.title) is str
        and type(description) is str
        and type(write.priority) is int
        and write.priority in _INT_RANGE
        and _all_str(write.entities)
    ):
        return _incident_sdk(write, kept)
    info: JsonObject = {"type": write.incident_type}
    if write.custom_type is not None:
        info["customType"] = write.custom_type
    info["title"] = write.title
    info["description"] = description
    info["entities"] = list(write.entities)
    info["priority"] = write.priority
    # Assignees are set by people in DataHub; a rescan must not drop them.
    assignees = None if kept is None else kept.get("assignees")
    if assignees is not None:
        info["assignees"] = assignees
    info["status"] = {
        "state": "ACTIVE" if write.active else "RESOLVED",
        "lastUpdated": _stamp_json(write.status_changed_at),
    }
    info["source"] = {"type": "MANUAL"}
    info["startedAt"] = datetime_to_ms(write.created_at)
    info["created"] = _stamp_json(write.created_at)
    return info


def _incident_sdk(write: IncidentWrite, kept: JsonObject | None) -> JsonObject:
    """:func:`_incident` through the SDK class: the reference, and the validating path."""
    assignees = None
    if kept is not None:
        existing = from_json("incidentInfo", kept)
        assert isinstance(existing, IncidentInfoClass)
        assignees = existing.assignees
    info = IncidentInfoClass(
        type=write.incident_type,
        customType=write.custom_type,
        title=write.title,
        description=write.description,
        priority=write.priority,
        entities=list(write.entities),
        status=IncidentStatusClass(
            state="ACTIVE" if write.active else "RESOLVED",
            lastUpdated=_stamp(write.status_changed_at),
        ),
        created=_stamp(write.created_at),
        source=IncidentSourceClass(type="MANUAL"),
        startedAt=datetime_to_ms(write.created_at),
        assignees=assignees,
    )
    return to_json(info)


def _document(write: DocumentWrite, kept: JsonObject | None) -> JsonObject:
    """The documentInfo JSON of ``write``; ``kept``: the stored aspect, normalized, if any.

    A plain dict equal to the SDK's, as :func:`_incident` (and for the same reason).
    """
    text = write.text  # read once: a planned document renders it on each read
    if not (
        type(write.title) is str
        and type(text) is str
        and _all_str(write.related_assets)
        and (kept is None or "customProperties" in kept)
    ):
        return _document_sdk(write, kept)
    # Placement, cross-links and custom properties are made by people in DataHub; keep them.
    info: JsonObject = {"customProperties": {} if kept is None else kept["customProperties"]}
    info["title"] = write.title
    info["source"] = {"sourceType": "NATIVE"}
    info["status"] = {"state": "PUBLISHED"}
    info["contents"] = {"text": text}
    info["created"] = _stamp_json(write.created_at)
    info["lastModified"] = _stamp_json(write.modified_at)
    info["relatedAssets"] = [{"asset": asset} for asset in write.related_assets]
    for name in ("relatedDocuments", "parentDocument"):
        value = None if kept is None else kept.get(name)
        if value is not None:
            info[name] = value
    return info


def _document_sdk(write: DocumentWrite, kept: JsonObject | None) -> JsonObject:
    """:func:`_document` through the SDK class: the reference, and the validating path."""
    info = DocumentInfoClass(
        title=write.title,
        contents=DocumentContentsClass(text=write.text),
        created=_stamp(write.created_at),
        lastModified=_stamp(write.modified_at),
        relatedAssets=[RelatedAssetClass(asset=a) for a in write.related_assets],
        source=DocumentSourceClass(sourceType="NATIVE"),
        status=DocumentStatusClass(state="PUBLISHED"),
    )
    if kept is not None:
        existing = from_json("documentInfo", kept)
        assert isinstance(existing, DocumentInfoClass)
        info.parentDocument = existing.parentDocument
        info.relatedDocuments = existing.relatedDocuments
        info.customProperties = existing.customProperties
    return to_json(info)


def _all_str(values: Iterable[object]) -> bool:
    return all(type(v) is str for v in values)


def _stamp_json(when: datetime) -> JsonObject:
    """``to_json`` of :func:`_stamp`."""
    return {"time": datetime_to_ms(when), "actor": ACTOR}


def _stamp(when: datetime) -> AuditStampClass:
    return AuditStampClass(time=datetime_to_ms(when), actor=ACTOR)


AspectUpdate = tuple[Urn, str, JsonObject]
"""One aspect to write: entity, aspect name, new value."""


def write_updates(
    write: Write,
    state: Mapping[Urn, Mapping[str, JsonObject]],
    *,
    own: Callable[[Write, Aspects], dict[str, JsonObject]] | None = None,
) -> list[AspectUpdate]:
    """The aspect writes that make a catalog hold ``write``, given its current ``state``.

    Missing prerequisites (the tag entity, the property definition) come first, then the
    target's changed aspects, computed by ``own`` (default :func:`aspects_for_write`). Every
    backend applies this same rule, which is what keeps their write-back identical.

    Raises:
        CatalogError: when the write cannot be turned into valid aspects.
    """
    target = write_target(write)
    try:
        needed = prerequisites(write)
        changed = (own or aspects_for_write)(write, state.get(target, {}))
    except TranslationError as exc:
        raise CatalogError(f"cannot apply {write}: {exc}") from exc
    updates = [
        (urn, name, value)
        for urn, required in needed.items()
        for name, value in required.items()
        if name not in state.get(urn, {})
    ]
    return updates + [(target, name, value) for name, value in changed.items()]


def write_prerequisites(write: Write) -> dict[Urn, dict[str, JsonObject]]:
    """:func:`prerequisites`, with an untranslatable write reported as a CatalogError."""
    try:
        return prerequisites(write)
    except TranslationError as exc:
        raise CatalogError(f"cannot apply {write}: {exc}") from exc
