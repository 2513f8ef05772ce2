"""Turn notification settings into the sinks, acknowledgement sources and relay a command uses.

The one place that knows the concrete GitHub, Slack and DataHub sink classes; commands ask it
for a :class:`~mlcopilot.scan.Delivery` (what a scan notifies) or a
:class:`~mlcopilot.notify.relay.Relay` (what ``mlcopilot outbox`` delivers with). The GitHub
and Slack sinks (githubkit, slack_sdk) are imported only when the settings configure them.
"""

from __future__ import annotations

from datetime import datetime

from mlcopilot.catalog.lite import LiteCatalog
from mlcopilot.checks import available_infos
from mlcopilot.clock import Clock
from mlcopilot.incidents import lifecycle
from mlcopilot.incidents.payload import NotifyRequest, Sink
from mlcopilot.incidents.writeback import plan_writeback
from mlcopilot.notify.acks import AckSource, DataHubAcks, GitHubAcks
from mlcopilot.notify.relay import Relay, env_failpoint
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.notify.sinks.datahub import DataHubSink, IncidentStatusReader, encode_writes
from mlcopilot.notify.sinks.datahub_lite import LiteIncidentStatus
from mlcopilot.protocols import Catalog, StateStore
from mlcopilot.scan import Delivery


def notification_sinks(settings: NotifySettings, clock: Clock) -> list[Sink]:
    """The GitHub and Slack sinks the settings configure (none when none is)."""
    sinks: list[Sink] = []
    if settings.github is not None:
        from mlcopilot.notify.sinks.github import GitHubSink

        sinks.append(GitHubSink(settings.github, clock=clock, datahub_url=settings.datahub_url))
    if settings.slack is not None:
        from mlcopilot.notify.sinks.slack import SlackSink, SlackWebhookSink

        if settings.slack.mode == "bot":
            sinks.append(SlackSink(settings.slack, clock=clock, datahub_url=settings.datahub_url))
        else:
            sinks.append(
                SlackWebhookSink(settings.slack, clock=clock, datahub_url=settings.datahub_url)
            )
    return sinks


def scan_delivery(
    settings: NotifySettings,
    catalog: Catalog,
    clock: Clock,
    *,
    deliver: bool = True,
) -> Delivery:
    """What a scan notifies with: sinks, the policy, and where acknowledgements come from."""
    sinks = notification_sinks(settings, clock)
    sources: list[AckSource] = []
    if isinstance(catalog, IncidentStatusReader):
        sources.append(DataHubAcks(catalog))
    elif isinstance(catalog, LiteCatalog):
        sources.append(DataHubAcks(LiteIncidentStatus(catalog.path)))
    if settings.github is not None:  # else there is no GitHub sink (nor githubkit loaded)
        from mlcopilot.notify.sinks.github import GitHubSink

        sources += [GitHubAcks(s) for s in sinks if isinstance(s, GitHubSink)]
    return Delivery(
        sinks=sinks,
        policy=settings.policy,
        ack_sources=sources,
        clock=clock,
        failpoint=env_failpoint(settings.failpoint),
        deliver=deliver,
        write_back=settings.write_back,
        report_url=settings.report_url,
    )


def relay(
    settings: NotifySettings,
    catalog: Catalog,
    store: StateStore,
    clock: Clock,
) -> tuple[Relay, DataHubSink]:
    """A relay over every configured sink, DataHub's write-back included unless it is off.

    With write-back off, DataHub's rows are left alone (pending); the sink is still returned,
    so its ``applied`` says that nothing was written.
    """
    datahub = DataHubSink(catalog)
    sinks: list[Sink] = [datahub] if settings.write_back else []
    sinks += notification_sinks(settings, clock)
    failpoint = env_failpoint(settings.failpoint)
    return Relay(store, sinks, clock=clock, failpoint=failpoint), datahub


def hand_change_request(
    settings: NotifySettings,
    store: StateStore,
    model: str,
    *,
    resolving: tuple[str, str] | None,
    at: datetime,
) -> NotifyRequest:
    """The notification request for a change made by hand to one model's incidents.

    With ``resolving`` (an incident id and the reason), the write-back shows it resolved.
    """
    everything = store.incidents(include_resolved=True)
    if resolving is not None:
        incident_id, reason = resolving
        everything = [
            lifecycle.resolve(i, at=at, reason=reason) if i.id == incident_id and i.is_open else i
            for i in everything
        ]
    mine = [i for i in everything if i.model == model]
    infos = available_infos()
    writes = plan_writeback(mine, models=[model], everything=everything, infos=infos)
    writeback = encode_writes(writes) if settings.write_back else ()
    return NotifyRequest(
        policy=settings.policy, sinks=settings.sinks, writeback=writeback, infos=infos
    )
