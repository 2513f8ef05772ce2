"""A local Slack: the Web API methods mlcopilot calls, and an incoming webhook.

``POST /api/<method>`` with a bot token (``Authorization: Bearer xoxb-…``), JSON or form
bodies as slack_sdk sends them, answering like Slack: HTTP 200 with ``{"ok": false, "error":
…}`` for API errors (``invalid_auth``, ``channel_not_found``), HTTP 429 with ``Retry-After``
when rate limited. Messages keep their metadata; ``conversations.history`` and
``conversations.replies`` return it with ``include_all_metadata``. The webhook answers
``ok`` as text, or ``no_service`` / ``invalid_payload`` with their HTTP codes.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from testing.fakes.http import FakeServer, Request, Response

TOKEN = "xoxb-" + "1" * 12 + "-" + "2" * 13 + "-" + "A" * 24
CHANNEL_ID = "C0MLCOPILOT"
WEBHOOK_PATH = "/services/T0001/B0001/" + "W" * 24


class FakeSlack(FakeServer):
    def __init__(
        self,
        *,
        token: str = TOKEN,
        channels: tuple[str, ...] = ("#ml-alerts",),
        webhook_path: str = WEBHOOK_PATH,
    ) -> None:
        super().__init__()
        self.token = token
        self.webhook_path = webhook_path
        self.channels = {name: CHANNEL_ID for name in channels} | {CHANNEL_ID: CHANNEL_ID}
        self.messages: list[dict[str, Any]] = []
        self.webhook_posts: list[dict[str, Any]] = []
        self._clock = 1_700_000_000
        self._guard = threading.Lock()
        self.route("POST", "/api/chat.postMessage", self._post)
        self.route("POST", "/api/chat.update", self._update)
        self.route("POST", "/api/conversations.history", self._history)
        self.route("POST", "/api/conversations.replies", self._replies)
        self.route("POST", webhook_path, self._webhook)

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    @property
    def webhook_url(self) -> str:
        return f"{self.url}{self.webhook_path}"

    def roots(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if "thread_ts" not in m]

    def replies(self, ts: str | None = None) -> list[dict[str, Any]]:
        return [
            m for m in self.messages if "thread_ts" in m and (ts is None or m["thread_ts"] == ts)
        ]

    def post_calls(self) -> list[Request]:
        return self.calls("POST", "/api/chat.postMessage")

    # --- methods

    def _route(self, request: Request) -> Response:
        if request.path.startswith("/api/"):
            auth = request.headers.get("authorization", "")
            if auth != f"Bearer {self.token}":
                return Response(200, {"ok": False, "error": "invalid_auth"})
        return super()._route(request)

    def _post(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        channel = self.channels.get(data.get("channel", ""))
        if channel is None:
            return Response(200, {"ok": False, "error": "channel_not_found"})
        if not data.get("text") and not data.get("blocks"):
            return Response(200, {"ok": False, "error": "no_text"})
        if len(data.get("blocks") or []) > 50:
            return Response(200, {"ok": False, "error": "invalid_blocks"})
        with self._guard:
            self._clock += 1
            ts = f"{self._clock}.000100"
            message: dict[str, Any] = {
                "type": "message",
                "ts": ts,
                "text": data.get("text", ""),
                "blocks": data.get("blocks") or [],
                "channel": channel,
            }
            if data.get("thread_ts"):
                message["thread_ts"] = data["thread_ts"]
            if data.get("metadata"):
                message["metadata"] = data["metadata"]
            self.messages.append(message)
        return Response(200, {"ok": True, "channel": channel, "ts": ts, "message": message})

    def _update(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        for message in self.messages:
            if message["ts"] == data.get("ts"):
                message["text"] = data.get("text", message["text"])
                message["blocks"] = data.get("blocks") or message["blocks"]
                message["edited"] = True
                return Response(
                    200, {"ok": True, "channel": message["channel"], "ts": message["ts"]}
                )
        return Response(200, {"ok": False, "error": "message_not_found"})

    def _history(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        with_metadata = str(data.get("include_all_metadata", "")).lower() in ("1", "true")
        oldest = float(data.get("oldest") or 0)
        found = [
            self._shown(msg, with_metadata)
            for msg in reversed(self.messages)
            if "thread_ts" not in msg and float(msg["ts"]) >= oldest
        ]
        return Response(200, {"ok": True, "messages": found, "has_more": False})

    def _replies(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        with_metadata = str(data.get("include_all_metadata", "")).lower() in ("1", "true")
        ts = data.get("ts")
        found = [
            self._shown(msg, with_metadata)
            for msg in self.messages
            if msg["ts"] == ts or msg.get("thread_ts") == ts
        ]
        return Response(200, {"ok": True, "messages": found, "has_more": False})

    def _webhook(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        if not data.get("text") and not data.get("blocks"):
            return Response(400, "invalid_payload", content_type="text/html")
        self.webhook_posts.append(data)
        return Response(200, "ok", content_type="text/html")

    @staticmethod
    def _shown(message: dict[str, Any], with_metadata: bool) -> dict[str, Any]:
        shown = dict(message)
        if not with_metadata:
            shown.pop("metadata", None)
        return shown
