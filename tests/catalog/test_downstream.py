"""The reverse walk on every backend: ``models_downstream`` through each catalog's own
batched ``downstream`` equals the fallback (walk every model upstream, index what it reached).

The fallback is the scan's own upstream walk, so "equal" means: the impact preview and the
watcher name exactly the models a scan would say read the entity.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from datahub.emitter.mcp import MetadataChangeProposalWrapper

from benchmarks.generate import Shape, generate, wrappers
from mlcopilot.lineage.downstream import (
    DownstreamModels,
    DownstreamSource,
    build_index,
    models_downstream,
)
from mlcopilot.model import Edge, Urn
from mlcopilot.protocols import Catalog, WalkLimits
from testing.builders import (
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
    primary_key_urn,
    training_run,
    training_run_urn,
)
from tests.catalog import test_contract
from tests.catalog.contract import MakeCatalog
from tests.catalog.datahub_backend import needs_standin, standin_catalog

DEMO = Path(__file__).parents[2] / "src" / "mlcopilot" / "demo_data" / "01_catalog.json"
LIMITS = WalkLimits()

RAW = dataset_urn("raw.customers")
CLEAN = dataset_urn("clean.customers")
TRAINSET = dataset_urn("raw.training_set")
ACCOUNTS = dataset_urn("raw.accounts")
EVENTS = dataset_urn("raw.events")
FEATURE = feature_urn("customer_features", "email_domain")
TABLE = feature_table_urn("customer_features")
KEY = primary_key_urn("customer_features", "customer_id")
RUN = training_run_urn("run-1")
JOB = data_job_urn("nightly", "clean_customers")
GHOST_FEATURE = feature_urn("gone", "never_ingested")


# The contract's fixture: a fresh catalog per call, on every backend (lite, DataHub, MCP).
make_catalog = test_contract.make_catalog


def fallback(catalog: Catalog, limits: WalkLimits = LIMITS) -> Callable[[Urn], list[Urn]]:
    """``models_downstream`` as a catalog without the capability answers (walk every model)."""
    index = build_index(catalog, (), limits)
    return lambda urn: sorted(index.downstream(urn))


def every_urn(catalog: Catalog, limits: WalkLimits = LIMITS) -> list[Urn]:
    """Every urn some model's walk reaches (ghosts and soft-deleted ones included)."""
    reached = {u for m in catalog.models() for u in catalog.lineage(m, limits).nodes}
    return sorted(reached)


def assert_capability_equals_fallback(
    catalog: Catalog, urns: Sequence[Urn], limits: WalkLimits = LIMITS
) -> None:
    assert isinstance(catalog, DownstreamModels)
    expected = fallback(catalog, limits)
    differ = {
        urn: (got, want)
        for urn in urns
        if (got := models_downstream(catalog, urn, limits)) != (want := expected(urn))
    }
    assert differ == {}


def hops_mcps() -> list[MetadataChangeProposalWrapper]:
    """Every hop kind, each the only way some model reaches some dataset."""
    return [
        # training data only: nothing in DataHub's lineage index links trainset to "churn"
        *ml_model("churn", features=[FEATURE], training_jobs=[RUN], training_data=[TRAINSET]),
        *ml_feature("customer_features", "email_domain", sources=[CLEAN]),
        # feature-table reach: accounts -> key -> table -> feature -> churn
        *ml_feature_table(
            "customer_features", features=["email_domain"], primary_keys=["customer_id"]
        ),
        *ml_primary_key("customer_features", "customer_id", sources=["raw.accounts"]),
        # a training run's input: events -> run -> churn
        *training_run("run-1", inputs=["raw.events"]),
        # a job between datasets: raw -> job -> clean
        *data_job("nightly", "clean_customers", inputs=["raw.customers"], outputs=[CLEAN]),
        *dataset("clean.customers", fields=[("email", "string")]),
        *dataset("raw.customers", fields=[("email", "string")]),
        # a second model reading the same feature, and one reaching nothing above
        *ml_model("upsell", features=[FEATURE]),
        *ml_model("lonely", training_data=["raw.other"]),
        # a model referencing a feature nobody ingested
        *ml_model("orphan", features=[GHOST_FEATURE]),
    ]


def test_every_hop_kind_reaches_its_models(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog(hops_mcps())
    churn, upsell = model_urn("churn"), model_urn("upsell")
    assert models_downstream(catalog, TRAINSET, LIMITS) == [churn]
    assert models_downstream(catalog, ACCOUNTS, LIMITS) == [churn, upsell]  # via the table
    assert models_downstream(catalog, KEY, LIMITS) == [churn, upsell]
    assert models_downstream(catalog, TABLE, LIMITS) == [churn, upsell]
    assert models_downstream(catalog, EVENTS, LIMITS) == [churn]  # via the training run
    assert models_downstream(catalog, RUN, LIMITS) == [churn]
    assert models_downstream(catalog, RAW, LIMITS) == [churn, upsell]  # through the job
    assert models_downstream(catalog, JOB, LIMITS) == [churn, upsell]
    assert models_downstream(catalog, churn, LIMITS) == [churn]
    assert models_downstream(catalog, GHOST_FEATURE, LIMITS) == [model_urn("orphan")]
    assert_capability_equals_fallback(catalog, every_urn(catalog))


def test_an_urn_nothing_references_has_no_models(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog(hops_mcps())
    missing = dataset_urn("no.such.table")
    assert models_downstream(catalog, missing, LIMITS) == []
    assert fallback(catalog)(missing) == []


def test_downstream_is_the_reverse_of_upstream(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog(hops_mcps())
    assert isinstance(catalog, DownstreamSource)
    urns = every_urn(catalog)
    assert set(catalog.downstream(urns)) == set(catalog.upstream(urns))
    assert catalog.downstream([CLEAN]) == [Edge(FEATURE, CLEAN, "feature_source")]
    assert set(catalog.downstream([JOB, TABLE, JOB])) == {
        Edge(CLEAN, JOB, "produced_by"),
        Edge(FEATURE, TABLE, "feature_table"),
    }
    assert catalog.downstream([dataset_urn("nowhere")]) == []
    assert catalog.downstream([]) == []


def test_cycle_ends_and_matches(make_catalog: MakeCatalog) -> None:
    a, b = dataset_urn("loop.a"), dataset_urn("loop.b")
    catalog = make_catalog(
        [
            *dataset("loop.a", upstreams=["loop.b"]),
            *dataset("loop.b", upstreams=["loop.a", "raw.customers"]),
            *ml_model("churn", training_data=["loop.a"]),
        ]
    )
    for urn in (a, b, RAW):
        assert models_downstream(catalog, urn, LIMITS) == [model_urn("churn")]
    assert_capability_equals_fallback(catalog, [a, b, RAW])


def test_soft_deleted_entities_are_crossed_and_soft_deleted_models_left_out(
    make_catalog: MakeCatalog,
) -> None:
    catalog = make_catalog(
        [
            # the upstream walk crosses a soft-deleted feature, so the reverse walk does too
            *ml_feature("customer_features", "email_domain", sources=[RAW], removed=True),
            *ml_model("churn", features=[FEATURE]),
            # a soft-deleted model is in no scan, so it is in no preview either
            *ml_model("retired", features=[FEATURE], removed=True),
        ]
    )
    assert models_downstream(catalog, RAW, LIMITS) == [model_urn("churn")]
    assert models_downstream(catalog, model_urn("retired"), LIMITS) == []
    assert_capability_equals_fallback(catalog, [RAW, FEATURE, model_urn("retired")])


def test_hop_limit_as_the_upstream_walk(make_catalog: MakeCatalog) -> None:
    chain = [f"raw.t{i}" for i in range(6)]
    mcps = [m for up, down in itertools.pairwise(chain) for m in dataset(down, upstreams=[up])]
    catalog = make_catalog([*mcps, *ml_model("churn", training_data=[chain[-1]])])
    limits = WalkLimits(max_hops=3)
    urns = [dataset_urn(name) for name in chain]
    # churn -> t5 (1) -> t4 (2) -> t3 (3): t2 and beyond are past the limit
    found = [models_downstream(catalog, u, limits) for u in urns]
    assert found == [[], [], [], *[[model_urn("churn")]] * 3]
    assert_capability_equals_fallback(catalog, urns, limits)


def test_demo_catalog(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog(wrappers(json.loads(DEMO.read_text(encoding="utf-8"))))
    urns = every_urn(catalog)
    assert any(models_downstream(catalog, u, LIMITS) for u in urns if "dataset" in u)
    assert_capability_equals_fallback(catalog, urns)


def test_generated_catalog(make_catalog: MakeCatalog) -> None:
    shape = Shape(models=12, features=30, features_per_model=4, datasets=40, depth=3, fan_in=2)
    catalog = make_catalog(wrappers(generate(shape)))
    assert_capability_equals_fallback(catalog, every_urn(catalog))


def estate(models: int) -> list[MetadataChangeProposalWrapper]:
    """``raw.customers`` feeding ``models`` models: through a clean table and a feature each,
    and as the training data of every other one."""
    mcps = [*dataset("clean.customers", upstreams=["raw.customers"])]
    for i in range(models):
        mcps += ml_feature("features", f"f{i}", sources=[CLEAN])
        training = ["raw.customers"] if i % 2 else []
        mcps += ml_model(
            f"m{i}", features=[feature_urn("features", f"f{i}")], training_data=training
        )
    return mcps


@needs_standin
def test_requests_grow_with_levels_not_models(tmp_path: Path) -> None:
    counts: dict[int, int] = {}
    for models in (3, 60):
        catalog = standin_catalog(tmp_path / str(models), estate(models))
        with catalog:
            catalog.server.clear_requests()
            found = catalog.downstream_models(RAW, LIMITS)
            assert found == sorted(model_urn(f"m{i}") for i in range(models))
            counts[models] = len(catalog.server.requests)
    assert counts[60] == counts[3]


@needs_standin
def test_a_model_added_since_the_last_walk_is_found(tmp_path: Path) -> None:
    from datahub.emitter.rest_emitter import DatahubRestEmitter

    catalog = standin_catalog(tmp_path, estate(2))
    with catalog:
        assert catalog.downstream_models(RAW) == [model_urn("m0"), model_urn("m1")]
        emitter = DatahubRestEmitter(catalog.server.url)
        for mcp in ml_model("late", features=[feature_urn("features", "f0")]):
            emitter.emit(mcp)
        emitter.close()
        assert catalog.downstream_models(RAW) == [
            model_urn("late"),
            model_urn("m0"),
            model_urn("m1"),
        ]
