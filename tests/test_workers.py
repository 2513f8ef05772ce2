"""The suite's workers keep each ``xdist_group`` on one worker, as `make test` asks.

Tests sharing a costly fixture (the browser report, the scale catalogs) or the broker carry
``pytest.mark.xdist_group``; with ``--dist loadgroup`` xdist sends each group to one worker.
pytest 9.2 broke that silently (pytest-dev/pytest-xdist#1386): the groups were ignored and
each worker built the fixtures again. This fails if it happens again.
"""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("grouping-check")
def test_a_grouped_test_runs_in_its_group(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@grouping-check"), request.node.nodeid
