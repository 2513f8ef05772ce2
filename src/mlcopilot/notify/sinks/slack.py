"""Slack as a notification sink: a bot's threads through the Web API, or an incoming webhook.

Bot mode (``chat:write``) posts one root message per group with Block Kit, keeps its ``ts``,
threads every update under it and edits the root on resolution. A channel given by name
(``#ml-alerts``) is resolved to its id once per sink, before anything is read or posted
(``conversations.list``: ``channels:read``, ``groups:read`` for a private channel); every
read and post uses the id. Each message carries Slack message metadata with its outbox
dedupe key, so after an attempt whose outcome is unknown (a crash after Slack accepted the
post, a timeout) the sink looks for it before posting again: the channel history
(``channels:history``) or the thread, paged back to just before the outbox row was created
(no message for the row can be older), at most ``max_history_pages`` pages. Without that
scope, or past that bound, the one window that cannot be closed — killed after Slack
accepted, before the row was marked done — is detected (the row is ``uncertain``) and
reported as a possible duplicate.

Webhook mode posts to the one channel the webhook was made for: no ``ts``, so no threads, no
edits and no reconciliation.

Both go over the sinks' one HTTP stack (:mod:`~mlcopilot.notify.sinks.http`, GitHub's too):
every call has one total deadline (connect, send and the whole answer) and connects only to
allowlisted addresses, checked after DNS resolution; redirects are never followed; no
connection-error retry of posts (Slack has no idempotency key); ``Retry-After`` is waited out
on our clock only up to ``max_rate_limit_wait_s`` (well inside the relay's lease), a longer
one goes back to the relay, which reschedules the row; ≥1.1 s between posts to the same
channel. Every Web API method is a POST, as Slack's own SDK sends them: ``chat.postMessage``
and ``chat.update`` with a JSON body, the ``conversations.*`` reads (``list``, ``history``,
``replies``) with a form.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn
from urllib.parse import urlencode

import httpx

from mlcopilot.clock import Clock
from mlcopilot.incidents.payload import (
    Delivered,
    DeliveryError,
    Notification,
    OutboxItem,
    SinkName,
    SinkRef,
    decode_notification,
    route_of,
)
from mlcopilot.notify.sinks.config import SlackSettings
from mlcopilot.notify.sinks.http import Poster, failed, retry_after
from mlcopilot.notify.sinks.pacing import Pacer
from mlcopilot.notify.sinks.render_slack import root_message, thread_message
from mlcopilot.redact import redact

EVENT_TYPE = "mlcopilot_notification"
HISTORY_SKEW = timedelta(minutes=10)
"""How far before the outbox row's creation a history read starts: our clock and Slack's may
disagree; a message for the row cannot be older than the row by more than that."""
MAX_HISTORY_PAGES = 10
MAX_CHANNEL_PAGES = 10
_HISTORY_PAGE = 200  # Slack's advice for conversations.history and .replies
_CHANNEL_PAGE = 1000  # conversations.list's largest page
_JSON = "application/json;charset=utf-8"
_FORM = "application/x-www-form-urlencoded"
# Slack's channel names are lower case: an upper-case C…, G… (private) or D… (direct) is an id.
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{6,}$")
_PERMANENT = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "no_permission",
        "missing_scope",
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "msg_too_long",
        "invalid_blocks",
        "invalid_metadata_format",
        "message_not_found",
        "cant_update_message",
        "restricted_action",
    }
)


class _SlackError(DeliveryError):
    """A DeliveryError that keeps Slack's error code (``missing_scope``…), for the sink."""

    def __init__(self, message: str, *, error: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.error = error


class SlackSink:
    """One root message per group in a channel, updates in its thread (bot token).

    ``transport`` replaces the HTTP stack, as :class:`~mlcopilot.notify.sinks.github.GitHubSink`'s
    does: :mod:`mlcopilot.notify.sinks.preview` records the requests instead of sending them.
    """

    def __init__(
        self,
        settings: SlackSettings,
        *,
        clock: Clock,
        datahub_url: str | None = None,
        max_history_pages: int = MAX_HISTORY_PAGES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        assert settings.bot_token is not None
        assert settings.channel is not None
        self._settings = settings
        self._channel = settings.channel
        self._channel_id: str | None = None
        self._datahub_url = datahub_url
        self._max_history_pages = max_history_pages
        self._pacer = Pacer(clock, settings.post_spacing_s)
        self._api_url = settings.api_url.rstrip("/") + "/"
        self._auth = {"Authorization": f"Bearer {settings.bot_token.get_secret_value().strip()}"}
        self._http = Poster(settings, self._api_url, clock=clock, transport=transport)

    @property
    def name(self) -> SinkName:
        """``slack``."""
        return "slack"

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Post the root message, a thread reply, or the resolution (reply + edited root)."""
        notification = decode_notification(item.payload)
        if item.action == "open":
            return self._open(notification, item)
        if ref is None or not ref.data:
            raise DeliveryError(
                f"Slack: no root message is known for group {item.group_key} (its open was "
                "never delivered)",
                permanent=True,
            )
        channel, root_ts = str(ref.data["channel"]), str(ref.data["ts"])
        if not _CHANNEL_ID.fullmatch(channel):  # Slack answers posts with the id: never so far
            channel = self._resolve(channel)
        found, warning = None, None
        if item.uncertain:
            found, warning = self._already_posted(item, channel, root_ts)
        posted = False
        if found is None:
            text, blocks = thread_message(notification, datahub_url=self._datahub_url)
            self._post(item, channel, text, blocks, thread_ts=root_ts)
            posted = True
        if item.action == "resolve":
            text, blocks = root_message(notification, datahub_url=self._datahub_url)
            self._pacer.wait(channel)
            try:
                self._api(
                    "chat.update",
                    {"channel": channel, "ts": root_ts, "text": text, "blocks": blocks},
                )
            except DeliveryError as exc:
                if not posted:
                    raise
                # The reply went out: the next attempt must find it instead of posting it again.
                raise DeliveryError(
                    str(exc), permanent=exc.permanent, retry_after=exc.retry_after, sent=True
                ) from None
        return Delivered(warning=warning)

    def _configured_channel(self) -> str:
        """The configured channel's id, looked up once when it was given by name."""
        if self._channel_id is None:
            self._channel_id = self._resolve(self._channel)
        return self._channel_id

    def _resolve(self, channel: str) -> str:
        if _CHANNEL_ID.fullmatch(channel):
            return channel
        name = channel.removeprefix("#").lower()
        seen = 0
        cursor: str | None = None
        for _ in range(MAX_CHANNEL_PAGES):
            try:
                data = self._api(
                    "conversations.list",
                    {
                        "cursor": cursor,
                        "exclude_archived": True,
                        "limit": _CHANNEL_PAGE,
                        "types": "public_channel,private_channel",
                    },
                )
            except _SlackError as exc:
                if exc.error != "missing_scope":
                    raise
                raise DeliveryError(
                    f"Slack: cannot look up the channel #{name} by name: the bot token needs "
                    "the channels:read scope (and groups:read for a private channel); add "
                    "them, or configure the channel by its id (C…)",
                    permanent=True,
                ) from None
            channels = data.get("channels") or []
            seen += len(channels)
            for found in channels:
                if name in (str(found.get("name", "")).lower(), found.get("name_normalized")):
                    return str(found["id"])
            cursor = _next_cursor(data)
            if cursor is None:
                raise DeliveryError(
                    f"Slack: no channel named #{name} that the bot can see (of {seen}, archived "
                    "ones left out): check the name; a private channel needs groups:read and "
                    "the bot invited to it; or configure the channel by its id (C…)",
                    permanent=True,
                )
        raise DeliveryError(
            f"Slack: #{name} is not among the first {seen} channels; configure the channel by "
            "its id (C…)",
            permanent=True,
        )

    def _open(self, notification: Notification, item: OutboxItem) -> Delivered:
        channel = self._configured_channel()  # before anything is read or posted
        warning = None
        if item.uncertain:
            found, warning = self._already_posted(item, channel, None)
            if found is not None:
                channel, ts = found
                return Delivered(
                    ref=_ref(channel, ts),
                    warning="Slack: reused the root message an earlier attempt posted",
                )
        _, mentions = route_of(item.payload)
        text, blocks = root_message(notification, datahub_url=self._datahub_url, mentions=mentions)
        data = self._post(item, channel, text, blocks, thread_ts=None)
        return Delivered(ref=_ref(str(data["channel"]), str(data["ts"])), warning=warning)

    def _post(
        self,
        item: OutboxItem,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]],
        *,
        thread_ts: str | None,
    ) -> dict[str, Any]:
        self._pacer.wait(channel)
        metadata = {
            "event_type": EVENT_TYPE,
            "event_payload": {
                "dedupe_key": item.dedupe_key,
                "group_key": item.group_key,
                "generation": item.group_generation,
                "action": item.action,
            },
        }
        args = {
            "channel": channel,
            "text": text,
            "blocks": blocks,
            "thread_ts": thread_ts,
            "unfurl_links": False,
            "unfurl_media": False,
            "metadata": metadata,
        }
        return self._api("chat.postMessage", args, sends=True)

    def _already_posted(
        self, item: OutboxItem, channel: str, thread_ts: str | None
    ) -> tuple[tuple[str, str] | None, str | None]:
        """Find the message an uncertain earlier attempt may have posted, by its metadata.

        Reads the channel's history (the thread's replies for ``thread_ts``) newest first, page
        by page, back to :data:`HISTORY_SKEW` before the row was created, at most
        ``max_history_pages`` pages.

        Returns ``((channel, ts), None)`` when found, ``(None, None)`` when surely absent, and
        ``(None, warning)`` when it cannot be checked (a duplicate is then possible).
        """
        if not self._settings.reconcile:
            return None, _possible_duplicate(item, "history reads are turned off")
        created = item.created_at
        oldest = (created if created.tzinfo else created.replace(tzinfo=UTC)) - HISTORY_SKEW
        try:
            for page in self._history(channel, thread_ts, oldest):
                for message in page.get("messages") or []:
                    payload = (message.get("metadata") or {}).get("event_payload") or {}
                    if payload.get("dedupe_key") == item.dedupe_key:
                        return (str(page.get("channel") or channel), str(message["ts"])), None
        except (DeliveryError, _TooManyPages) as exc:
            return None, _possible_duplicate(item, str(exc))
        return None, None

    def _history(
        self, channel: str, thread_ts: str | None, oldest: datetime
    ) -> Iterator[dict[str, Any]]:
        """The pages of a channel's history or a thread since ``oldest``; raises past the bound."""
        method = "conversations.history" if thread_ts is None else "conversations.replies"
        cursor: str | None = None
        for _ in range(self._max_history_pages):
            page = self._api(
                method,
                {
                    "channel": channel,
                    "ts": thread_ts,
                    "cursor": cursor,
                    "include_all_metadata": True,
                    "limit": _HISTORY_PAGE,
                    "oldest": f"{oldest.timestamp():.6f}",
                },
            )
            yield page
            cursor = _next_cursor(page)
            if cursor is None:
                return
        raise _TooManyPages(
            f"{method} read {self._max_history_pages} pages of {_HISTORY_PAGE} messages since "
            f"{oldest.isoformat()} without reaching the end"
        )

    def _api(self, method: str, args: dict[str, Any], *, sends: bool = False) -> dict[str, Any]:
        """Call a Web API method with ``args`` (``None`` left out); Slack's answer or an error.

        ``chat.*`` take JSON; the reads take a form, booleans as ``1``/``0``.
        """
        given = {k: v for k, v in args.items() if v is not None}
        if method.startswith("chat."):
            body, kind = json.dumps(given).encode(), _JSON
        else:
            form = {k: int(v) if isinstance(v, bool) else v for k, v in given.items()}
            body, kind = urlencode(form).encode(), _FORM
        try:
            response = self._http.post(
                self._api_url + method, body, {**self._auth, "Content-Type": kind}
            )
        except httpx.HTTPError as exc:
            raise failed(
                f"Slack {method}", exc, total_s=self._settings.timeout_s, sent=sends
            ) from None
        data = _answer(response)
        if response.status_code == 200 and data.get("ok"):
            return data
        _raise_api_error(method, response, data, sends=sends)


class _TooManyPages(Exception):
    """A history read hit its page bound before reaching the outbox row's time."""


def _next_cursor(data: dict[str, Any]) -> str | None:
    cursor = (data.get("response_metadata") or {}).get("next_cursor")
    return str(cursor) if cursor else None


def _answer(response: httpx.Response) -> dict[str, Any]:
    """Slack's JSON answer; one that is not JSON (a proxy's page) as Slack's SDK words it."""
    try:
        data = json.loads(response.text)
    except ValueError:
        shown = "".join(line.strip() for line in response.text.replace("\r", "\n").split("\n"))
        shown = shown[:100] + "..." if len(shown) > 100 else shown
        return {"ok": False, "error": f"Received a response in a non-JSON format: {shown}"}
    return data if isinstance(data, dict) else {}


class SlackWebhookSink:
    """Posts every notification as a new message through an incoming webhook (no threads).

    ``transport`` is as :class:`SlackSink`'s.
    """

    def __init__(
        self,
        settings: SlackSettings,
        *,
        clock: Clock,
        datahub_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        assert settings.webhook_url is not None
        self._datahub_url = datahub_url
        self._timeout_s = settings.timeout_s
        self._pacer = Pacer(clock, settings.post_spacing_s)
        self._url = settings.webhook_url.get_secret_value()
        self._http = Poster(settings, self._url, clock=clock, transport=transport)

    @property
    def name(self) -> SinkName:
        """``slack``."""
        return "slack"

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Post one message; an uncertain earlier attempt cannot be checked (no history)."""
        notification = decode_notification(item.payload)
        if item.action in ("open", "resolve"):
            _, mentions = route_of(item.payload)
            text, blocks = root_message(
                notification, datahub_url=self._datahub_url, mentions=mentions
            )
        else:
            text, blocks = thread_message(notification, datahub_url=self._datahub_url)
            blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}, *blocks]
        self._pacer.wait("webhook")
        message = {"text": text, "blocks": blocks, "unfurl_links": False, "unfurl_media": False}
        try:
            response = self._http.post(
                self._url, json.dumps(message).encode(), {"Content-Type": _JSON}
            )
        except httpx.HTTPError as exc:
            raise failed("Slack webhook", exc, total_s=self._timeout_s, sent=True) from None
        status = response.status_code
        if status == 200:
            if item.uncertain:
                return Delivered(warning=_possible_duplicate(item, "webhooks cannot be checked"))
            return Delivered()
        detail = redact(f"Slack webhook: HTTP {status} ({response.text[:100]})")
        if status == 429:
            raise DeliveryError(
                detail, retry_after=timedelta(seconds=retry_after(response.headers))
            )
        raise DeliveryError(detail, permanent=status < 500, sent=status >= 500)


def _ref(channel: str, ts: str) -> SinkRef:
    return SinkRef("slack", f"{channel}/{ts}", None, {"channel": channel, "ts": ts})


def _possible_duplicate(item: OutboxItem, why: str) -> str:
    return (
        f"Slack: an earlier attempt at {item.dedupe_key} may already have posted; it could not "
        f"be checked ({why}), so this message may be a duplicate"
    )


def _raise_api_error(
    method: str, response: httpx.Response, data: dict[str, Any], *, sends: bool
) -> NoReturn:
    status = response.status_code
    error = str(data.get("error", ""))
    detail = redact(f"Slack {method}: HTTP {status}" + (f" ({error})" if error else ""))
    if status == 429 or error == "ratelimited":
        wait = timedelta(seconds=retry_after(response.headers))
        raise _SlackError(detail, error=error, retry_after=wait) from None
    if status >= 500 or error in ("internal_error", "fatal_error", "service_unavailable"):
        raise _SlackError(detail, error=error, sent=sends) from None
    if error in _PERMANENT or 300 <= status < 500:
        raise _SlackError(detail, error=error, permanent=True) from None
    raise _SlackError(detail, error=error, sent=sends) from None
