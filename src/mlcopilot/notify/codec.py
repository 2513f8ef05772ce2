"""Outbox payloads as JSON, and the contract between the relay and its sinks.

A GitHub or Slack outbox row stores one :class:`~mlcopilot.model.Notification` as JSON
(``"v": 1``). :func:`encode_notification` and :func:`decode_notification` are the only writer
and reader of that shape; rows already stored must keep reading back the same, so the layout
is fixed (``tests/notify/test_codec.py`` holds rows the store wrote and checks that they
re-encode to the same bytes).

The notification types live in :mod:`mlcopilot.model.notify`; they are re-exported here for
the sinks and commands that import them from this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from mlcopilot.model.findings import CheckInfo, Severity
from mlcopilot.model.notify import (
    NOTIFY_SINKS,
    Action,
    Delivered,
    GroupSnapshot,
    GroupState,
    Member,
    Notification,
    NotifyPolicy,
    NotifyRequest,
    OutboxItem,
    OutboxStatus,
    PlannedRow,
    SinkName,
    SinkRef,
    WatchedGroup,
    dedupe_key,
)

__all__ = [
    "NOTIFY_SINKS",
    "Action",
    "Delivered",
    "DeliveryError",
    "GroupSnapshot",
    "GroupState",
    "Member",
    "Notification",
    "NotifyPolicy",
    "NotifyRequest",
    "OutboxItem",
    "OutboxStatus",
    "PlannedRow",
    "Sink",
    "SinkName",
    "SinkRef",
    "WatchedGroup",
    "decode_notification",
    "dedupe_key",
    "encode_notification",
    "with_infos",
]


class DeliveryError(Exception):
    """A sink could not deliver. ``retry_after`` is set for rate limits.

    ``permanent`` errors (bad credentials, a repository that does not exist, a payload the
    API refuses) go straight to ``dead``; transient ones are retried with backoff. ``sent``
    says the request may have reached the sink (timeout, 5xx): the next attempt reconciles.
    """

    def __init__(
        self,
        message: str,
        *,
        permanent: bool = False,
        retry_after: timedelta | None = None,
        sent: bool = False,
    ) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after
        self.sent = sent


class Sink(Protocol):
    """Delivers outbox rows to one external system, idempotently."""

    @property
    def name(self) -> SinkName:
        """Which sink this is."""
        ...

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Deliver ``item``; ``ref`` is where its group already lives in this sink, if anywhere.

        Raises:
            DeliveryError: It could not (yet) be delivered.
        """
        ...


# --- payload encoding: rows hold JSON; these are the only readers and writers of its shape


def encode_notification(notification: Notification) -> dict[str, Any]:
    """``notification`` as the JSON an outbox row stores."""
    group = notification.group
    return {
        "v": 1,
        "action": notification.action,
        "seq": notification.seq,
        "added": list(notification.added),
        "cleared": list(notification.cleared),
        "changed": list(notification.changed),
        "group": {
            "key": group.key,
            "generation": group.generation,
            "check": group.check,
            "entity": group.entity,
            "state": group.state.value,
            "opened_at": group.opened_at.isoformat(),
            "resolved_at": group.resolved_at.isoformat() if group.resolved_at else None,
            "acknowledged_by": group.acknowledged_by,
            "members": [
                {
                    "incident_id": m.incident_id,
                    "generation": m.generation,
                    "check": m.check,
                    "severity": m.severity.value,
                    "model": m.model,
                    "entity": m.entity,
                    "field": m.field,
                    "change": m.change,
                    "previous_field": m.previous_field,
                    "message": m.message,
                    "path": list(m.path),
                    "open": m.open,
                }
                for m in group.members
            ],
            **({"checks": _encode_infos(group.infos)} if group.infos else {}),
        },
    }


def with_infos(payload: Mapping[str, Any], infos: Mapping[str, CheckInfo]) -> dict[str, Any]:
    """``payload`` carrying the infos of its group's check and its members' checks.

    Copied at planning time, so the row renders the same if the check's plugin is uninstalled
    before the relay delivers it. Checks missing from ``infos`` are left out.
    """
    group = dict(payload["group"])
    names = {group["check"], *(m["check"] for m in group["members"])}
    group["checks"] = _encode_infos({name: infos[name] for name in names if name in infos})
    return {**payload, "group": group}


def _encode_infos(infos: Mapping[str, CheckInfo]) -> dict[str, Any]:
    return {name: _encode_info(infos[name]) for name in sorted(infos)}


def _encode_info(info: CheckInfo) -> dict[str, Any]:
    # The docs stay out: notifications do not show them, and they can be long.
    return {
        "name": info.name,
        "title": info.title,
        "tag": info.tag,
        "tag_description": info.tag_description,
        "incident_type": info.incident_type,
        "custom_incident_type": info.custom_incident_type,
        "why": info.why,
        "action": info.action,
        "folds_in": sorted(info.folds_in),
    }


def _decode_info(raw: Mapping[str, Any]) -> CheckInfo:
    return CheckInfo(
        name=raw["name"],
        title=raw["title"],
        tag=raw["tag"],
        tag_description=raw.get("tag_description", ""),
        incident_type=raw["incident_type"],
        custom_incident_type=raw.get("custom_incident_type"),
        why=raw.get("why", ""),
        action=raw.get("action", ""),
        folds_in=frozenset(raw.get("folds_in", ())),
    )


def decode_notification(payload: Mapping[str, Any]) -> Notification:
    """The :class:`Notification` an outbox row's JSON holds."""
    g = payload["group"]
    group = GroupSnapshot(
        key=g["key"],
        generation=int(g["generation"]),
        check=g["check"],
        entity=g["entity"],
        state=GroupState(g["state"]),
        opened_at=datetime.fromisoformat(g["opened_at"]),
        resolved_at=datetime.fromisoformat(g["resolved_at"]) if g.get("resolved_at") else None,
        acknowledged_by=g.get("acknowledged_by"),
        members=tuple(
            Member(
                incident_id=m["incident_id"],
                generation=int(m["generation"]),
                check=m["check"],
                severity=Severity(m["severity"]),
                model=m["model"],
                entity=m["entity"],
                field=m.get("field"),
                change=m.get("change"),
                previous_field=m.get("previous_field"),
                message=m["message"],
                path=tuple(m.get("path", ())),
                open=bool(m["open"]),
            )
            for m in g["members"]
        ),
        infos={name: _decode_info(raw) for name, raw in g.get("checks", {}).items()},
    )
    return Notification(
        action=payload["action"],
        seq=int(payload["seq"]),
        group=group,
        added=tuple(payload.get("added", ())),
        cleared=tuple(payload.get("cleared", ())),
        changed=tuple(payload.get("changed", ())),
    )
