"""A scan checks what can fail locally before it commits, and refuses nonsense.

Through the installed ``mlcopilot`` command, piped (as in CI) and on a terminal: a refused scan
records nothing (no state database, no incident, no write-back), and its one ``error:`` line
names the flag.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from testing.installed_cli import Ran, run_cli, run_on_terminal
from tests.cli.readonly_mount import read_only_folder, snapshot
from tests.conftest import DEMO_DATA

DAY1, DAY2, DAY3 = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z", "2026-11-22T09:00:00Z"
WIDE = 400


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("loaded") / "home"
    done = run_cli(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json"))
    assert done.code == 0, done.stderr
    return home


@pytest.fixture
def home(loaded: Path, tmp_path: Path) -> Path:
    """A home with the demo's catalog, never scanned."""
    copy = tmp_path / "home"
    shutil.copytree(loaded, copy)
    return copy


def one_error(ran: Ran) -> str:
    assert ran.code == 2, (ran.code, ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr + ran.stdout
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def catalog_rows(home: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(home / "catalog.db") as conn:
        return conn.execute(
            "SELECT urn, aspect_name, version, metadata FROM metadata_aspect_v2 ORDER BY 1, 2, 3"
        ).fetchall()


def incidents(home: Path) -> list[dict[str, object]]:
    listed = run_cli(home, "incidents", "list", "--state", "all", "--format", "json")
    assert listed.code == 0, listed.stderr
    result: list[dict[str, object]] = listed.json()
    return result


def test_an_unwritable_output_fails_before_anything_is_recorded(home: Path, tmp_path: Path) -> None:
    before = catalog_rows(home)
    with read_only_folder(tmp_path / "ro") as readonly:
        report = readonly / "report.json"
        args = ("--now", DAY1, "--format", "json", "--output", str(report))
        line = one_error(run_cli(home, "scan", *args, columns=WIDE))
    assert f"--output {report}: cannot write in {readonly}: Read-only file system" in line
    assert "nothing was scanned" in line
    # Nothing was committed, written back or queued: the next scan still finds it all new.
    assert not (home / "state.db").exists()
    assert catalog_rows(home) == before
    out = tmp_path / "reports" / "report.json"  # a folder that does not exist yet is made
    again = run_cli(home, "scan", "--now", DAY1, "--format", "json", "--output", str(out))
    assert again.code == 0, again.stderr
    assert "Report written to" in again.stderr
    assert len(json.loads(out.read_text(encoding="utf-8"))["incidents"]["opened"]) == 3


def test_an_output_that_is_a_folder_is_refused_first(home: Path, tmp_path: Path) -> None:
    line = one_error(run_cli(home, "scan", "--output", str(tmp_path), columns=WIDE))
    assert f"--output {tmp_path}: is a folder" in line
    assert not (home / "state.db").exists()


def test_output_dash_is_stdout(home: Path) -> None:
    ran = run_cli(home, "scan", "--now", DAY1, "--format", "json", "--output", "-")
    assert ran.code == 0, ran.stderr
    assert len(ran.json()["incidents"]["opened"]) == 3
    assert not Path("-").exists()
    assert not (home / "-").exists()


def test_a_table_to_a_file_is_markdown_and_says_so(home: Path, tmp_path: Path) -> None:
    report = tmp_path / "scan.md"
    ran = run_cli(home, "scan", "--now", DAY1, "--output", str(report), columns=WIDE)
    assert ran.code == 0, ran.stderr
    assert f"The report goes to {report} as markdown" in ran.stderr
    assert f"Report written to {report}" in ran.stderr
    assert report.read_text(encoding="utf-8").startswith("# mlcopilot scan")


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--max-nodes", "0"), ("--max-nodes", "-3"), ("--max-hops", "0"), ("--max-hops", "-1")],
)
def test_walk_caps_below_one_are_refused(home: Path, flag: str, value: str) -> None:
    line = one_error(run_cli(home, "scan", flag, value, "--fail-on", "low", columns=WIDE))
    assert line.startswith(f"error: {flag} {value}: must be at least 1")
    assert not (home / "state.db").exists()


@pytest.mark.parametrize(
    "when", ["9999-12-31T23:59:59Z", "9000-01-01T00:00:00Z", "1969-12-31T23:59:59Z"]
)
def test_a_clock_out_of_range_is_refused_not_a_crash(home: Path, when: str) -> None:
    line = one_error(run_cli(home, "scan", "--now", when, columns=WIDE))
    assert line.startswith(f"error: --now {when}: out of range")
    assert "1970-01-01" in line
    assert not (home / "state.db").exists()


def test_a_far_but_valid_clock_scans(home: Path) -> None:
    ran = run_cli(home, "scan", "--now", "8999-12-31T23:59:59Z", "--format", "json")
    assert ran.code == 0, ran.stderr
    assert ran.json()["incidents"]["opened"]


def test_intervals_past_the_end_of_the_calendar_saturate(home: Path) -> None:
    # A group's first notification is due group_wait after the clock: here after year 9999.
    # Planned, committed, not delivered (the relay's own linger is not what this is about).
    env = {"MLCOPILOT_GROUP_WAIT": "400000d", "MLCOPILOT_GROUP_INTERVAL": "400000d"}
    now = "8999-06-01T00:00:00Z"
    ran = run_cli(home, "scan", "--now", now, "--format", "json", "--no-deliver", env=env)
    assert ran.code == 0, ran.stderr
    assert "OverflowError" not in ran.stderr
    assert ran.json()["incidents"]["opened"]
    pending = run_cli(home, "outbox", "list", "--format", "json").json()
    assert pending  # the write-back row at least: planned and waiting, nothing crashed


def test_a_clock_before_the_last_scan_is_refused_with_both_times(home: Path) -> None:
    assert run_cli(home, "scan", "--now", DAY2).code == 0
    recorded = incidents(home)
    for extra in ((), ("--dry-run",)):
        line = one_error(run_cli(home, "scan", "--now", DAY1, *extra, columns=WIDE))
        assert f"--now {DAY1} is earlier than the last committed scan ({DAY2})" in line
        assert "--state-url" in line
    assert incidents(home) == recorded
    # The same clock again, and later ones, are fine.
    assert run_cli(home, "scan", "--now", DAY2).code == 0
    assert run_cli(home, "scan", "--now", DAY3).code == 0


def test_an_epoch_clock_no_longer_resolves_incidents_before_they_opened(home: Path) -> None:
    assert run_cli(home, "scan", "--now", DAY1).code == 0
    one_error(run_cli(home, "scan", "--now", "1970-01-01T00:00:00Z", columns=WIDE))
    for incident in incidents(home):
        assert incident["resolved_at"] is None


@pytest.mark.slow
def test_on_a_terminal_a_refusal_is_the_same(home: Path) -> None:
    ran = run_on_terminal(home, "scan", "--max-nodes", "0", columns=WIDE)
    assert ran.code == 2
    assert "error: --max-nodes 0: must be at least 1" in ran.stdout
    assert "Traceback" not in ran.stdout
    assert not (home / "state.db").exists()


def test_a_refused_scan_leaves_the_home_byte_identical(home: Path) -> None:
    assert run_cli(home, "scan", "--now", DAY1).code == 0
    before = snapshot(home)
    for args in (
        ("--max-hops", "0"),
        ("--now", "9999-12-31T23:59:59Z"),
        ("--now", "2026-01-01T00:00:00Z"),
        ("--output", str(home)),
    ):
        assert run_cli(home, "scan", *args).code == 2, args
    assert snapshot(home) == before
