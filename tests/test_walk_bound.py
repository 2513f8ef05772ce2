"""A scan's walk has a bound ([datahub] walk_timeout): past it, exit 3, saying how far it got.

A catalog that can hold its calls to the deadline (TimedWalk: the ``datahub:`` and ``mcp:``
backends) is given it; any other is checked between models. Either way nothing is recorded.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.catalog.lite import open_lite_catalog
from mlcopilot.catalog.loader import load_metadata_files
from mlcopilot.errors import CatalogUnavailable
from mlcopilot.model import Lineage, Urn
from mlcopilot.protocols import TimedWalk, WalkLimits
from mlcopilot.scan import ScanOptions, scan
from mlcopilot.store.sql import open_store
from testing.builders import dataset, ml_model, write_metadata_file

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


class Slow:
    """A catalog whose every lineage takes ``seconds`` (and that records its bound, if asked)."""

    def __init__(self, inner: Any, seconds: float, *, timed: bool) -> None:
        self._inner = inner
        self._seconds = seconds
        self.bounds: list[float | None] = []
        if timed:
            self.walk_until = self.bounds.append

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def lineage(self, root: Urn, limits: WalkLimits) -> Lineage:
        time.sleep(self._seconds)
        lineage: Lineage = self._inner.lineage(root, limits)
        return lineage


@pytest.mark.parametrize("timed", [False, True], ids=["checked-between-models", "timed-walk"])
def test_a_walk_past_its_bound_stops_says_how_far_it_got_and_records_nothing(
    tmp_path: Path, timed: bool
) -> None:
    mcps = [*dataset("raw.x", fields=[("a", "string")])]
    for name in ("m1", "m2", "m3", "m4"):
        mcps += ml_model(name, training_data=["raw.x"])
    write_metadata_file(tmp_path / "metadata.json", mcps)
    with (
        open_lite_catalog(tmp_path / "catalog.db", create=True) as lite,
        open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        load_metadata_files(lite, [tmp_path / "metadata.json"])
        catalog = Slow(lite, 0.4, timed=timed)
        options = ScanOptions(now=NOW, walk_timeout=timedelta(seconds=0.6))
        with pytest.raises(CatalogUnavailable) as caught:
            scan(catalog, store, [], options)
        assert store.last_scan_at() is None
    assert caught.value.exit_code == 3
    message = str(caught.value)
    assert message.startswith(
        "the scan's walk did not finish within 0.6s ([datahub] walk_timeout, "
        "MLCOPILOT_WALK_TIMEOUT): it stopped walking the lineage of m2 (1 of 4 models walked); "
        "nothing was recorded."
    )
    assert isinstance(catalog, TimedWalk) is timed
    if timed:  # given the deadline for the walk, then none for what follows it
        assert len(catalog.bounds) == 2
        assert catalog.bounds[1] is None


def test_without_a_bound_the_walk_takes_as_long_as_it_takes(tmp_path: Path) -> None:
    write_metadata_file(tmp_path / "metadata.json", [*ml_model("m1"), *ml_model("m2")])
    with (
        open_lite_catalog(tmp_path / "catalog.db", create=True) as lite,
        open_store(f"sqlite:///{tmp_path / 'state.db'}") as store,
    ):
        load_metadata_files(lite, [tmp_path / "metadata.json"])
        result = scan(Slow(lite, 0.2, timed=False), store, [], ScanOptions(now=NOW))
    assert len(result.models) == 2
