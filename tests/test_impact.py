"""Column usage: which upstream columns feed the model, proven, disproven or unknown."""

from __future__ import annotations

import pytest

from mlcopilot.lineage.columns import column_usage
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


def schema(columns: str) -> Schema:
    return Schema(tuple(SchemaField(c, "StringType") for c in columns.split()))


def dataset(name: str, columns: str = "", lineage: tuple[ColumnEdge, ...] = ()) -> Node:
    return Node(ds(name), EntityType.DATASET, name, schema=schema(columns), column_lineage=lineage)


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
def test_column_usage(
    nodes: list[Node], edges: list[tuple[str, str, EdgeKind]], expected: dict[str, bool | None]
) -> None:
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


# --- Columns only the baseline has (removed or renamed since training) ----------------------
# The schema as of training time names columns the current schema no longer has; each rule
# decides them with its default for columns it does not mention, never "unknown" by omission.

DAILY = "features.customer_daily"
DAILY_FGL = (
    ColumnEdge(ds("raw"), "id", "id"),
    ColumnEdge(ds("raw"), "signup", "tenure"),
    ColumnEdge(ds("raw"), "plan", "plan"),
)


def named_feature(name: str, source_columns: tuple[str, ...] = ()) -> Node:
    return Node(
        f"urn:li:mlFeature:(ns,{name})", EntityType.ML_FEATURE, name, source_columns=source_columns
    )


def over(source: str, *features: Node) -> tuple[list[Node], list[tuple[str, str, EdgeKind]]]:
    """``features`` of the model, each computed from dataset ``source``."""
    edges: list[tuple[str, str, EdgeKind]] = []
    for f in features:
        edges += [(MODEL, f.urn, "feature"), (f.urn, ds(source), "feature_source")]
    return list(features), edges


def through_daily(*features: Node) -> tuple[list[Node], list[tuple[str, str, EdgeKind]]]:
    """``features`` computed from ``customer_daily``, whose lineage covers all its columns."""
    nodes, edges = over(DAILY, *features)
    nodes.append(dataset(DAILY, "id tenure plan", DAILY_FGL))
    edges.append((ds(DAILY), ds("raw"), "dataset_upstream"))
    return nodes, edges


def both(
    *graphs: tuple[list[Node], list[tuple[str, str, EdgeKind]]],
) -> tuple[list[Node], list[tuple[str, str, EdgeKind]]]:
    return [n for g in graphs for n in g[0]], [e for g in graphs for e in g[1]]


TRAINED_ON_CURATED: list[tuple[str, str, EdgeKind]] = [
    (MODEL, ds("curated"), "training_data"),
    (ds("curated"), ds("raw"), "dataset_upstream"),
]


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        pytest.param(
            through_daily(named_feature("tenure", ("tenure",)), named_feature("plan")),
            False,
            id="authoritative column lineage that never reads it: unused (the issue's example)",
        ),
        pytest.param(
            (
                [dataset("curated", "x", (ColumnEdge(ds("raw"), "country", "x"),))],
                TRAINED_ON_CURATED,
            ),
            True,
            id="column lineage from it into consumed data: feeds",
        ),
        pytest.param(over("raw", named_feature("country")), True, id="a feature named after it"),
        pytest.param(
            over("raw", named_feature("plan_tier", ("plan",)), named_feature("signup")),
            None,
            id="a feature named after another column leaves it unknown",
        ),
        pytest.param(
            both(
                over("raw", named_feature("plan_tier", ("plan",))),
                through_daily(named_feature("plan")),
            ),
            False,
            id="recorded source columns and column lineage both leave it out: unused",
        ),
        pytest.param(
            ([], [(MODEL, ds("raw"), "training_data")]),
            True,
            id="training data consumed whole: feeds",
        ),
        pytest.param(
            ([dataset("curated", "x")], TRAINED_ON_CURATED),
            None,
            id="no rule can decide: a dataset edge without column lineage",
        ),
    ],
)
def test_a_column_only_the_baseline_has_is_judged_by_every_rule(
    graph: tuple[list[Node], list[tuple[str, str, EdgeKind]]], expected: bool | None
) -> None:
    nodes, edges = graph
    raw = dataset("raw", "id signup plan")  # `country` was removed since training
    trained_on = {ds("raw"): schema("id signup country plan")}
    lineage = lineage_of([*nodes, raw], edges)

    assert column_usage(lineage, trained_on)[ds("raw")].feeds("country") is expected


def test_without_the_baseline_a_column_no_rule_names_stays_unknown() -> None:
    # The example without the baseline: `country` is in no current schema and no
    # lineage, so nothing says it exists; only the baseline lets the rules' defaults decide it.
    nodes, edges = through_daily(named_feature("tenure", ("tenure",)), named_feature("plan"))
    lineage = lineage_of([*nodes, dataset("raw", "id signup plan")], edges)

    assert column_usage(lineage)[ds("raw")].feeds("country") is None


def test_a_baseline_of_a_dataset_outside_the_lineage_is_ignored() -> None:
    lineage = lineage_of([dataset("raw", "a")], [(MODEL, ds("raw"), "training_data")])

    usage = column_usage(lineage, {ds("elsewhere"): schema("b")})

    assert set(usage) == {ds("raw")}
