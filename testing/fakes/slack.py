"""A local Slack: the Web API methods mlcopilot calls, and an incoming webhook.

``POST /api/<method>`` with a bot token (``Authorization: Bearer xoxb-…``), JSON or form
bodies as slack_sdk sends them, answering like Slack: HTTP 200 with ``{"ok": false, "error":
…}`` for API errors (``invalid_auth``, ``channel_not_found``, ``missing_scope`` with
``needed``), HTTP 429 with ``Retry-After`` when rate limited. As Slack documents it:

- ``chat.postMessage`` takes a channel id or name (``#ml-alerts`` or ``ml-alerts``) and
  answers with the id; ``chat.update``, ``conversations.history`` and
  ``conversations.replies`` take an id only (a name is ``channel_not_found``).
- ``conversations.list`` pages public and private channels (``types``, ``exclude_archived``);
  ``conversations.history`` pages a channel newest first from ``latest`` down to ``oldest``
  (exclusive unless ``inclusive``); ``conversations.replies`` pages a thread, the parent first.
  Each page holds at most ``limit`` items (and at most :attr:`FakeSlack.page_cap`, as Slack may
  return fewer than asked), with ``has_more`` and ``response_metadata.next_cursor``.
- Scopes: a method needs its scope (``channels:read``/``groups:read`` to list,
  ``channels:history``/``groups:history`` to read); remove some from :attr:`FakeSlack.scopes`.

Messages keep their metadata, returned with ``include_all_metadata``. Message timestamps
follow :attr:`FakeSlack.clock` when a test sets it (the product's clock), else real time, and
are unique and increasing. The webhook answers ``ok`` as text, or ``no_service`` /
``invalid_payload`` with their HTTP codes.
"""

from __future__ import annotations

import base64
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from testing.fakes.http import FakeServer, Request, Response

TOKEN = "xoxb-" + "1" * 12 + "-" + "2" * 13 + "-" + "A" * 24
CHANNEL_ID = "C0MLCOPILOT"
BOT_ID = "B0MLCOPILOT"
WEBHOOK_PATH = "/services/T0001/B0001/" + "W" * 24
SCOPES = frozenset(
    {"chat:write", "channels:read", "groups:read", "channels:history", "groups:history"}
)


class _Clock(Protocol):
    def now(self) -> datetime: ...


@dataclass
class Channel:
    """A conversation: its id, its name (without ``#``), private or public, archived or not."""

    id: str
    name: str
    is_private: bool = False
    is_archived: bool = False

    def listed(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "name_normalized": self.name,
            "is_channel": not self.is_private,
            "is_group": self.is_private,
            "is_private": self.is_private,
            "is_archived": self.is_archived,
            "is_member": True,
        }


class FakeSlack(FakeServer):
    def __init__(
        self,
        *,
        token: str = TOKEN,
        channels: tuple[str, ...] = ("#ml-alerts",),
        webhook_path: str = WEBHOOK_PATH,
        clock: _Clock | None = None,
    ) -> None:
        super().__init__()
        self.token = token
        self.webhook_path = webhook_path
        self.clock = clock
        self.scopes: set[str] = set(SCOPES)
        self.page_cap: int | None = None
        self.conversations: dict[str, Channel] = {}
        for n, name in enumerate(channels):
            self.add_channel(name.lstrip("#"), CHANNEL_ID if n == 0 else f"C0MLC{n:06d}")
        self.messages: list[dict[str, Any]] = []
        self.webhook_posts: list[dict[str, Any]] = []
        self._last_ts = 0.0
        self._guard = threading.Lock()
        self.route("POST", "/api/chat.postMessage", self._post)
        self.route("POST", "/api/chat.update", self._update)
        self.route("POST", "/api/conversations.list", self._list)
        self.route("POST", "/api/conversations.history", self._history)
        self.route("POST", "/api/conversations.replies", self._replies)
        self.route("POST", webhook_path, self._webhook)

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    @property
    def webhook_url(self) -> str:
        return f"{self.url}{self.webhook_path}"

    # --- set-up

    def add_channel(
        self,
        name: str,
        channel_id: str | None = None,
        *,
        private: bool = False,
        archived: bool = False,
    ) -> str:
        """Add a conversation (its id is made up when not given); return its id."""
        channel_id = channel_id or f"{'G' if private else 'C'}{len(self.conversations):09d}"
        self.conversations[channel_id] = Channel(channel_id, name, private, archived)
        return channel_id

    def chatter(
        self,
        count: int,
        channel: str = CHANNEL_ID,
        *,
        thread_ts: str | None = None,
        at: float | None = None,
    ) -> None:
        """``count`` messages by someone else, in ``channel`` or a thread, now or from ``at`` on.

        Timestamps only increase: ``at`` earlier than the last message starts just after it.
        """
        with self._guard:
            for n in range(count):
                message = {
                    "type": "message",
                    "ts": self._next_ts(None if at is None else at + n),
                    "text": f"chatter {n}",
                    "channel": channel,
                    "user": "U0SOMEONE",
                }
                if thread_ts is not None:
                    message["thread_ts"] = thread_ts
                self.messages.append(message)

    # --- queries

    def roots(self) -> list[dict[str, Any]]:
        """Messages the bot posted outside threads (others' chatter left out)."""
        return [m for m in self.messages if "thread_ts" not in m and m.get("bot_id") == BOT_ID]

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

    def _by_id_or_name(self, value: str) -> Channel | None:
        if value in self.conversations:
            return self.conversations[value]
        name = value.removeprefix("#")
        return next((c for c in self.conversations.values() if c.name == name), None)

    def _missing(self, *needed: str) -> Response | None:
        if any(scope in self.scopes for scope in needed):
            return None
        return Response(
            200,
            {
                "ok": False,
                "error": "missing_scope",
                "needed": ",".join(needed),
                "provided": ",".join(sorted(self.scopes)),
            },
        )

    def _post(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        missing = self._missing("chat:write")
        if missing is not None:
            return missing
        channel = self._by_id_or_name(str(data.get("channel", "")))
        if channel is None:
            return Response(200, {"ok": False, "error": "channel_not_found"})
        if channel.is_archived:
            return Response(200, {"ok": False, "error": "is_archived"})
        if not data.get("text") and not data.get("blocks"):
            return Response(200, {"ok": False, "error": "no_text"})
        if len(data.get("blocks") or []) > 50:
            return Response(200, {"ok": False, "error": "invalid_blocks"})
        with self._guard:
            ts = self._next_ts()
            message: dict[str, Any] = {
                "type": "message",
                "ts": ts,
                "text": data.get("text", ""),
                "blocks": data.get("blocks") or [],
                "channel": channel.id,
                "bot_id": BOT_ID,
            }
            if data.get("thread_ts"):
                message["thread_ts"] = data["thread_ts"]
            if data.get("metadata"):
                message["metadata"] = data["metadata"]
            self.messages.append(message)
        return Response(200, {"ok": True, "channel": channel.id, "ts": ts, "message": message})

    def _update(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        if data.get("channel") not in self.conversations:
            return Response(200, {"ok": False, "error": "channel_not_found"})
        for message in self.messages:
            if message["ts"] == data.get("ts") and message["channel"] == data["channel"]:
                message["text"] = data.get("text", message["text"])
                message["blocks"] = data.get("blocks") or message["blocks"]
                message["edited"] = True
                return Response(
                    200, {"ok": True, "channel": message["channel"], "ts": message["ts"]}
                )
        return Response(200, {"ok": False, "error": "message_not_found"})

    def _list(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        types = set(str(data.get("types") or "public_channel").split(","))
        wanted = {
            kind
            for kind, scope in (
                ("public_channel", "channels:read"),
                ("private_channel", "groups:read"),
            )
            if kind in types and scope in self.scopes
        }
        if not wanted:
            missing = self._missing("channels:read" if "public_channel" in types else "groups:read")
            assert missing is not None
            return missing
        skip_archived = _true(data.get("exclude_archived"))
        found = [
            c.listed()
            for c in self.conversations.values()
            if ("private_channel" if c.is_private else "public_channel") in wanted
            and not (skip_archived and c.is_archived)
        ]
        page, _, cursor = self._page(found, data, default_limit=100, max_limit=1000)
        return Response(
            200, {"ok": True, "channels": page, "response_metadata": {"next_cursor": cursor}}
        )

    def _history(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        channel = self.conversations.get(str(data.get("channel", "")))
        if channel is None:  # Slack wants the id here: a name is not found
            return Response(200, {"ok": False, "error": "channel_not_found"})
        missing = self._missing("groups:history" if channel.is_private else "channels:history")
        if missing is not None:
            return missing
        with_metadata = _true(data.get("include_all_metadata"))
        window = _window(data)
        found = [
            self._shown(msg, with_metadata)
            for msg in reversed(self.messages)
            if msg["channel"] == channel.id and "thread_ts" not in msg and window(msg["ts"])
        ]
        page, has_more, cursor = self._page(found, data, default_limit=100, max_limit=999)
        body = {"ok": True, "messages": page, "has_more": has_more}
        return Response(200, body | {"response_metadata": {"next_cursor": cursor}})

    def _replies(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        channel = self.conversations.get(str(data.get("channel", "")))
        if channel is None:
            return Response(200, {"ok": False, "error": "channel_not_found"})
        missing = self._missing("groups:history" if channel.is_private else "channels:history")
        if missing is not None:
            return missing
        with_metadata = _true(data.get("include_all_metadata"))
        ts = data.get("ts")
        thread = [
            msg
            for msg in self.messages
            if msg["channel"] == channel.id and (msg["ts"] == ts or msg.get("thread_ts") == ts)
        ]
        if not thread:
            return Response(200, {"ok": False, "error": "thread_not_found"})
        window = _window(data)
        # The parent comes first whatever the window; the replies in it, oldest first.
        found = [
            self._shown(msg, with_metadata)
            for msg in thread
            if msg["ts"] == ts or window(msg["ts"])
        ]
        page, has_more, cursor = self._page(found, data, default_limit=100, max_limit=1000)
        body = {"ok": True, "messages": page, "has_more": has_more}
        return Response(200, body | {"response_metadata": {"next_cursor": cursor}})

    def _webhook(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        if not data.get("text") and not data.get("blocks"):
            return Response(400, "invalid_payload", content_type="text/html")
        self.webhook_posts.append(data)
        return Response(200, "ok", content_type="text/html")

    # --- helpers

    def _next_ts(self, at: float | None = None) -> str:
        """A message timestamp: Slack's clock (the test's, or real time), unique, increasing."""
        if at is None:
            at = self.clock.now().timestamp() if self.clock is not None else time.time()
        self._last_ts = max(round(at, 6), round(self._last_ts + 0.000001, 6))
        return f"{self._last_ts:.6f}"

    def _page(
        self,
        items: list[dict[str, Any]],
        data: dict[str, Any],
        *,
        default_limit: int,
        max_limit: int,
    ) -> tuple[list[dict[str, Any]], bool, str]:
        limit = min(int(data.get("limit") or default_limit), max_limit)
        if self.page_cap is not None:
            limit = min(limit, self.page_cap)
        cursor = str(data.get("cursor") or "")
        start = int(base64.b64decode(cursor).decode().removeprefix("next:")) if cursor else 0
        end = start + limit
        more = end < len(items)
        next_cursor = base64.b64encode(f"next:{end}".encode()).decode() if more else ""
        return items[start:end], more, next_cursor

    @staticmethod
    def _shown(message: dict[str, Any], with_metadata: bool) -> dict[str, Any]:
        shown = dict(message)
        if not with_metadata:
            shown.pop("metadata", None)
        return shown


def _true(value: object) -> bool:
    return str(value or "").lower() in ("1", "true")


def _window(data: dict[str, Any]) -> Callable[[str], bool]:
    """Slack's ``oldest``/``latest``/``inclusive``: which timestamps a read covers."""
    oldest = float(data.get("oldest") or 0)
    latest = float(data.get("latest") or "inf")  # Slack's default is now: the same here
    inclusive = _true(data.get("inclusive"))

    def inside(ts: str) -> bool:
        t = float(ts)
        if inclusive:
            return oldest <= t <= latest
        return oldest < t < latest

    return inside
