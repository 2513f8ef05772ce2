"""Where a scan's incidents are told: routing (:mod:`mlcopilot.notify.routing`) fed by the walk.

The model's and the affected entity's ``ownership`` and ``domains`` come from the nodes the
scan walked; the owners' contacts (Slack channels and member ids) from one batched read of
the catalog, when it can give them (:class:`~mlcopilot.protocols.OwnerDirectory`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from mlcopilot.model import Incident, ModelReport, Node, Route, Severity, Urn
from mlcopilot.notify.routing import Router, Subject, owner_urns, platform_of
from mlcopilot.notify.sinks.config import NotifySettings
from mlcopilot.protocols import Catalog, OwnerDirectory
from mlcopilot.text.names import short_name


def subjects(incidents: Iterable[Incident], reports: Sequence[ModelReport]) -> dict[str, Subject]:
    """Each incident's routing facts, for incidents of the models the scan walked."""
    nodes: dict[Urn, Mapping[Urn, Node]] = {r.urn: r.lineage.nodes for r in reports}
    found: dict[str, Subject] = {}
    for incident in incidents:
        walked = nodes.get(incident.model)
        if walked is None or incident.model not in walked:
            continue  # not walked now: its group keeps the targets it has
        found[incident.id] = subject_of(
            incident.check, incident.severity, walked[incident.model], walked.get(incident.entity)
        )
    return found


def subject_of(check: str, severity: Severity, model: Node, entity: Node | None) -> Subject:
    """The routing facts of an incident of ``check`` at ``entity`` for ``model``."""
    return Subject(
        check=check,
        severity=severity,
        model=model.urn,
        model_name=model.name or short_name(model.urn),
        platform=platform_of(model.urn),
        domains=model.domains,
        model_owners=model.owners,
        entity=entity.urn if entity is not None else None,
        entity_owners=entity.owners if entity is not None else None,
    )


def router(
    catalog: Catalog,
    notify: NotifySettings,
    about: Iterable[Subject],
    sinks: tuple[str, ...] | None = None,
) -> Router:
    """A router to ``sinks`` (default: the settings').

    It knows the contacts of every owner of ``about`` the catalog can give.
    """
    owners = owner_urns(list(about), notify.owners)
    contacts = catalog.contacts(owners) if owners and isinstance(catalog, OwnerDirectory) else {}
    return Router(notify, contacts, sinks)


def routes(
    catalog: Catalog,
    notify: NotifySettings,
    incidents: Iterable[Incident],
    reports: Sequence[ModelReport],
    sinks: tuple[str, ...],
) -> dict[str, tuple[Route, ...]]:
    """Incident id → where it is told through ``sinks``, for the walked models' open ones."""
    found = subjects((i for i in incidents if i.is_open), reports)
    routing = router(catalog, notify, found.values(), sinks)
    return {incident_id: routing.routes(subject) for incident_id, subject in found.items()}
