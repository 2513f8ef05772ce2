"""Column usage: which upstream columns feed the model, proven, disproven or unknown."""

from __future__ import annotations

import pytest

from mlcopilot.impact import column_usage
from mlcopilot.model import (
    ColumnEdge,
    Edge,
    EdgeKind,
    EntityType,
    Lineage,
    Node,
    Schema,
    SchemaField,
)

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,m,PROD)"
FEATURE = "urn:li:mlFeature:(ns,tenure)"


def ds(name: str) -> str:
    return f"urn:li:dataset:(urn:li:dataPlatform:hive,{name},PROD)"


def dataset(name: str, columns: str = "", lineage: tuple[ColumnEdge, ...] = ()) -> Node:
    fields = tuple(SchemaField(c, "StringType") for c in columns.split())
    return Node(ds(name), EntityType.DATASET, name, schema=Schema(fields), column_lineage=lineage)


def lineage_of(nodes: list[Node], edges: list[tuple[str, str, EdgeKind]]) -> Lineage:
    everything = {MODEL: Node(MODEL, EntityType.ML_MODEL, "m"), **{n.urn: n for n in nodes}}
    return Lineage(
        root=MODEL,
        nodes=everything,
        edges=tuple(Edge(d, u, k) for d, u, k in edges),
        paths={u: (MODEL, u) for u in everything},
    )


def feature(source_columns: tuple[str, ...] = (), name: str = "tenure") -> Node:
    return Node(FEATURE, EntityType.ML_FEATURE, name, source_columns=source_columns)


FGL_CURATED = (
    ColumnEdge(ds("raw"), "a", "x"),
    ColumnEdge(ds("raw"), "c", "y"),
)


@pytest.mark.parametrize(
    ("nodes", "edges", "expected"),
    [
        pytest.param(
            [dataset("train", "a b")],
            [(MODEL, ds("train"), "training_data")],
            {"a": True, "b": True, "zzz": True},
            id="training data is consumed whole",
        ),
        pytest.param(
            [feature(("a",)), dataset("raw", "a b")],
            [(MODEL, FEATURE, "feature"), (FEATURE, ds("raw"), "feature_source")],
            {"a": True, "b": False},
            id="recorded feature source columns prove the rest unused",
        ),
        pytest.param(
            [feature(name="b"), dataset("raw", "a b")],
            [(MODEL, FEATURE, "feature"), (FEATURE, ds("raw"), "feature_source")],
            {"a": None, "b": True},
            id="a column named like the feature feeds; the rest is unknown",
        ),
        pytest.param(
            [dataset("curated", "x y", FGL_CURATED), dataset("raw", "a b c")],
            [
                (MODEL, ds("curated"), "training_data"),
                (ds("curated"), ds("raw"), "dataset_upstream"),
            ],
            {"a": True, "c": True, "b": False},
            id="column-level lineage into consumed data; unmentioned columns do not flow",
        ),
        pytest.param(
            [feature(("x",)), dataset("curated", "x y", FGL_CURATED), dataset("raw", "a b c")],
            [
                (MODEL, FEATURE, "feature"),
                (FEATURE, ds("curated"), "feature_source"),
                (ds("curated"), ds("raw"), "dataset_upstream"),
            ],
            {"a": True, "c": False, "b": False},
            id="column lineage through an unused downstream column proves unused",
        ),
        pytest.param(
            [feature(name="zz"), dataset("curated", "x y", FGL_CURATED), dataset("raw", "a b c")],
            [
                (MODEL, FEATURE, "feature"),
                (FEATURE, ds("curated"), "feature_source"),
                (ds("curated"), ds("raw"), "dataset_upstream"),
            ],
            {"a": None, "c": None, "b": False},
            id="unknown downstream usage stays unknown upstream",
        ),
        pytest.param(
            [dataset("curated", "x"), dataset("raw", "a")],
            [
                (MODEL, ds("curated"), "training_data"),
                (ds("curated"), ds("raw"), "dataset_upstream"),
            ],
            {"a": None},
            id="a dataset edge without column lineage is unknown",
        ),
    ],
)
def test_column_usage(nodes, edges, expected) -> None:
    usage = column_usage(lineage_of(nodes, edges))
    target = nodes[-1].urn
    assert {c: usage[target].feeds(c) for c in expected} == expected


def test_feeding_through_any_edge_wins_over_unused_through_another() -> None:
    nodes = [feature(("b",)), dataset("curated", "x y", FGL_CURATED), dataset("raw", "a b c")]
    edges: list[tuple[str, str, EdgeKind]] = [
        (MODEL, FEATURE, "feature"),
        (FEATURE, ds("raw"), "feature_source"),
        (MODEL, ds("curated"), "training_data"),
        (ds("curated"), ds("raw"), "dataset_upstream"),
    ]
    usage = column_usage(lineage_of(nodes, edges))[ds("raw")]
    assert (usage.feeds("a"), usage.feeds("b"), usage.feeds("c"), usage.feeds("d")) == (
        True,
        True,
        True,
        False,
    )


def test_cycles_terminate() -> None:
    nodes = [
        dataset("a", "x", (ColumnEdge(ds("b"), "x", "x"),)),
        dataset("b", "x", (ColumnEdge(ds("a"), "x", "x"),)),
    ]
    edges: list[tuple[str, str, EdgeKind]] = [
        (MODEL, ds("a"), "training_data"),
        (ds("a"), ds("b"), "dataset_upstream"),
        (ds("b"), ds("a"), "dataset_upstream"),
    ]
    usage = column_usage(lineage_of(nodes, edges))
    assert usage[ds("b")].feeds("x") is True
