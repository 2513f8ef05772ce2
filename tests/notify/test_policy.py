"""The lifecycle policy as a pure function: timing, folding, acknowledgement, cancellation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from mlcopilot.incidents.payload import GroupState, Member, NotifyPolicy, decode_notification
from mlcopilot.incidents.policy import Decision, PendingRow, StoredGroup, decide
from mlcopilot.model import Severity, SinkName

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
POLICY = NotifyPolicy()
SINKS: tuple[SinkName, ...] = ("github", "slack")


def member(
    incident_id: str = "a", *, open: bool = True, severity: Severity = Severity.HIGH
) -> Member:
    return Member(
        incident_id=incident_id,
        generation=1,
        check="schema_drift",
        severity=severity,
        model="urn:li:mlModel:(urn:li:dataPlatform:mlflow,m,PROD)",
        entity="urn:li:dataset:(urn:li:dataPlatform:hive,d,PROD)",
        field=incident_id,
        change="removed",
        previous_field=None,
        message="m",
        path=(),
        open=open,
    )


def run(
    stored: StoredGroup | None,
    members: Sequence[Member],
    pending: Sequence[PendingRow] = (),
    *,
    now: datetime = T0,
    acked: str | None = None,
    policy: NotifyPolicy = POLICY,
) -> Decision | None:
    return decide(
        stored,
        members,
        list(pending),
        key="k",
        check="schema_drift",
        entity="urn:li:dataset:(urn:li:dataPlatform:hive,d,PROD)",
        next_generation=(stored.generation + 1) if stored else 1,
        acknowledged_by=acked,
        sinks=SINKS,
        policy=policy,
        now=now,
    )


def opened() -> StoredGroup:
    decision = run(None, [member()])
    assert decision is not None
    return decision.group


def test_a_new_group_opens_on_every_sink_after_group_wait() -> None:
    decision = run(None, [member(), member("b")])
    assert decision is not None
    assert decision.is_new
    assert [(r.sink, r.action, r.not_before) for r in decision.inserts] == [
        ("github", "open", T0 + timedelta(seconds=30)),
        ("slack", "open", T0 + timedelta(seconds=30)),
    ]
    notification = decode_notification(decision.inserts[0].payload)
    assert notification.added == ("a", "b")


def test_nothing_to_say_says_nothing() -> None:
    group = opened()
    assert run(group, [member()], now=T0 + timedelta(hours=1)) is None
    assert run(None, [member(open=False)]) is None


def test_updates_wait_for_the_group_interval() -> None:
    group = replace(opened(), notified_at=T0)
    decision = run(group, [member(), member("b")], now=T0 + timedelta(minutes=1))
    assert decision is not None
    assert {r.not_before for r in decision.inserts} == {T0 + timedelta(minutes=5)}
    assert decode_notification(decision.inserts[0].payload).added == ("b",)


def test_a_severity_change_is_an_update() -> None:
    group = opened()
    decision = run(group, [member(severity=Severity.CRITICAL)], now=T0 + timedelta(hours=1))
    assert decision is not None
    assert decode_notification(decision.inserts[0].payload).changed == ("a",)


def test_reminders_every_repeat_interval_and_never_when_off() -> None:
    group = opened()
    later = group.notified_at + timedelta(hours=4)
    decision = run(group, [member()], now=later)
    assert decision is not None
    assert {r.action for r in decision.inserts} == {"reminder"}
    assert run(decision.group, [member()], now=later + timedelta(hours=3)) is None
    assert run(group, [member()], now=later, policy=NotifyPolicy(repeat_interval=None)) is None


def test_acknowledged_groups_hear_only_their_resolution() -> None:
    decision = run(opened(), [member()], acked="alice", now=T0 + timedelta(hours=5))
    assert decision is not None
    assert decision.inserts == ()
    acked = decision.group
    assert acked.state is GroupState.ACKNOWLEDGED
    assert run(acked, [member(), member("b")], acked="alice", now=T0 + timedelta(hours=9)) is None
    resolved = run(acked, [member(open=False)], now=T0 + timedelta(hours=10))
    assert resolved is not None
    assert {r.action for r in resolved.inserts} == {"resolve"}


def test_a_group_resolved_before_its_open_was_sent_stays_silent() -> None:
    group = opened()
    pending = [PendingRow(1, "github", "open", 0, {}), PendingRow(2, "slack", "open", 0, {})]
    decision = run(group, [member(open=False)], pending, now=T0 + timedelta(seconds=10))
    assert decision is not None
    assert decision.inserts == ()
    assert decision.cancels == (1, 2)
    assert decision.group.state is GroupState.RESOLVED


def test_a_recurrence_after_resolution_is_a_new_generation() -> None:
    resolved = replace(opened(), state=GroupState.RESOLVED, resolved_at=T0)
    decision = run(resolved, [member()], now=T0 + timedelta(days=1))
    assert decision is not None
    assert decision.is_new
    assert decision.group.generation == 2
