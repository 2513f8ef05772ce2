"""``make bench``'s second-scan measurement stands on a complete stored first scan, or says not."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from benchmarks import run
from benchmarks.generate import Shape

CASE = run.Case("tiny", Shape.estate(2, 3), 3, ("datahub", "datahub-second"))


@contextmanager
def _serving(path: Path, latency: float) -> Iterator[dict[str, str]]:
    yield {"url": "http://gms", "control": "http://control", "pid": "1"}


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, first: dict[str, Any]) -> Any:
    asked: list[tuple[dict[str, Any], float]] = []

    def measure(spec: dict[str, Any], timeout: float = run.TIMEOUT) -> dict[str, Any]:
        asked.append((spec, timeout))
        return first if spec.get("first") else {"wall_s": 1.0}

    monkeypatch.setattr(run, "ensure", lambda *args, **kwargs: tmp_path / "catalog.db")
    monkeypatch.setattr(run, "serving", _serving)
    monkeypatch.setattr(run, "measure", measure)
    return run.run_case(CASE, profile=False), asked


def test_the_stored_first_scan_is_given_longer_than_a_timed_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    results, asked = _run(monkeypatch, tmp_path, {"first": True})
    assert results == {
        "datahub": {"wall_s": 1.0},
        "datahub-recorded": {"first": True},  # what the stored scan cost, reported too
        "datahub-second": {"wall_s": 1.0},
    }
    (first,) = [(spec, timeout) for spec, timeout in asked if spec.get("first")]
    assert first[1] > run.TIMEOUT
    second = asked[-1][0]
    assert second["state"] == first[0]["state"]
    assert not second.get("first")


def test_a_first_scan_cut_short_is_a_failed_second_not_a_measured_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A second scan on the state of a first one stopped midway would measure a first scan."""
    results, asked = _run(monkeypatch, tmp_path, {"timeout_s": run.FIRST_TIMEOUT})
    assert "stored first scan" in results["datahub-second"]["failed"]
    assert not [spec for spec, _ in asked if spec.get("state") and not spec.get("first")]
