"""Sinks that show instead of send: the real sinks, each on a recording transport.

:class:`PreviewGitHub` runs :class:`~mlcopilot.notify.sinks.github.GitHubSink`,
:class:`PreviewSlack` runs :class:`~mlcopilot.notify.sinks.slack.SlackSink` (or, for a webhook,
:class:`~mlcopilot.notify.sinks.slack.SlackWebhookSink`), :class:`PreviewPagerDuty`,
:class:`PreviewTeams` and :class:`PreviewWebhook` run the PagerDuty, Teams and signed-webhook
sinks, each on an ``httpx.MockTransport`` that never connects. Each answers as its service
would for a repository, channel or receiver holding nothing of ours yet (no earlier issue or
message; the labels exist; PagerDuty ``202`` with the event's ``dedup_key``, a Teams workflow
``202``, a receiver ``200``) and records every write the sink makes: method, path and body,
byte for byte as it would go out. So ``mlcopilot demo`` without credentials, and ``mlcopilot
scan --dry-run --preview DIR``, show what the sinks send, rendered once, by the sinks
(``tests/notify/sinks/test_preview.py`` compares it with what the local fakes receive).

The reads a sink makes first (the bot's login, the issue list, a label, a channel's id by its
name) are answered but not recorded. No secret is ever used, so none can be shown: tokens,
PagerDuty's routing key (:data:`PREVIEW_ROUTING_KEY`), the Slack and Teams webhook URLs and the
signed webhook's URL are placeholders, and the webhook's ``X-Mlcopilot-Signature`` is made
with :data:`PREVIEW_WEBHOOK_SECRET` (a receiver's code can check it with that secret).

:func:`preview_rows` previews the rows a dry-run scan plans, through the configured sinks.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from mlcopilot.clock import Clock, SystemClock
from mlcopilot.incidents.payload import (
    Delivered,
    DeliveryError,
    OutboxItem,
    OutboxStatus,
    PlannedRow,
    Sink,
    SinkName,
    SinkRef,
)
from mlcopilot.model import Severity, destination_of, sink_of
from mlcopilot.notify.sinks.config import (
    GitHubSettings,
    NotifySettings,
    PagerDutySettings,
    SlackSettings,
    TeamsSettings,
    WebhookSettings,
)
from mlcopilot.notify.sinks.github import GitHubSink
from mlcopilot.notify.sinks.pagerduty import PagerDutySink
from mlcopilot.notify.sinks.slack import SlackSink, SlackWebhookSink
from mlcopilot.notify.sinks.teams import TeamsSink
from mlcopilot.notify.sinks.webhook import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookSink,
)
from mlcopilot.settings import Settings

PREVIEW_REPO = "OWNER/REPO"
"""The repository previews address when none is configured."""
PREVIEW_CHANNEL = "CHANNELID"
"""The channel id previews post to when none is configured, or when a channel is configured by
name (Slack would answer its lookup with the real id)."""
PREVIEW_ROUTING_KEY: Final = "PREVIEW-ROUTING-KEY-NOT-A-SECRET"
"""The routing key in every PagerDuty preview (32 characters, as PagerDuty's keys are)."""
PREVIEW_TEAMS_URL: Final = (
    "https://teams-workflow.invalid/workflows/PREVIEW/triggers/manual/paths/invoke"
    "?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=PREVIEW"
)
"""The Teams Workflows URL previews post to (the real one carries the flow's signature)."""
PREVIEW_WEBHOOK_URL: Final = "https://webhook-receiver.invalid/mlcopilot"
"""The receiver's URL previews post to (a configured one may carry a token)."""
PREVIEW_WEBHOOK_SECRET: Final = "PREVIEW-WEBHOOK-SECRET"
"""The secret every webhook preview is signed with: the shown ``X-Mlcopilot-Signature`` is
the HMAC a receiver computes with it, never with the configured secret."""
PREVIEW_SINKS: Final[tuple[SinkName, ...]] = ("github", "slack", "pagerduty", "teams", "webhook")
"""The sinks that can be previewed: the built-in ones (a plugin's requests are its own)."""
_TOKEN = SecretStr("preview-not-a-token")
_WEBHOOK = "https://hooks.slack.com/services/PREVIEW"
_LOGIN = "mlcopilot-preview"
_WEBHOOK_HEADERS = ("Content-Type", IDEMPOTENCY_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)
"""What a receiver of the signed webhook reads besides the body, in the order it is shown."""


@dataclass(frozen=True, slots=True)
class Preview:
    """One request a sink would have made."""

    sink: SinkName
    action: str
    """The outbox action (``open``, ``update``, ``resolve``...), or ``close`` / ``edit root``
    for the second request of a resolution; for PagerDuty, the event's action (``trigger``,
    ``acknowledge``, ``resolve``): a row may send several."""
    request: str
    """``POST /repos/OWNER/REPO/issues``, ``POST chat.postMessage``, ``POST /v2/enqueue``..."""
    body: bytes
    """The request's body, exactly as the sink sends it (JSON)."""
    headers: tuple[tuple[str, str], ...] = ()
    """The headers a receiver reads, as sent (the signed webhook's id, timestamp and
    signature); empty for the other sinks, whose headers carry only a credential."""

    @property
    def payload(self) -> dict[str, Any]:
        """The body, decoded."""
        data = json.loads(self.body)
        return data if isinstance(data, dict) else {}


class PreviewClock:
    """The time a preview is made at: ``at`` (a scan's time); a sink's wait only moves it.

    So a preview never waits (PagerDuty's spacing between events, a ``Retry-After``).
    """

    def __init__(self, at: datetime | None = None) -> None:
        self.at = at or datetime.now(UTC)

    def now(self) -> datetime:
        """``at``."""
        return self.at

    def sleep(self, seconds: float) -> None:
        """Move ``at`` on, without waiting."""
        self.at += timedelta(seconds=max(0.0, seconds))


@dataclass(frozen=True, slots=True)
class PreviewTargets:
    """Where previews are addressed: the configured repository, label, channel, and so on.

    Placeholders (:data:`PREVIEW_REPO`, :data:`PREVIEW_CHANNEL`...) where none is configured;
    the preview sinks replace any secret (token, routing key, webhook URL) with one that is
    not.
    """

    github: GitHubSettings = field(
        default_factory=lambda: GitHubSettings(repo=PREVIEW_REPO, token=_TOKEN)
    )
    slack: SlackSettings = field(
        default_factory=lambda: SlackSettings(channel=PREVIEW_CHANNEL, bot_token=_TOKEN)
    )
    pagerduty: PagerDutySettings = field(
        default_factory=lambda: PagerDutySettings(routing_key=SecretStr(PREVIEW_ROUTING_KEY))
    )
    teams: TeamsSettings = field(
        default_factory=lambda: TeamsSettings(webhook_url=SecretStr(PREVIEW_TEAMS_URL))
    )
    webhook: WebhookSettings = field(
        default_factory=lambda: WebhookSettings(
            url=PREVIEW_WEBHOOK_URL, secret=SecretStr(PREVIEW_WEBHOOK_SECRET)
        )
    )

    @classmethod
    def from_settings(cls, settings: Settings, notify: NotifySettings) -> PreviewTargets:
        """The sinks' settings where configured (``notify``, checked), else placeholders.

        The placeholders still carry what is configured without the credential
        (``settings``): GitHub's label and bot login, PagerDuty's ``min_severity``.
        """
        github = notify.github or GitHubSettings(
            repo=PREVIEW_REPO,
            token=_TOKEN,
            label=settings.github.label,
            ack_label=settings.github.ack_label,
            bot_login=settings.github.bot_login or None,
        )
        slack = notify.slack or SlackSettings(channel=PREVIEW_CHANNEL, bot_token=_TOKEN)
        pagerduty = notify.pagerduty or PagerDutySettings(
            routing_key=SecretStr(PREVIEW_ROUTING_KEY),
            min_severity=Severity(settings.pagerduty.min_severity),
        )
        defaults = cls()
        return cls(
            github=github,
            slack=slack,
            pagerduty=pagerduty,
            teams=notify.teams or defaults.teams,
            webhook=notify.webhook or defaults.webhook,
        )


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


class _Recorder:
    """A service that takes POSTed JSON: records each request, answers as the service does.

    ``answer`` makes the service's answer from the body; ``action`` names a request (default:
    the row's action, set by the preview before each row); ``headers`` are the request headers
    kept in the preview.
    """

    def __init__(
        self,
        sink: SinkName,
        request: str,
        answer: Callable[[bytes], httpx.Response],
        sent: list[Preview],
        *,
        action: Callable[[bytes], str] | None = None,
        headers: Sequence[str] = (),
    ) -> None:
        self.sink = sink
        self.request = request
        self.row_action = ""
        self._answer = answer
        self._sent = sent
        self._action = action
        self._headers = tuple(headers)
        self.transport = httpx.MockTransport(self._record)

    def _record(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        action = self._action(body) if self._action is not None else self.row_action
        kept = tuple((h, request.headers[h]) for h in self._headers if h in request.headers)
        self._sent.append(Preview(self.sink, action, self.request, body, kept))
        return self._answer(body)


class _PostingPreview:
    """The real sink of a service that takes POSTed JSON, on a :class:`_Recorder`."""

    sink_name: ClassVar[SinkName]
    _sink: Sink
    _recorder: _Recorder

    @property
    def name(self) -> SinkName:
        """The sink's name."""
        return self.sink_name

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """What the real sink does for this row, recorded instead of sent."""
        self._recorder.row_action = item.action
        return self._sink.deliver(item, ref)


def _pagerduty_answer(body: bytes) -> httpx.Response:
    event = json.loads(body)
    key = event.get("dedup_key") if isinstance(event, dict) else None
    answer = {"status": "success", "message": "Event processed", "dedup_key": key}
    return httpx.Response(202, json=answer)


def _event_action(body: bytes) -> str:
    event = json.loads(body)
    return str(event.get("event_action", "")) if isinstance(event, dict) else ""


class PreviewPagerDuty(_PostingPreview):
    """The real :class:`PagerDutySink`, answered by a mock Events API; records each event.

    The routing key is :data:`PREVIEW_ROUTING_KEY`; each preview's action is the event's
    (``trigger``, ``acknowledge``, ``resolve``).
    """

    sink_name = "pagerduty"

    def __init__(
        self,
        settings: PagerDutySettings | None = None,
        *,
        datahub_url: str | None = None,
        sent: list[Preview] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = (settings or PreviewTargets().pagerduty).model_copy(
            update={"routing_key": SecretStr(PREVIEW_ROUTING_KEY)}
        )
        self.sent: list[Preview] = [] if sent is None else sent
        request = f"POST {urlsplit(self.settings.enqueue_url).path}"
        self._recorder = _Recorder(
            "pagerduty", request, _pagerduty_answer, self.sent, action=_event_action
        )
        self._sink = PagerDutySink(
            self.settings,
            clock=clock or PreviewClock(),
            datahub_url=datahub_url,
            transport=self._recorder.transport,
        )


class PreviewTeams(_PostingPreview):
    """The real :class:`TeamsSink`, answered by a mock Workflows trigger (``202``)."""

    sink_name = "teams"

    def __init__(
        self,
        settings: TeamsSettings | None = None,
        *,
        datahub_url: str | None = None,
        sent: list[Preview] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = (settings or PreviewTargets().teams).model_copy(
            update={"webhook_url": SecretStr(PREVIEW_TEAMS_URL)}
        )
        self.sent: list[Preview] = [] if sent is None else sent
        self._recorder = _Recorder(
            "teams", "POST the Workflows webhook", lambda _: httpx.Response(202), self.sent
        )
        self._sink = TeamsSink(
            self.settings,
            clock=clock or PreviewClock(),
            datahub_url=datahub_url,
            transport=self._recorder.transport,
        )


class PreviewWebhook(_PostingPreview):
    """The real :class:`WebhookSink`, answered by a mock receiver (``200``).

    Signed with :data:`PREVIEW_WEBHOOK_SECRET` and stamped as the sink stamps each attempt
    (when it goes: the preview's making); the preview keeps the headers a receiver reads
    (``Idempotency-Key``, the timestamp, the signature).
    """

    sink_name = "webhook"

    def __init__(
        self,
        settings: WebhookSettings | None = None,
        *,
        datahub_url: str | None = None,
        sent: list[Preview] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = (settings or PreviewTargets().webhook).model_copy(
            update={"url": PREVIEW_WEBHOOK_URL, "secret": SecretStr(PREVIEW_WEBHOOK_SECRET)}
        )
        self.sent: list[Preview] = [] if sent is None else sent
        self._recorder = _Recorder(
            "webhook",
            "POST the webhook URL",
            lambda _: httpx.Response(200),
            self.sent,
            headers=_WEBHOOK_HEADERS,
        )
        self._sink = WebhookSink(
            self.settings,
            clock=clock or PreviewClock(),
            datahub_url=datahub_url,
            transport=self._recorder.transport,
        )


# --- a dry run's rows


@dataclass(frozen=True, slots=True)
class RowPreview:
    """What one planned outbox row would send: its requests, or why none is shown."""

    row: PlannedRow
    previews: tuple[Preview, ...] = ()
    note: str | None = None
    """Why the row sends nothing or is not previewed: nothing to page, a plugin's sink, or
    what the sink said when it refused the row."""


def preview_rows(
    rows: Sequence[PlannedRow],
    notify: NotifySettings,
    *,
    now: datetime,
    refs: Callable[[PlannedRow], SinkRef | None] | None = None,
) -> list[RowPreview]:
    """The requests each configured sink would send for ``rows`` (a dry run's), in order.

    Each row goes, as the relay would hand it over at ``now`` (the scan's time, its rows'
    ``created_at``), to a preview of its sink at its target's destination (a routed
    repository or channel), configured as ``notify`` says but with no secret. ``refs`` gives
    where a row's group already lives in its sink (the store's ``sink_ref``); None: nowhere
    yet. Write-back rows are not notifications and are left out.
    """
    previews = _DryRunSinks(notify, PreviewClock(now))
    made: list[RowPreview] = []
    for number, row in enumerate((r for r in rows if r.sink != "datahub"), start=1):
        kind = sink_of(row.sink)
        if kind not in PREVIEW_SINKS:
            made.append(RowPreview(row, note=f"not previewed: {kind} is a plugin sink"))
            continue
        sink, sent = previews.at(row.sink)
        start = len(sent)
        try:
            sink.deliver(_item(row, number, now), refs(row) if refs is not None else None)
        except DeliveryError as exc:
            made.append(RowPreview(row, tuple(sent[start:]), note=f"the sink refuses it: {exc}"))
            continue
        note: str | None = None
        if kind == "pagerduty" and len(sent) == start:
            least = (notify.pagerduty or PreviewTargets().pagerduty).min_severity.value
            note = f"nothing to page: none of its incidents is at least {least} (min_severity)"
        made.append(RowPreview(row, tuple(sent[start:]), note=note))
    return made


class _DryRunSinks:
    """One preview sink per target (sink and destination), built when a row first needs it."""

    def __init__(self, notify: NotifySettings, clock: PreviewClock) -> None:
        self._notify = notify
        self._clock = clock
        self._sinks: dict[SinkName, tuple[Sink, list[Preview]]] = {}

    def at(self, target: SinkName) -> tuple[Sink, list[Preview]]:
        if target not in self._sinks:
            sent: list[Preview] = []
            self._sinks[target] = (self._make(target, sent), sent)
        return self._sinks[target]

    def _make(self, target: SinkName, sent: list[Preview]) -> Sink:
        notify, where = self._notify, destination_of(target)
        url = notify.datahub_url
        kind = sink_of(target)
        if kind == "github":
            github = notify.github or PreviewTargets().github
            if where:
                github = github.model_copy(update={"repo": where})
            return PreviewGitHub(github, datahub_url=url, sent=sent)
        if kind == "slack":
            slack = notify.slack or PreviewTargets().slack
            if where and slack.mode == "bot":
                slack = slack.model_copy(update={"channel": where})
            return PreviewSlack(slack, datahub_url=url, sent=sent)
        if kind == "pagerduty":
            return PreviewPagerDuty(notify.pagerduty, datahub_url=url, sent=sent, clock=self._clock)
        if kind == "teams":
            return PreviewTeams(notify.teams, datahub_url=url, sent=sent, clock=self._clock)
        return PreviewWebhook(notify.webhook, datahub_url=url, sent=sent, clock=self._clock)


def _item(row: PlannedRow, number: int, now: datetime) -> OutboxItem:
    """``row`` as the relay claims it: stored at ``now``, its payload through JSON as stored."""
    at = now.astimezone(UTC)
    payload: Mapping[str, Any] = json.loads(json.dumps(dict(row.payload)))
    return OutboxItem(
        id=number,
        sink=row.sink,
        action=row.action,
        group_key=row.group_key,
        group_generation=row.group_generation,
        seq=row.seq,
        dedupe_key=row.dedupe_key,
        payload=payload,
        status=OutboxStatus.SENDING,
        attempts=1,
        created_at=at,
        not_before=row.not_before,
        next_attempt_at=at,
    )
