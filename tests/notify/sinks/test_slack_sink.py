"""Slack faults and behaviour: 429 with and without Retry-After, 5xx, timeouts, bad tokens,
per-channel spacing, threads and the edited root, webhook mode and its limits (T11)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from mlcopilot.model import Severity
from mlcopilot.notify.codec import OutboxStatus
from mlcopilot.notify.sinks.slack import SlackSink
from testing.fakes.http import FakeServer
from testing.fakes.slack import WEBHOOK_PATH
from testing.notify_world import CUSTOMERS, Script, World, world

POST = "/api/chat.postMessage"
PII: Script = {"pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]}}


def slack_only(w: World, **settings: object) -> SlackSink:
    slack = w.settings().slack
    assert slack is not None
    return SlackSink(slack.model_copy(update=settings), clock=w.clock)


def test_root_message_with_metadata_then_thread_and_edited_root(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = {"schema_drift": {CUSTOMERS: [("a", Severity.CRITICAL, "removed")]}}
        w.scan()
        (root,) = w.slack.roots()
        payload = w.slack.post_calls()[0].json()
        assert payload["unfurl_links"] is False
        assert payload["unfurl_media"] is False
        assert "link_names" not in payload
        assert root["metadata"]["event_type"] == "mlcopilot_notification"
        assert root["metadata"]["event_payload"]["dedupe_key"].startswith("slack:")
        assert root["blocks"][0]["type"] == "header"
        w.clock.advance(timedelta(hours=1))
        w.script["schema_drift"][CUSTOMERS].append(("b", Severity.CRITICAL, "removed"))
        w.scan()
        w.clock.advance(timedelta(hours=1))
        w.script = {}
        w.scan()
        assert len(w.slack.roots()) == 1
        assert [m["metadata"]["event_payload"]["action"] for m in w.slack.replies(root["ts"])] == [
            "update",
            "resolve",
        ]
        assert root.get("edited")
        assert root["blocks"][0]["text"]["text"].startswith("Resolved")


def test_429_with_retry_after_is_waited_out_by_the_retry_handler(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.slack.fail("POST", POST, 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "4"})
        result = w.scan()
        assert result.relay is not None
        assert result.relay.ok
        assert len(w.slack.post_calls()) == 2
        assert len(w.slack.roots()) == 1
        assert any(4 <= s < 5 for s in w.clock.sleeps), w.clock.sleeps


def test_429_without_retry_after_waits_a_second(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.slack.fail("POST", POST, 429, {"ok": False, "error": "ratelimited"})
        w.scan()
        assert len(w.slack.roots()) == 1
        assert any(1 <= s < 2 for s in w.clock.sleeps), w.clock.sleeps


def test_persistent_429_hands_the_wait_to_the_relay(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.slack.fail(
            "POST", POST, 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "30"}, times=3
        )
        result = w.scan()
        assert result.relay is not None
        assert result.relay.ok
        assert len(w.slack.post_calls()) == 4
        assert len(w.slack.roots()) == 1


def test_a_5xx_is_retried_on_a_later_run(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.slack.fail("POST", POST, 503, "upstream unavailable", content_type="text/html")
        first = w.scan()
        assert first.relay is not None
        assert first.relay.retrying
        assert w.slack.roots() == []
        w.clock.advance(timedelta(minutes=10))
        w.scan()
        assert len(w.slack.roots()) == 1


def test_a_timeout_after_slack_posted_is_reconciled(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.slack.fail("POST", POST, delay=1.6, after=True)
        sink = slack_only(w, timeout_s=1.0)
        first = w.scan(sinks=[sink])
        assert first.relay is not None
        assert first.relay.retrying
        w.clock.advance(timedelta(minutes=10))
        w.scan(sinks=[sink])
        assert len(w.slack.roots()) == 1  # posted once, found again by its metadata


def test_an_invalid_token_kills_the_row(tmp_path: Path) -> None:
    with world(tmp_path, SLACK_BOT_TOKEN="xoxb-0000-1111-wrongwrongwrong") as w:
        w.script = PII
        result = w.scan()
        assert result.relay is not None
        ((_item, error),) = [d for d in result.relay.dead if d[0].sink == "slack"]
        assert "invalid_auth" in error
        assert "xoxb" not in error


def test_posts_to_one_channel_are_spaced(tmp_path: Path) -> None:
    with world(tmp_path, fields=("a", "b", "c", "d", "e")) as w:
        checks = ("pii_exposure", "schema_drift", "stale_source")
        w.script = {c: {CUSTOMERS: [("a", Severity.HIGH, "removed")]} for c in checks}
        w.scan()
        assert len(w.slack.roots()) == 3
        gaps = [s for s in w.clock.sleeps if 1.0 <= s <= 1.1]
        assert len(gaps) >= 2, w.clock.sleeps


def test_webhook_mode_posts_without_threads(tmp_path: Path) -> None:
    with world(tmp_path, webhook=True) as w:
        w.script = {"schema_drift": {CUSTOMERS: [("a", Severity.CRITICAL, "removed")]}}
        w.scan()
        w.clock.advance(timedelta(hours=1))
        w.script = {}
        w.scan()
        assert len(w.slack.webhook_posts) == 2  # the open and the resolution, no thread
        assert all("thread_ts" not in p for p in w.slack.webhook_posts)
        assert w.slack.post_calls() == []


def test_webhook_redirects_are_not_followed(tmp_path: Path) -> None:
    target = FakeServer()
    with world(tmp_path, webhook=True) as w, target.running():
        w.slack.fail("POST", WEBHOOK_PATH, 302, "", {"Location": f"{target.url}/x"}, times=9)
        w.script = PII
        result = w.scan()
        assert target.requests == []
        assert result.relay is not None
        assert result.relay.dead
        with w.store() as store:
            (row,) = [i for i in store.outbox() if i.sink == "slack"]
        assert row.status is OutboxStatus.DEAD
        assert "HTTP 302" in (row.last_error or "")
        assert WEBHOOK_PATH not in (row.last_error or "")
