"""A ``lite:`` scan's findings are byte-identical to those of the code before it was made fast.

The expected outputs in ``tests/data/lite_scan/`` were written by the code before the ``lite:``
speed work of issue 27 (a pre-translated index, a faster decoder, faster checks); each scenario
of :mod:`tests.catalog.lite_scan_scenarios` is built again here and scanned by the code as it
is now. The JSON report must be the same bytes, and every node the scan walked (and every
entity of the file, read alone) the same in every field.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from tests.catalog.lite_scan_scenarios import GOLDEN, INDEX_MODES, fixture_path, run, scenarios

NAMES = sorted(scenarios())


@pytest.mark.parametrize("index", INDEX_MODES)
@pytest.mark.parametrize("name", NAMES)
def test_the_scan_reads_and_reports_as_before(name: str, index: str, tmp_path: Path) -> None:
    """With the scan index as written, without it, and with half its records gone."""
    if name.startswith("file-") and not GOLDEN.is_dir():
        pytest.skip(f"DataHub's golden files not found at {GOLDEN}")
    steps = 0
    for step, report, digests in run(name, tmp_path, index):
        steps += 1
        expected_nodes = json.loads(fixture_path(name, step, "nodes").read_text(encoding="utf-8"))
        differing = sorted(
            urn
            for urn in expected_nodes.keys() | digests.keys()
            if expected_nodes.get(urn) != digests.get(urn)
        )
        assert not differing, f"{name} / {step}: nodes read differently: {differing[:5]}"
        if not report:
            continue  # the catalog read alone: no report
        expected = fixture_path(name, step, "report").read_text(encoding="utf-8")
        if report != expected:
            diff = difflib.unified_diff(
                expected.splitlines(), report.splitlines(), "before", "now", lineterm="", n=2
            )
            shown = "\n".join(list(diff)[:60])
            pytest.fail(f"{name} / {step}: the JSON report changed:\n{shown}")
    assert steps, f"{name}: no scan ran"


def test_every_fixture_belongs_to_a_scenario() -> None:
    """No fixture is left from a scenario that no longer runs (it would prove nothing)."""
    prefixes = {f"{name}." for name in NAMES}
    fixtures = sorted(fixture_path(NAMES[0], "x", "x").parent.glob("*.json"))
    assert fixtures
    stray = [p.name for p in fixtures if not any(p.name.startswith(x) for x in prefixes)]
    assert not stray
