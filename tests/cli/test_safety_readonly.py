"""Read-only is possible: ``scan --dry-run`` on a read-only catalog and home, writing no file.

Through the installed ``mlcopilot`` command. The read-only homes are real read-only mounts
(tests/cli/readonly_mount.py): the tests run as root, which file modes do not stop.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from testing.installed_cli import run_cli, run_on_terminal
from tests.cli.readonly_mount import read_only_folder, snapshot
from tests.conftest import DEMO_DATA

DAY1, DAY2 = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z"
WIDE = 400


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("loaded") / "home"
    done = run_cli(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json"))
    assert done.code == 0, done.stderr
    return home


@pytest.fixture(scope="module")
def scanned(loaded: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("scanned") / "home"
    shutil.copytree(loaded, home)
    assert run_cli(home, "scan", "--now", DAY1).code == 0
    return home


def journal_mode(catalog: Path) -> str:
    """``wal`` or ``rollback``, from the file's header (reading it through SQLite changes it)."""
    header = catalog.read_bytes()[:20]
    return "wal" if header[18:20] == b"\x02\x02" else "rollback"


def as_wal(home: Path) -> Path:
    """``home`` with its catalog switched to WAL mode, as catalogs loaded before 0.x were."""
    with sqlite3.connect(home / "catalog.db") as conn:
        assert conn.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
    assert journal_mode(home / "catalog.db") == "wal"
    return home


def test_a_loaded_catalog_rests_in_rollback_mode(loaded: Path, scanned: Path) -> None:
    # WAL needs -shm/-wal files beside the catalog to read it: at rest it must not need them.
    assert journal_mode(loaded / "catalog.db") == "rollback"
    assert journal_mode(scanned / "catalog.db") == "rollback"  # the write-back wrote to it
    assert sorted(p.name for p in loaded.iterdir()) == ["catalog.db"]


@pytest.mark.parametrize("first", [True, False], ids=["no state yet", "with state"])
def test_a_dry_run_on_a_read_only_home(
    loaded: Path, scanned: Path, tmp_path: Path, first: bool
) -> None:
    with read_only_folder(tmp_path / "ro", loaded if first else scanned) as home:
        before = snapshot(home)
        ran = run_cli(home, "scan", "--dry-run", "--now", DAY1, "--format", "json")
        assert ran.code == 0, ran.stderr
        report = ran.json()
        assert report["dry_run"] is True
        if first:
            assert len(report["incidents"]["opened"]) == 3  # as a first scan would
        else:
            assert len(report["incidents"]["updated"]) == 3  # the stored ones, still open
        table = run_cli(home, "scan", "--dry-run", "--now", DAY2, columns=WIDE)
        assert table.code == 0, table.stderr
        assert "would" in table.stdout
        assert snapshot(home) == before


def test_a_dry_run_reads_a_wal_catalog_in_a_read_only_folder(scanned: Path, tmp_path: Path) -> None:
    source = as_wal(shutil.copytree(scanned, tmp_path / "wal"))
    with read_only_folder(tmp_path / "ro", source) as home:
        ran = run_cli(home, "scan", "--dry-run", "--now", DAY2, "--format", "json")
        assert ran.code == 0, ran.stderr
        assert len(ran.json()["incidents"]["updated"]) == 3


@pytest.mark.slow
def test_a_dry_run_on_a_terminal_on_a_read_only_home(scanned: Path, tmp_path: Path) -> None:
    with read_only_folder(tmp_path / "ro", scanned) as home:
        ran = run_on_terminal(home, "scan", "--dry-run", "--now", DAY2, columns=WIDE)
        assert ran.code == 0, ran.stdout
        assert "damaged" not in ran.stdout
        assert "would" in ran.stdout


def test_read_commands_work_on_a_read_only_home(scanned: Path, tmp_path: Path) -> None:
    with read_only_folder(tmp_path / "ro", scanned) as home:
        listed = run_cli(home, "incidents", "list", "--format", "json")
        assert listed.code == 0, listed.stderr
        assert len(listed.json()) == 3
        assert run_cli(home, "outbox", "list").code == 0


def test_writing_to_a_read_only_home_blames_the_folder_not_the_catalog(
    scanned: Path, tmp_path: Path
) -> None:
    with read_only_folder(tmp_path / "ro", scanned) as home:
        for command in (
            ("scan", "--now", DAY2),
            ("catalog", "load", str(DEMO_DATA / "02_schema_change.json")),
        ):
            ran = run_cli(home, *command, columns=WIDE)
            assert ran.code == 2, (command, ran.stderr)
            assert "Traceback" not in ran.stderr
            assert "damaged" not in ran.stderr
            assert "read-only" in ran.stderr or "readonly" in ran.stderr


def test_a_dry_run_writes_no_file_at_all(loaded: Path, scanned: Path, tmp_path: Path) -> None:
    for name, source in (("fresh", loaded), ("scanned", scanned)):
        home = shutil.copytree(source, tmp_path / name)
        before = snapshot(home)
        ran = run_cli(home, "scan", "--dry-run", "--now", DAY2)
        assert ran.code == 0, ran.stderr
        assert snapshot(home) == before, name  # no state.db, no -wal, no -shm, no byte changed
