"""The demo a new user runs first, and the metadata files it ships."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

from testing.fakes.github import FakeGitHub
from testing.fakes.slack import FakeSlack
from testing.notify_world import notify_env
from tests.conftest import DEMO_DATA, REPO

_CREDENTIALS = ("GITHUB_TOKEN", "SLACK_BOT_TOKEN", "SLACK_WEBHOOK_URL", "MLCOPILOT_GITHUB_REPO")


def _without_credentials() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _CREDENTIALS}


def test_shipped_demo_files_are_what_the_generator_builds() -> None:
    builder = runpy.run_path(str(REPO / "scripts" / "build_demo_data.py"))
    for name, build in builder["FILES"].items():
        assert (DEMO_DATA / name).read_text(encoding="utf-8") == builder["render"](build), name


def test_demo_tells_the_whole_story(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mlcopilot", "demo", "--home", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"COLUMNS": "160", **_without_credentials()},
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for expected in (
        "pii_exposure",
        "stale_source",
        "deprecated_source",
        "schema_drift",
        "signup_date",
        "country_code",
        "mlcopilot-schema-drift",
        "datahub lite get --urn",
        "Resolved:",
    ):
        assert expected in out, expected
    # What GitHub and Slack would receive, shown without credentials and saved exactly.
    assert "What GitHub and Slack would receive" in out
    assert "Previewed, not sent: 3 github open, 3 slack open." in out
    assert "```mermaid" in out
    saved = sorted((tmp_path / "demo" / "notifications").glob("*.json"))
    assert saved
    assert saved[0].name == "001-github-open.json"
    # The story's numbers: 3 incidents at first, 2 more on drift, 1 resolved at the end.
    assert "Incidents: 3 opened, 0 still open, 0 resolved." in out
    assert "Incidents: 2 opened, 3 still open, 0 resolved." in out
    assert "Incidents: 0 opened, 4 still open, 1 resolved." in out
    # A second run starts from scratch and tells the same story.
    again = subprocess.run(
        [sys.executable, "-m", "mlcopilot", "demo", "--home", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=_without_credentials(),
    )
    assert again.returncode == 0, again.stderr
    assert "Incidents: 3 opened, 0 still open, 0 resolved." in again.stdout


def test_demo_sends_when_credentials_are_configured(tmp_path: Path) -> None:
    from rich.console import Console

    from mlcopilot.cli.demo_run import prepare_home, run_demo
    from mlcopilot.notify.sinks.config import NotifySettings
    from mlcopilot.settings import load_settings

    github, slack = FakeGitHub(), FakeSlack()
    with github.running(), slack.running():
        env = notify_env(github, slack, MLCOPILOT_TEST_WRITE_SPACING="0")
        console = Console(record=True, width=160)
        notify = NotifySettings.from_settings(load_settings(environ=env))
        run_demo(prepare_home(tmp_path / "demo", console), console, notify)
    text = console.export_text()
    assert "Sent to github: open" in text
    assert "Sent to slack: open" in text
    assert "Previewed" not in text
    assert len(github.issues) == 4
    assert len(slack.roots()) == 4
