"""The write-back a catalog test sends: mlcopilot's tags, property, native incidents, documents."""

from __future__ import annotations

from collections.abc import Sequence

from mlcopilot.model import DocumentWrite, IncidentWrite, PropertyWrite, TagWrite, Write
from testing.builders import T0


def pii_incident(
    key: str, reached: str, entities: tuple[str, ...], *, active: bool = True
) -> IncidentWrite:
    """mlcopilot's native incident ``key`` (generation 1): PII reaches ``reached``."""
    return IncidentWrite(
        urn=f"urn:li:incident:mlcopilot-{key}-1",
        incident_type="CUSTOM",
        custom_type="PII_EXPOSURE",
        title=f"PII reaches {reached}",
        description="email feeds the model",
        priority=1,
        entities=entities,
        active=active,
        created_at=T0,
        status_changed_at=T0,
    )


def writes_for(models: Sequence[str], entities: Sequence[str]) -> list[Write]:
    """Every kind of write-back: tags on ``entities``, a property, incident and document a model."""
    writes: list[Write] = []
    for i, entity in enumerate(entities):
        writes.append(TagWrite(entity, "urn:li:tag:mlcopilot-pii-exposure", present=True))
        writes.append(TagWrite(entity, "urn:li:tag:PII", present=i % 2 == 0))
    for n, model in enumerate(models):
        writes.append(
            PropertyWrite(model, "urn:li:structuredProperty:io.mlcopilot.openRisks", ("x: 1",))
        )
        incident = pii_incident(f"{n:016x}", model, (model, *entities[:1]))
        writes += [
            incident,
            DocumentWrite(
                urn=incident.urn.replace("incident", "document"),
                title=incident.title,
                text="# PII ✓",
                related_assets=incident.entities,
                created_at=T0,
                modified_at=T0,
            ),
        ]
    return writes
