"""Outbox payloads: rows already stored read back unchanged, and bad rows say what is wrong.

The files in ``stored/`` are payloads exactly as the store wrote them (the JSON text of
SQLite's ``outbox.payload``) before the codec moved to pydantic: a group with a plugin's check
folding in a built-in one, its update, and an acknowledged group's resolution. A row planned
before rows carried their checks' infos has no ``checks`` key (``resolve-before-infos.json``).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mlcopilot.incidents.payload import PayloadError, decode_notification, encode_notification
from mlcopilot.model import CheckInfo, GroupState, OutboxStatus, Severity
from testing.notify_world import CUSTOMERS, world

STORED = Path(__file__).parent / "stored"
ROWS = sorted(p.name for p in STORED.glob("*.json"))


def _stored(name: str) -> tuple[str, dict[str, Any]]:
    text = (STORED / name).read_text(encoding="utf-8").rstrip("\n")
    return text, json.loads(text)


def _without_base(payload: dict[str, Any]) -> dict[str, Any]:
    # ``base`` is the grouping state the policy appends to a row, not part of the notification.
    return {k: v for k, v in payload.items() if k != "base"}


@pytest.mark.parametrize("name", ROWS)
def test_a_stored_row_reencodes_to_the_same_bytes(name: str) -> None:
    text, payload = _stored(name)
    assert json.dumps(payload) == text  # what the store writes for a dict: json.dumps
    again = encode_notification(decode_notification(payload))
    assert json.dumps(again) == json.dumps(_without_base(payload))


def test_a_stored_row_decodes_to_what_it_says() -> None:
    _, payload = _stored("open.json")
    notification = decode_notification(payload)
    group = notification.group
    assert (notification.action, notification.seq, group.state) == ("open", 0, GroupState.OPEN)
    assert group.opened_at == datetime(2026, 3, 2, 9, 0, 0, 123456, tzinfo=UTC)
    drift = next(m for m in group.members if m.check == "schema_drift")
    assert (drift.severity, drift.change, drift.previous_field) == (
        Severity.CRITICAL,
        "renamed",
        "customer_id",
    )
    assert drift.path == (drift.model, drift.entity)
    plugin = group.infos["quarantined"]
    assert isinstance(plugin, CheckInfo)
    assert plugin.folds_in == frozenset({"schema_drift", "stale_source"})
    assert plugin.custom_incident_type == "QUARANTINED"
    assert plugin.action == "Wait for the data team \u2014 then rerun \u00abscan\u00bb."
    assert plugin.docs == ""  # docs stay out of rows


def test_an_acknowledged_resolution_keeps_who_and_when() -> None:
    _, payload = _stored("resolve-acknowledged.json")
    group = decode_notification(payload).group
    assert group.state is GroupState.RESOLVED
    assert group.acknowledged_by == "ana@example.com"
    assert group.resolved_at == datetime(2026, 3, 3, 9, 0, 0, 123456, tzinfo=UTC)
    assert not group.open_members


def test_a_row_from_before_infos_decodes_without_them() -> None:
    _, payload = _stored("resolve-before-infos.json")
    assert decode_notification(payload).group.infos == {}


_QUARANTINED = json.loads((STORED / "open.json").read_text())["group"]["checks"]["quarantined"]


def _broken(change: dict[str, Any]) -> dict[str, Any]:
    _, payload = _stored("open.json")
    group = {**payload["group"], **change.pop("group", {})}
    return {**payload, **change, "group": group}


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (
            _broken({"group": {"members": [{"incident_id": "x"}]}}),
            "group.members.0.severity: Field required",
        ),
        (_broken({"group": {"state": "closed"}}), "group.state: Input should be"),
        (_broken({"action": "shout"}), "action: Input should be"),
        (_broken({"group": {"opened_at": "yesterday"}}), "group.opened_at: Input should be"),
        (_broken({"seq": "first"}), "seq: Input should be a valid integer"),
        (
            # CheckInfo's own rules apply to a stored copy too.
            _broken({"group": {"checks": {"q": {**_QUARANTINED, "tag": "acme"}}}}),
            "group.checks.q: Value error, check info 'quarantined': tag 'acme' is not a tag urn",
        ),
        (_broken({"v": 2}), "version 2"),
        ({"v": 1}, "group: Field required"),
    ],
)
def test_a_bad_row_says_where_and_what_is_wrong(payload: dict[str, Any], says: str) -> None:
    with pytest.raises(PayloadError) as raised:
        decode_notification(payload)
    assert says in str(raised.value)


def test_the_relay_keeps_a_damaged_row_and_says_what_is_wrong_with_it(tmp_path: Path) -> None:
    with world(tmp_path) as w:
        w.script = {"pii_exposure": {CUSTOMERS: [("a", Severity.HIGH, None)]}}
        w.scan(deliver=False)
        with sqlite3.connect(w.state_url.removeprefix("sqlite:///")) as conn:
            row_id, text = conn.execute(
                "SELECT id, payload FROM outbox WHERE sink = 'github'"
            ).fetchone()
            payload = json.loads(text)
            payload["group"]["members"][0]["severity"] = "urgent"
            conn.execute(
                "UPDATE outbox SET payload = ? WHERE id = ?", (json.dumps(payload), row_id)
            )
        w.clock.advance(timedelta(minutes=1))
        relay = w.scan().relay

    assert relay is not None
    ((item, error),) = relay.retrying
    assert item.id == row_id
    assert "group.members.0.severity: Input should be" in error
    assert "(got 'urgent')" in error
    assert {d.sink for d in relay.delivered} == {"datahub", "slack"}  # the others went out
    assert not w.github.issues
    with w.store() as store:
        (stored,) = store.outbox(statuses=[OutboxStatus.PENDING])
    assert stored.id == row_id
    assert stored.last_error == error
