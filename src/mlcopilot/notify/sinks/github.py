"""GitHub issues as a notification sink, through githubkit configured defensively.

githubkit's defaults are wrong for a bot that must never open an issue twice: no timeout,
and ``POST`` retried on 5xx (a create that landed behind a 502 becomes a duplicate). Here,
over the sinks' one HTTP stack (:mod:`~mlcopilot.notify.sinks.http`): every call has a total
deadline (``timeout_s``, from connect to the last byte, so a server that drips its answer
cannot hold a row's lease), every connection goes only to an address the allowlist admits,
checked after resolution (``notify.allowed_hosts``; a refusal kills the row, as a bad token
does), no automatic retry at all (the relay retries, after reconciling), no redirects, no
HTTP cache, one request at a time and ≥1 s between writes. Rate limits are read from
``Retry-After``, ``x-ratelimit-reset`` or the secondary-limit message and handed to the
relay, which waits or reschedules; a reset that is already past (the two clocks disagree)
means a minute, as GitHub asks for secondary limits, never "now". No wait asked of the relay
is longer than ``max_rate_limit_wait_s``, whatever GitHub said or left unsaid.

Before any create, the sink lists the issues carrying our label and looks for the group's
hidden marker (written only by us, and trusted only in issues our bot login opened), so a
crash after GitHub accepted the create never yields a second issue. Updates are comments
(also marked, and reconciled after an uncertain attempt); the resolution closes the issue as
``completed``; a recurrence is a new group generation, hence a new issue.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any, NoReturn

import httpx
from githubkit import GitHub, TokenAuthStrategy
from githubkit.exception import RateLimitExceeded, RequestError, RequestFailed
from githubkit.throttling import LocalThrottler

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
from mlcopilot.notify.content import marker
from mlcopilot.notify.sinks.config import GitHubSettings
from mlcopilot.notify.sinks.http import DeadlineTransport, failed, timeouts
from mlcopilot.notify.sinks.pacing import Pacer
from mlcopilot.notify.sinks.render_github import comment_body, issue_body, issue_title
from mlcopilot.notify.sinks.urls import AddressPolicy
from mlcopilot.redact import redact
from mlcopilot.text.safe import clean

log = logging.getLogger(__name__)

API_VERSION = {"X-GitHub-Api-Version": "2022-11-28"}
"""The REST version every GitHub (including Enterprise Server) supports."""
_PAGES = 10
_SECONDARY_WAIT = timedelta(seconds=60)


class GitHubSink:
    """Opens, comments on and closes one issue per notification group."""

    def __init__(
        self,
        settings: GitHubSettings,
        *,
        clock: Clock,
        datahub_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._settings = settings
        self._datahub_url = datahub_url
        self._pacer = Pacer(clock, settings.write_spacing_s)
        self._labels_checked: set[str] = set()
        self._login: str | None = settings.bot_login
        self._login_known = settings.bot_login is not None
        self._gh = GitHub(
            TokenAuthStrategy(settings.token.get_secret_value()),
            base_url=settings.api_url,
            user_agent="mlcopilot",
            timeout=timeouts(settings.timeout_s),
            follow_redirects=False,
            http_cache=False,
            auto_retry=False,
            throttler=LocalThrottler(1),
            transport=transport
            or DeadlineTransport(
                settings.timeout_s,
                base_url=settings.api_url,
                policy=AddressPolicy.of(
                    settings.allowed_hosts, allow_loopback=settings.allow_local
                ),
            ),
        )

    @property
    def name(self) -> SinkName:
        """``github``."""
        return "github"

    # --- delivery

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Open the group's issue, comment on it, or close it."""
        notification = decode_notification(item.payload)
        if item.action == "open":
            return self._open(notification, item)
        if ref is None:
            raise DeliveryError(
                f"GitHub: no issue is known for group {item.group_key} (its open was never "
                "delivered)",
                permanent=True,
            )
        number = int(ref.key)
        self._comment(number, notification, item)
        if item.action == "resolve":
            self._close(number)
        return Delivered()

    def _open(self, notification: Notification, item: OutboxItem) -> Delivered:
        group = notification.group
        found = self._find_issue(marker(group))
        if found is not None:
            number, url = found
            warning = f"GitHub: reused issue #{number}, created by an earlier attempt"
            return Delivered(ref=SinkRef(item.sink, str(number), url), warning=warning)
        routed, _ = route_of(item.payload)
        labels = list(
            dict.fromkeys([self._settings.label, f"risk:{group.check.replace('_', '-')}", *routed])
        )
        for label in labels:
            self._ensure_label(label)
        self._pacer.wait()
        data = self._call(
            "POST /issues",
            lambda: self._gh.rest.issues.create(
                self._settings.owner,
                self._settings.name,
                title=issue_title(notification),
                body=issue_body(notification, datahub_url=self._datahub_url),
                labels=list(labels),
                headers=API_VERSION,
            ),
            sends=True,
        )
        return Delivered(ref=SinkRef(item.sink, str(data["number"]), data.get("html_url")))

    def _comment(self, number: int, notification: Notification, item: OutboxItem) -> None:
        mark = marker(notification.group, notification.action, notification.seq)
        if item.uncertain and self._has_comment(number, mark):
            return
        body = comment_body(notification, datahub_url=self._datahub_url)
        self._pacer.wait()
        self._call(
            f"POST /issues/{number}/comments",
            lambda: self._gh.rest.issues.create_comment(
                self._settings.owner, self._settings.name, number, body=body, headers=API_VERSION
            ),
            sends=True,
        )

    def _close(self, number: int) -> None:
        self._pacer.wait()
        # Idempotent: closing a closed issue changes nothing.
        self._call(
            f"PATCH /issues/{number}",
            lambda: self._gh.rest.issues.update(
                self._settings.owner,
                self._settings.name,
                number,
                state="closed",
                state_reason="completed",
                headers=API_VERSION,
            ),
            sends=True,
        )

    # --- reconciliation

    def _find_issue(self, mark: str) -> tuple[int, str | None] | None:
        """Our issue carrying ``mark``: listed by label (all states), never by search."""
        login = self._bot_login()
        for page in range(1, _PAGES + 1):
            issues = self._call(
                "GET /issues",
                lambda page=page: self._gh.rest.issues.list_for_repo(
                    self._settings.owner,
                    self._settings.name,
                    labels=self._settings.label,
                    state="all",
                    sort="created",
                    direction="desc",
                    per_page=100,
                    page=page,
                    headers=API_VERSION,
                ),
            )
            for issue in issues:
                # Only our own first line counts: a column name may quote a marker.
                if "pull_request" in issue or not (issue.get("body") or "").startswith(mark):
                    continue
                author = (issue.get("user") or {}).get("login")
                if login is not None and author != login:
                    continue  # a marker copied into someone else's issue is not ours
                return int(issue["number"]), issue.get("html_url")
            if len(issues) < 100:
                return None
        return None

    def _has_comment(self, number: int, mark: str) -> bool:
        login = self._bot_login()
        for page in range(1, _PAGES + 1):
            comments = self._call(
                f"GET /issues/{number}/comments",
                lambda page=page: self._gh.rest.issues.list_comments(
                    self._settings.owner,
                    self._settings.name,
                    number,
                    per_page=100,
                    page=page,
                    headers=API_VERSION,
                ),
            )
            for comment in comments:
                author = (comment.get("user") or {}).get("login")
                if (comment.get("body") or "").startswith(mark) and login in (None, author):
                    return True
            if len(comments) < 100:
                return False
        return False

    def _bot_login(self) -> str | None:
        if not self._login_known:
            self._login_known = True
            try:
                user = self._call(
                    "GET /user", lambda: self._gh.rest.users.get_authenticated(headers=API_VERSION)
                )
                self._login = user.get("login")
            except DeliveryError as exc:
                if not exc.permanent or exc.retry_after is not None:
                    # A rate limit, a timeout, a 5xx: ask again next time, and stop here
                    # rather than trust every marker for the rest of this run.
                    self._login_known = False
                    raise
                # GitHub App installation tokens cannot read /user: trust label + marker.
                log.info("GitHub: cannot learn the bot login (%s); matching by marker only", exc)
        return self._login

    def _ensure_label(self, name: str) -> None:
        if name in self._labels_checked:
            return
        try:
            self._call(
                f"GET /labels/{name}",
                lambda: self._gh.rest.issues.get_label(
                    self._settings.owner, self._settings.name, name, headers=API_VERSION
                ),
            )
        except DeliveryError as exc:
            if "HTTP 404" not in str(exc):
                raise
            self._pacer.wait()
            try:
                self._call(
                    "POST /labels",
                    lambda: self._gh.rest.issues.create_label(
                        self._settings.owner,
                        self._settings.name,
                        name=name,
                        color="d93f0b",
                        description="Opened by mlcopilot",
                        headers=API_VERSION,
                    ),
                    sends=True,
                )
            except DeliveryError as create_error:
                if "HTTP 422" not in str(create_error):  # 422: created meanwhile
                    raise
        self._labels_checked.add(name)

    # --- acknowledgement read-back

    def acknowledged_by(self, ref: SinkRef) -> str | None:
        """Who acknowledged the group's issue: an assignee, the ack label, or not-planned."""
        issue = self._call(
            f"GET /issues/{ref.key}",
            lambda: self._gh.rest.issues.get(
                self._settings.owner, self._settings.name, int(ref.key), headers=API_VERSION
            ),
        )
        assignees = [a.get("login") for a in issue.get("assignees") or [] if a.get("login")]
        if assignees:
            return f"github:@{clean(str(assignees[0]), 60)}"
        labels = {(label.get("name") or "") for label in issue.get("labels") or []}
        if self._settings.ack_label in labels:
            return f"github:label {self._settings.ack_label}"
        if issue.get("state") == "closed" and issue.get("state_reason") == "not_planned":
            return "github:closed as not planned"
        return None

    # --- errors

    def _call(self, what: str, request: Any, *, sends: bool = False) -> Any:
        try:
            response = request()
        except RateLimitExceeded as exc:
            raise DeliveryError(
                f"GitHub {what}: rate limited (HTTP {exc.response.status_code})",
                retry_after=self._rate_limit_wait(exc.response.headers),
            ) from None
        except RequestFailed as exc:
            self._failed(what, exc, sends=sends)
        except RequestError as exc:  # no answer: githubkit's RequestTimeout included
            raise failed(
                f"GitHub {what}", exc.exc, total_s=self._settings.timeout_s, sent=sends
            ) from None
        if response.status_code >= 300:  # a redirect: httpx does not call it an error
            self._refused(what, response.status_code, "", sends=sends)
        return response.json()

    def _rate_limit_wait(self, headers: httpx.Headers) -> timedelta:
        """How long GitHub asks us to wait, never less than a second nor more than the cap.

        githubkit's own reading turns a reset already past into "retry now", which, with a
        client clock ahead of GitHub's, retried a create forty times in eleven seconds. The
        minute a reset already past (or no header) stands for is capped too.
        """
        cap = self._settings.max_rate_limit_wait_s
        retry_after = headers.get("retry-after")
        if retry_after is not None:
            try:
                return timedelta(seconds=min(cap, max(1.0, float(retry_after))))
            except ValueError:
                return self._secondary_wait()  # an HTTP date or garbage: GitHub sends seconds
        reset = headers.get("x-ratelimit-reset")
        if headers.get("x-ratelimit-remaining") == "0" and reset is not None:
            try:
                # The reset is GitHub's epoch time: compare it with the machine's clock (the
                # relay's clock may be a scan's --now), and distrust a reset already past.
                left = float(reset) - time.time()
            except ValueError:
                left = 0.0
            if left <= 0:
                wait = self._secondary_wait()
                log.warning(
                    "GitHub: rate limited with x-ratelimit-reset already past by %.0f s (the "
                    "clocks disagree); waiting %g s",
                    -left,
                    wait.total_seconds(),
                )
                return wait
            return timedelta(seconds=min(cap, max(1.0, left)))
        return self._secondary_wait()

    def _secondary_wait(self) -> timedelta:
        """The minute GitHub asks for when it gives no time, within ``max_rate_limit_wait_s``."""
        cap = timedelta(seconds=max(1.0, self._settings.max_rate_limit_wait_s))
        return min(_SECONDARY_WAIT, cap)

    def _failed(self, what: str, exc: RequestFailed, *, sends: bool) -> NoReturn:
        response = exc.response
        try:
            message = str(response.json().get("message", ""))
        except Exception:  # not JSON (an HTML error page from a proxy)
            message = ""
        self._refused(what, response.status_code, message, sends=sends)

    def _refused(self, what: str, status: int, message: str, *, sends: bool) -> NoReturn:
        detail = f"GitHub {what}: HTTP {status}" + (f" ({clean(message, 200)})" if message else "")
        detail = redact(detail)
        if status in (403, 429) and (status == 429 or "rate limit" in message.lower()):
            # A secondary limit without headers: a minute (GitHub's guidance), within the cap.
            raise DeliveryError(detail, retry_after=self._secondary_wait()) from None
        if status >= 500:
            raise DeliveryError(detail, sent=sends) from None
        if status in (301, 302, 307, 308):
            detail += "; redirects are not followed: check MLCOPILOT_GITHUB_REPO / the API URL"
        elif status == 401:
            detail += "; the token is invalid or expired"
        elif status == 404:
            detail += "; the repository does not exist or the token cannot see it"
        raise DeliveryError(detail, permanent=True) from None
