"""One configuration: the only reader of the environment and of the configuration file.

Every value has one key (``github.repo``, ``notify.group_wait``, ``checks.stale_source``) and
comes from the first of: a command-line flag, an environment variable, the TOML file
(``--config PATH``, else ``$MLCOPILOT_CONFIG``, else ``$MLCOPILOT_HOME/config.toml``), the
default. :attr:`Settings.sources` says which, for ``mlcopilot config show``.

Secrets (tokens, the Slack webhook URL) are read only from the environment or from the file a
``*_FILE`` variable names (Docker and Kubernetes secrets), never from the configuration file
or a flag; each is typed ``SecretStr`` and registered with the redactor as soon as it is read.

Each check's section (``[checks.NAME]``) is kept raw: the check validates it with its own
model (:func:`mlcopilot.checks.load_checks`), as datahub-actions' plugins parse their own
``config``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from mlcopilot import redact
from mlcopilot.errors import ConfigError
from mlcopilot.model import NotifyPolicy
from mlcopilot.settings import file as settings_file

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$")
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_OFF: Final = ("off", "never", "none")
_TRUE: Final = ("1", "true", "yes", "on")


def parse_duration(text: str, what: str) -> timedelta:
    """``30s``, ``5m``, ``4h``, ``1d`` or plain seconds, as a timedelta."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise ConfigError(f"{what}: {text!r} is not a duration (e.g. 30s, 5m, 4h)")
    return timedelta(seconds=float(match[1]) * _UNITS[match[2] or "s"])


def format_duration(value: timedelta | None) -> str:
    """The shortest ``30s`` / ``5m`` / ``4h`` / ``1d`` spelling; ``off`` for None."""
    if value is None:
        return "off"
    seconds = value.total_seconds()
    for unit in ("d", "h", "m", "s"):
        if seconds >= _UNITS[unit] and seconds % _UNITS[unit] == 0:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{seconds:g}s"


def _duration(value: object) -> object:
    # A number is seconds; a string is parsed here so the message names the format.
    if isinstance(value, str):
        try:
            return parse_duration(value, "duration")
        except ConfigError:
            raise ValueError("not a duration (e.g. 30s, 5m, 4h)") from None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    return value


def _optional_duration(value: object) -> object:
    if isinstance(value, str) and value.strip().lower() in _OFF:
        return None
    return _duration(value)


def _flag(value: object) -> object:
    return value.strip().lower() in _TRUE if isinstance(value, str) else value


def _hosts(value: object) -> object:
    # The environment gives "a,b"; the file gives a list.
    if isinstance(value, str):
        return [h.strip().lower() for h in value.split(",") if h.strip()]
    return value


_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class HostRule:
    """One ``notify.allowed_hosts`` entry.

    A host (name or address) with an optional port, or a network (CIDR) of addresses on the
    default port.
    """

    host: str | None = None
    port: int | None = None
    network: Network | None = None


def host_rule(entry: str) -> HostRule:
    """Parse ``host``, ``host:port``, ``[v6]:port``, an IP address or a CIDR network.

    Raises:
        ValueError: naming the entry, when it is none of those (no scheme, path or wildcard).
    """
    text = entry.strip().lower()
    bad = ValueError(f"{entry!r} is not a host, host:port or CIDR (e.g. ghe.corp:8443, 10.0.0.0/8)")
    if "/" in text:
        try:
            return HostRule(network=ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise bad from None
    host, port = text, None
    if text.startswith("["):  # [v6] or [v6]:port
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise bad
        port = rest[1:] or None
    elif text.count(":") == 1:
        host, port = text.split(":")
    number = None
    if port is not None:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise bad
        number = int(port)
    try:
        return HostRule(host=str(ipaddress.ip_address(host)), port=number)
    except ValueError:
        if not _HOST_NAME.fullmatch(host) or host.replace(".", "").isdigit():
            raise bad from None
    return HostRule(host=host, port=number)


def _allowed_hosts(value: list[str]) -> list[str]:
    for entry in value:
        host_rule(entry)  # a bad entry fails here, named, before anything connects
    return value


CATALOG_KINDS: Final = ("lite", "datahub", "mcp")
"""What a ``catalog`` spec may start with: the backends of ``mlcopilot.catalog.BACKENDS``."""


def _catalog_spec(value: str | None) -> str | None:
    # Checked here, so a bad value is named where it was set (the file's line, the variable);
    # the wiring checks a --catalog flag the same way.
    if not value:
        return value
    kind, sep, location = value.partition(":")
    if not sep or (not location and kind != "datahub") or kind not in CATALOG_KINDS:
        raise ValueError(
            f"{value!r}: expected lite:PATH, datahub:URL or mcp:URL "
            "(e.g. lite:~/.mlcopilot/catalog.db)"
        )
    return value


Duration = Annotated[timedelta, BeforeValidator(_duration)]
OptionalDuration = Annotated[timedelta | None, BeforeValidator(_optional_duration)]
Flag = Annotated[bool, BeforeValidator(_flag)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class DataHubSection(_Section):
    """``[datahub]``: the GMS server for ``--catalog datahub:`` and links in notifications."""

    gms_url: str | None = Field(None, description="GMS URL for `datahub:` and `mcp:` alone")
    token: SecretStr | None = Field(None, description="personal access token")
    ui_url: str | None = Field(None, description="DataHub UI base URL, for links")
    write_back: Flag = Field(
        True,
        description="write tags, properties, incidents and documents to the catalog; false "
        "to shadow-run (state and notifications only)",
    )
    walk_timeout: OptionalDuration = Field(
        timedelta(minutes=30),
        description="bound on a scan's whole walk of the catalog (models, lineage, history); "
        'past it the scan stops with exit 3 and records nothing; "off" for none',
    )


class GitHubSection(_Section):
    """``[github]``: GitHub issues; on when ``repo`` is set."""

    repo: str | None = Field(None, description="owner/name; GitHub notifications are on when set")
    token: SecretStr | None = Field(None, description="fine-grained token, Issues read/write")
    api_url: str = Field("https://api.github.com", description="GHES: https://HOST/api/v3")
    allowed_hosts: Annotated[list[str], BeforeValidator(_hosts)] = Field(
        default_factory=list, description="GHES hosts the API URL may name (an allowlist)"
    )
    bot_login: str | None = Field(None, description="the token's login, to tell its comments")
    label: str = Field("mlcopilot", description="label on every issue mlcopilot opens")
    ack_label: str = Field("acknowledged", description="label that acknowledges an incident")


class SlackSection(_Section):
    """``[slack]``: a bot (threads; ``channel`` and a bot token) or an incoming webhook."""

    channel: str | None = Field(None, description="channel id or #name, for the bot")
    bot_token: SecretStr | None = Field(None, description="bot token (chat:write)")
    webhook_url: SecretStr | None = Field(None, description="incoming webhook (no threads)")
    api_url: str = Field("https://slack.com/api/", description="Slack Web API base URL")
    reconcile: Flag = Field(True, description="read channel history to find lost posts")


def _one_of(*allowed: str) -> AfterValidator:
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"{value!r}: expected one of {', '.join(allowed)}")
        return value

    return AfterValidator(check)


SEVERITIES: Final = ("critical", "high", "medium", "low")
"""Severity names, worst first, as configuration spells them."""
OWNER_SCOPES: Final = ("model", "entity")


def _lower(value: object) -> object:
    return value.strip().lower() if isinstance(value, str) else value


SeverityName = Annotated[str, BeforeValidator(_lower), _one_of(*SEVERITIES)]


class PagerDutySection(_Section):
    """``[pagerduty]``: PagerDuty's Events API v2; on when a routing key is set."""

    routing_key: SecretStr | None = Field(
        None, description="the integration's routing key (a secret: environment or _FILE only)"
    )
    url: str = Field("https://events.pagerduty.com", description="Events API base URL")
    min_severity: SeverityName = Field(
        "high", description="page for incidents at least this severe (critical, high, ...)"
    )


class TeamsSection(_Section):
    """``[teams]``: Microsoft Teams through a Workflows webhook; on when its URL is set."""

    webhook_url: SecretStr | None = Field(
        None, description="the Workflows webhook URL (a secret: it carries a signature)"
    )


class WebhookSection(_Section):
    """``[webhook]``: a signed JSON event per incident transition; on when ``url`` is set."""

    url: str | None = Field(None, description="where each event is POSTed (https)")
    secret: SecretStr | None = Field(
        None, description="HMAC-SHA256 key of X-Mlcopilot-Signature (a secret)"
    )


class RouteRule(_Section):
    """One ``[[notify.routes]]`` rule: which incidents it matches, and where they go.

    Empty conditions match everything; a sink the rule does not name is left as the model's
    owners or the defaults have it.
    """

    domains: list[str] = Field(default_factory=list, description="domain names or urns")
    platforms: list[str] = Field(default_factory=list, description="model platforms")
    models: list[str] = Field(default_factory=list, description="globs on the model's name")
    checks: list[str] = Field(default_factory=list, description="check names")
    min_severity: SeverityName | None = Field(
        None, description="the least severity the rule matches"
    )
    slack_channel: str | None = Field(None, description="a channel id or #name")
    github_repo: str | None = Field(None, description="owner/name")
    github_labels: list[str] = Field(default_factory=list, description="labels on its issues")
    pagerduty: bool | None = Field(None, description="page (subject to pagerduty.min_severity)")
    teams: bool | None = Field(None, description="post to Teams")
    webhook: bool | None = Field(None, description="send the signed webhook")


_POLICY = NotifyPolicy()


class NotifySection(_Section):
    """``[notify]``: when notifications go out."""

    # The defaults are the policy's own (Alertmanager's timings), not a second copy.
    group_wait: Duration = Field(
        _POLICY.group_wait, description="wait before a new group's first notification"
    )
    group_interval: Duration = Field(
        _POLICY.group_interval, description="least time between two updates of a group"
    )
    repeat_interval: OptionalDuration = Field(
        _POLICY.repeat_interval,
        description='reminder while open and unacknowledged; "off" for none',
    )
    allowed_hosts: Annotated[list[str], BeforeValidator(_hosts), AfterValidator(_allowed_hosts)] = (
        Field(
            default_factory=list,
            description="your own GitHub/Slack endpoints: host, host:port or CIDR (an allowlist)",
        )
    )
    allow_local_sinks: Flag = Field(
        False, description="allow local GitHub/Slack URLs (tests against local fakes only)"
    )
    test_write_spacing: Duration | None = Field(
        None, description="spacing between writes to local fakes (needs allow_local_sinks)"
    )
    failpoint: str = Field("", description="crash-test failpoints (tests only)")
    owners: list[Annotated[str, _one_of(*OWNER_SCOPES)]] = Field(
        default_factory=lambda: ["model"],
        description='whose DataHub owners are told: "model", and "entity" (the affected one)',
    )
    routes: list[RouteRule] = Field(
        default_factory=list, description="[[notify.routes]] rules, first match wins"
    )


class ReportSection(_Section):
    """``[report]``: where the scan's HTML report is published, so notifications link to it."""

    url: str | None = Field(
        None,
        description="https URL of the published HTML report, for links in GitHub issues and "
        "Slack messages; {model} becomes the model's name",
    )


class SarifSection(_Section):
    """``[sarif]``: where ``--format sarif`` puts each result in the repository.

    GitHub's code scanning shows a result only at a file location; a catalog finding has
    none of its own. Paths are relative to the repository's root, the folder the scan runs
    in (as in CI).
    """

    dbt_manifest: str | None = Field(
        None,
        description="a dbt manifest.json: a finding on a dataset dbt builds points at its "
        "model's file",
    )
    location: str | None = Field(
        None,
        description="the file every other finding points at (e.g. the metadata file or the "
        "training code); default: the catalog file",
    )


WATCH_SOURCES: Final = ("kafka", "datahub-cloud")
"""Event sources ``mlcopilot watch`` can follow: DataHub's Kafka topics, or DataHub Cloud's
events API (a single consumer; no scale-out)."""


def _actors(value: object) -> object:
    # The environment gives "a,b"; the file gives a list. Urns are case-sensitive.
    if isinstance(value, str):
        return [a.strip() for a in value.split(",") if a.strip()]
    return value


class WatchSection(_Section):
    """``[watch]``: ``mlcopilot watch``, following DataHub's change events.

    The Kafka keys read the variables DataHub's own services and its Actions framework read,
    with DataHub's defaults, so a watcher beside a DataHub deployment needs no new settings.
    """

    source: Annotated[str, _one_of(*WATCH_SOURCES)] = Field(
        "kafka", description="kafka (scales out by consumer group) or datahub-cloud"
    )
    bootstrap: str = Field("localhost:9092", description="Kafka bootstrap servers")
    schema_registry_url: str = Field(
        "http://localhost:8081", description="schema registry of DataHub's Avro events"
    )
    platform_event_topic: str = Field(
        "PlatformEvent_v1", description="topic of entity and relationship change events"
    )
    mcl_topic: str = Field(
        "MetadataChangeLog_Versioned_v1", description="topic of versioned aspect changes"
    )
    mcl_timeseries_topic: str = Field(
        "MetadataChangeLog_Timeseries_v1",
        description="topic of timeseries aspect changes (operations, assertion runs)",
    )
    group: str = Field(
        "mlcopilot-watch",
        description="consumer group = pipeline name; watchers sharing it split the partitions",
    )
    offset_reset: Annotated[str, _one_of("latest", "earliest")] = Field(
        "latest", description="where a new consumer group starts: latest or earliest"
    )
    rescan_interval: OptionalDuration = Field(
        timedelta(hours=1),
        description='full rescan for what only time changes (freshness); "off" for none',
    )
    retry_backoff: Duration = Field(
        timedelta(seconds=30),
        description="wait after a failed rescan, doubled per failure up to rescan_interval",
    )
    rescan_batch: int = Field(
        250,
        ge=1,
        description="models per batch of a full rescan, which every watcher and `scan --shared` "
        "on the state database take from together",
    )
    failed_events_dir: str | None = Field(
        None, description="where poison events are logged (default: $MLCOPILOT_HOME/failed-events)"
    )
    ignore_actors: Annotated[list[str], BeforeValidator(_actors)] = Field(
        default_factory=list,
        description="actor urns whose changes never trigger a rescan (mlcopilot's own token)",
    )


ENVIRONMENT: Final[dict[str, str]] = {
    "home": "MLCOPILOT_HOME",
    "catalog": "MLCOPILOT_CATALOG",
    "state_url": "MLCOPILOT_STATE_URL",
    "datahub.gms_url": "DATAHUB_GMS_URL",
    "datahub.token": "DATAHUB_GMS_TOKEN",
    "datahub.ui_url": "MLCOPILOT_DATAHUB_URL",
    "datahub.write_back": "MLCOPILOT_WRITE_BACK",
    "datahub.walk_timeout": "MLCOPILOT_WALK_TIMEOUT",
    "github.repo": "MLCOPILOT_GITHUB_REPO",
    "github.token": "GITHUB_TOKEN",
    "github.api_url": "MLCOPILOT_GITHUB_API_URL",
    "github.allowed_hosts": "MLCOPILOT_GITHUB_ALLOWED_HOSTS",
    "github.bot_login": "MLCOPILOT_GITHUB_BOT_LOGIN",
    "slack.channel": "MLCOPILOT_SLACK_CHANNEL",
    "slack.bot_token": "SLACK_BOT_TOKEN",
    "slack.webhook_url": "SLACK_WEBHOOK_URL",
    "slack.api_url": "MLCOPILOT_SLACK_API_URL",
    "slack.reconcile": "MLCOPILOT_SLACK_NO_RECONCILE",  # inverted: set means false
    "pagerduty.routing_key": "MLCOPILOT_PAGERDUTY_ROUTING_KEY",
    "pagerduty.url": "MLCOPILOT_PAGERDUTY_URL",
    "pagerduty.min_severity": "MLCOPILOT_PAGERDUTY_MIN_SEVERITY",
    "teams.webhook_url": "MLCOPILOT_TEAMS_WEBHOOK_URL",
    "webhook.url": "MLCOPILOT_WEBHOOK_URL",
    "webhook.secret": "MLCOPILOT_WEBHOOK_SECRET",
    "notify.group_wait": "MLCOPILOT_GROUP_WAIT",
    "notify.group_interval": "MLCOPILOT_GROUP_INTERVAL",
    "notify.repeat_interval": "MLCOPILOT_REPEAT_INTERVAL",
    "notify.allowed_hosts": "MLCOPILOT_ALLOWED_HOSTS",
    "notify.allow_local_sinks": "MLCOPILOT_ALLOW_LOCAL_SINKS",
    "notify.test_write_spacing": "MLCOPILOT_TEST_WRITE_SPACING",
    "notify.failpoint": "MLCOPILOT_FAILPOINT",
    "report.url": "MLCOPILOT_REPORT_URL",
    "sarif.dbt_manifest": "MLCOPILOT_SARIF_DBT_MANIFEST",
    "sarif.location": "MLCOPILOT_SARIF_LOCATION",
    "watch.source": "MLCOPILOT_WATCH_SOURCE",
    # DataHub's own names, as its services and the Actions framework read them.
    "watch.bootstrap": "KAFKA_BOOTSTRAP_SERVER",
    "watch.schema_registry_url": "SCHEMA_REGISTRY_URL",
    "watch.platform_event_topic": "PLATFORM_EVENT_TOPIC_NAME",
    "watch.mcl_topic": "METADATA_CHANGE_LOG_VERSIONED_TOPIC_NAME",
    "watch.mcl_timeseries_topic": "METADATA_CHANGE_LOG_TIMESERIES_TOPIC_NAME",
    "watch.group": "MLCOPILOT_WATCH_GROUP",
    "watch.offset_reset": "MLCOPILOT_WATCH_OFFSET_RESET",
    "watch.rescan_interval": "MLCOPILOT_RESCAN_INTERVAL",
    "watch.retry_backoff": "MLCOPILOT_WATCH_RETRY_BACKOFF",
    "watch.rescan_batch": "MLCOPILOT_RESCAN_BATCH",
    "watch.failed_events_dir": "MLCOPILOT_FAILED_EVENTS_DIR",
    "watch.ignore_actors": "MLCOPILOT_WATCH_IGNORE_ACTORS",
}
"""Key → the environment variable that sets it (the names mlcopilot has always read)."""

SECRETS: Final[dict[str, str]] = {
    "datahub.token": "DATAHUB_GMS_TOKEN",
    "github.token": "GITHUB_TOKEN",
    "slack.bot_token": "SLACK_BOT_TOKEN",
    "slack.webhook_url": "SLACK_WEBHOOK_URL",
    "pagerduty.routing_key": "MLCOPILOT_PAGERDUTY_ROUTING_KEY",
    "teams.webhook_url": "MLCOPILOT_TEAMS_WEBHOOK_URL",
    "webhook.secret": "MLCOPILOT_WEBHOOK_SECRET",
}
"""Secret key → its variable; each also has a ``*_FILE`` variant, and none may be in a file."""

FLAGS: Final[dict[str, str]] = {"catalog": "--catalog", "state_url": "--state-url"}
"""Key → the command-line flag that sets it."""

DEFAULT = "default"


class Settings(BaseSettings):
    """Everything mlcopilot can be configured with; build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    home: Path = Field(
        default_factory=lambda: Path.home() / ".mlcopilot",
        description="where the embedded catalog and the state database live",
    )
    catalog: Annotated[str | None, AfterValidator(_catalog_spec)] = Field(
        None, description="lite:PATH, datahub:URL (datahub: for DataHub's own settings), mcp:URL"
    )
    state_url: str | None = Field(
        None, description="SQLAlchemy URL of the state database (password in the environment)"
    )
    datahub: DataHubSection = Field(default_factory=DataHubSection)
    github: GitHubSection = Field(default_factory=GitHubSection)
    slack: SlackSection = Field(default_factory=SlackSection)
    pagerduty: PagerDutySection = Field(default_factory=PagerDutySection)
    teams: TeamsSection = Field(default_factory=TeamsSection)
    webhook: WebhookSection = Field(default_factory=WebhookSection)
    notify: NotifySection = Field(default_factory=NotifySection)
    report: ReportSection = Field(default_factory=ReportSection)
    sarif: SarifSection = Field(default_factory=SarifSection)
    watch: WatchSection = Field(default_factory=WatchSection)
    checks: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="each check's own section, parsed by the check"
    )
    sinks: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="each sink plugin's own section, parsed by the plugin"
    )

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)
    _file: Path | None = PrivateAttr(default=None)
    _file_text: str = PrivateAttr(default="")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init arguments), then the environment, then the file: the first wins."""
        layers = _LAYERS.get()
        return (
            init_settings,
            _Layer(settings_cls, layers.env if layers else {}),
            _Layer(settings_cls, layers.file if layers else {}),
        )

    @property
    def home_path(self) -> Path:
        """``home`` with ``~`` expanded."""
        return self.home.expanduser()

    @property
    def catalog_spec(self) -> str:
        """The catalog to use: ``catalog``, else ``lite:$MLCOPILOT_HOME/catalog.db``."""
        return self.catalog or f"lite:{self.home_path / 'catalog.db'}"

    @property
    def failed_events_path(self) -> Path:
        """``watch.failed_events_dir``, else ``failed-events`` in home."""
        configured = self.watch.failed_events_dir
        return Path(configured).expanduser() if configured else self.home_path / "failed-events"

    @property
    def file(self) -> Path | None:
        """The configuration file read, if any."""
        return self._file

    @property
    def sources(self) -> Mapping[str, str]:
        """Key → where its value came from (file path and line, variable, flag); not defaults."""
        return self._sources

    def source_of(self, key: str) -> str:
        """Where ``key`` came from: ``PATH:LINE``, a variable's name, a flag, or ``default``."""
        return self._sources.get(key, DEFAULT)

    def name_of(self, key: str) -> str:
        """How a message names ``key``: its variable or flag, ``PATH:LINE: key``, or the key."""
        source = self._sources.get(key)
        if source is None:
            return ENVIRONMENT.get(key, key)
        if self._file is not None and source.startswith(f"{self._file}:"):
            return f"{source}: {key}"
        return source

    def where_is(self, key: str) -> str:
        """``PATH:LINE`` of ``key`` (or its table) in the file, or the file, or ``key``."""
        if self._file is None:
            return key
        line = settings_file.line_of(self._file_text, tuple(key.split(".")))
        return f"{self._file}:{line}" if line else str(self._file)

    def with_flags(self, **flags: str | None) -> Settings:
        """These settings with command-line flags (``catalog``, ``state_url``) on top."""
        given = {k: v for k, v in flags.items() if v is not None}
        if not given:
            return self
        copy = self.model_copy(update=given)
        copy._sources = {**self._sources, **{k: FLAGS[k] for k in given}}
        copy._file, copy._file_text = self._file, self._file_text
        return copy

    def effective(self) -> Iterator[tuple[str, object, str]]:
        """Every key with its value (secrets redacted) and its source, in file order."""
        for key, value in settings_file.flatten(self.model_dump(exclude={"checks", "sinks"})):
            dotted = ".".join(key)
            yield dotted, _shown(dotted, value, self), self.source_of(dotted)
        for table, sections in (("checks", self.checks), ("sinks", self.sinks)):
            for name, section in sorted(sections.items()):
                for key, value in settings_file.flatten(section, (table, name)):
                    dotted = ".".join(key)
                    yield dotted, value, self.where_is(dotted)


class _Layers(BaseModel):
    env: dict[str, Any]
    file: dict[str, Any]


_LAYERS: ContextVar[_Layers | None] = ContextVar("mlcopilot_settings_layers", default=None)


class _Layer(PydanticBaseSettingsSource):
    """One already-read layer (environment or file) as a pydantic-settings source."""

    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` returns the whole layer at once."""
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data


def load_settings(
    config: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    catalog: str | None = None,
    state_url: str | None = None,
) -> Settings:
    """Read the configuration: flags over the environment over the file over defaults.

    Args:
        config: ``--config PATH``; else ``$MLCOPILOT_CONFIG``, else
            ``$MLCOPILOT_HOME/config.toml`` when present.
        environ: The environment (default ``os.environ``).
        catalog: ``--catalog``.
        state_url: ``--state-url``.

    Raises:
        ConfigError: a missing named file, a file that is not TOML, an unknown key, a secret
            in the file, or a value that cannot be used. The message says where (file and
            line, variable or flag) and which key, never a secret's value.
    """
    if environ is None:
        import os  # the one read of the process environment

        environ = os.environ
    env, env_sources = _from_environment(environ)
    home = Path(env.get("home") or Path.home() / ".mlcopilot").expanduser()
    path, _ = settings_file.locate(config, environ, home)
    file: dict[str, Any] = {}
    text = ""
    if path is not None:
        file, text = settings_file.read(path, SECRETS, ENVIRONMENT)
    file_sources = {
        ".".join(k): f"{path}:{settings_file.line_of(text, k) or '?'}"
        for k, _ in settings_file.flatten(file)
        if k[0] not in ("checks", "sinks")
    }
    token = _LAYERS.set(_Layers(env=env, file=file))
    try:
        settings = Settings()
    except ValidationError as exc:
        raise ConfigError(_explain(exc, env_sources, path, text)) from None
    finally:
        _LAYERS.reset(token)
    settings._file, settings._file_text = path, text
    settings._sources = {**file_sources, **env_sources}
    return settings.with_flags(catalog=catalog, state_url=state_url)


def _from_environment(environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The environment's layer (nested like the file) and key → variable, secrets registered."""
    layer: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, name in ENVIRONMENT.items():
        if key in SECRETS:
            value, name = _secret(environ, name)
        else:
            value = environ.get(name) or None
        if value is None:
            continue
        if key == "slack.reconcile":
            value = str(not _flag(value))  # the variable says "no"
        section, _, leaf = key.rpartition(".")
        (layer.setdefault(section, {}) if section else layer)[leaf] = value
        sources[key] = name
    return layer, sources


def _secret(environ: Mapping[str, str], name: str) -> tuple[str | None, str]:
    """A secret from ``NAME`` or the file ``NAME_FILE`` names, and which variable gave it."""
    value = environ.get(name) or None
    path = environ.get(f"{name}_FILE") or None
    if value is not None and path is not None:
        raise ConfigError(f"both {name} and {name}_FILE are set: keep one")
    if path is None:
        redact.register_secret(value)
        return value, name
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{name}_FILE: cannot read the secret file ({type(exc).__name__})"
        ) from None
    if not value:
        raise ConfigError(f"{name}_FILE: the secret file is empty")
    redact.register_secret(value)
    return value, f"{name}_FILE"


def _explain(
    exc: ValidationError, env_sources: Mapping[str, str], path: Path | None, text: str
) -> str:
    """One line per problem, each saying where: the variable, or the file and line."""
    problems: list[str] = []
    for error in exc.errors():
        loc = tuple(str(part) for part in error["loc"])
        dotted = ".".join(loc)
        what = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
        what = what.removeprefix("Value error, ")
        env_key = next((k for k in env_sources if dotted == k or dotted.startswith(f"{k}.")), None)
        if env_key is not None:
            problems.append(f"{env_sources[env_key]}: {what}")
        elif path is not None:
            problems.append(f"{path}:{settings_file.line_of(text, loc) or '?'}: {dotted}: {what}")
        else:
            problems.append(f"{dotted}: {what}")
    return "; ".join(problems)


def _shown(key: str, value: object, settings: Settings) -> object:
    """How ``config show`` prints a value: secrets masked, durations spelt, paths as text."""
    if key in SECRETS:
        return None if value is None else redact.MASK
    if isinstance(value, timedelta) or key in ("notify.repeat_interval", "watch.rescan_interval"):
        return format_duration(value) if isinstance(value, timedelta | None) else value
    if key == "home":
        return str(settings.home_path)
    if key == "catalog" and value is None:
        return settings.catalog_spec
    if key == "state_url":
        shown = value or f"sqlite:///{(settings.home_path / 'state.db').resolve()}"
        return redact.redact(str(shown))
    return value
