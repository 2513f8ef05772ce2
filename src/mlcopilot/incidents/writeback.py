"""What the catalog should hold for a set of incidents: tags, a model summary, incidents, documents.

This is a pure plan. The catalog adapter compares it with what is there and writes only the
difference, so planning the same incidents twice writes nothing the second time. Nothing here
reads the clock: every timestamp comes from the incident itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from mlcopilot.model import (
    CheckInfo,
    DocumentWrite,
    Incident,
    IncidentWrite,
    PropertyWrite,
    Rendering,
    Severity,
    TagWrite,
    Urn,
    WatchedMember,
    Write,
)
from mlcopilot.protocols import IncidentTargets
from mlcopilot.text.names import short_name

OPEN_RISKS_PROPERTY = "urn:li:structuredProperty:io.mlcopilot.openRisks"
"""Structured property on each scanned model: one value per risk kind that is open, or "none"."""

# incidentInfo.priority stores CRITICAL..LOW as 0..3 (IncidentUtils.mapIncidentPriority).
_PRIORITY = {Severity.CRITICAL: 0, Severity.HIGH: 1, Severity.MEDIUM: 2, Severity.LOW: 3}

INCIDENTS_ON_EVERY_DATAHUB: frozenset[str] = frozenset(
    {"dataset", "chart", "dashboard", "dataFlow", "dataJob", "schemaField"}
)
"""The entity types every DataHub with incidents accepts in ``incidentInfo.entities``: the
``IncidentOn`` allowlist of ``IncidentInfo.pdl`` from 2024 (#9710) up to v1.6."""

ML_INCIDENT_TYPES: tuple[str, ...] = ("mlModel", "mlFeature", "mlFeatureTable")
"""The ML entity types DataHub accepts incidents on and shows them for only recently: models
and features since PR #19112, feature tables since #19367. An older GMS rejects an incident
that names one (``is not a valid destination for field path: /entities/*``)."""


def incident_types_of(catalog: object) -> frozenset[str] | None:
    """The entity types an incident may name in ``catalog``; None when it does not say.

    A catalog without :class:`~mlcopilot.protocols.IncidentTargets` gets today's incidents,
    naming the affected entity and the model whatever their types.
    """
    return catalog.incident_entity_types() if isinstance(catalog, IncidentTargets) else None


def info_for(check: str, infos: Mapping[str, CheckInfo]) -> CheckInfo:
    """The info of ``check``; a check no longer installed gets the one its name implies."""
    return infos.get(check) or CheckInfo.generic(check)


def incident_urn(incident: Incident | WatchedMember) -> Urn:
    """The DataHub incident urn of one incident generation: derived, never random."""
    return f"urn:li:incident:mlcopilot-{incident.key}"


def document_urn(incident: Incident) -> Urn:
    """The DataHub document urn holding one incident generation's full context."""
    return f"urn:li:document:mlcopilot-{incident.key}"


def plan_writeback(
    incidents: Sequence[Incident],
    *,
    models: Iterable[Urn],
    everything: Sequence[Incident],
    infos: Mapping[str, CheckInfo],
    incident_types: Collection[str] | None = None,
    held: Collection[tuple[Urn, str]] = frozenset(),
) -> list[Write]:
    """Plan the catalog state for ``incidents`` (latest generations of the scanned ``models``).

    ``everything`` is every incident in the store: a tag stays on an entity while any model still
    has an open incident of that kind there, not just the models scanned now. ``held`` says the
    same of incidents left out of ``everything``: the ``(entity, check)`` of open ones (what a
    scan reads of other models', rather than their incidents). ``infos`` names each check's tag,
    incident type and wording (see :func:`info_for` for a missing one).

    ``incident_types`` are the entity types the catalog accepts in an incident
    (:func:`incident_types_of`; None: any). Each incident names its affected entity and its
    model where the catalog accepts them, so the model's page shows its health; an entity it
    does not accept is left out and named in the description instead, and an incident left
    naming nothing is not written (its document still is).
    """
    writes: list[Write] = []
    for incident in sorted(incidents, key=lambda i: (i.model, i.id)):
        info = info_for(incident.check, infos)
        named = (incident.entity, incident.model)  # one tuple for both writes
        # One rendering for both writes and all their texts.
        rendering = _Rendered(incident, info, _accepted(named, incident_types))
        if rendering.entities:
            writes.append(_incident_write(incident, info, rendering))
        writes.append(_document_write(incident, named, rendering))
    open_kinds = {(i.entity, i.check) for i in everything if i.is_open} | set(held)
    for entity, check in sorted({(i.entity, i.check) for i in incidents}):
        tag = info_for(check, infos).tag
        writes.append(TagWrite(entity, tag, present=(entity, check) in open_kinds))
    # Grouped once: filtering every incident for each model is quadratic in an estate.
    open_by_model: dict[Urn, list[Incident]] = {}
    for incident in incidents:
        if incident.is_open:
            open_by_model.setdefault(incident.model, []).append(incident)
    for model in sorted(set(models)):
        risks = _open_risks(open_by_model.get(model, []))
        writes.append(PropertyWrite(model, OPEN_RISKS_PROPERTY, risks))
    return writes


def _open_risks(open_here: Sequence[Incident]) -> tuple[str, ...]:
    """The open-risks values of one model, from its open incidents."""
    if not open_here:
        return ("none",)
    counts = Counter(i.check for i in open_here)
    worst = {
        check: max((i.severity for i in open_here if i.check == check), key=lambda s: s.rank)
        for check in counts
    }
    return tuple(f"{check}: {counts[check]} open, worst {worst[check]}" for check in sorted(counts))


def _title(incident: Incident) -> str:
    where = short_name(incident.entity) + (f".{incident.field}" if incident.field else "")
    kind = incident.check.replace("_", " ")
    return f"[mlcopilot] {kind} at {where} (model {short_name(incident.model)})"


def _accepted(named: tuple[Urn, Urn], accepted: Collection[str] | None) -> tuple[Urn, ...]:
    """Those of ``named`` a native incident may name (all of them when ``accepted`` is None)."""
    if accepted is None or all(_type(u) in accepted for u in named):
        return named
    return tuple(u for u in named if _type(u) in accepted)


def _incident_write(incident: Incident, info: CheckInfo, rendering: _Rendered) -> IncidentWrite:
    return IncidentWrite(
        urn=rendering,
        incident_type=info.incident_type,
        custom_type=info.custom_incident_type,
        title=rendering,
        description=rendering,
        priority=_PRIORITY[incident.severity],
        entities=rendering.entities,
        active=incident.is_open,
        created_at=incident.opened_at,
        status_changed_at=incident.resolved_at or incident.opened_at,
    )


@dataclass(frozen=True, slots=True)
class _Rendered(Rendering):
    """The texts of an incident's native incident and document, made when read.

    One slotted object for both writes and all their texts: an urn held as a string was about
    110 bytes a write (an estate's write-back plans 282,022 incidents and as many documents),
    and a title string and a rendering object each for the incident and its document were
    44 MB of the plan (stage probe).
    """

    incident: Incident
    info: CheckInfo
    entities: tuple[Urn, ...]
    """What the native incident names (the description says what it leaves out; none: there
    is no native incident, only the document)."""

    def urn(self) -> str:
        return incident_urn(self.incident)

    def title(self) -> str:
        return _title(self.incident)

    def description(self) -> str:
        """Its message, and its context's urn."""
        incident = self.incident
        # Said only for an entity left out, so the incidents a catalog already holds that
        # name both compare equal to the plan and are not rewritten.
        left_out = [
            f"{label}: {urn}"
            for label, urn in (("Entity", incident.entity), ("Model", incident.model))
            if urn not in self.entities
        ]
        context = "\n".join([*left_out, f"Context: {document_urn(incident)}"])
        return f"{incident.message}\n\n{context}"

    def document_urn(self) -> str:
        return document_urn(self.incident)

    def text(self) -> str:
        return incident_document(self.incident, self.info)


def _type(urn: Urn) -> str:
    """``urn:li:<type>:...`` -> ``<type>``."""
    return urn.split(":", 3)[2] if urn.count(":") >= 3 else ""


def _document_write(
    incident: Incident, named: tuple[Urn, Urn], rendering: _Rendered
) -> DocumentWrite:
    return DocumentWrite(
        urn=rendering,
        title=rendering,
        text=rendering,
        related_assets=named,
        created_at=incident.opened_at,
        modified_at=incident.resolved_at or incident.opened_at,
    )


def incident_document(incident: Incident, info: CheckInfo) -> str:
    """The markdown body of an incident document: what, where, why it matters, what to do."""
    lines = [
        f"# {_title(incident)}",
        "",
        f"**Status:** {incident.state.value} · **Severity:** {incident.severity.value} · "
        f"**Check:** `{incident.check}` · **Incident:** `{incident.id}` "
        f"(generation {incident.generation})",
        "",
        "## What changed",
        "",
        incident.message,
        "",
        "## Where",
        "",
        f"- Entity: `{incident.entity}`",
    ]
    if incident.field:
        lines.append(f"- Field: `{incident.field}`")
    if incident.previous_field:
        lines.append(f"- Previously: `{incident.previous_field}`")
    lines += [
        "",
        "## Why it matters",
        "",
        f"It is upstream of the ML model `{incident.model}` along this lineage path:",
        "",
        *(f"{n}. `{urn}`" for n, urn in enumerate(incident.path, start=1)),
    ]
    if incident.evidence:
        lines += ["", "## Evidence", "", "| | |", "|---|---|"]
        lines += [f"| {key} | {value} |" for key, value in sorted(incident.evidence.items())]
    lines += ["", "## Suggested action", "", info.action, ""]
    lines.append(f"Opened {incident.opened_at.isoformat()}.")
    if incident.resolved_at is not None:
        lines.append(f"Resolved {incident.resolved_at.isoformat()}: {incident.resolution or ''}")
    return "\n".join(lines) + "\n"
