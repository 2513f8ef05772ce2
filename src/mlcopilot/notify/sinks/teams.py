"""Microsoft Teams as a notification sink: an Adaptive Card per row, through a Workflows webhook.

Office 365 connectors are retired; a Teams channel or chat now takes incoming messages through
a Workflows (Power Automate) flow whose trigger is "When a Teams webhook request is received".
Its URL carries the flow's signature (``sig=``): it is the credential, a secret like a token.
It is never logged, put in an error, a warning or the database by this module: errors name
the status and Teams' error code and message, with the URL's workflow id and signature masked,
redacted again by :func:`~mlcopilot.redact.redact`.

Each outbox row (``open``, ``update``, ``reminder``, ``acknowledge``, ``resolve`` of one group)
is posted as one card (:mod:`~mlcopilot.notify.sinks.render_teams`): ``{"type": "message",
"attachments": [<the card>]}``. The flow answers ``202 Accepted`` when it was triggered. That
means the flow started, not that the card is in the channel: a card the flow then fails to
post (a card Teams refuses, an owner who lost access) fails in the flow's run history, where
only the flow's owner sees it; hence the card keeps to the elements every Teams client knows
and under Teams' size limit. A ``400`` (the trigger refused the body), ``401``/``403`` (the
signature is wrong or was regenerated) and ``404`` (the flow was deleted or turned off) are
permanent: the row goes to ``dead`` with a message that says to recreate the webhook, without
its URL. ``429`` is waited out on our clock up to ``max_rate_limit_wait_s``
(:class:`~mlcopilot.notify.sinks.http.Poster`), a longer wait goes back to the relay. Every call
has one total deadline and connects only to allowlisted addresses; redirects are not followed.

**No idempotency: a card can be posted twice.** Teams offers no idempotency key and no way to
read back what a webhook posted, so a card whose outcome is unknown cannot be looked for. The
window is exactly this, and nothing else duplicates:

- *Timeout or 5xx:* the POST was sent and no complete answer came (the deadline passed, the
  connection dropped after the request went out, or a gateway answered 5xx) — the flow may
  have been triggered. The error says ``sent=True``; the relay retries the row later, and the
  retry posts the card again: **two identical cards** if the first did go through. The retry's
  ``Delivered.warning`` says it may be a duplicate.
- *Crash:* the process died after Teams accepted the POST and before the outbox row was
  marked done. The row is claimed again after its lease, flagged uncertain, and posted again
  (the same warning).

To keep that window narrow, no POST is retried inside a call once it may have been sent: the
HTTP stack never retries a connection error, and only a ``429`` (the trigger's throttling
answer: the flow did not run) is sent again within a call. A connection that failed before
anything was sent (refused, unreachable, a connect timeout) is a plain transient error
(``sent=False``): its retry duplicates nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import ClassVar, Final
from urllib.parse import parse_qsl, urlsplit

import httpx

from mlcopilot.clock import Clock
from mlcopilot.incidents.payload import (
    Action,
    Delivered,
    DeliveryError,
    OutboxItem,
    SinkRef,
    decode_notification,
)
from mlcopilot.notify.sinks.config import TeamsSettings
from mlcopilot.notify.sinks.http import Poster, failed, retry_after
from mlcopilot.notify.sinks.render_teams import MESSAGE_LIMIT, message
from mlcopilot.redact import MASK, redact, register_secret
from mlcopilot.text.safe import clean

_JSON: Final = "application/json; charset=utf-8"
_REFUSED: Final = frozenset({401, 403, 404})
_NOT_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout)
"""Errors raised before any byte of the request went out: nothing can have been posted."""


class TeamsSink:
    """Posts one Adaptive Card per notification row to a Teams Workflows webhook.

    ``transport`` replaces the HTTP stack, as :class:`~mlcopilot.notify.sinks.slack.SlackSink`'s
    does.
    """

    name: ClassVar[str] = "teams"
    events: ClassVar[frozenset[Action]] = frozenset(
        {"open", "update", "reminder", "acknowledge", "resolve"}
    )

    def __init__(
        self,
        settings: TeamsSettings,
        *,
        clock: Clock,
        datahub_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._url = settings.webhook_url.get_secret_value().strip()
        register_secret(self._url)  # the settings loader does too; a sink built by hand also
        self._hidden = _identifiers(self._url)
        self._timeout_s = settings.timeout_s
        self._datahub_url = datahub_url
        self._http = Poster(settings, self._url, clock=clock, transport=transport)

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Post the row's card; Teams keeps no reference (``ref`` is not needed, none is made).

        Raises:
            DeliveryError: Not posted, or not known to be (``sent``); see the module's notes.
        """
        if item.action not in self.events:
            raise DeliveryError(f"Teams: no card for a {item.action!r} row", permanent=True)
        notification = decode_notification(item.payload)
        body = message(notification, datahub_url=self._datahub_url)
        if len(body) > MESSAGE_LIMIT:  # every text is cut: never seen, but never sent either
            raise DeliveryError(
                f"Teams: the card for {item.dedupe_key} is {len(body)} bytes, over Teams' "
                f"{MESSAGE_LIMIT}-byte message limit",
                permanent=True,
            )
        try:
            response = self._http.post(self._url, body, {"Content-Type": _JSON})
        except httpx.HTTPError as exc:
            sent = not isinstance(exc, _NOT_SENT)
            raise failed("Teams workflow", exc, total_s=self._timeout_s, sent=sent) from None
        status = response.status_code
        if 200 <= status < 300:
            if item.uncertain:
                return Delivered(warning=_possible_duplicate(item))
            return Delivered()
        raise _error(response, self._hide)

    def _hide(self, text: str) -> str:
        """``text`` without the URL's workflow id, signature or any other secret."""
        for part in self._hidden:
            text = text.replace(part, MASK)
        return redact(text)


def _identifiers(url: str) -> tuple[str, ...]:
    """The parts of the webhook URL an answer might echo, longest first.

    Its long path segments (the workflow id) and its query values (the signature).
    """
    parts = urlsplit(url)
    found = {s for s in parts.path.split("/") if len(s) >= 16}
    found |= {v for _, v in parse_qsl(parts.query) if len(v) >= 8}
    return tuple(sorted(found, key=len, reverse=True))


def _error(response: httpx.Response, hide: Callable[[str], str]) -> DeliveryError:
    """The error for a Teams answer that is not a success (never with the URL in it)."""
    status = response.status_code
    code = hide(_error_code(response))
    detail = f"HTTP {status}" + (f" ({code})" if code else "")
    if status == 429:
        wait = timedelta(seconds=retry_after(response.headers))
        return DeliveryError(redact(f"Teams workflow: rate limited, {detail}"), retry_after=wait)
    if status in _REFUSED:
        return DeliveryError(
            redact(
                f"Teams: the workflow webhook URL was refused ({detail}): the workflow was "
                "deleted or turned off, or its URL (its signature) changed. Recreate the "
                "webhook (a workflow triggered by 'When a Teams webhook request is received') "
                "and set teams.webhook_url (MLCOPILOT_TEAMS_WEBHOOK_URL) to its new URL"
            ),
            permanent=True,
        )
    if status == 400:
        return DeliveryError(
            redact(f"Teams workflow: the card was refused ({detail})"), permanent=True
        )
    if status == 413:
        return DeliveryError(
            redact(f"Teams workflow: the card is too large ({detail})"), permanent=True
        )
    if status == 408:  # the request did not arrive whole: the flow was not triggered
        return DeliveryError(redact(f"Teams workflow: {detail}"))
    if status >= 500:  # a gateway may have triggered the flow before it failed
        return DeliveryError(redact(f"Teams workflow: {detail}"), sent=True)
    return DeliveryError(redact(f"Teams workflow: {detail}"), permanent=True)


def _error_code(response: httpx.Response) -> str:
    """Teams' (Logic Apps') error code and message, cleaned and cut; empty if there is none.

    Logic Apps answers ``{"error": {"code": …, "message": …}}``; a proxy's page is not shown.
    """
    try:
        data = response.json()
    except ValueError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return ""
    code = clean(str(error.get("code") or ""), 60)
    text = clean(str(error.get("message") or ""), 160)
    return f"{code}: {text}" if code and text else code or text


def _possible_duplicate(item: OutboxItem) -> str:
    return (
        f"Teams: an earlier attempt at {item.dedupe_key} may already have posted its card; "
        "Teams offers no way to check (no idempotency key, no history for a webhook), so this "
        "card may be a duplicate"
    )
