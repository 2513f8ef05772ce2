"""Slack faults and behaviour: 429 with and without Retry-After, 5xx, timeouts, bad tokens,
per-channel spacing, threads and the edited root, webhook mode and its limits (T11); a channel
given by name, busy channels and threads, a Retry-After longer than the lease (two relays on
PostgreSQL), slow drips, redirects (issue 11)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from mlcopilot.incidents.payload import DeliveryError, OutboxItem, OutboxStatus
from mlcopilot.model import Severity
from mlcopilot.notify.relay import Relay, RetryPolicy
from mlcopilot.notify.sinks.config import SlackSettings
from mlcopilot.notify.sinks.slack import SlackSink, SlackWebhookSink
from testing.failpoints import Killed, kill_at
from testing.fakes.http import FakeServer
from testing.fakes.slack import CHANNEL_ID, WEBHOOK_PATH, FakeSlack
from testing.notify_world import CUSTOMERS, FakeClock, Script, World, world
from testing.postgres import fresh_schema

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
        # Slack posts once its 1.6 s are up, which may be after the scan has given up and
        # returned: the next attempt is after it has (as ten minutes later it would be).
        deadline = time.monotonic() + 10
        while not w.slack.roots() and time.monotonic() < deadline:
            time.sleep(0.05)
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


# --- a channel given by name ------------------------------------------------------------------


def slack_row(w: World) -> OutboxItem:
    with w.store() as store:
        (row,) = [i for i in store.outbox() if i.sink == "slack"]
    return row


def test_a_channel_name_is_looked_up_once_and_every_call_uses_the_id(tmp_path: Path) -> None:
    slack = FakeSlack(channels=())
    for name in ("general", "random", "ml-alerts-old", "data-eng"):
        slack.add_channel(name)
    slack.add_channel("ml-alerts", CHANNEL_ID)
    slack.page_cap = 2  # Slack may answer with fewer than asked: five channels, three pages
    with world(tmp_path, slack=slack) as w:  # MLCOPILOT_SLACK_CHANNEL='#ml-alerts'
        sink = slack_only(w)
        w.script = {"schema_drift": {CUSTOMERS: [("a", Severity.CRITICAL, "removed")]}}
        w.scan(sinks=[sink])
        w.clock.advance(timedelta(hours=1))
        w.script["schema_drift"][CUSTOMERS].append(("b", Severity.CRITICAL, "removed"))
        w.scan(sinks=[sink])
        w.clock.advance(timedelta(hours=1))
        w.script = {}
        w.scan(sinks=[sink])
        lists = slack.calls("POST", "/api/conversations.list")
        assert len(lists) == 3  # paged until found, and only for the first delivery
        assert lists[0].json()["types"] == "public_channel,private_channel"
        assert lists[0].json()["exclude_archived"] in ("1", "true", True)
        writes = slack.calls("POST", "/api/chat.(postMessage|update)")
        assert len(writes) == 4  # root, update, resolution, edited root
        assert {r.json()["channel"] for r in writes} == {CHANNEL_ID}
        assert len(slack.roots()) == 1


def test_a_private_channel_name_resolves_to_its_id(tmp_path: Path) -> None:
    slack = FakeSlack()
    private = slack.add_channel("ml-private", private=True)
    with world(tmp_path, slack=slack, MLCOPILOT_SLACK_CHANNEL="ml-private") as w:
        w.script = PII
        w.scan()
        (root,) = slack.roots()
        assert root["channel"] == private
        assert private.startswith("G")


def test_a_channel_id_is_used_as_it_is(tmp_path: Path) -> None:
    with world(tmp_path, MLCOPILOT_SLACK_CHANNEL=CHANNEL_ID) as w:
        w.script = PII
        w.scan()
        assert len(w.slack.roots()) == 1
        assert w.slack.calls("POST", "/api/conversations.list") == []


def test_a_name_no_channel_has_is_a_permanent_error_naming_it(tmp_path: Path) -> None:
    with world(tmp_path, MLCOPILOT_SLACK_CHANNEL="#ml-alrets") as w:
        w.script = PII
        result = w.scan()
        assert result.relay is not None
        ((_item, error),) = [d for d in result.relay.dead if d[0].sink == "slack"]
        assert "#ml-alrets" in error
        assert "groups:read" in error
        assert w.slack.post_calls() == []


def test_without_channels_read_a_name_is_a_permanent_error_naming_the_scope(
    tmp_path: Path,
) -> None:
    with world(tmp_path) as w:
        w.slack.scopes -= {"channels:read", "groups:read"}
        w.script = PII
        result = w.scan()
        assert result.relay is not None
        ((_item, error),) = [d for d in result.relay.dead if d[0].sink == "slack"]
        assert "#ml-alerts" in error
        assert "channels:read" in error
        assert "by its id" in error
        assert w.slack.post_calls() == []
        assert w.slack.calls("POST", "/api/conversations.history") == []


# --- a busy channel ----------------------------------------------------------------------------


def test_a_busy_channel_is_read_back_to_the_row_not_one_page(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.slack.chatter(1000, at=(w.clock.now() - timedelta(days=1)).timestamp())
        w.script = PII
        with pytest.raises(Killed):
            w.scan(failpoint=kill_at("after_send:slack"))
        w.clock.advance(timedelta(minutes=5))
        w.slack.chatter(450)  # the channel moved on while the scanner was dead
        again = w.scan()
        assert len(w.slack.roots()) == 1
        reads = w.slack.calls("POST", "/api/conversations.history")
        # 450 newer messages and the root: three pages of 200, none of the day-old chatter.
        assert len(reads) == 3
        assert again.relay is not None
        assert again.relay.warnings == ["Slack: reused the root message an earlier attempt posted"]


def test_a_busy_thread_is_read_back_to_the_row_too(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = {"schema_drift": {CUSTOMERS: [("a", Severity.CRITICAL, "removed")]}}
        w.scan()
        (root,) = w.slack.roots()
        w.slack.chatter(300, thread_ts=root["ts"])  # a long discussion before the update
        w.clock.advance(timedelta(hours=1))
        w.script["schema_drift"][CUSTOMERS].append(("b", Severity.CRITICAL, "removed"))
        with pytest.raises(Killed):
            w.scan(failpoint=kill_at("after_send:slack"))
        w.clock.advance(timedelta(minutes=5))
        w.slack.chatter(450, thread_ts=root["ts"])
        again = w.scan()
        ours = [m for m in w.slack.replies(root["ts"]) if "metadata" in m]
        assert [m["metadata"]["event_payload"]["action"] for m in ours] == ["update"]
        # Replies come oldest first: read from the row's time, the update is on the first
        # page; read from the thread's start, 200 of the 300 before it would have been.
        (read,) = w.slack.calls("POST", "/api/conversations.replies")
        assert float(read.json()["oldest"]) > float(root["ts"])
        assert again.relay is not None
        assert again.relay.warnings == []


def test_a_read_that_hits_its_page_bound_warns_of_a_possible_duplicate(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        with pytest.raises(Killed):
            w.scan(failpoint=kill_at("after_send:slack"))
        w.clock.advance(timedelta(minutes=5))
        w.slack.chatter(450)
        slack = w.settings().slack
        assert slack is not None
        sink = SlackSink(slack, clock=w.clock, max_history_pages=2)
        again = w.scan(sinks=[sink])
        assert len(w.slack.calls("POST", "/api/conversations.history")) == 2
        assert again.relay is not None
        (warning,) = again.relay.warnings
        assert "may be a duplicate" in warning
        assert "2 pages" in warning
        assert len(w.slack.roots()) == 2  # the documented duplicate, reported


# --- a wait longer than the lease ---------------------------------------------------------------


def test_a_retry_after_beyond_the_bound_goes_back_to_the_relay_unslept(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.scan(deliver=False)
        w.slack.fail(
            "POST", POST, 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "70"}
        )
        sink = slack_only(w)
        with pytest.raises(DeliveryError) as caught:
            sink.deliver(slack_row(w), None)
        assert caught.value.retry_after == timedelta(seconds=70)
        assert not caught.value.permanent
        assert all(s < 30 for s in w.clock.sleeps), w.clock.sleeps
        assert len(w.slack.post_calls()) == 1
        assert w.slack.roots() == []


def test_the_inline_rate_limit_wait_is_well_inside_the_relays_lease() -> None:
    bound = SlackSettings().max_rate_limit_wait_s
    assert bound * 4 <= RetryPolicy().lease.total_seconds()


class Interleaved:
    """A clock shared with another relay, which runs whenever this one sleeps ≥ 5 s.

    One thread, so the race is the same every time: relay B works while relay A waits.
    """

    def __init__(self, base: FakeClock, other: Callable[[], object]) -> None:
        self._base = base
        self._other = other

    def now(self) -> datetime:
        return self._base.now()

    def sleep(self, seconds: float) -> None:
        self._base.sleep(seconds)
        if seconds >= 5:
            self._other()


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_schema() as url:
        yield url


@pytest.mark.postgres
def test_retry_after_70_with_two_relays_on_postgresql_posts_one_root(
    tmp_path: Path, pg_url: str
) -> None:
    with world(tmp_path, state_url=pg_url) as w:
        w.script = PII
        w.scan(deliver=False)
        w.clock.advance(timedelta(minutes=1))
        ratelimited = {"ok": False, "error": "ratelimited"}
        w.slack.fail("POST", POST, 429, ratelimited, {"Retry-After": "70"}, times=2)
        settings = w.settings().slack
        assert settings is not None
        with w.store() as store_a, w.store() as store_b:
            relay_b = Relay(
                store_b, [SlackSink(settings, clock=w.clock)], clock=w.clock, owner="scanner-b"
            )
            clock_a = Interleaved(w.clock, relay_b.run)
            relay_a = Relay(
                store_a, [SlackSink(settings, clock=clock_a)], clock=clock_a, owner="scanner-a"
            )
            relay_a.run()
            w.clock.advance(timedelta(minutes=10))
            relay_a.run()  # whatever is still due by now
            relay_b.run()
        assert len(w.slack.roots()) == 1
        assert slack_row(w).status is OutboxStatus.DONE


# --- slow drips -------------------------------------------------------------------------------


def test_a_slow_drip_is_cut_at_the_calls_deadline_then_reconciled(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.slack.slow_drip("POST", POST, 0.2)  # headers at once, then a byte every 0.2 s
        sink = slack_only(w, timeout_s=0.5)  # each read would wait 1 s: never reached
        first = w.scan(sinks=[sink])
        assert first.relay is not None
        ((_item, error),) = first.relay.retrying
        assert "no complete answer within 0.5 s" in error
        assert slack_row(w).uncertain  # Slack may have posted: it did
        w.clock.advance(timedelta(minutes=10))
        w.scan(sinks=[sink])
        assert len(w.slack.roots()) == 1


def test_a_slow_drip_from_the_webhook_is_cut_at_the_calls_deadline(tmp_path: Path) -> None:
    with world(tmp_path, webhook=True) as w:
        w.script = PII
        w.slack.slow_drip("POST", WEBHOOK_PATH, 0.4)  # "ok": two bytes, 0.8 s
        settings = w.settings().slack
        assert settings is not None
        sink = SlackWebhookSink(settings.model_copy(update={"timeout_s": 0.5}), clock=w.clock)
        result = w.scan(sinks=[sink])
        assert result.relay is not None
        ((_item, error),) = result.relay.retrying
        assert "no complete answer within 0.5 s" in error
        assert WEBHOOK_PATH not in error
        assert slack_row(w).uncertain


@pytest.mark.parametrize("webhook", [False, True], ids=["bot", "webhook"])
def test_a_byte_a_second_is_cut_at_the_calls_deadline_not_at_each_read(
    tmp_path: Path, webhook: bool
) -> None:
    with world(tmp_path, webhook=webhook) as w:
        w.script = PII
        w.scan(deliver=False)
        # The headers at once, then the body a byte a second: every read gets its byte within
        # the 1.5 s read timeout, so only the call's deadline can end the call (else: minutes).
        w.slack.slow_drip("POST", WEBHOOK_PATH if webhook else POST, 1.0)
        settings = w.settings().slack
        assert settings is not None
        settings = settings.model_copy(update={"timeout_s": 1.5})
        sink: SlackSink | SlackWebhookSink = (
            SlackWebhookSink(settings, clock=w.clock)
            if webhook
            else SlackSink(settings, clock=w.clock)
        )
        started = time.monotonic()
        with pytest.raises(DeliveryError) as caught:
            sink.deliver(slack_row(w), None)
        elapsed = time.monotonic() - started
        assert "no complete answer within 1.5 s (timed out)" in str(caught.value)
        assert caught.value.sent  # Slack may have posted: the next attempt looks first
        assert 1.5 <= elapsed < 4.0, elapsed


def test_bot_api_redirects_are_not_followed(tmp_path: Path) -> None:
    target = FakeServer()
    with world(tmp_path) as w, target.running():
        w.slack.fail("POST", POST, 302, "", {"Location": f"{target.url}/api/x"}, times=9)
        w.script = PII
        result = w.scan()
        assert target.requests == []
        assert result.relay is not None
        ((_item, error),) = [d for d in result.relay.dead if d[0].sink == "slack"]
        assert "HTTP 302" in error
