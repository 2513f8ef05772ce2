"""Notification settings, checked and assembled from :class:`~mlcopilot.settings.Settings`.

The settings object reads the environment and the configuration file (secrets only from the
environment or ``*_FILE`` files); this module checks what the sinks need together (a
repository needs a token, a bot needs a channel, every URL is on its allowlist) and builds the
typed settings the GitHub and Slack sinks and the policy take. Messages name the key's source
(its variable, or the file and line), never a secret's value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr

from mlcopilot.errors import ConfigError
from mlcopilot.incidents.payload import NotifyPolicy, SinkName, report_url_problem
from mlcopilot.model import Severity
from mlcopilot.notify.sinks.plugins import check_plugins
from mlcopilot.notify.sinks.urls import (
    GITHUB_API,
    PAGERDUTY_EU_EVENTS,
    PAGERDUTY_EVENTS,
    SLACK_API,
    SLACK_GOV_API,
    SLACK_GOV_WEBHOOK,
    SLACK_WEBHOOK,
    TEAMS_LOGIC_APPS,
    TEAMS_POWER_PLATFORM,
    allowlist,
    check_url,
    operator_url,
)
from mlcopilot.settings import ENVIRONMENT, HostRule, RouteRule, Settings, load_settings

_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_CHANNEL = re.compile(r"^[#@]?[A-Za-z0-9_.-]{1,80}$")


class _Secretive(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class GitHubSettings(_Secretive):
    """Where and how to open GitHub issues."""

    repo: str
    token: SecretStr
    api_url: str = "https://api.github.com"
    label: str = "mlcopilot"
    ack_label: str = "acknowledged"
    bot_login: str | None = None
    timeout_s: float = 10.0
    write_spacing_s: float = 1.0
    max_rate_limit_wait_s: float = 900.0
    allowed_hosts: tuple[str, ...] = ()
    """``notify.allowed_hosts``: the operator's own endpoints, checked again at connect time."""
    allow_local: bool = False
    """Tests against local fakes only: loopback addresses may be connected to."""

    @property
    def owner(self) -> str:
        """The repository owner."""
        return self.repo.split("/", 1)[0]

    @property
    def name(self) -> str:
        """The repository name."""
        return self.repo.split("/", 1)[1]


class SlackSettings(_Secretive):
    """Where and how to post to Slack: a bot (threads) or an incoming webhook (no threads)."""

    channel: str | None = None
    bot_token: SecretStr | None = None
    webhook_url: SecretStr | None = None
    api_url: str = "https://slack.com/api/"
    reconcile: bool = True
    post_spacing_s: float = 1.1
    timeout_s: float = 10.0
    """The whole of one call (connect, send, the complete answer), not each read."""
    max_rate_limit_wait_s: float = 30.0
    """The longest ``Retry-After`` waited out inside one call: a quarter of the relay's lease
    (``RetryPolicy.lease``, 120 s), so no wait outlives the row's claim; longer ones go back
    to the relay, which reschedules the row."""
    allowed_hosts: tuple[str, ...] = ()
    """``notify.allowed_hosts``: the operator's own endpoints, checked again at connect time."""
    allow_local: bool = False
    """Tests against local fakes only: loopback addresses may be connected to."""

    @property
    def mode(self) -> str:
        """``bot`` or ``webhook``."""
        return "bot" if self.bot_token is not None else "webhook"


class PagerDutySettings(_Secretive):
    """PagerDuty's Events API v2: one alert per incident (``dedup_key`` = the incident id)."""

    routing_key: SecretStr
    url: str = "https://events.pagerduty.com"
    """The base URL; ``/v2/enqueue`` is appended."""
    min_severity: Severity = Severity.HIGH
    """Incidents less severe than this are not paged."""
    timeout_s: float = 10.0
    max_rate_limit_wait_s: float = 30.0
    allowed_hosts: tuple[str, ...] = ()
    allow_local: bool = False

    @property
    def enqueue_url(self) -> str:
        """Where events are POSTed."""
        return f"{self.url.rstrip('/')}/v2/enqueue"


class TeamsSettings(_Secretive):
    """A Microsoft Teams Workflows webhook: an Adaptive Card per notification."""

    webhook_url: SecretStr
    timeout_s: float = 10.0
    max_rate_limit_wait_s: float = 30.0
    allowed_hosts: tuple[str, ...] = ()
    allow_local: bool = False


class WebhookSettings(_Secretive):
    """A signed JSON event per notification to the operator's receiver."""

    url: str
    secret: SecretStr
    timeout_s: float = 10.0
    max_rate_limit_wait_s: float = 30.0
    allowed_hosts: tuple[str, ...] = ()
    allow_local: bool = False


@dataclass(frozen=True, slots=True)
class NotifySettings:
    """Everything the notification sinks and the policy need."""

    github: GitHubSettings | None = None
    slack: SlackSettings | None = None
    pagerduty: PagerDutySettings | None = None
    teams: TeamsSettings | None = None
    webhook: WebhookSettings | None = None
    plugins: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """The sink plugins switched on: name → its ``[sinks.NAME]`` section (unparsed)."""
    routes: tuple[RouteRule, ...] = ()
    """``[[notify.routes]]``, checked: the first rule an incident matches chooses its targets."""
    owners: tuple[str, ...] = ("model",)
    """``notify.owners``: whose owners in DataHub are told (the model's; ``entity``: also the
    affected entity's)."""
    datahub_url: str | None = None
    policy: NotifyPolicy = field(default_factory=NotifyPolicy)
    allow_local: bool = False
    failpoint: str = ""
    """Crash-test failpoints (``MLCOPILOT_FAILPOINT``); empty in production."""
    write_back: bool = True
    """``datahub.write_back``: False writes nothing to the catalog (no outbox rows for it)."""
    report_url: str | None = None
    """``report.url``, checked: the published HTML report that a scan's notifications link to."""

    @property
    def sinks(self) -> tuple[SinkName, ...]:
        """The notification sinks configured."""
        found: list[SinkName] = []
        if self.github is not None:
            found.append("github")
        if self.slack is not None:
            found.append("slack")
        if self.pagerduty is not None:
            found.append("pagerduty")
        if self.teams is not None:
            found.append("teams")
        if self.webhook is not None:
            found.append("webhook")
        return (*found, *sorted(self.plugins))

    def writeback_only(self) -> NotifySettings:
        """These settings with every notification sink off (the write-back's own relay)."""
        return replace(
            self, github=None, slack=None, pagerduty=None, teams=None, webhook=None, plugins={}
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> NotifySettings:
        """Check and assemble the settings; ConfigError names the key's source, never a value."""
        notify = settings.notify
        policy = NotifyPolicy(
            group_wait=notify.group_wait,
            group_interval=notify.group_interval,
            repeat_interval=notify.repeat_interval,
        )
        datahub_url = settings.datahub.ui_url or None
        if datahub_url is not None:
            scheme = datahub_url.split(":", 1)[0]
            if scheme not in ("https", "http") or "@" in datahub_url:
                raise ConfigError(
                    f"{settings.name_of('datahub.ui_url')} must be an http(s) URL without user@"
                )
        report_url = settings.report.url or None
        if report_url is not None:
            problem = report_url_problem(report_url)
            if problem is not None:
                raise ConfigError(f"{settings.name_of('report.url')}: {problem}")
        return cls(
            github=_github(settings),
            slack=_slack(settings),
            pagerduty=_pagerduty(settings),
            teams=_teams(settings),
            webhook=_webhook(settings),
            plugins=check_plugins(settings.sinks, what="sinks") if settings.sinks else {},
            routes=_routes(settings),
            owners=tuple(dict.fromkeys(settings.notify.owners)),
            datahub_url=datahub_url,
            policy=policy,
            allow_local=notify.allow_local_sinks,
            failpoint=notify.failpoint,
            write_back=settings.datahub.write_back,
            report_url=report_url,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> NotifySettings:
        """The settings from ``environ`` (and the configuration file it names, if any)."""
        return cls.from_settings(load_settings(environ=environ))


def _github(settings: Settings) -> GitHubSettings | None:
    section = settings.github
    if section.repo is None:
        return None  # GITHUB_TOKEN alone is common in CI for other uses: not a request
    if not _REPO.fullmatch(section.repo):
        raise ConfigError(f"{settings.name_of('github.repo')} must be owner/name")
    if section.token is None:
        raise ConfigError(
            f"{settings.name_of('github.repo')} is set but no token: set GITHUB_TOKEN or "
            "GITHUB_TOKEN_FILE"
        )
    # github.allowed_hosts (GHES names on public addresses) predates notify.allowed_hosts,
    # which also admits internal addresses, other ports and networks.
    allowed = [GITHUB_API, *((h, "/api/v3") for h in section.allowed_hosts)]
    api_url = check_url(
        section.api_url,
        what=settings.name_of("github.api_url"),
        allowed=allowed,
        rules=_rules(settings),
        rule_prefix="/api/v3",
        allow_local=settings.notify.allow_local_sinks,
    )
    return GitHubSettings(
        repo=section.repo,
        token=section.token,
        api_url=api_url,
        label=section.label,
        ack_label=section.ack_label,
        bot_login=section.bot_login or None,
        write_spacing_s=_spacing(settings, 1.0),
        allowed_hosts=(*settings.notify.allowed_hosts, *section.allowed_hosts),
        allow_local=settings.notify.allow_local_sinks,
    )


def _slack(settings: Settings) -> SlackSettings | None:
    section = settings.slack
    allow_local = settings.notify.allow_local_sinks
    token, webhook, channel = section.bot_token, section.webhook_url, section.channel or None
    if token is None and webhook is None:
        return None
    rules = _rules(settings)
    hosts = tuple(settings.notify.allowed_hosts)
    api_url = check_url(
        section.api_url,
        what=settings.name_of("slack.api_url"),
        allowed=[SLACK_API, SLACK_GOV_API],
        rules=rules,
        rule_prefix="/api/",
        allow_local=allow_local,
    )
    if token is not None:
        if channel is None or not _CHANNEL.fullmatch(channel):
            raise ConfigError(
                f"{settings.name_of('slack.bot_token')} is set: set "
                f"{settings.name_of('slack.channel')} to a channel id or #name"
            )
        return SlackSettings(
            channel=channel,
            bot_token=token,
            api_url=api_url,
            reconcile=section.reconcile,
            post_spacing_s=_spacing(settings, 1.1),
            allowed_hosts=hosts,
            allow_local=allow_local,
        )
    assert webhook is not None
    check_url(
        webhook.get_secret_value(),
        what=settings.name_of("slack.webhook_url"),
        allowed=[SLACK_WEBHOOK, SLACK_GOV_WEBHOOK],
        rules=rules,
        rule_prefix="/services/",
        allow_local=allow_local,
    )
    return SlackSettings(
        webhook_url=webhook,
        api_url=api_url,
        reconcile=False,
        post_spacing_s=_spacing(settings, 1.1),
        allowed_hosts=hosts,
        allow_local=allow_local,
    )


def _pagerduty(settings: Settings) -> PagerDutySettings | None:
    section = settings.pagerduty
    if section.routing_key is None:
        return None
    url = check_url(
        section.url,
        what=settings.name_of("pagerduty.url"),
        allowed=[PAGERDUTY_EVENTS, PAGERDUTY_EU_EVENTS],
        rules=_rules(settings),
        allow_local=settings.notify.allow_local_sinks,
    )
    return PagerDutySettings(
        routing_key=section.routing_key,
        url=url,
        min_severity=Severity(section.min_severity),
        allowed_hosts=tuple(settings.notify.allowed_hosts),
        allow_local=settings.notify.allow_local_sinks,
    )


def _teams(settings: Settings) -> TeamsSettings | None:
    url = settings.teams.webhook_url
    if url is None:
        return None
    check_url(
        url.get_secret_value(),
        what=settings.name_of("teams.webhook_url"),
        allowed=[TEAMS_LOGIC_APPS, TEAMS_POWER_PLATFORM],
        rules=_rules(settings),
        allow_local=settings.notify.allow_local_sinks,
    )
    return TeamsSettings(
        webhook_url=url,
        allowed_hosts=tuple(settings.notify.allowed_hosts),
        allow_local=settings.notify.allow_local_sinks,
    )


def _webhook(settings: Settings) -> WebhookSettings | None:
    section = settings.webhook
    if section.url is None:
        if section.secret is not None:
            raise ConfigError(
                f"{settings.name_of('webhook.secret')} is set but no URL: set "
                f"{settings.name_of('webhook.url')}"
            )
        return None
    if section.secret is None:
        raise ConfigError(
            f"{settings.name_of('webhook.url')} is set but no secret to sign with: set "
            "MLCOPILOT_WEBHOOK_SECRET or MLCOPILOT_WEBHOOK_SECRET_FILE"
        )
    url = operator_url(
        section.url,
        what=settings.name_of("webhook.url"),
        rules=_rules(settings),
        allow_local=settings.notify.allow_local_sinks,
    )
    return WebhookSettings(
        url=url,
        secret=section.secret,
        allowed_hosts=tuple(settings.notify.allowed_hosts),
        allow_local=settings.notify.allow_local_sinks,
    )


def _routes(settings: Settings) -> tuple[RouteRule, ...]:
    """The rules, each naming only sinks that are configured and destinations that can be."""
    rules = settings.notify.routes
    for n, rule in enumerate(rules):
        what = f"{settings.where_is('notify.routes')}: notify.routes[{n}]"
        if rule.slack_channel is not None:
            if settings.slack.bot_token is None:
                raise ConfigError(
                    f"{what}.slack_channel needs the Slack bot (SLACK_BOT_TOKEN): an incoming "
                    "webhook posts to its own channel only"
                )
            if not _CHANNEL.fullmatch(rule.slack_channel):
                raise ConfigError(f"{what}.slack_channel must be a channel id or #name")
        if rule.github_repo is not None:
            if settings.github.repo is None:
                raise ConfigError(
                    f"{what}.github_repo needs GitHub configured: set MLCOPILOT_GITHUB_REPO (the "
                    "repository of incidents no rule routes) and GITHUB_TOKEN"
                )
            if not _REPO.fullmatch(rule.github_repo):
                raise ConfigError(f"{what}.github_repo must be owner/name")
        if rule.github_labels and settings.github.repo is None and rule.github_repo is None:
            raise ConfigError(f"{what}.github_labels: GitHub is not configured")
        for sink, key in (
            ("pagerduty", "pagerduty.routing_key"),
            ("teams", "teams.webhook_url"),
            ("webhook", "webhook.url"),
        ):
            if getattr(rule, sink) and getattr(getattr(settings, sink), key.split(".")[1]) is None:
                raise ConfigError(
                    f"{what}.{sink} = true, but {sink} is not configured (set {ENVIRONMENT[key]})"
                )
    return tuple(rules)


def _rules(settings: Settings) -> tuple[HostRule, ...]:
    return allowlist(settings.notify.allowed_hosts, what=settings.name_of("notify.allowed_hosts"))


def _spacing(settings: Settings, default: float) -> float:
    # Tests against local fakes may drop the spacing GitHub and Slack ask for; nothing else may.
    spacing = settings.notify.test_write_spacing
    if spacing is not None and settings.notify.allow_local_sinks:
        return spacing.total_seconds()
    return default
