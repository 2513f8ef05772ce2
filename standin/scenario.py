"""A small ML catalogue that exercises every lineage rule and gap the stand-in reproduces.

    LANDING ← RAW ← CURATED ← F_EMAIL, F_TENURE ← MODEL → JOB (TrainedBy)
                 ↖ REMOVED (soft-deleted)          ↖ F_ORDERS ← LEGACY (deprecated)
    RAW ← TRAINING  (reachable from MODEL only through mlModelTrainingData: not lineage)
    TABLE contains F_EMAIL, F_TENURE and is keyed by PK (relationships, not lineage)
    MODEL deployed to DEPLOYMENT (DeployedTo: not lineage)

Upstream of MODEL, DataHub returns F_* and JOB at degree 1, CURATED and LEGACY at 2, RAW at 3
and LANDING at 4; never TRAINING, TABLE, PK, DEPLOYMENT or the soft-deleted REMOVED.
"""

from __future__ import annotations

from collections.abc import Sequence

from datahub.emitter import mce_builder as mb
from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata import schema_classes as sc

T0 = 1735689600000  # 2025-01-01T00:00:00Z
DAY = 86_400_000
ACTOR = "urn:li:corpuser:etl"


def _ds(name: str) -> str:
    return mb.make_dataset_urn("hive", name, "PROD")


LANDING = _ds("landing.customers")
RAW = _ds("raw.customers")
CURATED = _ds("curated.customers")
REMOVED = _ds("old.customers")
LEGACY = _ds("legacy.orders")
TRAINING = _ds("train.churn")
F_EMAIL = mb.make_ml_feature_urn("customer_features", "email_domain")
F_TENURE = mb.make_ml_feature_urn("customer_features", "tenure_days")
F_ORDERS = mb.make_ml_feature_urn("order_features", "order_count")
PK = mb.make_ml_primary_key_urn("customer_features", "customer_id")
TABLE = mb.make_ml_feature_table_urn("feast", "customer_features")
MODEL = mb.make_ml_model_urn("mlflow", "churn", "PROD")
JOB = mb.make_data_job_urn("airflow", "train_churn", "train")
DEPLOYMENT = "urn:li:mlModelDeployment:(urn:li:dataPlatform:sagemaker,churn-prod,PROD)"
TAG_PII = mb.make_tag_urn("PII")
TAG_SENSITIVE = mb.make_tag_urn("Sensitive")
PROP_RISK = "urn:li:structuredProperty:io.mlcopilot.risk_score"
PROP_NOTE = "urn:li:structuredProperty:io.mlcopilot.note"

UPSTREAM_OF_MODEL = {
    F_EMAIL: 1,
    F_TENURE: 1,
    F_ORDERS: 1,
    JOB: 1,
    CURATED: 2,
    LEGACY: 2,
    RAW: 3,
    LANDING: 4,
}


def field_urn(dataset: str, path: str) -> str:
    return mb.make_schema_field_urn(dataset, path)


def _meta(time: int) -> sc.SystemMetadataClass:
    return sc.SystemMetadataClass(lastObserved=time, runId="scenario")


def _mcp(urn: str, aspect: object, time: int = T0) -> MetadataChangeProposalWrapper:
    return MetadataChangeProposalWrapper(entityUrn=urn, aspect=aspect, systemMetadata=_meta(time))  # type: ignore[arg-type]


def _schema(
    urn: str, fields: list[tuple[str, str]], tags: dict[str, str] | None = None
) -> sc.SchemaMetadataClass:
    tags = tags or {}
    return sc.SchemaMetadataClass(
        schemaName=urn,
        platform="urn:li:dataPlatform:hive",
        version=0,
        hash="",
        platformSchema=sc.OtherSchemaClass(rawSchema=""),
        fields=[
            sc.SchemaFieldClass(
                fieldPath=path,
                type=sc.SchemaFieldDataTypeClass(
                    type=sc.NumberTypeClass() if native == "bigint" else sc.StringTypeClass()  # type: ignore[no-untyped-call]
                ),
                nativeDataType=native,
                globalTags=sc.GlobalTagsClass(tags=[sc.TagAssociationClass(tags[path])])
                if path in tags
                else None,
            )
            for path, native in fields
        ],
    )


def _props(name: str, modified: int) -> sc.DatasetPropertiesClass:
    return sc.DatasetPropertiesClass(
        name=name,
        description=f"{name} (scenario)",
        customProperties={"owner_team": "ml"},
        lastModified=sc.TimeStampClass(time=modified, actor=ACTOR),
    )


def _upstreams(
    urn: str, parents: list[str], columns: Sequence[tuple[str, str]] = ()
) -> sc.UpstreamLineageClass:
    return sc.UpstreamLineageClass(
        upstreams=[
            sc.UpstreamClass(dataset=p, type=sc.DatasetLineageTypeClass.TRANSFORMED)
            for p in parents
        ],
        fineGrainedLineages=[
            sc.FineGrainedLineageClass(
                upstreamType=sc.FineGrainedLineageUpstreamTypeClass.FIELD_SET,
                downstreamType=sc.FineGrainedLineageDownstreamTypeClass.FIELD,
                upstreams=[up],
                downstreams=[down],
            )
            for up, down in columns
        ]
        or None,
    )


def ml_catalog() -> list[MetadataChangeProposalWrapper]:
    """The catalogue above, as MCPs; CURATED's schema has two versions (a field was added)."""
    mcps = [
        _mcp(LANDING, _props("landing.customers", T0)),
        _mcp(LANDING, _schema(LANDING, [("customer_id", "bigint"), ("email", "varchar")])),
        _mcp(RAW, _props("raw.customers", T0 + DAY)),
        _mcp(
            RAW,
            _schema(RAW, [("customer_id", "bigint"), ("email", "varchar")], {"email": TAG_PII}),
        ),
        _mcp(
            RAW,
            _upstreams(RAW, [LANDING], [(field_urn(LANDING, "email"), field_urn(RAW, "email"))]),
        ),
        _mcp(REMOVED, _props("old.customers", T0)),
        _mcp(REMOVED, sc.StatusClass(removed=True)),
        _mcp(CURATED, _props("curated.customers", T0 + 2 * DAY)),
        _mcp(CURATED, _schema(CURATED, [("customer_id", "bigint"), ("email_domain", "varchar")])),
        _mcp(
            CURATED,
            _schema(
                CURATED,
                [("customer_id", "bigint"), ("email_domain", "varchar"), ("tenure_days", "bigint")],
            ),
            T0 + 3 * DAY,
        ),
        _mcp(
            CURATED,
            _upstreams(
                CURATED,
                [RAW, REMOVED],
                [(field_urn(RAW, "email"), field_urn(CURATED, "email_domain"))],
            ),
        ),
        _mcp(LEGACY, _props("legacy.orders", T0)),
        _mcp(LEGACY, _schema(LEGACY, [("order_id", "bigint")])),
        _mcp(LEGACY, sc.DeprecationClass(deprecated=True, note="use orders_v2", actor=ACTOR)),
        _mcp(TRAINING, _props("train.churn", T0 + 2 * DAY)),
        _mcp(TRAINING, _upstreams(TRAINING, [RAW])),
        _mcp(F_EMAIL, sc.MLFeaturePropertiesClass(description="email domain", sources=[CURATED])),
        _mcp(F_TENURE, sc.MLFeaturePropertiesClass(description="tenure", sources=[CURATED])),
        _mcp(F_ORDERS, sc.MLFeaturePropertiesClass(description="orders", sources=[LEGACY])),
        _mcp(PK, sc.MLPrimaryKeyPropertiesClass(sources=[CURATED])),
        _mcp(
            TABLE,
            sc.MLFeatureTablePropertiesClass(mlFeatures=[F_EMAIL, F_TENURE], mlPrimaryKeys=[PK]),
        ),
        _mcp(
            MODEL,
            sc.MLModelPropertiesClass(
                name="churn",
                description="churn model",
                mlFeatures=[F_EMAIL, F_TENURE, F_ORDERS],
                trainingJobs=[JOB],
                deployments=[DEPLOYMENT],
            ),
        ),
        _mcp(MODEL, sc.TrainingDataClass(trainingData=[sc.BaseDataClass(dataset=TRAINING)])),
        _mcp(JOB, sc.DataJobInfoClass(name="train_churn", type="COMMAND")),
        _mcp(DEPLOYMENT, sc.MLModelDeploymentPropertiesClass(description="prod endpoint")),
        _mcp(TAG_PII, sc.TagPropertiesClass(name="PII")),
        _mcp(TAG_SENSITIVE, sc.TagPropertiesClass(name="Sensitive")),
        _mcp(
            PROP_RISK,
            sc.StructuredPropertyDefinitionClass(
                qualifiedName="io.mlcopilot.risk_score",
                valueType="urn:li:dataType:datahub.number",
                entityTypes=[
                    "urn:li:entityType:datahub.dataset",
                    "urn:li:entityType:datahub.mlModel",
                ],
                cardinality=sc.PropertyCardinalityClass.SINGLE,
            ),
        ),
        _mcp(
            PROP_NOTE,
            sc.StructuredPropertyDefinitionClass(
                qualifiedName="io.mlcopilot.note",
                valueType="urn:li:dataType:datahub.string",
                entityTypes=[
                    "urn:li:entityType:datahub.dataset",
                    "urn:li:entityType:datahub.mlModel",
                ],
            ),
        ),
    ]
    for i in range(2):  # two load operations on CURATED, a day apart
        op = sc.OperationClass(
            timestampMillis=T0 + (2 + i) * DAY,
            lastUpdatedTimestamp=T0 + (2 + i) * DAY,
            operationType=sc.OperationTypeClass.INSERT,
            actor=ACTOR,
        )
        mcps.append(_mcp(CURATED, op, T0 + (2 + i) * DAY))
    return mcps
