"""The lifecycle policy as a pure function: timing, folding, acknowledgement, cancellation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from mlcopilot.incidents.grouping import member_state
from mlcopilot.incidents.payload import GroupState, Member, NotifyPolicy, decode_notification
from mlcopilot.incidents.policy import Decision, PendingRow, StoredGroup, decide, quiet
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


# --- quiet: what a scan may leave unread ------------------------------------------------------

_SEVERITIES = list(Severity)


@st.composite
def _situations(draw: st.DrawFn) -> tuple[StoredGroup, list[Member], PendingRow | None, str | None]:
    """A stored group, its members after a scan, maybe a pending row and an acknowledger."""
    ids = draw(st.lists(st.sampled_from("abcd"), min_size=0, max_size=4, unique=True))
    members = [
        member(i, open=draw(st.booleans()), severity=draw(st.sampled_from(_SEVERITIES)))
        for i in ids
    ]
    group = opened()
    if draw(st.booleans()):  # as last notified: the common case, where quiet may hold
        notified = {
            m.incident_id: member_state(m.severity.value, m.change, m.previous_field)
            for m in members
            if m.open
        }
    else:
        notified_ids = draw(st.lists(st.sampled_from("abcd"), max_size=4, unique=True))
        notified = {
            i: member_state(draw(st.sampled_from(_SEVERITIES)).value, "removed", None)
            for i in notified_ids
        }
    group = replace(
        group,
        state=draw(st.sampled_from(list(GroupState))),
        notified=notified,
        notified_at=T0 - timedelta(hours=draw(st.integers(0, 72))),
    )
    pending = PendingRow(1, "github", "update", 1, {"v": 1}) if draw(st.booleans()) else None
    return group, members, pending, draw(st.sampled_from([None, "alice"]))


@settings(max_examples=400, deadline=None)
@given(_situations(), st.sampled_from([None, timedelta(hours=4), timedelta(days=1)]))
def test_a_quiet_group_is_one_decide_leaves_alone(
    situation: tuple[StoredGroup, list[Member], PendingRow | None, str | None],
    repeat: timedelta | None,
) -> None:
    group, members, pending, acked = situation
    policy = replace(POLICY, repeat_interval=repeat)
    current = {
        m.incident_id: member_state(m.severity.value, m.change, m.previous_field)
        for m in members
        if m.open
    }
    if quiet(group, current, acked, policy=policy, now=T0):
        assert run(group, members, [pending] if pending else [], acked=acked, policy=policy) is None


def test_quiet_groups_are_the_common_unchanged_ones() -> None:
    group = opened()
    current = dict(group.notified)
    assert quiet(group, current, None, policy=POLICY, now=T0)
    assert not quiet(group, {**current, "b": "high||"}, None, policy=POLICY, now=T0)  # added
    assert not quiet(group, current, "alice", policy=POLICY, now=T0)  # to acknowledge
    acknowledged = replace(group, state=GroupState.ACKNOWLEDGED)
    assert quiet(acknowledged, current, "alice", policy=POLICY, now=T0)
    assert not quiet(group, {}, None, policy=POLICY, now=T0)  # to resolve
    assert not quiet(None, current, None, policy=POLICY, now=T0)  # to open
    reminding = replace(POLICY, repeat_interval=timedelta(hours=1))
    assert not quiet(group, current, None, policy=reminding, now=T0 + timedelta(hours=2))
