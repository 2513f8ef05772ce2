"""Not on a terminal (CI): plain, unwrapped output, one ``error:`` line per error, help and
progress that read in a log.

Through the installed ``mlcopilot`` command, piped with ``COLUMNS=80`` (what a CI runner
sets), and on pseudo-terminals for the cases that differ there.
"""

from __future__ import annotations

import itertools
import re
import shutil
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path

import pytest
from rich.console import Console

from mlcopilot.checks import describe_checks
from mlcopilot.cli._app import AnnouncedWaits, Every
from testing.fakes.github import FakeGitHub
from testing.installed_cli import Ran, run_cli, run_on_terminal
from testing.notify_world import notify_env
from tests.conftest import DEMO_DATA

DAY1 = "2026-11-20T09:00:00Z"
_ESCAPE = re.compile(r"\x1b")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("loaded") / "home"
    assert run_cli(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json")).code == 0
    return home


@pytest.fixture
def home(loaded: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(loaded, copy)
    return copy


def one_error(ran: Ran, code: int = 2) -> str:
    """The one line a refused command prints (on stderr, nothing on stdout)."""
    assert ran.code == code, (ran.code, ran.stdout, ran.stderr)
    assert not _ESCAPE.search(ran.stderr), ran.stderr
    (line,) = [line for line in ran.stderr.splitlines() if line.strip()]
    assert line.startswith("error: ")
    return line


def test_a_long_error_is_one_whole_line_in_ci(home: Path) -> None:
    ran = run_cli(home, "scan", "--model", "churn_predictor_v2", columns=80)

    line = one_error(ran)
    assert len(line) > 80  # it would have been split at 80 columns
    assert f"no model of that name in lite:{home / 'catalog.db'}" in line
    assert "did you mean churn_predictor_v1?" in line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("outbox", "list", "--limit", "0"), "'--limit'"),
        (("scan", "--bogus"), "No such option: --bogus"),
        (("incidents", "list", "--state", "closed"), "'--state'"),
        (("nope",), "No such command 'nope'"),
        (("incidents", "ack"), "Missing argument 'ID'"),
    ],
)
def test_bad_usage_is_one_error_line_too(home: Path, args: tuple[str, ...], said: str) -> None:
    line = one_error(run_cli(home, *args, columns=80))

    assert said in line
    assert line.endswith("--help`)")  # where to read more


def test_help_has_no_type_placeholders_and_takes_h(home: Path) -> None:
    long = run_cli(home, "scan", "--help")
    short = run_cli(home, "scan", "-h")

    assert long.code == short.code == 0
    assert long.stdout == short.stdout
    assert "<bool>" not in long.stdout
    assert "╭" not in long.stdout  # plain text, no box that cuts lines with "…"
    catalog_help = " ".join(long.stdout.split("--catalog", 1)[1].split("--state-url")[0].split())
    assert "datahub:" in catalog_help
    assert "mcp:URL" in catalog_help


def test_version() -> None:
    ran = run_cli(Path("unused"), "--version")

    assert ran.code == 0
    assert ran.stdout == f"mlcopilot {version('ml-incident-copilot')}\n"


def test_checks_are_printed_as_written_in_ci() -> None:
    ran = run_cli(Path("unused"), "checks", columns=80)

    assert ran.code == 0, ran.stderr
    lines = ran.stdout.splitlines()
    for name, doc in describe_checks():
        start = lines.index(name)
        assert lines[start + 1 : start + 1 + len(doc.splitlines())] == doc.splitlines()


@pytest.mark.slow
def test_checks_are_reflowed_once_on_a_narrow_terminal() -> None:
    width = 60
    ran = run_on_terminal(Path("unused"), "checks", columns=width)

    assert ran.code == 0, ran.stdout
    lines = [line.rstrip() for line in ran.stdout.splitlines()]
    assert all(len(line) <= width for line in lines)
    checks = describe_checks()
    starts = [lines.index(name) + 1 for name, _ in checks] + [len(lines) + 1]
    for (_, doc), start, end in zip(checks, starts, starts[1:], strict=False):
        section = lines[start : end - 1]
        for line, following in itertools.pairwise(section):
            if not line or not following or following.startswith("- "):
                continue
            # Wrapped once, greedily: a line ends early only where the next word did not fit
            # (the doc's own line breaks, near 90 columns, are gone).
            assert len(line) + 1 + len(following.split()[0]) > width, (line, following)
        shown = [w for line in section for w in line.split()]
        assert shown == doc.split()  # every word, in order


def test_a_relay_wait_is_said_not_silent(home: Path) -> None:
    github = FakeGitHub()
    with github.running():
        env = notify_env(github, MLCOPILOT_TEST_WRITE_SPACING="0", MLCOPILOT_GROUP_WAIT="2s")
        ran = run_cli(home, "scan", "--now", DAY1, env=env)

    assert ran.code == 0, ran.stderr
    # The wait is what is left of the 2 s when the relay starts (the scan itself takes time).
    assert re.search(r"outbox: waiting [12] s for rows due at 09:00:02 UTC", ran.stderr)
    assert len(github.issues) == 3


def test_dead_rows_of_one_cause_are_said_once(home: Path) -> None:
    github = FakeGitHub()
    with github.running():
        env = notify_env(github, MLCOPILOT_TEST_WRITE_SPACING="0", MLCOPILOT_GROUP_WAIT="0s")
        env["GITHUB_TOKEN"] = "ghp_" + "x" * 36  # not the fake's: every create is refused
        ran = run_cli(home, "scan", "--now", DAY1, env=env)

    assert ran.code == 5, ran.stderr
    said = (ran.stdout + ran.stderr).splitlines()
    (dead,) = [line for line in said if "dead" in line.split(":")[0] or "is dead" in line]
    assert dead.startswith("dead (3 outbox rows: github open ×3): GitHub ")
    assert "401" in dead
    assert re.search(r"`mlcopilot outbox retry \d+ \d+ \d+`$", dead)


# --- the progress helpers, on a clock the test moves (no real waiting)


class Ticks:
    """A monotonic clock and a sleeper the test drives."""

    def __init__(self) -> None:
        self.now_s = 0.0
        self.start = datetime(2026, 11, 20, 9, tzinfo=UTC)

    def __call__(self) -> float:
        return self.now_s

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.now_s)

    def sleep(self, seconds: float) -> None:
        self.now_s += seconds


def test_progress_lines_come_at_most_every_fifteen_seconds() -> None:
    clock = Ticks()
    every = Every(clock=clock)
    said = []
    for _ in range(100):  # a second of work each
        clock.now_s += 1
        said.append(every.due())

    assert sum(said) == 6  # at 15, 30, ..., 90 s
    assert said.index(True) == 14
    assert every.elapsed() == 100


def test_a_long_wait_is_said_again_every_fifteen_seconds() -> None:
    clock = Ticks()
    console = Console(record=True, width=200, color_system=None)

    AnnouncedWaits(clock, console).sleep(40)
    AnnouncedWaits(clock, console).sleep(0.5)  # too short to mention

    assert clock.now_s == 40.5
    assert console.export_text().splitlines() == [
        "outbox: waiting 40 s for rows due at 09:00:40 UTC (notification grouping or a retry)",
        "outbox: still waiting, 25 s left",
        "outbox: still waiting, 10 s left",
    ]
