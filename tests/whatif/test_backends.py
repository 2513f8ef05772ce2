"""The preview on every backend: the same estate and change give the same answer.

``datahub:`` runs against the stand-in GMS (DataHub's real GraphQL schema, its lineage index
missing the ML hops as a real one does), ``mcp:`` through the real ``mcp-server-datahub``;
both skip with the reason where they cannot run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mlcopilot.model import Deprecation, Severity
from mlcopilot.scan.whatif import parse_changes, preview_change
from mlcopilot.store import open_store
from testing.builders import feature_urn, model_urn
from tests.checks.backends import BACKENDS, PARAMS
from tests.whatif.world import LATER, RAW, checks, generated_estate, lite, predicted


@pytest.fixture(params=PARAMS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def test_the_preview_says_the_same_on_every_backend(backend: str, tmp_path: Path) -> None:
    mcps = generated_estate(models=4)
    changes = parse_changes(
        drop=["age"], rename=["country=country_code"], deprecation=Deprecation(note="v2")
    )
    with lite(tmp_path / "expected.db", mcps) as reference, open_store("sqlite://") as state:
        expected = preview_change(reference, state, checks(), RAW, changes, LATER)
    catalog = BACKENDS[backend](tmp_path / backend, mcps)
    try:
        with open_store("sqlite://") as state:
            report = preview_change(catalog, state, checks(), RAW, changes, LATER)
    finally:
        catalog.close()

    assert [m.urn for m in report.models] == [m.urn for m in expected.models]
    assert predicted(report) == predicted(expected)
    assert {m.urn: m.features for m in report.models} == {
        m.urn: m.features for m in expected.models
    }
    # The estate has a model reading fs.age: losing its column is critical there too.
    readers_of_age = [
        m for m in report.models if feature_urn("fs", "age") in m.report.lineage.nodes
    ]
    assert readers_of_age
    assert all(m.severity is Severity.CRITICAL for m in readers_of_age)
    assert model_urn("unrelated") not in {m.urn for m in report.models}
