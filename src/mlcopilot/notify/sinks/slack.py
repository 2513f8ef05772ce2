"""Slack as a notification sink, through slack_sdk: a bot's threads, or an incoming webhook.

Bot mode (``chat:write``) posts one root message per group with Block Kit, keeps its ``ts``,
threads every update under it and edits the root on resolution. Each message carries Slack
message metadata with its outbox dedupe key, so after an attempt whose outcome is unknown
(a crash after Slack accepted the post, a timeout) the sink looks for it in the channel
history (``channels:history``) before posting again. Without that scope the one window that
cannot be closed — killed after Slack accepted, before the row was marked done — is detected
(the row is ``uncertain``) and reported as a possible duplicate.

Webhook mode posts to the one channel the webhook was made for: no ``ts``, so no threads, no
edits and no reconciliation.

Both clients: the rate-limit retry handler on (it honours ``Retry-After``, sleeping on our
clock), no connection-error retry of posts (Slack has no idempotency key), no redirects, a
timeout on every call, and ≥1.1 s between posts to the same channel.
"""

from __future__ import annotations

import random
import ssl
import urllib.request
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn
from urllib.request import HTTPRedirectHandler, HTTPSHandler, OpenerDirector, Request

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web import SlackResponse
from slack_sdk.webhook import WebhookClient, WebhookResponse

from mlcopilot.clock import Clock
from mlcopilot.notify.codec import (
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
from mlcopilot.redact import redact

EVENT_TYPE = "mlcopilot_notification"
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


class _NoRedirect(HTTPRedirectHandler):
    """Refuse redirects: a 3xx becomes an error instead of a request to another address."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _opener(context: ssl.SSLContext | None) -> OpenerDirector:
    return urllib.request.build_opener(_NoRedirect(), HTTPSHandler(context=context))


class ClockRateLimitHandler(RetryHandler):
    """slack_sdk's ``RateLimitErrorRetryHandler``, waiting on our clock (tests never sleep)."""

    def __init__(self, clock: Clock, max_retry_count: int = 2) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self._clock = clock

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and response.status_code == 429

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
        self._clock.sleep(_retry_after(response.headers) + random.random())
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
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._no_redirects = _opener(self.ssl)

    def _perform_urllib_http_request_internal(self, url: str, req: Request) -> dict[str, Any]:
        if not url.lower().startswith(("https://", "http://")):
            raise SlackClientError("only http(s) URLs are allowed")
        with self._no_redirects.open(req, timeout=self.timeout) as resp:
            charset = resp.headers.get_content_charset() or "utf-8"
            body = resp.read().decode(charset)
            return {"status": resp.code, "headers": resp.headers, "body": body}


class _WebhookClient(WebhookClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._no_redirects = _opener(self.ssl)

    def _perform_http_request_internal(self, url: str, req: Request) -> WebhookResponse:
        if not url.lower().startswith(("https://", "http://")):
            raise SlackClientError("only http(s) URLs are allowed")
        with self._no_redirects.open(req, timeout=self.timeout) as resp:
            charset = resp.headers.get_content_charset() or "utf-8"
            body = resp.read().decode(charset)
            return WebhookResponse(
                url=url, status_code=resp.status, body=body, headers=resp.headers
            )


class SlackSink:
    """One root message per group in a channel, updates in its thread (bot token)."""

    def __init__(
        self, settings: SlackSettings, *, clock: Clock, datahub_url: str | None = None
    ) -> None:
        assert settings.bot_token is not None
        assert settings.channel is not None
        self._settings = settings
        self._channel = settings.channel
        self._datahub_url = datahub_url
        self._pacer = Pacer(clock, settings.post_spacing_s)
        self._client = _WebClient(
            token=settings.bot_token.get_secret_value(),
            base_url=settings.api_url,
            timeout=int(max(1, settings.timeout_s)),
            retry_handlers=[ClockRateLimitHandler(clock, max_retry_count=2)],
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
        found, warning = None, None
        if item.uncertain:
            found, warning = self._already_posted(item, channel, root_ts)
        if found is None:
            text, blocks = thread_message(notification, datahub_url=self._datahub_url)
            self._post(item, channel, text, blocks, thread_ts=root_ts)
        if item.action == "resolve":
            text, blocks = root_message(notification, datahub_url=self._datahub_url)
            self._pacer.wait(channel)
            self._api(
                "chat.update",
                lambda: self._client.chat_update(
                    channel=channel, ts=root_ts, text=text, blocks=blocks
                ),
            )
        return Delivered(warning=warning)

    def _open(self, notification: Notification, item: OutboxItem) -> Delivered:
        warning = None
        if item.uncertain:
            found, warning = self._already_posted(item, self._channel, None)
            if found is not None:
                channel, ts = found
                return Delivered(
                    ref=_ref(channel, ts),
                    warning="Slack: reused the root message an earlier attempt posted",
                )
        text, blocks = root_message(notification, datahub_url=self._datahub_url)
        data = self._post(item, self._channel, text, blocks, thread_ts=None)
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

        Returns ``((channel, ts), None)`` when found, ``(None, None)`` when surely absent, and
        ``(None, warning)`` when it cannot be checked (a duplicate is then possible).
        """
        if not self._settings.reconcile:
            return None, _possible_duplicate(item, "history reads are turned off")
        try:
            if thread_ts is None:
                data = self._api(
                    "conversations.history",
                    lambda: self._client.conversations_history(
                        channel=channel, limit=200, include_all_metadata=True
                    ),
                )
            else:
                data = self._api(
                    "conversations.replies",
                    lambda: self._client.conversations_replies(
                        channel=channel, ts=thread_ts, limit=200, include_all_metadata=True
                    ),
                )
        except DeliveryError as exc:
            return None, _possible_duplicate(item, str(exc))
        for message in data.get("messages") or []:
            payload = (message.get("metadata") or {}).get("event_payload") or {}
            if payload.get("dedupe_key") == item.dedupe_key:
                return (str(data.get("channel") or channel), str(message["ts"])), None
        return None, None

    def _api(
        self, method: str, call: Callable[[], SlackResponse], *, sends: bool = False
    ) -> dict[str, Any]:
        try:
            response = call()
        except SlackApiError as exc:
            _raise_api_error(method, exc, sends=sends)
        except (SlackClientError, OSError) as exc:
            raise DeliveryError(
                f"Slack {method}: {redact(type(exc).__name__ + ': ' + str(exc))}", sent=sends
            ) from None
        data = response.data
        return data if isinstance(data, dict) else {}


class SlackWebhookSink:
    """Posts every notification as a new message through an incoming webhook (no threads)."""

    def __init__(
        self, settings: SlackSettings, *, clock: Clock, datahub_url: str | None = None
    ) -> None:
        assert settings.webhook_url is not None
        self._datahub_url = datahub_url
        self._pacer = Pacer(clock, settings.post_spacing_s)
        self._client = _WebhookClient(
            url=settings.webhook_url.get_secret_value(),
            timeout=int(max(1, settings.timeout_s)),
            retry_handlers=[ClockRateLimitHandler(clock, max_retry_count=2)],
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
            raise DeliveryError(
                f"Slack webhook: {redact(type(exc).__name__ + ': ' + str(exc))}", sent=True
            ) from None
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
        raise DeliveryError(detail, retry_after=timedelta(seconds=_retry_after(headers))) from None
    if status >= 500 or error in ("internal_error", "fatal_error", "service_unavailable"):
        raise DeliveryError(detail, sent=sends) from None
    if error in _PERMANENT or 300 <= status < 500:
        raise DeliveryError(detail, permanent=True) from None
    raise DeliveryError(detail, sent=sends) from None
