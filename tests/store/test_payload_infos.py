"""Outbox rows carry their checks' infos, so they stay deliverable without the check installed.

A row is planned in the scan's transaction and delivered later, maybe by a relay on another
machine; by then the plugin whose finding it reports may be gone. Rows planned before rows
carried infos (no copy in the payload) still render, from the built-in checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from mlcopilot.checks import builtin_infos
from mlcopilot.incidents.lifecycle import reconcile
from mlcopilot.incidents.payload import (
    NotifyPolicy,
    NotifyRequest,
    OutboxStatus,
    decode_notification,
)
from mlcopilot.model import CheckInfo
from mlcopilot.notify.sinks.render_github import issue_body, issue_title
from mlcopilot.notify.sinks.render_slack import root_message
from mlcopilot.store import SqlStore
from tests.store.test_store_contract import DS, MODEL, finding

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NULL_RATE = CheckInfo(
    name="null_rate",
    title="Null rate",
    tag="urn:li:tag:acme-null-rate",
    tag_description="Too many nulls upstream of a model.",
    incident_type="FIELD",
    why="Nulls turn into silent defaults in the features.",
    action="Backfill the column, then rerun the scan.",
)


def _notification_rows(store: SqlStore, infos: Mapping[str, CheckInfo]) -> list[dict[str, Any]]:
    request = NotifyRequest(
        policy=NotifyPolicy(group_wait=timedelta(0)), sinks=("github", "slack"), infos=infos
    )
    findings = [
        finding("email", check="null_rate", message="email is 40% null"),
        finding("id", check="schema_drift", entity=DS + "x", message="id removed"),
    ]
    changes = reconcile(store.incidents(), findings, evaluated=lambda *_: True, now=T0)
    store.record_scan(
        changes, started_at=T0, now=T0, catalog="c", models=[MODEL], findings=2, notify=request
    )
    rows = store.outbox(statuses=[OutboxStatus.PENDING])
    return [dict(r.payload) for r in rows if r.sink == "github"]


def test_a_planned_row_carries_its_checks_info(store: SqlStore) -> None:
    infos = {**builtin_infos(), "null_rate": NULL_RATE}
    payloads = _notification_rows(store, infos)
    by_check = {p["group"]["check"]: p for p in payloads}

    carried = by_check["null_rate"]["group"]["checks"]
    assert set(carried) == {"null_rate"}  # only the checks the group names
    assert carried["null_rate"]["title"] == "Null rate"
    assert carried["null_rate"]["action"] == NULL_RATE.action
    assert decode_notification(by_check["null_rate"]).group.infos["null_rate"] == NULL_RATE


def test_a_row_renders_from_its_copy_once_the_plugin_is_gone(store: SqlStore) -> None:
    (payload,) = [
        p
        for p in _notification_rows(store, {**builtin_infos(), "null_rate": NULL_RATE})
        if p["group"]["check"] == "null_rate"
    ]
    # What the relay does with the row: decode and render; nothing here knows null_rate.
    notification = decode_notification(payload)
    assert issue_title(notification).startswith("[mlcopilot] Null rate at ")
    body = issue_body(notification, datahub_url=None)
    assert NULL_RATE.why in body
    assert NULL_RATE.action in body
    _, blocks = root_message(notification, datahub_url=None)
    assert NULL_RATE.action in str(blocks)


def test_a_row_planned_before_rows_carried_infos_renders_from_the_builtin_check(
    store: SqlStore,
) -> None:
    (payload,) = [
        p
        for p in _notification_rows(store, builtin_infos())
        if p["group"]["check"] == "schema_drift"
    ]
    old = {**payload, "group": {k: v for k, v in payload["group"].items() if k != "checks"}}
    notification = decode_notification(old)
    assert notification.group.infos == {}
    drift = builtin_infos()["schema_drift"]
    assert issue_title(notification).startswith("[mlcopilot] Schema drift at ")
    body = issue_body(notification, datahub_url=None)
    assert drift.why in body
    assert drift.action in body
    assert body == issue_body(decode_notification(payload), datahub_url=None)


def test_a_check_known_nowhere_still_renders_from_its_name(store: SqlStore) -> None:
    # Planned without its info (e.g. by a hand resolve after the plugin was removed).
    (payload,) = [
        p for p in _notification_rows(store, builtin_infos()) if p["group"]["check"] == "null_rate"
    ]
    assert payload["group"]["checks"] == {}
    notification = decode_notification(payload)
    assert issue_title(notification).startswith("[mlcopilot] Null rate at ")
    assert "'null_rate' is not installed" in issue_body(notification, datahub_url=None)


def test_a_plugin_check_can_fold_others_in_through_its_info(store: SqlStore) -> None:
    quarantine = CheckInfo(
        name="quarantined",
        title="Quarantined source",
        tag="urn:li:tag:acme-quarantined",
        tag_description="A quarantined source feeds a model.",
        incident_type="OPERATIONAL",
        why="Quarantined data is under investigation.",
        action="Wait for the data team.",
        folds_in=frozenset({"schema_drift"}),
    )
    request = NotifyRequest(
        policy=NotifyPolicy(group_wait=timedelta(0)),
        sinks=("github",),
        infos={**builtin_infos(), "quarantined": quarantine},
    )
    findings = [
        finding(None, check="quarantined", message="quarantined"),
        finding("id", check="schema_drift", message="id removed"),
        finding("email", check="pii_exposure", message="pii"),
    ]
    changes = reconcile(store.incidents(), findings, evaluated=lambda *_: True, now=T0)
    store.record_scan(
        changes, started_at=T0, now=T0, catalog="c", models=[MODEL], findings=3, notify=request
    )
    groups = {
        p["group"]["check"]: sorted(m["check"] for m in p["group"]["members"])
        for p in (r.payload for r in store.outbox())
    }
    assert groups == {
        "quarantined": ["quarantined", "schema_drift"],
        "pii_exposure": ["pii_exposure"],
    }
