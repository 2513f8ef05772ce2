"""Secrets never leave: canaries through every path (T22), config errors (T23), SSRF (T24)."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from mlcopilot import redact
from mlcopilot.errors import ConfigError
from mlcopilot.model import Severity
from mlcopilot.notify.sinks.config import GitHubSettings, NotifySettings
from mlcopilot.notify.sinks.urls import GITHUB_API, SLACK_WEBHOOK, check_url
from testing.fakes.github import FakeGitHub
from testing.fakes.slack import FakeSlack
from testing.notify_world import CUSTOMERS, World, world

GH_CANARY = "ghp_CANARY" + "g" * 30
SLACK_CANARY = "xoxb-CANARY-1234567890-" + "s" * 24
HOOK_SECRET = "HOOKCANARY" + "h" * 20
HOOK_PATH = f"/services/TCANARY/BCANARY/{HOOK_SECRET}"


def everything_written(w: World, tmp_path: Path, caplog: pytest.LogCaptureFixture, out: str) -> str:
    parts = [caplog.text, out]
    parts += [p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*.db")]
    parts += [i["body"] + i["title"] for i in w.github.issues.values()]
    parts += [c["body"] for cs in w.github.comments.values() for c in cs]
    parts += [repr(m) for m in w.slack.messages] + [repr(p) for p in w.slack.webhook_posts]
    with w.store() as store:
        parts += [repr(i) for i in store.outbox()]
    return "\n".join(parts)


@pytest.mark.parametrize("webhook", [False, True])
def test_secret_canaries_never_appear_anywhere(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    webhook: bool,
) -> None:
    redact.install()
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "githubkit", "slack_sdk", "urllib3", "mlcopilot"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    github = FakeGitHub(token=GH_CANARY)
    slack = FakeSlack(token=SLACK_CANARY, webhook_path=HOOK_PATH)
    with world(tmp_path, github=github, slack=slack, webhook=webhook) as w:
        w.script = {"schema_drift": {CUSTOMERS: [("a", Severity.CRITICAL, "removed")]}}
        # Failure paths too: a 502 on create, a 500 from Slack, then the happy path.
        w.github.fail("POST", r"/repos/acme/ml-alerts/issues", 502, {"message": "bad"})
        w.slack.fail(
            "POST", r"/api/chat.postMessage|" + HOOK_PATH, 500, "oops", content_type="text/plain"
        )
        w.scan()
        w.clock.advance(timedelta(hours=1))
        w.script["schema_drift"][CUSTOMERS].append(("b", Severity.HIGH, "removed"))
        w.scan()
        w.clock.advance(timedelta(hours=1))
        w.script = {}
        w.scan()
        # A bad token: errors must name the failure, not the secret.
        w.env["GITHUB_TOKEN"] = GH_CANARY[:-4] + "zzzz"
        w.script = {"stale_source": {CUSTOMERS: [(None, Severity.HIGH, None)]}}
        w.scan()
        captured = capsys.readouterr()
        text = everything_written(w, tmp_path, caplog, captured.out + captured.err)
    assert len(w.github.issues) >= 1
    for canary in (GH_CANARY, GH_CANARY[:-4], SLACK_CANARY, HOOK_SECRET, "CANARY"):
        assert canary not in text, canary


def test_redaction_catches_token_shapes_nobody_registered() -> None:
    line = (
        "Authorization: Bearer abcdefgh12345678 token ghp_" + "a" * 36 + " slack xoxp-1-2-3 "
        "url https://hooks.slack.com/services/T1/B2/XYZ and postgres://u:hunter2secret@h/db"
    )
    cleaned = redact.redact(line)
    for secret in ("abcdefgh12345678", "ghp_", "xoxp-1", "XYZ", "hunter2secret"):
        assert secret not in cleaned, secret


def test_redaction_catches_a_secret_in_a_query_string() -> None:
    line = "Retrying (...) after connection broken by '...': /?token=CANARYQ1/api/graphql"
    line += " https://h/x?q=1&api_key=CANARYQ2#f ?access_token=CANARYQ3&page=2"
    cleaned = redact.redact(line)
    for secret in ("CANARYQ1", "CANARYQ2", "CANARYQ3"):
        assert secret not in cleaned, secret
    assert "q=1&api_key=" in cleaned
    assert "&page=2" in cleaned


def test_config_errors_never_echo_a_secret(tmp_path: Path) -> None:
    bad = {
        "SLACK_WEBHOOK_URL": f"https://hooks.slack.com.evil.com{HOOK_PATH}",
    }
    with pytest.raises(ConfigError) as caught:
        NotifySettings.from_env(bad)
    assert HOOK_SECRET not in str(caught.value)
    with pytest.raises(ValidationError) as invalid:
        GitHubSettings(repo="a/b", token=SecretStr(GH_CANARY), timeout_s=GH_CANARY)
    assert GH_CANARY not in str(invalid.value)
    secret_file = tmp_path / "token"
    secret_file.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="GITHUB_TOKEN_FILE: the secret file is empty"):
        NotifySettings.from_env(
            {"MLCOPILOT_GITHUB_REPO": "a/b", "GITHUB_TOKEN_FILE": str(secret_file)}
        )
    secret_file.write_text(GH_CANARY + "\n", encoding="utf-8")
    settings = NotifySettings.from_env(
        {"MLCOPILOT_GITHUB_REPO": "a/b", "GITHUB_TOKEN_FILE": str(secret_file)}
    )
    assert settings.github is not None
    assert settings.github.token.get_secret_value() == GH_CANARY
    assert GH_CANARY not in repr(settings)


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.slack.com/services/T/B/X",
        "https://hooks.slack.com.evil.com/services/T/B/X",
        "https://user@hooks.slack.com/services/T/B/X",
        "https://user:pw@hooks.slack.com/services/T/B/X",
        "https://169.254.169.254/services/T/B/X",
        "https://127.0.0.1/services/T/B/X",
        "https://[::1]/services/T/B/X",
        "https://10.0.0.5/services/T/B/X",
        "https://hooks.slack.com:8443/services/T/B/X",
        "https://hooks.slack.com/api/chat.postMessage",
        "file:///etc/passwd",
        "https://evil.example/services/T/B/X",
    ],
)
def test_webhook_urls_outside_the_allowlist_are_refused(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_url(url, what="SLACK_WEBHOOK_URL", allowed=[SLACK_WEBHOOK])
    assert "/T/B/X" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "hosts"),
    [
        ("https://api.github.com.evil.com/", ""),
        ("http://api.github.com/", ""),
        ("https://ghe.acme.internal/api/v3", ""),
        ("https://ghe.acme.internal/other", "ghe.acme.internal"),
        ("https://10.1.2.3/api/v3", "10.1.2.3"),
        ("http://127.0.0.1:9999/", ""),
    ],
)
def test_github_api_urls_outside_the_allowlist_are_refused(url: str, hosts: str) -> None:
    env = {
        "MLCOPILOT_GITHUB_REPO": "a/b",
        "GITHUB_TOKEN": GH_CANARY,
        "MLCOPILOT_GITHUB_API_URL": url,
        "MLCOPILOT_GITHUB_ALLOWED_HOSTS": hosts,
    }
    with pytest.raises(ConfigError):
        NotifySettings.from_env(env)


def test_allowlisted_urls_pass() -> None:
    assert check_url("https://api.github.com", what="x", allowed=[GITHUB_API])
    env = {
        "MLCOPILOT_GITHUB_REPO": "a/b",
        "GITHUB_TOKEN": GH_CANARY,
        "MLCOPILOT_GITHUB_API_URL": "https://ghe.acme.example/api/v3",
        "MLCOPILOT_GITHUB_ALLOWED_HOSTS": "ghe.acme.example",
    }
    settings = NotifySettings.from_env(env)
    assert settings.github is not None
    assert settings.github.api_url.endswith("/api/v3")
    assert NotifySettings.from_env({"GITHUB_TOKEN": GH_CANARY}).github is None  # CI's token alone


PD_CANARY = "PDCANARY" + "p" * 24  # PagerDuty's routing keys are 32 characters
TEAMS_CANARY = "TEAMSCANARY" + "t" * 32
WEBHOOK_CANARY = "whsec-WEBHOOKCANARY-" + "w" * 24


def test_the_new_sinks_secrets_never_appear_anywhere(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """PagerDuty's routing key, the Teams URL's signature and the webhook's secret: in no log
    line, database, message or event — only where each must go (the key to PagerDuty)."""
    from testing.fakes.pagerduty import FakePagerDuty
    from testing.fakes.teams import FakeTeams
    from testing.fakes.webhook import FakeReceiver

    redact.install()
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "mlcopilot"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    pagerduty = FakePagerDuty(routing_key=PD_CANARY)
    teams = FakeTeams(sig=TEAMS_CANARY)
    receiver = FakeReceiver(secret=WEBHOOK_CANARY)
    with pagerduty.running(), teams.running(), receiver.running():
        env: dict[str, Any] = {
            "MLCOPILOT_PAGERDUTY_ROUTING_KEY": PD_CANARY,
            "MLCOPILOT_PAGERDUTY_URL": pagerduty.url,
            "MLCOPILOT_TEAMS_WEBHOOK_URL": teams.webhook_url,
            "MLCOPILOT_WEBHOOK_URL": receiver.endpoint,
            "MLCOPILOT_WEBHOOK_SECRET": WEBHOOK_CANARY,
            "MLCOPILOT_GROUP_WAIT": "0",
        }
        with world(tmp_path, **env) as w:
            w.script = {"schema_drift": {CUSTOMERS: [("a", Severity.CRITICAL, "removed")]}}
            # Failure paths first: each sink refuses or fails once, then delivers.
            pagerduty.fail("POST", r"/v2/enqueue", 502, {"status": "error"})
            teams.fail("POST", r"/workflows/.*", 500, {"error": "down"})
            receiver.fail("POST", receiver.path, 503, {"error": "busy"})
            w.scan()
            w.clock.advance(timedelta(hours=1))
            w.script["schema_drift"][CUSTOMERS].append(("b", Severity.HIGH, "removed"))
            w.scan()
            w.clock.advance(timedelta(hours=1))
            w.script = {}
            w.scan()
            captured = capsys.readouterr()
            text = everything_written(w, tmp_path, caplog, captured.out + captured.err)
            text += "\n".join(repr(card) for card in teams.cards)
            text += "\n".join(d.body.decode() + repr(d.headers) for d in receiver.deliveries)
    assert len(pagerduty.alerts) == 2  # one per incident, both at least high
    assert teams.cards
    assert receiver.events
    for canary in (PD_CANARY, TEAMS_CANARY, WEBHOOK_CANARY, "CANARY"):
        assert canary not in text, canary
