"""No false all-clear: read commands never create state, and a state file that is not
mlcopilot's (empty, foreign, damaged) is refused, never set up afresh.

Through the installed ``mlcopilot`` command, piped (as in CI) and on a terminal.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from testing.installed_cli import Ran, run_cli, run_on_terminal
from tests.cli.readonly_mount import snapshot
from tests.conftest import DEMO_DATA

DAY1, DAY2 = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z"
MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"
WIDE = 400  # wide enough that no message is wrapped, so each is checked whole


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home holding the demo's catalog and nothing else (no state database yet)."""
    home = tmp_path_factory.mktemp("loaded") / "home"
    done = run_cli(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json"))
    assert done.code == 0, done.stderr
    return home


@pytest.fixture(scope="module")
def scanned(loaded: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's catalog scanned once at DAY1: three open incidents."""
    home = tmp_path_factory.mktemp("scanned") / "home"
    shutil.copytree(loaded, home)
    done = run_cli(home, "scan", "--now", DAY1, "--format", "json")
    assert done.code == 0, done.stderr
    assert len(done.json()["incidents"]["opened"]) == 3
    return home


@pytest.fixture
def catalog_only(loaded: Path, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(loaded, home)
    return home


@pytest.fixture
def with_state(scanned: Path, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(scanned, home)
    return home


def one_error(ran: Ran) -> str:
    """The one ``error:`` line a refused command prints, with exit code 2."""
    assert ran.code == 2, (ran.code, ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr + ran.stdout
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


READ_COMMANDS = [
    ("incidents", "list"),
    ("incidents", "list", "--format", "json", "--state", "all"),
    ("incidents", "ack", "0123456789abcdef", "--by", "alice"),
    ("incidents", "resolve", "0123456789abcdef"),
    ("outbox", "list", "--status", "all"),
    ("outbox", "list", "--format", "json"),
    ("outbox", "retry"),
    ("outbox", "deliver"),
]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=" ".join)
def test_a_read_command_in_a_home_never_scanned_creates_nothing(
    catalog_only: Path, command: tuple[str, ...]
) -> None:
    before = snapshot(catalog_only)
    line = one_error(run_cli(catalog_only, *command, columns=WIDE))
    assert f"no state database at {catalog_only.resolve() / 'state.db'}" in line
    assert "run `mlcopilot scan` first" in line
    assert "MLCOPILOT_HOME" in line
    assert snapshot(catalog_only) == before  # no state.db, nothing else either


@pytest.mark.parametrize("command", READ_COMMANDS[:1] + READ_COMMANDS[4:5], ids=" ".join)
def test_a_mistyped_home_is_not_created(tmp_path: Path, command: tuple[str, ...]) -> None:
    typo = tmp_path / "nonexistent-home"
    line = one_error(run_cli(typo, *command, columns=WIDE))
    assert f"no state database at {typo.resolve() / 'state.db'}" in line
    assert f"the folder {typo.resolve()} does not exist either" in line
    assert not typo.exists()


def test_a_mistyped_state_url_is_not_created(with_state: Path, tmp_path: Path) -> None:
    typo = tmp_path / "typo-state.db"
    for command in (("incidents", "list"), ("outbox", "list")):
        url = f"sqlite:///{typo}"
        line = one_error(run_cli(with_state, *command, "--state-url", url, columns=WIDE))
        assert f"no state database at {typo}" in line
    assert not typo.exists()
    # The real state, where it is, still answers.
    assert len(run_cli(with_state, "incidents", "list", "--format", "json").json()) == 3


@pytest.mark.slow
def test_on_a_terminal_too_it_is_an_error_not_an_all_clear(catalog_only: Path) -> None:
    ran = run_on_terminal(catalog_only, "incidents", "list", columns=WIDE)
    assert ran.code == 2
    assert "No open incidents" not in ran.stdout
    assert "error: no state database at" in ran.stdout
    assert not (catalog_only / "state.db").exists()


def test_config_show_creates_no_state(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ran = run_cli(home, "config", "show")
    assert ran.code == 0, ran.stderr
    assert "state_url" in ran.stdout
    assert not home.exists()


def test_commands_that_record_create_the_store(catalog_only: Path) -> None:
    accepted = run_cli(catalog_only, "baseline", "accept", MODEL)
    assert accepted.code == 0, accepted.stderr
    assert (catalog_only / "state.db").is_file()
    assert run_cli(catalog_only, "incidents", "list").code == 0


def test_a_first_scan_creates_the_home_and_the_store(loaded: Path, tmp_path: Path) -> None:
    home = tmp_path / "new" / "home"
    catalog = f"lite:{loaded / 'catalog.db'}"
    ran = run_cli(home, "scan", "--catalog", catalog, "--now", DAY1, "--format", "json")
    assert ran.code == 0, ran.stderr
    assert (home / "state.db").is_file()
    listed = run_cli(home, "incidents", "list", "--format", "json")
    assert len(listed.json()) == 3


def test_a_scan_of_a_missing_catalog_creates_no_state(tmp_path: Path) -> None:
    home = tmp_path / "home"
    line = one_error(run_cli(home, "scan", columns=WIDE))
    assert "no catalog at" in line
    assert not home.exists()


@pytest.mark.parametrize(
    "command",
    [
        ("scan", "--now", DAY2),
        ("scan", "--now", DAY2, "--dry-run"),
        ("incidents", "list"),
        ("outbox", "list"),
    ],
    ids=" ".join,
)
def test_a_zero_length_state_db_is_refused_and_left_alone(
    with_state: Path, command: tuple[str, ...]
) -> None:
    state = with_state / "state.db"
    state.write_bytes(b"")
    line = one_error(run_cli(with_state, *command, columns=WIDE))
    assert "is empty (0 bytes)" in line
    assert "every incident would open again as new" in line
    assert "restore it from a backup" in line
    assert state.read_bytes() == b""


def test_a_file_that_is_not_sqlite_is_refused(with_state: Path) -> None:
    state = with_state / "state.db"
    state.write_bytes(b"mlcopilot state? no: a text file\n" * 100)
    for command in (("scan", "--now", DAY2), ("incidents", "list")):
        line = one_error(run_cli(with_state, *command, columns=WIDE))
        assert "is not a SQLite database" in line
    assert state.read_bytes().startswith(b"mlcopilot state? no")


def test_another_programs_sqlite_file_is_refused(catalog_only: Path) -> None:
    state = catalog_only / "state.db"
    with sqlite3.connect(state) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    line = one_error(run_cli(catalog_only, "scan", "--now", DAY1, columns=WIDE))
    assert "already holds tables that are not mlcopilot's (notes)" in line
    with sqlite3.connect(state) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["notes"]


def test_a_store_that_lost_its_revision_is_called_damaged_not_foreign(with_state: Path) -> None:
    with sqlite3.connect(with_state / "state.db") as conn:
        conn.execute("DROP TABLE alembic_version")
    line = one_error(run_cli(with_state, "scan", "--now", DAY2, columns=WIDE))
    assert "holds mlcopilot's tables but no schema revision" in line
    assert "not mlcopilot's" not in line


def test_a_truncated_state_db_is_called_damaged(with_state: Path) -> None:
    state = with_state / "state.db"
    data = state.read_bytes()
    state.write_bytes(data[: len(data) // 2])
    line = one_error(run_cli(with_state, "scan", "--now", DAY2, columns=WIDE))
    assert "database disk image is malformed" in line
    assert "it is not a SQLite database" not in line  # it is one, a damaged one
