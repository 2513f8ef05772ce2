"""Copyable ids: never wrapped, taken by any unique start, on a terminal and in CI.

Through the installed ``mlcopilot`` command: on an 80-column pseudo-terminal, and piped with
``COLUMNS=80`` (as a CI runner sets it).
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from testing.installed_cli import Ran, run_cli, run_on_terminal
from tests.conftest import DEMO_DATA

DAY1 = "2026-11-20T09:00:00Z"
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"
SEGMENTS = "urn:li:dataset:(urn:li:dataPlatform:hive,legacy.customer_segments,PROD)"
NAMES = ("churn_predictor_v1", "raw.customers", "raw.transactions", "legacy.customer_segments")


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's catalog scanned once: three open incidents."""
    home = tmp_path_factory.mktemp("scanned") / "home"
    assert run_cli(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json")).code == 0
    assert run_cli(home, "scan", "--now", DAY1, "--format", "json").code == 0
    return home


@pytest.fixture
def home(scanned: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(scanned, copy)
    return copy


def incidents(home: Path, *args: str) -> list[dict[str, object]]:
    listed = run_cli(home, "incidents", "list", "--format", "json", *args)
    assert listed.code == 0, listed.stderr
    rows: list[dict[str, object]] = listed.json()
    return rows


def ids(home: Path, *args: str) -> list[str]:
    return [str(i["id"]) for i in incidents(home, "--state", "all", *args)]


def error_lines(ran: Ran) -> list[str]:
    assert ran.code == 2, (ran.code, ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: ")
    assert sum(line.startswith("error:") for line in lines) == 1
    return lines


@pytest.mark.slow
def test_ids_and_names_stay_whole_on_an_80_column_terminal(home: Path) -> None:
    shown = run_on_terminal(home, "incidents", "list", columns=80)

    assert shown.code == 0, shown.stdout
    lines = shown.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), shown.stdout
    for incident_id in ids(home):
        assert any(incident_id in line for line in lines), (incident_id, shown.stdout)
    # A name that does not fit goes to the line under its row, whole: never split in two.
    for name in NAMES:
        assert name in shown.stdout, (name, shown.stdout)


def test_piped_every_incident_is_one_line_with_all_it_says(home: Path) -> None:
    shown = run_cli(home, "incidents", "list", columns=80)

    assert shown.code == 0, shown.stderr
    for incident in incidents(home):
        (line,) = [x for x in shown.stdout.splitlines() if str(incident["id"]) in x]
        for value in (incident["state"], incident["severity"], incident["check"]):
            assert str(value) in line
        assert "churn_predictor_v1" in line
        assert "2026-11-20 09:00" in line


@pytest.mark.slow
def test_the_scan_table_shows_incident_and_state_and_cuts_names_in_the_middle(
    scanned: Path, tmp_path: Path
) -> None:
    home = tmp_path / "fresh"
    shutil.copytree(scanned, home)
    (home / "state.db").unlink()  # a first scan again: every incident new

    shown = run_on_terminal(home, "scan", "--now", DAY1, columns=80)

    assert shown.code == 0, shown.stdout
    # The closing summary's lines are never wrapped, by design: the tables above it fit. (The
    # transient progress bar's redraws, their cursor codes stripped, run together.)
    table = shown.stdout.split("\nSummary: ")[0].splitlines()
    lines = [line for line in table if not line.startswith("Scanning ")]
    assert all(len(line) <= 80 for line in lines), shown.stdout
    header = next(line for line in lines if line.split()[:2] == ["incident", "state"])
    assert header.split()[2:6] == ["severity", "check", "entity", "field"]
    for incident_id in ids(home):
        assert sum(line.startswith(f" {incident_id}  new  ") for line in lines) == 1
    # Too long for its column at 80: both ends kept, the middle left out, no word broken.
    assert re.search(r" legacy\.\S+…\S*segments\b", shown.stdout), shown.stdout
    assert "legacy.customer_segm\n" not in shown.stdout
    # The message, too long for the line, goes under its row, wrapped between words.
    assert "    deprecated in DataHub" in shown.stdout
    words = {w for line in lines for w in line.split()}
    assert "decommissioned" in words
    assert "segmentation" in words


def test_piped_the_scan_table_is_one_line_per_finding(scanned: Path, tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    shutil.copytree(scanned, home)
    (home / "state.db").unlink()

    shown = run_cli(home, "scan", "--now", DAY1, columns=80)

    assert shown.code == 0, shown.stderr
    (row,) = [line for line in shown.stdout.splitlines() if "deprecated_source  legacy" in line]
    assert re.match(r"^ [0-9a-f]{16}  new  ", row)
    assert "legacy.customer_segments" in row
    assert row.endswith("to be decommissioned on 2026-12-15")


@pytest.mark.slow
def test_full_names_show_whole_urns(home: Path) -> None:
    shown = run_on_terminal(home, "--full-names", "incidents", "list", columns=80)

    assert shown.code == 0, shown.stdout
    assert MODEL in shown.stdout
    assert SEGMENTS in shown.stdout


def test_any_unique_start_of_six_or_more_characters_acknowledges(home: Path) -> None:
    first = ids(home)[0]

    done = run_cli(home, "incidents", "ack", first[:6], "--by", "alice")

    assert done.code == 0, done.stderr
    assert f"Acknowledged {first} " in done.stdout
    (acked,) = [i for i in incidents(home) if i["id"] == first]
    assert acked["state"] == "acknowledged"
    assert acked["acknowledged_by"] == "alice"


def test_a_start_shorter_than_six_is_refused(home: Path) -> None:
    (line,) = error_lines(run_cli(home, "incidents", "ack", ids(home)[0][:5], "--by", "a"))

    assert "at least 6 of its first characters" in line


def test_an_unknown_start_is_refused(home: Path) -> None:
    (line,) = error_lines(run_cli(home, "incidents", "resolve", "zzzzzzzz"))

    assert "no incident zzzzzzzz" in line


def test_an_ambiguous_start_lists_the_candidates(home: Path) -> None:
    real = ids(home)[0]
    twin = real[:6] + "0" * (len(real) - 6)
    assert twin != real
    # Two incidents whose ids share their first six characters (16^6 makes it rare, not
    # impossible): the second a copy of the first under the other id.
    with sqlite3.connect(home / "state.db") as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(incidents)")]
        rest = ", ".join(c for c in columns if c != "id")
        db.execute(
            f"INSERT INTO incidents (id, {rest}) SELECT ?, {rest} FROM incidents WHERE id = ?",
            (twin, real),
        )

    lines = error_lines(run_cli(home, "incidents", "ack", real[:6], "--by", "alice"))

    assert f"{real[:6]} starts 2 incident ids" in lines[0]
    assert sorted(line.split()[0] for line in lines[1:]) == sorted([real, twin])
    assert all(i["state"] == "open" for i in incidents(home))  # nothing was acknowledged
    assert run_cli(home, "incidents", "ack", real[:7], "--by", "alice").code == 0


def test_a_second_ack_by_someone_else_says_who_was_first(home: Path) -> None:
    first = ids(home)[0]
    assert run_cli(home, "incidents", "ack", first, "--by", "alice").code == 0

    again = run_cli(home, "incidents", "ack", first[:8], "--by", "bob", columns=80)

    assert again.code == 0, again.stderr
    (line,) = again.stdout.splitlines()
    assert line.startswith(f"{first} (")
    assert "was already acknowledged by alice at " in line
    assert line.endswith("; not changed to bob.")
    (acked,) = [i for i in incidents(home) if i["id"] == first]
    assert acked["acknowledged_by"] == "alice"


def test_several_incidents_resolve_at_once_by_their_starts(home: Path) -> None:
    first, second, third = ids(home)

    done = run_cli(home, "incidents", "resolve", first[:6], second, "--reason", "fixed")

    assert done.code == 0, done.stderr
    assert f"Resolved {first} " in done.stdout
    assert f"Resolved {second} " in done.stdout
    states = {i["id"]: i["state"] for i in incidents(home, "--state", "all")}
    assert states == {first: "resolved", second: "resolved", third: "open"}
