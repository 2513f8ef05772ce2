"""Sinks that show instead of send: the real GitHub and Slack sinks, on a recording transport.

:class:`PreviewGitHub` runs :class:`~mlcopilot.notify.sinks.github.GitHubSink` and
:class:`PreviewSlack` runs :class:`~mlcopilot.notify.sinks.slack.SlackSink` (or, for a webhook,
:class:`~mlcopilot.notify.sinks.slack.SlackWebhookSink`), each on an ``httpx.MockTransport``
that never connects. Each answers as GitHub or Slack would for a repository or
channel holding nothing of ours yet (no earlier issue or message; the labels exist) and records
every write the sink makes: method, path and body, byte for byte as it would go out. So
``mlcopilot demo`` without credentials shows what the sinks send, rendered once, by the sinks
(``tests/notify/sinks/test_preview.py`` compares it with what the local fakes receive).

The reads a sink makes first (the bot's login, the issue list, a label, a channel's id by its
name) are answered but not recorded. Nothing carries a real token.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from mlcopilot.clock import SystemClock
from mlcopilot.incidents.payload import Delivered, OutboxItem, SinkName, SinkRef
from mlcopilot.notify.sinks.config import GitHubSettings, NotifySettings, SlackSettings
from mlcopilot.notify.sinks.github import GitHubSink
from mlcopilot.notify.sinks.slack import SlackSink, SlackWebhookSink
from mlcopilot.settings import Settings

PREVIEW_REPO = "OWNER/REPO"
"""The repository previews address when none is configured."""
PREVIEW_CHANNEL = "CHANNELID"
"""The channel id previews post to when none is configured, or when a channel is configured by
name (Slack would answer its lookup with the real id)."""
_TOKEN = SecretStr("preview-not-a-token")
_WEBHOOK = "https://hooks.slack.com/services/PREVIEW"
_LOGIN = "mlcopilot-preview"


@dataclass(frozen=True, slots=True)
class Preview:
    """One request a sink would have made."""

    sink: SinkName
    action: str
    """The outbox action (``open``, ``update``, ``resolve``...), or ``close`` / ``edit root``
    for the second request of a resolution."""
    request: str
    """``POST /repos/OWNER/REPO/issues`` or ``POST chat.postMessage``."""
    body: bytes
    """The request's body, exactly as the sink sends it (JSON)."""

    @property
    def payload(self) -> dict[str, Any]:
        """The body, decoded."""
        data = json.loads(self.body)
        return data if isinstance(data, dict) else {}


@dataclass(frozen=True, slots=True)
class PreviewTargets:
    """Where previews are addressed: the configured repository, label and channel.

    Placeholders (:data:`PREVIEW_REPO`, :data:`PREVIEW_CHANNEL`) where none is configured; the
    preview sinks replace any token with one that is not.
    """

    github: GitHubSettings = field(
        default_factory=lambda: GitHubSettings(repo=PREVIEW_REPO, token=_TOKEN)
    )
    slack: SlackSettings = field(
        default_factory=lambda: SlackSettings(channel=PREVIEW_CHANNEL, bot_token=_TOKEN)
    )

    @classmethod
    def from_settings(cls, settings: Settings, notify: NotifySettings) -> PreviewTargets:
        """The sinks' settings where configured (``notify``, checked), else placeholders.

        The placeholders still carry the configured label and bot login (``settings``).
        """
        github = notify.github or GitHubSettings(
            repo=PREVIEW_REPO,
            token=_TOKEN,
            label=settings.github.label,
            ack_label=settings.github.ack_label,
            bot_login=settings.github.bot_login or None,
        )
        slack = notify.slack or SlackSettings(channel=PREVIEW_CHANNEL, bot_token=_TOKEN)
        return cls(github=github, slack=slack)


class PreviewGitHub:
    """The real :class:`GitHubSink`, answered by a mock GitHub; records its writes in ``sent``."""

    def __init__(
        self,
        settings: GitHubSettings | None = None,
        *,
        datahub_url: str | None = None,
        sent: list[Preview] | None = None,
    ) -> None:
        self.settings = (settings or PreviewTargets().github).model_copy(
            update={"token": _TOKEN, "write_spacing_s": 0.0}
        )
        self.sent: list[Preview] = [] if sent is None else sent
        self._numbers = itertools.count(1)
        self._action = ""
        self._sink = GitHubSink(
            self.settings,
            clock=SystemClock(),
            datahub_url=datahub_url,
            transport=httpx.MockTransport(self._answer),
        )

    @property
    def name(self) -> SinkName:
        """``github``."""
        return "github"

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """What :class:`GitHubSink` does for this row, recorded instead of sent."""
        self._action = item.action
        return self._sink.deliver(item, ref)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET":
            if path.endswith("/user"):
                return httpx.Response(200, json={"login": _LOGIN})
            if "/labels/" in path:
                return httpx.Response(200, json={"name": path.rsplit("/", 1)[-1]})
            if path.endswith(("/issues", "/comments")):
                return httpx.Response(200, json=[])  # nothing of ours there yet
            return httpx.Response(404, json={"message": "Not Found"})
        body = request.read()
        if request.method == "POST" and path.endswith("/issues"):
            action, number = "open", next(self._numbers)
            answer = {"number": number, "html_url": f"(preview #{number})"}
        elif request.method == "PATCH":
            action, answer = "close", {"state": "closed"}
        else:
            action, answer = self._action, {"id": 1}
        self.sent.append(Preview("github", action, f"{request.method} {path}", body))
        return httpx.Response(200 if request.method == "PATCH" else 201, json=answer)


class PreviewSlack:
    """The real Slack sink, answered by a mock Slack; records its posts in ``sent``.

    A bot (:class:`SlackSink`) unless ``settings`` configure a webhook
    (:class:`SlackWebhookSink`, its address replaced: it is a secret).
    """

    def __init__(
        self,
        settings: SlackSettings | None = None,
        *,
        datahub_url: str | None = None,
        sent: list[Preview] | None = None,
    ) -> None:
        settings = settings or PreviewTargets().slack
        self.sent: list[Preview] = [] if sent is None else sent
        self._stamps = itertools.count(1)
        self._action = ""
        self._sink: SlackSink | SlackWebhookSink
        if settings.mode == "webhook":
            self.settings = settings.model_copy(
                update={"webhook_url": SecretStr(_WEBHOOK), "post_spacing_s": 0.0}
            )
            self._sink = SlackWebhookSink(
                self.settings,
                clock=SystemClock(),
                datahub_url=datahub_url,
                transport=httpx.MockTransport(self._answer),
            )
        else:
            self.settings = settings.model_copy(update={"bot_token": _TOKEN, "post_spacing_s": 0.0})
            self._sink = SlackSink(
                self.settings,
                clock=SystemClock(),
                datahub_url=datahub_url,
                transport=httpx.MockTransport(self._answer),
            )

    @property
    def name(self) -> SinkName:
        """``slack``."""
        return "slack"

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """What :class:`SlackSink` does for this row, recorded instead of sent."""
        self._action = item.action
        return self._sink.deliver(item, ref)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        if str(request.url) == _WEBHOOK:
            self.sent.append(Preview("slack", self._action, "POST the webhook", body))
            return httpx.Response(200, text="ok")
        api = urlsplit(self.settings.api_url).path
        method = request.url.path.removeprefix(api)
        answer: dict[str, Any] = {"ok": True}
        if method == "conversations.list":
            name = str(self.settings.channel).removeprefix("#").lower()
            answer["channels"] = [{"id": PREVIEW_CHANNEL, "name": name, "name_normalized": name}]
        elif method in ("conversations.history", "conversations.replies"):
            answer["messages"] = []
        elif method in ("chat.postMessage", "chat.update"):
            sent = json.loads(body)
            ts = sent.get("ts") or f"{next(self._stamps)}.000100"
            answer |= {"channel": sent.get("channel"), "ts": ts}
            action = self._action if method == "chat.postMessage" else "edit root"
            self.sent.append(Preview("slack", action, f"{request.method} {method}", body))
        else:
            answer = {"ok": False, "error": "unknown_method"}
        return httpx.Response(200, json=answer)
