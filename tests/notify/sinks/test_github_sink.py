"""GitHub faults, handled as reliability.md §2.1–2.2 and T9/T10 say: no blind retry of a create,
rate limits honoured from their headers, reconciliation by label and marker."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mlcopilot.incidents.grouping import group_key
from mlcopilot.incidents.payload import DeliveryError, OutboxStatus
from mlcopilot.model import OutboxItem, Severity
from mlcopilot.notify.sinks.github import GitHubSink
from testing.fakes.github import FakeGitHub
from testing.fakes.http import FakeServer
from testing.notify_world import CUSTOMERS, Script, World, world

ISSUES = r"/repos/acme/ml-alerts/issues"
PII: Script = {"pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]}}


def github_only(w: World, **settings: object) -> GitHubSink:
    gh = w.settings().github
    assert gh is not None
    return GitHubSink(gh.model_copy(update=settings), clock=w.clock)


def rows(w: World, sink: str = "github") -> list[OutboxItem]:
    with w.store() as store:
        return [i for i in store.outbox() if i.sink == sink]


def test_a_502_that_hid_a_created_issue_is_reconciled_not_repeated(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.github.fail("POST", ISSUES, 502, {"message": "Server Error"}, after=True)
        first = w.scan()
        assert first.relay is not None
        assert len(first.relay.retrying) == 1
        assert len(w.github.created()) == 1  # githubkit's automatic retry is off
        assert len(w.github.issues) == 1  # ... but GitHub did create it
        w.clock.advance(timedelta(minutes=10))
        second = w.scan()
        assert second.relay is not None
        assert second.relay.ok
        assert len(w.github.created()) == 1
        assert len(w.github.issues) == 1
        assert any("reused issue #1" in x for x in second.relay.warnings)


@pytest.mark.parametrize(
    ("status", "headers", "body", "wait"),
    [
        (403, {"retry-after": "7"}, {"message": "You have exceeded a secondary rate limit."}, 7),
        (429, {"Retry-After": "3"}, {"message": "rate limited"}, 3),
        (
            403,
            {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "RESET"},
            {"message": "API rate limit exceeded"},
            85,
        ),
        (403, {}, {"message": "You have exceeded a secondary rate limit. Wait."}, 60),
        (429, {}, {"message": "Too many requests"}, 60),
    ],
)
def test_rate_limits_are_waited_out_as_github_says(
    tmp_path: Path, status: int, headers: dict[str, str], body: dict[str, str], wait: float
) -> None:
    reset = str(int(datetime.now(UTC).timestamp()) + 90)
    headers = {k: reset if v == "RESET" else v for k, v in headers.items()}
    with world(tmp_path) as w:
        w.script = PII
        w.github.fail("POST", ISSUES, status, body, headers)
        result = w.scan()
        assert result.relay is not None
        assert result.relay.ok
        assert len(w.github.created()) == 2
        assert len(w.github.issues) == 1
        assert any(wait <= s <= wait + 6 for s in w.clock.sleeps), w.clock.sleeps


def test_a_long_rate_limit_reschedules_instead_of_waiting(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.github.fail(
            "POST", ISSUES, 403, {"message": "secondary rate limit"}, {"retry-after": "600"}
        )
        result = w.scan()
        assert result.relay is not None
        assert not result.relay.ok
        assert max(w.clock.sleeps) < 600
        (row,) = [r for r in rows(w) if r.action == "open"]
        assert row.status is OutboxStatus.PENDING
        assert row.attempts == 0
        w.clock.advance(timedelta(minutes=11))
        w.scan()
        assert len(w.github.issues) == 1


def test_a_timeout_is_retried_after_looking_for_the_issue(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.github.fail("POST", ISSUES, delay=1.0, after=True, times=1)
        sink = github_only(w, timeout_s=0.3)
        first = w.scan(sinks=[sink])
        assert first.relay is not None
        assert "timed out" in first.relay.retrying[0][1]
        # The timed-out request lands (the fake creates the issue after its delay) before the
        # retry looks: wait for it in real time, bounded, rather than race the fake's thread.
        deadline = time.monotonic() + 10
        while not w.github.issues and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(w.github.issues) == 1
        w.clock.advance(timedelta(minutes=10))
        w.scan(sinks=[sink])
        assert len(w.github.issues) == 1
        (row,) = [r for r in rows(w) if r.action == "open"]
        assert row.status is OutboxStatus.DONE
        assert row.uncertain


def test_bad_credentials_kill_the_row_with_a_clean_error(tmp_path: Path) -> None:
    with world(tmp_path, GITHUB_TOKEN="ghp_" + "X" * 36) as w:
        w.script = PII
        result = w.scan()
        assert result.relay is not None
        (_dead, error) = result.relay.dead[0]
        assert "HTTP 401" in error
        assert "invalid or expired" in error
        assert "ghp_" not in error
        assert rows(w)[0].status is OutboxStatus.DEAD


def test_an_issue_forged_with_our_marker_by_someone_else_is_ignored(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        key = group_key("pii_exposure", CUSTOMERS)
        w.github.add_foreign_issue(f"<!-- mlcopilot:group={key} gen=1 open=0 v=1 --> gotcha")
        w.scan()
        assert len(w.github.created()) == 1
        assert w.github.issues[2]["user"]["login"] == "mlcopilot-bot"


def test_github_enterprise_server_base_url(tmp_path: Path) -> None:
    ghes = FakeGitHub(prefix="/api/v3")
    with world(tmp_path) as w, ghes.running():
        w.env["MLCOPILOT_GITHUB_API_URL"] = f"{ghes.url}/api/v3"
        w.script = PII
        w.scan()
        assert len(ghes.issues) == 1
        assert w.github.issues == {}
        assert ghes.requests[-1].headers["x-github-api-version"] == "2022-11-28"


def test_redirects_are_not_followed(tmp_path: Path) -> None:
    target = FakeServer()
    with world(tmp_path) as w, target.running():
        w.github.fail("POST", ISSUES, 307, {}, {"Location": f"{target.url}/steal"}, times=5)
        w.script = PII
        result = w.scan()
        assert target.requests == []
        assert result.relay is not None
        assert "redirects are not followed" in result.relay.dead[0][1]


def test_updates_are_comments_and_resolution_closes_as_completed(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = {"schema_drift": {CUSTOMERS: [("a", Severity.CRITICAL, "removed")]}}
        w.scan()
        w.clock.advance(timedelta(hours=1))
        w.script = {}
        w.scan()
        (issue,) = w.github.issues.values()
        assert issue["state"] == "closed"
        assert issue["state_reason"] == "completed"
        (comment,) = w.github.comments[1]
        assert "Resolved" in comment["body"]
        assert "open=" not in comment["body"]
        patches = w.github.calls("PATCH", ISSUES + r"/\d+")
        assert [p.json() for p in patches] == [{"state": "closed", "state_reason": "completed"}]


def test_writes_are_spaced_at_least_a_second_apart(tmp_path: Path) -> None:
    with world(tmp_path, fields=("a", "b")) as w:
        w.script = {
            "pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]},
            "schema_drift": {CUSTOMERS: [("b", Severity.CRITICAL, "removed")]},
            "stale_source": {CUSTOMERS: [(None, Severity.HIGH, None)]},
        }
        w.scan()
        assert len(w.github.issues) == 3
        spacing = [s for s in w.clock.sleeps if 0.5 < s <= 1.0]
        assert spacing, w.clock.sleeps


def test_ack_read_back_from_the_ack_label(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.scan()
        w.github.issues[1]["labels"].append({"name": "acknowledged"})
        w.clock.advance(timedelta(hours=1))
        result = w.scan()
        assert set(result.acks.acknowledged.values()) == {"github:label acknowledged"}


def test_the_issue_answers_are_real_github_shapes(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.scan()
        create = w.github.created()[0]
        assert create.headers["authorization"].startswith("token ")
        payload = create.json()
        assert payload["labels"] == ["mlcopilot", "risk:pii-exposure"]
        assert len(payload["title"]) <= 256
        # The fake answers 201 with the issue, as GitHub does, and the sink took it as sent.
        assert [r.status for r in rows(w)] == [OutboxStatus.DONE]
        assert [i["title"] for i in w.github.issues.values()] == [payload["title"]]


class Runaway(Exception):
    """The relay went on retrying past any sane bound (the bug these tests pin down)."""


def at_most(attempts: int) -> Callable[[str], None]:
    """A failpoint that stops a relay trying to send more than ``attempts`` times."""
    seen: list[str] = []

    def failpoint(name: str) -> None:
        if name.startswith("before_send:github"):
            seen.append(name)
            if len(seen) > attempts:
                raise Runaway(f"{len(seen)} attempts")

    return failpoint


def test_a_rate_limit_reset_already_past_waits_a_minute_a_few_times_then_reschedules(
    tmp_path: Path,
) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.github.reset_in_the_past(skew_s=300)
        result = w.scan(failpoint=at_most(20))
        assert result.relay is not None
        assert len(w.github.requests) == 4  # the first try and three waited-out retries
        assert [s for s in w.clock.sleeps if s >= 60] == [60.0, 60.0, 60.0]
        assert not result.relay.ok
        ((item, reason),) = result.relay.retrying
        assert "rate limited 4 times in this run" in reason
        assert "next attempt at 2026-03-02 09:04:" in reason
        (row,) = [r for r in rows(w) if r.action == "open"]
        assert row.status is OutboxStatus.PENDING  # rescheduled, not dead
        assert row.attempts == 0
        assert result.relay.next_attempts[item.id] == row.next_attempt_at
        assert row.next_attempt_at >= w.clock.now() + timedelta(seconds=59)
        w.github.stop_limiting()
        w.clock.advance(timedelta(minutes=2))
        assert w.scan().relay is not None
        assert len(w.github.issues) == 1


def test_429_with_retry_after_1_forever_is_tried_a_few_times_per_run(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.github.always_429(retry_after="1")
        started = w.clock.now()
        result = w.scan(failpoint=at_most(20))
        assert result.relay is not None
        assert len(w.github.requests) == 4
        assert not result.relay.ok
        assert w.clock.now() - started < timedelta(minutes=1)
        (row,) = [r for r in rows(w) if r.action == "open"]
        assert row.status is OutboxStatus.PENDING
        assert row.last_error is not None
        assert row.last_error.startswith("rate limited until 2026-03-02 09:00:")
        again = w.scan(failpoint=at_most(20))  # a later run tries again, as few times
        assert again.relay is not None
        assert len(w.github.requests) == 8
        assert w.github.issues == {}


@pytest.mark.parametrize("headers", [False, True], ids=["body", "headers-and-body"])
def test_a_server_that_drips_its_answer_is_cut_off_at_the_call_deadline(
    tmp_path: Path, headers: bool
) -> None:
    with world(tmp_path) as w:
        w.script = PII
        # One byte every 50 ms: each read is well within the 0.3 s timeout, the call is not.
        w.github.drip(0.05, headers=headers)
        sink = github_only(w, timeout_s=0.3)
        first = w.scan(sinks=[sink])
        assert first.relay is not None
        ((_item, error),) = first.relay.retrying
        assert "GitHub GET /user: no complete answer within 0.3 s" in error
        (row,) = [r for r in rows(w) if r.action == "open"]
        assert row.status is OutboxStatus.PENDING
        w.github.drip(None)
        w.clock.advance(timedelta(minutes=10))
        second = w.scan(sinks=[sink])
        assert second.relay is not None
        assert second.relay.ok
        assert len(w.github.issues) == 1


def test_a_byte_a_second_is_cut_at_the_calls_deadline_not_at_each_read(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = PII
        w.scan(deliver=False)
        (row,) = rows(w)
        # Status line, headers and body a byte a second: every read gets its byte within the
        # 1.5 s read timeout, so only the call's deadline can end the call (else: minutes).
        w.github.drip(1.0, headers=True)
        sink = github_only(w, timeout_s=1.5)
        started = time.monotonic()
        with pytest.raises(DeliveryError) as caught:
            sink.deliver(row, None)
        elapsed = time.monotonic() - started
        assert "GitHub GET /user: no complete answer within 1.5 s (timed out)" in str(caught.value)
        assert 1.5 <= elapsed < 4.0, elapsed
