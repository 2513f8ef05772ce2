"""The demo's preview is what the sinks send: the same bytes the local fakes receive.

The demo runs twice on the same settings: once previewed (nothing sent), once sent to the fake
GitHub and Slack. Every write each sink makes (issue, comment, close; root post, thread reply,
root edit, or webhook post) must be the same request with the same body, byte for byte. The
only values that may differ are the ones the server chooses: a Slack message's ``ts``, which
the replies and the root edit then quote.

PagerDuty, Teams and the signed webhook: real scans send their rows to the fakes, and the same
rows go to the previews; each body is the same, byte for byte, but for the secrets a preview
never has — PagerDuty's routing key is a placeholder in the body, and the webhook's signature
is made with a placeholder secret (checked as a receiver checks it, with that secret).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr
from rich.console import Console

from mlcopilot.checks import builtin_infos
from mlcopilot.cli.demo_run import prepare_home, run_demo
from mlcopilot.cli.render.previews import file_content
from mlcopilot.incidents.payload import (
    GroupSnapshot,
    GroupState,
    Member,
    Notification,
    OutboxItem,
    OutboxStatus,
    PlannedRow,
    encode_notification,
    with_infos,
)
from mlcopilot.model import Severity
from mlcopilot.notify.sinks.config import (
    NotifySettings,
    PagerDutySettings,
    TeamsSettings,
    WebhookSettings,
)
from mlcopilot.notify.sinks.preview import (
    PREVIEW_CHANNEL,
    PREVIEW_REPO,
    PREVIEW_ROUTING_KEY,
    PREVIEW_WEBHOOK_SECRET,
    Preview,
    PreviewGitHub,
    PreviewPagerDuty,
    PreviewSlack,
    PreviewTargets,
    PreviewTeams,
    PreviewWebhook,
    preview_rows,
)
from mlcopilot.scan.delivery import hand_change_request
from mlcopilot.settings import load_settings
from testing.fakes.github import FakeGitHub
from testing.fakes.http import Request
from testing.fakes.pagerduty import ROUTING_KEY, FakePagerDuty
from testing.fakes.slack import CHANNEL_ID, FakeSlack
from testing.fakes.teams import SIG, WORKFLOW_ID, FakeTeams
from testing.fakes.webhook import ACCEPTED, SECRET, FakeReceiver, verify
from testing.notify_world import CUSTOMERS, MODEL, T0, World, notify_env, world

Sent = list[tuple[str, bytes]]


def github_writes(github: FakeGitHub) -> Sent:
    """What the fake GitHub received that changes an issue (labels are set up, not previewed)."""
    return [
        (f"{r.method} {r.path}", r.body)
        for r in github.requests
        if r.method != "GET" and "/issues" in r.path
    ]


def slack_writes(slack: FakeSlack, *, webhook: bool) -> Sent:
    """What the fake Slack received that posts or edits, its ``ts`` renamed to the preview's.

    The fake numbers messages by its clock, the preview ``1.000100``, ``2.000100``...: a root's
    ``ts`` is mapped to the one the preview gave the same post, in order.
    """
    if webhook:
        return [("POST the webhook", r.body) for r in slack.calls("POST", slack.webhook_path)]
    writes: list[Request] = [
        r for r in slack.requests if r.path in ("/api/chat.postMessage", "/api/chat.update")
    ]
    posts = [m for m in slack.messages if m.get("bot_id")]
    renamed: Sent = []
    for request in writes:
        body = request.body
        for n, message in enumerate(posts, start=1):
            body = body.replace(f'"{message["ts"]}"'.encode(), f'"{n}.000100"'.encode())
        renamed.append((f"POST {request.path.removeprefix('/api/')}", body))
    return renamed


def previewed(previews: list[Preview], sink: str) -> Sent:
    return [(p.request, p.body) for p in previews if p.sink == sink]


@pytest.mark.parametrize("webhook", [False, True], ids=["bot", "webhook"])
def test_the_demo_previews_byte_for_byte_what_the_sinks_send(tmp_path: Path, webhook: bool) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[github]\nlabel = "ml-risk"\n', encoding="utf-8")
    github, slack = FakeGitHub(), FakeSlack()
    console = Console(record=True, width=160)
    with github.running(), slack.running():
        env = notify_env(
            github,
            slack,
            webhook=webhook,
            MLCOPILOT_TEST_WRITE_SPACING="0",
            # By id: a channel given by name is previewed with a placeholder id.
            **({} if webhook else {"MLCOPILOT_SLACK_CHANNEL": CHANNEL_ID}),
        )
        settings = load_settings(config, environ=env)
        notify = NotifySettings.from_settings(settings)
        targets = PreviewTargets.from_settings(settings, notify)
        quiet = replace(notify, github=None, slack=None)
        previews = run_demo(prepare_home(tmp_path / "shown", console), console, quiet, targets)
        assert github.requests == []
        assert slack.requests == []
        sent = run_demo(prepare_home(tmp_path / "sent", console), console, notify)
        assert {p.sink for p in sent} == {"pagerduty", "teams", "webhook"}  # not configured
    assert github.issues
    assert all(issue["labels"][0]["name"] == "ml-risk" for issue in github.issues.values())
    shown = previewed(previews, "github")
    opened = [request for request, _ in shown].count("POST /repos/acme/ml-alerts/issues")
    assert opened == len(github.issues)
    assert shown == github_writes(github)
    shown = previewed(previews, "slack")
    assert len(shown) >= 8
    assert shown == slack_writes(slack, webhook=webhook)
    # Saved as shown: each file holds the request line and its body, decoded (and for the
    # webhook the headers its receiver reads, with a note on the placeholder signature).
    saved = sorted((tmp_path / "shown" / "notifications").glob("*.json"))
    assert len(saved) == len(previews)
    for path, preview in zip(saved, previews, strict=True):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["request"] == preview.request
        assert data["json"] == json.loads(preview.body)
        assert data == file_content(preview)
        if preview.sink != "webhook":
            assert set(data) == {"request", "json"}


def test_without_settings_previews_go_to_placeholders_with_the_configured_label(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[github]\nlabel = "ml-risk"\n', encoding="utf-8")
    settings = load_settings(config, environ={})
    targets = PreviewTargets.from_settings(settings, NotifySettings.from_settings(settings))
    assert targets.github.repo == PREVIEW_REPO
    assert targets.github.label == "ml-risk"
    assert targets.slack.channel == PREVIEW_CHANNEL
    console = Console(record=True, width=160)
    previews = run_demo(
        prepare_home(tmp_path / "demo", console), console, NotifySettings(), targets
    )
    opened = [p.payload for p in previews if p.request == f"POST /repos/{PREVIEW_REPO}/issues"]
    assert opened
    assert all(o["labels"][0] == "ml-risk" for o in opened)
    posts = [p.payload for p in previews if p.request == "POST chat.postMessage"]
    assert {p["channel"] for p in posts} == {PREVIEW_CHANNEL}
    assert all(p["unfurl_links"] is False for p in posts)
    text = console.export_text()
    assert "What GitHub, Slack, PagerDuty, Teams and your webhook would receive" in text
    assert "preview-not-a-token" not in text
    # PagerDuty's placeholder key has a real key's shape: 32 characters.
    events = [p.payload for p in previews if p.sink == "pagerduty"]
    assert events
    assert {e["routing_key"] for e in events} == {PREVIEW_ROUTING_KEY}
    assert len(PREVIEW_ROUTING_KEY) == 32
    assert {p.request for p in previews if p.sink == "pagerduty"} == {"POST /v2/enqueue"}
    assert any(p.sink == "teams" for p in previews)
    assert any(p.sink == "webhook" for p in previews)


def test_a_channel_named_is_previewed_at_a_placeholder_id_and_no_token_is_used() -> None:
    settings = NotifySettings.from_env(
        {
            "MLCOPILOT_GITHUB_REPO": "acme/models",
            "GITHUB_TOKEN": "ghp_" + "S" * 36,
            "SLACK_BOT_TOKEN": "xoxb-" + "9" * 12,
            "MLCOPILOT_SLACK_CHANNEL": "#ml-alerts",
        }
    )
    assert settings.github is not None
    assert settings.slack is not None
    github = PreviewGitHub(settings.github)
    slack = PreviewSlack(settings.slack)
    assert github.settings.repo == "acme/models"
    assert github.settings.token.get_secret_value() == "preview-not-a-token"
    assert slack.settings.bot_token is not None
    assert slack.settings.bot_token.get_secret_value() == "preview-not-a-token"
    assert slack.settings.channel == "#ml-alerts"  # the sink looks its id up: PREVIEW_CHANNEL


def test_no_secret_of_any_sink_is_in_a_preview_the_demo_shows_or_saves(tmp_path: Path) -> None:
    """Every sink configured with its secrets, previewed: none of them in a file or on screen."""
    github, slack = FakeGitHub(), FakeSlack()
    pd, teams, receiver = FakePagerDuty(), FakeTeams(), FakeReceiver()
    with github.running(), slack.running(), pd.running(), teams.running(), receiver.running():
        env = notify_env(github, slack) | _three_sinks(pd, teams, receiver)
        settings = load_settings(environ=env)
        notify = NotifySettings.from_settings(settings)
        assert set(notify.sinks) == {"github", "slack", "pagerduty", "teams", "webhook"}
        targets = PreviewTargets.from_settings(settings, notify)
        console = Console(record=True, width=160)
        home = prepare_home(tmp_path / "demo", console)
        previews = run_demo(home, console, notify.writeback_only(), targets)
        for fake in (github, slack, pd, teams, receiver):
            assert fake.requests == []
    assert {p.sink for p in previews} == {"github", "slack", "pagerduty", "teams", "webhook"}
    secrets = (
        github.token,
        slack.token,
        ROUTING_KEY,
        teams.webhook_url,
        SIG,
        WORKFLOW_ID,
        SECRET,
        receiver.endpoint,
    )
    saved = sorted((home / "notifications").glob("*.json"))
    assert len(saved) == len(previews)
    shown = [console.export_text()] + [path.read_text(encoding="utf-8") for path in saved]
    for secret in secrets:
        assert all(secret not in text for text in shown), secret
    # The webhook's previews say what they are signed with.
    webhook = [json.loads(p.read_text(encoding="utf-8")) for p in saved if "-webhook-" in p.name]
    assert webhook
    assert all(PREVIEW_WEBHOOK_SECRET in w["note"] for w in webhook)


def test_the_preview_sinks_never_hold_a_configured_secret() -> None:
    pagerduty = PreviewPagerDuty(PagerDutySettings(routing_key=SecretStr(ROUTING_KEY)))
    teams = PreviewTeams(TeamsSettings(webhook_url=SecretStr("https://x.logic.azure.com/" + SIG)))
    webhook = PreviewWebhook(
        WebhookSettings(url="https://hooks.example.com/t0ken", secret=SecretStr(SECRET))
    )
    assert pagerduty.settings.routing_key.get_secret_value() == PREVIEW_ROUTING_KEY
    assert SIG not in teams.settings.webhook_url.get_secret_value()
    assert webhook.settings.secret.get_secret_value() == PREVIEW_WEBHOOK_SECRET
    assert "t0ken" not in webhook.settings.url


# --- PagerDuty, Teams and the webhook: the same rows, previewed and sent ------------------------


def _three_sinks(pd: FakePagerDuty, teams: FakeTeams, receiver: FakeReceiver) -> dict[str, str]:
    return {
        "MLCOPILOT_PAGERDUTY_ROUTING_KEY": ROUTING_KEY,
        "MLCOPILOT_PAGERDUTY_URL": pd.url,
        "MLCOPILOT_TEAMS_WEBHOOK_URL": teams.webhook_url,
        "MLCOPILOT_WEBHOOK_URL": receiver.endpoint,
        "MLCOPILOT_WEBHOOK_SECRET": SECRET,
    }


@contextmanager
def _sent_to_three_fakes(
    tmp_path: Path,
) -> Iterator[tuple[World, FakePagerDuty, FakeTeams, FakeReceiver]]:
    pd, teams, receiver = FakePagerDuty(), FakeTeams(), FakeReceiver()
    with (
        pd.running(),
        teams.running(),
        receiver.running(),
        world(
            tmp_path,
            MLCOPILOT_PAGERDUTY_ROUTING_KEY=ROUTING_KEY,
            MLCOPILOT_PAGERDUTY_URL=pd.url,
            MLCOPILOT_TEAMS_WEBHOOK_URL=teams.webhook_url,
            MLCOPILOT_WEBHOOK_URL=receiver.endpoint,
            MLCOPILOT_WEBHOOK_SECRET=SECRET,
        ) as w,
    ):
        yield w, pd, teams, receiver


PII, DRIFT, STALE = "pii_exposure", "schema_drift", "stale_source"


def _scans(w: World) -> None:
    """Every action these sinks take: three groups open, one is acknowledged, one updated (a
    finding cleared, one added) and one reminded of, then all resolve."""
    w.script = {
        PII: {CUSTOMERS: [("a", Severity.CRITICAL, None), ("b", Severity.HIGH, None)]},
        DRIFT: {CUSTOMERS: [("c", Severity.HIGH, "removed")]},
        STALE: {CUSTOMERS: [(None, Severity.HIGH, None)]},
    }
    opened = w.scan()
    pii = next(i for i in opened.changes.opened if i.check == PII)
    with w.store() as store:
        at = w.clock.now() + timedelta(minutes=5)
        request = hand_change_request(w.settings(), store, MODEL, resolving=None, at=at)
        store.acknowledge(pii.id, by="ana", at=at, notify=request)
    w.clock.advance(timedelta(hours=5))
    w.script[DRIFT] = {CUSTOMERS: [("a", Severity.HIGH, "removed")]}
    w.scan()
    w.clock.advance(timedelta(hours=5))
    w.script = {}
    last = w.scan()
    assert last.relay is not None
    assert last.relay.ok


def _replayed(w: World) -> tuple[list[OutboxItem], list[Preview]]:
    """The rows the relay delivered to PagerDuty, Teams and the webhook, in the order it did,
    each delivered again to the preview of its sink."""
    settings = w.settings()
    sent: list[Preview] = []
    url = settings.datahub_url
    previews = {
        "pagerduty": PreviewPagerDuty(settings.pagerduty, datahub_url=url, sent=sent),
        "teams": PreviewTeams(settings.teams, datahub_url=url, sent=sent),
        "webhook": PreviewWebhook(settings.webhook, datahub_url=url, sent=sent),
    }
    with w.store() as store:
        rows = [
            row
            for row in store.outbox(statuses=[OutboxStatus.DONE], limit=1000)
            if row.sink in previews
        ]
        rows.sort(key=lambda row: (row.delivered_at, row.id))
        for row in rows:
            ref = store.sink_ref(row.group_key, row.group_generation, row.sink)
            previews[row.sink].deliver(row, ref)
    return rows, sent


def test_pagerduty_teams_and_the_webhook_preview_byte_for_byte_what_they_send(
    tmp_path: Path,
) -> None:
    with _sent_to_three_fakes(tmp_path) as (w, pd, teams, receiver):
        _scans(w)
        rows, previews = _replayed(w)
        sent_counts = (len(pd.requests), len(teams.requests), len(receiver.requests))
    actions = {"open", "acknowledge", "update", "reminder", "resolve"}
    assert {row.action for row in rows if row.sink == "pagerduty"} == actions
    assert {row.action for row in rows if row.sink == "teams"} == actions
    assert {row.action for row in rows if row.sink == "webhook"} == actions
    # The replay sent nothing: the fakes hold what the scans' relays sent, and only that.
    assert sent_counts == (len(pd.enqueued()), len(teams.cards), len(receiver.deliveries))

    # PagerDuty: every event, in order, the same bytes but for the routing key.
    shown = [p for p in previews if p.sink == "pagerduty"]
    events = pd.enqueued()
    assert [p.request for p in shown] == [f"{r.method} {r.path}" for r in events]
    assert [p.action for p in shown] == [e.action for e in pd.events]
    assert {"trigger", "acknowledge", "resolve"} <= {p.action for p in shown}
    placeholder, key = PREVIEW_ROUTING_KEY.encode(), ROUTING_KEY.encode()
    assert all(placeholder in p.body and key not in p.body for p in shown)
    assert [p.body.replace(placeholder, key) for p in shown] == [r.body for r in events]

    # Teams: every card, the same bytes (the URL, its secret, is not in them).
    shown = [p for p in previews if p.sink == "teams"]
    assert [p.body for p in shown] == [r.body for r in teams.requests]
    assert len(shown) == len(teams.cards) == len([r for r in rows if r.sink == "teams"])
    assert all(r.body for r in teams.requests)

    # The webhook: every event the same bytes with the same Idempotency-Key; the timestamp
    # and signature are the attempt's own, the signature made with the placeholder secret.
    shown = [p for p in previews if p.sink == "webhook"]
    deliveries = receiver.deliveries
    assert {d.verdict for d in deliveries} == {ACCEPTED}
    assert [p.body for p in shown] == [d.body for d in deliveries]
    for preview, delivery in zip(shown, deliveries, strict=True):
        headers = {name.lower(): value for name, value in preview.headers}
        assert headers["idempotency-key"] == delivery.key
        assert headers["content-type"] == delivery.headers["content-type"]
        assert set(headers) == {
            "content-type",
            "idempotency-key",
            "x-mlcopilot-timestamp",
            "x-mlcopilot-signature",
        }
        stamped = int(headers["x-mlcopilot-timestamp"])
        verify(PREVIEW_WEBHOOK_SECRET, headers, preview.body, now=stamped)
        with pytest.raises(ValueError, match="bad signature"):
            verify(SECRET, headers, preview.body, now=stamped)
        assert headers["x-mlcopilot-signature"] != delivery.signature


def _update_adding(member: Member, sink: str) -> PlannedRow:
    """The row of an update that adds ``member`` to a schema-drift group, for ``sink``."""
    group = GroupSnapshot("f" * 16, 1, "schema_drift", CUSTOMERS, GroupState.OPEN, T0, (member,))
    notification = Notification("update", 1, group, (member.incident_id,), (), (), {})
    payload = with_infos(encode_notification(notification), builtin_infos())
    return PlannedRow(sink, "update", group.key, 1, 1, T0, payload)


def test_a_dry_run_row_that_sends_nothing_or_cannot_be_previewed_says_why() -> None:
    low = Member(
        incident_id="a" * 16,
        generation=1,
        check="schema_drift",
        severity=Severity.LOW,
        model=MODEL,
        entity=CUSTOMERS,
        field="notes",
        change="removed",
        previous_field=None,
        message="column notes was removed",
        path=(CUSTOMERS, MODEL),
        open=True,
    )
    settings = NotifySettings(pagerduty=PagerDutySettings(routing_key=SecretStr(ROUTING_KEY)))
    rows = [_update_adding(low, sink) for sink in ("pagerduty", "jsonl", "datahub")]
    paged, plugin = preview_rows(rows, settings, now=T0)  # the write-back row is no notification
    assert paged.previews == ()
    assert paged.note == "nothing to page: none of its incidents is at least high (min_severity)"
    assert plugin.previews == ()
    assert plugin.note == "not previewed: jsonl is a plugin sink"
