"""``preview_change`` itself: which models, in what order, through which features; refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlcopilot.errors import UsageError
from mlcopilot.model import Severity
from mlcopilot.scan.whatif import ChangeSet, parse_changes, preview_change, resolve_dataset
from mlcopilot.store import open_store
from testing.builders import dataset, dataset_urn, feature_urn, ml_feature, ml_model, model_urn
from tests.whatif.world import LATER, MCPs, checks, lite

RAW = dataset_urn("raw.t")
ORPHAN = dataset_urn("raw.orphan")


def estate() -> MCPs:
    return [
        *dataset("raw.t", fields=[("a", "int"), ("b", "string"), ("c", "string")]),
        *dataset("raw.orphan", fields=[("z", "int")]),
        *ml_feature("fs", "fa", sources=[RAW], source_column="a"),
        *ml_feature("fs", "fb", sources=[RAW], source_column="b"),
        *ml_model("reads_a", features=[feature_urn("fs", "fa")]),
        *ml_model("reads_b", features=[feature_urn("fs", "fb")]),
        *ml_model("reads_both", features=[feature_urn("fs", "fa"), feature_urn("fs", "fb")]),
    ]


def test_models_features_and_order(tmp_path: Path) -> None:
    with lite(tmp_path / "c.db", estate()) as catalog, open_store("sqlite://") as store:
        report = preview_change(catalog, store, checks(), RAW, parse_changes(drop=["a"]), LATER)
    # Worst first, then by urn. reads_b does not read `a` (fb records its source column b),
    # yet its schema is no longer the one it was trained on: low, as schema drift says.
    assert [(m.urn, m.severity) for m in report.models] == [
        (model_urn("reads_a"), Severity.CRITICAL),
        (model_urn("reads_both"), Severity.CRITICAL),
        (model_urn("reads_b"), Severity.LOW),
    ]
    both, only_b = report.models[1], report.models[2]
    # Only the feature computed from `a` carries the change to the model, not fb.
    assert both.features == (feature_urn("fs", "fa"),)
    assert both.fields == ("a",)
    assert only_b.features == ()
    assert report.worst is Severity.CRITICAL
    assert [m.urn for m in report.fails(Severity.CRITICAL)] == [
        model_urn("reads_a"),
        model_urn("reads_both"),
    ]
    scan_shaped = report.as_scan_result()
    assert [len(m.findings) for m in scan_shaped.models] == [1, 1, 1]
    assert scan_shaped.dry_run


def test_a_dataset_no_model_reads_affects_none(tmp_path: Path) -> None:
    with lite(tmp_path / "c.db", estate()) as catalog, open_store("sqlite://") as store:
        report = preview_change(catalog, store, checks(), ORPHAN, parse_changes(drop=["z"]), LATER)
    assert report.models == ()
    assert report.notes == ("No model reads raw.orphan: the change affects none.",)


def test_refusals(tmp_path: Path) -> None:
    with lite(tmp_path / "c.db", estate()) as catalog, open_store("sqlite://") as store:
        with pytest.raises(UsageError, match=r"^no change to preview"):
            preview_change(catalog, store, checks(), RAW, ChangeSet(), LATER)
        with pytest.raises(UsageError, match=r"not a dataset urn"):
            preview_change(
                catalog, store, checks(), model_urn("reads_a"), parse_changes(drop=["a"]), LATER
            )
        with pytest.raises(
            UsageError, match=r"raw\.tt,PROD\): no such dataset .*did you mean raw\.t\?"
        ):
            preview_change(
                catalog, store, checks(), dataset_urn("raw.tt"), parse_changes(drop=["a"]), LATER
            )
        assert resolve_dataset(catalog, "raw.t") == RAW
        assert resolve_dataset(catalog, "RAW.T") == RAW  # a name in another case, if unique
        # raw.orphan exists, but no model reads it: by name it is not offered.
        with pytest.raises(UsageError, match="no dataset of that name upstream of a model"):
            resolve_dataset(catalog, "raw.orphan")
