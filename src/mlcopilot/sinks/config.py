"""Notification settings from the environment: GitHub, Slack, DataHub links and timing.

Secrets come only from environment variables or files named by ``*_FILE`` variables (Docker
and Kubernetes secrets), never from flags (visible in ``ps``). They are typed ``SecretStr``,
registered with the redactor as soon as they are read, and no error message ever repeats one.

=============================  ===============================================================
``GITHUB_TOKEN[_FILE]``        fine-grained token, Issues: read and write on one repository
``MLCOPILOT_GITHUB_REPO``      ``owner/name``; GitHub notifications are on when this is set
``MLCOPILOT_GITHUB_API_URL``   GitHub Enterprise Server: ``https://HOST/api/v3``
``MLCOPILOT_GITHUB_ALLOWED_HOSTS``  comma-separated GHES hosts the API URL may name
``SLACK_BOT_TOKEN[_FILE]``     bot token (``chat:write``); with ``MLCOPILOT_SLACK_CHANNEL``
``SLACK_WEBHOOK_URL[_FILE]``   incoming webhook (no threads, no edits) for teams without a bot
``MLCOPILOT_DATAHUB_URL``      DataHub UI base URL, for links in notifications
``MLCOPILOT_GROUP_WAIT`` …     ``GROUP_INTERVAL``, ``REPEAT_INTERVAL``: ``30s``, ``5m``, ``4h``
=============================  ===============================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr

from mlcopilot import redact
from mlcopilot.errors import ConfigError
from mlcopilot.outbox import NotifyPolicy, SinkName
from mlcopilot.sinks.urls import GITHUB_API, SLACK_API, SLACK_WEBHOOK, check_url

_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_CHANNEL = re.compile(r"^[#@]?[A-Za-z0-9_.-]{1,80}$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


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

    @property
    def mode(self) -> str:
        """``bot`` or ``webhook``."""
        return "bot" if self.bot_token is not None else "webhook"


@dataclass(frozen=True, slots=True)
class NotifySettings:
    """Everything the notification sinks and the policy need."""

    github: GitHubSettings | None = None
    slack: SlackSettings | None = None
    datahub_url: str | None = None
    policy: NotifyPolicy = field(default_factory=NotifyPolicy)
    allow_local: bool = False

    @property
    def sinks(self) -> tuple[SinkName, ...]:
        """The notification sinks configured."""
        found: list[SinkName] = []
        if self.github is not None:
            found.append("github")
        if self.slack is not None:
            found.append("slack")
        return tuple(found)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> NotifySettings:
        """Read the settings; raise ConfigError (naming the variable, never its value)."""
        allow_local = _flag(environ, "MLCOPILOT_ALLOW_LOCAL_SINKS")
        defaults = NotifyPolicy()
        policy = NotifyPolicy(
            group_wait=_duration(environ, "MLCOPILOT_GROUP_WAIT", defaults.group_wait),
            group_interval=_duration(environ, "MLCOPILOT_GROUP_INTERVAL", defaults.group_interval),
            repeat_interval=_repeat(environ),
        )
        datahub_url = environ.get("MLCOPILOT_DATAHUB_URL") or None
        if datahub_url is not None:
            scheme = datahub_url.split(":", 1)[0]
            if scheme not in ("https", "http") or "@" in datahub_url:
                raise ConfigError("MLCOPILOT_DATAHUB_URL must be an http(s) URL without user@")
        return cls(
            github=_github(environ, allow_local),
            slack=_slack(environ, allow_local),
            datahub_url=datahub_url,
            policy=policy,
            allow_local=allow_local,
        )


def _github(environ: Mapping[str, str], allow_local: bool) -> GitHubSettings | None:
    repo = environ.get("MLCOPILOT_GITHUB_REPO") or None
    token = _secret(environ, "GITHUB_TOKEN")
    if repo is None:
        return None  # GITHUB_TOKEN alone is common in CI for other uses: not a request
    if not _REPO.fullmatch(repo):
        raise ConfigError("MLCOPILOT_GITHUB_REPO must be owner/name")
    if token is None:
        raise ConfigError(
            "MLCOPILOT_GITHUB_REPO is set but no token: set GITHUB_TOKEN or GITHUB_TOKEN_FILE"
        )
    hosts = [
        h.strip().lower()
        for h in environ.get("MLCOPILOT_GITHUB_ALLOWED_HOSTS", "").split(",")
        if h.strip()
    ]
    api_url = environ.get("MLCOPILOT_GITHUB_API_URL") or "https://api.github.com"
    allowed = [GITHUB_API, *((h, "/api/v3") for h in hosts)]
    api_url = check_url(
        api_url, what="MLCOPILOT_GITHUB_API_URL", allowed=allowed, allow_local=allow_local
    )
    return GitHubSettings(
        repo=repo,
        token=SecretStr(token),
        api_url=api_url,
        bot_login=environ.get("MLCOPILOT_GITHUB_BOT_LOGIN") or None,
        write_spacing_s=_spacing(environ, allow_local, 1.0),
    )


def _slack(environ: Mapping[str, str], allow_local: bool) -> SlackSettings | None:
    token = _secret(environ, "SLACK_BOT_TOKEN")
    webhook = _secret(environ, "SLACK_WEBHOOK_URL")
    channel = environ.get("MLCOPILOT_SLACK_CHANNEL") or None
    if token is None and webhook is None:
        return None
    api_url = environ.get("MLCOPILOT_SLACK_API_URL") or "https://slack.com/api/"
    api_url = check_url(
        api_url, what="MLCOPILOT_SLACK_API_URL", allowed=[SLACK_API], allow_local=allow_local
    )
    if token is not None:
        if channel is None or not _CHANNEL.fullmatch(channel):
            raise ConfigError(
                "SLACK_BOT_TOKEN is set: set MLCOPILOT_SLACK_CHANNEL to a channel id or #name"
            )
        return SlackSettings(
            channel=channel,
            bot_token=SecretStr(token),
            api_url=api_url,
            reconcile=not _flag(environ, "MLCOPILOT_SLACK_NO_RECONCILE"),
            post_spacing_s=_spacing(environ, allow_local, 1.1),
        )
    assert webhook is not None
    check_url(webhook, what="SLACK_WEBHOOK_URL", allowed=[SLACK_WEBHOOK], allow_local=allow_local)
    return SlackSettings(
        webhook_url=SecretStr(webhook),
        api_url=api_url,
        reconcile=False,
        post_spacing_s=_spacing(environ, allow_local, 1.1),
    )


def _spacing(environ: Mapping[str, str], allow_local: bool, default: float) -> float:
    # Tests against local fakes may drop the spacing GitHub and Slack ask for; nothing else may.
    raw = environ.get("MLCOPILOT_TEST_WRITE_SPACING")
    if raw and allow_local:
        return parse_duration(raw, "MLCOPILOT_TEST_WRITE_SPACING").total_seconds()
    return default


def _secret(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name) or None
    path = environ.get(f"{name}_FILE") or None
    if value is not None and path is not None:
        raise ConfigError(f"both {name} and {name}_FILE are set: keep one")
    if path is not None:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"{name}_FILE: cannot read the secret file ({type(exc).__name__})"
            ) from None
        if not value:
            raise ConfigError(f"{name}_FILE: the secret file is empty")
    redact.register_secret(value)
    return value


def _flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def parse_duration(text: str, what: str) -> timedelta:
    """``30s``, ``5m``, ``4h``, ``1d`` or plain seconds, as a timedelta."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise ConfigError(f"{what}: {text!r} is not a duration (e.g. 30s, 5m, 4h)")
    return timedelta(seconds=float(match[1]) * _UNITS[match[2] or "s"])


def _duration(environ: Mapping[str, str], name: str, default: timedelta) -> timedelta:
    raw = environ.get(name)
    return default if not raw else parse_duration(raw, name)


def _repeat(environ: Mapping[str, str]) -> timedelta | None:
    raw = environ.get("MLCOPILOT_REPEAT_INTERVAL")
    if raw and raw.strip().lower() in ("off", "never", "none"):
        return None
    return _duration(environ, "MLCOPILOT_REPEAT_INTERVAL", timedelta(hours=4))
