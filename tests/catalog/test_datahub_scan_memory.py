"""What a ``datahub:`` catalog keeps of what it read, and that keeping less changes no answer.

Issue 27 §2: an estate of 10,000 models over 100,000 entities in 1 GB. The raw aspects of every
entity walked (15 KB each), the values of every schema version read for the training-time
baselines, and each entity translated twice were what made a large scan large or slow; now an
entity is translated once, then only what is read of it afterwards is kept (its edges, its
reverse-edge aspects, a training run's properties), and version values are dropped once the
baselines are made. Whatever is asked later (a write clears the nodes, another history call)
is read again, and answers as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlcopilot.catalog.datahub import catalog as datahub_catalog
from mlcopilot.catalog.datahub.catalog import DataHubCatalog
from mlcopilot.model import PropertyWrite, TagWrite
from mlcopilot.protocols import WalkLimits
from testing.builders import (
    T0,
    dataset,
    dataset_urn,
    feature_urn,
    ml_feature,
    ml_feature_table,
    ml_model,
    model_urn,
    training_run,
    training_run_urn,
)
from tests.catalog.datahub_backend import needs_standin, start_standin

pytestmark = needs_standin

PII = "urn:li:tag:mlcopilot-pii-exposure"


def catalog_mcps() -> list[Any]:
    """Two models sharing a layered lineage, one dated by its training run."""
    mcps: list[Any] = []
    for i in range(30):
        mcps += dataset(
            f"raw.r{i}",
            fields=[("id", "long"), ("email", "string")],
            last_operation=T0,
        )
    for i in range(10):
        mcps += dataset(
            f"mart.m{i}",
            fields=[("id", "long"), ("email", "string")],
            upstreams=[f"raw.r{3 * i}", f"raw.r{3 * i + 1}"],
            column_lineage=[(f"raw.r{3 * i + 2}", "email", "email")],
        )
    features = [feature_urn("fs", f"f{i}") for i in range(10)]
    for i in range(10):
        mcps += ml_feature("fs", f"f{i}", sources=[f"mart.m{i}"])
    mcps += ml_feature_table("fs", features=features)
    mcps += training_run("run1", created=T0 + timedelta(days=3), inputs=["mart.m0"])
    mcps += ml_model("dated", features=features[:6], training_jobs=[training_run_urn("run1")])
    mcps += ml_model("plain", features=features[4:], date=T0 + timedelta(days=5))
    return mcps


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with start_standin(catalog_mcps(), tmp_path_factory.mktemp("standin")) as started:
        yield started


def fresh(server: Any) -> DataHubCatalog:
    return DataHubCatalog(server.url, timeout=10.0, retries=1)


MODELS = [model_urn("dated"), model_urn("plain")]


def test_each_entity_is_translated_once_and_kept_slim(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    translated: list[str] = []
    node = datahub_catalog._node

    def counted(urn: str, *args: Any) -> Any:
        translated.append(urn)
        return node(urn, *args)

    monkeypatch.setattr(datahub_catalog, "_node", counted)
    with fresh(server) as catalog:
        catalog.prefetch(MODELS, WalkLimits())
        lineages = [catalog.lineage(m, WalkLimits()) for m in MODELS]
        walked = {u for lineage in lineages for u in lineage.nodes}
        assert sorted(translated) == sorted(walked)  # once each, none twice
        for urn in walked:
            bundle = catalog._cache[urn]
            if urn in MODELS:
                assert bundle.whole  # a model's aspects answer models() and training data
                continue
            assert not bundle.whole
            assert set(bundle.aspects) <= datahub_catalog._KEPT_ASPECTS
            assert bundle.upstream is not None  # its edges, worked out before slimming
        run = catalog._cache[training_run_urn("run1")].aspects
        assert "dataProcessInstanceProperties" in run  # what the model's translation reads


def test_what_a_slim_catalog_answers_is_what_a_fresh_one_answers(server: Any) -> None:
    with fresh(server) as slim, fresh(server) as other:
        slim.prefetch(MODELS, WalkLimits())
        walks = [slim.lineage(m, WalkLimits()) for m in MODELS]
        assert walks == [other.lineage(m, WalkLimits()) for m in MODELS]
        urns = sorted({u for w in walks for u in w.nodes})
        # Edges both ways (the downstream walk reads reverse edges and who names an urn).
        assert set(slim.upstream(urns)) == set(other.upstream(urns))
        assert set(slim.downstream(urns)) == set(other.downstream(urns))
        assert slim.downstream_models(dataset_urn("raw.r12")) == MODELS
        assert slim.models() == other.models() == MODELS


def test_after_a_write_a_slim_entity_is_read_again(server: Any) -> None:
    target = dataset_urn("mart.m1")
    with fresh(server) as catalog:
        catalog.lineage(model_urn("plain"), WalkLimits())
        assert PII not in catalog.nodes([target])[target].tags
        assert catalog.apply([TagWrite(target, PII, present=True)]) != []
        server.clear_requests()
        nodes = catalog.nodes([target, dataset_urn("raw.r3"), model_urn("dated")])
        assert PII in nodes[target].tags
        assert server.requests  # read again, not translated from what was slimmed
        with fresh(server) as other:
            assert nodes == other.nodes([target, dataset_urn("raw.r3"), model_urn("dated")])
        catalog.apply([TagWrite(target, PII, present=False)])


def test_history_values_are_dropped_once_answered_and_read_again_if_asked(server: Any) -> None:
    urns = [dataset_urn(f"raw.r{i}") for i in range(5)]
    when = datetime.now(UTC) + timedelta(days=1)
    with fresh(server) as catalog, fresh(server) as other:
        catalog.lineage(model_urn("plain"), WalkLimits())
        first = catalog.schemas_as_of(urns, when)
        assert not catalog._versions  # nothing of the versions read is held past the call
        assert catalog.schemas_as_of(urns, when) == first == other.schemas_as_of(urns, when)
        assert all(first.values())


def test_a_dry_run_compared_in_slices_reports_what_one_comparison_reports(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Across slices, each write still sees what the writes before it changed."""
    new_tag = "urn:li:tag:mlcopilot-sliced"  # no definition yet: the first write creates it
    prop = "urn:li:structuredProperty:io.mlcopilot.sliced"
    writes: list[Any] = [
        TagWrite(dataset_urn(f"raw.r{i}"), new_tag, present=True) for i in range(5)
    ]
    writes += [
        TagWrite(dataset_urn("raw.r0"), new_tag, present=True),  # no change: just added
        TagWrite(dataset_urn("raw.r0"), new_tag, present=False),
        TagWrite(dataset_urn("raw.r9"), new_tag, present=False),  # no change: never there
        TagWrite(dataset_urn("raw.r0"), new_tag, present=True),
        PropertyWrite(model_urn("plain"), prop, ("a",)),
        PropertyWrite(model_urn("plain"), prop, ("a",)),  # no change
        PropertyWrite(model_urn("plain"), prop, ("b",)),
    ]
    with fresh(server) as catalog:
        whole = catalog.apply(writes, dry_run=True)
        assert len(whole) == len(writes) - 3
        for size in (1, 2, 3, 5):
            monkeypatch.setattr(datahub_catalog, "WRITE_SLICE", size)
            assert catalog.apply(writes, dry_run=True) == whole, size


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from([f"urn:li:tag:t{i}" for i in range(12)]), max_size=8)))
def test_the_urns_needed_again_are_the_ones_a_later_part_needs(parts: list[list[str]]) -> None:
    """Each urn more than one part needs, with the last part needing it; no other urn."""
    expected: dict[int, int] = {}
    for urn in {u for part in parts for u in part}:
        needing = [index for index, part in enumerate(parts) if urn in part]
        if len(needing) > 1:
            expected[hash(urn)] = needing[-1]
    assert datahub_catalog._needed_again(parts) == expected
