"""Build real DataHub metadata for tests: MCPs made with acryl-datahub's own classes.

Every builder returns a list of ``MetadataChangeProposalWrapper`` for one entity, so a test
catalog is a concatenation::

    mcps = [
        *dataset("raw.customers", fields=[("email", "string")], field_tags={"email": ["PII"]}),
        *ml_feature("customer_features", "email_domain", sources=["raw.customers"],
                    source_column="email"),
        *ml_model("churn", features=[feature_urn("customer_features", "email_domain")]),
    ]
    write_metadata_file(tmp_path / "metadata.json", mcps)

Names are short where DataHub allows: a dataset is given by name (``hive``/``PROD`` by default)
or by urn, a tag or term by name or urn, a structured property by qualified name or urn.
``observed_at`` dates every aspect of an entity (``systemMetadata.lastObserved``), which is
what gives Lite's version history its times.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from datahub.emitter import mce_builder as mb
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata import schema_classes as sc

MCPs = list[MetadataChangeProposalWrapper]
Field = tuple[str, str] | tuple[str, str, str]
"""``(path, type)`` or ``(path, type, native type)``; type as in :data:`FIELD_TYPES`."""

T0 = datetime(2025, 1, 1, tzinfo=UTC)
ACTOR = "urn:li:corpuser:test"

FieldType = (
    sc.BooleanTypeClass
    | sc.FixedTypeClass
    | sc.StringTypeClass
    | sc.BytesTypeClass
    | sc.NumberTypeClass
    | sc.DateTypeClass
    | sc.TimeTypeClass
    | sc.EnumTypeClass
    | sc.NullTypeClass
    | sc.MapTypeClass
    | sc.ArrayTypeClass
    | sc.UnionTypeClass
    | sc.RecordTypeClass
)
"""What ``SchemaFieldDataTypeClass(type=...)`` accepts."""

# Constructors, not classes: the SDK's generated ``__init__`` is unannotated, and a typed
# callable lets a call site stay typed.
FIELD_TYPES: dict[str, Callable[[], FieldType]] = {
    "string": sc.StringTypeClass,
    "number": sc.NumberTypeClass,
    "int": sc.NumberTypeClass,
    "long": sc.NumberTypeClass,
    "float": sc.NumberTypeClass,
    "double": sc.NumberTypeClass,
    "boolean": sc.BooleanTypeClass,
    "date": sc.DateTypeClass,
    "time": sc.TimeTypeClass,
    "timestamp": sc.TimeTypeClass,
    "bytes": sc.BytesTypeClass,
    "enum": sc.EnumTypeClass,
    "null": sc.NullTypeClass,
    "array": sc.ArrayTypeClass,
    "map": sc.MapTypeClass,
    "record": sc.RecordTypeClass,
    "union": sc.UnionTypeClass,
    "fixed": sc.FixedTypeClass,
}


# --- urns ----------------------------------------------------------------------------------


def dataset_urn(name: str, platform: str = "hive", env: str = "PROD") -> str:
    return mb.make_dataset_urn(platform, name, env)


def feature_urn(namespace: str, name: str) -> str:
    return mb.make_ml_feature_urn(namespace, name)


def primary_key_urn(namespace: str, name: str) -> str:
    return mb.make_ml_primary_key_urn(namespace, name)


def feature_table_urn(name: str, platform: str = "feast") -> str:
    return mb.make_ml_feature_table_urn(platform, name)


def model_urn(name: str, platform: str = "mlflow", env: str = "PROD") -> str:
    return mb.make_ml_model_urn(platform, name, env)


def training_run_urn(run_id: str) -> str:
    return f"urn:li:dataProcessInstance:{run_id}"


def data_job_urn(flow: str, job: str, orchestrator: str = "airflow") -> str:
    return mb.make_data_job_urn(orchestrator, flow, job, cluster="PROD")


def tag_urn(name: str) -> str:
    return name if name.startswith("urn:li:") else mb.make_tag_urn(name)


def term_urn(name: str) -> str:
    return name if name.startswith("urn:li:") else mb.make_term_urn(name)


def property_urn(qualified_name: str) -> str:
    prefix = "urn:li:structuredProperty:"
    return qualified_name if qualified_name.startswith(prefix) else prefix + qualified_name


def schema_field_urn(dataset: str, field_path: str) -> str:
    """The urn of a column of ``dataset`` (a name or urn), encoded as DataHub encodes it."""
    return mb.make_schema_field_urn(ds(dataset), field_path)


def ds(name_or_urn: str) -> str:
    """A dataset urn from a bare name (hive, PROD) or an urn, unchanged."""
    return name_or_urn if name_or_urn.startswith("urn:li:") else dataset_urn(name_or_urn)


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


# --- entities ------------------------------------------------------------------------------


def dataset(
    name: str,
    *,
    platform: str = "hive",
    env: str = "PROD",
    display_name: str | None = None,
    description: str | None = None,
    fields: Sequence[Field] | None = None,
    field_descriptions: Mapping[str, str] | None = None,
    field_tags: Mapping[str, Sequence[str]] | None = None,
    field_terms: Mapping[str, Sequence[str]] | None = None,
    editable_field_tags: Mapping[str, Sequence[str]] | None = None,
    editable_field_terms: Mapping[str, Sequence[str]] | None = None,
    editable_field_descriptions: Mapping[str, str] | None = None,
    upstreams: Sequence[str] = (),
    column_lineage: Sequence[tuple[str, str, str]] = (),
    last_operation: datetime | None = None,
    last_modified: datetime | None = None,
    tags: Sequence[str] = (),
    terms: Sequence[str] = (),
    structured_properties: Mapping[str, Sequence[str | float]] | None = None,
    custom_properties: Mapping[str, str] | None = None,
    deprecated: bool = False,
    deprecation_note: str = "",
    decommission_at: datetime | None = None,
    replacement: str | None = None,
    removed: bool | None = None,
    observed_at: datetime | None = None,
) -> MCPs:
    """A dataset. ``fields=None`` writes no schema at all; ``fields=[]`` an empty one.

    ``column_lineage`` items are ``(upstream dataset, upstream field, downstream field)``;
    their datasets are added to ``upstreams``.
    """
    urn = dataset_urn(name, platform, env)
    aspects: list[sc._Aspect] = []
    if display_name or description or custom_properties or last_modified:
        aspects.append(
            sc.DatasetPropertiesClass(
                name=display_name,
                description=description,
                customProperties=dict(custom_properties or {}),
                lastModified=sc.TimeStampClass(ms(last_modified)) if last_modified else None,
            )
        )
    if fields is not None:
        aspects.append(
            _schema(
                name,
                platform,
                fields,
                field_descriptions or {},
                field_tags or {},
                field_terms or {},
            )
        )
    editable = _editable_schema(
        editable_field_tags or {}, editable_field_terms or {}, editable_field_descriptions or {}
    )
    if editable is not None:
        aspects.append(editable)
    lineage_sources = [ds(u) for u in upstreams] + [ds(u) for u, _, _ in column_lineage]
    if lineage_sources:
        aspects.append(_upstream_lineage(urn, list(dict.fromkeys(lineage_sources)), column_lineage))
    if last_operation is not None:
        aspects.append(
            sc.OperationClass(
                timestampMillis=ms(last_operation),
                lastUpdatedTimestamp=ms(last_operation),
                operationType=sc.OperationTypeClass.UPDATE,
            )
        )
    aspects += _common(
        tags=tags,
        terms=terms,
        structured_properties=structured_properties,
        deprecated=deprecated,
        deprecation_note=deprecation_note,
        decommission_at=decommission_at,
        replacement=replacement,
        removed=removed,
    )
    return _mcps(urn, aspects, observed_at)


def ml_feature(
    namespace: str,
    name: str,
    *,
    sources: Sequence[str] = (),
    source_column: str | Sequence[str] | None = None,
    description: str | None = None,
    custom_properties: Mapping[str, str] | None = None,
    tags: Sequence[str] = (),
    terms: Sequence[str] = (),
    structured_properties: Mapping[str, Sequence[str | float]] | None = None,
    deprecated: bool = False,
    removed: bool | None = None,
    observed_at: datetime | None = None,
) -> MCPs:
    """An ML feature; ``source_column`` becomes the ``source_column`` custom property."""
    props = sc.MLFeaturePropertiesClass(
        sources=[ds(s) for s in sources],
        description=description,
        customProperties=_with_source_column(custom_properties, source_column),
    )
    aspects = [props, *_common(tags, terms, structured_properties, deprecated, removed=removed)]
    return _mcps(feature_urn(namespace, name), aspects, observed_at)


def ml_primary_key(
    namespace: str,
    name: str,
    *,
    sources: Sequence[str] = (),
    source_column: str | Sequence[str] | None = None,
    custom_properties: Mapping[str, str] | None = None,
    observed_at: datetime | None = None,
) -> MCPs:
    props = sc.MLPrimaryKeyPropertiesClass(
        sources=[ds(s) for s in sources],
        customProperties=_with_source_column(custom_properties, source_column),
    )
    return _mcps(primary_key_urn(namespace, name), [props], observed_at)


def ml_feature_table(
    name: str,
    *,
    platform: str = "feast",
    features: Sequence[str] = (),
    primary_keys: Sequence[str] = (),
    description: str | None = None,
    observed_at: datetime | None = None,
) -> MCPs:
    """A feature table; bare feature and key names are taken to live in namespace ``name``."""
    props = sc.MLFeatureTablePropertiesClass(
        mlFeatures=[f if f.startswith("urn:li:") else feature_urn(name, f) for f in features],
        mlPrimaryKeys=[
            k if k.startswith("urn:li:") else primary_key_urn(name, k) for k in primary_keys
        ],
        description=description,
    )
    return _mcps(feature_table_urn(name, platform), [props], observed_at)


def ml_model(
    name: str,
    *,
    platform: str = "mlflow",
    env: str = "PROD",
    display_name: str | None = None,
    features: Sequence[str] = (),
    training_jobs: Sequence[str] = (),
    training_data: Sequence[str] = (),
    date: datetime | None = None,
    created: datetime | None = None,
    tags: Sequence[str] = (),
    terms: Sequence[str] = (),
    structured_properties: Mapping[str, Sequence[str | float]] | None = None,
    custom_properties: Mapping[str, str] | None = None,
    deprecated: bool = False,
    removed: bool | None = None,
    observed_at: datetime | None = None,
) -> MCPs:
    """An ML model. ``features`` and ``training_jobs`` are urns; ``training_data`` datasets."""
    props = sc.MLModelPropertiesClass(
        name=display_name if display_name is not None else name,
        mlFeatures=list(features),
        trainingJobs=list(training_jobs),
        date=ms(date) if date else None,
        created=sc.TimeStampClass(ms(created)) if created else None,
        customProperties=dict(custom_properties or {}),
    )
    aspects: list[sc._Aspect] = [props]
    if training_data:
        aspects.append(
            sc.TrainingDataClass(trainingData=[sc.BaseDataClass(ds(d)) for d in training_data])
        )
    aspects += _common(tags, terms, structured_properties, deprecated, removed=removed)
    return _mcps(model_urn(name, platform, env), aspects, observed_at)


def training_run(
    run_id: str,
    *,
    created: datetime | None = T0,
    name: str | None = None,
    inputs: Sequence[str] = (),
    outputs: Sequence[str] = (),
    observed_at: datetime | None = None,
) -> MCPs:
    """A training run (``dataProcessInstance``); ``created=None`` leaves its time unknown (0)."""
    aspects: list[sc._Aspect] = [
        sc.DataProcessInstancePropertiesClass(
            name=name or run_id,
            created=sc.AuditStampClass(ms(created) if created else 0, ACTOR),
        )
    ]
    if inputs:
        aspects.append(sc.DataProcessInstanceInputClass(inputs=[ds(i) for i in inputs]))
    if outputs:
        aspects.append(sc.DataProcessInstanceOutputClass(outputs=[ds(o) for o in outputs]))
    return _mcps(training_run_urn(run_id), aspects, observed_at)


def data_job(
    flow: str,
    job: str,
    *,
    orchestrator: str = "airflow",
    inputs: Sequence[str] = (),
    outputs: Sequence[str] = (),
    input_jobs: Sequence[str] = (),
    observed_at: datetime | None = None,
) -> MCPs:
    """A pipeline task reading ``inputs`` and writing ``outputs`` (dataset names or urns)."""
    aspects: list[sc._Aspect] = [
        sc.DataJobInfoClass(name=job, type=sc.AzkabanJobTypeClass.COMMAND),
        sc.DataJobInputOutputClass(
            inputDatasets=[ds(i) for i in inputs],
            outputDatasets=[ds(o) for o in outputs],
            inputDatajobs=list(input_jobs),
        ),
    ]
    return _mcps(data_job_urn(flow, job, orchestrator), aspects, observed_at)


def tag(name: str, description: str | None = None) -> MCPs:
    props = sc.TagPropertiesClass(name=name, description=description)
    return _mcps(tag_urn(name), [props], None)


def observed(mcps: Iterable[MetadataChangeProposalWrapper], at: datetime) -> MCPs:
    """Copies of ``mcps`` dated ``at`` (``systemMetadata.lastObserved``)."""
    return [
        dataclasses.replace(m, systemMetadata=sc.SystemMetadataClass(lastObserved=ms(at)))
        for m in mcps
    ]


def owned_by(urn: str, owners: Sequence[str]) -> MCPs:
    """``ownership`` of ``urn``: each owner (a corpuser or corpGroup urn) a technical owner."""
    ownership = sc.OwnershipClass(
        owners=[sc.OwnerClass(owner, sc.OwnershipTypeClass.TECHNICAL_OWNER) for owner in owners]
    )
    return _mcps(urn, [ownership], None)


def corp_group(
    name: str, *, slack: str | None = None, email: str | None = None, display_name: str = ""
) -> MCPs:
    """A group as DataHub keeps it: ``corpGroupInfo`` and ``corpGroupEditableInfo``."""
    info = sc.CorpGroupInfoClass(
        displayName=display_name or name, admins=[], members=[], groups=[], email=email
    )
    editable = sc.CorpGroupEditableInfoClass(slack=slack, email=email)
    return _mcps(f"urn:li:corpGroup:{name}", [info, editable], None)


def corp_user(name: str, *, display_name: str | None = None, slack: str | None = None) -> MCPs:
    """A person as DataHub keeps them: ``corpUserInfo`` and ``corpUserEditableInfo``."""
    info = sc.CorpUserInfoClass(active=True, displayName=display_name, fullName=display_name)
    editable = sc.CorpUserEditableInfoClass(slack=slack, displayName=display_name)
    return _mcps(f"urn:li:corpuser:{name}", [info, editable], None)


def write_metadata_file(path: Path, mcps: Iterable[MetadataChangeProposalWrapper]) -> Path:
    """Write ``mcps`` as DataHub's file sink does: a JSON list of MCPs in the ``json`` form."""
    records = [m.to_obj(simplified_structure=True) for m in mcps]
    path.write_text(json.dumps(records, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


# --- helpers -------------------------------------------------------------------------------


def _mcps(urn: str, aspects: Sequence[sc._Aspect], observed_at: datetime | None) -> MCPs:
    mcps = MetadataChangeProposalWrapper.construct_many(urn, list(aspects))
    return observed(mcps, observed_at) if observed_at else mcps


def _common(
    tags: Sequence[str] = (),
    terms: Sequence[str] = (),
    structured_properties: Mapping[str, Sequence[str | float]] | None = None,
    deprecated: bool = False,
    deprecation_note: str = "",
    decommission_at: datetime | None = None,
    replacement: str | None = None,
    removed: bool | None = None,
) -> list[sc._Aspect]:
    aspects: list[sc._Aspect] = []
    if tags:
        aspects.append(_tags(tags))
    if terms:
        aspects.append(_terms(terms))
    if structured_properties:
        aspects.append(
            sc.StructuredPropertiesClass(
                properties=[
                    sc.StructuredPropertyValueAssignmentClass(
                        property_urn(k), [v if isinstance(v, str) else float(v) for v in values]
                    )
                    for k, values in structured_properties.items()
                ]
            )
        )
    if deprecated:
        aspects.append(
            sc.DeprecationClass(
                deprecated=True,
                note=deprecation_note,
                actor=ACTOR,
                decommissionTime=ms(decommission_at) if decommission_at else None,
                replacement=replacement,
            )
        )
    if removed is not None:
        aspects.append(sc.StatusClass(removed=removed))
    return aspects


def _tags(names: Sequence[str]) -> sc.GlobalTagsClass:
    return sc.GlobalTagsClass(tags=[sc.TagAssociationClass(tag_urn(n)) for n in names])


def _terms(names: Sequence[str]) -> sc.GlossaryTermsClass:
    return sc.GlossaryTermsClass(
        terms=[sc.GlossaryTermAssociationClass(term_urn(n)) for n in names],
        auditStamp=sc.AuditStampClass(0, ACTOR),
    )


def _schema(
    name: str,
    platform: str,
    fields: Sequence[Field],
    descriptions: Mapping[str, str],
    tags: Mapping[str, Sequence[str]],
    terms: Mapping[str, Sequence[str]],
) -> sc.SchemaMetadataClass:
    return sc.SchemaMetadataClass(
        schemaName=name,
        platform=mb.make_data_platform_urn(platform),
        version=0,
        hash="",
        platformSchema=sc.OtherSchemaClass(rawSchema=""),
        fields=[
            sc.SchemaFieldClass(
                fieldPath=field[0],
                type=sc.SchemaFieldDataTypeClass(type=_field_type(field[1])),
                nativeDataType=field[2] if len(field) == 3 else field[1],
                description=descriptions.get(field[0]),
                globalTags=_tags(tags[field[0]]) if field[0] in tags else None,
                glossaryTerms=_terms(terms[field[0]]) if field[0] in terms else None,
            )
            for field in fields
        ],
    )


def _field_type(name: str) -> FieldType:
    return FIELD_TYPES[name.lower()]()


def _editable_schema(
    tags: Mapping[str, Sequence[str]],
    terms: Mapping[str, Sequence[str]],
    descriptions: Mapping[str, str],
) -> sc.EditableSchemaMetadataClass | None:
    paths = list(dict.fromkeys([*tags, *terms, *descriptions]))
    if not paths:
        return None
    return sc.EditableSchemaMetadataClass(
        editableSchemaFieldInfo=[
            sc.EditableSchemaFieldInfoClass(
                fieldPath=path,
                description=descriptions.get(path),
                globalTags=_tags(tags[path]) if path in tags else None,
                glossaryTerms=_terms(terms[path]) if path in terms else None,
            )
            for path in paths
        ]
    )


def _upstream_lineage(
    urn: str, sources: Sequence[str], column_lineage: Sequence[tuple[str, str, str]]
) -> sc.UpstreamLineageClass:
    return sc.UpstreamLineageClass(
        upstreams=[
            sc.UpstreamClass(dataset=s, type=sc.DatasetLineageTypeClass.TRANSFORMED)
            for s in sources
        ],
        fineGrainedLineages=[
            sc.FineGrainedLineageClass(
                upstreamType=sc.FineGrainedLineageUpstreamTypeClass.FIELD_SET,
                downstreamType=sc.FineGrainedLineageDownstreamTypeClass.FIELD,
                upstreams=[schema_field_urn(up, up_field)],
                downstreams=[schema_field_urn(urn, down_field)],
            )
            for up, up_field, down_field in column_lineage
        ]
        or None,
    )


def _with_source_column(
    custom: Mapping[str, str] | None, source_column: str | Sequence[str] | None
) -> dict[str, str]:
    props = dict(custom or {})
    if source_column is not None:
        columns = [source_column] if isinstance(source_column, str) else list(source_column)
        props["source_column"] = ",".join(columns)
    return props
