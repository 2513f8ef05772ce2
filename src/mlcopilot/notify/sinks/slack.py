"""Slack as a notification sink, through slack_sdk: a bot's threads, or an incoming webhook.

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

Both clients: every call has one total deadline (connect, send and the whole answer:
:mod:`~mlcopilot.notify.sinks.slack_http`) and connects only to allowlisted addresses, checked
after DNS resolution; redirects are never followed; no connection-error retry of posts
(Slack has no idempotency key); ``Retry-After`` is waited out on our clock only up to
``max_rate_limit_wait_s`` (well inside the relay's lease), a longer one goes back to the relay,
which reschedules the row; ≥1.1 s between posts to the same channel.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn
from urllib.error import URLError
from urllib.request import Request

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web import SlackResponse
from slack_sdk.webhook import WebhookClient, WebhookResponse

from mlcopilot.clock import Clock
from mlcopilot.incidents.payload import (
    Delivered,
    DeliveryError,
    Notification,
    OutboxItem,
    SinkName,
    SinkRef,
    decode_notification,
)
from mlcopilot.notify.sinks.config import SlackSettings
from mlcopilot.notify.sinks.pacing import Pacer
from mlcopilot.notify.sinks.render_slack import root_message, thread_message
from mlcopilot.notify.sinks.slack_http import open_url
from mlcopilot.notify.sinks.urls import AddressPolicy, RefusedAddress
from mlcopilot.redact import redact

EVENT_TYPE = "mlcopilot_notification"
Opener = Callable[..., tuple[int, Any, bytes]]
"""How a client sends one request: :func:`~mlcopilot.notify.sinks.slack_http.open_url`'s
signature (``req``; ``total``, ``per_read``, ``policy``, ``context``), answering status, headers
and body. Replaced only to record requests instead of sending them (the demo's preview)."""
HISTORY_SKEW = timedelta(minutes=10)
"""How far before the outbox row's creation a history read starts: our clock and Slack's may
disagree; a message for the row cannot be older than the row by more than that."""
MAX_HISTORY_PAGES = 10
MAX_CHANNEL_PAGES = 10
_HISTORY_PAGE = 200  # Slack's advice for conversations.history and .replies
_CHANNEL_PAGE = 1000  # conversations.list's largest page
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


class ClockRateLimitHandler(RetryHandler):
    """slack_sdk's ``RateLimitErrorRetryHandler``, waiting on our clock and never long.

    A ``Retry-After`` is waited out (plus up to a second of jitter) only while the waits of one
    call stay within ``max_wait_s``; a longer one is left to the caller as the 429 it is (the
    sink raises ``DeliveryError(retry_after=…)`` and the relay reschedules the row), so no wait
    here outlives the relay's lease on the row.
    """

    def __init__(self, clock: Clock, *, max_wait_s: float, max_retry_count: int = 2) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self._clock = clock
        self._max_wait_s = max_wait_s

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        waited = float((state.custom_values or {}).get("waited_s", 0.0))
        return waited + _retry_after(response.headers) + 1.0 <= self._max_wait_s

    def prepare_for_next_attempt(  # noqa: D102 - see RetryHandler
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        if response is None:  # pragma: no cover - _can_retry needs a response
            raise error or RuntimeError("no response to retry")
        state.next_attempt_requested = True
        wait = _retry_after(response.headers) + random.random()
        values = state.custom_values or {}
        state.custom_values = {**values, "waited_s": float(values.get("waited_s", 0.0)) + wait}
        self._clock.sleep(wait)
        state.increment_current_attempt()


def _retry_after(headers: dict[str, list[str]] | Any) -> float:
    for key, value in dict(headers).items():
        if str(key).lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return max(0.0, float(raw))
            except ValueError:
                return 1.0
    return 1.0


class _WebClient(WebClient):
    """slack_sdk's client over :func:`open_url`: a total deadline, checked addresses."""

    def __init__(
        self,
        *args: Any,
        total_s: float,
        policy: AddressPolicy,
        opener: Opener = open_url,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._total_s = total_s
        self._policy = policy
        self._opener = opener

    def _perform_urllib_http_request_internal(self, url: str, req: Request) -> dict[str, Any]:
        if not url.lower().startswith(("https://", "http://")):
            raise SlackClientError("only http(s) URLs are allowed")
        status, headers, body = self._opener(
            req, total=self._total_s, per_read=self.timeout, policy=self._policy, context=self.ssl
        )
        charset = headers.get_content_charset() or "utf-8"
        return {"status": status, "headers": headers, "body": body.decode(charset)}


class _WebhookClient(WebhookClient):
    """slack_sdk's webhook client over :func:`open_url`: a total deadline, checked addresses."""

    def __init__(
        self,
        *args: Any,
        total_s: float,
        policy: AddressPolicy,
        opener: Opener = open_url,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._total_s = total_s
        self._policy = policy
        self._opener = opener

    def _perform_http_request_internal(self, url: str, req: Request) -> WebhookResponse:
        if not url.lower().startswith(("https://", "http://")):
            raise SlackClientError("only http(s) URLs are allowed")
        status, headers, body = self._opener(
            req, total=self._total_s, per_read=self.timeout, policy=self._policy, context=self.ssl
        )
        charset = headers.get_content_charset() or "utf-8"
        return WebhookResponse(
            url=url, status_code=status, body=body.decode(charset), headers=headers
        )


class _SlackError(DeliveryError):
    """A DeliveryError that keeps Slack's error code (``missing_scope``…), for the sink."""

    def __init__(self, message: str, *, error: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.error = error


def _policy(settings: SlackSettings) -> AddressPolicy:
    return AddressPolicy.of(settings.allowed_hosts, allow_loopback=settings.allow_local)


class SlackSink:
    """One root message per group in a channel, updates in its thread (bot token).

    ``opener`` replaces :func:`~mlcopilot.notify.sinks.slack_http.open_url` under slack_sdk:
    :mod:`mlcopilot.notify.sinks.preview` records the requests instead of sending them.
    """

    def __init__(
        self,
        settings: SlackSettings,
        *,
        clock: Clock,
        datahub_url: str | None = None,
        max_history_pages: int = MAX_HISTORY_PAGES,
        opener: Opener = open_url,
    ) -> None:
        assert settings.bot_token is not None
        assert settings.channel is not None
        self._settings = settings
        self._channel = settings.channel
        self._channel_id: str | None = None
        self._datahub_url = datahub_url
        self._max_history_pages = max_history_pages
        self._pacer = Pacer(clock, settings.post_spacing_s)
        self._client = _WebClient(
            token=settings.bot_token.get_secret_value(),
            base_url=settings.api_url,
            timeout=int(max(1, settings.timeout_s)),
            retry_handlers=[
                ClockRateLimitHandler(clock, max_wait_s=settings.max_rate_limit_wait_s)
            ],
            total_s=settings.timeout_s,
            policy=_policy(settings),
            opener=opener,
        )

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
                    lambda: self._client.chat_update(
                        channel=channel, ts=root_ts, text=text, blocks=blocks
                    ),
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
                    _bound(
                        self._client.conversations_list,
                        types="public_channel,private_channel",
                        exclude_archived=True,
                        limit=_CHANNEL_PAGE,
                        cursor=cursor,
                    ),
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
        text, blocks = root_message(notification, datahub_url=self._datahub_url)
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
        args: dict[str, Any] = {
            "channel": channel,
            "text": text,
            "blocks": blocks,
            "metadata": metadata,
            "unfurl_links": False,
            "unfurl_media": False,
        }
        if thread_ts is not None:
            args["thread_ts"] = thread_ts
        return self._api(
            "chat.postMessage", lambda: self._client.chat_postMessage(**args), sends=True
        )

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
            args: dict[str, Any] = {
                "channel": channel,
                "oldest": f"{oldest.timestamp():.6f}",
                "limit": _HISTORY_PAGE,
                "include_all_metadata": True,
                "cursor": cursor,
            }
            if thread_ts is None:
                page = self._api(method, _bound(self._client.conversations_history, **args))
            else:
                call = _bound(self._client.conversations_replies, ts=thread_ts, **args)
                page = self._api(method, call)
            yield page
            cursor = _next_cursor(page)
            if cursor is None:
                return
        raise _TooManyPages(
            f"{method} read {self._max_history_pages} pages of {_HISTORY_PAGE} messages since "
            f"{oldest.isoformat()} without reaching the end"
        )

    def _api(
        self, method: str, call: Callable[[], SlackResponse], *, sends: bool = False
    ) -> dict[str, Any]:
        try:
            response = call()
        except SlackApiError as exc:
            _raise_api_error(method, exc, sends=sends)
        except (SlackClientError, OSError) as exc:
            _raise_transport_error(f"Slack {method}", exc, sends=sends)
        data = response.data
        return data if isinstance(data, dict) else {}


class _TooManyPages(Exception):
    """A history read hit its page bound before reaching the outbox row's time."""


def _bound(function: Callable[..., SlackResponse], **kwargs: Any) -> Callable[[], SlackResponse]:
    """``function`` bound to ``kwargs``, ``None`` values left out (slack_sdk sends them as text)."""
    given = {k: v for k, v in kwargs.items() if v is not None}
    return lambda: function(**given)


def _next_cursor(data: dict[str, Any]) -> str | None:
    cursor = (data.get("response_metadata") or {}).get("next_cursor")
    return str(cursor) if cursor else None


def _raise_transport_error(what: str, exc: Exception, *, sends: bool) -> NoReturn:
    reason = exc.reason if isinstance(exc, URLError) else exc
    if isinstance(reason, RefusedAddress):
        raise DeliveryError(f"{what}: {reason}", permanent=True) from None
    raise DeliveryError(
        f"{what}: {redact(type(exc).__name__ + ': ' + str(exc))}", sent=sends
    ) from None


class SlackWebhookSink:
    """Posts every notification as a new message through an incoming webhook (no threads).

    ``opener`` is as :class:`SlackSink`'s.
    """

    def __init__(
        self,
        settings: SlackSettings,
        *,
        clock: Clock,
        datahub_url: str | None = None,
        opener: Opener = open_url,
    ) -> None:
        assert settings.webhook_url is not None
        self._datahub_url = datahub_url
        self._pacer = Pacer(clock, settings.post_spacing_s)
        self._client = _WebhookClient(
            url=settings.webhook_url.get_secret_value(),
            timeout=int(max(1, settings.timeout_s)),
            retry_handlers=[
                ClockRateLimitHandler(clock, max_wait_s=settings.max_rate_limit_wait_s)
            ],
            total_s=settings.timeout_s,
            policy=_policy(settings),
            opener=opener,
        )

    @property
    def name(self) -> SinkName:
        """``slack``."""
        return "slack"

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Post one message; an uncertain earlier attempt cannot be checked (no history)."""
        notification = decode_notification(item.payload)
        if item.action in ("open", "resolve"):
            text, blocks = root_message(notification, datahub_url=self._datahub_url)
        else:
            text, blocks = thread_message(notification, datahub_url=self._datahub_url)
            blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}, *blocks]
        self._pacer.wait("webhook")
        try:
            response = self._client.send(
                text=text, blocks=blocks, unfurl_links=False, unfurl_media=False
            )
        except (SlackClientError, OSError) as exc:
            _raise_transport_error("Slack webhook", exc, sends=True)
        status = response.status_code
        if status == 200:
            if item.uncertain:
                return Delivered(warning=_possible_duplicate(item, "webhooks cannot be checked"))
            return Delivered()
        detail = redact(f"Slack webhook: HTTP {status} ({str(response.body)[:100]})")
        if status == 429:
            raise DeliveryError(
                detail, retry_after=timedelta(seconds=_retry_after(response.headers))
            )
        raise DeliveryError(detail, permanent=status < 500, sent=status >= 500)


def _ref(channel: str, ts: str) -> SinkRef:
    return SinkRef("slack", f"{channel}/{ts}", None, {"channel": channel, "ts": ts})


def _possible_duplicate(item: OutboxItem, why: str) -> str:
    return (
        f"Slack: an earlier attempt at {item.dedupe_key} may already have posted; it could not "
        f"be checked ({why}), so this message may be a duplicate"
    )


def _raise_api_error(method: str, exc: SlackApiError, *, sends: bool) -> NoReturn:
    response = exc.response
    status = response.status_code
    error = str(response.get("error", "")) if isinstance(response.data, dict) else ""
    detail = redact(f"Slack {method}: HTTP {status}" + (f" ({error})" if error else ""))
    if status == 429 or error == "ratelimited":
        headers = response.headers or {}
        wait = timedelta(seconds=_retry_after(headers))
        raise _SlackError(detail, error=error, retry_after=wait) from None
    if status >= 500 or error in ("internal_error", "fatal_error", "service_unavailable"):
        raise _SlackError(detail, error=error, sent=sends) from None
    if error in _PERMANENT or 300 <= status < 500:
        raise _SlackError(detail, error=error, permanent=True) from None
    raise _SlackError(detail, error=error, sent=sends) from None
