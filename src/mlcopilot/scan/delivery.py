"""Turn notification settings into the sinks, acknowledgement sources and relay a command uses.

The one place that builds sinks (through :mod:`mlcopilot.notify.sinks.registry`: the built-ins
and the ``mlcopilot.sinks`` plugins); commands ask it for a :class:`~mlcopilot.scan.Delivery`
(what a scan notifies) or a :class:`~mlcopilot.notify.relay.Relay` (what ``mlcopilot outbox``
delivers with). Each sink's module is imported only when the settings turn it on.
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
from mlcopilot.notify.sinks.registry import ByDestination, acknowledging, build_sinks
from mlcopilot.protocols import Catalog, StateStore
from mlcopilot.scan import Delivery


def notification_sinks(settings: NotifySettings, clock: Clock) -> list[ByDestination]:
    """The notification sinks the settings turn on (none when none is), built-ins and plugins."""
    return build_sinks(settings, clock)


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
    sources += [GitHubAcks(s) for s in sinks if s.name == "github"]
    return Delivery(
        sinks=sinks,
        policy=settings.policy,
        ack_sources=sources,
        clock=clock,
        failpoint=env_failpoint(settings.failpoint),
        deliver=deliver,
        write_back=settings.write_back,
        report_url=settings.report_url,
        routing=settings,
        acknowledging=acknowledging(settings),
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
    incident_types: frozenset[str] | None = None,
) -> NotifyRequest:
    """The notification request for a change made by hand to one model's incidents.

    With ``resolving`` (an incident id and the reason), the write-back shows it resolved.
    ``incident_types``: what the catalog's incidents may name (see
    :func:`~mlcopilot.incidents.writeback.incident_types_of`; None: any).
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
    writes = plan_writeback(
        mine, models=[model], everything=everything, infos=infos, incident_types=incident_types
    )
    writeback = encode_writes(writes) if settings.write_back else ()
    return NotifyRequest(
        policy=settings.policy,
        sinks=settings.sinks,
        writeback=writeback,
        infos=infos,
        acknowledging=acknowledging(settings),
    )
