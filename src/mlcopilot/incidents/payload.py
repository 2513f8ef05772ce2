"""Outbox payloads as JSON, and the contract between the relay and its sinks.

A GitHub or Slack outbox row stores one :class:`~mlcopilot.model.Notification` as JSON
(``"v": 1``). :func:`encode_notification` and :func:`decode_notification` are the only writer
and reader of that shape; rows already stored must keep reading back the same, so the layout
is fixed (``tests/notify/test_codec.py`` holds rows the store wrote and checks that they
re-encode to the same bytes). Reading validates through pydantic, so a damaged row fails
with a :class:`PayloadError` that names the bad key instead of a ``KeyError``.

The notification types live in :mod:`mlcopilot.model.notify`; they are re-exported here for
the sinks and commands that import them from this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Final, Protocol
from urllib.parse import quote, urlsplit

from pydantic import TypeAdapter, ValidationError

from mlcopilot.model.catalog import Urn
from mlcopilot.model.findings import CheckInfo
from mlcopilot.model.notify import (
    NOTIFY_SINKS,
    Action,
    Delivered,
    GroupSnapshot,
    GroupState,
    Member,
    Mention,
    Notification,
    NotifyPolicy,
    NotifyRequest,
    OutboxItem,
    OutboxStatus,
    PlannedRow,
    Route,
    SinkName,
    SinkRef,
    WatchedGroup,
    dedupe_key,
)
from mlcopilot.text.names import short_name

__all__ = [
    "NOTIFY_SINKS",
    "PAYLOAD_VERSION",
    "Action",
    "Delivered",
    "DeliveryError",
    "GroupSnapshot",
    "GroupState",
    "Member",
    "Mention",
    "Notification",
    "NotifyPolicy",
    "NotifyRequest",
    "OutboxItem",
    "OutboxStatus",
    "PayloadError",
    "PlannedRow",
    "Route",
    "Sink",
    "SinkName",
    "SinkRef",
    "WatchedGroup",
    "decode_notification",
    "dedupe_key",
    "encode_notification",
    "problems",
    "report_links",
    "report_url_problem",
    "route_of",
    "with_infos",
    "with_report",
    "with_route",
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


# --- payload encoding

PAYLOAD_VERSION: Final = 1
"""The ``v`` of every notification payload this version writes and the only one it reads."""

_NOTIFICATION: Final = TypeAdapter(Notification)
# A member's stored keys are its fields in their order, so pydantic writes them; the group
# and the infos keep their own key order and formats (isoformat times, sorted sets) by hand.
_MEMBERS: Final = TypeAdapter(tuple[Member, ...])


class PayloadError(ValueError):
    """An outbox payload that is not a notification this version can read."""


def encode_notification(notification: Notification) -> dict[str, Any]:
    """``notification`` as the JSON an outbox row stores."""
    group = notification.group
    return {
        "v": PAYLOAD_VERSION,
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
            "members": _MEMBERS.dump_python(group.members, mode="json"),
            **({"checks": _encode_infos(group.infos)} if group.infos else {}),
        },
        # Only when set, so rows from before it re-encode to the same bytes.
        **(
            {"report": dict(sorted(notification.report_urls.items()))}
            if notification.report_urls
            else {}
        ),
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


REPORT_PLACEHOLDER: Final = "{model}"
"""The one placeholder of ``report.url``: the model's name, URL-quoted."""
# What a link may hold (RFC 3986's unreserved, reserved and percent signs, less the ones that
# end a markdown link or a Slack <url|text>), so a URL drops into both bodies unescaped.
_URL_CHARS: Final = re.compile(r"^[A-Za-z0-9\-._~:/?#@!$&*+,;=%]*$")


def report_url_problem(template: str) -> str | None:
    """What is wrong with a ``report.url`` template, or None when it may be used.

    It must be an absolute ``https`` URL with a host and no ``user@`` part, with ``{model}``
    as its only placeholder, and none of the characters that would break out of a markdown
    link or a Slack link (spaces, quotes, brackets, ``<``, ``>``, ``|``).
    """
    bare = template.replace(REPORT_PLACEHOLDER, "")
    if "{" in bare or "}" in bare:
        return f"the only placeholder is {REPORT_PLACEHOLDER}"
    if not _URL_CHARS.fullmatch(bare):
        return "it holds characters a link cannot (spaces, quotes, brackets, <, >, |)"
    try:
        parts = urlsplit(bare)
    except ValueError:
        return "it is not a URL"
    if parts.scheme != "https" or not parts.hostname:
        return "it must be an https:// URL with a host"
    if "@" in parts.netloc:
        return "a URL with user@ credentials is not allowed"
    return None


def report_links(template: str, models: Iterable[Urn]) -> dict[Urn, str]:
    """Each model's report URL: ``template`` with ``{model}`` replaced by its quoted name.

    The template is assumed checked (:func:`report_url_problem`).
    """
    return {
        urn: template.replace(REPORT_PLACEHOLDER, quote(short_name(urn), safe=""))
        for urn in sorted(set(models))
    }


def with_report(payload: Mapping[str, Any], template: str | None) -> dict[str, Any]:
    """``payload`` linking each of its group's models to the report at ``template``.

    Set at planning time, so the row links to the report of the scan that planned it even
    when another run, with another ``report.url``, delivers it. No template: unchanged.
    """
    if template is None:
        return dict(payload)
    models = [m["model"] for m in payload["group"]["members"]]
    return {**payload, "report": report_links(template, models)}


def with_route(
    payload: Mapping[str, Any], target: SinkName, routes: Mapping[str, Sequence[Route]]
) -> dict[str, Any]:
    """``payload`` carrying what ``target``'s routes of its open members ask for.

    The GitHub labels a rule adds and the people a Slack message mentions, merged over the
    group's open members routed to ``target``; stored as ``route`` only when there is any, so
    a row without routing keeps its bytes.
    """
    labels: dict[str, None] = {}
    mentions: dict[tuple[str, str | None], None] = {}
    for member in payload["group"]["members"]:
        if not member.get("open"):
            continue
        for route in routes.get(member["incident_id"], ()):
            if route.target == target:
                labels.update(dict.fromkeys(route.labels))
                mentions.update(dict.fromkeys((m.name, m.member_id) for m in route.mentions))
    if not labels and not mentions:
        return dict(payload)
    extras: dict[str, Any] = {}
    if labels:
        extras["labels"] = list(labels)
    if mentions:
        extras["mentions"] = [{"name": name, "id": member} for name, member in mentions]
    return {**payload, "route": extras}


def route_of(payload: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[Mention, ...]]:
    """The labels and mentions a row's ``route`` carries (none for rows without one)."""
    route = payload.get("route")
    if not isinstance(route, Mapping):
        return (), ()
    labels = tuple(str(label) for label in route.get("labels") or ())
    mentions = tuple(
        Mention(str(m.get("name") or ""), m.get("id") or None)
        for m in route.get("mentions") or ()
        if isinstance(m, Mapping) and m.get("name")
    )
    return labels, mentions


def _encode_infos(infos: Mapping[str, CheckInfo]) -> dict[str, Any]:
    # The docs stay out: notifications do not show them, and they can be long.
    return {
        name: {
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
        for name, info in sorted(infos.items())
    }


def decode_notification(payload: Mapping[str, Any]) -> Notification:
    """The :class:`Notification` an outbox row's JSON holds.

    Keys this version does not know (``base``, which the policy adds) are ignored.

    Raises:
        PayloadError: The payload is of another version, or a key is missing or malformed;
            the message names each bad key by its path, e.g. ``group.members.0.severity``.
    """
    version = payload.get("v")
    if version != PAYLOAD_VERSION:
        raise PayloadError(
            f"outbox payload version {version!r} is not {PAYLOAD_VERSION}, the only one this "
            "mlcopilot reads (was it written by a newer mlcopilot?)"
        )
    data = dict(payload)
    if "report" in data:
        data["report_urls"] = data.pop("report")  # stored as ``report``
    group = data.get("group")
    if isinstance(group, Mapping) and "checks" in group:
        # Stored as ``checks``; the dataclass field is ``infos``.
        data["group"] = {k: v for k, v in group.items() if k != "checks"} | {
            "infos": group["checks"]
        }
    try:
        return _NOTIFICATION.validate_python(data)
    except ValidationError as exc:
        stored = {"infos": "checks", "report_urls": "report"}
        raise PayloadError(f"outbox payload: {problems(exc, stored=stored)}") from exc


def problems(exc: ValidationError, *, shown: int = 3, stored: Mapping[str, str] = {}) -> str:
    """What pydantic found wrong, one ``path: message (got value)`` per error.

    The path names keys as they are stored: ``stored`` maps a field name to its stored key
    where they differ. Only the first ``shown`` errors are listed, then how many more.
    """
    lines = []
    for error in exc.errors(include_url=False)[:shown]:
        path = ".".join(stored.get(p, p) if isinstance(p, str) else str(p) for p in error["loc"])
        value = error.get("input")
        scalar = isinstance(value, str | int | float | bool | None)
        got = f" (got {value!r})" if scalar and error["type"] != "missing" else ""
        lines.append(f"{path}: {error['msg']}{got}")
    more = exc.error_count() - shown
    return "; ".join(lines) + (f"; and {more} more" if more > 0 else "")
