"""Sinks that show instead of send: exactly what GitHub and Slack would receive.

They render with the same functions as the real sinks and record the request each would make
(method, path, JSON body), so ``mlcopilot demo`` without credentials shows the real payloads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlcopilot.notify.codec import Delivered, OutboxItem, SinkName, SinkRef, decode_notification
from mlcopilot.notify.sinks.content import marker
from mlcopilot.notify.sinks.render_github import comment_body, issue_body, issue_title
from mlcopilot.notify.sinks.render_slack import root_message, thread_message


@dataclass(frozen=True, slots=True)
class Preview:
    """One request a sink would have made."""

    sink: SinkName
    action: str
    request: str
    """``POST /repos/OWNER/REPO/issues`` or ``POST chat.postMessage``."""
    payload: dict[str, Any]


@dataclass(slots=True)
class PreviewGitHub:
    """Renders GitHub requests without sending them."""

    repo: str = "OWNER/REPO"
    datahub_url: str | None = None
    sent: list[Preview] = field(default_factory=list)
    _issues: int = 0

    @property
    def name(self) -> SinkName:
        """``github``."""
        return "github"

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Record the issue, comment or close this row would make."""
        notification = decode_notification(item.payload)
        base = f"/repos/{self.repo}/issues"
        if item.action == "open":
            self._issues += 1
            labels = ["mlcopilot", f"risk:{notification.group.check.replace('_', '-')}"]
            payload = {
                "title": issue_title(notification),
                "body": issue_body(notification, datahub_url=self.datahub_url),
                "labels": labels,
            }
            self.sent.append(Preview("github", "open", f"POST {base}", payload))
            return Delivered(ref=SinkRef("github", str(self._issues), f"(preview #{self._issues})"))
        number = ref.key if ref else "?"
        body = comment_body(notification, datahub_url=self.datahub_url)
        self.sent.append(
            Preview("github", item.action, f"POST {base}/{number}/comments", {"body": body})
        )
        if item.action == "resolve":
            close = {"state": "closed", "state_reason": "completed"}
            self.sent.append(Preview("github", "close", f"PATCH {base}/{number}", close))
        return Delivered()


@dataclass(slots=True)
class PreviewSlack:
    """Renders Slack requests without sending them."""

    channel: str = "#CHANNEL"
    datahub_url: str | None = None
    sent: list[Preview] = field(default_factory=list)
    _ts: int = 0

    @property
    def name(self) -> SinkName:
        """``slack``."""
        return "slack"

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Record the post (and, on resolution, the root edit) this row would make."""
        notification = decode_notification(item.payload)
        metadata = {
            "event_type": "mlcopilot_notification",
            "event_payload": {"dedupe_key": item.dedupe_key, "marker": marker(notification.group)},
        }
        if item.action == "open":
            text, blocks = root_message(notification, datahub_url=self.datahub_url)
            self._ts += 1
            ts = f"{self._ts}.000100"
            payload = {
                "channel": self.channel,
                "text": text,
                "blocks": blocks,
                "metadata": metadata,
            }
            self.sent.append(Preview("slack", "open", "POST chat.postMessage", payload))
            return Delivered(ref=SinkRef("slack", f"{self.channel}/{ts}", None, {"ts": ts}))
        root_ts = str((ref.data or {}).get("ts", "?")) if ref else "?"
        text, blocks = thread_message(notification, datahub_url=self.datahub_url)
        payload = {
            "channel": self.channel,
            "thread_ts": root_ts,
            "text": text,
            "blocks": blocks,
            "metadata": metadata,
        }
        self.sent.append(Preview("slack", item.action, "POST chat.postMessage", payload))
        if item.action == "resolve":
            text, blocks = root_message(notification, datahub_url=self.datahub_url)
            edit = {"channel": self.channel, "ts": root_ts, "text": text, "blocks": blocks}
            self.sent.append(Preview("slack", "edit root", "POST chat.update", edit))
        return Delivered()
