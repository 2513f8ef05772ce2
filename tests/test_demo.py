"""The demo a new user runs first, and the metadata files it ships.

The demo is harmless: it sends nothing unless asked (``--send``), runs in a new temporary home
by default, never replaces files it did not make, and works with a read-only home.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

from testing.fakes.github import FakeGitHub
from testing.fakes.pagerduty import ROUTING_KEY, FakePagerDuty
from testing.fakes.slack import FakeSlack
from testing.fakes.teams import FakeTeams
from testing.fakes.webhook import ACCEPTED, SECRET, FakeReceiver
from testing.installed_cli import run_cli
from testing.notify_world import notify_env
from tests.cli.readonly_mount import read_only_folder
from tests.conftest import DEMO_DATA, REPO
from tests.render_html.dom import parse

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn_predictor_v1,PROD)"

_CREDENTIALS = (
    "GITHUB_TOKEN",
    "SLACK_BOT_TOKEN",
    "SLACK_WEBHOOK_URL",
    "MLCOPILOT_GITHUB_REPO",
    "MLCOPILOT_PAGERDUTY_ROUTING_KEY",
    "MLCOPILOT_TEAMS_WEBHOOK_URL",
    "MLCOPILOT_WEBHOOK_URL",
    "MLCOPILOT_WEBHOOK_SECRET",
)


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
    # What every sink would receive, shown without credentials and saved exactly.
    assert "What GitHub, Slack, PagerDuty, Teams and your webhook would receive" in out
    assert (
        "Previewed, not sent: 3 github open, 3 pagerduty open, 3 slack open, 3 teams open, "
        "3 webhook open."
    ) in out
    assert "```mermaid" in out
    saved = sorted((tmp_path / "demo" / "notifications").glob("*.json"))
    assert saved
    assert [p.name for p in saved[:5]] == [
        "001-github-open.json",
        "002-slack-open.json",
        "003-pagerduty-trigger.json",
        "004-teams-open.json",
        "005-webhook-open.json",
    ]
    # PagerDuty, Teams and the webhook: one line a request; how to send them, said once.
    assert (
        "  pagerduty trigger: PII exposure at raw.customers, field email affects model "
        "churn_predictor_v1 (severity error, dedup_key 2a03fed21b6719ea)\n"
    ) in out
    assert "  teams card: Stale source at raw.transactions\n" in out
    assert "  teams card: Reminder: Stale source at raw.transactions\n" in out
    assert "  webhook incident.opened: Deprecated source at legacy.customer_segments" in out
    assert out.count("— previews: to send them: pagerduty: MLCOPILOT_PAGERDUTY_ROUTING_KEY") == 1
    assert out.count("signed with the placeholder secret PREVIEW-WEBHOOK-SECRET") == 1
    # The story's numbers: 3 incidents at first, 2 more on drift, 1 resolved at the end.
    assert "Incidents: 3 opened, 0 still open, 0 resolved." in out
    assert "Incidents: 2 opened, 3 still open, 0 resolved." in out
    assert "Incidents: 0 opened, 4 still open, 1 resolved." in out
    # It ends with the HTML report, where it says: the model's section, its four incidents
    # open and the resolved one in the timeline.
    page = tmp_path / "demo" / "report.html"
    assert out.rstrip().splitlines()[-1] == (
        f"HTML report (open it in a browser): {page.resolve().as_uri()}"
    )
    [section] = parse(page.read_text(encoding="utf-8")).find("section", "model")
    assert section.attrs["data-urn"] == MODEL
    rows = section.find("tr", "finding")
    assert len(rows) == 4
    events = {
        (li.attrs["data-incident"], li.attrs["data-event"])
        for li in section.find("li")
        if "data-event" in li.attrs
    }
    assert sum(1 for _, event in events if event == "opened") == 5
    assert sum(1 for _, event in events if event == "resolved") == 1
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
    assert page.read_text(encoding="utf-8").count('class="finding"') == 4


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
    previewed = [line for line in text.splitlines() if line.startswith("Previewed, not sent")]
    assert previewed  # PagerDuty, Teams and the webhook: no credentials for them
    assert all("github" not in line and "slack" not in line for line in previewed)
    assert len(github.issues) == 4
    assert len(slack.roots()) == 4


def test_demo_runs_in_a_new_temporary_home_and_its_hint_stays_there(tmp_path: Path) -> None:
    own_home = tmp_path / "my-home"  # the user's MLCOPILOT_HOME: never touched by the demo
    temp = tmp_path / "tmp"
    temp.mkdir()
    ran = run_cli(own_home, "demo", env={"TMPDIR": str(temp), **_no_credentials()}, columns=400)
    assert ran.code == 0, ran.stderr
    (made,) = temp.iterdir()
    assert made.name.startswith("mlcopilot-demo-")
    assert f"Demo home: {made} (a new temporary folder" in ran.stdout
    assert not own_home.exists()
    hint = f"MLCOPILOT_HOME={made} mlcopilot incidents list"
    assert hint in ran.stdout
    # The hint's command reads the demo's incidents, not the user's (empty) state.
    listed = run_cli(made, "incidents", "list", "--format", "json")
    assert listed.code == 0, listed.stderr
    assert len(listed.json()) == 4


def test_demo_refuses_a_home_that_holds_other_files(tmp_path: Path) -> None:
    real = tmp_path / "real-home"
    real.mkdir()
    (real / "catalog.db").write_bytes(b"a real catalog")
    (real / "state.db").write_bytes(b"a real history")
    ran = run_cli(tmp_path, "demo", "--home", str(real), env=_no_credentials(), columns=400)
    assert ran.code == 2
    assert f"--home {real}: the folder holds files no demo made" in ran.stderr
    assert (real / "catalog.db").read_bytes() == b"a real catalog"
    assert (real / "state.db").read_bytes() == b"a real history"
    assert sorted(p.name for p in real.iterdir()) == ["catalog.db", "state.db"]


def test_demo_reuses_its_own_home_and_removes_only_its_files(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    assert run_cli(tmp_path, "demo", "--home", str(home), env=_no_credentials()).code == 0
    keep = home / "notes.txt"
    keep.write_text("mine", encoding="utf-8")
    (home / "notifications" / "mine.json").write_text("{}", encoding="utf-8")
    again = run_cli(tmp_path, "demo", "--home", str(home), env=_no_credentials(), columns=400)
    assert again.code == 0, again.stderr
    assert "an earlier demo's folder, made afresh" in again.stdout
    assert keep.read_text(encoding="utf-8") == "mine"
    assert (home / "notifications" / "mine.json").exists()


def test_demo_sends_nothing_without_send_even_with_credentials(tmp_path: Path) -> None:
    github, slack = FakeGitHub(), FakeSlack()
    pagerduty, teams, receiver = FakePagerDuty(), FakeTeams(), FakeReceiver()
    fakes = (github, slack, pagerduty, teams, receiver)
    with (
        github.running(),
        slack.running(),
        pagerduty.running(),
        teams.running(),
        receiver.running(),
    ):
        env = notify_env(github, slack, MLCOPILOT_TEST_WRITE_SPACING="0") | {
            "MLCOPILOT_PAGERDUTY_ROUTING_KEY": ROUTING_KEY,
            "MLCOPILOT_PAGERDUTY_URL": pagerduty.url,
            "MLCOPILOT_TEAMS_WEBHOOK_URL": teams.webhook_url,
            "MLCOPILOT_WEBHOOK_URL": receiver.endpoint,
            "MLCOPILOT_WEBHOOK_SECRET": SECRET,
        }
        ran = run_cli(tmp_path, "demo", "--home", str(tmp_path / "d1"), env=env, columns=400)
        assert ran.code == 0, ran.stderr
        assert (
            "github, slack, pagerduty, teams and webhook credentials are set, but the demo "
            "sends nothing without --send"
        ) in ran.stderr
        assert "Previewed, not sent" in ran.stdout
        assert [len(fake.requests) for fake in fakes] == [0, 0, 0, 0, 0]
        sent = run_cli(tmp_path, "demo", "--home", str(tmp_path / "d2"), "--send", env=env)
        assert sent.code == 0, sent.stderr
    assert len(github.issues) == 4
    assert len(slack.roots()) == 4
    assert pagerduty.alerts
    assert teams.cards
    assert receiver.events
    assert {d.verdict for d in receiver.deliveries} == {ACCEPTED}
    assert "Previewed, not sent" not in sent.stdout


def test_demo_runs_with_a_read_only_mlcopilot_home(tmp_path: Path) -> None:
    with read_only_folder(tmp_path / "ro") as home:
        ran = run_cli(home, "demo", env={"TMPDIR": str(tmp_path), **_no_credentials()})
        assert ran.code == 0, ran.stderr
        assert "Resolved:" in ran.stdout


def test_demo_into_a_file_or_a_ci_log_pads_no_line(tmp_path: Path) -> None:
    """Off a terminal the console never wraps (10,000 columns): the rules and the previews'
    frames are drawn 80 wide, and nothing is padded to the console's width."""
    ran = run_cli(tmp_path, "demo", "--home", str(tmp_path / "d"), env=_no_credentials())

    assert ran.code == 0, ran.stderr
    lines = (ran.stdout + ran.stderr).splitlines()
    rules = [line for line in lines if line.endswith("─" * 10)]
    assert len(rules) >= 5  # the five steps' rules, at least
    assert all(len(line) == 80 for line in rules), {len(line) for line in rules}
    assert not [line for line in lines if line != line.rstrip()]  # nothing padded
    assert max(len(line) for line in lines) < 500  # prose and table rows as they are
    assert len(ran.stdout) < 40_000  # 754 KB when every line was 10,000 columns


def _no_credentials() -> dict[str, str]:
    # run_cli starts from os.environ: blank out any credential the machine may have.
    return dict.fromkeys(_CREDENTIALS, "")
