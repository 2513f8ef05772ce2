"""The preview agrees with the scan: what it predicts is what a scan after the change opens.

Each test previews a change, then makes it for real (the changed aspect written into the
Lite catalog, as ingestion would), scans, and compares the incidents the scan opened
(model, check, entity, field, severity) with the preview's.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.model import Deprecation, Severity
from mlcopilot.scan.whatif import derive_changes, parse_changes, preview_change, read_schema_file
from testing.builders import dataset, model_urn
from tests.conftest import DEMO_DATA
from tests.whatif.world import (
    DEMO_RAW,
    LATER,
    NOW,
    RAW,
    RAW_FIELDS,
    aspect,
    change_for_real,
    checks,
    demo_catalog,
    demo_change,
    generated_estate,
    lite,
    opened,
    predicted,
    raw_table,
    real_scan,
    severities,
    store,
)

DEMO_MODEL = model_urn("churn_predictor_v1")


def test_demo_schema_change_preview_equals_the_scan_after_it(tmp_path: Path) -> None:
    with demo_catalog(tmp_path / "c.db") as catalog, store(tmp_path / "s.db") as state:
        real_scan(catalog, state, NOW)  # the estate as it runs today
        current = catalog.nodes([DEMO_RAW])[DEMO_RAW].schema
        proposed = read_schema_file(DEMO_DATA / "02_schema_change.json", DEMO_RAW, current)
        changes = derive_changes(current, proposed, source="02_schema_change.json")
        report = preview_change(catalog, state, checks(), DEMO_RAW, changes, LATER)

        after = change_for_real(catalog, state, demo_change(), LATER)

    assert predicted(report) == opened(after)
    # The demo's story: signup_date feeds tenure_days, so dropping it is critical.
    assert severities(report) == {DEMO_MODEL: Severity.CRITICAL}
    [model] = report.models
    assert "signup_date" in model.fields
    assert any("tenure_days" in feature for feature in model.features)


def test_before_any_scan_the_preview_is_what_a_scan_now_and_after_would_compare(
    tmp_path: Path,
) -> None:
    """No baseline is stored yet: the preview compares the proposal with today's schema."""
    with demo_catalog(tmp_path / "c.db") as catalog, store(tmp_path / "s.db") as state:
        current = catalog.nodes([DEMO_RAW])[DEMO_RAW].schema
        proposed = read_schema_file(DEMO_DATA / "02_schema_change.json", DEMO_RAW, current)
        changes = derive_changes(current, proposed, source="02_schema_change.json")
        report = preview_change(catalog, state, checks(), DEMO_RAW, changes, NOW)
        assert state.last_scan_at() is None  # the preview recorded nothing

        after = change_for_real(catalog, state, demo_change(), NOW)

    assert predicted(report)
    assert predicted(report) == opened(after)


CHANGED_FIELDS = [
    ("user_id", "string"),  # retyped from long
    ("email", "string"),
    ("country_code", "string"),  # country renamed (same type, position and description)
    ("plan", "string"),
    ("signup_at", "timestamp"),
]  # age dropped


def _renamed_description() -> dict[str, str]:
    from tests.whatif.world import RAW_DESCRIPTIONS

    return {**RAW_DESCRIPTIONS, "country_code": RAW_DESCRIPTIONS["country"]}


@pytest.mark.parametrize(
    ("first_scan_before", "trained"),
    [(True, True), (False, True), (False, False)],
    ids=["scanned", "never-scanned", "never-scanned-no-training-date"],
)
def test_generated_estate_flags_preview_equals_the_scan_after_them(
    tmp_path: Path, first_scan_before: bool, trained: bool
) -> None:
    estate = generated_estate(trained=trained)
    with lite(tmp_path / "c.db", estate) as catalog, store(tmp_path / "s.db") as st:
        if first_scan_before:
            real_scan(catalog, st, NOW)
        changes = parse_changes(
            drop=["age"], rename=["country=country_code"], retype=["user_id=string"]
        )
        report = preview_change(catalog, st, checks(), RAW, changes, LATER)
        new_schema = dataset(
            "raw.events",
            fields=CHANGED_FIELDS,
            field_descriptions=_renamed_description(),
            field_tags={"email": ["PII"]},
        )
        after = change_for_real(catalog, st, aspect(new_schema, "schemaMetadata"), LATER)

    assert predicted(report) == opened(after)
    affected = {m.urn for m in report.affected}
    # Every model reading the raw table is downstream; the unrelated one is not.
    assert model_urn("unrelated") not in {m.urn for m in report.models}
    assert affected, "the generated estate has models the change breaks"
    worst = {m.severity for m in report.affected}
    assert Severity.CRITICAL in worst  # a model reading fs.age or fs.country loses its column


def test_preview_counts_only_what_the_change_adds(tmp_path: Path) -> None:
    """A drift already open before the change is not the change's doing."""
    with lite(tmp_path / "c.db", generated_estate()) as catalog, store(tmp_path / "s.db") as st:
        real_scan(catalog, st, NOW)
        # plan was already dropped (and so already an open incident) before the proposal.
        without_plan = [f for f in RAW_FIELDS if f[0] != "plan"]
        catalog.ingest(aspect(raw_table(without_plan), "schemaMetadata"))
        already = real_scan(catalog, st, NOW + timedelta(minutes=1))
        assert any(i.field == "plan" for i in already.changes.opened)

        report = preview_change(catalog, st, checks(), RAW, parse_changes(drop=["email"]), LATER)
        without_email = [f for f in without_plan if f[0] != "email"]
        after = change_for_real(
            catalog, st, aspect(raw_table(without_email), "schemaMetadata"), LATER
        )

    assert predicted(report) == opened(after)
    assert {f.field for f in report.findings} == {"email"}


@pytest.mark.parametrize(
    ("decommission", "severity"),
    [(None, Severity.MEDIUM), (NOW - timedelta(days=1), Severity.HIGH)],
    ids=["no-date", "date-passed"],
)
def test_deprecate_preview_equals_deprecated_source_after_it(
    tmp_path: Path, decommission: object, severity: Severity
) -> None:
    when = decommission if decommission is None else NOW - timedelta(days=1)
    deprecation = Deprecation(note="moving to raw.events_v2", decommission_time=when)
    with lite(tmp_path / "c.db", generated_estate()) as catalog, store(tmp_path / "s.db") as st:
        real_scan(catalog, st, NOW)
        report = preview_change(
            catalog, st, checks(), RAW, parse_changes(deprecation=deprecation), LATER
        )
        deprecated = dataset(
            "raw.events",
            deprecated=True,
            deprecation_note="moving to raw.events_v2",
            decommission_at=when,
        )
        after = change_for_real(catalog, st, aspect(deprecated, "deprecation"), LATER)

    assert predicted(report) == opened(after)
    checks_found = {(f.check, f.severity) for f in report.findings}
    assert ("deprecated_source", severity) in checks_found
    # Deprecation reaches every model reading the table, feature or not.
    assert all(m.affected for m in report.models)


def test_the_preview_writes_nothing(tmp_path: Path) -> None:
    with lite(tmp_path / "c.db", generated_estate()) as catalog, store(tmp_path / "s.db") as st:
        real_scan(catalog, st, NOW)
        incidents = st.incidents(include_resolved=True)
        baselines = {m: st.baselines(m) for m in catalog.models()}
        outbox = st.outbox()
        aspects_before = _aspects(catalog)
        report = preview_change(
            catalog,
            st,
            checks(),
            RAW,
            parse_changes(drop=["age"], deprecation=Deprecation()),
            LATER,
        )
        assert report.affected
        assert st.incidents(include_resolved=True) == incidents
        assert {m: st.baselines(m) for m in catalog.models()} == baselines
        assert st.outbox() == outbox
        assert st.last_scan_at() == NOW
        assert _aspects(catalog) == aspects_before
        assert catalog.nodes([RAW])[RAW].deprecation is None


def _aspects(catalog: LiteCatalog) -> object:
    node = catalog.nodes([RAW])[RAW]
    return (node.schema, node.deprecation, node.tags, catalog.entity_counts())
