"""The behaviour every Catalog backend must have, as one reusable test suite.

A backend's test module subclasses :class:`CatalogContract` and provides a ``make_catalog``
fixture: ``make_catalog(mcps) -> Catalog``, a fresh catalog holding exactly those DataHub MCPs
(in order; an MCP's ``systemMetadata.lastObserved`` dates its version). Only the ``Catalog``
protocol is used here, so the lite, GraphQL and MCP backends all run it unchanged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta

from datahub.emitter.mcp import MetadataChangeProposalWrapper
from datahub.metadata.schema_classes import OwnerClass, OwnershipClass, OwnershipTypeClass

from mlcopilot.model import (
    AssertionState,
    ColumnEdge,
    DocumentWrite,
    Edge,
    EntityType,
    IncidentWrite,
    PropertyWrite,
    Schema,
    SchemaField,
    TagWrite,
    Write,
)
from mlcopilot.protocols import Catalog, WalkLimits
from mlcopilot.scan.shared import rescan_models
from testing.builders import (
    T0,
    data_job,
    data_job_urn,
    dataset,
    dataset_urn,
    feature_table_urn,
    feature_urn,
    ml_feature,
    ml_feature_table,
    ml_model,
    ml_primary_key,
    model_urn,
    observed,
    primary_key_urn,
    property_urn,
    tag_urn,
    term_urn,
    training_run,
    training_run_urn,
)
from tests.catalog.signals import (
    assertion_urn,
    dbt_test,
    freshness_assertion,
    ge_expectation,
    incident,
    incident_urn,
    removed,
    run,
)

MakeCatalog = Callable[[Sequence[MetadataChangeProposalWrapper]], Catalog]

RAW = dataset_urn("raw.customers")
CLEAN = dataset_urn("clean.customers")
FEATURE = feature_urn("customer_features", "email_domain")
MODEL = model_urn("churn")
PII = tag_urn("PII")
JUSTIFICATION = property_urn("io.mlcopilot.piiJustification")
RISK = property_urn("io.mlcopilot.risk")


def edges_of(catalog: Catalog, urn: str) -> set[Edge]:
    return set(catalog.upstream([urn]))


def by_urn(states: tuple[AssertionState, ...] | None) -> dict[str, AssertionState]:
    assert states is not None
    return {a.urn: a for a in states}


class CatalogContract:
    """Run with a ``make_catalog`` fixture; see the module docstring."""

    # --- models() ------------------------------------------------------------------------

    def test_models_lists_only_ml_models_sorted(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            [
                *ml_model("zeta"),
                *ml_model("alpha", platform="sagemaker"),
                *dataset("raw.customers", fields=[("id", "string")]),
                *ml_feature("customer_features", "email_domain"),
            ]
        )
        assert catalog.models() == sorted([model_urn("zeta"), model_urn("alpha", "sagemaker")])

    def test_models_skips_soft_deleted_models(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog([*ml_model("live", removed=False), *ml_model("gone", removed=True)])
        assert catalog.models() == [model_urn("live")]

    def test_a_full_rescan_lists_every_model_models_lists_and_no_other_entity(
        self, make_catalog: MakeCatalog
    ) -> None:
        catalog = make_catalog(
            [
                *ml_model("live", removed=False),
                *ml_model("gone", removed=True),
                *dataset("raw.customers", fields=[("id", "string")]),
            ]
        )
        # From an index, soft-deleted models may be listed too (DataHub's search through
        # datahub: lists them, mcp-server-datahub's does not): each batch's scan skips them.
        listed = rescan_models(catalog)
        assert listed == sorted(listed), listed
        assert {model_urn("live")} == set(catalog.models()) <= set(listed), listed
        assert set(listed) <= {model_urn("live"), model_urn("gone")}, listed

    def test_models_is_empty_without_models(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(dataset("raw.customers", fields=[("id", "string")]))
        assert catalog.models() == []

    # --- nodes() -------------------------------------------------------------------------

    def test_unknown_urn_is_a_node_that_does_not_exist(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(ml_model("churn"))
        ghost = dataset_urn("b2fd91.analytics.order_history", platform="dbt")
        node = catalog.nodes([ghost])[ghost]
        assert not node.exists
        assert node.entity_type is EntityType.DATASET
        assert node.name == "b2fd91.analytics.order_history"
        assert node.schema is None
        assert node.last_updated is None
        assert node.deprecation is None

    def test_nodes_answers_every_urn_asked_in_one_batch(self, make_catalog: MakeCatalog) -> None:
        names = [f"raw.t{i}" for i in range(30)]
        catalog = make_catalog([m for n in names for m in dataset(n, fields=[("id", "string")])])
        urns = [dataset_urn(n) for n in names] + ["urn:li:dataset:(urn:li:dataPlatform:x,y,PROD)"]
        nodes = catalog.nodes(urns)
        assert list(nodes) == urns
        assert [n.exists for n in nodes.values()] == [True] * 30 + [False]

    def test_dataset_translation(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            dataset(
                "clean.customers",
                display_name="Customers (clean)",
                fields=[("id", "long", "bigint"), ("email", "string"), ("signup", "date")],
                field_descriptions={"id": "Customer id"},
                field_tags={"email": ["PII"]},
                field_terms={"email": ["Classification.Sensitive"]},
                editable_field_tags={"signup": ["Legacy"]},
                editable_field_descriptions={"email": "Contact address", "signup": "Signed up"},
                tags=["Tier1"],
                terms=["Domain.Customer"],
                structured_properties={"io.mlcopilot.piiJustification": ["consented"]},
                custom_properties={"owner_team": "growth"},
                last_operation=T0 + timedelta(hours=5),
                last_modified=T0,
                deprecated=True,
                deprecation_note="use clean.customers_v2",
                decommission_at=T0 + timedelta(days=30),
                replacement=dataset_urn("clean.customers_v2"),
                removed=False,
            )
        )
        node = catalog.nodes([CLEAN])[CLEAN]
        assert node.exists
        assert node.entity_type is EntityType.DATASET
        assert node.name == "Customers (clean)"
        assert node.schema == Schema(
            (
                SchemaField("id", "NumberType", "bigint", "Customer id", 0),
                SchemaField(
                    "email",
                    "StringType",
                    "string",
                    "Contact address",
                    1,
                    tags=frozenset({PII}),
                    terms=frozenset({term_urn("Classification.Sensitive")}),
                ),
                SchemaField(
                    "signup",
                    "DateType",
                    "date",
                    "Signed up",
                    2,
                    tags=frozenset({tag_urn("Legacy")}),
                ),
            )
        )
        assert node.tags == {tag_urn("Tier1")}
        assert node.terms == {term_urn("Domain.Customer")}
        assert dict(node.structured_properties) == {"io.mlcopilot.piiJustification": ("consented",)}
        assert dict(node.custom_properties) == {"owner_team": "growth"}
        assert node.deprecation is not None
        assert node.deprecation.note == "use clean.customers_v2"
        assert node.deprecation.decommission_time == T0 + timedelta(days=30)
        assert node.deprecation.replacement == dataset_urn("clean.customers_v2")
        assert not node.removed
        assert node.last_updated == T0 + timedelta(hours=5)
        assert node.last_updated.tzinfo is not None
        assert node.column_lineage == ()
        assert node.trained_at is None

    def test_schema_description_prefers_the_ingested_one(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            dataset(
                "raw.customers",
                fields=[("email", "string")],
                field_descriptions={"email": "From the source"},
                editable_field_descriptions={"email": "Edited in the UI"},
            )
        )
        schema = catalog.nodes([RAW])[RAW].schema
        assert schema is not None
        assert schema.fields[0].description == "From the source"

    def test_v2_field_paths_are_simplified(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            dataset(
                "raw.events",
                fields=[
                    ("[version=2.0].[type=boolean].flag", "boolean"),
                    ("[version=2.0].[type=struct].[type=record].info", "record"),
                    ("[version=2.0].[type=struct].[type=record].info.[type=string].city", "string"),
                ],
                field_tags={"[version=2.0].[type=boolean].flag": ["PII"]},
            )
        )
        urn = dataset_urn("raw.events")
        schema = catalog.nodes([urn])[urn].schema
        assert schema is not None
        assert [(f.path, f.type) for f in schema.fields] == [
            ("flag", "BooleanType"),
            ("info", "RecordType"),
            ("info.city", "StringType"),
        ]
        assert schema.fields[0].tags == {PII}

    def test_dataset_without_metadata_is_unknown_not_healthy(
        self, make_catalog: MakeCatalog
    ) -> None:
        catalog = make_catalog(dataset("raw.customers", tags=["Tier1"]))
        node = catalog.nodes([RAW])[RAW]
        assert node.exists
        assert node.name == "raw.customers"
        assert node.schema is None
        assert node.last_updated is None
        assert node.deprecation is None
        assert dict(node.structured_properties) == {}

    def test_last_updated_falls_back_to_last_modified(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(dataset("raw.customers", last_modified=T0))
        assert catalog.nodes([RAW])[RAW].last_updated == T0

    def test_undeprecated_and_removed(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(dataset("raw.customers", deprecated=False, removed=True))
        node = catalog.nodes([RAW])[RAW]
        assert node.deprecation is None
        assert node.removed

    def test_owners_known_empty_and_unknown(self, make_catalog: MakeCatalog) -> None:
        owned, empty, bare = (dataset_urn(n) for n in ("raw.owned", "raw.empty", "raw.bare"))
        owners = OwnershipClass(
            owners=[
                OwnerClass(owner="urn:li:corpuser:zoe", type=OwnershipTypeClass.DATAOWNER),
                OwnerClass(owner="urn:li:corpGroup:data", type=OwnershipTypeClass.TECHNICAL_OWNER),
            ]
        )
        catalog = make_catalog(
            [
                *dataset("raw.owned"),
                MetadataChangeProposalWrapper(entityUrn=owned, aspect=owners),
                *dataset("raw.empty"),
                MetadataChangeProposalWrapper(entityUrn=empty, aspect=OwnershipClass(owners=[])),
                *dataset("raw.bare"),
            ]
        )
        nodes = catalog.nodes([owned, empty, bare])
        assert nodes[owned].owners == ("urn:li:corpGroup:data", "urn:li:corpuser:zoe")
        assert nodes[empty].owners == ()
        assert nodes[bare].owners is None

    def test_numeric_structured_property_values(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            dataset("raw.customers", structured_properties={"io.x.score": [0.9, 2]})
        )
        assert dict(catalog.nodes([RAW])[RAW].structured_properties) == {"io.x.score": (0.9, 2.0)}

    def test_column_lineage(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            [
                *dataset("raw.customers", fields=[("email", "string"), ("name", "string")]),
                *dataset(
                    "clean.customers",
                    fields=[("email_domain", "string"), ("full_name", "string")],
                    column_lineage=[
                        ("raw.customers", "email", "email_domain"),
                        ("raw.customers", "name", "full_name"),
                    ],
                ),
            ]
        )
        node = catalog.nodes([CLEAN])[CLEAN]
        assert set(node.column_lineage) == {
            ColumnEdge(RAW, "email", "email_domain"),
            ColumnEdge(RAW, "name", "full_name"),
        }
        assert Edge(CLEAN, RAW, "dataset_upstream") in edges_of(catalog, CLEAN)

    def test_unicode_and_odd_names(self, make_catalog: MakeCatalog) -> None:
        odd = ["prénom", "montant (€), net", "a.b", "col with spaces", "日付"]
        name = "raw.kundén (2024), ü"
        catalog = make_catalog(
            [
                *dataset(name, fields=[(f, "string") for f in odd], field_tags={odd[1]: ["PII"]}),
                *dataset(
                    "clean.kunden",
                    fields=[(f"out_{f}", "string") for f in odd],
                    column_lineage=[(dataset_urn(name), f, f"out_{f}") for f in odd],
                ),
            ]
        )
        raw, clean = dataset_urn(name), dataset_urn("clean.kunden")
        nodes = catalog.nodes([raw, clean])
        assert nodes[raw].name == name
        schema = nodes[raw].schema
        assert schema is not None
        assert [f.path for f in schema.fields] == odd
        assert schema.by_path()[odd[1]].tags == {PII}
        assert set(nodes[clean].column_lineage) == {ColumnEdge(raw, f, f"out_{f}") for f in odd}
        assert edges_of(catalog, clean) == {Edge(clean, raw, "dataset_upstream")}

    def test_feature_source_columns(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            [
                *ml_feature(
                    "customer_features",
                    "email_domain",
                    sources=["raw.customers"],
                    custom_properties={"blastradar.source_column": "email, backup_email"},
                ),
                *ml_feature("customer_features", "tenure", source_column="signup"),
                *ml_feature("customer_features", "plain", custom_properties={"other": "x"}),
                *ml_primary_key("customer_features", "customer_id", source_column=["id"]),
            ]
        )
        tenure, plain = (feature_urn("customer_features", n) for n in ("tenure", "plain"))
        key = primary_key_urn("customer_features", "customer_id")
        nodes = catalog.nodes([FEATURE, tenure, plain, key])
        assert nodes[FEATURE].source_columns == ("email", "backup_email")
        assert nodes[FEATURE].entity_type is EntityType.ML_FEATURE
        assert nodes[FEATURE].name == "email_domain"
        assert nodes[FEATURE].custom_properties["blastradar.source_column"] == (
            "email, backup_email"
        )
        assert nodes[tenure].source_columns == ("signup",)
        assert nodes[plain].source_columns == ()
        assert nodes[key].source_columns == ("id",)
        assert nodes[key].entity_type is EntityType.ML_PRIMARY_KEY

    def test_model_trained_at_from_date_then_created(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            [
                *ml_model("dated", date=T0, created=T0 - timedelta(days=3)),
                *ml_model("created", created=T0 - timedelta(days=3)),
            ]
        )
        dated, created = model_urn("dated"), model_urn("created")
        nodes = catalog.nodes([dated, created])
        assert nodes[dated].trained_at == T0
        assert nodes[created].trained_at == T0 - timedelta(days=3)
        assert nodes[dated].entity_type is EntityType.ML_MODEL
        assert nodes[dated].name == "dated"

    def test_model_trained_at_from_newest_training_run(self, make_catalog: MakeCatalog) -> None:
        runs = [training_run_urn("r1"), training_run_urn("r2"), training_run_urn("r3")]
        catalog = make_catalog(
            [
                *training_run("r1", created=T0),
                *training_run("r2", created=T0 + timedelta(days=2)),
                *training_run("r3", created=None),
                *ml_model("churn", training_jobs=runs),
                *ml_model("untrained"),
                *ml_model("orphan", training_jobs=[training_run_urn("missing")]),
            ]
        )
        nodes = catalog.nodes([MODEL, model_urn("untrained"), model_urn("orphan")])
        assert nodes[MODEL].trained_at == T0 + timedelta(days=2)
        assert nodes[model_urn("untrained")].trained_at is None
        assert nodes[model_urn("orphan")].trained_at is None

    def test_model_structured_properties_and_tags(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            ml_model("churn", tags=["Tier1"], structured_properties={"io.x.owner": ["ml"]})
        )
        node = catalog.nodes([MODEL])[MODEL]
        assert node.tags == {tag_urn("Tier1")}
        assert dict(node.structured_properties) == {"io.x.owner": ("ml",)}

    # --- DataHub's own quality signals ------------------------------------------------------

    def test_assertions_with_their_latest_run_by_time(self, make_catalog: MakeCatalog) -> None:
        t1, t2, t3 = T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)
        catalog = make_catalog(
            [
                *dataset("raw.customers", fields=[("email", "string"), ("id", "long")]),
                *dbt_test("email_not_null", RAW, column="email"),
                # Written newest first: the last one written is not the latest run.
                *run("email_not_null", RAW, t3, "FAILURE", severity="HIGH", unexpected=7,
                     native={"message": "7 rows are null"}, url="https://ci.example/run/3"),
                *run("email_not_null", RAW, t1, "SUCCESS"),
                *ge_expectation("rows", RAW),
                *run("rows", RAW, t1, "FAILURE"),
                *run("rows", RAW, t2, "SUCCESS"),  # a later pass: recovered
                *dbt_test("id_unique", RAW, column="id", test_name="unique"),  # never ran
                *freshness_assertion("fresh", RAW, hours=6),
                *run("fresh", RAW, t2, "ERROR"),
            ]
        )  # fmt: skip
        assertions = by_urn(catalog.nodes([RAW])[RAW].assertions)
        assert set(assertions) == {
            assertion_urn(n) for n in ("email_not_null", "rows", "id_unique", "fresh")
        }
        email = assertions[assertion_urn("email_not_null")]
        assert (email.type, email.entity, email.fields) == ("CUSTOM", RAW, ("email",))
        assert email.platform == "urn:li:dataPlatform:dbt"
        assert email.source_type == "EXTERNAL"
        assert email.native_type == "not_null_email"
        assert email.last_run is not None
        assert (email.last_run.result, email.last_run.at) == ("FAILURE", t3)
        assert email.last_run.severity == "HIGH"
        assert email.last_run.unexpected_count == 7
        assert dict(email.last_run.native_results) == {"message": "7 rows are null"}
        assert email.last_run.external_url == "https://ci.example/run/3"
        rows = assertions[assertion_urn("rows")]
        assert rows.fields == ()
        assert rows.platform == "urn:li:dataPlatform:great-expectations"
        assert rows.last_run is not None
        assert (rows.last_run.result, rows.last_run.at) == ("SUCCESS", t2)
        assert assertions[assertion_urn("id_unique")].last_run is None
        fresh = assertions[assertion_urn("fresh")]
        assert fresh.type == "FRESHNESS"
        assert fresh.is_freshness
        assert fresh.schedule is not None
        assert fresh.schedule.interval == timedelta(hours=6)
        assert fresh.last_run is not None
        assert fresh.last_run.result == "ERROR"

    def test_no_assertions_is_known_empty(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            [
                *dataset("raw.customers", fields=[("id", "long")]),
                *dbt_test("gone", RAW, column="id"),
                *run("gone", RAW, T0, "FAILURE"),
                *removed(assertion_urn("gone")),  # soft-deleted: DataHub lists it no more
                *dataset("clean.customers", fields=[("id", "long")]),
            ]
        )
        nodes = catalog.nodes([RAW, CLEAN])
        assert nodes[RAW].assertions == ()
        assert nodes[CLEAN].assertions == ()
        assert nodes[RAW].incidents == ()

    def test_active_incidents_naming_the_entity(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            [
                *dataset("raw.customers", fields=[("id", "long")]),
                *dataset("clean.customers", fields=[("id", "long")]),
                *incident("late", [RAW], title="Orders late", priority=0, created=T0),
                *incident("fixed", [RAW], active=False, created=T0),
                *incident("both", [RAW, CLEAN], title="Bad load", priority=None,
                          created=T0 + timedelta(days=1), incident_type="VOLUME",
                          from_assertion="rows"),
            ]
        )  # fmt: skip
        nodes = catalog.nodes([RAW, CLEAN])
        raw = nodes[RAW].incidents
        assert raw is not None
        assert [i.urn for i in raw] == [incident_urn("both"), incident_urn("late")]
        late = raw[1]
        assert (late.type, late.title, late.priority, late.state) == (
            "OPERATIONAL", "Orders late", 0, "ACTIVE"
        )  # fmt: skip
        assert (late.stage, late.source_type, late.source_urn) == ("INVESTIGATION", "MANUAL", None)
        assert late.started_at == T0
        assert late.created_at == T0
        both = raw[0]
        assert (both.type, both.priority, both.source_type) == ("VOLUME", None, "ASSERTION_FAILURE")
        assert both.source_urn == assertion_urn("rows")
        assert [i.urn for i in nodes[CLEAN].incidents or ()] == [incident_urn("both")]

    # --- upstream() ----------------------------------------------------------------------

    def test_upstream_ml_hops(self, make_catalog: MakeCatalog) -> None:
        table = feature_table_urn("customer_features")
        key = primary_key_urn("customer_features", "customer_id")
        run = training_run_urn("run-1")
        catalog = make_catalog(
            [
                *ml_model(
                    "churn",
                    features=[FEATURE],
                    training_jobs=[run],
                    training_data=["raw.training_set"],
                ),
                *ml_feature("customer_features", "email_domain", sources=["raw.customers"]),
                *ml_feature_table(
                    "customer_features", features=["email_domain"], primary_keys=["customer_id"]
                ),
                *ml_primary_key("customer_features", "customer_id", sources=["raw.accounts"]),
                *training_run("run-1", inputs=["raw.customers", "raw.events"]),
            ]
        )
        assert edges_of(catalog, MODEL) == {
            Edge(MODEL, FEATURE, "feature"),
            Edge(MODEL, run, "training_job"),
            Edge(MODEL, dataset_urn("raw.training_set"), "training_data"),
        }
        assert edges_of(catalog, FEATURE) == {
            Edge(FEATURE, RAW, "feature_source"),
            Edge(FEATURE, table, "feature_table"),
        }
        assert edges_of(catalog, table) == {Edge(table, key, "primary_key")}
        assert edges_of(catalog, key) == {Edge(key, dataset_urn("raw.accounts"), "feature_source")}
        assert edges_of(catalog, run) == {
            Edge(run, RAW, "job_input"),
            Edge(run, dataset_urn("raw.events"), "job_input"),
        }

    def test_upstream_dataset_and_job_hops(self, make_catalog: MakeCatalog) -> None:
        job = data_job_urn("nightly", "clean_customers")
        extract = data_job_urn("nightly", "extract")
        run = training_run_urn("backfill")
        catalog = make_catalog(
            [
                *dataset("clean.customers", upstreams=["raw.customers", "raw.customers"]),
                *data_job(
                    "nightly",
                    "clean_customers",
                    inputs=["raw.customers"],
                    outputs=["clean.customers"],
                    input_jobs=[extract],
                ),
                *training_run("backfill", outputs=["clean.customers"]),
            ]
        )
        assert edges_of(catalog, CLEAN) == {
            Edge(CLEAN, RAW, "dataset_upstream"),
            Edge(CLEAN, job, "produced_by"),
            Edge(CLEAN, run, "produced_by"),
        }
        assert edges_of(catalog, job) == {
            Edge(job, RAW, "job_input"),
            Edge(job, extract, "job_input"),
        }

    def test_upstream_batches_and_deduplicates(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            [
                *dataset("clean.customers", upstreams=["raw.customers", "raw.customers"]),
                *ml_feature("customer_features", "email_domain", sources=["clean.customers"]),
            ]
        )
        edges = catalog.upstream([CLEAN, FEATURE, CLEAN])
        assert sorted(edges, key=lambda e: e.downstream) == [
            Edge(CLEAN, RAW, "dataset_upstream"),
            Edge(FEATURE, CLEAN, "feature_source"),
        ]
        assert catalog.upstream([dataset_urn("nowhere")]) == []
        assert catalog.upstream([]) == []

    # --- lineage() -----------------------------------------------------------------------

    def test_lineage_walks_every_hop_kind(self, make_catalog: MakeCatalog) -> None:
        table = feature_table_urn("customer_features")
        job = data_job_urn("nightly", "clean_customers")
        catalog = make_catalog(
            [
                *ml_model("churn", features=[FEATURE], training_data=["clean.customers"]),
                *ml_feature("customer_features", "email_domain", sources=["clean.customers"]),
                *ml_feature_table("customer_features", features=["email_domain"]),
                *dataset("clean.customers", fields=[("email", "string")]),
                *data_job(
                    "nightly",
                    "clean_customers",
                    inputs=["raw.customers"],
                    outputs=["clean.customers"],
                ),
            ]
        )
        lineage = catalog.lineage(MODEL, WalkLimits())
        assert set(lineage.nodes) == {MODEL, FEATURE, table, CLEAN, job, RAW}
        assert not lineage.truncated
        assert lineage.paths[RAW] == (MODEL, CLEAN, job, RAW)
        assert not lineage.nodes[RAW].exists
        assert {e.kind for e in lineage.edges} == {
            "feature",
            "feature_table",
            "feature_source",
            "training_data",
            "produced_by",
            "job_input",
        }

    def test_lineage_respects_hop_limit(self, make_catalog: MakeCatalog) -> None:
        chain = [f"raw.t{i}" for i in range(6)]
        mcps = [m for up, down in itertools.pairwise(chain) for m in dataset(down, upstreams=[up])]
        catalog = make_catalog([*mcps, *ml_model("churn", training_data=[chain[-1]])])
        lineage = catalog.lineage(MODEL, WalkLimits(max_hops=2))
        assert lineage.truncated
        assert len(lineage.nodes) == 3

    # --- schema_as_of() ------------------------------------------------------------------

    def test_schema_as_of_reads_history(self, make_catalog: MakeCatalog) -> None:
        t1, t2 = T0, T0 + timedelta(days=10)
        catalog = make_catalog(
            [
                *dataset("raw.customers", fields=[("email", "string")], observed_at=t1),
                *dataset(
                    "raw.customers",
                    fields=[("email_address", "string"), ("age", "int")],
                    observed_at=t2,
                ),
            ]
        )
        before, between, after = (
            catalog.schema_as_of(RAW, t)
            for t in (t1 - timedelta(days=1), t1 + timedelta(days=1), t2 + timedelta(days=1))
        )
        assert before is None
        assert between is not None
        assert [f.path for f in between.fields] == ["email"]
        assert after is not None
        assert [f.path for f in after.fields] == ["email_address", "age"]
        assert catalog.schema_as_of(dataset_urn("nowhere"), t2) is None

    def test_schema_as_of_without_schema_is_none(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(observed(dataset("raw.customers", tags=["Tier1"]), T0))
        assert catalog.schema_as_of(RAW, T0 + timedelta(days=1)) is None

    # --- apply() -------------------------------------------------------------------------

    def test_tag_write_is_idempotent(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(dataset("raw.customers", tags=["Tier1"]))
        write = TagWrite(RAW, PII, present=True)
        assert catalog.apply([write]) == [write]
        assert catalog.nodes([RAW])[RAW].tags == {tag_urn("Tier1"), PII}
        assert catalog.apply([write]) == []
        assert catalog.nodes([PII])[PII].exists  # the tag entity exists for DataHub's UI

    def test_tag_removal_keeps_other_tags(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(dataset("raw.customers", tags=["Tier1", "PII"]))
        write = TagWrite(RAW, PII, present=False)
        assert catalog.apply([write]) == [write]
        assert catalog.nodes([RAW])[RAW].tags == {tag_urn("Tier1")}
        assert catalog.apply([write]) == []

    def test_removing_an_absent_tag_changes_nothing(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(dataset("raw.customers", fields=[("id", "string")]))
        assert catalog.apply([TagWrite(RAW, PII, present=False)]) == []
        assert catalog.nodes([RAW])[RAW].tags == frozenset()

    def test_property_write_keeps_other_properties(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            dataset(
                "raw.customers",
                structured_properties={"io.mlcopilot.piiJustification": ["consented in ToS"]},
            )
        )
        write = PropertyWrite(RAW, RISK, ("high", "pii"))
        assert catalog.apply([write]) == [write]
        assert dict(catalog.nodes([RAW])[RAW].structured_properties) == {
            "io.mlcopilot.piiJustification": ("consented in ToS",),
            "io.mlcopilot.risk": ("high", "pii"),
        }
        assert catalog.apply([write]) == []

    def test_property_write_replaces_then_removes(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(
            dataset(
                "raw.customers",
                structured_properties={
                    "io.mlcopilot.piiJustification": ["consented"],
                    "io.mlcopilot.risk": ["low"],
                },
            )
        )
        catalog.apply([PropertyWrite(RAW, RISK, (3,))])
        assert catalog.nodes([RAW])[RAW].structured_properties["io.mlcopilot.risk"] == (3.0,)
        removal = PropertyWrite(RAW, RISK, ())
        assert catalog.apply([removal]) == [removal]
        assert dict(catalog.nodes([RAW])[RAW].structured_properties) == {
            "io.mlcopilot.piiJustification": ("consented",)
        }
        assert catalog.apply([removal]) == []
        keep = PropertyWrite(RAW, JUSTIFICATION, ("consented",))
        catalog.apply([keep])  # may create the property's definition, which the fixture lacks
        assert catalog.apply([keep]) == []
        assert dict(catalog.nodes([RAW])[RAW].structured_properties) == {
            "io.mlcopilot.piiJustification": ("consented",)
        }

    def test_writes_to_one_entity_fold_in_order(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(dataset("raw.customers", fields=[("id", "string")]))
        writes: list[Write] = [
            TagWrite(RAW, PII, present=True),
            TagWrite(RAW, tag_urn("Stale"), present=True),
            TagWrite(RAW, tag_urn("Stale"), present=False),
            PropertyWrite(RAW, RISK, ("high",)),
        ]
        assert catalog.apply(writes) == writes
        node = catalog.nodes([RAW])[RAW]
        assert node.tags == {PII}
        assert dict(node.structured_properties) == {"io.mlcopilot.risk": ("high",)}

    def test_dry_run_writes_nothing(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(dataset("raw.customers", tags=["Tier1"]))
        writes: list[Write] = [
            TagWrite(RAW, PII, present=True),
            PropertyWrite(RAW, RISK, ("high",)),
        ]
        assert catalog.apply(writes, dry_run=True) == writes
        node = catalog.nodes([RAW])[RAW]
        assert node.tags == {tag_urn("Tier1")}
        assert dict(node.structured_properties) == {}
        assert not catalog.nodes([PII])[PII].exists
        assert catalog.apply(writes) == writes

    def test_incident_write_is_idempotent(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(ml_model("churn"))
        incident = IncidentWrite(
            urn="urn:li:incident:mlcopilot-0123456789abcdef-1",
            incident_type="CUSTOM",
            custom_type="PII_EXPOSURE",
            title="PII reaches churn",
            description="email (tagged PII) feeds churn via email_domain",
            priority=1,
            entities=(MODEL, RAW),
            active=True,
            created_at=T0,
            status_changed_at=T0,
        )
        assert catalog.apply([incident]) == [incident]
        assert catalog.nodes([incident.urn])[incident.urn].exists
        assert catalog.apply([incident]) == []
        resolved = replace(incident, active=False, status_changed_at=T0 + timedelta(days=1))
        assert catalog.apply([resolved]) == [resolved]
        assert catalog.apply([resolved]) == []

    def test_document_write_is_idempotent(self, make_catalog: MakeCatalog) -> None:
        catalog = make_catalog(ml_model("churn"))
        document = DocumentWrite(
            urn="urn:li:document:mlcopilot-0123456789abcdef-1",
            title="PII reaches churn",
            text="# PII exposure\n\n`email` → `email_domain` → **churn** ✓",
            related_assets=(MODEL, RAW),
            created_at=T0,
            modified_at=T0,
        )
        assert catalog.apply([document]) == [document]
        assert catalog.nodes([document.urn])[document.urn].exists
        assert catalog.apply([document]) == []
        edited = replace(document, text="resolved", modified_at=T0 + timedelta(days=1))
        assert catalog.apply([edited]) == [edited]
