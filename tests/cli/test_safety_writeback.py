"""The write-back switch: a shadow run records incidents and notifies, and writes nothing to
the catalog. ``scan --no-write-back``, ``[datahub] write_back = false`` and
``MLCOPILOT_WRITE_BACK=false``, through the installed ``mlcopilot`` command.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from testing.fakes.github import FakeGitHub
from testing.installed_cli import run_cli, run_on_terminal
from testing.notify_world import notify_env
from tests.conftest import DEMO_DATA

DAY1, DAY2 = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
WIDE = 400


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("loaded") / "home"
    done = run_cli(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json"))
    assert done.code == 0, done.stderr
    return home


@pytest.fixture
def home(loaded: Path, tmp_path: Path) -> Path:
    return shutil.copytree(loaded, tmp_path / "home")


def catalog_rows(home: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(home / "catalog.db") as conn:
        return conn.execute(
            "SELECT urn, aspect_name, version, metadata FROM metadata_aspect_v2 ORDER BY 1, 2, 3"
        ).fetchall()


def tags_of(home: Path, urn: str) -> set[str]:
    with sqlite3.connect(home / "catalog.db") as conn:
        row = conn.execute(
            "SELECT metadata FROM metadata_aspect_v2 "
            "WHERE urn = ? AND aspect_name = 'globalTags' AND version = 0",
            (urn,),
        ).fetchone()
    return set() if row is None else {t["tag"] for t in json.loads(row[0])["tags"]}


def outbox_sinks(home: Path) -> list[str]:
    listed = run_cli(home, "outbox", "list", "--status", "all", "--format", "json")
    assert listed.code == 0, listed.stderr
    return sorted(row["sink"] for row in listed.json())


def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "mlcopilot.toml"
    path.write_text("[datahub]\nwrite_back = false\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("how", ["flag", "variable", "file"])
def test_a_shadow_run_records_but_writes_nothing_to_the_catalog(
    home: Path, tmp_path: Path, how: str
) -> None:
    before = catalog_rows(home)
    args: tuple[str, ...] = ("scan", "--now", DAY1, "--format", "json")
    env: dict[str, str] = {}
    if how == "flag":
        args += ("--no-write-back",)
    elif how == "variable":
        env["MLCOPILOT_WRITE_BACK"] = "false"
    else:
        args = ("--config", str(config_file(tmp_path)), *args)
    ran = run_cli(home, *args, env=env)
    assert ran.code == 0, ran.stderr
    report = ran.json()
    assert len(report["incidents"]["opened"]) == 3
    assert any("Write-back to the catalog is off" in note for note in report["notes"])
    assert catalog_rows(home) == before  # no tag, property, incident or document
    listed = run_cli(home, "incidents", "list", "--format", "json")
    assert len(listed.json()) == 3  # the state is kept
    assert "datahub" not in outbox_sinks(home)  # no row for the catalog, not even a done one


@pytest.mark.slow
def test_the_table_says_the_write_back_is_off(home: Path) -> None:
    ran = run_on_terminal(home, "scan", "--now", DAY1, "--no-write-back", columns=WIDE)
    assert ran.code == 0, ran.stdout
    assert "Write-back to the catalog is off" in ran.stdout
    assert "Write-back: off (shadow run); nothing written to the catalog." in ran.stdout
    assert "already up to date" not in ran.stdout  # it is not: nothing was written


def test_the_flag_overrides_the_file_both_ways(home: Path, tmp_path: Path) -> None:
    config = str(config_file(tmp_path))
    shadow = run_cli(home, "--config", config, "scan", "--now", DAY1)
    assert shadow.code == 0, shadow.stderr
    assert "mlcopilot-pii-exposure" not in str(tags_of(home, CUSTOMERS))
    on = run_cli(home, "--config", config, "scan", "--now", DAY2, "--write-back")
    assert on.code == 0, on.stderr
    assert "urn:li:tag:mlcopilot-pii-exposure" in tags_of(home, CUSTOMERS)
    assert "datahub" in outbox_sinks(home)


def test_a_hand_resolve_writes_nothing_either(home: Path) -> None:
    env = {"MLCOPILOT_WRITE_BACK": "0"}
    scanned = run_cli(home, "scan", "--now", DAY1, "--format", "json", env=env)
    before = catalog_rows(home)
    some = scanned.json()["incidents"]["opened"][0]
    resolved = run_cli(home, "incidents", "resolve", some, env=env)
    assert resolved.code == 0, resolved.stderr
    assert catalog_rows(home) == before
    assert "datahub" not in outbox_sinks(home)


def test_a_shadow_run_still_notifies(home: Path) -> None:
    github = FakeGitHub()
    with github.running():
        env = notify_env(github, MLCOPILOT_TEST_WRITE_SPACING="0", MLCOPILOT_GROUP_WAIT="0s")
        before = catalog_rows(home)
        ran = run_cli(home, "scan", "--now", DAY1, "--no-write-back", env=env)
        assert ran.code == 0, ran.stderr
    assert len(github.issues) == 3
    assert catalog_rows(home) == before
    assert set(outbox_sinks(home)) == {"github"}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "write-back: on: scans write tags, properties, incidents and documents"),
        ({"MLCOPILOT_WRITE_BACK": "false"}, "write-back: off (shadow run)"),
    ],
)
def test_doctor_says_which_mode_is_on(tmp_path: Path, env: dict[str, str], expected: str) -> None:
    # Nothing listens on the discard port: doctor fails the server, but still says the mode.
    ran = run_cli(
        tmp_path, "doctor", "--catalog", "datahub:http://127.0.0.1:9", env=env, columns=WIDE
    )
    assert ran.code == 1
    assert expected in ran.stdout
    if env:
        assert "(set by MLCOPILOT_WRITE_BACK)" in ran.stdout
