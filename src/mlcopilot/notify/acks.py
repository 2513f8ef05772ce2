"""Acknowledgements made elsewhere, read back on every scan: DataHub first, then GitHub.

People triage where they are: they move the DataHub incident past TRIAGE or assign it, assign
the GitHub issue or label it ``acknowledged`` (or close it as not planned). Before it
reconciles, a scan asks each source about the open, unacknowledged groups of the models it
scans and acknowledges their incidents in the state store — after which the group gets no
more updates or reminders, only its resolution. A source that cannot be reached is reported
and skipped: acknowledgements are a convenience, never a reason to fail a scan.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from mlcopilot.errors import MlCopilotError
from mlcopilot.incidents.payload import DeliveryError, SinkRef, WatchedGroup
from mlcopilot.incidents.writeback import incident_urn
from mlcopilot.model import Urn, destination_of, sink_of
from mlcopilot.notify.sinks.datahub import IncidentStatusReader, datahub_acknowledger
from mlcopilot.protocols import StateStore
from mlcopilot.redact import redact_exception

log = logging.getLogger(__name__)


class AckSource(Protocol):
    """Says which open incidents someone acknowledged outside mlcopilot, and who."""

    @property
    def label(self) -> str:
        """What to call the source in warnings."""
        ...

    @property
    def whole_groups(self) -> bool:
        """Whether an acknowledgement here is of the whole group (every open incident of it)."""
        ...

    def acknowledgements(self, groups: Sequence[WatchedGroup]) -> dict[str, str]:
        """``incident id -> who`` for the incidents of ``groups`` acknowledged there."""
        ...


class IssueReader(Protocol):
    """The part of the GitHub sink that reads an issue's triage state."""

    def acknowledged_by(self, ref: SinkRef) -> str | None:
        """Who acknowledged the issue, or None."""
        ...


class IssueReaders(Protocol):
    """The GitHub sink of each repository routing chose (None: the configured one)."""

    def at(self, destination: str | None) -> Any:
        """The sink for ``destination``; a GitHub sink is an :class:`IssueReader`."""
        ...


class GitHubAcks:
    """An assignee, the ``acknowledged`` label or a not-planned close on the group's issue.

    A group routed to several repositories has an issue in each; any one acknowledged
    acknowledges the group.
    """

    label = "GitHub"
    whole_groups = True

    def __init__(self, readers: IssueReaders) -> None:
        self._readers = readers

    def acknowledgements(self, groups: Sequence[WatchedGroup]) -> dict[str, str]:
        """Every open incident of a group whose issue was acknowledged."""
        found: dict[str, str] = {}
        for group in groups:
            for target, ref in sorted(group.refs.items()):
                if sink_of(target) != "github":
                    continue
                reader: IssueReader = self._readers.at(destination_of(target))
                who = reader.acknowledged_by(ref)
                if who is not None:
                    found.update({incident.id: who for incident in group.incidents})
                    break
        return found


class DataHubAcks:
    """The DataHub incident's stage (past TRIAGE) or an assignee, per incident."""

    label = "DataHub"
    whole_groups = False

    def __init__(self, reader: IncidentStatusReader) -> None:
        self._reader = reader

    def acknowledgements(self, groups: Sequence[WatchedGroup]) -> dict[str, str]:
        """Every open incident whose DataHub incident someone took."""
        by_urn: dict[Urn, str] = {
            incident_urn(incident): incident.id for g in groups for incident in g.incidents
        }
        if not by_urn:
            return {}
        found: dict[str, str] = {}
        for urn, status in self._reader.incident_status(sorted(by_urn)).items():
            who = datahub_acknowledger(status)
            if who is not None and urn in by_urn:
                found[by_urn[urn]] = who
        return found


@dataclass(slots=True)
class AckReport:
    """What reading acknowledgements back did."""

    acknowledged: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def read_back(
    store: StateStore, sources: Sequence[AckSource], models: Sequence[Urn], *, now: datetime
) -> AckReport:
    """Acknowledge, in the store, what people acknowledged in ``sources`` (first source wins)."""
    report = AckReport()
    if not sources:
        return report
    groups = store.watched_groups(models)
    if not groups:
        return report
    for source in sources:
        try:
            found = source.acknowledgements(groups)
        except (DeliveryError, MlCopilotError, OSError) as exc:
            warning = f"could not read acknowledgements from {source.label}: " + redact_exception(
                exc
            )
            log.warning("%s", warning)
            report.warnings.append(warning)
            continue
        if source.whole_groups and found:
            found = _every_member(store, groups, found)
        for incident_id, who in found.items():
            report.acknowledged.setdefault(incident_id, who)
    for incident_id, who in sorted(report.acknowledged.items()):
        try:
            store.acknowledge(incident_id, by=who, at=now)
        except MlCopilotError as exc:  # resolved meanwhile: nothing left to acknowledge
            report.warnings.append(redact_exception(exc))
    return report


def _every_member(
    store: StateStore, groups: Sequence[WatchedGroup], found: dict[str, str]
) -> dict[str, str]:
    """``found`` and every other open incident of the groups acknowledged as a whole.

    ``groups`` hold the scanned models' incidents only; a group on a shared entity has other
    models' too, which its acknowledgement covers as well (read for those groups alone).
    """
    who_by_group = {
        (group.key, group.generation): found[member.id]
        for group in groups
        for member in group.incidents
        if member.id in found
    }
    everyone = dict(found)
    for group in store.watched_groups(keys=sorted({key for key, _ in who_by_group})):
        who = who_by_group.get((group.key, group.generation))
        if who is not None:
            for member in group.incidents:
                everyone.setdefault(member.id, who)
    return everyone
