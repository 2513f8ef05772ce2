"""The sinks: the built-in ones and the plugins registered under ``mlcopilot.sinks``.

A sink turns an outbox row (one transition of a notification group: opened, updated,
reminder, acknowledged, resolved) into a message somewhere, idempotently. The contract is
:class:`~mlcopilot.incidents.payload.Sink` (``name`` and ``deliver(item, ref)``) plus, on the
class, ``events`` (the transitions it wants rows for) and ``from_context`` (how it is built)::

    [project.entry-points."mlcopilot.sinks"]
    opsgenie = "mlcopilot_opsgenie:OpsgenieSink"

A plugin is on when the configuration has its section, ``[sinks.opsgenie]`` (raw, parsed by
the plugin; ``enabled = false`` switches it off); the built-ins are on when their settings
are (``MLCOPILOT_SLACK_CHANNEL``, ``MLCOPILOT_PAGERDUTY_ROUTING_KEY``, ...). Behind every sink
is the outbox: a row is committed with the scan, claimed under a lease, retried with backoff
and marked done once; ``item.dedupe_key`` is the event's stable idempotency key.

Routing may send a group to a destination other than a sink's default (a team's channel, a
repository): the row's target is then ``slack:C0PAYMENTS``. :class:`ByDestination` builds one
sink per destination the first time a row needs it, so each keeps its own state (a
channel's id, a repository's labels).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, cast

from mlcopilot.clock import Clock
from mlcopilot.incidents.payload import Delivered, OutboxItem, Sink, SinkRef
from mlcopilot.model import Action, destination_of
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.notify.sinks.plugins import ALL_EVENTS, load_plugin, plugin_entry_points

CHAT_EVENTS: frozenset[Action] = frozenset({"open", "update", "reminder", "resolve"})
"""GitHub and Slack: an acknowledgement is made there (or in DataHub), not told there."""


@dataclass(frozen=True, slots=True)
class SinkContext:
    """What a sink is built from."""

    notify: NotifySettings
    """Every notification setting (the built-ins read their own part)."""
    clock: Clock
    destination: str | None = None
    """Where routing sends this instance's rows (a channel, a repository); None: the default."""
    section: Mapping[str, Any] = field(default_factory=dict)
    """A plugin's ``[sinks.NAME]`` section, without ``enabled``, unparsed."""


class SinkPlugin(Protocol):
    """What a sink class registered under ``mlcopilot.sinks`` provides."""

    name: ClassVar[str]
    events: ClassVar[frozenset[Action]]

    @classmethod
    def from_context(cls, context: SinkContext) -> Sink:
        """The sink for ``context`` (ConfigError when its section cannot be used)."""
        ...


@dataclass(frozen=True, slots=True)
class _Builtin:
    events: frozenset[Action]
    make: Callable[[SinkContext], Sink]


def _github(context: SinkContext) -> Sink:
    from mlcopilot.notify.sinks.github import GitHubSink

    settings = context.notify.github
    assert settings is not None
    if context.destination:
        settings = settings.model_copy(update={"repo": context.destination})
    return GitHubSink(settings, clock=context.clock, datahub_url=context.notify.datahub_url)


def _slack(context: SinkContext) -> Sink:
    from mlcopilot.notify.sinks.slack import SlackSink, SlackWebhookSink

    settings = context.notify.slack
    assert settings is not None
    if settings.mode == "webhook":  # one channel, the webhook's: destinations do not apply
        return SlackWebhookSink(
            settings, clock=context.clock, datahub_url=context.notify.datahub_url
        )
    if context.destination:
        settings = settings.model_copy(update={"channel": context.destination})
    return SlackSink(settings, clock=context.clock, datahub_url=context.notify.datahub_url)


def _pagerduty(context: SinkContext) -> Sink:
    from mlcopilot.notify.sinks.pagerduty import PagerDutySink

    assert context.notify.pagerduty is not None
    return PagerDutySink(
        context.notify.pagerduty, clock=context.clock, datahub_url=context.notify.datahub_url
    )


def _teams(context: SinkContext) -> Sink:
    from mlcopilot.notify.sinks.teams import TeamsSink

    assert context.notify.teams is not None
    return TeamsSink(
        context.notify.teams, clock=context.clock, datahub_url=context.notify.datahub_url
    )


def _webhook(context: SinkContext) -> Sink:
    from mlcopilot.notify.sinks.webhook import WebhookSink

    assert context.notify.webhook is not None
    return WebhookSink(
        context.notify.webhook, clock=context.clock, datahub_url=context.notify.datahub_url
    )


BUILTIN_SINKS: Mapping[str, _Builtin] = {
    "github": _Builtin(CHAT_EVENTS, _github),
    "slack": _Builtin(CHAT_EVENTS, _slack),
    "pagerduty": _Builtin(ALL_EVENTS, _pagerduty),
    "teams": _Builtin(ALL_EVENTS, _teams),
    "webhook": _Builtin(ALL_EVENTS, _webhook),
}
"""The built-in sinks (in the order :attr:`NotifySettings.sinks` lists them): the transitions
each takes and how it is built. Each module is imported only when its sink is on."""


class ByDestination:
    """One sink per destination of one kind, each built when a row first needs it."""

    def __init__(self, name: str, make: Callable[[str | None], Sink]) -> None:
        self._name = name
        self._make = make
        self._sinks: dict[str | None, Sink] = {}

    @property
    def name(self) -> str:
        """The sink's name (every row whose target goes through it)."""
        return self._name

    def at(self, destination: str | None) -> Sink:
        """The sink for ``destination`` (None: the configured default)."""
        if destination not in self._sinks:
            self._sinks[destination] = self._make(destination)
        return self._sinks[destination]

    def built(self) -> list[tuple[str | None, Sink]]:
        """The sinks built so far, by destination."""
        return list(self._sinks.items())

    def deliver(self, item: OutboxItem, ref: SinkRef | None) -> Delivered:
        """Deliver ``item`` through the sink of its target's destination."""
        return self.at(destination_of(item.sink)).deliver(item, ref)


def events_of(notify: NotifySettings) -> dict[str, frozenset[Action]]:
    """Each sink on → the transitions it takes rows for."""
    plugins = _plugins(notify)
    return {
        name: BUILTIN_SINKS[name].events if name in BUILTIN_SINKS else plugins[name].events
        for name in notify.sinks
    }


def acknowledging(notify: NotifySettings) -> frozenset[str]:
    """The sinks on that are told of an acknowledgement."""
    return frozenset(name for name, events in events_of(notify).items() if "acknowledge" in events)


def build_sinks(notify: NotifySettings, clock: Clock) -> list[ByDestination]:
    """The sinks the settings turn on, each ready to build per destination.

    A plugin's default sink is built here, so a section it refuses (a ``ConfigError``) stops
    the command before the scan, not at its first row.
    """
    plugins = _plugins(notify)
    built = [ByDestination(name, _maker(name, notify, clock, plugins)) for name in notify.sinks]
    for sink in built:
        if sink.name in plugins:
            sink.at(None)
    return built


def _maker(
    name: str, notify: NotifySettings, clock: Clock, plugins: Mapping[str, type[SinkPlugin]]
) -> Callable[[str | None], Sink]:
    if name in BUILTIN_SINKS:
        make = BUILTIN_SINKS[name].make
        return lambda destination: make(SinkContext(notify, clock, destination))
    plugin, section = plugins[name], notify.plugins[name]
    return lambda destination: plugin.from_context(SinkContext(notify, clock, destination, section))


def _plugins(notify: NotifySettings) -> dict[str, type[SinkPlugin]]:
    if not notify.plugins:
        # Listing entry points reads every installed package's metadata (7 ms on an idle
        # machine), and the watcher's scanner builds the sinks for every scan it runs.
        return {}
    found = plugin_entry_points()
    return {name: cast("type[SinkPlugin]", load_plugin(found[name])) for name in notify.plugins}
