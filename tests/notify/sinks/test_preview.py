"""The demo's preview is what the sinks send: the same bytes the local fakes receive.

The demo runs twice on the same settings: once previewed (nothing sent), once sent to the fake
GitHub and Slack. Every write each sink makes (issue, comment, close; root post, thread reply,
root edit, or webhook post) must be the same request with the same body, byte for byte. The
only values that may differ are the ones the server chooses: a Slack message's ``ts``, which
the replies and the root edit then quote.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from mlcopilot.cli.demo_run import prepare_home, run_demo
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.notify.sinks.preview import (
    PREVIEW_CHANNEL,
    PREVIEW_REPO,
    Preview,
    PreviewGitHub,
    PreviewSlack,
    PreviewTargets,
)
from mlcopilot.settings import load_settings
from testing.fakes.github import FakeGitHub
from testing.fakes.http import Request
from testing.fakes.slack import CHANNEL_ID, FakeSlack
from testing.notify_world import notify_env

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
        assert run_demo(prepare_home(tmp_path / "sent", console), console, notify) == []
    assert github.issues
    assert all(issue["labels"][0]["name"] == "ml-risk" for issue in github.issues.values())
    shown = previewed(previews, "github")
    opened = [request for request, _ in shown].count("POST /repos/acme/ml-alerts/issues")
    assert opened == len(github.issues)
    assert shown == github_writes(github)
    shown = previewed(previews, "slack")
    assert len(shown) >= 8
    assert shown == slack_writes(slack, webhook=webhook)
    # Saved as shown: each file holds the request line and its body, decoded.
    saved = sorted((tmp_path / "shown" / "notifications").glob("*.json"))
    assert len(saved) == len(previews)
    for path, preview in zip(saved, previews, strict=True):
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data == {"request": preview.request, "json": json.loads(preview.body)}


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
    assert "What GitHub and Slack would receive" in text
    assert "preview-not-a-token" not in text


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
