"""The verdicts `make bench` prints: the issue's rules, and a missing run never counted as met."""

from __future__ import annotations

from typing import Any

from benchmarks import verdicts


def _rescan(watchers: int, wall: float, *, once: bool = True, batch: int = 250) -> dict[str, Any]:
    return {
        "estate": "shared",
        "single": False,
        "batch": batch,
        "watchers": watchers,
        "wall_s": wall,
        "scanned_once": once,
    }


def _watch(slack_first: float, slack_last: float, p95: float = 1.0) -> dict[str, Any]:
    latency = {"count": 6000, "p95": p95}
    return {
        "state": "postgresql",
        "rate": 100.0,
        "events": 6000,
        "committed": latency,
        "slack": latency,
        "backlog": {
            "lag": {"first_third": 80, "last_third": 90},
            "slack": {"first_third": slack_first, "last_third": slack_last},
        },
    }


def test_nothing_measured_is_never_met() -> None:
    for name, verdicts_of in verdicts.SOURCES:
        found = verdicts_of(None)
        assert found, name
        assert all(v.met is None and "not measured" in v.measured for v in found), name


def test_two_watchers_are_about_half_only_at_1_8_times_and_each_model_once() -> None:
    def met(rows: list[dict[str, Any]]) -> bool | None:
        return verdicts.rescan_verdicts(rows)[0].met

    assert met([_rescan(1, 80.0), _rescan(2, 44.0), _rescan(4, 30.0)]) is True
    assert met([_rescan(1, 80.0), _rescan(2, 50.0)]) is False
    assert met([_rescan(1, 80.0), _rescan(2, 40.0, once=False)]) is False
    # The batch size measured with the most watcher counts is the one judged.
    rows = [_rescan(1, 80.0), _rescan(2, 70.0), _rescan(4, 60.0), _rescan(2, 30.0, batch=100)]
    assert met(rows) is False


def test_repeated_rescan_runs_are_judged_by_their_medians() -> None:
    # One slow run of one watcher (host noise) does not make two watchers look faster.
    rows = [_rescan(1, 80.0), _rescan(2, 46.0), _rescan(1, 110.0), _rescan(2, 45.0)]
    rows += [_rescan(1, 79.0), _rescan(2, 47.0)]
    [verdict] = verdicts.rescan_verdicts(rows)
    assert verdict.met is False  # 80 / 46 = 1.74
    assert verdict.measured.startswith("1.74× (watchers 1: 80.0 s (median of 3: 79.0-110.0)")
    assert verdicts.median_walls(rows) == {1: 80.0, 2: 46.0}


def test_a_backlog_rising_by_more_than_a_second_of_events_is_growth() -> None:
    steady = verdicts.watch_verdicts([_watch(300, 390)])
    assert [v.met for v in steady] == [True, True, True]
    growing = verdicts.watch_verdicts([_watch(300, 2060)])[2]
    assert growing.met is False
    assert "growing: slack 300 → 2,060" in growing.measured


def test_a_timed_out_estate_is_not_met_and_says_so() -> None:
    report = {"results": {"estate-10000x100000": {"datahub": {"timeout_s": 900.0}}}}
    estate = [v for v in verdicts.scan_verdicts(report) if "10,000 models" in v.target]
    assert [(v.met, v.measured) for v in estate] == [(False, "stopped after 900 s")]


def test_the_table_escapes_pipes() -> None:
    row = verdicts.Verdict("3", "a | b", "c", True)
    assert "a \\| b" in verdicts.table([row])


def _scan(wall: float, rss: float, requests: int = 900) -> dict[str, Any]:
    return {"wall_s": wall, "peak_rss_mb": rss, "models": 10_000, "server": {"requests": requests}}


def test_the_stored_first_scan_is_held_to_the_estate_time_and_memory() -> None:
    def estate(**runs: dict[str, Any]) -> dict[str, tuple[bool | None, str]]:
        report = {"results": {"estate-10000x100000": runs}}
        found = verdicts.scan_verdicts(report)
        return {
            v.target.split(": ")[-1]: (v.met, v.measured) for v in found if "10,000 m" in v.target
        }

    dry = {"datahub": _scan(200.0, 900.0), "datahub-second": _scan(190.0, 880.0)}
    assert estate(**dry)["≤ 1 GB peak RSS"][0] is True
    found = estate(**dry, **{"datahub-recorded": _scan(700.0, 2_500.0)})
    assert found["≤ 1 GB peak RSS"] == (
        False,
        "first 900 MB, second 880 MB, first stored 2,500 MB",
    )
    assert found["≤ 10 minutes"][0] is False
    assert "first stored 11.7 min" in found["≤ 10 minutes"][1]
