"""A scan's new baselines held a model at a time: what goes in is what comes out, once a pair."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mlcopilot.model import Baseline, ChosenBaselines, Schema, SchemaField

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 2, 1, tzinfo=UTC)
M1, M2 = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,a,PROD)", "urn:li:mlModel:b"
D1, D2, D3 = (f"urn:li:dataset:(urn:li:dataPlatform:hive,t{i},PROD)" for i in (1, 2, 3))
ID = Schema(fields=(SchemaField(path="id", type="NUMBER"),))
NAME = Schema(fields=(SchemaField(path="name", type="STRING"),))


def test_every_baseline_given_comes_back_by_model_then_dataset() -> None:
    given = [
        Baseline(M2, D2, ID, "first_scan", T1),
        Baseline(M1, D3, NAME, "history", T0),
        Baseline(M1, D1, ID, "history", T0),
        Baseline(M2, D1, NAME, "first_scan", T1),
    ]
    chosen = ChosenBaselines(given)
    assert len(chosen) == 4
    assert list(chosen) == [given[2], given[1], given[3], given[0]]


def test_the_last_baseline_given_for_a_pair_wins() -> None:
    later = Baseline(M1, D1, NAME, "accepted", T1)
    chosen = ChosenBaselines([Baseline(M1, D1, ID, "history", T0), later])
    assert list(chosen) == [later]
    assert len(chosen) == 1


def test_a_model_added_again_is_replaced_not_added_to() -> None:
    chosen = ChosenBaselines()
    assert not chosen
    chosen.add(M1, [Baseline(M1, D1, ID, "history", T0), Baseline(M1, D2, ID, "history", T0)])
    chosen.add(M1, [Baseline(M1, D3, NAME, "first_scan", T1)])
    assert list(chosen) == [Baseline(M1, D3, NAME, "first_scan", T1)]
    assert len(chosen) == 1
    chosen.add(M1, [])
    assert not chosen
    assert list(chosen) == []


def test_a_model_is_held_as_runs_of_one_source_and_time_sharing_the_schemas_given() -> None:
    chosen = ChosenBaselines()
    chosen.add(
        M1,
        [
            Baseline(M1, D3, ID, "first_scan", T1),
            Baseline(M1, D2, NAME, "history", T0),
            Baseline(M1, D1, ID, "first_scan", T1),
        ],
    )
    runs = list(chosen.runs())
    assert [(r.source, r.captured_at, r.datasets) for r in runs] == [
        ("first_scan", T1, (D1, D3)),
        ("history", T0, (D2,)),
    ]
    assert all(schema is ID for schema in runs[0].schemas)  # the objects given, not copies


def test_another_models_baseline_is_refused() -> None:
    chosen = ChosenBaselines()
    with pytest.raises(ValueError, match="a baseline of urn:li:mlModel:b given as one of"):
        chosen.add(M1, [Baseline(M2, D1, ID, "history", T0)])
    assert not chosen
