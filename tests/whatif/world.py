"""Catalogs for the impact preview's tests: the demo, and a generated estate on one raw table.

The generated estate is built with real DataHub classes (``testing.builders``) from a seeded
random choice, so it is the same on every run: one raw table, features computed from its
columns (some recording their source column, some named after it), a curated table fed by
column-level lineage, and models reading them through features or as training data.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from datahub.emitter.mcp import MetadataChangeProposalWrapper

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.catalog.loader import read_metadata_file
from mlcopilot.checks import load_checks
from mlcopilot.model import Severity, Urn
from mlcopilot.protocols import Catalog, Check, StateStore
from mlcopilot.scan import Delivery, ScanOptions, ScanResult, scan
from mlcopilot.scan.whatif import ImpactReport
from mlcopilot.store import open_store
from mlcopilot.store.sql import SqlStore
from testing.builders import (
    T0,
    Field,
    dataset,
    dataset_urn,
    feature_urn,
    ml_feature,
    ml_model,
)
from testing.notify_world import FakeClock
from tests.conftest import DEMO_DATA

MCPs = list[MetadataChangeProposalWrapper]
RAW = dataset_urn("raw.events")
CURATED = dataset_urn("curated.users")
OTHER = dataset_urn("other.table")
DEMO_RAW = dataset_urn("raw.customers")
NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
LATER = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)

RAW_FIELDS: list[Field] = [
    ("user_id", "long"),
    ("email", "string"),
    ("age", "int"),
    ("country", "string"),
    ("plan", "string"),
    ("signup_at", "timestamp"),
]
RAW_DESCRIPTIONS = {
    "user_id": "The user",
    "email": "Contact address",
    "country": "Country of residence",
    "plan": "Subscription plan",
}
RAW_TAGS = {"email": ["PII"]}

Key = tuple[Urn, str, Urn, str | None, Severity]
"""What the agreement compares: model, check, entity, field, severity."""


def raw_table(fields: Sequence[Field]) -> MCPs:
    """The raw table with ``fields`` (descriptions and tags kept by column name)."""
    return dataset(
        "raw.events",
        fields=fields,
        field_descriptions=RAW_DESCRIPTIONS,
        field_tags={k: v for k, v in RAW_TAGS.items() if k in {f[0] for f in fields}},
        last_operation=NOW,
    )


def generated_estate(models: int = 12, seed: int = 15, *, trained: bool = True) -> MCPs:
    """The raw table, features on it, a curated table, ``models`` models and an unrelated one.

    ``trained=False``: the models say not when they were trained, so no history is asked and
    a first scan takes the current schema as each model's baseline.
    """
    rng = random.Random(seed)
    columns = [f[0] for f in RAW_FIELDS]
    mcps: MCPs = [*raw_table(RAW_FIELDS)]
    mcps += dataset(
        "curated.users",
        fields=[("email_hash", "string"), ("plan", "string"), ("tenure", "int")],
        column_lineage=[
            (RAW, "email", "email_hash"),
            (RAW, "plan", "plan"),
            (RAW, "signup_at", "tenure"),
        ],
        last_operation=NOW,
    )
    mcps += dataset("other.table", fields=[("x", "int")], last_operation=NOW)
    features: list[Urn] = []
    for column in columns:
        # Half the features record their source column; the others are named after it.
        recorded = rng.random() < 0.5
        mcps += ml_feature("fs", column, sources=[RAW], source_column=column if recorded else None)
        features.append(feature_urn("fs", column))
    mcps += ml_feature("fs", "tenure", sources=[CURATED], source_column="tenure")
    mcps += ml_feature("fs", "x", sources=[OTHER], source_column="x")
    for number in range(models):
        chosen = rng.sample(features, rng.randint(1, 3))
        training: list[str] = []
        if rng.random() < 0.3:
            training.append(CURATED)
        if rng.random() < 0.2:
            training.append(RAW)
        if rng.random() < 0.3:
            chosen.append(feature_urn("fs", "tenure"))
        mcps += ml_model(
            f"model_{number:02d}",
            features=chosen,
            training_data=training,
            date=T0 if trained else None,
        )
    mcps += ml_model("unrelated", features=[feature_urn("fs", "x")], date=T0)
    return mcps


def lite(path: Path, mcps: Sequence[MetadataChangeProposalWrapper]) -> LiteCatalog:
    """A fresh Lite file holding ``mcps``."""
    catalog = LiteCatalog(path, create=True)
    catalog.ingest(list(mcps))
    return catalog


def demo_catalog(path: Path) -> LiteCatalog:
    """The demo's catalog (01_catalog.json) in a fresh Lite file."""
    _, mcps = read_metadata_file(DEMO_DATA / "01_catalog.json")
    return lite(path, mcps)


def demo_change() -> MCPs:
    """The demo's real schema change: the schemaMetadata aspect of 02_schema_change.json."""
    _, mcps = read_metadata_file(DEMO_DATA / "02_schema_change.json")
    return [m for m in mcps if m.aspectName == "schemaMetadata"]


def aspect(mcps: Sequence[MetadataChangeProposalWrapper], name: str) -> MCPs:
    """Only the ``name`` aspects of ``mcps`` (to apply one change and nothing else)."""
    found = [m for m in mcps if m.aspectName == name]
    assert found, f"no {name} aspect"
    return found


def checks() -> list[Check]:
    """Every built-in check with its defaults, as a scan runs them."""
    return load_checks()


def store(path: Path) -> SqlStore:
    """A file-backed SQLite state database."""
    return open_store(f"sqlite:///{path}")


def real_scan(catalog: Catalog, state: StateStore, now: datetime) -> ScanResult:
    """A committed scan of every model, writing back to the catalog, as ``mlcopilot scan``."""
    # The relay's clock is a fake one: group_wait passes without the test waiting for it.
    delivery = Delivery(clock=FakeClock(now))
    return scan(catalog, state, checks(), ScanOptions(now=now), delivery=delivery)


def change_for_real(
    catalog: LiteCatalog,
    state: StateStore,
    change: Sequence[MetadataChangeProposalWrapper],
    now: datetime,
) -> ScanResult:
    """Scan at ``now``, make ``change`` in the catalog, scan at ``now`` again; the second scan.

    The first scan takes what time alone does by ``now`` (a source gone stale), so the second
    opens only what the change does: what "a scan now and again after the change" compares.
    """
    real_scan(catalog, state, now)
    catalog.ingest(list(change))
    return real_scan(catalog, state, now)


def predicted(report: ImpactReport) -> set[Key]:
    """The incidents the preview says the change would open."""
    return {(f.model, f.check, f.entity, f.field, f.severity) for f in report.findings}


def opened(result: ScanResult) -> set[Key]:
    """The incidents a real scan opened."""
    return {(i.model, i.check, i.entity, i.field, i.severity) for i in result.changes.opened}


def severities(report: ImpactReport) -> Mapping[Urn, Severity | None]:
    """Each downstream model's severity."""
    return {m.urn: m.severity for m in report.models}
