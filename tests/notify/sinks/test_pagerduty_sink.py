"""PagerDuty through the Events API v2: what is paged for each row, dedup by incident, retries
that page nobody twice, 429s, refused events, a secret routing key, and a slow drip.

Every test sends through the real sink and HTTP stack to a local PagerDuty
(:class:`~testing.fakes.pagerduty.FakePagerDuty`) and asserts on the alerts it holds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr

from mlcopilot.checks import builtin_infos
from mlcopilot.incidents.payload import (
    Action,
    DeliveryError,
    GroupSnapshot,
    GroupState,
    Member,
    Notification,
    OutboxItem,
    OutboxStatus,
    Sink,
    encode_notification,
    with_infos,
)
from mlcopilot.model import Severity
from mlcopilot.notify.sinks.config import PagerDutySettings
from mlcopilot.notify.sinks.pagerduty import PagerDutySink
from testing.fakes.http import FakeServer
from testing.fakes.pagerduty import ENQUEUE, ROUTING_KEY, FakePagerDuty
from testing.notify_world import FakeClock

MODEL = "urn:li:mlModel:(urn:li:dataPlatform:mlflow,churn,PROD)"
CUSTOMERS = "urn:li:dataset:(urn:li:dataPlatform:hive,raw.customers,PROD)"
DATAHUB = "https://datahub.example.com"
MODEL_PAGE = (
    f"{DATAHUB}/mlModels/urn%3Ali%3AmlModel%3A%28urn%3Ali%3AdataPlatform%3Amlflow%2Cchurn%2CPROD%29"
)
CUSTOMERS_PAGE = (
    f"{DATAHUB}/dataset/urn%3Ali%3Adataset%3A%28urn%3Ali%3AdataPlatform%3Ahive%2Craw.customers"
    "%2CPROD%29"
)
GROUP = "0123456789abcdef"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
OTHER_KEY = "0" * 32


def member(
    incident_id: str,
    severity: Severity,
    field: str | None,
    *,
    open: bool = True,
    change: str | None = "removed",
) -> Member:
    return Member(
        incident_id=incident_id,
        generation=1,
        check="schema_drift",
        severity=severity,
        model=MODEL,
        entity=CUSTOMERS,
        field=field,
        change=change,
        previous_field=None,
        message=f"column {field} was {change}",
        path=(CUSTOMERS, MODEL),
        open=open,
    )


A = member("a000000000000001", Severity.CRITICAL, "email")
B = member("b000000000000002", Severity.HIGH, "phone")
C = member("c000000000000003", Severity.MEDIUM, "zip")
D = member("d000000000000004", Severity.LOW, "notes")


def row(
    action: Action,
    members: Sequence[Member],
    *,
    added: Sequence[str] = (),
    cleared: Sequence[str] = (),
    changed: Sequence[str] = (),
    seq: int = 0,
    sink: str = "pagerduty",
    report: dict[str, str] | None = None,
) -> OutboxItem:
    """The outbox row the planner stores for ``action`` (its payload as the store keeps it)."""
    state = {"resolve": GroupState.RESOLVED, "acknowledge": GroupState.ACKNOWLEDGED}
    group = GroupSnapshot(
        key=GROUP,
        generation=1,
        check="schema_drift",
        entity=CUSTOMERS,
        state=state.get(action, GroupState.OPEN),
        opened_at=T0,
        members=tuple(members),
    )
    notification = Notification(
        action, seq, group, tuple(added), tuple(cleared), tuple(changed), report or {}
    )
    payload = with_infos(encode_notification(notification), builtin_infos())
    return OutboxItem(
        id=1,
        sink=sink,
        action=action,
        group_key=GROUP,
        group_generation=1,
        seq=seq,
        dedupe_key=f"{sink}:{GROUP}:1:{action}:{seq}",
        payload=payload,
        status=OutboxStatus.SENDING,
        attempts=1,
        created_at=T0,
        not_before=T0,
        next_attempt_at=T0,
    )


def retried(item: OutboxItem) -> OutboxItem:
    """The same row claimed again after an attempt that may have reached PagerDuty."""
    return replace(item, attempts=item.attempts + 1, uncertain=True)


@pytest.fixture
def pd() -> Iterator[FakePagerDuty]:
    fake = FakePagerDuty()
    with fake.running():
        yield fake


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def sink_for(
    fake: FakeServer,
    clock: FakeClock,
    *,
    datahub_url: str | None = DATAHUB,
    routing_key: str = ROUTING_KEY,
    **settings: Any,
) -> PagerDutySink:
    config = PagerDutySettings(
        routing_key=SecretStr(routing_key),
        url=fake.url,
        **{"allow_local": True, **settings},
    )
    return PagerDutySink(config, clock=clock, datahub_url=datahub_url)


# --- what is paged, and how it reads -----------------------------------------------------------


def test_open_pages_each_open_member_at_least_high_with_its_details_and_links(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    closed = member("e000000000000005", Severity.CRITICAL, "ssn", open=False)
    sink: Sink = sink_for(pd, clock)
    delivered = sink.deliver(row("open", [D, C, B, A, closed]), None)
    assert [a.dedup_key for a in pd.alerts] == [A.incident_id, B.incident_id]  # worst first
    assert [a.severity for a in pd.alerts] == ["critical", "error"]
    alert = pd.alert(A.incident_id)
    assert alert.state == "triggered"
    assert (
        alert.summary == "Schema drift at raw.customers, field email (removed) affects model churn"
    )
    assert alert.payload["source"] == CUSTOMERS
    assert alert.payload["component"] == "churn"
    assert alert.payload["group"] == CUSTOMERS
    assert alert.payload["class"] == "schema_drift"
    assert alert.payload["timestamp"] == T0.isoformat()
    assert alert.payload["custom_details"] == {
        "model": MODEL,
        "entity": CUSTOMERS,
        "field": "email",
        "check": "schema_drift",
        "severity": "critical",
        "message": "column email was removed",
        "path": [CUSTOMERS, MODEL],
        "group_key": GROUP,
    }
    assert alert.links == [
        {"href": MODEL_PAGE, "text": "Model churn in DataHub"},
        {"href": CUSTOMERS_PAGE, "text": "raw.customers in DataHub"},
    ]
    assert alert.client == "mlcopilot"
    assert delivered.ref is not None
    assert delivered.ref.sink == "pagerduty"
    assert delivered.ref.key == A.incident_id
    assert delivered.ref.data == {"dedup_keys": [A.incident_id, B.incident_id]}
    assert delivered.warning is None


def test_every_severity_maps_to_pagerdutys_when_all_are_paged(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    sink = sink_for(pd, clock, min_severity=Severity.LOW)
    sink.deliver(row("open", [A, B, C, D]), None)
    assert {a.dedup_key: a.severity for a in pd.alerts} == {
        A.incident_id: "critical",
        B.incident_id: "error",
        C.incident_id: "warning",
        D.incident_id: "info",
    }


def test_a_group_with_nothing_severe_enough_pages_nobody(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    delivered = sink_for(pd, clock).deliver(row("open", [C, D]), None)
    assert pd.enqueued() == []
    assert delivered.ref is not None
    assert delivered.ref.key == GROUP
    assert delivered.ref.data == {"dedup_keys": []}


def test_without_a_datahub_url_only_the_report_is_linked(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    report = {MODEL: "https://reports.example.com/churn"}
    sink_for(pd, clock, datahub_url=None).deliver(row("open", [A], report=report), None)
    assert pd.alert(A.incident_id).links == [
        {"href": "https://reports.example.com/churn", "text": "mlcopilot report for churn"}
    ]


def test_hostile_catalog_text_makes_a_one_line_summary_within_pagerdutys_limit(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    hostile = member("f000000000000006", Severity.CRITICAL, "evil\u202e\nname\u200b" + "x" * 5000)
    sink_for(pd, clock).deliver(row("open", [hostile]), None)
    summary = pd.alert(hostile.incident_id).summary  # the fake refuses more than 1024
    field = ("evil name" + "x" * 5000)[:199] + "…"  # one line, invisible characters gone
    assert summary == f"Schema drift at raw.customers, field {field} (removed) affects model churn"


def test_a_routed_target_pages_the_same_and_keeps_its_name_in_the_ref(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    delivered = sink_for(pd, clock).deliver(row("open", [A], sink="pagerduty:payments"), None)
    assert [a.dedup_key for a in pd.alerts] == [A.incident_id]
    assert delivered.ref is not None
    assert delivered.ref.sink == "pagerduty:payments"


# --- the lifecycle -------------------------------------------------------------------------------


def test_update_triggers_added_and_changed_members_and_resolves_cleared_ones(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    sink = sink_for(pd, clock)
    sink.deliver(row("open", [A, B, C]), None)
    worse = replace(C, severity=Severity.CRITICAL)  # now severe enough to page
    new = member("e000000000000005", Severity.HIGH, "ssn")
    update = row(
        "update",
        [replace(A, open=False), B, worse, new],
        added=[new.incident_id],
        changed=[worse.incident_id],
        cleared=[A.incident_id],
        seq=1,
    )
    assert sink.deliver(update, None).ref is None
    assert pd.alert(A.incident_id).state == "resolved"
    assert pd.alert(B.incident_id).events == 1  # untouched: nothing sent for it
    assert pd.alert(worse.incident_id).severity == "critical"
    assert pd.alert(new.incident_id).state == "triggered"
    sent = [(e.action, e.dedup_key) for e in pd.events[2:]]
    assert sent == [
        ("trigger", worse.incident_id),
        ("trigger", new.incident_id),
        ("resolve", A.incident_id),
    ]


def test_acknowledge_acks_every_open_members_alert_even_one_lowered_since(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    sink = sink_for(pd, clock)
    sink.deliver(row("open", [A, B]), None)
    lowered = replace(B, severity=Severity.LOW)  # paged as high; its alert must stop escalating
    sink.deliver(row("acknowledge", [A, lowered], seq=1), None)
    assert [(a.dedup_key, a.state) for a in pd.alerts] == [
        (A.incident_id, "acknowledged"),
        (B.incident_id, "acknowledged"),
    ]


def test_resolve_resolves_every_members_alert(pd: FakePagerDuty, clock: FakeClock) -> None:
    sink = sink_for(pd, clock)
    sink.deliver(row("open", [A, B, D]), None)
    sink.deliver(row("acknowledge", [A, B, D], seq=1), None)
    closed = [replace(m, open=False) for m in (A, B, D)]
    sink.deliver(row("resolve", closed, seq=2), None)
    assert [(a.dedup_key, a.state) for a in pd.alerts] == [
        (A.incident_id, "resolved"),
        (B.incident_id, "resolved"),
    ]
    # D (low) was never paged: its resolve is accepted and dropped, as PagerDuty does.
    assert [e.outcome for e in pd.events if e.dedup_key == D.incident_id] == [
        "dropped",
        "dropped",
    ]


def test_a_reminder_pages_nobody_again_but_reopens_an_alert_resolved_in_pagerduty(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    sink = sink_for(pd, clock)
    sink.deliver(row("open", [A, B]), None)
    pd.resolve_by_hand(B.incident_id)  # a responder closed it; the incident is still open
    sink.deliver(row("reminder", [A, B], seq=1), None)
    assert len(pd.alerts_for(A.incident_id)) == 1  # merged into the open alert: no new page
    assert pd.alert(A.incident_id).events == 2
    assert [a.state for a in pd.alerts_for(B.incident_id)] == ["resolved", "triggered"]


def test_a_trigger_after_resolve_opens_a_new_alert(pd: FakePagerDuty, clock: FakeClock) -> None:
    sink = sink_for(pd, clock)
    sink.deliver(row("open", [A]), None)
    sink.deliver(row("resolve", [replace(A, open=False)], seq=1), None)
    sink.deliver(row("open", [A]), None)  # the incident recurred: a new group generation
    assert [a.state for a in pd.alerts_for(A.incident_id)] == ["resolved", "triggered"]


# --- exactly once by dedup_key -------------------------------------------------------------------


def test_a_row_delivered_twice_opens_each_alert_once(pd: FakePagerDuty, clock: FakeClock) -> None:
    sink = sink_for(pd, clock)
    item = row("open", [A, B])
    sink.deliver(item, None)
    again = sink.deliver(retried(item), None)
    assert [(a.dedup_key, a.events) for a in pd.alerts] == [
        (A.incident_id, 2),
        (B.incident_id, 2),
    ]
    assert again.warning is None  # nothing to warn of: PagerDuty merged them


def test_a_502_after_pagerduty_processed_the_event_is_retried_without_a_second_alert(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    sink = sink_for(pd, clock)
    item = row("open", [A])
    pd.fail("POST", ENQUEUE, 502, "<html>Bad Gateway</html>", after=True)
    with pytest.raises(DeliveryError) as caught:
        sink.deliver(item, None)
    assert not caught.value.permanent
    assert caught.value.sent  # PagerDuty may have it: it does
    assert "HTTP 502" in str(caught.value)
    assert len(pd.alerts) == 1
    sink.deliver(retried(item), None)
    assert [(a.dedup_key, a.events) for a in pd.alerts] == [(A.incident_id, 2)]


def test_a_failure_midway_through_a_row_resends_all_of_it_and_pages_each_once(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    sink = sink_for(pd, clock)
    third = member("e000000000000005", Severity.HIGH, "ssn")
    item = row("open", [A, B, third])
    pd.fail_for(B.incident_id, 503, {"status": "unavailable"}, after=True)
    with pytest.raises(DeliveryError) as caught:
        sink.deliver(item, None)
    assert caught.value.sent
    assert "after 1 of 3 events of this row were accepted" in str(caught.value)
    assert [a.dedup_key for a in pd.alerts] == [A.incident_id, B.incident_id]  # not the third
    sink.deliver(retried(item), None)
    assert [(a.dedup_key, a.events) for a in pd.alerts] == [
        (A.incident_id, 2),
        (B.incident_id, 2),
        (third.incident_id, 1),
    ]


def test_a_resolve_retried_after_a_timeout_resolves_once(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    sink = sink_for(pd, clock, timeout_s=1.0)
    sink.deliver(row("open", [A]), None)
    item = row("resolve", [replace(A, open=False)], seq=1)
    pd.fail("POST", ENQUEUE, delay=1.6, after=True)  # processed, answered too late
    with pytest.raises(DeliveryError) as caught:
        sink.deliver(item, None)
    assert "no complete answer within 1 s" in str(caught.value)
    assert caught.value.sent
    sink.deliver(retried(item), None)
    # The late first attempt lands after the retry or before it: resolved once either way.
    assert [(a.dedup_key, a.state) for a in pd.alerts] == [(A.incident_id, "resolved")]


# --- rate limits ---------------------------------------------------------------------------------


def test_a_429_with_retry_after_is_waited_out_and_the_event_sent_once(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    pd.fail("POST", ENQUEUE, 429, {"status": "throttle event"}, {"Retry-After": "4"})
    sink_for(pd, clock).deliver(row("open", [A]), None)
    assert len(pd.enqueued()) == 2
    assert [(a.dedup_key, a.events) for a in pd.alerts] == [(A.incident_id, 1)]
    assert any(4 <= s < 5 for s in clock.sleeps), clock.sleeps


def test_a_retry_after_beyond_the_bound_goes_back_to_the_relay_unslept(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    pd.fail("POST", ENQUEUE, 429, {"status": "throttle event"}, {"Retry-After": "70"})
    with pytest.raises(DeliveryError) as caught:
        sink_for(pd, clock).deliver(row("open", [A]), None)
    assert caught.value.retry_after == timedelta(seconds=70)
    assert not caught.value.permanent
    assert not caught.value.sent
    assert all(s < 30 for s in clock.sleeps), clock.sleeps
    assert pd.alerts == []


def test_a_429_without_retry_after_hands_the_relay_pagerdutys_advised_wait(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    pd.fail("POST", ENQUEUE, 429, {"status": "throttle event"}, times=3)
    with pytest.raises(DeliveryError) as caught:
        sink_for(pd, clock).deliver(row("open", [A]), None)
    assert caught.value.retry_after == timedelta(seconds=30)
    assert len(pd.enqueued()) == 3  # two short waits in the call, then the relay's turn
    assert pd.alerts == []


def test_events_of_a_row_are_spaced_for_pagerdutys_per_key_limit(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    sink_for(pd, clock, min_severity=Severity.LOW).deliver(row("open", [A, B, C, D]), None)
    assert len(pd.alerts) == 4
    assert [s for s in clock.sleeps if s > 0] == [0.5, 0.5, 0.5]


# --- refused events and the secret routing key ----------------------------------------------------


def test_a_refused_event_is_permanent_and_says_what_pagerduty_said(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    with pytest.raises(DeliveryError) as caught:
        sink_for(pd, clock, routing_key=OTHER_KEY).deliver(row("open", [A]), None)
    error = str(caught.value)
    assert caught.value.permanent
    assert "HTTP 400" in error
    assert "Event object is invalid: Invalid routing key" in error
    assert f"trigger of incident {A.incident_id}" in error
    assert OTHER_KEY not in error
    assert pd.alerts == []


def test_a_refused_event_midway_marks_the_row_as_partly_sent(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    said = {"status": "invalid event", "message": "Event object is invalid", "errors": ["x"]}
    pd.fail_for(B.incident_id, 400, said)
    with pytest.raises(DeliveryError) as caught:
        sink_for(pd, clock).deliver(row("open", [A, B]), None)
    assert caught.value.permanent
    assert caught.value.sent
    assert [a.dedup_key for a in pd.alerts] == [A.incident_id]


def test_an_internal_address_is_refused_before_anything_is_sent(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    with pytest.raises(DeliveryError) as caught:
        sink_for(pd, clock, allow_local=False).deliver(row("open", [A]), None)
    assert caught.value.permanent
    assert "internal address" in str(caught.value)
    assert pd.requests == []


def test_a_redirect_is_not_followed(pd: FakePagerDuty, clock: FakeClock) -> None:
    elsewhere = FakePagerDuty()
    with elsewhere.running():
        pd.fail("POST", ENQUEUE, 307, "", {"Location": f"{elsewhere.url}{ENQUEUE}"})
        with pytest.raises(DeliveryError) as caught:
            sink_for(pd, clock).deliver(row("open", [A]), None)
        assert caught.value.permanent
        assert "HTTP 307" in str(caught.value)
        assert elsewhere.requests == []


ECHOED = f'upstream refused {{"routing_key": "{ROUTING_KEY}", "event_action": "trigger"}}'
"""A proxy's page quoting the request it refused (not JSON: shown as it is)."""
FAULTS: dict[str, dict[str, Any]] = {
    "400 quoting the key": {
        "status": 400,
        "body": {
            "status": "invalid event",
            "message": f"Event object is invalid for {ROUTING_KEY}",
            "errors": [f"routing_key {ROUTING_KEY} is disabled"],
        },
    },
    "proxy 502 echoing the request": {"status": 502, "body": ECHOED, "content_type": "text/plain"},
    "429 quoting the key": {
        "status": 429,
        "body": {"status": "throttle event", "message": ROUTING_KEY},
        "headers": {"Retry-After": "120"},
    },
    "404 page echoing the request": {"status": 404, "body": ECHOED, "content_type": "text/html"},
    "timeout": {"delay": 1.6},
    "dropped connection": {"drop": True},
}


@pytest.mark.parametrize("fault", FAULTS.values(), ids=list(FAULTS))
def test_the_routing_key_is_in_no_error_warning_or_log_line(
    pd: FakePagerDuty, clock: FakeClock, caplog: pytest.LogCaptureFixture, fault: dict[str, Any]
) -> None:
    caplog.set_level(logging.DEBUG)
    sink = sink_for(pd, clock, timeout_s=1.0)
    pd.fail("POST", ENQUEUE, **fault)
    with pytest.raises(DeliveryError) as caught:
        sink.deliver(row("open", [A]), None)
    assert ROUTING_KEY not in str(caught.value)
    assert ROUTING_KEY in pd.enqueued()[0].text  # it was sent, where it belongs
    delivered = sink.deliver(retried(row("open", [A])), None)
    assert ROUTING_KEY not in (delivered.warning or "")
    assert ROUTING_KEY not in repr(delivered)
    assert not any(ROUTING_KEY in r.getMessage() for r in caplog.records)


def test_the_routing_key_is_not_in_the_settings_repr_or_the_refused_address_error(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    sink = sink_for(pd, clock, allow_local=False)
    with pytest.raises(DeliveryError) as caught:
        sink.deliver(row("open", [A]), None)
    assert ROUTING_KEY not in str(caught.value)
    config = PagerDutySettings(routing_key=SecretStr(ROUTING_KEY), url=pd.url)
    assert ROUTING_KEY not in repr(config)


# --- the call's total deadline -------------------------------------------------------------------


def test_a_slow_drip_is_cut_at_the_calls_deadline_and_the_retry_pages_nobody_twice(
    pd: FakePagerDuty, clock: FakeClock
) -> None:
    # The headers at once, then the answer a byte a second: every read gets its byte within
    # the 1.5 s read timeout, so only the call's total deadline ends the call (the answer's
    # ~80 bytes would take over a minute). PagerDuty processed the event first.
    pd.slow_drip("POST", ENQUEUE, 1.0)
    sink = sink_for(pd, clock, timeout_s=1.5)
    item = row("open", [A])
    with pytest.raises(DeliveryError) as caught:
        sink.deliver(item, None)
    assert "no complete answer within 1.5 s (timed out)" in str(caught.value)
    assert caught.value.sent
    assert not caught.value.permanent
    sink.deliver(retried(item), None)
    assert [(a.dedup_key, a.events) for a in pd.alerts] == [(A.incident_id, 2)]
