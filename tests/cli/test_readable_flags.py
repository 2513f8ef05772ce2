"""Consistent flags, a way to discover what to scan, and logging as DataHub's CLI offers it.

Through the installed ``mlcopilot`` command (piped, as in CI).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from testing.builders import dataset, dataset_urn, ml_model, model_urn, write_metadata_file
from testing.fakes.github import FakeGitHub
from testing.fakes.slack import FakeSlack
from testing.installed_cli import Ran, run_cli
from testing.notify_world import notify_env
from tests.conftest import DEMO_DATA

DAY1 = "2026-11-20T09:00:00Z"
CHURN = model_urn("churn_predictor_v1")
QUIET_RELAY = {"MLCOPILOT_TEST_WRITE_SPACING": "0", "MLCOPILOT_GROUP_WAIT": "0s"}
"""No spacing between writes, no grouping wait: the relay delivers at once."""


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's catalog plus two models both named ``twin`` and one named ``scorer``."""
    folder = tmp_path_factory.mktemp("catalog")
    home = folder / "home"
    assert run_cli(home, "catalog", "load", str(DEMO_DATA / "01_catalog.json")).code == 0
    more = [
        *dataset("raw.scores", fields=[("score", "double")]),
        *ml_model("scorer", platform="sagemaker", training_data=[dataset_urn("raw.scores")]),
        *ml_model("twin", platform="mlflow", training_data=[dataset_urn("raw.scores")]),
        *ml_model("twin", platform="sagemaker", env="DEV"),
    ]
    path = write_metadata_file(folder / "more.json", more)
    assert run_cli(home, "catalog", "load", str(path)).code == 0
    return home


@pytest.fixture(scope="module")
def scanned(catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """That catalog scanned once (three incidents, all churn_predictor_v1's), one acked."""
    home = tmp_path_factory.mktemp("scanned") / "home"
    shutil.copytree(catalog, home)
    assert run_cli(home, "scan", "--now", DAY1).code == 0
    first = incidents(home)[0]["id"]
    assert run_cli(home, "incidents", "ack", first, "--by", "alice").code == 0
    return home


@pytest.fixture
def home(scanned: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(scanned, copy)
    return copy


def incidents(home: Path, *args: str) -> list[dict[str, Any]]:
    listed = run_cli(home, "incidents", "list", "--format", "json", *args)
    assert listed.code == 0, listed.stderr
    rows: list[dict[str, Any]] = listed.json()
    return rows


def one_error(ran: Ran) -> str:
    assert ran.code == 2, (ran.code, ran.stdout, ran.stderr)
    (line,) = [line for line in ran.stderr.splitlines() if line.strip()]
    assert line.startswith("error: ")
    return line


# --- discover what to scan


def test_catalog_models_lists_what_scan_takes(catalog: Path) -> None:
    table = run_cli(catalog, "catalog", "models")
    as_json = run_cli(catalog, "catalog", "models", "--format", "json")

    assert table.code == as_json.code == 0, table.stderr + as_json.stderr
    models = {m["urn"]: m for m in as_json.json()}
    assert models[CHURN] == {
        "urn": CHURN,
        "name": "churn_predictor_v1",
        "platform": "mlflow",
        "env": "PROD",
        "upstream": 3,
    }
    assert models[model_urn("twin", "sagemaker", "DEV")]["upstream"] == 0
    assert len(models) == 4
    rows = table.stdout.splitlines()
    assert rows[0].split() == ["name", "platform", "env", "upstream", "urn"]
    assert f" churn_predictor_v1  mlflow     PROD  3         {CHURN}" in rows


def test_scan_takes_a_model_by_name(catalog: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(catalog, home)

    by_name = run_cli(home, "scan", "--dry-run", "--format", "json", "--model", "scorer")
    by_case = run_cli(home, "scan", "--dry-run", "--format", "json", "--model", "SCORER")

    assert by_name.code == by_case.code == 0, by_name.stderr + by_case.stderr
    assert [m["urn"] for m in by_name.json()["models"]] == [model_urn("scorer", "sagemaker")]
    assert by_case.json()["models"] == by_name.json()["models"]


def test_a_name_two_models_have_lists_their_urns(catalog: Path) -> None:
    line = one_error(run_cli(catalog, "scan", "--dry-run", "--model", "twin"))

    assert "--model twin: 2 models have this name; give one's urn: " in line
    assert model_urn("twin") in line
    assert model_urn("twin", "sagemaker", "DEV") in line


# --- one state filter, data to a file, validated limits


def test_incident_states_active_open_acknowledged(home: Path) -> None:
    active = incidents(home)
    open_only = incidents(home, "--state", "open")
    acked = incidents(home, "--state", "acknowledged")

    assert len(active) == 3
    assert {i["state"] for i in open_only} == {"open"}
    assert len(open_only) == 2
    assert [i["acknowledged_by"] for i in acked] == ["alice"]


def test_model_filters_repeat_and_take_names(home: Path) -> None:
    by_name = incidents(home, "--model", "churn_predictor_v1")
    by_both = incidents(home, "--model", "scorer", "--model", CHURN)
    by_other = run_cli(home, "incidents", "list", "--model", "scorer")

    assert len(by_name) == 3
    assert by_both == by_name
    assert by_other.stdout == "No active (open or acknowledged) incidents for scorer.\n"


def test_limit_and_output_file(home: Path, tmp_path: Path) -> None:
    report = tmp_path / "out" / "incidents.json"
    table = tmp_path / "out" / "incidents.txt"

    written = run_cli(
        home, "incidents", "list", "--limit", "2", "--format", "json", "-o", str(report)
    )
    tabled = run_cli(home, "incidents", "list", "--output", str(table), columns=40)

    assert written.code == tabled.code == 0, written.stderr + tabled.stderr
    assert written.stdout == ""
    assert f"Written to {report}." in written.stderr
    assert len(json.loads(report.read_text(encoding="utf-8"))) == 2
    lines = table.read_text(encoding="utf-8").splitlines()
    # One line each, whatever COLUMNS says: a file is not a terminal.
    header = ["id", "state", "severity", "check", "model", "entity", "field", "opened", "told"]
    assert lines[0].split() == header
    assert len(lines) == 4
    assert "\x1b" not in table.read_text(encoding="utf-8")


def test_outbox_state_is_the_filter_and_status_still_works(home: Path) -> None:
    by_state = run_cli(home, "outbox", "list", "--state", "all", "--format", "json")
    by_status = run_cli(home, "outbox", "list", "--status", "all", "--format", "json")
    both = run_cli(home, "outbox", "list", "--state", "dead", "--status", "all")

    assert by_state.code == by_status.code == 0
    assert by_state.json() == by_status.json() != []
    assert "--status" not in run_cli(home, "outbox", "list", "--help").stdout  # a hidden alias
    assert "--state dead and --status all: give one" in one_error(both)


@pytest.mark.parametrize("limit", ["0", "-5"])
def test_a_limit_below_one_is_refused(home: Path, limit: str) -> None:
    line = one_error(run_cli(home, "outbox", "list", "--limit", limit))

    assert "'--limit'" in line


def test_an_empty_outbox_is_said_plainly(catalog: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(catalog, home)
    assert run_cli(home, "scan", "--dry-run").code == 0
    assert run_cli(home, "baseline", "accept", CHURN).code == 0  # a state database, no rows

    listed = run_cli(home, "outbox", "list", "--state", "all")

    assert listed.stdout == "The outbox is empty.\n"


def test_retrying_a_row_that_is_not_dead_is_refused(home: Path) -> None:
    rows = run_cli(home, "outbox", "list", "--state", "all", "--format", "json").json()
    done = next(r["id"] for r in rows if r["status"] == "done")

    line = one_error(run_cli(home, "outbox", "retry", "99999", str(done)))

    assert f"outbox row 99999 does not exist; outbox row {done} is done, not dead" in line


def test_rows_for_a_sink_this_run_does_not_serve_are_named(home: Path) -> None:
    github = FakeGitHub()
    with github.running():
        env = notify_env(github) | QUIET_RELAY
        queued = run_cli(home, "scan", "--now", "2026-11-21T09:00:00Z", "--no-deliver", env=env)
        assert queued.code == 0, queued.stderr
        # The same home without the GitHub settings: the rows would wait here forever.
        ran = run_cli(home, "outbox", "deliver")

    assert ran.code == 5, ran.stdout + ran.stderr
    assert "Nothing was due." not in ran.stdout
    assert re.search(r"not delivered: \d+ pending rows? for sinks this run does not", ran.stdout)
    assert "(github " in ran.stdout


# --- logging


def test_verbose_shows_what_mlcopilot_logs_and_not_the_libraries_chatter(
    home: Path, tmp_path: Path
) -> None:
    twin = tmp_path / "twin"
    shutil.copytree(home, twin)
    github = FakeGitHub()
    with github.running():
        env = notify_env(github) | QUIET_RELAY
        env["GITHUB_TOKEN"] = "ghp_" + "x" * 36  # refused: the rows die, which the relay logs
        plain = run_cli(home, "scan", "--now", "2026-11-21T09:00:00Z", env=env)
        verbose = run_cli(twin, "-v", "scan", "--now", "2026-11-21T09:00:00Z", env=env)
        debug = run_cli(twin, "--debug", "outbox", "list", env=env)

    assert plain.code == verbose.code == 5, plain.stderr + verbose.stderr
    assert "is dead:" not in plain.stderr  # said once, in the report, not again as a log line
    assert re.search(r"^error: outbox row \d+ \(.*\) is dead: ", verbose.stderr, re.M)
    for chatter in ("HTTP Request:", "alembic"):  # the libraries' INFO is not mlcopilot's
        assert chatter not in verbose.stderr
    # --debug: every library's records too, each with its time, level and logger.
    assert re.search(r"^\d\d:\d\d:\d\d INFO alembic\.\S+: ", debug.stderr, re.M)


def test_the_log_file_has_everything_and_no_secret(catalog: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(catalog, home)
    hook_secret = "HOOKCANARY" + "h" * 24
    slack = FakeSlack(webhook_path=f"/services/TCANARY/BCANARY/{hook_secret}")
    log = tmp_path / "mlcopilot.log"
    with slack.running():
        env = notify_env(slack=slack, webhook=True) | QUIET_RELAY
        ran = run_cli(home, "--log-file", str(log), "scan", "--now", DAY1, "-q", env=env)

    assert ran.code == 0, ran.stderr
    assert len(slack.webhook_posts) == 3
    text = log.read_text(encoding="utf-8")
    assert hook_secret not in text
    # The HTTP client's own debug records are there too (none of them carries the URL).
    assert re.search(r"DEBUG httpcore\.http11: send_request_headers\.started", text)
    assert "DEBUG" not in ran.stderr  # the file has the debug log, the terminal does not
