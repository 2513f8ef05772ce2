"""A ``datahub:`` scan reports byte for byte what it reported before it was made faster.

The reference outputs in ``tests/data/datahub_scan/`` were written by the code before the
``datahub:`` speed work of issue 27 §2 (decoding GraphQL's aspect payloads once, the second
scan's fixes); see :mod:`tests.catalog.datahub_scan_scenarios`. Every scan of every scenario
(first, second, delivered, after the write-back) must give the same JSON report and the same
node, edge and path digests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.catalog.datahub_backend import needs_standin
from tests.catalog.datahub_scan_scenarios import fixture_path, run, scenarios


@needs_standin
@pytest.mark.parametrize("name", sorted(scenarios()))
def test_datahub_scan_is_byte_identical_to_before(name: str, tmp_path: Path) -> None:
    steps = 0
    for step, report, digests in run(name, tmp_path):
        expected = fixture_path(name, step, "report").read_text(encoding="utf-8")
        assert report == expected, f"{name} / {step}: the JSON report differs"
        nodes = json.loads(fixture_path(name, step, "nodes").read_text(encoding="utf-8"))
        differing = sorted(k for k in {*nodes, *digests} if nodes.get(k) != digests.get(k))
        assert not differing, f"{name} / {step}: {len(differing)} nodes differ: {differing[:5]}"
        steps += 1
    assert steps >= 4
