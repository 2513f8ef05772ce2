"""``mlcopilot scan --dry-run --preview DIR``: what each configured sink would receive, saved.

Every sink is configured at its local fake (GitHub, Slack, PagerDuty, Teams, the signed
webhook). The dry run saves one JSON file per request and lists them, and no fake receives a
write; the same scan for real then sends, and each file is what its fake received: the same
request and body, but for the secrets the preview never has (PagerDuty's routing key is a
placeholder; the webhook is signed with a placeholder secret, checked as a receiver checks it).
A second day shows the rows of groups that already live somewhere (issue comments, thread
replies) previewed where they live.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlcopilot.notify.sinks.preview import PREVIEW_ROUTING_KEY, PREVIEW_WEBHOOK_SECRET
from testing.fakes.github import FakeGitHub
from testing.fakes.pagerduty import ROUTING_KEY, FakePagerDuty
from testing.fakes.slack import CHANNEL_ID, FakeSlack
from testing.fakes.teams import SIG, WORKFLOW_ID, FakeTeams
from testing.fakes.webhook import ACCEPTED, SECRET, FakeReceiver, verify
from testing.installed_cli import Ran, run_cli
from testing.notify_world import notify_env
from tests.conftest import DEMO_DATA

DAY1, DAY2 = "2026-11-20T09:00:00Z", "2026-11-21T09:00:00Z"
SINKS = ("github", "slack", "pagerduty", "teams", "webhook")
Request = tuple[str, Any]
"""A request as compared: its request line and its body, decoded."""


@dataclass
class Fakes:
    github: FakeGitHub
    slack: FakeSlack
    pagerduty: FakePagerDuty
    teams: FakeTeams
    receiver: FakeReceiver
    env: dict[str, str]

    def counts(self) -> tuple[int, ...]:
        return tuple(len(f.requests) for f in self.servers)

    @property
    def servers(self) -> tuple[FakeGitHub, FakeSlack, FakePagerDuty, FakeTeams, FakeReceiver]:
        return (self.github, self.slack, self.pagerduty, self.teams, self.receiver)

    @property
    def secrets(self) -> tuple[str, ...]:
        return (
            self.github.token,
            self.slack.token,
            ROUTING_KEY,
            self.teams.webhook_url,
            SIG,
            WORKFLOW_ID,
            SECRET,
            self.receiver.endpoint,
        )

    def received(self, since: tuple[int, ...]) -> dict[str, list[Request]]:
        """The writes each fake received after ``since`` (:meth:`counts`), as files hold them."""
        github, slack, pagerduty, teams, receiver = (
            f.requests[n:] for f, n in zip(self.servers, since, strict=True)
        )
        return {
            "github": [
                (f"{r.method} {r.path}", r.json())
                for r in github
                if r.method != "GET" and "/issues" in r.path
            ],
            "slack": [
                (f"POST {r.path.removeprefix('/api/')}", r.json())
                for r in slack
                if r.path in ("/api/chat.postMessage", "/api/chat.update")
            ],
            "pagerduty": [(f"{r.method} {r.path}", r.json()) for r in pagerduty],
            "teams": [("POST the Workflows webhook", r.json()) for r in teams],
            "webhook": [("POST the webhook URL", r.json()) for r in receiver],
        }


@contextmanager
def five_fakes() -> Iterator[Fakes]:
    github, slack, pagerduty = FakeGitHub(), FakeSlack(), FakePagerDuty()
    teams, receiver = FakeTeams(), FakeReceiver()
    with (
        github.running(),
        slack.running(),
        pagerduty.running(),
        teams.running(),
        receiver.running(),
    ):
        env = notify_env(
            github,
            slack,
            MLCOPILOT_SLACK_CHANNEL=CHANNEL_ID,  # by id: a #name is previewed at a placeholder
            MLCOPILOT_GROUP_WAIT="0",
            MLCOPILOT_TEST_WRITE_SPACING="0",
        ) | {
            "MLCOPILOT_PAGERDUTY_ROUTING_KEY": ROUTING_KEY,
            "MLCOPILOT_PAGERDUTY_URL": pagerduty.url,
            "MLCOPILOT_TEAMS_WEBHOOK_URL": teams.webhook_url,
            "MLCOPILOT_WEBHOOK_URL": receiver.endpoint,
            "MLCOPILOT_WEBHOOK_SECRET": SECRET,
        }
        yield Fakes(github, slack, pagerduty, teams, receiver, env)


def saved(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    return [(p, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(folder.iterdir())]


def previewed(folder: Path) -> dict[str, list[Request]]:
    """The saved requests by sink, in order; PagerDuty's placeholder key put back as the real
    one (the only difference a preview may have)."""
    found: dict[str, list[Request]] = {sink: [] for sink in SINKS}
    for path, data in saved(folder):
        sink = path.name.split("-")[1]
        body = data["json"]
        if sink == "pagerduty":
            assert body["routing_key"] == PREVIEW_ROUTING_KEY
            body = {**body, "routing_key": ROUTING_KEY}
        found[sink].append((data["request"], body))
    return found


def dry_run(home: Path, fakes: Fakes, now: str, folder: Path, *args: str) -> Ran:
    before = fakes.counts()
    ran = run_cli(
        home, "scan", "--now", now, "--dry-run", "--preview", str(folder), *args, env=fakes.env
    )
    assert ran.code == 0, ran.stderr
    # Nothing was sent, and the only reads were GitHub's (acknowledgements read back).
    received = fakes.received(before)
    assert all(requests == [] for requests in received.values()), received
    assert fakes.counts()[1:] == before[1:]
    return ran


def scan(home: Path, fakes: Fakes, now: str) -> tuple[int, ...]:
    before = fakes.counts()
    ran = run_cli(home, "scan", "--now", now, env=fakes.env)
    assert ran.code == 0, ran.stdout + ran.stderr
    return before


def check_webhook(folder: Path, fakes: Fakes, since: int) -> None:
    """Each webhook file: the body (compact) and Idempotency-Key the receiver got, signed with
    the placeholder secret."""
    files = [data for path, data in saved(folder) if "-webhook-" in path.name]
    deliveries = fakes.receiver.deliveries[since:]
    assert len(files) == len(deliveries) > 0
    for data, delivery in zip(files, deliveries, strict=True):
        assert delivery.verdict == ACCEPTED
        body = json.dumps(data["json"], separators=(",", ":"), ensure_ascii=False).encode()
        assert body == delivery.body  # what the note says the signature is over
        headers = {name.lower(): value for name, value in data["headers"].items()}
        assert headers["idempotency-key"] == delivery.key
        verify(PREVIEW_WEBHOOK_SECRET, headers, body, now=int(headers["x-mlcopilot-timestamp"]))
        assert PREVIEW_WEBHOOK_SECRET in data["note"]


def test_a_dry_run_saves_what_each_sink_would_receive_and_sends_nothing(
    demo: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "previews"
    with five_fakes() as fakes:
        ran = dry_run(demo, fakes, DAY1, folder)
        files = saved(folder)
        # One file a request, numbered in order, each listed on one line.
        assert [p.name[:3] for p, _ in files] == [f"{n:03d}" for n in range(1, len(files) + 1)]
        assert {p.name.split("-")[1] for p, _ in files} == set(SINKS)
        out = ran.stdout
        assert f"({len(files)} requests, sent to nobody; saved under {folder})" in out
        for path, _ in files:
            assert out.count(path.name) == 1
        assert (
            "pagerduty trigger: PII exposure at raw.customers, field email affects model "
            "churn_predictor_v1 (severity error, dedup_key 2a03fed21b6719ea)"
        ) in out
        assert "teams card: Stale source at raw.transactions" in out
        assert "webhook incident.opened: Deprecated source at legacy.customer_segments" in out
        assert "github open: POST /repos/acme/ml-alerts/issues — title: [mlcopilot]" in out
        # The rows as before, the previews after them, and the closing summary last.
        assert out.index("Notifications would send:") < out.index("sent to nobody")
        assert out.index("sent to nobody") < out.index("Summary: scanned 1 model")
        # No secret anywhere.
        shown = [ran.stdout, ran.stderr] + [p.read_text(encoding="utf-8") for p, _ in files]
        for secret in fakes.secrets:
            assert all(secret not in text for text in shown), secret

        # The same scan for real: each fake receives what its files hold.
        since = scan(demo, fakes, DAY1)
        received = fakes.received(since)
    assert all(received[sink] for sink in SINKS)
    assert previewed(folder) == received
    check_webhook(folder, fakes, since[4])


def test_the_next_days_rows_are_previewed_where_their_groups_live(
    demo: Path, tmp_path: Path
) -> None:
    with five_fakes() as fakes:
        scan(demo, fakes, DAY1)
        issues = len(fakes.github.issues)
        load = run_cli(demo, "catalog", "load", str(DEMO_DATA / "02_schema_change.json"))
        assert load.code == 0, load.stderr
        folder = tmp_path / "day2"
        ran = dry_run(demo, fakes, DAY2, folder)
        since = scan(demo, fakes, DAY2)
        received = fakes.received(since)
    # Reminders comment on the issues the first day opened and reply in their threads.
    github = previewed(folder)["github"]
    comments = [line for line, _ in github if line.endswith("/comments")]
    assert len(comments) == issues
    assert {line for line in comments} == {
        f"POST /repos/acme/ml-alerts/issues/{n}/comments" for n in range(1, issues + 1)
    }
    replies = [body for _, body in previewed(folder)["slack"] if "thread_ts" in body]
    assert replies
    assert "github reminder: POST /repos/acme/ml-alerts/issues/1/comments" in ran.stdout
    assert previewed(folder) == received
    check_webhook(folder, fakes, since[4])


def test_preview_goes_with_a_dry_run_only(demo: Path, tmp_path: Path) -> None:
    ran = run_cli(demo, "scan", "--now", DAY1, "--preview", str(tmp_path / "p"))
    assert ran.code == 2
    assert "--preview" in ran.stderr
    assert "only with --dry-run" in ran.stderr
    assert not (tmp_path / "p").exists()
    assert not (demo / "state.db").exists()  # refused before the scan


def test_preview_refuses_a_folder_with_other_files_and_replaces_earlier_previews(
    demo: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    ran = run_cli(demo, "scan", "--now", DAY1, "--dry-run", "--preview", str(folder))
    assert ran.code == 2
    assert "the folder holds files that are not previews (notes.txt)" in ran.stderr
    (folder / "notes.txt").unlink()
    (folder / "099-github-open.json").write_text("{}", encoding="utf-8")  # an earlier run's
    with five_fakes() as fakes:
        dry_run(demo, fakes, DAY1, folder)
    names = sorted(p.name for p in folder.iterdir())
    assert "099-github-open.json" not in names
    assert names[0] == "001-github-open.json"


def test_with_a_json_report_the_list_goes_to_stderr(demo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    with five_fakes() as fakes:
        ran = dry_run(demo, fakes, DAY1, folder, "--format", "json")
    report = ran.json()
    assert report["dry_run"] is True
    assert "sent to nobody" in ran.stderr
    assert len(list(folder.iterdir())) > 0


def test_with_no_sink_configured_there_is_nothing_to_preview(demo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    ran = run_cli(demo, "scan", "--now", DAY1, "--dry-run", "--preview", str(folder))
    assert ran.code == 0, ran.stderr
    assert (
        f"Nothing to preview in {folder}: the dry run plans no notification (no notification "
        "sink is configured)."
    ) in ran.stdout
    assert list(folder.iterdir()) == []


def test_quiet_saves_the_previews_and_lists_nothing(demo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    with five_fakes() as fakes:
        ran = dry_run(demo, fakes, DAY1, folder, "--quiet")
    assert len(list(folder.iterdir())) > 0
    assert "sent to nobody" not in ran.stdout + ran.stderr
