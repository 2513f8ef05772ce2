"""The impact preview's store view: the would-be baselines are seen as stored, by every read."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from mlcopilot.model import Baseline, Schema, SchemaField
from mlcopilot.scan.whatif.overlay import BaselineView
from mlcopilot.store import open_store
from testing.builders import dataset_urn, model_urn

T0 = datetime(2026, 5, 1, tzinfo=UTC)
SCHEMA = Schema(fields=(SchemaField(path="id", type="NUMBER"),))


def test_the_would_be_baselines_are_named_and_read_as_stored_ones(tmp_path: Path) -> None:
    stored_model, added_model = model_urn("stored"), model_urn("added")
    orders, users = dataset_urn("raw.orders"), dataset_urn("raw.users")
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        store.save_baselines([Baseline(stored_model, orders, SCHEMA, "first_scan", T0)])
        added = Baseline(added_model, users, SCHEMA, "history", T0)
        view = BaselineView(store, {added_model: added})
        models = [stored_model, added_model]
        read = view.baselines_of(models)
        assert read[added_model] == [added]
        assert view.baselined_datasets(models) == {stored_model: {orders}, added_model: {users}}
        assert view.baselined_datasets(models) == {m: {b.dataset for b in read[m]} for m in models}
