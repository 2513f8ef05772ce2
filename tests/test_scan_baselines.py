"""Baselines through a first scan and the next: chosen once, from history or the first scan.

A scan reads the store and the catalog's history once for all its models and makes each
model's baselines when it checks it (an estate's are a million, never all held at once). A
first scan chooses each (model, dataset) baseline once, a model named twice included, from
history at the training time or, when history cannot tell, from today's schema or oldest
profile; the next scan reads them back, chooses nothing new and finds the same.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks import load_checks
from mlcopilot.protocols import StateStore, WalkLimits
from mlcopilot.scan.checking import Checked, read_schema_baselines, walk_and_check
from mlcopilot.store import open_store
from testing.builders import dataset, dataset_urn, ml_model, model_urn, observed
from tests.checks.test_profile_drift import AT_TRAINING, DRIFTED, profile

DAY0 = datetime(2026, 6, 1, tzinfo=UTC)
NOW = DAY0 + timedelta(days=40)
DATASETS = [f"raw.t{i}" for i in range(4)]
MODELS = [f"m{i}" for i in range(5)]


def _day(n: int) -> datetime:
    return DAY0 + timedelta(days=n)


def _catalog(path: Path) -> LiteCatalog:
    mcps: list[Any] = []
    for name in DATASETS:
        mcps += observed(dataset(name, fields=[("id", "long"), ("amount", "double")]), _day(1))
    # t1 renamed a column after the early models were trained, before the late ones.
    mcps += observed(dataset("raw.t1", fields=[("id", "long"), ("total", "double")]), _day(10))
    for name in ("raw.t0", "raw.t2"):
        urn = dataset_urn(name)
        mcps += [
            profile(urn, _day(2), 100_000, AT_TRAINING),
            profile(urn, _day(30), 90_000, DRIFTED),
        ]
    # t3's first profile is after every model's training: its oldest one is the baseline.
    mcps.append(profile(dataset_urn("raw.t3"), _day(25), 100_000, AT_TRAINING))
    for index, name in enumerate(MODELS):
        reads = [DATASETS[(index + k) % len(DATASETS)] for k in range(3)]
        trained = _day(5) if index % 2 == 0 else _day(15)
        mcps += ml_model(name, training_data=reads, date=trained)
    catalog = LiteCatalog(path, create=True)
    catalog.ingest(mcps)
    return catalog


TWICE = [model_urn(name) for name in MODELS] + [model_urn("m0")]
"""Every model, m0 named twice (its new baselines are kept once)."""


@contextmanager
def _opened(tmp_path: Path) -> Iterator[tuple[LiteCatalog, StateStore]]:
    with (
        _catalog(tmp_path / "c.db") as catalog,
        open_store(f"sqlite:///{tmp_path / 's.db'}") as store,
    ):
        yield catalog, store


def _walk(catalog: LiteCatalog, store: StateStore, models: Sequence[str]) -> Checked:
    return walk_and_check(catalog, store, load_checks(), list(models), now=NOW, limits=WalkLimits())


def _seen(checked: Checked, models: Sequence[str]) -> dict[str, Any]:
    """Everything a part's size must not change."""
    entities = {u for r in checked.reports for u in r.lineage.nodes}
    names = [check.name for check in load_checks()]
    return {
        "reports": [
            (r.urn, r.findings, dict(r.unknown), r.errors, r.gaps, r.profiles)
            for r in checked.reports
        ],
        "baselines": sorted(checked.baselines, key=lambda b: (b.model, b.dataset)),
        "profile_baselines": sorted(checked.profile_baselines, key=lambda b: (b.model, b.dataset)),
        "evaluated": {
            (m, c, e)
            for m in models
            for c in names
            for e in entities
            if checked.evaluated.covers(m, c, e)
        },
    }


def test_a_first_scan_chooses_each_baseline_once_and_the_next_reads_them_back(
    tmp_path: Path,
) -> None:
    models = TWICE
    with _opened(tmp_path) as (catalog, store):
        first = _walk(catalog, store, models)
        lineages = [r.lineage for r in first.reports]
        reads = read_schema_baselines(catalog, store, lineages, NOW)
        chosen = [reads.of(lineage) for lineage in lineages]
        store.save_baselines(first.baselines)
        store.save_profile_baselines(first.profile_baselines)
        second = _walk(catalog, store, models)
    found, again = _seen(first, models), _seen(second, models)
    pairs = [(b.model, b.dataset) for b in found["baselines"]]
    assert len(pairs) == len(set(pairs)) == 5 * 3  # every model's 3 datasets, once
    assert found["baselines"] == sorted(
        {b for _, new in chosen for b in new}, key=lambda b: (b.model, b.dataset)
    )
    t1 = dataset_urn("raw.t1")
    fields = {
        (b.model, b.source): sorted(f.path for f in b.schema.fields)
        for b in found["baselines"]
        if b.dataset == t1
    }
    # Trained before t1's rename: history gives the old columns; after it, today's.
    assert fields[(model_urn("m0"), "history")] == ["amount", "id"]
    assert fields[(model_urn("m1"), "history")] == ["id", "total"]
    profiles = {(b.dataset, b.source) for b in found["profile_baselines"]}
    assert (dataset_urn("raw.t3"), "first_scan") in profiles  # no profile by training time
    assert (dataset_urn("raw.t0"), "history") in profiles
    assert any(findings for _, findings, *_ in found["reports"])  # drift is found
    assert again["baselines"] == []  # the next scan chooses nothing new
    assert again["profile_baselines"] == []
    assert again["reports"] == found["reports"]
    assert again["evaluated"] == found["evaluated"]


def test_the_stored_baselines_are_read_a_part_of_the_models_at_a_time_as_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = TWICE
    with _opened(tmp_path) as (catalog, store):
        first = _walk(catalog, store, models)
        store.save_baselines(first.baselines)
        store.save_profile_baselines(first.profile_baselines)
        whole = _walk(catalog, store, models)
        asked: list[list[str]] = []
        read = store.baselines_of

        def recorded(part: Sequence[str], **options: Any) -> Any:
            asked.append(list(part))
            return read(part, **options)

        monkeypatch.setattr(store, "baselines_of", recorded)
        monkeypatch.setattr(sys.modules["mlcopilot.scan.checking"], "STORED_PART", 2)
        parts = _walk(catalog, store, models)
    # In the order the models are checked, each model's read once (m0, named twice, too).
    assert asked == [models[0:2], models[2:4], models[4:5]]
    assert _seen(parts, models) == _seen(whole, models)
    assert list(parts.baselines) == []  # every baseline was found stored, none chosen again
