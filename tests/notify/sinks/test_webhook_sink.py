"""The signed webhook: the event per action, its signature as a receiver checks it, retries that
the receiver deduplicates (a lost 502, a slow drip cut at the deadline), 409, permanent 4xx,
429 waited out on the clock, the secret kept out of everything, the shipped schema.

Every event goes to :class:`~testing.fakes.webhook.FakeReceiver`, which verifies the signature,
the timestamp's freshness and the shipped schema, and keeps one event per Idempotency-Key, as a
receiver should; what the tests assert is what that receiver saw.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from jsonschema import Draft202012Validator
from pydantic import SecretStr

from mlcopilot.checks import builtin_infos
from mlcopilot.incidents.grouping import group_key
from mlcopilot.incidents.payload import (
    Action,
    DeliveryError,
    GroupSnapshot,
    GroupState,
    Member,
    Notification,
    OutboxItem,
    OutboxStatus,
    dedupe_key,
    encode_notification,
    with_infos,
)
from mlcopilot.model import Severity
from mlcopilot.model.findings import finding_id
from mlcopilot.notify.sinks.config import NotifySettings, WebhookSettings
from mlcopilot.notify.sinks.webhook import WebhookSink
from mlcopilot.notify.sinks.webhook_event import event_json_schema_text, main
from testing.fakes.drip import drip_server
from testing.fakes.http import FakeServer
from testing.fakes.webhook import (
    ACCEPTED,
    DUPLICATE,
    SECRET,
    FakeReceiver,
    schema_errors,
    shipped_schema,
    verify,
)
from testing.notify_world import CUSTOMERS, MODEL, T0, FakeClock, Script, world
from tests.conftest import REPO

DATAHUB = "https://datahub.example.com"
CHECK = "pii_exposure"
KEY = group_key(CHECK, CUSTOMERS)
TYPES: dict[Action, str] = {
    "open": "incident.opened",
    "update": "incident.updated",
    "reminder": "incident.reminder",
    "acknowledge": "incident.acknowledged",
    "resolve": "incident.resolved",
}


def member(field: str, severity: Severity = Severity.HIGH, *, open: bool = True) -> Member:
    return Member(
        incident_id=finding_id(MODEL, CHECK, CUSTOMERS, field),
        generation=1,
        check=CHECK,
        severity=severity,
        model=MODEL,
        entity=CUSTOMERS,
        field=field,
        change=None,
        previous_field=None,
        message=f"{field} is tagged PII and feeds the model",
        path=(MODEL, CUSTOMERS),
        open=open,
    )


EMAIL, PHONE = member("email", Severity.CRITICAL), member("phone")


def row(
    action: Action = "open",
    *,
    seq: int = 0,
    members: tuple[Member, ...] = (EMAIL, PHONE),
    added: tuple[str, ...] = (),
    cleared: tuple[str, ...] = (),
    changed: tuple[str, ...] = (),
    state: GroupState = GroupState.OPEN,
    acknowledged_by: str | None = None,
    resolved: bool = False,
    report: dict[str, str] | None = None,
    row_id: int = 1,
) -> OutboxItem:
    """An outbox row as the store holds it: the payload encoded, the check's info carried."""
    group = GroupSnapshot(
        key=KEY,
        generation=1,
        check=CHECK,
        entity=CUSTOMERS,
        state=state,
        opened_at=T0,
        members=members,
        resolved_at=T0 + timedelta(hours=2) if resolved else None,
        acknowledged_by=acknowledged_by,
    )
    notification = Notification(action, seq, group, added, cleared, changed, report or {})
    payload = with_infos(encode_notification(notification), builtin_infos())
    created = T0 + timedelta(minutes=1)
    return OutboxItem(
        id=row_id,
        sink="webhook",
        action=action,
        group_key=KEY,
        group_generation=1,
        seq=seq,
        dedupe_key=dedupe_key("webhook", KEY, 1, action, seq),
        payload=payload,
        status=OutboxStatus.SENDING,
        attempts=0,
        created_at=created,
        not_before=created,
        next_attempt_at=created,
    )


def retried(item: OutboxItem) -> OutboxItem:
    """``item`` as the relay hands it over again after an attempt that may have arrived."""
    return replace(item, attempts=item.attempts + 1, uncertain=True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0 + timedelta(minutes=2))


@pytest.fixture
def receiver(clock: FakeClock) -> Iterator[FakeReceiver]:
    fake = FakeReceiver(clock=clock)  # the receiver's clock agrees with ours
    with fake.running():
        yield fake


def sink_for(
    receiver: FakeReceiver, clock: FakeClock, *, secret: str = SECRET, **settings: Any
) -> WebhookSink:
    config = WebhookSettings(
        url=settings.pop("url", None) or receiver.endpoint,
        secret=SecretStr(secret),
        allow_local=settings.pop("allow_local", True),
        **settings,
    )
    return WebhookSink(config, clock=clock, datahub_url=DATAHUB, signing_clock=clock)


def resend(receiver: FakeReceiver, body: bytes, headers: dict[str, str]) -> httpx.Response:
    """POST ``body`` with a captured delivery's headers (its length and host left to httpx)."""
    kept = {k: v for k, v in headers.items() if k not in ("content-length", "host")}
    return httpx.post(receiver.endpoint, content=body, headers=kept)


def page(kind: str, urn: str) -> str:
    return f"{DATAHUB}/{kind}/{quote(urn, safe='')}"


# --- the event ---------------------------------------------------------------------------------


def test_an_open_is_one_signed_event_with_the_whole_group(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    item = row("open", added=(EMAIL.incident_id, PHONE.incident_id))
    sink_for(receiver, clock).deliver(item, None)

    (delivery,) = receiver.deliveries
    assert delivery.verdict == ACCEPTED
    assert delivery.headers["content-type"] == "application/json"
    assert delivery.timestamp == int(clock.now().timestamp())
    (event,) = receiver.events
    assert event["id"] == delivery.key
    assert len(event["id"]) == 64
    incident_links = {"model": page("mlModels", MODEL), "entity": page("dataset", CUSTOMERS)}
    assert {k: v for k, v in event.items() if k != "id"} == {
        "version": 1,
        "type": "incident.opened",
        "occurred_at": "2026-03-02T09:01:00+00:00",  # the row's creation, not the delivery
        "seq": 0,
        "group": {
            "key": KEY,
            "generation": 1,
            "check": CHECK,
            "check_title": builtin_infos()[CHECK].title,
            "entity": CUSTOMERS,
            "state": "open",
            "opened_at": "2026-03-02T09:00:00+00:00",
            "resolved_at": None,
            "acknowledged_by": None,
            "worst_severity": "critical",
        },
        "incidents": [
            {
                "id": m.incident_id,
                "generation": 1,
                "check": CHECK,
                "severity": m.severity.value,
                "model": MODEL,
                "entity": CUSTOMERS,
                "field": m.field,
                "change": None,
                "previous_field": None,
                "message": m.message,
                "path": [MODEL, CUSTOMERS],
                "open": True,
                "links": incident_links,
            }
            for m in (EMAIL, PHONE)
        ],
        "added": [EMAIL.incident_id, PHONE.incident_id],
        "cleared": [],
        "changed": [],
        "links": {"entity": page("dataset", CUSTOMERS), "reports": {}},
    }


@pytest.mark.parametrize("action", list(TYPES))
def test_each_action_is_its_event_type_and_validates_against_the_shipped_schema(
    receiver: FakeReceiver, clock: FakeClock, action: Action
) -> None:
    acked = action == "acknowledge"
    closed = replace(PHONE, open=False)
    members = (replace(EMAIL, open=False), closed) if action == "resolve" else (EMAIL, closed)
    states = {"acknowledge": GroupState.ACKNOWLEDGED, "resolve": GroupState.RESOLVED}
    item = row(
        action,
        seq=2 if action in ("update", "reminder") else 0,
        members=members,
        cleared=(PHONE.incident_id,) if action == "update" else (),
        state=states.get(action, GroupState.OPEN),
        acknowledged_by="urn:li:corpuser:alice" if acked else None,
        resolved=action == "resolve",
        report={MODEL: "https://reports.example.com/churn.html"},
    )
    sink_for(receiver, clock).deliver(item, None)

    ((delivery,), (event,)) = receiver.deliveries, receiver.events
    assert delivery.verdict == ACCEPTED
    assert schema_errors(delivery.json()) == []
    assert event["type"] == TYPES[action]
    assert event["seq"] == item.seq
    assert event["links"]["reports"] == {MODEL: "https://reports.example.com/churn.html"}
    assert [i["open"] for i in event["incidents"]] == [action != "resolve", False]
    group = event["group"]
    assert group["state"] == states.get(action, GroupState.OPEN).value
    assert group["acknowledged_by"] == ("urn:li:corpuser:alice" if acked else None)
    assert group["resolved_at"] == ("2026-03-02T11:00:00+00:00" if action == "resolve" else None)
    # The worst open incident; once none is open, the worst of all.
    assert group["worst_severity"] == "critical"
    assert event["cleared"] == ([PHONE.incident_id] if action == "update" else [])


def test_a_write_back_row_is_refused_and_nothing_is_sent(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    with pytest.raises(DeliveryError) as caught:
        sink_for(receiver, clock).deliver(replace(row(), action="writeback"), None)
    assert caught.value.permanent
    assert receiver.requests == []


# --- the signature, as the receiver checks it --------------------------------------------------


def test_the_signature_is_the_hmac_of_timestamp_and_raw_body(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    sink_for(receiver, clock).deliver(row(), None)
    (delivery,) = receiver.deliveries
    signed = f"{delivery.timestamp}.".encode() + delivery.body
    expected = hmac.new(SECRET.encode(), signed, hashlib.sha256).hexdigest()
    assert delivery.signature == f"sha256={expected}"
    verify(SECRET, delivery.headers, delivery.body, clock.now().timestamp())  # no error


def test_a_tampered_body_or_a_wrong_secret_is_refused_by_the_receiver(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    sink_for(receiver, clock).deliver(row(), None)
    (genuine,) = receiver.deliveries
    tampered = genuine.body.replace(b'"critical"', b'"low"', 1)
    assert tampered != genuine.body
    answer = resend(receiver, tampered, genuine.headers)
    assert answer.status_code == 401
    now = clock.now().timestamp()
    with pytest.raises(ValueError, match="bad signature"):
        verify(SECRET, genuine.headers, tampered, now)
    with pytest.raises(ValueError, match="bad signature"):
        verify("another-secret-entirely", genuine.headers, genuine.body, now)

    # A sink configured with the wrong secret: refused, permanently, and nothing stored.
    with pytest.raises(DeliveryError) as caught:
        sink_for(receiver, clock, secret="whsec-wrong-" + "0" * 32).deliver(row("reminder"), None)
    assert caught.value.permanent
    assert "HTTP 401" in str(caught.value)
    assert [d.verdict for d in receiver.deliveries] == [ACCEPTED, "bad signature", "bad signature"]
    assert len(receiver.events) == 1


def test_a_replayed_delivery_is_refused_once_its_timestamp_is_old(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    sink_for(receiver, clock).deliver(row(), None)
    (genuine,) = receiver.deliveries
    receiver.clock = FakeClock(clock.now() + timedelta(minutes=5, seconds=1))
    answer = resend(receiver, genuine.body, genuine.headers)
    assert answer.status_code == 401
    assert "window" in answer.json()["error"]
    assert len(receiver.events) == 1


# --- retries the receiver deduplicates ---------------------------------------------------------


def test_a_retry_after_a_lost_502_is_the_same_event_freshly_signed(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    receiver.fail("POST", receiver.path, 502, "bad gateway", after=True)  # processed, answer lost
    sink = sink_for(receiver, clock)
    item = row()
    with pytest.raises(DeliveryError) as caught:
        sink.deliver(item, None)
    assert caught.value.sent
    assert not caught.value.permanent
    clock.advance(timedelta(seconds=90))
    sink.deliver(retried(item), None)

    first, second = receiver.deliveries
    assert [first.verdict, second.verdict] == [ACCEPTED, DUPLICATE]
    assert second.key == first.key
    assert second.body == first.body
    assert second.timestamp == first.timestamp + 90
    assert second.signature != first.signature
    assert len(receiver.events) == 1


def test_a_409_for_a_key_the_receiver_already_has_counts_as_delivered(clock: FakeClock) -> None:
    receiver = FakeReceiver(clock=clock, duplicate_status=409)
    with receiver.running():
        receiver.fail("POST", receiver.path, 504, after=True)
        sink = sink_for(receiver, clock)
        item = row()
        with pytest.raises(DeliveryError):
            sink.deliver(item, None)
        sink.deliver(retried(item), None)  # answered 409: no error
        assert [d.verdict for d in receiver.deliveries] == [ACCEPTED, DUPLICATE]
        assert len(receiver.events) == 1


def test_the_same_row_is_the_same_event_in_another_process(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    sink_for(receiver, clock).deliver(row(), None)
    (delivery,) = receiver.deliveries
    item = row()
    stored = {  # the row as another process reads it back from the store
        "payload": dict(item.payload),
        "action": item.action,
        "seq": item.seq,
        "dedupe_key": item.dedupe_key,
        "created_at": item.created_at.isoformat(),
    }
    code = (
        "import json, sys\n"
        "from datetime import datetime\n"
        "from mlcopilot.incidents.payload import OutboxItem, OutboxStatus, decode_notification\n"
        "from mlcopilot.notify.sinks.webhook import event_of\n"
        "r = json.loads(sys.stdin.read())\n"
        "at = datetime.fromisoformat(r['created_at'])\n"
        "item = OutboxItem(7, 'webhook', r['action'], '-', 1, r['seq'], r['dedupe_key'],\n"
        "    r['payload'], OutboxStatus.SENDING, 3, at, at, at, uncertain=True)\n"
        "event = event_of(item, decode_notification(item.payload), datahub_url=sys.argv[1])\n"
        "sys.stdout.write(event.model_dump_json())\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", code, DATAHUB],
        input=json.dumps(stored).encode(),
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
        capture_output=True,
        check=False,
    )
    assert other.returncode == 0, other.stderr.decode()
    assert other.stdout == delivery.body


def test_a_row_rewritten_before_its_retry_is_a_new_event_not_a_dropped_duplicate(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    """The policy folds a new change into an update not yet delivered: same row, new content."""
    receiver.fail("POST", receiver.path, 502, after=True)
    sink = sink_for(receiver, clock)
    first = row("update", seq=1, members=(EMAIL,), added=(EMAIL.incident_id,))
    with pytest.raises(DeliveryError):
        sink.deliver(first, None)
    folded = row("update", seq=1, added=(EMAIL.incident_id, PHONE.incident_id))
    assert folded.dedupe_key == first.dedupe_key
    sink.deliver(retried(folded), None)

    assert [d.verdict for d in receiver.deliveries] == [ACCEPTED, ACCEPTED]
    older, newer = receiver.events
    assert older["id"] != newer["id"]
    assert newer["added"] == [EMAIL.incident_id, PHONE.incident_id]


# --- what the receiver answers -----------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 413, 422])
def test_a_refusal_is_permanent(receiver: FakeReceiver, clock: FakeClock, status: int) -> None:
    receiver.fail("POST", receiver.path, status, {"error": "no such hook"})
    with pytest.raises(DeliveryError) as caught:
        sink_for(receiver, clock).deliver(row(), None)
    assert caught.value.permanent
    assert not caught.value.sent
    assert f"HTTP {status}" in str(caught.value)
    assert "no such hook" in str(caught.value)
    assert receiver.events == []


@pytest.mark.parametrize("status", [500, 502, 503, 408])
def test_a_server_error_is_transient_and_may_have_arrived(
    receiver: FakeReceiver, clock: FakeClock, status: int
) -> None:
    receiver.fail("POST", receiver.path, status, "try later", content_type="text/plain")
    sink = sink_for(receiver, clock)
    item = row()
    with pytest.raises(DeliveryError) as caught:
        sink.deliver(item, None)
    assert not caught.value.permanent
    assert caught.value.sent
    sink.deliver(retried(item), None)
    assert len(receiver.events) == 1


def test_a_429_is_waited_out_on_the_clock_and_the_retry_stamped_afresh(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    receiver.fail("POST", receiver.path, 429, {"error": "slow down"}, {"Retry-After": "3"})
    sink_for(receiver, clock).deliver(row(), None)

    assert len(clock.sleeps) == 1
    assert 3 <= clock.sleeps[0] < 4
    limited, accepted = receiver.deliveries
    assert [limited.verdict, accepted.verdict] == ["", ACCEPTED]
    assert accepted.body == limited.body
    assert accepted.timestamp >= limited.timestamp + 3
    assert len(receiver.events) == 1


def test_a_429_longer_than_the_bound_goes_back_to_the_relay(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    receiver.fail("POST", receiver.path, 429, {}, {"Retry-After": "120"})
    with pytest.raises(DeliveryError) as caught:
        sink_for(receiver, clock).deliver(row(), None)
    assert caught.value.retry_after == timedelta(seconds=120)
    assert not caught.value.permanent
    assert clock.sleeps == []
    assert receiver.events == []


def test_a_redirect_is_not_followed(receiver: FakeReceiver, clock: FakeClock) -> None:
    elsewhere = FakeServer()
    with elsewhere.running():
        receiver.fail("POST", receiver.path, 307, "", {"Location": f"{elsewhere.url}/steal"})
        with pytest.raises(DeliveryError) as caught:
            sink_for(receiver, clock).deliver(row(), None)
        assert caught.value.permanent
        assert "HTTP 307" in str(caught.value)
        assert elsewhere.requests == []


def test_an_internal_address_is_refused_before_anything_is_sent(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    with pytest.raises(DeliveryError) as caught:
        sink_for(receiver, clock, allow_local=False).deliver(row(), None)
    assert caught.value.permanent
    assert "internal address" in str(caught.value)
    assert receiver.requests == []


# --- deadlines ---------------------------------------------------------------------------------


def test_a_slow_drip_is_cut_at_the_calls_deadline(clock: FakeClock) -> None:
    receiver = FakeReceiver(clock=clock)
    with drip_server(interval=0.2, lifetime=30) as drip:  # headers, then a byte per 0.2 s
        sink = sink_for(receiver, clock, url=f"{drip.url}/hooks/mlcopilot", timeout_s=1.0)
        with pytest.raises(DeliveryError) as caught:
            sink.deliver(row(), None)
    assert "timed out" in str(caught.value)
    assert caught.value.sent
    assert not caught.value.permanent
    assert len(drip.requests) == 1


def test_an_answer_dripped_after_the_event_was_stored_is_retried_into_a_duplicate(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    receiver.slow_drip("POST", receiver.path, interval=0.5)  # stores it, answers a byte per 0.5 s
    sink = sink_for(receiver, clock, timeout_s=1.0)
    item = row()
    with pytest.raises(DeliveryError) as caught:
        sink.deliver(item, None)
    assert caught.value.sent
    sink.deliver(retried(item), None)
    assert [d.verdict for d in receiver.deliveries] == [ACCEPTED, DUPLICATE]
    assert len(receiver.events) == 1


# --- the secret --------------------------------------------------------------------------------


@pytest.mark.parametrize("secret", [SECRET, "tiny"])  # "tiny": too short for the redactor's list
def test_the_secret_is_in_no_body_header_or_error(clock: FakeClock, secret: str) -> None:
    receiver = FakeReceiver(clock=clock, secret=secret)
    errors: list[str] = []
    with receiver.running():
        sink = sink_for(receiver, clock, secret=secret, timeout_s=1.0)
        # A receiver that quotes its configuration back, a 5xx, a timeout, a refused address.
        receiver.fail("POST", receiver.path, 400, {"error": f"expected secret {secret}"})
        receiver.fail("POST", receiver.path, 503, f"secret={secret}", content_type="text/plain")
        receiver.fail("POST", receiver.path, delay=1.5)
        for _ in range(3):
            with pytest.raises(DeliveryError) as caught:
                sink.deliver(row(), None)
            errors.append(str(caught.value))
        with pytest.raises(DeliveryError) as caught:
            sink_for(receiver, clock, secret=secret, allow_local=False).deliver(row(), None)
        errors.append(str(caught.value))
        sink.deliver(row(), None)

    assert errors[0].startswith("webhook: HTTP 400")
    assert errors[1].startswith("webhook: HTTP 503")
    assert "timed out" in errors[2]
    assert all(secret not in error for error in errors), errors
    assert receiver.deliveries[-1].verdict == ACCEPTED
    for delivery in receiver.deliveries:
        assert secret.encode() not in delivery.body
        assert all(secret not in value for value in delivery.headers.values())


# --- configured from the environment, delivered by the relay ----------------------------------


def test_configured_from_the_environment_with_a_secret_file(
    tmp_path: Path, receiver: FakeReceiver, clock: FakeClock
) -> None:
    secret_file = tmp_path / "webhook-secret"
    secret_file.write_text(SECRET + "\n")  # as a mounted secret often ends
    settings = NotifySettings.from_env(
        {
            "MLCOPILOT_WEBHOOK_URL": receiver.endpoint,
            "MLCOPILOT_WEBHOOK_SECRET_FILE": str(secret_file),
            "MLCOPILOT_ALLOW_LOCAL_SINKS": "1",
        }
    )
    assert settings.webhook is not None
    assert "webhook" in settings.sinks
    WebhookSink(settings.webhook, clock=clock, signing_clock=clock).deliver(row(), None)
    assert [d.verdict for d in receiver.deliveries] == [ACCEPTED]


PII: Script = {CHECK: {CUSTOMERS: [("a", Severity.HIGH, None)]}}


def test_scans_open_update_and_resolve_through_the_relay(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        receiver = FakeReceiver(clock=w.clock)
        with receiver.running():
            sink = sink_for(receiver, w.clock)
            w.script = {CHECK: {CUSTOMERS: [("a", Severity.HIGH, None)]}}
            w.scan(sinks=[sink])
            w.clock.advance(timedelta(hours=1))
            w.script[CHECK][CUSTOMERS].append(("b", Severity.CRITICAL, None))
            w.scan(sinks=[sink])
            w.clock.advance(timedelta(hours=1))
            w.script = {}
            last = w.scan(sinks=[sink])
        assert last.relay is not None
        assert last.relay.ok
        assert [e["type"] for e in receiver.events] == [
            "incident.opened",
            "incident.updated",
            "incident.resolved",
        ]
        assert {d.verdict for d in receiver.deliveries} == {ACCEPTED}
        opened, updated, resolved = receiver.events
        assert len(opened["incidents"]) == 1
        assert len(updated["added"]) == 1
        assert updated["group"]["worst_severity"] == "critical"
        assert resolved["group"]["state"] == "resolved"
        assert len({e["group"]["key"] for e in receiver.events}) == 1


def test_a_lost_502_through_the_relay_reaches_the_receiver_once(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        receiver = FakeReceiver(clock=w.clock)
        with receiver.running():
            receiver.fail("POST", receiver.path, 502, after=True)
            sink = sink_for(receiver, w.clock)
            w.script = PII
            first = w.scan(sinks=[sink])
            assert first.relay is not None
            assert first.relay.retrying
            w.clock.advance(timedelta(minutes=10))
            again = w.scan(sinks=[sink])
        assert again.relay is not None
        assert again.relay.ok
        assert [d.verdict for d in receiver.deliveries] == [ACCEPTED, DUPLICATE]
        assert len(receiver.events) == 1
        with w.store() as store:
            (stored,) = [i for i in store.outbox() if i.sink == "webhook"]
        assert stored.status is OutboxStatus.DONE


# --- the schema --------------------------------------------------------------------------------


def test_the_shipped_schema_is_the_one_the_models_generate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shipped = resources.files("mlcopilot").joinpath("schemas/webhook-event-v1.json")
    assert shipped.read_text(encoding="utf-8") == event_json_schema_text(), (
        "src/mlcopilot/schemas/webhook-event-v1.json is not the schema the event's models "
        "(src/mlcopilot/notify/sinks/webhook_event.py) generate. Regenerate it:\n"
        "    .venv/bin/python -m mlcopilot.notify.sinks.webhook_event "
        "> src/mlcopilot/schemas/webhook-event-v1.json\n"
        "and check the difference: a key may be added to version 1 only as an optional one."
    )
    main()
    assert capsys.readouterr().out == event_json_schema_text()
    schema = shipped_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["version"]["const"] == 1
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["mlcopilot"]
    assert any(fnmatch("schemas/webhook-event-v1.json", g) for g in globs)


def test_the_receiver_refuses_an_event_the_schema_does_not_allow(
    receiver: FakeReceiver, clock: FakeClock
) -> None:
    """The receiver's schema check bites: every event the tests send passed it."""
    sink_for(receiver, clock).deliver(row(), None)
    (genuine,) = receiver.deliveries
    event = genuine.json() | {"extra": True, "id": "f" * 64}
    body = json.dumps(event).encode()
    timestamp = str(genuine.timestamp)
    signature = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    answer = httpx.post(
        receiver.endpoint,
        content=body,
        headers={
            "Content-Type": "application/json",
            "Idempotency-Key": "f" * 64,
            "X-Mlcopilot-Timestamp": timestamp,
            "X-Mlcopilot-Signature": f"sha256={signature.hexdigest()}",
        },
    )
    assert answer.status_code == 422
    assert "extra" in answer.json()["error"]
    assert len(receiver.events) == 1


def test_configured_by_the_environment_alone_a_scan_sends_signed_events(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        receiver = FakeReceiver()  # on the wall clock, as the sink dates its signatures
        with receiver.running():
            w.env |= {
                "MLCOPILOT_WEBHOOK_URL": receiver.endpoint,
                "MLCOPILOT_WEBHOOK_SECRET": SECRET,
            }
            w.script = PII
            w.scan()
            w.clock.advance(timedelta(hours=1))
            w.script = {}
            w.scan()
        assert [e["type"] for e in receiver.events] == ["incident.opened", "incident.resolved"]
        assert {d.verdict for d in receiver.deliveries} == {ACCEPTED}
        assert receiver.events[0]["links"]["entity"] == page("dataset", CUSTOMERS)
