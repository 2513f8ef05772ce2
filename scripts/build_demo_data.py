"""Build the demo's DataHub metadata files (src/mlcopilot/demo_data/*.json).

The demo ships real DataHub metadata files, in the file-sink format `datahub ingest` and
`mlcopilot catalog load` read, so a user can open them and see exactly what the demo loads.
They are generated here with acryl-datahub's own classes; `tests/test_demo.py` checks that the
shipped files are what this script produces. Run: `.venv/bin/python scripts/build_demo_data.py`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from pathlib import Path

import datahub.metadata.schema_classes as m
from datahub.emitter.mce_builder import (
    make_dataset_urn,
    make_group_urn,
    make_ml_feature_table_urn,
    make_ml_feature_urn,
    make_ml_model_urn,
    make_schema_field_urn,
    make_tag_urn,
    make_user_urn,
)
from datahub.emitter.mcp import MetadataChangeProposalWrapper

OUT = Path(__file__).resolve().parents[1] / "src" / "mlcopilot" / "demo_data"

# The demo's clock: fixed, so every run shows the same story.
INITIAL_LOAD = datetime(2026, 9, 1, tzinfo=UTC)
TRAINED = datetime(2026, 10, 1, tzinfo=UTC)
SCHEMA_CHANGE = datetime(2026, 11, 21, 8, tzinfo=UTC)
RESTORE = datetime(2026, 11, 22, 8, tzinfo=UTC)

CUSTOMERS = make_dataset_urn("hive", "raw.customers")
TRANSACTIONS = make_dataset_urn("hive", "raw.transactions")
SEGMENTS = make_dataset_urn("hive", "legacy.customer_segments")
CUSTOMER_360 = make_dataset_urn("snowflake", "curated.customer_360")
SEGMENTS_V2 = make_dataset_urn("snowflake", "curated.customer_segments_v2")
TENURE = make_ml_feature_urn("churn_features", "tenure_days")
SPEND = make_ml_feature_urn("churn_features", "spend_90d")
FEATURE_TABLE = make_ml_feature_table_urn("feast", "churn_features")
MODEL = make_ml_model_urn("mlflow", "churn_predictor_v1", "PROD")
ACTOR = "urn:li:corpuser:datahub"
# Who owns the raw tables, and where they work (``owners()``).
GROWTH_ML = make_group_urn("growth-ml")
PAYMENTS_ML = make_group_urn("payments-ml")
MAYA = make_user_urn("maya.chen")
RAVI = make_user_urn("ravi.rao")

# Constructors typed as callables: the SDK's generated __init__ has no annotations.
_TYPES: dict[
    str, Callable[[], m.StringTypeClass | m.NumberTypeClass | m.DateTypeClass | m.TimeTypeClass]
] = {
    "string": m.StringTypeClass,
    "long": m.NumberTypeClass,
    "double": m.NumberTypeClass,
    "date": m.DateTypeClass,
    "timestamp": m.TimeTypeClass,
}


def ms(when: datetime) -> int:
    """Epoch milliseconds, DataHub's time unit."""
    return int(when.timestamp() * 1000)


def schema(
    name: str, fields: list[tuple[str, str, str]], pii: Collection[str] = frozenset()
) -> m.SchemaMetadataClass:
    """A schemaMetadata aspect; ``fields`` are (path, logical type, description)."""
    return m.SchemaMetadataClass(
        schemaName=name,
        platform="urn:li:dataPlatform:hive",
        version=0,
        hash="",
        platformSchema=m.OtherSchemaClass(rawSchema=""),
        fields=[
            m.SchemaFieldClass(
                fieldPath=path,
                type=m.SchemaFieldDataTypeClass(type=_TYPES[kind]()),
                nativeDataType=kind,
                description=description,
                globalTags=m.GlobalTagsClass(tags=[m.TagAssociationClass(make_tag_urn("PII"))])
                if path in pii
                else None,
            )
            for path, kind, description in fields
        ],
    )


def mcp(urn: str, aspect: object, at: datetime) -> dict[str, object]:
    """One MCP in DataHub's file format, dated ``at`` (Lite keeps it as that version's time)."""
    wrapper = MetadataChangeProposalWrapper(
        entityUrn=urn,
        aspect=aspect,  # type: ignore[arg-type]
        systemMetadata=m.SystemMetadataClass(lastObserved=ms(at), runId="mlcopilot-demo"),
    )
    return wrapper.to_obj(simplified_structure=True)


CUSTOMERS_FIELDS = [
    ("customer_id", "long", "Primary key"),
    ("email", "string", "Contact email address"),
    ("signup_date", "date", "Day the customer signed up"),
    ("country", "string", "ISO country of residence"),
    ("plan", "string", "Subscription plan"),
]


def initial_catalog() -> list[dict[str, object]]:
    """The catalog as it stood when the model was trained."""
    t = INITIAL_LOAD
    records = [
        mcp(make_tag_urn("PII"), m.TagPropertiesClass(name="PII", description="Personal data"), t),
        mcp(
            CUSTOMERS,
            m.DatasetPropertiesClass(
                name="raw.customers",
                description="Customer master data from the CRM.",
                customProperties={"freshness_sla_hours": "24"},
            ),
            t,
        ),
        mcp(CUSTOMERS, schema("raw.customers", CUSTOMERS_FIELDS, pii={"email"}), t),
        mcp(
            CUSTOMERS,
            m.OperationClass(
                timestampMillis=ms(datetime(2026, 11, 20, 2, tzinfo=UTC)),
                operationType=m.OperationTypeClass.UPDATE,
                lastUpdatedTimestamp=ms(datetime(2026, 11, 20, 2, tzinfo=UTC)),
            ),
            t,
        ),
        mcp(
            TRANSACTIONS,
            m.DatasetPropertiesClass(
                name="raw.transactions", description="Card transactions, loaded hourly."
            ),
            t,
        ),
        mcp(
            TRANSACTIONS,
            schema(
                "raw.transactions",
                [
                    ("transaction_id", "long", "Primary key"),
                    ("customer_id", "long", "Who paid"),
                    ("amount", "double", "Amount in the account currency"),
                    ("currency", "string", "ISO currency"),
                    ("created_at", "timestamp", "When the transaction happened"),
                ],
            ),
            t,
        ),
        mcp(
            TRANSACTIONS,
            m.StructuredPropertiesClass(
                properties=[
                    m.StructuredPropertyValueAssignmentClass(
                        propertyUrn="urn:li:structuredProperty:io.mlcopilot.freshnessSlaHours",
                        values=[24.0],
                    )
                ]
            ),
            t,
        ),
        mcp(
            TRANSACTIONS,
            m.OperationClass(
                timestampMillis=ms(datetime(2026, 11, 16, 6, tzinfo=UTC)),
                operationType=m.OperationTypeClass.INSERT,
                lastUpdatedTimestamp=ms(datetime(2026, 11, 16, 6, tzinfo=UTC)),
            ),
            t,
        ),
        mcp(
            SEGMENTS,
            m.DatasetPropertiesClass(
                name="legacy.customer_segments", description="Marketing segments (legacy job)."
            ),
            t,
        ),
        mcp(
            SEGMENTS,
            schema(
                "legacy.customer_segments",
                [("customer_id", "long", ""), ("segment", "string", "Marketing segment")],
            ),
            t,
        ),
        mcp(
            SEGMENTS,
            m.DeprecationClass(
                deprecated=True,
                note="The legacy segmentation job is being retired.",
                actor=ACTOR,
                decommissionTime=ms(datetime(2026, 12, 15, tzinfo=UTC)),
                replacement=SEGMENTS_V2,
            ),
            t,
        ),
        mcp(
            CUSTOMER_360,
            m.DatasetPropertiesClass(
                name="curated.customer_360",
                description="One row per customer, joined from the raw tables.",
            ),
            t,
        ),
        mcp(
            CUSTOMER_360,
            schema(
                "curated.customer_360",
                [
                    ("customer_id", "long", ""),
                    ("email_domain", "string", "Domain part of the email"),
                    ("tenure_days", "long", "Days since signup"),
                    ("spend_90d", "double", "Spend over the last 90 days"),
                    ("segment", "string", "Marketing segment"),
                ],
            ),
            t,
        ),
        mcp(
            CUSTOMER_360,
            m.UpstreamLineageClass(
                upstreams=[
                    m.UpstreamClass(dataset=u, type=m.DatasetLineageTypeClass.TRANSFORMED)
                    for u in (CUSTOMERS, TRANSACTIONS, SEGMENTS)
                ],
                fineGrainedLineages=[
                    m.FineGrainedLineageClass(
                        upstreamType=m.FineGrainedLineageUpstreamTypeClass.FIELD_SET,
                        downstreamType=m.FineGrainedLineageDownstreamTypeClass.FIELD,
                        upstreams=[make_schema_field_urn(up, up_field)],
                        downstreams=[make_schema_field_urn(CUSTOMER_360, down_field)],
                    )
                    for up, up_field, down_field in (
                        (CUSTOMERS, "customer_id", "customer_id"),
                        (CUSTOMERS, "email", "email_domain"),
                        (CUSTOMERS, "signup_date", "tenure_days"),
                        (TRANSACTIONS, "amount", "spend_90d"),
                        (SEGMENTS, "segment", "segment"),
                    )
                ],
            ),
            t,
        ),
        mcp(
            TENURE,
            m.MLFeaturePropertiesClass(
                description="Days since the customer signed up",
                dataType=m.MLFeatureDataTypeClass.CONTINUOUS,
                sources=[CUSTOMERS],
                customProperties={"source_column": "signup_date"},
            ),
            t,
        ),
        mcp(
            SPEND,
            m.MLFeaturePropertiesClass(
                description="Spend over the last 90 days",
                dataType=m.MLFeatureDataTypeClass.CONTINUOUS,
                sources=[TRANSACTIONS],
                customProperties={"source_column": "amount"},
            ),
            t,
        ),
        mcp(
            FEATURE_TABLE,
            m.MLFeatureTablePropertiesClass(
                description="Features of the churn model", mlFeatures=[TENURE, SPEND]
            ),
            t,
        ),
        mcp(
            MODEL,
            m.MLModelPropertiesClass(
                name="churn_predictor_v1",
                description="Predicts customer churn over the next 30 days.",
                date=ms(TRAINED),
                mlFeatures=[TENURE, SPEND],
                type="gradient boosted trees",
            ),
            t,
        ),
        mcp(
            MODEL,
            m.TrainingDataClass(
                trainingData=[
                    m.BaseDataClass(dataset=CUSTOMER_360, motivation="One row per customer")
                ]
            ),
            t,
        ),
    ]
    return records + owners()


def ownership(*owners: str) -> m.OwnershipClass:
    """Technical owners: the ``type`` and the system ``typeUrn``, as DataHub writes both."""
    return m.OwnershipClass(
        owners=[
            m.OwnerClass(
                owner=owner,
                type=m.OwnershipTypeClass.TECHNICAL_OWNER,
                typeUrn="urn:li:ownershipType:__system__technical_owner",
            )
            for owner in owners
        ],
        lastModified=m.AuditStampClass(time=ms(INITIAL_LOAD), actor=ACTOR),
    )


def owners() -> list[dict[str, object]]:
    """Two teams and one person of each, who own the two raw tables the model reads.

    Their incidents reach them where they work once ``notify.owners`` includes ``"entity"``
    (the model itself has no owner: by default the demo's notifications go where the
    settings send them).

    The groups come from the identity provider (``corpGroupInfo``) and were given their Slack
    channel in DataHub (``corpGroupEditableInfo``: a channel id, a channel name); the people
    set their Slack member id and display name on their DataHub profile
    (``corpUserEditableInfo``).
    """
    t = INITIAL_LOAD
    people = (
        (MAYA, GROWTH_ML, "Maya Chen", "U0MAYACHEN", "maya.chen@example.com"),
        (RAVI, PAYMENTS_ML, "Ravi Rao", "U0RAVIRAO1", "ravi.rao@example.com"),
    )
    teams = (
        (GROWTH_ML, "Growth ML", "C0GROWTHML", "growth-ml@example.com", MAYA),
        (PAYMENTS_ML, "Payments ML", "#payments-ml", "payments-ml@example.com", RAVI),
    )
    records: list[dict[str, object]] = []
    for group, name, slack, email, member in teams:
        records += [
            mcp(
                group,
                m.CorpGroupInfoClass(
                    displayName=name, email=email, admins=[member], members=[member], groups=[]
                ),
                t,
            ),
            mcp(group, m.CorpGroupEditableInfoClass(slack=slack, email=email), t),
        ]
    for user, group, name, member_id, email in people:
        records += [
            mcp(
                user,
                m.CorpUserInfoClass(active=True, displayName=name, fullName=name, email=email),
                t,
            ),
            mcp(
                user,
                m.CorpUserEditableInfoClass(
                    displayName=name, slack=member_id, email=email, teams=[short(group)]
                ),
                t,
            ),
        ]
    return [
        *records,
        mcp(CUSTOMERS, ownership(GROWTH_ML, MAYA), t),
        mcp(TRANSACTIONS, ownership(PAYMENTS_ML, RAVI), t),
    ]


def short(urn: str) -> str:
    """The id at the end of an urn."""
    return urn.rsplit(":", 1)[-1]


def refreshed(when: datetime) -> m.OperationClass:
    """The table was rewritten at ``when`` (so it stays within its freshness SLA)."""
    return m.OperationClass(
        timestampMillis=ms(when),
        operationType=m.OperationTypeClass.UPDATE,
        lastUpdatedTimestamp=ms(when),
    )


def schema_change() -> list[dict[str, object]]:
    """Upstream, someone renames `country` and drops `signup_date` from raw.customers."""
    fields = [
        ("customer_id", "long", "Primary key"),
        ("email", "string", "Contact email address"),
        ("country_code", "string", "ISO country of residence"),
        ("plan", "string", "Subscription plan"),
    ]
    return [
        mcp(CUSTOMERS, schema("raw.customers", fields, pii={"email"}), SCHEMA_CHANGE),
        mcp(CUSTOMERS, refreshed(SCHEMA_CHANGE), SCHEMA_CHANGE),
    ]


def restore() -> list[dict[str, object]]:
    """The upstream team puts `signup_date` back (the rename stays)."""
    fields = [
        ("customer_id", "long", "Primary key"),
        ("email", "string", "Contact email address"),
        ("signup_date", "date", "Day the customer signed up"),
        ("country_code", "string", "ISO country of residence"),
        ("plan", "string", "Subscription plan"),
    ]
    return [
        mcp(CUSTOMERS, schema("raw.customers", fields, pii={"email"}), RESTORE),
        mcp(CUSTOMERS, refreshed(RESTORE), RESTORE),
    ]


FILES = {
    "01_catalog.json": initial_catalog,
    "02_schema_change.json": schema_change,
    "03_restore_column.json": restore,
}


def render(build: object) -> str:
    """The file text for one builder."""
    assert callable(build)
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    """Write every demo file."""
    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in FILES.items():
        (OUT / name).write_text(render(build), encoding="utf-8")
        print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
