"""Readable names: every entity type the SDK knows, built with the SDK's own urn classes."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from datahub.metadata import urns as du
from datahub.utilities.urns._urn_base import _SpecificUrn
from hypothesis import given, settings
from hypothesis import strategies as st

from mlcopilot.text.names import short_name
from mlcopilot.text.wording import count, plural

HALF = "urn:li:dataset:(urn:li:dataPlatform:hive,half"
URN_CLASSES = sorted(
    (
        c
        for c in vars(du).values()
        if inspect.isclass(c) and issubclass(c, _SpecificUrn) and c is not _SpecificUrn
    ),
    key=lambda c: c.ENTITY_TYPE,
)

CONTEXT = {"platform", "env", "orchestrator", "cluster", "dashboard_tool", "notebook_tool"}
"""Constructor arguments that place an entity, not name it (plus the nested urns below)."""
NESTED = {"flow", "parent", "entity_type", "path"}

# Ids as ingestion produces them: dotted, slashed, spaced, with DataHub's reserved characters
# (which the SDK encodes) and non-ASCII letters. Not urns themselves: several constructors
# (CorpGroupUrn, ...) parse an id that starts with "urn:" as a whole urn.
ids = st.text(
    alphabet=st.characters(categories=("L", "N"), include_characters="._-/ ,()é:"),
    min_size=1,
    max_size=24,
).filter(lambda s: s.strip() == s and s.strip() and not s.startswith("urn:"))


def test_every_entity_type_is_covered() -> None:
    assert len(URN_CLASSES) >= 60  # the SDK's list, not a hand-picked few
    assert {c.ENTITY_TYPE for c in URN_CLASSES} >= {
        "dataset", "dataJob", "dataFlow", "schemaField", "mlModel", "mlFeature",
        "mlFeatureTable", "mlPrimaryKey", "incident", "dataProcessInstance", "tag",
    }  # fmt: skip


def own_parts(cls: type[_SpecificUrn]) -> list[str]:
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    params = [p for p in params if not p.startswith("_")]
    own = [p for p in params if p not in CONTEXT | NESTED]
    return own or params


@st.composite
def urns(draw: st.DrawFn, cls: type[_SpecificUrn]) -> tuple[_SpecificUrn, list[str]]:
    """A random valid urn of ``cls`` and the attribute names that identify it."""
    # Any: each urn class has its own constructor, which the base class's type does not describe.
    args: dict[str, Any] = {}
    for name in inspect.signature(cls.__init__).parameters:
        if name == "self" or name.startswith("_"):
            continue
        if name == "env":
            args[name] = draw(st.sampled_from(["PROD", "DEV", "QA", "STG"]))
        elif name == "flow":
            flow = du.DataFlowUrn(draw(ids), draw(ids), draw(st.sampled_from(["prod", "dev"])))
            args[name] = str(flow)
        elif name == "parent":
            args[name] = str(du.DatasetUrn(draw(ids), draw(ids), "PROD"))
        elif name == "entity_type":
            args[name] = draw(st.sampled_from(["dataset", "mlModel"]))
        else:
            args[name] = draw(ids)
    return cls(**args), own_parts(cls)


def balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


@pytest.mark.parametrize("cls", URN_CLASSES, ids=lambda c: c.ENTITY_TYPE)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_urn_gets_a_readable_name(cls: type[_SpecificUrn], data: st.DataObject) -> None:
    urn, parts = data.draw(urns(cls))
    text = str(urn)
    name = short_name(text)
    assert name.strip()
    assert name != text  # parsed, not the whole-urn fallback
    assert balanced(name), name
    assert not name.startswith(",")
    assert not name.endswith(",")
    for part in parts:
        value = getattr(urn, part, None)
        if isinstance(value, str) and not value.startswith("urn:li:"):
            assert value in name, (part, value, name)


@pytest.mark.parametrize(
    ("urn", "expected"),
    [
        ("urn:li:dataJob:(urn:li:dataFlow:(airflow,training_pipeline,prod),train_model)",
         "training_pipeline.train_model"),
        ("urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)", "raw.customers"),
        ("urn:li:dataset:(urn:li:dataPlatform:snowflake,db.schema.table.v2,PROD)",
         "db.schema.table.v2"),
        ("urn:li:schemaField:(urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD),email)",
         "raw.customers.email"),
        ("urn:li:schemaField:(urn:li:dataset:(urn:li:dataPlatform:hive,raw.users,PROD),"
         "[version=2.0].[type=struct].address.[type=string].zip)", "raw.users.address.zip"),
        ("urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)",
         "churn_predictor_v1"),
        ("urn:li:mlFeature:(customer_features,email_domain)", "customer_features.email_domain"),
        ("urn:li:mlPrimaryKey:(customer_features,customer_id)", "customer_features.customer_id"),
        ("urn:li:mlFeatureTable:(urn:li:dataPlatform:feast,customer_features)",
         "customer_features"),
        ("urn:li:mlModelGroup:(urn:li:dataPlatform:mlflow,churn,PROD)", "churn"),
        ("urn:li:dataFlow:(airflow,training_pipeline,prod)", "training_pipeline"),
        ("urn:li:dataProcessInstance:a4cc9c0ee8e70b0c", "a4cc9c0ee8e70b0c"),
        ("urn:li:incident:mlcopilot-6c0e1f2a-1", "mlcopilot-6c0e1f2a-1"),
        ("urn:li:tag:PII", "PII"),
        ("urn:li:structuredProperty:io.mlcopilot.openRisks", "io.mlcopilot.openRisks"),
        ("urn:li:glossaryTerm:Classification.Sensitive", "Classification.Sensitive"),
        ("urn:li:someFutureType:(a,b)", "a.b"),  # an entity type the SDK does not know yet
        ("not an urn", "not an urn"),
        (HALF, HALF),  # does not parse: the urn itself
        ("", "empty urn"),
    ],
)  # fmt: skip
def test_explicit_names(urn: str, expected: str) -> None:
    assert short_name(urn) == expected


def test_a_data_job_is_never_named_after_its_flow_env() -> None:
    # The old comma split named every dataJob finding "PROD)".
    urn = "urn:li:dataJob:(urn:li:dataFlow:(spark,etl,PROD),load_users)"
    assert short_name(urn) == "etl.load_users"


@pytest.mark.parametrize(
    ("n", "noun", "expected"),
    [
        (0, "node", "0 nodes"),
        (1, "node", "1 node"),
        (2, "node", "2 nodes"),
        (1, "entity", "1 entity"),
        (42, "entity", "42 entities"),
        (12, "dataJob", "12 dataJobs"),
        (3, "query", "3 queries"),
        (2, "day", "2 days"),
        (2, "process", "2 processes"),
        (1, "coverage gap", "1 coverage gap"),
        (2, "person", "2 people"),
    ],
)
def test_count_phrases(n: int, noun: str, expected: str) -> None:
    many = "people" if noun == "person" else None
    assert count(n, noun, many) == expected


def test_plural_of_every_entity_type_ends_in_s() -> None:
    for cls in URN_CLASSES:
        assert plural(cls.ENTITY_TYPE).endswith("s")
        assert plural(cls.ENTITY_TYPE).startswith(cls.ENTITY_TYPE[:-1])
