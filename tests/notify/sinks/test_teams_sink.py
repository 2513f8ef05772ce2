"""Teams through a Workflows webhook: the card each transition posts, as a reader sees it;
hostile catalog names; the size limit; 429, refused URLs, bad payloads, timeouts, 5xx, dropped
and refused connections, slow drips; the webhook's signature kept out of every message.

Every test goes through the real sink and HTTP stack to :class:`~testing.fakes.teams.FakeTeams`
on 127.0.0.1, which answers as the Workflows trigger does and checks the card's shape."""

from __future__ import annotations

import logging
import socket
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest
from pydantic import SecretStr

from mlcopilot import redact
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
    dedupe_key,
    encode_notification,
)
from mlcopilot.model import CheckInfo, Severity
from mlcopilot.notify.sinks.config import TeamsSettings
from mlcopilot.notify.sinks.teams import TeamsSink
from testing import hostile_names
from testing.builders import dataset_urn, model_urn
from testing.fakes.drip import drip_server
from testing.fakes.teams import (
    MESSAGE_LIMIT,
    SIG,
    WORKFLOW_ID,
    FakeTeams,
    buttons,
    elements,
    facts,
    read,
    texts,
)
from testing.notify_world import FakeClock

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
DATAHUB = "https://datahub.example.com"
ENTITY = dataset_urn("raw.customers")
CHURN = model_urn("churn")
LTV = model_urn("ltv")
INFO = CheckInfo(
    name="schema_drift",
    title="Schema drift",
    tag="urn:li:tag:mlcopilot-schema-drift",
    tag_description="A column a model reads changed upstream.",
    incident_type="DATA_SCHEMA",
    why="A column the model reads was removed or renamed: the next training run fails.",
    action="Restore the column, or update the feature pipeline and retrain.",
)


# --- building rows ----------------------------------------------------------------------------


def member(
    n: int,
    field: str | None,
    model: str = CHURN,
    *,
    entity: str = ENTITY,
    change: str | None = "removed",
    severity: Severity = Severity.CRITICAL,
    is_open: bool = True,
    previous: str | None = None,
) -> Member:
    return Member(
        incident_id=f"{n:016x}",
        generation=1,
        check="schema_drift",
        severity=severity,
        model=model,
        entity=entity,
        field=field,
        change=change,
        previous_field=previous,
        message=f"column {field} changed",
        path=(model, entity),
        open=is_open,
    )


def group(
    members: tuple[Member, ...],
    *,
    entity: str = ENTITY,
    info: CheckInfo = INFO,
    **changes: Any,
) -> GroupSnapshot:
    fields: dict[str, Any] = {
        "key": "0123456789abcdef",
        "generation": 1,
        "check": "schema_drift",
        "entity": entity,
        "state": GroupState.OPEN,
        "opened_at": T0,
        "members": members,
        "infos": {"schema_drift": info},
    }
    return GroupSnapshot(**(fields | changes))


def row(notification: Notification, *, sink: str = "teams", uncertain: bool = False) -> OutboxItem:
    g = notification.group
    return OutboxItem(
        id=1,
        sink=sink,
        action=notification.action,
        group_key=g.key,
        group_generation=g.generation,
        seq=notification.seq,
        dedupe_key=dedupe_key(sink, g.key, g.generation, notification.action, notification.seq),
        payload=encode_notification(notification),
        status=OutboxStatus.SENDING,
        attempts=0,
        created_at=T0,
        not_before=T0,
        next_attempt_at=T0,
        uncertain=uncertain,
    )


def opened(members: tuple[Member, ...] | None = None, **changes: Any) -> OutboxItem:
    members = members or (member(1, "email"), member(2, "phone", LTV, severity=Severity.HIGH))
    return row(Notification("open", 0, group(members, **changes)))


@pytest.fixture
def teams() -> Iterator[FakeTeams]:
    fake = FakeTeams()
    with fake.running():
        yield fake


def sink_for(
    url: str, clock: FakeClock | None = None, *, datahub_url: str | None = DATAHUB, **settings: Any
) -> TeamsSink:
    config = TeamsSettings(webhook_url=SecretStr(url), allow_local=True, **settings)
    return TeamsSink(config, clock=clock or FakeClock(T0), datahub_url=datahub_url)


def delivery_error(sink: TeamsSink, item: OutboxItem) -> DeliveryError:
    with pytest.raises(DeliveryError) as caught:
        sink.deliver(item, None)
    return caught.value


def eventually(condition: Callable[[], bool]) -> None:
    """Wait (up to 10 s) for the fake's server thread to have done what the test expects."""
    done = threading.Event()
    for _ in range(200):
        if condition():
            return
        done.wait(0.05)
    raise AssertionError("the fake never got there")


def dataset_page(urn: str) -> str:
    return f"{DATAHUB}/dataset/{quote(urn, safe='')}/Incidents"


def model_page(urn: str) -> str:
    return f"{DATAHUB}/mlModels/{quote(urn, safe='')}"


# --- what each card says ----------------------------------------------------------------------


def test_an_open_card_says_what_where_why_what_to_do_and_links_to_it(teams: FakeTeams) -> None:
    members = (
        member(1, "email"),
        member(2, "zip", LTV, change="renamed", previous="postcode", severity=Severity.HIGH),
        member(3, None, LTV, change=None, severity=Severity.MEDIUM),
    )
    reports = {CHURN: "https://reports.example.com/churn", LTV: "https://reports.example.com/ltv"}
    item = row(Notification("open", 0, group(members), report_urls=reports))

    delivered = sink_for(teams.webhook_url).deliver(item, None)

    assert delivered.ref is None  # Teams gives nothing to refer to
    assert delivered.warning is None
    (card,) = teams.cards
    shown = texts(card)
    assert shown[0] == "Schema drift at raw.customers"
    assert (
        "Why it matters: A column the model reads was removed or renamed: the next training "
        "run fails." in shown
    )
    assert "Affected (3)" in shown
    assert "Suggested action: Restore the column, or update the feature pipeline and retrain." in (
        shown
    )
    assert facts(card) == [
        ("Severity", "critical"),
        ("Models", "2"),
        ("Open findings", "3 of 3"),
        ("Open since", "2026-03-02 09:00 UTC"),
        ("email", "removed in churn (critical)"),
        ("zip", "renamed from postcode in ltv (high)"),
        ("raw.customers", "schema drift in ltv (medium)"),
    ]
    assert buttons(card) == [
        ("Open raw.customers in DataHub", dataset_page(ENTITY)),
        ("Report: churn", "https://reports.example.com/churn"),
        ("Report: ltv", "https://reports.example.com/ltv"),
        ("Model churn", model_page(CHURN)),
        ("Model ltv", model_page(LTV)),
    ]
    (request,) = teams.requests
    assert request.headers["content-type"].startswith("application/json")
    assert request.json()["attachments"][0]["contentType"] == (
        "application/vnd.microsoft.card.adaptive"
    )


def test_one_report_for_every_model_is_one_button(teams: FakeTeams) -> None:
    url = "https://reports.example.com/latest"
    members = (member(1, "email"), member(2, "phone", LTV))
    item = row(Notification("open", 0, group(members), report_urls={CHURN: url, LTV: url}))
    sink_for(teams.webhook_url).deliver(item, None)
    (card,) = teams.cards
    assert ("HTML report", url) in buttons(card)


def test_many_reports_are_links_in_the_card(teams: FakeTeams) -> None:
    models = [model_urn(f"m{n:02d}") for n in range(25)]
    members = tuple(member(n, "email", m) for n, m in enumerate(models))
    reports = {m: f"https://reports.example.com/m{n:02d}" for n, m in enumerate(models)}
    item = row(Notification("open", 0, group(members), report_urls=reports))
    sink_for(teams.webhook_url).deliver(item, None)
    (card,) = teams.cards
    (links,) = [e["text"] for e in elements(card) if "HTML reports" in e.get("text", "")]
    reading = read(links)
    assert reading.links == tuple(f"https://reports.example.com/m{n:02d}" for n in range(20))
    assert reading.text.endswith("and 5 more")
    assert len(buttons(card)) == 6  # the entity, then models while Teams shows them in a row


def test_an_update_card_says_what_joined_changed_and_cleared(teams: FakeTeams) -> None:
    members = (
        member(1, "email", is_open=False),
        member(2, "phone"),
        member(3, "zip", LTV, change="type_changed", severity=Severity.HIGH),
    )
    notification = Notification(
        "update",
        1,
        group(members),
        added=(members[1].incident_id,),
        changed=(members[2].incident_id,),
        cleared=(members[0].incident_id,),
    )
    sink_for(teams.webhook_url).deliver(row(notification), None)
    (card,) = teams.cards
    shown = texts(card)
    assert shown[0] == "Update: Schema drift at raw.customers"
    headings = ["New (1)", "Changed (1)", "Cleared (1)"]
    assert [t for t in shown if t in headings] == headings
    assert facts(card)[2:] == [
        ("Open findings", "2 of 3"),
        ("Open since", "2026-03-02 09:00 UTC"),
        ("phone", "removed in churn (critical)"),
        ("zip", "type changed in ltv (high)"),
        ("email", "removed in churn (critical) · cleared"),
    ]
    assert ("Open raw.customers in DataHub", dataset_page(ENTITY)) in buttons(card)


def test_a_reminder_says_it_is_still_open_since_when_and_lists_what_is_open(
    teams: FakeTeams,
) -> None:
    members = (member(1, "email"), member(2, "phone", is_open=False))
    notification = Notification("reminder", 2, group(members, opened_at=T0 - timedelta(hours=4)))
    sink_for(teams.webhook_url).deliver(row(notification), None)
    (card,) = teams.cards
    shown = texts(card)
    assert shown[0] == "Reminder: Schema drift at raw.customers"
    assert "Still open and not acknowledged." in shown
    assert ("Open since", "2026-03-02 05:00 UTC") in facts(card)
    assert "Open (1)" in shown
    assert ("email", "removed in churn (critical)") in facts(card)
    assert ("phone", "removed in churn (critical) · cleared") not in facts(card)


def test_an_acknowledgement_names_who_acknowledged(teams: FakeTeams) -> None:
    members = (member(1, "email"),)
    snapshot = group(
        members, state=GroupState.ACKNOWLEDGED, acknowledged_by="urn:li:corpuser:alice"
    )
    sink_for(teams.webhook_url).deliver(row(Notification("acknowledge", 3, snapshot)), None)
    (card,) = teams.cards
    shown = texts(card)
    assert shown[0] == "Acknowledged: Schema drift at raw.customers"
    assert "Acknowledged by alice. No more reminders are sent for it." in shown


def test_a_resolution_says_resolved_and_when(teams: FakeTeams) -> None:
    members = (member(1, "email", is_open=False), member(2, "phone", LTV, is_open=False))
    snapshot = group(members, state=GroupState.RESOLVED, resolved_at=T0 + timedelta(hours=2))
    sink_for(teams.webhook_url).deliver(row(Notification("resolve", 4, snapshot)), None)
    (card,) = teams.cards
    shown = texts(card)
    assert shown[0] == "Resolved: Schema drift at raw.customers"
    assert "Every finding cleared on the latest scan." in shown
    assert ("Resolved", "2026-03-02 11:00 UTC") in facts(card)
    assert ("Open findings", "0 of 2") in facts(card)
    assert card["body"][0]["color"] == "Good"


def test_a_routed_target_posts_to_the_one_webhook(teams: FakeTeams) -> None:
    sink: Sink = sink_for(teams.webhook_url)  # the relay's protocol, checked by mypy
    assert sink.name == "teams"
    sink.deliver(opened(), None)
    sink.deliver(row(Notification("open", 0, group((member(1, "a"),))), sink="teams:ops"), None)
    assert len(teams.cards) == 2


def test_a_row_teams_has_no_card_for_is_refused_unsent(teams: FakeTeams) -> None:
    writeback: Action = "writeback"
    assert writeback not in TeamsSink.events
    item = replace(row(Notification("open", 0, group((member(1, "a"),)))), action=writeback)
    error = delivery_error(sink_for(teams.webhook_url), item)
    assert error.permanent
    assert teams.requests == []


# --- hostile catalog text ---------------------------------------------------------------------

HOSTILE = [
    ("*bold* _it_ ~~strike~~ **strong**", "*bold* _it_ ~~strike~~ **strong**"),
    ("[Click to fix](https://evil.example)", "[Click to fix](https://evil.example)"),
    ("![](https://evil.example/p.png)", "![](https://evil.example/p.png)"),
    ("<https://evil.example> <at>General</at>", "<https://evil.example> <at>General</at>"),
    ("`tick` ``double``", "`tick` ``double``"),
    ("# heading", "# heading"),
    ("1. item", "1. item"),
    ("- item", "- item"),
    ("> quote", "> quote"),
    ("back\\slash \\*x\\*", "back\\slash \\*x\\*"),
    ("__init__ customer_id", "__init__ customer_id"),
    ("line\none\n\n- two", "line one - two"),
    ("evil\u202ecod.exe\u200b", "evilcod.exe"),
    (hostile_names.TABLE, hostile_names.TABLE),
    (hostile_names.ATTRIBUTE, hostile_names.ATTRIBUTE),
    (hostile_names.TAG, hostile_names.TAG),
    (hostile_names.BREAK_OUT, hostile_names.BREAK_OUT),
    (hostile_names.BIDI, "amountgnp.exex"),
    (hostile_names.ENTITY, "a&amp;b"),
]


@pytest.mark.parametrize(("name", "shown"), HOSTILE, ids=[str(n) for n in range(len(HOSTILE))])
def test_hostile_names_show_as_written_and_format_or_link_nothing(
    teams: FakeTeams, name: str, shown: str
) -> None:
    # In the field names, a previous name, who acknowledged, the check's texts; and in the
    # entity's and a model's urns (shown as DataHub names them: checked for markup only).
    entity = dataset_urn(name)
    members = (
        member(1, name, entity=entity),
        member(2, "zip", entity=entity, change="renamed", previous=name),
        member(3, "b", model_urn(name), entity=entity),
    )
    info = replace(INFO, why=f"why {name}", action=f"do {name}")
    snapshot = group(members, entity=entity, info=info, acknowledged_by=name)
    sink = sink_for(teams.webhook_url)
    for action in ("open", "acknowledge"):
        sink.deliver(row(Notification(action, 0, snapshot)), None)

    for card in teams.cards:
        raw = [e["text"] for e in elements(card) if e["type"] == "TextBlock"]
        raw += [
            v
            for e in elements(card)
            if e["type"] == "FactSet"
            for f in e["facts"]
            for v in f.values()
        ]
        for text in raw:
            reading = read(text)
            assert reading.links == (), text
            assert reading.marks <= {"strong"}, text  # only the card's own labels are bold
            assert "](" not in text  # a client that shows escapes still makes no link
        for _title, url in buttons(card):
            assert url.startswith(DATAHUB)
    opened_card, acknowledged = teams.cards
    assert texts(opened_card)[0].startswith("Schema drift at ")
    assert (shown, "removed in churn (critical)") in facts(opened_card)
    assert ("zip", f"renamed from {shown} in churn (critical)") in facts(opened_card)
    assert f"Why it matters: why {shown}" in texts(opened_card)
    assert f"Suggested action: do {shown}" in texts(opened_card)
    assert f"Acknowledged by {shown}. No more reminders are sent for it." in texts(acknowledged)


def test_hostile_entity_and_model_names_show_as_written(teams: FakeTeams) -> None:
    entity = dataset_urn("raw.*cust*_[x]_<at>y</at>")
    model = model_urn("churn_*v2*_")
    snapshot = group((member(1, "email", model, entity=entity),), entity=entity)
    sink_for(teams.webhook_url).deliver(row(Notification("open", 0, snapshot)), None)
    (card,) = teams.cards
    assert texts(card)[0] == "Schema drift at raw.*cust*_[x]_<at>y</at>"
    assert ("email", "removed in churn_*v2*_ (critical)") in facts(card)
    assert ("Model churn_*v2*_", model_page(model)) in buttons(card)
    assert all(read(e["text"]).marks <= {"strong"} for e in elements(card) if "text" in e)


def test_a_long_name_is_cut_with_an_ellipsis(teams: FakeTeams) -> None:
    sink_for(teams.webhook_url).deliver(opened((member(1, "x" * 5000),)), None)
    (card,) = teams.cards
    (title, value) = facts(card)[-1]
    assert title == "x" * 119 + "…"
    assert value == "removed in churn (critical)"


# --- size -------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["open", "update", "resolve"])
def test_500_findings_stay_under_teams_limit_and_say_how_many_more(
    teams: FakeTeams, action: Action
) -> None:
    # Long names full of characters that must be escaped: the largest a finding can render.
    members = tuple(
        member(n, f"{n:03d}" + "*[" * 200, model_urn("m" + "_<" * 100 + str(n)), is_open=False)
        for n in range(500)
    )
    ids = tuple(m.incident_id for m in members)
    notification = Notification(action, 0, group(members), added=ids, cleared=ids)
    sink_for(teams.webhook_url).deliver(row(notification), None)

    (card,) = teams.cards  # the fake refuses anything over 28 KB with a 413
    assert len(teams.requests[0].body) <= MESSAGE_LIMIT
    listed = [title for title, _ in facts(card) if title[:3].isdigit()]
    assert listed  # some are listed, by name
    assert listed == [f"{n:03d}" + "*[" * 58 + "…" for n in range(len(listed))]
    more = [t for t in texts(card) if t.startswith("… and")]
    heading = [t for t in texts(card) if t.endswith("(500)")]
    assert heading
    if action == "update":  # added and cleared: one budget for both lists
        assert more == [f"… and {500 - len(listed)} more", "… and 500 more"]
    else:
        assert more == [f"… and {500 - len(listed)} more"]


# --- rate limits ------------------------------------------------------------------------------


def test_429_retry_after_is_waited_out_on_the_clock(teams: FakeTeams) -> None:
    clock = FakeClock(T0)
    body = {"error": {"code": "TooManyRequests", "message": "Rate limit is exceeded."}}
    teams.fail("POST", teams.path, 429, body, {"Retry-After": "4"})
    delivered = sink_for(teams.webhook_url, clock).deliver(opened(), None)
    assert delivered.warning is None
    assert len(teams.requests) == 2
    assert len(teams.cards) == 1
    (slept,) = clock.sleeps
    assert 4 <= slept < 5


def test_a_retry_after_beyond_the_bound_goes_back_to_the_relay_unslept(teams: FakeTeams) -> None:
    clock = FakeClock(T0)
    teams.fail("POST", teams.path, 429, None, {"Retry-After": "120"})
    error = delivery_error(sink_for(teams.webhook_url, clock), opened())
    assert error.retry_after == timedelta(seconds=120)
    assert not error.permanent
    assert clock.sleeps == []
    assert teams.cards == []


# --- refusals ---------------------------------------------------------------------------------


def refused_urls(teams: FakeTeams) -> dict[str, str]:
    return {
        "wrong signature": teams.url_with(sig="x" + SIG[1:]),
        "no signature": teams.url_with(sig="").replace("&sig=", ""),
        "another workflow": teams.url_with(sig=SIG, workflow_id="f" * 32),
    }


@pytest.mark.parametrize("case", ["wrong signature", "no signature", "another workflow"])
def test_a_refused_webhook_url_is_permanent_and_says_to_recreate_it(
    teams: FakeTeams, case: str
) -> None:
    url = refused_urls(teams)[case]
    error = delivery_error(sink_for(url), opened())
    assert error.permanent
    assert "webhook URL was refused" in str(error)
    assert "Recreate the webhook" in str(error)
    assert "/workflows/" not in str(error)
    assert SIG[1:] not in str(error)
    assert teams.cards == []


def test_a_deleted_workflow_is_permanent(teams: FakeTeams) -> None:
    teams.deleted = True
    error = delivery_error(sink_for(teams.webhook_url), opened())
    assert error.permanent
    assert "HTTP 404 (WorkflowNotFound" in str(error)
    assert WORKFLOW_ID not in str(error)  # Teams' message names it; ours does not
    assert "Recreate the webhook" in str(error)


def test_a_forbidden_workflow_is_permanent(teams: FakeTeams) -> None:
    body = {"error": {"code": "WorkflowDisabled", "message": "The workflow is disabled."}}
    teams.fail("POST", teams.path, 403, body)
    error = delivery_error(sink_for(teams.webhook_url), opened())
    assert error.permanent
    assert "HTTP 403 (WorkflowDisabled: The workflow is disabled.)" in str(error)


def test_a_payload_the_trigger_refuses_is_permanent_with_its_reason(teams: FakeTeams) -> None:
    # A flow whose trigger has a stricter request schema than the default one.
    body = {
        "error": {
            "code": "TriggerInputSchemaMismatch",
            "message": "The input body for trigger 'manual' of type 'Request' did not match.",
        }
    }
    teams.fail("POST", teams.path, 400, body)
    error = delivery_error(sink_for(teams.webhook_url), opened())
    assert error.permanent
    assert "the card was refused (HTTP 400 (TriggerInputSchemaMismatch:" in str(error)


# --- outcomes unknown: the duplicate window ---------------------------------------------------


def test_a_timeout_after_teams_took_the_card_is_transient_and_its_retry_may_duplicate(
    teams: FakeTeams,
) -> None:
    teams.stall(5.0)  # the flow is triggered; the 202 never arrives in time
    sink = sink_for(teams.webhook_url, timeout_s=0.5)
    error = delivery_error(sink, opened())
    assert "no complete answer within 0.5 s (timed out)" in str(error)
    assert error.sent  # Teams may have posted it: it did
    assert not error.permanent
    eventually(lambda: len(teams.cards) == 1)

    teams.stall(0)
    delivered = sink.deliver(replace(opened(), uncertain=True), None)
    assert delivered.warning is not None
    assert "may be a duplicate" in delivered.warning
    assert len(teams.cards) == 2  # the window the module documents: two identical cards
    assert teams.cards[0] == teams.cards[1]


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_5xx_is_transient_and_may_have_been_sent(teams: FakeTeams, status: int) -> None:
    echo = f"<html>upstream failed for POST {teams.webhook_url}</html>"
    teams.fail("POST", teams.path, status, echo, content_type="text/html")
    error = delivery_error(sink_for(teams.webhook_url), opened())
    assert not error.permanent
    assert error.sent
    assert f"HTTP {status}" in str(error)
    assert SIG not in str(error)
    assert len(teams.requests) == 1  # not sent again within the call


def test_a_connection_dropped_after_sending_is_not_retried_within_the_call(
    teams: FakeTeams,
) -> None:
    teams.fail("POST", teams.path, drop=True)
    error = delivery_error(sink_for(teams.webhook_url), opened())
    assert error.sent
    assert not error.permanent
    assert len(teams.requests) == 1
    assert SIG not in str(error)


def test_a_refused_connection_sent_nothing() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = (
        f"http://127.0.0.1:{port}/workflows/{WORKFLOW_ID}/triggers/manual/paths/invoke"
        f"?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={SIG}"
    )
    error = delivery_error(sink_for(url), opened())
    assert not error.sent  # nothing went out: the retry cannot duplicate
    assert not error.permanent
    assert SIG not in str(error)


@pytest.mark.parametrize("headers_too", [False, True], ids=["body", "status-line"])
def test_a_slow_drip_is_cut_at_the_calls_deadline(headers_too: bool) -> None:
    # A byte every 0.2 s: each read gets its byte well within the 1 s read timeout, so only
    # the call's total deadline can end it (else the drip server's 30 s lifetime would, with
    # an incomplete-answer error instead of a timeout).
    with drip_server(interval=0.2, lifetime=30, headers_too=headers_too) as drip:
        url = (
            f"{drip.url}/workflows/{WORKFLOW_ID}/triggers/manual/paths/invoke"
            f"?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={SIG}"
        )
        error = delivery_error(sink_for(url, timeout_s=1.0), opened())
        assert "no complete answer within 1 s (timed out)" in str(error)
        assert error.sent
        assert len(drip.requests) == 1
        assert SIG not in str(error)


# --- the secret -------------------------------------------------------------------------------


def test_the_signature_never_reaches_an_error_a_warning_or_a_log(
    teams: FakeTeams, caplog: pytest.LogCaptureFixture
) -> None:
    redact.install()  # as the CLI does first thing: httpx logs each request's URL at INFO
    for name in ("httpx", "httpcore", "mlcopilot"):
        caplog.set_level(logging.DEBUG, logger=name)
    said: list[str] = []
    with caplog.at_level(logging.DEBUG), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        sink = sink_for(teams.webhook_url, timeout_s=0.5)
        teams.fail("POST", teams.path, 502, f"bad gateway: {teams.webhook_url}")
        teams.fail("POST", teams.path, 429, {"error": {"message": teams.webhook_url}}, times=3)
        teams.fail("POST", teams.path, drop=True)
        for _ in range(3):
            said.append(str(delivery_error(sink, opened())))
        for case, url in refused_urls(teams).items():
            said.append(f"{case}: {delivery_error(sink_for(url), opened())}")
        teams.stall(5.0)
        said.append(str(delivery_error(sink, opened())))
        teams.stall(0)
        delivered = sink.deliver(
            row(Notification("open", 0, group((member(1, "a"),))), uncertain=True), None
        )
        said.append(str(delivered.warning))
    said += [r.getMessage() for r in caplog.records]
    said += [str(w.message) for w in warned]
    assert any("HTTP Request: POST" in s for s in said)  # httpx did log each request's URL
    for text in said:
        assert SIG not in text, text
        assert SIG[1:] not in text, text
